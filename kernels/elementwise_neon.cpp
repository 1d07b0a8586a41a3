// NEON elementwise kernels (AArch64 Advanced SIMD): the scalar reference's
// operations in its order, 4 lanes at a time (vmulq/vaddq, never vfmaq: see
// elementwise.h).
#include <arm_neon.h>

#include <cmath>

#include "kernels/elementwise.h"

namespace vg {

void adam_update_f32__neon(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps) {
  const float c1 = 1.f - b1, c2 = 1.f - b2;
  const float32x4_t vb1 = vdupq_n_f32(b1), vb2 = vdupq_n_f32(b2), vc1 = vdupq_n_f32(c1),
                    vc2 = vdupq_n_f32(c2), vlr = vdupq_n_f32(lr_c1), vis = vdupq_n_f32(inv_sqrt_c2),
                    veps = vdupq_n_f32(eps);
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const float32x4_t gk = vld1q_f32(g + k);
    const float32x4_t mk = vaddq_f32(vmulq_f32(vb1, vld1q_f32(m + k)), vmulq_f32(vc1, gk));
    const float32x4_t vk = vaddq_f32(vmulq_f32(vb2, vld1q_f32(v + k)), vmulq_f32(vmulq_f32(vc2, gk), gk));
    const float32x4_t den = vaddq_f32(vmulq_f32(vsqrtq_f32(vk), vis), veps);
    vst1q_f32(m + k, mk);
    vst1q_f32(v + k, vk);
    vst1q_f32(w + k, vsubq_f32(vld1q_f32(w + k), vdivq_f32(vmulq_f32(vlr, mk), den)));
  }
  for (; k < n; ++k) {
    m[k] = b1 * m[k] + c1 * g[k];
    v[k] = b2 * v[k] + c2 * g[k] * g[k];
    w[k] -= lr_c1 * m[k] / (std::sqrt(v[k]) * inv_sqrt_c2 + eps);
  }
}

void relu_backward_f32__neon(float* d, const float* y, size_t n) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const uint32x4_t keep = vcgtq_f32(vld1q_f32(y + k), vdupq_n_f32(0.f));
    vst1q_f32(d + k, vreinterpretq_f32_u32(vandq_u32(keep, vreinterpretq_u32_f32(vld1q_f32(d + k)))));
  }
  for (; k < n; ++k) d[k] = y[k] > 0.f ? d[k] : 0.f;
}

// 4 x 4 tiles through registers (trn, then combine halves), a strip of 4
// columns at a time; the edges by the scalar loop.
void transpose_f32__neon(float* dst, const float* src, int rows, int cols) {
  const int R = rows / 4 * 4, C = cols / 4 * 4;
  for (int c = 0; c < C; c += 4) {
    for (int r = 0; r < R; r += 4) {
      const float* s = src + size_t(r) * cols + c;
      const float32x4x2_t t01 = vtrnq_f32(vld1q_f32(s), vld1q_f32(s + cols));  // a0 b0 a2 b2 | a1 b1 a3 b3
      const float32x4x2_t t23 = vtrnq_f32(vld1q_f32(s + 2 * size_t(cols)), vld1q_f32(s + 3 * size_t(cols)));
      float* d = dst + size_t(c) * rows + r;
      vst1q_f32(d, vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
      vst1q_f32(d + rows, vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
      vst1q_f32(d + 2 * size_t(rows), vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
      vst1q_f32(d + 3 * size_t(rows), vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
    }
    transpose_rect(dst, src, rows, cols, R, rows, c, c + 4);
  }
  transpose_rect(dst, src, rows, cols, 0, rows, C, cols);
}

}  // namespace vg
