// Evaluation: per-sample correctness in batches (shared with a helper thread's
// model through the EvalPool), accuracies, per-view accuracies and the class
// capsules' activations (harness/evaluate.h).
#include "harness/evaluate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "core/rng.h"

namespace vg {

std::vector<const Split*> to_evaluate(const Dataset& data, const std::vector<const Split*>& splits,
                                      std::vector<const Split*> out) {
  for (const Split* s : splits)
    if (s != &data.familiar && s != &data.heldout && std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  return out;
}

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
      const int J = split.classes;
      for (int b = 0; b < B; ++b) {
        const float* l = logits + size_t(b) * J;
        ok[batches[t].first][size_t(start + b)] = int(std::max_element(l, l + J) - l) == split.labels[start + b];
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


double accuracy(Model& model, const Split& split, std::vector<uint8_t>* correct) {
  std::vector<std::vector<uint8_t>> ok = correct_on(model, nullptr, nullptr, {&split}, {});
  const long right = std::accumulate(ok[0].begin(), ok[0].end(), 0L);
  if (correct) *correct = std::move(ok[0]);
  return split.size() ? double(right) / split.size() : 0.0;
}

void class_activation_stats(Model& model, const Split& split, ModelResult* res) {
  int right = 0;
  double a_true = 0, a_other = 0;
  const int J = split.classes;
  for (int start = 0; start < split.size(); start += kEvalBatch) {
    const int B = std::min(kEvalBatch, split.size() - start);
    model.forward(split.image(start), B);
    const ClassCapsules caps = model.class_capsules();
    if (caps.pose_dim == 0) return;
    for (int b = 0; b < B; ++b) {
      const float* a = caps.activations + size_t(b) * J;
      const int y = split.labels[start + b];
      right += int(std::max_element(a, a + J) - a) == y;
      a_true += a[y];
      for (int c = 0; c < J; ++c) a_other += c == y ? 0.0 : a[c] / (J - 1);
    }
  }
  if (split.size() == 0) return;
  res->act_accuracy = double(right) / split.size();
  res->act_true = a_true / split.size();
  res->act_other = a_other / split.size();
}


bool same_samples(const Split& a, const Split& b) {
  return a.shape() == b.shape() && a.labels == b.labels && a.images == b.images;
}

Split check_sample_split(const Split& s, int n, uint64_t seed, uint64_t which) {
  if (n >= s.size()) return s;
  // A partial Fisher-Yates: the first n of a shuffle of every index, then in order.
  std::vector<int> idx(size_t(s.size()));
  std::iota(idx.begin(), idx.end(), 0);
  Stream pick(seed, Purpose::Check, which);
  for (int k = 0; k < n; ++k) std::swap(idx[size_t(k)], idx[size_t(k) + pick.below(uint32_t(s.size() - k))]);
  idx.resize(size_t(n));
  std::sort(idx.begin(), idx.end());
  Split out;
  out.channels = s.channels;
  out.side = s.side;
  out.classes = s.classes;
  out.images.reserve(size_t(n) * s.pixels());
  for (int i : idx) {
    out.images.insert(out.images.end(), s.image(i), s.image(i) + s.pixels());
    out.labels.push_back(s.labels[size_t(i)]);
    for (auto [from, to] : {std::pair{&s.azimuth, &out.azimuth}, {&s.elevation, &out.elevation}, {&s.axis, &out.axis}})
      if (!from->empty()) to->push_back((*from)[size_t(i)]);
  }
  return out;
}

Dataset check_sample_data(const Dataset& data, int n, uint64_t seed) {
  Dataset d;
  d.familiar = check_sample_split(data.familiar, n, seed, 0);
  d.heldout = check_sample_split(data.heldout, n, seed, 1);
  d.validation = check_sample_split(data.validation, n, seed, 2);
  return d;
}

std::vector<EpochEval> evaluate_epoch(Model& model, const std::vector<const Dataset*>& sets, bool circle) {
  std::vector<EpochEval> out(sets.size());
  for (size_t k = 0; k < sets.size(); ++k) {
    const Dataset& data = *sets[k];
    EpochEval& ev = out[k];
    if (k > 0 && same_samples(data.familiar, sets[0]->familiar)) {
      ev.familiar = out[0].familiar;
      ev.familiar_ok = out[0].familiar_ok;
    } else {
      ev.familiar = accuracy(model, data.familiar, &ev.familiar_ok);
    }
    // A source without viewpoints tests both on its one test set (Fashion-MNIST's
    // standard split): scored once.
    if (same_samples(data.heldout, data.familiar)) {
      ev.heldout = ev.familiar;
      ev.heldout_ok = ev.familiar_ok;
    } else {
      ev.heldout = accuracy(model, data.heldout, &ev.heldout_ok);
    }
    if (data.validation.size() == 0) ev.validation = NAN;
    else if (k > 0 && same_samples(data.validation, sets[0]->validation)) ev.validation = out[0].validation;
    else ev.validation = accuracy(model, data.validation);
    if (circle) {
      const std::vector<const Split*> others = to_evaluate(data, data.circle_splits());
      ev.circle = per_view(data, data.circle_az, data.circle_splits(), &Split::azimuth, true, ev.familiar_ok,
                           ev.heldout_ok, others, correct_on(model, nullptr, nullptr, others, {}));
    }
  }
  return out;
}

void final_results(std::vector<ModelResult>& out, const std::vector<EpochEval>& last,
                   const std::vector<const Dataset*>& sets, Model& model, Model* helper, EvalPool* pool) {
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t k = 0; k < sets.size(); ++k) {
    ModelResult& r = out[k];
    r.familiar = last[k].familiar;
    r.heldout = last[k].heldout;
    r.drop = r.familiar - r.heldout;
    r.validation = last[k].validation;
    const Split& heldout = sets[k]->heldout;
    std::vector<int> n_cls(size_t(heldout.classes), 0), ok_cls(size_t(heldout.classes), 0);
    for (int i = 0; i < heldout.size(); ++i) {
      ++n_cls[heldout.labels[i]];
      ok_cls[heldout.labels[i]] += last[k].heldout_ok[i];
    }
    for (int c = 0; c < heldout.classes; ++c)
      r.heldout_per_class.push_back(n_cls[size_t(c)] ? double(ok_cls[size_t(c)]) / n_cls[size_t(c)] : 0.0);
  }

  // The circle and the axis sweep. A dataset whose views are the first's
  // samples takes the first's correctness.
  std::vector<const Split*> first_views;
  std::vector<std::vector<uint8_t>> first_ok;
  for (size_t k = 0; k < sets.size(); ++k) {
    const Dataset& d = *sets[k];
    ModelResult& r = out[k];
    const std::vector<const Split*> views = to_evaluate(d, d.axis_splits(), to_evaluate(d, d.circle_splits()));
    const bool reuse = k > 0 && views.size() == first_views.size() &&
                       std::equal(views.begin(), views.end(), first_views.begin(),
                                  [](const Split* a, const Split* b) { return same_samples(*a, *b); });
    std::vector<std::vector<uint8_t>> views_ok =
        reuse ? first_ok : correct_on(model, helper, pool, views, [&] { class_activation_stats(model, d.heldout, &r); });
    if (reuse) class_activation_stats(model, d.heldout, &r);
    r.circle_acc = per_view(d, d.circle_az, d.circle_splits(), &Split::azimuth, true, last[k].familiar_ok,
                            last[k].heldout_ok, views, views_ok);
    r.axis_acc = per_view(d, d.axis_values, d.axis_splits(), &Split::axis, false, last[k].familiar_ok,
                          last[k].heldout_ok, views, views_ok);
    if (k == 0) first_views = views, first_ok = std::move(views_ok);
  }
  const double views_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (ModelResult& r : out) r.circle_s = views_s / double(out.size());
}

ModelResult evaluate_trained(const std::string& name, Model& model, const Dataset& data, Model* helper,
                             EvalPool* pool) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ModelResult> out(1);
  out[0].name = name;
  out[0].n_params = model.params().count();
  const std::vector<EpochEval> last = evaluate_epoch(model, {&data}, false);
  out[0].eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  final_results(out, last, {&data}, model, helper, pool);
  return std::move(out[0]);
}

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

}  // namespace vg
