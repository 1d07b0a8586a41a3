// A sweep's training groups run (interface: harness/sweep_runner_internal.h):
// one group trained and evaluated into its cells' rows, and the TBB slots that
// run groups, on rank 0 and on an MPI sweep's workers alike.
#include <omp.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "harness/report.h"
#include "harness/sweep_checkpoints.h"
#include "harness/sweep_runner_internal.h"

namespace vg {

std::vector<size_t> trained_here(const SweepPlan& plan, const SweepCell& lead) {
  std::vector<size_t> ks;
  for (size_t k = 0; k < plan.models.size(); ++k)
    if (plan.trained_in(lead, k) == lead.id) ks.push_back(k);
  return ks;
}

namespace {

// The cells of one training group (one seed and grid point, the gaps still to
// run), and with run_sweeps the same training's cells of other sweeps: each
// model it trains (trained_here) trained once and evaluated at every cell's
// held-out set (run_experiments), with the bits `viewgap run` gives each cell
// alone. A failing model, or a cell whose data cannot be made, is recorded in
// its rows and the rest still run. `trainings`: how many the group took (1,
// unless a cell's training differs from the others'); `interrupted`: whether
// an interrupt stopped any of them (its rows are then not whole); rows: its
// cells' of the models it trains.
std::vector<CellRow> run_group(const std::vector<PlannedCell>& cells, int* trainings, bool* interrupted) {
  omp_set_num_threads(1);  // one thread per group: groups are the parallelism
  const SweepPlan& lead_plan = *cells.front().plan;
  const SweepCell& lead = *cells.front().cell;
  const std::vector<size_t> ks = trained_here(lead_plan, lead);
  std::vector<const SweepCell*> with;  // other sweeps' cells
  for (const PlannedCell& c : cells)
    if (c.plan != &lead_plan) with.push_back(c.cell);
  std::vector<RunOptions> opts;
  for (const PlannedCell& c : cells) {
    opts.push_back(c.cell->opt);
    opts.back().models.clear();
    for (size_t k : ks) opts.back().models.push_back(lead_plan.models[k]);
    opts.back().keep_going = true;
    opts.back().train.checkpoint = cell_checkpoints(*c.plan, *c.cell);
  }
  // A training's checkpoints are its first configuration's (run_experiments):
  // the lead's, joint when other sweeps' cells may train with it.
  if (!with.empty()) opts.front().train.checkpoint = joint_checkpoints(lead_plan, lead, with);
  std::vector<RunResult> results;
  std::string group_error;
  try {
    results = run_experiments(opts, trainings);
  } catch (const std::exception& e) {
    group_error = *e.what() ? e.what() : "unknown error";
    results.assign(cells.size(), {});
    for (RunResult& r : results) r.error = group_error;
  }
  *interrupted = std::any_of(results.begin(), results.end(), [](const RunResult& r) {
    return std::any_of(r.models.begin(), r.models.end(), [](const ModelResult& m) { return m.interrupted; });
  });
  std::vector<CellRow> mine;
  for (size_t i = 0; i < cells.size(); ++i) {
    const SweepCell& c = *cells[i].cell;
    const RunResult& res = results[i];
    for (size_t j = 0; j < ks.size(); ++j) {
      CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, lead_plan.models[ks[j]], "ok", "", 0, 0, 0, 0, 0, {}, {}};
      r.axis = c.axis;
      r.unit = c.unit;
      r.provenance = this_provenance();  // a worker rank's own, sent to rank 0 with the row
      const ModelResult* m = res.error.empty() ? &res.models[j] : nullptr;
      if (m != nullptr && m->error.empty()) {
        r.familiar = m->familiar;
        r.heldout = m->heldout;
        r.drop = m->drop;
        r.n_params = m->n_params;
        r.steps = m->steps;
        r.validation = m->validation;
        r.axis_acc = m->axis_acc;
        r.axis_dist = c.axis_distances;
        // The epochs' ends and (--eval-every) the checks inside them, in step order.
        auto point = [&](const EpochStats& e) {
          r.trajectory.push_back({e.epoch, e.step, 1 - e.validation, 1 - e.familiar, 1 - e.heldout});
        };
        size_t k = 0;
        for (const EpochStats& e : m->history) {
          for (; k < m->checks.size() && m->checks[k].step < e.step; ++k) point(m->checks[k]);
          point(e);
        }
      } else {
        r.status = "failed";
        r.familiar = r.heldout = r.drop = NAN;
        r.reason = m != nullptr ? m->error : res.error;
        std::replace(r.reason.begin(), r.reason.end(), ',', ';');
        std::replace(r.reason.begin(), r.reason.end(), '\n', ' ');
        std::replace(r.reason.begin(), r.reason.end(), '\r', ' ');
      }
      if (m != nullptr) r.seconds = m->train_s + m->eval_s + m->circle_s;
      mine.push_back(r);
    }
  }
  return mine;
}

}  // namespace

GroupResult run_group_result(const SweepPlan& plan, const Group& g) {
  std::vector<PlannedCell> cells;
  for (const SweepCell* c : g) cells.push_back({&plan, c});
  return run_cells(cells);
}

GroupResult run_cells(const std::vector<PlannedCell>& cells) {
  GroupResult r;
  r.rows = run_group(cells, &r.trainings, &r.interrupted);
  r.models = r.trainings * int(trained_here(*cells.front().plan, *cells.front().cell).size());
  return r;
}

void run_slots(int jobs, const std::function<const Group*()>& take, const std::function<void(GroupResult)>& land,
               const std::function<GroupResult(const Group&)>& run) {
  run_slots_on(jobs, [&] {
    const Group* g = take();
    if (g != nullptr) land(run(*g));
    return g != nullptr;
  });
}

void run_slots_on(int jobs, const std::function<bool()>& next) {
  // Without this, TBB caps its workers at the core count and warns on stderr.
  tbb::global_control workers(tbb::global_control::max_allowed_parallelism, size_t(std::max(jobs, 1)));
  tbb::task_arena arena(jobs);
  arena.execute([&] {
    tbb::parallel_for(0, jobs, [&](int) {
      while (next()) {
      }
    }, tbb::simple_partitioner());
  });
}

}  // namespace vg
