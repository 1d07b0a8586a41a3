// Scalar reference of the dynamic-routing kernels (built with -ffp-contract=off).
#include <algorithm>
#include <cmath>

#include "kernels/dr_routing.h"

namespace vg {

namespace {
constexpr int K = kDrInDim, H = kDrOutDim;
}  // namespace

void dr_predict_f32__scalar(float* uhat, const float* u, const float* W, int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i) {
      const float* x = u + (size_t(b) * I + i) * K;
      for (int j = 0; j < J; ++j) {
        const float* w = W + (size_t(i) * J + j) * K * H;
        float* y = uhat + ((size_t(b) * I + i) * J + j) * H;
        for (int h = 0; h < H; ++h) {
          float acc = 0.f;
          for (int k = 0; k < K; ++k) acc += x[k] * w[k * H + h];
          y[h] = acc;
        }
      }
    }
}

void dr_predict_backward_f32__scalar(float* du, float* dW, const float* duhat, const float* u,
                                     const float* W, int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i) {
      const float* x = u + (size_t(b) * I + i) * K;
      float* dx = du + (size_t(b) * I + i) * K;
      for (int j = 0; j < J; ++j) {
        const float* w = W + (size_t(i) * J + j) * K * H;
        float* dw = dW + (size_t(i) * J + j) * K * H;
        const float* g = duhat + ((size_t(b) * I + i) * J + j) * H;
        for (int k = 0; k < K; ++k) {
          float acc = 0.f;
          for (int h = 0; h < H; ++h) acc += w[k * H + h] * g[h];
          dx[k] += acc;
          for (int h = 0; h < H; ++h) dw[k * H + h] += x[k] * g[h];
        }
      }
    }
}

void dr_combine_f32__scalar(float* s, float* c, const float* logits, const float* uhat, int B, int I,
                            int J) {
  for (int b = 0; b < B; ++b) {
    float* sb = s + size_t(b) * J * H;
    std::fill_n(sb, J * H, 0.f);
    for (int i = 0; i < I; ++i) {
      const float* l = logits + (size_t(b) * I + i) * J;
      float* ci = c + (size_t(b) * I + i) * J;
      float mx = l[0];
      for (int j = 1; j < J; ++j) mx = std::max(mx, l[j]);
      float z = 0.f;
      for (int j = 0; j < J; ++j) z += ci[j] = std::exp(l[j] - mx);
      for (int j = 0; j < J; ++j) ci[j] /= z;
      for (int j = 0; j < J; ++j) {
        const float* x = uhat + ((size_t(b) * I + i) * J + j) * H;
        for (int h = 0; h < H; ++h) sb[j * H + h] += ci[j] * x[h];
      }
    }
  }
}

void dr_combine_backward_f32__scalar(float* duhat, float* dlogits, const float* ds, const float* c,
                                     const float* uhat, int B, int I, int J) {
  for (int b = 0; b < B; ++b) {
    const float* g = ds + size_t(b) * J * H;
    for (int i = 0; i < I; ++i) {
      const float* ci = c + (size_t(b) * I + i) * J;
      float dc[64];
      float cdc = 0.f;
      for (int j = 0; j < J; ++j) {
        const float* x = uhat + ((size_t(b) * I + i) * J + j) * H;
        float* dx = duhat + ((size_t(b) * I + i) * J + j) * H;
        float dot = 0.f;
        for (int h = 0; h < H; ++h) {
          dx[h] += ci[j] * g[j * H + h];
          dot += x[h] * g[j * H + h];
        }
        dc[j] = dot;
        cdc += ci[j] * dot;
      }
      if (dlogits == nullptr) continue;
      float* dl = dlogits + (size_t(b) * I + i) * J;
      for (int j = 0; j < J; ++j) dl[j] += ci[j] * (dc[j] - cdc);
    }
  }
}

void dr_agree_f32__scalar(float* logits_out, const float* logits_in, const float* uhat, const float* v,
                          int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) {
        const float* x = uhat + ((size_t(b) * I + i) * J + j) * H;
        const float* vj = v + (size_t(b) * J + j) * H;
        float dot = 0.f;
        for (int h = 0; h < H; ++h) dot += x[h] * vj[h];
        const size_t n = (size_t(b) * I + i) * J + j;
        logits_out[n] = logits_in[n] + dot;
      }
}

void dr_agree_backward_f32__scalar(float* dv, float* duhat, const float* dlogits, const float* uhat,
                                   const float* v, int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) {
        const size_t n = (size_t(b) * I + i) * J + j;
        const float* x = uhat + n * H;
        float* dx = duhat + n * H;
        const float* vj = v + (size_t(b) * J + j) * H;
        float* dvj = dv + (size_t(b) * J + j) * H;
        for (int h = 0; h < H; ++h) {
          dvj[h] += dlogits[n] * x[h];
          dx[h] += dlogits[n] * vj[h];
        }
      }
}

}  // namespace vg
