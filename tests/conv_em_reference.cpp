// The naive reference of EM routing over convolutional windows (see
// tests/conv_em_reference.h).
#include "tests/conv_em_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace vg::cem_test {

void ref_init(Ref& r, const std::vector<double>& z, ConvEmNorm norm) {
  std::vector<double> held(z.size(), 0.0);  // windows holding each child
  for (int p = 0; p < r.P; ++p)
    for (int q = 0; q < r.I; ++q) {
      int b, y, x, ci;
      r.child(p, q, &b, &y, &x, &ci);
      held[((size_t(b) * r.s.H + y) * r.s.W + x) * r.s.Ci + ci] += 1;
    }
  for (int p = 0; p < r.P; ++p)
    for (int q = 0; q < r.I; ++q) {
      int b, y, x, ci;
      r.child(p, q, &b, &y, &x, &ci);
      const size_t c = ((size_t(b) * r.s.H + y) * r.s.W + x) * r.s.Ci + ci;
      r.la[size_t(p) * r.I + q] = -std::log1p(std::exp(-z[c]));
      const double n = norm == ConvEmNorm::paper ? held[c] : 1.0;
      for (int j = 0; j < r.J; ++j) r.R[(size_t(p) * r.I + q) * r.J + j] = 1.0 / (n * r.J);
    }
}

void ref_m_step(Ref& r, const std::vector<double>& V, const std::vector<double>& ba,
                const std::vector<double>& bv, const EmConfig& cfg, double lambda) {
  std::vector<double> ra(r.I);  // R a of the parent's children
  for (int p = 0; p < r.P; ++p)
    for (int j = 0; j < r.J; ++j) {
      double S = 0;
      for (int q = 0; q < r.I; ++q) S += ra[q] = r.jitter(r.R[(size_t(p) * r.I + q) * r.J + j] * std::exp(r.la[size_t(p) * r.I + q]));
      double L = 0;
      for (int h = 0; h < H; ++h) {
        double m = 0, var = 0;
        for (int q = 0; q < r.I; ++q) m += ra[q] / (S + cfg.eps) * V[r.v(p, q, j, h)];
        // The official mean carry: r.mu still holds the last iteration's mean (0 at first).
        if (cfg.mean_carry != 0.f) m = (1 - cfg.mean_carry) * m + cfg.mean_carry * r.mu[(size_t(p) * r.J + j) * H + h];
        m = r.jitter(m);
        for (int q = 0; q < r.I; ++q) {
          const double d = V[r.v(p, q, j, h)] - m;
          var += ra[q] / (S + cfg.eps) * d * d;
        }
        r.mu[(size_t(p) * r.J + j) * H + h] = m;
        r.s2[(size_t(p) * r.J + j) * H + h] = std::max(r.jitter(var), double(cfg.sigma2_min));
        L += std::log(r.s2[(size_t(p) * r.J + j) * H + h]);
      }
      const bool official = cfg.logit == EmLogit::official;
      const double kv = official ? 16 * (std::log(2 * std::numbers::pi) + 1) : H, kl = official ? 1.0 : 0.5;
      double cost = r.jitter((kv * bv[j] + kl * r.jitter(L)) * S);
      if (cfg.cost_norm) cost /= r.I;
      r.S[size_t(p) * r.J + j] = S;
      const double z = official ? -cost - 5000 * ba[j] : ba[j] - cost;
      r.a[size_t(p) * r.J + j] = r.jitter(1.0 / (1.0 + std::exp(-lambda * z)));
    }
}

std::vector<double> ref_log_p(Ref& r, const std::vector<double>& V) {
  std::vector<double> lp(r.R.size()), log_2pi_s2(r.s2.size());
  for (size_t k = 0; k < r.s2.size(); ++k) log_2pi_s2[k] = std::log(2 * std::numbers::pi * r.s2[k]);
  for (int p = 0; p < r.P; ++p)
    for (int q = 0; q < r.I; ++q)
      for (int j = 0; j < r.J; ++j) {
        double l = std::log(r.a[size_t(p) * r.J + j]);
        for (int h = 0; h < H; ++h) {
          const size_t pjh = (size_t(p) * r.J + j) * H + h;
          const double d = V[r.v(p, q, j, h)] - r.mu[pjh];
          l -= 0.5 * (d * d / r.s2[pjh] + log_2pi_s2[pjh]);
        }
        lp[(size_t(p) * r.I + q) * r.J + j] = r.jitter(l);
      }
  return lp;
}

std::vector<std::vector<size_t>> ref_groups(const Ref& r, ConvEmNorm norm) {
  std::vector<std::vector<size_t>> groups;
  for (int b = 0; b < r.s.B; ++b)
    for (int y = 0; y < r.s.H; ++y)
      for (int x = 0; x < r.s.W; ++x)
        for (int ci = 0; ci < r.s.Ci; ++ci) {
          const auto hold = r.holders(b, y, x, ci);
          if (hold.empty()) continue;
          for (int j0 = 0; j0 < (norm == ConvEmNorm::paper ? 1 : r.J); ++j0) {
            groups.emplace_back();
            for (auto [p, q] : hold)
              for (int j = 0; j < r.J; ++j)
                if (norm == ConvEmNorm::paper || j == j0) groups.back().push_back((size_t(p) * r.I + q) * r.J + j);
          }
        }
  return groups;
}

void ref_e_step(Ref& r, const std::vector<double>& V, const std::vector<std::vector<size_t>>& groups) {
  const std::vector<double> lp = ref_log_p(r, V);
  for (const auto& set : groups) {
    double z = 0;
    for (size_t e : set) z += std::exp(lp[e]);
    for (size_t e : set) r.R[e] = r.jitter(std::exp(lp[e]) / z);
  }
}

Ref ref_routing(const std::vector<double>& V, const std::vector<double>& z, const std::vector<double>& ba,
                const std::vector<double>& bv, const ConvVotesShape& s, const ConvEmConfig& cfg,
                const std::vector<std::vector<size_t>>& groups, bool noisy) {
  Ref r(s);
  r.noisy = noisy;
  ref_init(r, z, cfg.norm);
  for (int t = 0; t < cfg.iters; ++t) {
    ref_m_step(r, V, ba, bv, cfg, em_lambda(cfg, t));
    if (t + 1 < cfg.iters) ref_e_step(r, V, groups);
  }
  return r;
}

std::string describe(const ConvVotesShape& s, const ConvEmConfig& c) {
  return std::to_string(s.H) + "x" + std::to_string(s.W) + "x" + std::to_string(s.Ci) + "->" +
         std::to_string(s.Ho()) + "x" + std::to_string(s.Wo()) + "x" + std::to_string(s.Co) + " K" +
         std::to_string(s.K) + " s" + std::to_string(s.stride) + " iters=" + std::to_string(c.iters) +
         (c.norm == ConvEmNorm::paper ? " paper" : " official") + (c.lambda_schedule ? " scheduled" : "") +
         (c.cost_norm ? " cost_norm" : "") + (c.logit == EmLogit::official ? " official-logit" : "") +
         (c.mean_carry != 0.f ? " mean-carry=" + std::to_string(c.mean_carry) : "") + " eps=" + std::to_string(c.eps) +
         " sigma2_min=" + std::to_string(c.sigma2_min);
}

std::vector<ConvVotesShape> shapes() {
  return {ConvVotesShape::conv(2, 5, 5, 2, 3, 3, 1), ConvVotesShape::conv(2, 5, 5, 2, 3, 3, 2),
          ConvVotesShape::conv(1, 7, 7, 2, 3, 3, 2), ConvVotesShape::conv(1, 6, 6, 2, 4, 3, 2)};
}

ConvEmConfig option_set(int opt, int iters, EmGrad grad, ConvEmNorm norm) {
  ConvEmConfig c;
  c.iters = iters;
  c.grad = grad;
  c.norm = norm;
  c.lambda_schedule = opt == 1 || opt == 6;
  c.lambda = c.lambda_schedule ? 2.f : 1.f;
  c.cost_norm = opt == 2;
  if (opt == 3) c.eps = 1e-2f, c.sigma2_min = 0.05f;
  if (opt == 4 || opt == 6) c.logit = EmLogit::official;
  if (opt == 5 || opt == 6) c.mean_carry = 0.1f;
  return c;
}

}  // namespace vg::cem_test
