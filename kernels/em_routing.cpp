#include "kernels/em_routing.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace vg {

float em_lambda(const EmConfig& cfg, int iteration) {
  if (!cfg.lambda_schedule) return cfg.lambda;
  return float(double(cfg.lambda) * (1.0 - std::pow(0.95, iteration + 1)));
}

EmConfig em_step_config(const EmConfig& cfg, int iteration) {
  EmConfig step = cfg;
  step.lambda = em_lambda(cfg, iteration);
  step.lambda_schedule = false;
  return step;
}

void EmState::resize(int B, int I, int J) {
  log_a_in.resize(size_t(B) * I);
  log_r.resize(size_t(B) * I * J);
  w.resize(size_t(B) * I * J);
  sum_ra.resize(size_t(B) * J);
  sigma2.resize(size_t(B) * J * kPoseDim);
  log_s2_sum.resize(size_t(B) * J);
  log_a_out.resize(size_t(B) * J);
}

EmLogitCoeffs em_logit_coeffs(const EmConfig& cfg) {
  if (cfg.logit == EmLogit::official) return {-5000.f, float(16 * (std::log(2 * std::numbers::pi) + 1)), 1.f};
  return {1.f, float(kPoseDim), 0.5f};
}

void EmState::resize(int B, int I, int J, const EmConfig& cfg) {
  resize(B, I, J);
  if (cfg.mean_carry != 0.f) mu_prev.resize(size_t(B) * J * kPoseDim);
  if (cfg.grad == EmGrad::full) reserve_history(B, I, J, cfg.iters);
}

namespace {
// Full backward, per item: dlog R (I x J) and the M-step's g (I x J), the
// input's dlog a (I), dmu, dsigma2 (J x 16), dlog a_out (J), and the mean
// carry's dmu (J x 16).
size_t full_scratch_floats(int I, int J) { return 2 * size_t(I) * J + I + 3 * size_t(J) * kPoseDim + J; }
}  // namespace

void EmState::reserve_history(int B, int I, int J, int iters) {
  auto grow = [](std::vector<float>& v, size_t n) {
    if (v.size() < n) v.resize(n);
  };
  const size_t T = size_t(iters), nij = size_t(B) * I * J, nj = size_t(B) * J;
  grow(hist.log_r, T * nij);
  grow(hist.w, T * nij);
  grow(hist.sum_ra, T * nj);
  grow(hist.mu, T * nj * kPoseDim);
  grow(hist.sigma2, T * nj * kPoseDim);
  grow(hist.log_s2_sum, T * nj);
  grow(hist.a, T * nj);
  grow(hist.log_a, T * nj);
  grow(hist.beta_v, size_t(J));
  grow(scratch, full_scratch_floats(I, J));
}

size_t EmState::floats(int B, int I, int J, const EmConfig& cfg) {
  const size_t nij = size_t(B) * I * J, nj = size_t(B) * J, T = size_t(cfg.iters);
  // log_a_in; log_r, w; sigma2, sum_ra, log_s2_sum, log_a_out
  size_t n = size_t(B) * I + 2 * nij + nj * (kPoseDim + 3);
  if (cfg.mean_carry != 0.f) n += nj * kPoseDim;
  if (cfg.grad == EmGrad::full) n += T * (2 * nij + nj * (2 * kPoseDim + 4)) + J + full_scratch_floats(I, J);
  return n;
}

size_t EmState::bytes() const {
  const std::vector<float>* held[] = {&log_a_in,   &log_r,      &w,           &sum_ra,         &sigma2,
                                      &log_s2_sum, &log_a_out,  &hist.log_r,  &hist.w,         &hist.sum_ra,
                                      &hist.mu,    &hist.sigma2, &hist.log_s2_sum, &hist.a,    &hist.log_a,
                                      &hist.beta_v, &scratch, &mu_prev};
  size_t n = 0;
  for (const std::vector<float>* v : held) n += v->capacity();
  return n * sizeof(float);
}

namespace {
// The kernel list: one line per variant this build has.
#define VG_EM_ENTRY(isa)                                                                    \
  {Isa::isa, em_m_step_f32__##isa, em_m_weights_f32__##isa, em_e_step_f32__##isa, em_likelihoods_f32__##isa, \
   em_exp_portable_f32__##isa, \
   em_backward_f32__##isa, em_backward_full_f32__##isa}
const EmRoutingKernels kVariants[] = {
    VG_EM_ENTRY(scalar),
#if defined(__x86_64__)
    VG_EM_ENTRY(avx2),
    VG_EM_ENTRY(avx512),
#endif
#if defined(__aarch64__)
    VG_EM_ENTRY(neon),
#endif
};
#undef VG_EM_ENTRY
}  // namespace

const EmRoutingKernels* em_routing_variants(int* count) {
  *count = int(sizeof(kVariants) / sizeof(kVariants[0]));
  return kVariants;
}

const EmRoutingKernels* em_routing_for(Isa isa) {
  for (const auto& k : kVariants)
    if (k.isa == isa) return &k;
  return nullptr;
}

const EmRoutingKernels& em_routing_kernels() {
  static const EmRoutingKernels& chosen = []() -> const EmRoutingKernels& {
    const EmRoutingKernels* k = em_routing_for(selected_isa());
    return k ? *k : kVariants[0];
  }();
  return chosen;
}

void em_routing_forward(float* mu, float* a_out, EmState& st, const float* V,
                        const float* a_in_logit, const float* beta_a, const float* beta_v,
                        int B, int I, int J, const EmConfig& cfg, const EmRoutingKernels& k) {
  if (J > 64) throw std::invalid_argument("em_routing: at most 64 upper capsules");
  if (cfg.iters < 1) throw std::invalid_argument("em_routing: at least one iteration");
  st.hist.iters = st.hist.B = 0;  // no history unless this forward keeps one
  const size_t njh_all = size_t(B) * J * kPoseDim;
  const bool carry = cfg.mean_carry != 0.f;
  if (carry && st.mu_prev.size() < njh_all) st.mu_prev.resize(njh_all);  // grows on first use only
  if (st.frozen) {  // mu_prev: the last full forward's second-to-last mean
    k.m_step(mu, a_out, st, V, beta_a, beta_v, B, I, J, em_step_config(cfg, cfg.iters - 1));
    return;
  }
  for (size_t n = 0; n < size_t(B) * I; ++n) {
    const float z = a_in_logit[n];
    st.log_a_in[n] = std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z)));
  }
  const size_t nij = size_t(B) * I * J, nj = size_t(B) * J, njh = nj * kPoseDim;
  std::fill_n(st.log_r.begin(), nij, -std::log(float(J)));
  const bool keep = cfg.grad == EmGrad::full;
  if (keep) {
    st.reserve_history(B, I, J, cfg.iters);
    st.hist.iters = cfg.iters;
    st.hist.B = B;
    std::copy_n(beta_v, J, st.hist.beta_v.begin());
  }
  auto& h = st.hist;
  for (int it = 0; it < cfg.iters; ++it) {
    if (keep) std::copy_n(st.log_r.begin(), nij, h.log_r.begin() + it * nij);
    if (carry) {  // the mean carried from the last iteration: 0 before the first
      if (it == 0) std::fill_n(st.mu_prev.begin(), njh, 0.f);
      else std::copy_n(mu, njh, st.mu_prev.begin());
    }
    k.m_step(mu, a_out, st, V, beta_a, beta_v, B, I, J, em_step_config(cfg, it));
    if (keep) {
      std::copy_n(st.w.begin(), nij, h.w.begin() + it * nij);
      std::copy_n(st.sum_ra.begin(), nj, h.sum_ra.begin() + it * nj);
      std::copy_n(mu, njh, h.mu.begin() + it * njh);
      std::copy_n(st.sigma2.begin(), njh, h.sigma2.begin() + it * njh);
      std::copy_n(st.log_s2_sum.begin(), nj, h.log_s2_sum.begin() + it * nj);
      std::copy_n(a_out, nj, h.a.begin() + it * nj);
      std::copy_n(st.log_a_out.begin(), nj, h.log_a.begin() + it * nj);
    }
    if (it + 1 < cfg.iters) k.e_step(st, V, mu, B, I, J);
  }
}

void em_routing_backward(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,
                         const float* dmu, const float* da_out, const float* V, const float* mu,
                         const float* a_out, const EmState& st, int B, int I, int J,
                         const EmConfig& cfg, const EmRoutingKernels& k) {
  if (cfg.grad == EmGrad::stopgrad) {
    k.backward(dV, dbeta_a, dbeta_v, dmu, da_out, V, mu, a_out, st, B, I, J,
               em_step_config(cfg, cfg.iters - 1));
    return;
  }
  if (da_in_logit == nullptr)
    throw std::invalid_argument("em_routing_backward: EmGrad::full needs da_in_logit");
  if (st.hist.iters != cfg.iters || st.hist.B != B)
    throw std::invalid_argument("em_routing_backward: EmGrad::full needs the history of a forward "
                                "with EmGrad::full, the same iterations and batch");
  k.backward_full(dV, da_in_logit, dbeta_a, dbeta_v, dmu, da_out, V, st, B, I, J, cfg);
}

}  // namespace vg
