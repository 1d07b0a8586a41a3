#include "models/cnn.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/rng.h"
#include "models/registry.h"

namespace vg {

ConvShape CnnConfig::conv1_shape() const {
  // SAME padding (2 for 5x5) either way; the seed's conv downsamples by its stride, the paper's by pooling.
  return {in_channels, image_side, image_side, conv_channels, 5, is_paper() ? 1 : 2, 2};
}

std::string CnnConfig::shape_problem() const {
  if (in_channels < 1 || image_side < 1 || n_classes < 1) return "a size below 1";
  if (!is_paper()) return "";
  const int c1 = conv1_shape().out_height();
  if (c1 < 2) return "pool1 (2x2) needs 2 x 2 pixels, conv1 gives " + std::to_string(c1);
  const int c2 = conv2_shape().out_height();
  if (c2 < 2) return "pool2 (2x2) needs 2 x 2 pixels, conv2 gives " + std::to_string(c2);
  return "";
}

ConvShape CnnConfig::conv2_shape() const {
  const ConvShape c1 = conv1_shape();
  return {conv_channels, c1.out_height() / 2, c1.out_width() / 2, conv2_channels, 5, 1, 2};
}

size_t CnnConfig::param_count() const {
  const ConvShape c1 = conv1_shape(), c2 = conv2_shape();
  size_t n = size_t(c1.weight_size()) + size_t(c1.out_channels);
  size_t flat = size_t(c1.out_size());
  if (is_paper()) {
    n += size_t(c2.weight_size()) + size_t(c2.out_channels);
    flat = size_t(c2.out_channels) * size_t(c2.out_height() / 2) * size_t(c2.out_width() / 2);
  }
  return n + flat * size_t(hidden) + size_t(hidden) + size_t(hidden) * size_t(n_classes) + size_t(n_classes);
}

size_t CnnConfig::activation_floats() const {
  const ConvShape c1 = conv1_shape(), c2 = conv2_shape();
  size_t outputs = size_t(c1.out_size()) + size_t(hidden) + size_t(n_classes);
  if (is_paper()) outputs += size_t(c2.in_size()) + size_t(c2.out_size()) + size_t(c2.out_size()) / 4;
  return 5 * outputs;
}

void dropout_scales(float* scale, int batch, int units, float rate, uint64_t seed, uint64_t step) {
  // A unit is kept when its 32-bit draw is at least rate * 2^32.
  const uint32_t threshold = uint32_t(std::min(double(rate) * 4294967296.0, 4294967295.0));
  const float keep = 1.f / (1.f - rate);
  for (int b = 0; b < batch; ++b) {
    Stream s(seed, Purpose::Dropout, step, uint64_t(b));
    for (int j = 0; j < units; ++j) scale[size_t(b) * size_t(units) + size_t(j)] = s.next_u32() >= threshold ? keep : 0.f;
  }
}

namespace {
PoolShape pool_after(const ConvShape& c) { return {c.out_channels, c.out_height(), c.out_width(), 2, 2}; }
}  // namespace

Cnn::Cnn(const CnnConfig& cfg, int max_batch)
    : Model(LossConfig{}, cfg.n_classes),
      cfg_(cfg),
      max_batch_(max_batch),
      conv_shape_(cfg.conv1_shape()),
      conv2_shape_(cfg.conv2_shape()),
      flat_(cfg.is_paper() ? pool_after(conv2_shape_).out_size() : conv_shape_.out_size()),
      conv1_(conv_shape_, /*relu=*/true),
      hidden_(flat_, cfg.hidden, /*relu=*/true),
      out_(cfg.hidden, cfg.n_classes, /*relu=*/false) {
  if (cfg.dropout < 0 || cfg.dropout >= 1) throw std::invalid_argument("Cnn: dropout rate outside [0, 1)");
  if (const std::string why = cfg.shape_problem(); !why.empty())
    throw std::invalid_argument("Cnn: a " + std::to_string(cfg.image_side) + "-pixel input: " + why);
  const int C = conv_shape_.out_size(), H = cfg.hidden, K = cfg.n_classes;
  conv_w = params_.add("conv1.weight", conv_shape_.weight_size());
  conv_b = params_.add("conv1.bias", conv_shape_.out_channels);
  if (cfg.is_paper()) {
    conv2_w = params_.add("conv2.weight", conv2_shape_.weight_size());
    conv2_b = params_.add("conv2.bias", conv2_shape_.out_channels);
    pool1_ = std::make_unique<MaxPool2d>(pool_after(conv_shape_));
    conv2_ = std::make_unique<Conv2d>(conv2_shape_, /*relu=*/true, /*src_channel_last=*/true);
    pool2_ = std::make_unique<MaxPool2d>(pool_after(conv2_shape_));
    pool1_out_.resize(size_t(max_batch) * conv2_shape_.in_size());
    conv2_out_.resize(size_t(max_batch) * conv2_shape_.out_size());
    pool2_out_.resize(size_t(max_batch) * flat_);
  }
  hid_w = params_.add("hidden.weight", size_t(flat_) * H);
  hid_b = params_.add("hidden.bias", H);
  out_w = params_.add("out.weight", size_t(H) * K);
  out_b = params_.add("out.bias", K);
  params_.allocate();
  conv_out_.resize(size_t(max_batch) * C);
  hid_.resize(size_t(max_batch) * H);
  logits_.resize(size_t(max_batch) * K);
}

std::string Cnn::name() const {
  if (cfg_.is_paper()) return "cnn-paper";
  return cfg_.hidden == 64 ? "cnn" : "cnn" + std::to_string(cfg_.hidden);
}

void Cnn::init(uint64_t seed) {
  // He-normal weights (std sqrt(2 / fan_in)), zero biases.
  auto he = [&](int t, float fan_in) {
    init_normal(params_.value(t), params_.tensor(t).size, std::sqrt(2.f / fan_in), seed,
                params_.tensor(t).name);
  };
  std::fill(params_.values().begin(), params_.values().end(), 0.f);
  he(conv_w, float(conv_shape_.in_channels * conv_shape_.kernel * conv_shape_.kernel));
  if (cfg_.is_paper()) he(conv2_w, float(conv2_shape_.in_channels * conv2_shape_.kernel * conv2_shape_.kernel));
  he(hid_w, float(flat_));
  he(out_w, float(cfg_.hidden));
  seed_ = seed;
  step_ = 0;
}

void Cnn::set_training_labels(const int* labels) {
  if (labels == nullptr && training_) ++step_;
  training_ = labels != nullptr;
}

void Cnn::restore_training_state(const std::vector<uint64_t>& state) {
  if (state.size() != 2)
    throw std::invalid_argument("cnn: a training state of " + std::to_string(state.size()) + " values, not 2 (seed, step)");
  seed_ = state[0];
  step_ = state[1];
}

void Cnn::prepare_training(int B) {
  conv1_.prepare_backward(B);
  if (cfg_.is_paper()) {
    pool1_->prepare_backward(B);
    conv2_->prepare_backward(B, /*data=*/true);
    pool2_->prepare_backward(B);
  }
  hidden_.prepare_backward(B);
  out_.prepare_backward(B);
  grow_backward_buffers(B);
  if (cfg_.dropout > 0) {  // a training forward's dropout buffers
    grow_to(drop_scale_, size_t(B) * cfg_.hidden);
    grow_to(hid_dropped_, size_t(B) * cfg_.hidden);
  }
}

const float* Cnn::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("Cnn::forward: batch > max_batch");
  images_ = images;
  {
    LayerScope t(prof_, "conv1", false);
    conv1_.forward(conv_out_.data(), images, params_.value(conv_w), params_.value(conv_b), B);
  }
  const float* flat = conv_out_.data();
  if (cfg_.is_paper()) {
    {
      LayerScope t(prof_, "pool1", false);
      pool1_->forward(pool1_out_.data(), conv_out_.data(), B);
    }
    {
      LayerScope t(prof_, "conv2", false);
      conv2_->forward(conv2_out_.data(), pool1_out_.data(), params_.value(conv2_w), params_.value(conv2_b), B);
    }
    LayerScope t(prof_, "pool2", false);
    pool2_->forward(pool2_out_.data(), conv2_out_.data(), B);
    flat = pool2_out_.data();
  }
  {
    LayerScope t(prof_, "hidden", false);
    hidden_.forward(hid_.data(), flat, params_.value(hid_w), params_.value(hid_b), B);
    out_in_ = hid_.data();
    dropped_ = training_ && cfg_.dropout > 0;
    if (dropped_) {
      const size_t n = size_t(B) * cfg_.hidden;
      grow_to(drop_scale_, n);
      grow_to(hid_dropped_, n);
      dropout_scales(drop_scale_.data(), B, cfg_.hidden, cfg_.dropout, seed_, step_);
      for (size_t k = 0; k < n; ++k) hid_dropped_[k] = hid_[k] * drop_scale_[k];
      out_in_ = hid_dropped_.data();
    }
  }
  LayerScope t(prof_, "out", false);
  out_.forward(logits_.data(), out_in_, params_.value(out_w), params_.value(out_b), B);
  return logits_.data();
}

std::vector<LayerInfo> Cnn::layers(int B) const {
  auto conv = [&](const ConvShape& s) {
    return 2.0 * B * s.out_size() * s.kernel * s.kernel * s.in_channels;
  };
  auto dense = [&](double k, double n) { return LayerInfo{"", 2.0 * B * k * n, 4.0 * B * k * n}; };
  LayerInfo hidden = dense(flat_, cfg_.hidden), out = dense(cfg_.hidden, cfg_.n_classes);
  hidden.name = "hidden";
  out.name = "out";
  if (!cfg_.is_paper()) return {{"conv1", conv(conv_shape_), conv(conv_shape_)}, hidden, out};  // backward: the weights' gradient only
  // A max-pool compares each input once forward and routes each output once backward.
  const double p1 = double(B) * conv_shape_.out_size(), p2 = double(B) * conv2_shape_.out_size();
  return {{"conv1", conv(conv_shape_), conv(conv_shape_)}, {"pool1", p1, p1 / 4},
          {"conv2", conv(conv2_shape_), 2 * conv(conv2_shape_)}, {"pool2", p2, p2 / 4}, hidden, out};
}

std::string Cnn::first_non_finite_layer(int B) const {
  if (!all_finite(conv_out_.data(), size_t(B) * conv_shape_.out_size())) return "conv1";
  if (cfg_.is_paper()) {
    if (!all_finite(pool1_out_.data(), size_t(B) * conv2_shape_.in_size())) return "pool1";
    if (!all_finite(conv2_out_.data(), size_t(B) * conv2_shape_.out_size())) return "conv2";
    if (!all_finite(pool2_out_.data(), size_t(B) * flat_)) return "pool2";
  }
  if (!all_finite(hid_.data(), size_t(B) * cfg_.hidden)) return "hidden";
  if (!all_finite(logits_.data(), size_t(B) * cfg_.n_classes)) return "out";
  return "";
}

void Cnn::grow_backward_buffers(int B) {
  grow_to(d_hid_, size_t(B) * cfg_.hidden);
  grow_to(d_conv_, size_t(B) * conv_shape_.out_size());
  if (cfg_.is_paper()) {
    grow_to(d_pool1_, size_t(B) * conv2_shape_.in_size());
    grow_to(d_conv2_, size_t(B) * conv2_shape_.out_size());
    grow_to(d_pool2_, size_t(B) * flat_);
  }
}

void Cnn::backward(const float* d_logits, int B) {
  grow_backward_buffers(B);
  const bool paper = cfg_.is_paper();
  {
    LayerScope t(prof_, "out", true);
    out_.backward_weights(params_.grad(out_w), params_.grad(out_b), d_logits, out_in_, B);
    out_.backward_data(d_hid_.data(), d_logits, params_.value(out_w), B);
  }
  {
    LayerScope t(prof_, "hidden", true);
    if (dropped_)
      for (size_t k = 0; k < size_t(B) * cfg_.hidden; ++k) d_hid_[k] *= drop_scale_[k];
    relu_backward(d_hid_.data(), hid_.data(), size_t(B) * cfg_.hidden);
    hidden_.prepare_backward(B);
    // Two words captured: std::function holds them without allocating.
    weight_gradient(hid_w, hid_b, [this, B] {
      const float* flat = cfg_.is_paper() ? pool2_out_.data() : conv_out_.data();
      hidden_.backward_weights(params_.grad(hid_w), params_.grad(hid_b), d_hid_.data(), flat, B);
    });
    hidden_.backward_data(paper ? d_pool2_.data() : d_conv_.data(), d_hid_.data(), params_.value(hid_w), B);
    release_offered_weights();  // what follows reads none of hidden's weights: Adam may start on them
  }
  if (paper) {
    {
      LayerScope t(prof_, "pool2", true);
      pool2_->backward(d_conv2_.data(), d_pool2_.data(), B);
    }
    {
      LayerScope t(prof_, "conv2", true);
      relu_backward(d_conv2_.data(), conv2_out_.data(), size_t(B) * conv2_shape_.out_size());
      conv2_->prepare_backward(B, /*data=*/true);  // both built: the two may run at once
      weight_gradient(conv2_w, conv2_b, [this, B] {
        conv2_->backward_weights(params_.grad(conv2_w), params_.grad(conv2_b), d_conv2_.data(), pool1_out_.data(), B);
      });
      conv2_->backward_data(d_pool1_.data(), d_conv2_.data(), params_.value(conv2_w), B);
      release_offered_weights();
    }
    LayerScope t(prof_, "pool1", true);
    pool1_->backward(d_conv_.data(), d_pool1_.data(), B);
  }
  LayerScope t(prof_, "conv1", true);
  relu_backward(d_conv_.data(), conv_out_.data(), size_t(B) * conv_shape_.out_size());
  conv1_.backward_weights(params_.grad(conv_w), params_.grad(conv_b), d_conv_.data(), images_, B);
}

// ---- its registry entry ----

namespace {

constexpr ModelOption kCnnHidden{.name = "cnn-hidden", .kind = OptionKind::integer, .default_value = "64",
                                 .help = "Hidden width of the model 'cnn' (136 matches the capsules)", .lo = 1,
                                 .hi = 65536, .hashed_at_default = HashedAtDefault::always};
constexpr ModelOption kDropout{
    .name = "dropout", .kind = OptionKind::real, .default_value = "0.5",
    .help = "Dropout rate of cnn-paper's hidden layer (inverted; a mask per step from the seed; off at evaluation), 0 <= rate < 1",
    .lo = 0, .hi = 1};

struct CnnPlan final : ModelPlan {
  CnnConfig c;
  explicit CnnPlan(const CnnConfig& c) : c(c) {}
  size_t param_count() const override { return c.param_count(); }
  // Measured for the paper's network only; the seed's takes the harness's guess.
  size_t activation_floats() const override { return c.is_paper() ? c.activation_floats() : 0; }
  std::unique_ptr<Model> make(int max_batch) const override { return std::make_unique<Cnn>(c, max_batch); }
};

// "cnn" -> --cnn-hidden; "cnnN" -> N (1..65536, the bound --cnn-hidden has).
std::unique_ptr<const ModelPlan> cnn_plan(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape);
  CnnConfig c;
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  try {
    c.hidden = int(read_integer(name == "cnn" ? opts : ModelOptions{{kCnnHidden.name, name.substr(3)}}, kCnnHidden));
  } catch (const ModelOptionError&) {
    if (name == "cnn") throw;
    throw std::invalid_argument("model '" + name + "': the hidden width after 'cnn' must be a whole number from 1 to 65536");
  }
  return std::make_unique<CnnPlan>(c);
}

std::unique_ptr<const ModelPlan> cnn_paper_plan(const std::string& name, const ModelOptions& opts,
                                                const ImageShape& shape) {
  check_shape(name, shape);
  const float rate = float(read_real(opts, kDropout));
  if (rate >= 1) throw ModelOptionError(kDropout.name, option_value(opts, kDropout), "must be below 1 (1 drops every unit)");
  const CnnConfig c = CnnConfig::paper(shape.channels, rate, shape.side, shape.classes);
  if (const std::string why = c.shape_problem(); !why.empty()) throw ShapeError(name, shape, why);
  return std::make_unique<CnnPlan>(c);
}

}  // namespace

ModelEntry cnn_entry() {
  return {
      .name = "cnnN",
      .help = "CNN baseline; 'cnn' has --cnn-hidden units, 'cnnN' N",
      .options = {&kCnnHidden},
      .plan = cnn_plan,
      .size_option = &kCnnHidden,
  };
}

ModelEntry cnn_paper_entry() {
  return {
      .name = "cnn-paper",
      .help = "the paper's CNN baseline (Hinton, Sabour & Frosst 2018): conv 5x5 32 + 2x2 max-pool, conv 5x5 64 + 2x2 "
              "max-pool, FC 1024 + --dropout, SAME padding (32 -> 16 -> 8 at 32 x 32); 4,252,549 parameters (4,253,349 "
              "with two input channels)",
      .options = {&kDropout},
      .plan = cnn_paper_plan,
  };
}

}  // namespace vg
