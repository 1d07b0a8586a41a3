// The directory of a sweep: its tables (the format below), reading finished
// cells back for --resume, the lock, and merging shards.
//
// Every table carries the protocol's held-out axis (data/protocol.h:
// HeldOutAxis): `axis` its name (azimuth, elevation, none; a translation's
// would be shift) and `unit` the unit of every gap, value and distance on it
// (deg; px). Outputs in DIR (CSV: header line, comma-separated, no quoting needed):
//   cells.csv    one row per cell x model, appended and flushed as each cell
//                finishes, sorted by cell when the sweep completes:
//                cell,seed,axis,unit,gap,true_gap,grid,model,status,familiar,heldout,drop,n_params,steps,validation,seconds,reason
//                (gap: the nominal distance --gaps asked for; true_gap: the
//                 held-out set's distance from the training set along the
//                 axis (the nearest held-out azimuth's circular distance from
//                 the nearest training one; the nearest held-out elevation's);
//                 grid: "" or "name=value;name=value"; status: ok|failed;
//                 steps: training steps taken (fewer than the cap when a
//                 stopping rule ended training); validation: final accuracy
//                 on the familiar validation split, "nan" without one;
//                 reason: empty, or why the cell failed, commas replaced by ';')
//   circle.csv   one row per cell x model x position of the axis sweep (ok
//                cells only): the samples that sweep the whole axis (the
//                azimuth circle; an elevation extrapolation's elevations 0..80):
//                cell,seed,gap,grid,model,axis,unit,value,distance,accuracy
//                value: the position on the axis; distance: its distance from
//                the training views along the axis (circular, for azimuth)
//   trajectory.csv  one row per cell x model x epoch trained (ok cells only),
//                and per check inside an epoch (--eval-every; `epoch` the one
//                under way, before its end's row): the errors (1 - accuracy)
//                then, the novel-versus-familiar trajectory:
//                cell,seed,gap,grid,model,epoch,step,validation_error,familiar_error,heldout_error
//                step: training steps taken at the epoch's end (the check); validation_error:
//                on the familiar validation split, "nan" without one;
//                familiar_error, heldout_error: on the familiar and the
//                held-out (novel) test splits. A model fit in one pass (nn1)
//                has no epochs, so no rows. A directory with a cells.csv and
//                no trajectory.csv is a sweep begun before the table: it is
//                resumed and merged without one.
//   summary.csv  long form, one row per (grid, gap, kind, model, metric):
//                grid,axis,unit,gap,true_gap,kind,model,metric,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,prob_improvement,p_value
//                kind=model:  model is a model name; metric familiar|heldout|drop;
//                             statistics over seeds; wins..p_value empty.
//                kind=paired: model is "R-X" for the reference R (--reference,
//                             default the registry's first default model) and
//                             each other model X; metric
//                             heldout|drop; statistics of d = R - X per seed;
//                             wins/ties/losses count R better/equal/worse (for
//                             drop, better = smaller); prob_improvement = P(R
//                             better), ties counted half; p_value: two-sided
//                             Wilcoxon signed-rank test of d.
//                CIs: 95 % percentile bootstrap of the mean, 10,000 resamples, fixed seed.
//   frontier.csv the novel-versus-familiar frontier from trajectory.csv (its
//                format, level grid and rule: harness/frontier.h); none where
//                the sweep keeps no trajectory.csv.
//   azimuth.csv  accuracy by distance from the training views along the
//                protocol's axis (the name is historical: an azimuth axis's
//                angular distance, an elevation axis's, ...):
//                grid,gap,model,axis,unit,distance,n,mean,ci_lo,ci_hi
//                (per seed, the mean over circle.csv's positions at that
//                 distance; then mean and CI over seeds)
//   provenance.csv  one row per cell in cells.csv: the build and machine that
//                ran it (every model a cell trains itself runs in one process;
//                a cell whose rows a grid shares, copied from a training at
//                another grid point, perhaps another process's, names the
//                process that trained its own models, or, training none, the
//                one that trained its first model: harness/sweep_runner.cpp's
//                land_cell), written wherever cells.csv's rows are
//                (appended as each cell finishes,
//                kept by --resume and merge, an MPI worker's rows naming the
//                worker's machine), so a sweep resumed or merged from parts made
//                elsewhere names each part's:
//                cell,seed,commit,dirty,compiler,cpu,isa,host
//                (commit: the commit built, without "-dirty"; dirty: yes|no, the
//                 tree differed from it outside results/ (tools/git_version.cmake);
//                 compiler, cpu, isa, host: as meta.json's "meta" names them,
//                 commas replaced by ';'). A directory with a cells.csv and no
//                provenance.csv is a sweep begun before the table: --resume and
//                merge keep its cells, their every field "unknown".
//   meta.json    {"schema_version", "kind": "viewgap-sweep", "config", "config_hash",
//                 "cells_total", "cells_done", "cells_failed", "wall_time_s", "jobs", "meta"}
//                written first; "wall_time_s" is null until the sweep is complete
//                (a merge's: see write_merged).
//   sweep.lock   the lock (see kSweepLockFile): "pid N" of its holder, while a
//                sweep or merge runs (and after one was killed); removed when it ends.
// summary.csv, frontier.csv and azimuth.csv exist only for a complete sweep: a
// sweep that has cells to run removes them first.
#pragma once
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/output.h"
#include "harness/report.h"
#include "harness/sweep_plan.h"

namespace vg {

// 2: model options and --reference in the configuration, the cell runner is
// run_experiment. 3: cells.csv records steps and validation accuracy (the
// stopping rules). 4: every table names the held-out axis and its unit
// (true_gap_deg, azimuth_deg, distance_deg became true_gap, value, distance);
// circle.csv holds the axis sweep. A directory of another version is refused
// on --resume and by merge.
inline constexpr int kSweepSchemaVersion = 4;

struct SweepOutcome {
  int ran = 0, resumed = 0, failed = 0;
  double wall_s = 0;
};

// The lock file of a sweep directory: the first file a sweep writes (so a
// directory killed at any moment is recognisably a sweep's), flock-ed for the
// whole sweep so two processes never write one directory (the second names the
// first's PID), and removed when the sweep ends (DirLock::remove).
inline constexpr const char* kSweepLockFile = "sweep.lock";

// Checks plan.dir before any cell runs (creates it if absent) and locks it for
// the sweep (keep the lock until run_sweep returns): throws std::runtime_error
// with the reason if it cannot be written, is in use by another process, holds a
// different sweep (naming the first differing flag and both values), holds a
// started sweep without --resume, or holds files that are not a sweep's. Removes
// the temporary files of writers that died; overwrites nothing else.
std::unique_ptr<DirLock> prepare_sweep_dir(const SweepPlan& plan);

// One epoch's end of a trained model, as trajectory.csv holds it: errors, 1 - accuracy.
struct TrajectoryPoint {
  int epoch = 0;
  long step = 0;
  double validation_error = NAN;  // NaN: no validation split
  double familiar_error = 0, heldout_error = 0;
};

// One finished cell x model, as in cells.csv (and its circle accuracies and trajectory).
struct CellRow {
  int cell = 0;
  uint64_t seed = 0;
  double gap = 0, true_gap = 0;
  std::string grid, model, status, reason;
  double familiar = 0, heldout = 0, drop = 0, seconds = 0;
  size_t n_params = 0;
  std::vector<double> axis_acc, axis_dist;  // ok rows: per position of the axis sweep (SweepCell::axis_values)
  long steps = 0;           // training steps taken
  double validation = NAN;  // final familiar validation accuracy (NaN: no validation split)
  std::string axis{}, unit{};  // the held-out axis (SweepCell::axis, unit)
  std::vector<TrajectoryPoint> trajectory{};  // ok rows: one per epoch and check (ModelResult::history, checks)
  Provenance provenance{};                    // the build and machine that ran the cell
};

// The meta.json of the sweep in directory `d`, checked to be a viewgap
// sweep's of this format version; throws std::runtime_error naming `d`.
nlohmann::json read_sweep_meta(const std::string& d);

// The shards of a sweep, read and checked; nothing is written.
struct MergedShards {
  std::vector<CellRow> rows;           // every cell's, as read_finished gives them
  std::vector<std::string> dirs;       // as given
  std::vector<nlohmann::json> wall_s;  // each shard's wall_time_s, by K (null where unknown)
  bool trajectory = true;              // every directory holds a trajectory.csv (has_trajectory)
};
// Reads the shard directories `dirs` of `plan` (each made by `--shard K/N`
// with this plan's configuration; every K of 0..N-1 once). Throws
// std::runtime_error naming the directory at fault (not a shard of this sweep,
// given twice, cells unfinished: rerun that shard with --resume) or the shards
// missing ("shards missing: 1/3 (2 of 3 given)"). Called before plan.dir is
// made or locked, so a refused merge leaves nothing behind.
MergedShards read_shards(const SweepPlan& plan, const std::vector<std::string>& dirs);
// Writes the shards' rows into plan.dir (prepared and locked by the caller),
// which then holds exactly the tables of an unsharded sweep of the plan
// (timing columns aside). Its meta.json has "merged_from" (the directories),
// "shards_wall_time_s" (each shard's, by K), "shards_wall_time_sum_s",
// "wall_time_s" the longest shard's (the sweep's, for shards run side by side)
// and "merge_time_s" (this merge's, from t0).
SweepOutcome write_merged(const SweepPlan& plan, MergedShards shards, std::chrono::steady_clock::time_point t0);

// The whole of a file the user gave (a sweep's table, a shard's meta.json)
// into `text`; false if it does not exist. Throws std::runtime_error naming
// the path if it is not a regular file (a FIFO is refused, not waited on) or
// cannot be read.
bool read_input_file(const std::string& path, std::string* text);

// ---- the tables' rows, shared by the runner and the summary ----

inline constexpr const char* kCircleHeader = "cell,seed,gap,grid,model,axis,unit,value,distance,accuracy\n";
inline constexpr const char* kTrajectoryHeader =
    "cell,seed,gap,grid,model,epoch,step,validation_error,familiar_error,heldout_error\n";
inline constexpr const char* kProvenanceHeader = "cell,seed,commit,dirty,compiler,cpu,isa,host\n";
// A number as the tables write it: "nan", or printf's `f`.
std::string num(double v, const char* f = "%.6f");
// circle.csv's lines of one row, `values` its cell's axis sweep (SweepCell::axis_values).
std::string circle_lines(const CellRow& r, const std::vector<double>& values);
// trajectory.csv's lines of one row.
std::string trajectory_lines(const CellRow& r);
// provenance.csv's line of the cell of `r` (one per cell: every row of a cell
// holds the same, a grid's shared rows too, as they land: run_sweep's land_cell).
std::string provenance_line(const CellRow& r);
// Whether the sweep in `dir` keeps provenance.csv: false only for one begun
// before it (a cells.csv and no provenance.csv), whose cells' provenance is unknown.
bool has_provenance(const std::string& dir);
// Whether the sweep in `dir` keeps trajectory.csv: false only for one begun
// before it (a cells.csv and no trajectory.csv), whose cells are finished without it.
bool has_trajectory(const std::string& dir);
std::string cells_header();
std::string cell_line(const CellRow& r);
// Rows already in DIR that make up whole cells of this plan (sweep_tables.cpp
// says when a cell counts as finished); with `whole_alone`, the rows of the
// other cells that are whole on their own go there.
std::vector<CellRow> read_finished(const std::string& dir, const SweepPlan& plan,
                                   std::vector<CellRow>* whole_alone = nullptr);
// By cell, then in the order of `models`.
void sort_rows(std::vector<CellRow>& rows, const std::vector<std::string>& models);
// meta.json of a sweep of `total` cells, before any has run.
nlohmann::json sweep_meta(const SweepPlan& plan, int total);
// Writes the sorted tables of `rows` (trajectory.csv with `trajectory`, and
// with `statistics` summary.csv, frontier.csv and azimuth.csv), then meta.json; returns the
// number of failed cells.
int write_final_tables(const SweepPlan& plan, std::vector<CellRow>& rows, int total, bool statistics, bool trajectory,
                       nlohmann::json& meta, std::chrono::steady_clock::time_point t0);

}  // namespace vg
