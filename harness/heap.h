// The process's heap, set up once at the start of main.
//
// viewgap's large buffers (images, weights, Adam state, activations, oneDNN's
// scratchpads) all come from malloc. Two things make them cheap to fault in:
// - buffers up to 32 MB come from the heap and stay there when freed, so the next
//   model, cell or evaluation reuses pages already mapped;
// - the heap is reserved ahead (256 MB of address space, no memory until touched)
//   and advised for transparent huge pages (madvise MADV_HUGEPAGE), one arena for
//   every thread, so a run touches its ~20 MB in 2 MB pages instead of ~5,000
//   pages of 4 KB, each a page fault. Where a fault is dear (a PVM guest: ~10 us
//   per 4 KB page) the faults took 13-28 % of a run (docs/performance.md#the-heap-in-huge-pages).
// Nothing here changes a result: only where the bytes live.
#pragma once
#include <cstddef>

namespace vg {

struct HeapSetup {
  bool huge_pages = false;  // the reserved heap was advised for huge pages
  std::size_t huge_page_bytes = 0;  // the kernel's PMD page size, 0 if it has no THP
  std::size_t advised_bytes = 0;  // how much of the heap was advised
};

// Call once, first thing in main, before any thread starts. Every step is advice:
// where the kernel has no transparent huge pages, THP is set to "never", malloc
// is not glibc's (a sanitizer's), or the heap cannot grow contiguously, the heap
// stays as glibc makes it and the result says so.
HeapSetup configure_heap();

}  // namespace vg
