// Scalar reference of EM routing over convolutional windows (built with
// -ffp-contract=off): the E-step with its cross-window normalisation and the
// full backward. The M-step and the stop-gradient backward are the dense
// family's kernels with the windows as the batch (em_routing_scalar.cpp).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/conv_em_routing.h"

namespace vg {

namespace {

// Index of child (y, x, ci) in window (oy, ox), which must contain it.
inline int q_of(const ConvVotesShape& s, int y, int x, int ci, int oy, int ox) {
  return ((y - oy * s.step()) * s.kw() + (x - ox * s.step())) * s.Ci + ci;
}

}  // namespace

// The E-step in two passes. Pass 1, per window p and type j, the dense
// E-step's likelihoods (em_likelihoods_f32__scalar):
//   lp_pqj = -1/2 sum_h (V_pqjh - mu_pjh)^2 / sigma2_pjh + norm_pj,
//   norm_pj = -1/2 sum_h (log sigma2_pjh + log 2 pi) + log a_pj.
// Pass 2, per child c, over N(c) = every (p, j) with window p containing c
// (paper) or, for each type j, every window p containing c (official):
//   log R_{c,(p,j)} = lp - LSE_{N(c)}(lp), the LSE shifted by its max.
// Each log R is written once, by its child: no two children share an entry, so
// the passes could run in parallel over windows and over children alike.
void conv_em_e_step_f32__scalar(ConvEmState& st, const float* V, const float* mu, const ConvVotesShape& s,
                                ConvEmNorm norm, float* lse_out) {
  const int Ho = s.Ho(), Wo = s.Wo(), I = s.I(), J = s.Co;
  EmState& em = st.em;
  em_likelihoods_f32__scalar(em.log_r.data(), V, mu, em.sigma2.data(), em.log_a_out.data(), s.B * Ho * Wo, I, J);
  // Types normalised together: all J (paper) or one at a time (official).
  const int group = norm == ConvEmNorm::paper ? J : 1;
  for (int b = 0; b < s.B; ++b)
    for (int y = 0; y < s.H; ++y)
      for (int x = 0; x < s.W; ++x) {
        int ylo, yhi, xlo, xhi;
        conv_em_windows_of(y, s.kh(), s.step(), Ho, &ylo, &yhi);
        conv_em_windows_of(x, s.kw(), s.step(), Wo, &xlo, &xhi);
        for (int ci = 0; ci < s.Ci; ++ci)
          for (int j0 = 0; j0 < J; j0 += group) {
            // The child's entries of types j0 .. j0+group-1 in window (oy, ox).
            auto row = [&](int oy, int ox) {
              const size_t p = (size_t(b) * Ho + oy) * Wo + ox;
              return em.log_r.data() + (p * I + q_of(s, y, x, ci, oy, ox)) * J + j0;
            };
            float mx = -INFINITY;
            for (int oy = ylo; oy <= yhi; ++oy)
              for (int ox = xlo; ox <= xhi; ++ox)
                for (int j = 0; j < group; ++j) mx = std::max(mx, row(oy, ox)[j]);
            float z = 0.f;
            for (int oy = ylo; oy <= yhi; ++oy)
              for (int ox = xlo; ox <= xhi; ++ox)
                for (int j = 0; j < group; ++j) z += std::exp(row(oy, ox)[j] - mx);
            const float lse = mx + std::log(z);
            for (int oy = ylo; oy <= yhi; ++oy)
              for (int ox = xlo; ox <= xhi; ++ox)
                for (int j = 0; j < group; ++j) row(oy, ox)[j] -= lse;
            if (lse_out) lse_out[(((size_t(b) * s.H + y) * s.W + x) * s.Ci + ci) * (J / group) + j0] = lse;
          }
      }
}

// The reference iteration: the M-step over every window, then the E-step
// (in window order, whatever descending asks).
void conv_em_m_e_step_f32__scalar(float* mu, float* a_out, ConvEmState& st, const float* V, const float* beta_a,
                                  const float* beta_v, const ConvVotesShape& s, const EmConfig& cfg, bool e_step,
                                  ConvEmNorm norm, float* lse_out, bool /*descending*/) {
  em_m_step_f32__scalar(mu, a_out, st.em, V, beta_a, beta_v, s.B * s.Ho() * s.Wo(), s.I(), s.Co, cfg);
  if (e_step) conv_em_e_step_f32__scalar(st, V, mu, s, norm, lse_out);
}

// ---------------------------------------------------------------------------
// Full backward (EmGrad::full): reverse mode through every iteration, nothing
// detached. The forward of iteration t, with l_pqj = log R^t_pqj + log a_c(p,q):
//   M-step t  per window p: the dense M-step of em_routing_scalar.cpp
//             (w, S, mu, sigma2, cost, a_pj from l_p..);
//   E-step t  (t < T-1) log R^{t+1}_pqj = lp_pqj - LSE_{N(c)} lp, as above.
// Backward walks t = T-1 .. 0 one batch item at a time (windows of different
// items share no child):
//   M-step t  per window: em_m_step_backward_full, which adds dV, dbeta_a,
//             dbeta_v, writes dl_pqj (the adjoint of l, hence of log R^t) and
//             adds sum_j dl_pqj to the window's dlog a of child q;
//   E-step t-1 the log-softmax over N(c):
//             dlp_pqj = dl_pqj - R^t_pqj sum_{(p',q',j') in N(c)} dl_p'q'j'
//             (the sum gathered per child first), then per window as the dense
//             E-step backward, u = (V - mu) / sigma2:
//             dV_pqjh -= dlp u;  dmu_pjh = sum_q dlp u;  dloga_pj = sum_q dlp;
//             dsig_pjh = sum_q dlp (u (V - mu) - 1) / (2 sigma2)
//             (overwritten: they are M-step t-1's adjoints);
//   inputs    da_in_logit_c += (1 - a_c) sum over every (p, q) holding c of
//             the window's dlog a, 1 - a_c = -expm1(log a_c).
// log R^0 is a constant: its adjoint goes nowhere.

namespace {

// Backward of E-step t-1 for one window (see above). tsum: the item's child
// sums of dl (per child, or per child and type in official mode).
void e_step_backward_window(float* dV, float* dmu, float* dsig, float* dloga, const float* dl,
                            const float* tsum, const float* log_r_next, const float* V, const EmMStepState& s,
                            const ConvVotesShape& sh, int oy, int ox, bool per_type) {
  constexpr int H = kPoseDim;
  const int I = sh.I(), J = sh.Co;
  float inv_s2[64 * H];
  for (int n = 0; n < J * H; ++n) inv_s2[n] = 1.f / s.sigma2[n];
  std::fill_n(dmu, J * H, 0.f);
  std::fill_n(dsig, J * H, 0.f);
  std::fill_n(dloga, J, 0.f);
  for (int q = 0; q < I; ++q) {
    const size_t c = conv_em_child_of(sh, oy, ox, q);
    for (int j = 0; j < J; ++j)  // the sum runs over every parent the child feeds (per type, official)
      em_e_pair_backward(dV + (size_t(q) * J + j) * H, dmu + j * H, dsig + j * H, dloga + j, dl[q * J + j],
                         log_r_next[q * J + j], per_type ? tsum[c * J + j] : tsum[c], V + (size_t(q) * J + j) * H,
                         s.mu + j * H, inv_s2 + j * H);
  }
}

}  // namespace

void conv_em_backward_full_f32__scalar(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,
                                       size_t dbeta_step, const float* dmu, const float* da_out, const float* V,
                                       const ConvEmState& st, const ConvVotesShape& s, const ConvEmConfig& cfg) {
  constexpr int H = kPoseDim;
  const int T = cfg.iters, Ho = s.Ho(), Wo = s.Wo(), Pw = Ho * Wo, P = s.B * Pw, I = s.I(), J = s.Co;
  const size_t IJ = size_t(I) * J, children = size_t(s.H) * s.W * s.Ci;
  const bool per_type = cfg.norm == ConvEmNorm::official;
  float* dl = st.scratch.data();          // Pw x I x J   adjoint of log R^t
  float* g = dl + Pw * IJ;                // I x J        the M-step backward's scratch
  float* dla = g + IJ;                    // Pw x I       each window's adjoint of log a_in
  float* dm = dla + size_t(Pw) * I;       // Pw x J x 16  adjoint of mu^t
  float* dsig = dm + size_t(Pw) * J * H;  // Pw x J x 16  adjoint of sigma2^t (from E-step t)
  float* dloga = dsig + size_t(Pw) * J * H;  // Pw x J    adjoint of log a^t (from E-step t)
  float* tsum = dloga + size_t(Pw) * J;   // H x W x Ci (x J official)  per-child sums
  float* dcarry = tsum + children * J;    // Pw x J x 16  adjoint of mu^{t-1} through mu^t's carry
  const bool carry = cfg.mean_carry != 0.f;
  const EmState& em = st.em;
  size_t n = 0;  // the M-steps' backward so far: their betas' terms go to row n (dbeta_step)
  for (int b = 0; b < s.B; ++b) {
    const size_t p0 = size_t(b) * Pw;
    std::copy_n(dmu + p0 * J * H, size_t(Pw) * J * H, dm);
    std::fill_n(dsig, size_t(Pw) * J * H, 0.f);
    std::fill_n(dloga, size_t(Pw) * J, 0.f);
    std::fill_n(dla, size_t(Pw) * I, 0.f);
    for (int t = T - 1; t >= 0; --t) {
      for (int w = 0; w < Pw; ++w, ++n) {
        const size_t p = p0 + w;
        em_m_step_backward_full(dV + p * IJ * H, dl + w * IJ, dla + size_t(w) * I, dbeta_a + n * dbeta_step,
                                dbeta_v + n * dbeta_step, g,
                                t > 0 ? dcarry + size_t(w) * J * H : nullptr, dm + size_t(w) * J * H, dsig + size_t(w) * J * H, dloga + size_t(w) * J,
                                t == T - 1 ? da_out + p * J : nullptr, V + p * IJ * H,
                                em_m_step_state(em, t, int(p), P, I, J), em.hist.beta_v.data(),
                                em_lambda(cfg, t), I, J, cfg);
      }
      if (t == 0) break;
      // The log-softmax's sum of dl over each child's N(c), windows in order.
      std::fill_n(tsum, per_type ? children * J : children, 0.f);
      for (int w = 0; w < Pw; ++w)
        for (int q = 0; q < I; ++q) {
          const size_t c = conv_em_child_of(s, w / Wo, w % Wo, q);
          for (int j = 0; j < J; ++j) (per_type ? tsum[c * J + j] : tsum[c]) += dl[w * IJ + q * J + j];
        }
      for (int w = 0; w < Pw; ++w) {
        const size_t p = p0 + w;
        const EmMStepState next = em_m_step_state(em, t, int(p), P, I, J);  // holds log R^t
        e_step_backward_window(dV + p * IJ * H, dm + size_t(w) * J * H, dsig + size_t(w) * J * H,
                               dloga + size_t(w) * J, dl + w * IJ, tsum, next.log_r, V + p * IJ * H,
                               em_m_step_state(em, t - 1, int(p), P, I, J), s, w / Wo, w % Wo, per_type);
      }
      if (carry)
        for (size_t n = 0; n < size_t(Pw) * J * H; ++n) dm[n] += dcarry[n];
    }
    conv_em_input_logit_backward(da_in_logit + size_t(b) * children, tsum, dla,
                                 st.log_a_child.data() + size_t(b) * children, s);
  }
}

}  // namespace vg
