// The loss seam: each loss's gradient against central finite differences, and
// the values the papers define.
#include <gtest/gtest.h>

#include <cmath>

#include "models/loss.h"
#include "tests/test_util.h"

namespace vg {
namespace {

constexpr int B = 6, C = 5;

// Scores for `kind`: logits ~ N(0, 2^2) for xent; in (0, 1) for the others,
// kept away from every kink of the hinge terms by more than the FD step.
std::vector<float> scores_for(LossKind kind, const LossConfig& cfg, double progress, uint64_t tag) {
  auto s = test::randn(B * C, tag, 2.f);
  if (kind == LossKind::xent) return s;
  const float m = spread_margin(cfg, progress, 0);
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < C; ++k) {
      float& x = s[b * C + k];
      x = 1.f / (1.f + std::exp(-x));
      auto away = [&](float kink) {
        if (std::fabs(x - kink) < 0.02f) x = kink + (x < kink ? -0.02f : 0.02f);
      };
      away(cfg.m_pos);
      away(cfg.m_neg);
      (void)m;
    }
  if (kind == LossKind::spread)  // keep a_t - a_i away from the margin as well
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < C; ++i) {
        const int t = b % C;
        if (i != t && std::fabs(m - (s[b * C + t] - s[b * C + i])) < 0.02f) s[b * C + i] -= 0.05f;
      }
  return s;
}

TEST(Loss, GradientsMatchCentralFiniteDifferences) {
  LossConfig cfg;
  std::vector<int> y(B);
  for (int b = 0; b < B; ++b) y[b] = b % C;
  for (LossKind kind : {LossKind::xent, LossKind::spread, LossKind::margin}) {
    cfg.kind = kind;
    for (double progress : {0.0, 0.4, 1.0}) {
      auto s = scores_for(kind, cfg, progress, 1 + int(progress * 10));
      std::vector<float> d(B * C), scratch(B * C);
      const double l0 = loss_forward_backward(cfg, d.data(), s.data(), y.data(), B, C, progress, 0);
      EXPECT_GT(l0, 0) << loss_name(kind);
      // h = 2^-10 is exact in float near these values; the hinge losses are
      // piecewise quadratic (central differences exact up to rounding away from
      // kinks), xent is smooth (error h^2 |f'''| / 6, below 1e-6 here).
      const float h = 1.f / 1024;
      for (int k = 0; k < B * C; ++k) {
        const float x0 = s[k];
        s[k] = x0 + h;
        const double lp = loss_forward_backward(cfg, scratch.data(), s.data(), y.data(), B, C, progress, 0);
        s[k] = x0 - h;
        const double lm = loss_forward_backward(cfg, scratch.data(), s.data(), y.data(), B, C, progress, 0);
        s[k] = x0;
        EXPECT_NEAR((lp - lm) / (2 * h), d[k], 2e-5) << loss_name(kind) << " progress " << progress << " k " << k;
      }
    }
  }
}

TEST(Loss, SpreadMarginIsAnnealedLinearlyFrom02To09) {
  LossConfig cfg;
  EXPECT_FLOAT_EQ(spread_margin(cfg, 0.0, 0), 0.2f);
  EXPECT_FLOAT_EQ(spread_margin(cfg, 0.5, 0), 0.55f);
  EXPECT_FLOAT_EQ(spread_margin(cfg, 1.0, 0), 0.9f);
  EXPECT_FLOAT_EQ(spread_margin(cfg, 2.0, 0), 0.9f);  // clamped
}

// capsule_em's margin 0.2 + 0.79 sigmoid(min(10, step / 50000 - 4)) of the
// global step, whatever the training's progress; stored as a float: half an
// ulp of 1 (6e-8) beside the double's rounding.
TEST(Loss, TheOfficialSpreadMarginFollowsTheGlobalStep) {
  LossConfig cfg;
  cfg.kind = LossKind::spread;
  cfg.spread_schedule = SpreadSchedule::official;
  auto official = [](double x) { return 0.2 + 0.79 / (1 + std::exp(-x)); };
  EXPECT_NEAR(spread_margin(cfg, 0.0, 0), official(-4), 1e-7);
  EXPECT_NEAR(spread_margin(cfg, 1.0, 0), official(-4), 1e-7);  // progress plays no part
  EXPECT_NEAR(spread_margin(cfg, 0.5, 200000), 0.595, 1e-7);    // sigmoid(0) = 1/2
  EXPECT_NEAR(spread_margin(cfg, 0.5, 400000), official(4), 1e-7);
  EXPECT_NEAR(spread_margin(cfg, 0.5, 700000), official(10), 1e-7);
  EXPECT_EQ(spread_margin(cfg, 0.5, 10000000), spread_margin(cfg, 0.5, 700000));  // clamped at 10
  cfg.spread_schedule = SpreadSchedule::linear;
  EXPECT_FLOAT_EQ(spread_margin(cfg, 0.5, 400000), 0.55f);  // the step plays no part
}

TEST(Loss, ValuesFollowThePapersDefinitions) {
  LossConfig cfg;
  const int y[1] = {0};
  float d[3];
  // Spread, margin 0.2 at the start: only class 2 is within the margin of the target.
  cfg.kind = LossKind::spread;
  const float a[3] = {0.9f, 0.5f, 0.8f};
  EXPECT_NEAR(loss_forward_backward(cfg, d, a, y, 1, 3, 0.0, 0), std::pow(0.2 - 0.1, 2), 1e-7);
  EXPECT_EQ(d[1], 0.f);
  EXPECT_NEAR(d[2], 2 * 0.1, 1e-6);
  EXPECT_NEAR(d[0], -2 * 0.1, 1e-6);
  // Margin: target below m+ = 0.9, one wrong class above m- = 0.1 (weighted 0.5).
  cfg.kind = LossKind::margin;
  const float s[3] = {0.7f, 0.05f, 0.3f};
  EXPECT_NEAR(loss_forward_backward(cfg, d, s, y, 1, 3, 0.0, 0), 0.2 * 0.2 + 0.5 * 0.2 * 0.2, 1e-6);
  EXPECT_EQ(d[1], 0.f);
  // Cross-entropy of equal logits is log C.
  cfg.kind = LossKind::xent;
  const float l[3] = {1.f, 1.f, 1.f};
  EXPECT_NEAR(loss_forward_backward(cfg, d, l, y, 1, 3, 0.0, 0), std::log(3.0), 1e-7);
}

// The spread loss at the final margin (the loss a spread-loss training also
// reports each epoch): by hand, and the same bits as the loss at that margin.
TEST(Loss, TheSpreadLossAtTheFinalMarginIsTheLossAtThatMargin) {
  // Two samples of three classes: targets 0 and 2.
  const float a[6] = {0.9f, 0.5f, 0.8f, 0.1f, 0.6f, 0.3f};
  const int y[2] = {0, 2};
  // At 0.9: sample 0, classes 1 and 2: (0.9 - 0.4)^2 + (0.9 - 0.1)^2; sample 1, classes 0 and 1:
  // (0.9 - 0.2)^2 + (0.9 + 0.3)^2; the mean over the two.
  const double by_hand = (0.5 * 0.5 + 0.8 * 0.8 + 0.7 * 0.7 + 1.2 * 1.2) / 2;
  EXPECT_NEAR(spread_loss(a, y, 2, 3, 0.9f), by_hand, 1e-6);
  // At 0.2 only sample 0's class 2 (0.1 within) and sample 1's class 1 (0.3 above the target) count.
  EXPECT_NEAR(spread_loss(a, y, 2, 3, 0.2f), (0.1 * 0.1 + 0.5 * 0.5) / 2, 1e-6);
  LossConfig cfg;
  cfg.kind = LossKind::spread;
  float d[6];
  EXPECT_EQ(spread_loss(a, y, 2, 3, 0.9f), loss_forward_backward(cfg, d, a, y, 2, 3, 1.0, 0));
  // The final margin: the linear schedule's end, the official one's at the last step.
  EXPECT_FLOAT_EQ(spread_final_margin(cfg, 100), 0.9f);
  cfg.spread_schedule = SpreadSchedule::official;
  EXPECT_EQ(spread_final_margin(cfg, 200001), spread_margin(cfg, 1.0, 200000));
  EXPECT_NEAR(spread_final_margin(cfg, 200001), 0.595, 1e-7);
}

TEST(Loss, NamesParseAndUnknownNamesListTheValidOnes) {
  for (LossKind k : {LossKind::xent, LossKind::spread, LossKind::margin}) EXPECT_EQ(parse_loss(loss_name(k)), k);
  try {
    parse_loss("hinge");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("xent, spread, margin"), std::string::npos);
  }
}

// A NaN or Inf score makes the loss NaN for every loss (the hinges would
// otherwise clip it to 0 and training would go on with a broken model).
TEST(Loss, NonFiniteScoresGiveANonFiniteLossForEveryLoss) {
  const int labels[2] = {0, 3};
  std::vector<float> d(10);
  for (LossKind k : {LossKind::xent, LossKind::spread, LossKind::margin})
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> s(10, 0.3f);
      s[7] = bad;
      LossConfig c;
      c.kind = k;
      EXPECT_FALSE(std::isfinite(loss_forward_backward(c, d.data(), s.data(), labels, 2, 5, 0.5, 0)))
          << int(k) << " " << bad;
    }
}

}  // namespace
}  // namespace vg
