// The E-step and the full backward of EM routing over convolutional windows,
// written once over the primitives of kernels/em_routing_simd.h (F16, dot16,
// sum_log16, exp_n, log_n) and the per-item pieces of
// kernels/em_backward_full_simd.h. An ISA file includes its
// em_routing_<isa>.h, em_routing_simd.h, em_backward_full_simd.h and then this
// header, and defines the kernels with VG_CEM_DEFINE(<isa>); the code lands in
// that file's anonymous namespace, built with its flags.
// The arithmetic is conv_em_e_step_f32__scalar's, batched: pass 1 forms each
// window's log-likelihoods a pose (16 floats) at a time, pass 2 normalises
// each child's entries over the windows holding it, streaming the windows and
// scattering into per-child rows. What rounds differently from the scalar reference
// (FMAs, the horizontal sums, sum_log16, the vector exp and log) is bounded in
// tests/test_conv_em_routing.cpp.
#pragma once
#include <algorithm>
#include <cmath>

#include "kernels/conv_em_routing.h"

namespace vg {
namespace {

// Pass 1, windows p0 <= p < p1: lp_pqj = -1/2 (V - mu)^T diag(1 / sigma2) (V - mu) + norm_pj
// (em_likelihoods_f32__<isa>'s arithmetic). after_m_step: this ISA's M-step
// has just formed sigma2 and its log sums, which norm then reuses.
inline void conv_e_likelihoods(ConvEmState& st, const float* V, const float* mu, const ConvVotesShape& s, int p0,
                               int p1, bool after_m_step) {
  EmState& em = st.em;
  likelihood_items(em.log_r.data(), V, mu, em.sigma2.data(), em.log_a_out.data(), p0, p1, s.I(), s.Co,
                   after_m_step ? em.log_s2_sum.data() : nullptr);
}

inline void conv_e_normalise(ConvEmState& st, const ConvVotesShape& s, ConvEmNorm norm, float* lse_out) {
  const int Ho = s.Ho(), Wo = s.Wo(), I = s.I(), J = s.Co;
  EmState& em = st.em;
  // Pass 2, one batch item at a time: for each child, t = exp(lr - max) over
  // its entries in every window holding it (the max over all of them, or per
  // type j in the official mode), z = the sum of t in window order (summed
  // over j too in the paper mode), then lr -= max + log z. The windows stream
  // in order and scatter into per-child rows (mx, z), so the exps, logs and
  // row operations run on long runs of whole vectors, and each child's sums
  // keep the scalar reference's window order. For J a multiple of the vector
  // width this gives the bits of a per-child gather (tests: ConvEmRouting*).
  // lse_out, where given, gets each child's max + log z (paper: one a child,
  // official: J), what the child's entries lost.
  const bool paper = norm == ConvEmNorm::paper;
  const int Pw = Ho * Wo;
  const size_t nj = size_t(J), IJ = size_t(I) * J, children = size_t(s.H) * s.W * s.Ci;
  float* mx = st.e_buf.data();    // children x J
  float* z = mx + children * nj;  // children x J
  float* t = z + children * nj;   // I x J: one window's exps
  float* lz = t + IJ;             // children, padded to 16: the paper mode's max, then its LSE, a child
  const size_t padded = (children + 15) / 16 * 16;  // e_buf_size's
  // f(q0, c0, n) for each run of window w: its children q0 .. q0 + Ci - 1 sit
  // at c0 .. c0 + Ci - 1 on the item's child grid (conv_em_child_of), so their
  // rows are n = Ci J floats in order in the window's and the grid's arrays
  // alike: one call a run, not a row (each lane's operation is the same).
  const size_t run = size_t(s.Ci) * nj;
  auto window_runs = [&](int w, auto f) {
    conv_em_window_runs(s, w / Wo, w % Wo, [&](int q0, size_t c0) { f(size_t(q0) * nj, c0 * nj, run); });
  };
  // f(q, c) for each child of window w: q its row's first float in the
  // window's, c its place on the child grid.
  auto window_children = [&](int w, auto f) {
    conv_em_window_runs(s, w / Wo, w % Wo, [&](int q0, size_t c0) {
      for (int ci = 0; ci < s.Ci; ++ci) f(size_t(q0 + ci) * nj, c0 + ci);
    });
  };
  // exp(r - m) added into z in one pass over a run, not through t, where the
  // runs are whole registers: exp_n over t then rounds each lane alike.
  const bool fused = nj % kLanes == 0;
  auto add_exps = [&](float* zc, const float* r, auto m, size_t n) {  // zc += exp(r - m(k)), m(k) the max's register
    for (size_t k = 0; k < n; k += kLanes)
      Whole::store(zc + k, addv(Whole::load(zc + k), expv(subv(Whole::load(r + k), m(k)))));
  };
  for (int b = 0; b < s.B; ++b) {
    float* lr = em.log_r.data() + size_t(b) * Pw * IJ;
    std::fill_n(mx, children * nj, -INFINITY);
    for (int w = 0; w < Pw; ++w)
      window_runs(w, [&](size_t q, size_t c, size_t n) { max_n(mx + c, lr + w * IJ + q, n); });
    // The paper mode's max is one a child: cmax (mx's first floats, its rows
    // no longer needed), subtracted as a broadcast.
    float* cmax = mx;
    if (paper) {
      row_maxes(lz, mx, int(children), J);
      std::copy_n(lz, children, cmax);
    }
    std::fill_n(z, children * nj, 0.f);
    for (int w = 0; w < Pw; ++w) {
      const float* r = lr + w * IJ;
      if (fused && paper) {
        window_children(w, [&](size_t q, size_t c) {
          const Vec m = bcastv(cmax[c]);
          add_exps(z + c * nj, r + q, [&](size_t) { return m; }, nj);
        });
      } else if (fused) {
        window_runs(w, [&](size_t q, size_t c, size_t n) {
          add_exps(z + c, r + q, [&](size_t k) { return Whole::load(mx + c + k); }, n);
        });
      } else {
        if (paper)
          window_children(w, [&](size_t q, size_t c) { sub_c_n(t + q, r + q, cmax[c], nj); });
        else
          window_runs(w, [&](size_t q, size_t c, size_t n) { sub_n(t + q, r + q, mx + c, n); });
        exp_n(t, IJ);
        window_runs(w, [&](size_t q, size_t c, size_t n) { add_n(z + c, t + q, n); });
      }
    }
    if (paper) {
      std::fill_n(lz, children, 0.f);
      add_row_sums(lz, [](int c) { return c; }, z, int(children), J);
      std::fill(lz + children, lz + padded, 1.f);
      log_n(lz, padded);  // whole vectors: each lane is the one log the gather took of J copies
      for (size_t c = 0; c < children; ++c) lz[c] += cmax[c];
      if (lse_out) std::copy_n(lz, children, lse_out + b * children);
      for (int w = 0; w < Pw; ++w) {
        float* r = lr + w * IJ;
        window_children(w, [&](size_t q, size_t c) { sub_c_n(r + q, r + q, lz[c], nj); });
      }
    } else {
      log_n(z, children * nj);
      add_n(z, mx, children * nj);  // mx + z, as the scalar r -= mx + z adds them
      if (lse_out) std::copy_n(z, children * nj, lse_out + b * children * nj);
      for (int w = 0; w < Pw; ++w) {
        float* r = lr + w * IJ;
        window_runs(w, [&](size_t q, size_t c, size_t n) { sub_n(r + q, r + q, z + c, n); });
      }
    }
  }
}

inline void conv_e_step_simd(ConvEmState& st, const float* V, const float* mu, const ConvVotesShape& s,
                             ConvEmNorm norm, float* lse_out) {
  conv_e_likelihoods(st, V, mu, s, 0, s.B * s.Ho() * s.Wo(), false);
  conv_e_normalise(st, s, norm, lse_out);
}

// One routing iteration: the M-step and, when e_step, the E-step. Each
// window's log-likelihoods are formed right after its M-step, while its votes
// (74 KB a window at the paper's ConvCaps1) are in L2: an image's votes (2.65
// MB) exceed L2, and a separate pass would fetch them from L3 again
// (docs/performance.md#the-routings-iteration-over-windows). Every window's
// arithmetic is the separate steps', in the same order; the M-step's
// activations then run a window's J at a time, the same bits as one run over
// every window when J fills whole registers (a run's leftovers round
// differently on AVX2 and NEON), else the windows go together, as separate steps.
inline void conv_m_e_step_simd(float* mu, float* a_out, ConvEmState& st, const float* V, const float* beta_a,
                               const float* beta_v, const ConvVotesShape& s, const EmConfig& cfg, bool e_step,
                               ConvEmNorm norm, float* lse_out, bool descending) {
  const int P = s.B * s.Ho() * s.Wo(), I = s.I(), J = s.Co;
  const int chunk = J % kLanes == 0 ? 1 : P;
  for (int n = 0; n < P; n += chunk) {
    const int p0 = descending ? P - chunk - n : n;
    m_step_items(mu, a_out, st.em, V, beta_a, beta_v, p0, p0 + chunk, I, J, cfg);
    if (e_step) conv_e_likelihoods(st, V, mu, s, p0, p0 + chunk, true);
  }
  if (e_step) conv_e_normalise(st, s, norm, lse_out);
}

// The full backward (conv_em_backward_full_f32__scalar's contract and
// formulas), one batch item at a time with the windows as the dense pieces'
// items: after M-step t's backward of every window, each child's sum of dl is
// gathered over its windows in window order, as the reference does, and each
// window's E-step t-1 and M-step t-1 backward run back to back
// (full_e_and_m_step), its votes in L2 for the second. Bit for bit the
// reference's (em_backward_full_simd.h).
// Scratch at the reference's offsets: dl (Pw x I x J), dp (I x J, where the
// reference keeps g), dla (Pw x I), the per-child sums and dcarry.
inline void conv_backward_full_simd(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v, size_t dbeta_step,
                                    const float* dmu,
                                    const float* da_out, const float* V, const ConvEmState& st,
                                    const ConvVotesShape& s, const ConvEmConfig& cfg) {
  const int T = cfg.iters, Ho = s.Ho(), Wo = s.Wo(), Pw = Ho * Wo, P = s.B * Pw, I = s.I(), J = s.Co;
  const size_t IJ = size_t(I) * J, children = size_t(s.H) * s.W * s.Ci;
  const bool per_type = cfg.norm == ConvEmNorm::official;
  float* dl = st.scratch.data();
  float* dp = dl + Pw * IJ;
  float* dla = dp + IJ;
  float* tsum = dla + size_t(Pw) * I + 2 * size_t(Pw) * J * H + size_t(Pw) * J;
  float* dcarry = tsum + children * J;
  const EmState& em = st.em;
  const float* beta_v = em.hist.beta_v.data();
  FullCaps fc;
  size_t n = 0;  // the M-steps' backward so far: their betas' terms go to row n (dbeta_step)
  for (int b = 0; b < s.B; ++b) {
    const size_t p0 = size_t(b) * Pw;
    std::fill_n(dla, size_t(Pw) * I, 0.f);
    for (int w = 0; w < Pw; ++w, ++n) {
      const size_t p = p0 + w;
      full_last_m_step(fc, dV + p * IJ * H, dl + w * IJ, dla + size_t(w) * I, T > 1 ? dcarry + size_t(w) * J * H : nullptr,
                       dbeta_a + n * dbeta_step, dbeta_v + n * dbeta_step, dmu + p * J * H, da_out + p * J,
                       V + p * IJ * H, em_m_step_state(em, T - 1, int(p), P, I, J), beta_v, em_lambda(cfg, T - 1), I,
                       J, cfg);
    }
    for (int t = T - 1; t > 0; --t) {  // log R^0 is a constant: its adjoint goes nowhere
      std::fill_n(tsum, per_type ? children * J : children, 0.f);
      for (int w = 0; w < Pw; ++w)
        conv_em_window_runs(s, w / Wo, w % Wo, [&](int q0, size_t c0) {
          const float* x = dl + w * IJ + size_t(q0) * J;
          if (per_type)
            for (int ci = 0; ci < s.Ci; ++ci) add_n(tsum + (c0 + ci) * J, x + size_t(ci) * J, size_t(J));
          else  // each row's sum is its own, however the rows are grouped
            add_row_sums(tsum + c0, [](int r) { return r; }, x, s.Ci, J);
        });
      for (int w = 0; w < Pw; ++w, ++n) {
        const size_t p = p0 + w;
        const float* log_r = em_m_step_state(em, t, int(p), P, I, J).log_r;
        std::fill_n(fc.dloga, J, 0.f);
        conv_em_window_runs(s, w / Wo, w % Wo, [&](int q0, size_t c0) {
          for (int ci = 0; ci < s.Ci; ++ci) {
            const size_t c = c0 + ci, row = size_t(q0 + ci) * J;
            full_dp_row(dp + row, fc.dloga, dl + w * IJ + row, log_r + row, per_type ? tsum + c * J : tsum + c,
                        per_type ? 1 : 0, J);
          }
        });
        full_e_and_m_step(fc, dV + p * IJ * H, dl + w * IJ, dla + size_t(w) * I, dcarry + size_t(w) * J * H,
                          dbeta_a + n * dbeta_step, dbeta_v + n * dbeta_step, dp, V + p * IJ * H,
                          em_m_step_state(em, t - 1, int(p), P, I, J), beta_v, em_lambda(cfg, t - 1), t == 1, I, J,
                          cfg);
      }
    }
    conv_em_input_logit_backward(da_in_logit + size_t(b) * children, tsum, dla,
                                 st.log_a_child.data() + size_t(b) * children, s);
  }
}

}  // namespace
}  // namespace vg

// The exported kernels of one ISA: VG_CEM_DEFINE(avx2) in conv_em_routing_avx2.cpp.
#define VG_CEM_DEFINE(isa)                                                                                 \
  namespace vg {                                                                                           \
  void conv_em_e_step_f32__##isa(ConvEmState& st, const float* V, const float* mu, const ConvVotesShape& s, \
                                 ConvEmNorm norm, float* lse_out) {                                        \
    conv_e_step_simd(st, V, mu, s, norm, lse_out);                                                         \
  }                                                                                                        \
  void conv_em_m_e_step_f32__##isa(float* mu, float* a_out, ConvEmState& st, const float* V,                \
                                   const float* beta_a, const float* beta_v, const ConvVotesShape& s,      \
                                   const EmConfig& cfg, bool e_step, ConvEmNorm norm, float* lse_out,      \
                                   bool descending) {                                                      \
    conv_m_e_step_simd(mu, a_out, st, V, beta_a, beta_v, s, cfg, e_step, norm, lse_out, descending);      \
  }                                                                                                        \
  void conv_em_backward_full_f32__##isa(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,     \
                                        size_t dbeta_step, const float* dmu, const float* da_out,           \
                                        const float* V, const ConvEmState& st, const ConvVotesShape& s,     \
                                        const ConvEmConfig& cfg) {                                          \
    conv_backward_full_simd(dV, da_in_logit, dbeta_a, dbeta_v, dbeta_step, dmu, da_out, V, st, s, cfg);    \
  }                                                                                                        \
  }
