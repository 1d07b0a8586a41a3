// The capsule layers of a matrix-capsule network (Hinton, Sabour & Frosst
// 2018), each a class with its forward and backward side by side. A capsule
// grid is B x H x W x T capsules of T types: poses B x H x W x T x 16 and
// activation logits B x H x W x T (a dense layer's grid is 1 x 1).
//
// The gradient contract, kept by every layer here: backward OVERWRITES the
// gradients it produces, its parameters' and its input's, as Model::backward
// does for a whole model and oneDNN's backward passes do natively. The pose
// and routing kernels add into their outputs, so a layer zeroes those buffers
// right before its kernel. Why this way round: the oneDNN layers write their
// gradients at no cost, and what a capsule layer zeroes (its transformation
// matrices and betas, and its input's gradient, which the kernel then sweeps
// anyway) is small; accumulating instead would zero every gradient of every
// model once a step, e.g. cnn-paper's 4.2 M floats (17 MB) for nothing.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/conv_em_routing.h"
#include "kernels/conv_votes.h"
#include "kernels/dense.h"
#include "kernels/em_routing.h"
#include "kernels/pose_matmul.h"
#include "models/model.h"
#include "models/side_job.h"

namespace vg {

// The kernel variant for `isa` (tests compare variants in one process), or the
// dispatcher's `chosen` when none is asked for; throws if this build lacks it.
template <typename K>
const K& kernels_for(const std::optional<Isa>& isa, const K* (*lookup)(Isa), const K& chosen) {
  if (!isa) return chosen;
  const K* k = lookup(*isa);
  if (k == nullptr) throw std::invalid_argument(std::string("no ") + isa_name(*isa) + " kernels in this build");
  return *k;
}

// The seed's head for the xent loss: logits_j = |mu_j|^2 / 16 + 4 (a_j - 1/2)
// from class poses (B x J x 16) and activations (B x J); backward overwrites.
void class_logits_forward(float* logits, const float* mu, const float* a, int B, int J);
void class_logits_backward(float* d_mu, float* d_a, const float* d_logits, const float* mu, int B, int J);

// Primary capsules from B x F features by one oneDNN dense layer: T poses
// (B x T x 16) and T activation logits (B x T), read from the layer's one
// output row [T x 16 poses | T logits]. The seed's `caps` (F = 4096, T = 8).
// The poses are packed in place in the dense output, and their gradient is
// spread in place into the dense layer's, so no second copy of either is held
// (6.4 and 3.2 MB at convcaps's evaluation and training batches).
class DensePrimaryCaps {
 public:
  DensePrimaryCaps(int features, int types) : features_(features), types_(types), dense_(features, row(), false) {}
  // Declares "<name>.weight" (F x row) and "<name>.bias" (row).
  void declare(ParamSet& p, const std::string& name);
  int row() const { return types_ * (kPoseDim + 1); }
  int types() const { return types_; }
  void size_for(int B);  // activations for batches up to B
  void prepare_backward(int B);

  // poses(), a_logit() = the capsules of features `in` (B x F, kept for backward).
  void forward(const float* in, const ParamSet& p, int B);
  const float* poses() const { return out_.data(); }  // packed in the dense output
  const float* a_logit() const { return a_logit_.data(); }
  // Backward in two parts, so the model can hand the weight gradient to
  // another core (Model::weight_gradient) while backward_data goes on.
  // Both read d_poses (B x T x 16) and d_a_logit (B x T) through split_gradient.
  // d_poses may be d_poses_in_place() (valid after prepare_backward(B)): the
  // layer above writes the gradient there and split_gradient spreads it in place.
  void split_gradient(const float* d_poses, const float* d_a_logit, int B);
  float* d_poses_in_place() { return d_out_.data(); }
  void backward_weights(ParamSet& p, const float* in, int B);  // overwrites weight, bias grads
  void backward_data(float* d_in, const ParamSet& p, int B);   // overwrites d_in (B x F)
  size_t buffer_bytes() const;  // its own buffers' (the dense layer's oneDNN memory not included)
  int weight = -1, bias = -1;  // tensor indices

 private:
  int features_, types_;
  Dense dense_;
  std::vector<float> out_, a_logit_, d_out_;
};

// How a routing layer's votes use its transformation matrices W.
//   per_child  one W per (child, parent type): the seed's dense class layer,
//              V[b,i,j] = M[b,i] W[i,j] (W: I x J x 16)
//   shared     one W per (child type, parent type) for every position of the
//              child grid, plus coordinate addition: the paper's class
//              capsules (W: T x J x 16)
enum class ClassVotes { per_child, shared };

struct ClassCapsShape {
  int H = 1, W = 1, T = 1;  // the child grid (per_child: 1 x 1 x I)
  int J = 1;                // parent (class) capsules
  ClassVotes votes = ClassVotes::per_child;
  int I() const { return H * W * T; }  // children
  size_t w_size() const { return size_t(votes == ClassVotes::shared ? T : I()) * J * kPoseDim; }
};

// Class capsules: every child votes for every class capsule, then EM
// routing (cfg.iters iterations, dense over all I children) gives each class
// a pose mu (B x J x 16) and an activation a (B x J).
class ClassCaps {
 public:
  // coords (shared votes only, else ignored): the scaled centre of each
  // child's receptive field, H row values then W column values, and where
  // coordinate addition puts them; empty: no coordinate addition.
  ClassCaps(const ClassCapsShape& s, const EmConfig& cfg, const PoseMatmulKernels& pose_k,
            const ConvVotesKernels& votes_k, const EmRoutingKernels& em_k, std::vector<float> coords = {},
            CoordPlace place = CoordPlace::paper);
  // Declares "<name>.W", "<name>.beta_a" and "<name>.beta_v".
  void declare(ParamSet& p, const std::string& name);
  void size_for(int B);  // activations and the routing state for batches up to B
  void prepare_backward(int B);  // the votes' gradient for a backward of B (else backward grows it)

  // Forward from child poses (B x I x 16) and activation logits (B x I);
  // layer names "votes" and "em_routing" for the profiler.
  void forward(const float* poses, const float* a_logit, const ParamSet& p, int B, LayerProfiler* prof,
               const char* votes_name = "votes", const char* routing_name = "em_routing");
  const float* mu() const { return mu_.data(); }
  const float* a() const { return a_.data(); }
  const float* votes() const { return votes_.data(); }
  const EmState& em_state() const { return em_; }
  EmState& em_state() { return em_; }

  // From d_mu (B x J x 16) and d_a (B x J): overwrites the gradients of W,
  // beta_a, beta_v, and d_poses (B x I x 16) and d_a_logit (B x I; zero
  // under stop-gradient routing, which sends the activations none).
  void backward(float* d_poses, float* d_a_logit, const float* d_mu, const float* d_a, ParamSet& p, int B,
                LayerProfiler* prof, const char* votes_name = "votes", const char* routing_name = "em_routing");

  // FLOPs of the two parts at batch B: {votes fwd, bwd}, {routing fwd, bwd}.
  LayerInfo votes_info(int B, const char* name = "votes") const;
  LayerInfo routing_info(int B, const char* name = "em_routing") const;
  const ClassCapsShape& shape() const { return s_; }
  size_t buffer_bytes() const;
  int w = -1, beta_a = -1, beta_v = -1;  // tensor indices

 private:
  ConvVotesShape conv_shape(int B) const { return ConvVotesShape::class_caps(B, s_.H, s_.W, s_.T, s_.J); }
  ClassCapsShape s_;
  EmConfig cfg_;
  const PoseMatmulKernels& pose_k_;
  const ConvVotesKernels& votes_k_;
  const EmRoutingKernels& em_k_;
  std::vector<float> coords_;
  CoordPlace place_;
  const float* poses_ = nullptr;  // input of the last forward (owned by the layer below)
  std::vector<float> votes_, mu_, a_, d_votes_;
  EmState em_;
};

// A convolutional capsule layer (ConvCaps1, ConvCaps2 of the paper): every
// K x K window of a child grid (B x H x W x Ci) votes through one W per
// (kernel position, child type, parent type), then EM routing over the
// windows (kernels/conv_em_routing.h: each child's assignments normalised
// over every parent it feeds, or the official code's per-type
// normalisation) gives the parent grid B x Ho x Wo x Co: poses mu and
// activations a. VALID padding: Ho = (H - K) / stride + 1.
struct ConvCapsShape {
  int H = 1, W = 1, Ci = 1, Co = 1, K = 1, stride = 1;
  ConvVotesShape votes(int B) const { return ConvVotesShape::conv(B, H, W, Ci, Co, K, stride); }
  int Ho() const { return votes(1).Ho(); }
  int Wo() const { return votes(1).Wo(); }
};

// The votes of one chunk of batch items and their gradient: scratch that
// several ConvCaps layers of a model may share (each grows it to its need).
// Slot 0 is the calling thread's; the others are sized only when a training
// step has a helper (ConvCaps's forward and backward hand it chunks).
inline constexpr int kSideSlots = 3;
struct ConvCapsScratch {
  std::vector<float> votes[kSideSlots], d_votes[kSideSlots];
  size_t bytes() const {
    size_t n = 0;
    for (int k = 0; k < kSideSlots; ++k) n += votes[k].capacity() + d_votes[k].capacity();
    return n * sizeof(float);
  }
};

// Memory: the votes are 16 floats per (window, child, parent type), 2.65 MB
// per image at the paper's ConvCaps1, so the layer routes the batch kChunk
// items at a time (routing is per item: no window crosses an image), keeping
// only one chunk's votes, and recomputes them in backward (a 4x4 product, ~5 %
// of a training step at the paper's sizes). What the stop-gradient backward
// needs of the routing (the last M-step's weights) is kept per chunk for the
// training batch (prepare_backward); an evaluation batch larger than that
// routes every chunk through the first chunk's state and keeps none. The full
// backward needs every iteration's state, ~2 MB per image at the paper's
// ConvCaps1 (64 MB a batch of 32 in both layers, which would take a default
// run past 100 MB): under EmGrad::full the backward routes each chunk again,
// keeping its history for that chunk only. That routing is a replay: the
// forward keeps a record of each item's M-step outputs and E-step normalisers
// (ConvEmRecord: 0.37 MB an image in both layers at the paper's sizes, 12 MB a
// batch of 32), from which the likelihoods and the weights rebuild the rest,
// no M-step and no E-step normalisation run.
// Every element sees the arithmetic of one whole-batch call, in the same
// order, so results are bit-identical to routing the batch at once.
class ConvCaps {
 public:
  // Batch items routed at once: 1 is also the fastest (the votes stay in cache;
  // 2 and 4 make a step 1.3x and 2x slower: docs/models.md#convcaps--the-papers-capsule-network).
  static constexpr int kChunk = 1;
  // scratch: shared with other layers (outlives this one), or nullptr for the layer's own.
  ConvCaps(const ConvCapsShape& s, const ConvEmConfig& cfg, const ConvVotesKernels& votes_k,
           const ConvEmRoutingKernels& em_k, ConvCapsScratch* scratch = nullptr);
  ConvCaps(const ConvCaps&) = delete;  // it may point at its own scratch
  ConvCaps& operator=(const ConvCaps&) = delete;
  // Declares "<name>.W" (K x K x Ci x Co x 16), "<name>.beta_a", "<name>.beta_v" (Co each).
  void declare(ParamSet& p, const std::string& name);
  void size_for(int B);          // outputs for batches up to B, one chunk's votes and routing state
  void prepare_backward(int B);  // the routing state kept for a backward of B, the votes' gradient

  // From child poses (B x H x W x Ci x 16) and activation logits (B x H x W x
  // Ci), both kept (by the layer below) until backward.
  // With a helper (Model::step_helper), the other core routes chunks too.
  void forward(const float* poses, const float* a_logit, const ParamSet& p, int B, LayerProfiler* prof,
               const char* votes_name = "votes", const char* routing_name = "em_routing",
               StepHelper* helper = nullptr);
  const float* mu() const { return mu_.data(); }  // B x Ho x Wo x Co x 16
  const float* a() const { return a_.data(); }    // B x Ho x Wo x Co
  const float* log_a() const { return log_a_.data(); }  // B x Ho x Wo x Co, the last M-step's log a
  // The activations as logits (a = sigmoid(a_logit)), what the next capsule
  // layer reads: recovered from the routing's log a without cancellation,
  // clamped to +-kMaxLogit (sigmoid is 1 - 4e-18 there: nothing a float
  // activation can tell apart; the clamp sends no gradient back).
  const float* a_logit() const { return z_.data(); }
  // From d_mu and d_a_logit_out (the gradient of the output logits, as the
  // next layer gives it): overwrites the gradients of W, beta_a, beta_v,
  // d_poses and d_a_logit (the latter zero under stop-gradient routing).
  // After a forward that kept no routing state (a batch larger than the one
  // prepared) it first routes the batch again, keeping it: the same bits.
  // Under EmGrad::full it rebuilds each chunk's routing history from the
  // forward's record just before the chunk's backward. With a helper, the
  // other core recomputes the next chunk's votes (and rebuilds its history)
  // while this one differentiates a chunk, in batch order.
  void backward(float* d_poses, float* d_a_logit, const float* d_mu, const float* d_a_logit_out, ParamSet& p, int B,
                LayerProfiler* prof, const char* votes_name = "votes", const char* routing_name = "em_routing",
                StepHelper* helper = nullptr);
  static constexpr float kMaxLogit = 40.f;
  const ConvCapsShape& shape() const { return s_; }
  LayerInfo votes_info(int B, const char* name) const;
  LayerInfo routing_info(int B, const char* name) const;
  // Bytes of every buffer the layer holds (a shared scratch not included: its owner counts it).
  size_t buffer_bytes() const;
  // The floats one slot of such a layer holds whatever the batch (a memory
  // check before any is allocated): a chunk's routing state and its betas'
  // rows. Not the chunk's votes and their gradient (ConvCapsScratch, which
  // layers may share).
  static size_t slot_floats(const ConvCapsShape& s, const ConvEmConfig& cfg);
  // Slots a step with a helper uses: kSideSlots under EmGrad::full (one chunk
  // being summed, two prepared), two under stop-gradient (one consumed, one
  // prepared; the forward's two threads one each).
  static int side_slots(const ConvEmConfig& cfg) { return cfg.grad == EmGrad::full ? kSideSlots : 2; }
  int w = -1, beta_a = -1, beta_v = -1;

 private:
  ConvCapsShape s_;
  ConvEmConfig cfg_;
  const ConvVotesKernels& votes_k_;
  const ConvEmRoutingKernels& em_k_;
  ConvCapsScratch own_;
  ConvCapsScratch* scratch_;  // &own_ or the model's
  const float *poses_ = nullptr, *a_in_ = nullptr;  // inputs of the last forward (owned by the layer below)
  std::vector<float> mu_, a_, z_, log_a_, d_a_;
  void add_states(size_t n);
  void size_side();
  // Kept per chunk (stop-gradient), or the one state every chunk routes in
  // (EmGrad::full, and an evaluation's chunks).
  bool reroute() const { return cfg_.grad == EmGrad::full; }
  std::vector<ConvEmState> states_;
  ConvEmState lent_[kSideSlots];     // per slot, only its log R and scratch: lent to the chunk being routed
  std::vector<float> rows_[kSideSlots];  // per slot, the betas' terms of a chunk's full backward (dbeta_step)
  SideJob side_;                     // the helper's share of a forward or backward
  std::vector<float> record_;        // EmGrad::full: the kept batch's ConvEmRecord, item by item
  int kept_capacity_ = 0;            // items prepare_backward sized states_ for
  int kept_ = 0;                     // the batch whose routing state states_ holds (0: none)
};

}  // namespace vg
