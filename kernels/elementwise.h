// Elementwise loops of the training step: the Adam update over a model's flat
// parameter memory and the ReLU backward mask. Memory-bound; every variant does
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

void adam_update_f32__scalar(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__scalar(float* d, const float* y, size_t n);
#if defined(__x86_64__)
void adam_update_f32__avx2(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__avx2(float* d, const float* y, size_t n);
void adam_update_f32__avx512(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__avx512(float* d, const float* y, size_t n);
#endif
#if defined(__aarch64__)
void adam_update_f32__neon(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps);
void relu_backward_f32__neon(float* d, const float* y, size_t n);
#endif

struct ElementwiseKernels {
  Isa isa;
  AdamUpdateFn adam_update;
  ReluBackwardFn relu_backward;
};

// Every variant this build has; the variant for `isa` (nullptr if none); the
// one chosen at start-up (selected_isa(), falling back to scalar).
const ElementwiseKernels* elementwise_variants(int* count);
const ElementwiseKernels* elementwise_for(Isa isa);
const ElementwiseKernels& elementwise();

// Bytes moved per element: Adam reads w, m, v, g and writes w, m, v.
inline constexpr double kAdamBytesPerParam = 7 * sizeof(float);

}  // namespace vg
