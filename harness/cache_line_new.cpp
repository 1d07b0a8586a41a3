// operator new and delete for an executable: buffers on cache lines
// (harness/cache_line.h). One object linked into each executable
// (CMakeLists.txt: viewgap_cache_line_new), never into a library another
// program would load.
#include <cstdlib>
#include <new>

#include "harness/cache_line.h"

void* operator new(std::size_t n) {
  if (void* p = vg::cache_line_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return vg::cache_line_alloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return vg::cache_line_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
