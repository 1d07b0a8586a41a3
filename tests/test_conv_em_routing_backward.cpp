// EM routing over convolutional windows, backward: both schemes against
// central differences of the naive double reference (tests/conv_em_reference.h),
// and the gradient contract (accumulate; what the full scheme needs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/conv_em_routing.h"
#include "tests/conv_em_reference.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using namespace cem_test;

// ---------------------------------------------------------------------------
// Backward against central differences of f = <G_mu, mu> + <G_a, a>, in
// double. The difference quotient D(h) = (f(x + h) - f(x - h)) / 2h, h = 1e-4
// (votes O(1), sigma ~ 0.5: far below every scale of f, far above double
// rounding), is within
//   truncation  |D(h) - D(2h)| (D(2h) - D(h) = 3 c h^2 + O(h^4), three times D(h)'s)
//   rounding    A eps_d F / h, F = sum |G_mu mu| + |G_a a|, A >= 1 the routing's
//               amplification of rounding (see amplification(); 1 for the
//               single frozen M-step)
// of the derivative, and the float gradient's own rounding is within
// T (I + J + 16) A eps_f (1 + max |g|): each element sums at most that many
// terms per iteration, on a state whose rounding the routing amplified by A.
// The votes are checked at every 37th coordinate (all windows, children,
// types and pose elements; checking every one costs minutes), the input
// logits and betas at all.
struct Check {
  double A = 1, F = 0;
  int T = 1, I = 1, J = 1;
  std::function<double()> f;
  // nonzero: also require some |derivative| > 1e-3, so the check is not
  // vacuous (not for the betas: J sums of signed terms over the windows).
  void run(std::vector<double>& x, const std::vector<float>& grad, size_t stride, const std::string& what,
           bool nonzero = true) const {
    const double h = 1e-4;
    std::vector<double> fd, trunc;
    std::vector<size_t> at;
    double max_g = 0;
    for (size_t k = 0; k < x.size(); k += stride) {
      const double x0 = x[k];
      auto D = [&](double step) {
        x[k] = x0 + step; const double fp = f();
        x[k] = x0 - step; const double fm = f();
        x[k] = x0;
        return (fp - fm) / (2 * step);
      };
      at.push_back(k);
      fd.push_back(D(h));
      trunc.push_back(std::fabs(fd.back() - D(2 * h)));
      max_g = std::max(max_g, std::fabs(fd.back()));
    }
    const double rounding = A * DBL_EPSILON * F / h + T * (I + J + H) * A * FLT_EPSILON * (1 + max_g);
    for (size_t n = 0; n < at.size(); ++n)
      ASSERT_NEAR(grad[at[n]], fd[n], trunc[n] + rounding) << what << "[" << at[n] << "]";
    if (nonzero) {
      EXPECT_GT(max_g, 1e-3) << what << ": the gradient should not vanish";
    }
  }
};

double outputs_dot(const std::vector<double>& mu, const std::vector<double>& a, const std::vector<float>& G_mu,
                   const std::vector<float>& G_a, double* F = nullptr) {
  double f = 0, mag = 0;
  for (size_t n = 0; n < mu.size(); ++n) f += G_mu[n] * mu[n], mag += std::fabs(G_mu[n] * mu[n]);
  for (size_t n = 0; n < a.size(); ++n) f += G_a[n] * a[n], mag += std::fabs(G_a[n] * a[n]);
  if (F) *F = mag;
  return f;
}

// The stop-gradient backward is the exact derivative of the last M-step with
// the kernel's w = R a / (S + eps), S and the mu inside sigma2 held at their
// forward values (the dense family's 'frozen' routing): that function, in double.
void frozen_m_step(std::vector<double>& mu, std::vector<double>& a, const std::vector<double>& V,
                   const std::vector<double>& ba, const std::vector<double>& bv, const Problem& pr) {
  const EmState& em = pr.st.em;
  const int P = int(pr.a.size()) / pr.s.Co, I = pr.s.I(), J = pr.s.Co;
  const double lambda = em_lambda(pr.cfg, pr.cfg.iters - 1), n = pr.cfg.cost_norm ? 1.0 / I : 1.0;
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < J; ++j) {
      double L = 0;
      for (int h = 0; h < H; ++h) {
        double m = 0, var = 0;
        for (int q = 0; q < I; ++q) m += em.w[(size_t(p) * I + q) * J + j] * V[((size_t(p) * I + q) * J + j) * H + h];
        const double m_held = pr.mu[(size_t(p) * J + j) * H + h];
        for (int q = 0; q < I; ++q) {
          const double d = V[((size_t(p) * I + q) * J + j) * H + h] - m_held;
          var += em.w[(size_t(p) * I + q) * J + j] * d * d;
        }
        mu[(size_t(p) * J + j) * H + h] = m;
        L += std::log(std::max(var, double(pr.cfg.sigma2_min)));
      }
      const double cost = (H * bv[j] + 0.5 * L) * em.sum_ra[size_t(p) * J + j] * n;
      a[size_t(p) * J + j] = 1.0 / (1.0 + std::exp(-lambda * (ba[j] - cost)));
    }
}

TEST(ConvEmRouting, StopGradientBackwardMatchesFiniteDifferencesOfTheFrozenMStep) {
  uint64_t tag = 700;
  for (const ConvVotesShape& s : {shapes()[0], shapes()[1]})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < 4; ++opt)
        for (int iters : {1, 2, 3}) {
          const ConvEmConfig c = option_set(opt, iters, EmGrad::stopgrad, norm);
          const Problem pr(s, c, tag += 10);
          const auto G_mu = test::randn(pr.mu.size(), tag + 1), G_a = test::randn(pr.a.size(), tag + 2);
          std::vector<float> dV(pr.V.size()), dba(s.Co), dbv(s.Co);
          conv_em_routing_backward(dV.data(), nullptr, dba.data(), dbv.data(), G_mu.data(), G_a.data(), pr.V.data(),
                                   pr.mu.data(), pr.a.data(), pr.st, s, c, *conv_em_routing_for(Isa::scalar));
          auto V = to_double(pr.V), ba = to_double(pr.ba), bv = to_double(pr.bv);
          std::vector<double> mu(pr.mu.size()), a(pr.a.size());
          Check chk;
          chk.I = s.I(), chk.J = s.Co;
          chk.f = [&] {
            frozen_m_step(mu, a, V, ba, bv, pr);
            return outputs_dot(mu, a, G_mu, G_a);
          };
          chk.f();
          outputs_dot(mu, a, G_mu, G_a, &chk.F);
          const std::string where = describe(s, c);
          chk.run(V, dV, 37, "dV " + where);
          chk.run(ba, dba, 1, "dbeta_a " + where, false);
          chk.run(bv, dbv, 1, "dbeta_v " + where, false);
        }
}

// The routing's amplification A of rounding, from the reference alone (so a
// wrong kernel cannot widen its own tolerance): every input and every
// rounded intermediate moved by FLT_EPSILON relative, with random signs,
// moves the outputs by A FLT_EPSILON (relative to 1 + |mu| for mu, absolute
// for a in (0, 1)).
double amplification(const std::vector<double>& V, const std::vector<double>& z, const std::vector<double>& ba,
                     const std::vector<double>& bv, const ConvVotesShape& s, const ConvEmConfig& c,
                     const std::vector<std::vector<size_t>>& groups, const Ref& r0, uint64_t tag) {
  auto nudge = [&](std::vector<double> x, uint64_t t) {
    const auto sign = test::randn(x.size(), t);
    for (size_t k = 0; k < x.size(); ++k) x[k] *= 1 + (sign[k] < 0 ? -FLT_EPSILON : FLT_EPSILON);
    return x;
  };
  const Ref r = ref_routing(nudge(V, tag), nudge(z, tag + 1), nudge(ba, tag + 2), nudge(bv, tag + 3), s, c, groups, true);
  double err = 0;
  for (size_t n = 0; n < r0.mu.size(); ++n) err = std::max(err, std::fabs(r.mu[n] - r0.mu[n]) / (1 + std::fabs(r0.mu[n])));
  for (size_t n = 0; n < r0.a.size(); ++n) err = std::max(err, std::fabs(r.a[n] - r0.a[n]));
  return std::max(1.0, err / FLT_EPSILON);
}

TEST(ConvEmRouting, FullBackwardMatchesFiniteDifferencesThrough1To3Iterations) {
  uint64_t tag = 800;
  for (const ConvVotesShape& s : {shapes()[0], shapes()[1], shapes()[3]})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < 4; ++opt)
        for (int iters : {1, 2, 3}) {
          // Every option at 3 iterations; 1 and 2 iterations with the defaults.
          if (opt > 0 && iters < 3) continue;
          const ConvEmConfig c = option_set(opt, iters, EmGrad::full, norm);
          const Problem pr(s, c, tag += 10);
          const auto G_mu = test::randn(pr.mu.size(), tag + 1), G_a = test::randn(pr.a.size(), tag + 2);
          std::vector<float> dV(pr.V.size()), dz(pr.z.size()), dba(s.Co), dbv(s.Co);
          conv_em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), G_mu.data(), G_a.data(), pr.V.data(),
                                   pr.mu.data(), pr.a.data(), pr.st, s, c, *conv_em_routing_for(Isa::scalar));
          auto V = to_double(pr.V), z = to_double(pr.z), ba = to_double(pr.ba), bv = to_double(pr.bv);
          const auto groups = ref_groups(Ref(s), norm);
          const Ref r0 = ref_routing(V, z, ba, bv, s, c, groups);
          Check chk;
          chk.A = amplification(V, z, ba, bv, s, c, groups, r0, tag + 3), chk.T = iters, chk.I = s.I(), chk.J = s.Co;
          outputs_dot(r0.mu, r0.a, G_mu, G_a, &chk.F);
          chk.f = [&] {
            const Ref r = ref_routing(V, z, ba, bv, s, c, groups);
            return outputs_dot(r.mu, r.a, G_mu, G_a);
          };
          const std::string where = describe(s, c);
          chk.run(V, dV, 37, "dV " + where);
          chk.run(z, dz, 1, "da_in_logit " + where);
          chk.run(ba, dba, 1, "dbeta_a " + where, false);
          chk.run(bv, dbv, 1, "dbeta_v " + where, false);
        }
}

TEST(ConvEmRouting, BackwardAccumulatesAndRefusesWhatItCannotDo) {
  // Backward adds into its outputs. Elements written by one addition round
  // once, so adding onto a start value x0 is within u |result| of x0 plus the
  // result from 0: dV in the stop-gradient scheme (one += per vote) and
  // da_in_logit in the full one (one += per child, after the sums).
  const ConvVotesShape s = shapes()[1];
  for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full}) {
    const ConvEmConfig c = option_set(0, 3, grad, ConvEmNorm::paper);
    const Problem pr(s, c, 900);
    const auto G_mu = test::randn(pr.mu.size(), 901), G_a = test::randn(pr.a.size(), 902);
    std::vector<float> dV1(pr.V.size(), 0.f), dz1(pr.z.size(), 0.f), dV2(pr.V.size(), 0.5f), dz2(pr.z.size(), 0.25f);
    std::vector<float> d(s.Co), e(s.Co);
    conv_em_routing_backward(dV1.data(), dz1.data(), d.data(), e.data(), G_mu.data(), G_a.data(), pr.V.data(),
                             pr.mu.data(), pr.a.data(), pr.st, s, c);
    conv_em_routing_backward(dV2.data(), dz2.data(), d.data(), e.data(), G_mu.data(), G_a.data(), pr.V.data(),
                             pr.mu.data(), pr.a.data(), pr.st, s, c);
    if (grad == EmGrad::stopgrad)
      for (size_t k = 0; k < dV1.size(); ++k) {
        const double want = double(dV1[k]) + 0.5;
        ASSERT_NEAR(dV2[k], want, u * std::fabs(want)) << k;
      }
    for (size_t k = 0; k < dz1.size(); ++k) {
      if (grad == EmGrad::stopgrad) {
        ASSERT_EQ(dz2[k], 0.25f) << "the stop-gradient scheme never writes da_in_logit";
        continue;
      }
      const double want = double(dz1[k]) + 0.25;
      ASSERT_NEAR(dz2[k], want, u * std::fabs(want)) << k;
    }
  }
  // The full scheme needs its history and da_in_logit.
  ConvEmConfig c = option_set(0, 3, EmGrad::full, ConvEmNorm::paper);
  Problem pr(s, c, 910);
  std::vector<float> g(pr.V.size()), gz(pr.z.size()), gb(s.Co);
  EXPECT_THROW(conv_em_routing_backward(g.data(), nullptr, gb.data(), gb.data(), pr.mu.data(), pr.a.data(), pr.V.data(),
                                        pr.mu.data(), pr.a.data(), pr.st, s, c), std::invalid_argument);
  c.iters = 2;
  EXPECT_THROW(conv_em_routing_backward(g.data(), gz.data(), gb.data(), gb.data(), pr.mu.data(), pr.a.data(), pr.V.data(),
                                        pr.mu.data(), pr.a.data(), pr.st, s, c), std::invalid_argument);
}

}  // namespace
}  // namespace vg
