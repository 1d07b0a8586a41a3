#include "harness/train.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "kernels/rng.h"

namespace vg {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace {
// Of `splits`, those not yet in `out` that are not the familiar or held-out split (smallNORB's test set).
std::vector<const Split*> to_evaluate(const Dataset& data, const std::vector<const Split*>& splits,
                                      std::vector<const Split*> out = {}) {
  for (const Split* s : splits)
    if (s != &data.familiar && s != &data.heldout && std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  return out;
}

// Per-sample correctness on each of `splits`, in batches of kEvalBatch, the
// batches shared between this thread (on `model`) and, given a pool and a
// `helper` (another instance holding the same weights), one job of the pool on
// the helper. Each batch is evaluated whole by one of them, so every bit is
// that of this thread alone (accuracy() is this without a helper). `meanwhile`
// runs on this thread, on `model`, once the job is posted.
std::vector<std::vector<uint8_t>> correct_on(Model& model, Model* helper, EvalPool* pool,
                                             const std::vector<const Split*>& splits,
                                             const std::function<void()>& meanwhile) {
  std::vector<std::vector<uint8_t>> ok(splits.size());
  std::vector<std::pair<size_t, int>> batches;  // (index in splits, first sample)
  for (size_t s = 0; s < splits.size(); ++s) {
    ok[s].assign(size_t(splits[s]->size()), 0);
    for (int start = 0; start < splits[s]->size(); start += kEvalBatch) batches.push_back({s, start});
  }
  std::atomic<size_t> next{0};
  auto work = [&](Model& m) {
    for (size_t t; (t = next.fetch_add(1)) < batches.size();) {
      const Split& split = *splits[batches[t].first];
      const int start = batches[t].second, B = std::min(kEvalBatch, split.size() - start);
      const float* logits = m.forward(split.image(start), B);
      for (int b = 0; b < B; ++b) {
        const float* l = logits + size_t(b) * kNumClasses;
        ok[batches[t].first][size_t(start + b)] = int(std::max_element(l, l + kNumClasses) - l) == split.labels[start + b];
      }
    }
  };
  // The job either starts before this thread is through (and is then waited
  // for, without running other jobs meanwhile) or is cancelled and returns at
  // once whenever a thread picks it up, touching nothing but `state`; so too
  // when this thread leaves by an exception.
  struct State {
    bool started = false, cancelled = false, done = false;
    std::exception_ptr error;
  };
  struct Job {
    EvalPool* pool = nullptr;
    std::shared_ptr<State> state = std::make_shared<State>();
    void finish() {  // cancel or wait
      if (!pool) return;
      bool wait = false;
      pool->update([&] {
        if (state->started) wait = true;
        else state->cancelled = true;
      });
      if (wait) pool->wait_until([&] { return state->done; });
      pool = nullptr;
    }
    ~Job() { finish(); }
  } job;
  if (helper && pool && batches.size() > 1) {
    job.pool = pool;
    pool->post([state = job.state, pool, helper, &work] {
      bool go = false;
      pool->update([&] { go = state->started = !state->cancelled; });
      if (!go) return;
      try {
        work(*helper);
      } catch (...) {
        state->error = std::current_exception();
      }
      pool->update([&] { state->done = true; });
    });
  }
  if (meanwhile) meanwhile();
  work(model);
  job.finish();
  if (job.state->error) std::rethrow_exception(job.state->error);
  return ok;
}

// Accuracy at each of `grid` over `splits`, a sample counted at the grid entry
// its `position` matches (`circular`: modulo 360): the familiar and held-out
// splits' per-sample correctness under the current weights is `familiar_ok` /
// `heldout_ok`, another split's is others_ok[k] for others[k].
std::vector<double> per_view(const Dataset& data, const std::vector<double>& grid,
                             const std::vector<const Split*>& splits, const std::vector<float> Split::*position,
                             bool circular, const std::vector<uint8_t>& familiar_ok,
                             const std::vector<uint8_t>& heldout_ok, const std::vector<const Split*>& others,
                             const std::vector<std::vector<uint8_t>>& others_ok) {
  std::vector<int> n(grid.size(), 0), ok(grid.size(), 0);
  for (const Split* s : splits) {
    const std::vector<uint8_t>& correct =
        s == &data.familiar ? familiar_ok
        : s == &data.heldout ? heldout_ok
                             : others_ok.at(size_t(std::find(others.begin(), others.end(), s) - others.begin()));
    for (int k = 0; k < s->size(); ++k) {
      const double view = (s->*position)[size_t(k)];
      const size_t g = size_t(std::find_if(grid.begin(), grid.end(), [&](double x) {
                                return circular ? circular_distance(x, view) < 1e-6 : std::fabs(x - view) < 1e-6;
                              }) - grid.begin());
      if (g == grid.size())
        throw std::logic_error(circular ? "circle image at an azimuth not in Dataset::circle_az"
                                        : "axis sweep image at a position not in Dataset::axis_values");
      ++n[g];
      ok[g] += correct[size_t(k)];
    }
  }
  std::vector<double> acc;
  for (size_t g = 0; g < grid.size(); ++g) acc.push_back(n[g] ? double(ok[g]) / n[g] : 0.0);
  return acc;
}

}  // namespace

double accuracy(Model& model, const Split& split, std::vector<uint8_t>* correct) {
  std::vector<std::vector<uint8_t>> ok = correct_on(model, nullptr, nullptr, {&split}, {});
  const long right = std::accumulate(ok[0].begin(), ok[0].end(), 0L);
  if (correct) *correct = std::move(ok[0]);
  return split.size() ? double(right) / split.size() : 0.0;
}

namespace {
// ModelResult::act_*: the class activations of `split` through a model with class capsules.
void class_activation_stats(Model& model, const Split& split, ModelResult* res) {
  int right = 0;
  double a_true = 0, a_other = 0;
  for (int start = 0; start < split.size(); start += kEvalBatch) {
    const int B = std::min(kEvalBatch, split.size() - start);
    model.forward(split.image(start), B);
    const ClassCapsules caps = model.class_capsules();
    if (caps.pose_dim == 0) return;
    for (int b = 0; b < B; ++b) {
      const float* a = caps.activations + size_t(b) * kNumClasses;
      const int y = split.labels[start + b];
      right += int(std::max_element(a, a + kNumClasses) - a) == y;
      a_true += a[y];
      for (int c = 0; c < kNumClasses; ++c) a_other += c == y ? 0.0 : a[c] / (kNumClasses - 1);
    }
  }
  if (split.size() == 0) return;
  res->act_accuracy = double(right) / split.size();
  res->act_true = a_true / split.size();
  res->act_other = a_other / split.size();
}
}  // namespace

namespace {
// What evaluating the weights after an epoch yields.
struct EpochEval {
  double familiar = 0, heldout = 0;
  std::vector<uint8_t> familiar_ok, heldout_ok;  // per sample
  std::vector<double> circle;                    // TrainConfig::circle_every_epoch
};

EpochEval evaluate_epoch(Model& model, const Dataset& data, bool circle) {
  EpochEval ev;
  ev.familiar = accuracy(model, data.familiar, &ev.familiar_ok);
  ev.heldout = accuracy(model, data.heldout, &ev.heldout_ok);
  if (circle) {
    const std::vector<const Split*> others = to_evaluate(data, data.circle_splits());
    ev.circle = per_view(data, data.circle_az, data.circle_splits(), &Split::azimuth, true, ev.familiar_ok,
                         ev.heldout_ok, others, correct_on(model, nullptr, nullptr, others, {}));
  }
  return ev;
}
}  // namespace

void EvalPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

bool EvalPool::offer(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_ <= int(jobs_.size())) return false;  // every idle thread has a job waiting already
    jobs_.push_front(std::move(job));
  }
  cv_.notify_all();
  return true;
}

void EvalPool::help_until(const std::function<bool()>& done) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done()) {
    if (jobs_.empty()) {
      ++idle_;
      cv_.wait(lock);
      --idle_;
      continue;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();  // catches what it throws: a job's owner reads its error
    lock.lock();
  }
}

void EvalPool::wait_until(const std::function<bool()>& done) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, done);
}

void EvalPool::update(const std::function<void()>& change) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    change();
  }
  cv_.notify_all();
}

PreparedModel prepare_model(const std::string& name, const TrainConfig& cfg, int channels) {
  if (cfg.n_epochs < 1 || cfg.batch_size < 1) throw std::invalid_argument("n_epochs and batch_size must be >= 1");
  PreparedModel p;
  p.name = name;
  p.channels = channels;
  p.batch_size = cfg.batch_size;
  p.model = make_model(name, cfg.model, std::max(cfg.batch_size, kEvalBatch), channels);
  p.model->init(cfg.seed);
  AdamConfig ac;
  ac.lr = cfg.lr;
  p.trainer = std::make_unique<Trainer>(*p.model, ac, cfg.batch_size);
  p.model->prepare_training(cfg.batch_size);
  return p;
}

ModelResult train_and_evaluate(const std::string& name, const Dataset& data,
                               const TrainConfig& cfg, const EpochCallback& on_epoch,
                               const std::function<void(Model&)>& on_trained, EvalPool* pool) {
  return train_and_evaluate(prepare_model(name, cfg, data.train.channels), data, cfg, on_epoch, on_trained, pool);
}

ModelResult train_and_evaluate(PreparedModel prepared, const Dataset& data, const TrainConfig& cfg,
                               const EpochCallback& on_epoch, const std::function<void(Model&)>& on_trained,
                               EvalPool* pool) {
  if (!prepared.model || !prepared.trainer) throw std::invalid_argument("train_and_evaluate: no prepared model");
  if (cfg.n_epochs < 1 || prepared.batch_size != cfg.batch_size)
    throw std::invalid_argument("train_and_evaluate: n_epochs must be >= 1 and batch_size the prepared one");
  if (prepared.channels != data.train.channels)
    throw std::invalid_argument("train_and_evaluate: " + prepared.name + " was made for " +
                                std::to_string(prepared.channels) + "-channel images, the data has " +
                                std::to_string(data.train.channels));
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
  const long total_steps = cfg.n_epochs * steps_per_epoch;  // the cap: the spread margin anneals over it
  long step = 0;
  res.step_loss.reserve(size_t(total_steps));
  res.step_s.reserve(size_t(total_steps));
  EpochEval last;  // the latest epoch's evaluation

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
  // What the evaluations recorded, in epoch order, on whichever thread ran them;
  // res takes it once training is over.
  struct Recorded {
    std::vector<EpochStats> history;
    std::vector<std::vector<double>> circle_history;
    double eval_s = 0;
  } recorded;
  auto record = [&](EpochStats st, EpochEval ev, double eval_s) {
    st.familiar = ev.familiar;
    st.heldout = ev.heldout;
    st.seconds += eval_s;
    recorded.eval_s += eval_s;
    if (cfg.circle_every_epoch) recorded.circle_history.push_back(std::move(ev.circle));
    recorded.history.push_back(st);
    last = std::move(ev);
    if (on_epoch) on_epoch(name, st);
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
          handoff.copy = make_model(name, cfg.model, max_batch, data.train.channels);
          handoff.copy->init(cfg.seed);
        }
        std::copy(item.second.begin(), item.second.end(), handoff.copy->params().values().begin());
        const auto t1 = std::chrono::steady_clock::now();
        EpochEval ev = evaluate_epoch(*handoff.copy, data, cfg.circle_every_epoch);
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

  // A model fit in one pass (nn1) has no epochs: evaluated once, no history.
  const bool fitted = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    const bool f = model->fit(train.images.data(), train.labels.data(), N);
    res.train_s += seconds_since(t0);
    return f;
  }();
  if (fitted) {
    const auto t1 = std::chrono::steady_clock::now();
    last = evaluate_epoch(*model, data, false);
    res.familiar = last.familiar;
    res.heldout = last.heldout;
    res.eval_s += seconds_since(t1);
  }
  for (int epoch = 1; epoch <= cfg.n_epochs && !fitted; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    // Fisher-Yates from a stream keyed by the epoch: both models see the same order.
    std::iota(order.begin(), order.end(), 0);
    Stream shuffle(cfg.seed, Purpose::Shuffle, uint64_t(epoch));
    for (int k = N - 1; k > 0; --k) std::swap(order[k], order[shuffle.below(uint32_t(k + 1))]);

    double loss_sum = 0;
    for (int start = 0; start < N; start += cfg.batch_size) {
      const int B = std::min(cfg.batch_size, N - start);
      for (int b = 0; b < B; ++b) {
        float* x = batch_x.data() + size_t(b) * pixels;
        if (train.draw) train.draw(order[start + b], uint64_t(epoch), x);
        else std::copy_n(train.image(order[start + b]), pixels, x);
        batch_y[b] = train.labels[order[start + b]];
      }
      const double progress = total_steps > 1 ? double(step) / double(total_steps - 1) : 1.0;
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
    if (!all_finite(model->params().values().data(), model->params().count()))
      fail("non-finite weights", epoch, 0);
    res.train_s += seconds_since(t0);

    EpochStats st;
    st.epoch = epoch;
    // An epoch cut short by the stop rule: its mean over the images it saw.
    st.loss = loss_sum / std::min<double>(N, double(res.step_loss.size() - size_t(epoch - 1) * steps_per_epoch) * cfg.batch_size);
    st.seconds = seconds_since(t0);
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
      EpochEval ev = evaluate_epoch(*model, data, cfg.circle_every_epoch);
      record(st, std::move(ev), seconds_since(t1));
    }
    if (res.stopped_early) break;
    if (cfg.stop && cfg.stop_every == 0 && epoch < cfg.n_epochs &&
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
  res.history = std::move(recorded.history);
  res.circle_history = std::move(recorded.circle_history);
  res.eval_s += recorded.eval_s;

  const auto t2 = std::chrono::steady_clock::now();
  if (!fitted) {
    res.familiar = res.history.back().familiar;
    res.heldout = res.history.back().heldout;
  }
  res.drop = res.familiar - res.heldout;
  std::vector<int> n_cls(kNumClasses, 0), ok_cls(kNumClasses, 0);
  for (int k = 0; k < data.heldout.size(); ++k) {
    ++n_cls[data.heldout.labels[k]];
    ok_cls[data.heldout.labels[k]] += last.heldout_ok[k];
  }
  for (int c = 0; c < kNumClasses; ++c)
    res.heldout_per_class.push_back(n_cls[c] ? double(ok_cls[c]) / n_cls[c] : 0.0);

  // The circle and the axis sweep: with a pool, their batches are shared with
  // the copy the epochs were evaluated on, given the final weights.
  const std::vector<const Split*> views = to_evaluate(data, data.axis_splits(), to_evaluate(data, data.circle_splits()));
  Model* helper = nullptr;
  if (pool && handoff.copy) {
    std::copy(model->params().values().begin(), model->params().values().end(),
              handoff.copy->params().values().begin());
    helper = handoff.copy.get();
  }
  const std::vector<std::vector<uint8_t>> views_ok = correct_on(*model, helper, pool, views, [&] {
    if (data.validation.size() > 0) res.validation = accuracy(*model, data.validation);
    class_activation_stats(*model, data.heldout, &res);
  });
  handoff.copy.reset();
  res.circle_acc = per_view(data, data.circle_az, data.circle_splits(), &Split::azimuth, true, last.familiar_ok,
                            last.heldout_ok, views, views_ok);
  res.axis_acc = per_view(data, data.axis_values, data.axis_splits(), &Split::axis, false, last.familiar_ok,
                          last.heldout_ok, views, views_ok);
  res.circle_s = seconds_since(t2);
  if (on_trained) on_trained(*model);
  return res;
}

}  // namespace vg

namespace vg {

RunResult run_experiment(const RunOptions& opt, const EpochCallback& on_epoch,
                         const std::function<void(const std::string&, Model&, const Dataset&)>& on_trained) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  DataConfig dc = opt.data;
  dc.seed = opt.train.seed;
  // Under match_familiar the matched model trains first, in full; its final
  // validation accuracy is every other model's target. Results keep opt.models' order.
  std::vector<std::string> order = opt.models;
  if (!opt.match_familiar.empty()) {
    const auto it = std::find(order.begin(), order.end(), opt.match_familiar);
    if (it == order.end()) throw std::invalid_argument("match_familiar: model '" + opt.match_familiar + "' is not run");
    std::rotate(order.begin(), it, it + 1);
  }
  // A model keeps at most two threads busy: its training and its evaluations.
  const int workers = std::clamp(opt.threads, 1, std::max(1, 2 * int(order.size())));
  // With several threads (and no matched model to train first) the first
  // training thread starts at once: it prepares its model (primitives created,
  // weights initialised, Adam state allocated) while this thread synthesises the
  // data. One only, so the synthesis keeps a core; the others start after it.
  const bool prepare_early = workers > 1 && opt.match_familiar.empty();

  // Each model trains single-threaded from its own seeded stream, so running
  // them concurrently (opt.threads > 1: one per core) changes no bit. Neither
  // does evaluating each epoch on another thread (the pool): the same
  // arithmetic on a copy of the weights. What the caller sees of a trained
  // model (on_trained) comes in training order all the same, and epoch reports
  // one at a time. A thread waiting for its turn helps with the evaluations.
  EvalPool pool;
  std::mutex report_mu;
  size_t turn = 0;                         // the index in `order` whose on_trained is next (pool.update)
  std::vector<char> reported(order.size());  // on_trained done, or the model failed
  std::vector<ModelResult> results(order.size());
  enum class DataState { pending, ready, failed } data_state = DataState::pending;  // pool.update
  auto pass_turn = [&](size_t i) {
    pool.update([&] {
      reported[i] = 1;
      while (turn < order.size() && reported[turn]) ++turn;
    });
  };
  // Trains order[i] on the model `prepare` gives (which may throw what
  // preparing it threw: the model then fails like one whose training did).
  auto train = [&](size_t i, double target, const std::function<PreparedModel()>& prepare) {
    const std::string& m = order[i];
    const auto tm = std::chrono::steady_clock::now();
    TrainConfig tc = opt.train;
    const bool matched = !opt.match_familiar.empty() && m == opt.match_familiar;
    if (target > 0 && !matched) tc.stop = stop_at_accuracy(target);
    auto take_turn = [&] {  // once every earlier model has been reported (or failed)
      pool.help_until([&] { return turn == i; });
    };
    try {
      EpochCallback epoch;
      if (on_epoch)
        epoch = [&](const std::string& name, const EpochStats& e) {
          std::lock_guard<std::mutex> lock(report_mu);
          on_epoch(name, e);
        };
      results[i] = train_and_evaluate(
          prepare(), r.data, tc, epoch,
          [&](Model& model) {
            take_turn();
            if (on_trained) on_trained(m, model, r.data);
            pass_turn(i);
          },
          workers > 1 ? &pool : nullptr);
      // A model fit in one pass (no history) has no training to stop.
      if (target > 0 && !matched && !results[i].history.empty()) results[i].stop_target = target;
    } catch (const std::exception& e) {
      pass_turn(i);  // the models after it are reported without it
      if (!opt.keep_going) throw;
      ModelResult failed;
      failed.name = m;
      failed.familiar = failed.heldout = failed.drop = NAN;
      failed.error = *e.what() ? e.what() : "unknown error";
      failed.train_s = seconds_since(tm);
      results[i] = failed;
    }
  };
  const int channels = image_channels(dc);
  auto prepare_now = [&](size_t i) {
    return [&, i] { return prepare_model(order[i], opt.train, channels); };
  };

  // The training threads (workers > 1). A model that fails (keep_going off)
  // makes the run fail; the others finish first. A worker with no model left
  // helps the others with their evaluations.
  std::atomic<size_t> next{0};
  size_t finished = 0;  // models trained (pool.update)
  double target = opt.stop_at_familiar;
  std::vector<std::exception_ptr> errors(order.size());
  std::vector<std::thread> pool_threads;
  auto start_worker = [&] {
    pool_threads.emplace_back([&] {
      omp_set_num_threads(1);
      for (size_t i; (i = next.fetch_add(1)) < order.size();) {
        // Prepared before the data is read (an error in it fails the model
        // in train, as one in training would).
        std::optional<PreparedModel> ready;
        std::exception_ptr prepare_error;
        try {
          ready = prepare_model(order[i], opt.train, channels);
        } catch (...) {
          prepare_error = std::current_exception();
        }
        pool.wait_until([&] { return data_state != DataState::pending; });
        if (data_state == DataState::failed) return;  // set once, under the lock: no model trains
        try {
          train(i, target, [&] {
            if (prepare_error) std::rethrow_exception(prepare_error);
            return std::move(*ready);
          });
        } catch (...) {
          errors[i] = std::current_exception();
        }
        pool.update([&] { ++finished; });
      }
      pool.help_until([&] { return finished == order.size(); });
    });
  };
  // However this thread leaves (the data failed to synthesise, a check threw),
  // the workers end first: told the data will not come, or after their models.
  struct JoinWorkers {
    EvalPool& pool;
    DataState& state;
    std::vector<std::thread>& threads;
    ~JoinWorkers() {
      pool.update([&] {
        if (state == DataState::pending) state = DataState::failed;
      });
      for (std::thread& t : threads) t.join();
    }
  } join_workers{pool, data_state, pool_threads};
  if (prepare_early) start_worker();

  r.data = make_dataset(dc);
  // The synthesis's OpenMP workers would spin for a while after its last loop
  // (libgomp's default wait policy) on the cores the models are about to train
  // on: released here (a no-op with one thread; measured in docs/performance.md, b8a16de).
  omp_pause_resource_all(omp_pause_soft);
  r.dataset_s = seconds_since(t0);
  if ((opt.stop_at_familiar > 0 || !opt.match_familiar.empty()) && r.data.validation.size() == 0)
    throw std::invalid_argument("stopping at a familiar accuracy needs a validation split (DataConfig::n_val_per_combo)");
  if (r.data.train.channels != channels)  // image_channels must say what make_dataset makes
    throw std::logic_error("the dataset has " + std::to_string(r.data.train.channels) +
                           "-channel images, image_channels said " + std::to_string(channels));
  pool.update([&] { data_state = DataState::ready; });

  // Under match_familiar the matched model trains first, alone; its final
  // validation accuracy is every other model's target. On this thread too,
  // every model trains on one thread (restored after).
  struct OneThread {
    int saved = omp_get_max_threads();
    OneThread() { omp_set_num_threads(1); }
    ~OneThread() { omp_set_num_threads(saved); }
  } one_thread;
  if (!opt.match_familiar.empty()) {
    next = 1;
    train(0, 0, prepare_now(0));
    target = results[0].error.empty() ? results[0].validation : NAN;  // failed: the others train to the cap
    finished = 1;
  }
  if (workers <= 1) {
    for (size_t i = next; i < order.size(); ++i) train(i, target, prepare_now(i));
  } else {
    while (int(pool_threads.size()) < workers) start_worker();
    for (std::thread& t : pool_threads) t.join();
    pool_threads.clear();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
  for (const std::string& m : opt.models)
    for (ModelResult& res : results)
      if (res.name == m) r.models.push_back(std::move(res));
  r.total_s = seconds_since(t0);
  return r;
}

}  // namespace vg
