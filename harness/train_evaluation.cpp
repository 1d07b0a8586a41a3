// An epoch's evaluation, on this thread or handed to the pool, and a
// training's results once it ends (harness/training.h).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "harness/training.h"

namespace vg {

void Training::evaluate(const EpochStats& trained, bool check) {
  if (!pool_) {
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<EpochEval> ev = evaluate_epoch(*model_, check_sets_, cfg_.circle_every_epoch && !check);
    record(trained, std::move(ev), seconds_since(t1), check);
    return;
  }
  Pending item{trained, model_->params().values(), check};  // copied outside the lock
  bool post = false;
  pool_->update([&] {
    handoff_.pending.push_back(std::move(item));
    post = !handoff_.draining;
    handoff_.draining = true;
  });
  if (post) pool_->post([this] { drain(); });
}

// A check inside an epoch goes to the checks alone: no circle, no report, and
// the latest epoch's evaluation (the final results') stays the epoch end's.
void Training::record(const EpochStats& trained, std::vector<EpochEval> evs, double eval_s, bool check) {
  for (size_t k = 0; k < sets_.size(); ++k) {
    EpochStats st = trained;
    st.familiar = evs[k].familiar;
    st.heldout = evs[k].heldout;
    st.validation = evs[k].validation;
    st.seconds += eval_s;
    recorded_[k].eval_s += k == 0 ? eval_s : 0;
    if (check) {
      recorded_[k].checks.push_back(st);
      continue;
    }
    if (cfg_.circle_every_epoch) recorded_[k].circle_history.push_back(std::move(evs[k].circle));
    recorded_[k].history.push_back(st);
    if (k == 0 && on_epoch_) on_epoch_(name_, st);
  }
  if (!check) last_ = std::move(evs);
}

void Training::drain() {
  for (;;) {
    Pending item;
    bool got = false, skip = false;
    pool_->update([&] {
      skip = handoff_.abandoned || handoff_.error;
      if (handoff_.pending.empty()) {
        handoff_.draining = false;
      } else {
        item = std::move(handoff_.pending.front());
        handoff_.pending.pop_front();
        got = true;
      }
    });
    if (!got) return;
    if (skip) continue;
    try {
      if (!handoff_.copy) {
        handoff_.copy = make_model(name_, cfg_.model, std::max(cfg_.batch_size, kEvalBatch), data_.train.shape());
        handoff_.copy->init(cfg_.seed);
      }
      std::copy(item.weights.begin(), item.weights.end(), handoff_.copy->params().values().begin());
      const auto t1 = std::chrono::steady_clock::now();
      std::vector<EpochEval> ev = evaluate_epoch(*handoff_.copy, check_sets_, cfg_.circle_every_epoch && !item.check);
      record(item.stats, std::move(ev), seconds_since(t1), item.check);
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      pool_->update([&] { handoff_.error = e; });
    }
  }
}

void Training::wait_for_evaluations() {
  if (!pool_) return;
  pool_->help_until([this] { return drained(); });
  if (handoff_.error) std::rethrow_exception(handoff_.error);
}

Training::~Training() {
  if (!pool_) return;
  pool_->update([&] { handoff_.abandoned = true; });
  pool_->help_until([this] { return drained(); });
}

// What the epochs trained so far recorded; no final evaluation.
std::vector<ModelResult> Training::interrupted_results() {
  std::vector<ModelResult> out(sets_.size(), res_);
  for (size_t k = 0; k < sets_.size(); ++k) {
    out[k].history = std::move(recorded_[k].history);
    out[k].checks = std::move(recorded_[k].checks);
    out[k].circle_history = std::move(recorded_[k].circle_history);
    out[k].eval_s += recorded_[k].eval_s;
    out[k].familiar = out[k].heldout = out[k].drop = NAN;
    if (k > 0) out[k].train_s = 0, out[k].step_s.clear();
  }
  return out;
}

// Each dataset's results once training is over: the training's result with
// the dataset's recorded epochs, then what the final weights score on it
// (harness/evaluate.h: final_results). The circle and the axis sweep: with a
// pool, their batches are shared with the copy the epochs were evaluated on,
// given the final weights.
std::vector<ModelResult> Training::trained_results(const std::function<void(Model&)>& on_trained) {
  Model* helper = nullptr;
  if (pool_ && handoff_.copy) {
    std::copy(model_->params().values().begin(), model_->params().values().end(),
              handoff_.copy->params().values().begin());
    helper = handoff_.copy.get();
  }
  std::vector<ModelResult> out(sets_.size(), res_);
  for (size_t k = 0; k < sets_.size(); ++k) {
    ModelResult& r = out[k];
    if (k > 0) r.train_s = 0, r.step_s.clear();  // one training: the first dataset's result carries its time
    r.history = std::move(recorded_[k].history);
    r.checks = std::move(recorded_[k].checks);
    r.circle_history = std::move(recorded_[k].circle_history);
    r.eval_s += recorded_[k].eval_s;
  }
  final_results(out, last_, sets_, *model_, helper, pool_);
  handoff_.copy.reset();
  if (on_trained) on_trained(*model_);
  return out;
}

}  // namespace vg
