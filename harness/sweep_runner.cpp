// A sweep run from rank 0 or a single process (interface:
// harness/sweep_runner.h): the cells still to run, gathered by training group;
// the kept rows rewritten; each cell landed in the tables as its rows arrive,
// from the local slots and the MPI workers alike; meta.json and the final
// tables. A group's run and the slots: sweep_group.cpp; the workers' side:
// sweep_worker.cpp.
#include "harness/sweep_runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "harness/output.h"
#include "harness/report.h"
#include "harness/sweep_checkpoints.h"
#include "harness/sweep_runner_internal.h"

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
  // The tables of the cells landed so far, written whole (each file atomically),
  // then opened to append each cell as it lands. Here before any cell runs,
  // with the kept rows (anything of unfinished cells dropped; a sweep begun
  // before provenance.csv starts one here, its kept cells' provenance
  // unknown); and again from land_cell if another program wrote a table anew
  // meanwhile (`git stash` in a results directory does), which would leave
  // the appends in a file no one can read.
  std::optional<AppendFile> cells_f, circle_f, provenance_f, trajectory_f;
  auto write_tables_landed = [&]() {
    std::vector<CellRow> sorted = rows;
    sort_rows(sorted, plan.models);
    std::string cells_text = cells_header(), circle_text = kCircleHeader, trajectory_text = kTrajectoryHeader,
                provenance_text = kProvenanceHeader;
    for (size_t k = 0; k < sorted.size(); ++k) {
      const CellRow& r = sorted[k];
      if (k == 0 || sorted[k - 1].cell != r.cell) provenance_text += provenance_line(r);
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
    cells_f.emplace(dir + "/cells.csv");
    circle_f.emplace(dir + "/circle.csv");
    provenance_f.emplace(dir + "/provenance.csv");
    if (trajectory) trajectory_f.emplace(dir + "/trajectory.csv");
  };
  sort_rows(rows, plan.models);
  write_tables_landed();
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
      if (!cells_f->still_at_path() || !circle_f->still_at_path() || !provenance_f->still_at_path() ||
          (trajectory_f && !trajectory_f->still_at_path())) {
        std::fprintf(stderr,
                     "viewgap sweep: a table in '%s' was written anew by another program while the sweep ran; "
                     "writing the tables of the %d cells landed again\n",
                     dir.c_str(), done.load());
        write_tables_landed();
      }
      circle_f->append(circle_add);
      if (trajectory_f) trajectory_f->append(trajectory_add);
      provenance_f->append(provenance_add);
      cells_f->append(cells_add);
      ++done;
      // meta.json counts what cells.csv holds, so that an interrupted sweep's
      // says how far it got, as its last line does.
      meta["cells_done"] = done.load();
      write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");
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

}  // namespace vg
