// AVX2 + FMA dynamic-routing kernels (built with -mavx2 -mfma): a 16-D capsule
// vector is two ymm registers.
#include "kernels/vec_avx2.h"

namespace vg {
namespace {
inline float hsum16(F16 x) {
  const __m256 h = _mm256_add_ps(x.lo, x.hi);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
}  // namespace
}  // namespace vg

#include "kernels/dr_routing_simd.h"

VG_DR_DEFINE(avx2)
