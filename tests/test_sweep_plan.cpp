// Sweep planning, called directly: which cells a sweep's flags make, in which
// order, the configuration hash that names the sweep, and the shards.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/toys.h"
#include "harness/sweep_plan.h"
#include "harness/sweep_resume.h"

namespace vg {
namespace {

// A sweep's flags as `viewgap sweep` starts them (its training range is 0:60).
SweepFlags sweep_flags(const std::string& seeds, const std::string& gaps) {
  SweepFlags f;
  f.run.train_az = sweep_run_defaults().train_az;
  f.seeds = seeds;
  f.gaps = gaps;
  f.jobs = "1";
  f.out = "unused";
  return f;
}

TEST(SweepPlan, CellsAreGridPointsTimesGapsTimesSeedsInThatOrder) {
  SweepFlags f = sweep_flags("3,5", "0,60");
  f.grid = {"lr=1e-3,2e-3"};
  const SweepPlan p = plan_sweep(f);
  ASSERT_EQ(p.cells.size(), 2u * 2u * 2u);
  size_t i = 0;
  for (const char* grid : {"lr=1e-3", "lr=2e-3"})
    for (double gap : {0.0, 60.0})
      for (uint64_t seed : {3u, 5u}) {
        const SweepCell& c = p.cells[i];
        EXPECT_EQ(c.id, int(i));
        EXPECT_EQ(c.grid, grid);
        EXPECT_EQ(c.gap, gap);
        EXPECT_EQ(c.seed, seed);
        EXPECT_EQ(c.opt.train.seed, seed);
        // The held-out window starts `gap` degrees after the training range (0:60) ends.
        EXPECT_EQ(c.opt.data.test_azimuths.from, 60 + gap);
        EXPECT_EQ(c.opt.data.test_azimuths.to, 60 + gap + 60);
        ++i;
      }
  EXPECT_FLOAT_EQ(p.cells[4].opt.train.lr, 2e-3f);
  EXPECT_EQ(p.models, (std::vector<std::string>{"caps", "cnn"}));
  EXPECT_EQ(p.jobs, 1);
  EXPECT_EQ(p.shards, 1);
}

// The hash names a sweep's directory for --resume and merge: a sweep made
// before must keep it (this is `sweep --seeds 0:1 --gaps 0,60 --n-epochs 2`).
// An option typed at its registry-wide default still overrides a model's own
// default, which its value cannot tell: the plan records it (only where a
// model of the sweep has its own default for it, so other sweeps keep their
// hash), and the flags a resumed sweep reads back have it typed again.
TEST(SweepPlan, OptionsTypedAtTheirDefaultAreRecordedWhereAModelHasItsOwn) {
  SweepFlags f = sweep_flags("0", "0");
  f.run.models = "caps,convcaps";
  const SweepPlan untyped = plan_sweep(f);
  EXPECT_FALSE(untyped.config.contains("typed_at_default"));
  EXPECT_EQ(untyped.cells.front().opt.train.model.count("loss"), 0u);  // convcaps takes its own
  f.run.typed.insert("loss");  // --loss xent: the registry-wide value, typed
  const SweepPlan typed = plan_sweep(f);
  EXPECT_EQ(typed.config.at("typed_at_default"), nlohmann::json::array({"loss"}));
  EXPECT_EQ(typed.cells.front().opt.train.model.at("loss"), "xent");
  EXPECT_NE(config_hash(typed.config), config_hash(untyped.config));
  SweepFlags back = sweep_flags_of(typed.config);
  EXPECT_EQ(back.run.typed.count("loss"), 1u);
  back.jobs = f.jobs;
  back.out = f.out;
  EXPECT_EQ(config_hash(plan_sweep(back).config), config_hash(typed.config));
  EXPECT_EQ(plan_sweep(back).cells.front().opt.train.model.at("loss"), "xent");
  // No model of the sweep has a default of its own: the value says it all.
  f.run.models = "caps,cnn";
  EXPECT_FALSE(plan_sweep(f).config.contains("typed_at_default"));
}

// Options typed at their defaults are recorded in the registry's order of
// options (models/registry.h: model_options), so that order is part of the
// hash: this is `sweep --models caps,cnn,convcaps,dr,cnn-paper,nn1,linear,cnn136
// --seeds 0:1 --n-epochs 1 --loss xent --em-grad stopgrad --em-lambda-schedule
// fixed`, every model and every option convcaps has a default of its own for.
TEST(SweepPlan, ConfigHashOfOptionsTypedAtTheirDefaultIsUnchanged) {
  SweepFlags f = sweep_flags("0:1", SweepFlags{}.gaps);
  f.run.models = "caps,cnn,convcaps,dr,cnn-paper,nn1,linear,cnn136";
  f.run.n_epochs = "1";
  f.run.typed.insert({"loss", "em-grad", "em-lambda-schedule"});
  const SweepPlan p = plan_sweep(f);
  EXPECT_EQ(p.config.at("typed_at_default"), nlohmann::json::array({"em-lambda-schedule", "em-grad", "loss"}));
  EXPECT_EQ(config_hash(p.config), "c59a813495b090f8");
}

TEST(SweepPlan, ConfigHashOfAKnownSweepIsUnchanged) {
  SweepFlags f = sweep_flags("0:1", "0,60");
  f.run.n_epochs = "2";
  const SweepPlan p = plan_sweep(f);
  EXPECT_EQ(config_hash(p.config), "d1ea28652ce14a9d");
  // Neither --jobs nor --out defines the results.
  f.jobs = "2";
  f.out = "elsewhere";
  EXPECT_EQ(config_hash(plan_sweep(f).config), "d1ea28652ce14a9d");
  f.run.lr = "1e-3";
  EXPECT_NE(config_hash(plan_sweep(f).config), "d1ea28652ce14a9d");
}

// A source that draws its data hashes its generator's version: a toys sweep
// made before the toys became one fixed world (or on another generator) has
// another hash, so --resume and merge refuse to mix its cells with these. A
// source of files has none, and its sweeps keep their hash.
TEST(SweepPlan, ADrawnSourceHashesItsGeneratorsVersion) {
  SweepFlags f;
  f.run = sweep_run_defaults();  // as `viewgap sweep` starts them
  f.run.data = "toys";
  f.seeds = "0:1";
  f.jobs = "1";
  f.out = "unused";
  const SweepPlan p = plan_sweep(f);
  ASSERT_TRUE(p.config.contains("source_version"));
  EXPECT_EQ(p.config.at("source_version").get<int>(), kToyGeneratorVersion);
  nlohmann::json older = p.config;
  older.erase("source_version");
  EXPECT_NE(config_hash(older), config_hash(p.config));
  EXPECT_FALSE(plan_sweep(sweep_flags("0:1", "0,60")).config.contains("source_version"));
}

// The toys' defaults moved to the calibrated setting (wide variety, rig
// lights): hashed, so a default sweep now never resumes or merges with one
// made before; the toys' first setting, typed, leaves the flags out of the
// hash, so those sweeps keep theirs.
TEST(SweepPlan, AMovedDefaultHashesApartFromTheValueItsSweepsHad) {
  SweepFlags f;
  f.run = sweep_run_defaults();
  f.run.data = "toys";
  f.seeds = "0:1";
  f.jobs = "1";
  f.out = "unused";
  const nlohmann::json now = plan_sweep(f).config;
  EXPECT_EQ(now.at("run_flags").value("toy-variety", ""), "wide");
  EXPECT_EQ(now.at("run_flags").value("toy-lights", ""), "rig");
  *run_flag(f.run, "toy-variety") = "narrow";
  *run_flag(f.run, "toy-lights") = "mixed";
  const nlohmann::json first = plan_sweep(f).config;
  EXPECT_FALSE(first.at("run_flags").contains("toy-variety"));
  EXPECT_FALSE(first.at("run_flags").contains("toy-lights"));
  EXPECT_NE(config_hash(first), config_hash(now));
}

// A model option added later (cnn-paper's --dropout) is in the hash of a sweep
// whose models read it, and leaves every other sweep's hash alone.
TEST(SweepPlan, ANewModelsOptionIsHashedOnlyWhereItMatters) {
  SweepFlags f = sweep_flags("0:1", "0,60");
  EXPECT_FALSE(plan_sweep(f).config.at("run_flags").contains("dropout"));
  f.run.models = "caps,cnn-paper";
  const nlohmann::json with = plan_sweep(f).config;
  ASSERT_TRUE(with.at("run_flags").contains("dropout"));
  EXPECT_EQ(with.at("run_flags").at("dropout"), "0.5");
  f.run.model["dropout"] = "0.25";
  EXPECT_NE(config_hash(plan_sweep(f).config), config_hash(with));
}

// An option added to a model sweeps already ran (dr's --dr-init-std) is
// hashed only when set: the sweeps of dr keep their hash and --resume.
TEST(SweepPlan, AnOptionAddedToARunModelIsHashedOnlyWhenSet) {
  SweepFlags f = sweep_flags("0:1", "0,60");
  f.run.models = "caps,dr";
  const nlohmann::json before = plan_sweep(f).config;
  EXPECT_FALSE(before.at("run_flags").contains("dr-init-std"));
  f.run.model["dr-init-std"] = "0.1";
  const nlohmann::json set = plan_sweep(f).config;
  ASSERT_TRUE(set.at("run_flags").contains("dr-init-std"));
  EXPECT_EQ(set.at("run_flags").at("dr-init-std"), "0.1");
  EXPECT_NE(config_hash(set), config_hash(before));
}

// A budget and the schedules, added after sweeps ran, are hashed only when
// set: at their defaults every sweep keeps its hash.
TEST(SweepPlan, BudgetsAndSchedulesAreHashedOnlyWhenSet) {
  SweepFlags f = sweep_flags("0:1", "0,60");
  f.run.models = "caps,convcaps";
  const nlohmann::json before = plan_sweep(f).config;
  for (const char* name : {"max-steps", "lr-schedule", "spread-margin-schedule"})
    EXPECT_FALSE(before.at("run_flags").contains(name)) << name;
  f.run.lr_schedule = "constant";
  f.run.model["spread-margin-schedule"] = "linear";
  EXPECT_EQ(config_hash(plan_sweep(f).config), config_hash(before));
  f.run.max_steps = "100";
  f.run.lr_schedule = "exp:0.96:20000";
  f.run.model["spread-margin-schedule"] = "official";
  const nlohmann::json set = plan_sweep(f).config;
  EXPECT_EQ(set.at("run_flags").at("max-steps"), "100");
  EXPECT_EQ(set.at("run_flags").at("lr-schedule"), "exp:0.96:20000");
  EXPECT_EQ(set.at("run_flags").at("spread-margin-schedule"), "official");
  EXPECT_NE(config_hash(set), config_hash(before));
}

// An elevation extrapolation's gaps move its held-out band (60:80, 20 wide)
// beyond the training band (10:50); --gaps 0 and --gaps given differ in hash.
TEST(SweepPlan, ElevationGapsMoveTheHeldOutBand) {
  SweepFlags f = sweep_flags("0", "0,10,20");
  f.run.test_elevations = "60:80";
  const SweepPlan p = plan_sweep(f);
  ASSERT_EQ(p.cells.size(), 3u);
  for (const SweepCell& c : p.cells) {
    EXPECT_EQ(c.axis, "elevation");
    EXPECT_EQ(c.unit, "deg");
    EXPECT_EQ(c.true_gap, c.gap);
    EXPECT_EQ(c.opt.data.test_elevations.from, 50 + c.gap);
    EXPECT_EQ(c.opt.data.test_elevations.to, 70 + c.gap);
    EXPECT_EQ(c.opt.data.test_azimuths.from, 200);  // the held-out azimuths stay as given
    EXPECT_EQ(c.axis_values, (std::vector<double>{0, 10, 20, 30, 40, 50, 60, 70, 80}));
    EXPECT_EQ(c.axis_distances, (std::vector<double>{10, 0, 10, 0, 10, 0, 10, 20, 30}));  // from 10, 30, 50
  }
  f.gaps = "0";
  SweepFlags given = f;
  given.gaps = "given";
  EXPECT_NE(config_hash(plan_sweep(f).config), config_hash(plan_sweep(given).config));
  EXPECT_EQ(plan_sweep(given).cells.front().true_gap, 10);  // 60:80 as typed, 10 above 10:50
}

TEST(SweepPlan, ShardsSplitTheTrainingsByGroupModN) {
  SweepFlags f = sweep_flags("0:4", "0,30");
  const SweepPlan whole = plan_sweep(f);
  f.shard = "1/3";
  const SweepPlan p = plan_sweep(f);
  EXPECT_EQ(p.shard, 1);
  EXPECT_EQ(p.shards, 3);
  EXPECT_EQ(p.config.at("shard"), "1/3");
  ASSERT_EQ(p.cells.size(), whole.cells.size());  // every shard plans every cell
  for (const SweepCell& c : p.cells) EXPECT_EQ(p.in_shard(c), c.group % 3 == 1);
  // One shard of one is the whole sweep, with the whole sweep's hash.
  f.shard = "0/1";
  EXPECT_EQ(config_hash(plan_sweep(f).config), config_hash(whole.config));
}

// The one line a bad sweep configuration is refused with ("" if planned).
std::string error_of(const SweepFlags& f) {
  try {
    plan_sweep(f);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(SweepPlan, BadFlagsAreUsageErrorsNamingTheFlag) {
  SweepFlags f = sweep_flags("3:1", "0");
  EXPECT_EQ(error_of(f), "--seeds '3:1': empty range (B < A)");
  f = sweep_flags("0", "0,30,30");
  EXPECT_EQ(error_of(f), "--gaps '0,30,30': gap 30 listed twice");
  f = sweep_flags("0", "0");
  f.grid = {"lr=2e-3,0.002"};
  EXPECT_EQ(error_of(f), "--grid 'lr=2e-3,0.002': '2e-3' and '0.002' are the same lr");
  f = sweep_flags("0", "0");
  f.shard = "3/3";
  EXPECT_NE(error_of(f).find("--shard '3/3': expected K/N"), std::string::npos);
}

// A grid axis and its flag both given: a conflict, not a silent choice; a bad
// value inside --grid is named as typed, in --grid.
TEST(SweepPlan, GridConflictsAndBadGridValuesNameTheGrid) {
  SweepFlags f = sweep_flags("0", "0");
  f.grid = {"lr=1e-3,2e-3"};
  f.run.lr = "5e-3";
  EXPECT_EQ(error_of(f), "--grid 'lr=1e-3,2e-3': conflicts with --lr '5e-3' (give one of them)");
  f = sweep_flags("0", "0");
  f.grid = {"loss=xent,hinge"};
  const std::string e = error_of(f);
  EXPECT_EQ(e.rfind("--grid 'loss=xent,hinge': --loss 'hinge': ", 0), 0u) << e;
  f = sweep_flags("0", "0");
  f.grid = {"train-shift=0,20"};
  f.run.split = "translation";
  const std::string s = error_of(f);
  EXPECT_EQ(s.rfind("--grid 'train-shift=0,20': --train-shift '20': ", 0), 0u) << s;
}

// A sweep that checkpointed goes on checkpointing when resumed without
// --checkpoint-every: at run's default interval, not never. Without its
// checkpoints folder, or without --resume, no interval is made up.
TEST(SweepPlan, AResumedSweepWithCheckpointsKeepsCheckpointingAtTheDefaultInterval) {
  const std::string dir = ::testing::TempDir() + "viewgap_plan_ck." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  SweepFlags f = sweep_flags("0", "0");
  f.out = dir;
  f.resume = true;
  EXPECT_EQ(plan_sweep(f).checkpoint_seconds, 0);  // nothing was checkpointed
  std::filesystem::create_directories(dir + "/checkpoints");
  EXPECT_EQ(plan_sweep(f).checkpoint_seconds, kDefaultCheckpointSeconds);
  EXPECT_EQ(plan_sweep(f).checkpoint_steps, 0);
  f.checkpoint_every = "50";  // given: it wins
  EXPECT_EQ(plan_sweep(f).checkpoint_steps, 50);
  EXPECT_EQ(plan_sweep(f).checkpoint_seconds, 0);
  f.checkpoint_every.clear();
  f.resume = false;
  EXPECT_EQ(plan_sweep(f).checkpoint_seconds, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vg
