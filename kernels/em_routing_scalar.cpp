// Scalar reference of the EM-routing steps (built with -ffp-contract=off).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/em_routing.h"

namespace vg {

namespace {
// log(sigmoid(z)) without overflow or log(0).
inline float log_sigmoid(float z) { return std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z))); }
}  // namespace

void em_m_step_f32__scalar(float* mu, float* a_out, EmState& st, const float* V,
                           const float* beta_a, const float* beta_v, int B, int I, int J,
                           const EmConfig& cfg) {
  constexpr int H = kPoseDim;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      float* w = st.w.data() + size_t(b) * I * J;  // w[i*J + j]
      const float* log_r = st.log_r.data() + size_t(b) * I * J;
      const float* log_a = st.log_a_in.data() + size_t(b) * I;
      float S;
      if (st.frozen) {
        S = st.sum_ra[size_t(b) * J + j];
      } else if (cfg.eps == 0.f) {
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
        S = std::exp(m) * z;
      } else {
        // The seed's form: R a / (sum R a + eps), shrunk toward 0 when sum R a ~ eps.
        S = 0.f;
        for (int i = 0; i < I; ++i) {
          w[i * J + j] = std::exp(log_r[i * J + j] + log_a[i]);
          S += w[i * J + j];
        }
        for (int i = 0; i < I; ++i) w[i * J + j] /= (S + cfg.eps);
      }
      st.sum_ra[size_t(b) * J + j] = S;

      float* m_j = mu + (size_t(b) * J + j) * H;
      float* s2_j = st.sigma2.data() + (size_t(b) * J + j) * H;
      float log_s2_sum = 0.f;
      for (int h = 0; h < H; ++h) {
        float m = 0.f;
        for (int i = 0; i < I; ++i) m += w[i * J + j] * V[((size_t(b) * I + i) * J + j) * H + h];
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
      const float cost = (float(H) * beta_v[j] + 0.5f * log_s2_sum) * S;
      const float z = cfg.lambda * (beta_a[j] - cost);
      st.log_a_out[size_t(b) * J + j] = log_sigmoid(z);
      a_out[size_t(b) * J + j] = 1.f / (1.f + std::exp(-z));
    }
}

void em_e_step_f32__scalar(EmState& st, const float* V, const float* mu, int B, int I, int J) {
  constexpr int H = kPoseDim;
  const float log_2pi = float(std::log(2.0 * std::numbers::pi));
  for (int b = 0; b < B; ++b) {
    // The Gaussian's normaliser depends on j only.
    float norm[64];
    for (int j = 0; j < J; ++j) {
      float s = 0.f;
      for (int h = 0; h < H; ++h) s += std::log(st.sigma2[(size_t(b) * J + j) * H + h]) + log_2pi;
      norm[j] = -0.5f * s + st.log_a_out[size_t(b) * J + j];
    }
    for (int i = 0; i < I; ++i) {
      float* lr = st.log_r.data() + (size_t(b) * I + i) * J;
      float mx = -INFINITY;
      for (int j = 0; j < J; ++j) {
        const float* v = V + ((size_t(b) * I + i) * J + j) * H;
        const float* m = mu + (size_t(b) * J + j) * H;
        const float* s2 = st.sigma2.data() + (size_t(b) * J + j) * H;
        float q = 0.f;
        for (int h = 0; h < H; ++h) {
          const float d = v[h] - m[h];
          q += d * d / s2[h];
        }
        lr[j] = -0.5f * q + norm[j];
        mx = std::max(mx, lr[j]);
      }
      float z = 0.f;
      for (int j = 0; j < J; ++j) z += std::exp(lr[j] - mx);
      const float lse = mx + std::log(z);
      for (int j = 0; j < J; ++j) lr[j] -= lse;
    }
  }
}

void em_backward_f32__scalar(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                             const float* da_out, const float* V, const float* mu,
                             const float* a_out, const EmState& st, int B, int I, int J,
                             const EmConfig& cfg) {
  constexpr int H = kPoseDim;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const float a = a_out[bj];
      const float dz = da_out[bj] * a * (1.f - a);
      dbeta_a[j] += cfg.lambda * dz;
      const float dcost = -cfg.lambda * dz;
      const float S = st.sum_ra[bj];
      dbeta_v[j] += float(H) * S * dcost;
      float ds2[kPoseDim];
      for (int h = 0; h < H; ++h) {
        const float s2 = st.sigma2[bj * H + h];
        ds2[h] = s2 > cfg.sigma2_min ? dcost * S * 0.5f / s2 : 0.f;
      }
      for (int i = 0; i < I; ++i) {
        const float w = st.w[(size_t(b) * I + i) * J + j];
        const float* v = V + ((size_t(b) * I + i) * J + j) * H;
        float* dv = dV + ((size_t(b) * I + i) * J + j) * H;
        for (int h = 0; h < H; ++h)
          dv[h] += w * (dmu[bj * H + h] + 2.f * ds2[h] * (v[h] - mu[bj * H + h]));
      }
    }
}

}  // namespace vg
