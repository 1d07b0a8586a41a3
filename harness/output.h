// Safe output: every file viewgap writes goes through here.
//
// What it promises (docs/cli.md, "Crashes, full disks, concurrent runs, output paths"):
// - a file is replaced whole or not at all (temporary file in the same
//   directory, fsync, rename(2)); a failed write or flush throws naming the file;
// - only regular files are written: an output path that exists and is not a
//   regular file (a device such as /dev/null, a FIFO, a directory, a socket) is
//   refused; a symlink is followed to the file it names, which is replaced while
//   the link stays a link;
// - SIGINT, SIGTERM and SIGHUP wait for a write in progress to finish, so an
//   interrupt never leaves a torn file or a temporary one behind.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace vg {

// A write that failed (a full disk, an I/O error): the message names the file.
struct WriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The path a write of `path` lands on: symlinks followed (a chain; relative links
// against their own directory) to the name they point at, which need not exist.
// Throws std::runtime_error for a symlink loop.
std::string resolve_output_path(const std::string& path);

// Throws std::runtime_error (with the reason) unless `path` can be written as a
// regular file: not empty; what it names (through symlinks), if it exists, is a
// writable regular file; its directory exists and is writable. Creates nothing.
void check_writable(const std::string& path);

// Writes `content` to `path` (through symlinks) via a temporary file in the same
// directory, fsync and rename(2), so readers never see a half-written file; an
// existing file keeps its permissions. Throws std::runtime_error naming `path`.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, std::span<const uint8_t> content);

// Removes the file `path` leads to (through symlinks), if there is one, as one
// step an interrupt waits for. Throws std::runtime_error naming it on failure.
void remove_output(const std::string& path);

// Appends whole records to an existing regular file with write(2), unbuffered. A
// failed append (a full disk) is cut back to where it began, if the file system
// allows, and throws std::runtime_error naming the file.
class AppendFile {
 public:
  explicit AppendFile(const std::string& path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(const std::string& text);
  // Whether `path` still leads to the file this appends to. Another program
  // that writes the path anew (git checkout or stash, an editor) leaves this
  // appending to a file no one can read any more.
  bool still_at_path() const;

 private:
  std::string path_;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Creates directory `path` (and parents, through symlinks) if absent; throws
// std::runtime_error (with the reason) if it is empty, cannot be created, is not
// a directory, or is not writable. Creates no file in it.
void make_output_dir(const std::string& path);

// True for the names of write_file_atomic's temporary files ("NAME.tmp.PID").
bool is_temp_name(const std::string& filename, long* pid = nullptr);

// Removes the temporary files in `dir` of writers that are gone: all of them if
// `all` (the caller holds the directory's DirLock, so no live writer owns one),
// else those whose process no longer exists. Returns how many were removed.
int remove_stale_temps(const std::string& dir, bool all);

// An exclusive flock(2) on the regular file DIR/NAME (created if absent), held
// while the object lives; the file records the holder's PID. Throws
// std::runtime_error "is in use by another viewgap process (pid N)" if another
// process holds it.
class DirLock {
 public:
  DirLock(const std::string& dir, const std::string& name);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  // The work is over: removes the file, then lets go of the lock. A process
  // that opened the file before it went takes a lock on a file no longer in
  // the directory, sees so, and starts again on a new one; so two processes
  // never both hold the directory. A file that cannot be removed stays: it
  // only records the last holder.
  void remove();

 private:
  std::string path_;
  int fd_ = -1;
};

// Signals. install_interrupt_handlers(): SIGINT, SIGTERM and SIGHUP end the
// process with exit code 128 + signal and one line on stderr, but only once no
// WriteGuard is alive (a write in progress finishes first). Cells or epochs in
// flight are discarded: nothing of them has been written.
// Call it first thing in main, before any thread starts: it blocks the three
// in this thread, so in every thread started after, and starts the one thread
// that takes them (no handler interrupts the work: output.cpp says why).
void install_interrupt_handlers();
// From now on SIGINT, SIGTERM and SIGHUP end the process as they would
// without install_interrupt_handlers() (killed by the signal, not a word):
// an MPI worker rank's, which leaves the telling to rank 0.
void end_silently_on_interrupt();
// While `done` is set (a sweep runs), the line printed on an interrupt is
// "viewgap sweep: interrupted after k/N cells; rerun with --resume to continue"
// (k read from `done`, which must outlive the setting; nullptr clears it); else
// "viewgap: interrupted".
void set_interrupt_progress(const std::atomic<int>* done, int total);

// While alive (nests; any thread), the first SIGINT, SIGTERM or SIGHUP is only
// recorded: the work polls interrupt_pending() and ends in order (a training
// between two steps, after a checkpoint), and when the last DeferInterrupts
// goes the process ends as above (exit 128 + signal, "viewgap: interrupted").
// A second signal ends it at once, as without one.
class DeferInterrupts {
 public:
  DeferInterrupts();
  ~DeferInterrupts();
  DeferInterrupts(const DeferInterrupts&) = delete;
  DeferInterrupts& operator=(const DeferInterrupts&) = delete;
};
// A signal recorded under DeferInterrupts (false outside one).
bool interrupt_pending();

// Defers interrupts while alive (nests; any thread).
class WriteGuard {
 public:
  WriteGuard();
  ~WriteGuard();
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;
};

}  // namespace vg
