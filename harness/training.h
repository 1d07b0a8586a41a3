// One training of one model, by concern (harness/train.h: train_and_evaluate
// is the driver): an epoch and its steps, and the stopping rule (train.cpp);
// an epoch's evaluation, here or on the pool, and the results once training
// ends (train_evaluation.cpp); a checkpoint, resuming from one, and the
// interrupt between two steps (train_checkpoint.cpp). Internal to harness/.
#pragma once
#include <chrono>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/checkpoint.h"
#include "harness/evaluate.h"
#include "harness/train.h"

namespace vg {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Training {
 public:
  // `sets`: the dataset trained on first, then those evaluated beside it
  // (same_training). The checks of train_and_evaluate have been made.
  Training(PreparedModel prepared, std::vector<const Dataset*> sets, const TrainConfig& cfg,
           const EpochCallback& on_epoch, EvalPool* pool);
  // However training ends, no evaluation of this model on the pool outlives it.
  ~Training();
  Training(const Training&) = delete;
  Training& operator=(const Training&) = delete;

  // Trains, evaluates and returns one result per dataset of `sets`.
  std::vector<ModelResult> run(const std::function<void(Model&)>& on_trained);

 private:
  // What the evaluations of one training recorded, in epoch order, on whichever
  // thread ran them; one per dataset evaluated on (the evaluation's time is the first's).
  struct Recorded {
    std::vector<EpochStats> history;
    std::vector<EpochStats> checks;  // inside an epoch (TrainConfig::eval_every)
    std::vector<std::vector<double>> circle_history;
    double eval_s = 0;
  };
  // Each epoch's evaluation with a pool: handed to whichever thread of the pool
  // is free, on a copy of the model holding that epoch's weights, while this
  // one trains on. One copy, so the epochs are evaluated in order and reported
  // in order; the same arithmetic as on this thread.
  struct Pending {
    EpochStats stats;  // an epoch's (or a check's) stats so far
    std::vector<float> weights;
    bool check = false;  // a check inside the epoch, not its end
  };
  struct Handoff {
    std::unique_ptr<Model> copy;
    std::deque<Pending> pending;
    bool draining = false;   // a job is evaluating `pending`
    bool abandoned = false;  // training failed: evaluate nothing more
    std::exception_ptr error;
  };

  // An epoch's loss so far, summed over its images: as trained (the annealed
  // margin's), and for a spread-loss model at the final margin.
  struct EpochLoss {
    double sum = 0;
    double at_final_margin = 0;
  };

  // An epoch and the stopping rule (train.cpp).
  bool fit_in_one_pass();  // a model fit in one pass (nn1): fitted and evaluated, no epochs
  bool train_epoch(int epoch);  // false: training ends in it (an interrupt, the stopping rule)
  void take_step(int epoch, const int* idx, int B, EpochLoss& loss);  // one batch, its loss added to `loss`
  bool stop_rule_ends(int epoch, bool at_epoch_end);   // the rule is due here and says stop
  [[noreturn]] void fail(const std::string& what, int epoch, int batch);

  // An epoch's evaluation and the results (train_evaluation.cpp).
  // Here, or handed to the pool: an epoch's end, or (`check`) a check inside it.
  void evaluate(const EpochStats& trained, bool check = false);
  void record(const EpochStats& trained, std::vector<EpochEval> evs, double eval_s, bool check);
  bool check_due(int start, int B) const;  // a check inside the epoch after the batch at `start`
  void drain();  // a pool job: evaluates what is pending, in order
  bool drained() const { return !handoff_.draining; }
  void wait_for_evaluations();  // every epoch handed off is recorded (rethrows an evaluation's error)
  std::vector<ModelResult> interrupted_results();
  std::vector<ModelResult> trained_results(const std::function<void(Model&)>& on_trained);

  // Checkpoints and the interrupt (train_checkpoint.cpp).
  void resume_if_asked();
  void restore();
  // recorded_'s history (or checks) as a checkpoint's HIST (CHKS), and back.
  std::vector<std::vector<EpochRecord>> history_records(bool checks) const;
  void restore_history(const std::vector<std::vector<EpochRecord>>& history, bool checks);
  void save(int epoch, long next, const EpochLoss& loss, bool done);
  bool between_steps(int epoch, long next, const EpochLoss& loss);  // true: an interrupt ends training here

  const std::string name_;
  const std::vector<const Dataset*> sets_;
  const Dataset& data_;  // *sets_[0], the one trained on
  // What a check scores: sets_, or under --check-sample their subsamples
  // (check_data_); the final results score sets_ whole.
  std::vector<Dataset> check_data_;
  std::vector<const Dataset*> check_sets_;
  const TrainConfig& cfg_;
  const EpochCallback& on_epoch_;
  EvalPool* const pool_;
  const std::unique_ptr<Model> model_;
  const std::unique_ptr<Trainer> trainer_;  // destroyed before the model

  const int N_;  // training samples
  const long steps_per_epoch_;
  const long total_steps_;  // the cap: the linear spread margin anneals, and a cosine schedule decays, over it
  const double base_lr_;
  const CheckSchedule checks_;  // the checks inside an epoch (cfg_.checks_of(name_))
  std::vector<int> order_;  // the epoch's order of the training samples
  std::vector<float> batch_x_;
  std::vector<int> batch_y_;

  ModelResult res_;
  long step_ = 0;
  std::vector<Recorded> recorded_;
  std::vector<EpochEval> last_;  // the latest epoch's evaluation, per dataset of `sets_`
  Handoff handoff_;

  // Checkpoints: this model's file, and where a resumed training goes on from.
  const std::string ck_file_;
  const ModelSpec spec_;
  int first_epoch_ = 1;
  long first_next_ = 0;
  EpochLoss first_loss_;
  bool trained_ = false;  // a checkpoint of a training that was over
  long saved_step_ = 0;   // the step of the checkpoint on disk
  std::chrono::steady_clock::time_point saved_at_;
};

}  // namespace vg
