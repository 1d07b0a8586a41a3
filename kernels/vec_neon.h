// The 16-float vector the NEON kernel families work in (a 4x4 matrix, a
// capsule or pose vector) and the helpers more than one of them uses, for
// AArch64 files (Advanced SIMD needs no extra flags); internal linkage, as the
// x86 ISAs' vec_*.h, so each file keeps its own copy.
#pragma once
#include <arm_neon.h>

namespace vg {
namespace {

// Four q registers: floats 0-3, 4-7, 8-11, 12-15.
struct F16 {
  float32x4_t q[4];
};
inline F16 zero16() { return {{vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f)}}; }
inline F16 load16(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}}; }
// Operands only read are taken by const&: GCC allocates the EM kernels'
// registers differently when they are passed by value (the same results).
inline void store16(float* p, const F16& x) {
  for (int k = 0; k < 4; ++k) vst1q_f32(p + 4 * k, x.q[k]);
}
inline F16 bcast16(float x) { return {{vdupq_n_f32(x), vdupq_n_f32(x), vdupq_n_f32(x), vdupq_n_f32(x)}}; }
inline F16 add16(F16 a, const F16& b) {
  for (int k = 0; k < 4; ++k) a.q[k] = vaddq_f32(a.q[k], b.q[k]);
  return a;
}
inline F16 mul16(F16 a, const F16& b) {
  for (int k = 0; k < 4; ++k) a.q[k] = vmulq_f32(a.q[k], b.q[k]);
  return a;
}
inline F16 fma16(const F16& a, const F16& b, F16 acc) {
  for (int k = 0; k < 4; ++k) acc.q[k] = vfmaq_f32(acc.q[k], a.q[k], b.q[k]);
  return acc;
}
inline float hsum16(const F16& x) {
  return vaddvq_f32(vaddq_f32(vaddq_f32(x.q[0], x.q[1]), vaddq_f32(x.q[2], x.q[3])));
}

}  // namespace
}  // namespace vg
