// The 16-float vector the AVX-512 kernel families work in (a 4x4 matrix, a
// capsule or pose vector) and the helpers more than one of them uses, for files
// built with -mavx512f -mavx512vl -mavx512dq -mfma only: internal linkage, so
// each such file keeps its own copy and no AVX-512 code is ever linked into
// another ISA's callers.
#pragma once
#include "kernels/avx512_intrinsics.h"

namespace vg {
namespace {

// One zmm register.
using F16 = __m512;
inline F16 zero16() { return _mm512_setzero_ps(); }
inline F16 load16(const float* p) { return _mm512_loadu_ps(p); }
inline void store16(float* p, F16 x) { _mm512_storeu_ps(p, x); }
inline F16 bcast16(float x) { return _mm512_set1_ps(x); }
inline F16 add16(F16 a, F16 b) { return _mm512_add_ps(a, b); }
inline F16 mul16(F16 a, F16 b) { return _mm512_mul_ps(a, b); }
inline F16 fma16(F16 a, F16 b, F16 acc) { return _mm512_fmadd_ps(a, b, acc); }
// One 4-float row in all four 128-bit lanes (vbroadcastf32x4 from memory).
inline F16 bcast_row(const float* p) { return _mm512_broadcast_f32x4(_mm_loadu_ps(p)); }

}  // namespace
}  // namespace vg
