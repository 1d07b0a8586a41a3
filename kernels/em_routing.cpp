#include "kernels/em_routing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vg {

void EmState::resize(int B, int I, int J) {
  log_a_in.resize(size_t(B) * I);
  log_r.resize(size_t(B) * I * J);
  w.resize(size_t(B) * I * J);
  sum_ra.resize(size_t(B) * J);
  sigma2.resize(size_t(B) * J * kPoseDim);
  log_a_out.resize(size_t(B) * J);
}

namespace {
const EmRoutingKernels kVariants[] = {
    {Isa::scalar, em_m_step_f32__scalar, em_e_step_f32__scalar, em_backward_f32__scalar},
#if defined(__x86_64__)
    {Isa::avx2, em_m_step_f32__avx2, em_e_step_f32__avx2, em_backward_f32__avx2},
    {Isa::avx512, em_m_step_f32__avx512, em_e_step_f32__avx512, em_backward_f32__avx512},
#endif
#if defined(__aarch64__)
    {Isa::neon, em_m_step_f32__neon, em_e_step_f32__neon, em_backward_f32__neon},
#endif
};
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
  if (st.frozen) {
    k.m_step(mu, a_out, st, V, beta_a, beta_v, B, I, J, cfg);
    return;
  }
  for (size_t n = 0; n < size_t(B) * I; ++n) {
    const float z = a_in_logit[n];
    st.log_a_in[n] = std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z)));
  }
  std::fill_n(st.log_r.begin(), size_t(B) * I * J, -std::log(float(J)));
  for (int it = 0; it < cfg.iters; ++it) {
    k.m_step(mu, a_out, st, V, beta_a, beta_v, B, I, J, cfg);
    if (it + 1 < cfg.iters) k.e_step(st, V, mu, B, I, J);
  }
}

void em_routing_backward(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                         const float* da_out, const float* V, const float* mu,
                         const float* a_out, const EmState& st, int B, int I, int J,
                         const EmConfig& cfg, const EmRoutingKernels& k) {
  k.backward(dV, dbeta_a, dbeta_v, dmu, da_out, V, mu, a_out, st, B, I, J, cfg);
}

}  // namespace vg
