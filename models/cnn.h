// CNN baseline of the seed (SPEC section 2):
//   conv1   5x5/2 conv, 1 -> 16 channels, ReLU   B x 16 x 16 x 16
//   hidden  dense 4096 -> H, ReLU                B x H   (H = 64; 136 matches the capsules' size)
//   out     dense H -> 5                         B x 5
#pragma once
#include "kernels/conv.h"
#include "kernels/dense.h"
#include "models/model.h"

namespace vg {

struct CnnConfig {
  int in_channels = 1;  // input images: in_channels x 32 x 32
  int conv_channels = 16;
  int hidden = 64;
  int n_classes = 5;
};

class Cnn final : public Model {
 public:
  Cnn(const CnnConfig& cfg, int max_batch);
  std::string name() const override { return cfg_.hidden == 64 ? "cnn" : "cnn" + std::to_string(cfg_.hidden); }
  void init(uint64_t seed) override;
  void prepare_training(int batch) override;
  const float* forward(const float* images, int batch) override;
  void backward(const float* dlogits, int batch) override;
  std::string first_non_finite_layer(int batch) const override;
  std::vector<LayerInfo> layers(int batch) const override;

  int conv_w, conv_b, hid_w, hid_b, out_w, out_b;

 private:
  // Sizes the gradient buffers for a backward of B images (backward and prepare_training).
  void grow_backward_buffers(int B);
  CnnConfig cfg_;
  int max_batch_;
  ConvShape conv_shape_;
  Conv2d conv1_;
  Dense hidden_, out_;
  const float* images_ = nullptr;
  std::vector<float> conv_out_, hid_, logits_, d_hid_, d_conv_;
};

}  // namespace vg
