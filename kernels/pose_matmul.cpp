#include "kernels/pose_matmul.h"

namespace vg {

namespace {
// The kernel list: one line per variant this build has.
const PoseMatmulKernels kVariants[] = {
    {Isa::scalar, pose_matmul_f32__scalar, pose_matmul_backward_f32__scalar},
#if defined(__x86_64__)
    {Isa::avx2, pose_matmul_f32__avx2, pose_matmul_backward_f32__avx2},
    {Isa::avx512, pose_matmul_f32__avx512, pose_matmul_backward_f32__avx512},
#endif
#if defined(__aarch64__)
    {Isa::neon, pose_matmul_f32__neon, pose_matmul_backward_f32__neon},
#endif
};
}  // namespace

const PoseMatmulKernels* pose_matmul_variants(int* count) {
  *count = int(sizeof(kVariants) / sizeof(kVariants[0]));
  return kVariants;
}

const PoseMatmulKernels* pose_matmul_for(Isa isa) {
  for (const auto& k : kVariants)
    if (k.isa == isa) return &k;
  return nullptr;
}

const PoseMatmulKernels& pose_matmul() {
  static const PoseMatmulKernels& chosen = [] () -> const PoseMatmulKernels& {
    const PoseMatmulKernels* k = pose_matmul_for(selected_isa());
    return k ? *k : kVariants[0];
  }();
  return chosen;
}

}  // namespace vg
