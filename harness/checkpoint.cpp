// Checkpoints and model files for a training: capturing a model, writing and
// reading the file, restoring a model and Adam, and judging whether a
// checkpoint resumes this run. The bytes themselves: checkpoint_format.cpp.
#include "harness/checkpoint.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/read_file.h"
#include "harness/output.h"

namespace vg {

uint64_t checkpoint_config_hash(const std::string& config) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : config) h = (h ^ ch) * 1099511628211ull;
  return h;
}

Checkpoint capture_model(const ModelSpec& spec, const Model& model, const Adam* adam) {
  Checkpoint c;
  c.model = spec;
  const ParamSet& p = model.params();
  for (int t = 0; t < p.num_tensors(); ++t) c.tensors.push_back({p.tensor(t).name, p.tensor(t).size});
  c.weights = p.values();
  c.model_state = model.training_state();
  if (adam) c.adam = AdamState{adam->steps(), adam->m(), adam->v()};
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& c) {
  const std::vector<uint8_t> bytes = encode_checkpoint(c);
  write_file_atomic(path, std::span<const uint8_t>(bytes));
}

Checkpoint read_checkpoint(const std::string& path) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_regular_file(path);  // refuses a FIFO, a directory, a device before reading
  } catch (const FileReadError& e) {
    throw CheckpointError(e.what());  // already "PATH: what is wrong"
  }
  return decode_checkpoint(bytes, path);
}

void restore_model(const Checkpoint& c, const std::string& expected, Model& model, const std::string& file) {
  if (c.model.name != expected)
    throw CheckpointError(file + ": holds model '" + c.model.name + "', not '" + expected + "'");
  ParamSet& p = model.params();
  if (size_t(p.num_tensors()) != c.tensors.size())
    throw CheckpointError(file + ": holds " + std::to_string(c.tensors.size()) + " parameter tensors; model '" +
                          expected + "' here has " + std::to_string(p.num_tensors()));
  for (int t = 0; t < p.num_tensors(); ++t) {
    const TensorShape& f = c.tensors[size_t(t)];
    if (f.name != p.tensor(t).name || f.size != p.tensor(t).size)
      throw CheckpointError(file + ": parameter tensor " + std::to_string(t + 1) + " is '" + f.name + "' of " +
                            std::to_string(f.size) + " floats; model '" + expected + "' here has '" +
                            p.tensor(t).name + "' of " + std::to_string(p.tensor(t).size));
  }
  // A model file need not hold the state (it matters to training alone).
  if (!c.model_state.empty()) {
    try {
      model.restore_training_state(c.model_state);
    } catch (const std::invalid_argument& e) {
      throw CheckpointError(file + ": its training state does not fit model '" + expected + "': " + e.what());
    }
  }
  std::copy(c.weights.begin(), c.weights.end(), p.values().begin());
}

void check_resumable(const Checkpoint& c, const ModelSpec& expected, const std::string& config, const std::string& file) {
  if (!c.progress) throw CheckpointError(file + ": holds no training progress (a model file, not a checkpoint)");
  if (c.model.name != expected.name)
    throw CheckpointError(file + ": holds model '" + c.model.name + "', not '" + expected.name + "'");
  if (c.model.shape != expected.shape)
    throw CheckpointError(file + ": holds a model for images of " + c.model.shape.text() + "; this run's are " +
                          expected.shape.text());
  // An option the file lacks was added to the model after it was written: the
  // training ran as the option's default for that model does.
  const ModelOptions defaults = model_options_of(expected.name, {});
  for (const auto& [name, value] : expected.options) {
    const auto it = c.model.options.find(name);
    if (it == c.model.options.end() && defaults.count(name) > 0 && defaults.at(name) == value) continue;
    if (it == c.model.options.end() || it->second != value)
      throw CheckpointError(file + ": holds model '" + expected.name + "' with --" + name + " " +
                            (it == c.model.options.end() ? std::string("unset") : "'" + it->second + "'") +
                            "; this run's is '" + value + "'");
  }
  if (c.config_hash == checkpoint_config_hash(config)) return;
  // Name what differs where both texts are JSON objects (CONF and the run's).
  std::string what;
  const nlohmann::json a = nlohmann::json::parse(c.config, nullptr, false), b = nlohmann::json::parse(config, nullptr, false);
  if (a.is_object() && b.is_object())
    for (const auto& [key, value] : b.items())
      if (!a.contains(key) || a[key] != value) {
        what = " (its \"" + key + "\" is " + (a.contains(key) ? a[key].dump() : std::string("absent")) +
               ", this run's " + value.dump() + ")";
        break;
      }
  char hex[64];
  std::snprintf(hex, sizeof hex, "%016llx, this run's %016llx", (unsigned long long)c.config_hash,
                (unsigned long long)checkpoint_config_hash(config));
  throw CheckpointError(file + ": a checkpoint of another configuration: hash " + hex + what);
}

void restore_adam(const Checkpoint& c, Adam& adam, const std::string& file) {
  if (!c.adam) throw CheckpointError(file + ": holds no optimizer state (a model file, not a checkpoint)");
  if (c.adam->m.size() != adam.m().size())
    throw CheckpointError(file + ": Adam's state of " + std::to_string(c.adam->m.size()) + " parameters; here " +
                          std::to_string(adam.m().size()));
  adam.restore(c.adam->step, c.adam->m, c.adam->v);
}

std::string model_file_path(const std::string& pattern, const std::string& model) {
  static const std::string kPlaceholder = "{model}";
  std::string out = pattern;
  for (size_t at = 0; (at = out.find(kPlaceholder, at)) != std::string::npos; at += model.size())
    out.replace(at, kPlaceholder.size(), model);
  return out;
}

std::unique_ptr<Model> load_model(const Checkpoint& c, int max_batch, const std::string& file) {
  std::unique_ptr<Model> m;
  try {
    m = make_model(c.model.name, c.model.options, max_batch, c.model.shape);
  } catch (const std::invalid_argument& e) {
    throw CheckpointError(file + ": holds a model this viewgap cannot build: " + e.what());
  }
  restore_model(c, c.model.name, *m, file);
  return m;
}

}  // namespace vg
