// viewgap sweep's runner: the training groups of a plan (SweepCell::group: a
// seed and grid point, with its cells at every gap) run in parallel on TBB, each
// single-threaded, training every requested model once on the same data (a
// paired design) and evaluating it at every cell's held-out set; under MPI,
// rank 0 hands the groups out to every rank. A model whose training another
// grid point's group gives (SweepCell::trained_in) is not trained again: the
// rows of that training are written at both.
#pragma once
#include <string>
#include <vector>

#include "harness/cluster.h"
#include "harness/sweep_store.h"

namespace vg {

// Runs the cells not finished in DIR on `jobs` TBB workers, a group at a time
// each, single-threaded, appending each finished cell to circle.csv,
// trajectory.csv and provenance.csv, then cells.csv;
// then writes the sorted tables, summary.csv, azimuth.csv and meta.json. A cell
// counts as finished only if every per-cell file holds all of its rows, whole
// and consistent with the plan; anything less runs again. The first failed
// write stops the sweep (std::runtime_error naming the file). SIGINT/SIGTERM/
// SIGHUP: the cells in flight are discarded, the line "interrupted after k/N
// cells; rerun with --resume to continue" printed, exit 128 + signal. With
// checkpoints (plan.checkpoint_steps or _seconds), a first signal waits for
// the trainings in flight: each stops at its next step and writes its
// checkpoint, no new group starts, a group finished whole meanwhile lands and
// one stopped writes nothing (its checkpoints stay); then the same line and
// exit. A second signal, or one without checkpoints, ends it at once.
//
// Under MPI (`cluster` of more than one rank; this is rank 0): every rank runs
// `jobs` groups at a time, handed out one by one as slots free (groups differ in
// duration), and rank 0, the only writer, lands the workers' cells as they
// arrive, so the tables are the single-process sweep's (timing aside; a
// worker's cells name its own build and machine in provenance.csv). A rank
// that dies ends the job (the launcher's doing); --resume then finishes.
SweepOutcome run_sweep(const SweepPlan& plan, Cluster* cluster = nullptr);

// Several sweeps run together in one process (`sweep --split A,B`): each
// writes its own directory, tables and meta.json as run alone (timing aside;
// meta.json names the others under "trained_with"), while their groups of one
// grid point and seed run as one group, so that run_experiments trains once
// where their training sets are the same (an IDX set's in-plane protocols at
// their default training ranges) and apart where they are not. A group whose
// own training left checkpoints resumes alone; a joint training checkpoints
// in the first sweep's directory ("cell-17-joint-caps.vgck", resumed only by
// the same sweeps together). Interrupts and failed writes as run_sweep's.
std::vector<SweepOutcome> run_sweeps(const std::vector<const SweepPlan*>& plans);

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

}  // namespace vg
