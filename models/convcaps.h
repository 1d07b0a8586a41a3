// The paper's smallNORB network (Hinton, Sabour & Frosst 2018, section 3 and
// figure 1), its sizes as options (defaults: the small model, A=64, B=8,
// C=D=16, K=3). VALID padding, channel-last grids:
//   conv1      5x5/2 conv, in_channels -> A, ReLU (oneDNN)   B x 14 x 14 x A
//   primary    1x1: B types of 4x4 pose + logit              14 x 14 x B   DensePrimaryCaps at every position
//   convcaps1  K x K / 2, EM routing over windows            6 x 6 x C     ConvCaps
//   convcaps2  K x K / 1, EM routing over windows            4 x 4 x D     ConvCaps
//   class      W shared over positions + coordinate addition,
//              EM routing over all 4 x 4 x D children        5 class capsules  ClassCaps (shared)
//   scores     spread or margin loss: the class activations; xent: the seed's
//              head |mu_j|^2 / 16 + 4 (a_j - 1/2)
// Parameters at the defaults: 67,154 with one input channel, 68,754 with two
// (tests derive them from the layer shapes).
#pragma once
#include <optional>

#include "kernels/conv.h"
#include "models/caps_layers.h"
#include "models/model.h"

namespace vg {

struct ConvCapsConfig {
  int in_channels = 1, image_side = 32;
  int A = 64, B = 8, C = 16, D = 16;  // conv1 channels; primary, convcaps1, convcaps2 capsule types
  int K = 3;                           // window of both convolutional capsule layers
  int n_classes = 5;
  ConvEmConfig em;                     // routing of every capsule layer (norm: the conv layers' E-step)
  // Coordinate addition: paper = the receptive field's centre in the image,
  // scaled by its side, added to elements 3 and 7; official = (y + 0.5) / 4
  // on the class layer's grid, added to elements 0 and 1 (capsule_em).
  CoordPlace coords = CoordPlace::paper;
  // The class layer's lambda (the final one with a schedule) is em.lambda
  // times this: 1 the paper's (one lambda for every layer), 0.25 the official
  // code's (capsule_em/em_layers.py, connector_capsule_mat: final_beta / 4).
  float class_lambda_scale = 1.f;
  float route_init_std = 0.5f;         // the capsule layers' W (see init())
  std::optional<Isa> isa;              // kernel variant; default: the dispatcher's
  LossConfig loss;

  // The grids after each layer (side), or 0 where a layer would not fit.
  int conv1_side() const { return image_side >= 5 ? (image_side - 5) / 2 + 1 : 0; }
  int caps1_side() const { return conv1_side() >= K ? (conv1_side() - K) / 2 + 1 : 0; }
  int caps2_side() const { return caps1_side() >= K ? caps1_side() - K + 1 : 0; }
  ConvCapsShape caps1_shape() const { return {conv1_side(), conv1_side(), B, C, K, 2}; }
  ConvCapsShape caps2_shape() const { return {caps1_side(), caps1_side(), C, D, K, 1}; }
  size_t param_count() const;
  size_t activation_floats() const;  // per image, a training step (memory check)
  // What a training step holds whatever the batch, with `threads` threads at
  // work on it (memory check): per slot (one; ConvCaps::side_slots with a
  // helper) a chunk's votes and their gradient, shared by the two layers,
  // and each layer's routing state for a chunk.
  size_t step_floats(int threads) const;
};

class ConvCapsNet final : public Model {
 public:
  ConvCapsNet(const ConvCapsConfig& cfg, int max_batch);
  std::string name() const override { return "convcaps"; }
  void init(uint64_t seed) override;
  void prepare_training(int batch) override;
  const float* forward(const float* images, int batch) override;
  void backward(const float* dscores, int batch) override;
  std::vector<LayerInfo> layers(int batch) const override;
  ClassCapsules class_capsules() const override { return {kPoseDim, class_.mu(), class_.a()}; }
  std::string first_non_finite_layer(int batch) const override;
  const ConvCapsConfig& config() const { return cfg_; }
  const ConvCaps& caps1() const { return caps1_; }
  const ConvCaps& caps2() const { return caps2_; }
  const ClassCaps& class_caps() const { return class_; }
  // Bytes of the buffers the model holds now (activations, gradients, routing
  // state, scratch; not the parameters, Adam's moments or oneDNN's own memory).
  size_t buffer_bytes() const;

  int conv_w, conv_b;
  // What coordinate addition adds for the class layer's children: the rows'
  // values, then the columns' (ClassCaps' coords).
  static std::vector<float> class_coords(const ConvCapsConfig& c);
  // The class layer's routing: em with lambda scaled by class_lambda_scale.
  static EmConfig class_em(const ConvCapsConfig& c);

 private:
  ConvCapsConfig cfg_;
  int max_batch_;
  ConvShape conv_shape_;
  ConvCapsScratch caps_scratch_;  // both ConvCaps layers' chunk of votes (before them: they hold its address)
  Conv2d conv1_;
  DensePrimaryCaps primary_;
  ConvCaps caps1_, caps2_;
  ClassCaps class_;
  const float* images_ = nullptr;
  int positions_;  // conv1's output positions per image (the primary layer's rows)
  std::vector<float> conv_out_, logits_;
  std::vector<float> d_mu_, d_a_, d_p2_, d_z2_, d_p1_, d_z1_, d_z0_, d_conv_;  // ConvCaps1's d_poses: the primary layer's, in place
};

// Its registry entry (models/registry.h): "convcaps".
struct ModelEntry;
ModelEntry convcaps_entry();

}  // namespace vg
