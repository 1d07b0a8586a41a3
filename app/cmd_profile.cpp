// `viewgap profile`: one model's training steps, timed layer by layer, as a
// CSV (and a Chrome trace), with the same flag checks as a run's.
#include <omp.h>

#include "app/commands.h"
#include "harness/memory_budget.h"
#include "harness/output.h"
#include "harness/profile.h"

namespace vg {

int do_profile(const ProfileFlags& f) {
  ProfileOptions o;
  if (find_model(f.model) == nullptr) throw UsageError("--model", f.model, "unknown model (expected " + model_names() + ")");
  const ModelOptions given = given_model_options(f.options, f.typed);
  const DataShape shape = run_data_shape(f.data, &o.data);
  check_models("--model", f.model, {f.model}, given, shape);
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
  const double need = model_bytes(f.model, given, o.batch, shape.shape) + dataset_bytes(o.data) + kBaseBytes;
  if (need > available_bytes()) {
    const ProfileFlags defaults;
    const SizeFlag batch{f.typed.count("batch-size") > 0 || f.batch_size != defaults.batch_size, f.batch_size,
                         int(parse_int("--batch-size", defaults.batch_size, 1, 4096)), "--batch-size"};
    refuse_model_size(model_size_drivers(f.model, given, o.batch, batch, shape.shape,
                                         SizeFlag{!shape.flag.empty() && f.typed.count(shape.flag.substr(2)) > 0,
                                                  shape.value, 0, shape.flag}), "--model", f.model,
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

}  // namespace vg
