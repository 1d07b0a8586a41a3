// Trivial baselines: the yardsticks that tell a hard split from an easy one.
//   nn1     1-nearest-neighbour on raw pixels (Euclidean), no training
//   linear  softmax regression on the raw pixels (C x side x side -> classes),
//           trained like the others (softmax cross-entropy, Adam)
#pragma once
#include <vector>

#include "kernels/dense.h"
#include "models/model.h"

namespace vg {

class NearestNeighbour final : public Model {
 public:
  explicit NearestNeighbour(int max_batch, const ImageShape& shape = {});
  std::string name() const override { return "nn1"; }
  void init(uint64_t) override {}
  // Keeps the training images as the weights of a dense layer: the score of
  // training image t for query x is x.t - |t|^2/2, whose argmax over t is the
  // nearest t (|x - t|^2 = |x|^2 - 2 (x.t - |t|^2/2)); ties go to the first.
  bool fit(const float* images, const int* labels, int n) override;
  // One-hot scores: 1 for the class of the nearest training image.
  const float* forward(const float* images, int batch) override;
  void backward(const float*, int) override {}
  std::string first_non_finite_layer(int batch) const override;
  std::vector<LayerInfo> layers(int batch) const override;

 private:
  int max_batch_, n_train_ = 0;
  int pixels_;  // per image: channels x side x side
  int classes_;
  std::unique_ptr<Dense> dots_;
  std::vector<float> train_t_, bias_, dots_out_, scores_;  // train_t_: pixels x n (row-major)
  std::vector<int> labels_;
};

class Linear final : public Model {
 public:
  Linear(const LossConfig& loss, int max_batch, const ImageShape& shape = {});
  std::string name() const override { return "linear"; }
  void init(uint64_t seed) override;
  void prepare_training(int batch) override;
  const float* forward(const float* images, int batch) override;
  void backward(const float* dscores, int batch) override;
  std::string first_non_finite_layer(int batch) const override;
  std::vector<LayerInfo> layers(int batch) const override;

  int w, b;

 private:
  int max_batch_;
  int pixels_;  // per image: channels x side x side
  int classes_;
  Dense dense_;
  const float* images_ = nullptr;
  std::vector<float> logits_;
};

// Their registry entries (models/registry.h): "nn1" and "linear".
struct ModelEntry;
ModelEntry nn1_entry();
ModelEntry linear_entry();

}  // namespace vg
