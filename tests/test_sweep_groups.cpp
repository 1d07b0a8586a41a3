// A sweep trains each (seed, grid point) once and evaluates it at every gap:
// the protocols' at_distance moves only the held-out set, run_experiments
// gives each configuration the bits run_experiment gives it alone, and a
// sweep's tables are those of its one-gap sweeps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "data/protocol.h"
#include "harness/evaluate.h"
#include "harness/run_flags.h"
#include "harness/train.h"
#include "tests/test_util.h"

namespace vg {
namespace {

// A small run of protocol p (its --split or the flags that choose it).
RunOptions small_run(const Protocol& p, const std::string& models = "caps,cnn,nn1") {
  RunFlags f;
  f.data = p.source;
  if (p.split != nullptr) f.split = p.split;
  for (const auto& [flag, value] : p.chosen_by) *run_flag(f, flag) = value;
  f.models = models;
  f.n_epochs = "2";
  if (f.data == "toys") {  // the toys at their smallest
    *run_flag(f, "toy-instances") = "1";
    *run_flag(f, "toy-lightings") = "1";
  } else {
    f.n_per_combo = "1";
    f.n_eval_per_combo = "1";
  }
  int threads = 1;
  RunOptions o = validate_run(f, &threads);
  o.train.seed = 3;
  return o;
}

// The protocols whose held-out set a sweep moves (the rendered shapes' and the toys').
std::vector<const Protocol*> swept_protocols() {
  std::vector<const Protocol*> out;
  for (const Protocol& p : protocol_registry())
    if (p.at_distance != nullptr && (std::string(p.source) == "synthetic" || std::string(p.source) == "toys"))
      out.push_back(&p);
  return out;
}

void expect_same(const ModelResult& a, const ModelResult& b) {
  SCOPED_TRACE(a.name);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.familiar, b.familiar);
  EXPECT_EQ(a.heldout, b.heldout);
  EXPECT_EQ(a.drop, b.drop);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.step_loss, b.step_loss);
  EXPECT_EQ(a.heldout_per_class, b.heldout_per_class);
  EXPECT_EQ(a.circle_acc, b.circle_acc);
  EXPECT_EQ(a.axis_acc, b.axis_acc);
  EXPECT_TRUE(std::isnan(a.act_accuracy) ? std::isnan(b.act_accuracy) : a.act_accuracy == b.act_accuracy);
  EXPECT_TRUE(std::isnan(a.act_true) ? std::isnan(b.act_true) : a.act_true == b.act_true);
  ASSERT_EQ(a.history.size(), b.history.size());
  for (size_t e = 0; e < a.history.size(); ++e) {  // every epoch's held-out accuracy, at each distance
    EXPECT_EQ(a.history[e].familiar, b.history[e].familiar) << e;
    EXPECT_EQ(a.history[e].heldout, b.history[e].heldout) << e;
    EXPECT_EQ(a.history[e].loss, b.history[e].loss) << e;
  }
}

// Each configuration's results run together (`together`) are those it gives run alone.
void expect_each_its_own_runs_bits(const std::vector<RunOptions>& opts, const std::vector<RunResult>& together) {
  ASSERT_EQ(together.size(), opts.size());
  for (size_t k = 0; k < opts.size(); ++k) {
    SCOPED_TRACE(k);
    const RunResult alone = run_experiment(opts[k]);
    EXPECT_TRUE(together[k].error.empty()) << together[k].error;
    ASSERT_EQ(together[k].models.size(), alone.models.size());
    for (size_t m = 0; m < alone.models.size(); ++m) expect_same(together[k].models[m], alone.models[m]);
  }
}

}  // namespace

// The contract a sweep's sharing rests on: at every distance, a protocol's
// dataset trains the same (train and validation samples, and the draws of a
// training split drawn afresh each epoch), and its held-out set moves.
TEST(SweepGroups, AtDistanceMovesOnlyTheHeldOutSet) {
  for (const Protocol* p : swept_protocols()) {
    SCOPED_TRACE(p->name);
    RunOptions o = small_run(*p);
    o.data.seed = 5;
    o.data.n_val_per_combo = 1;
    const Dataset near = make_dataset(p->at_distance(o.data, 0, 60));
    const Dataset far = make_dataset(p->at_distance(o.data, p->axis.name == std::string("azimuth") ? 60 : 10, 60));
    EXPECT_TRUE(same_training(near, far));
    EXPECT_NE(near.heldout.axis, far.heldout.axis);
    // Every sample's draws, not only same_training's probe.
    if (near.train.draw) {
      std::vector<float> x(near.train.pixels()), y(far.train.pixels());
      for (uint64_t epoch : {1, 2, 3})
        for (int i = 0; i < near.train.size(); ++i) {
          near.train.draw(i, epoch, x.data());
          far.train.draw(i, epoch, y.data());
          ASSERT_EQ(x, y) << "sample " << i << ", epoch " << epoch;
        }
    }
  }
}

// Another training set is told apart: a different training range is not the same training.
TEST(SweepGroups, SameTrainingToldApartByTheTrainingSet) {
  RunOptions o = small_run(*swept_protocols().front());
  o.data.seed = 5;
  DataConfig other = o.data;
  other.train_azimuths.to -= 10;
  EXPECT_TRUE(same_training(make_dataset(o.data), make_dataset(o.data)));
  EXPECT_FALSE(same_training(make_dataset(o.data), make_dataset(other)));
  other = o.data;
  other.seed = 6;  // the same views, other noise
  EXPECT_FALSE(same_training(make_dataset(o.data), make_dataset(other)));
}

// run_experiments trains once for the configurations that share a training,
// apart for one that does not, and gives each the bits of run_experiment alone
// (every epoch's held-out accuracy included), for every swept protocol.
TEST(SweepGroups, RunExperimentsGivesEachConfigurationItsOwnRunsBits) {
  for (const Protocol* p : swept_protocols()) {
    SCOPED_TRACE(p->name);
    const RunOptions base = small_run(*p);
    const bool azimuth = p->axis.name == std::string("azimuth");
    std::vector<RunOptions> opts;
    for (double d : {0.0, azimuth ? 30.0 : 5.0, azimuth ? 60.0 : 10.0}) {
      opts.push_back(base);
      opts.back().data = p->at_distance(base.data, d, 60);
    }
    RunOptions apart = opts[1];  // another training set: trained on its own
    if (apart.data.norb) {       // the toys' window: one azimuth fewer (their elevations are the records')
      apart.data.train_azimuths.to -= 10;
      --apart.data.train_azimuths.count;
    } else {
      apart.data.elevations.to -= 10;
    }
    opts.insert(opts.begin() + 2, apart);
    int trainings = 0;
    const std::vector<RunResult> together = run_experiments(opts, &trainings);
    EXPECT_EQ(trainings, 2);
    expect_each_its_own_runs_bits(opts, together);
    for (size_t k = 0; k < opts.size(); ++k) {
      // The training is counted once: in the first configuration of its group.
      const bool first = k == 0 || k == 2;
      for (const ModelResult& m : together[k].models)
        if (!m.step_loss.empty()) {
          EXPECT_EQ(m.train_s > 0, first) << m.name;
        }
    }
  }
}

// Protocols of one source that train alike share a training too: on an IDX
// set the in-plane protocols at their default training ranges (no turn, scale
// or shear: the images at the canvas's centre) train on the same images and
// validate on the same, so run_experiments trains once for a turn's held-out
// set and an affine one's, each with its own run's bits: what `sweep --split
// rotation,affine` shares (a sweep of one protocol never groups them).
TEST(SweepGroups, InPlaneProtocolsThatTrainUnchangedShareATraining) {
  auto run_of = [](const char* split, const char* train_rotation = nullptr) {
    RunFlags f;
    f.data = test::fixture_data("idx:");
    f.split = split;
    f.models = "linear,cnn";
    f.n_epochs = "2";
    *run_flag(f, "validation") = "on";
    if (train_rotation != nullptr) *run_flag(f, "train-rotation") = train_rotation;
    int threads = 1;
    RunOptions o = validate_run(f, &threads);
    o.train.seed = 4;
    return o;
  };
  const RunOptions rotation = run_of("rotation");
  DataConfig seeded = rotation.data;
  seeded.seed = rotation.train.seed;
  const Dataset first = make_dataset(seeded);
  for (const char* split : {"scale", "shear", "affine"}) {
    SCOPED_TRACE(split);
    DataConfig d = run_of(split).data;
    d.seed = rotation.train.seed;
    const Dataset other = make_dataset(d);
    EXPECT_TRUE(same_training(first, other));
    EXPECT_FALSE(same_samples(first.heldout, other.heldout));
  }
  // A training range that changes the images is another training.
  DataConfig t = run_of("rotation", "10").data;
  t.seed = rotation.train.seed;
  EXPECT_FALSE(same_training(first, make_dataset(t)));

  const std::vector<RunOptions> opts{rotation, run_of("affine")};
  int trainings = 0;
  const std::vector<RunResult> together = run_experiments(opts, &trainings);
  EXPECT_EQ(trainings, 1);
  expect_each_its_own_runs_bits(opts, together);
  EXPECT_NE(together[0].models[1].heldout, together[1].models[1].heldout);
}

// Through the binary: `--split rotation,affine` writes each split's sweep, its
// tables (timing aside) and configuration hash those of the split's sweep run
// alone, with one training a seed for the two (they train alike on an IDX set);
// --resume of the pair finds every cell done. A pair that does not train alike
// (translation on its own canvas) trains apart, and its tables are still the
// sweeps run alone.
TEST(SweepGroups, SeveralSplitsRunTogetherWriteTheSweepsRunAlone) {
  const std::string base = vg::test::temp_dir() + "viewgap_splits." + std::to_string(getpid());
  std::filesystem::remove_all(base);
  const std::string args = " --data " + test::fixture_data("idx:") +
                           " --seeds 0:1 --n-epochs 1 --models linear,cnn --validation on --quiet";
  // A table's rows, less its timing column.
  auto rows = [](const std::string& path) {
    const std::string text = test::slurp(path);
    std::vector<std::string> lines = split(text.substr(0, text.size() - 1), '\n');
    const std::vector<std::string> header = split(lines.front(), ',');
    std::vector<std::string> out;
    for (const std::string& line : lines) {
      const std::vector<std::string> f = split(line, ',');
      std::string kept;
      for (size_t c = 0; c < f.size() && c < header.size(); ++c)
        if (header[c] != "seconds") kept += f[c] + ",";
      out.push_back(kept);
    }
    return out;
  };
  auto trainings = [](const std::string& dir) {
    return nlohmann::json::parse(test::slurp(dir + "/meta.json")).at("trainings").at("trainings").get<int>();
  };
  for (const std::string pair : {"rotation,affine", "translation,affine"}) {
    SCOPED_TRACE(pair);
    const std::string together = base + "/" + pair;
    const test::Outcome o = test::run("sweep --split " + pair + " --out " + together + "/{split} --jobs 2" + args);
    ASSERT_EQ(o.code, 0) << o.err;
    const std::vector<std::string> splits = split(pair, ',');
    for (const std::string& s : splits) {
      SCOPED_TRACE(s);
      const std::string alone = base + "/alone_" + s;
      if (!std::filesystem::exists(alone)) {
        ASSERT_EQ(test::run("sweep --split " + s + " --out " + alone + args).code, 0);
      }
      for (const char* table : {"cells.csv", "circle.csv", "trajectory.csv", "provenance.csv", "summary.csv", "frontier.csv", "azimuth.csv"}) {
        SCOPED_TRACE(table);
        EXPECT_EQ(rows(together + "/" + s + "/" + table), rows(alone + "/" + table));
      }
      const nlohmann::json a = nlohmann::json::parse(test::slurp(together + "/" + s + "/meta.json"));
      const nlohmann::json b = nlohmann::json::parse(test::slurp(alone + "/meta.json"));
      EXPECT_EQ(a.at("config_hash"), b.at("config_hash"));
      EXPECT_EQ(a.at("trained_with").size(), 1u);
    }
    // Two seeds, each one training for both (its own training, where the sets differ).
    const int first = trainings(together + "/" + splits[0]), second = trainings(together + "/" + splits[1]);
    EXPECT_EQ(first, 2 * (splits[0] == "translation" ? 2 : 1)) << "each training of the pair counts in the first split's";
    EXPECT_EQ(second, 0);
    const test::Outcome again = test::run("sweep --split " + pair + " --out " + together + "/{split} --resume" + args);
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_NE(again.out.find("(0 run now"), std::string::npos) << again.out;
  }
}

// A configuration whose dataset cannot be made is that one's error; the others run.
TEST(SweepGroups, ADatasetThatCannotBeMadeFailsOnlyItsConfiguration) {
  const RunOptions base = small_run(*swept_protocols().front(), "cnn");
  std::vector<RunOptions> opts{base, base};
  NorbConfig missing;
  missing.dir = vg::test::temp_dir() + "viewgap_no_such_norb." + std::to_string(getpid());
  opts[1].data.norb = missing;
  int trainings = 0;
  const std::vector<RunResult> r = run_experiments(opts, &trainings);
  EXPECT_EQ(trainings, 1);
  EXPECT_TRUE(r[0].error.empty());
  EXPECT_EQ(r[0].models.size(), 1u);
  EXPECT_FALSE(r[1].error.empty());
  EXPECT_TRUE(r[1].models.empty());
}

// Through the binary: a sweep over two gaps writes the cells and circle rows
// of the two one-gap sweeps (cell ids and timing aside), one training per seed.
TEST(SweepGroups, ASweepsTablesAreThoseOfItsOneGapSweeps) {
  const std::string base = vg::test::temp_dir() + "viewgap_groups." + std::to_string(getpid());
  std::filesystem::remove_all(base);
  const std::string args = " --seeds 0:2 --n-epochs 1 --n-per-combo 1 --models caps,cnn --quiet";
  ASSERT_EQ(test::run("sweep --out " + base + "/both --gaps 0,60 --jobs 2" + args).code, 0);
  ASSERT_EQ(test::run("sweep --out " + base + "/g0 --gaps 0" + args).code, 0);
  ASSERT_EQ(test::run("sweep --out " + base + "/g60 --gaps 60" + args).code, 0);
  // The rows of a table as a set, less the columns `drop`.
  auto rows = [&](const std::string& path, std::set<std::string> drop) {
    const std::string text = test::slurp(path);
    std::vector<std::string> lines = split(text.substr(0, text.size() - 1), '\n');
    const std::vector<std::string> header = split(lines.front(), ',');
    std::multiset<std::string> out;
    for (size_t i = 1; i < lines.size(); ++i) {
      const std::vector<std::string> f = split(lines[i], ',');
      std::string kept;
      for (size_t c = 0; c < f.size(); ++c)
        if (!drop.count(header[c])) kept += f[c] + ",";
      out.insert(kept);
    }
    return out;
  };
  for (const char* table : {"cells.csv", "circle.csv"}) {
    SCOPED_TRACE(table);
    std::multiset<std::string> one_gap = rows(base + "/g0/" + table, {"cell", "seconds"});
    for (const std::string& r : rows(base + "/g60/" + table, {"cell", "seconds"})) one_gap.insert(r);
    const std::multiset<std::string> both = rows(base + "/both/" + table, {"cell", "seconds"});
    EXPECT_GT(both.size(), 0u);
    EXPECT_EQ(both, one_gap);
  }
  const auto meta = nlohmann::json::parse(test::slurp(base + "/both/meta.json"));
  EXPECT_EQ(meta["trainings"]["groups"], 3);
  EXPECT_EQ(meta["trainings"]["trainings"], 3);
  std::filesystem::remove_all(base);
}

}  // namespace vg
