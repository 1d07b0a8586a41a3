#include "harness/output.h"

#include "core/file_kind.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

namespace vg {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

WriteError cannot_write(const std::string& path, const std::string& why) {
  return WriteError("cannot write '" + path + "': " + why);
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Why `path` (resolved to `target`) may not be written, or "" if it may. What
// `path` names is asked of the kernel too, which also follows /proc's magic
// links (/dev/stdout -> /proc/self/fd/1 -> a pipe, a terminal, a file).
std::string target_problem(const std::string& path, const std::string& target) {
  struct stat named, ours;
  const bool named_exists = ::stat(path.c_str(), &named) == 0;
  const bool ours_exists = ::stat(target.c_str(), &ours) == 0;
  if (named_exists) {
    const bool consistent = ours_exists && same_file(named, ours);
    const std::string kind = non_regular_kind(named.st_mode);
    if (!kind.empty())
      return (target == path ? "is " + kind : consistent ? "leads to '" + target + "', " + kind : "leads to " + kind) +
             ", not a regular file (viewgap writes only regular files)";
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
      struct stat stream;
      if (::fstat(fd, &stream) == 0 && same_file(stream, named))
        return std::string("is the file this process's standard ") + (fd == STDOUT_FILENO ? "output" : "error") +
               " goes to";
    }
    if (!consistent) return "leads to a file viewgap cannot replace by its name (through a /proc link)";
    if (::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0) return errno_text(errno);
  } else if (errno != ENOENT) {
    return errno_text(errno);
  } else if (ours_exists) {
    return "leads to a file viewgap cannot replace by its name";
  }
  const std::string dir = dir_of(target);
  struct stat ds;
  if (::stat(dir.c_str(), &ds) != 0) return "directory '" + dir + "': " + errno_text(errno);
  if (!S_ISDIR(ds.st_mode)) return "'" + dir + "' is not a directory";
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    return "directory '" + dir + "': " + errno_text(errno);
  return "";
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

// ---- interrupts ----
std::atomic<int> g_writers{0};
std::atomic<int> g_pending{0};
std::atomic<bool> g_exiting{false};
std::atomic<const std::atomic<int>*> g_done{nullptr};
std::atomic<int> g_total{0};
std::atomic<bool> g_tty{false};  // stderr is a terminal: a progress line may be open

// Fixed buffers, write(2) and _exit only: it also ends the process from a
// WriteGuard's or DeferInterrupts' destructor, on whatever thread that is.
[[noreturn]] void interrupt_exit(int sig) {
  if (g_exiting.exchange(true))
    for (;;) ::pause();  // another thread is already on its way out
  char line[160];
  size_t n = 0;
  auto put = [&](const char* s) {
    while (*s && n < sizeof line - 1) line[n++] = *s++;
  };
  auto put_int = [&](long v) {
    char d[24];
    int k = 0;
    if (v < 0) v = 0;
    do d[k++] = char('0' + v % 10), v /= 10; while (v > 0 && k < 23);
    while (k > 0 && n < sizeof line - 1) line[n++] = d[--k];
  };
  const std::atomic<int>* done = g_done.load();
  if (done != nullptr) {
    if (g_tty.load()) put("\n");  // below the progress line
    put("viewgap sweep: interrupted after ");
    put_int(done->load());
    put("/");
    put_int(g_total.load());
    put(" cells; rerun with --resume to continue\n");
  } else {
    put("viewgap: interrupted\n");
  }
  ssize_t ignored = ::write(STDERR_FILENO, line, n);
  (void)ignored;
  ::_exit(128 + sig);
}

std::atomic<int> g_deferred{0};    // DeferInterrupts alive
std::atomic<bool> g_forced{false};  // a second signal: no more deferring
std::atomic<bool> g_silent{false};  // end_silently_on_interrupt()

void on_signal(int sig) {
  // Under DeferInterrupts the first signal is left to the work to act on.
  if (g_pending.exchange(sig) == 0 && g_deferred.load() > 0) return;
  g_forced.store(true);
  if (g_writers.load() == 0) interrupt_exit(sig);
}

// The one thread that takes SIGINT, SIGTERM and SIGHUP (every other thread
// blocks them): it waits for them rather than being interrupted by them.
void watch_signals(sigset_t set) {
  for (;;) {
    int sig = 0;
    if (::sigwait(&set, &sig) != 0) continue;
    if (g_silent.load()) {
      // The signal's own default action, as if nothing had caught it.
      ::signal(sig, SIG_DFL);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      ::raise(sig);
      ::_exit(128 + sig);  // not reached: the default action of all three ends the process
    }
    on_signal(sig);
  }
}

}  // namespace

std::string resolve_output_path(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::string link(4096, '\0');
    const ssize_t n = ::readlink(p.c_str(), link.data(), link.size());
    if (n < 0) return p;
    link.resize(size_t(n));
    p = (!link.empty() && link[0] == '/') ? link : dir_of(p) + "/" + link;
  }
  throw cannot_write(path, "too many levels of symbolic links");
}

void check_writable(const std::string& path) {
  if (path.empty()) throw std::runtime_error("empty path");
  const std::string why = target_problem(path, resolve_output_path(path));
  if (!why.empty()) throw std::runtime_error(why);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, std::span(reinterpret_cast<const uint8_t*>(content.data()), content.size()));
}

void write_file_atomic(const std::string& path, std::span<const uint8_t> content) {
  if (path.empty()) throw std::runtime_error("cannot write '': empty path");
  const std::string target = resolve_output_path(path);
  // The same judgement as check_writable, again at the moment of writing.
  if (const std::string why = target_problem(path, target); !why.empty()) throw cannot_write(path, why);
  struct stat st;
  const bool exists = ::stat(target.c_str(), &st) == 0;
  WriteGuard guard;
  const std::string tmp = target + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0 && errno == EEXIST) {
    // Left by a dead process that had our PID (this one writes each file once at a time).
    ::unlink(tmp.c_str());
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  }
  if (fd < 0) throw cannot_write(path, errno_text(errno));
  auto fail = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return cannot_write(path, errno_text(err));
  };
  if (exists && ::fchmod(fd, st.st_mode & 07777) != 0) throw fail(errno);
  if (!write_all(fd, reinterpret_cast<const char*>(content.data()), content.size())) throw fail(errno);
  if (::fsync(fd) != 0) throw fail(errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw cannot_write(path, errno_text(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw cannot_write(path, errno_text(err));
  }
  // The rename itself reaches the disk with the directory.
  const int dfd = ::open(dir_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const bool ok = ::fsync(dfd) == 0 || errno == EINVAL;
    const int err = errno;
    ::close(dfd);
    if (!ok) throw cannot_write(path, errno_text(err));
  }
}

AppendFile::AppendFile(const std::string& path) : path_(path) {
  const std::string target = resolve_output_path(path);
  fd_ = ::open(target.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw cannot_write(path, errno_text(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw cannot_write(path, "not a regular file");
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
}

bool AppendFile::still_at_path() const {
  struct stat st;
  return ::stat(resolve_output_path(path_).c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(const std::string& text) {
  WriteGuard guard;
  const off_t start = ::lseek(fd_, 0, SEEK_END);
  if (start < 0) throw cannot_write(path_, errno_text(errno));
  if (!write_all(fd_, text.data(), text.size())) {
    const int err = errno;
    // Best effort: no torn record stays behind (readers drop one anyway).
    if (::ftruncate(fd_, start) != 0) {
    }
    throw cannot_write(path_, errno_text(err));
  }
}

void make_output_dir(const std::string& path) {
  if (path.empty()) throw std::runtime_error("empty path");
  const std::string target = resolve_output_path(path);
  std::error_code ec;
  std::filesystem::create_directories(target, ec);
  if (ec) throw std::runtime_error("cannot create directory: " + ec.message());
  struct stat st;
  if (::stat(target.c_str(), &st) != 0) throw std::runtime_error(errno_text(errno));
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error("not a directory");
  if (::faccessat(AT_FDCWD, target.c_str(), W_OK | X_OK, AT_EACCESS) != 0)
    throw std::runtime_error("cannot write in it: " + errno_text(errno));
}

bool is_temp_name(const std::string& name, long* pid) {
  const auto pos = name.rfind(".tmp.");
  if (pos == std::string::npos || pos == 0 || pos + 5 >= name.size()) return false;
  long v = 0;
  for (size_t k = pos + 5; k < name.size(); ++k) {
    if (name[k] < '0' || name[k] > '9' || v > 1000000000L) return false;
    v = v * 10 + (name[k] - '0');
  }
  if (pid) *pid = v;
  return true;
}

int remove_stale_temps(const std::string& dir, bool all) {
  int removed = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> doomed;
  while (const dirent* e = ::readdir(d)) {
    long pid = 0;
    const std::string name = e->d_name;
    if (!is_temp_name(name, &pid)) continue;
    if (all || pid == 0 || (::kill(pid_t(pid), 0) != 0 && errno == ESRCH)) doomed.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : doomed) {
    const std::string p = dir + "/" + name;
    struct stat st;
    // Only our kind of file: a regular file (never follow or remove anything else).
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(p.c_str()) == 0) ++removed;
  }
  return removed;
}

namespace {

// Whether `fd` is still the file at `path`: a lock holder removes the file
// when its work is over (DirLock::remove), so a lock taken on the file opened
// just before that guards nothing.
bool still_at(int fd, const std::string& path) {
  struct stat held, named;
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

// Opens `path` (a regular file, created if absent) and takes its exclusive
// flock; throws as DirLock says.
int open_locked(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) throw cannot_write(path, errno_text(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw cannot_write(path, "not a regular file");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    // The holder writes its PID right after taking the lock: give it a moment.
    for (int tries = 0; err == EWOULDBLOCK && tries < 100; ++tries) {
      char buf[64] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      if (n > 0 && buf[n - 1] == '\n') {
        holder.assign(buf, size_t(n - 1));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::close(fd);
    if (err != EWOULDBLOCK) throw std::runtime_error("cannot lock '" + path + "': " + errno_text(err));
    throw std::runtime_error("is in use by another viewgap process (" +
                             (holder.empty() ? std::string("pid unknown") : holder) + ")");
  }
  return fd;
}

}  // namespace

DirLock::DirLock(const std::string& dir, const std::string& name) : path_(dir + "/" + name) {
  const std::string& path = path_;
  // Its holder may remove the file as we open it: then lock the new one.
  for (fd_ = open_locked(path); !still_at(fd_, path); fd_ = open_locked(path)) ::close(fd_);
  const std::string text = "pid " + std::to_string(::getpid()) + "\n";
  WriteGuard guard;
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != ssize_t(text.size())) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw cannot_write(path, errno_text(err));
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

void DirLock::remove() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // still locked: no one else holds this file
  ::close(fd_);
  fd_ = -1;
}

void remove_output(const std::string& path) {
  const std::string target = resolve_output_path(path);
  WriteGuard guard;
  if (::unlink(target.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot remove '" + target + "': " + errno_text(errno));
}

void install_interrupt_handlers() {
  // No signal handler: a handler's frame goes onto the stack of whichever
  // thread the signal interrupts, below its stack pointer, and oneDNN's JIT
  // GEMM kernels (those of Debian 12's oneDNN 2.7 among them) point the stack
  // pointer into a heap buffer while they run, so a signal there corrupts the
  // heap (oneDNN issue #4845). Blocked here, before any thread starts, the
  // signals are blocked in every thread the process starts after (threads
  // inherit the mask), and one thread of ours waits for them.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  if (const int err = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0)
    throw std::runtime_error("cannot block SIGINT, SIGTERM and SIGHUP: " + errno_text(err));
  std::thread(watch_signals, set).detach();
}

void end_silently_on_interrupt() { g_silent.store(true); }

void set_interrupt_progress(const std::atomic<int>* done, int total) {
  g_tty.store(::isatty(STDERR_FILENO) == 1);
  g_total.store(total);
  g_done.store(done);
}

WriteGuard::WriteGuard() { g_writers.fetch_add(1); }

WriteGuard::~WriteGuard() {
  if (g_writers.fetch_sub(1) == 1) {
    const int sig = g_pending.load();
    if (sig != 0 && (g_deferred.load() == 0 || g_forced.load())) interrupt_exit(sig);
  }
}

DeferInterrupts::DeferInterrupts() { g_deferred.fetch_add(1); }

DeferInterrupts::~DeferInterrupts() {
  if (g_deferred.fetch_sub(1) == 1 && g_writers.load() == 0) {
    const int sig = g_pending.load();
    if (sig != 0) interrupt_exit(sig);
  }
}

bool interrupt_pending() { return g_deferred.load() > 0 && g_pending.load() != 0; }

}  // namespace vg
