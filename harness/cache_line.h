// Buffers on cache lines: what operator new does in every viewgap executable
// (harness/cache_line_new.cpp; the tests' counting operator new calls it too).
#pragma once
#include <cstddef>

namespace vg {

// n bytes from malloc, starting on a 64-byte cache line when n >= 256 (its
// size then rounded up to whole lines); nullptr when out of memory. free()
// releases it. The kernels load 16-float poses (64 bytes) as whole registers:
// at glibc's 16-byte alignment every AVX-512 load of a pose spans two lines, and
// every other AVX2 one (docs/performance.md#buffers-on-cache-lines). No
// arithmetic depends on it, so no result does.
void* cache_line_alloc(std::size_t n) noexcept;

}  // namespace vg
