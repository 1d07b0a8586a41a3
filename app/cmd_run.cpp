// `viewgap run` and `viewgap eval`: one configuration trained and evaluated,
// or a saved model evaluated.
#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "harness/checkpoint.h"
#include "harness/output.h"
#include "harness/report.h"
#include "harness/train.h"
#include "kernels/dnnl_common.h"
#include "kernels/isa.h"

namespace vg {

namespace {

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

}  // namespace

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

}  // namespace vg
