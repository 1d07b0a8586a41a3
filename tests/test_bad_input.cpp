// Bad input a fair user meets, through the binary: each class is refused before
// any work, exit 2, one line naming the flag (or argument) and its value, and
// leaves nothing half-written. Also what the tools tell the user they wrote.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/norb.h"
#include "data/protocol.h"
#include "harness/memory_budget.h"
#include "harness/run_flags.h"
#include "harness/sweep_plan.h"
#include "models/registry.h"
#include "tests/test_util.h"

using vg::test::shim_env;

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::lines;
using test::Outcome;
using test::run;
using test::slurp;

// A refusal that waits on nothing: `timeout` turns a hang into a failure (124).
constexpr const char* kNoHang = "timeout 60";

std::string fresh_dir(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_bad_" + name + "." + std::to_string(getpid());
  fs::remove_all(d);
  return d;
}

void expect_refused(const Outcome& o, const std::string& mention) {
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find(mention), std::string::npos) << "wanted '" << mention << "' in: " << o.err;
}

// Records at each (azimuth index, elevation index), one lighting each.
std::vector<NorbInfo> views(const std::vector<std::pair<int, int>>& az_el) {
  std::vector<NorbInfo> v;
  for (const auto& [az, el] : az_el) v.push_back({0, el, az, 0});
  return v;
}

// Every smallNORB viewpoint (18 azimuths x 9 elevations).
std::vector<NorbInfo> every_view() {
  std::vector<std::pair<int, int>> az_el;
  for (int el = 0; el < kNorbElevations; ++el)
    for (int az = 0; az <= kNorbAzimuthMax; az += 2) az_el.push_back({az, el});
  return views(az_el);
}

// A smallNORB directory whose splits hold these records (black pairs, labels
// cycling through the classes).
std::string norb_dir(const std::string& name, const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test) {
  const std::string dir = fresh_dir(name);
  fs::create_directories(dir);
  for (const auto& [part, info] : {std::pair{NorbPart::training, &train}, std::pair{NorbPart::testing, &test}}) {
    std::vector<int32_t> labels(info->size());
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % kNorbClasses);
    const std::vector<uint8_t> pairs(info->size() * kNorbPairBytes, 0);
    norb_write_split(norb_files(dir, part), pairs, labels, *info);
  }
  return dir;
}

// ---- Non-regular input files: refused before they are read, not waited on.

TEST(BadInput, NorbFileThatIsAFifoIsRefusedNamingDataAndThePath) {
  const std::string dir = norb_dir("fifo", every_view(), every_view());
  const std::string dat = norb_files(dir, NorbPart::training).dat;
  fs::remove(dat);
  ASSERT_EQ(::mkfifo(dat.c_str(), 0600), 0);
  const std::string json = dir + "/run.json";
  for (const std::string& cmd : {"run --quiet --out-json " + json, "sweep --quiet --seeds 0 --out " + dir + "/sweep"}) {
    SCOPED_TRACE(cmd);
    expect_refused(run(cmd + " --data norb:" + dir, kNoHang), "--data 'norb:" + dir + "': " + dat + ": is a FIFO, not a regular file");
  }
  EXPECT_FALSE(fs::exists(json));
  EXPECT_FALSE(fs::exists(dir + "/sweep"));
  fs::remove_all(dir);
}

// smallNORB is served as .mat.gz: a user who has not unpacked it is told so.
TEST(BadInput, GzippedNorbFileSaysToGunzipIt) {
  const std::string dir = norb_dir("gz", every_view(), every_view());
  const std::string dat = norb_files(dir, NorbPart::training).dat;
  fs::rename(dat, dat + ".gz");
  expect_refused(run("run --quiet --data norb:" + dir), "--data 'norb:" + dir + "': " + dat + ": cannot open: No such file or directory, but " +
                                                           dat + ".gz is there: gunzip it (viewgap reads the uncompressed files)");
  fs::remove_all(dir);
}

// ---- Empty splits: a familiar or held-out set of nothing would be scored
// 0.000 ("0 held-out at azimuths ,"); refused naming --data and the split.

TEST(BadInput, NorbSplitThatLeavesASetEmptyIsRefused) {
  struct Case {
    std::string name;
    std::vector<NorbInfo> test;
    std::string split, what;
  };
  // Azimuth index 0 (0 deg) and elevation index 0 (30 deg) are training views
  // of both paper splits; 10 (100 deg) and 5 (55 deg) are held out.
  const Case cases[] = {
      {"heldout", views({{0, 0}, {2, 4}, {32, 8}}), "paper-azimuth", "every test image lies at the split's training viewpoints (azimuths 300..40 deg): the held-out set is empty"},
      {"familiar", views({{10, 0}, {12, 4}}), "paper-azimuth", "no test image lies at the split's training viewpoints (azimuths 300..40 deg): the familiar set is empty"},
      {"elev_heldout", views({{0, 0}, {10, 2}}), "paper-elevation", "every test image lies at the split's training viewpoints (elevations 30..40 deg): the held-out set is empty"},
      {"elev_familiar", views({{0, 5}, {10, 8}}), "paper-elevation", "no test image lies at the split's training viewpoints (elevations 30..40 deg): the familiar set is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = norb_dir("empty_" + c.name, every_view(), c.test);
    const std::string mention = "--data 'norb:" + dir + "': " + dir + ": --split " + c.split + ": " + c.what;
    expect_refused(run("run --quiet --split " + c.split + " --data norb:" + dir + " --out-json " + dir + "/run.json"), mention);
    expect_refused(run("sweep --quiet --seeds 0 --split " + c.split + " --data norb:" + dir + " --out " + dir + "/sweep"), mention);
    EXPECT_FALSE(fs::exists(dir + "/run.json"));
    EXPECT_FALSE(fs::exists(dir + "/sweep"));
    fs::remove_all(dir);
  }
}

// ---- export-norb: the output is probed before any rendering, and a failed
// export leaves no part of a dataset behind.

// /proc is a directory root may write by its mode, but it takes no file: only
// creating one tells. (Not root: refused by the permission test.)
TEST(BadInput, ExportNorbProbesThatItsFilesCanBeCreatedBeforeRendering) {
  const Outcome o = run("export-norb /proc --instances 1 --lightings 1 --quiet");
  expect_refused(o, "DIR '/proc': ");
  if (::geteuid() == 0) {
    EXPECT_NE(o.err.find("cannot create a file in it"), std::string::npos) << o.err;
  }
}

TEST(BadInput, ExportNorbThatFailsMidwayRemovesWhatItWrote) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string shim = shim_env();
  const std::string args = " --instances 1 --lightings 1 --quiet";
  // The calls of a whole export; the disk then fills up at its last write (the
  // testing split's -dat), after five of the six files are in place.
  const std::string probe = fresh_dir("export_probe"), log = probe + ".log";
  fs::remove(log);
  ASSERT_EQ(run("export-norb " + probe + args, shim + " VIEWGAP_FAULT_LOG=" + log).code, 0);
  std::ifstream in(log);
  long n = 0, last_write = 0;
  std::string call;
  while (in >> n >> call)
    if (call == "write" || call == "pwrite" || call == "writev") last_write = n;
  ASSERT_GT(last_write, 0);
  const std::string dir = fresh_dir("export_full") + "/nested";
  const Outcome o = run("export-norb " + dir + args, shim + " VIEWGAP_FAULT_ENOSPC_AT=" + std::to_string(last_write));
  EXPECT_EQ(o.code, 1) << o.err;  // a full disk is not bad input
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("No space left on device"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir)) << "left behind: the directory it made";
  EXPECT_FALSE(fs::exists(fs::path(dir).parent_path())) << "left behind: the directory it made";
  fs::remove_all(probe);
  fs::remove(log);
}

// ---- The classes of an audit of bad input, each through its mechanism.

// A tiny finished sweep in `dir` (extra flags appended).
void tiny_sweep(const std::string& dir, const std::string& extra = "") {
  const Outcome o = run("sweep --quiet --seeds 0:1 --gaps 0 --models linear --n-epochs 1 --n-per-combo 1 --jobs 1 --out " +
                        dir + extra, kNoHang);
  ASSERT_EQ(o.code, 0) << o.err;
}

// The memory refusal names the flags the user set that drive the estimate
// (each whose default would lower it, the largest first), never a size
// option the user left alone; with none set, the model's own flag.
TEST(BadInput, MemoryRefusalNamesTheFlagsTheUserSet) {
  const SizeFlag batch_set{true, "4096", 32, "--batch-size"}, batch_unset{false, "32", 32, "--batch-size"};
  // convcaps with a wide B and a large batch: both drive it, caps-a does not appear.
  const std::vector<SizeDriver> d = model_size_drivers("convcaps", {{"caps-b", "1024"}}, 4096, batch_set, ImageShape{}, SizeFlag{});
  ASSERT_EQ(d.size(), 2u);
  std::set<std::string> named{d[0].flag, d[1].flag};
  EXPECT_EQ(named, (std::set<std::string>{"--caps-b", "--batch-size"}));
  EXPECT_GE(d[0].drop, d[1].drop);
  // An option set that does not change the size is not blamed.
  EXPECT_TRUE(model_size_drivers("convcaps", {{"em-iters", "2"}}, 32, batch_unset, ImageShape{}, SizeFlag{}).empty());
  // The canvas, set, drives a model's size too.
  const ImageShape wide{1, 128, 5};
  const std::vector<SizeDriver> c = model_size_drivers("cnn", {}, 32, batch_unset, wide, SizeFlag{true, "128", 0, "--canvas"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].flag, "--canvas");
  try {
    refuse_model_size(d, "--models", "convcaps", "needs a lot");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(d[0].flag + " '" + d[0].value + "': needs a lot (with " + d[1].flag + " '" + d[1].value + "')", 0), 0u) << what;
    EXPECT_EQ(what.find("caps-a"), std::string::npos) << what;
  }
  try {
    refuse_model_size({}, "--model", "convcaps", "needs a lot");
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--model 'convcaps': needs a lot");
  }
}

// A stopping rule that can stop nothing is refused the same whatever makes
// it so: for every trained model and every model fit in one pass, matching
// the one with the other beside it alone.
TEST(BadInput, MatchFamiliarWithNothingThatTrainsBesideItIsRefused) {
  std::vector<std::string> trained, one_pass;
  for (const ModelEntry& e : model_registry()) {
    std::string n = e.name;
    if (n.size() > 1 && n.back() == 'N') n.pop_back();
    (e.fit_in_one_pass ? one_pass : trained).push_back(n);
  }
  ASSERT_FALSE(one_pass.empty());
  for (const std::string& t : {trained.front(), trained.back()})
    for (const std::string& p : one_pass)
      for (const std::string& cmd : {std::string("run --quiet"), "sweep --quiet --out " + fresh_dir("match")}) {
        SCOPED_TRACE(cmd + " " + t + "," + p);
        expect_refused(run(cmd + " --match-familiar " + t + " --models " + t + "," + p, kNoHang),
                       "--match-familiar '" + t + "': needs another model that trains");
      }
}

// Several --split values run a sweep each: --out must name them, each split
// once, one process (no shards), and each split's own flags judged before any runs.
TEST(BadInput, SeveralSplitsAreRefusedWithoutAPlaceForEach) {
  const std::string dir = fresh_dir("splits");
  const std::string data = " --quiet --seeds 0 --models linear --data " + test::fixture_data("idx:");
  expect_refused(run("sweep" + data + " --split rotation,affine --out " + dir), "--out '" + dir + "': several --split values");
  expect_refused(run("sweep" + data + " --split rotation,rotation --out " + dir + "/{split}"), "split 'rotation' listed twice");
  expect_refused(run("sweep" + data + " --split rotation, --out " + dir + "/{split}"), "--split 'rotation,': an empty split");
  expect_refused(run("sweep" + data + " --split rotation,affine --shard 0/2 --out " + dir + "/{split}"), "--split 'rotation,affine'");
  expect_refused(run("sweep" + data + " --split rotation,nosuch --out " + dir + "/{split}"), "nosuch");
  expect_refused(run("sweep --quiet --seeds 0 --out " + dir + "/{split}"), "--out '" + dir + "/{split}': {split} names");
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir + "/rotation"));
}

// Duplicates are judged by what they mean: a grid value spelled two ways
// (a number in any flag's form: A:B, MODEL=LR), a pairing given twice.
TEST(BadInput, DuplicateGridValuesAndPairingsAreRefusedHoweverSpelled) {
  const std::string out = " --out " + fresh_dir("dups");
  expect_refused(run("sweep --quiet --models caps,dr --grid model-lr=dr=1e-3,dr=0.001" + out), "are the same model-lr");
  expect_refused(run("sweep --quiet --grid train-azimuths=0:60,0:60.0" + out), "are the same train-azimuths");
  expect_refused(run("sweep --quiet --grid n-per-combo=2,02" + out), "are the same n-per-combo");
  expect_refused(run("sweep --quiet --grid loss=xent,spread --pair-grid 'loss=spread|loss=xent' --pair-grid 'loss=spread|loss=xent'" + out),
                 "--pair-grid 'loss=spread|loss=xent': pairs loss=spread with loss=xent, as --pair-grid 'loss=spread|loss=xent' does");
  expect_refused(run("sweep --quiet --grid lr=1e-3,2e-3 --pair-grid 'lr=1e-3|lr=2e-3' --pair-grid 'lr=0.001|lr=0.002'" + out),
                 "--pair-grid 'lr=0.001|lr=0.002': pairs lr=1e-3 with lr=2e-3");
}

// Merging shards made with different flags names each flag that differs, as
// merging whole sweeps does.
TEST(BadInput, MergingShardsOfAnotherConfigurationNamesTheFlags) {
  const std::string a = fresh_dir("shard_a"), b = fresh_dir("shard_b"), out = fresh_dir("shard_out");
  tiny_sweep(a, " --shard 0/2");
  tiny_sweep(b, " --shard 1/2 --noise 0.05 --lr 1e-3");
  const Outcome o = run("merge " + a + " " + b + " --out " + out, kNoHang);
  expect_refused(o, "'" + b + "': a shard of another sweep configuration than '" + a + "'");
  EXPECT_NE(o.err.find("--noise is '(not set)' there, '0.05' here"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("--lr is '2e-3' there, '1e-3' here"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(out));
  for (const std::string& d : {a, b}) fs::remove_all(d);
}

// --resume of a directory with no sweep: refused, unless the flags of the
// sweep to start come with it (a job array passes them with every --resume).
TEST(BadInput, ResumeOfNothingSaysSoUnlessTheSweepsFlagsAreGiven) {
  const std::string dir = fresh_dir("resume_nothing");
  for (const std::string& extra : {std::string(""), std::string(" --quiet --jobs 1")}) {
    expect_refused(run("sweep --resume --out " + dir + extra, kNoHang), "--out '" + dir + "': holds no sweep to --resume");
    EXPECT_FALSE(fs::exists(dir));
  }
  fs::create_directories(dir);  // an empty directory holds no sweep either
  expect_refused(run("sweep --resume --out " + dir, kNoHang), "holds no sweep to --resume");
  tiny_sweep(dir, " --resume");
  EXPECT_TRUE(fs::exists(dir + "/summary.csv"));
  fs::remove_all(dir);
}

// A value in meta.json that this viewgap refuses is blamed on meta.json and
// its directory, never on a flag the user did not type: every run flag the
// sweep recorded, damaged in turn.
TEST(BadInput, DamagedMetaJsonIsBlamedOnTheFileNotOnAFlag) {
  const std::string dir = fresh_dir("damaged_meta");
  tiny_sweep(dir, " --shard 0/2");  // a shard: merge plans it from its meta.json first thing
  const std::string meta = dir + "/meta.json", good = test::slurp(meta);
  const nlohmann::json j = nlohmann::json::parse(good);
  int tried = 0;
  for (const auto& [name, value] : j["config"]["run_flags"].items()) {
    for (const nlohmann::json& bad : {nlohmann::json("abc\x01"), nlohmann::json(5)}) {
      SCOPED_TRACE(name + " = " + bad.dump());
      nlohmann::json damaged = j;
      damaged["config"]["run_flags"][name] = bad;
      std::ofstream(meta) << damaged.dump(2);
      const Outcome o = run("sweep --resume --out " + dir, kNoHang);
      expect_refused(o, "--out '" + dir + "': " + meta + ": the sweep's recorded configuration: ");
      EXPECT_NE(o.err.find("(not a flag given here)"), std::string::npos) << o.err;
      // merge reads the same file: it names the directory and its meta.json.
      expect_refused(run("merge " + dir + " --out " + dir + ".merged", kNoHang), "'" + dir + "': its meta.json records a sweep");
      ++tried;
    }
  }
  EXPECT_GT(tried, 20);
  std::ofstream(meta) << good;
  fs::remove_all(dir);
}

// What is not a regular file is refused before it is opened for reading,
// wherever viewgap reads: a sweep's meta.json and tables on --resume and
// merge, and each of smallNORB's six files.
TEST(BadInput, FifosWhereFilesAreReadAreRefusedWithoutWaiting) {
  const std::string dir = fresh_dir("fifo_sweep"), out = fresh_dir("fifo_merge");
  tiny_sweep(dir);
  for (const char* name : {"meta.json", "cells.csv", "circle.csv", "provenance.csv"}) {
    SCOPED_TRACE(name);
    const std::string path = dir + "/" + name, keep = path + ".keep";
    fs::rename(path, keep);
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    expect_refused(run("sweep --resume --out " + dir, kNoHang), "FIFO");
    const Outcome m = run("merge " + dir + " " + dir + " --out " + out, kNoHang);
    EXPECT_EQ(m.code, 2) << m.err;
    EXPECT_EQ(lines(m.err), 1) << m.err;
    EXPECT_FALSE(fs::exists(out));
    fs::remove(path);
    fs::rename(keep, path);
  }
  fs::remove_all(dir);
  const std::string norb = norb_dir("fifo_six", every_view(), every_view());
  for (NorbPart part : {NorbPart::training, NorbPart::testing}) {
    const NorbFiles files = norb_files(norb, part);
    for (const std::string* file : {&files.dat, &files.cat, &files.info}) {
      SCOPED_TRACE(*file);
      const std::string keep = *file + ".keep";
      fs::rename(*file, keep);
      ASSERT_EQ(::mkfifo(file->c_str(), 0600), 0);
      expect_refused(run("run --quiet --data norb:" + norb, kNoHang), *file + ": is a FIFO, not a regular file");
      fs::remove(*file);
      fs::rename(keep, *file);
    }
  }
  fs::remove_all(norb);
}

// A protocol's sweep with no --gaps runs the protocol's own gaps, each of
// which fits its limits: every registered protocol that steps its held-out
// set plans at its defaults.
TEST(BadInput, EveryProtocolsSweepPlansAtItsOwnDefaultGaps) {
  const std::string norb = norb_dir("default_gaps", every_view(), every_view());
  for (const Protocol& p : protocol_registry()) {
    if (p.at_distance == nullptr) continue;
    SCOPED_TRACE(p.name);
    SweepFlags f;
    const std::string source = p.source;
    f.run.data = source == "norb:" ? source + norb : test::fixture_data(source);
    if (p.split != nullptr) f.run.split = p.split;
    for (const auto& [flag, value] : p.chosen_by) *run_flag(f.run, flag) = value;
    if (source == "toys") *run_flag(f.run, "toy-instances") = "1", *run_flag(f.run, "toy-lightings") = "1";
    f.run.train_az = sweep_run_defaults().train_az;
    f.seeds = "0";
    f.out = fresh_dir("default_gaps_out");
    try {
      const SweepPlan plan = plan_sweep(f);
      const std::string want = p.default_gaps != nullptr ? p.default_gaps : SweepFlags{}.gaps;
      std::string got;
      for (const auto& g : plan.config["gaps"]) got += (got.empty() ? "" : ",") + fmt_num(g.get<double>());
      EXPECT_EQ(got, want);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
  fs::remove_all(norb);
}

// Messages say what is accepted, in units that show the magnitude.
TEST(BadInput, MessagesSayWhatIsAccepted) {
  expect_refused(run("run --quiet --standardize on"),
                 "--standardize 'on': applies with --split paper-azimuth, paper-elevation, full, window, standard, translation, rotation, scale, shear or affine "
                 "only, on --data norb:DIR, toys, fashion-mnist or idx:DIR");
  expect_refused(run("run --quiet --cameras first"), "--cameras 'first': applies to --data norb:DIR or toys only");
  const std::string norb = norb_dir("messages", every_view(), every_view());
  expect_refused(run("run --quiet --data norb:" + norb + " --split translation --canvas 40"),
                 "--canvas '40': applies with --split translation only, on --data synthetic");
  expect_refused(run("run --quiet --data norb:" + norb + " --split rotation --standardize on"), "--standardize 'on': applies with --split paper-azimuth");
  // This source's splits that take it, not another source's: Fashion-MNIST's
  // translation takes --standardize, smallNORB's does not.
  expect_refused(run("run --quiet --data norb:" + norb + " --split translation --standardize on"),
                 "--standardize 'on': applies with --split paper-azimuth, paper-elevation or full only\n");
  fs::remove_all(norb);
  expect_refused(run("run --quiet --models convcaps --em-lambda-schedule official:1e7"),
                 "--em-lambda-schedule 'official:1e7': the final lambda after 'official:' must be > 0 and <= 1e+06");
  EXPECT_EQ(gigabytes(2.5e9), "2.5 GB");
  EXPECT_EQ(gigabytes(0.05e9), "0.1 GB");
  EXPECT_EQ(gigabytes(30e6), "30.0 MB");
  EXPECT_EQ(gigabytes(4096), "4.1 kB");
  EXPECT_EQ(gigabytes(0), "0 bytes");
}

// ---- tools/seed_table.py: with --seeds 3 the mean of seeds 0-2 is the mean of
// every seed, one row (it was printed twice).

#ifdef VIEWGAP_HAVE_PYTHON
TEST(SeedTable, MeanOfTheSeedsThreeSeedsIsOneRow) {
  const std::string dir = fresh_dir("seed_table");
  fs::create_directories(dir);
  // A stand-in viewgap: writes a run JSON of caps and cnn where --out-json says.
  const std::string exe = dir + "/viewgap";
  std::ofstream(exe) << "#!/bin/sh\n"
                        "while [ $# -gt 0 ]; do [ \"$1\" = --out-json ] && out=$2; shift; done\n"
                        "echo '{\"meta\": {\"git_commit\": \"abc\"}, \"models\": ["
                        "{\"name\": \"caps\", \"familiar\": 0.9, \"heldout\": 0.7, \"drop\": 0.2},"
                        "{\"name\": \"cnn\", \"familiar\": 1.0, \"heldout\": 0.6, \"drop\": 0.4}]}' > \"$out\"\n";
  fs::permissions(exe, fs::perms::owner_all);
  for (int seeds : {3, 4}) {
    SCOPED_TRACE(seeds);
    const std::string cmd = std::string(vg::test::paths::python) + " " + vg::test::paths::source_dir + "/tools/seed_table.py --seeds " +
                            std::to_string(seeds) + " --exe " + exe + " --out " + dir + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    const std::string md = slurp(dir + "/seed_table.md");
    auto count = [&](const std::string& s) {
      int k = 0;
      for (size_t at = md.find(s); at != std::string::npos; at = md.find(s, at + 1)) ++k;
      return k;
    };
    EXPECT_EQ(count("| **mean 0-2** |"), 1) << md;
    EXPECT_EQ(count("| **mean 0-3** |"), seeds == 4 ? 1 : 0) << md;
  }
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace vg
