// The process heap (harness/heap.h): after configure_heap, the buffers viewgap
// allocates, on any thread, live in memory advised for transparent huge pages.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <memory>
#include <vector>

#include "harness/heap.h"

namespace {

// The kernel's THP modes with the chosen one in brackets ("" without THP).
std::string thp_modes() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  return modes;
}

bool thp_available() { return !thp_modes().empty() && thp_modes().find("[never]") == std::string::npos; }

// The VmFlags of the mapping holding `p`, from /proc/self/smaps ("" if none).
std::string vm_flags_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool advised(const void* p) { return vm_flags_of(p).find(" hg") != std::string::npos; }

// In a child process (configure_heap changes the process for good): exits 0 if
// fresh buffers on this thread and on a new one lie in advised memory.
[[noreturn]] void configure_and_check() {
  const vg::HeapSetup setup = vg::configure_heap();
  if (!setup.huge_pages) {
    std::fprintf(stderr, "configure_heap advised nothing (THP page %zu bytes)\n", setup.huge_page_bytes);
    std::_Exit(3);
  }
  if (setup.advised_bytes < (std::size_t{200} << 20)) {
    std::fprintf(stderr, "only %zu bytes advised\n", setup.advised_bytes);
    std::_Exit(4);
  }
  // A split's images (4 MB) and a weight matrix's gradient (2.2 MB), both under
  // the 32 MB mmap threshold, so from the heap.
  void* images = std::malloc(std::size_t{4} << 20);
  std::memset(images, 1, std::size_t{4} << 20);
  void* other = nullptr;
  std::thread([&] {
    other = std::malloc(std::size_t{2200} << 10);
    std::memset(other, 2, std::size_t{2200} << 10);
  }).join();
  if (!advised(images)) {
    std::fprintf(stderr, "main thread's buffer not advised: %s\n", vm_flags_of(images).c_str());
    std::_Exit(5);
  }
  if (!advised(other)) {
    std::fprintf(stderr, "other thread's buffer not advised: %s\n", vm_flags_of(other).c_str());
    std::_Exit(6);
  }
  std::free(images);
  std::free(other);
  std::_Exit(0);
}

}  // namespace

TEST(Heap, BuffersOnEveryThreadLiveInMemoryAdvisedForHugePages) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's malloc: configure_heap leaves it alone";
#endif
  if (!thp_available()) GTEST_SKIP() << "this kernel has no transparent huge pages (or they are set to never)";
  // "fast": fork without exec, which qemu-user (our aarch64 runs) can follow;
  // ctest runs each test in a process of its own, so no other thread is forked.
  GTEST_FLAG_SET(death_test_style, "fast");
#if defined(__x86_64__)
  EXPECT_EXIT(configure_and_check(), testing::ExitedWithCode(0), "");
#else
  // Our aarch64 runs are qemu-user's, whose brk and madvise are emulations of its
  // own: there the heap may not be advised (exit 3), but what is must be right.
  EXPECT_EXIT(configure_and_check(), [](int status) { return WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3); }, "");
#endif
}

TEST(Heap, WithoutTheAdviceBuffersLiveInPlainMemory) {
  // The check above can fail: a buffer of a process that did not call
  // configure_heap is not advised (THP "madvise" or "never"; under "always"
  // nothing needs advice, and this has nothing to show).
  const std::string modes = thp_modes();
  if (modes.empty() || modes.find("[always]") != std::string::npos) GTEST_SKIP() << "THP mode: " << modes;
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(
      {
        void* p = std::malloc(std::size_t{4} << 20);
        std::memset(p, 1, std::size_t{4} << 20);
        std::_Exit(advised(p) ? 1 : 0);
      },
      testing::ExitedWithCode(0), "");
}

namespace {

// Buffers of 256 bytes or more start on a cache line (harness/cache_line.h:
// viewgap's operator new, and the tests' counting one), from the heap and from
// mmap alike, whatever odd sizes came between.
TEST(Heap, BuffersStartOnACacheLine) {
  std::vector<std::vector<float>> held;
  for (size_t n : {64u, 65u, 100u, 1000u, 4097u, 70000u, 1u << 20, 9u << 20}) {
    held.emplace_back(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(held.back().data()) % 64, 0u) << n << " floats";
    held.emplace_back(3);  // a small one between, off the line
  }
  auto odd = std::make_unique<char[]>(300);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(odd.get()) % 64, 0u);
}

}  // namespace
