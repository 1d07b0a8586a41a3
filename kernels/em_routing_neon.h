// The NEON primitives the EM-routing steps (em_routing_simd.h) are written
// over, with vec_neon.h's, for AArch64 files (Advanced SIMD needs no extra
// flags); each such file includes this header and keeps its own internally
// linked copy.
// A pose vector is four q registers; exp and log run four floats at a time
// through the Cephes polynomials below, the leftovers of a run through std::.
#pragma once
#include "kernels/vec_neon.h"

#include <cfloat>
#include <cmath>
#include <numbers>

namespace vg {
namespace {

inline F16 sub16(F16 a, const F16& b) {
  for (int k = 0; k < 4; ++k) a.q[k] = vsubq_f32(a.q[k], b.q[k]);
  return a;
}
inline F16 div16(F16 a, const F16& b) {
  for (int k = 0; k < 4; ++k) a.q[k] = vdivq_f32(a.q[k], b.q[k]);
  return a;
}
// FMAX keeps a NaN x, as std::max(x, floor) does.
inline F16 max16(F16 x, const F16& lo) {
  for (int k = 0; k < 4; ++k) x.q[k] = vmaxq_f32(x.q[k], lo.q[k]);
  return x;
}
inline float dot16(const F16& a, const F16& b) { return hsum16(mul16(a, b)); }
// dot16(a_k, b_k) for the 8 pairs ab(k, a_k, b_k) gives, in r[0] and r[1] in
// order, bit for bit: each product's quarters summed as hsum16 sums them,
// then four dots' lanes at once by pairwise adds, vaddvq_f32's order
// ((0 + 1) + (2 + 3)).
template <class Pair>
inline void dots16x8v(Pair ab, float32x4_t* r) {
  float32x4_t s[8];
  for (int k = 0; k < 8; ++k) {
    F16 a, b;
    ab(k, a, b);
    const F16 t = mul16(a, b);
    s[k] = vaddq_f32(vaddq_f32(t.q[0], t.q[1]), vaddq_f32(t.q[2], t.q[3]));
  }
  for (int k = 0; k < 2; ++k)
    r[k] = vpaddq_f32(vpaddq_f32(s[4 * k], s[4 * k + 1]), vpaddq_f32(s[4 * k + 2], s[4 * k + 3]));
}
// out[k] = c dot16(a_k, b_k) + add[k], multiplied and added in registers.
template <class Pair>
inline void scaled_dots16x8(Pair ab, float c, const float* add, float* out) {
  float32x4_t r[2];
  dots16x8v(ab, r);
  for (int k = 0; k < 2; ++k)
    vst1q_f32(out + 4 * k, vaddq_f32(vmulq_f32(r[k], vdupq_n_f32(c)), vld1q_f32(add + 4 * k)));
}
// t_h + t_{h+8}, then + 4 lanes on, then (u0 + u2) + (u1 + u3): the pairwise
// order of the scalar full backward's sum16, so its bits.
inline float pair_sum16(const F16& t) {
  const float32x4_t u = vaddq_f32(vaddq_f32(t.q[0], t.q[2]), vaddq_f32(t.q[1], t.q[3]));
  return vpadds_f32(vadd_f32(vget_low_f32(u), vget_high_f32(u)));
}
// out[k] = pair_sum16(t[k]) for 8 registers, bit for bit: the last pairwise
// add of four sums at once (vpaddq_f32 adds each pair as vpadds_f32 does).
inline void pair_sums16x8(const F16* t, float* out) {
  for (int k = 0; k < 8; k += 4) {
    float32x2_t h[4];
    for (int m = 0; m < 4; ++m) {
      const F16& x = t[k + m];
      const float32x4_t u = vaddq_f32(vaddq_f32(x.q[0], x.q[2]), vaddq_f32(x.q[1], x.q[3]));
      h[m] = vadd_f32(vget_low_f32(u), vget_high_f32(u));
    }
    vst1q_f32(out + k, vpaddq_f32(vcombine_f32(h[0], h[1]), vcombine_f32(h[2], h[3])));
  }
}
inline float32x4_t and_mask(uint32x4_t m, float32x4_t x) {
  return vreinterpretq_f32_u32(vandq_u32(m, vreinterpretq_u32_f32(x)));
}

inline F16 zero_unless_gt16(const F16& v, const F16& x, const F16& lo) {
  F16 r;
  for (int k = 0; k < 4; ++k) r.q[k] = and_mask(vcgtq_f32(x.q[k], lo.q[k]), v.q[k]);
  return r;
}

// exp(x) within ~1 ulp (Cephes expf, as the AVX2 variant). Range reduction:
// x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2, ln2 split in two
// (Cody-Waite); e^r = 1 + r + r^2 P(r), P of degree 5. 2^n is applied as
// 2^(n>>1) then 2^(n - n>>1), both normal, so denormal results round once and
// x > ln(FLT_MAX) gives inf. x < -104 gives 0; FMIN/FMAX propagate NaN.
inline float32x4_t exp4(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-104.f)), vdupq_n_f32(88.8f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.f));
  const int32x4_t ni = vcvtq_s32_f32(n);
  const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
  const int32x4_t bias = vdupq_n_s32(127);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  return vmulq_f32(vmulq_f32(p, s1), s2);
}

// log(x) within ~1 ulp (Cephes logf, as the AVX2 variant): x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first), f = m - 1 exact;
// log(1+f) = f - f^2/2 + f^3 P(f), P of degree 8; e ln2 added with ln2 split in
// two. log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
inline float32x4_t log4(float32x4_t x) {
  const uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(FLT_MIN));
  const float32x4_t xs = vbslq_f32(tiny, vmulq_f32(x, vdupq_n_f32(8388608.f)), x);
  const uint32x4_t bits = vreinterpretq_u32_f32(xs);
  float32x4_t e = vcvtq_f32_s32(vsubq_s32(
      vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(bits, 23), vdupq_n_u32(0xff))), vdupq_n_s32(126)));
  e = vsubq_f32(e, and_mask(tiny, vdupq_n_f32(23.f)));
  float32x4_t m = vreinterpretq_f32_u32(
      vorrq_u32(vandq_u32(bits, vdupq_n_u32(0x007fffff)), vdupq_n_u32(0x3f000000)));  // [0.5, 1)
  const uint32x4_t small = vcltq_f32(m, vdupq_n_f32(0.707106781186547524f));
  e = vsubq_f32(e, and_mask(small, vdupq_n_f32(1.f)));
  m = vaddq_f32(m, and_mask(small, m));
  const float32x4_t f = vsubq_f32(m, vdupq_n_f32(1.f));
  const float32x4_t z = vmulq_f32(f, f);
  float32x4_t p = vdupq_n_f32(7.0376836292e-2f);
  p = vfmaq_f32(vdupq_n_f32(-1.1514610310e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(1.1676998740e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(-1.2420140846e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(1.4249322787e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(-1.6668057665e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(2.0000714765e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(-2.4999993993e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(3.3333331174e-1f), p, f);
  float32x4_t y = vmulq_f32(vmulq_f32(p, f), z);
  y = vfmaq_f32(y, e, vdupq_n_f32(-2.12194440e-4f));
  y = vfmaq_f32(y, vdupq_n_f32(-0.5f), z);
  float32x4_t r = vfmaq_f32(vaddq_f32(f, y), e, vdupq_n_f32(0.693359375f));
  r = vbslq_f32(vceqq_f32(x, vdupq_n_f32(0.f)), vdupq_n_f32(-INFINITY), r);
  r = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.f)), vdupq_n_f32(NAN), r);
  const uint32x4_t keep = vorrq_u32(vceqq_f32(x, vdupq_n_f32(INFINITY)), vmvnq_u32(vceqq_f32(x, x)));
  return vbslq_f32(keep, x, r);
}

// sum_h log x_h over 16 floats with one log: x = m 2^e with m in [1, 2), so
// sum log x = log(prod m) + e_sum ln2, and prod m < 2^16 cannot overflow
// (15 products: ~8 ulp, ~1e-6 absolute, the size of the rounding of 16 summed
// logs). If any lane is not normal, positive and finite (0, inf, NaN,
// denormals), the lane-wise log4 is summed instead.
inline float sum_log16(const F16& x) {
  const float32x4_t lo = vdupq_n_f32(FLT_MIN), hi = vdupq_n_f32(FLT_MAX);
  uint32x4_t ok = vdupq_n_u32(0xffffffffu);
  for (int k = 0; k < 4; ++k) ok = vandq_u32(ok, vandq_u32(vcgeq_f32(x.q[k], lo), vcleq_f32(x.q[k], hi)));
  if (vminvq_u32(ok) == 0) {
    F16 l;
    for (int k = 0; k < 4; ++k) l.q[k] = log4(x.q[k]);
    return hsum16(l);
  }
  const uint32x4_t mant = vdupq_n_u32(0x007fffff), one = vdupq_n_u32(0x3f800000);
  float32x4_t p = vdupq_n_f32(1.f);
  uint32x4_t e = vdupq_n_u32(0);
  for (int k = 0; k < 4; ++k) {
    const uint32x4_t bits = vreinterpretq_u32_f32(x.q[k]);
    p = vmulq_f32(p, vreinterpretq_f32_u32(vorrq_u32(vandq_u32(bits, mant), one)));
    e = vaddq_u32(e, vshrq_n_u32(bits, 23));  // biased exponents
  }
  const float prod = (vgetq_lane_f32(p, 0) * vgetq_lane_f32(p, 1)) * (vgetq_lane_f32(p, 2) * vgetq_lane_f32(p, 3));
  const int e_sum = int(vaddvq_u32(e)) - 16 * 127;
  return float(double(std::log(prod)) + e_sum * std::numbers::ln2);
}

using Vec = float32x4_t;
inline Vec bcastv(float x) { return vdupq_n_f32(x); }
inline Vec addv(Vec a, Vec b) { return vaddq_f32(a, b); }
inline Vec subv(Vec a, Vec b) { return vsubq_f32(a, b); }
inline Vec mulv(Vec a, Vec b) { return vmulq_f32(a, b); }
inline Vec divv(Vec a, Vec b) { return vdivq_f32(a, b); }
// std::max(a, b) = a < b ? b : a (FMAX would return a NaN b).
inline Vec maxv(Vec a, Vec b) { return vbslq_f32(vcltq_f32(a, b), b, a); }
inline Vec expv(Vec x) { return exp4(x); }
inline Vec logv(Vec x) { return log4(x); }
inline Vec negv(Vec x) { return vnegq_f32(x); }
inline Vec neg_absv(Vec x) { return vnegq_f32(vabsq_f32(x)); }
// std::min(z, 0) is z < 0 ? z : 0 (a NaN z stays); FMIN would agree too.
inline Vec min0v(Vec z) { return vbslq_f32(vcgtq_f32(z, vdupq_n_f32(0.f)), vdupq_n_f32(0.f), z); }
inline Vec if_zerov(Vec c, Vec x, Vec y) { return vbslq_f32(vceqq_f32(c, vdupq_n_f32(0.f)), x, y); }
inline Vec zero_if_lessv(Vec x, float lo, Vec y) { return vbslq_f32(vcltq_f32(x, vdupq_n_f32(lo)), vdupq_n_f32(0.f), y); }
inline Vec pow2v(Vec n) {  // 2^n, n integral in [-126, 127]
  return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23));
}

struct Whole {
  static Vec load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, Vec x) { vst1q_f32(p, x); }
};
template <class VecFn, class ScalarFn>
inline void for_runs(size_t n, VecFn vec, ScalarFn scalar) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) vec(k, Whole{});
  for (; k < n; ++k) scalar(k);
}

// cols[j] lane k = x[k stride + j] for j, k < 4: a 4 x 4 block transposed.
inline void cols_of_rows(Vec* cols, const float* x, size_t stride) {
  const float32x4x2_t p = vtrnq_f32(vld1q_f32(x), vld1q_f32(x + stride));  // a0 b0 a2 b2 | a1 b1 a3 b3
  const float32x4x2_t q = vtrnq_f32(vld1q_f32(x + 2 * stride), vld1q_f32(x + 3 * stride));
  cols[0] = vcombine_f32(vget_low_f32(p.val[0]), vget_low_f32(q.val[0]));
  cols[1] = vcombine_f32(vget_low_f32(p.val[1]), vget_low_f32(q.val[1]));
  cols[2] = vcombine_f32(vget_high_f32(p.val[0]), vget_high_f32(q.val[0]));
  cols[3] = vcombine_f32(vget_high_f32(p.val[1]), vget_high_f32(q.val[1]));
}

constexpr int kMomentJ = 2;  // eight independent FMA chains

}  // namespace
}  // namespace vg
