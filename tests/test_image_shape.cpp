// The data's image shape flows into the models (issue 30, sections 1 and 3):
// every registered model builds for the ImageShape the data gives (side and
// classes as well as channels), counts the parameters it builds, and trains
// through the registry with no model named; the translation protocol draws
// on a larger canvas (--canvas), its frame's content at the centre, the
// default canvas's bytes unchanged; and bad shapes are one line naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/plane_views.h"
#include "harness/run_flags.h"
#include "models/loss.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace vg {
namespace {

// A run's data configuration from run flags (the translation protocol, small).
DataConfig configured(const std::vector<std::pair<std::string, std::string>>& set) {
  RunFlags f;
  f.split = "translation";
  f.n_train_views = "2";
  f.n_elev = "1";
  f.elevations = "30:30";
  f.train_az = "0:90";
  for (const auto& [flag, value] : set) *run_flag(f, flag) = value;
  int threads = 1;
  return validate_run(f, &threads).data;
}

// B images of `shape` from the translation protocol at its side (real
// pictures: a black background and lit strokes), of B different classes
// (each channel the same image), with their labels; `relabel`: image b's
// label moved on by 2b, so that labels beyond the data's five occur.
std::vector<float> images_of(const ImageShape& shape, int B, std::vector<int>* labels, bool relabel = false) {
  const DataConfig cfg = configured({{"canvas", std::to_string(shape.side)}});
  const Dataset d = make_dataset(cfg);
  std::vector<float> x;
  for (int b = 0; b < B; ++b) {
    const int k = (b * d.train.size() / B + 3 * b) % d.train.size();
    for (int c = 0; c < shape.channels; ++c) x.insert(x.end(), d.train.image(k), d.train.image(k) + d.train.pixels());
    labels->push_back((d.train.labels[size_t(k)] + (relabel ? 2 * b : 0)) % shape.classes);
  }
  return x;
}

// Every registered model, at the frame's side and a 40-pixel canvas, with
// five classes and with seven: it builds, counts what it builds, gives
// finite scores of batch x classes, and trains a step (forward, loss,
// backward, Adam) with every gradient finite and some nonzero.
TEST(ImageShape, EveryRegisteredModelBuildsAndTrainsAtTheDatasShape) {
  const int B = 3;
  for (const ImageShape shape : {ImageShape{1, 32, 5}, ImageShape{1, 40, 5}, ImageShape{1, 40, 7}, ImageShape{2, 40, 5}}) {
    std::vector<int> y;
    const std::vector<float> x = images_of(shape, B, &y, /*relabel=*/true);
    ASSERT_EQ(x.size(), size_t(B) * shape.pixels());
    for (const std::string& name : test::registered_models(/*trained=*/false)) {
      SCOPED_TRACE(name + " at " + shape.text());
      std::unique_ptr<Model> m = make_model(name, {}, B, shape);
      EXPECT_EQ(m->params().count(), model_param_count(name, {}, shape));
      EXPECT_EQ(m->classes(), shape.classes);  // the Trainer's score gradient is sized by it
      m->init(5);
      if (m->fit(x.data(), y.data(), B)) {  // nn1: its own training images come back with their labels
        const float* s = m->forward(x.data(), B);
        for (int b = 0; b < B; ++b)
          for (int c = 0; c < shape.classes; ++c) EXPECT_EQ(s[b * shape.classes + c], c == y[size_t(b)] ? 1.f : 0.f);
        continue;
      }
      const float* s = m->forward(x.data(), B);
      const std::vector<float> scores(s, s + size_t(B) * shape.classes);
      EXPECT_TRUE(all_finite(scores.data(), scores.size()));
      const ClassCapsules caps = m->class_capsules();
      if (caps.pose_dim > 0) {
        EXPECT_TRUE(all_finite(caps.activations, size_t(B) * shape.classes));
      }
      Trainer trainer(*m, AdamConfig{}, B);
      const double loss = trainer.step(x.data(), y.data(), B, 0.5);
      EXPECT_TRUE(std::isfinite(loss));
      const std::vector<float>& g = m->params().grads();
      EXPECT_TRUE(all_finite(g.data(), g.size()));
      double norm = 0;
      for (float v : g) norm += double(v) * v;
      EXPECT_GT(norm, 0.0);
      EXPECT_TRUE(all_finite(m->params().values().data(), m->params().count()));
    }
  }
}

// The counts the shapes give, written out from the layers (not the code): the
// pixel baseline reads every pixel, the seed's networks a conv1 of ceil(S/2)^2
// x 16 values, the paper's CNN a hidden layer of (S/4)^2 x 64.
TEST(ImageShape, ParameterCountsFollowTheSideAndTheClasses) {
  const ImageShape s40{1, 40, 5}, s40c7{1, 40, 7};
  EXPECT_EQ(model_param_count("linear", {}, s40), 1600u * 5 + 5);
  EXPECT_EQ(model_param_count("linear", {}, s40c7), 1600u * 7 + 7);
  EXPECT_EQ(model_param_count("nn1", {}, s40), 0u);
  const size_t conv1 = 16 * 25 + 16, in = 20 * 20 * 16;
  EXPECT_EQ(model_param_count("cnn", {}, s40), conv1 + in * 64 + 64 + 64 * 5 + 5);
  EXPECT_EQ(model_param_count("cnn136", {}, s40c7), conv1 + in * 136 + 136 + 136 * 7 + 7);
  EXPECT_EQ(model_param_count("caps", {}, s40), conv1 + in * 136 + 136 + 8 * 5 * 16 + 2 * 5);
  EXPECT_EQ(model_param_count("cnn-paper", {}, s40),
            (32 * 25 + 32) + (64 * 32 * 25 + 64) + (10 * 10 * 64) * 1024 + 1024 + 1024 * 5 + 5);
  // An odd side: conv1 (5x5/2, SAME) gives ceil(33/2) = 17.
  EXPECT_EQ(model_param_count("cnn", {}, ImageShape{1, 33, 5}), conv1 + 17 * 17 * 16 * 64 + 64 + 64 * 5 + 5);
  // The frame's counts are the registry's documented ones.
  EXPECT_EQ(model_param_count("caps", {}, ImageShape{}), 558258u);
  EXPECT_EQ(model_param_count("convcaps", {}, ImageShape{}), 67154u);
  EXPECT_EQ(model_param_count("cnn-paper", {}, ImageShape{}), 4252549u);
}

// A shape a model cannot take is a ShapeError naming the model and why,
// before anything is built; the command line blames the flag that set the
// shape (the protocol's --canvas), or --models where none did.
TEST(ImageShape, AShapeAModelCannotTakeIsRefusedNamingWhy) {
  EXPECT_THROW(make_model("cnn-paper", {}, 2, ImageShape{1, 3, 5}), ShapeError);
  EXPECT_THROW(check_model("convcaps", {}, ImageShape{1, 4, 5}), ShapeError);
  EXPECT_THROW(check_model("caps", {}, ImageShape{1, 32, 65}), ShapeError);
  EXPECT_THROW(check_model("linear", {}, ImageShape{1, 32, 1}), ShapeError);
  EXPECT_THROW(make_model("cnn", {}, 2, ImageShape{0, 32, 5}), ShapeError);
  EXPECT_NO_THROW(check_model("cnn-paper", {}, ImageShape{1, 4, 5}));
  EXPECT_NO_THROW(check_model("linear", {}, ImageShape{1, 32, 100}));
  try {
    check_model("cnn-paper", {}, ImageShape{1, 3, 5});
    ADD_FAILURE() << "a 3-pixel side was taken";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(),
                 "model 'cnn-paper' cannot take images of 1 x 3 x 3, 5 classes: pool2 (2x2) needs 2 x 2 pixels, conv2 "
                 "gives 1");
  }
  // The window's own fault stays --caps-k's: the shape takes a 3 x 3 window, not a 9 x 9.
  EXPECT_THROW(check_model("convcaps", {{"caps-k", "9"}}, ImageShape{1, 40, 5}), ModelOptionError);
  try {
    check_models("--models", "cnn,cnn-paper", {"cnn", "cnn-paper"}, {}, DataShape{{1, 3, 5}, "--canvas", "3"});
    ADD_FAILURE() << "a 3-pixel canvas was taken";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--canvas '3': model 'cnn-paper' cannot take images of 1 x 3 x 3", 0), 0u)
        << e.what();
  }
  try {
    check_models("--models", "cnn-paper", {"cnn-paper"}, {}, DataShape{{1, 3, 5}, "", ""});
    ADD_FAILURE() << "a 3-pixel side was taken";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--models 'cnn-paper': model 'cnn-paper' cannot take", 0), 0u) << e.what();
  }
}

// The data says its shape before it is made, and every split it makes has it.
TEST(ImageShape, TheDataSaysItsShapeAndItsSplitsHaveIt) {
  const std::pair<std::vector<std::pair<std::string, std::string>>, ImageShape> cases[] = {
      {{}, ImageShape{1, 32, 5}}, {{{"canvas", "40"}}, ImageShape{1, 40, 5}}, {{{"canvas", "33"}}, ImageShape{1, 33, 5}}};
  for (const auto& [flags, shape] : cases) {
    const DataConfig cfg = configured(flags);
    EXPECT_EQ(image_shape(cfg), shape);
    const Dataset d = make_dataset(cfg);
    for (const Split* s : {&d.train, &d.familiar, &d.heldout, &d.circle, &d.axis_sweep}) {
      ASSERT_GT(s->size(), 0);
      EXPECT_EQ(s->shape(), shape);
      EXPECT_EQ(s->images.size(), size_t(s->size()) * shape.pixels());
    }
  }
  DataConfig seed;
  EXPECT_EQ(image_shape(seed), ImageShape{});
  EXPECT_EQ(class_names(seed), (std::vector<std::string>{"cross", "L", "T", "frame", "tripod"}));
  seed.shapes = ShapeSet::asym;
  EXPECT_EQ(class_names(seed), (std::vector<std::string>{"hook", "stairs", "prongs", "chair", "helix"}));
}

// A 40-pixel canvas holds the 32-pixel frame's render at its centre, 4 pixels
// in from each edge, under any change (a shift of the same pixels), and with
// none its margin adds what the frame's edge cut off.
TEST(ImageShape, ALargerCanvasHoldsTheFramesRenderAtItsCentre) {
  std::vector<float> frame(kImagePixels), canvas(40 * 40);
  for (int cls = 0; cls < kNumClasses; ++cls)
    for (const PlaneTransform& t : {PlaneTransform{}, PlaneTransform{.tx = 3, .ty = -2},
                                    PlaneTransform::make(30, 1.2, 0.1, 1, 1)}) {
      render_clean(cls, 40, 30, t, frame.data(), ShapeSet::seed);
      render_clean(cls, 40, 30, t, canvas.data(), ShapeSet::seed, 40);
      double worst = 0, ink = 0;
      for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) {
          worst = std::max(worst, double(std::fabs(canvas[size_t((r + 4) * 40 + c + 4)] - frame[size_t(r * 32 + c)])));
          ink += frame[size_t(r * 32 + c)];
        }
      EXPECT_LT(worst, 1e-5) << cls;
      EXPECT_GT(ink, 10.0) << cls;
      if (!t.identity()) continue;
      // The margin holds what the frame's edge cut off (at some views the strokes reach it), no less.
      double canvas_ink = 0;
      for (float v : canvas) canvas_ink += v;
      EXPECT_GE(canvas_ink, ink - 1e-3) << cls;
    }
  // The frame drawn as a canvas of 32 is render_clean's own bytes.
  for (int cls = 0; cls < kNumClasses; ++cls) {
    std::vector<float> a(kImagePixels), b(kImagePixels);
    render_clean(cls, 120, 50, a.data(), ShapeSet::asym);
    render_clean(cls, 120, 50, PlaneTransform{}, b.data(), ShapeSet::asym, kImageSide);
    EXPECT_EQ(a, b) << cls;
  }
}

// The datasets too: each held-out image on a 40 canvas is, up to the pixel
// noise, its 32-canvas twin (same class, view and shift) with a 4-pixel margin.
TEST(ImageShape, ACanvasOf40IsTheFrameOf32WithAMargin) {
  const Dataset d32 = make_dataset(configured({{"test-shifts", "2:5"}}));
  const Dataset d40 = make_dataset(configured({{"test-shifts", "2:5"}, {"canvas", "40"}}));
  for (const auto& [a, b] : {std::pair{&d32.heldout, &d40.heldout}, {&d32.circle, &d40.circle}}) {
    ASSERT_EQ(a->size(), b->size());
    EXPECT_EQ(a->labels, b->labels);
    EXPECT_EQ(a->axis, b->axis);
    double ms = 0;
    for (int i = 0; i < a->size(); ++i)
      for (int r = 0; r < 32; ++r)
        for (int c = 0; c < 32; ++c) {
          const double e = a->image(i)[r * 32 + c] - b->image(i)[(r + 4) * 40 + c + 4];
          ms += e * e;
        }
    ms /= double(a->size()) * 1024;
    EXPECT_LT(ms, 2 * 0.04 * 0.04 * 1.1);  // two images' noise (std 0.04 each), less what clamping removes
    EXPECT_GT(ms, 0.5 * 0.04 * 0.04);      // their noise is their own
  }
}

// --canvas 32 is the default, byte for byte; the run records what the models read.
TEST(ImageShape, TheDefaultCanvasIsTodaysData) {
  auto bytes = [](const Dataset& d) {
    std::vector<float> all;
    for (const Split* s : {&d.train, &d.familiar, &d.heldout, &d.circle, &d.axis_sweep})
      all.insert(all.end(), s->images.begin(), s->images.end());
    return all;
  };
  const DataConfig plain = configured({}), typed = configured({{"canvas", "32"}});
  EXPECT_EQ(bytes(make_dataset(plain)), bytes(make_dataset(typed)));
  EXPECT_EQ(protocol_of(plain).axis_values(plain), protocol_of(typed).axis_values(typed));
  EXPECT_EQ(protocol_of(plain).axis_values(plain).back(), 16.0);
  const DataConfig wide = configured({{"canvas", "40"}});
  EXPECT_EQ(protocol_of(wide).axis_values(wide).back(), 20.0);
  const DataConfig odd = configured({{"canvas", "41"}});
  EXPECT_EQ(protocol_of(odd).axis_values(odd).back(), 20.0);  // the limit is 20.5: the last whole step below it
}

// The hostile inputs, each one line naming the flag, exit 2, before any work.
TEST(ImageShape, BadCanvasesAndShiftsAreOneLineNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--split translation --canvas 31", "--canvas '31': smaller than the object's 32 x 32 frame"},
      {"--split translation --canvas 0", "--canvas '0'"},
      {"--split translation --canvas 129", "--canvas '129': too large (a canvas is 32 to 128 pixels a side)"},
      {"--split translation --canvas 1e9", "--canvas '1e9'"},
      {"--split translation --canvas forty", "--canvas 'forty'"},
      {"--canvas 40", "--canvas '40': applies with --split translation only"},
      {"--split rotation --canvas 40", "--canvas '40': applies with --split translation only"},
      {"--split translation --test-shifts 14:17", "--test-shifts '14:17'"},
      {"--split translation --canvas 40 --test-shifts 18:21", "--test-shifts '18:21'"},
      {"--split translation --canvas 40 --train-shift 21", "--train-shift '21'"},
  };
  for (const auto& [args, named] : cases) {
    SCOPED_TRACE(args);
    const test::Outcome o = test::run(std::string("run --quiet --n-epochs 1 ") + args);
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(named), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "");
  }
  // What a larger canvas allows: shifts up to half its side.
  EXPECT_NO_THROW(configured({{"canvas", "40"}, {"test-shifts", "18:20"}, {"train-shift", "17"}}));
}

// A translation run on a 40-pixel canvas trains every registered model for an
// epoch, through the registry (no model named by the harness), and its JSON
// records the canvas and the images' shape.
TEST(ImageShape, ATranslationRunOnALargerCanvasTrainsEveryModel) {
  std::string models;
  for (const std::string& m : test::registered_models(/*trained=*/false)) models += (models.empty() ? "" : ",") + m;
  const std::string json = vg::test::temp_dir() + "viewgap_canvas." + std::to_string(getpid()) + ".json";
  const test::Outcome o = test::run(
      "run --split translation --canvas 40 --test-shifts 6:18 --n-per-combo 1 --n-eval-per-combo 1 --n-epochs 1 "
      "--n-train-views 2 --train-azimuths 0:90 --n-elev 1 --elevations 30:30 --batch-size 5 --threads 2 --quiet "
      "--models " +
      models + " --out-json " + json);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("40 x 40 canvas"), std::string::npos) << o.out;
  const nlohmann::json j = nlohmann::json::parse(test::slurp(json));
  EXPECT_EQ(j["config"]["data"]["canvas"], 40);
  EXPECT_EQ(j["dataset"]["image"], (nlohmann::json{{"channels", 1}, {"side", 40}, {"classes", 5}}));
  EXPECT_EQ(j["dataset"]["classes"].size(), 5u);
  EXPECT_EQ(j["dataset"]["axis"]["values"].back(), 20.0);
  ASSERT_EQ(j["models"].size(), test::registered_models(false).size());
  for (const auto& m : j["models"]) {
    SCOPED_TRACE(m["name"].get<std::string>());
    EXPECT_TRUE(m["familiar"].is_number());
    EXPECT_EQ(m["heldout_per_class"].size(), 5u);
    EXPECT_EQ(m["axis_accuracy"].size(), 21u);
    EXPECT_EQ(m["n_params"], model_param_count(m["name"].get<std::string>(), {}, ImageShape{1, 40, 5}));
  }
  std::filesystem::remove(json);
  // The frame's run records its shape too.
  const test::Outcome f = test::run("run --split translation --n-epochs 1 --models linear --quiet --out-json " + json);
  ASSERT_EQ(f.code, 0) << f.err;
  const nlohmann::json k = nlohmann::json::parse(test::slurp(json));
  EXPECT_EQ(k["config"]["data"]["canvas"], 32);
  EXPECT_EQ(k["dataset"]["image"]["side"], 32);
  std::filesystem::remove(json);
}

// A translation sweep made before --canvas keeps its configuration hash (the
// flag is hashed away from its default only: this hash is the one the sweep
// had then); a canvas of 40 is another configuration.
TEST(ImageShape, ATranslationSweepKeepsItsHashAtTheDefaultCanvas) {
  const std::string dir = vg::test::temp_dir() + "viewgap_canvas_sweep." + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  auto hash_of = [&](const std::string& extra, const std::string& out) {
    const test::Outcome o =
        test::run("sweep --out " + out + " --split translation --seeds 0:1 --gaps 0,4 --models nn1 --quiet" + extra);
    EXPECT_EQ(o.code, 0) << o.err;
    return nlohmann::json::parse(test::slurp(out + "/meta.json"));
  };
  const nlohmann::json plain = hash_of("", dir + "/a"), wide = hash_of(" --canvas 40", dir + "/b");
  EXPECT_EQ(plain["config_hash"], "8e27eca3fb7ff068");
  EXPECT_FALSE(plain["config"]["run_flags"].contains("canvas"));
  EXPECT_EQ(wide["config"]["run_flags"]["canvas"], "40");
  EXPECT_NE(wide["config_hash"], plain["config_hash"]);
  std::filesystem::remove_all(dir);
}

// The registry-wide gradient check (tests/test_models.cpp) on a 36-pixel
// canvas with six classes: each trained model's backward against central
// differences of its training loss, built with its entry's
// exact_gradient_options. (At 40 the small convcaps's class activations
// start saturated at 1 at this seed, where no gradient reaches its betas;
// the forward/backward test above trains it at 40.)
TEST(ImageShape, EveryRegisteredModelsGradientHoldsOnALargerCanvas) {
  const int B = 2;
  const ImageShape shape{1, 36, 6};
  std::vector<int> y;
  const std::vector<float> x = images_of(shape, B, &y);
  for (const std::string& name : test::registered_models(/*trained=*/true)) {
    SCOPED_TRACE(name);
    ModelOptions opts;
    for (const auto& [k, v] : find_model(name)->exact_gradient_options) opts[k] = v;
    std::unique_ptr<Model> m = make_model(name, opts, B, shape);
    m->init(13);
    test::move_off_relu_kink(*m);
    m->set_training_labels(y.data());
    auto loss = [&](float* d) {
      std::vector<float> scratch(size_t(B) * shape.classes);
      return loss_forward_backward(m->loss(), d ? d : scratch.data(), m->forward(x.data(), B), y.data(), B,
                                   shape.classes, 0.5, 0) +
             m->model_loss();
    };
    std::vector<float> d(size_t(B) * shape.classes);
    loss(d.data());
    m->backward(d.data(), B);
    const std::vector<float> grad = m->params().grads();
    test::check_tensor_gradients(m->params(), grad, [&] { return loss(nullptr); }, 1e-3, "");
    m->set_training_labels(nullptr);
  }
}

}  // namespace
}  // namespace vg
