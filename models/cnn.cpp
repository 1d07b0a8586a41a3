#include "models/cnn.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vg {

Cnn::Cnn(const CnnConfig& cfg, int max_batch)
    : cfg_(cfg),
      max_batch_(max_batch),
      conv_shape_{cfg.in_channels, 32, 32, cfg.conv_channels, 5, 2, 2},
      conv1_(conv_shape_, /*relu=*/true),
      hidden_(conv_shape_.out_size(), cfg.hidden, /*relu=*/true),
      out_(cfg.hidden, cfg.n_classes, /*relu=*/false) {
  const int C = conv_shape_.out_size(), H = cfg.hidden, K = cfg.n_classes;
  conv_w = params_.add("conv1.weight", conv_shape_.weight_size());
  conv_b = params_.add("conv1.bias", conv_shape_.out_channels);
  hid_w = params_.add("hidden.weight", size_t(C) * H);
  hid_b = params_.add("hidden.bias", H);
  out_w = params_.add("out.weight", size_t(H) * K);
  out_b = params_.add("out.bias", K);
  params_.allocate();
  conv_out_.resize(size_t(max_batch) * C);
  hid_.resize(size_t(max_batch) * H);
  logits_.resize(size_t(max_batch) * K);
}

void Cnn::init(uint64_t seed) {
  // He-normal weights (std sqrt(2 / fan_in)), zero biases.
  auto he = [&](int t, float fan_in) {
    init_normal(params_.value(t), params_.tensor(t).size, std::sqrt(2.f / fan_in), seed,
                params_.tensor(t).name);
  };
  std::fill(params_.values().begin(), params_.values().end(), 0.f);
  he(conv_w, float(conv_shape_.in_channels * conv_shape_.kernel * conv_shape_.kernel));
  he(hid_w, float(conv_shape_.out_size()));
  he(out_w, float(cfg_.hidden));
}

void Cnn::prepare_training(int B) {
  conv1_.prepare_backward(B);
  hidden_.prepare_backward(B);
  out_.prepare_backward(B);
  grow_backward_buffers(B);
}

const float* Cnn::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("Cnn::forward: batch > max_batch");
  images_ = images;
  {
    LayerScope t(prof_, "conv1", false);
    conv1_.forward(conv_out_.data(), images, params_.value(conv_w), params_.value(conv_b), B);
  }
  {
    LayerScope t(prof_, "hidden", false);
    hidden_.forward(hid_.data(), conv_out_.data(), params_.value(hid_w), params_.value(hid_b), B);
  }
  LayerScope t(prof_, "out", false);
  out_.forward(logits_.data(), hid_.data(), params_.value(out_w), params_.value(out_b), B);
  return logits_.data();
}

std::vector<LayerInfo> Cnn::layers(int B) const {
  const double conv = 2.0 * B * conv_shape_.out_size() * conv_shape_.kernel * conv_shape_.kernel *
                      conv_shape_.in_channels;  // backward: the weights' gradient only
  auto dense = [&](double k, double n) { return LayerInfo{"", 2.0 * B * k * n, 4.0 * B * k * n}; };
  LayerInfo hidden = dense(conv_shape_.out_size(), cfg_.hidden), out = dense(cfg_.hidden, cfg_.n_classes);
  hidden.name = "hidden";
  out.name = "out";
  return {{"conv1", conv, conv}, hidden, out};
}

std::string Cnn::first_non_finite_layer(int B) const {
  if (!all_finite(conv_out_.data(), size_t(B) * conv_shape_.out_size())) return "conv1";
  if (!all_finite(hid_.data(), size_t(B) * cfg_.hidden)) return "hidden";
  if (!all_finite(logits_.data(), size_t(B) * cfg_.n_classes)) return "out";
  return "";
}

void Cnn::grow_backward_buffers(int B) {
  grow_to(d_hid_, size_t(B) * cfg_.hidden);
  grow_to(d_conv_, size_t(B) * conv_shape_.out_size());
}

void Cnn::backward(const float* d_logits, int B) {
  grow_backward_buffers(B);
  {
    LayerScope t(prof_, "out", true);
    out_.backward_weights(params_.grad(out_w), params_.grad(out_b), d_logits, hid_.data(), B);
    out_.backward_data(d_hid_.data(), d_logits, params_.value(out_w), B);
  }
  {
    LayerScope t(prof_, "hidden", true);
    relu_backward(d_hid_.data(), hid_.data(), size_t(B) * cfg_.hidden);
    hidden_.prepare_backward(B);
    weight_gradient(hid_w, hid_b, [this, B] {
      hidden_.backward_weights(params_.grad(hid_w), params_.grad(hid_b), d_hid_.data(),
                               conv_out_.data(), B);
    });
    hidden_.backward_data(d_conv_.data(), d_hid_.data(), params_.value(hid_w), B);
    release_offered_weights();  // conv1's backward reads no weights: Adam may start on them
  }
  LayerScope t(prof_, "conv1", true);
  relu_backward(d_conv_.data(), conv_out_.data(), size_t(B) * conv_shape_.out_size());
  conv1_.backward_weights(params_.grad(conv_w), params_.grad(conv_b), d_conv_.data(), images_, B);
}

}  // namespace vg
