#include "harness/heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace vg {
namespace {

constexpr std::size_t kMmapThreshold = std::size_t{32} << 20;
constexpr std::size_t kReserve = std::size_t{256} << 20;
constexpr std::size_t kProbe = std::size_t{1} << 20;
constexpr std::size_t kGlibcDefaultTopPad = std::size_t{128} << 10;  // glibc manual: glibc.malloc.top_pad

// The kernel's transparent huge page size, or 0 where it has none or THP is "never".
std::size_t thp_size() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(enabled, modes) || modes.find("[never]") != std::string::npos) return 0;
  std::ifstream size("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  std::size_t bytes = 0;
  if (!(size >> bytes) || bytes == 0 || (bytes & (bytes - 1)) != 0) return 0;
  return bytes;
}

std::uintptr_t align_down(std::uintptr_t x, std::size_t a) { return x & ~(std::uintptr_t(a) - 1); }
std::uintptr_t align_up(std::uintptr_t x, std::size_t a) { return align_down(x + a - 1, a); }

}  // namespace

HeapSetup configure_heap() {
  HeapSetup setup;
  // Large buffers from the heap, kept when freed (glibc's default maps each one
  // afresh and unmaps it on free, so every page is faulted in again: ~20,000
  // page faults a default run); up to 64 MB free at the heap's top stays there.
  mallopt(M_MMAP_THRESHOLD, int(kMmapThreshold));
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  const std::size_t huge = thp_size();
  setup.huge_page_bytes = huge;
  if (huge == 0 || huge > kReserve / 8) return setup;

  // One arena: glibc gives each new thread an arena of its own (mmap'd, not this
  // heap) otherwise. Our code allocates nothing in a warm step, and oneDNN's small
  // per-execute allocations come from glibc's per-thread cache, so its lock is
  // rarely contended (futex calls counted in a two-job sweep: docs/performance.md#the-heap-in-huge-pages).
  mallopt(M_ARENA_MAX, 1);
  // The trim threshold above the reserve, so freeing never gives it back.
  mallopt(M_TRIM_THRESHOLD, int(2 * kReserve));
  // Grow the heap by the reserve at once: a block the top of the heap cannot hold
  // makes malloc extend it by the block plus M_TOP_PAD, in one brk.
  mallopt(M_TOP_PAD, int(kReserve));
  void* probe = std::malloc(kProbe);
  mallopt(M_TOP_PAD, int(kGlibcDefaultTopPad));
  if (probe == nullptr) return setup;
  const auto p = reinterpret_cast<std::uintptr_t>(probe);
  const auto top = reinterpret_cast<std::uintptr_t>(sbrk(0));
  // Only if the probe came from a contiguous brk heap just grown by the reserve:
  // not under a sanitizer's malloc, nor where brk failed and glibc fell back to mmap.
  const bool grown = top > p && top - p >= kReserve && top - p <= kReserve + kProbe + 2 * huge;
  // malloc has written the header of the heap's free top just past the probe, so
  // that page is mapped, in small pages, and a huge page cannot go there: advise
  // from the next huge page boundary after it.
  const std::uintptr_t lo = align_up(p + kProbe + 16, huge), hi = align_down(top, huge);
  if (!grown || hi < lo + kReserve / 2 || madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE) != 0) {
    std::free(probe);
    return setup;
  }
  setup.huge_pages = true;
  setup.advised_bytes = hi - lo;
  // The probe then grows in place to end where the advice starts, so that the
  // heap's free top, where malloc takes new buffers from, begins there. It is kept
  // for the process's life: up to 3 MB of address space, a few pages of memory.
  // (glibc's chunk header is 8 bytes, its chunks 16-byte multiples.)
  static void* plug = nullptr;
  plug = std::realloc(probe, lo - p - 8);
  if (plug == nullptr) std::free(probe);
  return setup;
}

}  // namespace vg
