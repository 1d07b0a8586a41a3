// What every model shares: one flat parameter/gradient allocation with named
// views, Adam over that flat memory, softmax cross-entropy, and the Model
// interface the harness trains through.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "models/loss.h"

namespace vg {

// Parameters and gradients each live in one allocation; tensors are named
// views, so the optimizer is one loop over memory.
class ParamSet {
 public:
  struct Tensor {
    std::string name;
    size_t offset, size;
  };
  // Declare before allocate(); returns the tensor's index.
  int add(const std::string& name, size_t size);
  void allocate();
  float* value(int t) { return values_.data() + tensors_[t].offset; }
  float* grad(int t) { return grads_.data() + tensors_[t].offset; }
  const float* value(int t) const { return values_.data() + tensors_[t].offset; }
  const Tensor& tensor(int t) const { return tensors_[t]; }
  int num_tensors() const { return int(tensors_.size()); }
  size_t count() const { return values_.size(); }
  std::vector<float>& values() { return values_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<float>& values() const { return values_; }
  void zero_grad();
  // Name of the first tensor whose value (or gradient) is NaN/Inf, or "".
  std::string first_non_finite(bool gradients) const;

 private:
  std::vector<Tensor> tensors_;
  std::vector<float> values_, grads_;
};

// Fills p[0..n) with N(0, std^2) from the stream (seed, Init, hash(name)):
// a tensor of the same name gets the same values in every model of a run.
void init_normal(float* p, size_t n, float std, uint64_t seed, const std::string& name);

struct AdamConfig {
  float lr = 2e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
};

class Adam {
 public:
  Adam(size_t n, const AdamConfig& cfg) : cfg_(cfg), m_(n, 0.f), v_(n, 0.f) {}
  void step(ParamSet& p);  // bias-corrected Adam (Kingma & Ba, Alg. 1)

 private:
  AdamConfig cfg_;
  std::vector<float> m_, v_;
  long t_ = 0;
};

// ReLU backward in place: d = 0 where the ReLU output y is not positive.
void relu_backward(float* d, const float* y, size_t n);

// True if x[0..n) is all finite.
bool all_finite(const float* x, size_t n);


// Per-layer timing hook (viewgap profile). Models time each layer's forward and
// backward through LayerScope; with no profiler set it costs one branch.
struct LayerProfiler {
  using Clock = std::chrono::steady_clock;
  virtual ~LayerProfiler() = default;
  virtual void record(const char* layer, bool backward, Clock::time_point t0, Clock::time_point t1) = 0;
};

class LayerScope {
 public:
  LayerScope(LayerProfiler* p, const char* layer, bool backward)
      : p_(p), layer_(layer), backward_(backward) {
    if (p_) t0_ = LayerProfiler::Clock::now();
  }
  ~LayerScope() {
    if (p_) p_->record(layer_, backward_, t0_, LayerProfiler::Clock::now());
  }
  LayerScope(const LayerScope&) = delete;
  LayerScope& operator=(const LayerScope&) = delete;

 private:
  LayerProfiler* p_;
  const char* layer_;
  bool backward_;
  LayerProfiler::Clock::time_point t0_{};
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual void init(uint64_t seed) = 0;
  // Logits (batch x 5) of images (batch x 32 x 32); keeps what backward needs
  // (images must stay alive until backward). batch <= max_batch given at construction.
  virtual const float* forward(const float* images, int batch) = 0;
  // Gradients of all parameters from dlogits of the last forward. Overwrites
  // params().grads() (each parameter is used once per step).
  virtual void backward(const float* dlogits, int batch) = 0;
  // Name of the first layer whose output in the last forward holds NaN/Inf, or "".
  virtual std::string first_non_finite_layer(int batch) const = 0;
  ParamSet& params() { return params_; }
  const ParamSet& params() const { return params_; }
  void set_profiler(LayerProfiler* p) { prof_ = p; }

 protected:
  ParamSet params_;
  LayerProfiler* prof_ = nullptr;
};

}  // namespace vg
