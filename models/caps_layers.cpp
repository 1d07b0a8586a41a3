#include "models/caps_layers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vg {

void class_logits_forward(float* logits, const float* mu, const float* a, int B, int J) {
  for (int n = 0; n < B * J; ++n) {
    float s = 0.f;
    for (int h = 0; h < kPoseDim; ++h) s += mu[size_t(n) * kPoseDim + h] * mu[size_t(n) * kPoseDim + h];
    logits[n] = s / kPoseDim + 4.f * (a[n] - 0.5f);
  }
}

void class_logits_backward(float* d_mu, float* d_a, const float* d_logits, const float* mu, int B, int J) {
  for (int n = 0; n < B * J; ++n) {
    for (int h = 0; h < kPoseDim; ++h)
      d_mu[size_t(n) * kPoseDim + h] = d_logits[n] * 2.f * mu[size_t(n) * kPoseDim + h] / kPoseDim;
    d_a[n] = 4.f * d_logits[n];
  }
}

// ---- DensePrimaryCaps ----------------------------------------------------------

void DensePrimaryCaps::declare(ParamSet& p, const std::string& name) {
  weight = p.add(name + ".weight", size_t(features_) * row());
  bias = p.add(name + ".bias", row());
}

void DensePrimaryCaps::size_for(int B) {
  grow_to(out_, size_t(B) * row());
  grow_to(poses_, size_t(B) * types_ * kPoseDim);
  grow_to(a_logit_, size_t(B) * types_);
}

void DensePrimaryCaps::prepare_backward(int B) {
  dense_.prepare_backward(B);
  grow_to(d_out_, size_t(B) * row());
}

// Row b of the dense output holds T poses (T x 16), then T activation logits.
void DensePrimaryCaps::forward(const float* in, const ParamSet& p, int B) {
  dense_.forward(out_.data(), in, p.value(weight), p.value(bias), B);
  const int T = types_;
  for (int b = 0; b < B; ++b) {
    std::copy_n(out_.data() + size_t(b) * row(), T * kPoseDim, poses_.data() + size_t(b) * T * kPoseDim);
    std::copy_n(out_.data() + size_t(b) * row() + T * kPoseDim, T, a_logit_.data() + size_t(b) * T);
  }
}

void DensePrimaryCaps::split_gradient(const float* d_poses, const float* d_a_logit, int B) {
  grow_to(d_out_, size_t(B) * row());
  const int T = types_;
  for (int b = 0; b < B; ++b) {
    std::copy_n(d_poses + size_t(b) * T * kPoseDim, T * kPoseDim, d_out_.data() + size_t(b) * row());
    std::copy_n(d_a_logit + size_t(b) * T, T, d_out_.data() + size_t(b) * row() + T * kPoseDim);
  }
}

void DensePrimaryCaps::backward_weights(ParamSet& p, const float* in, int B) {
  dense_.backward_weights(p.grad(weight), p.grad(bias), d_out_.data(), in, B);
}

void DensePrimaryCaps::backward_data(float* d_in, const ParamSet& p, int B) {
  dense_.backward_data(d_in, d_out_.data(), p.value(weight), B);
}

// ---- ClassCaps -------------------------------------------------------------------

ClassCaps::ClassCaps(const ClassCapsShape& s, const EmConfig& cfg, const PoseMatmulKernels& pose_k,
                     const ConvVotesKernels& votes_k, const EmRoutingKernels& em_k, std::vector<float> coords,
                     CoordPlace place)
    : s_(s), cfg_(cfg), pose_k_(pose_k), votes_k_(votes_k), em_k_(em_k), coords_(std::move(coords)), place_(place) {
  if (s.J > 64) throw std::invalid_argument("ClassCaps: at most 64 class capsules");
  if (!coords_.empty() && (s.votes != ClassVotes::shared || coords_.size() != size_t(s.H + s.W)))
    throw std::invalid_argument("ClassCaps: coordinate addition needs shared votes and H + W values");
}

void ClassCaps::declare(ParamSet& p, const std::string& name) {
  w = p.add(name + ".W", s_.w_size());
  beta_a = p.add(name + ".beta_a", s_.J);
  beta_v = p.add(name + ".beta_v", s_.J);
}

void ClassCaps::size_for(int B) {
  grow_to(votes_, size_t(B) * s_.I() * s_.J * kPoseDim);
  grow_to(mu_, size_t(B) * s_.J * kPoseDim);
  grow_to(a_, size_t(B) * s_.J);
  em_.resize(B, s_.I(), s_.J, cfg_);  // with --em-grad full, every iteration's state too
}

void ClassCaps::prepare_backward(int B) { grow_to(d_votes_, size_t(B) * s_.I() * s_.J * kPoseDim); }

void ClassCaps::forward(const float* poses, const float* a_logit, const ParamSet& p, int B, LayerProfiler* prof,
                        const char* votes_name, const char* routing_name) {
  const int I = s_.I(), J = s_.J;
  poses_ = poses;
  {
    LayerScope t(prof, votes_name, false);
    if (s_.votes == ClassVotes::per_child) {
      pose_k_.forward(votes_.data(), poses, p.value(w), B, I, J);
    } else {
      const VoteCoords c{coords_.data(), coords_.data() + s_.H, place_};
      votes_k_.forward(votes_.data(), poses, p.value(w), coords_.empty() ? nullptr : &c, conv_shape(B));
    }
  }
  LayerScope t(prof, routing_name, false);
  em_routing_forward(mu_.data(), a_.data(), em_, votes_.data(), a_logit, p.value(beta_a), p.value(beta_v), B, I, J,
                     cfg_, em_k_);
}

void ClassCaps::backward(float* d_poses, float* d_a_logit, const float* d_mu, const float* d_a, ParamSet& p, int B,
                         LayerProfiler* prof, const char* votes_name, const char* routing_name) {
  const int I = s_.I(), J = s_.J;
  prepare_backward(B);
  {
    LayerScope t(prof, routing_name, true);
    std::fill_n(p.grad(beta_a), J, 0.f);
    std::fill_n(p.grad(beta_v), J, 0.f);
    std::fill_n(d_votes_.begin(), size_t(B) * I * J * kPoseDim, 0.f);
    std::fill_n(d_a_logit, size_t(B) * I, 0.f);
    em_routing_backward(d_votes_.data(), d_a_logit, p.grad(beta_a), p.grad(beta_v), d_mu, d_a, votes_.data(),
                        mu_.data(), a_.data(), em_, B, I, J, cfg_, em_k_);
  }
  LayerScope t(prof, votes_name, true);
  std::fill_n(p.grad(w), s_.w_size(), 0.f);
  std::fill_n(d_poses, size_t(B) * I * kPoseDim, 0.f);
  if (s_.votes == ClassVotes::per_child)
    pose_k_.backward(d_poses, p.grad(w), d_votes_.data(), poses_, p.value(w), B, I, J);
  else
    votes_k_.backward(d_poses, p.grad(w), d_votes_.data(), poses_, p.value(w), conv_shape(B));
}

LayerInfo ClassCaps::votes_info(int B, const char* name) const {
  const double v = 2.0 * 64 * B * s_.I() * s_.J;  // 64 multiply-adds per 4x4 product
  const bool coords = s_.votes == ClassVotes::shared && !coords_.empty();
  return {name, v + (coords ? 2.0 * B * s_.I() * s_.J : 0.0), 2 * v};
}

LayerInfo ClassCaps::routing_info(int B, const char* name) const {
  const int I = s_.I(), J = s_.J;
  return {name, em_routing_forward_flops(B, I, J, cfg_.iters),
          cfg_.grad == EmGrad::full ? em_routing_backward_full_flops(B, I, J, cfg_.iters)
                                    : em_routing_backward_flops(B, I, J)};
}

// ---- ConvCaps --------------------------------------------------------------------

ConvCaps::ConvCaps(const ConvCapsShape& s, const ConvEmConfig& cfg, const ConvVotesKernels& votes_k,
                   const ConvEmRoutingKernels& em_k)
    : s_(s), cfg_(cfg), votes_k_(votes_k), em_k_(em_k) {
  if (!s.votes(1).valid()) throw std::invalid_argument("ConvCaps: the window does not fit the input");
  if (s.Co > 64) throw std::invalid_argument("ConvCaps: at most 64 parent types");
}

void ConvCaps::declare(ParamSet& p, const std::string& name) {
  w = p.add(name + ".W", s_.votes(1).w_size());
  beta_a = p.add(name + ".beta_a", s_.Co);
  beta_v = p.add(name + ".beta_v", s_.Co);
}

void ConvCaps::size_for(int B) {
  const ConvVotesShape v = s_.votes(B);
  grow_to(votes_, v.v_size());
  grow_to(mu_, size_t(B) * v.Ho() * v.Wo() * s_.Co * kPoseDim);
  grow_to(a_, size_t(B) * v.Ho() * v.Wo() * s_.Co);
  grow_to(z_, size_t(B) * v.Ho() * v.Wo() * s_.Co);
  st_.resize(v, cfg_);
}

void ConvCaps::prepare_backward(int B) {
  grow_to(d_votes_, s_.votes(B).v_size());
  grow_to(d_a_, size_t(B) * s_.Ho() * s_.Wo() * s_.Co);
}

namespace {
// 1 - a from a and log a: direct where a <= 1/2, else -expm1(log a), which
// keeps its digits as a nears 1 (where 1 - a would round to 0 early).
inline float one_minus(float a, float log_a) { return a <= 0.5f ? 1.f - a : -std::expm1(log_a); }
}  // namespace

void ConvCaps::forward(const float* poses, const float* a_logit, const ParamSet& p, int B, LayerProfiler* prof,
                       const char* votes_name, const char* routing_name) {
  const ConvVotesShape v = s_.votes(B);
  poses_ = poses;
  {
    LayerScope t(prof, votes_name, false);
    votes_k_.forward(votes_.data(), poses, p.value(w), nullptr, v);
  }
  LayerScope t(prof, routing_name, false);
  conv_em_routing_forward(mu_.data(), a_.data(), st_, votes_.data(), a_logit, p.value(beta_a), p.value(beta_v), v,
                          cfg_, em_k_);
  // logit(a) = log a - log(1 - a); the routing's last M-step left log a.
  const float* log_a = st_.em.log_a_out.data();
  for (size_t n = 0, N = size_t(B) * s_.Ho() * s_.Wo() * s_.Co; n < N; ++n) {
    const float q = one_minus(a_[n], log_a[n]);
    z_[n] = q > 0.f ? std::clamp(log_a[n] - std::log(q), -kMaxLogit, kMaxLogit) : kMaxLogit;
  }
}

void ConvCaps::backward(float* d_poses, float* d_a_logit, const float* d_mu, const float* d_a_logit_out, ParamSet& p,
                        int B, LayerProfiler* prof, const char* votes_name, const char* routing_name) {
  const ConvVotesShape v = s_.votes(B);
  prepare_backward(B);
  {
    LayerScope t(prof, routing_name, true);
    // da = dz / (a (1 - a)); the routing's backward multiplies by a (1 - a)
    // again, so dz comes through. Inside the clamp a (1 - a) >= 4e-18, so the
    // quotient stays finite; at the clamp no gradient passes.
    const float* log_a = st_.em.log_a_out.data();
    const float* d_a = d_a_.data();
    for (size_t n = 0, N = size_t(B) * s_.Ho() * s_.Wo() * s_.Co; n < N; ++n) {
      const float slope = a_[n] * one_minus(a_[n], log_a[n]);
      d_a_[n] = std::fabs(z_[n]) < kMaxLogit ? d_a_logit_out[n] / slope : 0.f;
    }
    std::fill_n(p.grad(beta_a), s_.Co, 0.f);
    std::fill_n(p.grad(beta_v), s_.Co, 0.f);
    std::fill_n(d_votes_.begin(), v.v_size(), 0.f);
    std::fill_n(d_a_logit, size_t(B) * s_.H * s_.W * s_.Ci, 0.f);
    conv_em_routing_backward(d_votes_.data(), d_a_logit, p.grad(beta_a), p.grad(beta_v), d_mu, d_a, votes_.data(),
                             mu_.data(), a_.data(), st_, v, cfg_, em_k_);
  }
  LayerScope t(prof, votes_name, true);
  std::fill_n(p.grad(w), v.w_size(), 0.f);
  std::fill_n(d_poses, v.m_size(), 0.f);
  votes_k_.backward(d_poses, p.grad(w), d_votes_.data(), poses_, p.value(w), v);
}

LayerInfo ConvCaps::votes_info(int B, const char* name) const {
  return {name, conv_votes_forward_flops(s_.votes(B)), conv_votes_backward_flops(s_.votes(B))};
}

LayerInfo ConvCaps::routing_info(int B, const char* name) const {
  const ConvVotesShape v = s_.votes(B);
  return {name, conv_em_routing_forward_flops(v, cfg_.iters),
          cfg_.grad == EmGrad::full ? conv_em_routing_backward_full_flops(v, cfg_.iters)
                                    : conv_em_routing_backward_flops(v)};
}

}  // namespace vg
