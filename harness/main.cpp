#include "harness/cli.h"

int main(int argc, char** argv) { return vg::cli_main(argc, argv); }
