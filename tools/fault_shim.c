/* Test-only fault injection for viewgap's file output (tests/test_faults.cpp),
 * loaded with LD_PRELOAD; never linked into viewgap. It counts the calls that
 * change files -- open with O_CREAT, mkdir, write/pwrite/writev to a regular
 * file, fsync, fdatasync, ftruncate, rename, unlink -- in the order the process
 * makes them, and:
 *   VIEWGAP_FAULT_LOG=FILE      appends "N call" to FILE for each counted call;
 *   VIEWGAP_FAULT_KILL_AT=N     SIGKILLs the process at counted call N, before it runs;
 *   VIEWGAP_FAULT_ENOSPC_AT=N   from counted call N on, every write, fsync and
 *                               fdatasync fails with ENOSPC (a disk that filled up).
 * C, not C++: it defines libc's own functions, whose C++ declarations differ. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_long g_count;

static long env_long(const char* name) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atol(v) : 0;
}

static void log_call(long n, const char* call) {
  const char* path = getenv("VIEWGAP_FAULT_LOG");
  if (path == NULL || *path == '\0') return;
  char line[96];
  const int len = snprintf(line, sizeof line, "%ld %s\n", n, call);
  /* Raw system calls: the shim's own output is not counted. */
  const long fd = syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  syscall(SYS_write, fd, line, (size_t)len);
  syscall(SYS_close, fd);
}

/* Counts one call and kills the process here if asked; nonzero: fail with ENOSPC. */
static int counted(const char* call, int is_write) {
  const long n = atomic_fetch_add(&g_count, 1) + 1;
  log_call(n, call);
  if (n == env_long("VIEWGAP_FAULT_KILL_AT")) syscall(SYS_kill, getpid(), SIGKILL);
  const long full = env_long("VIEWGAP_FAULT_ENOSPC_AT");
  return is_write && full > 0 && n >= full;
}

static int regular_file(int fd) {
  struct stat st;
  return fd > 2 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void* buf, size_t n) {
  if (regular_file(fd) && counted("write", 1)) return errno = ENOSPC, -1;
  return REAL("write", ssize_t (*)(int, const void*, size_t))(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  if (regular_file(fd) && counted("pwrite", 1)) return errno = ENOSPC, -1;
  return REAL("pwrite", ssize_t (*)(int, const void*, size_t, off_t))(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  if (regular_file(fd) && counted("pwrite", 1)) return errno = ENOSPC, -1;
  return REAL("pwrite64", ssize_t (*)(int, const void*, size_t, off64_t))(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  if (regular_file(fd) && counted("writev", 1)) return errno = ENOSPC, -1;
  return REAL("writev", ssize_t (*)(int, const struct iovec*, int))(fd, iov, cnt);
}

int fsync(int fd) {
  if (counted("fsync", 1)) return errno = ENOSPC, -1;
  return REAL("fsync", int (*)(int))(fd);
}

int fdatasync(int fd) {
  if (counted("fdatasync", 1)) return errno = ENOSPC, -1;
  return REAL("fdatasync", int (*)(int))(fd);
}

int ftruncate(int fd, off_t len) {
  counted("ftruncate", 0);
  return REAL("ftruncate", int (*)(int, off_t))(fd, len);
}

int ftruncate64(int fd, off64_t len) {
  counted("ftruncate", 0);
  return REAL("ftruncate64", int (*)(int, off64_t))(fd, len);
}

int rename(const char* a, const char* b) {
  counted("rename", 0);
  return REAL("rename", int (*)(const char*, const char*))(a, b);
}

int renameat(int da, const char* a, int db, const char* b) {
  counted("rename", 0);
  return REAL("renameat", int (*)(int, const char*, int, const char*))(da, a, db, b);
}

int unlink(const char* p) {
  counted("unlink", 0);
  return REAL("unlink", int (*)(const char*))(p);
}

int unlinkat(int d, const char* p, int flags) {
  counted("unlink", 0);
  return REAL("unlinkat", int (*)(int, const char*, int))(d, p, flags);
}

int mkdir(const char* p, mode_t m) {
  counted("mkdir", 0);
  return REAL("mkdir", int (*)(const char*, mode_t))(p, m);
}

static mode_t open_mode(int flags, va_list ap) {
  if (!(flags & O_CREAT) && (flags & O_TMPFILE) != O_TMPFILE) return 0;
  counted("open", 0);
  return (mode_t)va_arg(ap, int);
}

int open(const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return REAL("open", int (*)(const char*, int, ...))(p, flags, mode);
}

int open64(const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return REAL("open64", int (*)(const char*, int, ...))(p, flags, mode);
}

int openat(int d, const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return REAL("openat", int (*)(int, const char*, int, ...))(d, p, flags, mode);
}

int openat64(int d, const char* p, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = open_mode(flags, ap);
  va_end(ap);
  return REAL("openat64", int (*)(int, const char*, int, ...))(d, p, flags, mode);
}
