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
  // slack: per element, error terms the kernel's formula adds (x's size).
  // step_scale: x's scale in f is 1 / step_scale (the official logit's
  // 5000 beta_a: f bends over 2e-4 of beta_a), so the step is h / step_scale.
  void run(std::vector<double>& x, const std::vector<float>& grad, size_t stride, const std::string& what,
           bool nonzero = true, const std::vector<double>* slack = nullptr, double step_scale = 1) const {
    const double h = 1e-4 / step_scale;
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
      ASSERT_NEAR(grad[at[n]], fd[n], trunc[n] + rounding + (slack ? (*slack)[at[n]] : 0.0)) << what << "[" << at[n] << "]";
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
  const double carry = pr.cfg.mean_carry;
  const EmLogitCoeffs k = em_logit_coeffs(pr.cfg);
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < J; ++j) {
      double L = 0;
      for (int h = 0; h < H; ++h) {
        double m = 0, var = 0;
        for (int q = 0; q < I; ++q) m += em.w[(size_t(p) * I + q) * J + j] * V[((size_t(p) * I + q) * J + j) * H + h];
        // With the mean carry the previous mean is held, and the mu inside
        // sigma2 is not (the kernels' contract, em_routing.h).
        if (carry != 0) m = (1 - carry) * m + carry * em.mu_prev[(size_t(p) * J + j) * H + h];
        const double m_held = carry != 0 ? m : pr.mu[(size_t(p) * J + j) * H + h];
        for (int q = 0; q < I; ++q) {
          const double d = V[((size_t(p) * I + q) * J + j) * H + h] - m_held;
          var += em.w[(size_t(p) * I + q) * J + j] * d * d;
        }
        mu[(size_t(p) * J + j) * H + h] = m;
        L += std::log(std::max(var, double(pr.cfg.sigma2_min)));
      }
      const double cost = (double(k.kv) * bv[j] + double(k.kl) * L) * em.sum_ra[size_t(p) * J + j] * n;
      a[size_t(p) * J + j] = 1.0 / (1.0 + std::exp(-lambda * (double(k.ka) * ba[j] - cost)));
    }
}

// pr's stop-gradient backward (by pr.k, reading pr.vk()) against central
// differences of its frozen last M-step.
void check_stopgrad(const Problem& pr, uint64_t tag, const std::string& where) {
  const ConvVotesShape& s = pr.s;
  const auto G_mu = test::randn(pr.mu.size(), tag), G_a = test::randn(pr.a.size(), tag + 1);
  std::vector<float> dV(pr.V.size()), dba(s.Co), dbv(s.Co);
  conv_em_routing_backward(dV.data(), nullptr, dba.data(), dbv.data(), 0, G_mu.data(), G_a.data(), pr.vk(),
                           pr.mu.data(), pr.a.data(), pr.st, s, pr.cfg, *pr.k);
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
  // The backward forms a (1 - a) from the forward's float a, whose error da =
  // |a_float - a| + u (measured here) is not relative where a ~ 1 (1 - a
  // cancels): dz = G_a a (1 - a) is off by |G_a| da, and so are the terms
  // built on it: dbeta_a += lambda dz, dbeta_v += 16 c S (-lambda dz), and
  // dV += w 2 dsigma2 (V - mu) with dsigma2 = -lambda dz c S / (2 sigma2).
  const int P = int(pr.a.size()) / s.Co, I = s.I(), J = s.Co;
  const double lambda = em_lambda(pr.cfg, pr.cfg.iters - 1), c = pr.cfg.cost_norm ? 1.0 / I : 1.0;
  const EmLogitCoeffs k = em_logit_coeffs(pr.cfg);
  std::vector<double> sl_V(V.size(), 0.0), sl_ba(J, 0.0), sl_bv(J, 0.0);
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < J; ++j) {
      const size_t pj = size_t(p) * J + j;
      const double e_dz = std::fabs(G_a[pj]) * (std::fabs(pr.a[pj] - a[pj]) + u), S = pr.st.em.sum_ra[pj];
      sl_ba[j] += std::fabs(k.ka) * lambda * e_dz;
      sl_bv[j] += k.kv * c * S * lambda * e_dz;
      for (int h = 0; h < H; ++h) {
        const double e_ds2 = lambda * e_dz * c * S * k.kl / pr.st.em.sigma2[pj * H + h];
        for (int q = 0; q < I; ++q) {
          const size_t n = ((size_t(p) * I + q) * J + j) * H + h;
          sl_V[n] = pr.st.em.w[(size_t(p) * I + q) * J + j] * 2 * e_ds2 * std::fabs(V[n] - pr.mu[pj * H + h]);
        }
      }
    }
  chk.run(V, dV, 37, "dV " + where, true, &sl_V);
  chk.run(ba, dba, 1, "dbeta_a " + where, false, &sl_ba, std::fabs(em_logit_coeffs(pr.cfg).ka));
  chk.run(bv, dbv, 1, "dbeta_v " + where, false, &sl_bv);
}

TEST(ConvEmRouting, StopGradientBackwardMatchesFiniteDifferencesOfTheFrozenMStep) {
  uint64_t tag = 700;
  for (const ConvVotesShape& s : {shapes()[0], shapes()[1]})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt)
        for (int iters : {1, 2, 3}) {
          const ConvEmConfig c = option_set(opt, iters, EmGrad::stopgrad, norm);
          tag += 10;
          check_stopgrad(Problem(s, c, tag), tag + 1, describe(s, c));
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

// pr's full backward (by pr.k, reading pr.vk()) against central differences
// of the reference routing.
void check_full(const Problem& pr, uint64_t tag, const std::string& where) {
  const ConvVotesShape& s = pr.s;
  const ConvEmConfig& c = pr.cfg;
  const auto G_mu = test::randn(pr.mu.size(), tag), G_a = test::randn(pr.a.size(), tag + 1);
  std::vector<float> dV(pr.V.size()), dz(pr.z.size()), dba(s.Co), dbv(s.Co);
  conv_em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), 0, G_mu.data(), G_a.data(), pr.vk(),
                           pr.mu.data(), pr.a.data(), pr.st, s, c, *pr.k);
  auto V = to_double(pr.V), z = to_double(pr.z), ba = to_double(pr.ba), bv = to_double(pr.bv);
  const auto groups = ref_groups(Ref(s), c.norm);
  const Ref r0 = ref_routing(V, z, ba, bv, s, c, groups);
  Check chk;
  chk.A = amplification(V, z, ba, bv, s, c, groups, r0, tag + 2), chk.T = c.iters, chk.I = s.I(), chk.J = s.Co;
  outputs_dot(r0.mu, r0.a, G_mu, G_a, &chk.F);
  chk.f = [&] {
    const Ref r = ref_routing(V, z, ba, bv, s, c, groups);
    return outputs_dot(r.mu, r.a, G_mu, G_a);
  };
  chk.run(V, dV, 37, "dV " + where);
  chk.run(z, dz, 1, "da_in_logit " + where);
  chk.run(ba, dba, 1, "dbeta_a " + where, false, nullptr, std::fabs(em_logit_coeffs(c).ka));
  chk.run(bv, dbv, 1, "dbeta_v " + where, false);
}

TEST(ConvEmRouting, FullBackwardMatchesFiniteDifferencesThrough1To3Iterations) {
  uint64_t tag = 800;
  for (const ConvVotesShape& s : {shapes()[0], shapes()[1], shapes()[3]})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt)
        for (int iters : {1, 2, 3}) {
          // Every option at 3 iterations; 1 and 2 iterations with the defaults.
          if (opt > 0 && iters < 3) continue;
          const ConvEmConfig c = option_set(opt, iters, EmGrad::full, norm);
          tag += 10;
          check_full(Problem(s, c, tag), tag + 1, describe(s, c));
        }
}

TEST(ConvEmRouting, BackwardAccumulatesAndRefusesWhatItCannotDo) {
  // Backward adds into its outputs. An element written by one addition (or
  // one fused multiply-add) of the same exact term t onto 0 and onto x0 rounds
  // once each: |result(x0) - (x0 + result(0))| <= u (|x0 + t| + |t|). That
  // holds for dV in the stop-gradient scheme (one += per vote) and
  // da_in_logit in the full one (one += per child, after the sums).
  const ConvVotesShape s = shapes()[1];
  for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full}) {
    const ConvEmConfig c = option_set(0, 3, grad, ConvEmNorm::paper);
    const Problem pr(s, c, 900);
    const auto G_mu = test::randn(pr.mu.size(), 901), G_a = test::randn(pr.a.size(), 902);
    std::vector<float> dV1(pr.V.size(), 0.f), dz1(pr.z.size(), 0.f), dV2(pr.V.size(), 0.5f), dz2(pr.z.size(), 0.25f);
    std::vector<float> d(s.Co), e(s.Co);
    conv_em_routing_backward(dV1.data(), dz1.data(), d.data(), e.data(), 0, G_mu.data(), G_a.data(), pr.V.data(),
                             pr.mu.data(), pr.a.data(), pr.st, s, c);
    conv_em_routing_backward(dV2.data(), dz2.data(), d.data(), e.data(), 0, G_mu.data(), G_a.data(), pr.V.data(),
                             pr.mu.data(), pr.a.data(), pr.st, s, c);
    if (grad == EmGrad::stopgrad)
      for (size_t k = 0; k < dV1.size(); ++k) {
        const double want = double(dV1[k]) + 0.5;
        ASSERT_NEAR(dV2[k], want, u * (std::fabs(want) + std::fabs(dV1[k]))) << k;
      }
    for (size_t k = 0; k < dz1.size(); ++k) {
      if (grad == EmGrad::stopgrad) {
        ASSERT_EQ(dz2[k], 0.25f) << "the stop-gradient scheme never writes da_in_logit";
        continue;
      }
      const double want = double(dz1[k]) + 0.25;
      ASSERT_NEAR(dz2[k], want, u * (std::fabs(want) + std::fabs(dz1[k]))) << k;
    }
  }
  // The full scheme needs its history and da_in_logit.
  ConvEmConfig c = option_set(0, 3, EmGrad::full, ConvEmNorm::paper);
  Problem pr(s, c, 910);
  std::vector<float> g(pr.V.size()), gz(pr.z.size()), gb(s.Co);
  EXPECT_THROW(conv_em_routing_backward(g.data(), nullptr, gb.data(), gb.data(), 0, pr.mu.data(), pr.a.data(),
                                        pr.V.data(), pr.mu.data(), pr.a.data(), pr.st, s, c), std::invalid_argument);
  c.iters = 2;
  EXPECT_THROW(conv_em_routing_backward(g.data(), gz.data(), gb.data(), gb.data(), 0, pr.mu.data(), pr.a.data(),
                                        pr.V.data(), pr.mu.data(), pr.a.data(), pr.st, s, c), std::invalid_argument);
}

// dbeta_step = Co: each M-step's betas' terms in a row of their own. The rows
// (filled with -0.f), added in order onto gradients that already hold
// something, give the bits of adding in place; everything else the call
// writes is the same too. Every variant, two items, both normalisations; the
// stop-gradient scheme refuses a step.
TEST(ConvEmRouting, TheBetasTermsInRowsAddUpToTheInPlaceSumsBitForBit) {
  const ConvVotesShape s = ConvVotesShape::conv(2, 5, 5, 2, 8, 3, 2);
  int nv = 0;
  const ConvEmRoutingKernels* ks = conv_em_routing_variants(&nv);
  for (int v = 0; v < nv; ++v) {
    if (!isa_supported(ks[v].isa)) continue;
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official}) {
      const ConvEmConfig c = option_set(0, 3, EmGrad::full, norm);
      SCOPED_TRACE(std::string(isa_name(ks[v].isa)) + " " + describe(s, c));
      const Problem pr(s, c, 960, ks[v]);
      const auto G_mu = test::randn(pr.mu.size(), 961), G_a = test::randn(pr.a.size(), 962);
      const std::vector<float> held_a = test::randn(s.Co, 963), held_v = test::randn(s.Co, 964);
      const size_t J = size_t(s.Co), rows = size_t(s.B) * c.iters * s.Ho() * s.Wo();
      std::vector<float> dV1(pr.V.size(), 0.f), dz1(pr.z.size(), 0.f), da1 = held_a, dv1 = held_v;
      conv_em_routing_backward(dV1.data(), dz1.data(), da1.data(), dv1.data(), 0, G_mu.data(), G_a.data(), pr.vk(),
                               pr.mu.data(), pr.a.data(), pr.st, s, c, ks[v]);
      std::vector<float> dV2(pr.V.size(), 0.f), dz2(pr.z.size(), 0.f), ra(rows * J, -0.f), rv(rows * J, -0.f);
      conv_em_routing_backward(dV2.data(), dz2.data(), ra.data(), rv.data(), J, G_mu.data(), G_a.data(), pr.vk(),
                               pr.mu.data(), pr.a.data(), pr.st, s, c, ks[v]);
      std::vector<float> da2 = held_a, dv2 = held_v;
      for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < J; ++j) da2[j] += ra[r * J + j], dv2[j] += rv[r * J + j];
      EXPECT_EQ(da2, da1);
      EXPECT_EQ(dv2, dv1);
      EXPECT_EQ(dV2, dV1);
      EXPECT_EQ(dz2, dz1);
      EXPECT_NE(ra, std::vector<float>(rows * J, -0.f));  // the rows hold terms
    }
  }
  const ConvEmConfig sg = option_set(0, 3, EmGrad::stopgrad, ConvEmNorm::paper);
  const Problem pr(s, sg, 965);
  std::vector<float> g(pr.V.size()), gb(s.Co);
  EXPECT_THROW(conv_em_routing_backward(g.data(), nullptr, gb.data(), gb.data(), size_t(s.Co), pr.mu.data(),
                                        pr.a.data(), pr.V.data(), pr.mu.data(), pr.a.data(), pr.st, s, sg),
               std::invalid_argument);
}

TEST(ConvEmRouting, ForwardAndBackwardAllocateNothingOnceSized) {
  // ConvEmState::resize sizes every buffer (the history and scratch of the
  // full scheme, the SIMD E-step's run): the hot path allocates nothing.
  int nv = 0;
  const ConvEmRoutingKernels* ks = conv_em_routing_variants(&nv);
  for (int v = 0; v < nv; ++v) {
    if (!isa_supported(ks[v].isa)) continue;
    for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full})
      for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official}) {
        const ConvEmConfig c = option_set(0, 3, grad, norm);
        const Problem pr(shapes()[1], c, 950, ks[v]);
        std::vector<float> mu(pr.mu.size()), a(pr.a.size()), dV(pr.V.size()), dz(pr.z.size()), dba(pr.s.Co), dbv(pr.s.Co);
        ConvEmState st;
        st.resize(pr.s, c);
        const auto before = test::allocations_on_this_thread().all;
        conv_em_routing_forward(mu.data(), a.data(), st, pr.vk(), pr.z.data(), pr.ba.data(), pr.bv.data(), pr.s, c, ks[v]);
        conv_em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), 0, pr.mu.data(), pr.a.data(), pr.vk(),
                                 mu.data(), a.data(), st, pr.s, c, ks[v]);
        EXPECT_EQ(test::allocations_on_this_thread().all, before) << isa_name(ks[v].isa) << " " << describe(pr.s, c);
      }
  }
}

// Every variant of the kernel list: both backward schemes on the state of its
// own forward (the dense family's M-step and stop-gradient backward of its
// ISA, this family's E-step and full backward of its ISA), votes read
// misaligned in every other case.
class ConvEmRoutingVariantBackward : public ::testing::TestWithParam<int> {};

TEST_P(ConvEmRoutingVariantBackward, BothSchemesMatchFiniteDifferences) {
  int nv = 0;
  const ConvEmRoutingKernels& k = conv_em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  uint64_t tag = 1100;
  bool misalign = false;
  for (const ConvVotesShape& s : {ConvVotesShape::conv(1, 5, 5, 2, 8, 3, 2), ConvVotesShape::conv(1, 5, 4, 1, 7, 3, 1)})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt : {0, 1, 3}) {
        misalign = !misalign;
        const std::string where = std::string(isa_name(k.isa)) + (misalign ? " misaligned " : " ");
        const ConvEmConfig sg = option_set(opt, 3, EmGrad::stopgrad, norm), full = option_set(opt, 3, EmGrad::full, norm);
        tag += 10;
        check_stopgrad(Problem(s, sg, tag, k, misalign), tag + 1, where + describe(s, sg));
        check_full(Problem(s, full, tag, k, misalign), tag + 3, where + describe(s, full));
      }
  // The official code's logit and mean carry together (option set 6).
  tag = 1500;
  for (const ConvVotesShape& s : {ConvVotesShape::conv(1, 5, 5, 2, 8, 3, 2), ConvVotesShape::conv(1, 5, 4, 1, 7, 3, 1)})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official}) {
      misalign = !misalign;
      const std::string where = std::string(isa_name(k.isa)) + (misalign ? " misaligned " : " ");
      const ConvEmConfig sg = option_set(6, 3, EmGrad::stopgrad, norm), full = option_set(6, 3, EmGrad::full, norm);
      tag += 10;
      check_stopgrad(Problem(s, sg, tag, k, misalign), tag + 1, where + describe(s, sg));
      check_full(Problem(s, full, tag, k, misalign), tag + 3, where + describe(s, full));
    }
}

TEST_P(ConvEmRoutingVariantBackward, FullBackwardIsTheScalarReferenceBitForBit) {
  // The SIMD full backward (conv_em_routing_simd.h over
  // em_backward_full_simd.h) against the scalar reference from one forward's
  // history: both E-step normalisations, every option set (the official
  // logit, the mean carry, eps > 0, cost_norm among them), 1 to 4
  // iterations, and shapes around its loops: I = K K Ci odd (9, 25) and even
  // (18), J = 1, 5 (a class layer's), 16, stride 1 and 2, a grid whose last
  // row and column no window covers, one window, misaligned votes. Equality
  // is exact: the variant rounds every operation the reference rounds, in its
  // order (no FMA, sums over children and windows in the reference's order,
  // the sum over h in its pairwise order, exp and expm1 as it calls them).
  // The gradients start nonzero, so the accumulation is compared too.
  int nv = 0;
  const ConvEmRoutingKernels& k = conv_em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const ConvEmRoutingKernels& ref = *conv_em_routing_for(Isa::scalar);
  uint64_t tag = 1700;
  bool misalign = false;
  for (const ConvVotesShape& s : {ConvVotesShape::conv(2, 5, 5, 1, 5, 3, 1), ConvVotesShape::conv(1, 6, 6, 2, 16, 3, 2),
                                  ConvVotesShape::conv(1, 5, 5, 1, 1, 5, 1), ConvVotesShape::conv(1, 7, 7, 1, 5, 3, 2)})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt)
        for (int iters : {1, 2, 4}) {
          misalign = !misalign;
          tag += 10;
          const ConvEmConfig c = option_set(opt, iters, EmGrad::full, norm);
          const Problem pr(s, c, tag, k, misalign);
          const auto G_mu = test::randn(pr.mu.size(), tag + 1), G_a = test::randn(pr.a.size(), tag + 2);
          auto grads = [&](const ConvEmRoutingKernels& kk) {
            std::vector<std::vector<float>> g{test::randn(pr.V.size(), tag + 3), test::randn(pr.z.size(), tag + 4),
                                              test::randn(s.Co, tag + 5), test::randn(s.Co, tag + 6)};
            conv_em_routing_backward(g[0].data(), g[1].data(), g[2].data(), g[3].data(), 0, G_mu.data(), G_a.data(),
                                     pr.vk(), pr.mu.data(), pr.a.data(), pr.st, s, c, kk);
            return g;
          };
          const auto gk = grads(k), gr = grads(ref);
          const std::string where = std::string(isa_name(k.isa)) + (misalign ? " misaligned " : " ") + describe(s, c);
          ASSERT_EQ(gk[0], gr[0]) << "dV " << where;
          ASSERT_EQ(gk[1], gr[1]) << "da_in_logit " << where;
          ASSERT_EQ(gk[2], gr[2]) << "dbeta_a " << where;
          ASSERT_EQ(gk[3], gr[3]) << "dbeta_v " << where;
        }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ConvEmRoutingVariantBackward, ::testing::Range(0, test::variant_count(conv_em_routing_variants)),
                         test::variant_names(conv_em_routing_variants));

}  // namespace
}  // namespace vg
