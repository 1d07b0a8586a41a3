// Dynamic-routing capsule network with a reconstruction decoder (Sabour,
// Frosst & Hinton 2017), sizes at viewgap's default input (1 x 32 x 32, 5
// classes; a side S gives conv1 ceil(S/2) x ceil(S/2), a decoder of C S^2 pixels):
//   conv1        5x5/2 conv, 1 -> 16 channels, ReLU          B x 16 x 16 x 16
//   primary      dense 4096 -> 16 x 8, squash per capsule     u     B x 16 x 8
//   predictions  u_hat_{j|i} = W_ij u_i  (W_ij 16 x 8)        u_hat B x 16 x 5 x 16
//   routing      routing by agreement, `iters` iterations     v     B x 5 x 16
//   scores       lengths |v_j| (trained with the margin loss) B x 5
//   decoder      v masked by the true class (training) or the predicted one
//                (evaluation): FC 80 -> 256, ReLU -> 512, ReLU -> 1024, sigmoid
//                (only when recon_weight > 0; its loss is model_loss()).
// The primary capsules are dense from conv1, as in our EM model (not the
// paper's 9x9 convolutional ones): the same input layer for both capsule
// models, 535k parameters without the decoder (EM: 558k), and 16 input
// capsules, so routing costs a few percent of the step instead of the paper's
// 1152-capsule routing (a convolutional layer here, 9x9 on 16x16, would give
// 512 capsules: 32x the predictions and routing for a comparable size).
#pragma once
#include <optional>

#include "kernels/conv.h"
#include "kernels/dense.h"
#include "kernels/dr_routing.h"
#include "models/model.h"

namespace vg {

struct DrConfig {
  int in_channels = 1;  // input images: in_channels x image_side x image_side; the decoder reconstructs them all
  int image_side = 32;
  int conv_channels = 16;
  int n_primary = 16;
  int n_classes = 5;
  int iters = 3;
  DrGrad grad = DrGrad::full;
  float route_init_std = 0.5f;   // W_ij ~ N(0, std^2)
  // Reconstruction loss: recon_weight * (sum of squared pixel errors), the
  // mean over the batch like the margin loss. 0: no decoder at all.
  float recon_weight = 0.0005f;
  int decoder_hidden1 = 256, decoder_hidden2 = 512;  // half the paper's 512, 1024
  // Kernel variant; default: the dispatcher's (tests compare variants).
  std::optional<Isa> isa;
};

class DrNet final : public Model {
 public:
  DrNet(const DrConfig& cfg, int max_batch);
  std::string name() const override { return "dr"; }
  void init(uint64_t seed) override;
  void prepare_training(int batch) override;
  const float* forward(const float* images, int batch) override;
  void backward(const float* dscores, int batch) override;
  std::string first_non_finite_layer(int batch) const override;
  std::vector<LayerInfo> layers(int batch) const override;
  ClassCapsules class_capsules() const override { return {kDrOutDim, v_.data(), len_.data()}; }
  void set_training_labels(const int* labels) override { labels_ = labels; }
  // The reconstruction term; NaN if the last forward's lengths were not finite.
  double model_loss() const override { return recon_loss_; }
  // The decoder on one 16-D capsule of class `cls` (the others masked out) into
  // out (in_channels x image_side x image_side), as forward decodes the masked class; false without a decoder.
  bool decode(const float* capsule16, int cls, float* out) override;

  // Parameters of a model with `cfg` (the registry's count, without building).
  static size_t param_count(const DrConfig& cfg);
  bool has_decoder() const { return cfg_.recon_weight > 0.f; }
  int pixels() const { return cfg_.in_channels * cfg_.image_side * cfg_.image_side; }  // per image, every channel
  // Read-only views of the last forward (tests, figures).
  const float* primary_capsules() const { return u_.data(); }    // B x I x 8
  const float* predictions() const { return uhat_.data(); }      // B x I x J x 16
  const float* reconstruction() const { return rec_.data(); }    // B x pixels() (with a decoder)
  const int* decoder_classes() const { return mask_.data(); }    // B: the class each reconstruction used
  const DrState& routing_state() const { return st_; }
  const DrConfig& config() const { return cfg_; }
  // Hold the last forward's coupling coefficients fixed (finite-difference
  // checks of --dr-grad stopgrad).
  void freeze_routing(bool frozen) { st_.frozen = frozen; }

  // Tensor indices into params() (the decoder's are -1 without one).
  int conv_w, conv_b, prim_w, prim_b, route_w, fc1_w = -1, fc1_b = -1, fc2_w = -1, fc2_b = -1, fc3_w = -1,
                                                fc3_b = -1;

 private:
  // Sizes the gradient buffers for a backward of B images (backward and prepare_training).
  void grow_backward_buffers(int B);
  DrConfig cfg_;
  int max_batch_;
  ConvShape conv_shape_;
  Conv2d conv1_;
  Dense primary_;
  std::optional<Dense> fc1_, fc2_, fc3_;
  DrState st_;
  const DrRoutingKernels& k_;
  const float* images_ = nullptr;  // input of the last forward (owned by the caller)
  const int* labels_ = nullptr;    // training labels during Trainer::step, else nullptr
  double recon_loss_ = 0;
  std::vector<int> mask_;
  // Activations (and d_rec_, which forward writes), sized once for max_batch;
  // the other gradients, for the largest batch backward has seen (grow_to).
  std::vector<float> conv_out_, prim_, u_, uhat_, v_, len_, dec_in_, h1_, h2_, rec_;
  std::vector<float> d_rec_, d_h2_, d_h1_, d_dec_in_, d_v_, d_uhat_, d_u_, d_prim_, d_conv_;
  // decode()'s own buffers (one row), so it leaves the last forward's intact.
  std::vector<float> one_in_, one_h1_, one_h2_;
};

// Its registry entry (models/registry.h): "dr".
struct ModelEntry;
ModelEntry dr_entry();

}  // namespace vg
