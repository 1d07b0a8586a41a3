// AVX-512 dynamic-routing kernels (built with -mavx512f -mavx512vl -mavx512dq
// -mfma): a 16-D capsule vector is one zmm register.
#include "kernels/avx512_intrinsics.h"

namespace vg {
namespace {
using F16 = __m512;
inline F16 zero16() { return _mm512_setzero_ps(); }
inline F16 load16(const float* p) { return _mm512_loadu_ps(p); }
inline void store16(float* p, F16 x) { _mm512_storeu_ps(p, x); }
inline F16 bcast16(float x) { return _mm512_set1_ps(x); }
inline F16 fma16(F16 a, F16 b, F16 acc) { return _mm512_fmadd_ps(a, b, acc); }
inline F16 mul16(F16 a, F16 b) { return _mm512_mul_ps(a, b); }
inline F16 add16(F16 a, F16 b) { return _mm512_add_ps(a, b); }
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
