// `viewgap eval`: a saved model (a model file or a checkpoint,
// harness/checkpoint.h) evaluated on the splits `run`'s data flags make,
// through the evaluation a training ends with (harness/evaluate.h), so that on
// the training run's own data it reports the run's final accuracies bit for bit
// (docs/checkpoints.md#evaluating-a-saved-model-viewgap-eval).
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "harness/checkpoint.h"
#include "harness/run_flags.h"

namespace vg {

// The run flags `eval` does not take: they concern training alone (the
// model, its options and its training come from the file).
std::span<const char* const> eval_skipped_run_flags();

// `eval`'s flags: `run`'s data, protocol and output flags (all but
// eval_skipped_run_flags and the model options), and the file.
struct EvalFlags {
  RunFlags run;
  std::string model_file;
  // Training's flags and the models' options as given, by name without "--":
  // each is refused by name (a parser's "not expected" would not say why).
  std::map<std::string, std::string> not_taken;
};

// A validated `eval`: the configuration `run` would make of the same flags for
// the file's model, and that model, built and holding the file's weights.
struct EvalPlan {
  RunOptions opt;
  int threads = 1;
  std::string model_file;
  Checkpoint file;  // as read (the weights are also in `model`)
  std::unique_ptr<Model> model;
  int max_batch = 0;  // the model's, as its training built it (kEvalBatch, or a larger batch)
};

// Refuses a flag of `not_taken`, then reads and checks the file, then the
// flags as `run` validates them: a file
// that cannot be read, holds a model this viewgap cannot build, or was trained
// on images of another shape than the flags give is a UsageError naming
// --model-file, its value and what is wrong, as is --out-json naming the file.
EvalPlan validate_eval(const EvalFlags& f);

// Makes the dataset as `run` does and evaluates the model on it. `threads`
// (plan.threads) > 1: the dataset is made on that many, and the circle and
// axis sweep are shared with a second copy of the model, as a run shares them.
RunResult run_eval(const EvalPlan& plan);

// The table `run` prints, its first line naming the model and the file.
std::string format_eval_table(const EvalPlan& plan, const RunResult& r);

// The run JSON's layout (report.h: run_to_json) with "kind" "viewgap-eval":
// training's keys null (config's and each model's), and "model_file": its path,
// its configuration hash (16 hex digits), the configuration it records (null
// if none) and, for a checkpoint, where its training stood.
nlohmann::json eval_to_json(const EvalPlan& plan, const RunResult& r);

}  // namespace vg
