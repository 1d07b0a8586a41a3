// 2-D convolution (conv1 of every model, cnn-paper's conv2) on oneDNN, with direct-loop references.
#pragma once
#include <map>
#include <memory>

namespace vg {

struct ConvShape {
  int in_channels = 1, height = 32, width = 32;
  int out_channels = 16, kernel = 5, stride = 2, pad = 2;
  int out_height() const { return (height + 2 * pad - kernel) / stride + 1; }
  int out_width() const { return (width + 2 * pad - kernel) / stride + 1; }
  int in_size() const { return in_channels * height * width; }   // per image
  int out_size() const { return out_channels * out_height() * out_width(); }
  int weight_size() const { return out_channels * in_channels * kernel * kernel; }
};

// Layouts, fixed for the life of the weights:
//   src     B x C x H x W            (nchw; B x H x W x C if built with src_channel_last,
//                                      a layer fed by another Conv2d or a MaxPool2d)
//   weights O x C x K x K            (oihw)
//   bias    O
//   dst     B x OH x OW x O          (nhwc: channel-last, what the dense layer flattens)
// Primitives are created once per batch size and reused (the backward ones on that size's
// first backward call or prepare_backward, so evaluation sizes never build them); execution allocates nothing
// of ours (oneDNN's execute builds its argument map inside: DnnlStep::run).
class Conv2d {
 public:
  Conv2d(const ConvShape& shape, bool relu, bool src_channel_last = false);
  ~Conv2d();
  Conv2d(const Conv2d&) = delete;
  Conv2d& operator=(const Conv2d&) = delete;

  // dst = act(conv(src, weights) + bias); act is ReLU if `relu`, else identity.
  void forward(float* dst, const float* src, const float* weights, const float* bias, int batch);
  // diff_weights = d/dW, diff_bias = d/db given diff_dst, the gradient wrt the
  // pre-activation output (the caller applies the ReLU mask). Overwrites both.
  void backward_weights(float* diff_weights, float* diff_bias, const float* diff_dst,
                        const float* src, int batch);
  // diff_src = d/dsrc given diff_dst (as for backward_weights), in src's layout.
  // Overwrites. Its primitive has a scratchpad of its own, so it may run beside
  // backward_weights of the same batch once both are prepared.
  void backward_data(float* diff_src, const float* diff_dst, const float* weights, int batch);
  // Builds the primitives of `batch`, forward and backward-weights (and
  // backward-data if `data`: a first layer has no use for it), ahead of their first call.
  void prepare_backward(int batch, bool data = false);

  const ConvShape& shape() const { return shape_; }

 private:
  struct Impl;
  Impl& impl(int batch);
  ConvShape shape_;
  bool relu_, src_channel_last_;
  std::map<int, std::unique_ptr<Impl>> per_batch_;
};

// Direct-loop references with the same layouts (tests and benchmarks only).
void conv2d_forward_ref(float* dst, const float* src, const float* weights, const float* bias,
                        const ConvShape& s, int batch, bool relu);
void conv2d_backward_weights_ref(float* diff_weights, float* diff_bias, const float* diff_dst,
                                 const float* src, const ConvShape& s, int batch);
// diff_src (nchw, like src here) from diff_dst (nhwc).
void conv2d_backward_data_ref(float* diff_src, const float* diff_dst, const float* weights,
                              const ConvShape& s, int batch);

}  // namespace vg
