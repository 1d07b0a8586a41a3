// The eight-float horizontal sums of EM routing on x86-64, shared by the AVX2
// and AVX-512 primitives (em_routing_avx2.h, em_routing_avx512.h) so that both
// variants sum in one order and give the same bits, which is what lets
// --reproducible run the AVX-512 kernels (docs/reproducibility.md). For files
// built with -mavx2 -mfma or wider; each keeps its own internally linked copy.
#pragma once
#include <immintrin.h>

namespace vg {
namespace {

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The product of 8 floats in hsum8's order (halves, then lanes 0*2 and 1*3,
// then 0*1): sum_log16's product of mantissas.
inline float hprod8(__m256 v) {
  __m128 p = _mm_mul_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  p = _mm_mul_ps(p, _mm_movehl_ps(p, p));
  p = _mm_mul_ss(p, _mm_movehdup_ps(p));
  return _mm_cvtss_f32(p);
}

// hsum8(t[k]) for 8 registers in one, in order, bit for bit: summed
// transposed, each lane taking hsum8's additions (halves, then lanes 0+2 and
// 1+3, then 0+1), so ~1 shuffle and add a sum where hsum8 costs 6.
inline __m256 hsums8x8(const __m256* t) {
  __m256 u[4];  // [u_2k | u_2k+1], u_k[i] = t_k[i] + t_k[i + 4]
  for (int k = 0; k < 4; ++k)
    u[k] = _mm256_add_ps(_mm256_permute2f128_ps(t[2 * k], t[2 * k + 1], 0x20),
                         _mm256_permute2f128_ps(t[2 * k], t[2 * k + 1], 0x31));
  __m256 w[2];  // per 128-bit half: [v0, v1] of two dots, v0 = u[0] + u[2], v1 = u[1] + u[3]
  for (int k = 0; k < 2; ++k)
    w[k] = _mm256_add_ps(_mm256_shuffle_ps(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // v0 + v1: dots 0, 2, 4, 6 in the low half, 1, 3, 5, 7 in the high one.
  const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace
}  // namespace vg
