// AVX2 + FMA dynamic-routing kernels (built with -mavx2 -mfma): a 16-D capsule
// vector is two ymm registers.
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
inline F16 bcast16(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
inline F16 fma16(F16 a, F16 b, F16 acc) { return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)}; }
inline F16 mul16(F16 a, F16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline F16 add16(F16 a, F16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
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
