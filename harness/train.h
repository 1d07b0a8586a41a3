// Training loop and evaluation of one model on one dataset.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "harness/schedule.h"
#include "models/model.h"
#include "models/registry.h"

namespace vg {

// The stopping-rule seam. Training runs at most n_epochs (and max_steps); every `stop_every`
// steps (0: after each epoch) the rule, if any, may end it early. It sees the
// accuracy on the familiar *validation* split (Dataset::validation), never on
// a test split. `progress` for the loss always counts against the cap, so an
// early stop does not change the steps before it.
struct StopCheck {
  int epoch = 0;          // the epoch under way (1-based)
  long step = 0;          // training steps done
  double validation = 0;  // accuracy on the familiar validation split now
};
using StopRule = std::function<bool(const StopCheck&)>;  // true: stop now

// Stops at a familiar validation accuracy of `target` or more.
inline StopRule stop_at_accuracy(double target) {
  return [target](const StopCheck& c) { return c.validation >= target; };
}

// Checkpoints of a training in progress, and resuming from one
// (harness/checkpoint.h, docs/checkpoints.md). A checkpoint is taken between
// two steps; resumed from it, a training takes the same steps with the same
// bits as one never stopped.
struct CheckpointConfig {
  std::string file;          // "{model}" replaced by the model's name; "": none
  long every_steps = 0;      // write one once this many steps were taken since the last,
  double every_seconds = 0;  // or once this long has passed (0: not by that measure)
  bool resume = false;       // continue from `file` where it exists (else from the start)
  std::string config;        // the configuration as JSON text: CONF, and HEAD's hash of it
  bool writes() const { return !file.empty() && (every_steps > 0 || every_seconds > 0); }
};

// Checks inside an epoch at every multiple of `every` steps up to `until`
// (0: all through training); `every` 0: none.
struct CheckSpan {
  long every = 0;
  long until = 0;
  bool due(long step) const { return every > 0 && step % every == 0 && (until == 0 || step <= until); }
  // The first step after `step` that is due; LONG_MAX if none is.
  long next_after(long step) const {
    if (every <= 0) return LONG_MAX;
    const long next = (step / every + 1) * every;
    return until == 0 || next <= until ? next : LONG_MAX;
  }
};

// A model's checks inside an epoch: --eval-every's span for every model, and
// (--model-eval-every) one of its own beside it.
struct CheckSchedule {
  CheckSpan all, own;
  bool any() const { return all.every > 0 || own.every > 0; }
  bool due(long step) const { return all.due(step) || own.due(step); }
  long next_after(long step) const { return std::min(all.next_after(step), own.next_after(step)); }
};

struct TrainConfig {
  // The learning rate model `name` trains at.
  float lr_of(const std::string& name) const {
    const auto it = model_lr.find(name);
    return it == model_lr.end() ? lr : it->second;
  }
  // The checks inside an epoch of model `name`.
  CheckSchedule checks_of(const std::string& name) const {
    const auto it = model_checks.find(name);
    return {CheckSpan{eval_every, eval_until}, it == model_checks.end() ? CheckSpan{} : it->second};
  }
  // The steps a training of `steps_per_epoch` an epoch takes: n_epochs of
  // them, or max_steps where that comes first (the last epoch then ends early).
  long total_steps(long steps_per_epoch) const {
    const long epochs = long(n_epochs) * steps_per_epoch;
    return max_steps > 0 && max_steps < epochs ? max_steps : epochs;
  }
  uint64_t seed = 0;
  int n_epochs = 10;
  long max_steps = 0;  // --max-steps: a budget of steps beside n_epochs; 0: none
  int batch_size = 32;
  float lr = 2e-3f;
  std::map<std::string, float> model_lr;  // --model-lr: these models' own rates
  LrSchedule lr_schedule;                 // --lr-schedule: each model's rate times its factor at each step
  ModelOptions model;  // the models' own options (--cnn-hidden, --em-*, --loss, ...), as typed
  bool circle_every_epoch = false;  // also evaluate the circle split after each epoch
  StopRule stop;                    // empty: all n_epochs
  int stop_every = 0;               // steps between checks of `stop`; 0: after each epoch
  // --eval-every: steps between checks inside an epoch (ModelResult::checks); 0: none.
  long eval_every = 0;
  // --eval-until: eval_every's checks at steps up to this one only; 0: all through.
  long eval_until = 0;
  // --model-eval-every: these models' own checks, beside eval_every's (a fast
  // model's dense start, without the cost of dense checks for the slow ones).
  std::map<std::string, CheckSpan> model_checks;
  // --check-sample: at most this many images of each evaluated split at a
  // check (an epoch's end or inside one), a fixed subsample drawn from `seed`
  // (check_sample_split); the final results score every image. 0: every image.
  int check_sample = 0;
  double stop_target = NAN;         // the parameter of `stop` a checkpoint records (NaN: none)
  CheckpointConfig checkpoint;
};

struct EpochStats {
  int epoch = 0;
  double loss = 0, familiar = 0, heldout = 0, seconds = 0;
  // The familiar validation split's accuracy (NaN without one) and the steps
  // taken at the epoch's end: with familiar and heldout, the run's trajectory.
  double validation = NAN;
  long step = 0;
  // A spread-loss model's loss rises as its margin anneals: the epoch's loss
  // also at the margin training ends at (spread_final_margin), from the same
  // scores, and that margin. NaN for other losses.
  double final_margin_loss = NAN;
  double final_margin = NAN;
};

struct ModelResult {
  std::string name;
  size_t n_params = 0;
  std::vector<EpochStats> history;
  // The checks inside an epoch (TrainConfig::eval_every), in step order: the
  // errors at a step that ends no epoch; `loss` is the epoch's mean so far.
  // With the history's epoch ends, the run's trajectory.
  std::vector<EpochStats> checks;
  std::vector<double> step_loss;  // mean loss of every training batch, in order
  std::string error;              // empty, or why training failed (RunOptions::keep_going)
  // An interrupt (harness/output.h: DeferInterrupts) ended training between two
  // steps: the history and step losses so far, no final evaluation (NaN).
  bool interrupted = false;
  long steps = 0;                 // training steps taken
  bool stopped_early = false;     // the stop rule ended training before the cap
  double validation = NAN;        // final accuracy on the validation split (if there is one)
  double stop_target = NAN;       // the validation accuracy it was stopped at (stop_at_familiar, match_familiar)
  double familiar = 0, heldout = 0, drop = 0;
  std::vector<double> heldout_per_class;  // accuracy per class on the held-out split
  // Models with class capsules: do their activations carry the class? On the
  // held-out split: how often the true class's activation is the largest, the
  // mean activation of the true class and of the others (NaN without capsules).
  double act_accuracy = NAN, act_true = NAN, act_other = NAN;
  std::vector<double> circle_acc;         // accuracy per circle azimuth (Dataset::circle_az)
  std::vector<double> axis_acc;           // per position of the held-out axis's sweep (Dataset::axis_values)
  std::vector<std::vector<double>> circle_history;  // per epoch, if circle_every_epoch
  double train_s = 0, eval_s = 0, circle_s = 0;
  // Wall time of each training step (forward, backward, update), in order: what
  // train_s spends outside them is batch assembly, shuffling and the checks.
  std::vector<double> step_s;
};

// A NaN or Inf in the loss or the weights: names model, layer and epoch.
struct NonFiniteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Largest batch evaluated at once; also the models' max_batch (with the
// training batch). 64 rather than 256: per image 1-3 % slower hot, but a run
// faults fewer pages (peak RSS 34 MB, not 38) and with two threads the
// evaluations share out better (docs/performance.md#the-evaluation-batch). With oneDNN at
// AVX-512 a sample's scores do not depend on its batch
// (Models.ASamplesScoresDoNotDependOnTheBatchItIsIn); at AVX2 and on aarch64
// their last bits do, so this number is part of what --reproducible reproduces.
inline constexpr int kEvalBatch = 64;

using EpochCallback = std::function<void(const std::string& model, const EpochStats&)>;

// The threads of one run share their idle time: a training thread hands each
// epoch's evaluation to the pool, and a thread with no model left to train (or
// waiting for its turn or its evaluations) runs what is queued.
// It is also a training step's helper (StepHelper): a step's offer goes to the
// front of the queue, and only while a thread is idle in help_until.
class EvalPool final : public StepHelper {
 public:
  void post(std::function<void()> job);  // `job` must not throw
  bool offer(std::function<void()> job) override;
  // Runs queued jobs until `done` holds, sleeping while there are none; `done`
  // is read under the pool's lock, so what it reads must change through update().
  void help_until(const std::function<bool()>& done);
  // Sleeps until `done` holds (read under the lock, as above), running no job.
  void wait_until(const std::function<bool()>& done);
  void update(const std::function<void()>& change);  // under the lock, then wakes the helpers

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  int idle_ = 0;  // threads asleep in help_until for want of a job
};

// What train_and_evaluate does before it reads any data: the model made,
// initialised from its seed, its primitives for the training batch built
// (Model::prepare_training), and its Trainer (Adam state allocated). A run with
// several threads prepares its first model while the dataset is synthesised.
struct PreparedModel {
  std::string name;
  ImageShape shape;    // of the images it was made for (the data's: image_shape, Split::shape)
  int batch_size = 0;  // the training batch its Trainer holds (TrainConfig::batch_size)
  std::unique_ptr<Model> model;
  std::unique_ptr<Trainer> trainer;
};
PreparedModel prepare_model(const std::string& name, const TrainConfig& cfg, const ImageShape& shape);

// Trains `name` from its seeded initialisation (Adam, softmax cross-entropy,
// reshuffling each epoch from the stream (seed, Shuffle, epoch)), evaluating
// familiar, held-out and (where the data has one) validation accuracy after
// every epoch and the circle split at the end.
// With cfg.checkpoint, writes checkpoints as it goes and resumes from one (a
// file that does not fit is a CheckpointError); between two steps it stops
// at an interrupt (ModelResult::interrupted), after a checkpoint.
// `on_trained`, if given, sees the trained model before it is destroyed. With
// a `pool`, the epochs' evaluations run on its threads, on a copy of the model
// with that epoch's weights: the results are the same bits.
ModelResult train_and_evaluate(const std::string& name, const Dataset& data,
                               const TrainConfig& cfg, const EpochCallback& on_epoch = {},
                               const std::function<void(Model&)>& on_trained = {}, EvalPool* pool = nullptr);
// The same from a model prepare_model(name, cfg, data.train.shape()) gave.
ModelResult train_and_evaluate(PreparedModel prepared, const Dataset& data, const TrainConfig& cfg,
                               const EpochCallback& on_epoch = {},
                               const std::function<void(Model&)>& on_trained = {}, EvalPool* pool = nullptr);

// The same, evaluated also on each dataset of `also`, whose train and
// validation splits must be data's (same_training): a sweep's cells at other
// distances of the held-out set. Element 0 is data's result; element k is
// what training on also[k-1] gives, the same bits, save that its train_s and
// step_s are 0 and empty (the training is counted once, in element 0).
// `on_epoch` reports data's epochs.
std::vector<ModelResult> train_and_evaluate(PreparedModel prepared, const Dataset& data,
                                            const std::vector<const Dataset*>& also, const TrainConfig& cfg,
                                            const EpochCallback& on_epoch = {},
                                            const std::function<void(Model&)>& on_trained = {},
                                            EvalPool* pool = nullptr);

// Whether training on `a` is training on `b`: their train and validation
// splits hold the same samples, and a training split's per-epoch draws agree
// on a probe of samples and epochs.
bool same_training(const Dataset& a, const Dataset& b);

// Fraction of `split` classified correctly; per-sample correctness into `correct` if given.
double accuracy(Model& model, const Split& split, std::vector<uint8_t>* correct = nullptr);

}  // namespace vg

namespace vg {

// One configuration, every requested model trained on the same data.
struct RunOptions {
  DataConfig data;
  TrainConfig train;
  std::vector<std::string> models = default_models();
  bool reproducible = false;  // pinned ISAs (recorded; the CLI does the pinning)
  // Cores for the run: the models train concurrently, one per core, each on
  // one thread, and each epoch's evaluation runs on whichever thread is free
  // (EvalPool); the dataset's synthesis spreads over the caller's OpenMP
  // threads (large loops only), while the first model is prepared
  // (prepare_model) on another. No result depends on it. 1: one model after the other.
  int threads = 1;
  // A model that fails (NaN, a bad option) is recorded in its ModelResult::error
  // and the others still run (sweeps); otherwise the failure is thrown (run).
  bool keep_going = false;
  // Stopping at a familiar validation accuracy: a fixed one, or that of model
  // `match_familiar` after its full training (trained first, then every other
  // model stops when it reaches it). Either needs data.n_val_per_combo > 0.
  double stop_at_familiar = 0;  // 0: off
  std::string match_familiar;   // "": off
};

struct RunResult {
  Dataset data;
  std::vector<ModelResult> models;
  double dataset_s = 0, total_s = 0;
  std::string error;  // run_experiments: why this configuration's dataset could not be made (no models then)
};

RunResult run_experiment(const RunOptions& opt, const EpochCallback& on_epoch = {},
                         const std::function<void(const std::string&, Model&, const Dataset&)>& on_trained = {});

// Configurations that differ only in their held-out sets (a sweep's cells of
// one seed and grid point at every distance): each dataset is made, and
// those whose training is the same (same_training) share it: every model is
// trained once, on the first's, and evaluated on each, with the bits each
// would get from run_experiment alone (train_s counted once, in the first).
// A configuration whose training differs is trained apart. `trainings`: how
// many trainings that made. Results in opts' order; a dataset that cannot be
// made gives a RunResult with only `error` set. Threads as opts' (1 in a sweep).
std::vector<RunResult> run_experiments(const std::vector<RunOptions>& opts, int* trainings = nullptr);

}  // namespace vg
