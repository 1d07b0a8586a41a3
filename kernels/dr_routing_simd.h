// The dynamic-routing kernels written once over a 16-float vector type F16
// (one class-capsule vector: one zmm, two ymm or four q registers). Each ISA
// file (dr_routing_{avx2,avx512,neon}.cpp) defines F16 and its operations
//   F16 zero16(); F16 load16(const float*); void store16(float*, F16);
//   F16 bcast16(float); F16 fma16(F16 a, F16 b, F16 acc) = acc + a b (fused);
//   F16 add16(F16, F16);
//   F16 mul16(F16, F16); float hsum16(F16)
// in an anonymous namespace, then includes this header, which instantiates the
// kernels in that same anonymous namespace: every ISA file keeps its own
// internally linked copy built with its flags (tools/check_isa_objects.sh).
// The softmax's exps are scalar std::exp: I x J of them per iteration, against
// I x J x 16 multiply-adds in the same loop.
#pragma once
#include <algorithm>
#include <cmath>

#include "kernels/dr_routing.h"

namespace vg {
namespace {

constexpr int kK = kDrInDim, kH = kDrOutDim;

inline void predict_simd(float* uhat, const float* u, const float* W, int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i) {
      const float* x = u + (size_t(b) * I + i) * kK;
      F16 xb[kK];
      for (int k = 0; k < kK; ++k) xb[k] = bcast16(x[k]);
      const float* w = W + size_t(i) * J * kK * kH;
      float* y = uhat + (size_t(b) * I + i) * J * kH;
      for (int j = 0; j < J; ++j, w += kK * kH, y += kH) {
        F16 a0 = mul16(xb[0], load16(w)), a1 = mul16(xb[1], load16(w + kH));
        for (int k = 2; k < kK; k += 2) {
          a0 = fma16(xb[k], load16(w + k * kH), a0);
          a1 = fma16(xb[k + 1], load16(w + (k + 1) * kH), a1);
        }
        store16(y, add16(a0, a1));
      }
    }
}

inline void predict_backward_simd(float* du, float* dW, const float* duhat, const float* u, const float* W,
                                  int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i) {
      const float* x = u + (size_t(b) * I + i) * kK;
      F16 xb[kK], acc[kK];
      for (int k = 0; k < kK; ++k) xb[k] = bcast16(x[k]), acc[k] = zero16();
      const float* w = W + size_t(i) * J * kK * kH;
      float* dw = dW + size_t(i) * J * kK * kH;
      const float* g = duhat + (size_t(b) * I + i) * J * kH;
      for (int j = 0; j < J; ++j, w += kK * kH, dw += kK * kH, g += kH) {
        const F16 gj = load16(g);
        for (int k = 0; k < kK; ++k) {
          acc[k] = fma16(load16(w + k * kH), gj, acc[k]);
          store16(dw + k * kH, fma16(xb[k], gj, load16(dw + k * kH)));
        }
      }
      float* dx = du + (size_t(b) * I + i) * kK;
      for (int k = 0; k < kK; ++k) dx[k] += hsum16(acc[k]);
    }
}

inline void combine_simd(float* s, float* c, const float* logits, const float* uhat, int B, int I, int J) {
  for (int b = 0; b < B; ++b) {
    float* cb = c + size_t(b) * I * J;
    const float* l = logits + size_t(b) * I * J;
    for (int i = 0; i < I; ++i) {
      const float mx = *std::max_element(l + i * J, l + i * J + J);
      float z = 0.f;
      for (int j = 0; j < J; ++j) z += cb[i * J + j] = std::exp(l[i * J + j] - mx);
      for (int j = 0; j < J; ++j) cb[i * J + j] /= z;
    }
    // s_j in a register over i.
    const float* x = uhat + size_t(b) * I * J * kH;
    for (int j = 0; j < J; ++j) {
      F16 acc = zero16();
      for (int i = 0; i < I; ++i) acc = fma16(bcast16(cb[i * J + j]), load16(x + (size_t(i) * J + j) * kH), acc);
      store16(s + (size_t(b) * J + j) * kH, acc);
    }
  }
}

inline void combine_backward_simd(float* duhat, float* dlogits, const float* ds, const float* c,
                                  const float* uhat, int B, int I, int J) {
  for (int b = 0; b < B; ++b) {
    const float* g = ds + size_t(b) * J * kH;
    for (int i = 0; i < I; ++i) {
      const size_t row = size_t(b) * I + i;
      const float* ci = c + row * J;
      float dc[64];
      float cdc = 0.f;
      for (int j = 0; j < J; ++j) {
        const F16 gj = load16(g + j * kH);
        float* dx = duhat + (row * J + j) * kH;
        store16(dx, fma16(bcast16(ci[j]), gj, load16(dx)));
        dc[j] = hsum16(mul16(load16(uhat + (row * J + j) * kH), gj));
        cdc += ci[j] * dc[j];
      }
      if (dlogits == nullptr) continue;
      float* dl = dlogits + row * J;
      for (int j = 0; j < J; ++j) dl[j] += ci[j] * (dc[j] - cdc);
    }
  }
}

inline void agree_simd(float* logits_out, const float* logits_in, const float* uhat, const float* v, int B,
                       int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) {
        const size_t n = (size_t(b) * I + i) * J + j;
        logits_out[n] = logits_in[n] + hsum16(mul16(load16(uhat + n * kH), load16(v + (size_t(b) * J + j) * kH)));
      }
}

inline void agree_backward_simd(float* dv, float* duhat, const float* dlogits, const float* uhat, const float* v,
                                int B, int I, int J) {
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      float* dvj = dv + (size_t(b) * J + j) * kH;
      const F16 vj = load16(v + (size_t(b) * J + j) * kH);
      F16 acc = load16(dvj);
      for (int i = 0; i < I; ++i) {
        const size_t n = (size_t(b) * I + i) * J + j;
        const F16 d = bcast16(dlogits[n]);
        acc = fma16(d, load16(uhat + n * kH), acc);
        store16(duhat + n * kH, fma16(d, vj, load16(duhat + n * kH)));
      }
      store16(dvj, acc);
    }
}

}  // namespace
}  // namespace vg

// The exported kernels of one ISA: VG_DR_DEFINE(avx2) in dr_routing_avx2.cpp.
#define VG_DR_DEFINE(isa)                                                                                    \
  namespace vg {                                                                                             \
  void dr_predict_f32__##isa(float* uhat, const float* u, const float* W, int B, int I, int J) {              \
    predict_simd(uhat, u, W, B, I, J);                                                                       \
  }                                                                                                          \
  void dr_predict_backward_f32__##isa(float* du, float* dW, const float* duhat, const float* u,             \
                                      const float* W, int B, int I, int J) {                                 \
    predict_backward_simd(du, dW, duhat, u, W, B, I, J);                                                     \
  }                                                                                                          \
  void dr_combine_f32__##isa(float* s, float* c, const float* logits, const float* uhat, int B, int I,      \
                             int J) {                                                                        \
    combine_simd(s, c, logits, uhat, B, I, J);                                                               \
  }                                                                                                          \
  void dr_combine_backward_f32__##isa(float* duhat, float* dlogits, const float* ds, const float* c,        \
                                      const float* uhat, int B, int I, int J) {                              \
    combine_backward_simd(duhat, dlogits, ds, c, uhat, B, I, J);                                             \
  }                                                                                                          \
  void dr_agree_f32__##isa(float* logits_out, const float* logits_in, const float* uhat, const float* v,     \
                           int B, int I, int J) {                                                            \
    agree_simd(logits_out, logits_in, uhat, v, B, I, J);                                                     \
  }                                                                                                          \
  void dr_agree_backward_f32__##isa(float* dv, float* duhat, const float* dlogits, const float* uhat,        \
                                    const float* v, int B, int I, int J) {                                   \
    agree_backward_simd(dv, duhat, dlogits, uhat, v, B, I, J);                                               \
  }                                                                                                          \
  }
