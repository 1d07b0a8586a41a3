// Counter-based RNG: determinism per key, and the moments of each distribution.
// Tolerances are 6 standard errors of the estimate over kDraws draws.
#include "core/rng.h"
#include "kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

constexpr int kDraws = 100000;

std::vector<uint32_t> first_words(vg::Stream s, int n = 16) {
  std::vector<uint32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.next_u32());
  return out;
}

TEST(Rng, SameKeySameSequence) {
  vg::Stream a(42, vg::Purpose::Noise, 3, 9), b(42, vg::Purpose::Noise, 3, 9);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(a.next_u32(), b.next_u32());
    ASSERT_EQ(a.uniform(), b.uniform());
    ASSERT_EQ(a.normal(), b.normal());
  }
}

TEST(Rng, AnyKeyComponentChangesSequence) {
  const auto base = first_words(vg::Stream(42, vg::Purpose::Noise, 3, 9));
  EXPECT_NE(base, first_words(vg::Stream(43, vg::Purpose::Noise, 3, 9)));
  EXPECT_NE(base, first_words(vg::Stream(42, vg::Purpose::Shuffle, 3, 9)));
  EXPECT_NE(base, first_words(vg::Stream(42, vg::Purpose::Noise, 4, 9)));
  EXPECT_NE(base, first_words(vg::Stream(42, vg::Purpose::Noise, 3, 10)));
  // Swapping the indices is a different key too.
  EXPECT_NE(base, first_words(vg::Stream(42, vg::Purpose::Noise, 9, 3)));
}

// U(0,1): mean 1/2, variance 1/12. SE(mean) = sqrt(1/12/N); the variance estimate has
// SE = sqrt((E(U-1/2)^4 - (1/12)^2)/N) = sqrt((1/80 - 1/144)/N) = sqrt(1/180/N).
TEST(Rng, UniformMoments) {
  vg::Stream s(1, vg::Purpose::Test);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double u = s.uniform();
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum2 += (u - 0.5) * (u - 0.5);
  }
  EXPECT_NEAR(sum / kDraws, 0.5, 6 * std::sqrt(1.0 / 12 / kDraws));
  EXPECT_NEAR(sum2 / kDraws, 1.0 / 12, 6 * std::sqrt(1.0 / 180 / kDraws));
}

// N(0,1): SE(mean) = sqrt(1/N); Var(Z^2) = 2, so SE(variance) = sqrt(2/N).
TEST(Rng, NormalMoments) {
  vg::Stream s(2, vg::Purpose::Test);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double z = s.normal();
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum2 += z * z;
  }
  EXPECT_NEAR(sum / kDraws, 0.0, 6 * std::sqrt(1.0 / kDraws));
  EXPECT_NEAR(sum2 / kDraws, 1.0, 6 * std::sqrt(2.0 / kDraws));
}

// below(n) stays in [0, n). With 10 bins the chi-square statistic has 9 degrees of
// freedom (mean 9, sd sqrt(18) = 4.2); 45 is over 8 sd out, p < 1e-5.
TEST(Rng, BelowInRangeAndUniform) {
  vg::Stream s(3, vg::Purpose::Test);
  constexpr uint32_t kBins = 10;
  std::vector<int> count(kBins, 0);
  for (int i = 0; i < kDraws; ++i) {
    const uint32_t k = s.below(kBins);
    ASSERT_LT(k, kBins);
    ++count[k];
  }
  const double expected = double(kDraws) / kBins;
  double chi2 = 0;
  for (int c : count) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 45.0);

  for (uint32_t n : {1u, 2u, 7u, 1000u, 3000000000u})
    for (int i = 0; i < 1000; ++i) ASSERT_LT(s.below(n), n);
}

}  // namespace

namespace vg {
namespace {

TEST(Rng, FillNormalMomentsAndDeterminism) {
  const size_t n = 200001;  // odd: the last value comes from a half-used pair
  std::vector<float> a(n), b(n);
  fill_normal(Stream(3, Purpose::Noise, 1, 2), a.data(), n, 2.f);
  fill_normal(Stream(3, Purpose::Noise, 1, 2), b.data(), n, 2.f);
  EXPECT_EQ(a, b);
  double m = 0, v = 0, k4 = 0;
  for (float x : a) m += x / 2.0;
  m /= n;
  for (float x : a) {
    const double z = x / 2.0 - m;
    v += z * z;
    k4 += z * z * z * z;
  }
  v /= n;
  k4 /= n;
  // Standard errors: mean 1/sqrt(n), variance sqrt(2/n); 6 of each.
  EXPECT_NEAR(m, 0.0, 6.0 / std::sqrt(double(n)));
  EXPECT_NEAR(v, 1.0, 6.0 * std::sqrt(2.0 / n));
  // Gaussian kurtosis is 3 (se ~ sqrt(96/n)).
  EXPECT_NEAR(k4 / (v * v), 3.0, 6.0 * std::sqrt(96.0 / n));
}

}  // namespace
}  // namespace vg
