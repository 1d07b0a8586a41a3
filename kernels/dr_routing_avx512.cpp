// AVX-512 dynamic-routing kernels (built with -mavx512f -mavx512vl -mavx512dq
// -mfma): a 16-D capsule vector is one zmm register.
#include "kernels/vec_avx512.h"

namespace vg {
namespace {
inline float hsum16(F16 x) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
}  // namespace
}  // namespace vg

#include "kernels/dr_routing_simd.h"

VG_DR_DEFINE(avx512)
