// The CNN baselines, one class for both; sizes at the default input, C x 32 x
// 32 images and 5 classes (every size follows the ImageShape the data gives:
// a side S gives conv1 ceil(S/2) in the seed's network, S/2 and S/4 after
// the paper's pools):
// the seed's (SPEC section 2)
//   conv1   5x5/2 conv, C -> 16 channels, ReLU   B x 16 x 16 x 16
//   hidden  dense 4096 -> H, ReLU                B x H   (H = 64; 136 matches the capsules' size)
//   out     dense H -> 5                         B x 5
// and the paper's (Hinton, Sabour & Frosst 2018, smallNORB; CnnConfig::paper),
// convolutions SAME-padded (pad 2), pooling windows 2x2, stride 2, no padding:
//   conv1   5x5/1 conv, C -> 32, ReLU            B x 32 x 32 x 32
//   pool1   max 2x2/2                            B x 16 x 16 x 32
//   conv2   5x5/1 conv, 32 -> 64, ReLU           B x 16 x 16 x 64
//   pool2   max 2x2/2                            B x 8 x 8 x 64
//   hidden  dense 4096 -> 1024, ReLU, dropout    B x 1024
//   out     dense 1024 -> 5                      B x 5
// Activations are channel-last (nhwc), so each layer's output is the next one's input as is.
#pragma once
#include <memory>
#include <string>

#include "kernels/conv.h"
#include "kernels/dense.h"
#include "kernels/pool.h"
#include "models/model.h"

namespace vg {

struct CnnConfig {
  int in_channels = 1;  // input images: in_channels x image_side x image_side
  int conv_channels = 16;
  int hidden = 64;
  int n_classes = 5;
  // 0: the seed's network. Otherwise the paper's: conv1 at stride 1, both
  // convolutions followed by max-pooling, conv2 with this many channels.
  int conv2_channels = 0;
  float dropout = 0;  // rate of the hidden layer's inverted dropout in training
  int image_side = 32;

  static CnnConfig paper(int in_channels, float dropout, int image_side = 32, int n_classes = 5) {
    return {in_channels, 32, 1024, n_classes, 64, dropout, image_side};
  }
  bool is_paper() const { return conv2_channels > 0; }
  // Why the network cannot take its input (the paper's two pools need 2 x 2
  // pixels each: a side of 4 at least), or "" where it can.
  std::string shape_problem() const;
  // conv1 and conv2 (conv2 zero-sized in the seed's network), from the config alone.
  ConvShape conv1_shape() const;
  ConvShape conv2_shape() const;
  size_t param_count() const;
  // Floats per image of a training step at its batch (the memory check): five
  // times the layers' outputs, measured for the paper's network (peak RSS at batch
  // 256 against 32: 1.3 MB an image; this estimate gives 1.25 MB) -- outputs, gradients,
  // oneDNN's blocked copies.
  size_t activation_floats() const;
};

// Inverted dropout's per-unit factors: scale[b * units + j] is 0 with probability
// `rate`, else 1 / (1 - rate). Each is drawn from the stream (seed, Dropout, step, b),
// draw j: a pure function of (seed, step, sample in the batch, unit).
void dropout_scales(float* scale, int batch, int units, float rate, uint64_t seed, uint64_t step);

class Cnn final : public Model {
 public:
  Cnn(const CnnConfig& cfg, int max_batch);
  std::string name() const override;
  void init(uint64_t seed) override;
  void prepare_training(int batch) override;
  const float* forward(const float* images, int batch) override;
  void backward(const float* dlogits, int batch) override;
  std::string first_non_finite_layer(int batch) const override;
  std::vector<LayerInfo> layers(int batch) const override;
  // A forward with labels set trains: dropout is on, with the mask of this
  // step; the step count advances when the labels are cleared (Trainer::step's end).
  void set_training_labels(const int* labels) override;
  // The dropout stream's position: {seed, step}.
  std::vector<uint64_t> training_state() const override { return {seed_, step_}; }
  void restore_training_state(const std::vector<uint64_t>& state) override;

  int conv_w, conv_b, conv2_w = -1, conv2_b = -1, hid_w, hid_b, out_w, out_b;

 private:
  // Sizes the gradient buffers for a backward of B images (backward and prepare_training).
  void grow_backward_buffers(int B);
  CnnConfig cfg_;
  int max_batch_;
  ConvShape conv_shape_, conv2_shape_;
  int flat_;  // hidden's input per image
  Conv2d conv1_;
  std::unique_ptr<Conv2d> conv2_;           // the paper's network only
  std::unique_ptr<MaxPool2d> pool1_, pool2_;  // likewise
  Dense hidden_, out_;
  const float* images_ = nullptr;
  std::vector<float> conv_out_, hid_, logits_, d_hid_, d_conv_;
  std::vector<float> pool1_out_, conv2_out_, pool2_out_, d_pool1_, d_conv2_, d_pool2_;
  std::vector<float> drop_scale_, hid_dropped_;  // this step's dropout factors and hidden output
  const float* out_in_ = nullptr;  // what `out` read in the last forward
  uint64_t seed_ = 0, step_ = 0;
  bool training_ = false, dropped_ = false;
};

// Their registry entries (models/registry.h): the seed's "cnn"/"cnnN" and "cnn-paper".
struct ModelEntry;
ModelEntry cnn_entry();
ModelEntry cnn_paper_entry();

}  // namespace vg
