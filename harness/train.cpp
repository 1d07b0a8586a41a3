#include "harness/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "core/rng.h"
#include "harness/training.h"

namespace vg {

namespace {

// A training split's draws on a probe of samples and epochs (a draw is a pure
// function of the dataset's configuration, the sample and the epoch).
bool same_draws(const Split& a, const Split& b) {
  if (!a.draw || !b.draw) return !a.draw && !b.draw;
  std::vector<float> x(a.pixels()), y(b.pixels());
  for (uint64_t epoch : {1, 2})
    for (int i : {0, a.size() / 2, a.size() - 1}) {
      if (i < 0) continue;
      a.draw(i, epoch, x.data());
      b.draw(i, epoch, y.data());
      if (x != y) return false;
    }
  return true;
}

// An epoch's order of the `order.size()` training samples: Fisher-Yates from
// the stream keyed by the epoch, so every model (and a resumed training) sees the same.
void epoch_order(std::vector<int>& order, uint64_t seed, int epoch) {
  std::iota(order.begin(), order.end(), 0);
  Stream shuffle(seed, Purpose::Shuffle, uint64_t(epoch));
  for (int k = int(order.size()) - 1; k > 0; --k) std::swap(order[size_t(k)], order[shuffle.below(uint32_t(k + 1))]);
}

// The batch of samples idx[0..B) as epoch `epoch` draws them.
void fill_batch(const Split& train, const int* idx, int B, int epoch, float* x, int* y) {
  const size_t pixels = train.pixels();
  for (int b = 0; b < B; ++b) {
    if (train.draw) train.draw(idx[b], uint64_t(epoch), x + size_t(b) * pixels);
    else std::copy_n(train.image(idx[b]), pixels, x + size_t(b) * pixels);
    y[b] = train.labels[idx[b]];
  }
}

// The datasets a training evaluates on (data, then `also`), once the prepared
// model is checked to fit them and the configuration.
std::vector<const Dataset*> checked_sets(const PreparedModel& prepared, const Dataset& data,
                                         const std::vector<const Dataset*>& also, const TrainConfig& cfg) {
  std::vector<const Dataset*> sets{&data};
  for (const Dataset* d : also) {
    if (!same_training(data, *d))
      throw std::invalid_argument("train_and_evaluate: a dataset to evaluate on has another training set");
    sets.push_back(d);
  }
  if (!prepared.model || !prepared.trainer) throw std::invalid_argument("train_and_evaluate: no prepared model");
  if (cfg.n_epochs < 1 || prepared.batch_size != cfg.batch_size)
    throw std::invalid_argument("train_and_evaluate: n_epochs must be >= 1 and batch_size the prepared one");
  if (prepared.shape != data.train.shape())
    throw std::invalid_argument("train_and_evaluate: " + prepared.name + " was made for images of " +
                                prepared.shape.text() + ", the data has " + data.train.shape().text());
  return sets;
}
}  // namespace

bool same_training(const Dataset& a, const Dataset& b) {
  return same_samples(a.train, b.train) && same_draws(a.train, b.train) && same_samples(a.validation, b.validation);
}

PreparedModel prepare_model(const std::string& name, const TrainConfig& cfg, const ImageShape& shape) {
  if (cfg.n_epochs < 1 || cfg.batch_size < 1) throw std::invalid_argument("n_epochs and batch_size must be >= 1");
  PreparedModel p;
  p.name = name;
  p.shape = shape;
  p.batch_size = cfg.batch_size;
  p.model = make_model(name, cfg.model, std::max(cfg.batch_size, kEvalBatch), shape);
  p.model->init(cfg.seed);
  AdamConfig ac;
  ac.lr = cfg.lr_of(name);
  p.trainer = std::make_unique<Trainer>(*p.model, ac, cfg.batch_size);
  p.model->prepare_training(cfg.batch_size);
  return p;
}

ModelResult train_and_evaluate(const std::string& name, const Dataset& data,
                               const TrainConfig& cfg, const EpochCallback& on_epoch,
                               const std::function<void(Model&)>& on_trained, EvalPool* pool) {
  return train_and_evaluate(prepare_model(name, cfg, data.train.shape()), data, cfg, on_epoch, on_trained, pool);
}

ModelResult train_and_evaluate(PreparedModel prepared, const Dataset& data, const TrainConfig& cfg,
                               const EpochCallback& on_epoch, const std::function<void(Model&)>& on_trained,
                               EvalPool* pool) {
  return std::move(train_and_evaluate(std::move(prepared), data, {}, cfg, on_epoch, on_trained, pool).front());
}

std::vector<ModelResult> train_and_evaluate(PreparedModel prepared, const Dataset& data,
                                            const std::vector<const Dataset*>& also, const TrainConfig& cfg,
                                            const EpochCallback& on_epoch,
                                            const std::function<void(Model&)>& on_trained, EvalPool* pool) {
  std::vector<const Dataset*> sets = checked_sets(prepared, data, also, cfg);
  Training training(std::move(prepared), std::move(sets), cfg, on_epoch, pool);
  return training.run(on_trained);
}

Training::Training(PreparedModel prepared, std::vector<const Dataset*> sets, const TrainConfig& cfg,
                   const EpochCallback& on_epoch, EvalPool* pool)
    : name_(prepared.name),
      sets_(std::move(sets)),
      data_(*sets_.front()),
      cfg_(cfg),
      on_epoch_(on_epoch),
      pool_(pool),
      model_(std::move(prepared.model)),
      trainer_(std::move(prepared.trainer)),
      N_(data_.train.size()),
      steps_per_epoch_((N_ + cfg.batch_size - 1) / cfg.batch_size),
      total_steps_(cfg.total_steps(steps_per_epoch_)),
      base_lr_(cfg.lr_of(name_)),
      checks_(cfg.checks_of(name_)),
      order_(size_t(N_)),
      batch_x_(size_t(cfg.batch_size) * data_.train.pixels()),
      batch_y_(size_t(cfg.batch_size)),
      recorded_(sets_.size()),
      ck_file_(cfg.checkpoint.file.empty() ? "" : model_file_path(cfg.checkpoint.file, name_)),
      spec_{name_, model_options_of(name_, cfg.model), data_.train.shape()},
      saved_at_(std::chrono::steady_clock::now()) {
  if (cfg.check_sample > 0) {
    for (const Dataset* d : sets_) check_data_.push_back(check_sample_data(*d, cfg.check_sample, cfg.seed));
    for (const Dataset& d : check_data_) check_sets_.push_back(&d);
  } else {
    check_sets_ = sets_;
  }
  res_.name = name_;
  res_.n_params = model_->params().count();
  trainer_->set_helper(pool_);  // an idle thread of the run may take a weight gradient off a step
  trainer_->track_final_margin(total_steps_);
  res_.step_loss.reserve(size_t(total_steps_));
  res_.step_s.reserve(size_t(total_steps_));
}

// The driver: a model fit in one pass, or the epochs from the start (or from
// a checkpoint) until the cap, the stopping rule or an interrupt; then the
// results. A budget of steps (max_steps) ends the last epoch at its step: that
// epoch is evaluated and recorded as any other, on the images it saw.
std::vector<ModelResult> Training::run(const std::function<void(Model&)>& on_trained) {
  const bool fitted = fit_in_one_pass();
  if (!fitted) resume_if_asked();
  for (int epoch = first_epoch_; epoch <= cfg_.n_epochs && step_ < total_steps_ && !fitted && !trained_; ++epoch)
    if (!train_epoch(epoch)) break;
  res_.steps = step_;
  wait_for_evaluations();
  if (res_.interrupted) return interrupted_results();
  // Training is over: a last checkpoint, so that a resume goes straight to the evaluation.
  if (cfg_.checkpoint.writes() && !fitted && !trained_ && step_ > saved_step_) save(cfg_.n_epochs, 0, {}, true);
  // Resumed after its training: the final epoch's per-sample correctness again
  // (the same weights, the same bits); under --check-sample, the final weights
  // on every image, which the epochs' checks scored a subsample of.
  if (trained_ || (cfg_.check_sample > 0 && !fitted)) {
    const auto t1 = std::chrono::steady_clock::now();
    last_ = evaluate_epoch(*model_, sets_, false);
    if (!trained_) res_.eval_s += seconds_since(t1);
  }
  return trained_results(on_trained);
}

bool Training::fit_in_one_pass() {
  const auto t0 = std::chrono::steady_clock::now();
  const bool fitted = model_->fit(data_.train.images.data(), data_.train.labels.data(), N_);
  res_.train_s += seconds_since(t0);
  if (fitted) {
    const auto t1 = std::chrono::steady_clock::now();
    last_ = evaluate_epoch(*model_, sets_, false);
    res_.eval_s += seconds_since(t1);
  }
  return fitted;
}

bool Training::train_epoch(int epoch) {
  const auto t0 = std::chrono::steady_clock::now();
  epoch_order(order_, cfg_.seed, epoch);

  EpochLoss loss = epoch == first_epoch_ ? first_loss_ : EpochLoss{};
  for (int start = epoch == first_epoch_ ? int(first_next_) : 0; start < N_ && step_ < total_steps_;
       start += cfg_.batch_size) {
    if (between_steps(epoch, start, loss)) break;
    const int B = std::min(cfg_.batch_size, N_ - start);
    take_step(epoch, order_.data() + start, B, loss);
    if (stop_rule_ends(epoch, false)) break;
    if (check_due(start, B)) {
      EpochStats st;
      st.epoch = epoch;
      st.step = step_;
      st.loss = loss.sum / double(start + B);  // the epoch's mean so far
      st.final_margin = trainer_->final_margin();
      if (!std::isnan(st.final_margin)) st.final_margin_loss = loss.at_final_margin / double(start + B);
      st.seconds = seconds_since(t0);
      evaluate(st, true);
    }
  }
  if (res_.interrupted) {
    res_.train_s += seconds_since(t0);
    return false;
  }
  if (!all_finite(model_->params().values().data(), model_->params().count())) fail("non-finite weights", epoch, 0);
  res_.train_s += seconds_since(t0);

  EpochStats st;
  st.epoch = epoch;
  // An epoch cut short by the stop rule: its mean over the images it saw.
  const double images =
      std::min<double>(N_, double(res_.step_loss.size() - size_t(epoch - 1) * steps_per_epoch_) * cfg_.batch_size);
  st.loss = loss.sum / images;
  st.final_margin = trainer_->final_margin();
  if (!std::isnan(st.final_margin)) st.final_margin_loss = loss.at_final_margin / images;
  st.seconds = seconds_since(t0);
  st.step = step_;
  evaluate(st);
  if (res_.stopped_early) return false;
  return !stop_rule_ends(epoch, true);
}

void Training::take_step(int epoch, const int* idx, int B, EpochLoss& sums) {
  fill_batch(data_.train, idx, B, epoch, batch_x_.data(), batch_y_.data());
  const double progress = total_steps_ > 1 ? double(step_) / double(total_steps_ - 1) : 1.0;
  trainer_->optimizer().set_lr(float(base_lr_ * lr_factor(cfg_.lr_schedule, step_, total_steps_)));
  const auto ts = std::chrono::steady_clock::now();
  const double loss = trainer_->step(batch_x_.data(), batch_y_.data(), B, progress);
  res_.step_s.push_back(seconds_since(ts));
  ++step_;
  if (!std::isfinite(loss)) fail("non-finite loss", epoch, B);
  sums.sum += loss * B;
  if (!std::isnan(trainer_->final_margin())) sums.at_final_margin += trainer_->final_margin_loss() * B;
  res_.step_loss.push_back(loss);
}

// --eval-every (and the model's --model-eval-every): a check at every step its
// schedule holds that ends no epoch (an epoch's end is its history record) and
// is not the cap's.
bool Training::check_due(int start, int B) const {
  return checks_.due(step_) && start + B < N_ && step_ < total_steps_;
}

// The stopping rule (StopRule) is asked every cfg.stop_every steps within an
// epoch, or (stop_every 0) at each epoch's end; never after the cap's last step.
bool Training::stop_rule_ends(int epoch, bool at_epoch_end) {
  if (!cfg_.stop || step_ >= total_steps_) return false;
  const bool due = at_epoch_end ? cfg_.stop_every == 0 : cfg_.stop_every > 0 && step_ % cfg_.stop_every == 0;
  if (!due || !cfg_.stop(StopCheck{epoch, step_, accuracy(*model_, data_.validation)})) return false;
  res_.stopped_early = true;
  return true;
}

// Names the first layer whose weights, output or gradient went non-finite.
void Training::fail(const std::string& what, int epoch, int batch) {
  std::string where;
  if (auto t = model_->params().first_non_finite(false); !t.empty()) where = "weights of " + t;
  else if (auto l = model_->first_non_finite_layer(batch); !l.empty()) where = "output of " + l;
  else if (auto g = model_->params().first_non_finite(true); !g.empty()) where = "gradient of " + g;
  throw NonFiniteError(name_ + ": " + what + " in epoch " + std::to_string(epoch) +
                       (where.empty() ? "" : " (first non-finite: " + where + ")"));
}

}  // namespace vg
