// EM routing between matrix capsules (Hinton, Sabour & Frosst 2018). Pose
// dimension H = 16 (4x4). Two backward schemes (EmConfig::grad): the seed's
// stop-gradient one and full backpropagation through every iteration.
//   V        B x I x J x 16   votes of lower capsule i for upper capsule j
//   a_in     B x I            lower activations, given as logits (a = sigmoid)
//   beta_a, beta_v  J         per upper capsule
//   mu       B x J x 16       upper poses;   a_out  B x J  upper activations
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/isa.h"

namespace vg {

inline constexpr int kPoseDim = 16;

// Which derivative em_routing_backward computes.
//   stopgrad  the seed's: R, S = sum_i R a and the mu inside sigma2 are
//             detached; the input activations get no gradient.
//   full      the paper's: every iteration is differentiated (E-step
//             softmax and Gaussian, S, the mu inside sigma2), and the input
//             activation logits get a gradient.
enum class EmGrad { stopgrad, full };

// The M-step's activation logit (c = 1/I with cost_norm, else 1; L = sum_h
// ln sigma2_h; S = sum_i R a):
//   paper     z = lambda (beta_a - c S (16 beta_v + L / 2)), the paper's
//             a = logistic(lambda (beta_a - sum_h cost_h)),
//             cost_h = (beta_v + ln sigma_h) S (section 3);
//   official  z = lambda (-c S (L + 16 (ln 2 pi + 1) beta_v) - 5000 beta_a),
//             google-research capsule_em/em_layers.py (update_em_routing and
//             update_conv_routing: win = masses (p_i - sigma_biases 16 (log_2pi
//             + 1)), logit = beta (win - activation_biases 5000)): ln sigma2
//             without the 1/2, beta_v scaled by ln 2 pi + 1 and beta_a by -5000.
enum class EmLogit { paper, official };

// The defaults reproduce the seed's routing (and our results before these
// options existed) bit for bit.
struct EmConfig {
  int iters = 3;
  float lambda = 1.f;         // inverse temperature of the activation sigmoid;
                              // the final value when lambda_schedule is on
  float eps = 0.f;            // added to sum(R a) in M-step denominators (seed: 1e-9)
  float sigma2_min = 1e-6f;   // variance floor before log and division
  EmGrad grad = EmGrad::stopgrad;
  // The official code's schedule: lambda_i = lambda (1 - 0.95^(i+1)) at
  // iteration i = 0 .. iters-1 (there lambda = 0.01).
  bool lambda_schedule = false;
  // Gritzman's normalisation: the cost divided by the number of children I,
  // so it does not grow with the size of the lower layer.
  bool cost_norm = false;
  EmLogit logit = EmLogit::paper;
  // The M-step's mean keeps this fraction of the previous iteration's:
  //   mu^t = (1 - mean_carry) sum_i w_i V_i + mean_carry mu^{t-1},  mu^{-1} = 0,
  // and sigma2 is taken about that mu^t. 0: the paper's weighted mean; 0.1:
  // capsule_em/em_layers.py (center = .9 sum/masses + .1 center, center
  // starting at 0).
  float mean_carry = 0.f;
};

// The logit's coefficients, z = lambda (ka beta_a - c S (kv beta_v + kl L)):
// paper {1, 16, 1/2}, official {-5000, 16 (ln 2 pi + 1), 1}. The kernels
// write the paper's form out, in the order its fingerprints hold; the backward uses these.
struct EmLogitCoeffs {
  float ka, kv, kl;
};
EmLogitCoeffs em_logit_coeffs(const EmConfig& cfg);

// The inverse temperature of iteration `iteration` (0-based): cfg.lambda, or
// the schedule's value.
float em_lambda(const EmConfig& cfg, int iteration);
// cfg for the step kernels of one iteration: lambda resolved by em_lambda and
// the schedule switched off. The step kernels below read cfg.lambda as the
// iteration's lambda; em_routing_forward/backward resolve it for them.
EmConfig em_step_config(const EmConfig& cfg, int iteration);

// Buffers of one forward pass, kept for backward. Sized once per batch shape;
// the history for EmGrad::full grows on first use if resize() did not size it.
struct EmState {
  std::vector<float> log_a_in;  // B x I       log sigmoid of the input logits
  std::vector<float> log_r;     // B x I x J   log assignments (softmax over j)
  std::vector<float> w;         // B x I x J   last M-step weights R a / (sum R a + eps)
  std::vector<float> sum_ra;    // B x J       last M-step sum_i R a
  std::vector<float> sigma2;    // B x J x 16  last M-step variance, clamped
  std::vector<float> log_s2_sum;// B x J       last M-step sum_h log sigma2 (in the cost)
  std::vector<float> log_a_out; // B x J
  std::vector<float> mu_prev;   // B x J x 16  with mean_carry: the previous iteration's mu (the M-step reads it)
  // The stop-gradient backward is the exact gradient of the last M-step with
  // w and sum_ra held fixed. Frozen, forward reuses them (one M-step with the
  // last iteration's lambda, no E-step), so finite differences can check
  // backward (tests only; the full scheme's history is then not updated).
  bool frozen = false;

  // EmGrad::full: the state of every iteration t, stored t-major (iteration t
  // at offset t * B * (size per item)), written by em_routing_forward.
  struct History {
    std::vector<float> log_r;      // T x B x I x J   log R used by M-step t (t = 0: uniform)
    std::vector<float> w;          // T x B x I x J
    std::vector<float> sum_ra;     // T x B x J
    std::vector<float> mu;         // T x B x J x 16
    std::vector<float> sigma2;     // T x B x J x 16  clamped
    std::vector<float> log_s2_sum; // T x B x J
    std::vector<float> a;          // T x B x J
    std::vector<float> log_a;      // T x B x J
    std::vector<float> beta_v;     // J               the forward's beta_v (the cost's dS term)
    int iters = 0, B = 0;          // shape of the last forward that filled it (0: none)
  } hist;
  // Per-item adjoints of the full backward (scratch, written by backward).
  mutable std::vector<float> scratch;

  void resize(int B, int I, int J);
  // Also sizes the full scheme's history and scratch when cfg.grad is full,
  // so that no forward or backward of at most B items allocates.
  void resize(int B, int I, int J, const EmConfig& cfg);
  // Grows (never shrinks) the history and scratch to B items, iters iterations.
  void reserve_history(int B, int I, int J, int iters);
  // Bytes its buffers hold (their capacity): a model's memory account.
  size_t bytes() const;
  // The floats resize(B, I, J, cfg) allocates (a memory check before any is).
  static size_t floats(int B, int I, int J, const EmConfig& cfg);
};

// The step kernels. Each reads cfg.lambda as this iteration's lambda (see
// em_step_config) and ignores cfg.lambda_schedule and cfg.grad.
//
// M-step: w_ij = R_ij a_i / (S_j + eps) with S_j = sum_i R_ij a_i;
//   mu_jh = sum_i w_ij V_ijh  [(1 - mean_carry) of it + mean_carry st.mu_prev_jh];
//   sigma2_jh = max(sum_i w_ij (V_ijh - mu_jh)^2, sigma2_min);
//   cost_j = sum_h (beta_v_j + log(sigma2_jh)/2) S_j  [/ I with cost_norm];
//   a_j = sigmoid(lambda (beta_a_j - cost_j))  (or cfg.logit's official form).  Writes mu, a_out and st's w,
//   sum_ra, sigma2, log_s2_sum (sum_h log sigma2_jh) and log_a_out.
// With eps == 0 the weights are normalised in the log domain, so mu and sigma2
// stay true weighted moments however small S_j is (never 0/0).
using EmMStepFn = void (*)(float* mu, float* a_out, EmState& st, const float* V,
                           const float* beta_a, const float* beta_v, int B, int I, int J,
                           const EmConfig& cfg);
// The M-step's first part alone: w (B x I x J) and S (B x J) from log R (B x
// I x J) and the items' log a (B x I), as the M-step of the same ISA forms them
// (the same bits), so a routing's history can be rebuilt from its log R
// without the votes.
using EmMWeightsFn = void (*)(float* w, float* S, const float* log_r, const float* log_a, int B, int I, int J,
                              float eps);
// E-step: log p_ij = -1/2 sum_h ((V_ijh - mu_jh)^2 / sigma2_jh + log(2 pi sigma2_jh));
//   R_ij = softmax_j(log p_ij + log a_j), computed shifted by its max, kept as log R.
using EmEStepFn = void (*)(EmState& st, const float* V, const float* mu, int B, int I, int J);
// x = exp_portable(x), n floats (the vector form's own test and benchmark).
using EmExpFn = void (*)(float* x, size_t n);
// The E-step's first part alone: lr_bij = log p_bij + log a_bj (B x I x J)
// from the votes and an M-step's mu, sigma2 and log a (B x J [x 16]), as the
// E-steps of the same ISA form them before they normalise (the same bits; the
// convolutional E-step's too), so a routing's log R can be rebuilt from its
// moments and its normalisers.
using EmLikelihoodsFn = void (*)(float* lr, const float* V, const float* mu, const float* sigma2,
                                 const float* log_a_out, int B, int I, int J);
// Stop-gradient backward: the last M-step with R, S and the mu inside sigma2
// detached (c = 1/I with cost_norm, else 1; ka, kv, kl: em_logit_coeffs):
//   dV_ijh += w_ij (dmu_jh + 2 dsigma2_jh (V_ijh - mu_jh)),
//   dsigma2_jh = dcost_j c kl S_j / sigma2_jh (0 where clamped),
//   dcost_j = -lambda a_j (1 - a_j) da_j;  dbeta_a_j += ka lambda a_j (1 - a_j) da_j;
//   dbeta_v_j += kv c S_j dcost_j.  The input activations receive no gradient.
// With mean_carry the previous mean is detached too, but the mu inside sigma2
// is not (there sum_i w (V - mu) = mean_carry (m - mu_prev) is not 0):
//   dmu'_jh = (1 - mean_carry) (dmu_jh - 2 dsigma2_jh sum_i w_ij (V_ijh - mu_jh)),
//   dV_ijh += w_ij (dmu'_jh + 2 dsigma2_jh (V_ijh - mu_jh)),
// so the backward stays the exact gradient of the frozen last M-step.
using EmBackwardFn = void (*)(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                              const float* da_out, const float* V, const float* mu,
                              const float* a_out, const EmState& st, int B, int I, int J,
                              const EmConfig& cfg);
// Full backward through all cfg.iters iterations, from the history of a
// forward with cfg.grad == full (cfg as given to that forward, schedule
// included). Accumulates into dV, da_in_logit (B x I), dbeta_a, dbeta_v; the
// formulas are in em_routing_scalar.cpp beside the code.
using EmBackwardFullFn = void (*)(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,
                                  const float* dmu, const float* da_out, const float* V,
                                  const EmState& st, int B, int I, int J, const EmConfig& cfg);

// The steps of one ISA, em_<step>_f32__<isa> (contracts above).
#define VG_EM_KERNELS(isa)                                                                                \
  void em_m_step_f32__##isa(float* mu, float* a_out, EmState& st, const float* V, const float* beta_a,     \
                            const float* beta_v, int B, int I, int J, const EmConfig& cfg);                 \
  void em_m_weights_f32__##isa(float* w, float* S, const float* log_r, const float* log_a, int B, int I, int J, \
                               float eps);                                                                 \
  void em_e_step_f32__##isa(EmState& st, const float* V, const float* mu, int B, int I, int J);            \
  void em_likelihoods_f32__##isa(float* lr, const float* V, const float* mu, const float* sigma2,           \
                                 const float* log_a_out, int B, int I, int J);                              \
  void em_exp_portable_f32__##isa(float* x, size_t n);                                                      \
  void em_backward_f32__##isa(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,                  \
                              const float* da_out, const float* V, const float* mu, const float* a_out,     \
                              const EmState& st, int B, int I, int J, const EmConfig& cfg);        \
  void em_backward_full_f32__##isa(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,           \
                                   const float* dmu, const float* da_out, const float* V, const EmState& st, \
                                   int B, int I, int J, const EmConfig& cfg);
VG_EM_KERNELS(scalar)
// ISA variants (same contracts, J <= 64; only rounding differs from the scalar
// reference, except in the full backward, which gives its bits:
// em_backward_full_simd.h); each exists only in builds for its architecture.
#if defined(__x86_64__)
VG_EM_KERNELS(avx2)
VG_EM_KERNELS(avx512)
#endif
#if defined(__aarch64__)
VG_EM_KERNELS(neon)
#endif
#undef VG_EM_KERNELS

// The full backward's per-item M-step piece, which conv_em_routing.h reuses
// per window (a window's M-step is this M-step, the window as the item).
// One item's M-step state of iteration t, views into st.hist:
struct EmMStepState {
  const float *log_r, *w;              // I x J
  const float *S, *L, *a, *log_a;      // J      (L = sum_h log sigma2)
  const float *mu, *sigma2;            // J x 16
};
EmMStepState em_m_step_state(const EmState& st, int t, int b, int B, int I, int J);
// The head of capsule j's M-step backward, shared by the scalar and every SIMD
// full backward (compiled once, at the baseline ISA): dz_j = (da_j a_j +
// dloga_j)(1 - a_j), the betas' gradients added, and the adjoints of S_j and
// of L_j = sum_h log sigma2_jh returned (formulas at em_m_step_backward_full).
struct EmCapsuleAdjoints {
  float dS, dL;
};
EmCapsuleAdjoints em_capsule_backward_head(float* dbeta_a, float* dbeta_v, float da, float dloga,
                                           const EmMStepState& s, float beta_v, float lambda, float c_norm,
                                           const EmLogitCoeffs& k, EmLogit logit, int j);
// Backward of M-step t of one item (formulas beside the code in
// em_routing_scalar.cpp). In: dmu, dsig (J x 16), dloga (J), da (J, or
// nullptr before the last iteration). Adds into dV (I x J x 16), dlog_a_in
// (I), dbeta_a, dbeta_v; writes dl (I x J, the adjoint of log R^t); g (I x J)
// is scratch. With cfg.mean_carry it also writes dmu_prev (J x 16, the part
// of the adjoint of mu^{t-1} that flows through mu^t's carry; nullptr at t = 0,
// where mu^{-1} is the constant 0).
void em_m_step_backward_full(float* dV, float* dl, float* dlog_a_in, float* dbeta_a, float* dbeta_v,
                             float* g, float* dmu_prev, const float* dmu, const float* dsig, const float* dloga,
                             const float* da, const float* V, const EmMStepState& s,
                             const float* beta_v, float lambda, int I, int J, const EmConfig& cfg);

// exp(x) in float operations alone, none fused, in one fixed order, so that
// the scalar references and every ISA's vector form (em_routing_simd.h's
// exp_portablev) give the same bits on any CPU, whatever its libm: the full
// backward's R = exp(log R), which keeps its bits across ISAs. Cephes expf's
// reduction and polynomial (x = n ln2 + r with ln2 in two parts, e^r = 1 + r
// + r^2 P(r)), n rounded to nearest by adding and subtracting 1.5 2^23, 2^n
// made from its exponent bits. Within 2 ulp of exp for -87 <= x <= 88; 0
// below -87 (e^-87 = 1.6e-38, about where exp leaves the normal floats).
struct ExpPortable {
  static constexpr float lo = -87.f, log2e = 1.44269504088896341f, round = 12582912.f;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;  // ln2_hi n is exact for |n| < 2^15
  // The polynomial's coefficients, highest power first. Scalars, not an array:
  // an array indexed in a loop is odr-used, and unoptimised builds would emit
  // it as a weak symbol into every ISA object.
  static constexpr float p0 = 1.9875691500e-4f, p1 = 1.3981999507e-3f, p2 = 8.3334519073e-3f,
                         p3 = 4.1665795894e-2f, p4 = 1.6666665459e-1f, p5 = 5.0000001201e-1f;
};
inline float exp_portable(float x) {
  using C = ExpPortable;
  if (!(x >= C::lo)) return x < C::lo ? 0.f : x;  // NaN stays
  const float n = (x * C::log2e + C::round) - C::round;
  float r = x - n * C::ln2_hi;
  r = r - n * C::ln2_lo;
  float p = C::p0 * r + C::p1;
  p = p * r + C::p2;
  p = p * r + C::p3;
  p = p * r + C::p4;
  p = p * r + C::p5;
  const float y = (p * (r * r) + r) + 1.f;
  return y * std::bit_cast<float>(uint32_t(int32_t(n) + 127) << 23);
}

// The E-step backward of one (child i, parent j) pair, which the dense and
// the convolutional full backward share: from dlr_ij (the adjoint of log R_ij),
// lr_ij = log R_ij and sum = the adjoint's sum over the child's parents,
//   dp = dlr_ij - R_ij sum    (log-softmax)
// adds dp into *dloga and, through u = (V_ij - mu_j) / sigma2_j, into
// dV_ij -= dp u, dmu_j += dp u, dsigma2_j += dp (u (V_ij - mu_j) - 1) / (2 sigma2_j).
// Scalar references only (their -ffp-contract=off holds inside it).
inline void em_e_pair_backward(float* dv, float* dmu, float* dsig, float* dloga, float dlr, float lr, float sum,
                               const float* v, const float* mu, const float* inv_s2) {
  const float dp = dlr - exp_portable(lr) * sum;
  *dloga += dp;
  for (int h = 0; h < kPoseDim; ++h) {
    const float d = v[h] - mu[h];
    const float u = d * inv_s2[h];
    dv[h] -= dp * u;
    dmu[h] += dp * u;
    dsig[h] += dp * (u * d - 1.f) * 0.5f * inv_s2[h];
  }
}

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
// The full backward (em_backward_full_f32__scalar), counted from its loops:
// per iteration and j an M-step backward (per (i, h): the centred sum, dV and
// g, 12 flops; per h: dsigma2 and dmu', 7; per i: g's pairwise sum, its mean
// and dl, 24), per iteration but the last an E-step backward (per (i, j, h):
// the three adjoints, 12; per (i, j): the log-softmax, 5; per (j, h): 1 /
// sigma2), and the input logits' 3 per i; exp, expm1 and division count as one.
inline double em_routing_backward_full_flops(int B, int I, int J, int iters) {
  const double H = kPoseDim;
  const double m_step = double(J) * (12.0 * I * H + 7 * H + 24.0 * I + 14);
  const double e_step = 12.0 * I * J * H + 5.0 * I * J + J * H;
  return double(B) * (iters * m_step + (iters - 1) * e_step + 3.0 * I);
}

struct EmRoutingKernels {
  Isa isa;
  EmMStepFn m_step;
  EmMWeightsFn m_weights;
  EmEStepFn e_step;
  EmLikelihoodsFn likelihoods;
  EmExpFn exp_portable;
  EmBackwardFn backward;
  EmBackwardFullFn backward_full;
};

const EmRoutingKernels* em_routing_variants(int* count);
const EmRoutingKernels* em_routing_for(Isa isa);
const EmRoutingKernels& em_routing_kernels();

// The whole routing: uniform R, then cfg.iters M-steps with an E-step between
// consecutive ones (the E-step after the last M-step is skipped); iteration i
// uses em_lambda(cfg, i). With cfg.grad == full every iteration's state is
// kept in st.hist for the full backward.
void em_routing_forward(float* mu, float* a_out, EmState& st, const float* V,
                        const float* a_in_logit, const float* beta_a, const float* beta_v,
                        int B, int I, int J, const EmConfig& cfg,
                        const EmRoutingKernels& k = em_routing_kernels());
// Accumulates into dV, dbeta_a, dbeta_v and, with EmGrad::full, da_in_logit
// (B x I, the gradient w.r.t. the input activation logits; required then).
// With EmGrad::stopgrad da_in_logit may be nullptr and is never written.
// st, mu, a_out: those of the forward with the same cfg (the full scheme
// reads its history instead of mu and a_out).
void em_routing_backward(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,
                         const float* dmu, const float* da_out, const float* V, const float* mu,
                         const float* a_out, const EmState& st, int B, int I, int J,
                         const EmConfig& cfg, const EmRoutingKernels& k = em_routing_kernels());

}  // namespace vg
