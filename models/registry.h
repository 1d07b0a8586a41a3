// The model registry: which models exist, the options they read, and how to
// build one. Adding a model is adding its files plus one line in model_registry()
// (registry.cpp). The harness names no concrete model: it passes a name from
// --models and the options as the user typed them.
#pragma once
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace vg {

// An option of one or more models, set on the command line as --NAME VALUE
// (and sweepable with --grid NAME=...). Values stay text until the model that
// reads them parses them, so the harness needs no model's types.
enum class OptionKind { integer, real, choice, range };
struct ModelOption {
  const char* name;           // the flag without "--", e.g. "em-iters"
  OptionKind kind;            // how the JSON records it: integer, real, or text
  const char* default_value;
  const char* help;
};
const std::vector<ModelOption>& model_options();

// Option name -> value as typed; an absent option takes its default.
using ModelOptions = std::map<std::string, std::string>;

// A bad option value: names the flag and the value, says why.
struct ModelOptionError : std::invalid_argument {
  ModelOptionError(std::string flag, std::string value, std::string why)
      : std::invalid_argument("--" + flag + " '" + value + "': " + why),
        flag(std::move(flag)), value(std::move(value)), why(std::move(why)) {}
  std::string flag, value, why;
};

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

struct ModelEntry {
  const char* name;  // as in --models; a name ending in "N" takes a number there ("cnnN")
  const char* help;
  std::vector<const char*> options;  // the options this model reads
  // Input images and classes as the data gives them (core/image_shape.h):
  // every layer is sized from shape. A shape the model cannot take throws ShapeError.
  std::unique_ptr<Model> (*make)(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                                 int max_batch);
  // Parameters, from the options and shape alone (an up-front memory check
  // needs it); validates both as make does.
  size_t (*param_count)(const std::string& name, const ModelOptions& opts, const ImageShape& shape);
  // The option that sets the model's size when its name does not fix it
  // (--cnn-hidden for "cnn", not for "cnn136"), or nullptr: a memory error
  // names that flag.
  const char* size_option = nullptr;
  // Fit in one pass over the training set (Model::fit), with no training step.
  bool fit_in_one_pass = false;
  // Floats per image a training step holds (activations, their gradients,
  // oneDNN's copies), for the memory check; nullptr: the harness's generic guess.
  size_t (*activation_floats)(const std::string& name, const ModelOptions& opts, const ImageShape& shape) = nullptr;
  // Options (beside the defaults) under which backward is the exact gradient
  // of forward, with nothing held fixed, and the loss is smooth enough for
  // central differences at a step of 1e-3: the registry-wide gradient check
  // (tests/test_models.cpp) builds every model so.
  std::vector<std::pair<const char*, const char*>> exact_gradient_options = {};
  // The model's own defaults, where the recipe it follows departs from the
  // registry-wide ones (convcaps trains the paper's way: spread loss, ...). A
  // value the user gave wins over them: see model_options_of.
  std::vector<std::pair<const char*, const char*>> defaults = {};
  // Floats a training step holds whatever the batch size, with `threads`
  // threads at work on it (a helper's buffers included), for the memory
  // check; nullptr: none worth counting.
  size_t (*step_floats)(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                        int threads) = nullptr;
};
const std::vector<ModelEntry>& model_registry();

// The entry for a --models name ("caps", "cnn", "cnn136"), or nullptr.
const ModelEntry* find_model(const std::string& name);
// "caps, cnn, cnnN": the names --models accepts, for error messages.
std::string model_names();
// The models a command runs when none is named (run's and sweep's --models);
// the first is also the sweep's paired-statistics reference and profile's model.
const std::vector<std::string>& default_models();

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
// Parameters of `name` with `opts` for `shape` (parses the options, allocates nothing big).
size_t model_param_count(const std::string& name, const ModelOptions& opts, const ImageShape& shape = {});
// Model::activation_floats of `name`, or 0 where the model gives none.
size_t model_activation_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape = {});
// ModelEntry::step_floats of `name` at `threads` threads, or 0 where the model gives none.
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
// (another option replaces it: --em-lambda under a lambda schedule,
// --spread-margin without --loss spread; or the name fixes it: --cnn-hidden
// for "cnn136"), or "" where it reads it. A flag that no model of a run acts
// on is refused, so the run JSON never records a value that did nothing.
std::string option_ignored(const std::string& name, const std::string& option, const ModelOptions& opts);

// The value of option `name` in opts, or its registry-wide default.
std::string option_value(const ModelOptions& opts, const std::string& name);

// Every option model `name` reads, at the value it runs with: `given`'s where
// it holds one, else the model's own default (ModelEntry::defaults), else the
// registry-wide one. `given` holds the options the user set, and only those:
// an entry at the registry-wide default still overrides the model's own.
// Every function above that takes a model's name and options resolves them so.
ModelOptions model_options_of(const std::string& name, const ModelOptions& given);

}  // namespace vg
