// NEON convolutional votes (AArch64 Advanced SIMD, no extra flags): a 4x4
// matrix is four q registers, one per row.
#include "kernels/vec_neon.h"

namespace vg {
namespace {
inline F16 bcast_row(const float* p) {
  const float32x4_t x = vld1q_f32(p);
  return {{x, x, x, x}};
}
template <int k>
inline F16 col(F16 m) {
  for (int r = 0; r < 4; ++r) m.q[r] = vdupq_laneq_f32(m.q[r], k);
  return m;
}
inline F16 spread_row(const float* p) {
  return {{vld1q_dup_f32(p), vld1q_dup_f32(p + 1), vld1q_dup_f32(p + 2), vld1q_dup_f32(p + 3)}};
}
// Lane c takes lane (c - s) % 4: vext by 4 - s.
template <int s>
inline F16 rot(F16 x) {
  for (int r = 0; r < 4; ++r) x.q[r] = vextq_f32(x.q[r], x.q[r], 4 - s);
  return x;
}
}  // namespace
}  // namespace vg

#include "kernels/conv_votes_simd.h"

VG_CV_DEFINE(neon)
