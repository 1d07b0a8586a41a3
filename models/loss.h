// The loss seam: what a model's scores (B x C) are trained against.
//   xent    softmax cross-entropy on logits (the seed's; every CNN's)
//   spread  spread loss on class activations in (0, 1) (Hinton, Sabour & Frosst
//           2018): sum over wrong classes i of max(0, m - (a_t - a_i))^2, the
//           margin m annealed linearly from 0.2 to 0.9 over training, or on
//           the official code's schedule of the step (SpreadSchedule)
//   margin  margin loss on class scores in [0, 1] (Sabour, Frosst & Hinton 2017):
//           T_k max(0, m+ - s_k)^2 + lambda (1 - T_k) max(0, s_k - m-)^2
// Each is the mean over the batch and writes its exact gradient.
#pragma once
#include <string>

namespace vg {

enum class LossKind { xent, spread, margin };

// How the spread margin grows: linear from spread_from to spread_to over the
// training's steps, or official, capsule_em's (google-research, layers.py:
// optimizer) 0.2 + 0.79 sigmoid(min(10, step / 50000 - 4)) of the global
// step, whatever the training's length (~0.21 at the start, 0.59 at 200k
// steps, 0.9 from ~303k, 0.98 at 400k).
enum class SpreadSchedule { linear, official };

struct LossConfig {
  LossKind kind = LossKind::xent;
  SpreadSchedule spread_schedule = SpreadSchedule::linear;
  float spread_from = 0.2f, spread_to = 0.9f;          // spread margin, start and end of training
  float m_pos = 0.9f, m_neg = 0.1f, m_lambda = 0.5f;   // margin loss
};

const char* loss_name(LossKind kind);
// "xent", "spread" or "margin"; throws std::invalid_argument listing them.
LossKind parse_loss(const std::string& name);
inline constexpr const char* kLossNames = "xent, spread, margin";

// The spread loss's margin at the step that follows `step` steps taken, after
// `progress` of training (0 at the first step, 1 at the last): the linear
// schedule reads progress, the official one the step.
float spread_margin(const LossConfig& cfg, double progress, long step);
// The margin a training of `total_steps` steps ends at: that of its last step.
// The loss rises as the margin grows, so an epoch's loss is also reported at
// this one, where every epoch's is comparable (spread_loss).
float spread_final_margin(const LossConfig& cfg, long total_steps);
// The spread loss's value alone at margin `m`: mean over the batch of `a`
// (B x C) against `labels`, summed in the order loss_forward_backward sums it.
double spread_loss(const float* a, const int* labels, int B, int C, float m);

// Mean loss over the batch of `scores` (B x C, row-major) against `labels`;
// writes dscores = dL/dscores (overwrites). `progress` and `step` as for spread_margin.
double loss_forward_backward(const LossConfig& cfg, float* dscores, const float* scores,
                             const int* labels, int B, int C, double progress, long step);

// Softmax cross-entropy alone: mean over the batch, dlogits = (softmax - onehot) / B.
double softmax_xent(float* dlogits, const float* logits, const int* labels, int B, int C);

}  // namespace vg
