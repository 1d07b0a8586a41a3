// AVX2 + FMA convolutional votes (built with -mavx2 -mfma): a 4x4 matrix is
// two ymm registers, rows (0,1) and (2,3).
#include "kernels/vec_avx2.h"

namespace vg {
namespace {
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
