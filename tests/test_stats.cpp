// Sweep statistics against values computed independently: by hand, from
// published examples, and by brute-force enumeration of sign assignments.
#include "harness/stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "core/rng.h"

namespace vg {
namespace {

std::vector<double> normal_sample(size_t n, uint64_t tag, double mean = 0.0, double sd = 1.0) {
  Stream s(11, Purpose::Test, tag);
  std::vector<double> v(n);
  for (auto& x : v) x = mean + sd * s.normal();
  return v;
}

// ---- Summary: moments, median, IQM ---------------------------------------

TEST(Stats, SummaryOneToEight) {
  const Summary s = summarize({1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(s.n, 8);
  EXPECT_DOUBLE_EQ(s.mean, 4.5);
  EXPECT_DOUBLE_EQ(s.sd, std::sqrt(6.0));  // sum of squared deviations 42, / 7
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.iqm, 4.5);  // mean of 3, 4, 5, 6
}

TEST(Stats, SummaryOutlierMovesMeanNotMedianOrIqm) {
  // Deviations from 16: -15..-9 and 84; squares sum to 8092 = 7 * 34^2.
  const Summary s = summarize({8, 1, 7, 2, 100, 3, 6, 4, 5});
  EXPECT_EQ(s.n, 9);
  const Summary t = summarize({1, 2, 3, 4, 5, 6, 7, 100});
  EXPECT_DOUBLE_EQ(t.mean, 16.0);
  EXPECT_DOUBLE_EQ(t.sd, 34.0);
  EXPECT_DOUBLE_EQ(t.median, 4.5);
  EXPECT_DOUBLE_EQ(t.iqm, 4.5);
  EXPECT_DOUBLE_EQ(s.median, 5.0);  // odd n, unsorted input
  // n = 9: quartile cuts at 2.25 and 6.75 observations:
  // (0.75*3 + 4 + 5 + 6 + 0.75*7) / 4.5 = 22.5 / 4.5.
  EXPECT_DOUBLE_EQ(s.iqm, 5.0);
}

TEST(Stats, IqmFractionalWeightsWhenNotDivisibleByFour) {
  // n = 5: weights 0, .75, 1, .75, 0 -> (1.5 + 4 + 6) / 2.5.
  EXPECT_DOUBLE_EQ(interquartile_mean({16, 1, 8, 2, 4}), 4.6);
  // n = 6: weights 0, .5, 1, 1, .5, 0 -> (1 + 4 + 8 + 8) / 3.
  EXPECT_DOUBLE_EQ(interquartile_mean({1, 2, 4, 8, 16, 32}), 7.0);
  // n = 3: weights .25, 1, .25 -> (0 + 3 + 2.25) / 1.5.
  EXPECT_DOUBLE_EQ(interquartile_mean({9, 0, 3}), 3.5);
  // Wikipedia's example (n = 9, symmetric).
  EXPECT_DOUBLE_EQ(interquartile_mean({1, 3, 5, 7, 9, 11, 13, 15, 17}), 9.0);
  // Degenerate sizes: the value, and the mean of two.
  EXPECT_DOUBLE_EQ(interquartile_mean({7}), 7.0);
  EXPECT_DOUBLE_EQ(interquartile_mean({1, 4}), 2.5);
  EXPECT_TRUE(std::isnan(interquartile_mean({})));
}

TEST(Stats, IqmIsTrimmedMeanWhenDivisibleByFour) {
  for (size_t n : {4, 12, 40}) {
    std::vector<double> x = normal_sample(n, 100 + n);
    std::vector<double> s = x;
    std::sort(s.begin(), s.end());
    double trimmed = 0.0;
    for (size_t i = n / 4; i < 3 * n / 4; ++i) trimmed += s[i];
    trimmed /= double(n / 2);
    EXPECT_NEAR(interquartile_mean(x), trimmed, 1e-14) << "n=" << n;
  }
}

TEST(Stats, QuantileType7) {
  const std::vector<double> s = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 0.25), 1.75);  // h = 0.75 (numpy's default)
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 0.9), 3.7);    // h = 2.7
  EXPECT_DOUBLE_EQ(quantile_sorted(s, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile_sorted({5}, 0.3), 5.0);
}

TEST(Stats, SummaryEmptyAndSingle) {
  const Summary e = summarize({});
  EXPECT_EQ(e.n, 0);
  for (double v : {e.mean, e.sd, e.median, e.iqm, e.ci_lo, e.ci_hi}) EXPECT_TRUE(std::isnan(v));
  const Summary one = summarize({0.42});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.mean, 0.42);
  EXPECT_TRUE(std::isnan(one.sd));
  EXPECT_DOUBLE_EQ(one.median, 0.42);
  EXPECT_DOUBLE_EQ(one.iqm, 0.42);
  EXPECT_DOUBLE_EQ(one.ci_lo, 0.42);
  EXPECT_DOUBLE_EQ(one.ci_hi, 0.42);
}

TEST(Stats, BadBootstrapArgumentsThrow) {
  EXPECT_THROW(summarize({1, 2}, 0), std::invalid_argument);
  EXPECT_THROW(summarize({1, 2}, 100, 0, 1.0), std::invalid_argument);
  EXPECT_THROW(summarize({1, 2}, 100, 0, 0.0), std::invalid_argument);
}

// ---- Bootstrap CI ----------------------------------------------------------

TEST(Stats, BootstrapMatchesItsDefinition) {
  // Rebuild the CI from the documented streams and quantile rule.
  const std::vector<double> x = normal_sample(17, 1);
  const int B = 2000;
  const uint64_t seed = 5;
  std::vector<double> means;
  for (int b = 0; b < B; ++b) {
    Stream s(seed, Purpose::Shuffle, kBootstrapStreamTag, uint64_t(b));
    double sum = 0.0;
    for (size_t k = 0; k < x.size(); ++k) sum += x[s.below(uint32_t(x.size()))];
    means.push_back(sum / double(x.size()));
  }
  std::sort(means.begin(), means.end());
  const auto [lo, hi] = bootstrap_mean_ci(x, B, seed, 0.9);
  EXPECT_DOUBLE_EQ(lo, quantile_sorted(means, 0.05));  // 0.5 * (1 - 0.9) may round
  EXPECT_DOUBLE_EQ(hi, quantile_sorted(means, 0.95));
}

TEST(Stats, BootstrapDeterministicAndSeeded) {
  const std::vector<double> x = normal_sample(30, 2);
  const Summary a = summarize(x, 10000, 3), b = summarize(x, 10000, 3), c = summarize(x, 10000, 4);
  EXPECT_EQ(a.ci_lo, b.ci_lo);
  EXPECT_EQ(a.ci_hi, b.ci_hi);
  EXPECT_NE(a.ci_lo, c.ci_lo);
  EXPECT_LT(a.ci_lo, a.mean);
  EXPECT_GT(a.ci_hi, a.mean);
  const Summary k = summarize({0.7, 0.7, 0.7});  // constant data: a zero-width CI
  EXPECT_DOUBLE_EQ(k.ci_lo, 0.7);
  EXPECT_DOUBLE_EQ(k.ci_hi, 0.7);
}

// Monte Carlo error of a bootstrap endpoint, in units of the standard error:
// the p-quantile of B draws has sd sqrt(p(1-p)/B) / phi(z_p) (asymptotic
// order-statistic variance), for near-normal resampled means.
double endpoint_mc_sd(int B, double p, double z) {
  const double phi = std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
  return std::sqrt(p * (1.0 - p) / B) / phi;
}

TEST(Stats, BootstrapCloseToNormalTheoryForLargeSample) {
  const size_t n = 2000;
  const int B = 10000;
  const std::vector<double> x = normal_sample(n, 3, 2.0, 3.0);
  const Summary s = summarize(x, B, 9);
  const double se = s.sd / std::sqrt(double(n)), z = 1.959963984540054;
  // Tolerance: 5 MC sds of the endpoint, plus the plug-in bootstrap's
  // sqrt((n-1)/n) shrink of the half-width, plus the sampling skewness of a
  // normal sample's mean (zero in expectation; ~ 1/n relative) as 1%.
  const double tol = (5.0 * endpoint_mc_sd(B, 0.025, z) + z * (1.0 - std::sqrt((n - 1.0) / n)) +
                      0.01 * z) * se;
  EXPECT_NEAR(s.ci_lo, s.mean - z * se, tol);
  EXPECT_NEAR(s.ci_hi, s.mean + z * se, tol);
  EXPECT_LT(tol, 0.2 * z * se);  // and the check is meaningful
}

TEST(Stats, BootstrapWidthShrinksAsOneOverSqrtN) {
  // Width / (sd / sqrt n) is ~ 2 * 1.96 at every n; so quadrupling n halves
  // the width (after dividing out the sample sds). MC error per width ~ 1%,
  // small-n skew and sqrt((n-1)/n) add ~ 1%; 8% is a generous bound.
  const std::vector<double> small = normal_sample(100, 4), large = normal_sample(400, 5);
  const Summary s = summarize(small), l = summarize(large);
  const double ratio = ((s.ci_hi - s.ci_lo) / s.sd) / ((l.ci_hi - l.ci_lo) / l.sd);
  EXPECT_NEAR(ratio, 2.0, 0.16);
}

// ---- Wilcoxon signed-rank --------------------------------------------------

// Independent exact two-sided p: enumerate all 2^n sign assignments of the
// ranks of |d| (d has no zeros and no tied |d|).
double brute_force_wilcoxon(const std::vector<double>& d) {
  const size_t n = d.size();
  std::vector<int> rank(n);
  int t_obs = 0;
  for (size_t i = 0; i < n; ++i) {
    rank[i] = 1;
    for (size_t j = 0; j < n; ++j) rank[i] += std::abs(d[j]) < std::abs(d[i]);
    if (d[i] > 0) t_obs += rank[i];
  }
  long le = 0, ge = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    int t = 0;
    for (size_t i = 0; i < n; ++i)
      if (mask >> i & 1u) t += rank[i];
    le += t <= t_obs;
    ge += t >= t_obs;
  }
  return std::min(1.0, 2.0 * double(std::min(le, ge)) / double(1u << n));
}

TEST(Stats, WilcoxonExactAllPositive) {
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, 3, 4, 5}), 2.0 / 32.0);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({-1, -2, -3, -4, -5}), 2.0 / 32.0);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}), 2.0 / 1024.0);
  std::vector<double> d25;
  for (int k = 1; k <= 25; ++k) d25.push_back(0.1 * k);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(d25), 2.0 / 33554432.0);  // exact up to n = 25
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({3.0}), 1.0);
}

TEST(Stats, WilcoxonPublishedExample) {
  // Hollander & Wolfe (1973, p. 29), the example of R's ?wilcox.test:
  // V = 40, one-sided p = 0.01953 = 10/512, so two-sided 20/512.
  const std::vector<double> x = {1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30};
  const std::vector<double> y = {0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29};
  std::vector<double> d(x.size());
  for (size_t k = 0; k < x.size(); ++k) d[k] = x[k] - y[k];
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(d), 20.0 / 512.0);
  EXPECT_DOUBLE_EQ(paired_compare(x, y).p_value, 20.0 / 512.0);
}

TEST(Stats, WilcoxonExactMatchesBruteForce) {
  const std::vector<double> d12 = {0.5, -1.2, 2.1, 3.3, -0.7, 1.9, 4.4, -2.6, 5.0, 0.9, -3.8, 2.8};
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(d12), brute_force_wilcoxon(d12));
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({2, -1}), 1.0);
  for (uint64_t tag : {7, 8, 9}) {  // random signs and magnitudes, n = 18, shifted
    std::vector<double> d = normal_sample(18, tag, 0.4);
    const double p = wilcoxon_signed_rank_p(d);
    EXPECT_DOUBLE_EQ(p, brute_force_wilcoxon(d)) << "tag=" << tag;
  }
}

TEST(Stats, WilcoxonNormalApproximationWithTiesAndZeros) {
  // Zero dropped -> m = 8; |d| = 1,1,2,2,3,3,4,5 with mid-ranks 1.5,1.5,3.5,3.5,
  // 5.5,5.5,7,8; T+ = 1.5 + 3.5 + 3.5 + 5.5 + 7 + 8 = 29; mu = 18;
  // var = 8*9*17/24 - 3*(2^3 - 2)/48 = 50.625; z = (11 - 0.5)/sqrt(50.625).
  const std::vector<double> d = {1, -1, 2, 2, 3, -3, 4, 5, 0};
  const double z = 10.5 / std::sqrt(50.625);
  EXPECT_NEAR(z, 1.4757295747, 1e-9);
  EXPECT_NEAR(wilcoxon_signed_rank_p(d), std::erfc(z / std::sqrt(2.0)), 1e-15);
  EXPECT_NEAR(wilcoxon_signed_rank_p(d), 0.1400165032, 1e-9);
}

TEST(Stats, WilcoxonNormalApproximationAboveTwentyFive) {
  // d = 1..30: T+ = 465, mu = 232.5, var = 30*31*61/24 = 2363.75.
  std::vector<double> d;
  for (int k = 1; k <= 30; ++k) d.push_back(k);
  const double z = (465.0 - 232.5 - 0.5) / std::sqrt(2363.75);
  EXPECT_NEAR(wilcoxon_signed_rank_p(d), std::erfc(z / std::sqrt(2.0)), 1e-20);
  EXPECT_NEAR(wilcoxon_signed_rank_p(d), 1.825371456e-6, 1e-14);
}

TEST(Stats, WilcoxonRoundingTiesAndDegenerateCases) {
  // 0.3 - 0.1 != 0.2 in binary, but they tie (and so force the approximation).
  EXPECT_EQ(wilcoxon_signed_rank_p({0.3 - 0.1, 0.2, 0.7, -0.4, 0.9}),
            wilcoxon_signed_rank_p({0.2, 0.2, 0.7, -0.4, 0.9}));
  // |T+ - mu| < 1/2 after continuity correction: p = 1.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p({1, -1, 2, -2, 0}), 1.0);
  EXPECT_TRUE(std::isnan(wilcoxon_signed_rank_p({})));
  EXPECT_TRUE(std::isnan(wilcoxon_signed_rank_p({0, 1e-13, -1e-13})));
}

// ---- Paired comparison -----------------------------------------------------

TEST(Stats, PairedCountsAndProbabilityOfImprovement) {
  const std::vector<double> a = {0.9, 0.5, 0.1 + 0.2, 0.8, 0.4, 0.6};
  const std::vector<double> b = {0.7, 0.6, 0.3, 0.8, 0.1, 0.6};
  const Paired p = paired_compare(a, b);
  EXPECT_EQ(p.n, 6);
  EXPECT_EQ(p.wins, 2);    // 0.9 > 0.7, 0.4 > 0.1
  EXPECT_EQ(p.losses, 1);  // 0.5 < 0.6
  EXPECT_EQ(p.ties, 3);    // including 0.1 + 0.2 vs 0.3 (differ by 5.6e-17)
  EXPECT_DOUBLE_EQ(p.prob_improvement, (2.0 + 0.5 * 3.0) / 6.0);
  EXPECT_NEAR(p.mean_diff, (0.2 - 0.1 + 0.3) / 6.0, 1e-15);
  EXPECT_LE(p.ci_lo, p.mean_diff);
  EXPECT_GE(p.ci_hi, p.mean_diff);
  std::vector<double> d(a.size());
  for (size_t k = 0; k < a.size(); ++k) d[k] = a[k] - b[k];
  EXPECT_EQ(p.p_value, wilcoxon_signed_rank_p(d));
  EXPECT_EQ(p.ci_lo, bootstrap_mean_ci(d, 10000, 0, 0.95).first);
}

TEST(Stats, PairedSwapMirrors) {
  const std::vector<double> a = normal_sample(20, 10, 0.3), b = normal_sample(20, 11);
  const Paired ab = paired_compare(a, b, 10000, 2), ba = paired_compare(b, a, 10000, 2);
  EXPECT_EQ(ab.wins, ba.losses);
  EXPECT_EQ(ab.losses, ba.wins);
  EXPECT_NEAR(ab.mean_diff, -ba.mean_diff, 1e-15);
  EXPECT_NEAR(ab.ci_lo, -ba.ci_hi, 1e-12);
  EXPECT_NEAR(ab.ci_hi, -ba.ci_lo, 1e-12);
  EXPECT_NEAR(ab.prob_improvement, 1.0 - ba.prob_improvement, 1e-15);
  EXPECT_DOUBLE_EQ(ab.p_value, ba.p_value);
}

TEST(Stats, PairedEdgeCases) {
  EXPECT_THROW(paired_compare({1, 2, 3}, {1, 2}), std::invalid_argument);
  const Paired e = paired_compare({}, {});
  EXPECT_EQ(e.n, 0);
  EXPECT_TRUE(std::isnan(e.mean_diff) && std::isnan(e.prob_improvement) && std::isnan(e.p_value));
  const Paired same = paired_compare({0.5, 0.6}, {0.5, 0.6});
  EXPECT_EQ(same.ties, 2);
  EXPECT_DOUBLE_EQ(same.prob_improvement, 0.5);
  EXPECT_DOUBLE_EQ(same.mean_diff, 0.0);
  EXPECT_TRUE(std::isnan(same.p_value));  // no nonzero difference: test undefined
}

}  // namespace
}  // namespace vg
