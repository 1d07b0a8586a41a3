// EM routing over convolutional windows, forward: every M-step and E-step of
// the routing against the naive double reference (tests/conv_em_reference.h),
// the normalisation's invariants, the windows each child feeds, equality with
// the dense routing for one window, the fused iteration against the
// separate steps, and a replay of a routing's record against the routing.
// Rounding bounds are first order in u = FLT_EPSILON / 2: a float sum of n
// terms is within gamma_n sum |terms| of the exact one; each step is checked
// from the kernel's own float inputs, so no bound carries earlier errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/conv_em_routing.h"
#include "tests/conv_em_reference.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using namespace cem_test;

// Bounds of one M-step of the kernel against the reference from the same
// float log R and log a (first order in u):
//   l = log R + log a, m = max l: each w = exp(l - m) / sum exp(l - m) (or
//   exp(l) / (S + eps)) is within ew = 2 max u (|l| + |m| + |l - m|) +
//   gamma_{I+6} relative (the roundings of l, m, l - m, exp, the sum of I and
//   the division), and so is S;
//   mu = sum w V:             (ew + gamma_{I+1}) sum w |V|
//   sigma2 = sum w (V - mu)^2: 2 dmu sum w |V - mu| + dmu^2 + (ew + gamma_{I+5}) sum w (V - mu)^2
//   L = sum_h log sigma2:     sum_h (dsigma2 / sigma2 + 2u |log sigma2|) + gamma_16 sum_h |log sigma2|
//                             + 40u (the SIMD variants' sum_log16: one log of the
//                             product of 16 mantissas in [1, 2): 15 roundings, and
//                             the log's 2u of at most 16 ln 2, absolute)
//   cost = (16 bv + L/2) S n: n S (dL/2 + gamma_3 (16 |bv| + |L|/2) + |16 bv + L/2| ew) + u |cost|
//   a = sigmoid(z):           a (1 - a) (lambda (dcost + u (|ba| + |cost|)) + u |z|) + 4u a
//                             + 1 / FLT_MAX + FLT_TRUE_MIN (exp(-z) overflows below
//                             z = -88.7, giving 0; a denormal a rounds absolutely).
void expect_m_step(const EmState& em, int t, const Ref& m, const std::vector<double>& V,
                   const std::vector<float>& ba, const std::vector<float>& bv, const ConvEmConfig& cfg,
                   const std::string& where) {
  const int P = m.P, I = m.I, J = m.J;
  const auto& hh = em.hist;
  const size_t nij = size_t(P) * I * J, nj = size_t(P) * J;
  const double lambda = em_lambda(cfg, t), n = cfg.cost_norm ? 1.0 / I : 1.0;
  for (int p = 0; p < P; ++p)
    for (int j = 0; j < J; ++j) {
      const size_t pj = size_t(p) * J + j;
      double mx = -INFINITY, tau = 0;
      for (int q = 0; q < I; ++q) mx = std::max(mx, double(hh.log_r[t * nij + (size_t(p) * I + q) * J + j]) + m.la[size_t(p) * I + q]);
      for (int q = 0; q < I; ++q) {
        const double l = double(hh.log_r[t * nij + (size_t(p) * I + q) * J + j]) + m.la[size_t(p) * I + q];
        tau = std::max(tau, u * (std::fabs(l) + std::fabs(mx) + std::fabs(l - mx)));
      }
      const double ew = 2 * tau + gamma_n(I + 6), S = m.S[pj];
      // Each exp (exp(l) with eps > 0; exp(l - m) and S = exp(m) z with eps = 0)
      // may underflow below ~1e-45, where the relative bound fails: an
      // absolute error of at most FLT_TRUE_MIN per term, divided by S + eps
      // (eps > 0) or z >= 1 (eps = 0) in w.
      const double uf = FLT_TRUE_MIN, uf_w = cfg.eps == 0.f ? uf : uf / (S + cfg.eps);
      ASSERT_NEAR(hh.sum_ra[t * nj + pj], S, ew * S + I * uf) << "S " << where;
      double dL = 0, sum_abs_log = 0, L = 0;
      for (int h = 0; h < H; ++h) {
        const size_t pjh = pj * H + h;
        double wv = 0, wd = 0, wdd = 0, v1 = 0, d2 = 0;
        for (int q = 0; q < I; ++q) {
          const double w = m.R[(size_t(p) * I + q) * J + j] * std::exp(m.la[size_t(p) * I + q]) / (S + cfg.eps);
          const double x = V[m.v(p, q, j, h)], d = x - m.mu[pjh];
          wv += w * std::fabs(x), wd += w * std::fabs(d), wdd += w * d * d, v1 += std::fabs(x), d2 += d * d;
        }
        // With the mean carry r: mu = (1 - r) sum w V + r mu_prev, two more roundings.
        const double r = cfg.mean_carry, prev = r != 0.f && t > 0 ? std::fabs(double(em.hist.mu[(t - 1) * nj * H + pjh])) : 0.0;
        const double tol_mu = (ew + gamma_n(I + 3)) * ((1 - r) * wv + r * prev) + uf_w * v1;
        ASSERT_NEAR(hh.mu[t * nj * H + pjh], m.mu[pjh], tol_mu) << "mu h=" << h << " " << where;
        const double tol_s2 = 2 * tol_mu * wd + tol_mu * tol_mu + (ew + gamma_n(I + 5)) * wdd + uf_w * d2;
        ASSERT_NEAR(hh.sigma2[t * nj * H + pjh], m.s2[pjh], tol_s2) << "sigma2 h=" << h << " " << where;
        const double ls = std::log(m.s2[pjh]);
        dL += tol_s2 / m.s2[pjh] + 2 * u * std::fabs(ls);
        sum_abs_log += std::fabs(ls);
        L += ls;
      }
      dL += gamma_n(H) * sum_abs_log + 40 * u;
      // The logit's coefficients (em_logit_coeffs): the paper's ka = 1, kv = 16, kl = 1/2.
      const EmLogitCoeffs k = em_logit_coeffs(cfg);
      const double kv = k.kv, kl = k.kl, ka = k.ka;
      const double f = kv * bv[j] + kl * L, cost = f * S * n;
      const double dcost = n * S * (kl * dL + gamma_n(3) * (kv * std::fabs(bv[j]) + kl * std::fabs(L)) + std::fabs(f) * ew) +
                           n * std::fabs(f) * I * uf + u * std::fabs(cost);
      const double a = m.a[pj], zz = lambda * (ka * ba[j] - cost);
      const double tol_a = a * (1 - a) * (lambda * (dcost + u * (std::fabs(ka * ba[j]) + std::fabs(cost))) + u * std::fabs(zz)) + 4 * u * a +
                           1.0 / FLT_MAX + FLT_TRUE_MIN;
      ASSERT_NEAR(hh.a[t * nj + pj], a, tol_a) << "a " << where;
    }
}

// Bounds of one E-step of the kernel against the reference from the same
// float mu, sigma2 and log a: per entry lp = norm_j - Q/2 with
//   Q = sum_h (V - mu)^2 / sigma2 (positive terms, 4 roundings each, a sum of
//   16): gamma_20 Q;  norm_j = log a_j - 1/2 sum_h (log sigma2 + log 2 pi):
//   gamma_22 (sum_h (|log sigma2| + log 2 pi) + |log a|); so
//   dlp <= gamma_20 Q / 2 + gamma_22 N + u |lp|.
// Over a set of n entries with E = max dlp, mx = max lp, z = sum exp(lp - mx):
//   dlse <= 2E + max u |lp - mx| + gamma_{n+2} + 2u |log z| + u |lse|,
//   dlog R <= E + dlse + u |log R|.
void expect_e_step(const EmState& em, int t, Ref& e, const std::vector<double>& V, ConvEmNorm norm,
                   const std::string& where) {
  const int P = e.P, I = e.I, J = e.J;
  const size_t nij = size_t(P) * I * J;
  const std::vector<double> lp = ref_log_p(e, V);
  std::vector<double> dlp(lp.size());
  for (int p = 0; p < P; ++p)
    for (int q = 0; q < I; ++q)
      for (int j = 0; j < J; ++j) {
        double Q = 0, N = std::fabs(std::log(e.a[size_t(p) * J + j]));
        for (int h = 0; h < H; ++h) {
          const double s2 = e.s2[(size_t(p) * J + j) * H + h], d = V[e.v(p, q, j, h)] - e.mu[(size_t(p) * J + j) * H + h];
          Q += d * d / s2;
          N += std::fabs(std::log(s2)) + std::log(2 * std::numbers::pi);
        }
        const size_t k = (size_t(p) * I + q) * J + j;
        dlp[k] = gamma_n(20) * Q / 2 + gamma_n(22) * N + u * std::fabs(lp[k]);
      }
  for (const auto& set : ref_groups(e, norm)) {
    double mx = -INFINITY, E = 0, D = 0, z = 0;
    for (size_t k : set) mx = std::max(mx, lp[k]), E = std::max(E, dlp[k]);
    for (size_t k : set) D = std::max(D, u * std::fabs(lp[k] - mx)), z += std::exp(lp[k] - mx);
    const double lse = mx + std::log(z);
    const double dlse = 2 * E + D + gamma_n(double(set.size()) + 2) + 2 * u * std::fabs(std::log(z)) + u * std::fabs(lse);
    for (size_t k : set) {
      const double lr = lp[k] - lse;
      ASSERT_NEAR(em.hist.log_r[(t + 1) * nij + k], lr, E + dlse + u * std::fabs(lr)) << "log R " << where;
    }
  }
}

// Every step of pr's routing (run with EmGrad::full, whose history holds every
// iteration's state) against the reference from the kernel's own inputs.
void expect_every_step(const Problem& pr, const std::string& where) {
  const ConvVotesShape& s = pr.s;
  const ConvEmConfig& c = pr.cfg;
  const EmState& em = pr.st.em;
  const auto V = to_double(pr.V);
  const size_t nij = em.log_r.size(), nj = em.sum_ra.size();
  // The start: log a of each window's children and R^0. log sigmoid rounds
  // min(z, 0) - log1p(exp(-|z|)): u |log a| + 5u log1p(..); -log(float(n J)):
  // 2u |log R| (the log and the float).
  Ref r0(s);
  ref_init(r0, to_double(pr.z), c.norm);
  for (size_t n = 0; n < em.log_a_in.size(); ++n)
    ASSERT_NEAR(em.log_a_in[n], r0.la[n], u * std::fabs(r0.la[n]) + 5 * u * std::log(2.0)) << where;
  for (size_t n = 0; n < nij; ++n)
    ASSERT_NEAR(em.hist.log_r[n], std::log(r0.R[n]), 2 * u * std::fabs(std::log(r0.R[n]))) << where;
  for (int t = 0; t < c.iters; ++t) {
    Ref m(s);
    m.la = to_double(em.log_a_in);
    for (size_t n = 0; n < nij; ++n) m.R[n] = std::exp(double(em.hist.log_r[t * nij + n]));
    if (t > 0)  // the mean the carry reads: the kernel's last one (Ref starts at 0)
      for (size_t n = 0; n < nj * H; ++n) m.mu[n] = em.hist.mu[(t - 1) * nj * H + n];
    ref_m_step(m, V, to_double(pr.ba), to_double(pr.bv), c, em_lambda(c, t));
    expect_m_step(em, t, m, V, pr.ba, pr.bv, c, where + " M-step " + std::to_string(t));
    if (t + 1 == c.iters) break;
    Ref e(s);
    for (size_t n = 0; n < nj * H; ++n) e.mu[n] = em.hist.mu[t * nj * H + n], e.s2[n] = em.hist.sigma2[t * nj * H + n];
    for (size_t n = 0; n < nj; ++n) e.a[n] = std::exp(double(em.hist.log_a[t * nj + n]));
    expect_e_step(em, t, e, V, c.norm, where + " E-step " + std::to_string(t));
  }
}

// A memory check counts the routing state before any is allocated: what
// resize allocates must be what floats() says, in every configuration.
TEST(ConvEmRouting, StateFloatsAreWhatResizeAllocates) {
  const ConvVotesShape s = ConvVotesShape::conv(2, 7, 7, 3, 5, 3, 2);
  for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full})
    for (float carry : {0.f, 0.1f})
      for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
        for (int iters : {1, 3}) {
          ConvEmConfig cfg;
          cfg.grad = grad;
          cfg.mean_carry = carry;
          cfg.norm = norm;
          cfg.iters = iters;
          ConvEmState st;
          st.resize(s, cfg);
          EXPECT_EQ(st.bytes(), ConvEmState::floats(s, cfg) * sizeof(float));
          EmState em;
          em.resize(4, 6, 5, cfg);
          EXPECT_EQ(em.bytes(), EmState::floats(4, 6, 5, cfg) * sizeof(float));
        }
}

TEST(ConvEmRouting, EveryStepMatchesTheNaiveReference) {
  uint64_t tag = 100;
  for (const ConvVotesShape& s : shapes())
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt) {
        const ConvEmConfig c = option_set(opt, 3, EmGrad::full, norm);
        expect_every_step(Problem(s, c, tag += 10), describe(s, c));
      }
}

// Each child's assignments sum to 1 over every (window, type) it feeds
// (paper) or to 1 per type, J in all (official); before any E-step (one
// iteration) the paper's R^0 sums to 1 and the official one to n_c (1/J per
// window and type). The sum of exp(log R) cancels the errors of lp (it is a
// softmax of the rounded lp whatever they are); what remains is the rounding
// of lse = mx + log z and of each lp - lse: relative
// max u |lp - mx| + gamma_{n+2} + 2u |log z| + u |lse| + 2u max |log R| (lp, mx,
// z, lse from the reference E-step on the kernel's state; 2u: R^0's log).
TEST(ConvEmRouting, EachChildsAssignmentsSumToOneOrToJ) {
  uint64_t tag = 400;
  for (const ConvVotesShape& s : shapes())
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int iters : {1, 2, 3}) {
        const ConvEmConfig c = option_set(0, iters, EmGrad::full, norm);
        const Problem pr(s, c, tag += 10);
        const EmState& em = pr.st.em;
        Ref e(s);
        std::vector<double> lp(em.log_r.size(), 0.0);
        if (iters > 1) {
          const size_t nj = size_t(e.P) * e.J, t = size_t(iters) - 2;
          for (size_t k = 0; k < nj * H; ++k) e.mu[k] = em.hist.mu[t * nj * H + k], e.s2[k] = em.hist.sigma2[t * nj * H + k];
          for (size_t k = 0; k < nj; ++k) e.a[k] = std::exp(double(em.hist.log_a[t * nj + k]));
          lp = ref_log_p(e, to_double(pr.V));
        }
        // Per child, the types normalised together: the paper's one set of
        // all (window, type), or the official J sets, one per type.
        const auto groups = ref_groups(e, norm);
        const size_t per_child = norm == ConvEmNorm::paper ? 1 : size_t(s.Co);
        for (size_t g = 0; g < groups.size(); g += per_child) {
          double sum = 0, tol = 0;
          for (size_t k = 0; k < per_child; ++k) {
            const auto& set = groups[g + k];
            double mx = -INFINITY, D = 0, z = 0, max_lr = 0, part = 0;
            for (size_t n : set) mx = std::max(mx, lp[n]);
            for (size_t n : set) {
              D = std::max(D, u * std::fabs(lp[n] - mx)), z += std::exp(lp[n] - mx);
              max_lr = std::max(max_lr, std::fabs(double(em.log_r[n])));
              part += std::exp(double(em.log_r[n]));
            }
            const double lse = mx + std::log(z);
            tol += part * (D + gamma_n(double(set.size()) + 2) + 2 * u * std::fabs(std::log(z)) + u * std::fabs(lse) + 2 * u * max_lr);
            sum += part;
          }
          // n_c: the windows holding the child (entries / types).
          const double n_c = double(groups[g].size()) / (norm == ConvEmNorm::paper ? s.Co : 1);
          const double expect = norm == ConvEmNorm::paper ? 1.0 : (iters == 1 ? n_c : double(s.Co));
          ASSERT_NEAR(sum, expect, tol) << "child " << g / per_child << " " << describe(s, c);
        }
      }
}

// The windows a child feeds, read from the kernel's R^0 = 1 / (n_c J) (paper,
// one iteration): n_c = exp(-log R^0) / J, the same for every entry of the child.
double windows_fed(const ConvEmState& st, const ConvVotesShape& s, int y, int x) {
  // Any window holding (y, x), its first child type.
  for (int oy = 0; oy < s.Ho(); ++oy)
    for (int ox = 0; ox < s.Wo(); ++ox) {
      const int ky = y - oy * s.stride, kx = x - ox * s.stride;
      if (ky < 0 || ky >= s.K || kx < 0 || kx >= s.K) continue;
      const size_t p = size_t(oy) * s.Wo() + ox, q = size_t(ky * s.K + kx) * s.Ci;
      return std::exp(-double(st.em.log_r[(p * s.I() + q) * s.Co])) / s.Co;
    }
  return 0;
}

TEST(ConvEmRouting, ChildrenFeedEveryWindowThatContainsThem) {
  const ConvEmConfig c = option_set(0, 1, EmGrad::stopgrad, ConvEmNorm::paper);
  {  // 7 x 7, K = 3, stride 2: windows cover rows 0-2, 2-4, 4-6.
    const Problem pr(ConvVotesShape::conv(1, 7, 7, 1, 2, 3, 2), c, 500);
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 0, 0), 1, 1e-5) << "corner";
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 2, 2), 4, 1e-5) << "on two window edges";
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 4, 2), 4, 1e-5);
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 3, 3), 1, 1e-5) << "centre of the middle window";
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 2, 3), 2, 1e-5);
  }
  {  // 5 x 5, K = 3, stride 1: an interior child feeds K x K windows.
    const Problem pr(ConvVotesShape::conv(1, 5, 5, 1, 2, 3, 1), c, 510);
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 2, 2), 9, 1e-5) << "centre";
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 0, 0), 1, 1e-5) << "corner";
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 0, 2), 3, 1e-5) << "edge";
    EXPECT_NEAR(windows_fed(pr.st, pr.s, 1, 1), 4, 1e-5);
  }
  {  // 6 x 6, K = 3, stride 2: row and column 5 feed no window. Their logits
     // change nothing and get no gradient; every covered child's does.
    ConvEmConfig full = option_set(0, 3, EmGrad::full, ConvEmNorm::paper);
    Problem pr(ConvVotesShape::conv(1, 6, 6, 2, 3, 3, 2), full, 520);
    EXPECT_EQ(windows_fed(pr.st, pr.s, 5, 0), 0);
    const auto G_mu = test::randn(pr.mu.size(), 521), G_a = test::randn(pr.a.size(), 522);
    std::vector<float> dV(pr.V.size()), dz(pr.z.size()), dba(3), dbv(3);
    conv_em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), 0, G_mu.data(), G_a.data(), pr.V.data(),
                             pr.mu.data(), pr.a.data(), pr.st, pr.s, full, *conv_em_routing_for(Isa::scalar));
    const auto mu0 = pr.mu, a0 = pr.a;
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 6; ++x)
        for (int ci = 0; ci < 2; ++ci) {
          const size_t n = (size_t(y) * 6 + x) * 2 + ci;
          if (y < 5 && x < 5) {
            EXPECT_NE(dz[n], 0.f) << y << "," << x;
            continue;
          }
          EXPECT_EQ(dz[n], 0.f) << y << "," << x;
          pr.z[n] += 3.f;
          pr.forward();
          EXPECT_EQ(pr.mu, mu0);
          EXPECT_EQ(pr.a, a0);
        }
  }
}

// With K = H = W there is one window and a child's parents are that window's
// J types: the paper's normalisation is the dense softmax. The kernels then do
// the same float operations in the same order (the dense M-step kernel; the
// E-step's gather visits the J types in order; R^0 = -log(float(1 J)); the
// full backward's per-child sums and scatters add to 0 first), so the results
// are equal bit for bit, not merely within rounding.
TEST(ConvEmRouting, OneWindowIsTheDenseRoutingBitForBit) {
  const ConvVotesShape one[] = {ConvVotesShape::conv(2, 3, 3, 2, 5, 3, 1), ConvVotesShape::class_caps(3, 3, 4, 2, 5)};
  uint64_t tag = 600;
  for (const ConvVotesShape& s : one)
    for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full})
      for (int opt = 0; opt < kOptionSets; ++opt)
        for (int iters : {1, 2, 3}) {
          const ConvEmConfig c = option_set(opt, iters, grad, ConvEmNorm::paper);
          Problem pr(s, c, tag += 10);
          const int B = s.B, I = s.I(), J = s.Co;
          std::vector<float> mu(pr.mu.size()), a(pr.a.size());
          EmState st;
          st.resize(B, I, J, c);
          const EmRoutingKernels& dense = *em_routing_for(Isa::scalar);
          em_routing_forward(mu.data(), a.data(), st, pr.V.data(), pr.z.data(), pr.ba.data(), pr.bv.data(), B, I, J, c, dense);
          const std::string where = describe(s, c) + (grad == EmGrad::full ? " full" : " stopgrad");
          ASSERT_EQ(pr.mu, mu) << where;
          ASSERT_EQ(pr.a, a) << where;
          ASSERT_EQ(pr.st.em.log_r, st.log_r) << where;
          const auto G_mu = test::randn(mu.size(), tag + 1), G_a = test::randn(a.size(), tag + 2);
          std::vector<float> dV1(pr.V.size()), dz1(pr.z.size()), dba1(J), dbv1(J);
          auto dV2 = dV1, dz2 = dz1, dba2 = dba1, dbv2 = dbv1;
          conv_em_routing_backward(dV1.data(), dz1.data(), dba1.data(), dbv1.data(), 0, G_mu.data(), G_a.data(),
                                   pr.V.data(), pr.mu.data(), pr.a.data(), pr.st, s, c,
                                   *conv_em_routing_for(Isa::scalar));
          em_routing_backward(dV2.data(), dz2.data(), dba2.data(), dbv2.data(), G_mu.data(), G_a.data(), pr.V.data(),
                              mu.data(), a.data(), st, B, I, J, c, dense);
          ASSERT_EQ(dV1, dV2) << where;
          ASSERT_EQ(dz1, dz2) << where;
          ASSERT_EQ(dba1, dba2) << where;
          ASSERT_EQ(dbv1, dbv2) << where;
        }
}

// Every variant of the kernel list, every step of its routing against the
// reference from its own state, with the bounds above (they hold for any
// summation order and for fused multiply-adds, which round less). Shapes about
// the tiles of the dense SIMD M-step the variants use (exp runs of 8 or 16
// floats over I J, 2 or 4 types per moments pass against J, activations over
// P J): I J = 9, 28, 144, 405; J = 1, 7, 8, 15, 16, 17; the class-capsule form;
// every other case reads its votes misaligned.
class ConvEmRoutingVariant : public ::testing::TestWithParam<int> {};

TEST_P(ConvEmRoutingVariant, EveryStepMatchesTheNaiveReference) {
  int nv = 0;
  const ConvEmRoutingKernels& k = conv_em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const ConvVotesShape tiles[] = {
      ConvVotesShape::conv(1, 3, 3, 1, 1, 3, 1),  ConvVotesShape::conv(2, 4, 4, 1, 7, 2, 2),
      ConvVotesShape::conv(1, 5, 5, 2, 8, 3, 2),  ConvVotesShape::conv(1, 5, 4, 3, 15, 3, 1),
      ConvVotesShape::conv(1, 6, 6, 1, 16, 3, 1), ConvVotesShape::conv(1, 6, 6, 2, 17, 3, 2),
      ConvVotesShape::class_caps(2, 3, 3, 2, 5)};
  uint64_t tag = 1000;
  bool misalign = false;
  for (const ConvVotesShape& s : tiles)
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt) {
        misalign = !misalign;
        const ConvEmConfig c = option_set(opt, 3, EmGrad::full, norm);
        expect_every_step(Problem(s, c, tag += 10, k, misalign),
                          std::string(isa_name(k.isa)) + " " + describe(s, c) + (misalign ? " misaligned" : ""));
      }
}

// The kernels whose separate M-step and E-step stand in for a variant's fused
// iteration (a function pointer cannot capture them).
const ConvEmRoutingKernels* g_separate = nullptr;
void separate_steps(float* mu, float* a_out, ConvEmState& st, const float* V, const float* beta_a,
                    const float* beta_v, const ConvVotesShape& s, const EmConfig& cfg, bool e_step, ConvEmNorm norm,
                    float* lse_out, bool /*descending*/) {
  g_separate->m_step(mu, a_out, st.em, V, beta_a, beta_v, s.B * s.Ho() * s.Wo(), s.I(), s.Co, cfg);
  if (e_step) g_separate->e_step(st, V, mu, s, norm, lse_out);
}

TEST_P(ConvEmRoutingVariant, TheFusedIterationIsTheSeparateStepsBitForBit) {
  // m_e_step forms each window's log-likelihoods right after its M-step (a
  // window at a time where J fills whole registers, all windows at once
  // otherwise): the routing and every iteration's history must be those of
  // the M-step over every window followed by the E-step. J = 8, 16 and 32 go
  // a window at a time on AVX2 and NEON (16 and 32 on AVX-512 too), 12 on NEON
  // only, 17 on none.
  int nv = 0;
  const ConvEmRoutingKernels& k = conv_em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  g_separate = &k;
  ConvEmRoutingKernels separate = k;
  separate.m_e_step = separate_steps;
  uint64_t tag = 7000;
  for (const ConvVotesShape& s : {ConvVotesShape::conv(2, 5, 5, 2, 8, 3, 2), ConvVotesShape::conv(1, 6, 6, 2, 12, 3, 1),
                                  ConvVotesShape::conv(2, 6, 6, 1, 16, 3, 1), ConvVotesShape::conv(1, 5, 5, 1, 17, 3, 2),
                                  ConvVotesShape::conv(1, 5, 5, 1, 32, 3, 1)})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt) {
        const ConvEmConfig c = option_set(opt, 3, EmGrad::full, norm);
        Problem fused(s, c, tag += 10, k);
        Problem apart(s, c, tag, separate);
        const std::string where = std::string(isa_name(k.isa)) + " " + describe(s, c);
        ASSERT_EQ(fused.mu, apart.mu) << where;
        ASSERT_EQ(fused.a, apart.a) << where;
        ASSERT_EQ(fused.st.em.log_r, apart.st.em.log_r) << where;
        const auto &hf = fused.st.em.hist, &ha = apart.st.em.hist;
        ASSERT_EQ(hf.log_r, ha.log_r) << where;
        ASSERT_EQ(hf.w, ha.w) << where;
        ASSERT_EQ(hf.mu, ha.mu) << where;
        ASSERT_EQ(hf.sigma2, ha.sigma2) << where;
        ASSERT_EQ(hf.a, ha.a) << where;
        ASSERT_EQ(hf.log_a, ha.log_a) << where;
      }
}

TEST_P(ConvEmRoutingVariant, AReplayRebuildsTheRoutingBitForBit) {
  // A forward that replays the record of a forward (the backward's history,
  // ConvEmRecord) runs no M-step: its outputs and every iteration's history
  // must be those of a forward without a record under every option set, with 1 to 4
  // iterations, read from the record, the likelihoods and the weights (the
  // variant's M-step and E-steps removed), with a child no window covers
  // (6 x 6 at stride 2); and it must use the record (a changed mean, or a
  // changed LSE, changes the rebuilt log R).
  int nv = 0;
  const ConvEmRoutingKernels& k = conv_em_routing_variants(&nv)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  uint64_t tag = 7500;
  ConvEmRoutingKernels replayer = k;
  replayer.m_step = nullptr;
  replayer.e_step = nullptr;
  replayer.m_e_step = nullptr;
  for (const ConvVotesShape& s : {ConvVotesShape::conv(2, 5, 5, 2, 8, 3, 2), ConvVotesShape::conv(1, 5, 5, 1, 17, 3, 1),
                                  ConvVotesShape::conv(1, 6, 6, 2, 16, 3, 2)})
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int opt = 0; opt < kOptionSets; ++opt)
        for (int iters = 1; iters <= 4; ++iters) {
          const ConvEmConfig c = option_set(opt, iters, EmGrad::full, norm);
          Problem pr(s, c, tag += 10, k);
          const std::string where = std::string(isa_name(k.isa)) + " " + describe(s, c);
          const EmState::History want = pr.st.em.hist;  // of a forward without a record
          const std::vector<float> mu0 = pr.mu, a0 = pr.a;
          std::vector<float> rec(ConvEmRecord::floats(s, iters, norm), NAN);
          ConvEmRecord record;
          record.record = rec.data();
          conv_em_routing_forward(pr.mu.data(), pr.a.data(), pr.st, pr.vk(), pr.z.data(), pr.ba.data(), pr.bv.data(), s,
                                  c, k, record);
          ASSERT_EQ(pr.mu, mu0) << where;
          ASSERT_EQ(pr.a, a0) << where;
          ASSERT_EQ(pr.st.em.hist.iters, 0) << where << ": a recorded forward keeps no history";
          for (float x : rec) ASSERT_FALSE(std::isnan(x)) << where << ": the record has a gap";
          ConvEmState st;
          st.resize(s, c);
          std::vector<float> mu(pr.mu.size()), a(pr.a.size());
          ConvEmRecord replay;
          replay.replay = rec.data();
          conv_em_routing_forward(mu.data(), a.data(), st, pr.vk(), pr.z.data(), pr.ba.data(), pr.bv.data(), s, c,
                                  replayer, replay);
          ASSERT_EQ(mu, pr.mu) << where;
          ASSERT_EQ(a, pr.a) << where;
          const auto& h = st.em.hist;
          ASSERT_EQ(h.iters, want.iters) << where;
          ASSERT_EQ(h.B, want.B) << where;
          ASSERT_EQ(h.log_r, want.log_r) << where;
          ASSERT_EQ(h.w, want.w) << where;
          ASSERT_EQ(h.sum_ra, want.sum_ra) << where;
          ASSERT_EQ(h.mu, want.mu) << where;
          ASSERT_EQ(h.sigma2, want.sigma2) << where;
          ASSERT_EQ(h.log_s2_sum, want.log_s2_sum) << where;
          ASSERT_EQ(h.a, want.a) << where;
          ASSERT_EQ(h.log_a, want.log_a) << where;
          ASSERT_EQ(h.beta_v, want.beta_v) << where;
          ASSERT_EQ(st.log_a_child, pr.st.log_a_child) << where;
          if (iters == 1) continue;
          const std::vector<float> kept = rec;
          for (size_t n = 0; n < pr.mu.size(); n += 3) rec[n] += 0.5f;  // M-step 0's mu
          conv_em_routing_forward(mu.data(), a.data(), st, pr.vk(), pr.z.data(), pr.ba.data(), pr.bv.data(), s, c,
                                  replayer, replay);
          ASSERT_NE(st.em.hist.log_r, want.log_r) << where << ": the replay did not read its moments";
          rec = kept;
          replay.replay = rec.data();
          rec[rec.size() - ConvEmRecord::lse_floats(s, norm)] += 0.5f;  // the last E-step's LSE of child 0
          conv_em_routing_forward(mu.data(), a.data(), st, pr.vk(), pr.z.data(), pr.ba.data(), pr.bv.data(), s, c,
                                  replayer, replay);
          ASSERT_NE(st.em.hist.log_r, want.log_r) << where << ": the replay did not read its LSEs";
        }
  const ConvVotesShape s = ConvVotesShape::conv(1, 5, 5, 1, 8, 3, 1);
  std::vector<float> rec(ConvEmRecord::floats(s, 3, ConvEmNorm::paper));
  ConvEmRecord both;
  both.record = rec.data();
  both.replay = rec.data();
  Problem pr(s, option_set(0, 3, EmGrad::full, ConvEmNorm::paper), 7990, k);
  EXPECT_THROW(conv_em_routing_forward(pr.mu.data(), pr.a.data(), pr.st, pr.vk(), pr.z.data(), pr.ba.data(),
                                       pr.bv.data(), s, pr.cfg, k, both),
               std::invalid_argument);
  ConvEmRecord record;
  record.record = rec.data();
  EXPECT_THROW(conv_em_routing_forward(pr.mu.data(), pr.a.data(), pr.st, pr.vk(), pr.z.data(), pr.ba.data(),
                                       pr.bv.data(), s, option_set(0, 3, EmGrad::stopgrad, ConvEmNorm::paper), k, record),
               std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ConvEmRoutingVariant, ::testing::Range(0, test::variant_count(conv_em_routing_variants)),
                         test::variant_names(conv_em_routing_variants));

}  // namespace
}  // namespace vg
