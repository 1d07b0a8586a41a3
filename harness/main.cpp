#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/cli.h"
#include "harness/output.h"

int main(int argc, char** argv) {
  vg::install_interrupt_handlers();
  int code = vg::cli_main(argc, argv);
  // Whatever was printed (a table, --help) must have reached stdout: output lost
  // to a full disk (> /dev/full) or an I/O error is a failure, not a success.
  errno = 0;
  if ((std::fflush(stdout) != 0 || std::ferror(stdout)) && code == 0) {
    const int err = errno;
    std::fprintf(stderr, "viewgap: error: cannot write standard output: %s\n",
                 err ? std::strerror(err) : "write error");
    code = 1;
  }
  return code;
}
