// AVX-512 convolutional votes (built with -mavx512f -mavx512vl -mavx512dq
// -mfma): a 4x4 matrix is one zmm register, row r in 128-bit lane r.
#include "kernels/vec_avx512.h"

namespace vg {
namespace {
template <int k>
inline F16 col(F16 m) {
  return _mm512_permute_ps(m, k * 0x55);
}
inline F16 spread_row(const float* p) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  return _mm512_permutexvar_ps(idx, _mm512_zextps128_ps512(_mm_loadu_ps(p)));
}
// Lane c takes lane (c - s) % 4: imm8 0x93, 0x4E, 0x39 for s = 1, 2, 3.
template <int s>
inline F16 rot(F16 x) {
  return _mm512_permute_ps(x, s == 1 ? 0x93 : s == 2 ? 0x4E : 0x39);
}
}  // namespace
}  // namespace vg

#include "kernels/conv_votes_simd.h"

VG_CV_DEFINE(avx512)
