// The novel-versus-familiar frontier (harness/frontier.h): the first-check
// rule and the table from hand-made trajectories, frontier.csv written at a
// sweep's end and kept bit for bit by --resume and merge, and its agreement
// with --match-familiar, the stopping rule it applies at every level.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/frontier.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::Outcome;
using test::run;
using test::slurp;
using test::without_seconds;

// A CSV's data rows, each split into its fields.
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) rows.push_back(test::csv_fields(line));
  return rows;
}

// A trained cell x model whose checks had these validation errors (NaN: none);
// its novel error at check k is `heldout[k]`, its familiar one validation + 0.01.
CellRow trained(int cell, uint64_t seed, const std::string& model, const std::vector<double>& validation,
                const std::vector<double>& heldout) {
  CellRow r;
  r.cell = cell;
  r.seed = seed;
  r.gap = 30;
  r.true_gap = 30;
  r.model = model;
  r.axis = "azimuth";
  r.unit = "deg";
  r.status = "ok";
  for (size_t k = 0; k < validation.size(); ++k)
    r.trajectory.push_back({int(k) + 1, long(k + 1) * 10, validation[k], validation[k] + 0.01, heldout[k]});
  r.steps = long(validation.size()) * 10;
  return r;
}

// frontier.csv's rows by "level/kind/model/metric".
std::map<std::string, std::vector<std::string>> by_key(const std::string& csv) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& f : csv_rows(csv)) out[f[5] + "/" + f[6] + "/" + f[7] + "/" + f[8]] = f;
  return out;
}
// Columns of a frontier.csv row.
enum { kSeeds = 9, kN = 10, kMean = 11, kWins = 17, kTies = 18, kLosses = 19, kProb = 20, kP = 21 };

// The first check whose validation error is at most L, "at most" included,
// and not a later, lower one; a trajectory that never gets there has none.
TEST(Frontier, FirstCheckWhereTheValidationErrorReachedTheLevel) {
  const CellRow r = trained(0, 0, "a", {0.5, 0.2, 0.1, 0.15, 0.05}, {0.9, 0.8, 0.7, 0.6, 0.5});
  ASSERT_NE(first_reaching(r.trajectory, 0.2), nullptr);
  EXPECT_EQ(first_reaching(r.trajectory, 0.2)->epoch, 2);   // equal counts
  EXPECT_EQ(first_reaching(r.trajectory, 0.19)->epoch, 3);  // the first below, not the lowest
  EXPECT_EQ(first_reaching(r.trajectory, 0.15)->epoch, 3);  // epoch 4's 0.15 comes later
  EXPECT_EQ(first_reaching(r.trajectory, 1.0)->epoch, 1);
  EXPECT_EQ(first_reaching(r.trajectory, 0.04), nullptr);
  EXPECT_TRUE(has_validation(r.trajectory));
  // At the tables' six decimals, as trajectory.csv holds the errors: 0.2000000004 is 0.2 there.
  ASSERT_NE(first_reaching(trained(0, 0, "a", {0.2000000004}, {0.5}).trajectory, 0.2), nullptr);
  EXPECT_EQ(first_reaching(trained(0, 0, "a", {0.200001}, {0.5}).trajectory, 0.2), nullptr);
  // A check without a validation error never reaches; such a trajectory takes no part.
  const CellRow gaps = trained(0, 0, "a", {NAN, 0.1}, {0.9, 0.8});
  EXPECT_EQ(first_reaching(gaps.trajectory, 0.5)->epoch, 2);
  EXPECT_FALSE(has_validation(gaps.trajectory));
  EXPECT_FALSE(has_validation({}));
}

TEST(Frontier, LevelsRunFromTheLowestReachedToWhereEveryTrainingStopsAtItsFirstCheck) {
  const std::vector<CellRow> rows = {trained(0, 0, "a", {0.5, 0.2, 0.033}, {0.9, 0.8, 0.7}),
                                     trained(0, 0, "b", {0.41, 0.3}, {0.9, 0.8}),
                                     trained(1, 1, "b", {NAN, 0.001}, {0.9, 0.8})};  // takes no part
  const std::vector<double> levels = frontier_levels(rows);
  ASSERT_EQ(levels.size(), size_t((0.5 - 0.035) / kFrontierStep + 1.5));
  EXPECT_DOUBLE_EQ(levels.front(), 0.035);  // the multiple of the step at or above 0.033
  EXPECT_DOUBLE_EQ(levels.back(), 0.5);     // every first check (0.5, 0.41) reached it
  for (size_t k = 1; k < levels.size(); ++k) EXPECT_NEAR(levels[k] - levels[k - 1], kFrontierStep, 1e-12);
  EXPECT_TRUE(frontier_levels({trained(0, 0, "a", {NAN}, {0.5})}).empty());
}

// Three seeds of reference r and model x. At L = 0.2: r reaches it on seeds 0,
// 1 (novel 0.30, 0.40) and never on seed 2; x on seeds 0, 1, 2 (0.35, 0.40,
// 0.45); x's seed 3 has no validation error and is neither in n nor in seeds.
TEST(Frontier, TableByHandExcludesAndCountsSeedsThatNeverReachTheLevel) {
  std::vector<CellRow> rows = {
      trained(0, 0, "r", {0.5, 0.2, 0.1}, {0.6, 0.30, 0.25}), trained(0, 0, "x", {0.15}, {0.35}),
      trained(1, 1, "r", {0.1}, {0.40}),                      trained(1, 1, "x", {0.3, 0.2}, {0.5, 0.40}),
      trained(2, 2, "r", {0.6, 0.3}, {0.7, 0.6}),             trained(2, 2, "x", {0.2}, {0.45}),
      trained(3, 3, "r", {0.2}, {0.5}),                       trained(3, 3, "x", {NAN, NAN}, {0.1, 0.1})};
  rows.push_back(rows.back());  // a failed row: no part either
  rows.back().cell = 4, rows.back().seed = 4, rows.back().status = "failed", rows.back().trajectory.clear();
  const std::string csv = frontier_csv(rows, {"r", "x", "nn"}, "r", {0.2});
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "grid,axis,unit,gap,true_gap,level,kind,model,metric,seeds,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,"
            "losses,prob_improvement,p_value");
  const auto t = by_key(csv);
  // nn has no validation trajectory anywhere: no rows.
  EXPECT_EQ(t.size(), 5u) << csv;
  const auto& r = t.at("0.2/model/r/heldout_error");
  EXPECT_EQ(r[0] + "," + r[1] + "," + r[2] + "," + r[3] + "," + r[4], ",azimuth,deg,30,30");
  EXPECT_EQ(r[kSeeds], "4");  // seeds 0-3 have validation errors
  EXPECT_EQ(r[kN], "3");      // seed 2 never reached 0.2
  EXPECT_NEAR(std::stod(r[kMean]), (0.30 + 0.40 + 0.5) / 3, 1e-6);
  EXPECT_EQ(r[kWins] + r[kTies] + r[kLosses] + r[kProb] + r[kP], "");
  EXPECT_NEAR(std::stod(t.at("0.2/model/r/familiar_error")[kMean]), (0.21 + 0.11 + 0.21) / 3, 1e-6);
  const auto& x = t.at("0.2/model/x/heldout_error");
  EXPECT_EQ(x[kSeeds] + "/" + x[kN], "3/3");
  EXPECT_NEAR(std::stod(x[kMean]), 0.40, 1e-6);
  // Paired r - x over seeds 0, 1 (both reached; seed 2 r did not, seed 3 x has
  // no validation): d = (-0.05, 0), r better once, one tie.
  const auto& p = t.at("0.2/paired/r-x/heldout_error");
  EXPECT_EQ(p[kSeeds] + "/" + p[kN], "3/2");
  EXPECT_NEAR(std::stod(p[kMean]), -0.025, 1e-6);
  EXPECT_EQ(p[kWins] + p[kTies] + p[kLosses], "110");
  EXPECT_NEAR(std::stod(p[kProb]), 0.75, 1e-6);
  EXPECT_NE(p[kP], "nan");

  // The same bytes whatever order the rows come in.
  std::vector<CellRow> shuffled = rows;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  EXPECT_EQ(frontier_csv(shuffled, {"r", "x", "nn"}, "r", {0.2}), csv);
  // The sweep's own grid: every level a row per model and metric and a pair, ascending.
  const std::string grid = frontier_csv(rows, {"r", "x"}, "r");
  const std::vector<double> levels = frontier_levels(rows);
  ASSERT_EQ(test::lines(grid), int(1 + 5 * levels.size()));
  const auto all = csv_rows(grid);
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(std::stod(all[k][5]), levels[k / 5]) << k;
}

// ---- frontier.csv in a sweep directory ----

const std::string kFlags = " --gaps 0,30 --n-epochs 3 --n-per-combo 1 --models cnn,linear --reference cnn --model-lr cnn=1e-3 --quiet";

std::string fresh(const std::string& name) {
  const std::string d = test::temp_dir() + "viewgap_frontier_" + name + "." + std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

// With --validation on: frontier.csv at the sweep's end, as frontier_csv of its
// trajectory.csv; the same bytes after a --resume of a sweep cut short, from
// merged shards and from merged sweeps of disjoint seeds. Without a validation
// split it holds its header only.
TEST(Frontier, WrittenAtTheSweepsEndAndKeptByResumeAndMerge) {
  const std::string full = fresh("full");
  ASSERT_EQ(run("sweep --out " + full + " --seeds 0:2 --validation on --jobs 2" + kFlags).code, 0);
  const std::string frontier = slurp(full + "/frontier.csv");
  const auto rows = csv_rows(frontier);
  ASSERT_GT(rows.size(), 20u) << frontier;
  std::set<std::string> kinds;
  for (const auto& f : rows) {
    ASSERT_EQ(f.size(), 22u);
    kinds.insert(f[6] + "/" + f[7]);
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"model/cnn", "model/linear", "paired/cnn-linear"}));  // cnn: the sweep's reference

  // Resumed after a kill that lost the last cell and a trajectory row of cell 0.
  const std::string cut = fresh("cut");
  ASSERT_EQ(run("sweep --out " + cut + " --seeds 0:2 --validation on --jobs 2" + kFlags).code, 0);
  std::string cells = slurp(cut + "/cells.csv");
  for (int k = 0; k < 2; ++k) cells.erase(cells.rfind('\n', cells.size() - 2) + 1);
  std::ofstream(cut + "/cells.csv", std::ios::trunc) << cells;
  std::string trajectory = slurp(cut + "/trajectory.csv");
  const size_t first = trajectory.find('\n') + 1;
  trajectory.erase(first, trajectory.find('\n', first) + 1 - first);
  std::ofstream(cut + "/trajectory.csv", std::ios::trunc) << trajectory;
  const Outcome resumed = run("sweep --out " + cut + " --resume --seeds 0:2 --validation on --jobs 1" + kFlags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("2 run now, 4 resumed"), std::string::npos) << resumed.out;
  EXPECT_EQ(slurp(cut + "/frontier.csv"), frontier);

  // Shards, merged.
  const std::string s0 = fresh("s0"), s1 = fresh("s1"), merged = fresh("merged");
  for (const auto& [d, k] : {std::pair{s0, 0}, {s1, 1}}) {
    ASSERT_EQ(run("sweep --out " + d + " --seeds 0:2 --validation on --shard " + std::to_string(k) + "/2" + kFlags).code, 0);
    EXPECT_FALSE(std::filesystem::exists(d + "/frontier.csv"));  // statistics need every shard
  }
  const Outcome m = run("merge " + s0 + " " + s1 + " --out " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(slurp(merged + "/frontier.csv"), frontier);
  EXPECT_EQ(slurp(merged + "/trajectory.csv"), slurp(full + "/trajectory.csv"));
  // Sweeps of disjoint seeds, merged.
  const std::string a = fresh("a"), b = fresh("b"), seeds = fresh("seeds");
  ASSERT_EQ(run("sweep --out " + a + " --seeds 0,2 --validation on" + kFlags).code, 0);
  ASSERT_EQ(run("sweep --out " + b + " --seeds 1 --validation on" + kFlags).code, 0);
  const Outcome ms = run("merge " + b + " " + a + " --out " + seeds);
  ASSERT_EQ(ms.code, 0) << ms.err;
  EXPECT_EQ(slurp(seeds + "/frontier.csv"), frontier);

  // No validation split: a header and no rows; the other tables as before.
  const std::string plain = fresh("plain");
  ASSERT_EQ(run("sweep --out " + plain + " --seeds 0:2" + kFlags).code, 0);
  const std::string header = frontier.substr(0, frontier.find('\n') + 1);
  EXPECT_EQ(slurp(plain + "/frontier.csv"), header);
}

// --eval-every: trajectory.csv holds the checks inside an epoch beside the
// epochs' ends, which are the rows of the sweep without it; the frontier is
// made from them all; a lost check row makes its cell run again, to the same tables.
TEST(Frontier, ChecksInsideAnEpochAreTrajectoryRows) {
  const std::string epochs = fresh("epochs"), checks = fresh("checks");
  ASSERT_EQ(run("sweep --out " + epochs + " --seeds 0:1 --validation on" + kFlags).code, 0);
  ASSERT_EQ(run("sweep --out " + checks + " --seeds 0:1 --validation on --eval-every 1" + kFlags).code, 0);
  const std::string with = slurp(checks + "/trajectory.csv"), without = slurp(epochs + "/trajectory.csv");
  const auto with_rows = csv_rows(with), without_rows = csv_rows(without);
  EXPECT_GT(with_rows.size(), without_rows.size());
  // The epochs' rows, in order, among the checks' (every step a row: one a step of each training).
  size_t at = 0;
  for (const auto& r : with_rows)
    if (at < without_rows.size() && r == without_rows[at]) ++at;
  EXPECT_EQ(at, without_rows.size());
  std::map<std::string, long> rows_of, steps_of;
  for (const auto& r : with_rows) {
    ++rows_of[r[0] + "/" + r[4]];
    steps_of[r[0] + "/" + r[4]] = std::stol(r[6]);
  }
  for (const auto& [key, n] : rows_of) EXPECT_EQ(n, steps_of[key]) << key;
  EXPECT_NE(slurp(checks + "/frontier.csv"), slurp(epochs + "/frontier.csv"));

  // A check row lost (the second row: a check of cell 0's first model) and the last cell: both run again.
  const std::string cut = fresh("checks_cut");
  ASSERT_EQ(run("sweep --out " + cut + " --seeds 0:1 --validation on --eval-every 1" + kFlags).code, 0);
  std::string trajectory = slurp(cut + "/trajectory.csv");
  const size_t first = trajectory.find('\n') + 1;
  trajectory.erase(first, trajectory.find('\n', first) + 1 - first);
  std::ofstream(cut + "/trajectory.csv", std::ios::trunc) << trajectory;
  const Outcome resumed = run("sweep --out " + cut + " --resume --seeds 0:1 --validation on --eval-every 1" + kFlags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(slurp(cut + "/trajectory.csv"), with);
  EXPECT_EQ(slurp(cut + "/frontier.csv"), slurp(checks + "/frontier.csv"));
}

// --eval-until: the checks inside an epoch up to its step, the epochs' ends
// after it; a finished sweep's trajectory is whole to --resume, which trains nothing.
TEST(Frontier, ChecksUpToEvalUntilAreWholeToResume) {
  const std::string dir = fresh("until");
  const std::string flags = " --seeds 0:1 --validation on --eval-every 1 --eval-until 2" + kFlags;
  ASSERT_EQ(run("sweep --out " + dir + flags).code, 0);
  const std::string trajectory = slurp(dir + "/trajectory.csv"), frontier = slurp(dir + "/frontier.csv");
  std::map<std::string, std::vector<std::pair<int, long>>> rows;  // (epoch, step) by cell/model
  for (const auto& r : csv_rows(trajectory)) rows[r[0] + "/" + r[4]].emplace_back(std::stoi(r[5]), std::stol(r[6]));
  ASSERT_FALSE(rows.empty());
  for (const auto& [key, t] : rows) {
    SCOPED_TRACE(key);
    ASSERT_GT(t.size(), 3u);
    EXPECT_EQ(t[0].second, 1);
    EXPECT_EQ(t[1].second, 2);
    for (size_t e = 2; e < t.size(); ++e)  // after step 2, the epochs' ends alone
      EXPECT_EQ(t[e].second, long(t[e].first) * t.back().second / long(t.back().first));
  }
  const Outcome resumed = run("sweep --out " + dir + " --resume" + flags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/meta.json"))["trainings"]["groups"], 0);
  EXPECT_EQ(slurp(dir + "/trajectory.csv"), trajectory);
  EXPECT_EQ(slurp(dir + "/frontier.csv"), frontier);
}

// --model-eval-every: one model's own checks are trajectory rows of that model
// alone; a finished sweep's trajectory is whole to --resume, which trains nothing.
TEST(Frontier, AModelsOwnChecksAreWholeToResume) {
  const std::string dir = fresh("own"), plain = fresh("own_plain");
  const std::string flags = " --seeds 0:1 --validation on --model-eval-every cnn=1:2" + kFlags;
  ASSERT_EQ(run("sweep --out " + plain + " --seeds 0:1 --validation on" + kFlags).code, 0);
  ASSERT_EQ(run("sweep --out " + dir + flags).code, 0);
  const std::string trajectory = slurp(dir + "/trajectory.csv"), frontier = slurp(dir + "/frontier.csv");
  std::map<std::string, std::vector<long>> steps, plain_steps;  // by cell/model
  for (const auto& r : csv_rows(trajectory)) steps[r[0] + "/" + r[4]].push_back(std::stol(r[6]));
  for (const auto& r : csv_rows(slurp(plain + "/trajectory.csv"))) plain_steps[r[0] + "/" + r[4]].push_back(std::stol(r[6]));
  ASSERT_EQ(steps.size(), plain_steps.size());
  int cnn = 0;
  for (const auto& [key, t] : steps) {
    SCOPED_TRACE(key);
    std::vector<long> expected = plain_steps[key];
    if (key.substr(key.find('/') + 1) == "cnn") {
      expected.insert(expected.begin(), {1, 2});
      ++cnn;
    }
    EXPECT_EQ(t, expected);
  }
  EXPECT_GT(cnn, 0);
  const Outcome resumed = run("sweep --out " + dir + " --resume" + flags);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/meta.json"))["trainings"]["groups"], 0);
  EXPECT_EQ(slurp(dir + "/trajectory.csv"), trajectory);
  EXPECT_EQ(slurp(dir + "/frontier.csv"), frontier);
}

// ---- --resume with other checks of one model ----

// cells.csv's lines of `model`, whole (the seconds included: a kept row's
// are its first training's).
std::vector<std::string> lines_of(const std::string& cells_csv, const std::string& model) {
  std::vector<std::string> out;
  std::stringstream ss(cells_csv);
  for (std::string line; std::getline(ss, line);)
    if (line.find("," + model + ",") != std::string::npos) out.push_back(line);
  return out;
}

// A sweep resumed with another --model-eval-every for one model (a recheck)
// trains that model again and keeps every other model's rows: its tables are
// those of a sweep run with the new checks from the start (timing aside), the
// kept rows the old ones to the byte, and only the rechecked model trains.
// With a grid, the model read by the grid trains at every grid point and the
// one shared between grid points once a seed, whichever is rechecked.
TEST(Frontier, ARecheckTrainsOnlyTheModelWhoseChecksChanged) {
  for (const std::string grid : {"", " --grid cnn-hidden=16,32"})
    for (const std::string model : {"linear", "cnn"}) {
      SCOPED_TRACE(model + grid);
      const std::string other = model == "cnn" ? "linear" : "cnn";
      const std::string base = fresh("recheck_" + model), want = fresh("recheck_want_" + model);
      const std::string flags = " --seeds 0:1 --validation on" + grid + kFlags, checks = " --model-eval-every " + model + "=1:2";
      ASSERT_EQ(run("sweep --out " + base + flags).code, 0);
      ASSERT_EQ(run("sweep --out " + want + flags + checks).code, 0);
      const std::string before = slurp(base + "/cells.csv");
      // Without --resume, or beside another change, it is another sweep.
      EXPECT_EQ(run("sweep --out " + base + flags + checks).code, 2);
      const Outcome changed = run("sweep --out " + base + " --resume --lr 1e-3" + checks);
      EXPECT_EQ(changed.code, 2);
      EXPECT_NE(changed.err.find("--lr is"), std::string::npos) << changed.err;
      EXPECT_EQ(slurp(base + "/cells.csv"), before);

      const Outcome r = run("sweep --out " + base + " --resume" + checks);
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_NE(r.err.find("rows of unfinished cells kept"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("trained again: " + model + "\n"), std::string::npos) << r.err;
      for (const char* f : {"trajectory.csv", "frontier.csv", "summary.csv", "circle.csv", "azimuth.csv", "provenance.csv"})
        EXPECT_EQ(slurp(base + "/" + f), slurp(want + "/" + f)) << f;
      EXPECT_EQ(test::without_seconds(slurp(base + "/cells.csv")), test::without_seconds(slurp(want + "/cells.csv")));
      EXPECT_EQ(lines_of(slurp(base + "/cells.csv"), other), lines_of(before, other));
      const nlohmann::json meta = nlohmann::json::parse(slurp(base + "/meta.json")),
                           fresh_meta = nlohmann::json::parse(slurp(want + "/meta.json"));
      EXPECT_EQ(meta["config_hash"], fresh_meta["config_hash"]);
      // A model the grid does not read trains once a seed; the other at each grid point.
      const int seeds = 2, points = grid.empty() ? 1 : 2;
      EXPECT_EQ(meta["trainings"]["models"], model == "cnn" ? seeds * points : seeds);
      // Resumed again, it is whole: nothing trains.
      const Outcome again = run("sweep --out " + base + " --resume --quiet");
      ASSERT_EQ(again.code, 0) << again.err;
      EXPECT_EQ(nlohmann::json::parse(slurp(base + "/meta.json"))["trainings"]["groups"], 0);
    }
}

// A recheck's trainings in progress hold the old checks: refused while a
// checkpoint is there, the directory untouched.
TEST(Frontier, ARecheckWaitsForTheTrainingsInProgress) {
  const std::string dir = fresh("recheck_ck");
  const std::string flags = " --seeds 0:1 --validation on" + kFlags;
  ASSERT_EQ(run("sweep --out " + dir + flags).code, 0);
  std::filesystem::create_directories(dir + "/checkpoints");
  std::ofstream(dir + "/checkpoints/cell-0-cnn.vgck") << "x";
  const std::string meta = slurp(dir + "/meta.json");
  const Outcome r = run("sweep --out " + dir + " --resume --model-eval-every cnn=1");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(test::lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--model-eval-every"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("trainings in progress"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(dir + "/meta.json"), meta);
}

// ---- agreement with --match-familiar ----

struct Checks {
  uint64_t seed = 0;
  double gap = 0;
  std::vector<TrajectoryPoint> points;
  std::vector<std::vector<std::string>> text;  // the rows as written
};
// trajectory.csv by (cell, model).
std::map<std::pair<std::string, std::string>, Checks> read_trajectory(const std::string& dir) {
  std::map<std::pair<std::string, std::string>, Checks> out;
  for (const auto& f : csv_rows(slurp(dir + "/trajectory.csv"))) {
    Checks& c = out[{f[0], f[4]}];
    c.seed = std::stoull(f[1]);
    c.gap = std::stod(f[2]);
    c.points.push_back({std::stoi(f[5]), std::stol(f[6]), f[7] == "nan" ? NAN : std::stod(f[7]), std::stod(f[8]),
                        std::stod(f[9])});
    c.text.push_back(f);
  }
  return out;
}

// A sweep whose cnn stops at linear's final familiar validation accuracy
// (--match-familiar linear) and one of full trainings (--validation on): for
// every cell, the frontier of the full trainings at L = linear's final
// validation error gives the novel error the stopped cnn ended at, at the
// same step; where cnn never reached L it trained to the cap, and the
// frontier counts it out. The configurations make both happen, and stops on
// exact equality of the two accuracies.
TEST(Frontier, AgreesWithMatchFamiliarAtTheMatchedLevel) {
  int stopped = 0, never = 0, equal = 0;
  for (const std::string flags : {" --n-epochs 3 --model-lr cnn=1e-3", " --n-epochs 4 --model-lr cnn=3e-4"}) {
    SCOPED_TRACE(flags);
    const std::string common = " --seeds 0:2 --gaps 0,30 --n-per-combo 1 --models cnn,linear --quiet" + flags;
    const std::string matched = fresh("matched"), full = fresh("fulltrain");
    ASSERT_EQ(run("sweep --out " + matched + " --match-familiar linear" + common).code, 0);
    ASSERT_EQ(run("sweep --out " + full + " --validation on" + common).code, 0);
    const auto stop = read_trajectory(matched), all = read_trajectory(full);
    std::map<std::string, std::vector<std::string>> cells;  // cell -> cnn's cells.csv row in the matched sweep
    for (const auto& f : csv_rows(slurp(matched + "/cells.csv")))
      if (f[7] == "cnn") cells[f[0]] = f;
    ASSERT_EQ(cells.size(), 6u);
    for (const auto& [cell, row] : cells) {
      SCOPED_TRACE("cell " + cell);
      // linear trained in full in both: the same checks, the last its target.
      const Checks& lin = all.at({cell, "linear"});
      ASSERT_EQ(stop.at({cell, "linear"}).text, lin.text);
      const std::string level_text = lin.text.back()[7];
      const double level = std::stod(level_text);
      // The frontier of the full trainings, this cell alone, at that level.
      std::vector<CellRow> rows;
      for (const char* m : {"cnn", "linear"}) {
        const Checks& c = all.at({cell, m});
        CellRow r;
        r.cell = std::stoi(cell), r.seed = c.seed, r.gap = c.gap, r.true_gap = c.gap, r.model = m;
        r.axis = "azimuth", r.unit = "deg", r.status = "ok", r.trajectory = c.points, r.steps = c.points.back().step;
        rows.push_back(r);
      }
      const auto t = by_key(frontier_csv(rows, {"cnn", "linear"}, "cnn", {level}));
      const auto& cnn = t.at(num(level, "%g") + "/model/cnn/heldout_error");
      ASSERT_EQ(cnn[kSeeds], "1");
      const Checks& ran = stop.at({cell, "cnn"});
      const Checks& whole = all.at({cell, "cnn"});
      const auto& last = ran.text.back();
      // The stopped training is the full one's first checks.
      ASSERT_LE(ran.text.size(), whole.text.size());
      for (size_t k = 0; k < ran.text.size(); ++k) ASSERT_EQ(ran.text[k], whole.text[k]) << k;
      const bool reached = std::stod(last[7]) <= level;  // the stopped cnn's last validation at the target
      if (reached) {
        ASSERT_EQ(cnn[kN], "1");
        EXPECT_EQ(cnn[kMean], last[9]);  // the same novel error, to the last digit written
        EXPECT_EQ(first_reaching(whole.points, level)->step, std::stol(row[13]));  // at the step it stopped
        EXPECT_NEAR(1 - std::stod(row[10]), std::stod(last[9]), 1.5e-6);  // the stopped cnn's final novel error
        stopped += ran.text.size() < whole.text.size();
        equal += last[7] == level_text;
      } else {
        EXPECT_EQ(cnn[kN], "0");  // never reached: counted out
        EXPECT_EQ(ran.text.size(), whole.text.size());  // and the rule never stopped it
        ++never;
      }
    }
  }
  EXPECT_GT(stopped, 0);  // a stop before the cap
  EXPECT_GT(never, 0);    // a training that never reached the level
  EXPECT_GT(equal, 0);    // a stop where the accuracies are equal
}

}  // namespace
}  // namespace vg
