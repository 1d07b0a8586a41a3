#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/rng.h"
#include "kernels/elementwise.h"
#include "models/side_job.h"

namespace vg {

int ParamSet::add(const std::string& name, size_t size) {
  if (!values_.empty()) throw std::logic_error("ParamSet::add after allocate");
  const size_t offset = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size;
  tensors_.push_back({name, offset, size});
  return int(tensors_.size()) - 1;
}

void ParamSet::allocate() {
  const size_t n = tensors_.empty() ? 0 : tensors_.back().offset + tensors_.back().size;
  values_.assign(n, 0.f);
  grads_.assign(n, 0.f);
}

void ParamSet::zero_grad() { std::fill(grads_.begin(), grads_.end(), 0.f); }

std::string ParamSet::first_non_finite(bool gradients) const {
  const std::vector<float>& x = gradients ? grads_ : values_;
  for (const Tensor& t : tensors_)
    for (size_t k = 0; k < t.size; ++k)
      if (!std::isfinite(x[t.offset + k])) return t.name;
  return "";
}

// A float is finite unless its exponent bits are all ones. Without an early
// exit the loop vectorises: it runs on every forward pass and every epoch.
bool all_finite(const float* x, size_t n) {
  uint32_t bad = 0;
  for (size_t k = 0; k < n; ++k) {
    uint32_t bits;
    std::memcpy(&bits, x + k, sizeof bits);
    bad |= uint32_t((bits & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

void init_normal(float* p, size_t n, float std, uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the tensor name
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  fill_normal(Stream(seed, Purpose::Init, h), p, n, std);
}

void Adam::advance() {
  ++t_;
  // w -= lr (m / c1) / (sqrt(v / c2) + eps), with the bias corrections hoisted.
  const double c1 = 1.0 - std::pow(double(cfg_.beta1), double(t_));
  const double c2 = 1.0 - std::pow(double(cfg_.beta2), double(t_));
  lr_c1_ = float(cfg_.lr / c1);
  inv_sqrt_c2_ = float(1.0 / std::sqrt(c2));
}

void Adam::restore(long steps, const std::vector<float>& m, const std::vector<float>& v) {
  if (steps < 0 || m.size() != m_.size() || v.size() != v_.size())
    throw std::invalid_argument("Adam::restore: a state of another size (" + std::to_string(m.size()) + " and " +
                                std::to_string(v.size()) + " moments for " + std::to_string(m_.size()) + ")");
  t_ = steps;
  m_ = m;
  v_ = v;
}

void Adam::update(ParamSet& p, size_t begin, size_t end) {
  elementwise().adam_update(p.values().data() + begin, m_.data() + begin, v_.data() + begin,
                            p.grads().data() + begin, end - begin, cfg_.beta1, cfg_.beta2, lr_c1_,
                            inv_sqrt_c2_, cfg_.eps);
}

void relu_backward(float* d, const float* y, size_t n) { elementwise().relu_backward(d, y, n); }

Trainer::Trainer(Model& model, const AdamConfig& adam, int max_batch)
    : model_(model), adam_(model.params().count(), adam), max_batch_(max_batch),
      dscores_(size_t(max_batch) * size_t(model.classes())), shared_(new Shared) {
  shared_->adam = &adam_;
  shared_->params = &model_.params();
}

Trainer::~Trainer() { release(shared_); }

void Trainer::release(Shared* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete s;
}

void Trainer::track_final_margin(long total_steps) {
  final_margin_ = model_.loss().kind == LossKind::spread ? spread_final_margin(model_.loss(), total_steps) : NAN;
  final_margin_loss_ = NAN;
}

double Trainer::step(const float* images, const int* labels, int B, double progress) {
  if (B > max_batch_) throw std::invalid_argument("Trainer::step: batch > max_batch");
  // Labels for the model's own loss term during this step only.
  struct Labels {
    Model& m;
    Labels(Model& m, const int* y) : m(m) { m.set_training_labels(y); }
    ~Labels() { m.set_training_labels(nullptr); }
  } with_labels(model_, labels);
  // The profile times each layer on this thread: it shares nothing.
  StepHelper* const helper = model_.profiler() ? nullptr : helper_;
  struct Helper {
    Model& m;
    Helper(Model& m, StepHelper* h) : m(m) { m.step_helper_ = h; }
    ~Helper() { m.step_helper_ = nullptr; }
  } with_helper(model_, helper);
  const float* scores = model_.forward(images, B);
  double loss;
  {
    LayerScope t(model_.profiler(), "loss", false);
    // Adam's count is the steps taken before this one: the global step, restored with a checkpoint.
    loss = loss_forward_backward(model_.loss(), dscores_.data(), scores, labels, B, model_.classes(), progress,
                                 adam_.steps());
    if (!std::isnan(final_margin_))
      final_margin_loss_ = spread_loss(scores, labels, B, model_.classes(), final_margin_) + model_.model_loss();
  }
  loss += model_.model_loss();
  if (!std::isfinite(loss)) return loss;  // no update: the caller finds the layer
  adam_.advance();
  if (!helper) {
    model_.backward(dscores_.data(), B);
    LayerScope t(model_.profiler(), "adam", true);
    adam_.update(model_.params(), 0, model_.params().count());
    return loss;
  }
  ++generation_;
  n_offers_ = 0;
  // However backward ends, no offer is left running on another thread.
  struct Settle {
    Trainer& t;
    bool ok = false;
    ~Settle() {
      t.model_.sink_ = nullptr;
      if (!ok) t.finish_offers(false);
    }
  } settle{*this};
  model_.sink_ = this;
  model_.backward(dscores_.data(), B);
  settle.ok = true;
  model_.sink_ = nullptr;
  finish_offers(true);
  return loss;
}

void Trainer::add(std::function<void()> compute, int first_tensor, int last_tensor) {
  const ParamSet& p = model_.params();
  const size_t begin = p.tensor(first_tensor).offset;
  const size_t end = p.tensor(last_tensor).offset + p.tensor(last_tensor).size;
  if (begin == end || n_offers_ == int(shared_->offers.size())) {  // nothing to share, or no slot left: here and now
    compute();
    return;
  }
  for (int k = 0; k < n_offers_; ++k)
    if (begin < shared_->offers[size_t(k)].end && shared_->offers[size_t(k)].begin < end)
      throw std::logic_error("Trainer: two weight gradients offered for the same tensors");
  const int i = n_offers_++;
  Offer& o = shared_->offers[size_t(i)];
  o.compute = std::move(compute);
  o.begin = begin;
  o.end = end;
  o.adam_open.store(false, std::memory_order_relaxed);  // published by the state's release below
  o.next_chunk.store(0, std::memory_order_relaxed);
  const uint32_t gen = generation_ << 2;
  shared_->state[size_t(i)].store(gen | kOffered, std::memory_order_release);
  Shared* s = shared_;
  s->refs.fetch_add(1, std::memory_order_relaxed);
  // Three words (16 bytes): std::function keeps the job without allocating.
  const bool taken = helper_->offer([s, i, gen] {
    const uint32_t gate = gen << 1;  // `released` holds (generation << 3 | offers released)
    uint32_t expected = gen | kOffered;
    if (s->state[size_t(i)].compare_exchange_strong(expected, gen | kHelper, std::memory_order_acq_rel)) {
      Offer& o = s->offers[size_t(i)];
      try {
        o.compute();
        // The owner's backward may still read these weights (a backward-data pass).
        spin_then_wait(s->released, [&] {
          const uint32_t r = s->released.load(std::memory_order_acquire);
          return (r & ~7u) == gate && int(r & 7u) > i;
        });
        o.adam_open.store(true, std::memory_order_release);
        adam_chunks(s, o);
      } catch (...) {
        o.error = std::current_exception();  // the owner throws it
      }
      s->state[size_t(i)].store(gen | kDone, std::memory_order_release);
      s->state[size_t(i)].notify_one();
    }
    release(s);
  });
  if (!taken) release(s);  // the job was never queued: the owner runs it below
}

void Trainer::adam_chunks(Shared* s, Offer& o) {
  const size_t n = o.end - o.begin;
  for (size_t c; (c = o.next_chunk.fetch_add(1, std::memory_order_relaxed)) * kAdamChunk < n;) {
    const size_t from = o.begin + c * kAdamChunk;
    s->adam->update(*s->params, from, std::min(from + kAdamChunk, o.end));
  }
}

void Trainer::weights_released() {
  const uint32_t r = (generation_ << 3) | uint32_t(n_offers_);
  if (shared_->released.load(std::memory_order_relaxed) == r) return;
  shared_->released.store(r, std::memory_order_release);
  shared_->released.notify_all();
}

void Trainer::finish_offers(bool ok) {
  ParamSet& p = model_.params();
  const uint32_t gen = generation_ << 2;
  weights_released();  // backward is over (or has thrown): it reads no more weights
  // Claim what no helper has started; wait for what one has. Every offer is
  // settled before anything is thrown: none may run on after the step.
  std::exception_ptr error;
  for (int i = 0; i < n_offers_; ++i) {
    std::atomic<uint32_t>& st = shared_->state[size_t(i)];
    Offer& o = shared_->offers[size_t(i)];
    uint32_t expected = gen | kOffered;
    if (st.compare_exchange_strong(expected, gen | kOwner, std::memory_order_acq_rel)) {
      if (!ok || error) continue;
      try {
        o.compute();
        adam_.update(p, o.begin, o.end);
      } catch (...) {
        error = std::current_exception();
      }
      continue;
    }
    // A helper has it: once its gradient is in, share the Adam update (not
    // when unwinding, nor after an error: then nothing more is updated here).
    bool shared_adam = !ok || error;
    for (int spin = 0; (expected = st.load(std::memory_order_acquire)) != (gen | kDone); ++spin) {
      if (!shared_adam && o.adam_open.load(std::memory_order_acquire)) {
        adam_chunks(shared_, o);
        shared_adam = true;
        spin = 0;
        continue;
      }
      if (spin < 16384) cpu_relax();  // ~0.1-0.3 ms: an offer's usual remainder; then sleep
      else st.wait(expected, std::memory_order_acquire);
    }
    if (o.error && !error) error = o.error;
    o.error = nullptr;
  }
  if (!ok) return;  // unwinding already: the first error is on its way
  if (error) std::rethrow_exception(error);
  // Adam on every element no offer covered, in runs between the offers' ranges.
  size_t at = 0;
  for (;;) {  // the next offer's range from `at` (at most 4: no sort needed)
    const Offer* next = nullptr;
    for (int i = 0; i < n_offers_; ++i) {
      const Offer& o = shared_->offers[size_t(i)];
      if (o.begin >= at && (!next || o.begin < next->begin)) next = &o;
    }
    const size_t until = next ? next->begin : p.count();
    if (until > at) adam_.update(p, at, until);
    if (!next) break;
    at = next->end;
  }
}

}  // namespace vg
