// Scalar reference of the convolutional capsule votes (built with -ffp-contract=off).
#include "kernels/conv_votes.h"

namespace vg {

void conv_votes_forward_f32__scalar(float* V, const float* M, const float* W, const VoteCoords* coords,
                                    const ConvVotesShape& s) {
  const int Ho = s.Ho(), Wo = s.Wo(), kh = s.kh(), kw = s.kw(), st = s.step(), I = s.I(), Ci = s.Ci, Co = s.Co;
  for (int b = 0; b < s.B; ++b)
    for (int oy = 0; oy < Ho; ++oy)
      for (int ox = 0; ox < Wo; ++ox)
        for (int ky = 0; ky < kh; ++ky)
          for (int kx = 0; kx < kw; ++kx) {
            const int y = oy * st + ky, x = ox * st + kx, kpos = s.shared() ? 0 : ky * s.K + kx;
            for (int i = 0; i < Ci; ++i) {
              const float* m = M + ((size_t(b) * s.H + y) * s.W + x) * Ci * 16 + i * 16;
              const float* w = W + (size_t(kpos) * Ci + i) * Co * 16;
              float* v = V + ((((size_t(b) * Ho + oy) * Wo + ox) * I) + (ky * kw + kx) * Ci + i) * Co * 16;
              for (int o = 0; o < Co; ++o, w += 16, v += 16) {
                for (int r = 0; r < 4; ++r)
                  for (int c = 0; c < 4; ++c) {
                    float acc = 0.f;
                    for (int k = 0; k < 4; ++k) acc += m[r * 4 + k] * w[k * 4 + c];
                    v[r * 4 + c] = acc;
                  }
                if (coords) {
                  v[coords->row_elem()] += coords->row[y];
                  v[coords->col_elem()] += coords->col[x];
                }
              }
            }
          }
}

void conv_votes_backward_f32__scalar(float* dM, float* dW, const float* dV, const float* M, const float* W,
                                     const ConvVotesShape& s) {
  const int Ho = s.Ho(), Wo = s.Wo(), kh = s.kh(), kw = s.kw(), st = s.step(), I = s.I(), Ci = s.Ci, Co = s.Co;
  for (int b = 0; b < s.B; ++b)
    for (int oy = 0; oy < Ho; ++oy)
      for (int ox = 0; ox < Wo; ++ox)
        for (int ky = 0; ky < kh; ++ky)
          for (int kx = 0; kx < kw; ++kx) {
            const int y = oy * st + ky, x = ox * st + kx, kpos = s.shared() ? 0 : ky * s.K + kx;
            for (int i = 0; i < Ci; ++i) {
              const size_t child = ((size_t(b) * s.H + y) * s.W + x) * Ci * 16 + i * 16;
              const float* m = M + child;
              float* dm = dM + child;
              const float* w = W + (size_t(kpos) * Ci + i) * Co * 16;
              float* dw = dW + (size_t(kpos) * Ci + i) * Co * 16;
              const float* dv = dV + ((((size_t(b) * Ho + oy) * Wo + ox) * I) + (ky * kw + kx) * Ci + i) * Co * 16;
              for (int o = 0; o < Co; ++o, w += 16, dw += 16, dv += 16) {
                // dM[r,k] += sum_c dV[r,c] W[k,c];  dW[k,c] += sum_r M[r,k] dV[r,c]
                for (int r = 0; r < 4; ++r)
                  for (int k = 0; k < 4; ++k) {
                    float acc = 0.f;
                    for (int c = 0; c < 4; ++c) acc += dv[r * 4 + c] * w[k * 4 + c];
                    dm[r * 4 + k] += acc;
                  }
                for (int k = 0; k < 4; ++k)
                  for (int c = 0; c < 4; ++c) {
                    float acc = 0.f;
                    for (int r = 0; r < 4; ++r) acc += m[r * 4 + k] * dv[r * 4 + c];
                    dw[k * 4 + c] += acc;
                  }
              }
            }
          }
}

}  // namespace vg
