// EM routing: invariants of the forward pass, robustness at the numeric edges,
// and the stop-gradient backward checked by finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <string>

#include "kernels/em_routing.h"
#include "tests/test_util.h"

namespace vg {
namespace {

constexpr int I = 8, J = 5, H = kPoseDim;

struct Routing {
  int B;
  EmConfig cfg;
  std::vector<float> V, a_logit, beta_a, beta_v, mu, a;
  EmState st;
  Routing(int B_, uint64_t tag, EmConfig c = {}) : B(B_), cfg(c) {
    V = test::randn(size_t(B) * I * J * H, tag);
    a_logit = test::randn(size_t(B) * I, tag + 1);
    beta_a = test::randn(J, tag + 2, 0.3f);
    beta_v = test::randn(J, tag + 3, 0.3f);
    mu.resize(size_t(B) * J * H);
    a.resize(size_t(B) * J);
    st.resize(B, I, J);
  }
  void forward() {
    em_routing_forward(mu.data(), a.data(), st, V.data(), a_logit.data(), beta_a.data(),
                       beta_v.data(), B, I, J, cfg);
  }
  bool finite() const {
    for (float x : mu) if (!std::isfinite(x)) return false;
    for (float x : a) if (!std::isfinite(x)) return false;
    for (float x : st.log_r) if (!std::isfinite(x)) return false;
    return true;
  }
};

TEST(EmRouting, AssignmentsSumToOneOverUpperCapsules) {
  Routing r(4, 100);
  r.forward();
  for (int b = 0; b < r.B; ++b)
    for (int i = 0; i < I; ++i) {
      double s = 0;
      for (int j = 0; j < J; ++j) s += std::exp(r.st.log_r[(b * I + i) * J + j]);
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
}

TEST(EmRouting, MuIsTheRaWeightedMeanOfTheVotes) {
  Routing r(3, 200);
  r.forward();
  for (int b = 0; b < r.B; ++b)
    for (int j = 0; j < J; ++j) {
      // Recompute R a from the stored log R and the input logits, in double.
      double S = 0, w[I];
      for (int i = 0; i < I; ++i) {
        const double a_in = 1.0 / (1.0 + std::exp(-double(r.a_logit[b * I + i])));
        w[i] = std::exp(double(r.st.log_r[(b * I + i) * J + j])) * a_in;
        S += w[i];
      }
      EXPECT_NEAR(r.st.sum_ra[b * J + j], S, 1e-5 * S);
      for (int h = 0; h < H; ++h) {
        double m = 0, v = 0;
        for (int i = 0; i < I; ++i) m += w[i] / S * r.V[((b * I + i) * J + j) * H + h];
        for (int i = 0; i < I; ++i) {
          const double d = r.V[((b * I + i) * J + j) * H + h] - m;
          v += w[i] / S * d * d;
        }
        EXPECT_NEAR(r.mu[(b * J + j) * H + h], m, 1e-5);
        EXPECT_NEAR(r.st.sigma2[(b * J + j) * H + h], std::max(v, 1e-6), 1e-5 * (1 + v));
      }
    }
}

TEST(EmRouting, ActivationFollowsTheCostFormula) {
  EmConfig c;
  c.lambda = 0.7f;
  Routing r(2, 300, c);
  r.forward();
  for (int b = 0; b < r.B; ++b)
    for (int j = 0; j < J; ++j) {
      double ls = 0;
      for (int h = 0; h < H; ++h) ls += std::log(double(r.st.sigma2[(b * J + j) * H + h]));
      const double cost = (H * r.beta_v[j] + 0.5 * ls) * r.st.sum_ra[b * J + j];
      const double a = 1.0 / (1.0 + std::exp(-0.7 * (r.beta_a[j] - cost)));
      EXPECT_NEAR(r.a[b * J + j], a, 1e-5);
    }
}

TEST(EmRouting, OneIterationKeepsUniformAssignments) {
  EmConfig c;
  c.iters = 1;
  Routing r(2, 400, c);
  r.forward();
  for (float lr : r.st.log_r) EXPECT_FLOAT_EQ(lr, -std::log(float(J)));
}

TEST(EmRouting, IdenticalVotesGiveFlooredVarianceAndNoNaN) {
  // sigma2 -> 0: every lower capsule votes the same pose.
  Routing r(2, 500);
  for (int b = 0; b < r.B; ++b)
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j)
        for (int h = 0; h < H; ++h) r.V[((b * I + i) * J + j) * H + h] = 0.1f * h - 0.3f * j;
  r.forward();
  ASSERT_TRUE(r.finite());
  for (float s2 : r.st.sigma2) EXPECT_FLOAT_EQ(s2, 1e-6f);
  for (int j = 0; j < J; ++j) EXPECT_NEAR(r.mu[j * H + 3], 0.3f - 0.3f * j, 1e-6);
}

TEST(EmRouting, AllActivationsUnderflowingKeepTrueMoments) {
  // sigmoid(-200) underflows to 0 in float: sum R a is 0, yet mu must stay the
  // weighted mean (here the R-weighted mean, as all a_i are equal), never 0/0.
  Routing r(2, 600);
  for (float& x : r.a_logit) x = -200.f;
  r.forward();
  ASSERT_TRUE(r.finite());
  for (float S : r.st.sum_ra) EXPECT_EQ(S, 0.f);
  for (int b = 0; b < r.B; ++b)
    for (int j = 0; j < J; ++j) {
      double wsum = 0;
      for (int i = 0; i < I; ++i) wsum += r.st.w[(b * I + i) * J + j];
      EXPECT_NEAR(wsum, 1.0, 1e-5);
      double m = 0;
      for (int i = 0; i < I; ++i) m += std::exp(double(r.st.log_r[(b * I + i) * J + j])) * r.V[((b * I + i) * J + j) * H];
      double rs = 0;
      for (int i = 0; i < I; ++i) rs += std::exp(double(r.st.log_r[(b * I + i) * J + j]));
      EXPECT_NEAR(r.mu[(b * J + j) * H], m / rs, 1e-4);
    }
}

TEST(EmRouting, DeadClassKeepsItsPoseWithoutEpsilon) {
  // One input alive, the rest dead: without eps the mean is the live capsule's
  // vote; the seed's eps = 1e-9 shrinks it toward 0 once sum R a ~ eps.
  for (float eps : {0.f, 1e-9f}) {
    EmConfig c;
    c.eps = eps;
    Routing r(1, 700, c);
    for (float& x : r.a_logit) x = -30.f;  // a ~ 9e-14
    r.forward();
    ASSERT_TRUE(r.finite());
    double wsum = 0;
    for (int i = 0; i < I; ++i) wsum += r.st.w[i * J];
    if (eps == 0.f) EXPECT_NEAR(wsum, 1.0, 1e-5);
    else EXPECT_LT(wsum, 1e-3) << "the seed's epsilon should dominate sum R a ~ 1e-13";
  }
}

TEST(EmRouting, ExtremeInputsStayFinite) {
  Routing r(3, 800);
  for (size_t k = 0; k < r.V.size(); ++k) r.V[k] *= (k % 3 == 0) ? 1e4f : 1e-4f;
  for (size_t k = 0; k < r.a_logit.size(); ++k) r.a_logit[k] = (k % 2) ? 80.f : -80.f;
  r.beta_v.assign(J, 50.f);
  r.forward();
  EXPECT_TRUE(r.finite());
}

// The stop-gradient backward is the exact gradient of the last M-step with the
// routing weights w = R a / sum(R a) and sum(R a) frozen: check by central
// differences of f = <G_mu, mu> + <G_a, a> with the routing frozen.
TEST(EmRouting, StopGradientBackwardMatchesFiniteDifferencesOfFrozenRouting) {
  // With one iteration R is uniform and beta_a can be centred on the cost
  // exactly, so the activation path is far from saturation; with three, the
  // routing of the seed (E-steps between M-steps) is covered.
  for (auto [iters, lambda] : {std::pair{1, 1.f}, {1, 0.3f}, {1, 3.f}, {3, 1.f}, {3, 0.3f}}) {
    EmConfig c;
    c.lambda = lambda;
    c.iters = iters;
    Routing r(1, 900, c);
    // Votes that agree loosely (a common pose per class plus noise), as after
    // some training; independent N(0,1) votes make EM collapse onto single
    // capsules, where sigma2 sits at its floor and has no derivative.
    const auto common = test::randn(size_t(r.B) * J * H, 903);
    for (int b = 0; b < r.B; ++b)
      for (int i = 0; i < I; ++i)
        for (int j = 0; j < J; ++j)
          for (int h = 0; h < H; ++h)
            r.V[((b * I + i) * J + j) * H + h] =
                common[(b * J + j) * H + h] + 0.5f * r.V[((b * I + i) * J + j) * H + h];
    // Moderate activations, so a(1-a) is not tiny and the cost path matters:
    // centre beta_a on each class's cost.
    r.forward();
    for (int j = 0; j < J; ++j) {
      double ls = 0;
      for (int h = 0; h < H; ++h) ls += std::log(r.st.sigma2[j * H + h]);
      r.beta_a[j] = float((H * r.beta_v[j] + 0.5 * ls) * r.st.sum_ra[j]);
    }
    r.forward();
    const auto G_mu = test::randn(r.mu.size(), 901), G_a = test::randn(r.a.size(), 902);
    std::vector<float> dV(r.V.size(), 0.f), dba(J, 0.f), dbv(J, 0.f);
    em_routing_backward(dV.data(), dba.data(), dbv.data(), G_mu.data(), G_a.data(), r.V.data(),
                        r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
    r.st.frozen = true;
    auto f = [&] {
      r.forward();
      return test::dot(r.mu, G_mu) + test::dot(r.a, G_a);
    };
    const float h = 1e-3f;
    // Central differences with step h are accurate while h << sqrt(sigma2):
    // votes for a (b, j, h) whose variance collapsed to its floor (EM often
    // routes a class to a single capsule) have no usable difference quotient.
    auto conditioned = [&](size_t k) {
      const size_t b = k / (I * J * H), j = (k / H) % J, h = k % H;
      return r.st.sigma2[(b * J + j) * H + h] > 1e-3f;
    };
    auto check = [&](std::vector<float>& x, const std::vector<float>& g, const char* what) {
      double max_err = 0, max_g = 0;
      size_t checked = 0;
      for (size_t k = 0; k < x.size(); ++k) {
        if (&x == &r.V && !conditioned(k)) continue;
        ++checked;
        const float x0 = x[k];
        x[k] = x0 + h; const double fp = f();
        x[k] = x0 - h; const double fm = f();
        x[k] = x0;
        const double fd = (fp - fm) / (2.0 * h);
        max_err = std::max(max_err, std::fabs(fd - g[k]));
        max_g = std::max(max_g, std::fabs(double(g[k])));
      }
      // Float forward, step 1e-3: rounding error ~ eps * |f| / h ~ 1e-3 of the scale.
      EXPECT_LT(max_err, 5e-3 * (1 + max_g)) << what << " lambda=" << lambda << " iters=" << iters;
      // At least one class of votes is well conditioned (EM collapses the rest).
      EXPECT_GE(checked, x.size() / J) << what << ": too few well-conditioned coordinates";
      if (iters == 1) {
        EXPECT_GT(max_g, 1e-3) << what << " gradient should not vanish, lambda=" << lambda;
      }
    };
    check(r.V, dV, "dV");
    check(r.beta_a, dba, "dbeta_a");
    check(r.beta_v, dbv, "dbeta_v");
    r.st.frozen = false;
  }
}

TEST(EmRouting, StopGradientDiffersFromFullDerivative) {
  // Sanity of the test above: unfreezing R changes the derivative, so the
  // frozen check really distinguishes the two semantics.
  Routing r(1, 1000);
  r.beta_a.assign(J, 2.f);
  r.forward();
  const auto G_mu = test::randn(r.mu.size(), 1001), G_a = test::randn(r.a.size(), 1002);
  std::vector<float> dV(r.V.size(), 0.f), dba(J, 0.f), dbv(J, 0.f);
  em_routing_backward(dV.data(), dba.data(), dbv.data(), G_mu.data(), G_a.data(), r.V.data(),
                      r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
  auto f = [&] {
    r.forward();
    return test::dot(r.mu, G_mu) + test::dot(r.a, G_a);
  };
  const float h = 1e-3f;
  double diff = 0;
  for (size_t k = 0; k < r.V.size(); ++k) {
    const float x0 = r.V[k];
    r.V[k] = x0 + h; const double fp = f();
    r.V[k] = x0 - h; const double fm = f();
    r.V[k] = x0;
    diff = std::max(diff, std::fabs((fp - fm) / (2.0 * h) - dV[k]));
  }
  EXPECT_GT(diff, 1e-2);
}

TEST(EmRouting, BackwardAccumulatesAndInputActivationsGetNoGradient) {
  Routing r(2, 1100);
  r.forward();
  const auto G_mu = test::randn(r.mu.size(), 1101), G_a = test::randn(r.a.size(), 1102);
  std::vector<float> dV1(r.V.size(), 0.f), dV2(r.V.size(), 0.5f), d1(J, 0.f), d2(J, 0.f), e1(J, 0.f), e2(J, 1.f);
  em_routing_backward(dV1.data(), d1.data(), e1.data(), G_mu.data(), G_a.data(), r.V.data(), r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
  em_routing_backward(dV2.data(), d2.data(), e2.data(), G_mu.data(), G_a.data(), r.V.data(), r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
  for (size_t k = 0; k < dV1.size(); ++k) EXPECT_NEAR(dV2[k], dV1[k] + 0.5f, 1e-5);
  for (int j = 0; j < J; ++j) EXPECT_NEAR(e2[j], e1[j] + 1.f, 1e-5);
}

}  // namespace
}  // namespace vg

namespace vg {
namespace {

// Every EM-routing variant against the scalar reference, one step at a time:
// each step gets identical inputs (a state made by the scalar routing), so only
// that step's rounding differs. Tolerances are bounds derived per element from
// the magnitudes of the terms the step sums (eps = FLT_EPSILON; the vector
// exp/log are within ~1 ulp, std:: within 1 ulp).
class EmRoutingVariant : public ::testing::TestWithParam<int> {};

TEST_P(EmRoutingVariant, StepsMatchScalarReference) {
  int nv = 0;
  const EmRoutingKernels& k = em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const EmRoutingKernels& ref = *em_routing_for(Isa::scalar);
  const double eps = FLT_EPSILON;
  struct Case { int B, I, J; float eps, lambda, a_shift; bool frozen; };
  // The model's shape at batch 1, 2, 32; shapes whose I*J, J and I leave
  // partial vectors (tails); J = 64 splits the E-step's softmax batches; the
  // seed's eps; underflowing activations (sum R a = 0); the frozen M-step.
  const Case cases[] = {{1, 8, 5, 0.f, 1.f, 0.f, false},  {2, 8, 5, 0.f, 0.7f, 0.f, false},
                        {32, 8, 5, 0.f, 1.f, 0.f, false}, {3, 11, 7, 0.f, 3.f, 0.f, false},
                        {5, 3, 1, 0.f, 1.f, 0.f, false},  {2, 9, 64, 0.f, 1.f, 0.f, false},
                        {4, 8, 5, 1e-9f, 1.f, 0.f, false}, {3, 11, 7, 1e-9f, 0.3f, 0.f, false},
                        {2, 8, 5, 1e-9f, 1.f, -30.f, false},
                        {2, 8, 5, 0.f, 1.f, -200.f, false}, {3, 8, 5, 0.f, 1.f, 0.f, true}};
  uint64_t tag = 2000;
  for (const Case& c : cases) {
    const int B = c.B, I = c.I, J = c.J;
    const std::string where = std::string(isa_name(k.isa)) + " B=" + std::to_string(B) + " I=" +
                              std::to_string(I) + " J=" + std::to_string(J) + " eps=" +
                              std::to_string(c.eps) + (c.frozen ? " frozen" : "");
    EmConfig cfg;
    cfg.eps = c.eps;
    cfg.lambda = c.lambda;
    // Votes that agree loosely (a common pose per class plus noise), so
    // sigma2 is off its floor and the routing is not degenerate.
    auto V = test::randn(size_t(B) * I * J * H, tag++);
    const auto common = test::randn(size_t(B) * J * H, tag++);
    for (size_t n = 0; n < V.size(); ++n) V[n] = common[(n / (size_t(I) * J * H)) * J * H + n % (J * H)] + 0.5f * V[n];
    auto a_logit = test::randn(size_t(B) * I, tag++);
    for (float& x : a_logit) x += c.a_shift;
    const auto beta_a = test::randn(J, tag++, 0.3f), beta_v = test::randn(J, tag++, 0.3f);
    std::vector<float> mu0(size_t(B) * J * H), a0(size_t(B) * J);
    EmState st0;
    st0.resize(B, I, J);
    em_routing_forward(mu0.data(), a0.data(), st0, V.data(), a_logit.data(), beta_a.data(),
                       beta_v.data(), B, I, J, cfg, ref);
    st0.frozen = c.frozen;

    // M-step. w: exp, a sum of I positive terms and a division, in each of the
    // two implementations: |dw| <= kw eps w.
    {
      EmState sr = st0, sv = st0;
      std::vector<float> mr(mu0.size()), mv(mu0.size()), ar(a0.size()), av(a0.size());
      ref.m_step(mr.data(), ar.data(), sr, V.data(), beta_a.data(), beta_v.data(), B, I, J, cfg);
      k.m_step(mv.data(), av.data(), sv, V.data(), beta_a.data(), beta_v.data(), B, I, J, cfg);
      const double kw = c.frozen ? 0.0 : 2.0 * I + 8;
      for (size_t n = 0; n < sr.w.size(); ++n)
        ASSERT_NEAR(sv.w[n], sr.w[n], kw * eps * std::fabs(sr.w[n])) << "w " << where;
      for (int b = 0; b < B; ++b)
        for (int j = 0; j < J; ++j) {
          const size_t bj = size_t(b) * J + j;
          const double S = sr.sum_ra[bj], tol_S = kw * eps * S;
          ASSERT_NEAR(sv.sum_ra[bj], S, tol_S) << "sum_ra " << where;
          double dL = 0, sum_abs_log = 0, sum_log = 0;
          for (int h = 0; h < H; ++h) {
            // mu = sum_i w V: I rounded terms plus w's error.
            double wv = 0, wd = 0, wdd = 0;
            const double m = mr[bj * H + h];
            for (int i = 0; i < I; ++i) {
              const double w = sr.w[(size_t(b) * I + i) * J + j];
              const double x = V[((size_t(b) * I + i) * J + j) * H + h];
              wv += std::fabs(w * x);
              wd += w * std::fabs(x - m);
              wdd += w * (x - m) * (x - m);
            }
            const double tol_mu = (kw + 2.0 * I + 2) * eps * wv;
            ASSERT_NEAR(mv[bj * H + h], m, tol_mu) << "mu h=" << h << " " << where;
            // sigma2 = sum_i w (V - mu)^2: mu's error moves each d by at most
            // tol_mu, and the products and sum round (clamping is 1-Lipschitz).
            const double s2 = sr.sigma2[bj * H + h];
            const double tol_s2 = 2 * tol_mu * wd + tol_mu * tol_mu + (kw + 2.0 * I + 8) * eps * wdd;
            ASSERT_NEAR(sv.sigma2[bj * H + h], s2, tol_s2) << "sigma2 h=" << h << " " << where;
            dL += tol_s2 / std::max(s2 - tol_s2, double(cfg.sigma2_min));
            sum_abs_log += std::fabs(std::log(s2));
            sum_log += std::log(s2);
          }
          // cost = (16 beta_v + sum_h log(sigma2) / 2) S: the logs (1 ulp each
          // side) and their sum of 16 round; then z = lambda (beta_a - cost).
          dL += 20 * eps * sum_abs_log;
          const double cost = (H * beta_v[j] + 0.5 * sum_log) * S;
          const double tol_cost = S * (0.5 * dL + 4 * eps * (H * std::fabs(beta_v[j]) + 0.5 * sum_abs_log)) +
                                  std::fabs(cost) * kw * eps;
          const double z = cfg.lambda * (beta_a[j] - cost);
          const double tol_z = cfg.lambda * (tol_cost + 2 * eps * (std::fabs(beta_a[j]) + std::fabs(cost))) + eps * std::fabs(z);
          const double a = ar[bj];
          ASSERT_NEAR(av[bj], a, a * (1 - a) * tol_z + 4 * eps * a) << "a_out " << where;
          ASSERT_NEAR(sv.log_a_out[bj], sr.log_a_out[bj],
                      (1 - a) * tol_z + 4 * eps * (std::fabs(z) + std::fabs(sr.log_a_out[bj])))
              << "log_a_out " << where;
        }
    }
    if (c.frozen) continue;  // E-step and backward do not depend on the flag

    // E-step: log R = -q/2 + norm_j - lse_i with q = sum_h d^2 / sigma2.
    {
      EmState sr = st0, sv = st0;
      ref.e_step(sr, V.data(), mu0.data(), B, I, J);
      k.e_step(sv, V.data(), mu0.data(), B, I, J);
      const double log_2pi = std::log(2.0 * std::numbers::pi);
      for (int b = 0; b < B; ++b) {
        std::vector<double> tol_norm(J);
        for (int j = 0; j < J; ++j) {
          double sl = 0, nrm = 0;
          for (int h = 0; h < H; ++h) {
            const double l = std::log(double(st0.sigma2[(size_t(b) * J + j) * H + h]));
            sl += std::fabs(l) + log_2pi;
            nrm += l + log_2pi;
          }
          const double la = st0.log_a_out[size_t(b) * J + j];
          tol_norm[j] = 20 * eps * sl + 4 * eps * (0.5 * std::fabs(nrm) + std::fabs(la));
        }
        for (int i = 0; i < I; ++i) {
          std::vector<double> e(J);
          double e_max = 0, lse = 0;
          for (int j = 0; j < J; ++j) {
            double q = 0;
            for (int h = 0; h < H; ++h) {
              const double d = double(V[((size_t(b) * I + i) * J + j) * H + h]) - mu0[(size_t(b) * J + j) * H + h];
              q += d * d / st0.sigma2[(size_t(b) * J + j) * H + h];
            }
            // 16 terms of 3 roundings each, summed: 38 eps q each side.
            e[j] = 0.5 * 38 * eps * q + tol_norm[j] + 4 * eps * 0.5 * q;
            e_max = std::max(e_max, e[j]);
          }
          for (int j = 0; j < J; ++j) lse = std::max(lse, std::fabs(double(sr.log_r[(size_t(b) * I + i) * J + j])));
          for (int j = 0; j < J; ++j) {
            const size_t n = (size_t(b) * I + i) * J + j;
            // lse is 1-Lipschitz in the max norm of its inputs; its own exp,
            // sum of J terms and log round on both sides.
            const double tol = e[j] + e_max + 4 * eps * (lse + J) + 2 * eps * std::fabs(sr.log_r[n]);
            ASSERT_NEAR(sv.log_r[n], sr.log_r[n], tol) << "log_r " << where;
          }
        }
      }
    }

    // Backward: dV += w (dmu + 2 dsigma2 (V - mu)), dsigma2 = dcost S / (2 sigma2).
    {
      const auto dmu = test::randn(mu0.size(), tag++), da = test::randn(a0.size(), tag++);
      const auto dV0 = test::randn(V.size(), tag++);
      std::vector<float> dVr = dV0, dVv = dV0, dbar(J, 0.5f), dbav(J, 0.5f), dbvr(J, -0.5f), dbvv(J, -0.5f);
      ref.backward(dVr.data(), dbar.data(), dbvr.data(), dmu.data(), da.data(), V.data(), mu0.data(),
                   a0.data(), st0, B, I, J, cfg);
      k.backward(dVv.data(), dbav.data(), dbvv.data(), dmu.data(), da.data(), V.data(), mu0.data(),
                 a0.data(), st0, B, I, J, cfg);
      std::vector<double> mag_a(J, 0.5), mag_v(J, 0.5);
      for (int b = 0; b < B; ++b)
        for (int j = 0; j < J; ++j) {
          const size_t bj = size_t(b) * J + j;
          const double a = a0[bj], dz = da[bj] * a * (1 - a), S = st0.sum_ra[bj];
          mag_a[j] += std::fabs(cfg.lambda * dz);
          mag_v[j] += std::fabs(H * S * cfg.lambda * dz);
          for (int h = 0; h < H; ++h) {
            const double s2 = st0.sigma2[bj * H + h];
            const double ds2 = s2 > cfg.sigma2_min ? std::fabs(cfg.lambda * dz * S * 0.5 / s2) : 0.0;
            for (int i = 0; i < I; ++i) {
              const size_t n = ((size_t(b) * I + i) * J + j) * H + h;
              const double w = st0.w[(size_t(b) * I + i) * J + j];
              const double term = w * (std::fabs(dmu[bj * H + h]) + 2 * ds2 * std::fabs(V[n] - mu0[bj * H + h]));
              ASSERT_NEAR(dVv[n], dVr[n], 8 * eps * term + 2 * eps * std::fabs(dVr[n])) << "dV " << where;
            }
          }
        }
      for (int j = 0; j < J; ++j) {
        // B terms, each of a few roundings, summed in b order.
        ASSERT_NEAR(dbav[j], dbar[j], (B + 4) * eps * mag_a[j]) << "dbeta_a " << where;
        ASSERT_NEAR(dbvv[j], dbvr[j], (B + 6) * eps * mag_v[j]) << "dbeta_v " << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, EmRoutingVariant, ::testing::Range(0, [] {
                           int n = 0;
                           em_routing_variants(&n);
                           return n;
                         }()),
                         [](const ::testing::TestParamInfo<int>& p) {
                           int n = 0;
                           return std::string(isa_name(em_routing_variants(&n)[p.param].isa));
                         });

}  // namespace
}  // namespace vg
