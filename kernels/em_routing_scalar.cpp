// Scalar reference of the EM-routing steps (built with -ffp-contract=off).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/em_routing.h"

namespace vg {

namespace {
// log(sigmoid(z)) without overflow or log(0).
inline float log_sigmoid(float z) { return std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z))); }

// Upper capsule j's weights w_ij (w[i*J + j]) and S_j = sum_i R_ij a_i.
float weights_of(float* w, const float* log_r, const float* log_a, int I, int J, int j, float eps) {
  if (eps == 0.f) {
    // Normalise in the log domain: the largest term is exp(0) = 1, so the
    // denominator is >= 1 even when every R a underflows.
    float m = -INFINITY;
    for (int i = 0; i < I; ++i) m = std::max(m, log_r[i * J + j] + log_a[i]);
    float z = 0.f;
    for (int i = 0; i < I; ++i) {
      w[i * J + j] = std::exp(log_r[i * J + j] + log_a[i] - m);
      z += w[i * J + j];
    }
    for (int i = 0; i < I; ++i) w[i * J + j] /= z;
    return std::exp(m) * z;
  }
  // The seed's form: R a / (sum R a + eps), shrunk toward 0 when sum R a ~ eps.
  float S = 0.f;
  for (int i = 0; i < I; ++i) {
    w[i * J + j] = std::exp(log_r[i * J + j] + log_a[i]);
    S += w[i * J + j];
  }
  for (int i = 0; i < I; ++i) w[i * J + j] /= (S + eps);
  return S;
}
}  // namespace

void em_m_weights_f32__scalar(float* w, float* S, const float* log_r, const float* log_a, int B, int I, int J,
                              float eps) {
  const size_t n = size_t(I) * J;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) S[size_t(b) * J + j] = weights_of(w + b * n, log_r + b * n, log_a + size_t(b) * I, I, J, j, eps);
}

void em_m_step_f32__scalar(float* mu, float* a_out, EmState& st, const float* V,
                           const float* beta_a, const float* beta_v, int B, int I, int J,
                           const EmConfig& cfg) {
  constexpr int H = kPoseDim;
  const bool carry = cfg.mean_carry != 0.f;
  const float keep = 1.f - cfg.mean_carry;
  EmConfig official;
  official.logit = EmLogit::official;
  const float kv_official = em_logit_coeffs(official).kv;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      float* w = st.w.data() + size_t(b) * I * J;  // w[i*J + j]
      const float* log_r = st.log_r.data() + size_t(b) * I * J;
      const float* log_a = st.log_a_in.data() + size_t(b) * I;
      const float S = st.frozen ? st.sum_ra[size_t(b) * J + j] : weights_of(w, log_r, log_a, I, J, j, cfg.eps);
      st.sum_ra[size_t(b) * J + j] = S;

      float* m_j = mu + (size_t(b) * J + j) * H;
      float* s2_j = st.sigma2.data() + (size_t(b) * J + j) * H;
      const float* prev_j = carry ? st.mu_prev.data() + (size_t(b) * J + j) * H : nullptr;
      float log_s2_sum = 0.f;
      for (int h = 0; h < H; ++h) {
        float m = 0.f;
        for (int i = 0; i < I; ++i) m += w[i * J + j] * V[((size_t(b) * I + i) * J + j) * H + h];
        if (carry) m = keep * m + cfg.mean_carry * prev_j[h];
        float s2 = 0.f;
        for (int i = 0; i < I; ++i) {
          const float d = V[((size_t(b) * I + i) * J + j) * H + h] - m;
          s2 += w[i * J + j] * d * d;
        }
        s2 = std::max(s2, cfg.sigma2_min);
        m_j[h] = m;
        s2_j[h] = s2;
        log_s2_sum += std::log(s2);
      }
      st.log_s2_sum[size_t(b) * J + j] = log_s2_sum;
      float z;
      if (cfg.logit == EmLogit::paper) {
        float cost = (float(H) * beta_v[j] + 0.5f * log_s2_sum) * S;
        if (cfg.cost_norm) cost /= float(I);
        z = cfg.lambda * (beta_a[j] - cost);
      } else {
        float cost = (kv_official * beta_v[j] + log_s2_sum) * S;
        if (cfg.cost_norm) cost /= float(I);
        z = cfg.lambda * (-cost - 5000.f * beta_a[j]);
      }
      st.log_a_out[size_t(b) * J + j] = log_sigmoid(z);
      a_out[size_t(b) * J + j] = 1.f / (1.f + std::exp(-z));
    }
}

void em_likelihoods_f32__scalar(float* lr, const float* V, const float* mu, const float* sigma2,
                                const float* log_a_out, int B, int I, int J) {
  constexpr int H = kPoseDim;
  const float log_2pi = float(std::log(2.0 * std::numbers::pi));
  for (int b = 0; b < B; ++b) {
    // The Gaussian's normaliser depends on j only.
    float norm[64];
    for (int j = 0; j < J; ++j) {
      float s = 0.f;
      for (int h = 0; h < H; ++h) s += std::log(sigma2[(size_t(b) * J + j) * H + h]) + log_2pi;
      norm[j] = -0.5f * s + log_a_out[size_t(b) * J + j];
    }
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j) {
        const float* v = V + ((size_t(b) * I + i) * J + j) * H;
        const float* m = mu + (size_t(b) * J + j) * H;
        const float* s2 = sigma2 + (size_t(b) * J + j) * H;
        float q = 0.f;
        for (int h = 0; h < H; ++h) {
          const float d = v[h] - m[h];
          q += d * d / s2[h];
        }
        lr[(size_t(b) * I + i) * J + j] = -0.5f * q + norm[j];
      }
  }
}

void em_exp_portable_f32__scalar(float* x, size_t n) {
  for (size_t k = 0; k < n; ++k) x[k] = exp_portable(x[k]);
}

void em_e_step_f32__scalar(EmState& st, const float* V, const float* mu, int B, int I, int J) {
  em_likelihoods_f32__scalar(st.log_r.data(), V, mu, st.sigma2.data(), st.log_a_out.data(), B, I, J);
  for (size_t r = 0; r < size_t(B) * I; ++r) {  // each child's softmax over its parents
    float* lr = st.log_r.data() + r * J;
    float mx = -INFINITY;
    for (int j = 0; j < J; ++j) mx = std::max(mx, lr[j]);
    float z = 0.f;
    for (int j = 0; j < J; ++j) z += std::exp(lr[j] - mx);
    const float lse = mx + std::log(z);
    for (int j = 0; j < J; ++j) lr[j] -= lse;
  }
}

void em_backward_f32__scalar(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                             const float* da_out, const float* V, const float* mu,
                             const float* a_out, const EmState& st, int B, int I, int J,
                             const EmConfig& cfg) {
  constexpr int H = kPoseDim;
  const EmLogitCoeffs k = em_logit_coeffs(cfg);  // paper: ka = 1, kv = 16, kl = 1/2 (exact products)
  const bool carry = cfg.mean_carry != 0.f;
  const float keep = 1.f - cfg.mean_carry;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const float a = a_out[bj];
      const float dz = da_out[bj] * a * (1.f - a);
      if (cfg.logit == EmLogit::paper) dbeta_a[j] += cfg.lambda * dz;  // the paper's form, its fingerprints' order
      else dbeta_a[j] += k.ka * cfg.lambda * dz;
      const float dcost = -cfg.lambda * dz;
      // The factor of (kv beta_v + kl L) in the cost: S, or S / I with cost_norm.
      const float S = cfg.cost_norm ? st.sum_ra[bj] / float(I) : st.sum_ra[bj];
      dbeta_v[j] += k.kv * S * dcost;
      float ds2[kPoseDim], dm[kPoseDim];
      for (int h = 0; h < H; ++h) {
        const float s2 = st.sigma2[bj * H + h];
        ds2[h] = s2 > cfg.sigma2_min ? dcost * S * k.kl / s2 : 0.f;
        dm[h] = dmu[bj * H + h];
      }
      if (carry) {  // the mu inside sigma2, and the carry's share of the mean
        float centred[kPoseDim] = {};
        for (int i = 0; i < I; ++i) {
          const float w = st.w[(size_t(b) * I + i) * J + j];
          const float* v = V + ((size_t(b) * I + i) * J + j) * H;
          for (int h = 0; h < H; ++h) centred[h] += w * (v[h] - mu[bj * H + h]);
        }
        for (int h = 0; h < H; ++h) dm[h] = keep * (dm[h] - 2.f * ds2[h] * centred[h]);
      }
      for (int i = 0; i < I; ++i) {
        const float w = st.w[(size_t(b) * I + i) * J + j];
        const float* v = V + ((size_t(b) * I + i) * J + j) * H;
        float* dv = dV + ((size_t(b) * I + i) * J + j) * H;
        for (int h = 0; h < H; ++h)
          dv[h] += w * (dm[h] + 2.f * ds2[h] * (v[h] - mu[bj * H + h]));
      }
    }
}

// ---------------------------------------------------------------------------
// Full backward (EmGrad::full): reverse mode through every iteration, nothing
// detached. The forward of one item b, iteration t = 0 .. T-1, with
// l_ij = log R^t_ij + log a_i (R^0 = 1/J), c = 1/I with cost_norm (else 1)
// and lambda_t = em_lambda(cfg, t):
//   M-step t  r_ij = exp(l_ij), S_j = sum_i r_ij, w_ij = r_ij / (S_j + eps),
//             mu_jh = sum_i w_ij V_ijh, s_jh = sum_i w_ij (V_ijh - mu_jh)^2,
//             sigma2_jh = max(s_jh, sigma2_min), L_j = sum_h log sigma2_jh,
//             cost_j = c (16 beta_v_j + L_j / 2) S_j,
//             a_j = sigmoid(z_j), z_j = lambda_t (beta_a_j - cost_j)
//   E-step t  p_ij = -1/2 sum_h ((V_ijh - mu_jh)^2 / sigma2_jh + log(2 pi sigma2_jh)) + log a_j,
//   (t < T-1) log R^{t+1}_ij = p_ij - log sum_k exp(p_ik)
// The outputs are mu and a of iteration T-1. Backward walks t = T-1 .. 0:
// M-step t's backward, then E-step t-1's, which hands M-step t-1 the
// adjoints of its mu, sigma2 and log a.
//
// This is the reference: em_backward_full_simd.h does the same operations
// over pose registers, in memory order, and gives these bits.

EmMStepState em_m_step_state(const EmState& st, int t, int b, int B, int I, int J) {
  const size_t ij = size_t(I) * J, tb = size_t(t) * B + b;
  const auto& h = st.hist;
  return {h.log_r.data() + tb * ij,      h.w.data() + tb * ij,         h.sum_ra.data() + tb * J,
          h.log_s2_sum.data() + tb * J,  h.a.data() + tb * J,          h.log_a.data() + tb * J,
          h.mu.data() + tb * J * kPoseDim, h.sigma2.data() + tb * J * kPoseDim};
}

namespace {

// Pairwise sum of 16 floats: a dependency chain of 4 additions, not 16.
inline float sum16(const float* t) {
  float u[8];
  for (int k = 0; k < 8; ++k) u[k] = t[k] + t[k + 8];
  for (int k = 0; k < 4; ++k) u[k] += u[k + 4];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

}  // namespace

EmCapsuleAdjoints em_capsule_backward_head(float* dbeta_a, float* dbeta_v, float da, float dloga,
                                           const EmMStepState& s, float beta_v, float lambda, float c_norm,
                                           const EmLogitCoeffs& k, EmLogit logit, int j) {
  // 1 - a, from log a where a is close to 1 (where 1 - a would cancel).
  const float one_minus_a = s.a[j] <= 0.5f ? 1.f - s.a[j] : -std::expm1(s.log_a[j]);
  const float dz = (da * s.a[j] + dloga) * one_minus_a;
  if (logit == EmLogit::paper) dbeta_a[j] += lambda * dz;
  else dbeta_a[j] += k.ka * lambda * dz;
  const float dcost = -lambda * dz;
  const float S = s.S[j];
  dbeta_v[j] += k.kv * c_norm * S * dcost;
  return {c_norm * (k.kv * beta_v + k.kl * s.L[j]) * dcost, k.kl * c_norm * S * dcost};
}

// Backward of M-step t of one item. In: dmu (J x 16) and da (J; the upstream
// gradient for the last iteration, else nullptr), dsig (J x 16, the adjoint of
// the clamped sigma2) and dloga (J) from E-step t (zero for the last). Adds
// into dV (I x J x 16), dlog_a_in (I), dbeta_a, dbeta_v; writes dl (I x J, the
// adjoint of l_ij, i.e. of log R^t) and uses g (I x J) as scratch:
//   dz_j = (da_j a_j + dloga_j) (1 - a_j);  dbeta_a_j += ka lambda dz_j;  dcost_j = -lambda dz_j
//   dbeta_v_j += kv c S_j dcost_j;  dS_j = c (kv beta_v_j + kl L_j) dcost_j
//     (ka, kv, kl: em_logit_coeffs; the paper's 1, 16, 1/2)
//   ds_jh = [sigma2_jh > sigma2_min] (dsig_jh + kl c S_j dcost_j / sigma2_jh)
//           (the floor passes no gradient, as in the stop-gradient backward)
//   dmu'_jh = dmu_jh - 2 ds_jh sum_i w_ij (V_ijh - mu_jh)           (the mu inside sigma2)
//   with mean_carry r (mu = (1 - r) sum_i w V + r mu^{t-1}): dmu_prev_jh = r dmu'_jh,
//     then dmu'_jh *= 1 - r (the rest below reads this scaled dmu')
//   dV_ijh += w_ij (dmu'_jh + 2 ds_jh (V_ijh - mu_jh))
//   dw_ij = sum_h V_ijh dmu'_jh + (V_ijh - mu_jh)^2 ds_jh = g_ij + sum_h mu_jh dmu'_jh,
//     g_ij = sum_h (V_ijh - mu_jh) (dmu'_jh + (V_ijh - mu_jh) ds_jh)  (centred: no cancellation)
//   dl_ij = r_ij dr_ij, dr_ij = (dw_ij - sum_k w_kj dw_kj) / (S_j + eps) + dS_j, so
//   dl_ij = w_ij (g_ij - sum_k w_kj g_kj + eps / (S_j + eps) sum_h mu_jh dmu'_jh) + r_ij dS_j
//     with r_ij = w_ij (S_j + eps) (with eps = 0 the weights sum to 1 by
//     construction and the mu term is 0);
//   dlog_a_in_i += sum_j dl_ij.
// The loops over h are innermost and element-wise (no sum reassociated);
// g's sum over h is pairwise, an order a SIMD reduction can keep.
void em_m_step_backward_full(float* dV, float* dl, float* dlog_a_in, float* dbeta_a, float* dbeta_v,
                             float* g, float* dmu_prev, const float* dmu, const float* dsig, const float* dloga,
                             const float* da, const float* V, const EmMStepState& s,
                             const float* beta_v, float lambda, int I, int J, const EmConfig& cfg) {
  constexpr int H = kPoseDim;
  const float c = cfg.cost_norm ? 1.f / float(I) : 1.f;
  const EmLogitCoeffs k = em_logit_coeffs(cfg);  // paper: 1, 16, 1/2 (exact products)
  const bool carry = cfg.mean_carry != 0.f;
  const float keep = 1.f - cfg.mean_carry;
  for (int j = 0; j < J; ++j) {
    const float* mu = s.mu + j * H;
    const float* s2 = s.sigma2 + j * H;
    const float S = s.S[j];
    const auto [dS, dL] = em_capsule_backward_head(dbeta_a, dbeta_v, da ? da[j] : 0.f, dloga[j], s, beta_v[j], lambda,
                                                   c, k, cfg.logit, j);
    float ds[H], dm[H], centred[H] = {}, t[H];
    for (int h = 0; h < H; ++h) ds[h] = s2[h] > cfg.sigma2_min ? dsig[j * H + h] + dL / s2[h] : 0.f;
    for (int i = 0; i < I; ++i) {  // sum_i w (V - mu): 0 up to rounding when eps = 0
      const float w = s.w[i * J + j];
      const float* v = V + (size_t(i) * J + j) * H;
      for (int h = 0; h < H; ++h) centred[h] += w * (v[h] - mu[h]);
    }
    float mu_dm = 0.f;
    for (int h = 0; h < H; ++h) {
      dm[h] = dmu[j * H + h] - 2.f * ds[h] * centred[h];
      if (carry) {
        if (dmu_prev) dmu_prev[j * H + h] = cfg.mean_carry * dm[h];
        dm[h] *= keep;
      }
      mu_dm += mu[h] * dm[h];
    }
    float g_mean = 0.f;
    for (int i = 0; i < I; ++i) {
      const float w = s.w[i * J + j];
      const float* v = V + (size_t(i) * J + j) * H;
      float* dv = dV + (size_t(i) * J + j) * H;
      for (int h = 0; h < H; ++h) {
        const float d = v[h] - mu[h];
        dv[h] += w * (dm[h] + 2.f * ds[h] * d);
        t[h] = d * (dm[h] + d * ds[h]);
      }
      const float gi = sum16(t);
      g[i * J + j] = gi;
      g_mean += w * gi;
    }
    const float D = S + cfg.eps;
    const float leak = cfg.eps == 0.f ? 0.f : cfg.eps / D * mu_dm;
    for (int i = 0; i < I; ++i) {
      const float w = s.w[i * J + j];
      dl[i * J + j] = w * (g[i * J + j] - g_mean + leak) + w * D * dS;
    }
  }
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < J; ++j) dlog_a_in[i] += dl[i * J + j];
}

namespace {

// Backward of E-step t of one item (from M-step t's mu, sigma2 and log a to
// log R^{t+1}). In: dlr (I x J, the adjoint of log R^{t+1}) and log R^{t+1}
// itself. Adds into dV; overwrites dmu, dsig (J x 16) and dloga (J), the
// adjoints M-step t's backward takes:
//   dp_ij = dlr_ij - R_ij sum_k dlr_ik                      (log-softmax over j)
//   u_ijh = (V_ijh - mu_jh) / sigma2_jh
//   dV_ijh -= dp_ij u_ijh;  dmu_jh += sum_i dp_ij u_ijh;  dloga_j += sum_i dp_ij
//   dsig_jh += sum_i dp_ij (u_ijh (V_ijh - mu_jh) - 1) / (2 sigma2_jh)
// dsig is the adjoint of the clamped sigma2; M-step t masks it at the floor.
void e_step_backward_full(float* dV, float* dmu, float* dsig, float* dloga, const float* dlr,
                          const float* log_r_next, const float* V, const EmMStepState& s, int I,
                          int J) {
  constexpr int H = kPoseDim;
  float inv_s2[64 * H];
  for (int n = 0; n < J * H; ++n) inv_s2[n] = 1.f / s.sigma2[n];
  std::fill_n(dmu, J * H, 0.f);
  std::fill_n(dsig, J * H, 0.f);
  std::fill_n(dloga, J, 0.f);
  for (int i = 0; i < I; ++i) {
    float sum = 0.f;
    for (int j = 0; j < J; ++j) sum += dlr[i * J + j];
    for (int j = 0; j < J; ++j)
      em_e_pair_backward(dV + (size_t(i) * J + j) * H, dmu + j * H, dsig + j * H, dloga + j, dlr[i * J + j],
                         log_r_next[i * J + j], sum, V + (size_t(i) * J + j) * H, s.mu + j * H, inv_s2 + j * H);
  }
}

}  // namespace

void em_backward_full_f32__scalar(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,
                                  const float* dmu, const float* da_out, const float* V,
                                  const EmState& st, int B, int I, int J, const EmConfig& cfg) {
  constexpr int H = kPoseDim;
  const int T = cfg.iters;
  float* dl = st.scratch.data();  // I x J   adjoint of log R^t
  float* g = dl + size_t(I) * J;  // I x J
  float* dla = g + size_t(I) * J; // I       adjoint of log a_in
  float* dm = dla + I;            // J x 16  adjoint of mu^t
  float* dsig = dm + J * H;       // J x 16  adjoint of sigma2^t (from E-step t)
  float* dloga = dsig + J * H;    // J       adjoint of log a^t (from E-step t)
  float* dcarry = dloga + J;      // J x 16  adjoint of mu^{t-1} through mu^t's carry
  const bool carry = cfg.mean_carry != 0.f;
  for (int b = 0; b < B; ++b) {
    const float* v = V + size_t(b) * I * J * H;
    float* dv = dV + size_t(b) * I * J * H;
    const float* log_a_in = st.log_a_in.data() + size_t(b) * I;
    std::copy_n(dmu + size_t(b) * J * H, J * H, dm);
    std::fill_n(dsig, J * H, 0.f);
    std::fill_n(dloga, J, 0.f);
    std::fill_n(dla, I, 0.f);
    for (int t = T - 1; t >= 0; --t) {
      const EmMStepState s = em_m_step_state(st, t, b, B, I, J);
      em_m_step_backward_full(dv, dl, dla, dbeta_a, dbeta_v, g, t > 0 ? dcarry : nullptr, dm, dsig, dloga,
                              t == T - 1 ? da_out + size_t(b) * J : nullptr, v, s,
                              st.hist.beta_v.data(), em_lambda(cfg, t), I, J, cfg);
      if (t > 0) {  // log R^0 is the constant 1/J: its adjoint goes nowhere
        e_step_backward_full(dv, dm, dsig, dloga, dl, s.log_r, v, em_m_step_state(st, t - 1, b, B, I, J), I, J);
        if (carry)
          for (int n = 0; n < J * H; ++n) dm[n] += dcarry[n];
      }
    }
    // d log sigmoid(z) / dz = 1 - sigmoid(z), from log a as above.
    for (int i = 0; i < I; ++i) da_in_logit[size_t(b) * I + i] += dla[i] * -std::expm1(log_a_in[i]);
  }
}

}  // namespace vg
