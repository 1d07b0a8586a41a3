// A training's checkpoints (harness/checkpoint.h, docs/checkpoints.md):
// writing one between two steps when due or at an interrupt, and resuming
// from one where the last left off (harness/training.h).
#include <chrono>
#include <cmath>
#include <filesystem>

#include "harness/output.h"
#include "harness/training.h"

namespace vg {

namespace {

bool same_target(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Why a checkpoint's progress `g` cannot go on as this training ("" if it
// can): another seed or step count (of `N` images an epoch), another stopping
// target, history of another number of datasets or without (with) the
// per-epoch circle accuracies, or a position that is no step's.
std::string progress_problem(const TrainingProgress& g, const TrainConfig& cfg, long steps_per_epoch,
                             long total_steps, int N, const std::vector<const Dataset*>& sets) {
  if (g.seed != cfg.seed || g.steps_per_epoch != steps_per_epoch || g.total_steps != total_steps)
    return "a training of " + std::to_string(g.total_steps) + " steps (" + std::to_string(g.steps_per_epoch) +
           " an epoch, seed " + std::to_string(g.seed) + "); this run's has " + std::to_string(total_steps) + " (" +
           std::to_string(steps_per_epoch) + ", seed " + std::to_string(cfg.seed) + ")";
  if (!same_target(g.stop_target, cfg.stop_target))
    return "its stopping rule's target is " + std::to_string(g.stop_target) + "; this run's is " +
           std::to_string(cfg.stop_target);
  if (g.history.size() != sets.size())
    return "its history is of " + std::to_string(g.history.size()) + " datasets; this training evaluates " +
           std::to_string(sets.size());
  const bool positioned = g.epoch <= cfg.n_epochs && g.next < N && g.next % cfg.batch_size == 0 &&
                          g.step == (g.epoch - 1) * steps_per_epoch + g.next / cfg.batch_size;
  if (!g.done && !positioned)
    return "step " + std::to_string(g.step) + " is not epoch " + std::to_string(g.epoch) + " at position " +
           std::to_string(g.next);
  for (size_t k = 0; k < sets.size(); ++k)
    for (const EpochRecord& e : g.history[k])
      if (!sets[k]->circle_az.empty() && e.circle.empty() == cfg.circle_every_epoch)
        return std::string("its history ") + (cfg.circle_every_epoch ? "lacks" : "holds") +
               " each epoch's circle accuracies (run --dump): resume with the flags it was written with";
  return "";
}

}  // namespace

// The checkpoint's history of what the evaluations recorded (HIST), or its
// checks inside an epoch (CHKS).
std::vector<std::vector<EpochRecord>> Training::history_records(bool checks) const {
  const bool circle = cfg_.circle_every_epoch && !checks;
  std::vector<std::vector<EpochRecord>> out;
  for (const Recorded& r : recorded_) {
    std::vector<EpochRecord>& set = out.emplace_back();
    const std::vector<EpochStats>& stats = checks ? r.checks : r.history;
    for (size_t e = 0; e < stats.size(); ++e) {
      const EpochStats& st = stats[e];
      set.push_back({st.epoch, st.loss, st.familiar, st.heldout, st.seconds,
                     circle ? r.circle_history[e] : std::vector<double>{}, st.validation, st.step,
                     st.final_margin_loss});
    }
  }
  return out;
}

// And back.
void Training::restore_history(const std::vector<std::vector<EpochRecord>>& history, bool checks) {
  const bool circle = cfg_.circle_every_epoch && !checks;
  for (size_t k = 0; k < recorded_.size() && k < history.size(); ++k)
    for (const EpochRecord& e : history[k]) {
      (checks ? recorded_[k].checks : recorded_[k].history)
          .push_back(EpochStats{e.epoch, e.loss, e.familiar, e.heldout, e.seconds, e.validation, e.step,
                                e.final_margin_loss,
                                std::isnan(e.final_margin_loss) ? NAN : trainer_->final_margin()});
      if (circle) recorded_[k].circle_history.push_back(e.circle);
    }
}

void Training::resume_if_asked() {
  if (!cfg_.checkpoint.resume || ck_file_.empty()) return;
  std::error_code ec;
  if (std::filesystem::symlink_status(ck_file_, ec).type() != std::filesystem::file_type::not_found) restore();
}

void Training::restore() {
  const Checkpoint c = read_checkpoint(ck_file_);
  check_resumable(c, spec_, cfg_.checkpoint.config, ck_file_);
  const TrainingProgress& g = *c.progress;
  if (const std::string why = progress_problem(g, cfg_, steps_per_epoch_, total_steps_, N_, sets_); !why.empty())
    throw CheckpointError(ck_file_ + ": " + why);
  restore_model(c, name_, *model_, ck_file_);
  restore_adam(c, trainer_->optimizer(), ck_file_);
  step_ = g.step;
  first_epoch_ = g.epoch;
  first_next_ = g.next;
  // A spread-loss training's file from before SPRD: NaN, and the epoch under way has no loss at the final margin.
  first_loss_ = {g.loss_sum, g.final_margin_loss_sum};
  trained_ = g.done;
  res_.stopped_early = g.stopped_early;
  res_.step_loss = g.step_loss;
  res_.train_s = g.train_s;
  recorded_[0].eval_s = g.eval_s;
  restore_history(g.history, false);
  restore_history(g.checks, true);
  saved_step_ = step_;
}

// A checkpoint of the training between two steps: the next is epoch `epoch`'s
// batch from `next` on, its loss so far `loss`. The pending evaluations are
// waited for, so the history holds every epoch trained.
void Training::save(int epoch, long next, const EpochLoss& loss, bool done) {
  wait_for_evaluations();
  Checkpoint c = capture_model(spec_, *model_, &trainer_->optimizer());
  c.config = cfg_.checkpoint.config;
  c.config_hash = checkpoint_config_hash(c.config);
  TrainingProgress g;
  g.seed = cfg_.seed;
  g.steps_per_epoch = steps_per_epoch_;
  g.total_steps = total_steps_;
  g.step = step_;
  g.epoch = epoch;
  g.next = next;
  g.loss_sum = loss.sum;
  g.final_margin_loss_sum = std::isnan(trainer_->final_margin()) ? NAN : loss.at_final_margin;
  g.done = done;
  g.stopped_early = res_.stopped_early;
  g.stop_target = cfg_.stop_target;
  g.train_s = res_.train_s;
  g.eval_s = recorded_[0].eval_s;
  g.step_loss = res_.step_loss;
  g.history = history_records(false);
  g.checks = history_records(true);
  c.progress = std::move(g);
  write_checkpoint(ck_file_, c);
  saved_step_ = step_;
  saved_at_ = std::chrono::steady_clock::now();
}

// Between two steps: a checkpoint if one is due; true if an interrupt ends training here.
bool Training::between_steps(int epoch, long next, const EpochLoss& loss) {
  const CheckpointConfig& ck = cfg_.checkpoint;
  const bool interrupted = interrupt_pending();
  if (ck.writes() && step_ > saved_step_ &&
      (interrupted || (ck.every_steps > 0 && step_ - saved_step_ >= ck.every_steps) ||
       (ck.every_seconds > 0 && seconds_since(saved_at_) >= ck.every_seconds)))
    save(epoch, next, loss, false);
  res_.interrupted = interrupted;
  return interrupted;
}

}  // namespace vg
