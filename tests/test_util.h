// Helpers shared by the tests: seeded random tensors and derived tolerances.
#pragma once
#include <cmath>
#include <vector>

#include "kernels/rng.h"

namespace vg::test {

// n values of N(0, std^2) from the stream (key, Test, tag).
inline std::vector<float> randn(size_t n, uint64_t tag, float std = 1.f, uint64_t key = 7) {
  Stream s(key, Purpose::Test, tag);
  std::vector<float> v(n);
  for (auto& x : v) x = float(std * s.normal());
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t k = 0; k < a.size(); ++k) s += double(a[k]) * b[k];
  return s;
}

}  // namespace vg::test
