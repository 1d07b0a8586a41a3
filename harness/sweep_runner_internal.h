// The pieces of a sweep's runner (interface: harness/sweep_runner.h) that its
// files share: a training group, its run and the slots that run groups
// (sweep_group.cpp), and what the ranks of an MPI sweep say to each other
// (sweep_worker.cpp holds the worker ranks' side; rank 0's is run_sweep's, in
// sweep_runner.cpp). Internal to harness/.
#pragma once
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "harness/sweep_plan.h"
#include "harness/sweep_store.h"

namespace vg {

// The models of plan.models that the group of `lead` trains (indices): those
// whose rows no other grid point's training gives (SweepCell::trained_in).
std::vector<size_t> trained_here(const SweepPlan& plan, const SweepCell& lead);

// The cells of one training (SweepCell::group) still to run, in gap order.
using Group = std::vector<const SweepCell*>;
struct GroupResult {
  std::vector<CellRow> rows;  // cell by cell, in the group's order
  int trainings = 0;
  int models = 0;  // models trained: trainings x the models the group trains
  bool interrupted = false;  // a training stopped at an interrupt: the rows are not whole
};

// A group run: its rows and what it trained.
GroupResult run_group_result(const SweepPlan& plan, const Group& g);

// A cell of one of the sweeps run_sweeps runs together.
struct PlannedCell {
  const SweepPlan* plan;
  const SweepCell* cell;
};
// Cells of one or more sweeps run as one group: trained once where their
// training is the same (run_experiments tells), the first cell's plan's models
// (every cell's plan trains the same ones here), its checkpoints the training's
// (joint_checkpoints when other sweeps' cells are among them). Rows in the
// cells' order, each with its own sweep's cell id.
GroupResult run_cells(const std::vector<PlannedCell>& cells);

// `jobs` slots on TBB, each running the groups `take` gives until it gives none,
// handing each group's rows to `land`.
void run_slots(int jobs, const std::function<const Group*()>& take, const std::function<void(GroupResult)>& land,
               const std::function<GroupResult(const Group&)>& run);
// The same for any work: `jobs` slots, each calling `next` (take a piece of
// work, run it, land it) until it returns false.
void run_slots_on(int jobs, const std::function<bool()>& next);

// What the ranks of an MPI sweep say (payloads are text). A worker says HELLO
// with its number of slots (--jobs) and sends each finished group as RESULT;
// rank 0 answers every HELLO slot and every RESULT with CELL: the ids of the
// next group's cells for that slot ("3,8,13"), or -1 when there is none (the slot ends). Before any
// of this, rank 0 sends every worker GO: "0" to start, or the exit code of a
// failure that ends the sweep before it starts.
enum Tag : int { kGo = 1, kHello = 2, kResult = 3, kCell = 4 };

// Polling MPI costs the cells on that core (each poll runs Open MPI's progress
// engine: docs/performance.md#sweeps-beyond-one-process-mpi-against---jobs),
// and a message waits up to one period. So rank 0 polls every 1/200 of the
// mean cell time seen so far (2.7 ms for the default cell of 0.55 s: the wait
// stays ~0.25 % of a cell),
// within these bounds; a worker polls only while a reply is due, at the floor.
inline constexpr auto kPollFloor = std::chrono::microseconds(200);
inline constexpr auto kPollCeiling = std::chrono::milliseconds(20);
inline constexpr double kPollsPerCell = 200;

// A cell's rows as a worker rank sends them to rank 0: every number exactly
// (JSON doubles round-trip; NaN travels as null), so rank 0 writes the bytes the
// worker would have. The cell's seed, gap and grid are rank 0's own plan's.
nlohmann::json rows_json(const std::vector<CellRow>& rows);
std::vector<CellRow> rows_from_json(const nlohmann::json& j, const SweepPlan& plan);

}  // namespace vg
