#include "models/dr.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/registry.h"

namespace vg {

namespace {
const DrRoutingKernels& kernels_for(const std::optional<Isa>& isa) {
  if (!isa) return dr_routing_kernels();
  const DrRoutingKernels* k = dr_routing_for(*isa);
  if (k == nullptr) throw std::invalid_argument(std::string("DrNet: no ") + isa_name(*isa) + " kernels in this build");
  return *k;
}

inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
}  // namespace

size_t DrNet::param_count(const DrConfig& c) {
  const ConvShape conv1{c.in_channels, c.image_side, c.image_side, c.conv_channels, 5, 2, 2};
  const size_t conv = size_t(conv1.weight_size()) + size_t(c.conv_channels);
  const size_t in = size_t(conv1.out_size()), prim = size_t(c.n_primary) * kDrInDim;
  size_t n = conv + in * prim + prim + size_t(c.n_primary) * c.n_classes * kDrInDim * kDrOutDim;
  if (c.recon_weight > 0.f) {
    const size_t d0 = size_t(c.n_classes) * kDrOutDim, d1 = c.decoder_hidden1, d2 = c.decoder_hidden2;
    const size_t px = size_t(c.in_channels) * size_t(c.image_side) * size_t(c.image_side);
    n += d0 * d1 + d1 + d1 * d2 + d2 + d2 * px + px;
  }
  return n;
}

DrNet::DrNet(const DrConfig& cfg, int max_batch)
    : Model([] {
        LossConfig l;  // the paper's margin loss on the lengths, always (docs/models.md)
        l.kind = LossKind::margin;
        return l;
      }(),
            cfg.n_classes),
      cfg_(cfg),
      max_batch_(max_batch),
      conv_shape_{cfg.in_channels, cfg.image_side, cfg.image_side, cfg.conv_channels, 5, 2, 2},
      conv1_(conv_shape_, /*relu=*/true),
      primary_(conv_shape_.out_size(), cfg.n_primary * kDrInDim, /*relu=*/false),
      k_(kernels_for(cfg.isa)) {
  if (cfg.iters < 1) throw std::invalid_argument("DrNet: iters must be >= 1");
  if (cfg.n_classes > 64) throw std::invalid_argument("DrNet: at most 64 class capsules");
  if (!(cfg.recon_weight >= 0.f) || !std::isfinite(cfg.recon_weight))
    throw std::invalid_argument("DrNet: recon_weight must be finite and >= 0");
  const int C = conv_shape_.out_size(), I = cfg.n_primary, J = cfg.n_classes;
  conv_w = params_.add("conv1.weight", conv_shape_.weight_size());
  conv_b = params_.add("conv1.bias", conv_shape_.out_channels);
  prim_w = params_.add("primary.weight", size_t(C) * I * kDrInDim);
  prim_b = params_.add("primary.bias", size_t(I) * kDrInDim);
  route_w = params_.add("class.W", size_t(I) * J * kDrInDim * kDrOutDim);
  const size_t B = max_batch;
  if (has_decoder()) {
    const int d0 = J * kDrOutDim, d1 = cfg.decoder_hidden1, d2 = cfg.decoder_hidden2;
    fc1_w = params_.add("decoder.fc1.weight", size_t(d0) * d1);
    fc1_b = params_.add("decoder.fc1.bias", d1);
    fc2_w = params_.add("decoder.fc2.weight", size_t(d1) * d2);
    fc2_b = params_.add("decoder.fc2.bias", d2);
    fc3_w = params_.add("decoder.fc3.weight", size_t(d2) * pixels());
    fc3_b = params_.add("decoder.fc3.bias", pixels());
    fc1_.emplace(d0, d1, /*relu=*/true);
    fc2_.emplace(d1, d2, /*relu=*/true);
    fc3_.emplace(d2, pixels(), /*relu=*/false);
    dec_in_.resize(B * d0);
    h1_.resize(B * d1);
    h2_.resize(B * d2);
    rec_.resize(B * pixels());
    d_rec_.resize(rec_.size());
    one_in_.resize(d0);
    one_h1_.resize(d1);
    one_h2_.resize(d2);
  }
  params_.allocate();
  if (param_count(cfg) != params_.count()) throw std::logic_error("DrNet::param_count disagrees with the model");

  conv_out_.resize(B * C);
  prim_.resize(B * I * kDrInDim);
  u_.resize(prim_.size());
  uhat_.resize(B * I * J * kDrOutDim);
  v_.resize(B * J * kDrOutDim);
  len_.resize(B * J);
  mask_.resize(B);
  st_.resize(max_batch, I, J, cfg.iters);
}

void DrNet::init(uint64_t seed) {
  // He-normal conv and dense weights, N(0, route_init_std^2) routing W, zero biases.
  auto he = [&](int t, float fan_in) {
    init_normal(params_.value(t), params_.tensor(t).size, std::sqrt(2.f / fan_in), seed, params_.tensor(t).name);
  };
  std::fill(params_.values().begin(), params_.values().end(), 0.f);
  he(conv_w, float(conv_shape_.in_channels * conv_shape_.kernel * conv_shape_.kernel));
  he(prim_w, float(conv_shape_.out_size()));
  init_normal(params_.value(route_w), params_.tensor(route_w).size, cfg_.route_init_std, seed,
              params_.tensor(route_w).name);
  if (has_decoder()) {
    he(fc1_w, float(cfg_.n_classes * kDrOutDim));
    he(fc2_w, float(cfg_.decoder_hidden1));
    // The sigmoid layer: Glorot-sized, so the first reconstructions sit near 0.5.
    init_normal(params_.value(fc3_w), params_.tensor(fc3_w).size, std::sqrt(1.f / cfg_.decoder_hidden2), seed,
                params_.tensor(fc3_w).name);
  }
}

// The decoder: input v_j of the masked class only (the others zero), three
// dense layers, a sigmoid; loss w * sum_p (x_hat_p - x_p)^2 averaged over the batch.
static double reconstruction_loss(float* d_rec, const float* rec, const float* images, int B, int pixels, float w) {
  double sse = 0;
  for (size_t p = 0; p < size_t(B) * pixels; ++p) {
    const float e = rec[p] - images[p];
    sse += double(e) * e;
    // through the sigmoid: d x_hat / d z = x_hat (1 - x_hat)
    if (d_rec) d_rec[p] = (2.f * w / float(B)) * e * rec[p] * (1.f - rec[p]);
  }
  return w * sse / B;
}

void DrNet::prepare_training(int B) {
  conv1_.prepare_backward(B);
  primary_.prepare_backward(B);
  for (std::optional<Dense>* fc : {&fc1_, &fc2_, &fc3_})
    if (*fc) (*fc)->prepare_backward(B);
  grow_backward_buffers(B);
}

const float* DrNet::forward(const float* images, int B) {
  if (B > max_batch_) throw std::invalid_argument("DrNet::forward: batch > max_batch");
  const int I = cfg_.n_primary, J = cfg_.n_classes;
  images_ = images;
  {
    LayerScope t(prof_, "conv1", false);
    conv1_.forward(conv_out_.data(), images, params_.value(conv_w), params_.value(conv_b), B);
  }
  {
    LayerScope t(prof_, "primary", false);
    primary_.forward(prim_.data(), conv_out_.data(), params_.value(prim_w), params_.value(prim_b), B);
    dr_squash_forward(u_.data(), prim_.data(), size_t(B) * I, kDrInDim);
  }
  {
    LayerScope t(prof_, "predictions", false);
    k_.predict(uhat_.data(), u_.data(), params_.value(route_w), B, I, J);
  }
  {
    LayerScope t(prof_, "routing", false);
    dr_routing_forward(v_.data(), len_.data(), st_, uhat_.data(), B, I, J, cfg_.iters, k_);
  }
  // A non-finite length must reach the step's loss so the run stops naming the
  // layer: the margin loss's max(0, m - NaN) is 0 and would hide it.
  recon_loss_ = all_finite(len_.data(), size_t(B) * J) ? 0.0 : double(NAN);
  if (!has_decoder() || std::isnan(recon_loss_)) return len_.data();
  LayerScope t(prof_, "decoder", false);
  const int D = J * kDrOutDim;
  std::fill_n(dec_in_.begin(), size_t(B) * D, 0.f);
  for (int b = 0; b < B; ++b) {
    const float* l = len_.data() + size_t(b) * J;
    const int cls = labels_ ? labels_[b] : int(std::max_element(l, l + J) - l);
    if (cls < 0 || cls >= J) throw std::invalid_argument("DrNet: label out of range");
    mask_[b] = cls;
    std::copy_n(v_.data() + (size_t(b) * J + cls) * kDrOutDim, kDrOutDim, dec_in_.data() + size_t(b) * D + cls * kDrOutDim);
  }
  fc1_->forward(h1_.data(), dec_in_.data(), params_.value(fc1_w), params_.value(fc1_b), B);
  fc2_->forward(h2_.data(), h1_.data(), params_.value(fc2_w), params_.value(fc2_b), B);
  fc3_->forward(rec_.data(), h2_.data(), params_.value(fc3_w), params_.value(fc3_b), B);
  for (size_t p = 0; p < size_t(B) * pixels(); ++p) rec_[p] = sigmoid(rec_[p]);
  recon_loss_ = reconstruction_loss(d_rec_.data(), rec_.data(), images, B, pixels(), cfg_.recon_weight);
  return len_.data();
}

bool DrNet::decode(const float* capsule16, int cls, float* out) {
  if (!has_decoder()) return false;
  if (cls < 0 || cls >= cfg_.n_classes) throw std::invalid_argument("DrNet::decode: class out of range");
  std::fill(one_in_.begin(), one_in_.end(), 0.f);
  std::copy_n(capsule16, kDrOutDim, one_in_.data() + cls * kDrOutDim);
  fc1_->forward(one_h1_.data(), one_in_.data(), params_.value(fc1_w), params_.value(fc1_b), 1);
  fc2_->forward(one_h2_.data(), one_h1_.data(), params_.value(fc2_w), params_.value(fc2_b), 1);
  fc3_->forward(out, one_h2_.data(), params_.value(fc3_w), params_.value(fc3_b), 1);
  for (int p = 0; p < pixels(); ++p) out[p] = sigmoid(out[p]);
  return true;
}

void DrNet::grow_backward_buffers(int B) {
  const size_t b = size_t(B), I = size_t(cfg_.n_primary), J = size_t(cfg_.n_classes);
  if (has_decoder()) {
    grow_to(d_h2_, b * cfg_.decoder_hidden2);
    grow_to(d_h1_, b * cfg_.decoder_hidden1);
    grow_to(d_dec_in_, b * J * kDrOutDim);
    grow_to(d_v_, b * J * kDrOutDim);
  }
  grow_to(d_uhat_, b * I * J * kDrOutDim);
  grow_to(d_u_, b * I * kDrInDim);
  grow_to(d_prim_, b * I * kDrInDim);
  grow_to(d_conv_, b * conv_shape_.out_size());
}

void DrNet::backward(const float* dscores, int B) {
  const int I = cfg_.n_primary, J = cfg_.n_classes;
  grow_backward_buffers(B);
  // oneDNN layers overwrite their gradients; the prediction kernel accumulates.
  std::fill_n(params_.grad(route_w), params_.tensor(route_w).size, 0.f);
  const float* dv = nullptr;
  if (has_decoder()) {
    LayerScope t(prof_, "decoder", true);
    const int D = J * kDrOutDim;
    // d_rec_ (the loss's gradient through the sigmoid) was written by forward.
    for (Dense* fc : {&*fc3_, &*fc2_, &*fc1_}) fc->prepare_backward(B);
    weight_gradient(fc3_w, fc3_b, [this, B] {
      fc3_->backward_weights(params_.grad(fc3_w), params_.grad(fc3_b), d_rec_.data(), h2_.data(), B);
    });
    fc3_->backward_data(d_h2_.data(), d_rec_.data(), params_.value(fc3_w), B);
    relu_backward(d_h2_.data(), h2_.data(), size_t(B) * cfg_.decoder_hidden2);
    weight_gradient(fc2_w, fc2_b, [this, B] {
      fc2_->backward_weights(params_.grad(fc2_w), params_.grad(fc2_b), d_h2_.data(), h1_.data(), B);
    });
    fc2_->backward_data(d_h1_.data(), d_h2_.data(), params_.value(fc2_w), B);
    relu_backward(d_h1_.data(), h1_.data(), size_t(B) * cfg_.decoder_hidden1);
    weight_gradient(fc1_w, fc1_b, [this, B] {
      fc1_->backward_weights(params_.grad(fc1_w), params_.grad(fc1_b), d_h1_.data(), dec_in_.data(), B);
    });
    fc1_->backward_data(d_dec_in_.data(), d_h1_.data(), params_.value(fc1_w), B);
    release_offered_weights();  // nothing below reads the decoder's weights
    // The mask passes the gradient of the decoded capsule only.
    std::fill_n(d_v_.begin(), size_t(B) * D, 0.f);
    for (int b = 0; b < B; ++b)
      std::copy_n(d_dec_in_.data() + size_t(b) * D + mask_[b] * kDrOutDim, kDrOutDim,
                  d_v_.data() + size_t(b) * D + mask_[b] * kDrOutDim);
    dv = d_v_.data();
  }
  {
    LayerScope t(prof_, "routing", true);
    std::fill_n(d_uhat_.begin(), size_t(B) * I * J * kDrOutDim, 0.f);
    dr_routing_backward(d_uhat_.data(), dv, dscores, uhat_.data(), st_, B, I, J, cfg_.iters, cfg_.grad, k_);
  }
  {
    LayerScope t(prof_, "predictions", true);
    std::fill_n(d_u_.begin(), size_t(B) * I * kDrInDim, 0.f);
    k_.predict_backward(d_u_.data(), params_.grad(route_w), d_uhat_.data(), u_.data(), params_.value(route_w), B, I, J);
  }
  {
    LayerScope t(prof_, "primary", true);
    dr_squash_backward(d_prim_.data(), d_u_.data(), prim_.data(), size_t(B) * I, kDrInDim);
    primary_.prepare_backward(B);
    weight_gradient(prim_w, prim_b, [this, B] {
      primary_.backward_weights(params_.grad(prim_w), params_.grad(prim_b), d_prim_.data(), conv_out_.data(), B);
    });
    primary_.backward_data(d_conv_.data(), d_prim_.data(), params_.value(prim_w), B);
    release_offered_weights();  // conv1's backward reads no weights: Adam may start on them
  }
  LayerScope t(prof_, "conv1", true);
  relu_backward(d_conv_.data(), conv_out_.data(), size_t(B) * conv_shape_.out_size());
  conv1_.backward_weights(params_.grad(conv_w), params_.grad(conv_b), d_conv_.data(), images_, B);
}

std::vector<LayerInfo> DrNet::layers(int B) const {
  const int I = cfg_.n_primary, J = cfg_.n_classes;
  const double conv = 2.0 * B * conv_shape_.out_size() * conv_shape_.kernel * conv_shape_.kernel *
                      conv_shape_.in_channels;  // backward: the weights' gradient only
  const double dense = 2.0 * B * conv_shape_.out_size() * I * kDrInDim;
  const size_t caps = size_t(B) * I;
  std::vector<LayerInfo> l{
      {"conv1", conv, conv},
      // backward: data and weights, and the squash's backward
      {"primary", dense + dr_squash_flops(caps, kDrInDim), 2 * dense + dr_squash_backward_flops(caps, kDrInDim)},
      {"predictions", dr_predict_flops(B, I, J), 2 * dr_predict_flops(B, I, J)},
      {"routing", dr_routing_forward_flops(B, I, J, cfg_.iters),
       dr_routing_backward_flops(B, I, J, cfg_.iters, cfg_.grad)}};
  if (has_decoder()) {
    const double d0 = J * kDrOutDim, d1 = cfg_.decoder_hidden1, d2 = cfg_.decoder_hidden2;
    const double mm = 2.0 * B * (d0 * d1 + d1 * d2 + d2 * pixels());
    // forward: + sigmoid (exp, add, div) and the squared error (sub, mul, add);
    // backward: data and weights, the loss's gradient (5 per pixel)
    l.push_back({"decoder", mm + 6.0 * B * pixels(), 2 * mm + 5.0 * B * pixels()});
  }
  return l;
}

std::string DrNet::first_non_finite_layer(int B) const {
  const size_t b = size_t(B);
  const int I = cfg_.n_primary, J = cfg_.n_classes;
  // A non-finite image shows in conv1 or only in the reconstruction loss, as
  // the ISA's conv + ReLU passes a NaN on (oneDNN at SSE4.1) or maps it to 0
  // (at AVX-512): either way the message names the input.
  const bool bad_input = !all_finite(images_, b * pixels());
  if (!all_finite(conv_out_.data(), b * conv_shape_.out_size()))
    return bad_input ? "conv1 (non-finite input image)" : "conv1";
  if (!all_finite(u_.data(), b * I * kDrInDim)) return "primary";
  if (!all_finite(uhat_.data(), b * I * J * kDrOutDim)) return "predictions";
  if (!all_finite(v_.data(), b * J * kDrOutDim) || !all_finite(len_.data(), b * J)) return "class (dynamic routing)";
  if (has_decoder() && !all_finite(rec_.data(), b * pixels())) return "decoder";
  if (!std::isfinite(recon_loss_))
    return bad_input ? "reconstruction loss (non-finite input image)" : "decoder (reconstruction loss)";
  return "";
}

// ---- its registry entry ----

namespace {

constexpr ModelOption kDrIters{.name = "dr-iters", .kind = OptionKind::integer, .default_value = "3",
                               .help = "Routing-by-agreement iterations of the model 'dr'", .lo = 1, .hi = 100,
                               .hashed_at_default = HashedAtDefault::always};
constexpr ModelOption kReconWeight{
    .name = "recon-weight", .kind = OptionKind::real, .default_value = "0.0005",
    .help = "Weight of dr's reconstruction loss (sum of squared pixel errors, batch mean); 0: no decoder", .lo = 0,
    .hi = 1e6, .hashed_at_default = HashedAtDefault::always};
constexpr ModelOption kDrGrad{
    .name = "dr-grad", .kind = OptionKind::choice, .default_value = "full",
    .help = "full (backpropagate through every routing iteration) or stopgrad (dr's coupling coefficients constant)",
    .choices = {"full", "stopgrad"}, .hashed_at_default = HashedAtDefault::always};
// Added after sweeps of dr had run at its default: hashed only when set.
constexpr ModelOption kDrInitStd{
    .name = "dr-init-std", .kind = OptionKind::real, .default_value = "0.5",
    .help = "dr: standard deviation of the routing weights W_ij at initialisation (> 0; Sabour et al.'s official code: "
            "0.1, which starts the class capsules short, where the squash is steep)",
    .lo = 0, .hi = 100, .lo_open = true, .hashed_at_default = HashedAtDefault::never};

struct DrPlan final : ModelPlan {
  DrConfig c;
  size_t param_count() const override { return DrNet::param_count(c); }
  std::unique_ptr<Model> make(int max_batch) const override { return std::make_unique<DrNet>(c, max_batch); }
};

// dr trains the margin loss always and reads no --loss (see models/dr.h).
std::unique_ptr<const ModelPlan> dr_plan(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape, 64);
  auto p = std::make_unique<DrPlan>();
  DrConfig& c = p->c;
  c.iters = int(read_integer(opts, kDrIters));
  const double recon = read_real(opts, kReconWeight);
  c.recon_weight = float(recon);
  if (c.recon_weight == 0.f && recon != 0)
    throw ModelOptionError(kReconWeight.name, option_value(opts, kReconWeight), "too small for a float (use 0 for no decoder)");
  c.grad = read_choice(opts, kDrGrad) == "full" ? DrGrad::full : DrGrad::stopgrad;
  c.route_init_std = float(read_real(opts, kDrInitStd));
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  return p;
}

}  // namespace

ModelEntry dr_entry() {
  return {
      .name = "dr",
      .help = "vector capsules with dynamic routing and a reconstruction decoder (Sabour et al. 2017)",
      .options = {&kDrIters, &kReconWeight, &kDrGrad, &kDrInitStd},
      .plan = dr_plan,
      .exact_gradient_options = {{"dr-grad", "full"}},
  };
}

}  // namespace vg
