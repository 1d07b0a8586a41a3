// EM routing between matrix capsules (Hinton, Sabour & Frosst 2018), with the
// seed's stop-gradient backward. Pose dimension H = 16 (4x4).
//   V        B x I x J x 16   votes of lower capsule i for upper capsule j
//   a_in     B x I            lower activations, given as logits (a = sigmoid)
//   beta_a, beta_v  J         per upper capsule
//   mu       B x J x 16       upper poses;   a_out  B x J  upper activations
#pragma once
#include <vector>

#include "kernels/isa.h"

namespace vg {

inline constexpr int kPoseDim = 16;

struct EmConfig {
  int iters = 3;
  float lambda = 1.f;         // inverse temperature of the activation sigmoid
  float eps = 0.f;            // added to sum(R a) in M-step denominators (seed: 1e-9)
  float sigma2_min = 1e-6f;   // variance floor before log and division
};

// Buffers of one forward pass, kept for backward. Sized once per batch shape.
struct EmState {
  std::vector<float> log_a_in;  // B x I       log sigmoid of the input logits
  std::vector<float> log_r;     // B x I x J   log assignments (softmax over j)
  std::vector<float> w;         // B x I x J   last M-step weights R a / (sum R a + eps)
  std::vector<float> sum_ra;    // B x J       last M-step sum_i R a
  std::vector<float> sigma2;    // B x J x 16  last M-step variance, clamped
  std::vector<float> log_a_out; // B x J
  // The stop-gradient backward is the exact gradient of the last M-step with
  // w and sum_ra held fixed. Frozen, forward reuses them (one M-step, no
  // E-step), so finite differences can check backward (tests only).
  bool frozen = false;
  void resize(int B, int I, int J);
};

// M-step: w_ij = R_ij a_i / (S_j + eps) with S_j = sum_i R_ij a_i;
//   mu_jh = sum_i w_ij V_ijh;  sigma2_jh = max(sum_i w_ij (V_ijh - mu_jh)^2, sigma2_min);
//   cost_j = sum_h (beta_v_j + log(sigma2_jh)/2) S_j;  a_j = sigmoid(lambda (beta_a_j - cost_j)).
// With eps == 0 the weights are normalised in the log domain, so mu and sigma2
// stay true weighted moments however small S_j is (never 0/0).
using EmMStepFn = void (*)(float* mu, float* a_out, EmState& st, const float* V,
                           const float* beta_a, const float* beta_v, int B, int I, int J,
                           const EmConfig& cfg);
// E-step: log p_ij = -1/2 sum_h ((V_ijh - mu_jh)^2 / sigma2_jh + log(2 pi sigma2_jh));
//   R_ij = softmax_j(log p_ij + log a_j), computed shifted by its max, kept as log R.
using EmEStepFn = void (*)(EmState& st, const float* V, const float* mu, int B, int I, int J);
// Backward of the last M-step with R, S and the mu inside sigma2 detached:
//   dV_ijh += w_ij (dmu_jh + 2 dsigma2_jh (V_ijh - mu_jh)),
//   dsigma2_jh = dcost_j S_j / (2 sigma2_jh) (0 where clamped),
//   dcost_j = -lambda a_j (1 - a_j) da_j;  dbeta_a_j += lambda a_j (1 - a_j) da_j;
//   dbeta_v_j += 16 S_j dcost_j.  The input activations receive no gradient.
using EmBackwardFn = void (*)(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                              const float* da_out, const float* V, const float* mu,
                              const float* a_out, const EmState& st, int B, int I, int J,
                              const EmConfig& cfg);

void em_m_step_f32__scalar(float* mu, float* a_out, EmState& st, const float* V,
                           const float* beta_a, const float* beta_v, int B, int I, int J,
                           const EmConfig& cfg);
void em_e_step_f32__scalar(EmState& st, const float* V, const float* mu, int B, int I, int J);
void em_backward_f32__scalar(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                             const float* da_out, const float* V, const float* mu,
                             const float* a_out, const EmState& st, int B, int I, int J,
                             const EmConfig& cfg);

// ISA variants (same contracts, J <= 64); each exists only in builds for its
// architecture. Only rounding differs from the scalar reference.
#if defined(__x86_64__)
void em_m_step_f32__avx2(float* mu, float* a_out, EmState& st, const float* V,
                         const float* beta_a, const float* beta_v, int B, int I, int J,
                         const EmConfig& cfg);
void em_e_step_f32__avx2(EmState& st, const float* V, const float* mu, int B, int I, int J);
void em_backward_f32__avx2(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                           const float* da_out, const float* V, const float* mu,
                           const float* a_out, const EmState& st, int B, int I, int J,
                           const EmConfig& cfg);
void em_m_step_f32__avx512(float* mu, float* a_out, EmState& st, const float* V,
                         const float* beta_a, const float* beta_v, int B, int I, int J,
                         const EmConfig& cfg);
void em_e_step_f32__avx512(EmState& st, const float* V, const float* mu, int B, int I, int J);
void em_backward_f32__avx512(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                           const float* da_out, const float* V, const float* mu,
                           const float* a_out, const EmState& st, int B, int I, int J,
                           const EmConfig& cfg);
#endif
#if defined(__aarch64__)
void em_m_step_f32__neon(float* mu, float* a_out, EmState& st, const float* V,
                         const float* beta_a, const float* beta_v, int B, int I, int J,
                         const EmConfig& cfg);
void em_e_step_f32__neon(EmState& st, const float* V, const float* mu, int B, int I, int J);
void em_backward_f32__neon(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                           const float* da_out, const float* V, const float* mu,
                           const float* a_out, const EmState& st, int B, int I, int J,
                           const EmConfig& cfg);
#endif

// FLOPs of one routing call, counted from the loops of the scalar reference
// (M-step: weights, mean, variance, cost; E-step: quadratic form, softmax;
// backward: the dV, dsigma2 and beta terms). Used by benchmarks and the profile.
inline double em_routing_forward_flops(int B, int I, int J, int iters) {
  const double m_step = double(B) * J * (3.0 * I + kPoseDim * (2.0 * I + 3.0 * I) + 2 * kPoseDim + 6);
  const double e_step = double(B) * I * J * (3.0 * kPoseDim + 4);
  return iters * m_step + (iters - 1) * e_step;
}
inline double em_routing_backward_flops(int B, int I, int J) {
  return double(B) * J * (kPoseDim * 3 + 8) + double(B) * I * J * kPoseDim * 5;
}

struct EmRoutingKernels {
  Isa isa;
  EmMStepFn m_step;
  EmEStepFn e_step;
  EmBackwardFn backward;
};

const EmRoutingKernels* em_routing_variants(int* count);
const EmRoutingKernels* em_routing_for(Isa isa);
const EmRoutingKernels& em_routing_kernels();

// The whole routing: uniform R, then cfg.iters M-steps with an E-step between
// consecutive ones (the E-step after the last M-step is skipped).
void em_routing_forward(float* mu, float* a_out, EmState& st, const float* V,
                        const float* a_in_logit, const float* beta_a, const float* beta_v,
                        int B, int I, int J, const EmConfig& cfg,
                        const EmRoutingKernels& k = em_routing_kernels());
// Accumulates into dV, dbeta_a, dbeta_v (stop-gradient scheme above).
void em_routing_backward(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                         const float* da_out, const float* V, const float* mu,
                         const float* a_out, const EmState& st, int B, int I, int J,
                         const EmConfig& cfg, const EmRoutingKernels& k = em_routing_kernels());

}  // namespace vg
