#include "models/capsnet.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/registry.h"
#include "models/shared_options.h"

namespace vg {


CapsNet::CapsNet(const CapsConfig& cfg, int max_batch)
    : Model(cfg.loss, cfg.n_classes),
      cfg_(cfg),
      max_batch_(max_batch),
      conv_shape_{cfg.in_channels, cfg.image_side, cfg.image_side, cfg.conv_channels, 5, 2, 2},
      conv1_(conv_shape_, /*relu=*/true),
      primary_(conv_shape_.out_size(), cfg.n_primary),
      class_({1, 1, cfg.n_primary, cfg.n_classes, ClassVotes::per_child}, cfg.em,
             kernels_for(cfg.isa, pose_matmul_for, pose_matmul()),
             kernels_for(cfg.isa, conv_votes_for, conv_votes_kernels()),
             kernels_for(cfg.isa, em_routing_for, em_routing_kernels())) {
  conv_w = params_.add("conv1.weight", conv_shape_.weight_size());
  conv_b = params_.add("conv1.bias", conv_shape_.out_channels);
  primary_.declare(params_, "primary");
  class_.declare(params_, "class");
  prim_w = primary_.weight, prim_b = primary_.bias;
  route_w = class_.w, beta_a = class_.beta_a, beta_v = class_.beta_v;
  params_.allocate();

  conv_out_.resize(size_t(max_batch) * conv_shape_.out_size());
  primary_.size_for(max_batch);
  class_.size_for(max_batch);  // with --em-grad full, every iteration's state too
  logits_.resize(size_t(max_batch) * cfg.n_classes);
}

void CapsNet::init(uint64_t seed) {
  // He-normal conv and dense weights, N(0, 0.5^2) routing W, zero biases and betas.
  auto he = [&](int t, float fan_in) {
    init_normal(params_.value(t), params_.tensor(t).size, std::sqrt(2.f / fan_in), seed,
                params_.tensor(t).name);
  };
  std::fill(params_.values().begin(), params_.values().end(), 0.f);
  he(conv_w, float(conv_shape_.in_channels * conv_shape_.kernel * conv_shape_.kernel));
  he(prim_w, float(conv_shape_.out_size()));
  init_normal(params_.value(route_w), params_.tensor(route_w).size, cfg_.route_init_std, seed,
              params_.tensor(route_w).name);
}

void CapsNet::prepare_training(int B) {
  conv1_.prepare_backward(B);
  primary_.prepare_backward(B);
  class_.prepare_backward(B);
  grow_backward_buffers(B);
}

const float* CapsNet::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("CapsNet::forward: batch > max_batch");
  images_ = images;
  {
    LayerScope t(prof_, "conv1", false);
    conv1_.forward(conv_out_.data(), images, params_.value(conv_w), params_.value(conv_b), B);
  }
  {
    LayerScope t(prof_, "primary", false);
    primary_.forward(conv_out_.data(), params_, B);
  }
  class_.forward(primary_.poses(), primary_.a_logit(), params_, B, prof_);
  if (loss_.kind != LossKind::xent) return class_.a();  // the paper's scores: the activations
  LayerScope t(prof_, "logits", false);
  class_logits_forward(logits_.data(), class_.mu(), class_.a(), B, cfg_.n_classes);
  return logits_.data();
}

std::vector<LayerInfo> CapsNet::layers(int B) const {
  const int P = cfg_.n_primary, J = cfg_.n_classes;
  const double conv = 2.0 * B * conv_shape_.out_size() * conv_shape_.kernel * conv_shape_.kernel *
                      conv_shape_.in_channels;  // backward: the weights' gradient only
  const double dense = 2.0 * B * conv_shape_.out_size() * P * (kPoseDim + 1);
  std::vector<LayerInfo> l{{"conv1", conv, conv},
                           {"primary", dense, 2 * dense},  // backward: data and weights
                           class_.votes_info(B), class_.routing_info(B)};
  if (loss_.kind == LossKind::xent) l.push_back({"logits", double(B) * J * 19, double(B) * J * 17});
  return l;
}

std::string CapsNet::first_non_finite_layer(int B) const {
  const size_t b = size_t(B);
  if (!all_finite(conv_out_.data(), b * conv_shape_.out_size())) return "conv1";
  if (!all_finite(primary_.poses(), b * primary_.types() * kPoseDim) ||
      !all_finite(primary_.a_logit(), b * primary_.types()))
    return "primary";
  if (!all_finite(class_.votes(), b * cfg_.n_primary * cfg_.n_classes * kPoseDim)) return "votes";
  if (!all_finite(class_.mu(), b * cfg_.n_classes * kPoseDim) || !all_finite(class_.a(), b * cfg_.n_classes))
    return "class (EM routing)";
  if (!all_finite(logits_.data(), b * cfg_.n_classes)) return "logits";
  return "";
}

void CapsNet::grow_backward_buffers(int B) {
  const size_t b = size_t(B), P = size_t(cfg_.n_primary), J = size_t(cfg_.n_classes);
  grow_to(d_mu_, b * J * kPoseDim);
  grow_to(d_a_, b * J);
  grow_to(d_poses_, b * P * kPoseDim);
  grow_to(d_conv_, b * conv_shape_.out_size());
  grow_to(d_a_in_logit_, b * P);
}

void CapsNet::backward(const float* dscores, int B) {
  const int J = cfg_.n_classes;
  grow_backward_buffers(B);
  if (loss_.kind == LossKind::xent) {
    LayerScope t(prof_, "logits", true);
    class_logits_backward(d_mu_.data(), d_a_.data(), dscores, class_.mu(), B, J);
  } else {  // the scores are the activations: no gradient reaches the poses directly
    std::copy_n(dscores, size_t(B) * J, d_a_.begin());
    std::fill_n(d_mu_.begin(), size_t(B) * J * kPoseDim, 0.f);
  }
  class_.backward(d_poses_.data(), d_a_in_logit_.data(), d_mu_.data(), d_a_.data(), params_, B, prof_);
  {
    LayerScope t(prof_, "primary", true);
    primary_.split_gradient(d_poses_.data(), d_a_in_logit_.data(), B);
    primary_.prepare_backward(B);
    weight_gradient(prim_w, prim_b, [this, B] { primary_.backward_weights(params_, conv_out_.data(), B); });
    primary_.backward_data(d_conv_.data(), params_, B);
    release_offered_weights();  // conv1's backward reads no weights: Adam may start on them
  }
  LayerScope t(prof_, "conv1", true);
  relu_backward(d_conv_.data(), conv_out_.data(), size_t(B) * conv_shape_.out_size());
  conv1_.backward_weights(params_.grad(conv_w), params_.grad(conv_b), d_conv_.data(), images_, B);
}

// ---- its registry entry ----

namespace {

struct CapsPlan final : ModelPlan {
  CapsConfig c;
  size_t param_count() const override {
    const ConvShape conv1{c.in_channels, c.image_side, c.image_side, c.conv_channels, 5, 2, 2};
    const size_t conv = size_t(conv1.weight_size()) + size_t(c.conv_channels);
    const size_t in = size_t(conv1.out_size()), prim = size_t(c.n_primary) * (kPoseDim + 1);
    return conv + in * prim + prim + size_t(c.n_primary) * c.n_classes * kPoseDim + 2 * size_t(c.n_classes);
  }
  std::unique_ptr<Model> make(int max_batch) const override { return std::make_unique<CapsNet>(c, max_batch); }
};

std::unique_ptr<const ModelPlan> caps_plan(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape, 64);
  auto p = std::make_unique<CapsPlan>();
  p->c.em = em_config(opts);
  p->c.loss = loss_config(opts);
  p->c.in_channels = shape.channels;
  p->c.image_side = shape.side;
  p->c.n_classes = shape.classes;
  return p;
}

}  // namespace

ModelEntry caps_entry() {
  return {
      .name = "caps",
      .help = "matrix capsules with EM routing (the seed's)",
      .options = {&kEmIters, &kEmLambda, &kEmLambdaSchedule, &kEmEps, &kEmMinVar, &kEmCostNorm, &kEmGrad, &kLoss,
                  &kSpreadMargin, &kSpreadMarginSchedule},
      .plan = caps_plan,
      // The seed's stop-gradient is not forward's gradient; after 3 full
      // iterations a variance can sit at its floor, where the loss bends on a
      // 1e-4 scale (GradientCheck.CapsNetFullBackprop... checks that case).
      .exact_gradient_options = {{"em-grad", "full"}, {"em-iters", "2"}},
  };
}

}  // namespace vg
