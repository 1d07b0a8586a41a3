// A grid over a model's own option trains the other models once: a model that
// reads none of the options in which two grid points differ trains at the
// first of them (per seed, within a shard), and its rows are written at both,
// the bits it would have had trained there; --pair-grid pairs it nowhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "harness/run_flags.h"
#include "harness/sweep_plan.h"
#include "harness/sweep_store.h"
#include "harness/sweep_resume.h"
#include "tests/test_provenance.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::csv_fields;
using test::Outcome;
using test::run;
using test::slurp;
using test::without_seconds;

SweepFlags grid_sweep(const std::vector<std::string>& grid, const std::string& models = "caps,cnn") {
  SweepFlags f;
  f.run.train_az = sweep_run_defaults().train_az;
  f.run.models = models;
  f.seeds = "0:1";
  f.gaps = "0,60";
  f.jobs = "1";
  f.out = "unused";
  f.grid = grid;
  return f;
}

// The grid point (its grid string) whose cell trains `model` for cell c.
std::string trained_at(const SweepPlan& p, const SweepCell& c, const std::string& model) {
  const size_t k = size_t(std::find(p.models.begin(), p.models.end(), model) - p.models.begin());
  const SweepCell& from = p.cells[size_t(p.trained_in(c, k))];
  EXPECT_EQ(from.seed, c.seed);
  EXPECT_EQ(from.gap, c.gap);
  return from.grid;
}

std::string fresh_dir(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_share_" + name + "." + std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

// cells.csv without the columns a shared row may differ in from its training's
// own (cell, grid, seconds), one line per row, for the rows of `grid`.
std::vector<std::string> rows_of(const std::string& cells_csv, const std::string& grid) {
  std::vector<std::string> out;
  std::istringstream in(without_seconds(cells_csv));
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream s(line);
    for (std::string x; std::getline(s, x, ',');) f.push_back(x);
    if (f.size() < 8 || f[6] != grid) continue;
    std::string kept;
    for (size_t i = 1; i < f.size(); ++i)
      if (i != 6) kept += f[i] + ',';
    out.push_back(kept);
  }
  return out;
}

nlohmann::json trainings(const std::string& dir) { return nlohmann::json::parse(slurp(dir + "/meta.json"))["trainings"]; }

// provenance.csv's fields after cell and seed as this binary writes them, as one CSV text.
std::string own_provenance(const std::string& dir) {
  std::string line;
  for (const std::string& f : test::own_provenance(dir)) line += (line.empty() ? "" : ",") + f;
  return line;
}
const std::string kUnknown = "unknown,unknown,unknown,unknown,unknown,unknown";

// provenance.csv of `dir` by grid point: its cells' rows' provenance (the
// fields after cell and seed), checked to hold exactly one row per cell of
// cells.csv, with that cell's seed, and no other.
std::map<std::string, std::vector<std::string>> provenance_by_grid(const std::string& dir) {
  std::map<std::string, std::pair<std::string, std::string>> cell;  // id -> seed, grid (cells.csv)
  std::istringstream cells(slurp(dir + "/cells.csv"));
  std::string line;
  std::getline(cells, line);
  while (std::getline(cells, line)) {
    const auto f = csv_fields(line);
    if (f.size() > 6) cell[f[0]] = {f[1], f[6]};
  }
  const std::string text = slurp(dir + "/provenance.csv");
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), kProvenanceHeader) << dir;
  std::istringstream in(text);
  std::getline(in, line);
  std::set<std::string> seen;
  std::map<std::string, std::vector<std::string>> by_grid;
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    EXPECT_EQ(f.size(), 8u) << line;
    if (f.size() != 8) continue;
    EXPECT_TRUE(seen.insert(f[0]).second) << "cell " << f[0] << " twice: " << line;
    const auto it = cell.find(f[0]);
    if (it == cell.end()) {
      ADD_FAILURE() << dir << ": provenance row of a cell not in cells.csv: " << line;
      continue;
    }
    EXPECT_EQ(f[1], it->second.first) << line;
    by_grid[it->second.second].push_back(line.substr(f[0].size() + f[1].size() + 2));
  }
  EXPECT_EQ(seen.size(), cell.size()) << dir << ": a cell of cells.csv without its provenance row";
  return by_grid;
}

const std::string kTiny = " --seeds 0:1 --n-epochs 1 --n-per-combo 1 --quiet --models caps,cnn";

}  // namespace

TEST(SweepShare, AModelTrainsOncePerValueOfTheOptionsItReads) {
  // cnn reads no EM option: trained at em-iters=1 for every grid point.
  const SweepPlan em = plan_sweep(grid_sweep({"em-iters=1,2,3"}));
  ASSERT_EQ(em.cells.size(), 3u * 2 * 2);
  for (const SweepCell& c : em.cells) {
    EXPECT_EQ(trained_at(em, c, "caps"), c.grid);
    EXPECT_EQ(trained_at(em, c, "cnn"), "em-iters=1");
  }
  // Every model reads a training flag: --lr retrains each at every point.
  const SweepPlan lr = plan_sweep(grid_sweep({"lr=1e-3,2e-3"}));
  for (const SweepCell& c : lr.cells)
    for (const std::string& m : lr.models) EXPECT_EQ(trained_at(lr, c, m), c.grid);
  // Two axes: cnn is shared along em-iters only.
  const SweepPlan two = plan_sweep(grid_sweep({"em-iters=1,2", "lr=1e-3,2e-3"}));
  for (const SweepCell& c : two.cells) {
    EXPECT_EQ(trained_at(two, c, "caps"), c.grid);
    EXPECT_EQ(trained_at(two, c, "cnn"), "em-iters=1;" + c.grid.substr(c.grid.find("lr=")));
  }
  // Under --match-familiar caps, cnn stops at caps's accuracy: it reads what caps reads.
  SweepFlags matched = grid_sweep({"em-iters=1,2"});
  matched.run.match_familiar = "caps";
  const SweepPlan mf = plan_sweep(matched);
  for (const SweepCell& c : mf.cells)
    for (const std::string& m : mf.models) EXPECT_EQ(trained_at(mf, c, m), c.grid);
  // ... and a model matched to is trained wherever another model is.
  matched = grid_sweep({"em-iters=1,2"});
  matched.run.match_familiar = "cnn";
  const SweepPlan mc = plan_sweep(matched);
  for (const SweepCell& c : mc.cells)
    for (const std::string& m : mc.models) EXPECT_EQ(trained_at(mc, c, m), c.grid);
  // --match-familiar gridded: every model reads it, and caps's options with it.
  SweepFlags either = grid_sweep({"match-familiar=caps,cnn", "em-iters=1,2"});
  const SweepPlan me = plan_sweep(either);
  for (const SweepCell& c : me.cells)
    for (const std::string& m : me.models) EXPECT_EQ(trained_at(me, c, m), c.grid);
  // A shard trains what it needs itself: seeds 0:1 over 2 shards put the
  // groups (point, seed) 0, 2, 4 in shard 0 and 1, 3, 5 in shard 1 either way.
  SweepFlags sharded = grid_sweep({"em-iters=1,2,3"});
  sharded.shard = "1/2";
  const SweepPlan sh = plan_sweep(sharded);
  for (const SweepCell& c : sh.cells) EXPECT_EQ(trained_at(sh, c, "cnn"), "em-iters=1");
  sharded = grid_sweep({"em-iters=1,2,3"});
  sharded.seeds = "0:2";  // groups 0..8: point 1's seed 0 is group 3, in shard 1; point 0's in shard 0
  sharded.shard = "1/2";
  const SweepPlan sh3 = plan_sweep(sharded);
  for (const SweepCell& c : sh3.cells)
    if (sh3.in_shard(c)) {
      const SweepCell& from = sh3.cells[size_t(sh3.trained_in(c, 1))];
      EXPECT_TRUE(sh3.in_shard(from)) << c.id;
      EXPECT_LE(from.group, c.group);
    }
  // --pair-grid pairs only the models whose training differs between the points.
  SweepFlags paired = grid_sweep({"em-iters=1,2", "lr=1e-3,2e-3"});
  paired.pair_grid = {"em-iters=1;lr=1e-3|em-iters=2;lr=1e-3", "em-iters=1;lr=1e-3|em-iters=1;lr=2e-3"};
  const SweepPlan pp = plan_sweep(paired);
  ASSERT_EQ(pp.grid_pair_models.size(), 2u);
  EXPECT_EQ(pp.grid_pair_models[0], std::vector<std::string>({"caps"}));
  EXPECT_EQ(pp.grid_pair_models[1], std::vector<std::string>({"caps", "cnn"}));
  // Sharing is no part of the configuration: the hash is the sweep's as before.
  EXPECT_FALSE(em.config.contains("trained_in"));
}

// Flags joined by '+' take each value together: a grid point sets all of
// them (the official routing's four options are one recipe, not 16 points),
// reads as their settings, is shared by the models that read none of them,
// is picked by --pair-grid by any of them, and resumes as typed.
TEST(SweepShare, AJoinedAxisSetsItsFlagsTogether) {
  const std::string recipe = "em-logit+em-norm+em-mean+em-class-lambda=paper,official";
  SweepFlags f = grid_sweep({recipe, "lr=1e-3,2e-3"}, "convcaps,cnn");
  f.pair_grid = {"em-logit=official;lr=1e-3|em-norm=paper;lr=1e-3"};
  const SweepPlan p = plan_sweep(f);
  ASSERT_EQ(p.cells.size(), 4u * 2 * 2);
  const std::string paper = "em-logit=paper;em-norm=paper;em-mean=paper;em-class-lambda=paper";
  const std::string official = "em-logit=official;em-norm=official;em-mean=official;em-class-lambda=official";
  std::set<std::string> grids;
  for (const SweepCell& c : p.cells) {
    grids.insert(c.grid);
    const bool off = c.grid.rfind(official, 0) == 0;
    EXPECT_EQ(c.opt.train.model.at("em-logit"), off ? "official" : "paper") << c.grid;
    EXPECT_EQ(c.opt.train.model.at("em-class-lambda"), off ? "official" : "paper") << c.grid;
    EXPECT_EQ(trained_at(p, c, "convcaps"), c.grid);
    EXPECT_EQ(trained_at(p, c, "cnn"), paper + c.grid.substr(c.grid.find(";lr=")));
  }
  EXPECT_EQ(grids, (std::set<std::string>{paper + ";lr=1e-3", paper + ";lr=2e-3", official + ";lr=1e-3",
                                          official + ";lr=2e-3"}));
  ASSERT_EQ(p.grid_pairs.size(), 1u);
  EXPECT_EQ(p.grid_pairs[0], std::make_pair(official + ";lr=1e-3", paper + ";lr=1e-3"));
  EXPECT_EQ(p.grid_pair_models[0], std::vector<std::string>({"convcaps"}));
  // The configuration keeps the axis as typed, and --resume plans it again.
  EXPECT_EQ(p.config.at("grid").at(0).at(0), "em-logit+em-norm+em-mean+em-class-lambda");
  EXPECT_EQ(sweep_flags_of(p.config).grid.at(0), recipe);
  // A flag in two axes, a bad flag or value in a joined one: named as typed.
  auto error = [](const SweepFlags& g) {
    try {
      plan_sweep(g);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(grid_sweep({recipe, "em-norm=paper,official"}, "convcaps,cnn")),
            "--grid 'em-norm=paper,official': flag 'em-norm' gridded twice");
  EXPECT_EQ(error(grid_sweep({"em-logit+em-logit=paper,official"}, "convcaps,cnn")),
            "--grid 'em-logit+em-logit=paper,official': flag 'em-logit' gridded twice");
  const std::string bad = error(grid_sweep({"em-logit+nonesuch=paper,official"}, "convcaps,cnn"));
  EXPECT_EQ(bad.rfind("--grid 'em-logit+nonesuch=paper,official': expected NAME=v1,v2,...", 0), 0u) << bad;
  const std::string value = error(grid_sweep({"em-logit+em-iters=paper,official"}, "convcaps,cnn"));
  EXPECT_EQ(value.rfind("--grid 'em-logit+em-iters=paper,official': --em-iters 'paper': ", 0), 0u) << value;
  SweepFlags fixed = grid_sweep({recipe}, "convcaps,cnn");
  fixed.run.model["em-mean"] = "official";
  EXPECT_EQ(error(fixed), "--grid '" + recipe + "': conflicts with --em-mean 'official' (give one of them)");
}

// cnn trains once per seed (meta.json counts the models trained), its rows at
// em-iters=2 are those at em-iters=1 and those of a sweep run at --em-iters 2
// alone; caps is paired across the grid, cnn is not.
TEST(SweepShare, SharedRowsAreTheTrainingsOwnAndUnpaired) {
  const std::string base = fresh_dir("rows"), grid = base + "/grid", alone = base + "/alone";
  const Outcome o = run("sweep --out " + grid + kTiny + " --gaps 0,30 --jobs 2 --grid em-iters=1,2 --pair-grid 'em-iters=1|em-iters=2'");
  ASSERT_EQ(o.code, 0) << o.err;
  ASSERT_EQ(run("sweep --out " + alone + kTiny + " --gaps 0,30 --jobs 1 --em-iters 2").code, 0);
  EXPECT_EQ(trainings(grid)["models"], 2 * 2 + 2);  // caps at each of 2 points and 2 seeds, cnn per seed
  EXPECT_EQ(trainings(grid)["groups"], 4);
  const std::string cells = slurp(grid + "/cells.csv");
  const std::vector<std::string> at1 = rows_of(cells, "em-iters=1"), at2 = rows_of(cells, "em-iters=2");
  EXPECT_EQ(rows_of(slurp(alone + "/cells.csv"), ""), at2);
  ASSERT_EQ(at1.size(), 8u);  // 2 seeds x 2 gaps x 2 models, caps then cnn
  for (size_t i = 1; i < at1.size(); i += 2) EXPECT_EQ(at1[i], at2[i]) << i;
  const std::string summary = slurp(grid + "/summary.csv");
  EXPECT_NE(summary.find(",paired-grid,caps,heldout,"), std::string::npos);
  EXPECT_EQ(summary.find(",paired-grid,cnn,"), std::string::npos);
  // provenance.csv: one row per cell, em-iters=2's (their cnn rows copied) too.
  const auto prov = provenance_by_grid(grid);
  ASSERT_EQ(prov.size(), 2u);
  for (const auto& [point, rows] : prov) {
    EXPECT_EQ(rows, std::vector<std::string>(4, own_provenance(grid))) << point;  // 2 seeds x 2 gaps
  }
  std::filesystem::remove_all(base);
}

// Resumed with the cells of em-iters=2 lost, a sweep copies cnn's rows from
// em-iters=1's finished cells and trains caps alone: the tables are the
// uninterrupted sweep's.
TEST(SweepShare, ResumeCopiesTheFinishedCellsRows) {
  const std::string base = fresh_dir("resume"), full = base + "/full", cut = base + "/cut";
  const std::string args = kTiny + " --gaps 0 --grid em-iters=1,2 --jobs 1";
  ASSERT_EQ(run("sweep --out " + full + args).code, 0);
  std::filesystem::copy(full, cut);
  const std::string cells = slurp(full + "/cells.csv");
  const std::string before = cells.substr(0, cells.find(",em-iters=2,"));  // the rows of em-iters=1
  std::ofstream(cut + "/cells.csv", std::ios::trunc) << before.substr(0, before.rfind('\n') + 1);
  const Outcome r = run("sweep --out " + cut + args + " --resume");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(trainings(cut)["models"], 2);  // caps at em-iters=2, for each seed
  for (const char* f : {"summary.csv", "circle.csv", "trajectory.csv", "provenance.csv"})
    EXPECT_EQ(slurp(cut + "/" + f), slurp(full + "/" + f)) << f;
  EXPECT_EQ(without_seconds(slurp(cut + "/cells.csv")), without_seconds(cells));
  std::filesystem::remove_all(base);
}

// A cell whose rows come from trainings of different processes names, in
// provenance.csv, the process that trained its own models; one that trains
// none, the one that trained its first model. Here a sweep begun before
// provenance.csv (its cells "unknown") resumes with em-iters=2's cells lost:
// caps (reading em-iters) trains at em-iters=2;cnn-hidden=8 here, cnn (reading
// cnn-hidden) is copied from em-iters=1's "unknown" cells, and
// em-iters=2;cnn-hidden=16 trains nothing itself: its caps is copied from
// cnn-hidden=8 (this build's), its cnn from em-iters=1 ("unknown").
TEST(SweepShare, ACellNamesTheProcessThatTrainedItsOwnModels) {
  const std::string base = fresh_dir("provenance");
  for (const std::string first : {"cnn", "caps"}) {
    SCOPED_TRACE(first);
    const std::string dir = base + "/" + first, models = first == "cnn" ? "cnn,caps" : "caps,cnn";
    const std::string args = " --seeds 0:1 --n-epochs 1 --n-per-combo 1 --quiet --gaps 0 --jobs 1 --models " + models +
                             " --grid em-iters=1,2 --grid cnn-hidden=8,16";
    const Outcome o = run("sweep --out " + dir + args);
    ASSERT_EQ(o.code, 0) << o.err;
    const std::string cells = slurp(dir + "/cells.csv");
    std::string kept;
    std::istringstream in(cells);
    for (std::string line; std::getline(in, line);)
      if (line.find(",em-iters=2;") == std::string::npos) kept += line + '\n';
    ASSERT_NE(kept, cells);
    std::ofstream(dir + "/cells.csv", std::ios::trunc) << kept;
    std::filesystem::remove(dir + "/provenance.csv");
    const Outcome r = run("sweep --out " + dir + args + " --resume");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(trainings(dir)["models"], 2);  // caps at em-iters=2;cnn-hidden=8, for each seed
    EXPECT_EQ(without_seconds(slurp(dir + "/cells.csv")), without_seconds(cells));
    const auto prov = provenance_by_grid(dir);
    ASSERT_EQ(prov.size(), 4u);
    const std::vector<std::string> unknown(2, kUnknown), own(2, own_provenance(dir));  // 2 seeds
    EXPECT_EQ(prov.at("em-iters=1;cnn-hidden=8"), unknown);
    EXPECT_EQ(prov.at("em-iters=1;cnn-hidden=16"), unknown);
    EXPECT_EQ(prov.at("em-iters=2;cnn-hidden=8"), own);
    EXPECT_EQ(prov.at("em-iters=2;cnn-hidden=16"), first == "cnn" ? unknown : own);
    // Kept as it is by a resume with nothing to run.
    const std::string kept_provenance = slurp(dir + "/provenance.csv");
    ASSERT_EQ(run("sweep --out " + dir + args + " --resume").code, 0);
    EXPECT_EQ(slurp(dir + "/provenance.csv"), kept_provenance);
  }
  std::filesystem::remove_all(base);
}

// A shard trains what its grid points share within itself (shard K/2 holds
// seed K's groups at both points: cnn trains once in each), and the shards
// merge into the unsharded sweep's tables.
TEST(SweepShare, ShardsShareWithinThemselvesAndMerge) {
  const std::string base = fresh_dir("shards"), full = base + "/full", merged = base + "/merged";
  const std::string args = kTiny + " --gaps 0 --grid em-iters=1,2 --jobs 1";
  ASSERT_EQ(run("sweep --out " + full + args).code, 0);
  std::string dirs;
  for (int k = 0; k < 2; ++k) {
    const std::string d = base + "/s" + std::to_string(k);
    const Outcome o = run("sweep --out " + d + args + " --shard " + std::to_string(k) + "/2");
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(trainings(d)["models"], 3) << k;
    dirs += " " + d;
  }
  const Outcome m = run("merge" + dirs + " --out " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  for (const char* f : {"summary.csv", "circle.csv", "trajectory.csv", "provenance.csv"})
    EXPECT_EQ(slurp(merged + "/" + f), slurp(full + "/" + f)) << f;
  EXPECT_EQ(without_seconds(slurp(merged + "/cells.csv")), without_seconds(slurp(full + "/cells.csv")));
  std::filesystem::remove_all(base);
}

}  // namespace vg
