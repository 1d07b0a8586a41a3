// viewgap sweep: bad input before any cell, results independent of --jobs,
// resuming after a kill, and the statistics tables.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/sweep_summary.h"
#include "tests/test_provenance.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::lines;
using test::csv_fields;
using test::without_seconds;
using test::Outcome;
using test::run;
using test::slurp;

const std::string kTiny = " --seeds 0:2 --gaps 0,30 --n-epochs 1 --n-per-combo 1 --quiet";

std::string fresh_dir(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_sweep_" + name + "." + std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

using test::own_provenance;
const std::vector<std::string> kUnknownProvenance(6, "unknown");

// Checks that `dir`'s provenance.csv holds one row per cell of its cells.csv
// (the cell's seed, eight fields) and returns the rows' provenance by seed
// (every cell of a seed sharing one here) and the cells' count.
std::map<std::string, std::vector<std::string>> provenance_by_seed(const std::string& dir, int* n_cells = nullptr) {
  std::map<std::string, std::string> seed_of;  // cell -> seed, from cells.csv
  std::istringstream cells(slurp(dir + "/cells.csv"));
  std::string line;
  std::getline(cells, line);
  while (std::getline(cells, line)) seed_of[csv_fields(line)[0]] = csv_fields(line)[1];
  const std::string text = slurp(dir + "/provenance.csv");
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), kProvenanceHeader) << dir;
  std::istringstream in(text);
  std::getline(in, line);
  std::map<std::string, std::vector<std::string>> by_seed;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    EXPECT_EQ(f.size(), 8u) << line;
    if (f.size() != 8) continue;
    EXPECT_TRUE(seen.insert(f[0]).second) << "cell " << f[0] << " twice: " << line;
    EXPECT_EQ(seed_of.count(f[0]) ? seed_of[f[0]] : "(not in cells.csv)", f[1]) << line;
    const std::vector<std::string> p(f.begin() + 2, f.end());
    if (by_seed.count(f[1])) {
      EXPECT_EQ(by_seed[f[1]], p) << "seed " << f[1] << " made by two builds: " << line;
    }
    by_seed[f[1]] = p;
  }
  EXPECT_EQ(seen.size(), seed_of.size()) << dir << ": a cell of cells.csv without its provenance row";
  if (n_cells) *n_cells = int(seen.size());
  return by_seed;
}

// Every cell of `dir` made by this binary on this machine.
void expect_own_provenance(const std::string& dir, int cells) {
  SCOPED_TRACE(dir);
  int n = 0;
  const auto by_seed = provenance_by_seed(dir, &n);
  EXPECT_EQ(n, cells);
  for (const auto& [seed, p] : by_seed) EXPECT_EQ(p, own_provenance(dir)) << "seed " << seed;
}


TEST(Sweep, BadInputIsOneLineExitTwoBeforeAnyCell) {
  const std::string dir = fresh_dir("bad");
  const std::pair<std::string, std::string> cases[] = {
      {"--seeds 5:2", "--seeds '5:2'"},
      {"--seeds a:b", "--seeds 'a'"},
      {"--seeds 1,1", "--seeds '1,1'"},
      {"--seeds ''", "--seeds"},
      {"--gaps 30,x", "--gaps 'x'"},
      {"--gaps 30,30", "--gaps '30,30'"},
      {"--gaps 300", "--gaps '300'"},  // 60 + 300 + 60 wraps onto azimuth 0
      {"--jobs 0", "--jobs '0'"},
      {"--test-width -5", "--test-width '-5'"},
      {"--grid foo=1,2", "--grid 'foo=1,2'"},
      {"--grid seed=1,2", "--grid 'seed=1,2'"},
      {"--grid lr=", "--grid 'lr='"},
      {"--grid lr=0.1,-1", "--lr '-1'"},
      {"--models caps,xyz", "--models 'caps,xyz'"},
      {"--gaps given --test-azimuths 0:30", "--test-azimuths '0:30'"},  // inside the training range 0:60
      {"--gaps given --split paper-elevation --train-azimuths 0:100", "--split 'paper-elevation': conflicts"},
      {"--shard 3/3", "--shard '3/3'"},
      {"--shard 1", "--shard '1'"},
      {"--shard 0/0", "--shard '0/0'"},
      {"--shard a/b", "--shard 'a/b'"},
  };
  for (const auto& [args, mention] : cases) {
    const Outcome o = run("sweep --out " + dir + " " + args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << args << "\n" << o.err;
  }
  const Outcome unwritable = run("sweep --out /etc/passwd/sub" + kTiny);
  EXPECT_EQ(unwritable.code, 2);
  EXPECT_NE(unwritable.err.find("--out '/etc/passwd/sub'"), std::string::npos) << unwritable.err;
}

TEST(Sweep, SameResultsForOneOrTwoJobsAndDirectoryIsProtected) {
  const std::string a = fresh_dir("j1"), b = fresh_dir("j2");
  ASSERT_EQ(run("sweep --out " + a + " --jobs 1" + kTiny).code, 0);
  ASSERT_EQ(run("sweep --out " + b + " --jobs 2" + kTiny).code, 0);
  for (const char* f : {"/summary.csv", "/azimuth.csv", "/circle.csv", "/trajectory.csv", "/frontier.csv"})
    EXPECT_EQ(slurp(a + f), slurp(b + f)) << f;
  EXPECT_EQ(without_seconds(slurp(a + "/cells.csv")), without_seconds(slurp(b + "/cells.csv")));
  EXPECT_EQ(slurp(a + "/provenance.csv"), slurp(b + "/provenance.csv"));
  expect_own_provenance(a, 6);
  EXPECT_EQ(lines(slurp(a + "/cells.csv")), 1 + 6 * 2);  // 3 seeds x 2 gaps x 2 models
  const auto meta = nlohmann::json::parse(slurp(a + "/meta.json"));
  EXPECT_EQ(meta["kind"], "viewgap-sweep");
  EXPECT_EQ(meta["cells_done"], 6);
  EXPECT_TRUE(meta["meta"].contains("git_commit"));

  // The same directory: refused without --resume, refused for another
  // configuration; nothing in it changes.
  const std::string before = slurp(a + "/cells.csv");
  Outcome o = run("sweep --out " + a + " --jobs 1" + kTiny);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("--resume"), std::string::npos) << o.err;
  o = run("sweep --out " + a + " --jobs 1 --lr 1e-3" + kTiny);
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("different sweep"), std::string::npos) << o.err;
  EXPECT_EQ(slurp(a + "/cells.csv"), before);
  // A directory with other files in it is not a sweep's.
  const std::string c = fresh_dir("other");
  std::filesystem::create_directories(c);
  std::ofstream(c + "/notes.txt") << "mine\n";
  o = run("sweep --out " + c + kTiny);
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(slurp(c + "/notes.txt"), "mine\n");
}

TEST(Sweep, ResumeAfterAKillFinishesTheSameTables) {
  const std::string full = fresh_dir("full"), cut = fresh_dir("cut");
  ASSERT_EQ(run("sweep --out " + full + " --jobs 2" + kTiny).code, 0);
  ASSERT_EQ(run("sweep --out " + cut + " --jobs 2" + kTiny).code, 0);
  // Simulate a kill: drop the last two cells' rows and leave half a line.
  std::string cells = slurp(cut + "/cells.csv");
  for (int k = 0; k < 4; ++k) cells.erase(cells.rfind('\n', cells.size() - 2) + 1);
  cells += "5,2,azimuth,deg,30,30,,caps,ok,0.5";
  std::ofstream(cut + "/cells.csv", std::ios::trunc) << cells;
  // And cell 0's first trajectory row: its cells.csv rows alone do not finish it.
  std::string trajectory = slurp(cut + "/trajectory.csv");
  const size_t first = trajectory.find('\n') + 1;
  ASSERT_EQ(trajectory.substr(first, 2), "0,");
  trajectory.erase(first, trajectory.find('\n', first) + 1 - first);
  std::ofstream(cut + "/trajectory.csv", std::ios::trunc) << trajectory;
  // And cell 1's provenance row, as a kill before its append would: cells.csv's rows alone do not finish it.
  std::string provenance = slurp(cut + "/provenance.csv");
  const size_t at = provenance.find("\n1,") + 1;
  ASSERT_NE(at, 0u);
  provenance.erase(at, provenance.find('\n', at) + 1 - at);
  std::ofstream(cut + "/provenance.csv", std::ios::trunc) << provenance;
  std::filesystem::remove(cut + "/summary.csv");
  const Outcome o = run("sweep --out " + cut + " --resume --jobs 1" + kTiny);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("4 run now, 2 resumed"), std::string::npos) << o.out;
  for (const char* f : {"/summary.csv", "/azimuth.csv", "/circle.csv", "/trajectory.csv", "/frontier.csv", "/provenance.csv"})
    EXPECT_EQ(slurp(full + f), slurp(cut + f)) << f;
  expect_own_provenance(cut, 6);
  EXPECT_EQ(without_seconds(slurp(full + "/cells.csv")), without_seconds(slurp(cut + "/cells.csv")));
}

// trajectory.csv: per cell, each trained model's errors at every epoch's end,
// epochs 1..K, the last at the steps cells.csv records and at its final
// errors (1 - its accuracies); a model fit in one pass (nn1) has no rows.
TEST(Sweep, TrajectoryHoldsEachTrainedModelsErrorsAtEveryEpochsEnd) {
  const std::string dir = fresh_dir("trajectory");
  ASSERT_EQ(run("sweep --out " + dir + " --seeds 0:1 --gaps 0,30 --n-epochs 3 --n-per-combo 1 --models cnn,nn1"
                " --stop-at-familiar 0.999 --quiet").code, 0);
  const std::string text = slurp(dir + "/trajectory.csv");
  ASSERT_EQ(text.substr(0, text.find('\n') + 1), kTrajectoryHeader);
  auto split = [](const std::string& line) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    return f;
  };
  std::map<std::pair<std::string, std::string>, std::vector<std::vector<std::string>>> by;  // (cell, model) -> rows
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) by[{split(line)[0], split(line)[4]}].push_back(split(line));
  std::istringstream cells(slurp(dir + "/cells.csv"));
  std::getline(cells, line);
  int rows = 0;
  size_t trajectory_rows = 0;
  while (std::getline(cells, line)) {
    const auto c = split(line);  // cell,seed,axis,unit,gap,true_gap,grid,model,status,familiar,heldout,drop,n_params,steps,validation,...
    SCOPED_TRACE(line);
    ASSERT_EQ(c[8], "ok");
    const auto& t = by[{c[0], c[7]}];
    ++rows;
    if (c[7] == "nn1") {
      EXPECT_TRUE(t.empty());
      continue;
    }
    ASSERT_GE(t.size(), 1u);
    ASSERT_LE(t.size(), 3u);
    trajectory_rows += t.size();
    for (size_t e = 0; e < t.size(); ++e) {
      ASSERT_EQ(t[e].size(), 10u);
      EXPECT_EQ(t[e][1], c[1]);  // seed
      EXPECT_EQ(t[e][2], c[4]);  // gap
      EXPECT_EQ(t[e][5], std::to_string(e + 1));
      EXPECT_NE(t[e][7], "nan");  // a stopping rule: a validation split
    }
    EXPECT_EQ(t.back()[6], c[13]);
    EXPECT_NEAR(std::stod(t.back()[8]), 1 - std::stod(c[9]), 1.5e-6);
    EXPECT_NEAR(std::stod(t.back()[9]), 1 - std::stod(c[10]), 1.5e-6);
    EXPECT_NEAR(std::stod(t.back()[7]), 1 - std::stod(c[14]), 1.5e-6);
  }
  EXPECT_EQ(rows, 2 * 2 * 2);  // 2 seeds x 2 gaps x 2 models
  EXPECT_EQ(size_t(std::count(text.begin(), text.end(), '\n')), 1 + trajectory_rows);  // no row of another cell or model
}

// A sweep begun before trajectory.csv (a cells.csv, no trajectory.csv) is
// resumed without one: its finished cells are kept, and no trajectory.csv
// with rows of only some cells appears.
TEST(Sweep, ASweepBegunBeforeTheTrajectoryResumesWithoutIt) {
  const std::string full = fresh_dir("traj_full"), old = fresh_dir("traj_old");
  ASSERT_EQ(run("sweep --out " + full + " --jobs 1" + kTiny).code, 0);
  ASSERT_EQ(run("sweep --out " + old + " --jobs 1" + kTiny).code, 0);
  std::filesystem::remove(old + "/trajectory.csv");
  std::string cells = slurp(old + "/cells.csv");
  for (int k = 0; k < 2; ++k) cells.erase(cells.rfind('\n', cells.size() - 2) + 1);
  std::ofstream(old + "/cells.csv", std::ios::trunc) << cells;
  const Outcome o = run("sweep --out " + old + " --resume --jobs 1" + kTiny);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("1 run now, 5 resumed"), std::string::npos) << o.out;
  EXPECT_FALSE(std::filesystem::exists(old + "/trajectory.csv"));
  EXPECT_FALSE(std::filesystem::exists(old + "/frontier.csv"));  // made from trajectory.csv
  for (const char* f : {"/summary.csv", "/azimuth.csv", "/circle.csv"}) EXPECT_EQ(slurp(full + f), slurp(old + f)) << f;
  EXPECT_EQ(without_seconds(slurp(full + "/cells.csv")), without_seconds(slurp(old + "/cells.csv")));
}

// A sweep begun before provenance.csv (a cells.csv, no provenance.csv, as
// every sweep committed under results/ then) resumes and merges: its files are
// read, never rewritten by a merge; --resume starts provenance.csv with its
// finished cells' fields "unknown" and the cells run now this build's; a merge
// gives each input's rows its own provenance, "unknown" for such an input.
TEST(Sweep, ASweepBegunBeforeProvenanceResumesAndMergesWithItsCellsUnknown) {
  const std::string base = fresh_dir("prov_old");
  const std::string flags = " --gaps 0,30 --n-epochs 1 --n-per-combo 1 --models cnn --quiet";
  const std::string a = base + "/a", b = base + "/b";
  ASSERT_EQ(run("sweep --out " + a + " --seeds 0" + flags).code, 0);
  ASSERT_EQ(run("sweep --out " + b + " --seeds 1" + flags).code, 0);
  std::filesystem::remove(a + "/provenance.csv");
  std::map<std::string, std::string> before;  // a's files, which the merge must leave as they are
  for (const auto& e : std::filesystem::directory_iterator(a)) before[e.path().string()] = slurp(e.path().string());
  const Outcome m = run("merge " + a + " " + b + " --out " + base + "/merged");
  ASSERT_EQ(m.code, 0) << m.err;
  std::map<std::string, std::string> after;
  for (const auto& e : std::filesystem::directory_iterator(a)) after[e.path().string()] = slurp(e.path().string());
  EXPECT_EQ(after, before);
  int n = 0;
  auto by_seed = provenance_by_seed(base + "/merged", &n);
  EXPECT_EQ(n, 4);
  EXPECT_EQ(by_seed["0"], kUnknownProvenance);
  EXPECT_EQ(by_seed["1"], own_provenance(b));

  // --resume of an old sweep with a cell to run (its last cell's row cut).
  std::string cells = slurp(a + "/cells.csv");
  cells.erase(cells.rfind('\n', cells.size() - 2) + 1);
  std::ofstream(a + "/cells.csv", std::ios::trunc) << cells;
  const Outcome o = run("sweep --out " + a + " --resume");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("1 run now, 1 resumed"), std::string::npos) << o.out;
  EXPECT_EQ(slurp(a + "/provenance.csv"), std::string(kProvenanceHeader) + "0,0,unknown,unknown,unknown,unknown,unknown,unknown\n" +
                                              "1,0," + [&] {
                                                std::string p;
                                                for (const std::string& x : own_provenance(a)) p += (p.empty() ? "" : ",") + x;
                                                return p;
                                              }() + "\n");
  // Resumed again, it is a sweep that keeps the table: its cells keep their rows.
  const std::string kept = slurp(a + "/provenance.csv");
  ASSERT_EQ(run("sweep --out " + a + " --resume").code, 0);
  EXPECT_EQ(slurp(a + "/provenance.csv"), kept);
  std::filesystem::remove_all(base);
}

CellRow row(int cell, uint64_t seed, const std::string& model, double fam, double held, bool ok = true) {
  CellRow r;
  r.cell = cell;
  r.seed = seed;
  r.gap = 30;
  r.true_gap = 30;
  r.model = model;
  r.axis = "azimuth";
  r.unit = "deg";
  r.status = ok ? "ok" : "failed";
  r.familiar = fam;
  r.heldout = held;
  r.drop = fam - held;
  for (int a = 0; a < 36; ++a) {
    r.axis_acc.push_back(a < 18 ? 1.0 : held);
    r.axis_dist.push_back(a < 18 ? 0.0 : 40.0);
  }
  return r;
}

TEST(Sweep, SummaryTablesByHand) {
  // Three seeds: caps held-out 0.8, 0.7, 0.6 vs cnn 0.7, 0.7, 0.5; familiar
  // 1.0 for both; a fourth seed where caps failed is left out of every statistic.
  const std::vector<CellRow> rows = {
      row(0, 0, "caps", 1.0, 0.8), row(0, 0, "cnn", 1.0, 0.7), row(1, 1, "caps", 1.0, 0.7),
      row(1, 1, "cnn", 1.0, 0.7),  row(2, 2, "caps", 1.0, 0.6), row(2, 2, "cnn", 1.0, 0.5),
      row(3, 3, "caps", NAN, NAN, false), row(3, 3, "cnn", 1.0, 0.1)};
  const std::string s = summary_csv(rows, {"caps", "cnn"});
  std::map<std::string, std::vector<std::string>> by_key;
  std::stringstream in(s);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string x;
    while (std::getline(ls, x, ',')) f.push_back(x);
    ASSERT_EQ(f[1] + "," + f[2], "azimuth,deg") << line;
    f.erase(f.begin() + 1, f.begin() + 3);  // the axis's columns: the rest as in schema 3
    by_key[f[3] + "/" + f[4] + "/" + f[5]] = f;
  }
  EXPECT_EQ(s.substr(0, s.find('\n')),
            "grid,axis,unit,gap,true_gap,kind,model,metric,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,"
            "prob_improvement,p_value");
  // caps held-out: n 3, mean 0.7, sd 0.1, median 0.7.
  const auto& ch = by_key.at("model/caps/heldout");
  EXPECT_EQ(ch[6], "3");
  EXPECT_NEAR(std::stod(ch[7]), 0.7, 1e-9);
  EXPECT_NEAR(std::stod(ch[8]), 0.1, 1e-9);
  EXPECT_NEAR(std::stod(ch[9]), 0.7, 1e-9);
  // cnn held-out includes its seed 3: n 4, mean (0.7+0.7+0.5+0.1)/4 = 0.5.
  EXPECT_EQ(by_key.at("model/cnn/heldout")[6], "4");
  EXPECT_NEAR(std::stod(by_key.at("model/cnn/heldout")[7]), 0.5, 1e-9);
  // Paired held-out d = (0.1, 0, 0.1): mean 1/15, 2 wins, 1 tie, P = 2.5/3.
  const auto& ph = by_key.at("paired/caps-cnn/heldout");
  EXPECT_EQ(ph[6], "3");
  EXPECT_NEAR(std::stod(ph[7]), 0.2 / 3, 1e-6);
  EXPECT_EQ(ph[13] + ph[14] + ph[15], "210");
  EXPECT_NEAR(std::stod(ph[16]), 2.5 / 3, 1e-6);
  // The drop is 1 - held-out here: caps has the smaller drop where it has the
  // higher held-out accuracy, so the same seeds count as wins.
  const auto& pd = by_key.at("paired/caps-cnn/drop");
  EXPECT_NEAR(std::stod(pd[7]), -0.2 / 3, 1e-6);
  EXPECT_EQ(pd[13] + pd[14] + pd[15], "210");
  EXPECT_NEAR(std::stod(pd[16]), 2.5 / 3, 1e-6);

  // Azimuth table: distance 0 is 1.0 for everyone; at 40 degrees the held-out value.
  const std::string az = azimuth_csv(rows, {"caps", "cnn"});
  EXPECT_EQ(az.substr(0, az.find('\n')), "grid,gap,model,axis,unit,distance,n,mean,ci_lo,ci_hi");
  EXPECT_NE(az.find(",30,caps,azimuth,deg,0,3,1.000000,1.000000,1.000000\n"), std::string::npos) << az;
  EXPECT_NE(az.find(",30,caps,azimuth,deg,40,3,0.700000,"), std::string::npos) << az;
  EXPECT_NE(az.find(",30,cnn,azimuth,deg,40,4,0.500000,"), std::string::npos) << az;
}

// --gaps given: one held-out set per seed, the run flags' own (here the
// paper-elevation preset: shared azimuths, held-out elevations above the band).
TEST(Sweep, GivenHeldOutSetRunsOneCellPerSeed) {
  const std::string dir = fresh_dir("given");
  const Outcome o = run("sweep --out " + dir +
                        " --split paper-elevation --gaps given --seeds 0:1 --n-epochs 1 --n-per-combo 1 "
                        "--n-eval-per-combo 1 --models cnn,linear --match-familiar cnn --quiet");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string cells = slurp(dir + "/cells.csv");
  EXPECT_EQ(lines(cells), 1 + 2 * 2);  // 2 seeds x 2 models
  // Along the protocol's axis, elevation: the held-out band 45:70 lies 5 degrees above 30:40.
  EXPECT_NE(cells.find("\n0,0,elevation,deg,5,5,,cnn,ok,"), std::string::npos) << cells;
  const auto meta = nlohmann::json::parse(slurp(dir + "/meta.json"));
  EXPECT_EQ(meta["config"]["run_flags"]["split"], "paper-elevation");
  EXPECT_EQ(meta["config"]["run_flags"]["test-azimuths"], "200:330");  // recorded (the preset overrides it)
}

// Schema 4: every table names the held-out axis. An azimuth sweep's circle.csv
// is the circle (36 azimuths, their distance from the training range 0:60).
const std::string kOneModel = " --seeds 0 --gaps 0,30 --n-epochs 1 --n-per-combo 1 --models caps --quiet";

TEST(Sweep, TablesNameTheHeldOutAxis) {
  const std::string dir = fresh_dir("axis");
  ASSERT_EQ(run("sweep --out " + dir + kOneModel).code, 0);
  const std::string cells = slurp(dir + "/cells.csv"), circle = slurp(dir + "/circle.csv");
  EXPECT_EQ(cells.substr(0, cells.find('\n')),
            "cell,seed,axis,unit,gap,true_gap,grid,model,status,familiar,heldout,drop,n_params,steps,validation,"
            "seconds,reason");
  EXPECT_NE(cells.find("\n1,0,azimuth,deg,30,30,,caps,ok,"), std::string::npos) << cells;
  EXPECT_EQ(circle.substr(0, circle.find('\n')), "cell,seed,gap,grid,model,axis,unit,value,distance,accuracy");
  EXPECT_EQ(lines(circle), 1 + 2 * 36);
  EXPECT_NE(circle.find("\n0,0,0,,caps,azimuth,deg,180,120,"), std::string::npos) << circle.substr(0, 400);
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/meta.json"))["schema_version"], 4);
}

// An elevation extrapolation's sweep moves the held-out elevation band: gap g
// puts 60:80's width (20) g degrees above the training band 10:50, and its
// true gap is the elevation distance. circle.csv is the elevation profile.
TEST(Sweep, ElevationSweepStepsTheHeldOutElevations) {
  const std::string dir = fresh_dir("elev");
  const Outcome o = run("sweep --out " + dir + " --test-elevations 60:80 --seeds 0 --gaps 0,10,20 --n-epochs 1 "
                        "--n-per-combo 1 --n-eval-per-combo 1 --models cnn --quiet");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string cells = slurp(dir + "/cells.csv"), circle = slurp(dir + "/circle.csv");
  for (const char* gap : {"0", "10", "20"})
    EXPECT_NE(cells.find(",elevation,deg," + std::string(gap) + "," + gap + ",,cnn,ok,"), std::string::npos) << cells;
  EXPECT_EQ(lines(circle), 1 + 3 * 9);  // elevations 0, 10, ..., 80
  EXPECT_NE(circle.find("\n0,0,0,,cnn,elevation,deg,0,10,"), std::string::npos) << circle;
  EXPECT_NE(circle.find("\n0,0,0,,cnn,elevation,deg,30,0,"), std::string::npos) << circle;
  EXPECT_NE(circle.find("\n2,0,20,,cnn,elevation,deg,80,30,"), std::string::npos) << circle;
  EXPECT_NE(slurp(dir + "/azimuth.csv").find(",0,cnn,elevation,deg,30,1,"), std::string::npos);
  // A band that leaves [-90, 90], and a width the band does not take: one line, exit 2.
  for (const auto& [args, mention] : std::vector<std::pair<std::string, std::string>>{
           {" --gaps 0,30", "--gaps '0,30': gap 30 (held-out window 80:100): elevations lie in [-90, 90]"},
           {" --test-width 30", "--test-width '30'"}}) {
    const Outcome bad = run("sweep --out " + fresh_dir("elev_bad") + " --test-elevations 60:80 --seeds 0 --quiet" + args);
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_EQ(lines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(mention), std::string::npos) << bad.err;
  }
}

// A directory of schema 3 (an older viewgap's) is neither resumed nor merged,
// and each refusal is one line saying what to do.
TEST(Sweep, Version3DirectoryIsRefusedInOneLine) {
  const std::string dir = fresh_dir("v3");
  ASSERT_EQ(run("sweep --out " + dir + kOneModel + " --shard 0/2").code, 0);
  nlohmann::json meta = nlohmann::json::parse(slurp(dir + "/meta.json"));
  meta["schema_version"] = 3;
  std::ofstream(dir + "/meta.json", std::ios::trunc) << meta.dump(2);
  Outcome o = run("sweep --out " + dir + " --resume" + kOneModel + " --shard 0/2");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("holds a sweep of format version 3; this viewgap writes version 4 (the format changed: "
                       "start a new sweep in another directory)"),
            std::string::npos)
      << o.err;
  o = run("merge " + dir + " --out " + fresh_dir("v3_merged"));
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("a sweep of format version 3; this viewgap merges version 4 (rerun the shards"),
            std::string::npos)
      << o.err;
}

// --shard K/N runs the trainings (seed x grid point) with index K mod N, each
// with its cells at every gap; --merge gives the tables of
// the unsharded sweep (timing aside), and refuses shards missing, repeated,
// unfinished or of another configuration.
TEST(Sweep, ShardsMergeIntoTheTablesOfTheUnshardedSweep) {
  const std::string base = fresh_dir("shard"), full = base + "/full", merged = base + "/merged";
  ASSERT_EQ(run("sweep --out " + full + kTiny + " --jobs 2").code, 0);
  std::string dirs;
  for (int k = 0; k < 4; ++k) {  // 4 shards of 3 trainings (6 cells): 2, 2, 2 and no cells
    const std::string d = base + "/s" + std::to_string(k);
    const Outcome o = run("sweep --out " + d + kTiny + " --jobs 1 --shard " + std::to_string(k) + "/4");
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(lines(slurp(d + "/cells.csv")), 1 + (k < 3 ? 2 : 0) * 2) << k;
    EXPECT_FALSE(std::filesystem::exists(d + "/summary.csv"));  // statistics need every shard
    dirs += (k ? " " : "") + d;
  }
  // `merge` takes the configuration from the shards: no sweep flags needed.
  const Outcome m = run("merge " + dirs + " --out " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  for (const char* f : {"summary.csv", "azimuth.csv", "circle.csv", "trajectory.csv", "frontier.csv", "provenance.csv"})
    EXPECT_EQ(slurp(merged + "/" + f), slurp(full + "/" + f)) << f;
  expect_own_provenance(base + "/s0", 2);
  expect_own_provenance(merged, 6);
  EXPECT_EQ(without_seconds(slurp(merged + "/cells.csv")), without_seconds(slurp(full + "/cells.csv")));

  auto refused = [&](const std::string& args, const std::string& mention) {
    const Outcome o = run("merge " + args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << o.err;
  };
  const std::string out = " --out " + fresh_dir("shard_bad");
  // Onto an existing sweep only with --force (which then rewrites the same tables).
  refused(dirs + " --out " + merged, "add --force");
  ASSERT_EQ(run("merge " + dirs + " --out " + merged + " --force").code, 0);
  EXPECT_EQ(slurp(merged + "/summary.csv"), slurp(full + "/summary.csv"));
  refused(base + "/s0 " + base + "/s1 " + base + "/s2" + out, "shards missing: 3/4 (3 of 4 given)");
  refused(base + "/s2 " + base + "/s0" + out, "shards missing: 1/4, 3/4 (2 of 4 given)");
  refused(base + "/s0 " + base + "/s0 " + base + "/s1 " + base + "/s2" + out, "given twice");
  refused(full + out, "nothing to merge it with");
  refused(full + " " + base + "/s0" + out, "merge shards with shards");
  refused(base + "/nowhere" + out, "not a sweep directory");
  refused(out, "DIR is required");
  // A shard with a cell lost (its last rows cut) must be resumed first.
  const std::string cells = slurp(base + "/s1/cells.csv");
  std::ofstream(base + "/s1/cells.csv", std::ios::trunc) << cells.substr(0, cells.find('\n') + 1);
  refused(dirs + out, "has 0 of its 2 cells finished (rerun it with --resume)");
  // Another configuration's shard.
  const std::string other = base + "/other";
  ASSERT_EQ(run("sweep --out " + other + kTiny + " --lr 1e-3 --shard 0/4").code, 0);
  refused(other + " " + base + "/s1 " + base + "/s2 " + base + "/s3" + out, "a shard of another sweep configuration");
  // A refused merge leaves nothing behind: no --out, no sweep.lock.
  EXPECT_FALSE(std::filesystem::exists(out.substr(7))) << out;
}

// Whole sweeps of one configuration and disjoint seeds merge into the tables
// of the sweep of all their seeds (timing aside), whichever order they are
// given in, and the merge is a sweep like any other (its --resume finds
// nothing to run). Seeds in two sweeps, another configuration and an
// unfinished sweep are refused, naming the directory.
TEST(Sweep, SweepsOfDisjointSeedsMergeIntoTheSweepOfAllTheirSeeds) {
  const std::string base = fresh_dir("seed_merge"), full = base + "/full", merged = base + "/merged";
  const std::string flags = " --gaps 0,30 --n-epochs 1 --n-per-combo 1 --quiet";
  ASSERT_EQ(run("sweep --out " + full + " --seeds 0:3" + flags + " --jobs 2").code, 0);
  ASSERT_EQ(run("sweep --out " + base + "/a --seeds 0,2" + flags).code, 0);
  ASSERT_EQ(run("sweep --out " + base + "/b --seeds 3" + flags).code, 0);
  ASSERT_EQ(run("sweep --out " + base + "/c --seeds 1" + flags).code, 0);
  // b made by another build on another machine: its rows keep saying so.
  const std::vector<std::string> elsewhere = {"0123456789ab", "yes", "GCC 13.1.0", "Other CPU", "avx2", "elsewhere"};
  std::string other = kProvenanceHeader;
  for (const char* cell : {"0", "1"}) {
    other += std::string(cell) + ",3";
    for (const std::string& x : elsewhere) other += "," + x;
    other += "\n";
  }
  std::ofstream(base + "/b/provenance.csv", std::ios::trunc) << other;
  const Outcome m = run("merge " + base + "/b " + base + "/a " + base + "/c --out " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("8 cells merged from 3 sweeps"), std::string::npos) << m.out;
  for (const char* f : {"summary.csv", "azimuth.csv", "circle.csv", "trajectory.csv", "frontier.csv"})
    EXPECT_EQ(slurp(merged + "/" + f), slurp(full + "/" + f)) << f;
  EXPECT_EQ(without_seconds(slurp(merged + "/cells.csv")), without_seconds(slurp(full + "/cells.csv")));
  int n = 0;
  const auto by_seed = provenance_by_seed(merged, &n);
  EXPECT_EQ(n, 8);
  for (const char* seed : {"0", "1", "2"}) EXPECT_EQ(by_seed.at(seed), own_provenance(full)) << seed;
  EXPECT_EQ(by_seed.at("3"), elsewhere);
  const std::string merged_provenance = slurp(merged + "/provenance.csv");
  const auto meta = nlohmann::json::parse(slurp(merged + "/meta.json"));
  EXPECT_EQ(meta["config_hash"], nlohmann::json::parse(slurp(full + "/meta.json"))["config_hash"]);
  const Outcome resumed = run("sweep --out " + merged + " --resume --quiet");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("(0 run now, 8 resumed, 0 failed)"), std::string::npos) << resumed.out;
  EXPECT_EQ(slurp(merged + "/provenance.csv"), merged_provenance);  // --resume keeps each cell's

  auto refused = [&](const std::string& args, const std::string& mention) {
    const Outcome o = run("merge " + args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(mention), std::string::npos) << o.err;
  };
  const std::string out = " --out " + base + "/bad";
  refused(base + "/a " + full + out, "'" + full + "': seed 0 is also in '" + base + "/a'");
  ASSERT_EQ(run("sweep --out " + base + "/lr --seeds 5" + flags + " --lr 1e-3").code, 0);
  refused(base + "/a " + base + "/lr" + out, "'" + base + "/lr': a sweep of another configuration than '" + base +
                                                  "/a' (--lr is '2e-3' there, '1e-3' here)");
  const std::string cells = slurp(base + "/c/cells.csv");
  std::ofstream(base + "/c/cells.csv", std::ios::trunc) << cells.substr(0, cells.find('\n') + 1);
  refused(base + "/a " + base + "/c" + out, "'" + base + "/c': has 0 of its 2 cells finished (rerun it with --resume)");
  EXPECT_FALSE(std::filesystem::exists(base + "/bad"));
  std::filesystem::remove_all(base);
}

// The merged meta.json times the sweep by its shards (the merge's own time
// under its own name); shards of a sweep whose --models leave out the default
// reference merge; a shard's file that is not a regular file (a FIFO) is
// refused, not waited on.
TEST(Sweep, MergeTimesTheSweepByItsShardsAndRefusesAFifo) {
  const std::string base = fresh_dir("merge_meta"), merged = base + "/merged";
  const std::string flags = " --models cnn,nn1 --seeds 0:1 --gaps 0 --n-epochs 1 --n-per-combo 1 --quiet";
  std::vector<double> walls;
  for (int k = 0; k < 2; ++k) {
    const std::string d = base + "/s" + std::to_string(k);
    ASSERT_EQ(run("sweep --out " + d + flags + " --shard " + std::to_string(k) + "/2").code, 0);
    walls.push_back(nlohmann::json::parse(slurp(d + "/meta.json"))["wall_time_s"].get<double>());
  }
  const Outcome m = run("merge " + base + "/s1 " + base + "/s0 --out " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  const auto meta = nlohmann::json::parse(slurp(merged + "/meta.json"));
  EXPECT_EQ(meta["shards_wall_time_s"], nlohmann::json(walls));  // by K, whatever the order given
  EXPECT_DOUBLE_EQ(meta["wall_time_s"].get<double>(), std::max(walls[0], walls[1]));
  EXPECT_DOUBLE_EQ(meta["shards_wall_time_sum_s"].get<double>(), walls[0] + walls[1]);
  EXPECT_GE(meta["merge_time_s"].get<double>(), 0.0);
  EXPECT_EQ(lines(slurp(merged + "/cells.csv")), 1 + 2 * 2);

  for (const char* file : {"meta.json", "cells.csv"}) {
    SCOPED_TRACE(file);
    const std::string fifo = base + "/fifo_" + file;
    std::filesystem::copy(base + "/s0", fifo);
    std::filesystem::remove(fifo + "/" + file);
    ASSERT_EQ(::mkfifo((fifo + "/" + file).c_str(), 0600), 0);
    const std::string out = base + "/fifo_out";
    const Outcome o = run("merge " + fifo + " " + base + "/s1 --out " + out, "timeout 60");
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find("'" + fifo + "/" + file + "' is a FIFO, not a regular file"), std::string::npos) << o.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  }
  std::filesystem::remove_all(base);
}

// A table written anew by another program while the sweep runs (git stash and
// stash pop in a results directory put the files back as they were, each a new
// file, while the sweep's appends would go on into the old ones): at its next
// cell the sweep writes the tables of the cells landed so far again and says
// so, so that a sweep killed after it leaves every landed cell in its tables
// (those cells' checkpoints are gone), and --resume ends with the tables of a
// sweep left alone.
TEST(Sweep, ATableWrittenAnewUnderTheSweepIsWrittenAgainWhole) {
  const std::string base = fresh_dir("anew"), alone = base + "/alone", dir = base + "/dir";
  const std::string args = " --seeds 0:15 --gaps 0 --n-epochs 3 --n-per-combo 1 --quiet --jobs 1";
  ASSERT_EQ(run("sweep --out " + alone + args).code, 0);
  const pid_t job = test::spawn("sweep --out " + dir + args, base + "/err");
  ASSERT_GE(job, 0);
  auto cells_done = [&] {
    const std::string meta = slurp(dir + "/meta.json");
    const auto j = nlohmann::json::parse(meta, nullptr, false);
    return j.is_object() && j.contains("cells_done") ? j["cells_done"].get<int>() : 0;
  };
  // Once two of the sixteen cells have landed, stop the sweep, put each table back
  // as its header alone, let it go on, and kill it once one more cell has landed.
  int before = -1, after = -1;
  for (int i = 0; i < 12000 && after < 0; ++i) {
    usleep(1000);
    if (before < 0 && cells_done() >= 2) {
      ASSERT_EQ(kill(job, SIGSTOP), 0);
      before = cells_done();
      for (const char* f : {"cells.csv", "circle.csv", "provenance.csv", "trajectory.csv"}) {
        const std::string text = slurp(dir + "/" + f);
        std::ofstream(dir + "/" + f + ".new") << text.substr(0, text.find('\n') + 1);
        std::filesystem::rename(dir + "/" + f + ".new", dir + "/" + f);
      }
      ASSERT_EQ(kill(job, SIGCONT), 0);
    } else if (before >= 0 && cells_done() > before) {
      kill(job, SIGKILL);
      after = 0;
    }
  }
  int status = 0;
  waitpid(job, &status, 0);
  ASSERT_GE(before, 2) << "no cell landed in time\n" << slurp(base + "/err");
  ASSERT_FALSE(std::filesystem::exists(dir + "/summary.csv")) << "the sweep ended before it was killed";
  EXPECT_NE(slurp(base + "/err").find("was written anew by another program"), std::string::npos) << slurp(base + "/err");
  // Every cell meta.json counts is in cells.csv (two rows each: caps, cnn).
  EXPECT_EQ(lines(slurp(dir + "/cells.csv")), 1 + 2 * cells_done());
  EXPECT_GT(cells_done(), before);
  const Outcome resumed = run("sweep --out " + dir + args + " --resume");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  for (const char* f : {"summary.csv", "circle.csv", "trajectory.csv", "frontier.csv", "provenance.csv"})
    EXPECT_EQ(slurp(dir + "/" + f), slurp(alone + "/" + f)) << f;
  EXPECT_EQ(without_seconds(slurp(dir + "/cells.csv")), without_seconds(slurp(alone + "/cells.csv")));
  std::filesystem::remove_all(base);
}

#ifdef VIEWGAP_HAVE_MPIRUN
// mpirun as root (CI runs as root), more ranks than cores.
const std::string kMpirun = std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ") +
                            vg::test::paths::mpirun + " --oversubscribe -np 3 " + vg::test::paths::exe;

Outcome mpirun(const std::string& args) {
  const std::string dir = vg::test::temp_dir(), tag = std::to_string(getpid());
  const std::string out = dir + "viewgap_mpi_out." + tag, err = dir + "viewgap_mpi_err." + tag;
  const int status = std::system((kMpirun + " " + args + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Lines of `text` that viewgap printed (mpirun adds its own banners).
int viewgap_lines(const std::string& text) {
  int n = 0;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) n += l.rfind("viewgap", 0) == 0;
  return n;
}

// Three ranks (rank 0 writing, every rank running cells) write the tables of
// the single-process sweep, byte for byte (timing aside), a grid's shared
// trainings (cnn reads no --em-iters) copied by rank 0 from whichever rank ran them.
TEST(SweepMpi, RanksWriteTheTablesOfTheSingleProcessSweep) {
  const std::string base = fresh_dir("mpi"), single = base + "/single", ranks = base + "/ranks";
  const std::string args = kTiny + " --jobs 1 --grid em-iters=1,2";
  ASSERT_EQ(run("sweep --out " + single + args).code, 0);
  const Outcome o = mpirun("sweep --out " + ranks + args);
  ASSERT_EQ(o.code, 0) << o.err;
  // The workers' cells name the workers' build and machine, here rank 0's.
  for (const char* f : {"summary.csv", "azimuth.csv", "circle.csv", "trajectory.csv", "frontier.csv", "provenance.csv"})
    EXPECT_EQ(slurp(ranks + "/" + f), slurp(single + "/" + f)) << f;
  EXPECT_EQ(without_seconds(slurp(ranks + "/cells.csv")), without_seconds(slurp(single + "/cells.csv")));
  const auto meta = nlohmann::json::parse(slurp(ranks + "/meta.json"));
  EXPECT_EQ(meta["mpi"]["ranks"], 3);
  EXPECT_GE(meta["mpi"]["worker_groups"].get<int>(), 1);  // the workers ran trainings, rank 0 wrote their cells
  EXPECT_EQ(meta["trainings"]["models"], 3 * 2 + 3);      // caps at each point and seed, cnn once per seed
  EXPECT_EQ(meta["config_hash"], nlohmann::json::parse(slurp(single + "/meta.json"))["config_hash"]);
}

TEST(SweepMpi, BadInputIsOneLineFromRankZero) {
  const std::string dir = fresh_dir("mpi_bad");
  for (const auto& [args, mention] : std::vector<std::pair<std::string, std::string>>{
           {"--shard 0/2", "--shard '0/2': conflicts with an MPI launch"}, {"--jobs 0", "--jobs '0'"},
           {"--split translation,rotation", "--split 'translation,rotation': several splits run together in one process"}}) {
    const Outcome o = mpirun("sweep --out " + dir + kTiny + " " + args);
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(viewgap_lines(o.err), 1) << args << "\n" << o.err;  // not one per rank
    EXPECT_NE(o.err.find(mention), std::string::npos) << o.err;
  }
  // A directory in use: rank 0 refuses it, and the other ranks end without a word.
  const std::string held = fresh_dir("mpi_held");
  ASSERT_EQ(run("sweep --out " + held + kTiny + " --jobs 1").code, 0);
  const Outcome o = mpirun("sweep --out " + held + kTiny + " --jobs 1");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(viewgap_lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("add --resume"), std::string::npos) << o.err;
}

// The PID of the process whose environment holds `var` and whose command line
// mentions `needle` (an MPI rank of this test's sweep), or -1.
pid_t find_process(const std::string& var, const std::string& needle) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env = slurp(e.path().string() + "/environ"), cmd = slurp(e.path().string() + "/cmdline");
    std::replace(env.begin(), env.end(), '\0', '\n');
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (("\n" + env).find("\n" + var + "\n") != std::string::npos && cmd.find(needle) != std::string::npos &&
        cmd.find("mpirun") == std::string::npos)
      return pid_t(std::stoi(name));
  }
  return -1;
}

// A worker rank killed mid-sweep ends the job; --resume under mpirun then
// finishes the missing cells, and the tables are the single-process sweep's.
TEST(SweepMpi, JobKilledMidwayResumesToIdenticalTables) {
  const std::string base = fresh_dir("mpi_kill"), single = base + "/single", ranks = base + "/ranks";
  const std::string args = " --seeds 0:7 --gaps 0,30 --n-epochs 3 --n-per-combo 1 --quiet --jobs 1";
  ASSERT_EQ(run("sweep --out " + single + args).code, 0);
  const pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    // Open MPI gives the other ranks 1 s between SIGTERM and SIGKILL; rank 0
    // holds its exit until a cell it is landing is on disk, which under a
    // loaded CI (fsync behind other tests' writes) took longer, and its note
    // was lost with it. A longer grace tests the note, not the disk.
    const std::string cmd = "OMPI_MCA_odls_base_sigkill_timeout=20 " + kMpirun + " sweep --out " + ranks + args +
                            " >/dev/null 2>" + base + "/err";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Once a cell has landed, kill rank 1.
  pid_t worker = -1;
  for (int i = 0; i < 3000 && worker < 0; ++i) {
    usleep(10000);
    if (lines(slurp(ranks + "/cells.csv")) >= 3) worker = find_process("OMPI_COMM_WORLD_RANK=1", ranks);
  }
  ASSERT_GT(worker, 0) << "no cell landed, or no rank 1 found";
  kill(worker, SIGKILL);
  int status = 0;
  waitpid(job, &status, 0);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the job ended normally after a rank died";
  EXPECT_NE(slurp(base + "/err").find("rerun with --resume to continue"), std::string::npos) << slurp(base + "/err");
  EXPECT_FALSE(std::filesystem::exists(ranks + "/summary.csv"));
  const Outcome resumed = mpirun("sweep --out " + ranks + args + " --resume");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  for (const char* f : {"summary.csv", "azimuth.csv", "circle.csv", "trajectory.csv", "frontier.csv", "provenance.csv"})
    EXPECT_EQ(slurp(ranks + "/" + f), slurp(single + "/" + f)) << f;
  EXPECT_EQ(without_seconds(slurp(ranks + "/cells.csv")), without_seconds(slurp(single + "/cells.csv")));
  for (const auto& e : std::filesystem::directory_iterator(ranks))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}
#endif

}  // namespace
}  // namespace vg
