// The paper's capsule network (models/convcaps.h) as a whole: its parameter
// count from the layer shapes, its options' validation, and routing that
// neither dies nor saturates at step 0. The registry-wide tests (gradients,
// allocation, batch independence) cover it by its registry line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "models/convcaps.h"
#include "models/model.h"
#include "models/registry.h"
#include "tests/step_helpers.h"
#include "tests/test_util.h"

namespace vg {
namespace {

// Every layer's weights from its shapes: conv1 C_in x A x 5 x 5 + A; the 1x1
// primary layer A x B (16 + 1) + B (16 + 1); a convolutional capsule layer one
// 4x4 W per (kernel position, child type, parent type) and two betas per parent
// type; the class layer one W per (child type, class), shared over positions.
size_t count_from_shapes(int channels, int A, int B, int C, int D, int K, int classes = 5) {
  size_t n = size_t(channels) * A * 25 + A;
  n += size_t(A) * B * 17 + size_t(B) * 17;
  int types = B;
  for (int out : {C, D}) {
    n += size_t(K) * K * types * out * 16 + 2 * size_t(out);
    types = out;
  }
  return n + size_t(types) * classes * 16 + 2 * size_t(classes);
}

TEST(ConvCaps, ParameterCountFollowsFromTheLayerShapes) {
  for (int channels : {1, 2}) {
    const size_t n = count_from_shapes(channels, 64, 8, 16, 16, 3);
    EXPECT_EQ(n, channels == 1 ? 67154u : 68754u);  // the figures for the paper's small model
    EXPECT_EQ(model_param_count("convcaps", {}, channels), n);
    EXPECT_EQ(make_model("convcaps", {}, 2, channels)->params().count(), n);
  }
  // The paper's larger model, A = B = C = D = 32 ("about 310K").
  const ModelOptions large{{"caps-a", "32"}, {"caps-b", "32"}, {"caps-c", "32"}, {"caps-d", "32"}};
  const size_t n = count_from_shapes(1, 32, 32, 32, 32, 3);
  EXPECT_EQ(model_param_count("convcaps", large, 1), n);
  EXPECT_EQ(make_model("convcaps", large, 2, 1)->params().count(), n);
  EXPECT_NEAR(double(n), 310e3, 0.03 * 310e3);
}

TEST(ConvCaps, BadOptionsNameTheFlagAndTheValue) {
  const std::pair<const char*, const char*> bad[] = {
      {"caps-a", "0"},  {"caps-b", "-1"},    {"caps-c", "65"},     {"caps-d", "0"},  {"caps-k", "2"},
      {"caps-k", "7"},  {"caps-k", "0"},     {"em-norm", "window"}, {"coord-add", "both"}, {"caps-a", "1.5"},
      {"em-logit", "half"}, {"em-mean", "0.1"}, {"em-class-lambda", "quarter"},
  };
  for (const auto& [flag, value] : bad) {
    try {
      check_model("convcaps", {{flag, value}});
      ADD_FAILURE() << flag << " " << value;
    } catch (const ModelOptionError& e) {
      EXPECT_EQ(e.flag, flag);
      EXPECT_EQ(e.value, value);
    }
  }
  // K = 7: 32 -> 14 after conv1 -> 4 after ConvCaps1, too small for a 7x7 window.
  try {
    check_model("convcaps", {{"caps-k", "7"}});
  } catch (const ModelOptionError& e) {
    EXPECT_NE(std::string(e.what()).find("14 after conv1 and 4 after ConvCaps1"), std::string::npos) << e.what();
  }
  // K = 5 still fits: 14 -> 5 -> 1.
  EXPECT_NO_THROW(check_model("convcaps", {{"caps-k", "5"}}));
}

TEST(ConvCaps, TheGridsAndCoordinatesAreThePapers) {
  ConvCapsConfig c;
  EXPECT_EQ(c.conv1_side(), 14);
  EXPECT_EQ(c.caps1_side(), 6);
  EXPECT_EQ(c.caps2_side(), 4);
  // The paper's coordinates: the centre pixel of each ConvCaps2 capsule's
  // receptive field, 8 + 4 y (conv1 centres on 2 + 2 y1, each 3x3 window adds
  // one step of its input's spacing), at the pixel's centre, over the side.
  const std::vector<float> paper = ConvCapsNet::class_coords(c);
  ASSERT_EQ(paper.size(), 8u);
  for (int y = 0; y < 4; ++y) {
    EXPECT_FLOAT_EQ(paper[size_t(y)], (8 + 4 * y + 0.5f) / 32);
    EXPECT_FLOAT_EQ(paper[size_t(4 + y)], (8 + 4 * y + 0.5f) / 32);
  }
  // capsule_em's: the same centre pixel, numbered from -ceil(side / 2) (its
  // np.mgrid from -side // 2), over 100; the column to pose element 0 and the
  // row to element 1 (simple_model.conv_pos swaps the pair at each of its
  // three calls).
  c.coords = CoordPlace::official;
  const std::vector<float> official = ConvCapsNet::class_coords(c);
  for (int y = 0; y < 4; ++y) {
    EXPECT_FLOAT_EQ(official[size_t(y)], (8 + 4 * y - 16) / 100.f);
    EXPECT_FLOAT_EQ(official[size_t(4 + y)], (8 + 4 * y - 16) / 100.f);
  }
  c.image_side = 28;  // Fashion-MNIST's: 12 -> 5 -> 3 grids
  const std::vector<float> at28 = ConvCapsNet::class_coords(c);
  ASSERT_EQ(at28.size(), 6u);
  for (int y = 0; y < 3; ++y) EXPECT_FLOAT_EQ(at28[size_t(y)], (8 + 4 * y - 14) / 100.f);
  const VoteCoords placed{nullptr, nullptr, CoordPlace::official};
  EXPECT_EQ(placed.col_elem(), 0);
  EXPECT_EQ(placed.row_elem(), 1);
}

// Step 0 under the official code's lambda schedule (lambda_final 0.01): every
// layer's activations finite, spread over (0, 1) rather than all at 0 (dead
// routing) or all at 1, and the class activations depend on the image. (At
// the seed's fixed lambda = 1 the cost, which grows with the number of
// children, saturates them: mean 0.989, 0.970 and 1.000 here; see
// docs/models.md.)
TEST(ConvCaps, RoutingNeitherDiesNorSaturatesAtStepZero) {
  const int B = 16;
  std::vector<int> y;
  const auto x = test::sample_images(B, &y);
  for (const char* grad : {"stopgrad", "full"}) {
    SCOPED_TRACE(grad);
    auto m = make_model("convcaps", {{"em-grad", grad}, {"em-lambda-schedule", "official"}}, B, 1);
    m->init(0);
    m->forward(x.data(), B);
    ASSERT_EQ(m->first_non_finite_layer(B), "");
    auto& net = static_cast<ConvCapsNet&>(*m);
    auto spread = [](const float* a, size_t n, const char* layer) {
      size_t low = 0, high = 0;
      double mean = 0;
      for (size_t k = 0; k < n; ++k) low += a[k] < 0.01f, high += a[k] > 0.99f, mean += a[k];
      mean /= double(n);
      EXPECT_LT(low, n / 2) << layer << ": most activations below 0.01 (mean " << mean << ")";
      EXPECT_LT(high, n / 2) << layer << ": most activations above 0.99 (mean " << mean << ")";
    };
    spread(net.caps1().a(), size_t(B) * 36 * 16, "convcaps1");
    spread(net.caps2().a(), size_t(B) * 16 * 16, "convcaps2");
    spread(net.class_caps().a(), size_t(B) * 5, "class");
    double var = 0, mean = 0;
    const float* a = net.class_caps().a();
    for (int k = 0; k < B * 5; ++k) mean += a[k] / (B * 5.0);
    for (int k = 0; k < B * 5; ++k) var += (a[k] - mean) * (a[k] - mean);
    EXPECT_GT(var, 0.0);
  }
}

// The memory of a training run at the paper's sizes (batch 32, evaluation
// batches of 64), bounded from the layer shapes, with no timing: every
// activation and its gradient, up to 3 floats of routing state per (window,
// child, parent type) of the training batch, the class layer's votes, and the
// votes of one ConvCaps::kChunk of images. The votes of a whole batch (16
// floats per pair: 85 MB at ConvCaps1 for 32 images) would break the bound
// many times over: that is what ConvCaps computes a chunk at a time.
TEST(ConvCaps, HoldsNoBatchOfVotes) {
  const int B = 32, E = 64;  // harness: the training batch and kEvalBatch
  std::vector<int> y;
  const auto x = test::sample_images(E, &y);
  auto m = make_model("convcaps", {}, E, 1);
  m->init(0);
  Trainer trainer(*m, AdamConfig{}, B);
  m->prepare_training(B);
  trainer.step(x.data(), y.data(), B, 0.0);
  m->forward(x.data(), E);  // an evaluation
  trainer.step(x.data() + size_t(B) * kImagePixels, y.data() + B, B, 0.5);
  const auto& net = static_cast<const ConvCapsNet&>(*m);
  const ConvCapsConfig& c = net.config();
  const size_t s0 = size_t(c.conv1_side()) * c.conv1_side(), s1 = size_t(c.caps1_side()) * c.caps1_side(),
               s2 = size_t(c.caps2_side()) * c.caps2_side(), K2 = size_t(c.K) * c.K, H = kPoseDim;
  const size_t pairs1 = s1 * K2 * c.B * c.C, pairs2 = s2 * K2 * c.C * c.D, pairs3 = s2 * c.D * c.n_classes;
  // Per image: conv1's output; the primary layer's output and its split into
  // poses and logits; each capsule layer's parents (pose, activation, logit,
  // log a) and children's log a; the class layer's votes and routing state.
  const size_t forward = s0 * c.A + 2 * s0 * c.B * (H + 1) + (H + 3) * (s1 * c.C + s2 * c.D) +
                         (s0 * c.B + s1 * c.C) + pairs3 * (H + 3);
  // Per image of the training batch: the gradients of all of the above, the
  // convolutional layers' routing state, the class votes' gradient.
  const size_t backward = forward + 3 * (pairs1 + pairs2) + pairs3 * H;
  const size_t chunk = 2 * ConvCaps::kChunk * std::max(pairs1, pairs2) * H;  // votes and their gradient
  const size_t bound = sizeof(float) * (E * forward + B * backward + chunk);
  std::printf("convcaps buffers %.1f MB (bound %.1f MB): ConvCaps1 %.1f, ConvCaps2 %.1f, class %.1f\n",
              net.buffer_bytes() / 1e6, bound / 1e6, net.caps1().buffer_bytes() / 1e6,
              net.caps2().buffer_bytes() / 1e6, net.class_caps().buffer_bytes() / 1e6);
  EXPECT_LE(net.buffer_bytes(), bound);
  EXPECT_LT(net.buffer_bytes(), sizeof(float) * B * pairs1 * H);  // less than one batch of ConvCaps1's votes
  // The CLI's memory check (per image, times the larger batch) covers it.
  EXPECT_LE(net.buffer_bytes(), sizeof(float) * E * model_activation_floats("convcaps", {}, 1));
}

// The memory check's count of what a step holds whatever the batch
// (ModelEntry::step_floats) covers what a step does hold, on one thread and
// with a helper beside it, which routes and differentiates chunks in slots of
// its own: at the paper's sizes under both gradient schemes and at the larger
// model's, where its two extra slots hold 129 MB. A batch of 2 leaves the
// per-image count little slack, so the helper's slots must be counted to pass.
TEST(ConvCaps, TheMemoryCheckCountsAHelpersSlots) {
  const int B = 2;
  std::vector<int> y;
  const auto x = test::sample_images(B, &y);
  const ModelOptions larger = {{"caps-a", "32"}, {"caps-b", "32"}, {"caps-c", "32"}, {"caps-d", "32"}};
  for (const ModelOptions& opts : {ModelOptions{}, ModelOptions{{"em-grad", "stopgrad"}}, larger}) {
    auto fixed = [&](int threads) { return sizeof(float) * model_step_floats("convcaps", opts, {}, threads); };
    const size_t per_image = sizeof(float) * B * model_activation_floats("convcaps", opts, 1);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(opts.size()) + " options, threads " + std::to_string(threads));
      auto m = make_model("convcaps", opts, B, 1);
      m->init(0);
      test::ThreadHelper helper(0);
      {
        Trainer trainer(*m, AdamConfig{}, B);
        if (threads > 1) trainer.set_helper(&helper);
        m->prepare_training(B);
        trainer.step(x.data(), y.data(), B, 0.0);
      }
      helper.stop();
      const size_t held = static_cast<const ConvCapsNet&>(*m).buffer_bytes();
      std::printf("convcaps (%zu options) at %d threads: buffers %.1f MB, counted %.1f MB (%.1f MB fixed)\n",
                  opts.size(), threads, held / 1e6, (per_image + fixed(threads)) / 1e6, fixed(threads) / 1e6);
      EXPECT_LE(held, per_image + fixed(threads));
      if (threads > 1) {
        EXPECT_GT(held, per_image + fixed(1));  // a one-thread count misses the helper's slots
      }
    }
  }
}

// One forward pass of a tiny convcaps against tests/convcaps_reference.py, a
// numpy implementation written from the paper's equations (float64, with a
// float32 pass that sets the tolerance; see its docstring). Skipped where
// python3 with numpy is missing.
void write_floats(const std::filesystem::path& f, const float* x, size_t n) {
  std::ofstream o(f, std::ios::binary);
  o.write(reinterpret_cast<const char*>(x), std::streamsize(n * sizeof(float)));
  ASSERT_TRUE(o.good()) << f;
}

TEST(ConvCaps, OneForwardPassMatchesAnIndependentNumpyReference) {
  const std::string python = vg::test::paths::python;
  if (std::system((python + " -c 'import numpy' >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no python3 with numpy";
  struct Case {
    const char* norm;
    const char* coords;
    const char* schedule;
    const char* logit = "paper";
    const char* mean = "paper";
    const char* class_lambda = "paper";
  };
  // The official code's choices one at a time, then all of them at once.
  const Case cases[] = {{"paper", "paper", "official"},
                        {"official", "official", "official"},
                        {"paper", "paper", "fixed"},
                        {"paper", "paper", "official", "official"},
                        {"paper", "paper", "fixed", "paper", "official"},
                        {"paper", "paper", "official", "paper", "paper", "official"},
                        {"official", "official", "official", "official", "official", "official"}};
  const int N = 2;
  std::vector<int> y;
  const auto x = test::sample_images(N, &y);
  for (const Case& c : cases) {
    const std::string tag = std::string(c.norm) + c.coords + c.schedule + c.logit + c.mean + c.class_lambda;
    SCOPED_TRACE(std::string(c.norm) + " normalisation, " + c.coords + " coordinates, " + c.schedule + " lambda, " +
                 c.logit + " logit, " + c.mean + " mean, " + c.class_lambda + " class lambda");
    const ModelOptions opts{{"caps-a", "3"},     {"caps-b", "2"},         {"caps-c", "3"},
                            {"caps-d", "2"},     {"em-norm", c.norm},     {"coord-add", c.coords},
                            {"em-lambda-schedule", c.schedule}, {"em-logit", c.logit}, {"em-mean", c.mean},
                            {"em-class-lambda", c.class_lambda}};
    auto m = make_model("convcaps", opts, N, 1);
    m->init(5);
    ParamSet& p = m->params();
    for (int t = 0; t < p.num_tensors(); ++t)  // betas away from 0, so the check reads them
      if (p.tensor(t).name.find(".beta") != std::string::npos)
        for (size_t k = 0; k < p.tensor(t).size; ++k) p.value(t)[k] = 0.3f * float(k % 3) - 0.2f;
    m->forward(x.data(), N);
    const auto& net = static_cast<const ConvCapsNet&>(*m);
    const ConvCapsConfig& cfg = net.config();
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("viewgap_convcaps_ref_" + std::to_string(::getpid()) + "_" + tag);
    std::filesystem::create_directories(dir);
    for (int t = 0; t < p.num_tensors(); ++t) write_floats(dir / (p.tensor(t).name + ".f32"), p.value(t), p.tensor(t).size);
    write_floats(dir / "images.f32", x.data(), x.size());
    const size_t s1 = 36, s2 = 16;
    write_floats(dir / "out.convcaps1.mu.f32", net.caps1().mu(), N * s1 * 3 * 16);
    write_floats(dir / "out.convcaps1.a.f32", net.caps1().a(), N * s1 * 3);
    write_floats(dir / "out.convcaps2.mu.f32", net.caps2().mu(), N * s2 * 2 * 16);
    write_floats(dir / "out.convcaps2.a.f32", net.caps2().a(), N * s2 * 2);
    write_floats(dir / "out.class.mu.f32", net.class_caps().mu(), N * 5 * 16);
    write_floats(dir / "out.class.a.f32", net.class_caps().a(), N * 5);
    const nlohmann::json meta = {
        {"batch", N}, {"in_channels", 1}, {"image_side", cfg.image_side}, {"A", cfg.A}, {"B", cfg.B}, {"C", cfg.C},
        {"D", cfg.D}, {"K", cfg.K}, {"classes", cfg.n_classes}, {"iters", cfg.em.iters}, {"lambda", cfg.em.lambda},
        {"lambda_schedule", cfg.em.lambda_schedule}, {"sigma2_min", cfg.em.sigma2_min}, {"norm", c.norm},
        {"coord_place", c.coords}, {"coords", ConvCapsNet::class_coords(cfg)},
        {"logit", c.logit}, {"mean_carry", cfg.em.mean_carry}, {"class_lambda_scale", cfg.class_lambda_scale}};
    std::ofstream(dir / "meta.json") << meta.dump();
    const std::string cmd =
        python + " " + vg::test::paths::source_dir + "/tests/convcaps_reference.py " + dir.string() + " 2>&1";
    const test::Captured r = test::capture(cmd);
    EXPECT_EQ(r.status, 0) << r.out;
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace vg
