// The AVX-512 primitives the EM-routing steps (em_routing_simd.h) are written
// over, with vec_avx512.h's, for files built with the ISA's flags (-mavx512f
// -mavx512vl -mavx512dq -mfma); each such file includes this header and keeps
// its own internally linked copy.
// A pose vector is one zmm register, and so is a register of exp and log runs.
// Every operation rounds as the AVX2 variant's does (its sums in its order, its
// dots' fused half, its split of runs between vector and scalar code), so the
// two give the same bits and --reproducible runs this one where it can.
#pragma once
#include "kernels/vec_avx512.h"
#include "kernels/em_routing_ymm.h"

#include <cfloat>
#include <cmath>
#include <numbers>

namespace vg {
namespace {

// exp(x) within ~1 ulp (Cephes expf, as the AVX2 variant): x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2/2, ln2 split in two (Cody-Waite); e^r = 1 + r
// + r^2 P(r), P of degree 5; vscalefps applies 2^n with one rounding, so
// denormal results, underflow to 0 (x < -104 is clamped there) and overflow to
// inf come out right. NaN passes through the clamps. exp8's two exact scalings
// round once as well, so the two give the same bits for every x.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// log(x) within ~1 ulp (Cephes logf, as the AVX2 variant): x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) from vgetmantps/vgetexpps (exact, denormals included),
// f = m - 1 exact; log(1+f) = f - f^2/2 + f^3 P(f), P of degree 8; e ln2 added
// with ln2 split in two. log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays.
// The m and e of log8's bit arithmetic (denormals scaled by 2^23 there), so the
// same operations and bits.
inline __m512 log16(__m512 x) {
  __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_zero);  // [0.5, 1)
  __m512 e = _mm512_add_ps(_mm512_getexp_ps(x), _mm512_set1_ps(1.f));    // x = m 2^e
  const __mmask16 small = _mm512_cmp_ps_mask(m, _mm512_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm512_mask_sub_ps(e, small, e, _mm512_set1_ps(1.f));
  m = _mm512_mask_add_ps(m, small, m, m);
  const __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.f));
  const __m512 z = _mm512_mul_ps(f, f);
  __m512 p = _mm512_set1_ps(7.0376836292e-2f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.1514610310e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.1676998740e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.2420140846e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.4249322787e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.6668057665e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.0000714765e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-2.4999993993e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(3.3333331174e-1f));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, f), z);
  y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fmadd_ps(_mm512_set1_ps(-0.5f), z, y);
  __m512 r = _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), _mm512_add_ps(f, y));
  const __m512 zero = _mm512_setzero_ps();
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ), r, _mm512_set1_ps(-INFINITY));
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), r, _mm512_set1_ps(NAN));
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ) |
                         _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(keep, r, x);
}

inline F16 sub16(F16 a, F16 b) { return _mm512_sub_ps(a, b); }
inline F16 div16(F16 a, F16 b) { return _mm512_div_ps(a, b); }
// vmaxps returns its second operand when either is NaN: a NaN x stays.
inline F16 max16(F16 x, F16 lo) { return _mm512_max_ps(lo, x); }
inline F16 zero_unless_gt16(F16 v, F16 x, F16 lo) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), v); }
// t_h + t_{h+8}, then + 4 lanes on, then (u0 + u2) + (u1 + u3): the pairwise
// order of the scalar full backward's sum16, so its bits.
inline float pair_sum16(F16 t) {
  const __m256 u = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// The AVX2 variant's dot, so its bits: the high half's products summed into
// the low half's fused, then hsum8 (em_routing_ymm.h).
inline __m256 fused_halves(F16 a, F16 b) {
  return _mm256_fmadd_ps(_mm512_castps512_ps256(a), _mm512_castps512_ps256(b),
                         _mm256_mul_ps(_mm512_extractf32x8_ps(a, 1), _mm512_extractf32x8_ps(b, 1)));
}
inline float dot16(F16 a, F16 b) { return hsum8(fused_halves(a, b)); }
// pair_sum16(t[k]) for 8 registers, in order in one register, bit for bit:
// summed transposed, each lane taking pair_sum16's additions (halves of 8, of
// 4, then lanes 0+2 and 1+3, then 0+1), ~1 shuffle and add a sum where one
// reduction costs 8.
inline __m256 pair_sums16x8v(const F16* t) {
  __m512 u[4];  // [u_2k | u_2k+1], u_k[i] = t_k[i] + t_k[i + 8]
  for (int k = 0; k < 4; ++k)
    u[k] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 v[2];  // [v_4k | v_4k+1 | v_4k+2 | v_4k+3], v_k[i] = u_k[i] + u_k[i + 4]
  for (int k = 0; k < 2; ++k)
    v[k] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // 128-bit lane j: [v_j[0] + v_j[2], v_j[1] + v_j[3], the same of v_j+4].
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane j: dot j at its element 0, dot j + 4 at element 1.
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, r));
}
inline void pair_sums16x8(const F16* t, float* out) { _mm256_storeu_ps(out, pair_sums16x8v(t)); }
// dot16(a_k, b_k) for the 8 pairs ab(k, a_k, b_k) gives, in one register, bit
// for bit: hsums8x8 of the fused halves, as the AVX2 variant sums them.
template <class Pair>
inline __m256 dots16x8v(Pair ab) {
  __m256 t[8];
  for (int k = 0; k < 8; ++k) {
    F16 a, b;
    ab(k, a, b);
    t[k] = fused_halves(a, b);
  }
  return hsums8x8(t);
}
// out[k] = c dot16(a_k, b_k) + add[k], multiplied and added in registers.
template <class Pair>
inline void scaled_dots16x8(Pair ab, float c, const float* add, float* out) {
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_mul_ps(dots16x8v(ab), _mm256_set1_ps(c)), _mm256_loadu_ps(add)));
}

// sum_h log x_h over 16 floats with one log: x = m 2^e with m in [1, 2)
// (vgetmantps/vgetexpps), so sum log x = log(prod m) + e_sum ln2, and prod m
// < 2^16 cannot overflow (15 products: ~8 ulp, ~1e-6 absolute, the size of
// the rounding of 16 summed logs). If any lane is not normal, positive and
// finite (0, inf, NaN, denormals), the lane-wise log16 is summed instead. The
// AVX2 variant's order throughout (hprod8 of the halves' products,
// pair_sum16), so its bits.
inline float sum_log16(__m512 x) {
  const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MIN), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ);
  if (ok != 0xffff) return pair_sum16(log16(x));
  const __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  const float p = hprod8(_mm256_mul_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1)));
  const float e_sum = _mm512_reduce_add_ps(_mm512_getexp_ps(x));  // small integers: exact in any order
  return float(double(std::log(p)) + double(e_sum) * std::numbers::ln2);
}

using Vec = __m512;
inline Vec bcastv(float x) { return _mm512_set1_ps(x); }
inline Vec addv(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec subv(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec mulv(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec divv(Vec a, Vec b) { return _mm512_div_ps(a, b); }
// std::max(a, b) = a < b ? b : a: vmaxps gives its second operand when unordered.
inline Vec maxv(Vec a, Vec b) { return _mm512_max_ps(b, a); }
inline Vec expv(Vec x) { return exp16(x); }
inline Vec logv(Vec x) { return log16(x); }
inline __m512i sign_bits() { return _mm512_set1_epi32(int(0x80000000u)); }
inline Vec negv(Vec x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign_bits())); }
inline Vec neg_absv(Vec x) { return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), sign_bits())); }
inline Vec min0v(Vec z) { return _mm512_min_ps(_mm512_setzero_ps(), z); }  // vminps: a NaN z stays
inline Vec if_zerov(Vec c, Vec x, Vec y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, _mm512_setzero_ps(), _CMP_EQ_OQ), y, x);
}
inline Vec zero_if_lessv(Vec x, float lo, Vec y) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(lo), _CMP_NLT_UQ), y);
}
inline Vec pow2v(Vec n) {  // 2^n, n integral in [-126, 127]
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}

struct Whole {
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec x) { _mm512_storeu_ps(p, x); }
};
struct Masked {  // masked-off lanes are neither read nor written
  __mmask16 m;
  Vec load(const float* p) const { return _mm512_maskz_loadu_ps(m, p); }
  void store(float* p, Vec x) const { _mm512_mask_storeu_ps(p, m, x); }
};
// Whole registers, then eight floats under a mask where eight are left, then
// the scalar code: the AVX2 variant's split of a run between vector and
// scalar code (its registers are eight floats), so the same bits.
template <class VecFn, class ScalarFn>
inline void for_runs(size_t n, VecFn vec, ScalarFn scalar) {
  size_t k = 0;
  for (; k + 16 <= n; k += 16) vec(k, Whole{});
  if (k + 8 <= n) vec(k, Masked{__mmask16(0xff)}), k += 8;
  for (; k < n; ++k) scalar(k);
}

// cols[j] lane k = x[k stride + j] for j, k < 16: a 16 x 16 block transposed
// (pairs of rows interleaved, then quadruples, then 128-bit lanes twice).
inline void cols_of_rows(Vec* cols, const float* x, size_t stride) {
  __m512 t[16], u[16];
  for (int k = 0; k < 16; k += 2) {
    const __m512 a = _mm512_loadu_ps(x + k * stride), b = _mm512_loadu_ps(x + (k + 1) * stride);
    t[k] = _mm512_unpacklo_ps(a, b);  // a0 b0 a1 b1, each 128-bit lane
    t[k + 1] = _mm512_unpackhi_ps(a, b);  // a2 b2 a3 b3
  }
  for (int k = 0; k < 16; k += 4) {  // u[k + m], lane L: column 4 L + m of rows k .. k + 3
    u[k] = _mm512_shuffle_ps(t[k], t[k + 2], 0x44);
    u[k + 1] = _mm512_shuffle_ps(t[k], t[k + 2], 0xEE);
    u[k + 2] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    u[k + 3] = _mm512_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512 x0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), x1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
    const __m512 y0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88),
                 y1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
    cols[m] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    cols[4 + m] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    cols[8 + m] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
    cols[12 + m] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
  }
}

constexpr int kMomentJ = 16;  // one pass over a child's whole row of 16 parents for the means

}  // namespace
}  // namespace vg
