// Elementwise loops of the training step: the Adam update over a model's flat
// parameter memory, the ReLU backward mask, and the transpose of a dense layer's
// input for its weight gradient; and the Gaussian noise of data synthesis and
// initialisation (Philox words through Box-Muller). Every variant does
// the same IEEE operations in the same order (mul, add, sqrt, div are correctly
// rounded and nothing is contracted into an FMA), so all give the same bits and
// the choice of ISA never changes a result. Tests check that bit for bit.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/rng.h"
#include "kernels/isa.h"

namespace vg {

// Adam with the bias corrections hoisted (Kingma & Ba, Alg. 1), over n floats:
//   m = b1 m + (1 - b1) g
//   v = b2 v + (1 - b2) g g
//   w -= (lr_c1 m) / (sqrt(v) inv_sqrt_c2 + eps)
// with lr_c1 = lr / (1 - b1^t) and inv_sqrt_c2 = 1 / sqrt(1 - b2^t).
using AdamUpdateFn = void (*)(float* w, float* m, float* v, const float* g, size_t n, float b1,
                              float b2, float lr_c1, float inv_sqrt_c2, float eps);
// d[k] = y[k] > 0 ? d[k] : 0 (in place; y is the ReLU's output).
using ReluBackwardFn = void (*)(float* d, const float* y, size_t n);
// dst (cols x rows, row-major) = src (rows x cols, row-major) transposed.
using TransposeFn = void (*)(float* dst, const float* src, int rows, int cols);

// out[0, n) = N(0, std^2) from the Philox stream (key, sub) starting at block
// ctr0 (core/rng.h): block b's four words give out[4b .. 4b+3], two
// Box-Muller pairs (normal_pair below); an odd n keeps the last pair's first value.
using NormalFn = void (*)(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0);

// The scalar transpose of rows [r0, r1) and columns [c0, c1): the reference, and
// the SIMD variants' edges.
inline void transpose_rect(float* dst, const float* src, int rows, int cols, int r0, int r1, int c0,
                           int c1) {
  for (int r = r0; r < r1; ++r)
    for (int c = c0; c < c1; ++c) dst[size_t(c) * rows + r] = src[size_t(r) * cols + c];
}

// One Box-Muller pair from two Philox words: r = std sqrt(-2 ln u1) with u1 in
// (0, 1) from w1's top 23 bits, and the angle 2 pi u2 with u2 = (w2 >> 8) / 2^24.
// glibc's logf/sincosf have no vector form with their bits, so the functions are
// our own and every variant does these float operations in this order: the
// noise, and so every dataset byte and initial weight, is the same on every ISA.
//  - ln u1 = e ln2 + 2 atanh(t), t = (f - 1) / (f + 1), u1 = 2^e f with f in
//    [sqrt(1/2), sqrt(2)): |t| <= 0.172, so atanh's series to t^9 leaves < 1e-9.
//  - The angle reduces exactly: u2 = q/4 + x with x in [-1/8, 1/8) (integer
//    arithmetic on the word), sin and cos of 2 pi x by Taylor series to x^9 and
//    x^10 (next terms < 2e-10), then rotated by q quarter turns.
// Accuracy against double libm: tests (Elementwise.ReferenceNormalPairIsBoxMuller).
struct NormalPairConsts {
  static constexpr double kTau = 6.283185307179586;
  static constexpr float kLn2 = 0.693147182f, kSqrt2 = 1.41421354f;
  static constexpr float kA3 = float(1.0 / 3), kA5 = float(1.0 / 5), kA7 = float(1.0 / 7), kA9 = float(1.0 / 9);
  static constexpr float kS1 = float(kTau), kS3 = float(-kTau * kTau * kTau / 6),
                         kS5 = float(kTau * kTau * kTau * kTau * kTau / 120),
                         kS7 = float(-kTau * kTau * kTau * kTau * kTau * kTau * kTau / 5040),
                         kS9 = float(kTau * kTau * kTau * kTau * kTau * kTau * kTau * kTau * kTau / 362880);
  static constexpr float kC2 = float(-kTau * kTau / 2), kC4 = float(kTau * kTau * kTau * kTau / 24),
                         kC6 = float(-kTau * kTau * kTau * kTau * kTau * kTau / 720),
                         kC8 = float(kTau * kTau * kTau * kTau * kTau * kTau * kTau * kTau / 40320),
                         kC10 = float(-kTau * kTau * kTau * kTau * kTau * kTau * kTau * kTau * kTau * kTau / 3628800);
};

inline void normal_pair(uint32_t w1, uint32_t w2, float std, float* c_out, float* s_out) {
  using K = NormalPairConsts;
  // ln u1
  const float u1 = (float(int32_t(w1 >> 9)) + 0.5f) * 0x1.0p-23f;  // exact, in [2^-24, 1 - 2^-24]
  uint32_t bits;
  std::memcpy(&bits, &u1, 4);
  int32_t e = int32_t(bits >> 23) - 127;
  bits = (bits & 0x7FFFFFu) | 0x3F800000u;
  float f;
  std::memcpy(&f, &bits, 4);
  if (f > K::kSqrt2) { f = f * 0.5f; e = e + 1; }
  const float t = (f - 1.f) / (f + 1.f), t2 = t * t;
  float p = K::kA9;
  p = p * t2 + K::kA7;
  p = p * t2 + K::kA5;
  p = p * t2 + K::kA3;
  p = p * t2 + 1.f;
  const float ln_u1 = float(e) * K::kLn2 + (t + t) * p;
  const float r = std * std::sqrt(-2.f * ln_u1);
  // sin and cos of 2 pi u2
  const int32_t j = int32_t(w2 >> 8), q = (j + (1 << 21)) >> 22;
  const float x = float(j - (q << 22)) * 0x1.0p-24f, x2 = x * x;
  float ps = K::kS9;
  ps = ps * x2 + K::kS7;
  ps = ps * x2 + K::kS5;
  ps = ps * x2 + K::kS3;
  ps = ps * x2 + K::kS1;
  const float sn = ps * x;
  float pc = K::kC10;
  pc = pc * x2 + K::kC8;
  pc = pc * x2 + K::kC6;
  pc = pc * x2 + K::kC4;
  pc = pc * x2 + K::kC2;
  const float cs = pc * x2 + 1.f;
  const bool odd = q & 1;
  float c = odd ? sn : cs, s = odd ? cs : sn;
  if (((q + 1) & 2) != 0) c = -c;  // quarter turns 1, 2
  if ((q & 2) != 0) s = -s;        // quarter turns 2, 3
  *c_out = r * c;
  *s_out = r * s;
}

void normal_f32__scalar(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0);
void adam_update_f32__scalar(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__scalar(float* d, const float* y, size_t n);
void transpose_f32__scalar(float* dst, const float* src, int rows, int cols);
#if defined(__x86_64__)
void adam_update_f32__avx2(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__avx2(float* d, const float* y, size_t n);
void transpose_f32__avx2(float* dst, const float* src, int rows, int cols);
void normal_f32__avx2(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0);
void adam_update_f32__avx512(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__avx512(float* d, const float* y, size_t n);
#endif
#if defined(__aarch64__)
void adam_update_f32__neon(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__neon(float* d, const float* y, size_t n);
void transpose_f32__neon(float* dst, const float* src, int rows, int cols);
void normal_f32__neon(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0);
#endif

struct ElementwiseKernels {
  Isa isa;
  AdamUpdateFn adam_update;
  ReluBackwardFn relu_backward;
  TransposeFn transpose;
  NormalFn normal;
};

// Every variant this build has; the variant for `isa` (nullptr if none); the
// one chosen at start-up (selected_isa(), falling back to scalar).
const ElementwiseKernels* elementwise_variants(int* count);
const ElementwiseKernels* elementwise_for(Isa isa);
const ElementwiseKernels& elementwise();

// n values of N(0, std^2) in float from stream s, for bulk noise and
// initialisation: the kernel `normal` (Box-Muller on one 32-bit word per
// uniform, both values of a pair kept; the same bits on every ISA), from the
// stream's next whole block on.
inline void fill_normal(Stream& s, float* out, size_t n, float std) {
  const uint64_t ctr0 = s.take_blocks((n + 3) / 4);
  elementwise().normal(out, n, std, s.key(), s.sub(), ctr0);
}
inline void fill_normal(Stream&& s, float* out, size_t n, float std) { fill_normal(s, out, n, std); }

// Bytes moved per element: Adam reads w, m, v, g and writes w, m, v.
inline constexpr double kAdamBytesPerParam = 7 * sizeof(float);

}  // namespace vg
