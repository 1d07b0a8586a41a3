// EM routing: invariants of the forward pass, robustness at the numeric edges,
// and the stop-gradient backward checked by finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>

#include "kernels/em_dots.h"
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
    em_routing_backward(dV.data(), nullptr, dba.data(), dbv.data(), G_mu.data(), G_a.data(), r.V.data(),
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
  em_routing_backward(dV.data(), nullptr, dba.data(), dbv.data(), G_mu.data(), G_a.data(), r.V.data(),
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
  ASSERT_EQ(r.cfg.grad, EmGrad::stopgrad);
  std::vector<float> dV1(r.V.size(), 0.f), dV2(r.V.size(), 0.5f), d1(J, 0.f), d2(J, 0.25f), e1(J, 0.f), e2(J, 1.f);
  // The stop-gradient scheme may be handed a da_in_logit buffer; it must leave it alone.
  std::vector<float> da(size_t(r.B) * I, 7.f);
  em_routing_backward(dV1.data(), nullptr, d1.data(), e1.data(), G_mu.data(), G_a.data(), r.V.data(), r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
  em_routing_backward(dV2.data(), da.data(), d2.data(), e2.data(), G_mu.data(), G_a.data(), r.V.data(), r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
  for (size_t k = 0; k < dV1.size(); ++k) EXPECT_NEAR(dV2[k], dV1[k] + 0.5f, 1e-5);
  for (int j = 0; j < J; ++j) EXPECT_NEAR(d2[j], d1[j] + 0.25f, 1e-5);
  for (int j = 0; j < J; ++j) EXPECT_NEAR(e2[j], e1[j] + 1.f, 1e-5);
  for (float x : da) EXPECT_EQ(x, 7.f);
  // Accumulation would hide a backward that writes nothing: the gradients themselves are not zero.
  const auto nonzero = [](const std::vector<float>& v) { return std::any_of(v.begin(), v.end(), [](float x) { return x != 0.f; }); };
  EXPECT_TRUE(nonzero(dV1) && nonzero(d1) && nonzero(e1));
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
  struct Case {
    int B, I, J;
    float eps, lambda, a_shift;
    bool frozen, cost_norm = false, schedule = false;
    float sigma2_min = 1e-6f;
  };
  // The model's shape at batch 1, 2, 32; shapes whose I*J, J and I leave
  // partial vectors (tails); J = 64 splits the E-step's softmax batches; the
  // seed's eps; underflowing activations (sum R a = 0); the frozen M-step;
  // the options: cost normalisation, the lambda schedule (the steps get the
  // last iteration's lambda, e.g. 0.0014 for the official final 0.01), a
  // variance floor that clamps part of sigma2, and all of them frozen.
  const Case cases[] = {{1, 8, 5, 0.f, 1.f, 0.f, false},  {2, 8, 5, 0.f, 0.7f, 0.f, false},
                        {32, 8, 5, 0.f, 1.f, 0.f, false}, {3, 11, 7, 0.f, 3.f, 0.f, false},
                        {5, 3, 1, 0.f, 1.f, 0.f, false},  {2, 9, 64, 0.f, 1.f, 0.f, false},
                        {4, 8, 5, 1e-9f, 1.f, 0.f, false}, {3, 11, 7, 1e-9f, 0.3f, 0.f, false},
                        {2, 8, 5, 1e-9f, 1.f, -30.f, false},
                        {2, 8, 5, 0.f, 1.f, -200.f, false}, {3, 8, 5, 0.f, 1.f, 0.f, true},
                        {32, 8, 5, 0.f, 1.f, 0.f, false, true},
                        {3, 11, 7, 0.f, 2.f, 0.f, false, true, true},
                        {4, 8, 5, 0.f, 0.01f, 0.f, false, false, true},
                        {2, 8, 5, 0.f, 1.f, 0.f, false, false, false, 0.2f},
                        {3, 11, 7, 1e-9f, 2.f, 0.f, false, true, true, 0.2f},
                        {3, 8, 5, 1e-9f, 2.f, 0.f, true, true, true, 0.2f},
                        // Sizes about the tiles: the exp/log registers (4, 8, 16
                        // floats) against I*J, J and B*J (tile-1, tile, tile+1,
                        // 10 tile+3), the upper capsules per moments pass (2 or 4)
                        // against J, and I = 103 rows, one more than the E-step
                        // batches of 512 / J at J = 5.
                        {1, 5, 3, 0.f, 1.f, 0.f, false},  {4, 4, 4, 0.f, 1.f, 0.f, false},
                        {17, 17, 1, 0.f, 1.f, 0.f, false}, {1, 163, 1, 1e-9f, 1.f, 0.f, false},
                        {163, 1, 1, 0.f, 1.f, 0.f, false}, {1, 3, 43, 0.f, 1.f, 0.f, false},
                        {3, 103, 5, 0.f, 1.f, 0.f, false}, {2, 7, 9, 0.f, 1.f, 0.f, true}};
  uint64_t tag = 2000;
  bool misalign = false;
  for (const Case& c : cases) {
    misalign = !misalign;  // every other case reads its votes one float off alignment
    const int B = c.B, I = c.I, J = c.J;
    const std::string where = std::string(isa_name(k.isa)) + " B=" + std::to_string(B) + " I=" +
                              std::to_string(I) + " J=" + std::to_string(J) + " eps=" +
                              std::to_string(c.eps) + (c.frozen ? " frozen" : "") +
                              (c.cost_norm ? " cost_norm" : "") + (c.schedule ? " scheduled" : "") +
                              " sigma2_min=" + std::to_string(c.sigma2_min) + (misalign ? " misaligned" : "");
    EmConfig routing;
    routing.eps = c.eps;
    routing.lambda = c.lambda;
    routing.cost_norm = c.cost_norm;
    routing.lambda_schedule = c.schedule;
    routing.sigma2_min = c.sigma2_min;
    // The step kernels' config: the last iteration's (lambda resolved).
    const EmConfig cfg = em_step_config(routing, routing.iters - 1);
    const double cn = c.cost_norm ? 1.0 / I : 1.0;  // the cost's normalisation
    // Votes that agree loosely (a common pose per class plus noise), so
    // sigma2 is off its floor and the routing is not degenerate.
    auto V = test::randn(size_t(B) * I * J * H, tag++);
    const auto common = test::randn(size_t(B) * J * H, tag++);
    for (size_t n = 0; n < V.size(); ++n) V[n] = common[(n / (size_t(I) * J * H)) * J * H + n % (J * H)] + 0.5f * V[n];
    std::vector<float> V_buf(V.size() + 1);
    std::copy(V.begin(), V.end(), V_buf.begin() + misalign);
    const float* Vk = V_buf.data() + misalign;  // what the step kernels read
    auto a_logit = test::randn(size_t(B) * I, tag++);
    for (float& x : a_logit) x += c.a_shift;
    const auto beta_a = test::randn(J, tag++, 0.3f), beta_v = test::randn(J, tag++, 0.3f);
    std::vector<float> mu0(size_t(B) * J * H), a0(size_t(B) * J);
    EmState st0;
    st0.resize(B, I, J);
    em_routing_forward(mu0.data(), a0.data(), st0, V.data(), a_logit.data(), beta_a.data(),
                       beta_v.data(), B, I, J, routing, ref);
    st0.frozen = c.frozen;

    // M-step. w: exp, a sum of I positive terms and a division, in each of the
    // two implementations: |dw| <= kw eps w.
    {
      EmState sr = st0, sv = st0;
      std::vector<float> mr(mu0.size()), mv(mu0.size()), ar(a0.size()), av(a0.size());
      ref.m_step(mr.data(), ar.data(), sr, Vk, beta_a.data(), beta_v.data(), B, I, J, cfg);
      k.m_step(mv.data(), av.data(), sv, Vk, beta_a.data(), beta_v.data(), B, I, J, cfg);
      if (!c.frozen) {  // the weights alone (a replay's) are this ISA's M-step's, bit for bit
        std::vector<float> w(sv.w.size(), NAN), S(sv.sum_ra.size(), NAN);
        k.m_weights(w.data(), S.data(), st0.log_r.data(), st0.log_a_in.data(), B, I, J, cfg.eps);
        ASSERT_EQ(w, sv.w) << "m_weights " << where;
        ASSERT_EQ(S, sv.sum_ra) << "m_weights " << where;
      }
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
          // cost = (16 beta_v + sum_h log(sigma2) / 2) S [/ I]: the logs (1 ulp
          // each side) and their sum of 16 round, and the division by I; then
          // z = lambda (beta_a - cost).
          dL += 20 * eps * sum_abs_log;
          ASSERT_NEAR(sv.log_s2_sum[bj], sr.log_s2_sum[bj], dL) << "log_s2_sum " << where;
          const double cost = (H * beta_v[j] + 0.5 * sum_log) * S * cn;
          const double tol_cost = S * cn * (0.5 * dL + 4 * eps * (H * std::fabs(beta_v[j]) + 0.5 * sum_abs_log)) +
                                  std::fabs(cost) * (kw + 2) * eps;
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
      ref.e_step(sr, Vk, mu0.data(), B, I, J);
      k.e_step(sv, Vk, mu0.data(), B, I, J);
      // The likelihoods alone (a replay's): lr = -q/2 + norm_j, before the softmax.
      std::vector<float> lr_ref(st0.log_r.size(), NAN), lr(st0.log_r.size(), NAN);
      ref.likelihoods(lr_ref.data(), Vk, mu0.data(), st0.sigma2.data(), st0.log_a_out.data(), B, I, J);
      k.likelihoods(lr.data(), Vk, mu0.data(), st0.sigma2.data(), st0.log_a_out.data(), B, I, J);
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
            const size_t n = (size_t(b) * I + i) * J + j;
            ASSERT_NEAR(lr[n], lr_ref[n], e[j] + 2 * eps * std::fabs(lr_ref[n])) << "likelihoods " << where;
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
      ref.backward(dVr.data(), dbar.data(), dbvr.data(), dmu.data(), da.data(), Vk, mu0.data(),
                   a0.data(), st0, B, I, J, cfg);
      k.backward(dVv.data(), dbav.data(), dbvv.data(), dmu.data(), da.data(), Vk, mu0.data(),
                 a0.data(), st0, B, I, J, cfg);
      std::vector<double> mag_a(J, 0.5), mag_v(J, 0.5);
      for (int b = 0; b < B; ++b)
        for (int j = 0; j < J; ++j) {
          const size_t bj = size_t(b) * J + j;
          const double a = a0[bj], dz = da[bj] * a * (1 - a), S = st0.sum_ra[bj] * cn;
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

// The full backward's exp: each ISA's vector form gives the scalar form's
// bits (runs of every length up to three registers, leftovers included),
// within 2 ulp of exp (in double) on [-87, 88], 0 below -87, NaN kept.
TEST_P(EmRoutingVariant, PortableExpHasTheScalarBitsEverywhere) {
  int nv = 0;
  const EmRoutingKernels& k = em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  std::vector<float> x;
  for (float v = -90.f; v <= 88.f; v += 0.0137f) x.push_back(v);
  for (float v : {-87.f, -86.99999f, -87.00001f, -0.f, 0.f, 1e-30f, -1e-30f, -1e30f, -INFINITY, NAN}) x.push_back(v);
  for (int e = -30; e <= 6; ++e) x.push_back(-std::ldexp(1.f, e));  // log R near 0 and far from it
  std::vector<float> y = x;
  k.exp_portable(y.data(), y.size());
  for (size_t n = 0; n < x.size(); ++n) {
    const float want = exp_portable(x[n]);
    if (std::isnan(x[n])) {
      ASSERT_TRUE(std::isnan(y[n]));
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(y[n]), std::bit_cast<uint32_t>(want)) << "x=" << x[n];
    if (x[n] < -87.f) {
      ASSERT_EQ(want, 0.f) << "x=" << x[n];
    } else {
      const double e = std::exp(double(x[n])), ulp = std::nextafter(float(e), INFINITY) - float(e);
      ASSERT_LE(std::fabs(want - e), 2 * ulp) << "x=" << x[n] << " is more than 2 ulp off";
    }
  }
  for (size_t len = 1; len <= 48; ++len) {  // every leftover
    std::vector<float> r(x.begin() + 100, x.begin() + 100 + std::ptrdiff_t(len));
    k.exp_portable(r.data(), len);
    for (size_t n = 0; n < len; ++n)
      ASSERT_EQ(std::bit_cast<uint32_t>(r[n]), std::bit_cast<uint32_t>(exp_portable(x[100 + n]))) << "len " << len;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, EmRoutingVariant, ::testing::Range(0, test::variant_count(em_routing_variants)),
                         test::variant_names(em_routing_variants));

// The E-step sums eight parents' quadratic forms at once (scaled_dots16x8,
// then -1/2 and the normaliser) and the rest one by one (dot16): each ISA's
// two must give the same bits, or a routing's result would depend on where a
// parent falls. Inputs of mixed scales and signs, so the sums round at every
// level of the tree; the scale and the added terms as the E-step's, and 1 and
// 0, which leave the bare sums.
// The full backward's sums of 16 likewise (pair_sums16x8 against pair_sum16).
TEST(EmRouting, EightDotsAtOnceGiveEachIsasOwnDotsBits) {
  using Dots = void (*)(const float*, const float*, float, const float*, float*, bool);
  using Sums = void (*)(const float*, float*, bool);
  struct Variant {
    Isa isa;
    Dots dots;
    Sums sums;
  };
  std::vector<Variant> isas;
#if defined(__x86_64__)
  isas = {{Isa::avx2, em_dots16x8_f32__avx2, em_pair_sums16x8_f32__avx2},
          {Isa::avx512, em_dots16x8_f32__avx512, em_pair_sums16x8_f32__avx512}};
#endif
#if defined(__aarch64__)
  isas = {{Isa::neon, em_dots16x8_f32__neon, em_pair_sums16x8_f32__neon}};
#endif
  int ran = 0;
  for (const auto& [isa, dots, sums] : isas) {
    if (!isa_supported(isa)) continue;
    ++ran;
    for (uint64_t trial = 0; trial < 200; ++trial) {
      std::vector<float> a = test::randn(128, 2 * trial), b = test::randn(128, 2 * trial + 1);
      for (int k = 0; k < 128; ++k) a[size_t(k)] *= std::ldexp(1.f, (k * 7 + int(trial)) % 13 - 6);
      const std::vector<float> norm = test::randn(8, 1000 + trial), zeros(8, 0.f);
      float one[8], eight[8];
      for (const auto& [c, add] : {std::pair{-0.5f, norm.data()}, std::pair{1.f, zeros.data()}}) {
        dots(a.data(), b.data(), c, add, one, false);
        dots(a.data(), b.data(), c, add, eight, true);
        for (int k = 0; k < 8; ++k)
          ASSERT_EQ(std::bit_cast<uint32_t>(eight[k]), std::bit_cast<uint32_t>(one[k]))
              << isa_name(isa) << " trial " << trial << " c " << c << " dot " << k << ": " << eight[k] << " against "
              << one[k];
      }
      sums(a.data(), one, false);
      sums(a.data(), eight, true);
      for (int k = 0; k < 8; ++k)
        ASSERT_EQ(std::bit_cast<uint32_t>(eight[k]), std::bit_cast<uint32_t>(one[k]))
            << isa_name(isa) << " trial " << trial << " sum " << k << ": " << eight[k] << " against " << one[k];
    }
  }
  if (ran == 0) GTEST_SKIP() << "no SIMD variant of this build runs on this CPU";
}

// The per-child bookkeeping's row maxes and sums (row_maxes, add_row_sums),
// a register of rows at a time through a transposed block where J is whole
// registers: each row's max as std::max_element finds it (ties of -0 and +0,
// a NaN passed over) and its sum in j order, bit for bit, at row counts
// around the ISAs' 4, 8 and 16 lanes and J of one to three registers or none.
TEST(EmRouting, RowMaxesAndSumsAreTheScalarLoopsBitForBit) {
  using Folds = void (*)(float*, float*, const float*, int, int);
  std::vector<std::pair<Isa, Folds>> isas;
#if defined(__x86_64__)
  isas = {{Isa::avx2, em_row_folds_f32__avx2}, {Isa::avx512, em_row_folds_f32__avx512}};
#endif
#if defined(__aarch64__)
  isas = {{Isa::neon, em_row_folds_f32__neon}};
#endif
  int ran = 0;
  for (const auto& [isa, folds] : isas) {
    if (!isa_supported(isa)) continue;
    ++ran;
    uint64_t tag = 0;
    for (int rows : {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 40})
      for (int J : {1, 5, 8, 12, 16, 32, 48}) {
        std::vector<float> x = test::randn(size_t(rows) * J, ++tag);
        for (size_t k = 0; k < x.size(); ++k) x[k] *= std::ldexp(1.f, int(k * 5 % 11) - 5);
        if (J > 2) {  // a row whose largest are -0 then +0, where the order decides; a NaN passed over
          for (int j = 0; j < J; ++j) x[size_t(j)] = -std::fabs(x[size_t(j)]);
          x[0] = -0.f, x[1] = 0.f;
          if (rows > 1) x[size_t(rows - 1) * J + 1] = NAN;
        }
        const std::vector<float> acc0 = test::randn(size_t(rows), tag + 5000);
        std::vector<float> maxes(static_cast<size_t>(rows)), sums = acc0;
        folds(maxes.data(), sums.data(), x.data(), rows, J);
        for (int r = 0; r < rows; ++r) {
          const float* row = x.data() + size_t(r) * J;
          const float m = *std::max_element(row, row + J);
          float sum = acc0[size_t(r)];
          for (int j = 0; j < J; ++j) sum += row[j];
          const std::string where =
              std::string(isa_name(isa)) + " rows " + std::to_string(rows) + " J " + std::to_string(J) + " row " +
              std::to_string(r);
          ASSERT_EQ(std::bit_cast<uint32_t>(maxes[size_t(r)]), std::bit_cast<uint32_t>(m)) << "max, " << where;
          ASSERT_EQ(std::bit_cast<uint32_t>(sums[size_t(r)]), std::bit_cast<uint32_t>(sum)) << "sum, " << where;
        }
      }
  }
  if (ran == 0) GTEST_SKIP() << "no SIMD variant of this build runs on this CPU";
}

}  // namespace
}  // namespace vg

namespace vg {
namespace {

// ---------------------------------------------------------------------------
// The routing options (lambda schedule, cost normalisation, variance floor)
// and the full backward through every iteration.

// Independent EM routing in double (SPEC section 2 with EmConfig's options,
// written from the formulas, not from the kernels): the clean function the
// finite differences below differentiate.
struct RefOut {
  std::vector<double> mu, a;
};
RefOut ref_routing(const std::vector<double>& V, const std::vector<double>& z_in,
                   const std::vector<double>& beta_a, const std::vector<double>& beta_v, int B,
                   int I, int J, const EmConfig& cfg) {
  RefOut out{std::vector<double>(size_t(B) * J * H), std::vector<double>(size_t(B) * J)};
  std::vector<double> R(size_t(I) * J), mu(size_t(J) * H), s2(size_t(J) * H), a(J), a_in(I);
  for (int b = 0; b < B; ++b) {
    auto v = [&](int i, int j, int h) { return V[((size_t(b) * I + i) * J + j) * H + h]; };
    for (int i = 0; i < I; ++i) a_in[i] = 1.0 / (1.0 + std::exp(-z_in[size_t(b) * I + i]));
    std::fill(R.begin(), R.end(), 1.0 / J);
    std::fill(mu.begin(), mu.end(), 0.0);  // the mean carry's mu^{-1}
    for (int t = 0; t < cfg.iters; ++t) {
      const double lambda = cfg.lambda_schedule ? cfg.lambda * (1.0 - std::pow(0.95, t + 1)) : cfg.lambda;
      for (int j = 0; j < J; ++j) {
        double S = 0;
        for (int i = 0; i < I; ++i) S += R[i * J + j] * a_in[i];
        double L = 0;
        for (int h = 0; h < H; ++h) {
          double m = 0, var = 0;
          for (int i = 0; i < I; ++i) m += R[i * J + j] * a_in[i] / (S + cfg.eps) * v(i, j, h);
          if (cfg.mean_carry != 0.f) m = (1 - cfg.mean_carry) * m + cfg.mean_carry * mu[j * H + h];
          for (int i = 0; i < I; ++i) var += R[i * J + j] * a_in[i] / (S + cfg.eps) * (v(i, j, h) - m) * (v(i, j, h) - m);
          mu[j * H + h] = m;
          s2[j * H + h] = std::max(var, double(cfg.sigma2_min));
          L += std::log(s2[j * H + h]);
        }
        if (cfg.logit == EmLogit::official) {  // capsule_em: lambda (-S (L + 16 (ln 2pi + 1) beta_v) - 5000 beta_a)
          double cost = (L + 16 * (std::log(2 * std::numbers::pi) + 1) * beta_v[j]) * S;
          if (cfg.cost_norm) cost /= I;
          a[j] = 1.0 / (1.0 + std::exp(-lambda * (-cost - 5000 * beta_a[j])));
        } else {
          double cost = (H * beta_v[j] + 0.5 * L) * S;
          if (cfg.cost_norm) cost /= I;
          a[j] = 1.0 / (1.0 + std::exp(-lambda * (beta_a[j] - cost)));
        }
      }
      if (t + 1 == cfg.iters) break;
      for (int i = 0; i < I; ++i) {
        double p[64], mx = -INFINITY, z = 0;
        for (int j = 0; j < J; ++j) {
          p[j] = std::log(a[j]);
          for (int h = 0; h < H; ++h) {
            const double d = v(i, j, h) - mu[j * H + h];
            p[j] -= 0.5 * (d * d / s2[j * H + h] + std::log(2 * std::numbers::pi * s2[j * H + h]));
          }
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j < J; ++j) z += std::exp(p[j] - mx);
        for (int j = 0; j < J; ++j) R[i * J + j] = std::exp(p[j] - mx) / z;
      }
    }
    std::copy(mu.begin(), mu.end(), out.mu.begin() + size_t(b) * J * H);
    std::copy(a.begin(), a.end(), out.a.begin() + size_t(b) * J);
  }
  return out;
}

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

struct Grads {
  std::vector<float> dV, dz, dba, dbv;  // V, input logits, beta_a, beta_v
};

// A routing problem as after some training: votes that agree loosely (a
// common pose per class plus noise, so sigma2 sits off its floor), and beta_a
// centred on each class's cost so the activations are not saturated.
Routing loose_routing(int B, uint64_t tag, const EmConfig& c) {
  Routing r(B, tag, c);
  const auto common = test::randn(size_t(B) * J * H, tag + 7);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < I; ++i)
      for (int j = 0; j < J; ++j)
        for (int h = 0; h < H; ++h)
          r.V[((b * I + i) * J + j) * H + h] = common[(b * J + j) * H + h] + 0.5f * r.V[((b * I + i) * J + j) * H + h];
  r.forward();
  const EmLogitCoeffs k = em_logit_coeffs(c);  // the paper's 1, 16, 1/2
  // The official options move the routing with beta_a (5000 beta_a in the
  // logit; a mean that carries the last one): centre again on the new routing.
  const int rounds = c.logit == EmLogit::official || c.mean_carry != 0.f ? 4 : 1;
  for (int round = 0; round < rounds; ++round) {
    for (int j = 0; j < J; ++j) {
      double ls = 0;
      for (int h = 0; h < H; ++h) ls += std::log(r.st.sigma2[j * H + h]);
      const double cost = (k.kv * r.beta_v[j] + k.kl * ls) * r.st.sum_ra[j] / (c.cost_norm ? I : 1);
      r.beta_a[j] = float(cost / k.ka);  // ka beta_a - cost = 0
    }
    r.forward();
  }
  return r;
}

Grads backward(Routing& r, const std::vector<float>& G_mu, const std::vector<float>& G_a,
               const EmRoutingKernels& k = em_routing_kernels()) {
  Grads g{std::vector<float>(r.V.size(), 0.f), std::vector<float>(r.a_logit.size(), 0.f),
          std::vector<float>(J, 0.f), std::vector<float>(J, 0.f)};
  em_routing_backward(g.dV.data(), g.dz.data(), g.dba.data(), g.dbv.data(), G_mu.data(), G_a.data(),
                      r.V.data(), r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg, k);
  return g;
}

TEST(EmRoutingOptions, LambdaScheduleIsTheOfficialOne) {
  EmConfig c;
  c.lambda = 0.01f;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(em_lambda(c, i), 0.01f) << "off: the fixed lambda";
  c.lambda_schedule = true;
  // lambda_i = 0.01 (1 - 0.95^(i+1)): 0.0005, 0.000975, 0.00142625, ...
  const double expect[] = {0.0005, 0.000975, 0.00142625, 0.0018549375, 0.002262190625};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(em_lambda(c, i), expect[i], 1e-7 * expect[i]) << i;
  EXPECT_EQ(em_step_config(c, 2).lambda, em_lambda(c, 2));
  EXPECT_FALSE(em_step_config(c, 2).lambda_schedule);
}

TEST(EmRoutingOptions, ActivationFollowsTheScheduledNormalisedCost) {
  // a_j = sigmoid(lambda_{T-1} (beta_a - cost / I)) from the last M-step's
  // state, for each iteration count; with cost_norm off the same without / I.
  for (int iters : {1, 2, 3})
    for (bool norm : {false, true}) {
      EmConfig c;
      c.iters = iters;
      c.lambda = 2.f;
      c.lambda_schedule = true;
      c.cost_norm = norm;
      Routing r(2, 3000 + iters, c);
      r.forward();
      const double lambda = 2.0 * (1 - std::pow(0.95, iters));
      for (int b = 0; b < r.B; ++b)
        for (int j = 0; j < J; ++j) {
          double ls = 0;
          for (int h = 0; h < H; ++h) ls += std::log(double(r.st.sigma2[(b * J + j) * H + h]));
          const double cost = (H * r.beta_v[j] + 0.5 * ls) * r.st.sum_ra[b * J + j] / (norm ? I : 1);
          const double a = 1.0 / (1.0 + std::exp(-lambda * (r.beta_a[j] - cost)));
          EXPECT_NEAR(r.a[b * J + j], a, 1e-5) << "iters=" << iters << " cost_norm=" << norm;
        }
    }
}

// The option sets the checks below run, each with 1, 2 and 3 iterations:
// the defaults, the official lambda schedule (final lambda 2, so that the
// activations still move), cost normalisation, both, a variance floor that
// clamps part of the variances, and the seed's eps (here 1e-2, so it matters);
// then the official code's choices (capsule_em): its activation logit (6), its
// mean carry (7), and both with the schedule and cost normalisation (8).
constexpr int kOptionSets = 9;
constexpr int kFirstOfficial = 6;
EmConfig option_set(int opt, int iters, EmGrad grad) {
  EmConfig c;
  c.iters = iters;
  c.grad = grad;
  c.lambda_schedule = opt == 1 || opt == 3 || opt == 8;
  // The official sets 6 and 7 at lambda 1/4 (the official class layer's
  // quarter): at 1 their last iteration saturates every activation here.
  c.lambda = c.lambda_schedule ? 2.f : opt == 6 || opt == 7 ? 0.25f : 1.f;
  c.cost_norm = opt == 2 || opt == 3 || opt == 8;
  if (opt == 4) c.sigma2_min = 0.2f;
  if (opt == 5) c.eps = 1e-2f;
  if (opt == 6 || opt == 8) c.logit = EmLogit::official;
  if (opt == 7 || opt == 8) c.mean_carry = 0.1f;
  return c;
}
std::string describe(const EmConfig& c) {
  return "iters=" + std::to_string(c.iters) + " lambda=" + std::to_string(c.lambda) +
         (c.lambda_schedule ? " scheduled" : "") + (c.cost_norm ? " cost_norm" : "") +
         (c.logit == EmLogit::official ? " official-logit" : "") +
         (c.mean_carry != 0.f ? " mean-carry=" + std::to_string(c.mean_carry) : "") +
         " sigma2_min=" + std::to_string(c.sigma2_min) + " eps=" + std::to_string(c.eps);
}

// The largest error of the float routing against the double reference,
// relative to 1 + |x| (mu) and absolute (a in (0, 1)).
double forward_error(const Routing& r, const RefOut& ref) {
  double err = 0;
  for (size_t n = 0; n < r.mu.size(); ++n) err = std::max(err, std::fabs(r.mu[n] - ref.mu[n]) / (1 + std::fabs(ref.mu[n])));
  for (size_t n = 0; n < r.a.size(); ++n) err = std::max(err, std::fabs(r.a[n] - ref.a[n]));
  return err;
}

TEST(EmRoutingOptions, ReferenceRoutingIsTheKernelsFunction) {
  // The double reference the finite differences use computes what the float
  // kernels compute, for every option set (else the checks below would test
  // another function). Each of the T iterations rounds its sums of I and 16
  // terms, and an E-step turns the absolute error of a log-likelihood of size
  // |p| into a relative error of R of that size (|p| < ~100 here).
  for (int opt = 0; opt < kOptionSets; ++opt)
    for (int iters : {1, 2, 3}) {
      const EmConfig c = option_set(opt, iters, EmGrad::stopgrad);
      Routing r = loose_routing(2, 3100 + 10 * opt + iters, c);
      const RefOut ref = ref_routing(to_double(r.V), to_double(r.a_logit), to_double(r.beta_a),
                                     to_double(r.beta_v), r.B, I, J, c);
      EXPECT_LT(forward_error(r, ref), iters * (I + H) * 100 * double(FLT_EPSILON)) << describe(c);
    }
}

// f = <G_mu, mu> + <G_a, a>: the full backward's dV, da_in_logit, dbeta_a and
// dbeta_v against central differences of the double reference. The reference
// value at k is D(h) = (f(x + h) - f(x - h)) / 2h with h = 1e-4 (votes and
// poses are O(1), sigma ~ 0.5: h is far below every scale of f, yet far above
// the double rounding); its error is bounded by
//   truncation  |D(h) - D(2h)|: D(2h) - D(h) = 3 c h^2 + O(h^4), three times D(h)'s;
//   rounding    A eps_d F / h, F = sum |G_mu mu| + |G_a a| the size of f's terms,
//               A >= 1 the routing's amplification of rounding, measured as the
//               float forward's error against the double one in units of eps_f;
// and the float gradient's own rounding by T (I + J + 16) A eps_f (1 + max |g|):
// each element of the backward sums at most that many terms per iteration, each
// rounded, on a state whose rounding the routing amplified by A.
TEST(EmRoutingOptions, FullBackwardMatchesFiniteDifferencesThrough1To3Iterations) {
  for (int opt = 0; opt < kOptionSets; ++opt)
    for (int iters : {1, 2, 3}) {
      const EmConfig c = option_set(opt, iters, EmGrad::full);
      // Two batch items for the defaults (the batch indexing), one otherwise (time).
      Routing r = loose_routing(opt == 0 ? 2 : 1, 3200 + 10 * opt + iters, c);
      if (opt == 4) {  // the floor must clamp some variances and leave others free
        const auto clamped = std::count(r.st.sigma2.begin(), r.st.sigma2.end(), c.sigma2_min);
        ASSERT_GT(clamped, 0) << describe(c);
        ASSERT_LT(size_t(clamped), r.st.sigma2.size()) << describe(c);
      }
      const auto G_mu = test::randn(r.mu.size(), 3290), G_a = test::randn(r.a.size(), 3291);
      const Grads g = backward(r, G_mu, G_a);
      auto V = to_double(r.V), z = to_double(r.a_logit), ba = to_double(r.beta_a), bv = to_double(r.beta_v);
      const RefOut ref0 = ref_routing(V, z, ba, bv, r.B, I, J, c);
      const double eps_f = FLT_EPSILON, eps_d = DBL_EPSILON;
      const double A = std::max(1.0, forward_error(r, ref0) / eps_f);
      double F = 0;
      for (size_t n = 0; n < ref0.mu.size(); ++n) F += std::fabs(G_mu[n] * ref0.mu[n]);
      for (size_t n = 0; n < ref0.a.size(); ++n) F += std::fabs(G_a[n] * ref0.a[n]);
      auto f = [&] {
        const RefOut o = ref_routing(V, z, ba, bv, r.B, I, J, c);
        double s = 0;
        for (size_t n = 0; n < o.mu.size(); ++n) s += G_mu[n] * o.mu[n];
        for (size_t n = 0; n < o.a.size(); ++n) s += G_a[n] * o.a[n];
        return s;
      };
      // beta_a's step: f bends over 1 / |ka| of it (the official logit's 5000 beta_a).
      auto check = [&](std::vector<double>& x, const std::vector<float>& grad, const char* what, double step_scale = 1) {
        const double h = 1e-4 / step_scale;
        std::vector<double> fd(x.size()), trunc(x.size());
        double max_g = 0;
        for (size_t k = 0; k < x.size(); ++k) {
          const double x0 = x[k];
          auto D = [&](double step) {
            x[k] = x0 + step; const double fp = f();
            x[k] = x0 - step; const double fm = f();
            x[k] = x0;
            return (fp - fm) / (2 * step);
          };
          fd[k] = D(h);
          trunc[k] = std::fabs(fd[k] - D(2 * h));
          max_g = std::max(max_g, std::fabs(fd[k]));
        }
        // The float gradient of beta_a is ka times that of ka beta_a, whose rounding this bounds.
        const double rounding = A * eps_d * F / h + step_scale * iters * (I + J + H) * A * eps_f * (1 + max_g);
        for (size_t k = 0; k < x.size(); ++k)
          ASSERT_NEAR(grad[k], fd[k], trunc[k] + rounding) << what << "[" << k << "] " << describe(c);
        EXPECT_GT(max_g, 1e-3) << what << ": the gradient should not vanish, " << describe(c);
      };
      check(V, g.dV, "dV");
      check(z, g.dz, "da_in_logit");
      check(ba, g.dba, "dbeta_a", std::fabs(em_logit_coeffs(c).ka));
      check(bv, g.dbv, "dbeta_v");
    }
}

TEST(EmRoutingOptions, OneIterationFullAndStopGradientAgreeExceptForTheInputActivations) {
  // With one iteration R is the constant 1/J and S, w depend on the input
  // activations only, so nothing the stop-gradient scheme detaches depends on
  // V, beta_a or beta_v: dV, dbeta_a and dbeta_v are the same derivative (the
  // mu inside sigma2 adds -2 dsigma2 sum_i w (V - mu) = 0). Only the input
  // activations, which reach mu, sigma2 and the cost through w and S, get a
  // gradient from the full scheme alone. Tolerances: the two schemes round the
  // same terms in other orders (1 - a from a or from log a, the zero sum above).
  // Not with eps > 0 (option set 5): there the weights sum to S / (S + eps) < 1
  // and the mu inside sigma2 does contribute.
  for (int opt = 0; opt < kFirstOfficial; ++opt) {  // the official options: below
    if (opt == 5) continue;
    EmConfig c = option_set(opt, 1, EmGrad::stopgrad);
    Routing r = loose_routing(2, 3300 + opt, c);
    const auto G_mu = test::randn(r.mu.size(), 3390), G_a = test::randn(r.a.size(), 3391);
    Grads sg = backward(r, G_mu, G_a);
    r.cfg.grad = EmGrad::full;
    r.forward();
    const Grads full = backward(r, G_mu, G_a);
    const double eps = FLT_EPSILON, lambda = em_lambda(c, 0), cn = c.cost_norm ? 1.0 / I : 1.0;
    std::vector<double> mag_a(J, 0), mag_v(J, 0);
    for (int b = 0; b < r.B; ++b)
      for (int j = 0; j < J; ++j) {
        const size_t bj = size_t(b) * J + j;
        const double a = r.a[bj], dz = std::fabs(G_a[bj] * a * (1 - a)), S = r.st.sum_ra[bj] * cn;
        // 1 - a rounded from a: relative error eps a / (1 - a).
        const double rel = 8 * eps * (1 + a / (1 - a));
        mag_a[j] += lambda * dz * rel;
        mag_v[j] += H * S * lambda * dz * rel;
        for (int h = 0; h < H; ++h) {
          const double s2 = r.st.sigma2[bj * H + h];
          const double ds2 = s2 > c.sigma2_min ? lambda * dz * S * 0.5 / s2 : 0.0;
          double spread = 0;  // sum_i w |V - mu|: bounds the rounding of sum_i w (V - mu)
          for (int i = 0; i < I; ++i) {
            const size_t n = ((size_t(b) * I + i) * J + j) * H + h;
            spread += r.st.w[(size_t(b) * I + i) * J + j] * std::fabs(r.V[n] - r.mu[bj * H + h]);
          }
          for (int i = 0; i < I; ++i) {
            const size_t n = ((size_t(b) * I + i) * J + j) * H + h;
            const double w = r.st.w[(size_t(b) * I + i) * J + j], d = std::fabs(r.V[n] - r.mu[bj * H + h]);
            const double term = w * (std::fabs(G_mu[bj * H + h]) + 2 * ds2 * d);
            const double tol = 8 * eps * term + w * 2 * ds2 * (rel * d + 2 * (I + 2) * eps * spread);
            ASSERT_NEAR(full.dV[n], sg.dV[n], tol) << "dV " << describe(c);
          }
        }
      }
    for (int j = 0; j < J; ++j) {
      EXPECT_NEAR(full.dba[j], sg.dba[j], mag_a[j] + 1e-30) << "dbeta_a " << describe(c);
      EXPECT_NEAR(full.dbv[j], sg.dbv[j], mag_v[j] + 1e-30) << "dbeta_v " << describe(c);
    }
    double dz_full = 0;
    for (size_t n = 0; n < sg.dz.size(); ++n) {
      EXPECT_EQ(sg.dz[n], 0.f) << "the stop-gradient scheme writes no input gradient";
      dz_full = std::max(dz_full, double(std::fabs(full.dz[n])));
    }
    EXPECT_GT(dz_full, 1e-3) << describe(c);
  }
}

TEST(EmRoutingOptions, FullAndStopGradientDifferBeyondOneIteration) {
  // Sanity of the test above: from two iterations on, R depends on V.
  for (int iters : {2, 3}) {
    EmConfig c = option_set(0, iters, EmGrad::stopgrad);
    Routing r = loose_routing(1, 3400 + iters, c);
    const auto G_mu = test::randn(r.mu.size(), 3490), G_a = test::randn(r.a.size(), 3491);
    const Grads sg = backward(r, G_mu, G_a);
    r.cfg.grad = EmGrad::full;
    r.forward();
    const Grads full = backward(r, G_mu, G_a);
    double diff = 0;
    for (size_t n = 0; n < sg.dV.size(); ++n) diff = std::max(diff, double(std::fabs(full.dV[n] - sg.dV[n])));
    EXPECT_GT(diff, 1e-2) << "iters=" << iters;
  }
}

TEST(EmRoutingOptions, FullBackwardAccumulatesAndAllocatesOnce) {
  EmConfig c = option_set(3, 3, EmGrad::full);
  Routing r(2, 3500, c);
  r.st.resize(r.B, I, J, c);  // sizes the history: nothing grows below
  const float* hist = r.st.hist.w.data();
  const float* scratch = r.st.scratch.data();
  r.forward();
  const auto G_mu = test::randn(r.mu.size(), 3590), G_a = test::randn(r.a.size(), 3591);
  const Grads g1 = backward(r, G_mu, G_a);
  Grads g2{std::vector<float>(r.V.size(), 0.5f), std::vector<float>(r.a_logit.size(), -0.5f),
           std::vector<float>(J, 1.f), std::vector<float>(J, -1.f)};
  r.forward();
  em_routing_backward(g2.dV.data(), g2.dz.data(), g2.dba.data(), g2.dbv.data(), G_mu.data(), G_a.data(),
                      r.V.data(), r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg);
  for (size_t n = 0; n < g1.dV.size(); ++n) EXPECT_NEAR(g2.dV[n], g1.dV[n] + 0.5f, 1e-5);
  for (size_t n = 0; n < g1.dz.size(); ++n) EXPECT_NEAR(g2.dz[n], g1.dz[n] - 0.5f, 1e-5);
  for (int j = 0; j < J; ++j) {
    EXPECT_NEAR(g2.dba[j], g1.dba[j] + 1.f, 1e-5);
    EXPECT_NEAR(g2.dbv[j], g1.dbv[j] - 1.f, 1e-5);
  }
  EXPECT_EQ(r.st.hist.w.data(), hist);
  EXPECT_EQ(r.st.scratch.data(), scratch);
  // A smaller batch reuses the buffers too.
  em_routing_forward(r.mu.data(), r.a.data(), r.st, r.V.data(), r.a_logit.data(), r.beta_a.data(),
                     r.beta_v.data(), 1, I, J, r.cfg);
  EXPECT_EQ(r.st.hist.w.data(), hist);
}

TEST(EmRoutingOptions, FullBackwardRefusesWhatItCannotDo) {
  EmConfig c = option_set(0, 3, EmGrad::full);
  Routing r(1, 3600, c);
  r.forward();
  std::vector<float> dV(r.V.size()), dz(r.a_logit.size()), dba(J), dbv(J), dmu(r.mu.size()), da(r.a.size());
  // Without da_in_logit the input gradient has nowhere to go.
  EXPECT_THROW(em_routing_backward(dV.data(), nullptr, dba.data(), dbv.data(), dmu.data(), da.data(), r.V.data(),
                                   r.mu.data(), r.a.data(), r.st, r.B, I, J, r.cfg),
               std::invalid_argument);
  // A forward that kept no history (stop-gradient), or other iterations.
  EmConfig other = r.cfg;
  other.iters = 2;
  EXPECT_THROW(em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), dmu.data(), da.data(), r.V.data(),
                                   r.mu.data(), r.a.data(), r.st, r.B, I, J, other),
               std::invalid_argument);
  r.cfg.grad = EmGrad::stopgrad;
  r.forward();
  EXPECT_THROW(em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), dmu.data(), da.data(), r.V.data(),
                                   r.mu.data(), r.a.data(), r.st, r.B, I, J, c),
               std::invalid_argument);
}

TEST(EmRoutingOptions, FullBackwardHasNoNaNAtTheExtremes) {
  // All input activations underflowing (S = 0), identical votes (every
  // variance at its floor), huge and tiny votes with saturated activations,
  // and a dead class: the full backward stays finite, for each variant's forward.
  int nv = 0;
  const EmRoutingKernels* ks = em_routing_variants(&nv);
  for (int v = 0; v < nv; ++v) {
    if (!isa_supported(ks[v].isa)) continue;
    for (int scenario = 0; scenario < 4; ++scenario)
      for (int opt : {0, 3, 5, 8}) {
        EmConfig c = option_set(opt, 3, EmGrad::full);
        Routing r(2, 3700 + scenario, c);
        if (scenario == 0) for (float& x : r.a_logit) x = -200.f;
        if (scenario == 1)
          for (int b = 0; b < r.B; ++b)
            for (int i = 0; i < I; ++i)
              for (int j = 0; j < J; ++j)
                for (int h = 0; h < H; ++h) r.V[((b * I + i) * J + j) * H + h] = 0.1f * h - 0.3f * j;
        if (scenario == 2) {
          for (size_t k = 0; k < r.V.size(); ++k) r.V[k] *= (k % 3 == 0) ? 1e4f : 1e-4f;
          for (size_t k = 0; k < r.a_logit.size(); ++k) r.a_logit[k] = (k % 2) ? 80.f : -80.f;
          r.beta_v.assign(J, 50.f);
        }
        if (scenario == 3) for (float& x : r.a_logit) x = -30.f;
        em_routing_forward(r.mu.data(), r.a.data(), r.st, r.V.data(), r.a_logit.data(), r.beta_a.data(),
                           r.beta_v.data(), r.B, I, J, c, ks[v]);
        ASSERT_TRUE(r.finite());
        const auto G_mu = test::randn(r.mu.size(), 3790), G_a = test::randn(r.a.size(), 3791);
        const Grads g = backward(r, G_mu, G_a, ks[v]);
        const std::string where = std::string(isa_name(ks[v].isa)) + " scenario " + std::to_string(scenario) + " " + describe(c);
        for (const auto* t : {&g.dV, &g.dz, &g.dba, &g.dbv})
          for (float x : *t) ASSERT_TRUE(std::isfinite(x)) << where;
      }
  }
}

TEST(EmRoutingOptions, VarianceFloorPassesNoGradient) {
  // Identical votes: every variance sits at the floor (1e-6 and a raised one)
  // in every variant, and no gradient flows through sigma2: the stop-gradient
  // dV is exactly w dmu. (The full scheme's floor is checked by finite
  // differences above, option set 4, where the floor clamps part of sigma2.)
  for (float floor : {1e-6f, 0.05f}) {
    EmConfig c;
    c.sigma2_min = floor;
    Routing r(2, 3800, c);
    for (int b = 0; b < r.B; ++b)
      for (int i = 0; i < I; ++i)
        for (int j = 0; j < J; ++j)
          for (int h = 0; h < H; ++h) r.V[((b * I + i) * J + j) * H + h] = 0.1f * h - 0.3f * j;
    int nv = 0;
    const EmRoutingKernels* ks = em_routing_variants(&nv);
    for (int v = 0; v < nv; ++v) {
      if (!isa_supported(ks[v].isa)) continue;
      em_routing_forward(r.mu.data(), r.a.data(), r.st, r.V.data(), r.a_logit.data(), r.beta_a.data(),
                         r.beta_v.data(), r.B, I, J, c, ks[v]);
      for (float s2 : r.st.sigma2) ASSERT_EQ(s2, floor) << isa_name(ks[v].isa);
      const auto G_mu = test::randn(r.mu.size(), 3890), G_a = test::randn(r.a.size(), 3891);
      const Grads g = backward(r, G_mu, G_a, ks[v]);
      for (int b = 0; b < r.B; ++b)
        for (int i = 0; i < I; ++i)
          for (int j = 0; j < J; ++j)
            for (int h = 0; h < H; ++h) {
              const size_t n = ((size_t(b) * I + i) * J + j) * H + h;
              const float w = r.st.w[(size_t(b) * I + i) * J + j];
              ASSERT_NEAR(g.dV[n], w * G_mu[(size_t(b) * J + j) * H + h], 4 * FLT_EPSILON * std::fabs(w * G_mu[(size_t(b) * J + j) * H + h]))
                  << isa_name(ks[v].isa);
            }
    }
  }
}

// (EmRoutingVariant is instantiated above for every variant.)
TEST_P(EmRoutingVariant, FullSchemeKeepsTheForwardAndMatchesTheScalarBackwardBitForBit) {
  // Keeping the history changes no number of the forward; its last slot is
  // the state the stop-gradient backward reads; and every variant's full
  // backward does the scalar reference's float operations in its order
  // (em_backward_full_simd.h), so from one state it gives the same bits.
  int nv = 0;
  const EmRoutingKernels& k = em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const EmRoutingKernels& ref = *em_routing_for(Isa::scalar);
  for (int opt = 0; opt < kOptionSets; ++opt) {
    const int B = 3;
    const EmConfig sg = option_set(opt, 3, EmGrad::stopgrad);
    EmConfig full = sg;
    full.grad = EmGrad::full;
    const auto V = test::randn(size_t(B) * I * J * H, 4000 + opt), z = test::randn(size_t(B) * I, 4010 + opt);
    const auto ba = test::randn(J, 4020, 0.3f), bv = test::randn(J, 4021, 0.3f);
    std::vector<float> mu1(size_t(B) * J * H), a1(size_t(B) * J), mu2 = mu1, a2 = a1;
    EmState s1, s2;
    s1.resize(B, I, J);
    s2.resize(B, I, J, full);
    em_routing_forward(mu1.data(), a1.data(), s1, V.data(), z.data(), ba.data(), bv.data(), B, I, J, sg, k);
    em_routing_forward(mu2.data(), a2.data(), s2, V.data(), z.data(), ba.data(), bv.data(), B, I, J, full, k);
    const std::string where = std::string(isa_name(k.isa)) + " " + describe(full);
    EXPECT_EQ(mu1, mu2) << where;
    EXPECT_EQ(a1, a2) << where;
    EXPECT_EQ(s1.log_r, s2.log_r) << where;
    EXPECT_EQ(s1.sigma2, s2.sigma2) << where;
    const size_t T1 = 2, nij = size_t(B) * I * J, nj = size_t(B) * J;
    EXPECT_TRUE(std::equal(s2.w.begin(), s2.w.end(), s2.hist.w.begin() + T1 * nij)) << where;
    EXPECT_TRUE(std::equal(s2.sum_ra.begin(), s2.sum_ra.end(), s2.hist.sum_ra.begin() + T1 * nj)) << where;
    EXPECT_TRUE(std::equal(s2.sigma2.begin(), s2.sigma2.end(), s2.hist.sigma2.begin() + T1 * nj * H)) << where;
    EXPECT_TRUE(std::equal(mu2.begin(), mu2.end(), s2.hist.mu.begin() + T1 * nj * H)) << where;
    EXPECT_TRUE(std::equal(a2.begin(), a2.end(), s2.hist.a.begin() + T1 * nj)) << where;
    const auto dmu = test::randn(mu2.size(), 4030), da = test::randn(a2.size(), 4031);
    auto grads = [&](const EmRoutingKernels& kk) {
      Grads g{std::vector<float>(V.size(), 0.f), std::vector<float>(z.size(), 0.f), std::vector<float>(J, 0.f),
              std::vector<float>(J, 0.f)};
      em_routing_backward(g.dV.data(), g.dz.data(), g.dba.data(), g.dbv.data(), dmu.data(), da.data(), V.data(),
                          mu2.data(), a2.data(), s2, B, I, J, full, kk);
      return g;
    };
    const Grads gk = grads(k), gr = grads(ref);
    EXPECT_EQ(gk.dV, gr.dV) << where;
    EXPECT_EQ(gk.dz, gr.dz) << where;
    EXPECT_EQ(gk.dba, gr.dba) << where;
    EXPECT_EQ(gk.dbv, gr.dbv) << where;
  }
}

TEST_P(EmRoutingVariant, FullBackwardIsTheScalarReferenceBitForBitAtEveryShape) {
  // The SIMD full backward (em_backward_full_simd.h) against the scalar
  // reference from one forward's history, for every option set (the official
  // logit, the mean carry, eps > 0, cost_norm among them), 1 to 4 iterations,
  // and shapes around its loops: one child or parent, odd I, the class
  // layer's J = 5, J = 16, J = 32, and batches of 1 and 3. Equality is exact:
  // the variant rounds every operation the reference rounds, in its order (no
  // FMA, sums over i in i order, the sum over h in the reference's pairwise
  // order, exp and expm1 as the reference calls them). The gradients start
  // nonzero, so the accumulation is compared too.
  int nv = 0;
  const EmRoutingKernels& k = em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const EmRoutingKernels& ref = *em_routing_for(Isa::scalar);
  struct Shape {
    int B, I, J;
  };
  uint64_t tag = 4100;
  for (const Shape sh : {Shape{1, 1, 1}, Shape{3, 7, 5}, Shape{1, 8, 16}, Shape{2, 9, 16}, Shape{1, 33, 5},
                         Shape{1, 17, 32}})
    for (int opt = 0; opt < kOptionSets; ++opt)
      for (int iters : {1, 2, 4}) {
        const EmConfig c = option_set(opt, iters, EmGrad::full);
        const int B = sh.B, ni = sh.I, nj = sh.J;
        tag += 10;
        auto V = test::randn(size_t(B) * ni * nj * H, tag);
        const auto common = test::randn(size_t(B) * nj * H, tag + 1);
        for (size_t n = 0; n < V.size(); ++n)  // votes that agree loosely, as after some training
          V[n] = common[n / (size_t(ni) * nj * H) * nj * H + n % (size_t(nj) * H)] + 0.5f * V[n];
        const auto z = test::randn(size_t(B) * ni, tag + 2), ba = test::randn(nj, tag + 3, 0.3f),
                   bv = test::randn(nj, tag + 4, 0.3f);
        std::vector<float> mu(size_t(B) * nj * H), a(size_t(B) * nj);
        EmState st;
        st.resize(B, ni, nj, c);
        em_routing_forward(mu.data(), a.data(), st, V.data(), z.data(), ba.data(), bv.data(), B, ni, nj, c, k);
        const auto dmu = test::randn(mu.size(), tag + 5), da = test::randn(a.size(), tag + 6);
        auto grads = [&](const EmRoutingKernels& kk) {
          Grads g{test::randn(V.size(), tag + 7), test::randn(z.size(), tag + 8), test::randn(nj, tag + 9),
                  test::randn(nj, tag + 10)};
          em_routing_backward(g.dV.data(), g.dz.data(), g.dba.data(), g.dbv.data(), dmu.data(), da.data(), V.data(),
                              mu.data(), a.data(), st, B, ni, nj, c, kk);
          return g;
        };
        const Grads gk = grads(k), gr = grads(ref);
        const std::string where = std::string(isa_name(k.isa)) + " B=" + std::to_string(B) + " I=" +
                                  std::to_string(ni) + " J=" + std::to_string(nj) + " " + describe(c);
        ASSERT_EQ(gk.dV, gr.dV) << where;
        ASSERT_EQ(gk.dz, gr.dz) << where;
        ASSERT_EQ(gk.dba, gr.dba) << where;
        ASSERT_EQ(gk.dbv, gr.dbv) << where;
      }
}

}  // namespace
}  // namespace vg

namespace vg {
namespace {

// The official code's options (EmConfig::logit, mean_carry), stop-gradient:
// the backward is the exact gradient of the frozen last M-step (w, S and the
// carried mean held), checked by central differences of that M-step in
// double, from the state of a 1-, 2- or 3-iteration forward.
TEST(EmRoutingOptions, OfficialOptionsStopGradientMatchesFiniteDifferencesOfTheFrozenMStep) {
  for (int opt = kFirstOfficial; opt < kOptionSets; ++opt)
    for (int iters : {1, 2, 3}) {
      const EmConfig c = option_set(opt, iters, EmGrad::stopgrad);
      Routing r = loose_routing(1, 5000 + 10 * opt + iters, c);
      const auto G_mu = test::randn(r.mu.size(), 5090), G_a = test::randn(r.a.size(), 5091);
      const Grads g = backward(r, G_mu, G_a);
      const double lambda = em_lambda(c, iters - 1), n = c.cost_norm ? 1.0 / I : 1.0, carry = c.mean_carry;
      const EmLogitCoeffs k = em_logit_coeffs(c);
      auto V = to_double(r.V), ba = to_double(r.beta_a), bv = to_double(r.beta_v);
      double F = 0;
      auto f = [&] {
        double out = 0;
        F = 0;
        for (int j = 0; j < J; ++j) {
          double L = 0;
          for (int h = 0; h < H; ++h) {
            double m = 0, var = 0;
            for (int i = 0; i < I; ++i) m += r.st.w[i * J + j] * V[(i * J + j) * H + h];
            if (carry != 0) m = (1 - carry) * m + carry * r.st.mu_prev[j * H + h];
            for (int i = 0; i < I; ++i) {
              const double d = V[(i * J + j) * H + h] - m;
              var += r.st.w[i * J + j] * d * d;
            }
            out += G_mu[j * H + h] * m, F += std::fabs(G_mu[j * H + h] * m);
            L += std::log(std::max(var, double(c.sigma2_min)));
          }
          const double cost = (double(k.kv) * bv[j] + double(k.kl) * L) * r.st.sum_ra[j] * n;
          const double a = 1.0 / (1.0 + std::exp(-lambda * (double(k.ka) * ba[j] - cost)));
          out += G_a[j] * a, F += std::fabs(G_a[j] * a);
        }
        return out;
      };
      f();
      auto check = [&](std::vector<double>& x, const std::vector<float>& grad, const char* what, double step_scale = 1) {
        const double h = 1e-4 / step_scale;  // as in the full check above
        double max_g = 0;
        std::vector<double> fd(x.size()), trunc(x.size());
        for (size_t q = 0; q < x.size(); ++q) {
          const double x0 = x[q];
          auto D = [&](double step) {
            x[q] = x0 + step; const double fp = f();
            x[q] = x0 - step; const double fm = f();
            x[q] = x0;
            return (fp - fm) / (2 * step);
          };
          fd[q] = D(h);
          trunc[q] = std::fabs(fd[q] - D(2 * h));
          max_g = std::max(max_g, std::fabs(fd[q]));
        }
        // Rounding: the quotient's eps_d F / h, the float gradient's sums of
        // I + 16 rounded terms on a float state (a, 1 - a: up to 4 eps_f).
        const double rounding = DBL_EPSILON * F / h + (I + J + H) * 4 * FLT_EPSILON * (1 + max_g);
        for (size_t q = 0; q < x.size(); ++q)
          ASSERT_NEAR(grad[q], fd[q], trunc[q] + rounding) << what << "[" << q << "] " << describe(c);
        // The betas' gradient may vanish where the last iteration saturates
        // its activations; with one iteration (R uniform) they do not.
        if (iters == 1 || &x == &V) {
          EXPECT_GT(max_g, 1e-3) << what << ": the gradient should not vanish, " << describe(c);
        }
      };
      check(V, g.dV, "dV");
      check(ba, g.dba, "dbeta_a", std::fabs(em_logit_coeffs(c).ka));
      check(bv, g.dbv, "dbeta_v");
    }
}

// The official options in every variant against the scalar reference: the
// whole forward (3 iterations) and, from the scalar forward's state, the
// stop-gradient backward. Bounds: the forward's as ReferenceRoutingIsTheKernelsFunction
// allows each of the two against double; the backward's sums of I + 16
// rounded terms (plus the carried mean's centred sum, I more) per element.
TEST_P(EmRoutingVariant, OfficialOptionsMatchTheScalarReference) {
  int nv = 0;
  const EmRoutingKernels& k = em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const EmRoutingKernels& ref = *em_routing_for(Isa::scalar);
  for (int opt = kFirstOfficial; opt < kOptionSets; ++opt) {
    const EmConfig c = option_set(opt, 3, EmGrad::stopgrad);
    Routing rr = loose_routing(5, 6000 + opt, c), rv = rr;
    em_routing_forward(rr.mu.data(), rr.a.data(), rr.st, rr.V.data(), rr.a_logit.data(), rr.beta_a.data(),
                       rr.beta_v.data(), rr.B, I, J, c, ref);
    em_routing_forward(rv.mu.data(), rv.a.data(), rv.st, rv.V.data(), rv.a_logit.data(), rv.beta_a.data(),
                       rv.beta_v.data(), rv.B, I, J, c, k);
    const std::string where = std::string(isa_name(k.isa)) + " " + describe(c);
    const double tol_fwd = 2 * c.iters * (I + H) * 100 * double(FLT_EPSILON);
    for (size_t n = 0; n < rr.mu.size(); ++n)
      ASSERT_NEAR(rv.mu[n], rr.mu[n], tol_fwd * (1 + std::fabs(rr.mu[n]))) << "mu " << where;
    for (size_t n = 0; n < rr.a.size(); ++n) ASSERT_NEAR(rv.a[n], rr.a[n], tol_fwd) << "a " << where;
    const auto G_mu = test::randn(rr.mu.size(), 6090), G_a = test::randn(rr.a.size(), 6091);
    const Grads gr = backward(rr, G_mu, G_a, ref), gv = backward(rr, G_mu, G_a, k);
    auto near = [&](const std::vector<float>& x, const std::vector<float>& y, const char* what) {
      double mx = 0;
      for (float e : y) mx = std::max(mx, double(std::fabs(e)));
      for (size_t n = 0; n < x.size(); ++n)
        ASSERT_NEAR(x[n], y[n], (2 * I + H + rr.B) * 8 * FLT_EPSILON * (1 + mx)) << what << "[" << n << "] " << where;
    };
    near(gv.dV, gr.dV, "dV");
    near(gv.dba, gr.dba, "dbeta_a");
    near(gv.dbv, gr.dbv, "dbeta_v");
  }
}

}  // namespace
}  // namespace vg
