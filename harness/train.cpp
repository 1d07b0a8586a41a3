#include "harness/train.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "core/rng.h"
#include "harness/checkpoint.h"
#include "harness/evaluate.h"
#include "harness/output.h"

namespace vg {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

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

bool same_training(const Dataset& a, const Dataset& b) {
  return same_samples(a.train, b.train) && same_draws(a.train, b.train) && same_samples(a.validation, b.validation);
}

namespace {
// What the evaluations of one training recorded, in epoch order, on whichever
// thread ran them; one per dataset evaluated on (the evaluation's time is the first's).
struct Recorded {
  std::vector<EpochStats> history;
  std::vector<std::vector<double>> circle_history;
  double eval_s = 0;
};

// Each dataset's results once training is over: the training's `res` with
// the dataset's recorded epochs, then what the final weights score on it
// (harness/evaluate.h: final_results).
std::vector<ModelResult> trained_results(const ModelResult& res, std::vector<Recorded>& recorded,
                                         const std::vector<EpochEval>& last, const std::vector<const Dataset*>& sets,
                                         Model& model, Model* helper, EvalPool* pool) {
  std::vector<ModelResult> out(sets.size(), res);
  for (size_t k = 0; k < sets.size(); ++k) {
    ModelResult& r = out[k];
    if (k > 0) r.train_s = 0, r.step_s.clear();  // one training: the first dataset's result carries its time
    r.history = std::move(recorded[k].history);
    r.circle_history = std::move(recorded[k].circle_history);
    r.eval_s += recorded[k].eval_s;
  }
  final_results(out, last, sets, model, helper, pool);
  return out;
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

// The checkpoint's history of `recorded` (HIST), and back.
std::vector<std::vector<EpochRecord>> records_of(const std::vector<Recorded>& recorded, bool circle) {
  std::vector<std::vector<EpochRecord>> out;
  for (const Recorded& r : recorded) {
    std::vector<EpochRecord>& set = out.emplace_back();
    for (size_t e = 0; e < r.history.size(); ++e) {
      const EpochStats& st = r.history[e];
      set.push_back({st.epoch, st.loss, st.familiar, st.heldout, st.seconds,
                     circle ? r.circle_history[e] : std::vector<double>{}, st.validation, st.step});
    }
  }
  return out;
}
void restore_records(const std::vector<std::vector<EpochRecord>>& history, bool circle, std::vector<Recorded>& recorded) {
  for (size_t k = 0; k < recorded.size(); ++k)
    for (const EpochRecord& e : history[k]) {
      recorded[k].history.push_back(EpochStats{e.epoch, e.loss, e.familiar, e.heldout, e.seconds, e.validation, e.step});
      if (circle) recorded[k].circle_history.push_back(e.circle);
    }
}
}  // namespace

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
  const std::string& name = prepared.name;
  const int max_batch = std::max(cfg.batch_size, kEvalBatch);
  const std::unique_ptr<Model> model = std::move(prepared.model);
  const std::unique_ptr<Trainer> trainer_owner = std::move(prepared.trainer);  // destroyed before the model
  Trainer& trainer = *trainer_owner;
  ModelResult res;
  res.name = name;
  res.n_params = model->params().count();
  trainer.set_helper(pool);  // an idle thread of the run may take a weight gradient off a step

  const Split& train = data.train;
  const int N = train.size();
  std::vector<int> order(N);
  const size_t pixels = train.pixels();
  std::vector<float> batch_x(size_t(cfg.batch_size) * pixels);
  std::vector<int> batch_y(cfg.batch_size);
  const long steps_per_epoch = (N + cfg.batch_size - 1) / cfg.batch_size;
  // The cap: the linear spread margin anneals, and a cosine schedule decays, over it.
  const long total_steps = cfg.total_steps(steps_per_epoch);
  const double base_lr = cfg.lr_of(name);
  long step = 0;
  res.step_loss.reserve(size_t(total_steps));
  res.step_s.reserve(size_t(total_steps));
  std::vector<EpochEval> last;  // the latest epoch's evaluation, per dataset of `sets`

  // Each epoch's evaluation: on this thread, or (with a pool) handed to
  // whichever thread of the pool is free, on a copy of the model holding that
  // epoch's weights, while this one trains on. One copy, so the epochs are
  // evaluated in order and reported in order; the same arithmetic either way.
  struct Handoff {
    std::unique_ptr<Model> copy;
    std::deque<std::pair<EpochStats, std::vector<float>>> pending;  // an epoch's stats so far and its weights
    bool draining = false;  // a job is evaluating `pending`
    bool abandoned = false;  // training failed: evaluate nothing more
    std::exception_ptr error;
  } handoff;
  std::vector<Recorded> recorded(sets.size());
  auto record = [&](const EpochStats& trained, std::vector<EpochEval> evs, double eval_s) {
    for (size_t k = 0; k < sets.size(); ++k) {
      EpochStats st = trained;
      st.familiar = evs[k].familiar;
      st.heldout = evs[k].heldout;
      st.validation = evs[k].validation;
      st.seconds += eval_s;
      recorded[k].eval_s += k == 0 ? eval_s : 0;
      if (cfg.circle_every_epoch) recorded[k].circle_history.push_back(std::move(evs[k].circle));
      recorded[k].history.push_back(st);
      if (k == 0 && on_epoch) on_epoch(name, st);
    }
    last = std::move(evs);
  };
  auto drain = [&] {  // a pool job: evaluates what is pending, in order
    for (;;) {
      std::pair<EpochStats, std::vector<float>> item;
      bool got = false, skip = false;
      pool->update([&] {
        skip = handoff.abandoned || handoff.error;
        if (handoff.pending.empty()) {
          handoff.draining = false;
        } else {
          item = std::move(handoff.pending.front());
          handoff.pending.pop_front();
          got = true;
        }
      });
      if (!got) return;
      if (skip) continue;
      try {
        if (!handoff.copy) {
          handoff.copy = make_model(name, cfg.model, max_batch, data.train.shape());
          handoff.copy->init(cfg.seed);
        }
        std::copy(item.second.begin(), item.second.end(), handoff.copy->params().values().begin());
        const auto t1 = std::chrono::steady_clock::now();
        std::vector<EpochEval> ev = evaluate_epoch(*handoff.copy, sets, cfg.circle_every_epoch);
        record(item.first, std::move(ev), seconds_since(t1));
      } catch (...) {
        const std::exception_ptr e = std::current_exception();
        pool->update([&] { handoff.error = e; });
      }
    }
  };
  auto drained = [&] { return !handoff.draining; };
  // However training ends, no job of this model outlives it.
  struct WaitForJobs {
    EvalPool* pool;
    Handoff& h;
    const std::function<bool()> done;
    ~WaitForJobs() {
      if (!pool) return;
      pool->update([&] { h.abandoned = true; });
      pool->help_until(done);
    }
  } wait_for_jobs{pool, handoff, drained};

  // Names the first layer whose weights, output or gradient went non-finite.
  auto fail = [&](const std::string& what, int epoch, int batch) {
    std::string where;
    if (auto t = model->params().first_non_finite(false); !t.empty()) where = "weights of " + t;
    else if (auto l = model->first_non_finite_layer(batch); !l.empty()) where = "output of " + l;
    else if (auto g = model->params().first_non_finite(true); !g.empty()) where = "gradient of " + g;
    throw NonFiniteError(name + ": " + what + " in epoch " + std::to_string(epoch) +
                         (where.empty() ? "" : " (first non-finite: " + where + ")"));
  };

  // Checkpoints: this model's file, and where a resumed training goes on from.
  const CheckpointConfig& ck = cfg.checkpoint;
  const std::string ck_file = ck.file.empty() ? "" : model_file_path(ck.file, name);
  const ModelSpec spec{name, model_options_of(name, cfg.model), train.shape()};
  int first_epoch = 1;
  long first_next = 0;
  double first_loss = 0;
  bool trained = false;  // a checkpoint of a training that was over
  long saved_step = 0;   // the step of the checkpoint on disk
  auto saved_at = std::chrono::steady_clock::now();
  auto restore = [&] {
    const Checkpoint c = read_checkpoint(ck_file);
    check_resumable(c, spec, ck.config, ck_file);
    const TrainingProgress& g = *c.progress;
    if (const std::string why = progress_problem(g, cfg, steps_per_epoch, total_steps, N, sets); !why.empty())
      throw CheckpointError(ck_file + ": " + why);
    restore_model(c, name, *model, ck_file);
    restore_adam(c, trainer.optimizer(), ck_file);
    step = g.step;
    first_epoch = g.epoch;
    first_next = g.next;
    first_loss = g.loss_sum;
    trained = g.done;
    res.stopped_early = g.stopped_early;
    res.step_loss = g.step_loss;
    res.train_s = g.train_s;
    recorded[0].eval_s = g.eval_s;
    restore_records(g.history, cfg.circle_every_epoch, recorded);
    saved_step = step;
  };
  // A checkpoint of the training between two steps: the next is epoch
  // `epoch`'s batch from `next` on, its loss so far `loss_sum`. The pending
  // evaluations are waited for, so the history holds every epoch trained.
  auto save = [&](int epoch, long next, double loss_sum, bool done) {
    if (pool) {
      pool->help_until(drained);
      if (handoff.error) std::rethrow_exception(handoff.error);
    }
    Checkpoint c = capture_model(spec, *model, &trainer.optimizer());
    c.config = ck.config;
    c.config_hash = checkpoint_config_hash(c.config);
    TrainingProgress g;
    g.seed = cfg.seed;
    g.steps_per_epoch = steps_per_epoch;
    g.total_steps = total_steps;
    g.step = step;
    g.epoch = epoch;
    g.next = next;
    g.loss_sum = loss_sum;
    g.done = done;
    g.stopped_early = res.stopped_early;
    g.stop_target = cfg.stop_target;
    g.train_s = res.train_s;
    g.eval_s = recorded[0].eval_s;
    g.step_loss = res.step_loss;
    g.history = records_of(recorded, cfg.circle_every_epoch);
    c.progress = std::move(g);
    write_checkpoint(ck_file, c);
    saved_step = step;
    saved_at = std::chrono::steady_clock::now();
  };
  // Between two steps: a checkpoint if one is due; true if an interrupt ends training here.
  auto between_steps = [&](int epoch, long next, double loss_sum) {
    const bool interrupted = interrupt_pending();
    if (ck.writes() && step > saved_step &&
        (interrupted || (ck.every_steps > 0 && step - saved_step >= ck.every_steps) ||
         (ck.every_seconds > 0 && seconds_since(saved_at) >= ck.every_seconds)))
      save(epoch, next, loss_sum, false);
    res.interrupted = interrupted;
    return interrupted;
  };

  // A model fit in one pass (nn1) has no epochs: evaluated once, no history.
  const bool fitted = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const bool f = model->fit(train.images.data(), train.labels.data(), N);
    res.train_s += seconds_since(t0);
    return f;
  }();
  if (fitted) {
    const auto t1 = std::chrono::steady_clock::now();
    last = evaluate_epoch(*model, sets, false);
    res.eval_s += seconds_since(t1);
  } else if (ck.resume && !ck_file.empty()) {
    std::error_code ec;
    if (std::filesystem::symlink_status(ck_file, ec).type() != std::filesystem::file_type::not_found) restore();
  }
  // A budget of steps (max_steps) ends the last epoch at its step: that epoch
  // is evaluated and recorded as any other, on the images it saw.
  for (int epoch = first_epoch; epoch <= cfg.n_epochs && step < total_steps && !fitted && !trained; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    epoch_order(order, cfg.seed, epoch);

    double loss_sum = epoch == first_epoch ? first_loss : 0;
    for (int start = epoch == first_epoch ? int(first_next) : 0; start < N && step < total_steps;
         start += cfg.batch_size) {
      if (between_steps(epoch, start, loss_sum)) break;
      const int B = std::min(cfg.batch_size, N - start);
      fill_batch(train, order.data() + start, B, epoch, batch_x.data(), batch_y.data());
      const double progress = total_steps > 1 ? double(step) / double(total_steps - 1) : 1.0;
      trainer.optimizer().set_lr(float(base_lr * lr_factor(cfg.lr_schedule, step, total_steps)));
      const auto ts = std::chrono::steady_clock::now();
      const double loss = trainer.step(batch_x.data(), batch_y.data(), B, progress);
      res.step_s.push_back(seconds_since(ts));
      ++step;
      if (!std::isfinite(loss)) fail("non-finite loss", epoch, B);
      loss_sum += loss * B;
      res.step_loss.push_back(loss);
      if (cfg.stop && cfg.stop_every > 0 && step % cfg.stop_every == 0 && step < total_steps &&
          cfg.stop(StopCheck{epoch, step, accuracy(*model, data.validation)})) {
        res.stopped_early = true;
        break;
      }
    }
    if (res.interrupted) {
      res.train_s += seconds_since(t0);
      break;
    }
    if (!all_finite(model->params().values().data(), model->params().count()))
      fail("non-finite weights", epoch, 0);
    res.train_s += seconds_since(t0);

    EpochStats st;
    st.epoch = epoch;
    // An epoch cut short by the stop rule: its mean over the images it saw.
    st.loss = loss_sum / std::min<double>(N, double(res.step_loss.size() - size_t(epoch - 1) * steps_per_epoch) * cfg.batch_size);
    st.seconds = seconds_since(t0);
    st.step = step;
    if (pool) {
      std::pair<EpochStats, std::vector<float>> item(st, model->params().values());  // copied outside the lock
      bool post = false;
      pool->update([&] {
        handoff.pending.push_back(std::move(item));
        post = !handoff.draining;
        handoff.draining = true;
      });
      if (post) pool->post(drain);
    } else {
      const auto t1 = std::chrono::steady_clock::now();
      std::vector<EpochEval> ev = evaluate_epoch(*model, sets, cfg.circle_every_epoch);
      record(st, std::move(ev), seconds_since(t1));
    }
    if (res.stopped_early) break;
    if (cfg.stop && cfg.stop_every == 0 && step < total_steps &&
        cfg.stop(StopCheck{epoch, step, accuracy(*model, data.validation)})) {
      res.stopped_early = true;
      break;
    }
  }
  res.steps = step;
  if (pool) {
    pool->help_until(drained);
    if (handoff.error) std::rethrow_exception(handoff.error);
  }
  if (res.interrupted) {  // what the epochs trained so far recorded; no final evaluation
    std::vector<ModelResult> out(sets.size(), res);
    for (size_t k = 0; k < sets.size(); ++k) {
      out[k].history = std::move(recorded[k].history);
      out[k].circle_history = std::move(recorded[k].circle_history);
      out[k].eval_s += recorded[k].eval_s;
      out[k].familiar = out[k].heldout = out[k].drop = NAN;
      if (k > 0) out[k].train_s = 0, out[k].step_s.clear();
    }
    return out;
  }
  // Training is over: a last checkpoint, so that a resume goes straight to the evaluation.
  if (ck.writes() && !fitted && !trained && step > saved_step) save(cfg.n_epochs, 0, 0, true);
  // Resumed after its training: the final epoch's per-sample correctness again (the same weights, the same bits).
  if (trained) last = evaluate_epoch(*model, sets, false);

  // The circle and the axis sweep: with a pool, their batches are shared with
  // the copy the epochs were evaluated on, given the final weights.
  Model* helper = nullptr;
  if (pool && handoff.copy) {
    std::copy(model->params().values().begin(), model->params().values().end(),
              handoff.copy->params().values().begin());
    helper = handoff.copy.get();
  }
  std::vector<ModelResult> out = trained_results(res, recorded, last, sets, *model, helper, pool);
  handoff.copy.reset();
  if (on_trained) on_trained(*model);
  return out;
}

}  // namespace vg
