// Fully connected layer y = x W + b on oneDNN, with loop references.
#pragma once
#include <map>
#include <memory>

namespace vg {

// Layouts, fixed for the life of the weights (no per-step reorders):
//   src B x K, weights K x N (row-major), bias N, dst B x N.
// Primitives are created once per batch size and reused (the backward ones on that size's
// first backward call, so evaluation sizes never build them); execution allocates nothing
// of ours (oneDNN's execute builds its argument map inside: DnnlStep::run).
class Dense {
 public:
  Dense(int in_features, int out_features, bool relu);
  ~Dense();
  Dense(const Dense&) = delete;
  Dense& operator=(const Dense&) = delete;

  // dst = act(src W + bias); act is ReLU if `relu`.
  void forward(float* dst, const float* src, const float* weights, const float* bias, int batch);
  // Builds the backward primitives for `batch` (the first backward call does
  // otherwise): once done, backward_data and backward_weights of that batch may
  // run at the same time on two threads.
  void prepare_backward(int batch);
  // diff_src = diff_dst W^T (overwrites). diff_dst is wrt the pre-activation output.
  void backward_data(float* diff_src, const float* diff_dst, const float* weights, int batch);
  // diff_weights = src^T diff_dst, diff_bias = column sums of diff_dst (overwrite).
  void backward_weights(float* diff_weights, float* diff_bias, const float* diff_dst,
                        const float* src, int batch);

  int in_features() const { return in_; }
  int out_features() const { return out_; }

 private:
  struct Impl;
  Impl& impl(int batch);
  int in_, out_;
  bool relu_;
  std::map<int, std::unique_ptr<Impl>> per_batch_;
};

void dense_forward_ref(float* dst, const float* src, const float* weights, const float* bias,
                       int batch, int in, int out, bool relu);
void dense_backward_data_ref(float* diff_src, const float* diff_dst, const float* weights,
                             int batch, int in, int out);
void dense_backward_weights_ref(float* diff_weights, float* diff_bias, const float* diff_dst,
                                const float* src, int batch, int in, int out);

}  // namespace vg
