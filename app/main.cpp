#include <cerrno>
#include <cstdio>
#include <cstring>

#include "app/cli.h"
#include "harness/heap.h"
#include "harness/output.h"

int main(int argc, char** argv) {
  // Large buffers kept in the heap, the heap in transparent huge pages (heap.h).
  vg::configure_heap();
  // stdout holds up to 64 KB (a table, --help) until the flush below, which then
  // sees the failing write itself and its errno (a write that failed mid-print
  // leaves only ferror set, with errno long overwritten: "write error").
  static char stdout_buffer[1 << 16];  // glibc ignores the size without a buffer of ours
  std::setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
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
