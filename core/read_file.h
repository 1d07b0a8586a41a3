// A whole regular file read into memory, for the readers that parse bytes (the
// IDX reader, checkpoints): a FIFO, a directory or a device is refused before
// reading, since reading a FIFO waits for a writer.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/fd.h"
#include "core/file_kind.h"

namespace vg {

// "PATH: what is wrong", one line; each reader rethrows it as its own error.
struct FileReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::vector<uint8_t> read_regular_file(const std::string& path) {
  auto fail = [&](const std::string& what) { throw FileReadError(path + ": " + what); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("is " + non_regular_kind(st.st_mode) + ", not a regular file");
  // O_NONBLOCK: should the path become a FIFO between the stat and the open,
  // the open does not wait for a writer, and fstat refuses it.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)};
  if (f.fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  if (::fstat(f.fd, &st) != 0) fail(std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail("is " + non_regular_kind(st.st_mode) + ", not a regular file");
  std::vector<uint8_t> bytes(size_t(st.st_size));
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t r = ::pread(f.fd, bytes.data() + at, bytes.size() - at, off_t(at));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(std::string("read failed: ") + std::strerror(errno));
    if (r == 0)
      fail("file shrank while reading (" + std::to_string(at) + " of " + std::to_string(bytes.size()) + " bytes)");
    at += size_t(r);
  }
  return bytes;
}

}  // namespace vg
