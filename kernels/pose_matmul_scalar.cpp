// Scalar reference of the batched pose matmul (built with -ffp-contract=off).
#include "kernels/pose_matmul.h"

namespace vg {

void pose_matmul_f32__scalar(float* V, const float* M, const float* W, int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i) {
      const float* m = M + (size_t(b) * I + i) * 16;
      for (int j = 0; j < J; ++j) {
        const float* w = W + (size_t(i) * J + j) * 16;
        float* v = V + ((size_t(b) * I + i) * J + j) * 16;
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 4; ++c) {
            float s = 0.f;
            for (int k = 0; k < 4; ++k) s += m[r * 4 + k] * w[k * 4 + c];
            v[r * 4 + c] = s;
          }
      }
    }
}

void pose_matmul_backward_f32__scalar(float* dM, float* dW, const float* dV, const float* M,
                                      const float* W, int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i) {
      const float* m = M + (size_t(b) * I + i) * 16;
      float* dm = dM + (size_t(b) * I + i) * 16;
      for (int j = 0; j < J; ++j) {
        const float* w = W + (size_t(i) * J + j) * 16;
        float* dw = dW + (size_t(i) * J + j) * 16;
        const float* dv = dV + ((size_t(b) * I + i) * J + j) * 16;
        // dM[r,k] += sum_c dV[r,c] W[k,c];  dW[k,c] += sum_r M[r,k] dV[r,c]
        for (int r = 0; r < 4; ++r)
          for (int k = 0; k < 4; ++k) {
            float s = 0.f;
            for (int c = 0; c < 4; ++c) s += dv[r * 4 + c] * w[k * 4 + c];
            dm[r * 4 + k] += s;
          }
        for (int k = 0; k < 4; ++k)
          for (int c = 0; c < 4; ++c) {
            float s = 0.f;
            for (int r = 0; r < 4; ++r) s += m[r * 4 + k] * dv[r * 4 + c];
            dw[k * 4 + c] += s;
          }
      }
    }
}

}  // namespace vg
