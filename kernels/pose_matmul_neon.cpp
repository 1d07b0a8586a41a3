// NEON pose matmul (AArch64 Advanced SIMD, no extra flags). A 4x4 matrix is four
// q registers, one row each; multiply-by-lane (FMLA v, v, v.s[k]) needs no
// broadcasts, and every product is whole, so no tail loop.
#include <arm_neon.h>

#include <cstddef>

#include "kernels/pose_matmul.h"

namespace vg {

void pose_matmul_f32__neon(float* V, const float* M, const float* W, int B, int I, int J) {
  // V[r,:] = sum_k M[r,k] W[k,:].
  for (size_t bi = 0; bi < size_t(B) * I; ++bi) {
    const float* m = M + bi * 16;
    const float32x4_t m0 = vld1q_f32(m), m1 = vld1q_f32(m + 4), m2 = vld1q_f32(m + 8),
                      m3 = vld1q_f32(m + 12);
    const float* w = W + size_t(bi % size_t(I)) * J * 16;
    float* v = V + bi * J * 16;
    for (int j = 0; j < J; ++j, w += 16, v += 16) {
      const float32x4_t w0 = vld1q_f32(w), w1 = vld1q_f32(w + 4), w2 = vld1q_f32(w + 8),
                        w3 = vld1q_f32(w + 12);
      float32x4_t v0 = vmulq_laneq_f32(w0, m0, 0), v1 = vmulq_laneq_f32(w0, m1, 0);
      float32x4_t v2 = vmulq_laneq_f32(w0, m2, 0), v3 = vmulq_laneq_f32(w0, m3, 0);
      v0 = vfmaq_laneq_f32(v0, w1, m0, 1);
      v1 = vfmaq_laneq_f32(v1, w1, m1, 1);
      v2 = vfmaq_laneq_f32(v2, w1, m2, 1);
      v3 = vfmaq_laneq_f32(v3, w1, m3, 1);
      v0 = vfmaq_laneq_f32(v0, w2, m0, 2);
      v1 = vfmaq_laneq_f32(v1, w2, m1, 2);
      v2 = vfmaq_laneq_f32(v2, w2, m2, 2);
      v3 = vfmaq_laneq_f32(v3, w2, m3, 2);
      v0 = vfmaq_laneq_f32(v0, w3, m0, 3);
      v1 = vfmaq_laneq_f32(v1, w3, m1, 3);
      v2 = vfmaq_laneq_f32(v2, w3, m2, 3);
      v3 = vfmaq_laneq_f32(v3, w3, m3, 3);
      vst1q_f32(v, v0);
      vst1q_f32(v + 4, v1);
      vst1q_f32(v + 8, v2);
      vst1q_f32(v + 12, v3);
    }
  }
}

void pose_matmul_backward_f32__neon(float* dM, float* dW, const float* dV, const float* M,
                                    const float* W, int B, int I, int J) {
  // dM[r,:] += sum_c dV[r,c] W[:,c] (W's columns from a de-interleaving load),
  // accumulated over j in registers; dW[k,:] += sum_r M[r,k] dV[r,:].
  for (size_t bi = 0; bi < size_t(B) * I; ++bi) {
    const float* m = M + bi * 16;
    const float32x4_t m0 = vld1q_f32(m), m1 = vld1q_f32(m + 4), m2 = vld1q_f32(m + 8),
                      m3 = vld1q_f32(m + 12);
    float32x4_t a0 = vdupq_n_f32(0.f), a1 = a0, a2 = a0, a3 = a0;
    const float* w = W + size_t(bi % size_t(I)) * J * 16;
    float* dw = dW + size_t(bi % size_t(I)) * J * 16;
    const float* g = dV + bi * J * 16;
    for (int j = 0; j < J; ++j, w += 16, dw += 16, g += 16) {
      const float32x4_t g0 = vld1q_f32(g), g1 = vld1q_f32(g + 4), g2 = vld1q_f32(g + 8),
                        g3 = vld1q_f32(g + 12);
      const float32x4x4_t wt = vld4q_f32(w);  // wt.val[c] = W[:,c]
      a0 = vfmaq_laneq_f32(a0, wt.val[0], g0, 0);
      a1 = vfmaq_laneq_f32(a1, wt.val[0], g1, 0);
      a2 = vfmaq_laneq_f32(a2, wt.val[0], g2, 0);
      a3 = vfmaq_laneq_f32(a3, wt.val[0], g3, 0);
      a0 = vfmaq_laneq_f32(a0, wt.val[1], g0, 1);
      a1 = vfmaq_laneq_f32(a1, wt.val[1], g1, 1);
      a2 = vfmaq_laneq_f32(a2, wt.val[1], g2, 1);
      a3 = vfmaq_laneq_f32(a3, wt.val[1], g3, 1);
      a0 = vfmaq_laneq_f32(a0, wt.val[2], g0, 2);
      a1 = vfmaq_laneq_f32(a1, wt.val[2], g1, 2);
      a2 = vfmaq_laneq_f32(a2, wt.val[2], g2, 2);
      a3 = vfmaq_laneq_f32(a3, wt.val[2], g3, 2);
      a0 = vfmaq_laneq_f32(a0, wt.val[3], g0, 3);
      a1 = vfmaq_laneq_f32(a1, wt.val[3], g1, 3);
      a2 = vfmaq_laneq_f32(a2, wt.val[3], g2, 3);
      a3 = vfmaq_laneq_f32(a3, wt.val[3], g3, 3);

      float32x4_t d0 = vld1q_f32(dw), d1 = vld1q_f32(dw + 4), d2 = vld1q_f32(dw + 8),
                  d3 = vld1q_f32(dw + 12);
      d0 = vfmaq_laneq_f32(d0, g0, m0, 0);
      d1 = vfmaq_laneq_f32(d1, g0, m0, 1);
      d2 = vfmaq_laneq_f32(d2, g0, m0, 2);
      d3 = vfmaq_laneq_f32(d3, g0, m0, 3);
      d0 = vfmaq_laneq_f32(d0, g1, m1, 0);
      d1 = vfmaq_laneq_f32(d1, g1, m1, 1);
      d2 = vfmaq_laneq_f32(d2, g1, m1, 2);
      d3 = vfmaq_laneq_f32(d3, g1, m1, 3);
      d0 = vfmaq_laneq_f32(d0, g2, m2, 0);
      d1 = vfmaq_laneq_f32(d1, g2, m2, 1);
      d2 = vfmaq_laneq_f32(d2, g2, m2, 2);
      d3 = vfmaq_laneq_f32(d3, g2, m2, 3);
      d0 = vfmaq_laneq_f32(d0, g3, m3, 0);
      d1 = vfmaq_laneq_f32(d1, g3, m3, 1);
      d2 = vfmaq_laneq_f32(d2, g3, m3, 2);
      d3 = vfmaq_laneq_f32(d3, g3, m3, 3);
      vst1q_f32(dw, d0);
      vst1q_f32(dw + 4, d1);
      vst1q_f32(dw + 8, d2);
      vst1q_f32(dw + 12, d3);
    }
    float* dm = dM + bi * 16;
    vst1q_f32(dm, vaddq_f32(vld1q_f32(dm), a0));
    vst1q_f32(dm + 4, vaddq_f32(vld1q_f32(dm + 4), a1));
    vst1q_f32(dm + 8, vaddq_f32(vld1q_f32(dm + 8), a2));
    vst1q_f32(dm + 12, vaddq_f32(vld1q_f32(dm + 12), a3));
  }
}

}  // namespace vg
