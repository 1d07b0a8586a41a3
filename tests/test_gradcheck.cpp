// The models' finite-difference check itself (tests/gradcheck.h): it passes
// a right gradient and fails a wrong one, a few percent off, in one entry, of
// the wrong sign, or zero, and fails a tensor that carries the gradient but
// that float rounding hides.
#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/gradcheck.h"

namespace vg {
namespace {

// A smooth loss of two tensors, summed in float as the models' are:
// L = offset + sum_k (c_k w_k^2 / 2 + sin w_k) over "a" + slope * sum_j w_j over "b".
struct Toy {
  ParamSet p;
  int a = p.add("a", 40), b = p.add("b", 3);
  float offset = 1.f, slope = 0.7f;
  Toy() {
    p.allocate();
    for (size_t k = 0; k < p.tensor(a).size; ++k) p.value(a)[k] = 0.1f * float(k % 7) - 0.3f;
    for (size_t k = 0; k < p.tensor(b).size; ++k) p.value(b)[k] = 0.2f * float(k);
  }
  float c(size_t k) const { return 0.5f + 0.05f * float(k); }
  double loss() const {
    float L = offset;
    for (size_t k = 0; k < p.tensor(a).size; ++k) {
      const float w = p.value(a)[k];
      L += c(k) * w * w / 2 + std::sin(w);
    }
    for (size_t k = 0; k < p.tensor(b).size; ++k) L += slope * p.value(b)[k];
    return L;
  }
  std::vector<float> gradient() const {
    std::vector<float> g(p.count());
    for (size_t k = 0; k < p.tensor(a).size; ++k) {
      const float w = p.value(a)[k];
      g[p.tensor(a).offset + k] = c(k) * w + std::cos(w);
    }
    for (size_t k = 0; k < p.tensor(b).size; ++k) g[p.tensor(b).offset + k] = slope;
    return g;
  }
};

// The check's failure messages on `grad`.
std::vector<std::string> failures(Toy& toy, const std::vector<float>& grad) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    test::check_tensor_gradients(toy.p, grad, [&] { return toy.loss(); }, 1e-3, "toy ");
  }
  std::vector<std::string> out;
  for (int i = 0; i < results.size(); ++i) out.push_back(results.GetTestPartResult(i).message());
  return out;
}

bool any_names(const std::vector<std::string>& msgs, const std::string& what) {
  for (const auto& m : msgs)
    if (m.find(what) != std::string::npos) return true;
  return false;
}

TEST(GradCheck, PassesTheRightGradient) {
  Toy toy;
  const std::vector<float> w0 = toy.p.values();
  EXPECT_TRUE(failures(toy, toy.gradient()).empty());
  EXPECT_EQ(toy.p.values(), w0);  // the weights are put back exactly
}

TEST(GradCheck, FailsAGradientAFewPercentOff) {
  for (float factor : {1.05f, 0.97f}) {
    Toy toy;
    std::vector<float> g = toy.gradient();
    for (size_t k = 0; k < toy.p.tensor(toy.a).size; ++k) g[toy.p.tensor(toy.a).offset + k] *= factor;
    const auto msgs = failures(toy, g);
    EXPECT_TRUE(any_names(msgs, "toy a |grad|")) << factor;
    EXPECT_FALSE(any_names(msgs, "toy b")) << factor;
  }
}

TEST(GradCheck, FailsOneWrongEntryAndASignFlip) {
  Toy toy;
  std::vector<float> g = toy.gradient();
  g[toy.p.tensor(toy.b).offset + 1] *= 1.2f;
  EXPECT_TRUE(any_names(failures(toy, g), "toy b[1]"));
  g = toy.gradient();
  for (size_t k = 0; k < toy.p.tensor(toy.b).size; ++k) g[toy.p.tensor(toy.b).offset + k] *= -1;
  EXPECT_TRUE(any_names(failures(toy, g), "toy b |grad|"));
}

TEST(GradCheck, FailsAZeroGradient) {
  Toy toy;
  std::vector<float> g = toy.gradient();
  for (size_t k = 0; k < toy.p.tensor(toy.b).size; ++k) g[toy.p.tensor(toy.b).offset + k] = 0;
  EXPECT_TRUE(any_names(failures(toy, g), "toy b: zero gradient"));
}

TEST(GradCheck, ATensorBelowFloatResolutionPassesOnlyWhereItsGradientIsNegligible) {
  // On an offset of 1e5 a float loss moves in steps of 1/128. |grad a| is
  // about 6: a moves the loss by hundreds of steps on the ladder's upper
  // rungs, while b's whole gradient (slope x sqrt 3) moves it by less than one
  // at every rung.
  Toy toy;
  toy.offset = 1e5f;
  toy.slope = 1e-4f;  // under 1e-3 of a's gradient: below resolution, passed
  EXPECT_TRUE(failures(toy, toy.gradient()).empty());
  toy.slope = 5e-3f;  // over 1e-3 of it, and still unseen: failed
  EXPECT_TRUE(any_names(failures(toy, toy.gradient()), "toy b |grad|"));
}

}  // namespace
}  // namespace vg
