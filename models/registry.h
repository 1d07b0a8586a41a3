// The model registry: which models exist, the options each declares, and how
// to build one. A model is its files, which export its entry (ModelEntry,
// written with designated initializers: models/cnn.cpp's cnn_entry()), plus
// one line in model_registry() (registry.cpp). The harness names no concrete
// model and no model option: it passes a name from --models and the options
// as the user typed them, and reads what the entries declare.
#pragma once
#include <array>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace vg {

// Option name -> value as typed; an absent option takes its default.
using ModelOptions = std::map<std::string, std::string>;

// How a sweep's configuration hash (harness/sweep_plan.cpp) records an option
// at its default value (away from it, it is always recorded). A sweep must
// keep its hash, and so its --resume and merge, when a model gains an option
// it never set: such an option is recorded at its default by no sweep
// (`never`). `always`: the options of sweep format 3, recorded whatever their
// value; `when_read`: recorded where one of the sweep's models reads it.
enum class HashedAtDefault { always, when_read, never };

// An option of one or more models, set on the command line as --NAME VALUE
// (and sweepable with --grid NAME=...). Values stay text until the model that
// reads them parses them (read_integer, read_real, read_choice), so the
// harness needs no model's types.
enum class OptionKind { integer, real, choice, range };
struct ModelOption {
  const char* name;           // the flag without "--", e.g. "em-iters"
  OptionKind kind;            // how the JSON records it: integer, real, or text
  const char* default_value;
  const char* help;
  // Validation: an integer or real lies in lo..hi (above lo, not at it, where
  // lo_open; a real also as a float), a choice is one of `choices`. An option
  // of its own form (--loss, --spread-margin, --em-lambda-schedule) leaves
  // them unset: the parser of its shared option (models/shared_options.h) judges it.
  double lo = 0, hi = 0;
  bool lo_open = false;
  std::array<const char*, 4> choices = {};
  HashedAtDefault hashed_at_default = HashedAtDefault::when_read;
  // Why model `model`, which lists the option, does not act on it with
  // `opts` (resolved: model_options_of) though the user gave it (`given`):
  // another option replaces it. "" where it does; nullptr: always acts on it.
  std::string (*ignored)(const std::string& model, const ModelOptions& opts, const ModelOptions& given) = nullptr;
};
// Every model's options, each once, in the registry's order.
const std::vector<const ModelOption*>& model_options();
// The option named `name` (without "--"), or nullptr.
const ModelOption* find_option(const std::string& name);

// A bad option value: names the flag and the value, says why.
struct ModelOptionError : std::invalid_argument {
  ModelOptionError(std::string flag, std::string value, std::string why)
      : std::invalid_argument("--" + flag + " '" + value + "': " + why),
        flag(std::move(flag)), value(std::move(value)), why(std::move(why)) {}
  std::string flag, value, why;
};

// The value of option `o` in opts, or its default.
std::string option_value(const ModelOptions& opts, const ModelOption& o);
// Option `o`'s value, validated as it declares (ModelOptionError otherwise).
long long read_integer(const ModelOptions& opts, const ModelOption& o);
double read_real(const ModelOptions& opts, const ModelOption& o);
std::string read_choice(const ModelOptions& opts, const ModelOption& o);

// An input shape a model cannot take (a stack of convolutions and pools
// that would leave less than a pixel, more classes than its routing holds):
// names the model, the shape and why. The harness blames the flag that set
// the shape (--canvas), or --models.
struct ShapeError : std::invalid_argument {
  ShapeError(const std::string& model, const ImageShape& shape, const std::string& why)
      : std::invalid_argument("model '" + model + "' cannot take images of " + shape.text() + ": " + why),
        why(why) {}
  std::string why;
};
// The shape every model needs (ShapeError otherwise): at least one channel,
// one pixel and two classes, at most `max_classes` (capsule models route to
// at most 64 class capsules), and images whose floats an int counts.
void check_shape(const std::string& name, const ImageShape& shape, int max_classes = 1 << 20);

// A model's options and input shape, parsed and validated: what the harness
// asks of a model before building it (its size, for the memory check), and
// the builder. The registry parses each configuration once (model_plan).
struct ModelPlan {
  virtual ~ModelPlan() = default;
  virtual size_t param_count() const = 0;
  // Floats per image a training step holds (activations, their gradients,
  // oneDNN's copies), for the memory check; 0: the harness's generic guess.
  virtual size_t activation_floats() const { return 0; }
  // Floats a training step holds whatever the batch size, with `threads`
  // threads at work on it (a helper's buffers included); 0: none worth counting.
  virtual size_t step_floats(int threads) const {
    (void)threads;
    return 0;
  }
  // Allocates the model's buffers for batches up to max_batch.
  virtual std::unique_ptr<Model> make(int max_batch) const = 0;
};

struct ModelEntry {
  const char* name;  // as in --models; a name ending in "N" takes a number there ("cnnN")
  const char* help;
  std::vector<const ModelOption*> options;  // the options this model reads
  // Parses and validates the options (resolved: every one of `options`
  // present) for images and classes as the data gives them
  // (core/image_shape.h): every layer is sized from shape. Throws
  // ModelOptionError for a bad value, ShapeError for a shape the model cannot take.
  std::unique_ptr<const ModelPlan> (*plan)(const std::string& name, const ModelOptions& opts, const ImageShape& shape);
  // The option that sets the model's size when its name does not fix it
  // (--cnn-hidden for "cnn", not for "cnn136"), or nullptr: a memory error
  // names that flag.
  const ModelOption* size_option = nullptr;
  // Fit in one pass over the training set (Model::fit), with no training step.
  bool fit_in_one_pass = false;
  // Options (beside the defaults) under which backward is the exact gradient
  // of forward, with nothing held fixed, and the loss is smooth enough for
  // central differences at a step of 1e-3: the registry-wide gradient check
  // (tests/test_models.cpp) builds every model so.
  std::vector<std::pair<const char*, const char*>> exact_gradient_options = {};
  // The model's own defaults, where the recipe it follows departs from the
  // options' (convcaps trains the paper's way: spread loss, ...). A value the
  // user gave wins over them: see model_options_of.
  std::vector<std::pair<const char*, const char*>> defaults = {};
};
const std::vector<ModelEntry>& model_registry();

// The entry for a --models name ("caps", "cnn", "cnn136"), or nullptr.
const ModelEntry* find_model(const std::string& name);
// "caps, cnn, cnnN": the names --models accepts, for error messages.
std::string model_names();
// The models a command runs when none is named (run's and sweep's --models);
// the first is also the sweep's paired-statistics reference and profile's model.
const std::vector<std::string>& default_models();

// The plan of `name` with `opts` (resolved by model_options_of) for `shape`,
// parsed once per configuration and kept: a run checks, sizes and builds
// its models from the one parse. Throws as make_model does.
std::shared_ptr<const ModelPlan> model_plan(const std::string& name, const ModelOptions& opts,
                                            const ImageShape& shape = {});

// Builds `name` with `opts` for batches up to max_batch of images of `shape`
// (the data's: data/dataset.h image_shape; every layer, from conv1's input
// channels to the class count, is sized from it). Throws
// std::invalid_argument for an unknown name (listing the valid ones),
// ModelOptionError for a bad value of an option the model reads and
// ShapeError for a shape it cannot take. Building allocates the model's
// buffers; check_model validates without building.
std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& opts, int max_batch,
                                  const ImageShape& shape = {});
void check_model(const std::string& name, const ModelOptions& opts, const ImageShape& shape = {});
// Parameters of `name` with `opts` for `shape` (allocates nothing big).
size_t model_param_count(const std::string& name, const ModelOptions& opts, const ImageShape& shape = {});
// ModelPlan::activation_floats of `name`, or 0 where the model gives none.
size_t model_activation_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape = {});
// ModelPlan::step_floats of `name` at `threads` threads, or 0 where the model gives none.
size_t model_step_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape, int threads);
// The same for in_channels x 32 x 32 images of 5 classes (the rendered frame,
// smallNORB's crops): the tests' shorthand.
inline std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& opts, int max_batch,
                                         int in_channels) {
  return make_model(name, opts, max_batch, ImageShape{.channels = in_channels});
}
inline size_t model_param_count(const std::string& name, const ModelOptions& opts, int in_channels) {
  return model_param_count(name, opts, ImageShape{.channels = in_channels});
}
inline size_t model_activation_floats(const std::string& name, const ModelOptions& opts, int in_channels) {
  return model_activation_floats(name, opts, ImageShape{.channels = in_channels});
}

// The option that sets the size of model `name` ("cnn" -> "cnn-hidden"), or
// nullptr if its name or nothing does ("cnn136", "caps").
const char* size_option(const std::string& name);

// Why model `name`, which lists `option`, does not act on it under opts
// (another option replaces it: ModelOption::ignored; or the name fixes it:
// --cnn-hidden for "cnn136"), or "" where it reads it. A flag that no model
// of a run acts on is refused, so the run JSON never records a value that did nothing.
std::string option_ignored(const std::string& name, const std::string& option, const ModelOptions& opts);

// Every option model `name` reads, at the value it runs with: `given`'s where
// it holds one, else the model's own default (ModelEntry::defaults), else the
// option's. `given` holds the options the user set, and only those:
// an entry at the option's default still overrides the model's own.
// Every function above that takes a model's name and options resolves them so.
ModelOptions model_options_of(const std::string& name, const ModelOptions& given);

}  // namespace vg
