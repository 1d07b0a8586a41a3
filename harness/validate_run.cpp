// validate_run: every run flag judged, in the order a user reads them, into
// the RunOptions that run and sweep train from.
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <map>

#include "harness/checkpoint.h"
#include "harness/memory_budget.h"
#include "harness/output.h"
#include "harness/report.h"
#include "harness/run_flag_source.h"
#include "harness/run_flags.h"
#include "models/numbers.h"
#include "models/registry.h"

namespace vg {

namespace {

// run's outputs: each file written once, regular files (or new ones) only,
// writable before training starts; a checkpoint already there only with --resume.
void check_run_outputs(const RunFlags& f, RunOptions* run) {
  RunOptions& o = *run;
  std::vector<OutputFile> outputs;
  if (!f.out_json.empty()) outputs.push_back({"--out-json", f.out_json, f.out_json});
  if (!f.dump.empty())
    for (const std::string& file : dump_files(f.dump)) outputs.push_back({"--dump", f.dump, file});
  // --save-model: a model file each (docs/checkpoints.md); several models need "{model}" to tell them apart.
  if (!f.save_model.empty()) {
    if (o.models.size() > 1 && f.save_model.find("{model}") == std::string::npos)
      throw UsageError("--save-model", f.save_model,
                       "names one file for the " + std::to_string(o.models.size()) +
                           " models of --models; put {model} in it (e.g. model-{model}.vgm) for each one's name");
    for (const std::string& m : o.models) {
      if (find_model(m)->fit_in_one_pass)
        throw UsageError("--save-model", f.save_model,
                         "model '" + m + "' is fit in one pass and has no weights to save (it keeps its training set)");
      outputs.push_back({"--save-model", f.save_model, model_file_path(f.save_model, m)});
    }
  }
  // Checkpoints: a file per model that trains by steps (one fit in one pass
  // has no training to resume), by --checkpoint or else beside --save-model's.
  std::vector<OutputFile> checkpoints;
  if (!f.checkpoint.empty() || !f.checkpoint_every.empty() || f.resume) {
    const CheckpointInterval every = f.checkpoint_every.empty()
                                         ? CheckpointInterval{0, kDefaultCheckpointSeconds}
                                         : parse_checkpoint_every("--checkpoint-every", f.checkpoint_every);
    const std::string pattern = !f.checkpoint.empty() ? f.checkpoint : f.save_model.empty() ? "" : f.save_model + ".ckpt";
    const std::string flag = !f.checkpoint.empty() ? "--checkpoint" : f.save_model.empty() ? "" : "--save-model";
    if (pattern.empty()) {
      if (f.resume) throw UsageError("--resume", "needs --checkpoint FILE (or --save-model FILE: then FILE.ckpt), the checkpoints to continue from");
      throw UsageError("--checkpoint-every", f.checkpoint_every,
                       "needs --checkpoint FILE (or --save-model FILE: then FILE.ckpt), where to write them");
    }
    if (o.models.size() > 1 && pattern.find("{model}") == std::string::npos)
      throw UsageError(flag, flag == "--checkpoint" ? f.checkpoint : f.save_model,
                       "names one checkpoint for the " + std::to_string(o.models.size()) +
                           " models of --models; put {model} in it (e.g. run-{model}.ckpt) for each one's name");
    for (const std::string& m : o.models)
      if (!find_model(m)->fit_in_one_pass)
        checkpoints.push_back({flag, flag == "--checkpoint" ? f.checkpoint : f.save_model, model_file_path(pattern, m)});
    outputs.insert(outputs.end(), checkpoints.begin(), checkpoints.end());
    o.train.checkpoint.file = pattern;
    o.train.checkpoint.every_steps = every.steps;
    o.train.checkpoint.every_seconds = every.seconds;
    o.train.checkpoint.resume = f.resume;
  }
  check_distinct_outputs(outputs);
  for (const OutputFile& out : outputs) {
    if (out.flag != "--save-model" && out.flag != "--checkpoint") continue;
    try {
      check_writable(out.file);
    } catch (const std::runtime_error& e) {
      throw UsageError(out.flag, out.value, (out.file != out.value ? out.file + ": " : "") + e.what());
    }
  }
  // A checkpoint there already is a training to continue: only --resume may replace it.
  for (const OutputFile& out : checkpoints) {
    struct stat st;
    if (!f.resume && ::stat(out.file.c_str(), &st) == 0)
      throw UsageError(out.flag, out.value, out.file + " holds a checkpoint already: add --resume to continue from it, or remove it");
  }
  if (!f.out_json.empty()) {
    try {
      check_writable(f.out_json);
    } catch (const std::runtime_error& e) {
      throw UsageError("--out-json", f.out_json, e.what());
    }
  }
  if (!f.dump.empty()) {
    try {
      make_output_dir(f.dump);
      remove_stale_temps(resolve_output_path(f.dump), false);
      for (const std::string& file : dump_files(f.dump)) check_writable(file);
    } catch (const std::runtime_error& e) {
      throw UsageError("--dump", f.dump, e.what());
    }
  }
}

// A per-model flag's entries, MODEL=VALUE[,MODEL=VALUE...] (--model-lr,
// --model-eval-every): each model among `models`, one that trains, named once;
// `value` reads each VALUE (throwing a UsageError of `flag`).
template <class T>
std::map<std::string, T> per_model(const char* flag, const std::string& given, const std::string& form,
                                   const std::string& models_flag, const std::vector<std::string>& models,
                                   const std::function<T(const std::string& model, const std::string& value)>& value) {
  std::map<std::string, T> out;
  if (given.empty()) return out;
  for (const std::string& entry : split(given, ',')) {
    const size_t eq = entry.find('=');
    const std::string m = entry.substr(0, eq);
    if (eq == std::string::npos || m.empty()) throw UsageError(flag, given, "expected " + form + ", got '" + entry + "'");
    if (std::find(models.begin(), models.end(), m) == models.end())
      throw UsageError(flag, given, "model '" + m + "' is not among --models '" + models_flag + "'");
    if (find_model(m)->fit_in_one_pass)
      throw UsageError(flag, given, "model '" + m + "' takes no training step (it is fit in one pass)");
    if (out.count(m) > 0) throw UsageError(flag, given, "model '" + m + "' given twice");
    out[m] = value(m, entry.substr(eq + 1));
  }
  return out;
}

}  // namespace

RunOptions validate_run(const RunFlags& flags, int* threads, bool sweep) {
  const RunFlags defaults = sweep ? sweep_run_defaults() : RunFlags{};
  const Protocol& protocol = select_run_protocol(flags, defaults);
  const RunFlags f = with_preset(protocol, flags, defaults);
  RunOptions o;
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  o.train.n_epochs = int(parse_int("--n-epochs", f.n_epochs, 1, 100000));
  o.train.lr = float(parse_real("--lr", f.lr, 0, 10, true, true));
  if (!f.max_steps.empty()) o.train.max_steps = long(parse_int("--max-steps", f.max_steps, 1, 1000000000000ll));
  if (const std::string why = parse_lr_schedule(f.lr_schedule, &o.train.lr_schedule); !why.empty())
    throw UsageError("--lr-schedule", f.lr_schedule, why);
  o.train.batch_size = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  *threads = int(parse_int("--threads", f.threads, 1, 1024));
  o.reproducible = f.reproducible;
  flag_errors([&] { protocol.configure(RunFlagSource(f, defaults), &o.data); });

  o.models.clear();
  for (const std::string& m : split(f.models, ',')) {
    if (find_model(m) == nullptr) throw UsageError("--models", f.models, "unknown model '" + m + "' (expected " + model_names() + ")");
    for (const auto& seen : o.models)
      if (seen == m) throw UsageError("--models", f.models, "model '" + m + "' listed twice");
    o.models.push_back(m);
  }
  if (o.models.empty()) throw UsageError("--models", f.models, "no model given");
  o.train.model_lr = per_model<float>("--model-lr", f.model_lr, "MODEL=LR[,MODEL=LR...]", f.models, o.models,
                                      [&](const std::string& m, const std::string& v) {
                                        double x = 0;
                                        if (const std::string why = real_in(v, 0, 10, true, true, &x); !why.empty())
                                          throw UsageError("--model-lr", f.model_lr,
                                                           "learning rate '" + v + "' of '" + m + "': " + why);
                                        return float(x);
                                      });
  // --lr set while every model that trains has its own rate would do nothing.
  if (!o.train.model_lr.empty() && flag_set(f, defaults, "lr") &&
      std::all_of(o.models.begin(), o.models.end(),
                  [&](const std::string& m) { return find_model(m)->fit_in_one_pass || o.train.model_lr.count(m) > 0; }))
    throw UsageError("--lr", f.lr, "every model that trains has its own rate in --model-lr '" + f.model_lr + "'");
  o.train.model = given_model_options(f.model, f.typed);
  check_models("--models", f.models, o.models, o.train.model, data_shape(f, o.data));
  // Models fit in one pass (nn1) take no training step: the training flags would do nothing.
  if (std::all_of(o.models.begin(), o.models.end(), [](const std::string& m) { return find_model(m)->fit_in_one_pass; }))
    for (const char* name : {"n-epochs", "max-steps", "lr", "lr-schedule", "batch-size", "stop-at-familiar",
                             "stop-check-every", "eval-every", "eval-until", "model-eval-every", "check-sample",
                             "validation"})
      if (flag_set(f, defaults, name))
        throw UsageError(std::string("--") + name, *run_flag(f, name),
                         "no model in --models '" + f.models + "' trains (each is fit in one pass)");

  // Stopping at a familiar accuracy, measured on a validation split of its own
  // (as many images per combination as the familiar test split).
  if (!f.stop_at_familiar.empty()) {
    if (!f.match_familiar.empty())
      throw UsageError("--stop-at-familiar", f.stop_at_familiar, "conflicts with --match-familiar (which sets the target)");
    o.stop_at_familiar = parse_real("--stop-at-familiar", f.stop_at_familiar, 0, 1, /*lo_open=*/true);
  }
  if (!f.match_familiar.empty()) {
    if (std::find(o.models.begin(), o.models.end(), f.match_familiar) == o.models.end())
      throw UsageError("--match-familiar", f.match_familiar, "not among --models '" + f.models + "'");
    // The rule stops the other models that train; one fit in one pass (nn1)
    // has no training to stop, so it does not count.
    if (std::none_of(o.models.begin(), o.models.end(), [&](const std::string& m) {
          return m != f.match_familiar && !find_model(m)->fit_in_one_pass;
        }))
      throw UsageError("--match-familiar", f.match_familiar,
                       "needs another model that trains to stop at its accuracy (--models '" + f.models +
                           "' has none: a model fit in one pass has no training to stop)");
    o.match_familiar = f.match_familiar;
  }
  if (!f.stop_check_every.empty()) {
    if (f.stop_at_familiar.empty() && f.match_familiar.empty())
      throw UsageError("--stop-check-every", f.stop_check_every, "has no effect without --stop-at-familiar or --match-familiar");
    o.train.stop_every = int(parse_int("--stop-check-every", f.stop_check_every, 1, 100000000));
  }
  if (!f.eval_every.empty()) {
    o.train.eval_every = long(parse_int("--eval-every", f.eval_every, 1, 100000000));
  }
  if (!f.eval_until.empty()) {
    if (f.eval_every.empty()) throw UsageError("--eval-until", f.eval_until, "has no effect without --eval-every");
    o.train.eval_until = long(parse_int("--eval-until", f.eval_until, 1, 100000000));
    if (o.train.eval_until < o.train.eval_every)
      throw UsageError("--eval-until", f.eval_until, "is before --eval-every's first check (step " + f.eval_every + "): no check would run");
  }
  o.train.model_checks = per_model<CheckSpan>(
      "--model-eval-every", f.model_eval_every, "MODEL=STEPS[:UNTIL][,...]", f.models, o.models,
      [&](const std::string& m, const std::string& v) {
        auto steps = [&](const std::string& what, const std::string& x) {
          long long n = 0;
          if (const std::string why = whole_in(x, 1, 100000000, &n); !why.empty())
            throw UsageError("--model-eval-every", f.model_eval_every, what + " '" + x + "' of '" + m + "': " + why);
          return long(n);
        };
        const size_t colon = v.find(':');
        CheckSpan span{steps("STEPS", v.substr(0, colon)), 0};
        if (colon != std::string::npos) span.until = steps("UNTIL", v.substr(colon + 1));
        if (span.until > 0 && span.until < span.every)
          throw UsageError("--model-eval-every", f.model_eval_every,
                           "'" + m + "' checks up to step " + std::to_string(span.until) + ", before its first check (step " +
                               std::to_string(span.every) + ")");
        return span;
      });
  if (!f.check_sample.empty()) {
    o.train.check_sample = int(parse_int("--check-sample", f.check_sample, 1, 100000000));
    // --dump's animation scores the circle after every epoch, on every image.
    if (!f.dump.empty()) throw UsageError("--check-sample", f.check_sample, "conflicts with --dump (give one of them)");
  }
  if (f.validation != "on" && f.validation != "off") throw UsageError("--validation", f.validation, "expected on or off");
  // The frontier (the novel error at each familiar validation error) needs the
  // split without a rule that stops training on it.
  if (o.stop_at_familiar > 0 || !o.match_familiar.empty() || f.validation == "on")
    o.data.n_val_per_combo = o.data.n_eval_per_combo;

  if (!sweep) check_geometry_flags(f, o.data, false);
  // One step per epoch of a batch holding every image would train at chance.
  const TrainingSize train = protocol.training_size(o.data);
  if (o.train.batch_size > train.images)
    throw UsageError("--batch-size", f.batch_size, "larger than the training set (" + train.text + ")");
  // A budget the epochs end before would do nothing.
  const long steps_per_epoch = long((train.images + o.train.batch_size - 1) / o.train.batch_size);
  if (o.train.max_steps > 0 && o.train.total_steps(steps_per_epoch) < o.train.max_steps)
    throw UsageError("--max-steps", f.max_steps,
                     "never reached: --n-epochs " + f.n_epochs + " ends training after " +
                         std::to_string(o.train.total_steps(steps_per_epoch)) + " steps (" +
                         std::to_string(steps_per_epoch) + " an epoch); raise --n-epochs");
  if (sweep) return o;
  check_memory(f, o, 1, "1", 1, *threads);
  check_run_outputs(f, &o);
  return o;
}

}  // namespace vg
