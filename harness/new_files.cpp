// New files written as one (harness/new_files.h).
#include "harness/new_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "harness/output.h"
#include "harness/memory_budget.h"

namespace vg {

namespace {

// The directories make_output_dir(path) would create, deepest first.
std::vector<std::string> missing_dirs(const std::string& path) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::path p = resolve_output_path(path); !p.empty() && !std::filesystem::exists(p, ec);
       p = p.parent_path()) {
    out.push_back(p.string());
    if (p == p.parent_path()) break;
  }
  return out;
}

// Creates and removes the temporary file write_file_atomic would make for `path`.
void probe_create(const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) throw std::runtime_error("cannot create a file in it ('" + tmp + "': " + std::strerror(errno) + ")");
  ::close(fd);
  ::unlink(tmp.c_str());
}

}  // namespace

void write_new_files(const std::string& dir, const std::vector<std::string>& paths, double bytes,
                     const std::function<void(const PutFile& put)>& write) {
  std::vector<std::string> made_dirs, written;
  auto undo = [&] {
    for (const std::string& p : written) ::unlink(p.c_str());
    for (const std::string& d : made_dirs) ::rmdir(d.c_str());  // deepest first; only if empty
  };
  try {
    made_dirs = missing_dirs(dir);
    make_output_dir(dir);
    remove_stale_temps(resolve_output_path(dir), false);
    for (const std::string& path : paths) {
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0)
        throw std::runtime_error("holds " + path + " already (nothing is replaced: remove it, or choose another directory)");
      check_writable(path);
      probe_create(path);
    }
    struct statvfs vfs;
    if (::statvfs(resolve_output_path(dir).c_str(), &vfs) == 0 && double(vfs.f_bavail) * double(vfs.f_frsize) < bytes)
      throw std::runtime_error("has " + gigabytes(double(vfs.f_bavail) * double(vfs.f_frsize)) + " free; the files take " +
                               gigabytes(bytes));
  } catch (const std::runtime_error& e) {
    undo();
    throw NewFilesRefused(e.what());
  }
  try {
    write([&](const std::string& path, std::span<const uint8_t> content) {
      write_file_atomic(path, content);
      written.push_back(path);
    });
  } catch (...) {
    undo();
    throw;
  }
}

}  // namespace vg
