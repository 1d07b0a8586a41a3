// Whole-model and layer gradients against central finite differences, parameter
// counts, Adam and the loss.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "data/dataset.h"
#include "data/idx.h"
#include "kernels/dnnl_common.h"
#include "models/baselines.h"
#include "models/capsnet.h"
#include "models/cnn.h"
#include "models/registry.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::move_off_relu_kink;
using test::sample_images;

TEST(Models, ParameterCountsMatchTheSpec) {
  EXPECT_EQ(CapsNet(CapsConfig{}, 4).params().count(), 558258u);
  EXPECT_EQ(Cnn(CnnConfig{}, 4).params().count(), 262949u);
  CnnConfig wide;
  wide.hidden = 136;
  EXPECT_EQ(Cnn(wide, 4).params().count(), 558293u);
}

// The paper's CNN from its layer shapes: each 5x5 SAME conv keeps the side and
// adds C_in x C_out x 25 weights and C_out biases; each 2x2/2 pool halves the side.
TEST(Models, PaperCnnParameterCountFollowsFromItsLayerShapes) {
  for (int channels : {1, 2}) {
    int side = 32, c = channels;
    size_t n = 0;
    for (int out : {32, 64}) {
      n += size_t(c) * size_t(out) * 5 * 5 + size_t(out);
      c = out;
      side /= 2;
    }
    n += size_t(side) * size_t(side) * size_t(c) * 1024 + 1024 + 1024 * 5 + 5;
    EXPECT_EQ(Cnn(CnnConfig::paper(channels, 0.5f), 4).params().count(), n) << channels;
    EXPECT_EQ(CnnConfig::paper(channels, 0.5f).param_count(), n) << channels;
    EXPECT_EQ(model_param_count("cnn-paper", {}, channels), n) << channels;
  }
}

// Inverted dropout: each factor is 0 or 1 / (1 - rate), zero with probability
// `rate`, a pure function of (seed, step, sample, unit).
TEST(Dropout, FactorsAreInvertedAndKeyedBySeedStepAndUnit) {
  const int B = 32, U = 1024;
  std::vector<float> a(size_t(B) * U), b(a.size());
  for (float rate : {0.f, 0.25f, 0.5f}) {
    dropout_scales(a.data(), B, U, rate, 7, 3);
    size_t zeros = 0;
    for (float v : a) {
      EXPECT_TRUE(v == 0.f || v == 1.f / (1.f - rate)) << v;
      zeros += v == 0.f;
    }
    // Binomial(32768, rate): 5 standard deviations.
    EXPECT_NEAR(double(zeros) / double(a.size()), rate, 5 * std::sqrt(rate * (1 - rate) / double(a.size())) + 1e-12);
    dropout_scales(b.data(), B, U, rate, 7, 3);
    EXPECT_EQ(a, b);
    // Sample b's factors do not depend on the batch they are drawn in.
    dropout_scales(b.data(), 1, U, rate, 7, 3);
    EXPECT_TRUE(std::equal(b.begin(), b.begin() + U, a.begin()));
    if (rate == 0.f) continue;
    dropout_scales(b.data(), B, U, rate, 7, 4);
    EXPECT_NE(a, b) << "another step";
    dropout_scales(b.data(), B, U, rate, 8, 3);
    EXPECT_NE(a, b) << "another seed";
  }
}

// A forward with labels set trains: dropout on, one mask for the whole step
// (forwards in it repeat their bits), a new one after the step; without labels
// no dropout. A model built again from the same seed draws the same masks.
TEST(Dropout, PaperCnnMaskIsFixedWithinAStepAndOffInEvaluation) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  auto scores = [&](Cnn& m) {
    const float* s = m.forward(x.data(), B);
    return std::vector<float>(s, s + B * kNumClasses);
  };
  Cnn a(CnnConfig::paper(1, 0.5f), B), b(CnnConfig::paper(1, 0.5f), B);
  a.init(5);
  b.init(5);
  const std::vector<float> eval = scores(a);
  a.set_training_labels(y.data());
  const std::vector<float> step0 = scores(a);
  EXPECT_NE(step0, eval);
  EXPECT_EQ(scores(a), step0);
  a.set_training_labels(nullptr);
  EXPECT_EQ(scores(a), eval);
  a.set_training_labels(y.data());
  const std::vector<float> step1 = scores(a);
  a.set_training_labels(nullptr);
  EXPECT_NE(step1, step0);
  b.set_training_labels(y.data());
  EXPECT_EQ(scores(b), step0);
  b.set_training_labels(nullptr);
  b.set_training_labels(y.data());
  EXPECT_EQ(scores(b), step1);
  b.set_training_labels(nullptr);
  // Rate 0: training and evaluation agree.
  Cnn c(CnnConfig::paper(1, 0.f), B);
  c.init(5);
  c.set_training_labels(y.data());
  EXPECT_EQ(scores(c), eval);
  c.set_training_labels(nullptr);
}

// NaN and both infinities at every position of a block the loop may vectorise
// over, and next to them the largest, smallest and subnormal finite values.
TEST(Models, AllFiniteFindsEveryNonFiniteValue) {
  for (size_t n : {1, 7, 16, 33}) {
    std::vector<float> x(n, 1.f);
    x[0] = FLT_MAX;
    x[n / 2] = -FLT_MIN;
    x[n - 1] = FLT_TRUE_MIN;
    EXPECT_TRUE(all_finite(x.data(), n));
    for (size_t k = 0; k < n; ++k)
      for (float bad : {NAN, -NAN, INFINITY, -INFINITY}) {
        std::vector<float> y = x;
        y[k] = bad;
        EXPECT_FALSE(all_finite(y.data(), n)) << "n " << n << " at " << k << ": " << bad;
      }
  }
  EXPECT_TRUE(all_finite(nullptr, 0));
}

TEST(Loss, SoftmaxCrossEntropyValueAndGradient) {
  // Hand value: logits (0, ln 3) with label 1: p = (1/4, 3/4), loss = -ln(3/4).
  const float l[2] = {0.f, float(std::log(3.0))};
  const int y = 1;
  float d[2];
  EXPECT_NEAR(softmax_xent(d, l, &y, 1, 2), -std::log(0.75), 1e-6);
  EXPECT_NEAR(d[0], 0.25, 1e-6);
  EXPECT_NEAR(d[1], -0.25, 1e-6);
  // Finite differences on a random batch.
  const int B = 3, C = 5;
  auto logits = test::randn(B * C, 1, 2.f);
  const int labels[B] = {0, 3, 4};
  std::vector<float> g(B * C), tmp(B * C);
  softmax_xent(g.data(), logits.data(), labels, B, C);
  for (int k = 0; k < B * C; ++k) {
    const float x0 = logits[k], h = 1e-3f;
    logits[k] = x0 + h; const double fp = softmax_xent(tmp.data(), logits.data(), labels, B, C);
    logits[k] = x0 - h; const double fm = softmax_xent(tmp.data(), logits.data(), labels, B, C);
    logits[k] = x0;
    EXPECT_NEAR((fp - fm) / (2 * h), g[k], 1e-4);
  }
}

TEST(Adam, FirstStepMovesEachWeightByLrTimesSign) {
  // With bias correction the first Adam step is lr * g / (|g| + eps') = lr * sign(g).
  ParamSet p;
  p.add("w", 3);
  p.allocate();
  p.values() = {1.f, 2.f, 3.f};
  p.grads() = {0.5f, -2.f, 1e-3f};
  AdamConfig c;
  c.lr = 0.1f;
  Adam adam(3, c);
  adam.step(p);
  EXPECT_NEAR(p.values()[0], 0.9f, 1e-5);
  EXPECT_NEAR(p.values()[1], 2.1f, 1e-5);
  EXPECT_NEAR(p.values()[2], 2.9f, 1e-4);
}

TEST(Init, SameTensorNameSameValuesAcrossModels) {
  CapsNet caps(CapsConfig{}, 2);
  Cnn cnn(CnnConfig{}, 2);
  caps.init(5);
  cnn.init(5);
  const size_t n = caps.params().tensor(caps.conv_w).size;
  for (size_t k = 0; k < n; ++k) EXPECT_EQ(caps.params().value(caps.conv_w)[k], cnn.params().value(cnn.conv_w)[k]);
  // He-normal: std sqrt(2/4096) for the primary weights.
  const float* w = caps.params().value(caps.prim_w);
  const size_t m = caps.params().tensor(caps.prim_w).size;
  double ss = 0;
  for (size_t k = 0; k < m; ++k) ss += double(w[k]) * w[k];
  EXPECT_NEAR(std::sqrt(ss / m), std::sqrt(2.0 / 4096), 0.01 * std::sqrt(2.0 / 4096));
}

// The model's own loss (xent, or the spread loss halfway through its annealing, or margin).
double loss_of(Model& m, const std::vector<float>& x, const std::vector<int>& y, int B,
               float* d = nullptr) {
  std::vector<float> scratch(size_t(B) * kNumClasses);
  return loss_forward_backward(m.loss(), d ? d : scratch.data(), m.forward(x.data(), B), y.data(), B,
                               kNumClasses, 0.5, 0);
}

// For each tensor: the directional derivative along the analytic gradient, and
// per-coordinate derivatives of its largest-gradient entries, by central
// differences on a ladder of steps (tests/gradcheck.h), at the seeded init
// moved off the ReLU kink (move_off_relu_kink).
void check_model_gradients(Model& m, const std::vector<float>& x, const std::vector<int>& y, int B,
                           const std::function<void(bool)>& freeze) {
  move_off_relu_kink(m);
  std::vector<float> d(size_t(B) * kNumClasses);
  loss_of(m, x, y, B, d.data());
  m.backward(d.data(), B);
  const std::vector<float> grad = m.params().grads();
  freeze(true);
  test::check_tensor_gradients(m.params(), grad, [&] { return loss_of(m, x, y, B); }, 1e-3, m.name() + " ");
  freeze(false);
}

TEST(GradientCheck, CapsNetStopGradientBackwardMatchesFiniteDifferences) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  CapsNet caps(CapsConfig{}, B);
  caps.init(11);
  // Primary activation logits get no gradient by design; everything else must.
  // Their entries are excluded by the frozen routing, which makes their finite
  // difference zero too: check that explicitly below.
  check_model_gradients(caps, x, y, B, [&](bool f) {
    if (f) caps.forward(x.data(), B);  // freeze the routing of the base point
    caps.freeze_routing(f);
  });
}

TEST(GradientCheck, CapsNetOnActivationsWithSpreadAndMarginLossMatchesFiniteDifferences) {
  // The paper's head: the scores are the class activations, so the gradient
  // reaches the poses only through sigma^2 and the cost.
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  for (LossKind kind : {LossKind::spread, LossKind::margin}) {
    CapsConfig c;
    c.loss.kind = kind;
    // The official code's inverse temperature: at the seed's lambda = 1 every
    // class activation at this point rounds to 1, and the loss is flat in float.
    c.em.lambda = 0.01f;
    CapsNet caps(c, B);
    caps.init(11);
    SCOPED_TRACE(loss_name(kind));
    check_model_gradients(caps, x, y, B, [&](bool f) {
      if (f) caps.forward(x.data(), B);
      caps.freeze_routing(f);
    });
  }
}

TEST(GradientCheck, CapsNetFullBackpropThrough1To3IterationsMatchesFiniteDifferences) {
  // The paper's gradient: through every EM iteration and into the primary
  // activations, checked against the whole model's loss with nothing frozen.
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  for (int iters : {1, 2, 3})
    for (LossKind kind : {LossKind::xent, LossKind::spread}) {
      CapsConfig c;
      c.em.grad = EmGrad::full;
      c.em.iters = iters;
      c.loss.kind = kind;
      if (kind == LossKind::spread) c.em.lambda = 0.01f;  // as in the test above: unsaturated activations
      CapsNet caps(c, B);
      caps.init(11);
      SCOPED_TRACE(std::to_string(iters) + " iterations, " + loss_name(kind));
      // After 3 iterations some class's variance sits at its floor here, so the
      // E-step's likelihood is steep: the loss bends on a scale of ~1e-4 in
      // weight space, inside the ladder's lower steps.
      check_model_gradients(caps, x, y, B, [](bool) {});
      // The primary activation logits (the last 8 biases) now get a gradient.
      const float* gb = caps.params().grad(caps.prim_b);
      double act = 0;
      for (int p = 0; p < 8; ++p) act += std::fabs(gb[8 * kPoseDim + p]);
      EXPECT_GT(act, 0.0);
    }
}

TEST(GradientCheck, CapsNetPrimaryActivationsGetNoGradient) {
  const int B = 3;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  CapsNet caps(CapsConfig{}, B);
  caps.init(12);
  std::vector<float> d(B * kNumClasses);
  softmax_xent(d.data(), caps.forward(x.data(), B), y.data(), B, kNumClasses);
  caps.backward(d.data(), B);
  const float* gb = caps.params().grad(caps.prim_b);
  for (int p = 0; p < 8; ++p) EXPECT_EQ(gb[8 * kPoseDim + p], 0.f);
  double pose = 0;
  for (int k = 0; k < 8 * kPoseDim; ++k) pose += std::fabs(gb[k]);
  EXPECT_GT(pose, 0.0);
}

// A registered model built with its entry's exact_gradient_options at `shape`:
// its backward against central differences of its training loss (the loss's
// and the model's own term, e.g. dr's reconstruction) on x, labels y, set as in
// a training step (so cnn-paper's dropout mask and dr's decoder mask stay fixed).
void check_registered_model_gradients(const std::string& name, const std::vector<float>& x, const std::vector<int>& y,
                                      int B, const ImageShape& shape, double h) {
  ModelOptions opts;
  for (const auto& [k, v] : find_model(name)->exact_gradient_options) opts[k] = v;
  std::unique_ptr<Model> m = make_model(name, opts, B, shape);
  m->init(13);
  move_off_relu_kink(*m);
  // Labels stay set for the whole check: clearing them ends a step
  // (cnn-paper would draw a new dropout mask).
  m->set_training_labels(y.data());
  const int C = shape.classes;
  auto loss = [&](float* d) {
    std::vector<float> scratch(size_t(B) * C);
    return loss_forward_backward(m->loss(), d ? d : scratch.data(), m->forward(x.data(), B), y.data(), B, C, 0.5, 0) +
           m->model_loss();
  };
  std::vector<float> d(size_t(B) * C);
  loss(d.data());
  m->backward(d.data(), B);
  const std::vector<float> grad = m->params().grads();
  test::check_tensor_gradients(m->params(), grad, [&] { return loss(nullptr); }, h, name + " ");
  m->set_training_labels(nullptr);
}

// Every registered model that trains, built with its entry's
// exact_gradient_options, on two input channels (smallNORB's stereo pair;
// the one-channel path has each model's own check above): the whole model's
// backward against central differences of its training loss (the loss's and
// the model's own term, e.g. dr's reconstruction), labels set as in a training
// step (so cnn-paper's dropout mask and dr's decoder mask stay fixed). A model
// gets this check by being registered.
TEST(GradientCheck, EveryRegisteredModelMatchesFiniteDifferences) {
  const int B = 3;
  std::vector<int> y, y2;
  const auto one = sample_images(B, &y), other = sample_images(2 * B, &y2);
  for (const std::string& name : test::registered_models(/*trained=*/true))
    for (int channels : {2}) {
      SCOPED_TRACE(name + ", " + std::to_string(channels) + " channels");
      std::vector<float> x;
      for (int s = 0; s < B; ++s) {  // channel 2: another sample's image
        x.insert(x.end(), one.begin() + s * kImagePixels, one.begin() + (s + 1) * kImagePixels);
        if (channels == 2)
          x.insert(x.end(), other.begin() + (2 * B - 1 - s) * kImagePixels, other.begin() + (2 * B - s) * kImagePixels);
      }
      check_registered_model_gradients(name, x, y, B, ImageShape{.channels = channels}, 1e-3);
    }
}

TEST(GradientCheck, CnnBackwardMatchesFiniteDifferences) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  for (int hidden : {64, 136}) {
    CnnConfig c;
    c.hidden = hidden;
    Cnn cnn(c, B);
    cnn.init(13);
    check_model_gradients(cnn, x, y, B, [](bool) {});
  }
}

// The paper's CNN in training, dropout on: the mask is this step's, fixed while
// the labels stay set, so the finite differences see the function backward
// differentiated. Both convolutions, both pools and the dropout are in the path.
TEST(GradientCheck, PaperCnnWithDropoutMatchesFiniteDifferences) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  for (float rate : {0.5f, 0.f}) {
    SCOPED_TRACE("dropout " + std::to_string(rate));
    Cnn cnn(CnnConfig::paper(1, rate), B);
    cnn.init(13);
    cnn.set_training_labels(y.data());
    check_model_gradients(cnn, x, y, B, [](bool) {});
    cnn.set_training_labels(nullptr);
  }
}

TEST(GradientCheck, TwoInputChannelsMatchFiniteDifferences) {
  // smallNORB's stereo pairs: each sample two 32 x 32 channels (two of the
  // synthetic images here), into conv1 or the linear layer.
  const int B = 4;
  std::vector<int> y, y2;
  const auto a = sample_images(B, &y), b = sample_images(2 * B, &y2);
  std::vector<float> x;
  for (int s = 0; s < B; ++s) {
    x.insert(x.end(), a.begin() + s * 1024, a.begin() + (s + 1) * 1024);
    x.insert(x.end(), b.begin() + (2 * B - 1 - s) * 1024, b.begin() + (2 * B - s) * 1024);
  }
  CapsConfig cc;
  cc.in_channels = 2;
  CapsNet caps(cc, B);
  caps.init(11);
  check_model_gradients(caps, x, y, B, [&](bool f) {
    if (f) caps.forward(x.data(), B);
    caps.freeze_routing(f);
  });
  CnnConfig c;
  c.in_channels = 2;
  Cnn cnn(c, B);
  cnn.init(13);
  check_model_gradients(cnn, x, y, B, [](bool) {});
  Linear lin(LossConfig{}, B, ImageShape{.channels = 2});
  lin.init(13);
  check_model_gradients(lin, x, y, B, [](bool) {});
  Cnn paper(CnnConfig::paper(2, 0.5f), B);
  paper.init(13);
  paper.set_training_labels(y.data());
  check_model_gradients(paper, x, y, B, [](bool) {});
  paper.set_training_labels(nullptr);
}

TEST(GradientCheck, LinearBackwardMatchesFiniteDifferences) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  Linear lin(LossConfig{}, B);
  lin.init(13);
  check_model_gradients(lin, x, y, B, [](bool) {});
}

// 1-NN: a training image is its own nearest neighbour (distance 0), so its
// class comes back exactly; a query is given the class of the training image
// at the least Euclidean distance, found here by brute force in double.
// Evaluation runs in batches of kEvalBatch (harness/train.h) and a split's last
// batch holds whatever is left, so any size from 1 up occurs. A sample's scores
// must not depend on the batch it shares, or the evaluation batch (and a
// split's size) would move results. Each model, with one input channel and two,
// scores 256 images in one batch and again in uneven batches: the same bits,
// scores and class capsules alike. That holds with oneDNN's AVX-512 kernels;
// its AVX2 matmul sums in an order that depends on the batch (hundreds of
// scores differ in their last bits), and so do its aarch64 kernels (under qemu,
// up to a thousand values of dr's), so there the evaluation batch is part of
// the configuration, and the test is skipped. So it is for convcaps on our
// x86 kernels (measured: 67 values differ): runs of its routing's exps and
// logs span several images, and a run's last floats past its last whole eight
// go through scalar code (std::exp, not the polynomial), so where a run ends
// depends on the batch; the AVX-512 kernels split runs as the AVX2 ones do so
// as to give their bits (--reproducible runs either). Its scalar kernels are
// checked.
TEST(Models, ASamplesScoresDoNotDependOnTheBatchItIsIn) {
  if (onednn_isa().rfind("avx512", 0) != 0)
    GTEST_SKIP() << "oneDNN at " << onednn_isa() << ": scores depend on the batch there";
  const int N = 256;
  const std::vector<std::vector<int>> batchings = {{64, 64, 64, 64}, {1, 2, 31, 32, 33, 63, 94}, {255, 1}};
  std::vector<int> y;
  const std::vector<float> one = sample_images(N + 1, &y);
  for (int channels : {1, 2}) {
    // Two channels: each sample's image and the next one's.
    std::vector<float> x;
    for (int b = 0; b < N; ++b)
      for (int c = 0; c < channels; ++c)
        x.insert(x.end(), one.begin() + long(b + c) * kImagePixels, one.begin() + long(b + c + 1) * kImagePixels);
    const size_t per_image = size_t(channels) * kImagePixels;
    std::vector<std::string> names = test::registered_models(/*trained=*/false);
    names.push_back("cnn136");
    for (const std::string& name : names) {
      if (name == "convcaps" && (selected_isa() == Isa::avx2 || selected_isa() == Isa::avx512)) continue;
      SCOPED_TRACE(name + ", " + std::to_string(channels) + " channel(s)");
      std::unique_ptr<Model> m = make_model(name, {}, N, channels);
      m->init(21);
      if (name == "nn1") {
        ASSERT_TRUE(m->fit(x.data(), y.data(), 97));  // a reference set of 97
      }
      const float* s = m->forward(x.data(), N);
      const std::vector<float> scores(s, s + size_t(N) * kNumClasses);
      const ClassCapsules cc = m->class_capsules();
      const std::vector<float> act = cc.pose_dim ? std::vector<float>(cc.activations, cc.activations + size_t(N) * kNumClasses)
                                                 : std::vector<float>{};
      const std::vector<float> pose = cc.pose_dim ? std::vector<float>(cc.poses, cc.poses + size_t(N) * kNumClasses * cc.pose_dim)
                                                  : std::vector<float>{};
      for (const std::vector<int>& batches : batchings) {
        int start = 0, differ = 0;
        for (int B : batches) {
          const float* sb = m->forward(x.data() + size_t(start) * per_image, B);
          const ClassCapsules cb = m->class_capsules();
          for (int k = 0; k < B * kNumClasses; ++k) {
            const size_t at = size_t(start) * kNumClasses + size_t(k);
            differ += std::memcmp(&sb[k], &scores[at], sizeof(float)) != 0;
            if (cb.pose_dim) differ += std::memcmp(&cb.activations[k], &act[at], sizeof(float)) != 0;
          }
          for (size_t k = 0; cb.pose_dim && k < size_t(B) * kNumClasses * size_t(cb.pose_dim); ++k)
            differ += std::memcmp(&cb.poses[k], &pose[size_t(start) * kNumClasses * size_t(cb.pose_dim) + k], sizeof(float)) != 0;
          start += B;
        }
        ASSERT_EQ(start, N);
        EXPECT_EQ(differ, 0) << "batches of " << batches.front() << ", " << batches[1] << ", ...";
      }
    }
  }
}

TEST(NearestNeighbour, ReturnsTheClassOfTheNearestTrainingImage) {
  std::vector<int> y;
  const auto train = sample_images(12, &y);
  std::vector<int> yq;
  DataConfig dc;
  dc.seed = 9;
  const Split q = make_split(dc, SplitId::HeldOut, {30.0, 200.0}, 1);
  NearestNeighbour nn(q.size());
  ASSERT_TRUE(nn.fit(train.data(), y.data(), 12));
  EXPECT_EQ(nn.params().count(), 0u);
  const float* s = nn.forward(train.data(), 12);
  for (int b = 0; b < 12; ++b) EXPECT_EQ(s[b * kNumClasses + y[size_t(b)]], 1.f) << b;
  s = nn.forward(q.images.data(), q.size());
  for (int b = 0; b < q.size(); ++b) {
    int best = 0;
    double best_d = INFINITY;
    for (int t = 0; t < 12; ++t) {
      double d = 0;
      for (int k = 0; k < kImagePixels; ++k) {
        const double e = double(q.image(b)[k]) - train[size_t(t) * kImagePixels + k];
        d += e * e;
      }
      if (d < best_d) best_d = d, best = t;
    }
    float sum = 0;
    for (int c = 0; c < kNumClasses; ++c) sum += s[b * kNumClasses + c];
    EXPECT_EQ(sum, 1.f);
    EXPECT_EQ(s[b * kNumClasses + y[size_t(best)]], 1.f) << "query " << b;
  }
}

}  // namespace
}  // namespace vg

namespace vg {
namespace {

// The official code's options through the whole model (the kernels' own
// checks, tests/test_em_routing.cpp and test_conv_em_routing_backward.cpp,
// cover each option in double; here the model passes them on): convcaps with
// the official logit, the mean carry and the class layer's quarter lambda,
// full backward, against central differences of the training loss. (The
// official logit's 5000 beta_a bends the loss over ~2e-4 of beta_a: the
// ladder's lower steps.)
TEST(GradientCheck, OfficialRoutingOptionsThroughWholeModelsMatchFiniteDifferences) {
  const int B = 3;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  for (const std::string name : {"convcaps"}) {
    SCOPED_TRACE(name);
    ModelOptions opts;
    for (const auto& [k, v] : find_model(name)->exact_gradient_options) opts[k] = v;
    opts["em-mean"] = "official";
    opts["em-class-lambda"] = "official";
    opts["em-logit"] = "official";
    std::unique_ptr<Model> m = make_model(name, opts, B, 1);
    m->init(13);
    test::move_off_relu_kink(*m);
    std::vector<float> d(size_t(B) * kNumClasses);
    loss_of(*m, x, y, B, d.data());
    m->backward(d.data(), B);
    const std::vector<float> grad = m->params().grads();
    test::check_tensor_gradients(m->params(), grad, [&] { return loss_of(*m, x, y, B); }, 1e-3, name + " ");
  }
}

// Real photographs (issue 52): every trained model at Fashion-MNIST's shape (1 x
// 28 x 28, 10 classes) on its first training images, pixels / 255, with its
// entry's exact_gradient_options, against central differences of its training
// loss. The checks above run on rendered toys at 32 x 32 and 5 classes; here
// the geometry comes from the real set's shape (convcaps: 12 -> 5 -> 3 grids and
// a class layer of 10) and the inputs are photographs, whose grey backgrounds
// and textures reach the routing as no rendered toy does. Needs Debian's
// dataset-fashion-mnist (tools/deps.sh installs it); skipped without it.
// The step is 2e-4, not the toys' 1e-3: a photograph's grey levels put some of
// conv1's pre-activations within 1e-3 of the ReLU's kink even at bias 0.1
// (cnn's conv1.bias missed by 5 % at 1e-3 and agrees at 2e-4).
TEST(GradientCheck, EveryTrainedModelOnFashionMnistPhotographsMatchesFiniteDifferences) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) GTEST_SKIP() << dir << " is missing (apt-get install dataset-fashion-mnist)";
  const IdxData data = idx_load_dir(dir, 10);
  const int B = 3, side = data.side(), C = 10;
  ASSERT_EQ(side, 28);
  std::vector<float> x(size_t(B) * side * side);
  std::vector<int> y(B);
  // Three images of three classes: the first training images of classes 0, 4 and 9.
  const int classes[B] = {0, 4, 9};
  for (int s = 0, i = 0; s < B; ++i)
    if (data.train.labels[size_t(i)] == classes[s]) {
      const uint8_t* px = data.train.images.image(i);
      for (int p = 0; p < side * side; ++p) x[size_t(s) * side * side + size_t(p)] = px[p] / 255.f;
      y[size_t(s)] = classes[s];
      ++s;
    }
  for (const std::string& name : test::registered_models(/*trained=*/true)) {
    SCOPED_TRACE(name);
    check_registered_model_gradients(name, x, y, B, ImageShape{.channels = 1, .side = side, .classes = C}, 2e-4);
  }
}

}  // namespace
}  // namespace vg
