// AVX2 + FMA convolutional votes (built with -mavx2 -mfma): a 4x4 matrix is
// two ymm registers, rows (0,1) and (2,3).
#include <immintrin.h>

namespace vg {
namespace {
struct F16 {
  __m256 lo, hi;
};
inline F16 zero16() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline F16 load16(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void store16(float* p, F16 x) {
  _mm256_storeu_ps(p, x.lo);
  _mm256_storeu_ps(p + 8, x.hi);
}
inline F16 add16(F16 a, F16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline F16 mul16(F16 a, F16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline F16 fma16(F16 a, F16 b, F16 acc) { return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)}; }
// One 4-float row in both 128-bit lanes of both halves (a load, no shuffle).
inline F16 bcast_row(const float* p) {
  const __m256 r = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  return {r, r};
}
template <int k>
inline F16 col(F16 m) {
  return {_mm256_permute_ps(m.lo, k * 0x55), _mm256_permute_ps(m.hi, k * 0x55)};
}
inline F16 spread_row(const float* p) {
  const __m256 r = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
  return {_mm256_permutevar_ps(r, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
          _mm256_permutevar_ps(r, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3))};
}
// Lane c takes lane (c - s) % 4: imm8 0x93, 0x4E, 0x39 for s = 1, 2, 3.
template <int s>
inline F16 rot(F16 x) {
  constexpr int imm = s == 1 ? 0x93 : s == 2 ? 0x4E : 0x39;
  return {_mm256_permute_ps(x.lo, imm), _mm256_permute_ps(x.hi, imm)};
}
}  // namespace
}  // namespace vg

#include "kernels/conv_votes_simd.h"

VG_CV_DEFINE(avx2)
