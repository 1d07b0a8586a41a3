// The 16-float vector the AVX2 kernel families work in (a 4x4 matrix, a
// capsule or pose vector) and the helpers more than one of them uses, for files
// built with -mavx2 -mfma only: internal linkage, so each such file keeps its
// own copy and no AVX2 code is ever linked into another ISA's callers.
#pragma once
#include <immintrin.h>

namespace vg {
namespace {

// Two ymm registers: floats 0-7 and 8-15.
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
inline F16 add16(F16 a, F16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline F16 mul16(F16 a, F16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline F16 fma16(F16 a, F16 b, F16 acc) { return {_mm256_fmadd_ps(a.lo, b.lo, acc.lo), _mm256_fmadd_ps(a.hi, b.hi, acc.hi)}; }

}  // namespace
}  // namespace vg
