// The options more than one model reads: EM routing's (caps, convcaps) and
// the capsule losses'. Each is one flag with one default and one validation
// whichever model reads it, so it is declared once, here, and the entries
// that read it list it (models/registry.h: ModelEntry::options); an option
// one model reads lives in that model's file. A model may still depart from
// the default as its own (ModelEntry::defaults).
#pragma once
#include "kernels/em_routing.h"
#include "models/loss.h"
#include "models/registry.h"

namespace vg {

std::string em_lambda_ignored(const std::string& model, const ModelOptions& opts, const ModelOptions& given);
std::string spread_margin_ignored(const std::string& model, const ModelOptions& opts, const ModelOptions& given);
std::string spread_schedule_ignored(const std::string& model, const ModelOptions& opts, const ModelOptions& given);

inline constexpr ModelOption kEmIters{.name = "em-iters", .kind = OptionKind::integer, .default_value = "3",
                                      .help = "EM routing iterations", .lo = 1, .hi = 100,
                                      .hashed_at_default = HashedAtDefault::always};
inline constexpr ModelOption kEmLambda{
    .name = "em-lambda", .kind = OptionKind::real, .default_value = "1",
    .help = "Inverse temperature of the EM activation (the final one with a schedule)", .lo = 0, .hi = 1e6,
    .lo_open = true, .hashed_at_default = HashedAtDefault::always, .ignored = em_lambda_ignored};
// Its form (fixed, official, official:FINAL) is em_config's to judge.
inline constexpr ModelOption kEmLambdaSchedule{
    .name = "em-lambda-schedule", .kind = OptionKind::choice, .default_value = "fixed",
    .help = "fixed (--em-lambda every iteration) or official[:FINAL]: lambda_i = FINAL (1 - 0.95^(i+1)), FINAL 0.01 by default",
    .hashed_at_default = HashedAtDefault::always};
inline constexpr ModelOption kEmEps{.name = "em-eps", .kind = OptionKind::real, .default_value = "0",
                                    .help = "Added to sum(R a) in the M-step (the seed used 1e-9)", .lo = 0, .hi = 1,
                                    .hashed_at_default = HashedAtDefault::always};
inline constexpr ModelOption kEmMinVar{.name = "em-min-var", .kind = OptionKind::real, .default_value = "1e-6",
                                       .help = "Floor of the EM variances sigma^2", .lo = 0, .hi = 1, .lo_open = true,
                                       .hashed_at_default = HashedAtDefault::always};
inline constexpr ModelOption kEmCostNorm{.name = "em-cost-norm", .kind = OptionKind::choice, .default_value = "off",
                                         .help = "on: Gritzman's cost normalisation (cost / number of children)",
                                         .choices = {"off", "on"}, .hashed_at_default = HashedAtDefault::always};
inline constexpr ModelOption kEmGrad{
    .name = "em-grad", .kind = OptionKind::choice, .default_value = "stopgrad",
    .help = "stopgrad (the seed's) or full (backpropagate through every EM iteration)",
    .choices = {"stopgrad", "full"}, .hashed_at_default = HashedAtDefault::always};
// parse_loss (models/loss.h) judges it.
inline constexpr ModelOption kLoss{
    .name = "loss", .kind = OptionKind::choice, .default_value = "xent",
    .help = "Capsule models' loss: xent (the seed's logits), spread (the paper's, on activations) or margin (Sabour et al.)",
    .hashed_at_default = HashedAtDefault::always};
// A:B, each end in 0..1 and A <= B: loss_config judges it.
inline constexpr ModelOption kSpreadMargin{.name = "spread-margin", .kind = OptionKind::range,
                                           .default_value = "0.2:0.9",
                                           .help = "Spread loss margin A:B, annealed linearly over training",
                                           .hashed_at_default = HashedAtDefault::always,
                                           .ignored = spread_margin_ignored};
inline constexpr ModelOption kSpreadMarginSchedule{
    .name = "spread-margin-schedule", .kind = OptionKind::choice, .default_value = "linear",
    .help = "How the spread margin grows: linear (--spread-margin A to B over the training's steps) or official "
            "(capsule_em: 0.2 + 0.79 sigmoid(min(10, step / 50000 - 4)) of the global step, 0.9 only after ~300k steps)",
    .choices = {"linear", "official"}, .hashed_at_default = HashedAtDefault::never,
    .ignored = spread_schedule_ignored};

// EM routing's options (kEmIters ... kEmGrad, kEmLambdaSchedule) as the kernels take them.
EmConfig em_config(const ModelOptions& opts);
// The loss's options (kLoss, kSpreadMargin, kSpreadMarginSchedule).
LossConfig loss_config(const ModelOptions& opts);

}  // namespace vg
