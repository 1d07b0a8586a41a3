// `viewgap eval` (harness/eval.h): the file judged, then the flags as `run`
// judges them, then the run's own dataset and final evaluation.
#include "harness/eval.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "harness/evaluate.h"
#include "harness/report.h"

namespace vg {

namespace {

constexpr const char* kTrainingFlags[] = {"n-epochs",         "max-steps",        "lr",
                                          "model-lr",         "lr-schedule",      "batch-size",
                                          "models",           "stop-at-familiar", "match-familiar",
                                          "stop-check-every", "validation",       "eval-every",
                                          "eval-until",       "model-eval-every", "check-sample"};

// What is wrong with the file, without the file's name a CheckpointError
// starts with: the UsageError names it as --model-file's value.
std::string reason(const CheckpointError& e, const std::string& file) {
  const std::string what = e.what(), prefix = file + ": ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::span<const char* const> eval_skipped_run_flags() { return kTrainingFlags; }

EvalPlan validate_eval(const EvalFlags& ef) {
  for (const auto& [name, value] : ef.not_taken)
    if (ef.run.typed.count(name) > 0)
      throw UsageError("--" + name, value, "not taken by eval: it concerns training, and the model file holds its model and options");
  EvalPlan p;
  p.model_file = ef.model_file;
  auto refused = [&](const std::string& why) { return UsageError("--model-file", ef.model_file, why); };
  try {
    p.file = read_checkpoint(ef.model_file);
  } catch (const CheckpointError& e) {
    throw refused(reason(e, ef.model_file));
  }
  const ModelSpec& spec = p.file.model;
  // The file's images against the flags' first: a model of another shape
  // would otherwise be refused as though a data flag were wrong.
  const DataShape data = run_data_shape(ef.run);
  if (data.shape != spec.shape)
    throw refused("model '" + spec.name + "' takes images of " + spec.shape.text() + "; " +
                  (data.flag.empty() ? "--data '" + ef.run.data + "'" : data.flag + " '" + data.value + "'") +
                  " gives images of " + data.shape.text());
  if (find_model(spec.name) == nullptr)
    throw refused("holds model '" + spec.name + "', which this viewgap does not have (" + model_names() + ")");
  if (!ef.run.out_json.empty())
    check_distinct_outputs({{"--model-file", ef.model_file, ef.model_file}, {"--out-json", ef.run.out_json, ef.run.out_json}});

  const nlohmann::json conf = nlohmann::json::parse(p.file.config, nullptr, false);
  auto recorded = [&](const char* key) {
    return conf.is_object() && conf.contains(key) && conf[key].is_number_integer() ? conf[key].get<int>() : 0;
  };

  // The flags as `run` judges them, for the file's model at its options; the
  // batch is the evaluation's (kEvalBatch), not a training's to check.
  RunFlags f = ef.run;
  f.models = spec.name;
  for (const auto& [name, value] : spec.options)
    if (const auto it = f.model.find(name); it != f.model.end()) it->second = value;
  f.batch_size = "1";
  p.opt = validate_run(f, &p.threads);
  // A training under a stopping rule (which eval does not take) had a
  // validation split, made as run makes it: its accuracy is reported too.
  if (recorded("n_val_per_combo") > 0) p.opt.data.n_val_per_combo = p.opt.data.n_eval_per_combo;

  // Built as its training built it: for its training batch too, where that
  // was larger than the evaluation's (the configuration records it).
  p.max_batch = std::clamp(recorded("batch_size"), kEvalBatch, 4096);
  try {
    p.model = load_model(p.file, p.max_batch, ef.model_file);
  } catch (const CheckpointError& e) {
    throw refused(reason(e, ef.model_file));
  }
  return p;
}

RunResult run_eval(const EvalPlan& p) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  DataConfig dc = p.opt.data;
  dc.seed = p.opt.train.seed;
  r.data = make_dataset(dc);
  omp_pause_resource_all(omp_pause_soft);  // as a run does before its models start
  r.dataset_s = seconds_since(t0);

  // A run's models evaluate on one thread each (oneDNN's sums depend on the
  // thread count); with more, a second copy takes a share of the batches.
  struct OneThread {
    int saved = omp_get_max_threads();
    OneThread() { omp_set_num_threads(1); }
    ~OneThread() { omp_set_num_threads(saved); }
  } one_thread;
  std::unique_ptr<Model> helper;
  if (p.threads > 1) helper = load_model(p.file, p.max_batch, p.model_file);
  EvalPool pool;
  bool done = false;  // pool.update
  std::thread worker;
  if (helper)
    worker = std::thread([&] {
      omp_set_num_threads(1);
      pool.help_until([&] { return done; });
    });
  struct Join {
    EvalPool& pool;
    bool& done;
    std::thread& worker;
    ~Join() {
      pool.update([&] { done = true; });
      if (worker.joinable()) worker.join();
    }
  } join{pool, done, worker};

  ModelResult m = evaluate_trained(p.file.model.name, *p.model, r.data, helper.get(), helper ? &pool : nullptr);
  if (p.file.progress) m.steps = p.file.progress->step;
  r.models.push_back(std::move(m));
  r.total_s = seconds_since(t0);
  return r;
}

std::string format_eval_table(const EvalPlan& p, const RunResult& r) {
  std::string what = "a model file";
  if (const auto& g = p.file.progress)
    what = "a checkpoint at step " + std::to_string(g->step) + " of " + std::to_string(g->total_steps);
  return format_run_table(p.opt, r,
                          p.file.model.name + " from " + p.model_file + " (" + what + "); seed " +
                              std::to_string(p.opt.train.seed) + "; ");
}

nlohmann::json eval_to_json(const EvalPlan& p, const RunResult& r) {
  using nlohmann::json;
  json j = run_to_json(p.opt, r, p.threads);
  j["kind"] = "viewgap-eval";
  for (const char* key : {"n_epochs", "lr", "model_lr", "batch_size", "stop_at_familiar", "match_familiar",
                          "stop_check_every"})
    j["config"][key] = nullptr;
  for (json& m : j["models"]) m["lr"] = nullptr;
  json checkpoint = nullptr;
  if (const auto& g = p.file.progress)
    checkpoint = {{"step", g->step}, {"total_steps", g->total_steps}, {"done", g->done}};
  const json config = json::parse(p.file.config, nullptr, false);
  j["model_file"] = {{"path", p.model_file},
                     {"config_hash", hex16(p.file.config_hash)},
                     {"config", config.is_discarded() ? json(nullptr) : config},
                     {"checkpoint", checkpoint}};
  return j;
}

}  // namespace vg
