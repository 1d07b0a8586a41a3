// A file descriptor that closes itself, for the readers and writers that work
// on descriptors (pread at an offset, fstat before reading): no path leaks one.
#pragma once
#include <unistd.h>

namespace vg {

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    const int f = fd;
    fd = -1;
    return f;
  }
};

}  // namespace vg
