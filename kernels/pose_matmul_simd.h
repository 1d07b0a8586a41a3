// Pieces shared by the SIMD pose-matmul variants (pose_matmul_{avx2,avx512}.cpp
// include it; nothing else should). Anonymous namespace on purpose: each ISA
// file keeps its own internally linked copy (see kernels/em_routing_simd.h).
#pragma once
#include <cstddef>

namespace vg {
namespace {

// For backward's dM = dV W^T without per-j shuffles: packs the diagonals of
// W[i][j] for i in [i0, i1), j in [j0, j1) into diag, block-major:
// diag[((i - i0) * (j1 - j0) + (j - j0)) * 16 + s * 4 + c] = W[i][j][(c + s) % 4][c].
inline void pack_w_diagonals(float* diag, const float* W, int i0, int i1, int j0, int j1, int J) {
  const int nj = j1 - j0;
  for (int i = i0; i < i1; ++i)
    for (int j = j0; j < j1; ++j) {
      const float* w = W + (size_t(i) * J + j) * 16;
      float* d = diag + ((i - i0) * nj + (j - j0)) * 16;
      for (int s = 0; s < 4; ++s)
        for (int c = 0; c < 4; ++c) d[s * 4 + c] = w[((c + s) & 3) * 4 + c];
    }
}

}  // namespace
}  // namespace vg
