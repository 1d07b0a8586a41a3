// 2-D max pooling on oneDNN, with a direct-loop reference.
#pragma once
#include <map>
#include <memory>

namespace vg {

struct PoolShape {
  int channels = 32, height = 32, width = 32;
  int kernel = 2, stride = 2;  // no padding: a window lies inside the image
  int out_height() const { return (height - kernel) / stride + 1; }
  int out_width() const { return (width - kernel) / stride + 1; }
  int in_size() const { return channels * height * width; }  // per image
  int out_size() const { return channels * out_height() * out_width(); }
};

// Layouts: src B x H x W x C and dst B x OH x OW x C (nhwc, what Conv2d writes
// and the dense layer flattens). Primitives are created once per batch size; the
// forward always runs as training and keeps oneDNN's workspace (where each
// window's maximum was), which backward reads: a backward belongs to the last
// forward of its batch size.
class MaxPool2d {
 public:
  explicit MaxPool2d(const PoolShape& shape);
  ~MaxPool2d();
  MaxPool2d(const MaxPool2d&) = delete;
  MaxPool2d& operator=(const MaxPool2d&) = delete;

  // dst = the maximum of each kernel x kernel window of src, per channel.
  void forward(float* dst, const float* src, int batch);
  // diff_src = diff_dst routed to each window's maximum, zero elsewhere
  // (overwrites; windows that overlap add up).
  void backward(float* diff_src, const float* diff_dst, int batch);
  // Builds the backward primitive of `batch` ahead of its first call.
  void prepare_backward(int batch);

  const PoolShape& shape() const { return shape_; }

 private:
  struct Impl;
  Impl& impl(int batch);
  PoolShape shape_;
  std::map<int, std::unique_ptr<Impl>> per_batch_;
};

// References with the same layouts (tests only). The backward routes to the
// first maximum of a window in row-major order, as oneDNN does.
void maxpool2d_forward_ref(float* dst, const float* src, const PoolShape& s, int batch);
void maxpool2d_backward_ref(float* diff_src, const float* diff_dst, const float* src, const PoolShape& s, int batch);

}  // namespace vg
