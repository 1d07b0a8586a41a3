// Sweep planning: the sweep's flags -> grid points x gaps x seeds as cells,
// the configuration that names the sweep (hashed into meta.json), the shard
// this process runs and the cells that fit in memory at once.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/run_flags.h"
#include "harness/train.h"

namespace vg {

// One (seed, gap, grid point): every model trained on the same data.
struct SweepCell {
  int id = 0;
  // Its training: the cells of one grid point and seed (at every gap) share
  // it, as only their held-out sets differ (Protocol::at_distance); numbered
  // by grid point, then seed.
  int group = 0;
  uint64_t seed = 0;
  // The nominal gap, and the held-out set's true distance from the training
  // set (Protocol::sweep_gap), along the protocol's held-out axis, in its unit.
  double gap = 0, true_gap = 0;
  std::string grid;              // "" or "name=value;..."
  RunOptions opt;
  std::string axis, unit;        // the protocol's held-out axis (data/protocol.h: HeldOutAxis)
  // The axis sweep's positions and their distances from the training views.
  std::vector<double> axis_values, axis_distances;
  // Per model (SweepPlan::models' order), the id of the cell whose training
  // gives this cell its rows: its own, or, for a model that reads none of the
  // grid options in which the two grid points differ, the cell of the same
  // seed and gap at the first such grid point of the same shard: the training
  // there is this one's, bit for bit, so it runs once and its rows are
  // written at both. Empty: every model trains here. kKeptRow: no training
  // gives it, its row is kept from the sweep's directory (keep_whole_rows).
  std::vector<int> trained_in{};
  static constexpr int kKeptRow = -1;
};

struct SweepPlan {
  std::vector<SweepCell> cells;  // ordered by grid point, gap, seed
  std::vector<std::string> models;
  std::string reference = default_models().front();  // paired statistics: reference - X for every other model
  // Paired statistics between grid points (--pair-grid): A - B for every
  // model, as the grid column's strings ("lr=0.001;loss=xent").
  std::vector<std::pair<std::string, std::string>> grid_pairs;
  int jobs = 1;
  std::string dir;
  bool resume = false, quiet = false;
  // A --resume whose --model-eval-every differs from the sweep's: the tables'
  // rows that are whole under the new checks are kept (harness/sweep_resume.h).
  bool recheck = false;
  // --checkpoint-every: each training in progress checkpointed into
  // DIR/checkpoints (sweep_runner.h); not part of the configuration.
  long checkpoint_steps = 0;
  double checkpoint_seconds = 0;
  nlohmann::json config;      // what defines the results; hashed into meta.json
  nlohmann::json run_config;  // the first cell's typed configuration, as the run JSON has it
  // Slurm arrays and the like: this process runs the cells whose training
  // group is `shard` mod `shards` (the full plan's groups, so any shard count
  // gives the same cells, and no training runs in two shards); a shard writes
  // cells.csv and circle.csv but no statistics.
  int shard = 0, shards = 1;
  bool in_shard(const SweepCell& c) const { return c.group % shards == shard; }
  // The cell whose training gives cell c its rows of models[k] (SweepCell::trained_in).
  int trained_in(const SweepCell& c, size_t k) const { return c.trained_in.empty() ? c.id : c.trained_in[k]; }
  // Whether cell c's row of models[k] is kept from the tables (SweepCell::kKeptRow).
  bool kept(const SweepCell& c, size_t k) const { return trained_in(c, k) == SweepCell::kKeptRow; }
  // Per entry of grid_pairs, the models whose training differs between its two
  // grid points (a model shared by them would pair its rows with themselves).
  std::vector<std::vector<std::string>> grid_pair_models;
};

// FNV-1a of the canonical JSON text, as 16 hex digits.
std::string config_hash(const nlohmann::json& config);

// The flags of `viewgap sweep`, as typed (`merge` rebuilds them from a shard's meta.json).
struct SweepFlags {
  RunFlags run;
  std::string seeds = "0:29", gaps = "0,30,60,90,120", test_width = "60", jobs, out, reference;
  std::string shard;  // "K/N"
  std::vector<std::string> grid;
  std::vector<std::string> pair_grid;  // "A|B": settings of two grid points, each "name=value,..."
  std::string checkpoint_every;        // "": no checkpoints
  bool resume = false, quiet = false;
  bool recheck = false;  // set by resumed_sweep_flags: SweepPlan::recheck
};

// The plan of `f`: cells ordered by grid point, gap, seed (ids in that
// order), each validated as `run` would be. Throws UsageError naming the first
// bad flag or grid value.
SweepPlan plan_sweep(const SweepFlags& f);

}  // namespace vg
