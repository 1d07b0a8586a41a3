#include "kernels/conv_em_routing.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <stdexcept>

namespace vg {

namespace {

int windows(const ConvVotesShape& s) { return s.B * s.Ho() * s.Wo(); }

// Full backward scratch per batch item, in conv_em_backward_full_f32__scalar's
// order: dl (Pw I J), g (I J), dla (Pw I), dmu and dsigma2 (Pw J 16), dlog a
// (Pw J), the per-child sums (H W Ci J), the mean carry's dmu (Pw J 16).
// The SIMD E-steps' scratch for one batch item (conv_em_routing_simd.h): per
// child a row of maxima and one of sums (H W Ci x J each), one window's exps
// (I x J), and per child its log-sum, padded to whole vectors of 16.
size_t e_buf_size(const ConvVotesShape& s) {
  const size_t children = size_t(s.H) * s.W * s.Ci;
  return 2 * children * s.Co + size_t(s.I()) * s.Co + (children + 15) / 16 * 16;
}

size_t full_scratch(const ConvVotesShape& s) {
  const size_t Pw = size_t(s.Ho()) * s.Wo(), I = s.I(), J = s.Co;
  return Pw * I * J + I * J + Pw * I + 3 * Pw * J * kPoseDim + Pw * J + size_t(s.H) * s.W * s.Ci * J;
}

}  // namespace

void ConvEmState::resize(const ConvVotesShape& s, const ConvEmConfig& cfg) {
  em.resize(windows(s), s.I(), s.Co, cfg);
  log_a_child.resize(size_t(s.B) * s.H * s.W * s.Ci);
  e_buf.resize(e_buf_size(s));
  if (cfg.grad == EmGrad::full) reserve_full(s, cfg.iters);
}

void ConvEmState::reserve_full(const ConvVotesShape& s, int iters) {
  em.reserve_history(windows(s), s.I(), s.Co, iters);
  if (scratch.size() < full_scratch(s)) scratch.resize(full_scratch(s));
}

size_t ConvEmState::floats(const ConvVotesShape& s, const ConvEmConfig& cfg) {
  return EmState::floats(windows(s), s.I(), s.Co, cfg) + size_t(s.B) * s.H * s.W * s.Ci + e_buf_size(s) +
         (cfg.grad == EmGrad::full ? full_scratch(s) : 0);
}

namespace {
// The kernel list: one line per variant this build has. The M-step, its
// weights, the likelihoods and the stop-gradient backward are the dense
// family's of the same ISA; the E-step and
// the iteration that fuses it with the M-step are named separately
// (conv_em_routing_simd.h's for every ISA here), the full backward is this
// family's of the same ISA.
#define VG_CEM_ENTRY(isa, e_step)                                                       \
  {Isa::isa, em_m_step_f32__##isa, em_m_weights_f32__##isa, em_likelihoods_f32__##isa,           \
   conv_em_e_step_f32__##e_step, conv_em_m_e_step_f32__##e_step, em_backward_f32__##isa,           \
   conv_em_backward_full_f32__##isa}
const ConvEmRoutingKernels kVariants[] = {
    VG_CEM_ENTRY(scalar, scalar),
#if defined(__x86_64__)
    VG_CEM_ENTRY(avx2, avx2),
    VG_CEM_ENTRY(avx512, avx512),
#endif
#if defined(__aarch64__)
    VG_CEM_ENTRY(neon, neon),
#endif
};
#undef VG_CEM_ENTRY
}  // namespace

const ConvEmRoutingKernels* conv_em_routing_variants(int* count) {
  *count = int(sizeof(kVariants) / sizeof(kVariants[0]));
  return kVariants;
}

const ConvEmRoutingKernels* conv_em_routing_for(Isa isa) {
  for (const auto& k : kVariants)
    if (k.isa == isa) return &k;
  return nullptr;
}

const ConvEmRoutingKernels& conv_em_routing_kernels() {
  static const ConvEmRoutingKernels& chosen = []() -> const ConvEmRoutingKernels& {
    const ConvEmRoutingKernels* k = conv_em_routing_for(selected_isa());
    return k ? *k : kVariants[0];
  }();
  return chosen;
}

void conv_em_input_logit_backward(float* da_in_logit, float* scratch, const float* dla, const float* log_a,
                                  const ConvVotesShape& s) {
  const int Wo = s.Wo(), Pw = s.Ho() * Wo, I = s.I();
  const size_t children = size_t(s.H) * s.W * s.Ci;
  std::fill_n(scratch, children, 0.f);
  for (int w = 0; w < Pw; ++w)
    conv_em_window_runs(s, w / Wo, w % Wo, [&](int q0, size_t c0) {
      for (int ci = 0; ci < s.Ci; ++ci) scratch[c0 + ci] += dla[size_t(w) * I + q0 + ci];
    });
  for (size_t c = 0; c < children; ++c) da_in_logit[c] += scratch[c] * -std::expm1(log_a[c]);
}

namespace {
// A replay's history (ConvEmRecord), the recorded moments already in em.hist:
// window by window, every iteration's log R (the initial one from em.log_r,
// then E-step t-1's as the likelihoods less each child's recorded LSE, the
// subtraction the E-step made) and its weights. A window's votes (74 KB at the
// paper's ConvCaps1) stay in cache over its iterations, where whole-batch
// E-steps streamed every window's votes once an iteration.
void replay_windows(EmState& em, const float* V, const float* lse, const ConvVotesShape& s, const ConvEmConfig& cfg,
                    const ConvEmRoutingKernels& k) {
  const int Ho = s.Ho(), Wo = s.Wo(), Pw = Ho * Wo, P = windows(s), I = s.I(), J = s.Co;
  const size_t IJ = size_t(I) * J, nij = size_t(P) * IJ, nj = size_t(P) * J, njh = nj * kPoseDim;
  const size_t children = size_t(s.H) * s.W * s.Ci, nl = ConvEmRecord::lse_floats(s, cfg.norm);
  const bool per_type = cfg.norm == ConvEmNorm::official;
  auto& h = em.hist;
  for (int p = 0; p < P; ++p) {
    const int b = p / Pw, oy = p % Pw / Wo, ox = p % Wo;
    for (int t = 0; t < cfg.iters; ++t) {
      float* lr = h.log_r.data() + t * nij + p * IJ;
      if (t == 0) {
        std::copy_n(em.log_r.begin() + std::ptrdiff_t(p * IJ), IJ, lr);
      } else {
        const size_t pj = size_t(p) * J, prev = size_t(t - 1);
        k.likelihoods(lr, V + p * IJ * kPoseDim, h.mu.data() + prev * njh + pj * kPoseDim,
                      h.sigma2.data() + prev * njh + pj * kPoseDim, h.log_a.data() + prev * nj + pj, 1, I, J);
        const float* l = lse + prev * nl + b * children * (per_type ? J : 1);
        conv_em_window_runs(s, oy, ox, [&](int q0, size_t c0) {
          for (int ci = 0; ci < s.Ci; ++ci) {
            const size_t c = c0 + ci;
            float* r = lr + size_t(q0 + ci) * J;
            if (per_type)
              for (int j = 0; j < J; ++j) r[j] -= l[c * J + j];
            else
              for (int j = 0; j < J; ++j) r[j] -= l[c];
          }
        });
      }
      k.m_weights(h.w.data() + t * nij + p * IJ, h.sum_ra.data() + t * nj + size_t(p) * J, lr,
                  em.log_a_in.data() + size_t(p) * I, 1, I, J, cfg.eps);
    }
  }
}
}  // namespace

void conv_em_routing_forward(float* mu, float* a_out, ConvEmState& st, const float* V,
                             const float* a_in_logit, const float* beta_a, const float* beta_v,
                             const ConvVotesShape& s, const ConvEmConfig& cfg, const ConvEmRoutingKernels& k,
                             ConvEmRecord rec) {
  if (!s.valid()) throw std::invalid_argument("conv_em_routing: invalid shape");
  if (rec.record && rec.replay) throw std::invalid_argument("conv_em_routing: a record or a replay, not both");
  if ((rec.record || rec.replay) && cfg.grad != EmGrad::full)
    throw std::invalid_argument("conv_em_routing: a record or a replay is of EmGrad::full's history");
  if (s.Co > 64) throw std::invalid_argument("conv_em_routing: at most 64 parent types");
  if (cfg.iters < 1) throw std::invalid_argument("conv_em_routing: at least one iteration");
  const int Ho = s.Ho(), Wo = s.Wo(), P = windows(s), I = s.I(), J = s.Co;
  EmState& em = st.em;
  em.hist.iters = em.hist.B = 0;  // no history unless this forward keeps one
  const bool carry = cfg.mean_carry != 0.f;
  if (carry && em.mu_prev.size() < size_t(P) * J * kPoseDim) em.mu_prev.resize(size_t(P) * J * kPoseDim);
  if (em.frozen) {  // mu_prev: the last full forward's second-to-last mean
    k.m_step(mu, a_out, em, V, beta_a, beta_v, P, I, J, em_step_config(cfg, cfg.iters - 1));
    return;
  }
  if (st.e_buf.size() < e_buf_size(s)) st.e_buf.resize(e_buf_size(s));  // grows on first use only
  const size_t children = size_t(s.H) * s.W * s.Ci;
  for (size_t n = 0; n < size_t(s.B) * children; ++n) {
    const float z = a_in_logit[n];
    st.log_a_child[n] = std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z)));
  }
  // Gather each window's children: their log a and initial log R (paper:
  // -log(n_c J), n_c the windows containing the child; official: -log J),
  // one log for each n_c there can be up to K = 4 (no heap: a warm step
  // allocates nothing), each larger one where it comes.
  float log_r0_of[17];
  const int tabled = std::min(16, s.kh() * s.kw());
  for (int n_c = 1; n_c <= tabled; ++n_c) log_r0_of[n_c] = -std::log(float(n_c * J));
  for (int b = 0; b < s.B; ++b)
    for (int oy = 0; oy < Ho; ++oy)
      for (int ox = 0; ox < Wo; ++ox)
        for (int ky = 0; ky < s.kh(); ++ky)
          for (int kx = 0; kx < s.kw(); ++kx) {
            const int y = oy * s.step() + ky, x = ox * s.step() + kx;
            int ylo, yhi, xlo, xhi;
            conv_em_windows_of(y, s.kh(), s.step(), Ho, &ylo, &yhi);
            conv_em_windows_of(x, s.kw(), s.step(), Wo, &xlo, &xhi);
            const int n_c = cfg.norm == ConvEmNorm::paper ? (yhi - ylo + 1) * (xhi - xlo + 1) : 1;
            const float log_r0 = n_c <= tabled ? log_r0_of[n_c] : -std::log(float(n_c * J));
            const size_t p = (size_t(b) * Ho + oy) * Wo + ox;
            for (int ci = 0; ci < s.Ci; ++ci) {
              const size_t q = size_t(ky * s.kw() + kx) * s.Ci + ci;
              em.log_a_in[p * I + q] = st.log_a_child[b * children + (size_t(y) * s.W + x) * s.Ci + ci];
              std::fill_n(em.log_r.begin() + (p * I + q) * J, J, log_r0);
            }
          }
  const size_t nij = size_t(P) * I * J, nj = size_t(P) * J, njh = nj * kPoseDim;
  const size_t T = size_t(cfg.iters), nl = ConvEmRecord::lse_floats(s, cfg.norm);
  auto& h = em.hist;
  // The record (ConvEmRecord): each M-step output's block (T x its floats
  // an iteration), in this order, then the E-steps' LSEs.
  std::vector<float>* const kept[] = {&h.mu, &h.sigma2, &h.log_s2_sum, &h.a, &h.log_a};
  const size_t per_iter[] = {njh, njh, nj, nj, nj};
  // A recorded forward keeps no history: its replay rebuilds it.
  const bool keep = cfg.grad == EmGrad::full && !rec.record;
  if (keep || rec.replay) {
    st.reserve_full(s, cfg.iters);
    h.iters = cfg.iters;
    h.B = P;
    std::copy_n(beta_v, J, h.beta_v.begin());
  }
  if (rec.replay) {
    const float* r = rec.replay;
    for (int n = 0; n < 5; ++n) {
      std::copy_n(r, T * per_iter[n], kept[n]->begin());
      r += T * per_iter[n];
    }
    replay_windows(em, V, r, s, cfg, k);
    std::copy_n(h.mu.begin() + (T - 1) * njh, njh, mu);
    std::copy_n(h.a.begin() + (T - 1) * nj, nj, a_out);
    return;
  }
  // The record's LSE blocks follow the moments': E-step t's at lse + t nl.
  float* lse = rec.record ? rec.record + T * std::accumulate(std::begin(per_iter), std::end(per_iter), size_t(0)) : nullptr;
  for (int it = 0; it < cfg.iters; ++it) {
    if (keep) std::copy_n(em.log_r.begin(), nij, h.log_r.begin() + it * nij);
    if (carry) {  // the mean carried from the last iteration: 0 before the first
      if (it == 0) std::fill_n(em.mu_prev.begin(), njh, 0.f);
      else std::copy_n(mu, njh, em.mu_prev.begin());
    }
    // Iterations 0, 2, ... take the windows last to first: the votes kernel
    // wrote them first to last, and each iteration then starts where the last
    // ended, on the votes still in L2 (an image's exceed it at the paper's
    // sizes), not on those longest out of it.
    k.m_e_step(mu, a_out, st, V, beta_a, beta_v, s, em_step_config(cfg, it), it + 1 < cfg.iters, cfg.norm,
               lse ? lse + it * nl : nullptr, it % 2 == 0);
    // The M-step's outputs, which the E-step only reads.
    const float* const outputs[] = {mu, em.sigma2.data(), em.log_s2_sum.data(), a_out, em.log_a_out.data()};
    if (keep) {
      std::copy_n(em.w.begin(), nij, h.w.begin() + it * nij);
      std::copy_n(em.sum_ra.begin(), nj, h.sum_ra.begin() + it * nj);
      for (int n = 0; n < 5; ++n) std::copy_n(outputs[n], per_iter[n], kept[n]->begin() + it * per_iter[n]);
    }
    if (rec.record)
      for (size_t n = 0, at = 0; n < 5; at += T * per_iter[n], ++n)
        std::copy_n(outputs[n], per_iter[n], rec.record + at + it * per_iter[n]);
  }
}

void conv_em_routing_backward(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v, size_t dbeta_step,
                              const float* dmu, const float* da_out, const float* V, const float* mu,
                              const float* a_out, const ConvEmState& st, const ConvVotesShape& s,
                              const ConvEmConfig& cfg, const ConvEmRoutingKernels& k) {
  const int P = windows(s), I = s.I(), J = s.Co;
  if (cfg.grad == EmGrad::stopgrad) {
    if (dbeta_step != 0) throw std::invalid_argument("conv_em_routing_backward: a dbeta_step needs EmGrad::full");
    k.backward(dV, dbeta_a, dbeta_v, dmu, da_out, V, mu, a_out, st.em, P, I, J, em_step_config(cfg, cfg.iters - 1));
    return;
  }
  if (da_in_logit == nullptr)
    throw std::invalid_argument("conv_em_routing_backward: EmGrad::full needs da_in_logit");
  if (st.em.hist.iters != cfg.iters || st.em.hist.B != P)
    throw std::invalid_argument("conv_em_routing_backward: EmGrad::full needs the history of a forward "
                                "with EmGrad::full, the same iterations and shape");
  k.backward_full(dV, da_in_logit, dbeta_a, dbeta_v, dbeta_step, dmu, da_out, V, st, s, cfg);
}

}  // namespace vg
