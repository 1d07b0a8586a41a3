// NEON dynamic-routing kernels (AArch64 Advanced SIMD, no extra flags): a 16-D
// capsule vector is four q registers.
#include <arm_neon.h>

namespace vg {
namespace {
struct F16 {
  float32x4_t q[4];
};
inline F16 zero16() { return {{vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f)}}; }
inline F16 load16(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}}; }
inline void store16(float* p, F16 x) {
  for (int k = 0; k < 4; ++k) vst1q_f32(p + 4 * k, x.q[k]);
}
inline F16 bcast16(float x) { return {{vdupq_n_f32(x), vdupq_n_f32(x), vdupq_n_f32(x), vdupq_n_f32(x)}}; }
inline F16 fma16(F16 a, F16 b, F16 acc) {
  for (int k = 0; k < 4; ++k) acc.q[k] = vfmaq_f32(acc.q[k], a.q[k], b.q[k]);
  return acc;
}
inline F16 mul16(F16 a, F16 b) {
  for (int k = 0; k < 4; ++k) a.q[k] = vmulq_f32(a.q[k], b.q[k]);
  return a;
}
inline F16 add16(F16 a, F16 b) {
  for (int k = 0; k < 4; ++k) a.q[k] = vaddq_f32(a.q[k], b.q[k]);
  return a;
}
inline float hsum16(F16 x) { return vaddvq_f32(vaddq_f32(vaddq_f32(x.q[0], x.q[1]), vaddq_f32(x.q[2], x.q[3]))); }
}  // namespace
}  // namespace vg

#include "kernels/dr_routing_simd.h"

VG_DR_DEFINE(neon)
