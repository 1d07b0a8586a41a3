#include "models/caps_layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
  grow_to(a_logit_, size_t(B) * types_);
}

void DensePrimaryCaps::prepare_backward(int B) {
  dense_.prepare_backward(B);
  grow_to(d_out_, size_t(B) * row());
}

// Row b of the dense output holds T poses (T x 16), then T activation logits.
// Packing the poses in place, rows in order: row b's poses go to b T 16 <= b
// row, below every later row, after its logits have been copied out.
void DensePrimaryCaps::forward(const float* in, const ParamSet& p, int B) {
  dense_.forward(out_.data(), in, p.value(weight), p.value(bias), B);
  const size_t T = size_t(types_), P = T * kPoseDim;
  for (size_t b = 0; b < size_t(B); ++b) {
    std::copy_n(out_.data() + b * row() + P, T, a_logit_.data() + b * T);
    std::memmove(out_.data() + b * P, out_.data() + b * row(), P * sizeof(float));
  }
}

// The reverse, rows in reverse order when in place: row b's poses go from
// b T 16 up to b row, above every earlier row's poses.
void DensePrimaryCaps::split_gradient(const float* d_poses, const float* d_a_logit, int B) {
  grow_to(d_out_, size_t(B) * row());
  const size_t T = size_t(types_), P = T * kPoseDim;
  for (size_t b = size_t(B); b-- > 0;) {
    std::memmove(d_out_.data() + b * row(), d_poses + b * P, P * sizeof(float));
    std::copy_n(d_a_logit + b * T, T, d_out_.data() + b * row() + P);
  }
}

void DensePrimaryCaps::backward_weights(ParamSet& p, const float* in, int B) {
  dense_.backward_weights(p.grad(weight), p.grad(bias), d_out_.data(), in, B);
}

void DensePrimaryCaps::backward_data(float* d_in, const ParamSet& p, int B) {
  dense_.backward_data(d_in, d_out_.data(), p.value(weight), B);
}

size_t DensePrimaryCaps::buffer_bytes() const {
  return (out_.capacity() + a_logit_.capacity() + d_out_.capacity()) * sizeof(float);
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

size_t ClassCaps::buffer_bytes() const {
  return (votes_.capacity() + mu_.capacity() + a_.capacity() + d_votes_.capacity() + coords_.capacity()) *
             sizeof(float) +
         em_.bytes();
}

// ---- ConvCaps --------------------------------------------------------------------

ConvCaps::ConvCaps(const ConvCapsShape& s, const ConvEmConfig& cfg, const ConvVotesKernels& votes_k,
                   const ConvEmRoutingKernels& em_k, ConvCapsScratch* scratch)
    : s_(s), cfg_(cfg), votes_k_(votes_k), em_k_(em_k), scratch_(scratch ? scratch : &own_) {
  if (!s.votes(1).valid()) throw std::invalid_argument("ConvCaps: the window does not fit the input");
  if (s.Co > 64) throw std::invalid_argument("ConvCaps: at most 64 parent types");
}

void ConvCaps::declare(ParamSet& p, const std::string& name) {
  w = p.add(name + ".W", s_.votes(1).w_size());
  beta_a = p.add(name + ".beta_a", s_.Co);
  beta_v = p.add(name + ".beta_v", s_.Co);
}

void ConvCaps::size_for(int B) {
  const size_t parents = size_t(B) * s_.Ho() * s_.Wo() * s_.Co;
  grow_to(scratch_->votes[0], s_.votes(kChunk).v_size());
  grow_to(mu_, parents * kPoseDim);
  grow_to(a_, parents);
  grow_to(z_, parents);
  grow_to(log_a_, parents);
  if (states_.empty()) add_states(1);
}

namespace {
// Moves a fresh state's log R and full-backward scratch into `lent`.
void take_lent(ConvEmState& lent, ConvEmState& fresh) {
  lent.em.log_r.swap(fresh.em.log_r);
  lent.scratch.swap(fresh.scratch);
}
}  // namespace

// A chunk's log R and the full backward's scratch matter only while that
// chunk is routed: the layer holds one of each per slot (lent_) and lends it
// to the chunk's state for the call, so the kept states hold neither.
void ConvCaps::add_states(size_t n) {
  const size_t first = states_.size();
  states_.resize(first + n);
  for (size_t k = first; k < states_.size(); ++k) {
    ConvEmState& st = states_[k];
    st.resize(s_.votes(kChunk), cfg_);
    if (lent_[0].em.log_r.empty()) take_lent(lent_[0], st);
    std::vector<float>().swap(st.em.log_r);
    std::vector<float>().swap(st.scratch);
  }
}

namespace {
// A chunk's full backward puts each M-step's betas' terms in a row of their
// own (dbeta_step); the stop-gradient one adds them in place.
size_t betas_rows(const ConvCapsShape& s, const ConvEmConfig& cfg) {
  return cfg.grad == EmGrad::full ? 2 * size_t(ConvCaps::kChunk) * cfg.iters * s.Ho() * s.Wo() * s.Co : 0;
}
}  // namespace

size_t ConvCaps::slot_floats(const ConvCapsShape& s, const ConvEmConfig& cfg) {
  return ConvEmState::floats(s.votes(kChunk), cfg) + betas_rows(s, cfg);
}

// What the helper's slots need: their own chunk of votes and its gradient,
// routing state, lent buffers and rows of the betas' terms.
void ConvCaps::size_side() {
  const ConvVotesShape v = s_.votes(kChunk);
  const int slots = side_slots(cfg_);
  for (int k = 0; k < slots; ++k) {
    grow_to(scratch_->votes[k], v.v_size());
    grow_to(scratch_->d_votes[k], v.v_size());
    grow_to(rows_[k], betas_rows(s_, cfg_));
  }
  if (states_.size() < size_t(slots)) add_states(slots - states_.size());
  for (int k = 1; k < slots; ++k)
    if (lent_[k].em.log_r.empty()) {
      ConvEmState fresh;
      fresh.resize(v, cfg_);
      take_lent(lent_[k], fresh);
    }
}

namespace {
class Lend {
 public:
  Lend(ConvEmState& st, ConvEmState& lent) : st_(st), lent_(lent) { swap(); }
  ~Lend() { swap(); }
  Lend(const Lend&) = delete;
  Lend& operator=(const Lend&) = delete;

 private:
  void swap() {
    st_.em.log_r.swap(lent_.em.log_r);
    st_.scratch.swap(lent_.scratch);
  }
  ConvEmState &st_, &lent_;
};
}  // namespace

void ConvCaps::prepare_backward(int B) {
  size_for(B);
  grow_to(scratch_->d_votes[0], s_.votes(kChunk).v_size());
  grow_to(d_a_, size_t(B) * s_.Ho() * s_.Wo() * s_.Co);
  const size_t chunks = reroute() ? 1 : size_t(B + kChunk - 1) / kChunk;
  if (states_.size() < chunks) add_states(chunks - states_.size());
  if (reroute()) grow_to(record_, size_t(B) * ConvEmRecord::floats(s_.votes(1), cfg_.iters, cfg_.norm));
  kept_capacity_ = std::max(kept_capacity_, B);
}

namespace {
// 1 - a from a and log a: direct where a <= 1/2, else -expm1(log a), which
// keeps its digits as a nears 1 (where 1 - a would round to 0 early).
inline float one_minus(float a, float log_a) { return a <= 0.5f ? 1.f - a : -std::expm1(log_a); }

// The time of a layer's parts summed over its chunks, recorded as one call
// per part (the profile's FLOPs are per call of the whole batch), end to end
// from the layer's start.
class PartTimes {
 public:
  explicit PartTimes(LayerProfiler* prof) : prof_(prof) {
    if (prof_) t0_ = LayerProfiler::Clock::now();
  }
  // Adds the time since the last mark (or the start) to part k.
  void mark(int k) {
    if (!prof_) return;
    const auto t = LayerProfiler::Clock::now();
    sum_[k] += t - last();
    last_ = t;
  }
  void record(const char* name0, const char* name1, bool backward) const {
    if (!prof_) return;
    prof_->record(name0, backward, t0_, t0_ + sum_[0]);
    prof_->record(name1, backward, t0_ + sum_[0], t0_ + sum_[0] + sum_[1]);
  }

 private:
  LayerProfiler::Clock::time_point last() const { return last_ == LayerProfiler::Clock::time_point{} ? t0_ : last_; }
  LayerProfiler* prof_;
  LayerProfiler::Clock::time_point t0_{}, last_{};
  LayerProfiler::Clock::duration sum_[2]{};
};
}  // namespace

void ConvCaps::forward(const float* poses, const float* a_logit, const ParamSet& p, int B, LayerProfiler* prof,
                       const char* votes_name, const char* routing_name, StepHelper* helper) {
  size_for(B);  // sizes nothing once a forward of B has run
  poses_ = poses;
  a_in_ = a_logit;
  const bool keep = B <= kept_capacity_;  // the outputs, and (stop-gradient) the routing state per chunk
  kept_ = 0;  // until the last chunk is routed
  const size_t children = size_t(s_.H) * s_.W * s_.Ci, parents = size_t(s_.Ho()) * s_.Wo() * s_.Co;
  // A batch no backward follows routes without keeping anything for one (the
  // gradient scheme changes no arithmetic of the forward).
  ConvEmConfig cfg = cfg_;
  if (!keep) cfg.grad = EmGrad::stopgrad;
  // The profile times each part on this thread (PartTimes is this thread's).
  if (prof) helper = nullptr;
  if (helper) size_side();
  PartTimes t(prof);
  // Chunks are independent (no window crosses an image): either thread routes
  // any of them with the same arithmetic, in its slot's buffers.
  for_items(side_, helper, (B + kChunk - 1) / kChunk, [&](int c, int slot) {
    const int b0 = c * kChunk, n = std::min(kChunk, B - b0);
    const ConvVotesShape v = s_.votes(n);
    float* V = scratch_->votes[slot].data();
    ConvEmState& st = states_[keep && !reroute() ? size_t(c) : size_t(slot)];
    const Lend lend(st, lent_[slot]);
    votes_k_.forward(V, poses + b0 * children * kPoseDim, p.value(w), nullptr, v);
    t.mark(0);
    const size_t o = b0 * parents;
    ConvEmRecord rec;  // under EmGrad::full, what the backward's history is rebuilt from
    if (keep && reroute()) rec.record = record_.data() + b0 * ConvEmRecord::floats(s_.votes(1), cfg_.iters, cfg_.norm);
    conv_em_routing_forward(mu_.data() + o * kPoseDim, a_.data() + o, st, V, a_logit + b0 * children,
                            p.value(beta_a), p.value(beta_v), v, cfg, em_k_, rec);
    // logit(a) = log a - log(1 - a); the routing's last M-step left log a.
    std::copy_n(st.em.log_a_out.begin(), n * parents, log_a_.begin() + std::ptrdiff_t(o));
    for (size_t k = o; k < o + n * parents; ++k) {
      const float q = one_minus(a_[k], log_a_[k]);
      z_[k] = q > 0.f ? std::clamp(log_a_[k] - std::log(q), -kMaxLogit, kMaxLogit) : kMaxLogit;
    }
    t.mark(1);
  });
  if (keep) kept_ = B;
  t.record(votes_name, routing_name, false);
}

void ConvCaps::backward(float* d_poses, float* d_a_logit, const float* d_mu, const float* d_a_logit_out, ParamSet& p,
                        int B, LayerProfiler* prof, const char* votes_name, const char* routing_name,
                        StepHelper* helper) {
  prepare_backward(B);  // sizes nothing once a backward of B has run
  if (prof) helper = nullptr;
  if (kept_ != B) forward(poses_, a_in_, p, B, nullptr, "votes", "em_routing", helper);
  if (helper) size_side();
  const size_t children = size_t(s_.H) * s_.W * s_.Ci, parents = size_t(s_.Ho()) * s_.Wo() * s_.Co;
  PartTimes t(prof);
  // da = dz / (a (1 - a)); the routing's backward multiplies by a (1 - a)
  // again, so dz comes through. Inside the clamp a (1 - a) >= 4e-18, so the
  // quotient stays finite; at the clamp no gradient passes.
  for (size_t k = 0, N = size_t(B) * parents; k < N; ++k) {
    const float slope = a_[k] * one_minus(a_[k], log_a_[k]);
    d_a_[k] = std::fabs(z_[k]) < kMaxLogit ? d_a_logit_out[k] / slope : 0.f;
  }
  std::fill_n(p.grad(beta_a), s_.Co, 0.f);
  std::fill_n(p.grad(beta_v), s_.Co, 0.f);
  std::fill_n(d_a_logit, size_t(B) * children, 0.f);
  t.mark(1);
  std::fill_n(p.grad(w), s_.votes(1).w_size(), 0.f);
  std::fill_n(d_poses, size_t(B) * children * kPoseDim, 0.f);
  // A chunk's votes (recomputed: the same bits as the forward's) and, under
  // EmGrad::full, its routing history, rebuilt from the forward's record (mu
  // and a get the same bits), in a slot's buffers.
  auto votes_and_history = [&](int c, int slot) {
    const int b0 = c * kChunk, n = std::min(kChunk, B - b0);
    const ConvVotesShape v = s_.votes(n);
    float* V = scratch_->votes[slot].data();
    votes_k_.forward(V, poses_ + b0 * children * kPoseDim, p.value(w), nullptr, v);
    t.mark(0);
    if (!reroute()) return;
    const size_t o = b0 * parents;
    ConvEmState& st = states_[size_t(slot)];
    const Lend lend(st, lent_[slot]);
    ConvEmRecord rec;
    rec.replay = record_.data() + b0 * ConvEmRecord::floats(s_.votes(1), cfg_.iters, cfg_.norm);
    conv_em_routing_forward(mu_.data() + o * kPoseDim, a_.data() + o, st, V, a_in_ + b0 * children, p.value(beta_a),
                            p.value(beta_v), v, cfg_, em_k_, rec);
    t.mark(1);
  };
  // The chunk's routing backward into its slot's dV. The betas' terms go to
  // the gradients, or (rows) to the slot's rows, for the calling thread to
  // add in batch order (conv_em_routing.h's dbeta_step).
  auto route_back = [&](int c, int slot, bool rows) {
    const int b0 = c * kChunk, n = std::min(kChunk, B - b0);
    const ConvVotesShape v = s_.votes(n);
    const size_t o = b0 * parents;
    float* dV = scratch_->d_votes[slot].data();
    std::fill_n(dV, v.v_size(), 0.f);
    float *dba = p.grad(beta_a), *dbv = p.grad(beta_v);
    if (rows) {
      dba = rows_[slot].data();
      dbv = dba + rows_[slot].size() / 2;
      std::fill(rows_[slot].begin(), rows_[slot].end(), -0.f);
    }
    ConvEmState& st = states_[reroute() ? size_t(slot) : size_t(c)];
    const Lend lend(st, lent_[slot]);
    conv_em_routing_backward(dV, d_a_logit + b0 * children, dba, dbv, rows ? size_t(s_.Co) : 0, d_mu + o * kPoseDim,
                             d_a_.data() + o, scratch_->votes[slot].data(), mu_.data() + o * kPoseDim, a_.data() + o,
                             st, v, cfg_, em_k_);
    t.mark(1);
  };
  // dW (and d_poses) from the slot's dV: chunk by chunk in batch order on
  // this thread, so dW takes its terms in the order one whole-batch call
  // would add them.
  auto votes_back = [&](int c, int slot) {
    const int b0 = c * kChunk, n = std::min(kChunk, B - b0);
    votes_k_.backward(d_poses + b0 * children * kPoseDim, p.grad(w), scratch_->d_votes[slot].data(),
                      poses_ + b0 * children * kPoseDim, p.value(w), s_.votes(n));
    t.mark(0);
  };
  auto add_rows = [&](int slot) {
    const size_t J = size_t(s_.Co), half = rows_[slot].size() / 2;
    const float* r = rows_[slot].data();
    float *dba = p.grad(beta_a), *dbv = p.grad(beta_v);
    for (size_t k = 0; k < half; k += J)
      for (size_t j = 0; j < J; ++j) dba[j] += r[k + j], dbv[j] += r[half + k + j];
  };
  const int chunks = (B + kChunk - 1) / kChunk;
  if (!helper) {
    for (int c = 0; c < chunks; ++c) votes_and_history(c, 0), route_back(c, 0, false), votes_back(c, 0);
  } else if (reroute()) {
    // Either thread differentiates a chunk's routing (the step's bulk); this one adds the betas' rows and dW in order.
    prepared_in_order<kSideSlots>(
        side_, helper, chunks, [&](int c, int slot) { votes_and_history(c, slot), route_back(c, slot, true); },
        [&](int c, int slot) { add_rows(slot), votes_back(c, slot); });
  } else {
    // The stop-gradient routing backward adds the betas' terms in place: in order, on this thread.
    prepared_in_order<2>(side_, helper, chunks, votes_and_history,
                         [&](int c, int slot) { route_back(c, slot, false), votes_back(c, slot); });
  }
  t.record(votes_name, routing_name, true);
}

size_t ConvCaps::buffer_bytes() const {
  size_t n = (mu_.capacity() + a_.capacity() + z_.capacity() + log_a_.capacity() + d_a_.capacity() +
              record_.capacity()) * sizeof(float);
  for (const std::vector<float>& r : rows_) n += r.capacity() * sizeof(float);
  if (scratch_ == &own_) n += own_.bytes();
  for (const ConvEmState& st : states_) n += st.bytes();
  for (const ConvEmState& l : lent_) n += (l.em.log_r.capacity() + l.scratch.capacity()) * sizeof(float);
  return n;
}

LayerInfo ConvCaps::votes_info(int B, const char* name) const {
  // Backward recomputes the votes before it differentiates them.
  return {name, conv_votes_forward_flops(s_.votes(B)),
          conv_votes_forward_flops(s_.votes(B)) + conv_votes_backward_flops(s_.votes(B))};
}

LayerInfo ConvCaps::routing_info(int B, const char* name) const {
  const ConvVotesShape v = s_.votes(B);
  // The full backward first rebuilds each chunk's history from the forward's
  // record (reroute()).
  return {name, conv_em_routing_forward_flops(v, cfg_.iters),
          reroute() ? conv_em_routing_replay_flops(v, cfg_.iters) + conv_em_routing_backward_full_flops(v, cfg_.iters)
                    : conv_em_routing_backward_flops(v)};
}

}  // namespace vg
