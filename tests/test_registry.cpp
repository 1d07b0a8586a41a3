// The model registry: every model builds from its name and options, counts its
// parameters without building, and names the flag and value of a bad option.
#include <gtest/gtest.h>

#include <set>

#include "models/capsnet.h"
#include "models/convcaps.h"
#include "models/registry.h"

namespace vg {
namespace {

TEST(Registry, EveryModelBuildsAndCountsItsParametersWithoutBuilding) {
  const std::pair<const char*, size_t> expected[] = {{"caps", 558258}, {"cnn", 262949}, {"cnn136", 558293}};
  for (const auto& [name, n] : expected) {
    ASSERT_NE(find_model(name), nullptr) << name;
    EXPECT_EQ(model_param_count(name, {}), n) << name;
    const auto m = make_model(name, {}, 4);
    EXPECT_EQ(m->params().count(), n) << name;
    EXPECT_EQ(m->name(), name);
    EXPECT_FALSE(m->layers(32).empty());
    for (const LayerInfo& l : m->layers(32)) EXPECT_GT(l.forward_flops, 0) << name << " " << l.name;
  }
  // The yardsticks: nn1 holds no parameters (it keeps the training images), linear 1024 x 5 + 5 (raw 32 x 32 pixels).
  EXPECT_EQ(model_param_count("nn1", {}), 0u);
  EXPECT_EQ(make_model("nn1", {}, 4)->params().count(), 0u);
  EXPECT_EQ(model_param_count("linear", {}), 1024u * 5 + 5);
  EXPECT_EQ(make_model("linear", {}, 4)->params().count(), 1024u * 5 + 5);
  // --cnn-hidden sets the width of "cnn" only.
  EXPECT_EQ(model_param_count("cnn", {{"cnn-hidden", "136"}}), 558293u);
  EXPECT_EQ(model_param_count("cnn64", {{"cnn-hidden", "136"}}), 262949u);
  // A width no machine here could hold is counted, not allocated.
  EXPECT_EQ(model_param_count("cnn65536", {}), 16u * 25 + 16 + 4096ull * 65536 + 65536 + 65536ull * 5 + 5);
}

// Every registered model (a numbered one by its bare name) with one and two
// input channels: it builds, counts as many parameters built as unbuilt, answers
// to its name and lists its layers with their work.
TEST(Registry, EveryRegisteredModelCountsWhatItBuilds) {
  for (const ModelEntry& e : model_registry()) {
    std::string name = e.name;
    if (name.size() > 1 && name.back() == 'N') name.pop_back();
    for (int channels : {1, 2}) {
      SCOPED_TRACE(name + ", " + std::to_string(channels) + " channel(s)");
      ASSERT_EQ(find_model(name), &e);
      const auto m = make_model(name, {}, 4, channels);
      EXPECT_EQ(m->params().count(), model_param_count(name, {}, channels));
      EXPECT_EQ(m->name(), name);
      if (e.fit_in_one_pass) continue;
      EXPECT_FALSE(m->layers(32).empty());
      for (const LayerInfo& l : m->layers(32)) EXPECT_GT(l.forward_flops, 0) << l.name;
    }
  }
}

TEST(Registry, ConvAndPixelModelsTakeTheirInputChannelsFromTheData) {
  // smallNORB's two cameras: conv1 (and the pixel baselines, and dr's decoder,
  // which reconstructs every channel) grow by the second channel's weights.
  const std::pair<const char*, size_t> grows[] = {
      {"caps", 16 * 25}, {"cnn", 16 * 25}, {"cnn-paper", 32 * 25}, {"linear", 1024 * 5}, {"nn1", 0},
      {"dr", 16 * 25 + 512 * 1024 + 1024}};  // decoder fc3: 512 -> 2 x 1024
  for (const auto& [name, extra] : grows) {
    EXPECT_EQ(model_param_count(name, {}, 2), model_param_count(name, {}, 1) + extra) << name;
    const auto m = make_model(name, {}, 4, 2);
    EXPECT_EQ(m->params().count(), model_param_count(name, {}, 2)) << name;
  }
  EXPECT_THROW(make_model("caps", {}, 4, 0), std::invalid_argument);
}

TEST(Registry, UnknownModelsListTheValidNames) {
  for (const char* bad : {"caps2", "cnn0", "cnn65537", "cnnx", "mlp", "", "cnn-", "cnn-paper2", "cnnpaper"}) {
    try {
      check_model(bad, {});
      ADD_FAILURE() << bad;
    } catch (const ModelOptionError&) {
      ADD_FAILURE() << bad << ": not an option error";
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      // cnnN with N out of range says the range; any other name lists the valid ones.
      const std::string b = bad;
      const bool width = b == "cnn0" || b == "cnn65537";
      EXPECT_NE(msg.find(width ? "a whole number from 1 to 65536" : "(expected " + model_names() + ")"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(model_names(), "caps, cnn, cnnN, cnn-paper, nn1, linear, dr, convcaps");
}

// A memory error blames the flag that sets the model's size: --cnn-hidden for
// "cnn", the name itself for "cnn136" and "caps".
TEST(Registry, SizeOptionIsTheFlagThatSetsTheModelsSize) {
  EXPECT_STREQ(size_option("cnn"), "cnn-hidden");
  EXPECT_EQ(size_option("cnn136"), nullptr);
  EXPECT_EQ(size_option("cnn1"), nullptr);
  EXPECT_EQ(size_option("caps"), nullptr);
  EXPECT_EQ(size_option("mlp"), nullptr);
}

// The harness's defaults (--models, the sweep's --reference, profile's --model)
// come from here, so they must name registered models.
TEST(Registry, DefaultModelsAreRegistered) {
  ASSERT_FALSE(default_models().empty());
  for (const std::string& m : default_models()) EXPECT_NE(find_model(m), nullptr) << m;
}

TEST(Registry, OptionsReachTheModel) {
  const auto m = make_model("caps", {{"loss", "spread"}, {"spread-margin", "0.1:0.8"}, {"em-iters", "2"},
                                     {"em-grad", "full"}, {"em-cost-norm", "on"}, {"em-min-var", "1e-4"},
                                     {"em-lambda-schedule", "official"}}, 4);
  EXPECT_EQ(m->loss().kind, LossKind::spread);
  EXPECT_FLOAT_EQ(m->loss().spread_from, 0.1f);
  EXPECT_FLOAT_EQ(m->loss().spread_to, 0.8f);
  const auto& caps = dynamic_cast<const CapsNet&>(*m);
  EXPECT_EQ(caps.config().em.iters, 2);
  EXPECT_EQ(caps.config().em.grad, EmGrad::full);
  EXPECT_TRUE(caps.config().em.cost_norm);
  EXPECT_FLOAT_EQ(caps.config().em.sigma2_min, 1e-4f);
  EXPECT_TRUE(caps.config().em.lambda_schedule);
  EXPECT_FLOAT_EQ(caps.config().em.lambda, 0.01f);  // the official final lambda
  const auto c2 = make_model("caps", {{"em-lambda-schedule", "official:0.5"}}, 4);
  EXPECT_FLOAT_EQ(dynamic_cast<const CapsNet&>(*c2).config().em.lambda, 0.5f);
  // The CNN keeps softmax cross-entropy whatever --loss says for the capsules.
  EXPECT_EQ(make_model("cnn", {{"loss", "spread"}}, 4)->loss().kind, LossKind::xent);
}

// convcaps trains the paper's way unless told otherwise (ModelEntry::defaults);
// an option the user sets wins, even at the registry-wide default, and a model
// without its own default keeps the registry-wide one.
TEST(Registry, AModelsOwnDefaultsGiveWayToWhatTheUserSet) {
  const ModelOptions paper = model_options_of("convcaps", {});
  EXPECT_EQ(paper.at("loss"), "spread");
  EXPECT_EQ(paper.at("em-grad"), "full");
  EXPECT_EQ(paper.at("em-lambda-schedule"), "official");
  EXPECT_EQ(paper.at("caps-a"), "64");            // none of its own: the registry-wide one
  EXPECT_EQ(paper.count("cnn-hidden"), 0u);       // only the options it reads
  const ModelOptions set = model_options_of("convcaps", {{"loss", "xent"}, {"em-grad", "stopgrad"}});
  EXPECT_EQ(set.at("loss"), "xent");
  EXPECT_EQ(set.at("em-grad"), "stopgrad");
  EXPECT_EQ(set.at("em-lambda-schedule"), "official");
  EXPECT_EQ(model_options_of("caps", {}).at("loss"), "xent");  // the seed's recipe
  EXPECT_EQ(model_options_of("caps", {}).at("em-grad"), "stopgrad");

  // What reaches the model built from nothing.
  const auto m = make_model("convcaps", {{"caps-a", "4"}, {"caps-b", "2"}, {"caps-c", "2"}, {"caps-d", "2"}}, 2);
  const auto& c = dynamic_cast<const ConvCapsNet&>(*m).config();
  EXPECT_EQ(m->loss().kind, LossKind::spread);
  EXPECT_EQ(c.em.grad, EmGrad::full);
  EXPECT_TRUE(c.em.lambda_schedule);
  EXPECT_FLOAT_EQ(c.em.lambda, 0.01f);
  const auto x = make_model("convcaps", {{"caps-a", "4"}, {"loss", "xent"}, {"em-lambda-schedule", "fixed"}}, 2);
  EXPECT_EQ(x->loss().kind, LossKind::xent);
  EXPECT_FALSE(dynamic_cast<const ConvCapsNet&>(*x).config().em.lambda_schedule);
  // --em-lambda does nothing under the schedule convcaps runs by default: the reason names the default.
  EXPECT_NE(option_ignored("convcaps", "em-lambda", {{"em-lambda", "2"}}).find("by default"), std::string::npos);
  EXPECT_EQ(option_ignored("convcaps", "em-lambda", {{"em-lambda", "2"}, {"em-lambda-schedule", "fixed"}}), "");
  EXPECT_EQ(option_ignored("caps", "em-lambda", {{"em-lambda", "2"}}), "");
}

// An option several models read is one declaration (one flag, one default),
// and each name is one option.
TEST(Registry, EachOptionIsDeclaredOnce) {
  std::set<std::string> names;
  for (const ModelOption* o : model_options()) EXPECT_TRUE(names.insert(o->name).second) << o->name;
  for (const ModelEntry& e : model_registry())
    for (const ModelOption* o : e.options) EXPECT_EQ(find_option(o->name), o) << e.name << " " << o->name;
  EXPECT_EQ(find_option("lr"), nullptr);
}

// A sweep's hash records these options at their defaults whatever its models
// (sweep format 3's); a new one would move the hash of every sweep made
// before it (harness/sweep_plan.cpp).
TEST(Registry, TheOptionsHashedAtTheirDefaultAlwaysAreFormat3s) {
  std::set<std::string> always, never;
  for (const ModelOption* o : model_options()) {
    if (o->hashed_at_default == HashedAtDefault::always) always.insert(o->name);
    if (o->hashed_at_default == HashedAtDefault::never) never.insert(o->name);
  }
  EXPECT_EQ(always, (std::set<std::string>{"cnn-hidden", "em-iters", "em-lambda", "em-lambda-schedule", "em-eps",
                                           "em-min-var", "em-cost-norm", "em-grad", "loss", "spread-margin",
                                           "dr-iters", "recon-weight", "dr-grad"}));
  EXPECT_EQ(never, (std::set<std::string>{"dr-init-std", "spread-margin-schedule"}));
}

// A configuration is parsed once (models/registry.h: model_plan): checking,
// sizing and building a model share the one plan; the options resolve first,
// so a value the model would take anyway is the same configuration.
TEST(Registry, AConfigurationIsParsedOnce) {
  const auto plan = model_plan("caps", {});
  EXPECT_EQ(model_plan("caps", {{"loss", "xent"}}).get(), plan.get());
  EXPECT_EQ(model_plan("caps", {{"cnn-hidden", "8"}}).get(), plan.get());  // caps reads no --cnn-hidden
  EXPECT_NE(model_plan("caps", {{"loss", "spread"}}).get(), plan.get());
  EXPECT_NE(model_plan("caps", {}, ImageShape{.channels = 2}).get(), plan.get());
  EXPECT_NE(model_plan("convcaps", {{"loss", "xent"}}).get(), model_plan("convcaps", {}).get());  // its own default is spread
  EXPECT_EQ(plan->param_count(), model_param_count("caps", {}));
}

TEST(Registry, BadOptionValuesNameTheFlagAndTheValue) {
  const std::pair<const char*, const char*> bad[] = {
      {"em-iters", "0"},          {"em-iters", "3.5"},        {"em-lambda", "0"},
      {"em-lambda", "1e-50"},     {"em-eps", "-1"},           {"em-min-var", "0"},
      {"em-grad", "half"},        {"em-cost-norm", "yes"},    {"loss", "hinge"},
      {"spread-margin", "0.9:0.2"}, {"spread-margin", "0.2:1.5"}, {"spread-margin", "0.5"},
      {"em-lambda-schedule", "official:0"}, {"em-lambda-schedule", "official:-1"},
      {"em-lambda-schedule", "linear"}, {"em-iters", " 3"},
  };
  for (const auto& [flag, value] : bad) {
    try {
      check_model("caps", {{flag, value}});
      ADD_FAILURE() << flag << " " << value;
    } catch (const ModelOptionError& e) {
      EXPECT_EQ(e.flag, flag);
      EXPECT_EQ(e.value, value);
      EXPECT_NE(std::string(e.what()).find(std::string("--") + flag + " '" + value + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(check_model("cnn", {{"cnn-hidden", "65537"}}), ModelOptionError);
}

}  // namespace
}  // namespace vg
