// The flags of `run` (and the run flags of `sweep`): their table and their
// validation into RunOptions (the memory check is harness/memory_budget.h's).
#pragma once
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/protocol.h"
#include "harness/train.h"

namespace vg {

// A value as one printable line: control characters (a newline in a grid
// value) shown escaped, so an error stays one line.
std::string printable(const std::string& v);

// Bad input: printed as one line, exit code 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& flag, const std::string& value, const std::string& why)
      : std::runtime_error(flag + " '" + printable(value) + "': " + printable(why)) {}
  // A flag that takes no value.
  UsageError(const std::string& flag, const std::string& why) : std::runtime_error(flag + ": " + why) {}
};

// The default of --models: the registry's default models, comma-separated.
std::string default_models_flag();

// Flags of `run` as the user typed them; validated into RunOptions.
struct RunFlags {
  std::string seed = "0", n_epochs = "10", lr = "2e-3", batch_size = "32", threads = "1";
  std::string train_az = "0:150", test_az = "200:330", elevations = "10:50";
  std::string test_elevations, n_test_elev, split;  // "": the training elevations; no preset
  std::string shapes = "seed";
  std::string data = source_registry().front().name;  // the default source (data/source.h)
  std::string n_train_views = "6", n_test_views = "6", n_elev = "3";
  std::string n_per_combo = "5", n_eval_per_combo = "2";
  std::string noise = "0.04";  // DataConfig::noise_std
  std::string models = default_models_flag();
  std::string stop_at_familiar, match_familiar, stop_check_every;  // "": off / after each epoch
  std::string eval_every;  // "": the trajectory's checks at epoch ends only
  std::string eval_until;  // "": --eval-every's checks all through training
  std::string model_eval_every;  // "": no model checks beyond --eval-every's
  std::string check_sample;  // "": every check scores every image
  std::string validation = "off";  // on: a familiar validation split scored after every epoch
  std::string model_lr;  // "": every model at --lr
  std::string max_steps;  // "": no budget beyond --n-epochs
  std::string lr_schedule = "constant";  // harness/schedule.h
  ModelOptions model = default_model_options();  // --cnn-hidden, --em-*, --loss, ...: the models' own
  ModelOptions protocol = default_protocol_flags();  // --train-shift, ...: the protocols' own (data/protocol.h)
  std::string out_json, dump;
  std::string save_model;  // "": none; a file per model, "{model}" replaced by its name (harness/checkpoint.h)
  // Checkpoints (docs/checkpoints.md): --checkpoint's file per model ("": --save-model's
  // with ".ckpt" added), written every --checkpoint-every; --resume continues from them.
  std::string checkpoint, checkpoint_every;
  bool resume = false;
  bool quiet = false, reproducible = false;
  // The flags typed on the command line, by name without "--" (a command's
  // own too: sweep's gaps, test-width; a --grid axis for its cells): typed
  // at its default value a flag is still the user's, and refused where the
  // configuration would ignore it.
  std::set<std::string> typed;

  // Every model option at its default, so each flag has a string to bind to.
  static ModelOptions default_model_options() {
    ModelOptions o;
    for (const ModelOption* m : model_options()) o[m->name] = m->default_value;
    return o;
  }
  static ModelOptions default_protocol_flags() {
    ModelOptions o;
    for (const DataFlag& d : protocol_flags()) o[d.name] = d.default_value;
    return o;
  }
};

// The run flags that take a value, once: `run` and `sweep` register them from
// here, and `sweep --grid NAME=...` finds its axis here.
struct FlagSpec {
  const char* name;
  std::string RunFlags::*field;
  const char* help;
  // A sweep hashes the flag at its default too; false for flags added after
  // sweep format 4, so that sweeps made before them keep their hash.
  bool hashed_at_default = true;
};
std::span<const FlagSpec> run_flag_specs();

// The text of run flag or model option `name` (what --grid NAME=... sets), or
// nullptr.
std::string* run_flag(RunFlags& f, const std::string& name);
const std::string* run_flag(const RunFlags& f, const std::string& name);


// Flag `name` set by the user: typed, or away from the command's `defaults`.
bool flag_set(const RunFlags& f, const RunFlags& defaults, const std::string& name);

// The images a run's data gives its models (data/dataset.h: image_shape),
// and the flag that set their side (Protocol::shape_flag, as "--canvas") with
// its value; no flag: the side is the data source's own.
struct DataShape {
  ImageShape shape;
  std::string flag, value;
};
// The data shape of a configured `d` under the flags `f`.
DataShape data_shape(const RunFlags& f, const DataConfig& d);

// The model options the user set: typed, or away from the registry-wide
// default (as a resumed sweep restores them). The models resolve these against
// their own defaults (models/registry.h: model_options_of), so an option left
// unset takes each model's own.
ModelOptions given_model_options(const ModelOptions& all, const std::set<std::string>& typed);

// Checks `models` (from --models or --model) for images of `data`, and every
// option they read; an option in `given` that none of them acts on is an
// error too (models/registry.h: option_ignored). A model that cannot take the
// shape blames data.flag, or else `flag`.
void check_models(const std::string& flag, const std::string& value, const std::vector<std::string>& models,
                  const ModelOptions& given, const DataShape& data = {});
// Every number a flag carries is read by the one rule of models/numbers.h.
long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi);
// `single`: the value is stored as a float, so it must stay nonzero and finite there.
double parse_real(const std::string& flag, const std::string& v, double lo, double hi,
                  bool lo_open, bool single = false);
std::vector<std::string> split(const std::string& s, char sep);
std::string fmt_num(double v);

// Throws the protocol's geometry problem as a UsageError naming its flag.
// A sweep builds its held-out window from --test-width and --gaps, so `t`
// names those for a problem with the window's own shape or where it lies.
struct TestFlags {
  std::string range_flag, range_value;      // the window's own shape
  std::string overlap_flag, overlap_value;  // where it lies: against the training range, or out of range
  std::string overlap_prefix;               // e.g. "gap 30: "
};
void check_geometry_flags(const RunFlags& f, const DataConfig& d, bool allow_touching_end,
                          const TestFlags* t = nullptr);

// A file an output flag writes.
struct OutputFile {
  std::string flag, value, file;
};

// The same file named twice (directly, through symlinks, "./x" or "d/../x") would
// be written twice, the second replacing the first: refused.
void check_distinct_outputs(const std::vector<OutputFile>& outputs);

// --checkpoint-every: a step count ("500") or a duration of whole seconds,
// minutes or hours ("30s", "10m", "2h"); the default interval when the flag is
// not given is kDefaultCheckpointSeconds. Throws UsageError naming `flag`.
inline constexpr double kDefaultCheckpointSeconds = 600;
struct CheckpointInterval {
  long steps = 0;
  double seconds = 0;
};
CheckpointInterval parse_checkpoint_every(const std::string& flag, const std::string& v);

// The defaults of `sweep`'s run flags (its training range is 0:60).
RunFlags sweep_run_defaults();
// --shapes, for run, sweep and export-norb.
ShapeSet parse_shapes_flag(const std::string& v);

// A protocol's FlagError (data/protocol.h) as the command line's UsageError.
template <class F>
decltype(auto) flag_errors(F&& f) {
  try {
    return f();
  } catch (const FlagError& e) {
    throw UsageError("--" + e.flag, e.value, e.why);
  }
}

// The protocol the flags choose (--data, --split, ...), against the command's defaults.
const Protocol& select_run_protocol(const RunFlags& flags, const RunFlags& defaults);

// The images `run`'s flags give its models (their protocol chosen and
// configured as validate_run does), before anything else is judged: `eval`
// compares them with its model's first, `profile` times its model on them.
// `config`: where set, the data configuration too (its seed left at 0).
DataShape run_data_shape(const RunFlags& flags, DataConfig* config = nullptr);

// Validates every flag into RunOptions, throwing UsageError naming the first
// bad one. `sweep`: the held-out window, memory and outputs are the sweep's to
// check (it builds one window per gap and runs cells in parallel).
RunOptions validate_run(const RunFlags& flags, int* threads, bool sweep = false);

}  // namespace vg
