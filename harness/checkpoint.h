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
//   CONF  the run's configuration as JSON text (provenance; optional);
//   PROG  where a training stands: step, epoch, the position in the epoch's
//         data order and its loss so far, the stopping rule's state, whether
//         training is over (a checkpoint's; with LOSS and HIST);
//   LOSS  the loss of every step taken;
//   HIST  the per-epoch history so far, for each dataset evaluated on;
//   TRAJ  for each epoch of HIST, the steps taken at its end and the validation
//         accuracy (optional: a file without it reads as NaN and the step
//         its epochs' ends imply, min(epoch x steps_per_epoch, step));
//   SPRD  a spread-loss model's loss at its final margin: the epoch under
//         way's so far, and each epoch's of HIST (only a spread-loss
//         training's; a file without it reads as NaN);
//   CHKS  the checks inside an epoch so far (--eval-every), for each dataset
//         evaluated on (only a training with such checks).
// A reader skips chunks it does not know and keeps them (Checkpoint::extra),
// so a chunk added later needs no new version: PROG, LOSS and HIST came after
// the first files of version 1, which load as model files, TRAJ after HIST, SPRD and CHKS after TRAJ.
#pragma once
#include <cmath>
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

// One evaluated epoch, as harness/train.h's EpochStats with its circle accuracies.
struct EpochRecord {
  int epoch = 0;
  double loss = 0, familiar = 0, heldout = 0, seconds = 0;
  std::vector<double> circle;  // per circle azimuth, where every epoch evaluates them
  double validation = NAN;     // TRAJ: the validation split's accuracy (NaN: none, or a file without TRAJ)
  long step = 0;               // TRAJ: steps taken at the epoch's end
  double final_margin_loss = NAN;  // SPRD: the epoch's loss at the final spread margin (NaN: none)
};

// Where a training stands between two steps: what resuming it needs beyond
// the weights and the optimizer. The data order needs no counter of its own:
// an epoch's shuffle is the stream (seed, Shuffle, epoch) and a sample's draw
// a function of (sample, epoch), so `epoch` and `next` place it; the dropout
// stream's counter is the model's training state (MSTA).
struct TrainingProgress {
  uint64_t seed = 0;               // of the run (the shuffle's key)
  long steps_per_epoch = 0;        // of the data it trained on: checked on resume
  long total_steps = 0;            // the cap (n_epochs x steps_per_epoch)
  long step = 0;                   // steps taken
  int epoch = 1;                   // the epoch under way (1-based)
  long next = 0;                   // its next batch's first position in the epoch's order
  double loss_sum = 0;             // its loss so far, summed over images
  double final_margin_loss_sum = NAN;  // SPRD: the same at the final spread margin (NaN: not a spread loss)
  bool done = false;               // training is over: every epoch, or the stopping rule
  bool stopped_early = false;      // the stopping rule ended it
  double stop_target = 0;          // the stopping rule's target (NaN: no rule)
  double train_s = 0, eval_s = 0;  // time spent so far (timings only)
  std::vector<double> step_loss;   // LOSS: one per step taken
  std::vector<std::vector<EpochRecord>> history;  // HIST and TRAJ: per dataset evaluated on, per epoch evaluated
  std::vector<std::vector<EpochRecord>> checks;   // CHKS: per dataset, per check inside an epoch (none: empty)
};

struct Checkpoint {
  ModelSpec model;
  uint64_t config_hash = 0;  // of the configuration that trained it (checkpoint_config_hash)
  std::vector<TensorShape> tensors;  // in ParamSet order; their sizes sum to weights.size()
  std::vector<float> weights;
  std::vector<uint64_t> model_state;  // Model::training_state(); empty: none (no MSTA chunk)
  std::optional<AdamState> adam;
  std::string config;  // the configuration as JSON text, or "" (no CONF chunk)
  std::optional<TrainingProgress> progress;  // PROG, LOSS, HIST: a checkpoint of a training in progress
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
// Checks that `c` is a checkpoint of a training `expected` describes, under the
// configuration whose text is `config` (its hash in HEAD): a training's progress
// (not a model file), the same model, options and image shape, the same
// configuration (the first key that differs is named). Throws CheckpointError.
void check_resumable(const Checkpoint& c, const ModelSpec& expected, const std::string& config, const std::string& file);
// Adam's state from `c` (which must hold one, of the model's size) into `adam`.
void restore_adam(const Checkpoint& c, Adam& adam, const std::string& file);

// The file `run --save-model PATTERN` writes model `model` to: PATTERN with
// each "{model}" replaced by the model's name (--models' spelling).
std::string model_file_path(const std::string& pattern, const std::string& model);

// The model `c` describes, built (make_model, for batches up to max_batch) and
// holding its weights and training state. A spec the registry refuses is a CheckpointError.
std::unique_ptr<Model> load_model(const Checkpoint& c, int max_batch, const std::string& file);

}  // namespace vg
