#include "harness/sweep_checkpoints.h"

#include <unistd.h>

#include <filesystem>

#include "harness/checkpoint.h"
#include "harness/output.h"
#include "harness/report.h"

namespace vg {

namespace {
std::string checkpoint_dir(const SweepPlan& plan) { return plan.dir + "/checkpoints"; }

bool present(const std::string& path) {
  std::error_code ec;
  return std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found;
}

std::string pattern_of(const SweepPlan& plan, const SweepCell& cell) {
  return checkpoint_dir(plan) + "/cell-" + std::to_string(cell.id) + "-{model}.vgck";
}

// A training led by `cell` that evaluates other sweeps' cells beside its own
// (run_sweeps): its files apart from the cell's own, so that neither is
// resumed as the other (their histories hold other datasets).
std::string joint_pattern_of(const SweepPlan& plan, const SweepCell& cell) {
  return checkpoint_dir(plan) + "/cell-" + std::to_string(cell.id) + "-joint-{model}.vgck";
}

// The cell's configuration as a run of it would record it (threads aside).
nlohmann::json cell_config(const SweepCell& cell) {
  nlohmann::json config = run_config_json(cell.opt, 1);
  config.erase("threads");
  return config;
}

void check_files(const SweepPlan& plan, const SweepCell& lead, const CheckpointConfig& ck) {
  DataConfig dc = lead.opt.data;
  dc.seed = lead.opt.train.seed;
  const ImageShape shape = image_shape(dc);
  for (const std::string& m : plan.models) {
    const std::string file = model_file_path(ck.file, m);
    if (!present(file)) continue;
    check_resumable(read_checkpoint(file), {m, model_options_of(m, lead.opt.train.model), shape}, ck.config, file);
  }
}

}  // namespace

CheckpointConfig cell_checkpoints(const SweepPlan& plan, const SweepCell& lead) {
  CheckpointConfig ck;
  if (plan.checkpoint_steps == 0 && plan.checkpoint_seconds == 0 && !plan.resume) return ck;
  ck.file = pattern_of(plan, lead);
  ck.every_steps = plan.checkpoint_steps;
  ck.every_seconds = plan.checkpoint_seconds;
  ck.resume = plan.resume;
  ck.config = cell_config(lead).dump();
  return ck;
}

CheckpointConfig joint_checkpoints(const SweepPlan& plan, const SweepCell& lead, const std::vector<const SweepCell*>& with) {
  CheckpointConfig ck = cell_checkpoints(plan, lead);
  if (ck.file.empty()) return ck;
  ck.file = joint_pattern_of(plan, lead);
  nlohmann::json config = {{"cell", cell_config(lead)}, {"with", nlohmann::json::array()}};
  for (const SweepCell* c : with) config["with"].push_back(cell_config(*c));
  ck.config = config.dump();
  return ck;
}

bool has_checkpoints(const SweepPlan& plan, const SweepCell& lead) {
  if (!present(checkpoint_dir(plan))) return false;
  for (const std::string& m : plan.models)
    if (present(model_file_path(pattern_of(plan, lead), m))) return true;
  return false;
}

void check_joint_checkpoints(const SweepPlan& plan, const SweepCell& lead, const std::vector<const SweepCell*>& with) {
  if (plan.resume && present(checkpoint_dir(plan))) check_files(plan, lead, joint_checkpoints(plan, lead, with));
}

void check_checkpoints(const SweepPlan& plan, const std::vector<const SweepCell*>& leads) {
  if (!plan.resume || !present(checkpoint_dir(plan))) return;
  for (const SweepCell* lead : leads) check_files(plan, *lead, cell_checkpoints(plan, *lead));
}

void prepare_checkpoints(const SweepPlan& plan, const std::vector<int>& finished) {
  if (plan.checkpoint_steps > 0 || plan.checkpoint_seconds > 0) make_output_dir(checkpoint_dir(plan));
  if (!present(checkpoint_dir(plan))) return;
  remove_stale_temps(checkpoint_dir(plan), true);  // the sweep's lock is held: no live writer owns one
  for (int id : finished) remove_checkpoints(plan, plan.cells[size_t(id)]);
}

void remove_checkpoints(const SweepPlan& plan, const SweepCell& cell) {
  for (const std::string& m : plan.models) {
    remove_output(model_file_path(pattern_of(plan, cell), m));
    remove_output(model_file_path(joint_pattern_of(plan, cell), m));
  }
}

void remove_checkpoint_dir(const SweepPlan& plan) {
  if (present(checkpoint_dir(plan))) ::rmdir(checkpoint_dir(plan).c_str());  // only if empty: best effort
}

}  // namespace vg
