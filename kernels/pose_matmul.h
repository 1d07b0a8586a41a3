// Batched 4x4 pose matmul: the votes of matrix capsules, V[b,i,j] = M[b,i] W[i,j].
//   M  B x I x 16      pose of lower capsule i (row-major 4x4)
//   W  I x J x 16      transformation from lower i to upper j
//   V  B x I x J x 16  votes
// One scalar reference; ISA variants plug into the same signatures.
#pragma once
#include "kernels/isa.h"

namespace vg {

// V = M W (overwrites V).
using PoseMatmulFn = void (*)(float* V, const float* M, const float* W, int B, int I, int J);
// dM += dV W^T, dW += sum_b M^T dV (accumulates into both).
using PoseMatmulBackwardFn = void (*)(float* dM, float* dW, const float* dV, const float* M,
                                      const float* W, int B, int I, int J);

void pose_matmul_f32__scalar(float* V, const float* M, const float* W, int B, int I, int J);
void pose_matmul_backward_f32__scalar(float* dM, float* dW, const float* dV, const float* M,
                                      const float* W, int B, int I, int J);

// ISA variants (same contracts); each exists only in builds for its architecture.
#if defined(__x86_64__)
void pose_matmul_f32__avx2(float* V, const float* M, const float* W, int B, int I, int J);
void pose_matmul_backward_f32__avx2(float* dM, float* dW, const float* dV, const float* M,
                                    const float* W, int B, int I, int J);
void pose_matmul_f32__avx512(float* V, const float* M, const float* W, int B, int I, int J);
void pose_matmul_backward_f32__avx512(float* dM, float* dW, const float* dV, const float* M,
                                      const float* W, int B, int I, int J);
#endif
#if defined(__aarch64__)
void pose_matmul_f32__neon(float* V, const float* M, const float* W, int B, int I, int J);
void pose_matmul_backward_f32__neon(float* dM, float* dW, const float* dV, const float* M,
                                    const float* W, int B, int I, int J);
#endif

struct PoseMatmulKernels {
  Isa isa;
  PoseMatmulFn forward;
  PoseMatmulBackwardFn backward;
};

// Every variant this build has (supported by the CPU or not): tests and
// benchmarks iterate over it.
const PoseMatmulKernels* pose_matmul_variants(int* count);
// The variant for `isa`, or nullptr if this build has none.
const PoseMatmulKernels* pose_matmul_for(Isa isa);
// The variant chosen at start-up (selected_isa(), falling back to scalar).
const PoseMatmulKernels& pose_matmul();

}  // namespace vg
