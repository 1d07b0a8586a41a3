// Scalar reference of the elementwise kernels (built with -ffp-contract=off,
// as the whole project is: the SIMD variants must match it bit for bit).
#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "kernels/elementwise.h"

namespace vg {

void adam_update_f32__scalar(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps) {
  const float c1 = 1.f - b1, c2 = 1.f - b2;
  for (size_t k = 0; k < n; ++k) {
    m[k] = b1 * m[k] + c1 * g[k];
    v[k] = b2 * v[k] + c2 * g[k] * g[k];
    w[k] -= lr_c1 * m[k] / (std::sqrt(v[k]) * inv_sqrt_c2 + eps);
  }
}

void relu_backward_f32__scalar(float* d, const float* y, size_t n) {
  for (size_t k = 0; k < n; ++k) d[k] = y[k] > 0.f ? d[k] : 0.f;
}

// In strips of 16 columns: each source row is read a cache line at a time and
// the strip's destination (16 x rows floats, contiguous) stays in L1.
void transpose_f32__scalar(float* dst, const float* src, int rows, int cols) {
  for (int c0 = 0; c0 < cols; c0 += 16) transpose_rect(dst, src, rows, cols, 0, rows, c0, std::min(c0 + 16, cols));
}

void normal_f32__scalar(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0) {
  for (size_t k = 0; k < n; k += 4) {
    uint32_t w[4];
    Philox4x32::block(w, key, sub, ctr0 + k / 4);
    float o[4];
    normal_pair(w[0], w[1], std, &o[0], &o[1]);
    normal_pair(w[2], w[3], std, &o[2], &o[3]);
    std::copy(o, o + std::min<size_t>(4, n - k), out + k);
  }
}

}  // namespace vg
