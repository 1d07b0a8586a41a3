#include "app/cli.h"

#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/export_norb.h"
#include "harness/checkpoint.h"
#include "harness/eval.h"
#include "harness/new_files.h"
#include "harness/output.h"
#include "harness/report.h"
#include "harness/memory_budget.h"
#include "harness/run_flags.h"
#include "harness/profile.h"
#include "harness/sweep_merge.h"
#include "harness/sweep_resume.h"
#include "harness/sweep_runner.h"
#include "harness/sweep_store.h"
#include "harness/sweep_plan.h"
#include "harness/train.h"
#include "kernels/dnnl_common.h"
#include "kernels/isa.h"
#include "models/numbers.h"
#include "models/registry.h"

namespace vg {

namespace {

// The results table lost to a full disk or a closed pipe is a failure, not a
// success: exit 1, one line (main() checks once more at exit).
void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int err = errno;
  std::clearerr(stdout);
  throw std::runtime_error(std::string("cannot write standard output: ") + (err ? std::strerror(err) : "write error"));
}

// --reproducible: the same bits on every x86-64 CPU with AVX2 and FMA. oneDNN is
// capped at AVX2 (its AVX-512 kernels sum in another order) and our kernels are
// pinned to their AVX2 variants; everything else already runs the same code on
// every such CPU (docs/reproducibility.md). Runs before any kernel does.
void enable_reproducible() {
  const std::string missing = isa_missing_features(Isa::avx2);
  if (!missing.empty())
    throw UsageError("--reproducible", "this CPU lacks " + missing +
                                           " (reproducible mode needs x86-64 with AVX2 and FMA)");
  const char* env = std::getenv("VIEWGAP_ISA");
  if (env != nullptr && *env != '\0' && std::string(env) != isa_name(Isa::avx2))
    throw UsageError("--reproducible", std::string("conflicts with VIEWGAP_ISA='") + env +
                                           "' (reproducible mode pins the kernels at avx2; unset it)");
  pin_isa(Isa::avx2);
  pin_onednn_isa_avx2();
}

// The models' options (models/registry.h) as flags of any command that builds a model.
// A model's own default (ModelEntry::defaults) is named in the option's help.
void add_model_flags(CLI::App* app, ModelOptions& opts) {
  for (const ModelOption* m : model_options()) {
    std::string help = m->help;
    for (const ModelEntry& e : model_registry())
      for (const auto& [name, value] : e.defaults)
        if (name == std::string(m->name)) help += std::string(" [") + e.name + "'s own default: " + value + "]";
    app->add_option(std::string("--") + m->name, opts[m->name], help)->capture_default_str();
  }
}

// Registers every run flag except those in `skip`, and the model options
// (`model_options`).
void add_run_flags(CLI::App* app, RunFlags& f, const std::vector<std::string>& skip, bool model_options = true) {
  for (const FlagSpec& s : run_flag_specs()) {
    if (std::find(skip.begin(), skip.end(), s.name) != skip.end()) continue;
    // The registries' models and splits, named in --models' and --split's help.
    std::string help = s.help;
    if (std::string(s.name) == "models") help = "Comma-separated, of: " + model_names();
    if (std::string(s.name) == "data") {
      // "synthetic (rendered), norb:DIR (smallNORB's ...) or idx:DIR (...)".
      const std::vector<Source>& sources = source_registry();
      help.clear();
      for (size_t i = 0; i < sources.size(); ++i)
        help += std::string(i == 0 ? "" : i + 1 == sources.size() ? " or " : ", ") + sources[i].form() + " (" +
                sources[i].help + ")";
      help += "; docs/data.md";
    }
    if (std::string(s.name) == "split") {
      // Per data source: "--data synthetic: a, b; --data norb:DIR: c".
      std::vector<std::pair<std::string, std::string>> by_source;
      for (const Protocol& p : protocol_registry()) {
        if (p.split == nullptr) continue;
        const std::string source = source_named(p.source).form();
        auto it = std::find_if(by_source.begin(), by_source.end(), [&](const auto& s) { return s.first == source; });
        if (it == by_source.end()) it = by_source.insert(by_source.end(), {source, ""});
        it->second += (it->second.empty() ? "" : ", ") + std::string(p.split);
      }
      for (size_t i = 0; i < by_source.size(); ++i)
        help += (i ? "; --data " : ": with --data ") + by_source[i].first + ": " + by_source[i].second;
    }
    app->add_option(std::string("--") + s.name, f.*(s.field), help)->capture_default_str();
  }
  for (const DataFlag& d : protocol_flags()) {
    if (d.how_switch) {
      const std::string name = d.name;
      app->add_flag_callback(std::string("--") + d.name, [&f, name] { f.protocol[name] = "on"; }, d.help);
      continue;
    }
    app->add_option(std::string("--") + d.name, f.protocol[d.name], d.help)->capture_default_str();
  }
  if (model_options) add_model_flags(app, f.model);
}

// Each protocol's default gaps (Protocol::default_gaps), as --gaps' help says them.
std::string default_gaps_text() {
  std::string text;
  for (const Protocol& p : protocol_registry()) {
    if (p.at_distance == nullptr) continue;
    text += (text.empty() ? "" : "; ") + std::string(p.name) + " " + (p.default_gaps ? p.default_gaps : SweepFlags{}.gaps) +
            (std::string(p.axis.unit) == "deg" ? "" : " " + std::string(p.axis.unit));
  }
  return text;
}

// run --resume: each model's checkpoint, where it has one, judged before any
// work (another configuration, model or shape is bad input, exit 2).
void resume_from(const RunOptions& opt, spdlog::logger& log) {
  DataConfig dc = opt.data;
  dc.seed = opt.train.seed;
  const ImageShape shape = image_shape(dc);
  const CheckpointConfig& ck = opt.train.checkpoint;
  for (const std::string& m : opt.models) {
    if (find_model(m)->fit_in_one_pass) continue;
    const std::string file = model_file_path(ck.file, m);
    std::error_code ec;
    if (std::filesystem::symlink_status(file, ec).type() == std::filesystem::file_type::not_found) {
      log.info("[{}] no checkpoint {}: trains from the start", m, file);
      continue;
    }
    const Checkpoint c = read_checkpoint(file);
    check_resumable(c, {m, model_options_of(m, opt.train.model), shape}, ck.config, file);
    log.info("[{}] resumes from {} at step {} of {}{}", m, file, c.progress->step, c.progress->total_steps,
             c.progress->done ? " (trained: evaluates)" : "");
  }
}

int do_run(const RunFlags& f) {
  int threads = 1;
  RunOptions opt = validate_run(f, &threads);
  opt.threads = threads;
  opt.train.circle_every_epoch = !f.dump.empty();  // snapshots for the animation
  omp_set_num_threads(threads);
  auto log = spdlog::stderr_color_mt("viewgap");
  log->set_pattern("[%T.%e] %v");
  if (f.quiet) log->set_level(spdlog::level::warn);
  log->info("viewgap run: seed {}, {} epochs, models {}, {} thread(s), ISA {} (oneDNN {}){}",
            opt.train.seed, opt.train.n_epochs, f.models, threads, isa_name(selected_isa()),
            onednn_isa(), opt.reproducible ? ", reproducible" : "");
  std::vector<ClassPose> poses;
  ClassReconstructions recons;
  // --save-model: each model as it finishes, written once the run is through.
  // The configuration without its thread count, on which no result depends.
  nlohmann::json config = run_config_json(opt, threads);
  config.erase("threads");
  std::vector<std::pair<std::string, Checkpoint>> model_files;
  CheckpointConfig& ck = opt.train.checkpoint;
  ck.config = config.dump();
  // The temporary files of checkpoint writers that are gone (killed mid-write).
  if (!ck.file.empty())
    for (const std::string& m : opt.models) {
      const std::filesystem::path dir = std::filesystem::path(resolve_output_path(model_file_path(ck.file, m))).parent_path();
      remove_stale_temps(dir.empty() ? "." : dir.string(), false);
    }
  if (ck.resume) resume_from(opt, *log);
  // An interrupt ends the training between two steps, after a checkpoint;
  // what finished is written below, and this guard's end exits 128 + signal.
  const DeferInterrupts defer;
  const RunResult r = run_experiment(
      opt,
      [&](const std::string& model, const EpochStats& e) {
        // A spread-loss model's loss rises as its margin anneals: beside it, the loss at the final margin.
        const std::string at_final =
            std::isnan(e.final_margin_loss)
                ? ""
                : fmt::format(" ({:.4f} at the final margin {:.3g})", e.final_margin_loss, e.final_margin);
        log->info("[{}] epoch {:>3}/{}  loss {:.4f}{}  familiar {:.3f}  held-out {:.3f}  ({:.3f} s)", model,
                  e.epoch, opt.train.n_epochs, e.loss, at_final, e.familiar, e.heldout, e.seconds);
      },
      [&](const std::string& name, Model& model, const Dataset& data) {
        if (!f.save_model.empty()) {
          Checkpoint c = capture_model({name, model_options_of(name, opt.train.model), data.train.shape()}, model);
          c.config = config.dump();
          c.config_hash = checkpoint_config_hash(c.config);
          model_files.emplace_back(model_file_path(f.save_model, name), std::move(c));
        }
        // The figures show the first model with class capsules, and the first
        // with a decoder.
        if (f.dump.empty()) return;
        if (poses.empty() && model.class_capsules().pose_dim > 0) poses = class_poses(model, data.heldout);
        if (recons.model.empty()) recons = class_reconstructions(name, model, data.heldout);
      });
  if (interrupt_pending()) {
    if (!f.out_json.empty()) write_file_atomic(f.out_json, run_to_json(opt, r, threads).dump(2) + "\n");
    if (ck.writes())
      log->warn("interrupted: checkpoints in {}; rerun with --resume to continue", ck.file);
    return 130;  // not reached: `defer` ends the process as the signal asks
  }
  std::cout << format_run_table(opt, r);  // flushed, and checked, by flush_stdout() below
  const nlohmann::json j = run_to_json(opt, r, threads);
  if (!f.out_json.empty()) {
    write_file_atomic(f.out_json, j.dump(2) + "\n");
    log->info("wrote {}", f.out_json);
  }
  if (!f.dump.empty()) {
    write_dump(f.dump, opt.train.seed, j, poses, recons);
    log->info("wrote figure inputs to {}", f.dump);
  }
  for (const auto& [file, c] : model_files) {
    write_checkpoint(file, c);
    log->info("wrote model {} to {}", c.model.name, file);
  }
  // The run is through and its results written: its checkpoints have served.
  if (!ck.file.empty())
    for (const std::string& m : opt.models)
      if (!find_model(m)->fit_in_one_pass) remove_output(model_file_path(ck.file, m));
  flush_stdout();
  return 0;
}

// viewgap eval: the file and the flags judged before any work
// (harness/eval.h), then the table and the JSON a run writes.
int do_eval(const EvalFlags& f) {
  const EvalPlan plan = validate_eval(f);
  omp_set_num_threads(plan.threads);
  auto log = spdlog::stderr_color_mt("viewgap");
  log->set_pattern("[%T.%e] %v");
  if (f.run.quiet) log->set_level(spdlog::level::warn);
  log->info("viewgap eval: {} from {} (configuration {:016x}), seed {}, {} thread(s), ISA {} (oneDNN {}){}",
            plan.file.model.name, plan.model_file, plan.file.config_hash, plan.opt.train.seed, plan.threads,
            isa_name(selected_isa()), onednn_isa(), plan.opt.reproducible ? ", reproducible" : "");
  if (const auto& g = plan.file.progress)
    log->info("{} is a checkpoint at step {} of {}{}: its weights as they stand", plan.model_file, g->step,
              g->total_steps, g->done ? " (training over)" : "");
  const RunResult r = run_eval(plan);
  std::cout << format_eval_table(plan, r);  // flushed, and checked, by flush_stdout() below
  if (!f.run.out_json.empty()) {
    write_file_atomic(f.run.out_json, eval_to_json(plan, r).dump(2) + "\n");
    log->info("wrote {}", f.run.out_json);
  }
  flush_stdout();
  return 0;
}

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

int sweep_on(const SweepFlags& given, Cluster* cluster) {
  // --resume: the configuration is meta.json's; the flags given must agree with it.
  const SweepFlags f = resumed_sweep_flags(given);
  if (f.run.reproducible && !given.run.reproducible) enable_reproducible();
  const SweepPlan plan = plan_sweep(f);
  // Started by mpirun/srun: rank 0 runs the sweep and writes; the other ranks
  // run the cells it hands them (harness/cluster.h).
  if (cluster != nullptr) {
    if (!f.shard.empty())
      throw UsageError("--shard", f.shard, "conflicts with an MPI launch (mpirun/srun hands out the cells; shards are for job arrays)");
    if (!f.checkpoint_every.empty())
      throw UsageError("--checkpoint-every", f.checkpoint_every,
                       "conflicts with an MPI launch (the ranks' trainings would checkpoint into rank 0's directory)");
    if (cluster->rank() != 0) return serve_sweep(plan, *cluster);
  }
  const std::unique_ptr<DirLock> lock = lock_out(plan);
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

// The one line for a failure, and its exit code: 2 bad input, 3 non-finite
// training, 1 anything else.
int report_error(const std::exception_ptr& ep, const std::string& command) {
  try {
    std::rethrow_exception(ep);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "viewgap %s: error: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const CheckpointError& e) {  // a file given to resume from: bad input
    std::fprintf(stderr, "viewgap %s: error: %s\n", command.c_str(), printable(e.what()).c_str());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "viewgap: error: %s\n", printable(e.what()).c_str());
    return 2;
  } catch (const NonFiniteError& e) {
    std::fprintf(stderr, "viewgap: stopped: %s\n", printable(e.what()).c_str());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "viewgap: error: %s\n", printable(e.what()).c_str());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "viewgap: error: unknown failure\n");
    return 1;
  }
}

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

// `viewgap export-norb DIR`: the synthetic shapes, or the toys, as smallNORB's six files.
struct ExportFlags {
  std::string dir, seed = "0", shapes = "seed", instances = "5", lightings = "6", variety = "wide", lights = "rig";
  bool quiet = false;
  std::set<std::string> typed;  // the toys' own flags given: refused with another --shapes
};

int do_export_norb(const ExportFlags& f) {
  NorbExportConfig c;
  c.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  // The toys, or the point shapes' sets (seed, asym).
  c.toys = f.shapes == "toys";
  if (!c.toys && f.shapes != "seed" && f.shapes != "asym")
    throw UsageError("--shapes", f.shapes, "unknown shape set (expected seed, asym or toys)");
  if (!c.toys) c.shapes = parse_shapes_flag(f.shapes);
  c.instances = int(parse_int("--instances", f.instances, 1, 5));  // the NYU files' numbers hold 10 toys
  c.lightings = int(parse_int("--lightings", f.lightings, 1, kNorbLightings));
  for (const char* flag : {"--variety", "--lights"})
    if (!c.toys && f.typed.count(flag)) throw UsageError(flag, flag == std::string("--variety") ? f.variety : f.lights,
                                                         "only with --shapes toys");
  if (f.variety != "wide" && f.variety != "narrow") throw UsageError("--variety", f.variety, "expected wide or narrow");
  if (f.lights != "rig" && f.lights != "mixed") throw UsageError("--lights", f.lights, "expected rig or mixed");
  c.variety = f.variety == "wide" ? ToyVariety::wide : ToyVariety::narrow;
  c.lights = f.lights == "rig" ? ToyLights::rig : ToyLights::mixed;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    // No half of a dataset: a reader would take three files for a whole split.
    write_new_files(f.dir, norb_export_paths(f.dir), norb_export_bytes(c), [&](const PutFile& put) {
      for (NorbPart part : {NorbPart::training, NorbPart::testing})
        for (const ExportFile& file : norb_export_part(c, f.dir, part)) put(file.path, file.bytes);
    });
  } catch (const NewFilesRefused& e) {
    throw UsageError("DIR", f.dir, e.what());
  }
  if (!f.quiet)
    std::fprintf(stderr, "viewgap export-norb: %ld stereo pairs of 96 x 96 (%s shapes, %d instance(s), %d lighting(s)) in %s, %.1f s\n",
                 2 * norb_export_records(c), f.shapes.c_str(), c.instances, c.lightings, f.dir.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

// viewgap merge DIR... --out DIR: the parts' configuration, read from their
// meta.json, becomes the sweep's flags again (the same parser and plan as
// `sweep`), so the merge checks every part against that plan
// (harness/sweep_merge.h).
struct MergeFlags {
  std::vector<std::string> dirs;
  std::string out;
  bool force = false;
};

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

struct ProfileFlags {
  std::string model = default_models().front(), batch_size = "32", steps = "200", warmup = "20", seed = "0";
  std::string threads = "1", out = "profile.csv", trace;
  ModelOptions options = RunFlags::default_model_options();
  std::set<std::string> typed;  // the options given on the command line
  bool reproducible = false;
};

int do_profile(const ProfileFlags& f) {
  ProfileOptions o;
  if (find_model(f.model) == nullptr) throw UsageError("--model", f.model, "unknown model (expected " + model_names() + ")");
  const ModelOptions given = given_model_options(f.options, f.typed);
  check_models("--model", f.model, {f.model}, given);
  if (find_model(f.model)->fit_in_one_pass)
    throw UsageError("--model", f.model, "is fit in one pass over the training set: it has no training step to profile");
  o.model = f.model;
  o.train.model = given;
  o.batch = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  o.steps = int(parse_int("--steps", f.steps, 1, 1000000));
  o.warmup = int(parse_int("--warmup", f.warmup, 0, 1000000));
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, 1ll << 53));
  const int threads = int(parse_int("--threads", f.threads, 1, 1024));
  if (f.reproducible && threads != 1)
    throw UsageError("--threads", f.threads, "--reproducible runs on one thread (oneDNN splits its sums by thread count)");
  const double need = model_bytes(f.model, given, o.batch) + dataset_bytes(DataConfig{}) + kBaseBytes;
  if (need > available_bytes()) {
    const ProfileFlags defaults;
    const SizeFlag batch{f.typed.count("batch-size") > 0 || f.batch_size != defaults.batch_size, f.batch_size,
                         int(parse_int("--batch-size", defaults.batch_size, 1, 4096)), "--batch-size"};
    refuse_model_size(model_size_drivers(f.model, given, o.batch, batch, ImageShape{}, SizeFlag{}), "--model", f.model,
                      "model '" + f.model + "' needs about " + gigabytes(need) + ", more than the " +
                          gigabytes(available_bytes()) + " of memory available");
  }
  std::vector<OutputFile> outputs;
  for (const auto& [flag, path] : {std::pair{"--out", f.out}, std::pair{"--trace", f.trace}}) {
    if (path.empty() && std::string(flag) == "--trace") continue;
    try {
      check_writable(path);
    } catch (const std::runtime_error& e) {
      throw UsageError(flag, path, e.what());
    }
    outputs.push_back({flag, path, path});
  }
  check_distinct_outputs(outputs);
  o.out_csv = f.out;
  o.trace = f.trace;
  omp_set_num_threads(threads);
  run_profile(o);
  flush_stdout();
  return 0;
}

// An option's name as typed ("--seed"): CLI11's get_name() is empty for a
// hidden option (eval's training flags), its long names are not.
std::string option_name(const CLI::Option* o) {
  const std::vector<std::string>& names = o->get_lnames();
  return names.empty() ? o->get_name() : "--" + names.front();
}

// CLI11 says only "--seed: At Most 1 required but received 2" for a flag given
// twice: name it and both values. "" if no option was given too often.
std::string repeated_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->get_expected_max() == 1 && o->count() > 1) {
        std::string values;
        for (const std::string& v : o->results()) values += (values.empty() ? "'" : ", '") + v + "'";
        return option_name(o) + " given " + std::to_string(o->count()) + " times (" + values + "): give it once";
      }
  return "";
}

// CLI11's message for a parse error, made to name the flag and its value where
// it does not: a flag given twice, a flag whose value is missing ("--seed=").
std::string parse_error_line(CLI::App& app, const CLI::ParseError& e) {
  const std::string repeated = repeated_option(app);
  if (!repeated.empty()) return repeated;
  const std::string what = e.what();
  const auto colon = what.find(": ");
  if (what.rfind("--", 0) == 0 && colon != std::string::npos && what.find(" required ") != std::string::npos &&
      what.size() >= 8 && what.compare(what.size() - 8, 8, " missing") == 0)
    return what.substr(0, colon) + " '': no value given";
  return what;
}

// The options of `sub` given on the command line, by name without "--":
// a flag typed at its default value is still refused where it is ignored.
std::set<std::string> typed_options(const CLI::App* sub) {
  std::set<std::string> out;
  for (const CLI::Option* o : sub->get_options())
    if (o->count() > 0 && option_name(o).rfind("--", 0) == 0) out.insert(option_name(o).substr(2));
  return out;
}

// An empty value is never "absent": --out-json "", --jobs "" are errors like any
// other bad value (one rule for every option of the command).
void check_no_empty_values(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->get_expected_min() > 0 && o->count() > 0)
        for (const std::string& v : o->results())
          if (v.empty()) throw UsageError(option_name(o), v, "empty value");
}

}  // namespace

int cli_main(int argc, char** argv) {
  // Under mpirun every rank parses the same flags: rank 0 alone reports what is wrong.
  const bool mute = launched_by_mpi() && launcher_rank() != 0;
  // Nor do they report an interrupt (the launcher's, when the job ends): they write nothing.
  if (mute) end_silently_on_interrupt();
  CLI::App app{"viewgap: novel-viewpoint generalisation of matrix capsules (EM routing) vs CNNs"};
  app.require_subcommand(1);
  // The commit as meta.json records it: tools/make_results.sh takes its provenance's from here.
  app.set_version_flag("--version", "viewgap 0.1.0, commit " + build_commit());

  RunFlags rf;
  CLI::App* run = app.add_subcommand("run", "Train and evaluate the models on one configuration");
  add_run_flags(run, rf, {});
  run->add_option("--out-json", rf.out_json, "Write the full results as JSON (atomically)");
  run->add_option("--save-model", rf.save_model,
                  "Write each trained model to FILE (atomically; docs/checkpoints.md); with several --models, "
                  "FILE holds {model}, which each model's name replaces");
  run->add_option("--checkpoint", rf.checkpoint,
                  "Write a checkpoint of each model's training to FILE as it goes (atomically; docs/checkpoints.md); "
                  "with several --models, FILE holds {model}. Default with --save-model FILE: FILE.ckpt");
  run->add_option("--checkpoint-every", rf.checkpoint_every,
                  "Checkpoint interval: steps (500) or a duration (30s, 10m, 2h); default 10m (with --checkpoint)");
  run->add_flag("--resume", rf.resume,
                "Continue each model's training from its checkpoint (same flags; bit-identical to a run never stopped)");
  run->add_option("--dump", rf.dump, "Also write figure inputs to DIR (dataset samples, poses, snapshots)");
  run->add_flag("--quiet,-q", rf.quiet, "No progress on stderr");
  const char* repro_help = "Bit-identical results on every x86-64 CPU with AVX2+FMA (pins oneDNN and the kernels at AVX2; one thread)";
  run->add_flag("--reproducible", rf.reproducible, repro_help);

  EvalFlags vf;
  CLI::App* eval = app.add_subcommand(
      "eval", "Evaluate a saved model (run --save-model, or a checkpoint) on any data and protocol of its image shape");
  eval->add_option("--model-file", vf.model_file,
                   "The model file (or checkpoint) to evaluate: its model, options and image shape are its own "
                   "(docs/checkpoints.md)")
      ->required();
  const std::vector<std::string> training(eval_skipped_run_flags().begin(), eval_skipped_run_flags().end());
  add_run_flags(eval, vf.run, training, false);
  std::string not_taken;
  for (const std::string& name : training) not_taken += (not_taken.empty() ? "--" : ", --") + name;
  // Hidden, so that each is refused by name (harness/eval.h: EvalFlags::not_taken),
  // with a value or without one (CLI11's own message for a missing value of a
  // hidden option names no option).
  std::vector<std::string> hidden = training;
  for (const ModelOption* m : model_options()) hidden.push_back(m->name);
  for (const std::string& name : hidden) eval->add_option("--" + name, vf.not_taken[name])->group("")->expected(0, 1);
  eval->add_option("--out-json", vf.run.out_json, "Write the results as JSON in a run's layout (atomically)");
  eval->add_flag("--quiet,-q", vf.run.quiet, "No progress on stderr");
  eval->add_flag("--reproducible", vf.run.reproducible, repro_help);
  eval->footer("The data flags make the images `run` makes of them (the same --seed, the same images). Not taken (exit 2): " +
               not_taken + " and the models' options: they concern training, and the file holds its model.");

  SweepFlags sf;
  CLI::App* sweep = app.add_subcommand("sweep", "Seeds x gaps along the held-out axis (x any run flag) in parallel, with statistics");
  sweep->add_option("--seeds", sf.seeds, "Seeds: A:B (inclusive) or a comma list")->capture_default_str();
  sweep->add_option("--gaps", sf.gaps,
                    "Gaps between the training views and the held-out set along the protocol's axis, in its unit; "
                    "'given': the held-out set of --test-azimuths/--test-elevations/--split as given (default: " +
                        default_gaps_text() + ")");
  sweep->add_option("--test-width", sf.test_width, "Width of the held-out azimuth window in degrees (stepped azimuth gaps only)")->capture_default_str();
  sweep->add_option("--grid", sf.grid,
                    "NAME=v1,v2,...: also sweep the run flag or model option --NAME (repeatable); a model that reads "
                    "none of the gridded options trains once per seed, its rows written at every grid point");
  sweep->add_option("--pair-grid", sf.pair_grid,
                    "A|B: paired statistics of every model whose training differs between grid points A and B, at A "
                    "against itself at B, each side the settings that pick it (e.g. 'loss=spread,em-grad=full|loss=xent'; "
                    "repeatable)");
  sweep->add_option("--reference", sf.reference, "Paired statistics: this model minus each other one (default " + default_models().front() + ")");
  sweep->add_option("--jobs", sf.jobs, "Trainings (each with its cells at every gap) run in parallel (default: the number of cores, or as many as fit in memory)");
  sweep->add_option("--out", sf.out, "Output directory")->required();
  sweep->add_flag("--resume", sf.resume, "Continue the sweep in --out, skipping finished cells (its configuration from meta.json: flags given must agree)");
  sweep->add_option("--checkpoint-every", sf.checkpoint_every,
                    "Checkpoint each training in progress into --out/checkpoints every N steps or a duration "
                    "(30s, 10m); --resume continues from them");
  sweep->add_option("--shard", sf.shard,
                    "K/N: run only the trainings (seed x grid point, each with its cells at every gap) whose index is K mod N (a Slurm array task: K = $SLURM_ARRAY_TASK_ID)");
  sweep->add_flag("--quiet,-q", sf.quiet, "No progress on stderr");
  sweep->add_flag("--reproducible", sf.run.reproducible, repro_help);
  sf.run.train_az = sweep_run_defaults().train_az;
  MergeFlags mf;
  CLI::App* merge = app.add_subcommand("merge", "Merge the shards of a sweep (sweep --shard K/N), or sweeps of disjoint --seeds, into the tables of the whole");
  merge->add_option("DIR", mf.dirs, "The shard directories, every K of 0..N-1 once; or whole sweeps of one configuration but for their seeds")->required();
  merge->add_option("--out", mf.out, "Output directory")->required();
  merge->add_flag("--force", mf.force, "Replace the tables of a sweep of the same configuration in --out");
  ExportFlags ef;
  CLI::App* exp = app.add_subcommand("export-norb",
                                     "Write the synthetic shapes, or the toys, as smallNORB's six files (96 x 96 stereo, its viewpoints)");
  exp->add_option("DIR", ef.dir, "Output directory (created if absent; no file there is replaced)")->required();
  exp->add_option("--seed", ef.seed, "Seed of the pixel noise (with --shapes toys: the world, as --data toys' --toy-seed)")->capture_default_str();
  exp->add_option("--shapes", ef.shapes, "The shape set: seed, asym, or toys (the toys dataset's meshes, data/toy_views.h)")->capture_default_str();
  exp->add_option("--instances", ef.instances, "Instances per class and split, 1..5 (smallNORB: 5)")->capture_default_str();
  exp->add_option("--lightings", ef.lightings, "Lighting levels, 1..6 (smallNORB: 6)")->capture_default_str();
  exp->add_option("--variety", ef.variety, "With --shapes toys: wide or narrow, as --data toys' --toy-variety")
      ->capture_default_str()
      ->each([&](const std::string&) { ef.typed.insert("--variety"); });
  exp->add_option("--lights", ef.lights, "With --shapes toys: rig or mixed, as --data toys' --toy-lights")
      ->capture_default_str()
      ->each([&](const std::string&) { ef.typed.insert("--lights"); });
  exp->add_flag("--quiet,-q", ef.quiet, "No summary on stderr");
  ProfileFlags pf;
  CLI::App* prof = app.add_subcommand("profile", "Per-layer timings of training steps -> CSV (and a Chrome trace)");
  prof->add_option("--model", pf.model, "The model: " + model_names())->capture_default_str();
  prof->add_option("--batch-size", pf.batch_size, "Batch size")->capture_default_str();
  prof->add_option("--steps", pf.steps, "Timed training steps")->capture_default_str();
  prof->add_option("--warmup", pf.warmup, "Untimed steps first")->capture_default_str();
  prof->add_option("--seed", pf.seed, "Seed of data and initialisation")->capture_default_str();
  prof->add_option("--threads", pf.threads, "oneDNN threads")->capture_default_str();
  add_model_flags(prof, pf.options);
  prof->add_option("--out", pf.out, "CSV: one row per layer and pass")->capture_default_str();
  prof->add_option("--trace", pf.trace, "Also write a Chrome trace-event JSON (Perfetto, chrome://tracing)");
  prof->add_flag("--reproducible", pf.reproducible, repro_help);
  add_run_flags(sweep, sf.run, {"seed", "threads"});  // --test-azimuths: with --gaps given only

  // CLI11 says only "A subcommand is required" for a mistyped one: name it.
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(subs.begin(), subs.end(), [&](const CLI::App* a) { return a->get_name() == argv[1]; })) {
    if (!mute) std::fprintf(stderr, "viewgap: error: unknown command '%s' (expected run, eval, sweep, merge, profile or export-norb)\n",
                 printable(argv[1]).c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!mute) std::fprintf(stderr, "viewgap: error: %s\n", printable(parse_error_line(app, e)).c_str());
    return 2;
  }
  try {
    check_no_empty_values(app);
    if ((run->parsed() && rf.reproducible) || (eval->parsed() && vf.run.reproducible) ||
        (sweep->parsed() && sf.run.reproducible) || (prof->parsed() && pf.reproducible))
      enable_reproducible();
    // VIEWGAP_ISA is input too: validate it before any work.
    (void)selected_isa();
    rf.typed = typed_options(run);
    vf.run.typed = typed_options(eval);
    sf.run.typed = typed_options(sweep);
    pf.typed = typed_options(prof);
    if (run->parsed()) return do_run(rf);
    if (eval->parsed()) return do_eval(vf);
    if (sweep->parsed()) return do_sweep(sf);
    if (prof->parsed()) return do_profile(pf);
    if (merge->parsed()) return do_merge(mf);
    if (exp->parsed()) return do_export_norb(ef);
  } catch (...) {
    if (mute) return 1;
    return report_error(std::current_exception(), app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name());
  }
  return 0;
}



}  // namespace vg