// Elementwise loops of the training step: the Adam update over a model's flat
// parameter memory, the ReLU backward mask, and the transpose of a dense layer's
// input for its weight gradient. Memory-bound; every variant does
// the same IEEE operations in the same order (mul, add, sqrt, div are correctly
// rounded and nothing is contracted into an FMA), so all give the same bits and
// the choice of ISA never changes a result. Tests check that bit for bit.
#pragma once
#include <cstddef>

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

// The scalar transpose of rows [r0, r1) and columns [c0, c1): the reference, and
// the SIMD variants' edges.
inline void transpose_rect(float* dst, const float* src, int rows, int cols, int r0, int r1, int c0,
                           int c1) {
  for (int r = r0; r < r1; ++r)
    for (int c = c0; c < c1; ++c) dst[size_t(c) * rows + r] = src[size_t(r) * cols + c];
}

void adam_update_f32__scalar(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__scalar(float* d, const float* y, size_t n);
void transpose_f32__scalar(float* dst, const float* src, int rows, int cols);
#if defined(__x86_64__)
void adam_update_f32__avx2(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__avx2(float* d, const float* y, size_t n);
void transpose_f32__avx2(float* dst, const float* src, int rows, int cols);
void adam_update_f32__avx512(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__avx512(float* d, const float* y, size_t n);
#endif
#if defined(__aarch64__)
void adam_update_f32__neon(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__neon(float* d, const float* y, size_t n);
void transpose_f32__neon(float* dst, const float* src, int rows, int cols);
#endif

struct ElementwiseKernels {
  Isa isa;
  AdamUpdateFn adam_update;
  ReluBackwardFn relu_backward;
  TransposeFn transpose;
};

// Every variant this build has; the variant for `isa` (nullptr if none); the
// one chosen at start-up (selected_isa(), falling back to scalar).
const ElementwiseKernels* elementwise_variants(int* count);
const ElementwiseKernels* elementwise_for(Isa isa);
const ElementwiseKernels& elementwise();

// Bytes moved per element: Adam reads w, m, v, g and writes w, m, v.
inline constexpr double kAdamBytesPerParam = 7 * sizeof(float);

}  // namespace vg
