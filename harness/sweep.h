// viewgap sweep: a grid of seeds x azimuth gaps (x any run flag), each cell
// training every requested model on the same data (a paired design), run in
// parallel on TBB with each cell single-threaded.
//
// Outputs in DIR (CSV: header line, comma-separated, no quoting needed):
//   cells.csv    one row per cell x model, appended and flushed as each cell
//                finishes, sorted by cell when the sweep completes:
//                cell,seed,gap,true_gap_deg,grid,model,status,familiar,heldout,drop,n_params,steps,validation,seconds,reason
//                (grid: "" or "name=value;name=value"; status: ok|failed;
//                 steps: training steps taken (fewer than the cap when a
//                 stopping rule ended training); validation: final accuracy
//                 on the familiar validation split, "nan" without one;
//                 reason: empty, or why the cell failed, commas replaced by ';')
//   circle.csv   one row per cell x model x circle azimuth (ok cells only):
//                cell,seed,gap,grid,model,azimuth_deg,distance_deg,accuracy
//                distance_deg: circular distance from the nearest training azimuth
//   summary.csv  long form, one row per (grid, gap, kind, model, metric):
//                grid,gap,true_gap_deg,kind,model,metric,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,prob_improvement,p_value
//                kind=model:  model is a model name; metric familiar|heldout|drop;
//                             statistics over seeds; wins..p_value empty.
//                kind=paired: model is "R-X" for the reference R (--reference,
//                             default caps) and each other model X; metric
//                             heldout|drop; statistics of d = R - X per seed;
//                             wins/ties/losses count R better/equal/worse (for
//                             drop, better = smaller); prob_improvement = P(R
//                             better), ties counted half; p_value: two-sided
//                             Wilcoxon signed-rank test of d.
//                CIs: 95 % percentile bootstrap of the mean, 10,000 resamples, fixed seed.
//   azimuth.csv  accuracy by angular distance from the training range:
//                grid,gap,model,distance_deg,n,mean,ci_lo,ci_hi
//                (per seed, the mean over circle azimuths at that distance; then
//                 mean and CI over seeds)
//   meta.json    {"schema_version", "kind": "viewgap-sweep", "config", "config_hash",
//                 "cells_total", "cells_done", "cells_failed", "wall_time_s", "jobs", "meta"}
//                written first; "wall_time_s" is null until the sweep is complete.
//   sweep.lock   the lock (see kSweepLockFile): "pid N" of the last holder.
// summary.csv and azimuth.csv exist only for a complete sweep: a sweep that has
// cells to run removes them first.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/cluster.h"
#include "harness/output.h"
#include "harness/train.h"

namespace vg {

// 2: model options and --reference in the configuration, the cell runner is
// run_experiment. 3: cells.csv records steps and validation accuracy (the
// stopping rules). A directory of another version is refused on --resume.
inline constexpr int kSweepSchemaVersion = 3;

// One (seed, gap, grid point): every model trained on the same data.
struct SweepCell {
  int id = 0;
  uint64_t seed = 0;
  double gap = 0, true_gap = 0;  // nominal gap and circular gap, degrees
  std::string grid;              // "" or "name=value;..."
  RunOptions opt;
};

struct SweepPlan {
  std::vector<SweepCell> cells;  // ordered by grid point, gap, seed
  std::vector<std::string> models;
  std::string reference = "caps";  // paired statistics: reference - X for every other model
  int jobs = 1;
  std::string dir;
  bool resume = false, quiet = false;
  nlohmann::json config;      // what defines the results; hashed into meta.json
  nlohmann::json run_config;  // the first cell's typed configuration, as the run JSON has it
  // Slurm arrays and the like: this process runs the cells whose id is
  // `shard` mod `shards` (the full plan's ids, so any shard count gives the
  // same cells); a shard writes cells.csv and circle.csv but no statistics.
  int shard = 0, shards = 1;
  bool in_shard(const SweepCell& c) const { return c.id % shards == shard; }
};

struct SweepOutcome {
  int ran = 0, resumed = 0, failed = 0;
  double wall_s = 0;
};

// FNV-1a of the canonical JSON text, as 16 hex digits.
std::string config_hash(const nlohmann::json& config);

// The lock file of a sweep directory: the first file a sweep writes (so a
// directory killed at any moment is recognisably a sweep's), flock-ed for the
// whole sweep so two processes never write one directory (the second names the
// first's PID).
inline constexpr const char* kSweepLockFile = "sweep.lock";

// Checks plan.dir before any cell runs (creates it if absent) and locks it for
// the sweep (keep the lock until run_sweep returns): throws std::runtime_error
// with the reason if it cannot be written, is in use by another process, holds a
// different sweep (naming the first differing flag and both values), holds a
// started sweep without --resume, or holds files that are not a sweep's. Removes
// the temporary files of writers that died; overwrites nothing else.
std::unique_ptr<DirLock> prepare_sweep_dir(const SweepPlan& plan);

// Merges the shard directories `dirs` of `plan` (each made by `--shard K/N`
// with this plan's configuration; every K of 0..N-1 once) into plan.dir, which
// then holds exactly the tables of an unsharded sweep of the plan (timing
// columns aside). Throws std::runtime_error naming the directory at fault: not
// a shard of this sweep, a shard missing or given twice, or cells unfinished
// (rerun that shard with --resume).
SweepOutcome merge_shards(const SweepPlan& plan, const std::vector<std::string>& dirs);

// Runs the cells not finished in DIR on `jobs` TBB workers, each cell
// single-threaded, appending each finished cell to circle.csv then cells.csv;
// then writes the sorted tables, summary.csv, azimuth.csv and meta.json. A cell
// counts as finished only if every per-cell file holds all of its rows, whole
// and consistent with the plan; anything less runs again. The first failed
// write stops the sweep (std::runtime_error naming the file). SIGINT/SIGTERM:
// the cells in flight are discarded, the line "interrupted after k/N cells;
// rerun with --resume to continue" printed, exit 128 + signal.
//
// Under MPI (`cluster` of more than one rank; this is rank 0): every rank runs
// `jobs` cells at a time, handed out one by one as slots free (cells differ in
// duration), and rank 0, the only writer, lands the workers' cells as they
// arrive, so the tables are the single-process sweep's (timing aside). A rank
// that dies ends the job (the launcher's doing); --resume then finishes.
SweepOutcome run_sweep(const SweepPlan& plan, Cluster* cluster = nullptr);

// Every other rank of an MPI sweep: waits for rank 0's word, then runs the
// cells it hands out until there are none, or rank 0 dismisses it (rank 0
// then reports the failure and carries the exit code). Returns 0.
int serve_sweep(const SweepPlan& plan, Cluster& cluster);
// Rank 0 failed before run_sweep: the other ranks end with `code`, silently.
void dismiss_workers(Cluster& cluster, int code);
// Another rank failed before serve_sweep: waits for rank 0's word and, if the
// sweep started, tells rank 0 this rank runs nothing. True if it started (the
// failure is then this rank's own to report).
bool sit_out_sweep(Cluster& cluster);

// One finished cell x model, as in cells.csv (and its circle accuracies).
struct CellRow {
  int cell = 0;
  uint64_t seed = 0;
  double gap = 0, true_gap = 0;
  std::string grid, model, status, reason;
  double familiar = 0, heldout = 0, drop = 0, seconds = 0;
  size_t n_params = 0;
  std::vector<double> circle_acc, circle_dist;  // ok rows: per circle azimuth
  long steps = 0;           // training steps taken
  double validation = NAN;  // final familiar validation accuracy (NaN: no validation split)
};

// summary.csv and azimuth.csv from the rows (any order); `models` fixes the
// order of models; every other model is compared with `reference`.
std::string summary_csv(const std::vector<CellRow>& rows, const std::vector<std::string>& models,
                        const std::string& reference = "caps");
std::string azimuth_csv(const std::vector<CellRow>& rows, const std::vector<std::string>& models);

}  // namespace vg
