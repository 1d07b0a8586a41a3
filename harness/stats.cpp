// Summaries, bootstrap CIs and the Wilcoxon signed-rank test; definitions in stats.h.
#include "harness/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/rng.h"

namespace vg {

namespace {

double mean_of(const std::vector<double>& x) {
  return std::accumulate(x.begin(), x.end(), 0.0) / double(x.size());
}

// Sample standard deviation (n - 1), two-pass for accuracy.
double sd_of(const std::vector<double>& x, double mean) {
  if (x.size() < 2) return kNaN;
  double ss = 0.0;
  for (double v : x) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / double(x.size() - 1));
}

void check_boot_args(int resamples, double level) {
  if (resamples < 1)
    throw std::invalid_argument("bootstrap: resamples must be >= 1, got " + std::to_string(resamples));
  if (!(level > 0.0 && level < 1.0))
    throw std::invalid_argument("bootstrap: level must be in (0, 1), got " + std::to_string(level));
}

// Mid-ranks (1-based) of |d| over the nonzero entries, grouping values within
// kTieEps of the first of a group; also sum over tie groups of (t^3 - t).
struct Ranked {
  std::vector<double> abs, rank;
  std::vector<bool> positive;
  double tie_term = 0.0;
  bool has_ties = false;
};

Ranked rank_abs_nonzero(const std::vector<double>& d) {
  std::vector<double> nz;
  for (double v : d)
    if (std::abs(v) > kTieEps) nz.push_back(v);
  const size_t m = nz.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t i, size_t j) { return std::abs(nz[i]) < std::abs(nz[j]); });
  Ranked r;
  r.abs.resize(m); r.rank.resize(m); r.positive.resize(m);
  for (size_t k = 0; k < m; ++k) {
    r.abs[k] = std::abs(nz[order[k]]);
    r.positive[k] = nz[order[k]] > 0.0;
  }
  for (size_t lo = 0; lo < m;) {
    size_t hi = lo + 1;
    while (hi < m && r.abs[hi] - r.abs[lo] <= kTieEps) ++hi;
    const double t = double(hi - lo), mid = 0.5 * double(lo + 1 + hi);  // mean of lo+1..hi
    for (size_t k = lo; k < hi; ++k) r.rank[k] = mid;
    if (hi - lo > 1) { r.has_ties = true; r.tie_term += t * t * t - t; }
    lo = hi;
  }
  return r;
}

}  // namespace

double quantile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return kNaN;
  const double h = double(sorted.size() - 1) * std::clamp(p, 0.0, 1.0);
  const size_t lo = size_t(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - double(lo)) * (sorted[lo + 1] - sorted[lo]);
}

double interquartile_mean(std::vector<double> x) {
  if (x.empty()) return kNaN;
  std::sort(x.begin(), x.end());
  const double n = double(x.size()), q1 = 0.25 * n, q3 = 0.75 * n;
  double s = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    // Overlap of observation i's mass [i, i+1) (in units of 1/n) with [n/4, 3n/4].
    const double w = std::min(double(i + 1), q3) - std::max(double(i), q1);
    if (w > 0.0) s += w * x[i];
  }
  return s / (0.5 * n);
}

std::pair<double, double> bootstrap_mean_ci(const std::vector<double>& x, int resamples,
                                            uint64_t boot_seed, double level) {
  check_boot_args(resamples, level);
  if (x.empty()) return {kNaN, kNaN};
  const uint32_t n = uint32_t(x.size());
  std::vector<double> means(static_cast<size_t>(resamples));
  for (int b = 0; b < resamples; ++b) {
    // One stream per resample: resample b is the same whoever computes it.
    Stream s(boot_seed, Purpose::Shuffle, kBootstrapStreamTag, uint64_t(b));
    double sum = 0.0;
    for (uint32_t k = 0; k < n; ++k) sum += x[s.below(n)];
    means[size_t(b)] = sum / double(n);
  }
  std::sort(means.begin(), means.end());
  const double alpha = 0.5 * (1.0 - level);
  return {quantile_sorted(means, alpha), quantile_sorted(means, 1.0 - alpha)};
}

Summary summarize(const std::vector<double>& x, int resamples, uint64_t boot_seed,
                  double level) {
  check_boot_args(resamples, level);
  Summary s;
  s.n = int(x.size());
  if (x.empty()) return s;
  s.mean = mean_of(x);
  s.sd = sd_of(x, s.mean);
  std::vector<double> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  s.median = quantile_sorted(sorted, 0.5);
  s.iqm = interquartile_mean(sorted);
  std::tie(s.ci_lo, s.ci_hi) = bootstrap_mean_ci(x, resamples, boot_seed, level);
  return s;
}

double wilcoxon_signed_rank_p(const std::vector<double>& d) {
  const Ranked r = rank_abs_nonzero(d);
  const size_t m = r.abs.size();
  if (m == 0) return kNaN;
  double t_plus = 0.0;
  for (size_t k = 0; k < m; ++k)
    if (r.positive[k]) t_plus += r.rank[k];

  if (m == d.size() && m <= 25 && !r.has_ties) {
    // Exact: count[s] = number of subsets of {1..m} with sum s (0/1 knapsack);
    // every count is below 2^25, so doubles hold them exactly.
    const size_t max_sum = m * (m + 1) / 2;
    std::vector<double> count(max_sum + 1, 0.0);
    count[0] = 1.0;
    for (size_t rank = 1; rank <= m; ++rank)
      for (size_t s = max_sum; s >= rank; --s) count[s] += count[s - rank];
    const size_t t = size_t(std::lround(t_plus));
    double le = 0.0, ge = 0.0;
    for (size_t s = 0; s <= max_sum; ++s) (s <= t ? le : ge) += count[s];
    ge += count[t];  // P(T >= t) includes s == t
    const double total = std::ldexp(1.0, int(m));
    return std::min(1.0, 2.0 * std::min(le, ge) / total);
  }
  // Normal approximation with tie and continuity corrections.
  const double mm = double(m);
  const double mu = mm * (mm + 1.0) / 4.0;
  const double var = mm * (mm + 1.0) * (2.0 * mm + 1.0) / 24.0 - r.tie_term / 48.0;
  const double z = std::max(0.0, std::abs(t_plus - mu) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

Paired paired_compare(const std::vector<double>& a, const std::vector<double>& b,
                      int resamples, uint64_t boot_seed, double level) {
  if (a.size() != b.size())
    throw std::invalid_argument("paired_compare: sizes differ (" + std::to_string(a.size()) +
                                " vs " + std::to_string(b.size()) + ")");
  check_boot_args(resamples, level);
  Paired p;
  p.n = int(a.size());
  if (a.empty()) return p;
  std::vector<double> d(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    d[k] = a[k] - b[k];
    if (std::abs(d[k]) <= kTieEps) ++p.ties;
    else if (d[k] > 0.0) ++p.wins;
    else ++p.losses;
  }
  p.mean_diff = mean_of(d);
  std::tie(p.ci_lo, p.ci_hi) = bootstrap_mean_ci(d, resamples, boot_seed, level);
  p.prob_improvement = (double(p.wins) + 0.5 * double(p.ties)) / double(p.n);
  p.p_value = wilcoxon_signed_rank_p(d);
  return p;
}

}  // namespace vg
