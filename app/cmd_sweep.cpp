// `viewgap sweep` and `viewgap merge`: the sweeps' tables, run (in one process,
// a Slurm array's shard or an MPI job's ranks) or merged from their parts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "app/commands.h"
#include "harness/cluster.h"
#include "harness/memory_budget.h"
#include "harness/output.h"
#include "harness/sweep_merge.h"
#include "harness/sweep_resume.h"
#include "harness/sweep_runner.h"
#include "harness/sweep_store.h"

namespace vg {

namespace {

// --out made (or checked) and locked for this plan: a directory it may not use
// is bad input naming --out; a full disk is not (exit 1).
std::unique_ptr<DirLock> lock_out(const SweepPlan& plan) {
  try {
    return prepare_sweep_dir(plan);
  } catch (const WriteError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw UsageError("--out", plan.dir, e.what());
  }
}

// On --resume, the rows of unfinished cells kept (harness/sweep_resume.h), and what trains again, said once.
void keep_rows(SweepPlan& plan) {
  const KeptRows r = keep_whole_rows(plan);
  if (plan.quiet || r.rows == 0) return;
  std::string names;
  for (const std::string& m : r.trained_again) names += (names.empty() ? "" : ", ") + m;
  std::fprintf(stderr, "sweep: %d rows of unfinished cells kept in '%s'%s; trained again: %s\n", r.rows,
               plan.dir.c_str(), plan.recheck ? " (their checks unchanged)" : "", names.empty() ? "none" : names.c_str());
}

// --out with every "{split}" in it replaced by `split`.
std::string out_of(std::string out, const std::string& split) {
  for (size_t at = out.find("{split}"); at != std::string::npos; at = out.find("{split}", at + split.size()))
    out.replace(at, 7, split);
  return out;
}

// `--split A,B,...`: a sweep a split, each into --out with "{split}" its name,
// run together so that the trainings they share run once (run_sweeps). Every
// sweep's flags are judged, and every directory locked, before any runs.
int sweeps_on(const SweepFlags& given, Cluster* cluster) {
  const std::vector<std::string> splits = split(given.run.split, ',');
  if (cluster != nullptr)
    throw UsageError("--split", given.run.split, "several splits run together in one process (not under mpirun/srun: run a sweep a split)");
  if (!given.shard.empty())
    throw UsageError("--split", given.run.split, "several splits run together in one process (give --shard to a sweep of one split)");
  if (given.out.find("{split}") == std::string::npos)
    throw UsageError("--out", given.out, "several --split values write a sweep each: put {split} in the path (e.g. out/{split})");
  std::vector<SweepFlags> flags;
  std::vector<SweepPlan> plans;
  bool reproducible = given.run.reproducible;  // enabled once, before any plan needs it
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i].empty()) throw UsageError("--split", given.run.split, "an empty split");
    for (size_t j = 0; j < i; ++j)
      if (splits[j] == splits[i]) throw UsageError("--split", given.run.split, "split '" + splits[i] + "' listed twice");
    SweepFlags g = given;
    g.run.split = splits[i];
    g.out = out_of(g.out, splits[i]);
    flags.push_back(resumed_sweep_flags(g));
    if (flags.back().run.reproducible && !reproducible) {
      enable_reproducible();
      reproducible = true;
    }
    plans.push_back(plan_sweep(flags.back()));
  }
  // Run together, a group holds every split's datasets (one a gap): the jobs
  // that fit, or the ones asked for, judged against them all.
  int datasets = 0;
  for (const SweepPlan& p : plans)
    datasets += int(std::count_if(p.cells.begin(), p.cells.end(), [](const SweepCell& c) { return c.group == 0; }));
  int jobs = plans.front().jobs;
  for (size_t i = 0; i < plans.size(); ++i) {
    const RunOptions& opt = plans[i].cells.front().opt;
    if (given.jobs.empty()) jobs = std::min(jobs, jobs_that_fit(opt, datasets));
    check_memory(flags[i].run, opt, jobs, given.jobs.empty() ? std::to_string(jobs) : given.jobs, datasets);
  }
  for (SweepPlan& p : plans) p.jobs = jobs;
  std::vector<std::unique_ptr<DirLock>> locks;
  for (const SweepPlan& p : plans) locks.push_back(lock_out(p));
  for (SweepPlan& p : plans) keep_rows(p);
  std::vector<const SweepPlan*> ptrs;
  for (const SweepPlan& p : plans) ptrs.push_back(&p);
  const std::vector<SweepOutcome> out = run_sweeps(ptrs);
  for (const std::unique_ptr<DirLock>& l : locks) l->remove();
  for (size_t i = 0; i < plans.size(); ++i)
    std::printf("%d cells (%d run now, %d resumed, %d failed) in %.1f s; results in %s\n", int(plans[i].cells.size()),
                out[i].ran, out[i].resumed, out[i].failed, out[i].wall_s, plans[i].dir.c_str());
  flush_stdout();
  return 0;
}

int sweep_on(const SweepFlags& given, Cluster* cluster) {
  if (given.run.split.find(',') != std::string::npos) return sweeps_on(given, cluster);
  if (given.out.find("{split}") != std::string::npos) {
    if (given.run.split.empty())
      throw UsageError("--out", given.out, "{split} names the --split values: give --split");
    SweepFlags g = given;
    g.out = out_of(g.out, g.run.split);
    return sweep_on(g, cluster);
  }
  // --resume: the configuration is meta.json's; the flags given must agree with it.
  const SweepFlags f = resumed_sweep_flags(given);
  if (f.run.reproducible && !given.run.reproducible) enable_reproducible();
  SweepPlan plan = plan_sweep(f);
  // Started by mpirun/srun: rank 0 runs the sweep and writes; the other ranks
  // run the cells it hands them (harness/cluster.h).
  if (cluster != nullptr) {
    // The ranks plan their cells alone: the rows rank 0 keeps would be trained again.
    if (f.recheck)
      throw UsageError("--model-eval-every", f.run.model_eval_every,
                       "changed beside --resume: resume that sweep in one process (not under mpirun/srun)");
    if (!f.shard.empty())
      throw UsageError("--shard", f.shard, "conflicts with an MPI launch (mpirun/srun hands out the cells; shards are for job arrays)");
    if (!f.checkpoint_every.empty())
      throw UsageError("--checkpoint-every", f.checkpoint_every,
                       "conflicts with an MPI launch (the ranks' trainings would checkpoint into rank 0's directory)");
    if (cluster->rank() != 0) return serve_sweep(plan, *cluster);
  }
  const std::unique_ptr<DirLock> lock = lock_out(plan);
  keep_rows(plan);
  const SweepOutcome r = run_sweep(plan, cluster);
  lock->remove();  // a finished sweep's directory is its tables; a killed one keeps the lock
  int in_shard = 0;
  for (const SweepCell& c : plan.cells) in_shard += plan.in_shard(c);
  std::printf("%d cells%s (%d run now, %d resumed, %d failed) in %.1f s; results in %s\n", in_shard,
              plan.shards > 1 ? (" of " + std::to_string(plan.cells.size()) + ", shard " + f.shard).c_str() : "",
              r.ran, r.resumed, r.failed, r.wall_s, f.out.c_str());
  flush_stdout();
  return 0;
}

}  // namespace

// `sweep`: under mpirun/srun every rank joins the job before it judges the
// flags, so that a failure on any rank ends the job in order: rank 0 says what
// is wrong (one line) and then dismisses the others, which end silently with
// exit 0 (a worker's non-zero exit would make the launcher kill rank 0 before
// it has spoken). A worker that fails alone says so and sits the sweep out.
int do_sweep(const SweepFlags& f) {
  if (!launched_by_mpi()) return sweep_on(f, nullptr);
  const std::unique_ptr<Cluster> cluster = Cluster::join();
  try {
    return sweep_on(f, cluster.get());
  } catch (...) {
    if (cluster->rank() == 0) {
      const int code = report_error(std::current_exception(), "sweep");
      dismiss_workers(*cluster, code);
      return code;
    }
    if (sit_out_sweep(*cluster)) {
      std::fprintf(stderr, "viewgap sweep (rank %d): ", cluster->rank());
      report_error(std::current_exception(), "sweep");
    }
    return 0;
  }
}

int do_merge(const MergeFlags& m) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& d : m.dirs)
    if (d.empty()) throw UsageError("DIR", d, "empty directory name");
  std::error_code ec;
  if (std::filesystem::exists(m.out + "/meta.json", ec) && !m.force)
    throw UsageError("--out", m.out, "holds a sweep already; add --force to replace its tables with the merge");
  // Every part is checked before --out is made or locked: a refused merge leaves nothing behind.
  SweepMerge merge = read_sweep_merge(m.dirs, m.out, m.force);
  const std::unique_ptr<DirLock> lock = lock_out(merge.plan);
  const SweepOutcome r = write_merged(merge.plan, std::move(merge.parts), t0);
  lock->remove();
  std::printf("%d cells merged from %zu %s (%d failed); results in %s\n", int(merge.plan.cells.size()), m.dirs.size(),
              merge.by_seeds ? "sweeps" : "shards", r.failed, m.out.c_str());
  flush_stdout();
  return 0;
}

}  // namespace vg
