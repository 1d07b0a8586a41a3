// Matrix capsule network of the seed (SPEC section 2), sizes at the default
// input (1 x 32 x 32, 5 classes; a side S gives conv1 ceil(S/2) x ceil(S/2)):
//   conv1    5x5/2 conv, 1 -> 16 channels, ReLU       B x 16 x 16 x 16
//   primary  dense 4096 -> 8 x (16 pose + 1 logit)    B x 136       DensePrimaryCaps
//   votes    V_ij = M_i W_ij                          B x 8 x 5 x 16  ClassCaps (per_child)
//   class    EM routing                               mu B x 5 x 16, a B x 5
//   scores   with the xent loss (the seed's): logits |mu_j|^2 / 16 + 4 (a_j - 0.5);
//            with the spread or margin loss (the paper's): the activations a_j   B x 5
#pragma once
#include <memory>
#include <optional>

#include "kernels/conv.h"
#include "models/caps_layers.h"
#include "models/model.h"

namespace vg {

struct CapsConfig {
  int in_channels = 1;  // input images: in_channels x image_side x image_side (smallNORB: 2 cameras)
  int image_side = 32;
  int conv_channels = 16;
  int n_primary = 8;
  int n_classes = 5;
  float route_init_std = 0.5f;
  EmConfig em;
  // Kernel variant of the votes and the routing; default: the dispatcher's
  // (tests compare variants in one process).
  std::optional<Isa> isa;
  LossConfig loss;  // xent trains the combined logits; spread and margin the activations
};

class CapsNet final : public Model {
 public:
  CapsNet(const CapsConfig& cfg, int max_batch);
  std::string name() const override { return "caps"; }
  void init(uint64_t seed) override;
  void prepare_training(int batch) override;
  const float* forward(const float* images, int batch) override;
  void backward(const float* dscores, int batch) override;
  std::vector<LayerInfo> layers(int batch) const override;
  ClassCapsules class_capsules() const override { return {kPoseDim, class_.mu(), class_.a()}; }

  // Read-only views of the last forward pass (tests, figures).
  const float* class_poses() const { return class_.mu(); }        // B x 5 x 16
  const float* class_activations() const { return class_.a(); }   // B x 5
  const float* votes() const { return class_.votes(); }           // B x 8 x 5 x 16
  const EmState& em_state() const { return class_.em_state(); }
  const CapsConfig& config() const { return cfg_; }
  // Hold the routing weights of the last forward fixed (finite-difference tests).
  void freeze_routing(bool frozen) { class_.em_state().frozen = frozen; }
  std::string first_non_finite_layer(int batch) const override;

  // Tensor indices into params().
  int conv_w, conv_b, prim_w, prim_b, route_w, beta_a, beta_v;

 private:
  // Sizes the gradient buffers for a backward of B images (backward and prepare_training).
  void grow_backward_buffers(int B);
  CapsConfig cfg_;
  int max_batch_;
  ConvShape conv_shape_;
  Conv2d conv1_;
  DensePrimaryCaps primary_;
  ClassCaps class_;
  const float* images_ = nullptr;  // input of the last forward (owned by the caller)
  // Activations, sized once for max_batch; their gradients, for the largest
  // batch backward has seen (grow_to).
  std::vector<float> conv_out_, logits_;
  std::vector<float> d_mu_, d_a_, d_poses_, d_conv_, d_a_in_logit_;
};

// Its registry entry (models/registry.h): "caps", the seed's model.
struct ModelEntry;
ModelEntry caps_entry();

}  // namespace vg
