#include "harness/cache_line.h"

#include <cstdlib>

namespace vg {

void* cache_line_alloc(std::size_t n) noexcept {
  constexpr std::size_t kLine = 64, kFrom = 256;
  if (n < kFrom) return std::malloc(n == 0 ? 1 : n);
  return std::aligned_alloc(kLine, (n + kLine - 1) / kLine * kLine);  // a multiple of the alignment (C11)
}

}  // namespace vg
