// NEON elementwise kernels (AArch64 Advanced SIMD): the scalar reference's
// operations in its order, 4 lanes at a time (vmulq/vaddq, never vfmaq: see
// elementwise.h).
#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/rng.h"
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

namespace {
// The high and low words of each 32-bit lane times m, from the 64-bit products.
inline void mul_hi_lo(uint32x4_t a, uint32x4_t m, uint32x4_t* hi, uint32x4_t* lo) {
  const uint32x4_t p01 = vreinterpretq_u32_u64(vmull_u32(vget_low_u32(a), vget_low_u32(m)));
  const uint32x4_t p23 = vreinterpretq_u32_u64(vmull_high_u32(a, m));
  *hi = vuzp2q_u32(p01, p23);
  *lo = vuzp1q_u32(p01, p23);
}

inline float32x4_t horner(float32x4_t x2, std::initializer_list<float> c) {  // c[0] x2^n + ... + c[n]
  const float* k = c.begin();
  float32x4_t p = vdupq_n_f32(*k++);
  for (; k != c.end(); ++k) p = vaddq_f32(vmulq_f32(p, x2), vdupq_n_f32(*k));
  return p;
}

inline float32x4_t flip_sign(float32x4_t v, uint32x4_t sign) {
  return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(v), sign));
}

// normal_pair (elementwise.h) on 4 lanes, in its order of operations.
inline void normal_pairs(uint32x4_t w1, uint32x4_t w2, float32x4_t vstd, float32x4_t* c_out, float32x4_t* s_out) {
  using K = NormalPairConsts;
  const float32x4_t one = vdupq_n_f32(1.f);
  const uint32x4_t one_i = vdupq_n_u32(1), two_i = vdupq_n_u32(2);
  const float32x4_t u1 = vmulq_f32(vaddq_f32(vcvtq_f32_s32(vreinterpretq_s32_u32(vshrq_n_u32(w1, 9))), vdupq_n_f32(0.5f)),
                                   vdupq_n_f32(0x1.0p-23f));
  const uint32x4_t bits = vreinterpretq_u32_f32(u1);
  int32x4_t e = vsubq_s32(vreinterpretq_s32_u32(vshrq_n_u32(bits, 23)), vdupq_n_s32(127));
  float32x4_t f = vreinterpretq_f32_u32(vorrq_u32(vandq_u32(bits, vdupq_n_u32(0x7FFFFF)), vdupq_n_u32(0x3F800000)));
  const uint32x4_t big = vcgtq_f32(f, vdupq_n_f32(K::kSqrt2));
  f = vbslq_f32(big, vmulq_f32(f, vdupq_n_f32(0.5f)), f);
  e = vsubq_s32(e, vreinterpretq_s32_u32(big));  // the mask is -1: e + 1
  const float32x4_t t = vdivq_f32(vsubq_f32(f, one), vaddq_f32(f, one)), t2 = vmulq_f32(t, t);
  const float32x4_t p = horner(t2, {K::kA9, K::kA7, K::kA5, K::kA3, 1.f});
  const float32x4_t ln_u1 = vaddq_f32(vmulq_f32(vcvtq_f32_s32(e), vdupq_n_f32(K::kLn2)), vmulq_f32(vaddq_f32(t, t), p));
  const float32x4_t r = vmulq_f32(vstd, vsqrtq_f32(vmulq_f32(vdupq_n_f32(-2.f), ln_u1)));

  const uint32x4_t j = vshrq_n_u32(w2, 8);
  const uint32x4_t q = vshrq_n_u32(vaddq_u32(j, vdupq_n_u32(1u << 21)), 22);
  const float32x4_t x = vmulq_f32(vcvtq_f32_s32(vsubq_s32(vreinterpretq_s32_u32(j), vreinterpretq_s32_u32(vshlq_n_u32(q, 22)))),
                                  vdupq_n_f32(0x1.0p-24f));
  const float32x4_t x2 = vmulq_f32(x, x);
  const float32x4_t sn = vmulq_f32(horner(x2, {K::kS9, K::kS7, K::kS5, K::kS3, K::kS1}), x);
  const float32x4_t cs = vaddq_f32(vmulq_f32(horner(x2, {K::kC10, K::kC8, K::kC6, K::kC4, K::kC2}), x2), one);
  const uint32x4_t odd = vtstq_u32(q, one_i);
  const uint32x4_t c_sign = vshlq_n_u32(vandq_u32(vaddq_u32(q, one_i), two_i), 30);
  const uint32x4_t s_sign = vshlq_n_u32(vandq_u32(q, two_i), 30);
  *c_out = vmulq_f32(r, flip_sign(vbslq_f32(odd, sn, cs), c_sign));
  *s_out = vmulq_f32(r, flip_sign(vbslq_f32(odd, cs, sn), s_sign));
}
}  // namespace

// Four Philox blocks at a time, one per lane, then their two Box-Muller pairs;
// vst4q interleaves them block by block.
void normal_f32__neon(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0) {
  using P = Philox4x32;
  const uint32x4_t m0 = vdupq_n_u32(P::kM0), m1 = vdupq_n_u32(P::kM1);
  uint32_t k0[P::kRounds], k1[P::kRounds];
  P::round_keys(key, k0, k1);
  const float32x4_t vstd = vdupq_n_f32(std);
  for (size_t k = 0; k < n; k += 16) {
    uint32_t lo[4], hi[4];
    for (int l = 0; l < 4; ++l) {
      const uint64_t c = ctr0 + k / 4 + uint64_t(l);
      lo[l] = uint32_t(c);
      hi[l] = uint32_t(c >> 32);
    }
    uint32x4_t x0 = vld1q_u32(lo), x1 = vld1q_u32(hi);
    uint32x4_t x2 = vdupq_n_u32(uint32_t(sub)), x3 = vdupq_n_u32(uint32_t(sub >> 32));
    for (int r = 0; r < P::kRounds; ++r) {  // Philox4x32::round, lane by lane
      uint32x4_t h0, l0, h2, l2;
      mul_hi_lo(x0, m0, &h0, &l0);
      mul_hi_lo(x2, m1, &h2, &l2);
      x0 = veorq_u32(veorq_u32(h2, x1), vdupq_n_u32(k0[r]));
      x1 = l2;
      x2 = veorq_u32(veorq_u32(h0, x3), vdupq_n_u32(k1[r]));
      x3 = l0;
    }
    float32x4x4_t v;
    normal_pairs(x0, x1, vstd, &v.val[0], &v.val[1]);
    normal_pairs(x2, x3, vstd, &v.val[2], &v.val[3]);
    if (n - k >= 16) {
      vst4q_f32(out + k, v);
    } else {
      float block[16];
      vst4q_f32(block, v);
      std::copy(block, block + (n - k), out + k);
    }
  }
}

}  // namespace vg
