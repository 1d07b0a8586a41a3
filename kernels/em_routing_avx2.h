// The AVX2 + FMA primitives the EM-routing steps (em_routing_simd.h) are
// written over, with vec_avx2.h's, for files built with the ISA's flags (-mavx2
// -mfma); each such file includes this header and keeps its own internally
// linked copy.
// A pose vector is two ymm registers; exp and log run eight floats at a time
// through the Cephes polynomials below, the leftovers of a run through std::.
#pragma once
#include "kernels/em_routing_ymm.h"
#include "kernels/vec_avx2.h"

#include <cfloat>
#include <cmath>
#include <numbers>

namespace vg {
namespace {

// exp(x) within ~1 ulp (Cephes expf). Range reduction: x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2/2, ln2 split in two (Cody-Waite) so n ln2 is
// exact; e^r = 1 + r + r^2 P(r), P of degree 5. 2^n is applied as 2^(n>>1) then
// 2^(n - n>>1), both normal, so results in the denormal range round once and
// x > ln(FLT_MAX) gives inf. x < -104 gives 0; NaN passes through the clamps.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), _mm256_max_ps(_mm256_set1_ps(-104.f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// log(x) within ~1 ulp (Cephes logf). Range reduction: x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first), f = m - 1 exact;
// log(1+f) = f - f^2/2 + f^3 P(f), P of degree 8; e ln2 added with ln2 split in
// two. log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
inline __m256 log8(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(FLT_MIN), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.f)), tiny);
  const __m256i bits = _mm256_castps_si256(xs);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(
      _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xff)), _mm256_set1_epi32(126)));
  e = _mm256_sub_ps(e, _mm256_and_ps(tiny, _mm256_set1_ps(23.f)));
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));  // [0.5, 1)
  const __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm256_sub_ps(e, _mm256_and_ps(small, _mm256_set1_ps(1.f)));
  m = _mm256_add_ps(m, _mm256_and_ps(small, m));
  const __m256 f = _mm256_sub_ps(m, _mm256_set1_ps(1.f));
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = _mm256_set1_ps(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
  y = _mm256_fmadd_ps(_mm256_set1_ps(-0.5f), z, y);
  __m256 r = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), _mm256_add_ps(f, y));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ),
                                   _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, x, keep);
}

inline F16 sub16(F16 a, F16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline F16 div16(F16 a, F16 b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
// maxps returns its second operand when either is NaN: a NaN x stays.
inline F16 max16(F16 x, F16 lo) { return {_mm256_max_ps(lo.lo, x.lo), _mm256_max_ps(lo.hi, x.hi)}; }
inline F16 zero_unless_gt16(F16 v, F16 x, F16 lo) {
  return {_mm256_and_ps(_mm256_cmp_ps(x.lo, lo.lo, _CMP_GT_OQ), v.lo),
          _mm256_and_ps(_mm256_cmp_ps(x.hi, lo.hi, _CMP_GT_OQ), v.hi)};
}
// The high half's products are summed into the low half's fused.
inline float dot16(F16 a, F16 b) { return hsum8(_mm256_fmadd_ps(a.lo, b.lo, _mm256_mul_ps(a.hi, b.hi))); }
// t_h + t_{h+8}, then + 4 lanes on, then (u0 + u2) + (u1 + u3): the pairwise
// order of the scalar full backward's sum16, so its bits.
inline float pair_sum16(F16 t) { return hsum8(_mm256_add_ps(t.lo, t.hi)); }
// dot16(a_k, b_k) for the 8 pairs ab(k, a_k, b_k) gives, in one register, bit
// for bit: hsums8x8 of the fused products.
template <class Pair>
inline __m256 dots16x8v(Pair ab) {
  __m256 t[8];
  for (int k = 0; k < 8; ++k) {
    F16 a, b;
    ab(k, a, b);
    t[k] = _mm256_fmadd_ps(a.lo, b.lo, _mm256_mul_ps(a.hi, b.hi));
  }
  return hsums8x8(t);
}
// out[k] = c dot16(a_k, b_k) + add[k], multiplied and added in registers.
template <class Pair>
inline void scaled_dots16x8(Pair ab, float c, const float* add, float* out) {
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_mul_ps(dots16x8v(ab), _mm256_set1_ps(c)), _mm256_loadu_ps(add)));
}
// out[k] = pair_sum16(t[k]) for 8 registers, bit for bit.
inline void pair_sums16x8(const F16* t, float* out) {
  __m256 h[8];
  for (int k = 0; k < 8; ++k) h[k] = _mm256_add_ps(t[k].lo, t[k].hi);
  _mm256_storeu_ps(out, hsums8x8(h));
}

// sum_h log x_h over 16 floats with one log: x = m 2^e with m in [1, 2), so
// sum log x = log(prod m) + e_sum ln2, and prod m < 2^16 cannot overflow
// (15 products: ~8 ulp of the product, i.e. ~1e-6 absolute, the size of the
// rounding of 16 summed logs). Lanes not normal, positive and finite (0, inf,
// NaN, denormals) take the lane-wise log8.
inline float sum_log16(F16 x) {
  const __m256 x0 = x.lo, x1 = x.hi;
  const __m256 lo = _mm256_set1_ps(FLT_MIN), hi = _mm256_set1_ps(FLT_MAX);
  const __m256 ok = _mm256_and_ps(
      _mm256_and_ps(_mm256_cmp_ps(x0, lo, _CMP_GE_OQ), _mm256_cmp_ps(x0, hi, _CMP_LE_OQ)),
      _mm256_and_ps(_mm256_cmp_ps(x1, lo, _CMP_GE_OQ), _mm256_cmp_ps(x1, hi, _CMP_LE_OQ)));
  if (_mm256_movemask_ps(ok) != 0xff) return hsum8(_mm256_add_ps(log8(x0), log8(x1)));
  const __m256i b0 = _mm256_castps_si256(x0), b1 = _mm256_castps_si256(x1);
  const __m256i mant = _mm256_set1_epi32(0x007fffff), one = _mm256_set1_epi32(0x3f800000);
  const __m256 p8 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b0, mant), one)),
                                  _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b1, mant), one)));
  const __m256i e8 = _mm256_add_epi32(_mm256_srli_epi32(b0, 23), _mm256_srli_epi32(b1, 23));  // biased
  __m128i e = _mm_add_epi32(_mm256_castsi256_si128(e8), _mm256_extracti128_si256(e8, 1));
  e = _mm_add_epi32(e, _mm_shuffle_epi32(e, 0x4E));
  e = _mm_add_epi32(e, _mm_shuffle_epi32(e, 0xB1));
  const int e_sum = _mm_cvtsi128_si32(e) - 16 * 127;
  return float(double(std::log(hprod8(p8))) + e_sum * std::numbers::ln2);
}

using Vec = __m256;
inline Vec bcastv(float x) { return _mm256_set1_ps(x); }
inline Vec addv(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec subv(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec mulv(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec divv(Vec a, Vec b) { return _mm256_div_ps(a, b); }
// std::max(a, b) = a < b ? b : a: maxps gives its second operand when unordered.
inline Vec maxv(Vec a, Vec b) { return _mm256_max_ps(b, a); }
inline Vec expv(Vec x) { return exp8(x); }
inline Vec logv(Vec x) { return log8(x); }
inline Vec negv(Vec x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.f)); }
inline Vec neg_absv(Vec x) { return _mm256_or_ps(x, _mm256_set1_ps(-0.f)); }
inline Vec min0v(Vec z) { return _mm256_min_ps(_mm256_setzero_ps(), z); }  // minps: a NaN z stays
inline Vec if_zerov(Vec c, Vec x, Vec y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(c, _mm256_setzero_ps(), _CMP_EQ_OQ)); }
inline Vec zero_if_lessv(Vec x, float lo, Vec y) { return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(lo), _CMP_NLT_UQ), y); }
inline Vec pow2v(Vec n) {  // 2^n, n integral in [-126, 127]
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

struct Whole {
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec x) { _mm256_storeu_ps(p, x); }
};
template <class VecFn, class ScalarFn>
inline void for_runs(size_t n, VecFn vec, ScalarFn scalar) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) vec(k, Whole{});
  for (; k < n; ++k) scalar(k);
}

// cols[j] lane k = x[k stride + j] for j, k < 8: an 8 x 8 block transposed
// (pairs of rows interleaved, then quadruples, then the 128-bit halves).
inline void cols_of_rows(Vec* cols, const float* x, size_t stride) {
  __m256 t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    const __m256 a = _mm256_loadu_ps(x + k * stride), b = _mm256_loadu_ps(x + (k + 1) * stride);
    t[k] = _mm256_unpacklo_ps(a, b);  // a0 b0 a1 b1, each half
    t[k + 1] = _mm256_unpackhi_ps(a, b);  // a2 b2 a3 b3
  }
  for (int k = 0; k < 8; k += 4) {  // u[k + m], half L: column 4 L + m of rows k .. k + 3
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int m = 0; m < 4; ++m) {
    cols[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
    cols[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
  }
}

constexpr int kMomentJ = 2;  // four independent FMA chains

}  // namespace
}  // namespace vg
