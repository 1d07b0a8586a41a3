// What the kernel benchmarks share: reproducible random inputs.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace vg::bench {

// n standard normals from the counter-based RNG's test stream (seed, tag).
inline std::vector<float> randn(size_t n, uint64_t tag, uint64_t seed = 1) {
  Stream s(seed, Purpose::Test, tag);
  std::vector<float> v(n);
  for (auto& x : v) x = float(s.normal());
  return v;
}

}  // namespace vg::bench
