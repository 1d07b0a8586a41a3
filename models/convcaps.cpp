#include "models/convcaps.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/registry.h"
#include "models/shared_options.h"

namespace vg {

namespace {
constexpr int kRow = kPoseDim + 1;  // a primary capsule's outputs: pose and logit
}  // namespace

size_t ConvCapsConfig::param_count() const {
  const size_t conv1 = size_t(in_channels) * A * 25 + A;
  const size_t primary = size_t(A) * B * kRow + size_t(B) * kRow;
  const size_t caps1 = size_t(K) * K * B * C * kPoseDim + 2 * size_t(C);
  const size_t caps2 = size_t(K) * K * C * D * kPoseDim + 2 * size_t(D);
  const size_t cls = size_t(D) * n_classes * kPoseDim + 2 * size_t(n_classes);
  return conv1 + primary + caps1 + caps2 + cls;
}

size_t ConvCapsConfig::activation_floats() const {
  // Per image, what a training step holds: each layer's output and its
  // gradient, the routing state (log R and the M-step weights per vote-pair;
  // at the class layer with --em-grad full, each iteration's and the full
  // backward's scratch) and, at the class layer, the votes and their
  // gradient. The convolutional layers hold the votes of ConvCaps::kChunk
  // images only (ConvCapsScratch), and under --em-grad full route each chunk
  // again in backward, holding its history alone (a few MB whatever the
  // batch, so not per image), rebuilt from a record kept per image
  // (ConvEmRecord: every M-step's outputs and every E-step's per-child LSE).
  const size_t s0 = size_t(conv1_side()) * conv1_side(), s1 = size_t(caps1_side()) * caps1_side(),
               s2 = size_t(caps2_side()) * caps2_side();
  const bool full = em.grad == EmGrad::full;
  auto routed = [&](size_t windows, size_t I, size_t J, bool dense, size_t record) {
    const size_t per_pair = !full ? 2 : dense ? 3 + 2 * size_t(em.iters) : 0;
    return (dense ? 2 * windows * I * J * kPoseDim : 0) + per_pair * windows * I * J + 4 * windows * J * kPoseDim +
           (full ? record : 0);
  };
  auto record = [&](int side, int Ci, int Co, int stride) {
    return ConvEmRecord::floats(ConvVotesShape::conv(1, side, side, Ci, Co, K, stride), em.iters, em.norm);
  };
  return 4 * s0 * A + 3 * s0 * B * kRow + routed(s1, size_t(K) * K * B, C, false, record(conv1_side(), B, C, 2)) +
         routed(s2, size_t(K) * K * C, D, false, record(caps1_side(), C, D, 1)) +
         routed(1, s2 * D, n_classes, true, 0);
}

size_t ConvCapsConfig::step_floats(int threads) const {
  const size_t slots = threads > 1 ? size_t(ConvCaps::side_slots(em)) : 1;
  const ConvCapsShape l1 = caps1_shape(), l2 = caps2_shape();
  const size_t votes = std::max(l1.votes(ConvCaps::kChunk).v_size(), l2.votes(ConvCaps::kChunk).v_size());
  return slots * (2 * votes + ConvCaps::slot_floats(l1, em) + ConvCaps::slot_floats(l2, em));
}

std::vector<float> ConvCapsNet::class_coords(const ConvCapsConfig& c) {
  const int side = c.caps2_side();
  // The centre pixel of the receptive field: conv1 (5x5/2) centres its
  // output y1 on pixel 2 + 2 y1; a K x K window at stride s over a grid
  // with centres off + step y centres on off + step (s y + (K-1)/2).
  const double off1 = 2, step1 = 2;
  const double off2 = off1 + step1 * (c.K - 1) / 2.0, step2 = step1 * 2;
  const double off3 = off2 + step2 * (c.K - 1) / 2.0, step3 = step2;
  // capsule_em numbers the pixels from -ceil(side / 2) (np.mgrid from
  // -side // 2) and divides by 100: the centre in pixels from the middle.
  const double official_origin = (c.image_side + 1) / 2;  // integer division: ceil(side / 2)
  std::vector<float> coords;
  for (int axis = 0; axis < 2; ++axis)  // rows, then columns (square grids)
    for (int y = 0; y < side; ++y) {
      const double centre = off3 + step3 * y;
      coords.push_back(c.coords == CoordPlace::official ? float((centre - official_origin) / 100)
                                                        : float((centre + 0.5) / c.image_side));
    }
  return coords;
}

EmConfig ConvCapsNet::class_em(const ConvCapsConfig& c) {
  EmConfig em = c.em;
  em.lambda *= c.class_lambda_scale;
  return em;
}

ConvCapsNet::ConvCapsNet(const ConvCapsConfig& cfg, int max_batch)
    : Model(cfg.loss, cfg.n_classes),
      cfg_(cfg),
      max_batch_(max_batch),
      conv_shape_{cfg.in_channels, cfg.image_side, cfg.image_side, cfg.A, 5, 2, 0},
      conv1_(conv_shape_, /*relu=*/true),
      primary_(cfg.A, cfg.B),
      caps1_(cfg.caps1_shape(), cfg.em,
             kernels_for(cfg.isa, conv_votes_for, conv_votes_kernels()),
             kernels_for(cfg.isa, conv_em_routing_for, conv_em_routing_kernels()), &caps_scratch_),
      caps2_(cfg.caps2_shape(), cfg.em,
             kernels_for(cfg.isa, conv_votes_for, conv_votes_kernels()),
             kernels_for(cfg.isa, conv_em_routing_for, conv_em_routing_kernels()), &caps_scratch_),
      class_({cfg.caps2_side(), cfg.caps2_side(), cfg.D, cfg.n_classes, ClassVotes::shared}, class_em(cfg),
             kernels_for(cfg.isa, pose_matmul_for, pose_matmul()),
             kernels_for(cfg.isa, conv_votes_for, conv_votes_kernels()),
             kernels_for(cfg.isa, em_routing_for, em_routing_kernels()), class_coords(cfg), cfg.coords),
      positions_(cfg.conv1_side() * cfg.conv1_side()) {
  conv_w = params_.add("conv1.weight", conv_shape_.weight_size());
  conv_b = params_.add("conv1.bias", conv_shape_.out_channels);
  primary_.declare(params_, "primary");
  caps1_.declare(params_, "convcaps1");
  caps2_.declare(params_, "convcaps2");
  class_.declare(params_, "class");
  params_.allocate();

  conv_out_.resize(size_t(max_batch) * conv_shape_.out_size());
  primary_.size_for(max_batch * positions_);
  caps1_.size_for(max_batch);
  caps2_.size_for(max_batch);
  class_.size_for(max_batch);
  logits_.resize(size_t(max_batch) * cfg.n_classes);
}

void ConvCapsNet::init(uint64_t seed) {
  // He-normal conv1 and primary weights (ReLU before the primary layer), the
  // capsule layers' W from N(0, route_init_std^2) as caps's, zero biases and
  // betas: at the defaults the routing starts with activations spread over
  // (0, 1) (tests/test_convcaps.cpp checks that it neither dies nor saturates).
  std::fill(params_.values().begin(), params_.values().end(), 0.f);
  auto normal = [&](int t, float std) {
    init_normal(params_.value(t), params_.tensor(t).size, std, seed, params_.tensor(t).name);
  };
  normal(conv_w, std::sqrt(2.f / float(cfg_.in_channels * 25)));
  normal(primary_.weight, std::sqrt(2.f / float(cfg_.A)));
  for (int t : {caps1_.w, caps2_.w, class_.w}) normal(t, cfg_.route_init_std);
}

void ConvCapsNet::prepare_training(int B) {
  conv1_.prepare_backward(B);
  primary_.prepare_backward(B * positions_);
  caps1_.prepare_backward(B);
  caps2_.prepare_backward(B);
  class_.prepare_backward(B);
  const size_t b = size_t(B), J = size_t(cfg_.n_classes), s1 = size_t(cfg_.caps1_side()) * cfg_.caps1_side(),
               s2 = size_t(cfg_.caps2_side()) * cfg_.caps2_side();
  grow_to(d_mu_, b * J * kPoseDim);
  grow_to(d_a_, b * J);
  grow_to(d_p2_, b * s2 * cfg_.D * kPoseDim);
  grow_to(d_z2_, b * s2 * cfg_.D);
  grow_to(d_p1_, b * s1 * cfg_.C * kPoseDim);
  grow_to(d_z1_, b * s1 * cfg_.C);
  grow_to(d_z0_, b * positions_ * cfg_.B);
  grow_to(d_conv_, b * conv_shape_.out_size());
}

const float* ConvCapsNet::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("ConvCapsNet::forward: batch > max_batch");
  images_ = images;
  {
    LayerScope t(prof_, "conv1", false);
    conv1_.forward(conv_out_.data(), images, params_.value(conv_w), params_.value(conv_b), B);
  }
  {
    LayerScope t(prof_, "primary", false);  // conv1's output is channel-last: a dense layer per position
    primary_.forward(conv_out_.data(), params_, B * positions_);
  }
  caps1_.forward(primary_.poses(), primary_.a_logit(), params_, B, prof_, "convcaps1.votes", "convcaps1.routing",
                 step_helper());
  caps2_.forward(caps1_.mu(), caps1_.a_logit(), params_, B, prof_, "convcaps2.votes", "convcaps2.routing",
                 step_helper());
  class_.forward(caps2_.mu(), caps2_.a_logit(), params_, B, prof_, "class.votes", "class.routing");
  if (loss_.kind != LossKind::xent) return class_.a();  // the paper's scores: the activations
  LayerScope t(prof_, "logits", false);
  class_logits_forward(logits_.data(), class_.mu(), class_.a(), B, cfg_.n_classes);
  return logits_.data();
}

void ConvCapsNet::backward(const float* dscores, int B) {
  const int J = cfg_.n_classes;
  prepare_training(B);  // sizes nothing once a step of B has run
  if (loss_.kind == LossKind::xent) {
    LayerScope t(prof_, "logits", true);
    class_logits_backward(d_mu_.data(), d_a_.data(), dscores, class_.mu(), B, J);
  } else {
    std::copy_n(dscores, size_t(B) * J, d_a_.begin());
    std::fill_n(d_mu_.begin(), size_t(B) * J * kPoseDim, 0.f);
  }
  class_.backward(d_p2_.data(), d_z2_.data(), d_mu_.data(), d_a_.data(), params_, B, prof_, "class.votes",
                  "class.routing");
  caps2_.backward(d_p1_.data(), d_z1_.data(), d_p2_.data(), d_z2_.data(), params_, B, prof_, "convcaps2.votes",
                  "convcaps2.routing", step_helper());
  caps1_.backward(primary_.d_poses_in_place(), d_z0_.data(), d_p1_.data(), d_z1_.data(), params_, B, prof_,
                  "convcaps1.votes", "convcaps1.routing", step_helper());
  {
    LayerScope t(prof_, "primary", true);
    const int rows = B * positions_;
    primary_.split_gradient(primary_.d_poses_in_place(), d_z0_.data(), rows);
    weight_gradient(primary_.weight, primary_.bias,
                    [this, rows] { primary_.backward_weights(params_, conv_out_.data(), rows); });
    primary_.backward_data(d_conv_.data(), params_, rows);
    release_offered_weights();  // conv1's backward reads no weights
  }
  LayerScope t(prof_, "conv1", true);
  relu_backward(d_conv_.data(), conv_out_.data(), size_t(B) * conv_shape_.out_size());
  conv1_.backward_weights(params_.grad(conv_w), params_.grad(conv_b), d_conv_.data(), images_, B);
}

std::vector<LayerInfo> ConvCapsNet::layers(int B) const {
  const double conv = 2.0 * B * conv_shape_.out_size() * 25 * cfg_.in_channels;  // backward: weights only
  const double dense = 2.0 * B * positions_ * cfg_.A * cfg_.B * kRow;
  std::vector<LayerInfo> l{{"conv1", conv, conv},
                           {"primary", dense, 2 * dense},
                           caps1_.votes_info(B, "convcaps1.votes"),
                           caps1_.routing_info(B, "convcaps1.routing"),
                           caps2_.votes_info(B, "convcaps2.votes"),
                           caps2_.routing_info(B, "convcaps2.routing"),
                           class_.votes_info(B, "class.votes"),
                           class_.routing_info(B, "class.routing")};
  if (loss_.kind == LossKind::xent) l.push_back({"logits", double(B) * cfg_.n_classes * 19, double(B) * cfg_.n_classes * 17});
  return l;
}

size_t ConvCapsNet::buffer_bytes() const {
  size_t floats = conv_out_.capacity() + logits_.capacity();
  for (const std::vector<float>* v : {&d_mu_, &d_a_, &d_p2_, &d_z2_, &d_p1_, &d_z1_, &d_z0_, &d_conv_})
    floats += v->capacity();
  return floats * sizeof(float) + caps_scratch_.bytes() + primary_.buffer_bytes() + caps1_.buffer_bytes() +
         caps2_.buffer_bytes() + class_.buffer_bytes();
}

std::string ConvCapsNet::first_non_finite_layer(int B) const {
  const size_t b = size_t(B), s1 = size_t(cfg_.caps1_side()) * cfg_.caps1_side(),
               s2 = size_t(cfg_.caps2_side()) * cfg_.caps2_side(), J = size_t(cfg_.n_classes);
  if (!all_finite(conv_out_.data(), b * conv_shape_.out_size())) return "conv1";
  if (!all_finite(primary_.poses(), b * positions_ * cfg_.B * kPoseDim) ||
      !all_finite(primary_.a_logit(), b * positions_ * cfg_.B))
    return "primary";
  if (!all_finite(caps1_.mu(), b * s1 * cfg_.C * kPoseDim) || !all_finite(caps1_.a(), b * s1 * cfg_.C))
    return "convcaps1 (EM routing)";
  if (!all_finite(caps2_.mu(), b * s2 * cfg_.D * kPoseDim) || !all_finite(caps2_.a(), b * s2 * cfg_.D))
    return "convcaps2 (EM routing)";
  if (!all_finite(class_.mu(), b * J * kPoseDim) || !all_finite(class_.a(), b * J)) return "class (EM routing)";
  if (loss_.kind == LossKind::xent && !all_finite(logits_.data(), b * J)) return "logits";
  return "";
}

// ---- its registry entry ----

namespace {

constexpr ModelOption kCapsA{.name = "caps-a", .kind = OptionKind::integer, .default_value = "64",
                             .help = "convcaps: conv1's channels A (the paper's small model 64, large 32)", .lo = 1,
                             .hi = 4096};
constexpr ModelOption kCapsB{.name = "caps-b", .kind = OptionKind::integer, .default_value = "8",
                             .help = "convcaps: primary capsule types B", .lo = 1, .hi = 1024};
constexpr ModelOption kCapsC{.name = "caps-c", .kind = OptionKind::integer, .default_value = "16",
                             .help = "convcaps: ConvCaps1 capsule types C (at most 64)", .lo = 1, .hi = 64};
constexpr ModelOption kCapsD{.name = "caps-d", .kind = OptionKind::integer, .default_value = "16",
                             .help = "convcaps: ConvCaps2 capsule types D (at most 64)", .lo = 1, .hi = 64};
// Odd too, and small enough for the input: convcaps_plan judges that.
constexpr ModelOption kCapsK{.name = "caps-k", .kind = OptionKind::integer, .default_value = "3",
                             .help = "convcaps: window K of both convolutional capsule layers (odd)", .lo = 1, .hi = 31};
constexpr ModelOption kEmNorm{
    .name = "em-norm", .kind = OptionKind::choice, .default_value = "paper",
    .help = "convcaps: E-step normalisation of the convolutional layers: paper (over every parent a child feeds) or "
            "official (capsule_em: each parent type on its own)",
    .choices = {"paper", "official"}};
constexpr ModelOption kCoordAdd{
    .name = "coord-add", .kind = OptionKind::choice, .default_value = "paper",
    .help = "convcaps: coordinate addition: paper (receptive-field centre / image side, to pose elements 3 and 7) or "
            "official (capsule_em: that centre in pixels from the image's middle / 100, the column to element 0, the row to 1)",
    .choices = {"paper", "official"}};
constexpr ModelOption kEmLogit{
    .name = "em-logit", .kind = OptionKind::choice, .default_value = "paper",
    .help = "convcaps: EM activation logit: paper (lambda (beta_a - S sum_h (beta_v + ln sigma_h))) or official "
            "(capsule_em: lambda (-S (sum_h ln sigma_h^2 + 16 (ln 2pi + 1) beta_v) - 5000 beta_a))",
    .choices = {"paper", "official"}};
constexpr ModelOption kEmMean{
    .name = "em-mean", .kind = OptionKind::choice, .default_value = "paper",
    .help = "convcaps: EM M-step mean: paper (the R a-weighted mean of the votes) or official (capsule_em: 0.9 of it "
            "+ 0.1 of the previous iteration's, 0 before the first; the variance about that mean)",
    .choices = {"paper", "official"}};
constexpr ModelOption kEmClassLambda{
    .name = "em-class-lambda", .kind = OptionKind::choice, .default_value = "paper",
    .help = "convcaps: the class layer's lambda: paper (the other layers') or official (capsule_em: a quarter of it)",
    .choices = {"paper", "official"}};

struct ConvCapsPlan final : ModelPlan {
  ConvCapsConfig c;
  size_t param_count() const override { return c.param_count(); }
  size_t activation_floats() const override { return c.activation_floats(); }
  size_t step_floats(int threads) const override { return c.step_floats(threads); }
  std::unique_ptr<Model> make(int max_batch) const override { return std::make_unique<ConvCapsNet>(c, max_batch); }
};

// Sizes are validated here, so a network that does not fit its input is
// refused before anything is built: an input too small for conv1 and any
// window is the shape's fault, one too small for the window asked for, --caps-k's.
std::unique_ptr<const ModelPlan> convcaps_plan(const std::string& name, const ModelOptions& opts,
                                               const ImageShape& shape) {
  check_shape(name, shape, 64);
  auto p = std::make_unique<ConvCapsPlan>();
  ConvCapsConfig& c = p->c;
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  c.A = int(read_integer(opts, kCapsA));
  c.B = int(read_integer(opts, kCapsB));
  c.C = int(read_integer(opts, kCapsC));
  c.D = int(read_integer(opts, kCapsD));
  c.K = int(read_integer(opts, kCapsK));
  if (c.K % 2 == 0) throw ModelOptionError(kCapsK.name, option_value(opts, kCapsK), "must be odd (a window has a centre)");
  if (c.conv1_side() < 1)
    throw ShapeError(name, shape, "conv1 (5x5, stride 2, no padding) needs 5 x 5 pixels");
  if (c.caps2_side() < 1)
    throw ModelOptionError(kCapsK.name, option_value(opts, kCapsK),
                           "too large: a " + std::to_string(c.image_side) + "x" + std::to_string(c.image_side) +
                               " input shrinks to " + std::to_string(c.conv1_side()) + " after conv1 and " +
                               std::to_string(c.caps1_side()) + " after ConvCaps1, too small for a " +
                               std::to_string(c.K) + "x" + std::to_string(c.K) + " window");
  static_cast<EmConfig&>(c.em) = em_config(opts);
  c.em.norm = read_choice(opts, kEmNorm) == "official" ? ConvEmNorm::official : ConvEmNorm::paper;
  c.coords = read_choice(opts, kCoordAdd) == "official" ? CoordPlace::official : CoordPlace::paper;
  c.em.logit = read_choice(opts, kEmLogit) == "official" ? EmLogit::official : EmLogit::paper;
  c.em.mean_carry = read_choice(opts, kEmMean) == "official" ? 0.1f : 0.f;
  c.class_lambda_scale = read_choice(opts, kEmClassLambda) == "official" ? 0.25f : 1.f;
  c.loss = loss_config(opts);
  return p;
}

}  // namespace

ModelEntry convcaps_entry() {
  return {
      .name = "convcaps",
      .help = "the paper's capsule network (Hinton, Sabour & Frosst 2018): conv1 5x5/2 A, 1x1 primary capsules B, "
              "ConvCaps K/2 C and K/1 D with EM routing over windows, class capsules with coordinate addition; "
              "67,154 parameters at the defaults and 32 x 32 (68,754 with two input channels)",
      .options = {&kCapsA, &kCapsB, &kCapsC, &kCapsD, &kCapsK, &kEmNorm, &kCoordAdd, &kEmIters, &kEmLambda,
                  &kEmLambdaSchedule, &kEmEps, &kEmMinVar, &kEmCostNorm, &kEmGrad, &kEmLogit, &kEmMean,
                  &kEmClassLambda, &kLoss, &kSpreadMargin, &kSpreadMarginSchedule},
      .plan = convcaps_plan,
      .size_option = &kCapsA,
      // A small network keeps the check fast; the full backward through 2 iterations as caps's.
      .exact_gradient_options = {{"em-grad", "full"}, {"em-iters", "2"}, {"caps-a", "4"}, {"caps-b", "2"},
                                 {"caps-c", "3"}, {"caps-d", "3"}},
      // The paper's recipe (section 3 and its smallNORB runs): spread loss, the
      // gradient through every EM iteration, and the lambda schedule of the
      // official capsule_em code (the paper gives no schedule). docs/models.md.
      .defaults = {{"loss", "spread"}, {"em-grad", "full"}, {"em-lambda-schedule", "official"}},
  };
}

}  // namespace vg
