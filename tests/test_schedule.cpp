// Budgets and schedules (harness/schedule.h, --max-steps, the spread margin's
// official schedule, whose formula test_loss.cpp checks): each rate schedule's
// value at known steps against its formula, --max-steps ending training at
// exactly its step, what the run JSON records, bad values refused in one line,
// and the defaults leaving every run as it was (its fingerprint hashes every
// step's loss and every accuracy).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>

#include "harness/schedule.h"
#include "tests/test_util.h"

namespace vg {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

LrSchedule parsed(const std::string& v) {
  LrSchedule s;
  EXPECT_EQ(parse_lr_schedule(v, &s), "") << v;
  return s;
}

TEST(LrSchedule, ConstantIsExactlyOneAtEveryStep) {
  const LrSchedule s = parsed("constant");
  for (long step : {0L, 1L, 20000L, 1L << 40}) EXPECT_EQ(lr_factor(s, step, 100), 1.0);
}

// capsule_em's recipe: 0.96 per 20,000 steps, continuously (staircase off).
// pow is correctly rounded to within an ulp or two: 4 eps relative.
TEST(LrSchedule, ExponentialDecaysByRatePerStepsSmoothly) {
  const LrSchedule s = parsed("exp:0.96:20000");
  EXPECT_EQ(lr_factor(s, 0, 1), 1.0);
  EXPECT_NEAR(lr_factor(s, 20000, 1), 0.96, 4 * kEps);
  EXPECT_NEAR(lr_factor(s, 10000, 1), std::sqrt(0.96), 4 * kEps);
  EXPECT_NEAR(lr_factor(s, 400000, 1), std::pow(0.96, 20), 4 * kEps);
  EXPECT_LT(lr_factor(s, 1, 1), 1.0);  // every step lowers it
}

TEST(LrSchedule, StaircaseDropsByRateEverySteps) {
  const LrSchedule s = parsed("exp-staircase:0.5:10");
  EXPECT_EQ(lr_factor(s, 0, 1), 1.0);
  EXPECT_EQ(lr_factor(s, 9, 1), 1.0);
  EXPECT_EQ(lr_factor(s, 10, 1), 0.5);  // powers of two: exact
  EXPECT_EQ(lr_factor(s, 19, 1), 0.5);
  EXPECT_EQ(lr_factor(s, 20, 1), 0.25);
}

// (1 + cos(pi t / T)) / 2 from 1 to FLOOR: cos is within an ulp, so a few eps absolute.
TEST(LrSchedule, CosineDecaysToItsFloorOverTheTrainingsSteps) {
  const LrSchedule s = parsed("cosine");
  EXPECT_EQ(lr_factor(s, 0, 100), 1.0);
  EXPECT_NEAR(lr_factor(s, 50, 100), 0.5, 4 * kEps);
  EXPECT_NEAR(lr_factor(s, 25, 100), (1 + std::cos(std::numbers::pi / 4)) / 2, 4 * kEps);
  EXPECT_NEAR(lr_factor(s, 100, 100), 0.0, 4 * kEps);  // one step after the last
  EXPECT_GT(lr_factor(s, 99, 100), 0.0);               // the last step still moves
  const LrSchedule floor = parsed("cosine:0.1");
  EXPECT_NEAR(lr_factor(floor, 0, 100), 1.0, 4 * kEps);
  EXPECT_NEAR(lr_factor(floor, 50, 100), 0.55, 4 * kEps);
  EXPECT_NEAR(lr_factor(floor, 100, 100), 0.1, 4 * kEps);
}

TEST(LrSchedule, TextRoundTripsAndBadValuesSayWhy) {
  for (const char* v : {"constant", "exp:0.96:20000", "exp-staircase:0.5:10", "cosine", "cosine:0.1"}) {
    LrSchedule s, again;
    ASSERT_EQ(parse_lr_schedule(v, &s), "") << v;
    EXPECT_EQ(lr_schedule_text(s), v);
    ASSERT_EQ(parse_lr_schedule(lr_schedule_text(s), &again), "");
    EXPECT_EQ(lr_factor(again, 12345, 20000), lr_factor(s, 12345, 20000)) << v;
  }
  for (const char* v : {"", "linear", "exp", "exp:0.96", "exp:0:10", "exp:1.5:10", "exp:0.9:0", "exp:0.9:1.5",
                        "exp:nan:10", "exp-staircase:0.9:-1", "cosine:1", "cosine:-0.1", "cosine:x", "Cosine"}) {
    LrSchedule s;
    EXPECT_NE(parse_lr_schedule(v, &s), "") << v;
  }
}

// ---- through the command line ----

using test::Outcome;

// 30 training images, 3 steps an epoch, 2 epochs.
const std::string kTiny =
    "run --n-epochs 2 --n-per-combo 1 --batch-size 10 --n-elev 1 --elevations 30:30 --n-eval-per-combo 1 --quiet";

std::string scratch(const std::string& name) {
  const std::string d = test::temp_dir() + "viewgap_schedule." + std::to_string(getpid()) + "/";
  std::filesystem::create_directories(d);
  return d + name;
}

nlohmann::json run_json(const std::string& args) {
  const std::string json = scratch("run.json");
  const Outcome o = test::run(kTiny + " " + args + " --out-json " + json);
  EXPECT_EQ(o.code, 0) << args << "\n" << o.err;
  return nlohmann::json::parse(test::slurp(json));
}

TEST(MaxSteps, EndsTrainingAtExactlyItsStepMidEpoch) {
  const nlohmann::json full = run_json("--models cnn,caps");
  const nlohmann::json cut = run_json("--models cnn,caps --max-steps 4");
  EXPECT_EQ(cut["config"]["max_steps"], 4);
  EXPECT_FALSE(full["config"].contains("max_steps"));
  for (size_t k = 0; k < 2; ++k) {
    const nlohmann::json &m = cut["models"][k], &f = full["models"][k];
    EXPECT_EQ(m["steps"], 4);
    ASSERT_EQ(m["step_loss"].size(), 4u);
    EXPECT_EQ(m["history"].size(), 2u);  // the second epoch, of one step, evaluated too
    EXPECT_FALSE(m["stopped_early"].get<bool>());
    // A budget does not change the steps before it (at a constant rate, xent).
    for (size_t s = 0; s < 4; ++s) EXPECT_EQ(m["step_loss"][s], f["step_loss"][s]) << m["name"] << " step " << s;
  }
  // A budget at the epochs' end is theirs: the same run.
  EXPECT_EQ(run_json("--models cnn --max-steps 6")["fingerprint"], run_json("--models cnn")["fingerprint"]);
}

TEST(LrSchedule, DefaultsLeaveTheRunAsItWasAndASchedulesActs) {
  const nlohmann::json plain = run_json("--models caps,cnn");
  EXPECT_FALSE(plain["config"].contains("lr_schedule"));
  // constant, and a decay by 1 (pow(1, x) is 1 exactly): the same bits.
  EXPECT_EQ(run_json("--models caps,cnn --lr-schedule constant")["fingerprint"], plain["fingerprint"]);
  EXPECT_EQ(run_json("--models caps,cnn --lr-schedule exp:1:5")["fingerprint"], plain["fingerprint"]);
  const nlohmann::json cosine = run_json("--models caps,cnn --lr-schedule cosine:0.25 --model-lr cnn=1e-3");
  EXPECT_EQ(cosine["config"]["lr_schedule"], "cosine:0.25");
  EXPECT_NE(cosine["fingerprint"], plain["fingerprint"]);
  // The first step is at the base rate: the first two losses are the plain run's, the third is not.
  EXPECT_EQ(cosine["models"][0]["step_loss"][0], plain["models"][0]["step_loss"][0]);
  EXPECT_EQ(cosine["models"][0]["step_loss"][1], plain["models"][0]["step_loss"][1]);
  EXPECT_NE(cosine["models"][0]["step_loss"][2], plain["models"][0]["step_loss"][2]);
  // The spread margin's schedules: linear is today's, official acts.
  const nlohmann::json spread = run_json("--models caps --loss spread");
  EXPECT_EQ(run_json("--models caps --loss spread --spread-margin-schedule linear")["fingerprint"],
            spread["fingerprint"]);
  const nlohmann::json official = run_json("--models caps --loss spread --spread-margin-schedule official");
  EXPECT_EQ(official["models"][0]["options"]["spread-margin-schedule"], "official");
  EXPECT_NE(official["models"][0]["step_loss"][0], spread["models"][0]["step_loss"][0]);
}

// Exit 2, one line naming the flag and its value, nothing written.
TEST(LrSchedule, BadValuesAndContradictionsExit2InOneLine) {
  const std::string json = scratch("never.json");
  const std::string nn1 = "run --quiet --models nn1";  // kTiny's training flags would be refused first
  const struct {
    std::string command;
    const char* said;
  } bad[] = {
      {kTiny + " --lr-schedule exp:1.5:10", "--lr-schedule 'exp:1.5:10': RATE must be > 0 and <= 1"},
      {kTiny + " --lr-schedule exp:0.96", "--lr-schedule 'exp:0.96': expected constant"},
      {kTiny + " --lr-schedule exp-staircase:0.5:0", "--lr-schedule 'exp-staircase:0.5:0': STEPS must be between 1"},
      {kTiny + " --lr-schedule cosine:1", "--lr-schedule 'cosine:1': the floor after 'cosine:' must be below 1"},
      {kTiny + " --lr-schedule linear", "--lr-schedule 'linear': expected constant"},
      {kTiny + " --max-steps 0", "--max-steps '0': must be between 1"},
      {kTiny + " --max-steps 7", "--max-steps '7': never reached: --n-epochs 2 ends training after 6 steps"},
      {nn1 + " --lr-schedule cosine", "--lr-schedule 'cosine': no model in --models 'nn1' trains"},
      {nn1 + " --max-steps 3", "--max-steps '3': no model in --models 'nn1' trains"},
      {kTiny + " --models caps --spread-margin-schedule official",
       "--spread-margin-schedule 'official': --loss 'xent' has no margin"},
      {kTiny + " --models caps --loss spread --spread-margin-schedule sigmoid",
       "--spread-margin-schedule 'sigmoid': expected one of linear, official"},
      {kTiny + " --models convcaps --spread-margin 0.2:0.9 --spread-margin-schedule official",
       "--spread-margin '0.2:0.9': --spread-margin-schedule 'official' sets the margin"},
  };
  for (const auto& b : bad) {
    const Outcome o = test::run(b.command + " --out-json " + json);
    EXPECT_EQ(o.code, 2) << b.command << "\n" << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << b.command << "\n" << o.err;
    EXPECT_NE(o.err.find(b.said), std::string::npos) << b.command << "\n" << o.err;
    EXPECT_FALSE(std::filesystem::exists(json)) << b.command;
  }
}

}  // namespace
}  // namespace vg
