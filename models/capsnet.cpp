#include "models/capsnet.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vg {

namespace {
template <typename K>
const K& kernels_for(const std::optional<Isa>& isa, const K* (*lookup)(Isa), const K& chosen) {
  if (!isa) return chosen;
  const K* k = lookup(*isa);
  if (k == nullptr) throw std::invalid_argument(std::string("CapsNet: no ") + isa_name(*isa) + " kernels in this build");
  return *k;
}
}  // namespace

CapsNet::CapsNet(const CapsConfig& cfg, int max_batch)
    : Model(cfg.loss),
      cfg_(cfg),
      max_batch_(max_batch),
      conv_shape_{cfg.in_channels, 32, 32, cfg.conv_channels, 5, 2, 2},
      conv1_(conv_shape_, /*relu=*/true),
      primary_(conv_shape_.out_size(), cfg.n_primary * (kPoseDim + 1), /*relu=*/false),
      pose_k_(kernels_for(cfg.isa, pose_matmul_for, pose_matmul())),
      em_k_(kernels_for(cfg.isa, em_routing_for, em_routing_kernels())) {
  const int C = conv_shape_.out_size(), P = cfg.n_primary, J = cfg.n_classes;
  if (J > 64) throw std::invalid_argument("CapsNet: at most 64 class capsules");
  conv_w = params_.add("conv1.weight", conv_shape_.weight_size());
  conv_b = params_.add("conv1.bias", conv_shape_.out_channels);
  prim_w = params_.add("primary.weight", size_t(C) * P * (kPoseDim + 1));
  prim_b = params_.add("primary.bias", P * (kPoseDim + 1));
  route_w = params_.add("class.W", size_t(P) * J * kPoseDim);
  beta_a = params_.add("class.beta_a", J);
  beta_v = params_.add("class.beta_v", J);
  params_.allocate();

  const size_t B = max_batch;
  conv_out_.resize(B * C);
  prim_.resize(B * P * (kPoseDim + 1));
  poses_.resize(B * P * kPoseDim);
  a_in_logit_.resize(B * P);
  votes_.resize(B * P * J * kPoseDim);
  mu_.resize(B * J * kPoseDim);
  a_.resize(B * J);
  logits_.resize(B * J);
  em_.resize(max_batch, P, J, cfg.em);  // with --em-grad full, every iteration's state too
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

// Primary capsules: row b of prim holds 8 poses (8 x 16) then 8 activation logits.
static void primary_split(float* poses, float* a_logit, const float* prim, int B, int P) {
  const int row = P * (kPoseDim + 1);
  for (int b = 0; b < B; ++b) {
    std::copy_n(prim + size_t(b) * row, P * kPoseDim, poses + size_t(b) * P * kPoseDim);
    std::copy_n(prim + size_t(b) * row + P * kPoseDim, P, a_logit + size_t(b) * P);
  }
}
// The activation logits' gradient is 0 with the seed's stop-gradient routing
// and flows from every EM iteration with --em-grad full.
static void primary_split_backward(float* d_prim, const float* d_poses, const float* d_a_logit,
                                   int B, int P) {
  const int row = P * (kPoseDim + 1);
  for (int b = 0; b < B; ++b) {
    std::copy_n(d_poses + size_t(b) * P * kPoseDim, P * kPoseDim, d_prim + size_t(b) * row);
    std::copy_n(d_a_logit + size_t(b) * P, P, d_prim + size_t(b) * row + P * kPoseDim);
  }
}

// logits_j = |mu_j|^2 / 16 + 4 (a_j - 0.5)
static void caps_logits_forward(float* logits, const float* mu, const float* a, int B, int J) {
  for (int n = 0; n < B * J; ++n) {
    float s = 0.f;
    for (int h = 0; h < kPoseDim; ++h) s += mu[size_t(n) * kPoseDim + h] * mu[size_t(n) * kPoseDim + h];
    logits[n] = s / kPoseDim + 4.f * (a[n] - 0.5f);
  }
}
static void caps_logits_backward(float* d_mu, float* d_a, const float* d_logits, const float* mu,
                                 int B, int J) {
  for (int n = 0; n < B * J; ++n) {
    for (int h = 0; h < kPoseDim; ++h)
      d_mu[size_t(n) * kPoseDim + h] = d_logits[n] * 2.f * mu[size_t(n) * kPoseDim + h] / kPoseDim;
    d_a[n] = 4.f * d_logits[n];
  }
}

void CapsNet::prepare_training(int B) {
  conv1_.prepare_backward(B);
  primary_.prepare_backward(B);
  grow_backward_buffers(B);
}

const float* CapsNet::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("CapsNet::forward: batch > max_batch");
  const int P = cfg_.n_primary, J = cfg_.n_classes;
  images_ = images;
  {
    LayerScope t(prof_, "conv1", false);
    conv1_.forward(conv_out_.data(), images, params_.value(conv_w), params_.value(conv_b), B);
  }
  {
    LayerScope t(prof_, "primary", false);
    primary_.forward(prim_.data(), conv_out_.data(), params_.value(prim_w), params_.value(prim_b), B);
    primary_split(poses_.data(), a_in_logit_.data(), prim_.data(), B, P);
  }
  {
    LayerScope t(prof_, "votes", false);
    pose_k_.forward(votes_.data(), poses_.data(), params_.value(route_w), B, P, J);
  }
  {
    LayerScope t(prof_, "em_routing", false);
    em_routing_forward(mu_.data(), a_.data(), em_, votes_.data(), a_in_logit_.data(),
                       params_.value(beta_a), params_.value(beta_v), B, P, J, cfg_.em, em_k_);
  }
  if (loss_.kind != LossKind::xent) return a_.data();  // the paper's scores: the activations
  LayerScope t(prof_, "logits", false);
  caps_logits_forward(logits_.data(), mu_.data(), a_.data(), B, J);
  return logits_.data();
}

std::vector<LayerInfo> CapsNet::layers(int B) const {
  const int P = cfg_.n_primary, J = cfg_.n_classes;
  const double conv = 2.0 * B * conv_shape_.out_size() * conv_shape_.kernel * conv_shape_.kernel *
                      conv_shape_.in_channels;  // backward: the weights' gradient only
  const double dense = 2.0 * B * conv_shape_.out_size() * P * (kPoseDim + 1);
  const double votes = 2.0 * 64 * B * P * J;  // 64 multiply-adds per 4x4 product
  std::vector<LayerInfo> l{{"conv1", conv, conv},
                           {"primary", dense, 2 * dense},  // backward: data and weights
                           {"votes", votes, 2 * votes},
                           {"em_routing", em_routing_forward_flops(B, P, J, cfg_.em.iters),
                            cfg_.em.grad == EmGrad::full ? em_routing_backward_full_flops(B, P, J, cfg_.em.iters)
                                                         : em_routing_backward_flops(B, P, J)}};
  if (loss_.kind == LossKind::xent) l.push_back({"logits", double(B) * J * 19, double(B) * J * 17});
  return l;
}

std::string CapsNet::first_non_finite_layer(int B) const {
  const size_t b = size_t(B);
  if (!all_finite(conv_out_.data(), b * conv_shape_.out_size())) return "conv1";
  if (!all_finite(prim_.data(), b * cfg_.n_primary * (kPoseDim + 1))) return "primary";
  if (!all_finite(votes_.data(), b * cfg_.n_primary * cfg_.n_classes * kPoseDim)) return "votes";
  if (!all_finite(mu_.data(), b * cfg_.n_classes * kPoseDim) ||
      !all_finite(a_.data(), b * cfg_.n_classes)) return "class (EM routing)";
  if (!all_finite(logits_.data(), b * cfg_.n_classes)) return "logits";
  return "";
}

void CapsNet::grow_backward_buffers(int B) {
  const size_t b = size_t(B), P = size_t(cfg_.n_primary), J = size_t(cfg_.n_classes);
  grow_to(d_mu_, b * J * kPoseDim);
  grow_to(d_a_, b * J);
  grow_to(d_votes_, b * P * J * kPoseDim);
  grow_to(d_poses_, b * P * kPoseDim);
  grow_to(d_prim_, b * P * (kPoseDim + 1));
  grow_to(d_conv_, b * conv_shape_.out_size());
  grow_to(d_a_in_logit_, b * P);
}

void CapsNet::backward(const float* dscores, int B) {
  const int P = cfg_.n_primary, J = cfg_.n_classes;
  grow_backward_buffers(B);
  // oneDNN layers overwrite their gradients; the routing ones accumulate.
  for (int k : {route_w, beta_a, beta_v}) std::fill_n(params_.grad(k), params_.tensor(k).size, 0.f);
  if (loss_.kind == LossKind::xent) {
    LayerScope t(prof_, "logits", true);
    caps_logits_backward(d_mu_.data(), d_a_.data(), dscores, mu_.data(), B, J);
  } else {  // the scores are the activations: no gradient reaches the poses directly
    std::copy_n(dscores, size_t(B) * J, d_a_.begin());
    std::fill_n(d_mu_.begin(), size_t(B) * J * kPoseDim, 0.f);
  }
  {
    LayerScope t(prof_, "em_routing", true);
    std::fill_n(d_votes_.begin(), size_t(B) * P * J * kPoseDim, 0.f);
    std::fill_n(d_a_in_logit_.begin(), size_t(B) * P, 0.f);
    em_routing_backward(d_votes_.data(), d_a_in_logit_.data(), params_.grad(beta_a), params_.grad(beta_v), d_mu_.data(),
                        d_a_.data(), votes_.data(), mu_.data(), a_.data(), em_, B, P, J, cfg_.em, em_k_);
  }
  {
    LayerScope t(prof_, "votes", true);
    std::fill_n(d_poses_.begin(), size_t(B) * P * kPoseDim, 0.f);
    pose_k_.backward(d_poses_.data(), params_.grad(route_w), d_votes_.data(), poses_.data(),
                           params_.value(route_w), B, P, J);
  }
  {
    LayerScope t(prof_, "primary", true);
    primary_split_backward(d_prim_.data(), d_poses_.data(), d_a_in_logit_.data(), B, P);
    primary_.prepare_backward(B);
    weight_gradient(prim_w, prim_b, [this, B] {
      primary_.backward_weights(params_.grad(prim_w), params_.grad(prim_b), d_prim_.data(),
                                conv_out_.data(), B);
    });
    primary_.backward_data(d_conv_.data(), d_prim_.data(), params_.value(prim_w), B);
    release_offered_weights();  // conv1's backward reads no weights: Adam may start on them
  }
  LayerScope t(prof_, "conv1", true);
  relu_backward(d_conv_.data(), conv_out_.data(), size_t(B) * conv_shape_.out_size());
  conv1_.backward_weights(params_.grad(conv_w), params_.grad(conv_b), d_conv_.data(), images_, B);
}

}  // namespace vg
