// What a path is, for the messages that refuse anything but a regular file:
// every reader refuses a FIFO, a directory or a device before reading it
// (reading a FIFO waits for a writer), and every writer before replacing it.
#pragma once
#include <sys/stat.h>

#include <string>

namespace vg {

// "a directory", "a FIFO", ... for what is not a regular file; "" for one.
inline std::string non_regular_kind(mode_t m) {
  if (S_ISREG(m)) return "";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

}  // namespace vg
