// Model files and checkpoints: one versioned binary format, its writer and its
// validating reader side by side (docs/checkpoints.md describes the layout).
//
// A file is a fixed preamble (magic, version, size, its own CRC-32), tagged
// chunks, and a CRC-32 of everything before it. The chunks of version 1:
//   HEAD  the model (registry name, its options, the image shape), the hash of
//         the configuration that trained it, and its parameter tensors' names
//         and sizes (required, first);
//   WGHT  the weights, float32 (required);
//   MSTA  the model's training state beyond its weights (Model::training_state:
//         cnn's dropout stream), where it has one;
//   ADAM  Adam's step count and moments m and v (a checkpoint's; optional);
//   CONF  the run's configuration as JSON text (provenance; optional).
// A reader skips chunks it does not know and keeps them (Checkpoint::extra),
// so later steps add what resume needs (step, epoch, data order, the stopping
// rule's state, the history) as new chunks without a new version.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/registry.h"

namespace vg {

inline constexpr uint32_t kCheckpointVersion = 1;

// A file that cannot be read as one: one line naming the file and what is wrong.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What make_model needs to build the model again.
struct ModelSpec {
  std::string name;      // as --models names it ("cnn", "cnn136", "convcaps")
  ModelOptions options;  // every option it reads, resolved (model_options_of)
  ImageShape shape;
  bool operator==(const ModelSpec&) const = default;
};

struct TensorShape {
  std::string name;
  uint64_t size = 0;  // floats
  bool operator==(const TensorShape&) const = default;
};

// Adam's whole state: the bias corrections follow from the step count.
struct AdamState {
  long step = 0;
  std::vector<float> m, v;
};

struct Checkpoint {
  ModelSpec model;
  uint64_t config_hash = 0;  // of the configuration that trained it (checkpoint_config_hash)
  std::vector<TensorShape> tensors;  // in ParamSet order; their sizes sum to weights.size()
  std::vector<float> weights;
  std::vector<uint64_t> model_state;  // Model::training_state(); empty: none (no MSTA chunk)
  std::optional<AdamState> adam;
  std::string config;  // the configuration as JSON text, or "" (no CONF chunk)
  // Chunks this version does not define, by their four-character tag, as read
  // (written back as they are).
  std::map<std::string, std::string> extra;
};

// The model's spec, tensors, weights and training state (and with `adam`, Adam's).
Checkpoint capture_model(const ModelSpec& spec, const Model& model, const Adam* adam = nullptr);

// FNV-1a 64 of the configuration's text, as a sweep hashes its own (sweep_plan.h).
uint64_t checkpoint_config_hash(const std::string& config);

// The file's bytes; throws std::invalid_argument for a checkpoint that
// contradicts itself (tensor sizes against the weights, moments of another size,
// a tag that is not four printable characters or is one of this version's).
std::vector<uint8_t> encode_checkpoint(const Checkpoint& c);
// Parses and validates `bytes`; every error is a CheckpointError naming `file`.
Checkpoint decode_checkpoint(std::span<const uint8_t> bytes, const std::string& file);

// Atomically (harness/output.h: write_file_atomic): an existing file is
// replaced whole or, on any error, left as it was. Throws WriteError.
void write_checkpoint(const std::string& path, const Checkpoint& c);
// Reads and validates `path`: a regular file only (a FIFO or a directory is
// refused before it is opened for reading), of this version, whole (size and
// CRC-32), well formed. Throws CheckpointError.
Checkpoint read_checkpoint(const std::string& path);

// Checks that `c` holds `model`'s parameters (the model `expected` names, the
// same tensors in the same order and sizes, a training state it takes) and
// copies its weights and its training state (if the file holds one) in;
// `file` names it in the error. Throws CheckpointError, changing nothing.
void restore_model(const Checkpoint& c, const std::string& expected, Model& model, const std::string& file);
// Adam's state from `c` (which must hold one, of the model's size) into `adam`.
void restore_adam(const Checkpoint& c, Adam& adam, const std::string& file);

// The file `run --save-model PATTERN` writes model `model` to: PATTERN with
// each "{model}" replaced by the model's name (--models' spelling).
std::string model_file_path(const std::string& pattern, const std::string& model);

// The model `c` describes, built (make_model, for batches up to max_batch) and
// holding its weights and training state. A spec the registry refuses is a CheckpointError.
std::unique_ptr<Model> load_model(const Checkpoint& c, int max_batch, const std::string& file);

}  // namespace vg
