#include "models/baselines.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/registry.h"

namespace vg {

NearestNeighbour::NearestNeighbour(int max_batch, const ImageShape& shape)
    : Model(LossConfig{}, shape.classes),
      max_batch_(max_batch), pixels_(int(shape.pixels())), classes_(shape.classes) {
  params_.allocate();  // no parameters
  scores_.resize(size_t(max_batch) * classes_);
}

bool NearestNeighbour::fit(const float* images, const int* labels, int n) {
  if (n < 1) throw std::invalid_argument("nn1: empty training set");
  for (int t = 0; t < n; ++t)
    if (labels[t] < 0 || labels[t] >= classes_)
      throw std::invalid_argument("nn1: label " + std::to_string(labels[t]) + " outside its " +
                                  std::to_string(classes_) + " classes");
  n_train_ = n;
  labels_.assign(labels, labels + n);
  train_t_.assign(size_t(pixels_) * n, 0.f);
  bias_.assign(size_t(n), 0.f);
  for (int t = 0; t < n; ++t) {
    double sq = 0;
    for (int k = 0; k < pixels_; ++k) {
      const float v = images[size_t(t) * pixels_ + k];
      train_t_[size_t(k) * n + t] = v;
      sq += double(v) * v;
    }
    bias_[size_t(t)] = float(-0.5 * sq);
  }
  dots_ = std::make_unique<Dense>(pixels_, n, /*relu=*/false);
  dots_out_.assign(size_t(max_batch_) * n, 0.f);
  return true;
}

const float* NearestNeighbour::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("nn1: batch > max_batch");
  if (!dots_) throw std::logic_error("nn1: forward before fit");
  {
    LayerScope t(prof_, "dots", false);
    dots_->forward(dots_out_.data(), images, train_t_.data(), bias_.data(), B);
  }
  LayerScope t(prof_, "argmax", false);
  std::fill(scores_.begin(), scores_.begin() + size_t(B) * classes_, 0.f);
  for (int b = 0; b < B; ++b) {
    const float* d = dots_out_.data() + size_t(b) * n_train_;
    const int nearest = int(std::max_element(d, d + n_train_) - d);
    scores_[size_t(b) * classes_ + labels_[size_t(nearest)]] = 1.f;
  }
  return scores_.data();
}

std::string NearestNeighbour::first_non_finite_layer(int B) const {
  if (dots_ && !all_finite(dots_out_.data(), size_t(B) * n_train_)) return "dots";
  return "";
}

std::vector<LayerInfo> NearestNeighbour::layers(int B) const {
  return {{"dots", 2.0 * B * pixels_ * n_train_, 0}, {"argmax", double(B) * n_train_, 0}};
}

Linear::Linear(const LossConfig& loss, int max_batch, const ImageShape& shape)
    : Model(loss, shape.classes),
      max_batch_(max_batch),
      pixels_(int(shape.pixels())),
      classes_(shape.classes),
      dense_(pixels_, classes_, /*relu=*/false) {
  w = params_.add("linear.weight", size_t(pixels_) * classes_);
  b = params_.add("linear.bias", classes_);
  params_.allocate();
  logits_.resize(size_t(max_batch) * classes_);
}

void Linear::init(uint64_t seed) {
  // Glorot-normal weights (std sqrt(2 / (fan_in + fan_out))), zero bias.
  std::fill(params_.values().begin(), params_.values().end(), 0.f);
  init_normal(params_.value(w), params_.tensor(w).size, std::sqrt(2.f / float(pixels_ + classes_)), seed,
              params_.tensor(w).name);
}

void Linear::prepare_training(int B) { dense_.prepare_backward(B); }

const float* Linear::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("linear: batch > max_batch");
  images_ = images;
  LayerScope t(prof_, "linear", false);
  dense_.forward(logits_.data(), images, params_.value(w), params_.value(b), B);
  return logits_.data();
}

void Linear::backward(const float* dlogits, int B) {
  LayerScope t(prof_, "linear", true);
  dense_.backward_weights(params_.grad(w), params_.grad(b), dlogits, images_, B);
}

std::string Linear::first_non_finite_layer(int B) const {
  return all_finite(logits_.data(), size_t(B) * classes_) ? "" : "linear";
}

std::vector<LayerInfo> Linear::layers(int B) const {
  return {{"linear", 2.0 * B * pixels_ * classes_, 2.0 * B * pixels_ * classes_}};
}

// ---- its registry entry ----

namespace {

// The yardsticks read no option: their plan is the shape alone.
struct Nn1Plan final : ModelPlan {
  ImageShape shape;
  explicit Nn1Plan(const ImageShape& shape) : shape(shape) {}
  size_t param_count() const override { return 0; }
  std::unique_ptr<Model> make(int max_batch) const override {
    return std::make_unique<NearestNeighbour>(max_batch, shape);
  }
};

struct LinearPlan final : ModelPlan {
  ImageShape shape;
  explicit LinearPlan(const ImageShape& shape) : shape(shape) {}
  size_t param_count() const override { return shape.pixels() * size_t(shape.classes) + size_t(shape.classes); }
  std::unique_ptr<Model> make(int max_batch) const override {
    return std::make_unique<Linear>(LossConfig{}, max_batch, shape);
  }
};

template <class Plan>
std::unique_ptr<const ModelPlan> shape_plan(const std::string& name, const ModelOptions&, const ImageShape& shape) {
  check_shape(name, shape);
  return std::make_unique<Plan>(shape);
}

}  // namespace

ModelEntry nn1_entry() {
  return {
      .name = "nn1",
      .help = "1-nearest-neighbour on raw pixels (no training): a yardstick",
      .options = {},
      .plan = shape_plan<Nn1Plan>,
      .fit_in_one_pass = true,
  };
}

ModelEntry linear_entry() {
  return {
      .name = "linear",
      .help = "softmax regression on raw pixels (1024 -> 5 at 32 x 32): a yardstick",
      .options = {},
      .plan = shape_plan<LinearPlan>,
  };
}

}  // namespace vg
