// What a run and a sweep record is what ran: the views the protocol used (not
// the rendering flags' defaults under smallNORB's files), and no flag that
// the configuration ignored; --resume reads the sweep back from meta.json.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "data/protocol.h"
#include "harness/report.h"
#include "harness/run_flags.h"
#include "harness/sweep_plan.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::lines;
using test::Outcome;
using test::run;
using test::slurp;

std::string scratch(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_records_" + name + "." + std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

// smallNORB's format, small: one instance, one lighting (written once per process).
const std::string& norb_dir() {
  static const std::string d = [] {
    const std::string dir = scratch("norb");
    const Outcome o = run("export-norb " + dir + " --instances 1 --lightings 1 --quiet");
    EXPECT_EQ(o.code, 0) << o.err;
    return dir;
  }();
  return d;
}

std::vector<double> values(const nlohmann::json& range) { return range.at("values").get<std::vector<double>>(); }

TEST(Records, ViewListsHoldTheirArc) {
  const ViewList train = view_list({0, 20, 40, 300, 320, 340}, true);
  EXPECT_EQ(train.from, 300);
  EXPECT_EQ(train.to, 400);
  EXPECT_EQ(train.values, (std::vector<double>{300, 320, 340, 0, 20, 40}));
  const ViewList held = view_list({280, 60, 100, 80, 120, 140, 160, 180, 200, 220, 240, 260}, true);
  EXPECT_EQ(held.from, 60);
  EXPECT_EQ(held.to, 280);
  const ViewList elev = view_list({45, 70, 50}, false);
  EXPECT_EQ(elev.from, 45);
  EXPECT_EQ(elev.to, 70);
  EXPECT_TRUE(view_list({}, true).values.empty());
}

// The rendered data records its flags' ranges, as every run JSON did.
TEST(Records, SyntheticRunRecordsItsFlags) {
  RunOptions o;
  const nlohmann::json j = run_config_json(o, 1);
  EXPECT_EQ(j["train_azimuths"]["from"], 0);
  EXPECT_EQ(j["train_azimuths"]["to"], 150);
  EXPECT_EQ(j["train_azimuths"]["count"], 6);
  EXPECT_EQ(values(j["test_azimuths"]), (std::vector<double>{200, 226, 252, 278, 304, 330}));
  EXPECT_TRUE(j["test_elevations"].is_null());
  EXPECT_EQ(j["protocol"], "azimuth-window");
  EXPECT_EQ(j["source"], "synthetic");
  // A preset's run is recorded by the preset's name, with the preset's views.
  RunFlags f;
  f.split = "paper-azimuth";
  int threads = 1;
  const nlohmann::json paper = run_config_json(validate_run(f, &threads), 1);
  EXPECT_EQ(paper["protocol"], "paper-azimuth");
  EXPECT_EQ(paper["train_azimuths"]["from"], 300);
  EXPECT_EQ(paper["test_azimuths"]["count"], 12);
}

// --data norb: the files' views, not the rendering flags' defaults (0:150, 200:330).
TEST(Records, NorbRunRecordsTheViewsOfItsFiles) {
  const std::string json = scratch("norb_run") + ".json";
  const Outcome o = run("run --data norb:" + norb_dir() + " --split paper-azimuth --models nn1 --quiet --out-json " + json);
  ASSERT_EQ(o.code, 0) << o.err;
  const auto c = nlohmann::json::parse(slurp(json))["config"];
  EXPECT_EQ(values(c["train_azimuths"]), (std::vector<double>{300, 320, 340, 0, 20, 40}));
  EXPECT_EQ(c["train_azimuths"]["from"], 300);
  EXPECT_EQ(c["train_azimuths"]["to"], 400);
  EXPECT_EQ(c["test_azimuths"]["from"], 60);
  EXPECT_EQ(c["test_azimuths"]["to"], 280);
  EXPECT_EQ(c["test_azimuths"]["count"], 12);
  EXPECT_EQ(c["elevations"]["count"], 9);
  EXPECT_TRUE(c["test_elevations"].is_null());  // the training elevations
  EXPECT_EQ(c["protocol"], "norb-paper-azimuth");
  EXPECT_EQ(c["source"], "norb");
  EXPECT_TRUE(c["n_per_combo"].is_null());  // the rendering's, unused by files
  EXPECT_TRUE(c["shapes"].is_null());
  std::filesystem::remove(json);

  // The elevation split holds out elevations: 30:40 to train on, 45:70 held out.
  const std::string dir = scratch("norb_sweep");
  const Outcome s = run("sweep --data norb:" + norb_dir() + " --split paper-elevation --seeds 0 --models nn1 --quiet --out " + dir);
  ASSERT_EQ(s.code, 0) << s.err;
  const auto meta = nlohmann::json::parse(slurp(dir + "/meta.json"));
  const auto& v = meta["run_config"]["views"];
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(values(v[0]["elevations"]), (std::vector<double>{30, 35, 40}));
  EXPECT_EQ(values(v[0]["test_elevations"]), (std::vector<double>{45, 50, 55, 60, 65, 70}));
  EXPECT_EQ(v[0]["train_azimuths"]["count"], 18);
  EXPECT_EQ(meta["run_config"]["elevations"]["to"], 40);
  std::filesystem::remove_all(dir);
}

// meta.json: the views of every gap, each its own held-out window. The
// configuration's hash does not see them (an existing sweep keeps its hash).
TEST(Records, SweepMetaRecordsTheViewsOfEveryGap) {
  SweepFlags f;
  f.run = sweep_run_defaults();
  f.seeds = "0:2";
  f.gaps = "0,30";
  f.out = "unused";
  const SweepPlan plan = plan_sweep(f);
  const auto& v = plan.run_config["views"];
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0]["gap"], 0);
  EXPECT_EQ(v[1]["gap"], 30);
  EXPECT_EQ(v[0]["test_azimuths"]["from"], 60);
  EXPECT_EQ(v[1]["test_azimuths"]["from"], 90);
  EXPECT_EQ(v[1]["test_azimuths"]["to"], 150);
  EXPECT_EQ(v[1]["train_azimuths"]["to"], 60);
  EXPECT_FALSE(plan.config.contains("views"));
}

// The paper's presets fix their held-out views on every data source: a sweep
// runs them once per seed, as given, without --gaps given.
TEST(Records, PaperSplitsRunAsGivenOnEveryDataSource) {
  SweepFlags f;
  f.run = sweep_run_defaults();
  f.run.split = "paper-azimuth";
  f.seeds = "0:1";
  f.out = "unused";
  const SweepPlan plan = plan_sweep(f);
  ASSERT_EQ(plan.cells.size(), 2u);
  EXPECT_EQ(plan.cells[0].gap, 20);  // 40 to 60: the preset's own gap
  EXPECT_EQ(plan.cells[0].opt.data.test_azimuths.from, 60);
  f.gaps = "given";
  EXPECT_EQ(config_hash(plan_sweep(f).config), config_hash(plan.config));
}

// A flag the configuration would ignore: exit 2, one line naming it, even typed at its default.
TEST(Records, IgnoredFlagsAreRefused) {
  const std::string out = " --out " + scratch("ignored");
  const std::pair<std::string, std::string> cases[] = {
      {"sweep --gaps 30 --test-azimuths 200:330" + out, "--test-azimuths '200:330': applies with --gaps given only"},
      {"sweep --gaps given --test-width 60" + out, "--test-width '60'"},
      {"sweep --split paper-azimuth --test-width 60" + out, "--test-width '60'"},
      {"sweep --split paper-azimuth --gaps 0,30,60,90,120" + out, "--gaps '0,30,60,90,120'"},
      {"sweep --models caps --reference caps" + out, "--reference 'caps'"},
      {"sweep --split translation --test-width 60" + out, "--test-width '60': this protocol's sweep moves"},
      {"run --em-lambda 1 --em-lambda-schedule official", "--em-lambda '1': --em-lambda-schedule 'official' sets lambda"},
      {"run --spread-margin 0.1:0.5", "--spread-margin '0.1:0.5': --loss 'xent' has no margin"},
      {"run --models caps,cnn136 --cnn-hidden 64", "--cnn-hidden '64': model 'cnn136' has its size in its name"},
      {"run --split translation --test-azimuths 200:330", "--test-azimuths '200:330'"},
      {"run --split paper-azimuth --train-azimuths 0:150", "--split 'paper-azimuth': conflicts with --train-azimuths"},
      {"run --data norb:" + norb_dir() + " --n-per-combo 5", "--n-per-combo '5': applies to --data synthetic only"},
      {"run --cameras both", "--cameras 'both': applies to --data norb:DIR or toys only"},
      {"sweep --grid em-lambda=1,2 --em-lambda-schedule official" + out, "--em-lambda '1'"},
      {"run --models nn1 --n-epochs 10", "--n-epochs '10': no model in --models 'nn1' trains"},
      {"sweep --models nn1 --grid lr=1e-3,2e-3" + out, "--lr '1e-3': no model in --models 'nn1' trains"},
  };
  for (const auto& [args, mention] : cases) {
    const Outcome o = run(args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << args << "\n" << o.err;
  }
  // Where a model acts on the option, it stands.
  EXPECT_EQ(run("run --models caps,cnn,cnn136 --cnn-hidden 64 --n-epochs 1 --n-per-combo 1 --quiet").code, 0);
}

// --grid values get their flag's validation before any work.
TEST(Records, GridValuesAreValidatedLikeTheirFlag) {
  const std::string dir = scratch("grid");
  // The last: a value its flag takes that the tables cannot hold (their grid column is "name=value;...").
  const std::string odd = scratch("odd;name");
  std::filesystem::create_directory_symlink(norb_dir(), odd);
  const std::pair<std::string, std::string> cases[] = {
      {"--gaps given --grid data=synthetic,norb:/nonexistent", "--grid 'data=synthetic,norb:/nonexistent': --data 'norb:/nonexistent'"},
      {"--grid data=synthetic,norb:" + norb_dir(), "grid point 'data=norb:"},
      {"--gaps given --grid cameras=both,first", "--grid 'cameras=both,first': --cameras 'both'"},
      {"--grid split=paper-azimuth", "--gaps"},
      {"--gaps given --grid 'data=norb:" + odd + "'", "--grid 'data=norb:" + odd + "': holds a character the tables cannot"},
  };
  for (const auto& [args, mention] : cases) {
    const Outcome o = run("sweep --seeds 0 --models nn1 --quiet --out " + dir + " " + args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << args << "\n" << o.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/meta.json")) << args;
  }
  std::filesystem::remove(odd);
}

// `sweep --out DIR --resume` alone continues the sweep in DIR; flags beside it
// must agree, and every one that does not is named.
TEST(Records, ResumeReadsTheSweepFromItsMeta) {
  const std::string dir = scratch("resume");
  // --reproducible is recorded and resumed where it exists (x86-64; elsewhere it
  // is refused); VIEWGAP_ISA (the suite's scalar pass sets it) would conflict with it.
  const std::string env = "env -u VIEWGAP_ISA";
  const std::string base = "sweep --seeds 0:1 --gaps 30 --n-epochs 1 --n-per-combo 1 --models linear --quiet --out " + dir;
#if defined(__x86_64__)
  const std::string mode = " --reproducible";
#else
  const std::string mode;
#endif
  ASSERT_EQ(run(base + " --lr 1e-3" + mode, env).code, 0);
  Outcome o = run("sweep --out " + dir + " --resume", env);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("0 run now, 2 resumed"), std::string::npos) << o.out;
  o = run("sweep --out " + dir + " --resume --lr 1e-3 --seeds 0:1", env);  // agreeing flags
  EXPECT_EQ(o.code, 0) << o.err;
  o = run("sweep --out " + dir + " --resume --lr 2e-3 --seeds 0 --n-epochs 2", env);
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
  for (const char* field : {"--lr is '1e-3' there, '2e-3' here", "--seeds is '[0,1]' there, '[0]' here",
                            "--n-epochs is '1' there, '2' here"})
    EXPECT_NE(o.err.find(field), std::string::npos) << field << "\n" << o.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
// --noise: the rendered images' pixel noise, for a sweep under a perturbed
// renderer. Without noise a combination's samples are the same image; a sweep
// hashes the flag only when it is set, so sweeps made before it keep their hash.
TEST(Records, NoiseSetsThePixelNoiseAndIsHashedOnlyWhenSet) {
  RunFlags f;
  int threads = 1;
  f.noise = "0";
  const RunOptions quiet = validate_run(f, &threads);
  EXPECT_EQ(quiet.data.noise_std, 0.0);
  const Dataset clean = make_dataset(quiet.data);
  ASSERT_GT(quiet.data.n_per_combo, 1);
  const std::vector<float> a(clean.train.image(0), clean.train.image(0) + kImagePixels),
      b(clean.train.image(1), clean.train.image(1) + kImagePixels);
  EXPECT_EQ(a, b);  // samples 0 and 1 of the first combination
  const Dataset noisy = make_dataset(validate_run(RunFlags{}, &threads).data);
  EXPECT_NE(std::vector<float>(noisy.train.image(0), noisy.train.image(0) + kImagePixels), a);
  EXPECT_EQ(run_config_json(quiet, 1).at("noise_std"), 0.0);

  SweepFlags s;
  s.run.train_az = sweep_run_defaults().train_az;
  s.seeds = "0:1";
  s.gaps = "0,60";
  s.out = "unused";
  EXPECT_FALSE(plan_sweep(s).config.at("run_flags").contains("noise"));
  s.run.noise = "0.08";
  EXPECT_EQ(plan_sweep(s).config.at("run_flags").at("noise"), "0.08");
  EXPECT_EQ(plan_sweep(s).cells.front().opt.data.noise_std, 0.08);
}

}  // namespace vg
