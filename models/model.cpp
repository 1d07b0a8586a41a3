#include "models/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "kernels/elementwise.h"
#include "kernels/rng.h"

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
  Stream(seed, Purpose::Init, h).fill_normal(p, n, std);
}

void Adam::step(ParamSet& p) {
  ++t_;
  // w -= lr (m / c1) / (sqrt(v / c2) + eps), with the bias corrections hoisted.
  const double c1 = 1.0 - std::pow(double(cfg_.beta1), double(t_));
  const double c2 = 1.0 - std::pow(double(cfg_.beta2), double(t_));
  elementwise().adam_update(p.values().data(), m_.data(), v_.data(), p.grads().data(), p.count(),
                            cfg_.beta1, cfg_.beta2, float(cfg_.lr / c1),
                            float(1.0 / std::sqrt(c2)), cfg_.eps);
}

void relu_backward(float* d, const float* y, size_t n) { elementwise().relu_backward(d, y, n); }

// Classes per score row: every model scores the 5 classes of the dataset.
constexpr int kScoreClasses = 5;

Trainer::Trainer(Model& model, const AdamConfig& adam, int max_batch)
    : model_(model), adam_(model.params().count(), adam),
      dscores_(size_t(max_batch) * kScoreClasses) {}

double Trainer::step(const float* images, const int* labels, int B, double progress) {
  if (size_t(B) * kScoreClasses > dscores_.size()) throw std::invalid_argument("Trainer::step: batch > max_batch");
  // Labels for the model's own loss term during this step only.
  struct Labels {
    Model& m;
    Labels(Model& m, const int* y) : m(m) { m.set_training_labels(y); }
    ~Labels() { m.set_training_labels(nullptr); }
  } with_labels(model_, labels);
  const float* scores = model_.forward(images, B);
  double loss;
  {
    LayerScope t(model_.profiler(), "loss", false);
    loss = loss_forward_backward(model_.loss(), dscores_.data(), scores, labels, B, kScoreClasses, progress);
  }
  loss += model_.model_loss();
  if (!std::isfinite(loss)) return loss;  // no update: the caller finds the layer
  model_.backward(dscores_.data(), B);
  LayerScope t(model_.profiler(), "adam", true);
  adam_.step(model_.params());
  return loss;
}

}  // namespace vg
