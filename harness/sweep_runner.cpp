#include "harness/sweep_runner.h"

#include <omp.h>
#include <tbb/concurrent_queue.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "harness/output.h"
#include "harness/report.h"
#include "harness/sweep_checkpoints.h"

namespace vg {

namespace {

void progress(bool quiet, int done, int total, double elapsed, int ran) {
  if (quiet) return;
  const double rate = elapsed > 0 ? ran / elapsed : 0;
  const double eta = rate > 0 ? (total - done) / rate : 0;
  char line[160];
  std::snprintf(line, sizeof line, "sweep: %d/%d cells, %.2f cells/s, ETA %dm%02ds", done, total,
                rate, int(eta) / 60, int(eta) % 60);
  static bool tty = isatty(2);
  if (tty) {
    std::fprintf(stderr, "\r%s   %s", line, done == total ? "\n" : "");
  } else {
    // Plain lines at every 5 % step, for logs.
    static int last = -1;
    const int step = total ? done * 20 / total : 20;
    if (step != last || done == total) std::fprintf(stderr, "%s\n", line);
    last = step;
  }
  std::fflush(stderr);
}

// While alive, an interrupt reports this sweep's progress.
struct InterruptProgress {
  InterruptProgress(const std::atomic<int>* done, int total) { set_interrupt_progress(done, total); }
  ~InterruptProgress() { set_interrupt_progress(nullptr, 0); }
};

// The models of plan.models that the group of `lead` trains (indices): those
// whose rows no other grid point's training gives (SweepCell::trained_in).
std::vector<size_t> trained_here(const SweepPlan& plan, const SweepCell& lead) {
  std::vector<size_t> ks;
  for (size_t k = 0; k < plan.models.size(); ++k)
    if (plan.trained_in(lead, k) == lead.id) ks.push_back(k);
  return ks;
}

// The cells of one training group (one seed and grid point, the gaps still to
// run): each model it trains (trained_here) trained once and evaluated at
// every cell's held-out set (run_experiments), with the bits `viewgap run`
// gives each cell alone. A failing model, or a cell whose data cannot be made,
// is recorded in its rows and the rest still run. `trainings`: how many the
// group took (1, unless a cell's training differs from the others');
// `interrupted`: whether an interrupt stopped any of them (its rows are then
// not whole); rows: its cells' of the models it trains.
std::vector<CellRow> run_group(const SweepPlan& plan, const std::vector<const SweepCell*>& cells, int* trainings,
                               bool* interrupted) {
  omp_set_num_threads(1);  // one thread per group: groups are the parallelism
  const std::vector<size_t> ks = trained_here(plan, *cells.front());
  std::vector<RunOptions> opts;
  for (const SweepCell* c : cells) {
    opts.push_back(c->opt);
    opts.back().models.clear();
    for (size_t k : ks) opts.back().models.push_back(plan.models[k]);
    opts.back().keep_going = true;
    opts.back().train.checkpoint = cell_checkpoints(plan, *c);
  }
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
    const SweepCell& c = *cells[i];
    const RunResult& res = results[i];
    for (size_t j = 0; j < ks.size(); ++j) {
      CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, plan.models[ks[j]], "ok", "", 0, 0, 0, 0, 0, {}, {}};
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

// A cell's rows as a worker rank sends them to rank 0: every number exactly
// (JSON doubles round-trip; NaN travels as null), so rank 0 writes the bytes the
// worker would have. The cell's seed, gap and grid are rank 0's own plan's.
nlohmann::json rows_json(const std::vector<CellRow>& rows) {
  auto real = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json out = nlohmann::json::array();
  for (const CellRow& r : rows) {
    nlohmann::json acc = nlohmann::json::array(), dist = nlohmann::json::array(), traj = nlohmann::json::array();
    for (double v : r.axis_acc) acc.push_back(real(v));
    for (double v : r.axis_dist) dist.push_back(real(v));
    for (const TrajectoryPoint& t : r.trajectory)
      traj.push_back({t.epoch, t.step, real(t.validation_error), real(t.familiar_error), real(t.heldout_error)});
    const Provenance& p = r.provenance;
    out.push_back({{"cell", r.cell}, {"model", r.model}, {"status", r.status}, {"reason", r.reason},
                   {"familiar", real(r.familiar)}, {"heldout", real(r.heldout)}, {"drop", real(r.drop)},
                   {"seconds", r.seconds}, {"n_params", r.n_params}, {"steps", r.steps},
                   {"validation", real(r.validation)}, {"axis_acc", acc}, {"axis_dist", dist}, {"trajectory", traj},
                   {"provenance", {p.commit, p.dirty, p.compiler, p.cpu, p.isa, p.host}}});
  }
  return out;
}

std::vector<CellRow> rows_from_json(const nlohmann::json& j, const SweepPlan& plan) {
  auto real = [](const nlohmann::json& v) { return v.is_null() ? double(NAN) : v.get<double>(); };
  std::vector<CellRow> rows;
  for (const nlohmann::json& x : j) {
    const int id = x.at("cell").get<int>();
    if (id < 0 || id >= int(plan.cells.size())) throw std::runtime_error("a worker sent cell " + std::to_string(id) + ", not in the plan");
    const SweepCell& c = plan.cells[size_t(id)];
    CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, x.at("model").get<std::string>(), x.at("status").get<std::string>(),
              x.at("reason").get<std::string>(), real(x.at("familiar")), real(x.at("heldout")), real(x.at("drop")),
              x.at("seconds").get<double>(), x.at("n_params").get<size_t>(), {}, {}};
    r.axis = c.axis;
    r.unit = c.unit;
    r.steps = x.at("steps").get<long>();
    r.validation = real(x.at("validation"));
    for (const auto& v : x.at("axis_acc")) r.axis_acc.push_back(real(v));
    for (const auto& v : x.at("axis_dist")) r.axis_dist.push_back(real(v));
    for (const auto& t : x.at("trajectory"))
      r.trajectory.push_back({t.at(0).get<int>(), t.at(1).get<long>(), real(t.at(2)), real(t.at(3)), real(t.at(4))});
    const auto& p = x.at("provenance");
    r.provenance = {p.at(0).get<std::string>(), p.at(1).get<std::string>(), p.at(2).get<std::string>(),
                    p.at(3).get<std::string>(), p.at(4).get<std::string>(), p.at(5).get<std::string>()};
    rows.push_back(std::move(r));
  }
  return rows;
}

// What the ranks of an MPI sweep say (payloads are text). A worker says HELLO
// with its number of slots (--jobs) and sends each finished group as RESULT;
// rank 0 answers every HELLO slot and every RESULT with CELL: the ids of the
// next group's cells for that slot ("3,8,13"), or -1 when there is none (the slot ends). Before any
// of this, rank 0 sends every worker GO: "0" to start, or the exit code of a
// failure that ends the sweep before it starts.
enum Tag : int { kGo = 1, kHello = 2, kResult = 3, kCell = 4 };

// The cells of one training (SweepCell::group) still to run, in gap order.
using Group = std::vector<const SweepCell*>;
struct GroupResult {
  std::vector<CellRow> rows;  // cell by cell, in the group's order
  int trainings = 0;
  int models = 0;  // models trained: trainings x the models the group trains
  bool interrupted = false;  // a training stopped at an interrupt: the rows are not whole
};

// A group run: its rows and what it trained.
GroupResult run_group_result(const SweepPlan& plan, const Group& g) {
  GroupResult r;
  r.rows = run_group(plan, g, &r.trainings, &r.interrupted);
  r.models = r.trainings * int(trained_here(plan, *g.front()).size());
  return r;
}

// Hands out the groups still to run, one at a time, to local slots and worker
// ranks alike: groups vary in duration, so a slot takes the next as it frees.
class Dispenser {
 public:
  explicit Dispenser(std::vector<Group> todo) : todo_(std::move(todo)) {}
  const Group* take() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_ || next_ == todo_.size() ? nullptr : &todo_[next_++];
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }

 private:
  std::mutex mu_;
  std::vector<Group> todo_;
  size_t next_ = 0;
  bool stopped_ = false;
};

// `jobs` slots on TBB, each running the groups `take` gives until it gives none,
// handing each group's rows to `land`.
void run_slots(int jobs, const std::function<const Group*()>& take, const std::function<void(GroupResult)>& land,
               const std::function<GroupResult(const Group&)>& run) {
  // Without this, TBB caps its workers at the core count and warns on stderr.
  tbb::global_control workers(tbb::global_control::max_allowed_parallelism, size_t(std::max(jobs, 1)));
  tbb::task_arena arena(jobs);
  arena.execute([&] {
    tbb::parallel_for(0, jobs, [&](int) {
      while (const Group* g = take()) land(run(*g));
    }, tbb::simple_partitioner());
  });
}

// Polling MPI costs the cells on that core (each poll runs Open MPI's progress
// engine: docs/performance.md#sweeps-beyond-one-process-mpi-against---jobs),
// and a message waits up to one period. So rank 0 polls every 1/200 of the
// mean cell time seen so far (2.7 ms for the default cell of 0.55 s: the wait
// stays ~0.25 % of a cell),
// within these bounds; a worker polls only while a reply is due, at the floor.
constexpr auto kPollFloor = std::chrono::microseconds(200);
constexpr auto kPollCeiling = std::chrono::milliseconds(20);
constexpr double kPollsPerCell = 200;
}  // namespace

SweepOutcome run_sweep(const SweepPlan& plan, Cluster* cluster) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = plan.dir;
  SweepOutcome out;

  // Judged before any table is written: a sweep begun before trajectory.csv goes on without it.
  const bool trajectory = has_trajectory(dir);
  std::vector<CellRow> rows = plan.resume ? read_finished(dir, plan) : std::vector<CellRow>{};
  std::erase_if(rows, [&](const CellRow& r) { return !plan.in_shard(plan.cells[size_t(r.cell)]); });
  std::set<int> finished;
  for (const CellRow& r : rows) finished.insert(r.cell);
  out.resumed = int(finished.size());
  // The cells still to run, by training group (in the plan's order of groups,
  // each group's cells in gap order).
  std::vector<Group> todo;
  std::vector<int> slot_of_group;  // group id -> index in todo, or -1
  int total = 0;
  for (const SweepCell& c : plan.cells) {
    if (!plan.in_shard(c)) continue;
    ++total;
    if (finished.count(c.id)) continue;
    if (size_t(c.group) >= slot_of_group.size()) slot_of_group.resize(size_t(c.group) + 1, -1);
    int& slot = slot_of_group[size_t(c.group)];
    if (slot < 0) {
      slot = int(todo.size());
      todo.emplace_back();
    }
    todo[size_t(slot)].push_back(&c);
  }
  std::stable_sort(todo.begin(), todo.end(), [](const Group& a, const Group& b) { return a.front()->group < b.front()->group; });
  // Each cell still to run gathers its rows model by model: from a finished
  // cell whose training is its own (SweepCell::trained_in), copied now, or from
  // the group that trains it, as that group lands. A group whose every model
  // is trained at another grid point runs nothing of its own.
  const size_t n_models = plan.models.size();
  std::map<int, std::vector<std::optional<CellRow>>> pending;     // cell -> its rows so far, by model
  std::map<int, std::vector<std::pair<int, size_t>>> dependents;  // training cell -> (cell, model) it gives
  {
    std::map<std::pair<int, std::string>, const CellRow*> done_row;
    for (const CellRow& r : rows) done_row[{r.cell, r.model}] = &r;
    for (const Group& g : todo)
      for (const SweepCell* c : g) {
        std::vector<std::optional<CellRow>>& got = pending[c->id];
        got.resize(n_models);
        for (size_t k = 0; k < n_models; ++k) {
          const int from = plan.trained_in(*c, k);
          if (!finished.count(from)) {
            dependents[from].emplace_back(c->id, k);
            continue;
          }
          got[k] = *done_row.at({from, plan.models[k]});
          got[k]->cell = c->id;
          got[k]->grid = c->grid;
        }
      }
  }
  std::erase_if(todo, [&](const Group& g) { return trained_here(plan, *g.front()).empty(); });

  // The checkpoints to resume from are judged before anything is written.
  std::vector<const SweepCell*> leads;
  for (const Group& g : todo) leads.push_back(g.front());
  check_checkpoints(plan, leads);

  // meta.json first: from its first table on, the directory is this sweep's.
  nlohmann::json meta = sweep_meta(plan, total);
  meta["cells_done"] = out.resumed;
  write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");
  prepare_checkpoints(plan, std::vector<int>(finished.begin(), finished.end()));
  // The statistics exist only for a complete sweep.
  if (!todo.empty()) {
    remove_output(dir + "/summary.csv");
    remove_output(dir + "/frontier.csv");
    remove_output(dir + "/azimuth.csv");
  }
  // Rewrite the kept rows (dropping anything of unfinished cells) before
  // appending. A sweep begun before provenance.csv starts one here, its kept
  // cells' provenance unknown.
  sort_rows(rows, plan.models);
  std::string cells_text = cells_header(), circle_text = kCircleHeader, trajectory_text = kTrajectoryHeader,
              provenance_text = kProvenanceHeader;
  for (size_t k = 0; k < rows.size(); ++k) {
    const CellRow& r = rows[k];
    if (k == 0 || rows[k - 1].cell != r.cell) provenance_text += provenance_line(r);
    cells_text += cell_line(r);
    circle_text += circle_lines(r, plan.cells[size_t(r.cell)].axis_values);
    trajectory_text += trajectory_lines(r);
  }
  // trajectory.csv and provenance.csv before cells.csv: a kill between them
  // leaves a directory that still reads as one that keeps the tables
  // (has_trajectory, has_provenance).
  if (trajectory) write_file_atomic(dir + "/trajectory.csv", trajectory_text);
  write_file_atomic(dir + "/provenance.csv", provenance_text);
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);

  AppendFile cells_f(dir + "/cells.csv"), circle_f(dir + "/circle.csv"), provenance_f(dir + "/provenance.csv");
  std::optional<AppendFile> trajectory_f;
  if (trajectory) trajectory_f.emplace(dir + "/trajectory.csv");
  std::mutex mu;
  std::atomic<int> done{out.resumed};
  const InterruptProgress interrupt_note(&done, total);
  std::string write_error;
  double cell_seconds = 0;  // of the groups landed (the pace of MPI polling)
  int cells_landed = 0;      // groups, in fact
  int trainings = 0, groups_ran = 0, models_trained = 0;
  progress(plan.quiet, done, total, 0, 0);
  Dispenser cells(todo);

  // A cell lands once it holds every model's rows, whole: its circle,
  // trajectory and provenance rows, then its cell rows (a cell counts only
  // with all of them), with interrupts held off until all are written. Under
  // mu; false after a failed write (which stops the sweep).
  //
  // Its one provenance.csv row, when its rows come from trainings run in
  // different processes (an MPI worker's training copied to a grid point
  // another rank trains, or a finished cell's rows copied on --resume): that
  // of the first model (plan.models' order) the cell trains itself
  // (SweepCell::trained_in), else, a cell every model of which another grid
  // point trains, that of its first model's row. Every row of the cell then
  // carries it, so the tables rewritten at the end (write_tables) name the
  // same. A shared model's own build and machine are those of the cell it
  // trained in, whose provenance row names the process that trained it.
  auto land_cell = [&](int id) {
    const auto it = pending.find(id);
    if (it == pending.end() || !std::all_of(it->second.begin(), it->second.end(), [](const auto& r) { return r.has_value(); }))
      return true;
    const SweepCell& cell = plan.cells[size_t(id)];
    size_t own = 0;
    while (own < it->second.size() && plan.trained_in(cell, own) != id) ++own;
    const Provenance provenance = it->second[own < it->second.size() ? own : 0]->provenance;
    std::string circle_add, trajectory_add, cells_add;
    for (std::optional<CellRow>& r : it->second) {
      r->provenance = provenance;
      circle_add += circle_lines(*r, plan.cells[size_t(id)].axis_values);
      trajectory_add += trajectory_lines(*r);
      cells_add += cell_line(*r);
    }
    const std::string provenance_add = provenance_line(*it->second.front());
    try {
      // The count moves inside the guard: an interrupt that lands between the
      // appends and the count would report one cell fewer than cells.csv holds.
      WriteGuard guard;
      circle_f.append(circle_add);
      if (trajectory_f) trajectory_f->append(trajectory_add);
      provenance_f.append(provenance_add);
      cells_f.append(cells_add);
      ++done;
      remove_checkpoints(plan, plan.cells[size_t(id)]);  // its training is in the tables now
    } catch (const std::exception& e) {
      write_error = e.what();  // the first failed write stops the sweep
      cells.stop();
      return false;
    }
    for (std::optional<CellRow>& r : it->second) {
      out.failed += r->status != "ok";
      rows.push_back(std::move(*r));
    }
    pending.erase(it);
    ++out.ran;
    return true;
  };
  // A group's rows go to every cell they belong to (its own, and those of
  // the grid points that share its trainings), then the cells made whole land.
  // Local slots and (on rank 0 of an MPI job) the workers' groups land here alike.
  //
  // A group an interrupt stopped lands nothing: its cells are not finished,
  // and its checkpoints stay for --resume. One that finished whole while the
  // interrupt was pending lands as any other.
  auto land = [&](GroupResult g) {
    std::lock_guard<std::mutex> lock(mu);
    if (!write_error.empty() || g.interrupted) return;
    double seconds = 0;
    std::set<int> touched;
    for (const CellRow& r : g.rows) {
      seconds += r.seconds;
      const size_t k = size_t(std::find(plan.models.begin(), plan.models.end(), r.model) - plan.models.begin());
      const auto to = dependents.find(r.cell);
      if (to == dependents.end()) continue;
      for (const auto& [id, model] : to->second) {
        if (model != k) continue;
        const SweepCell& c = plan.cells[size_t(id)];
        CellRow copy = r;
        copy.cell = c.id;
        copy.grid = c.grid;
        pending[id][k] = std::move(copy);
        touched.insert(id);
      }
    }
    for (int id : touched)
      if (!land_cell(id)) return;
    cell_seconds += seconds;
    ++cells_landed;
    ++groups_ran;
    trainings += g.trainings;
    models_trained += g.models;
    progress(plan.quiet, done, total,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), out.ran);
  };
  // Cells whose every row a finished cell gave (after an interrupt) land at once.
  {
    std::vector<int> ready;
    for (const auto& [id, got] : pending) ready.push_back(id);
    std::lock_guard<std::mutex> lock(mu);
    for (int id : ready)
      if (!land_cell(id)) break;
  }
  // After an interrupt no group starts (interrupt_pending is false unless deferred).
  auto take = [&]() -> const Group* { return interrupt_pending() ? nullptr : cells.take(); };
  auto run = [&](const Group& g) { return run_group_result(plan, g); };

  if (cluster == nullptr || cluster->size() == 1) {
    // With checkpoints, a first interrupt is the trainings' to act on: each
    // in flight stops at its next step and writes its checkpoint (which the
    // minutes since the last periodic one would otherwise lose), the slots
    // take no new group, and the sweep ends here, as an immediate interrupt
    // would have (exit 128 + signal, "interrupted after k/N cells"). Without
    // checkpoints there is nothing to save: the interrupt ends it at once.
    std::optional<DeferInterrupts> defer;
    if (plan.checkpoint_steps > 0 || plan.checkpoint_seconds > 0) defer.emplace();
    run_slots(plan.jobs, take, land, run);
    defer.reset();  // an interrupt recorded meanwhile ends the process here
  } else {
    // Rank 0: its own slots run on a thread of their own, while this thread
    // (the one MPI allows) serves the workers: a cell for every free slot, and
    // their finished cells landed as they arrive.
    for (int r = 1; r < cluster->size(); ++r) cluster->send(r, kGo, "0");
    std::thread local([&] { run_slots(plan.jobs, take, land, run); });
    std::vector<int> slots(size_t(cluster->size()), -1), ended(size_t(cluster->size()), 0);
    double wait_s = 0;
    int remote_cells = 0;
    auto all_ended = [&] {
      for (int r = 1; r < cluster->size(); ++r)
        if (slots[size_t(r)] < 0 || ended[size_t(r)] < slots[size_t(r)]) return false;
      return true;
    };
    std::string msg;
    auto poll_period = [&] {
      std::lock_guard<std::mutex> lock(mu);
      const std::chrono::duration<double> d(cells_landed ? cell_seconds / cells_landed / kPollsPerCell : 0.001);
      return std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(d),
                        std::chrono::microseconds(kPollFloor), std::chrono::microseconds(kPollCeiling));
    };
    try {
      while (!all_ended()) {
        int src = 0, tag = 0;
        if (!cluster->poll(&src, &tag, &msg)) {
          std::this_thread::sleep_for(poll_period());
          continue;
        }
        int asking = 0;  // slots of `src` asking for a cell
        if (tag == kHello) {
          slots[size_t(src)] = std::stoi(msg);
          asking = slots[size_t(src)];
        } else if (tag == kResult) {
          const nlohmann::json j = nlohmann::json::parse(msg);
          wait_s += j.at("wait_s").get<double>();
          ++remote_cells;
          land({rows_from_json(j.at("rows"), plan), j.at("trainings").get<int>(), j.at("models").get<int>()});
          asking = 1;
        } else {
          throw std::runtime_error("rank " + std::to_string(src) + " sent an unknown message (tag " + std::to_string(tag) + ")");
        }
        for (int k = 0; k < asking; ++k) {
          const Group* g = take();
          ended[size_t(src)] += g == nullptr;
          std::string ids;
          for (const SweepCell* c : g ? *g : Group{}) {
            if (!ids.empty()) ids += ',';
            ids += std::to_string(c->id);
          }
          cluster->send(src, kCell, g == nullptr ? "-1" : ids);
        }
      }
    } catch (const std::exception& e) {
      if (!plan.quiet && isatty(2)) std::fputc('\n', stderr);
      std::fprintf(stderr, "viewgap sweep: error: %s\n", e.what());
      cluster->abort(1);
    }
    local.join();
    meta["mpi"] = {{"ranks", cluster->size()},
                   {"worker_groups", remote_cells},
                   {"worker_wait_s_per_group", remote_cells ? wait_s / remote_cells : 0.0}};
  }
  if (!write_error.empty()) {
    if (!plan.quiet && isatty(2)) std::fputc('\n', stderr);  // end the progress line
    if (cluster != nullptr && cluster->size() > 1) {
      std::fprintf(stderr, "viewgap sweep: error: %s\n", write_error.c_str());
      cluster->abort(1);
    }
    throw std::runtime_error(write_error);
  }

  // One training per group, unless a cell's training data differed from its
  // group's (a protocol whose held-out set moves its training set): said here.
  // "models": the models trained, each training of each model once (a model
  // shared by grid points counts once: SweepCell::trained_in).
  meta["trainings"] = {{"groups", groups_ran}, {"trainings", trainings}, {"models", models_trained}};
  if (trainings > groups_ran && !plan.quiet)
    std::fprintf(stderr, "sweep: %d of %d trainings were of cells apart from their group: their training data depends on the held-out set\n",
                 trainings - groups_ran, trainings);
  out.failed = write_final_tables(plan, rows, total, plan.shards == 1, trajectory, meta, t0);
  remove_checkpoint_dir(plan);
  out.wall_s = meta["wall_time_s"].get<double>();
  return out;
}

void dismiss_workers(Cluster& cluster, int code) {
  for (int r = 1; r < cluster.size(); ++r) cluster.send(r, kGo, std::to_string(code));
}

bool sit_out_sweep(Cluster& cluster) {
  std::string msg;
  int src = 0, tag = 0;
  while (!cluster.poll(&src, &tag, &msg)) std::this_thread::sleep_for(kPollFloor);
  if (tag != kGo || msg != "0") return false;
  cluster.send(0, kHello, "0");  // no slots: rank 0 hands this rank nothing
  return true;
}

int serve_sweep(const SweepPlan& plan, Cluster& cluster) {
  // An interrupt ends a worker without a word: it writes nothing, and rank 0
  // reports how far the sweep got.
  end_silently_on_interrupt();
  std::string msg;
  int src = 0, tag = 0;
  while (!cluster.poll(&src, &tag, &msg)) std::this_thread::sleep_for(kPollFloor);
  // Dismissed: rank 0 has said why and exits with the code; a worker's own
  // non-zero exit would make the launcher kill rank 0 mid-sentence.
  if (tag != kGo || msg != "0") return 0;

  // The slots run on TBB on a thread of their own; this thread talks to rank 0.
  tbb::concurrent_bounded_queue<std::string> inbox;         // a group's cell ids ("-1": the slot ends)
  tbb::concurrent_queue<std::string> outbox;  // finished cells
  std::mutex out_mu;                           // a finished cell wakes this thread
  std::condition_variable out_cv;
  const int jobs = plan.jobs;
  std::thread slots([&] {
    std::deque<Group> held;  // the groups taken (run_slots holds pointers to them)
    std::mutex held_mu;
    auto take = [&]() -> const Group* {
      std::string ids;
      inbox.pop(ids);
      if (ids == "-1") return nullptr;
      Group g;
      for (const std::string& id : split(ids, ',')) g.push_back(&plan.cells[size_t(std::stoi(id))]);
      std::lock_guard<std::mutex> lock(held_mu);
      held.push_back(std::move(g));
      return &held.back();
    };
    auto land = [&](GroupResult r) {
      {
        std::lock_guard<std::mutex> lock(out_mu);
        outbox.push("{\"trainings\":" + std::to_string(r.trainings) + ",\"models\":" + std::to_string(r.models) +
                    ",\"rows\":" + rows_json(r.rows).dump() + "}");
      }
      out_cv.notify_one();
    };
    run_slots(jobs, take, land, [&](const Group& g) { return run_group_result(plan, g); });
  });
  cluster.send(0, kHello, std::to_string(jobs));
  int ended = 0;
  // Time from asking for a cell to getting it, per ask (the dispatch cost).
  std::deque<std::chrono::steady_clock::time_point> asked(size_t(jobs), std::chrono::steady_clock::now());
  double last_wait = 0;
  int awaiting = jobs;  // cells asked for and not yet answered
  try {
    while (ended < jobs) {
      std::string result;
      while (outbox.try_pop(result)) {
        cluster.send(0, kResult, "{\"wait_s\":" + std::to_string(last_wait) + "," + result.substr(1));
        asked.push_back(std::chrono::steady_clock::now());
        ++awaiting;
      }
      if (cluster.poll(&src, &tag, &msg)) {
        if (tag == kGo) {  // rank 0 failed (and said so): end after the cells in hand
          for (int k = 0; k < jobs; ++k) inbox.push("-1");
          slots.join();
          return 0;
        }
        if (tag != kCell) throw std::runtime_error("rank 0 sent an unknown message (tag " + std::to_string(tag) + ")");
        for (const std::string& id : split(msg, ','))
          if (id != "-1" && (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || std::stoul(id) >= plan.cells.size()))
            throw std::runtime_error("rank 0 handed out cells " + msg + ", not in this rank's plan");
        last_wait = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked.front()).count();
        asked.pop_front();
        --awaiting;
        ended += msg == "-1";
        inbox.push(msg);
      } else if (awaiting > 0) {
        std::this_thread::sleep_for(kPollFloor);  // a reply is due within rank 0's period
      } else {
        // Every slot is busy: sleep until one finishes (MPI is not polled
        // meanwhile; a dismissal waits for the timeout).
        std::unique_lock<std::mutex> lock(out_mu);
        out_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !outbox.empty(); });
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "viewgap sweep (rank %d): error: %s\n", cluster.rank(), e.what());
    cluster.abort(1);
  }
  slots.join();
  // The last results of ended slots are already sent: a slot ends only after
  // its last cell's result, which was sent before rank 0 answered it with -1.
  return 0;
}

}  // namespace vg
