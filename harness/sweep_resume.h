// A sweep's configuration read back from its meta.json: `sweep --out DIR
// --resume` continues the sweep in DIR from it alone, and `merge` rebuilds a
// shard's flags from it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/sweep_plan.h"

namespace vg {

// The flags that plan `config` (meta.json's "config", SweepPlan::config)
// again; throws std::runtime_error where it names a flag this viewgap lacks.
SweepFlags sweep_flags_of(const nlohmann::json& config);

// Every field in which two sweep configurations differ, one "--lr is '1e-3'
// there, '2e-3' here" each; empty if none does.
std::vector<std::string> config_differences(const nlohmann::json& theirs, const nlohmann::json& ours);

// With --resume and a sweep in f.out: its flags from meta.json, with the
// flags typed beside --resume (RunFlags::typed) over them; a typed flag that
// changes the configuration is a UsageError naming every field that differs.
// The one exception is a typed --model-eval-every, which changes when models
// are checked and nothing they train (harness/train.h: CheckSchedule): the
// flags come back with `recheck` set (keep_whole_rows keeps the
// other models' rows), unless the sweep
// has trainings in progress, whose checkpoints hold the old checks (a
// UsageError naming the flag). Without --resume, or with no readable sweep in
// f.out: f as given (the directory's own checks say what is wrong).
SweepFlags resumed_sweep_flags(const SweepFlags& f);

// Whether two sweep configurations are the same but for --model-eval-every.
bool differ_only_in_model_checks(nlohmann::json a, nlohmann::json b);

// On --resume, the rows of unfinished cells that are whole on their own
// (read_finished) are kept rather than trained again, each cell's trained_in
// set to SweepCell::kKeptRow for them: a recheck's (plan.recheck) of every
// model whose checks did not change, or a cell's other models where one lost
// a row. A model whose checks changed trains again: its old trajectory lacks
// the new checks, or holds checks no longer asked for. A model's rows are
// kept in every cell of a training group still to run or in none (one
// training gives them all). Call it with plan.dir locked (prepare_sweep_dir),
// before run_sweep; it says what it kept.
struct KeptRows {
  int rows = 0;                            // kept
  std::vector<std::string> trained_again;  // the models some cell trains anew, in plan.models' order
};
KeptRows keep_whole_rows(SweepPlan& plan);

}  // namespace vg
