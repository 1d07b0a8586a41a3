// Statistics for `viewgap sweep`: per-gap, per-model summaries over seeds and
// paired (capsule - CNN) comparisons. Plain structs in, plain structs out.
//
// Definitions (the tests check each against hand-computed values):
// - quantile: Hyndman & Fan type 7 (numpy/R default). For sorted x[0..n-1]
//   and p in [0,1]: h = (n-1)p, q = x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]).
//   The median is the type-7 quantile at 1/2 (mean of the middle two for even n).
// - IQM: mean of the middle half of the empirical distribution,
//   2 * integral_{1/4}^{3/4} Q(u) du with Q the step quantile function. Sorted
//   x[i] owns [i/n, (i+1)/n), so it gets weight w_i = clamp(min(i+1, 3n/4) -
//   max(i, n/4), 0, 1) and IQM = sum w_i x[i] / (n/2). For n divisible by 4
//   it is the 25%-trimmed mean; otherwise the boundary observations count
//   fractionally (the Wikipedia "interquartile mean" definition; unlike
//   scipy.stats.trim_mean, which rounds the cut down to whole observations).
// - Bootstrap CI of the mean: percentile bootstrap; resample b draws n indices
//   uniformly with replacement from Stream(boot_seed, Purpose::Shuffle,
//   kBootstrapStreamTag, b), so results never depend on thread count or order.
//   The CI is the type-7 quantiles at (1-level)/2 and (1+level)/2 of the
//   `resamples` resampled means.
// - Wilcoxon signed-rank, two-sided, zero_method "wilcox" (zeros dropped).
//   See wilcoxon_signed_rank_p.
#pragma once
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace vg {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr uint64_t kBootstrapStreamTag = 0xB0075742ull;
// |d| <= kTieEps counts as a zero difference (a tie between the paired values),
// and sorted |d| within kTieEps of the first of a group share a mid-rank, so
// accuracies like 0.3-0.1 vs 0.5-0.3 compare equal despite rounding.
inline constexpr double kTieEps = 1e-12;

struct Summary {
  int n = 0;
  double mean = kNaN, sd = kNaN, median = kNaN, iqm = kNaN;  // sd with n-1
  double ci_lo = kNaN, ci_hi = kNaN;                          // CI of the mean
};

// n == 0: all NaN. n == 1: sd NaN, ci_lo == ci_hi == the value.
Summary summarize(const std::vector<double>& x, int resamples = 10000,
                  uint64_t boot_seed = 0, double level = 0.95);

struct Paired {
  int n = 0, wins = 0, ties = 0, losses = 0;  // sign of d = a - b; tie: |d| <= kTieEps
  double mean_diff = kNaN, ci_lo = kNaN, ci_hi = kNaN;  // mean of d, bootstrap CI
  double prob_improvement = kNaN;  // (wins + ties/2) / n, i.e. P(a > b)
  double p_value = kNaN;           // two-sided Wilcoxon signed-rank on d
};

// Differences d = a - b; throws std::invalid_argument if sizes differ.
// n == 0: counts 0, every double NaN.
Paired paired_compare(const std::vector<double>& a, const std::vector<double>& b,
                      int resamples = 10000, uint64_t boot_seed = 0, double level = 0.95);

// Two-sided p-value of the Wilcoxon signed-rank test of "d symmetric about 0".
// T+ = sum of (mid-)ranks of |d| over positive d.
// - Exact (n <= 25, no zero, no tied |d|): the null distribution of T+ over
//   all 2^n sign assignments, counted by a DP over rank sums;
//   p = min(1, 2 min(P(T+ <= t), P(T+ >= t))).
// - Otherwise normal approximation: zeros dropped (m nonzero remain),
//   mu = m(m+1)/4, var = m(m+1)(2m+1)/24 - sum_ties (t^3 - t)/48,
//   z = max(0, |T+ - mu| - 1/2) / sqrt(var) (continuity correction),
//   p = erfc(z / sqrt 2). (SciPy's wilcoxon with zero_method="wilcox",
//   correction=True, method="approx".)
// No nonzero difference (empty or all zeros): NaN, the test is undefined.
double wilcoxon_signed_rank_p(const std::vector<double>& d);

// Type-7 quantile of an ascending-sorted, non-empty vector; p in [0, 1].
double quantile_sorted(const std::vector<double>& sorted, double p);

// Interquartile mean as defined above (input need not be sorted); NaN if empty.
double interquartile_mean(std::vector<double> x);

// Percentile-bootstrap CI {lo, hi} of the mean as defined above; NaNs if empty.
std::pair<double, double> bootstrap_mean_ci(const std::vector<double>& x, int resamples,
                                            uint64_t boot_seed, double level);

}  // namespace vg
