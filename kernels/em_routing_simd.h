// Pieces shared by the SIMD EM-routing variants (em_routing_{avx2,avx512,neon}.cpp
// include it; nothing else should). Everything is in an anonymous namespace on
// purpose: each ISA file gets its own internally linked copy, compiled with its
// own flags, so no copy built for a wider ISA can be shared with other callers
// (tools/check_isa_objects.sh checks that the objects define no weak symbols).
#pragma once
#include <algorithm>
#include <cmath>

#include "kernels/em_routing.h"

namespace vg {
namespace {

// The M-step weights w_ij = R_ij a_i / (S_j + eps) and S_j = sum_i R_ij a_i
// for one batch item, as in em_m_step_f32__scalar: scalar loops over (i, j),
// the exps over the contiguous block through the ISA's `exp_n(float*, size_t)`;
// the normalisation multiplies by the reciprocal of its sum.
template <class ExpN>
inline void m_step_weights(float* w, float* S, const float* log_r, const float* log_a, int I,
                           int J, float eps, ExpN exp_n) {
  const size_t n = size_t(I) * J;
  float inv[64];
  if (eps == 0.f) {
    // Log-domain normalisation: the largest term is exp(0) = 1.
    float m[64], z[64];
    std::fill_n(m, J, -INFINITY);
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) m[j] = std::max(m[j], log_r[i * J + j] + log_a[i]);
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) w[i * J + j] = log_r[i * J + j] + log_a[i] - m[j];
    exp_n(w, n);
    std::fill_n(z, J, 0.f);
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) z[j] += w[i * J + j];
    exp_n(m, size_t(J));
    for (int j = 0; j < J; ++j) {
      inv[j] = 1.f / z[j];
      S[j] = m[j] * z[j];  // exp(max) z
    }
  } else {
    // The seed's form: R a / (sum R a + eps).
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) w[i * J + j] = log_r[i * J + j] + log_a[i];
    exp_n(w, n);
    std::fill_n(S, J, 0.f);
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) S[j] += w[i * J + j];
    for (int j = 0; j < J; ++j) inv[j] = 1.f / (S[j] + eps);
  }
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < J; ++j) w[i * J + j] *= inv[j];
}

// The E-step's softmax over j for `rows` consecutive lower capsules, shifted
// by its max: log R = lr - (max + log(sum_j exp(lr - max))). On entry
// log_r[r*J + j] holds lr, t[r*J + j] = lr - max and mx[r] the max of row r;
// lse is scratch of `rows` floats. exp and log go through the ISA's batched
// `exp_n` and `log_n`.
template <class ExpN, class LogN>
inline void softmax_rows(float* log_r, float* t, const float* mx, float* lse, int rows, int J,
                         ExpN exp_n, LogN log_n) {
  exp_n(t, size_t(rows) * J);
  for (int r = 0; r < rows; ++r) {
    float z = 0.f;
    for (int j = 0; j < J; ++j) z += t[r * J + j];
    lse[r] = z;
  }
  log_n(lse, size_t(rows));
  for (int r = 0; r < rows; ++r) {
    const float l = mx[r] + lse[r];
    for (int j = 0; j < J; ++j) log_r[r * J + j] -= l;
  }
}

// z = lambda (beta_a - cost), cost = (16 beta_v + sum_h log(sigma2) / 2) S
// [/ I with cost_norm], as in em_m_step_f32__scalar.
inline float logit(float lsum, float S, float beta_a, float beta_v, int I, const EmConfig& cfg) {
  float cost = (float(kPoseDim) * beta_v + 0.5f * lsum) * S;
  if (cfg.cost_norm) cost /= float(I);
  return cfg.lambda * (beta_a - cost);
}

}  // namespace
}  // namespace vg
