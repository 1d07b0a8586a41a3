// The viewgap command line (CLI11): subcommands, flag validation before any work.
#pragma once

namespace vg {
// Exit codes: 0 success, 2 bad input (one line naming the flag and value),
// 3 a run stopped on NaN/Inf, 1 any other failure.
int cli_main(int argc, char** argv);
}  // namespace vg
