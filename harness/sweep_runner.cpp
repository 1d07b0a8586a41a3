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
#include <functional>
#include <map>
#include <memory>
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
template <class G>
class Dispenser {
 public:
  explicit Dispenser(std::vector<G> todo) : todo_(std::move(todo)) {}
  const G* take() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_ || next_ == todo_.size() ? nullptr : &todo_[next_++];
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  const std::vector<G>& all() const { return todo_; }  // fixed once made: its groups' addresses hold

 private:
  std::mutex mu_;
  std::vector<G> todo_;
  size_t next_ = 0;
  bool stopped_ = false;
};

// One sweep's directory while its cells run: the cells it resumed, those still
// to run by training group, and each cell landed in the tables as its rows
// arrive. Constructed, it has judged what it resumes (and written nothing);
// open() makes the directory this sweep's; land() takes a group's rows;
// finish() writes the final tables.
class SweepRun {
 public:
  SweepRun(const SweepPlan& plan, std::chrono::steady_clock::time_point t0);
  void open();
  // After an interrupt no group starts (interrupt_pending is false unless deferred).
  const Group* take() { return interrupt_pending() ? nullptr : cells_->take(); }
  // The groups still to run (run_sweeps hands them out itself).
  const std::vector<Group>& todo() const { return cells_->all(); }
  // A group's rows go to every cell they belong to (its own, and those of
  // the grid points that share its trainings), then the cells made whole land.
  // Local slots and (on rank 0 of an MPI job) the workers' groups land here alike.
  //
  // A group an interrupt stopped lands nothing: its cells are not finished,
  // and its checkpoints stay for --resume. One that finished whole while the
  // interrupt was pending lands as any other. Under the caller's lock.
  bool land(GroupResult g);  // true: it landed
  // The final tables; throws the first failed write's error.
  SweepOutcome finish();
  // Each cell landed also counts here (run_sweeps: the cells of every sweep it runs).
  void count_also(std::atomic<int>* n) { also_done_ = n; }
  const std::atomic<int>& done() const { return done_; }
  int total() const { return total_; }
  int ran() const { return out_.ran; }
  double cell_seconds() const { return cell_seconds_; }
  int groups_landed() const { return groups_ran_; }
  bool failed_write() const { return !write_error_.empty(); }
  const std::string& write_error() const { return write_error_; }
  nlohmann::json& meta() { return meta_; }
  const SweepPlan& plan() const { return plan_; }

 private:
  bool land_cell(int id);
  void write_tables_landed(int landing = -1);

  const SweepPlan& plan_;
  const std::chrono::steady_clock::time_point t0_;
  SweepOutcome out_;
  bool trajectory_ = true;
  std::vector<CellRow> rows_;
  std::set<int> finished_;
  int total_ = 0;
  bool any_to_run_ = false;
  std::unique_ptr<Dispenser<Group>> cells_;
  std::map<int, std::vector<std::optional<CellRow>>> pending_;     // cell -> its rows so far, by model
  std::map<int, std::vector<std::pair<int, size_t>>> dependents_;  // training cell -> (cell, model) it gives
  std::set<int> keeps_;  // cells still to land that keep rows of their own from the tables (kKeptRow)
  nlohmann::json meta_;
  std::optional<AppendFile> cells_f_, circle_f_, provenance_f_, trajectory_f_;
  std::atomic<int> done_{0};
  std::atomic<int>* also_done_ = nullptr;
  std::string write_error_;
  double cell_seconds_ = 0;  // of the groups landed (the pace of MPI polling)
  int trainings_ = 0, groups_ran_ = 0, models_trained_ = 0;
};

SweepRun::SweepRun(const SweepPlan& plan, std::chrono::steady_clock::time_point t0) : plan_(plan), t0_(t0) {
  // Judged before any table is written: a sweep begun before trajectory.csv goes on without it.
  trajectory_ = has_trajectory(plan.dir);
  std::vector<CellRow> alone;  // rows of unfinished cells, whole on their own (kept: keep_whole_rows)
  rows_ = plan.resume ? read_finished(plan.dir, plan, &alone) : std::vector<CellRow>{};
  std::erase_if(rows_, [&](const CellRow& r) { return !plan.in_shard(plan.cells[size_t(r.cell)]); });
  for (const CellRow& r : rows_) finished_.insert(r.cell);
  out_.resumed = int(finished_.size());
  done_ = out_.resumed;
  // The cells still to run, by training group (in the plan's order of groups,
  // each group's cells in gap order).
  std::vector<Group> todo;
  std::vector<int> slot_of_group;  // group id -> index in todo, or -1
  for (const SweepCell& c : plan.cells) {
    if (!plan.in_shard(c)) continue;
    ++total_;
    if (finished_.count(c.id)) continue;
    if (size_t(c.group) >= slot_of_group.size()) slot_of_group.resize(size_t(c.group) + 1, -1);
    int& slot = slot_of_group[size_t(c.group)];
    if (slot < 0) {
      slot = int(todo.size());
      todo.emplace_back();
    }
    todo[size_t(slot)].push_back(&c);
  }
  std::stable_sort(todo.begin(), todo.end(), [](const Group& a, const Group& b) { return a.front()->group < b.front()->group; });
  // Each cell still to run gathers its rows model by model: its own row kept
  // from the tables (SweepCell::kKeptRow), or one of a cell whose training is
  // its own (SweepCell::trained_in), copied now where that cell is finished
  // or keeps that row, else as the group that trains it lands. A group whose
  // every model is kept or trained at another grid point runs nothing of its own.
  const size_t n_models = plan.models.size();
  {
    std::map<std::pair<int, std::string>, const CellRow*> done_row;
    for (const CellRow& r : rows_) done_row[{r.cell, r.model}] = &r;
    auto kept = [&](int id, size_t k) { return plan.kept(plan.cells[size_t(id)], k); };
    for (const CellRow& r : alone) {
      const size_t k = size_t(std::find(plan.models.begin(), plan.models.end(), r.model) - plan.models.begin());
      if (kept(r.cell, k)) done_row[{r.cell, r.model}] = &r;
    }
    for (const Group& g : todo)
      for (const SweepCell* c : g) {
        std::vector<std::optional<CellRow>>& got = pending_[c->id];
        got.resize(n_models);
        for (size_t k = 0; k < n_models; ++k) {
          int from = plan.trained_in(*c, k);
          if (from == SweepCell::kKeptRow) from = c->id;
          if (!finished_.count(from) && !kept(from, k)) {
            dependents_[from].emplace_back(c->id, k);
            continue;
          }
          const auto row = done_row.find({from, plan.models[k]});
          if (row == done_row.end())
            throw std::runtime_error("'" + plan.dir + "': cell " + std::to_string(from) + "'s row of " + plan.models[k] +
                                     " changed while the sweep was planned (another program wrote the tables?)");
          got[k] = *row->second;
          got[k]->cell = c->id;
          got[k]->grid = c->grid;
          if (from == c->id && !finished_.count(from)) keeps_.insert(c->id);
        }
      }
  }
  std::erase_if(todo, [&](const Group& g) { return trained_here(plan, *g.front()).empty(); });

  // The checkpoints to resume from are judged before anything is written.
  std::vector<const SweepCell*> leads;
  for (const Group& g : todo) leads.push_back(g.front());
  check_checkpoints(plan, leads);
  any_to_run_ = !todo.empty();
  cells_ = std::make_unique<Dispenser<Group>>(std::move(todo));
}

void SweepRun::open() {
  // meta.json first: from its first table on, the directory is this sweep's.
  meta_ = sweep_meta(plan_, total_);
  meta_["cells_done"] = out_.resumed;
  write_file_atomic(plan_.dir + "/meta.json", meta_.dump(2) + "\n");
  prepare_checkpoints(plan_, std::vector<int>(finished_.begin(), finished_.end()));
  // The statistics exist only for a complete sweep.
  if (any_to_run_) {
    remove_output(plan_.dir + "/summary.csv");
    remove_output(plan_.dir + "/frontier.csv");
    remove_output(plan_.dir + "/azimuth.csv");
  }
  sort_rows(rows_, plan_.models);
  write_tables_landed();
  // Cells whose every row a finished cell gave (after an interrupt) land at once.
  std::vector<int> ready;
  for (const auto& [id, got] : pending_) ready.push_back(id);
  for (int id : ready)
    if (!land_cell(id)) break;
}

// The tables of the cells landed so far, written whole (each file atomically),
// then opened to append each cell as it lands. Here before any cell runs,
// with the rows kept (of unfinished cells, only those keep_whole_rows
// keeps; a sweep begun before provenance.csv starts one here, its kept
// cells' provenance unknown); again from land_cell if another program
// wrote a table anew meanwhile (`git stash` in a results directory does),
// which would leave the appends in a file no one can read; and from
// land_cell for a cell that keeps rows, which appends cannot make whole.
void SweepRun::write_tables_landed(int landing) {
  const std::string& dir = plan_.dir;
  std::vector<CellRow> sorted = rows_;
  // A cell still to land keeps the rows it keeps in the tables (and its
  // provenance row, theirs), so that an interrupt loses none of them; the
  // cell `landing` is written whole.
  for (int id : keeps_) {
    const std::vector<std::optional<CellRow>>& got = pending_.at(id);
    for (size_t k = 0; k < got.size(); ++k)
      if (id == landing || (got[k] && plan_.kept(plan_.cells[size_t(id)], k)))
        sorted.push_back(*got[k]);
  }
  sort_rows(sorted, plan_.models);
  std::string cells_text = cells_header(), circle_text = kCircleHeader, trajectory_text = kTrajectoryHeader,
              provenance_text = kProvenanceHeader;
  for (size_t k = 0; k < sorted.size(); ++k) {
    const CellRow& r = sorted[k];
    if (k == 0 || sorted[k - 1].cell != r.cell) provenance_text += provenance_line(r);
    cells_text += cell_line(r);
    circle_text += circle_lines(r, plan_.cells[size_t(r.cell)].axis_values);
    trajectory_text += trajectory_lines(r);
  }
  // trajectory.csv and provenance.csv before cells.csv: a kill between them
  // leaves a directory that still reads as one that keeps the tables
  // (has_trajectory, has_provenance).
  if (trajectory_) write_file_atomic(dir + "/trajectory.csv", trajectory_text);
  write_file_atomic(dir + "/provenance.csv", provenance_text);
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);
  cells_f_.emplace(dir + "/cells.csv");
  circle_f_.emplace(dir + "/circle.csv");
  provenance_f_.emplace(dir + "/provenance.csv");
  if (trajectory_) trajectory_f_.emplace(dir + "/trajectory.csv");
}

// A cell lands once it holds every model's rows, whole: its circle,
// trajectory and provenance rows, then its cell rows (a cell counts only
// with all of them), with interrupts held off until all are written. Under
// the caller's lock; false after a failed write (which stops the sweep).
//
// Its one provenance.csv row, when its rows come from trainings run in
// different processes (an MPI worker's training copied to a grid point
// another rank trains, a finished cell's rows copied on --resume, or rows
// an unfinished cell kept): that of the first model (plan.models' order) the cell trains itself
// (SweepCell::trained_in), else, a cell every model of which another grid
// point trains, that of its first model's row. Every row of the cell then
// carries it, so the tables rewritten at the end (write_tables) name the
// same. A shared model's own build and machine are those of the cell it
// trained in, whose provenance row names the process that trained it; a
// kept row's, in a cell that trains another model anew, are no longer in
// the tables (harness/sweep_resume.h: keep_whole_rows).
bool SweepRun::land_cell(int id) {
  const auto it = pending_.find(id);
  if (it == pending_.end() || !std::all_of(it->second.begin(), it->second.end(), [](const auto& r) { return r.has_value(); }))
    return true;
  const SweepCell& cell = plan_.cells[size_t(id)];
  size_t own = 0;
  while (own < it->second.size() && plan_.trained_in(cell, own) != id) ++own;
  const Provenance provenance = it->second[own < it->second.size() ? own : 0]->provenance;
  std::string circle_add, trajectory_add, cells_add;
  for (std::optional<CellRow>& r : it->second) {
    r->provenance = provenance;
    circle_add += circle_lines(*r, cell.axis_values);
    trajectory_add += trajectory_lines(*r);
    cells_add += cell_line(*r);
  }
  const std::string provenance_add = provenance_line(*it->second.front());
  try {
    // The count moves inside the guard: an interrupt that lands between the
    // appends and the count would report one cell fewer than cells.csv holds.
    WriteGuard guard;
    if (!cells_f_->still_at_path() || !circle_f_->still_at_path() || !provenance_f_->still_at_path() ||
        (trajectory_f_ && !trajectory_f_->still_at_path())) {
      std::fprintf(stderr,
                   "viewgap sweep: a table in '%s' was written anew by another program while the sweep ran; "
                   "writing the tables of the %d cells landed again\n",
                   plan_.dir.c_str(), done_.load());
      write_tables_landed();
    }
    if (keeps_.count(id)) {
      // Its kept rows are in the tables already: they are written anew, the
      // cell whole among the landed ones.
      write_tables_landed(id);
    } else {
      circle_f_->append(circle_add);
      if (trajectory_f_) trajectory_f_->append(trajectory_add);
      provenance_f_->append(provenance_add);
      cells_f_->append(cells_add);
    }
    ++done_;
    if (also_done_ != nullptr) ++*also_done_;
    // meta.json counts what cells.csv holds, so that an interrupted sweep's
    // says how far it got, as its last line does.
    meta_["cells_done"] = done_.load();
    write_file_atomic(plan_.dir + "/meta.json", meta_.dump(2) + "\n");
    remove_checkpoints(plan_, cell);  // its training is in the tables now
  } catch (const std::exception& e) {
    write_error_ = e.what();  // the first failed write stops the sweep
    cells_->stop();
    return false;
  }
  for (std::optional<CellRow>& r : it->second) {
    out_.failed += r->status != "ok";
    rows_.push_back(std::move(*r));
  }
  pending_.erase(it);
  keeps_.erase(id);
  ++out_.ran;
  return true;
}

bool SweepRun::land(GroupResult g) {
  if (!write_error_.empty() || g.interrupted) return false;
  double seconds = 0;
  std::set<int> touched;
  for (const CellRow& r : g.rows) {
    seconds += r.seconds;
    const size_t k = size_t(std::find(plan_.models.begin(), plan_.models.end(), r.model) - plan_.models.begin());
    const auto to = dependents_.find(r.cell);
    if (to == dependents_.end()) continue;
    for (const auto& [id, model] : to->second) {
      if (model != k) continue;
      const SweepCell& c = plan_.cells[size_t(id)];
      CellRow copy = r;
      copy.cell = c.id;
      copy.grid = c.grid;
      pending_[id][k] = std::move(copy);
      touched.insert(id);
    }
  }
  for (int id : touched)
    if (!land_cell(id)) return false;
  cell_seconds_ += seconds;
  ++groups_ran_;
  trainings_ += g.trainings;
  models_trained_ += g.models;
  return true;
}

SweepOutcome SweepRun::finish() {
  if (!write_error_.empty()) throw std::runtime_error(write_error_);
  // One training per group, unless a cell's training data differed from its
  // group's (a protocol whose held-out set moves its training set): said here.
  // "models": the models trained, each training of each model once (a model
  // shared by grid points counts once: SweepCell::trained_in). A training that
  // served several sweeps (run_sweeps) counts in the one whose group led it.
  meta_["trainings"] = {{"groups", groups_ran_}, {"trainings", trainings_}, {"models", models_trained_}};
  if (trainings_ > groups_ran_ && !plan_.quiet)
    std::fprintf(stderr, "sweep: %d of %d trainings were of cells apart from their group: their training data depends on the held-out set\n",
                 trainings_ - groups_ran_, trainings_);
  out_.failed = write_final_tables(plan_, rows_, total_, plan_.shards == 1, trajectory_, meta_, t0_);
  remove_checkpoint_dir(plan_);
  out_.wall_s = meta_["wall_time_s"].get<double>();
  return out_;
}

double elapsed_s(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SweepOutcome run_sweep(const SweepPlan& plan, Cluster* cluster) {
  const auto t0 = std::chrono::steady_clock::now();
  SweepRun sweep(plan, t0);
  sweep.open();
  std::mutex mu;
  const InterruptProgress interrupt_note(&sweep.done(), sweep.total());
  progress(plan.quiet, sweep.done(), sweep.total(), 0, 0);
  auto land = [&](GroupResult g) {
    std::lock_guard<std::mutex> lock(mu);
    if (sweep.land(std::move(g))) progress(plan.quiet, sweep.done(), sweep.total(), elapsed_s(t0), sweep.ran());
  };
  auto take = [&]() -> const Group* { return sweep.take(); };
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
      const int landed = sweep.groups_landed();
      const std::chrono::duration<double> d(landed ? sweep.cell_seconds() / landed / kPollsPerCell : 0.001);
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
    sweep.meta()["mpi"] = {{"ranks", cluster->size()},
                   {"worker_groups", remote_cells},
                   {"worker_wait_s_per_group", remote_cells ? wait_s / remote_cells : 0.0}};
  }
  if (sweep.failed_write()) {
    if (!plan.quiet && isatty(2)) std::fputc('\n', stderr);  // end the progress line
    if (cluster != nullptr && cluster->size() > 1) {
      std::fprintf(stderr, "viewgap sweep: error: %s\n", sweep.write_error().c_str());
      cluster->abort(1);
    }
  }
  return sweep.finish();
}

std::vector<SweepOutcome> run_sweeps(const std::vector<const SweepPlan*>& plans) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<SweepRun>> runs;
  for (const SweepPlan* p : plans) runs.push_back(std::make_unique<SweepRun>(*p, t0));  // each judged: nothing written yet
  // The groups run together: each sweep's groups in order, a later sweep's
  // group of the same grid point and seed joining the first that trains the
  // same models. A group whose own training left checkpoints resumes alone.
  struct Part {
    size_t run;
    const Group* group;
  };
  auto models_of = [&](size_t i, const Group& g) {
    std::vector<std::string> names;
    for (size_t k : trained_here(*plans[i], *g.front())) names.push_back(plans[i]->models[k]);
    return names;
  };
  std::vector<std::vector<Part>> joint;
  std::vector<std::set<const Group*>> joined(runs.size());
  for (size_t i = 0; i < runs.size(); ++i)
    for (const Group& g : runs[i]->todo()) {
      if (joined[i].count(&g)) continue;
      std::vector<Part> parts{{i, &g}};
      if (!has_checkpoints(*plans[i], *g.front()))
        for (size_t j = i + 1; j < runs.size(); ++j)
          for (const Group& h : runs[j]->todo())
            if (!joined[j].count(&h) && h.front()->grid == g.front()->grid && h.front()->seed == g.front()->seed &&
                models_of(j, h) == models_of(i, g) && !has_checkpoints(*plans[j], *h.front())) {
              parts.push_back({j, &h});
              joined[j].insert(&h);
              break;
            }
      joint.push_back(parts);
    }
  // A group's cells as run_cells takes them, and the joint checkpoints judged before anything is written.
  auto cells_of = [&](const std::vector<Part>& parts) {
    std::vector<PlannedCell> cells;
    for (const Part& p : parts)
      for (const SweepCell* c : *p.group) cells.push_back({plans[p.run], c});
    return cells;
  };
  for (const std::vector<Part>& parts : joint) {
    if (parts.size() < 2) continue;
    std::vector<const SweepCell*> with;
    for (const PlannedCell& c : cells_of(parts))
      if (c.plan != plans[parts.front().run]) with.push_back(c.cell);
    check_joint_checkpoints(*plans[parts.front().run], *parts.front().group->front(), with);
  }

  std::atomic<int> done{0};
  int total = 0;
  bool quiet = true;
  for (const auto& r : runs) {
    done += r->done().load();
    total += r->total();
    quiet = quiet && r->plan().quiet;
    r->count_also(&done);
  }
  for (const auto& r : runs) r->open();
  const InterruptProgress interrupt_note(&done, total);
  auto ran = [&] {
    int n = 0;
    for (const auto& r : runs) n += r->ran();
    return n;
  };
  progress(quiet, done, total, 0, 0);
  std::mutex mu;
  auto failed = [&] {
    return std::any_of(runs.begin(), runs.end(), [](const auto& r) { return r->failed_write(); });
  };
  Dispenser<std::vector<Part>> groups(std::move(joint));
  // With checkpoints a first interrupt stops the trainings in flight at their
  // next step, their checkpoints written (as run_sweep's slots do).
  std::optional<DeferInterrupts> defer;
  if (std::any_of(plans.begin(), plans.end(), [](const SweepPlan* p) { return p->checkpoint_steps > 0 || p->checkpoint_seconds > 0; }))
    defer.emplace();
  int jobs = plans.front()->jobs;  // the caller's for them all (a group holds every sweep's datasets)
  for (const SweepPlan* p : plans) jobs = std::min(jobs, p->jobs);
  run_slots_on(jobs, [&] {
    const std::vector<Part>* parts = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!interrupt_pending() && !failed()) parts = groups.take();
    }
    if (parts == nullptr) return false;
    const std::vector<PlannedCell> cells = cells_of(*parts);
    GroupResult all = run_cells(cells);
    // Each sweep lands its own cells' rows (as many a cell as models trained);
    // the training counts in the lead's.
    std::lock_guard<std::mutex> lock(mu);
    size_t at = 0;
    const size_t per_cell = all.rows.size() / cells.size();
    bool landed = false;
    for (size_t p = 0; p < parts->size(); ++p) {
      const Part& part = (*parts)[p];
      GroupResult mine;
      mine.interrupted = all.interrupted;
      if (p == 0) {
        mine.trainings = all.trainings;
        mine.models = all.models;
      }
      const size_t n = part.group->size() * per_cell;
      mine.rows.assign(all.rows.begin() + long(at), all.rows.begin() + long(at + n));
      at += n;
      landed = runs[part.run]->land(std::move(mine)) || landed;
    }
    if (landed) progress(quiet, done, total, elapsed_s(t0), ran());
    return true;
  });
  defer.reset();  // an interrupt recorded meanwhile ends the process here
  if (failed() && !quiet && isatty(2)) std::fputc('\n', stderr);  // end the progress line
  std::vector<SweepOutcome> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i]->meta()["trained_with"] = nlohmann::json::array();
    for (size_t j = 0; j < runs.size(); ++j)
      if (j != i) runs[i]->meta()["trained_with"].push_back(plans[j]->dir);
  }
  for (const auto& r : runs) out.push_back(r->finish());
  return out;
}

}  // namespace vg
