#include "kernels/elementwise.h"

namespace vg {

namespace {
// The kernel list: one line per variant this build has.
const ElementwiseKernels kVariants[] = {
    {Isa::scalar, adam_update_f32__scalar, relu_backward_f32__scalar, transpose_f32__scalar, normal_f32__scalar},
#if defined(__x86_64__)
    {Isa::avx2, adam_update_f32__avx2, relu_backward_f32__avx2, transpose_f32__avx2, normal_f32__avx2},
    // The transpose's 8 x 8 ymm tiles serve AVX-512 too: a layer's input has 32
    // rows (the batch), and wider tiles would only add shuffles. So does the
    // AVX2 noise: it is a small share of a run (docs/performance.md#the-datasets-noise).
    {Isa::avx512, adam_update_f32__avx512, relu_backward_f32__avx512, transpose_f32__avx2, normal_f32__avx2},
#endif
#if defined(__aarch64__)
    {Isa::neon, adam_update_f32__neon, relu_backward_f32__neon, transpose_f32__neon, normal_f32__neon},
#endif
};
}  // namespace

const ElementwiseKernels* elementwise_variants(int* count) {
  *count = int(sizeof(kVariants) / sizeof(kVariants[0]));
  return kVariants;
}

const ElementwiseKernels* elementwise_for(Isa isa) {
  for (const auto& k : kVariants)
    if (k.isa == isa) return &k;
  return nullptr;
}

const ElementwiseKernels& elementwise() {
  static const ElementwiseKernels& chosen = []() -> const ElementwiseKernels& {
    const ElementwiseKernels* k = elementwise_for(selected_isa());
    return k ? *k : kVariants[0];
  }();
  return chosen;
}

}  // namespace vg
