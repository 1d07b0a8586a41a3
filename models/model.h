// What every model shares: one flat parameter/gradient allocation with named
// views, Adam over that flat memory, the Model interface the harness trains
// through, and the one training step (Trainer).
#pragma once
#include <array>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/image_shape.h"
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
  void step(ParamSet& p) {  // bias-corrected Adam (Kingma & Ba, Alg. 1)
    advance();
    update(p, 0, p.count());
  }
  // One step in parts: advance() counts the step, then update() covers
  // [begin, end) of the flat parameters, each element once, in any order and
  // on any thread (elementwise: the parts give step()'s bits).
  void advance();
  void update(ParamSet& p, size_t begin, size_t end);
  // Its whole state, for a checkpoint: the steps taken and the moments (the
  // bias corrections follow from the steps). restore() takes what these gave,
  // of the same size, and the next step continues from there.
  long steps() const { return t_; }
  const std::vector<float>& m() const { return m_; }
  const std::vector<float>& v() const { return v_; }
  void restore(long steps, const std::vector<float>& m, const std::vector<float>& v);
  // The rate of the steps from the next on (a schedule sets it before each step).
  void set_lr(float lr) { cfg_.lr = lr; }

 private:
  AdamConfig cfg_;
  std::vector<float> m_, v_;
  long t_ = 0;
  float lr_c1_ = 0, inv_sqrt_c2_ = 0;  // this step's bias corrections
};

// Grows v to at least n values (never shrinks). Models size their gradient
// buffers with it on a backward call, not for max_batch: evaluation batches
// never run backward, so only the training batch's size is allocated, once.
inline void grow_to(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

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

// What a model computes per layer, for the profile and the benchmarks.
struct LayerInfo {
  std::string name;                     // as LayerScope names it
  double forward_flops, backward_flops;  // one call at the batch asked for
};

// Class capsules of the last forward pass (figures, dumps); empty for models
// that have none.
struct ClassCapsules {
  int pose_dim = 0;                     // 0: no class capsules
  const float* poses = nullptr;         // batch x classes x pose_dim
  const float* activations = nullptr;   // batch x classes
};

// Where a model's backward sends a weight gradient that nothing later in the
// pass reads (Trainer::step, when another core is idle: there it runs beside
// the rest of backward, followed by the Adam update of its tensors).
class GradientSink {
 public:
  virtual void add(std::function<void()> compute, int first_tensor, int last_tensor) = 0;
  virtual void weights_released() = 0;

 protected:
  ~GradientSink() = default;
};

class StepHelper;

class Model {
 public:
  // `classes`: how many it scores (its ImageShape's; the data's five by default).
  explicit Model(const LossConfig& loss = {}, int classes = 5) : loss_(loss), classes_(classes) {}
  virtual ~Model() = default;
  virtual std::string name() const = 0;
  virtual void init(uint64_t seed) = 0;
  // Scores (batch x classes) of images (batch x channels x side x side: the
  // ImageShape it was built for, models/registry.h): the prediction is their
  // argmax, and loss() trains them (logits for xent, class activations for the
  // spread and margin losses). Keeps what backward needs (images must stay
  // alive until backward). batch <= max_batch given at construction.
  virtual const float* forward(const float* images, int batch) = 0;
  // The gradient contract: backward OVERWRITES params().grads() with the
  // gradient of the last forward's scores against dscores; every tensor is
  // written (zero where no gradient reaches it), so no step zeroes them first.
  virtual void backward(const float* dscores, int batch) = 0;
  // Name of the first layer whose output in the last forward holds NaN/Inf, or "".
  virtual std::string first_non_finite_layer(int batch) const = 0;
  // The layers in forward order with their FLOPs at `batch`.
  virtual std::vector<LayerInfo> layers(int batch) const = 0;
  virtual ClassCapsules class_capsules() const { return {}; }
  // A model with a reconstruction decoder (figures): writes to `image` (one image of its shape)
  // what the decoder makes of `capsule` (class_capsules().pose_dim values) as
  // class `cls`'s capsule, the other classes masked out, and returns true. An
  // evaluation-only pass on buffers of its own: the last forward's state (and
  // so backward) is untouched. Models without a decoder return false.
  virtual bool decode(const float* /*capsule*/, int /*cls*/, float* /*image*/) { return false; }
  // Training hooks for a model with a loss term of its own (e.g. a decoder's
  // reconstruction loss, masked by the true class in training). The Trainer
  // calls set_training_labels(labels) before forward and nullptr after the
  // step, so a forward without labels is an evaluation. model_loss() is the
  // batch-mean term computed in the last forward; it is added to loss()'s, and
  // backward adds its gradient to the parameters' (still overwriting them).
  // A model fit in one pass over the training set instead of trained by steps
  // (1-nearest-neighbour): fit() keeps what it needs and returns true; models
  // trained by Trainer::step return false and are trained as usual.
  virtual bool fit(const float* /*images*/, const int* /*labels*/, int /*n*/) { return false; }
  virtual void set_training_labels(const int* /*labels*/) {}
  virtual double model_loss() const { return 0; }
  // Builds what a training step of `batch` images needs (every layer's oneDNN
  // primitives, forward and backward, and the gradient buffers) ahead of the
  // first step, which otherwise does it; a run prepares its first model while
  // the data is synthesised. Changes no result.
  virtual void prepare_training(int /*batch*/) {}
  // Counters a training step reads and advances besides the parameters (the
  // dropout stream's seed and step count: models/cnn.h), for a checkpoint:
  // restored, the next steps draw what they would have. Empty where there are
  // none; restore_training_state throws std::invalid_argument for a state of
  // another size, changing nothing.
  virtual std::vector<uint64_t> training_state() const { return {}; }
  virtual void restore_training_state(const std::vector<uint64_t>& state) {
    if (!state.empty()) throw std::invalid_argument(name() + " keeps no training state");
  }
  // The loss the scores are trained with, and the classes they score (a row of scores each).
  const LossConfig& loss() const { return loss_; }
  int classes() const { return classes_; }
  ParamSet& params() { return params_; }
  const ParamSet& params() const { return params_; }
  void set_profiler(LayerProfiler* p) { prof_ = p; }
  LayerProfiler* profiler() const { return prof_; }

 protected:
  // For backward: `compute` writes the gradients of tensors [first, last] and
  // nothing else, from inputs that stay as they are until the step ends. It
  // runs now, or (a Trainer step with a helper) on another core while backward
  // goes on, or after backward if no core took it: the same arithmetic either
  // way. Their Adam update waits until the rest of backward reads none of their
  // weights: until release_offered_weights(), or else the end of backward.
  template <class F>
  void weight_gradient(int first, int last, F&& compute) {
    if (sink_) sink_->add(std::forward<F>(compute), first, last);
    else compute();
  }
  // Backward reads no weight of the tensors handed to weight_gradient so far
  // (e.g. after the last of their layers' backward-data passes).
  void release_offered_weights() {
    if (sink_) sink_->weights_released();
  }
  // During a Trainer step with a helper (not while profiling): another core a
  // layer may hand part of its forward or backward to (models/side_job.h),
  // for the same bits. nullptr otherwise (evaluation, profile, one thread).
  StepHelper* step_helper() const { return step_helper_; }

  LossConfig loss_;
  int classes_;
  ParamSet params_;
  LayerProfiler* prof_ = nullptr;

 private:
  friend class Trainer;
  GradientSink* sink_ = nullptr;  // set by Trainer::step around backward
  StepHelper* step_helper_ = nullptr;  // set by Trainer::step around forward and backward
};

// Another thread a training step may hand work to (the harness's pool of a
// run). offer() returns at once: true if an idle thread will run `job` (maybe
// late: a job must check that it is still wanted), false if none is idle.
class StepHelper {
 public:
  virtual bool offer(std::function<void()> job) = 0;

 protected:
  ~StepHelper() = default;
};

// One training step: forward, loss, backward, Adam. The only place a step is
// written: run, sweep, profile and the benchmarks all train through it.
class Trainer final : private GradientSink {
 public:
  Trainer(Model& model, const AdamConfig& adam, int max_batch);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;
  // Trains on images (B of the model's ImageShape) with labels; `progress` is the fraction of
  // training done (the spread loss anneals its margin with it, or with the
  // optimizer's step count under SpreadSchedule::official). Returns the
  // batch's mean loss; a NaN/Inf loss is returned before backward and Adam, so
  // the weights stay as they were for the caller to find the layer at fault.
  double step(const float* images, const int* labels, int B, double progress);
  // With a helper (not while profiling), each weight gradient the model hands
  // over (Model::weight_gradient) and its tensors' Adam update are offered to
  // an idle thread while this one goes on with backward; whichever thread
  // claims it first runs it. The same bits with or without.
  void set_helper(StepHelper* helper) { helper_ = helper; }
  // A spread-loss model's loss rises as its margin anneals; for one, each step
  // also scores its batch at the margin a training of `total_steps` ends at
  // (spread_final_margin), from the same scores: no extra forward, and the
  // step's loss, gradient and update are untouched. Other losses: nothing.
  void track_final_margin(long total_steps);
  float final_margin() const { return final_margin_; }             // NaN: not tracked
  double final_margin_loss() const { return final_margin_loss_; }  // the last step's, with model_loss()
  // The optimizer's state, for a checkpoint (harness/checkpoint.h).
  Adam& optimizer() { return adam_; }
  const Adam& optimizer() const { return adam_; }

 private:
  // One offered gradient. `state` is (generation << 2 | phase), so a job
  // claims only the offer it was made for; the block outlives the Trainer
  // while a job still holds it (refs), since a helper may pop a job late.
  struct Offer {
    std::function<void()> compute;
    size_t begin = 0, end = 0;  // its tensors in the flat parameters
    std::exception_ptr error;   // what compute threw on the helper
    // On the helper, once its gradient is computed and backward has released
    // the weights, the Adam update goes in chunks of kAdamChunk elements that
    // the owner, waiting at the end of its backward, claims too (Adam is
    // elementwise: the same bits whoever updates a chunk).
    std::atomic<bool> adam_open{false};
    std::atomic<size_t> next_chunk{0};
  };
  static constexpr size_t kAdamChunk = 8192;
  struct Shared {
    std::array<Offer, 4> offers;
    std::array<std::atomic<uint32_t>, 4> state{};
    // (generation << 3 | k): backward reads the weights of this step's first k offers no more.
    std::atomic<uint32_t> released{0};
    std::atomic<int> refs{1};
    Adam* adam = nullptr;
    ParamSet* params = nullptr;
  };
  // Updates the chunks of offer o that no one has claimed yet.
  static void adam_chunks(Shared* s, Offer& o);
  enum Phase : uint32_t { kOffered = 0, kHelper = 1, kDone = 2, kOwner = 3 };
  static_assert(std::tuple_size_v<decltype(Shared::offers)> < 8, "released counts offers in 3 bits");
  void add(std::function<void()> compute, int first_tensor, int last_tensor) override;
  void weights_released() override;
  // Runs (ok) or drops (backward threw) each offer no helper claimed, waits for
  // those one did (taking a share of their Adam chunks once their gradients are
  // in), then (ok) Adam over the elements no offer covered. If an
  // offer threw, throws that once all are settled (a helper may already have
  // updated its tensors: a failed step leaves the weights as they fell).
  void finish_offers(bool ok);
  static void release(Shared* s);

  Model& model_;
  Adam adam_;
  int max_batch_;
  std::vector<float> dscores_;  // max_batch x the model's classes
  StepHelper* helper_ = nullptr;
  Shared* shared_;
  int n_offers_ = 0;
  uint32_t generation_ = 0;
  float final_margin_ = NAN;
  double final_margin_loss_ = NAN;
};

}  // namespace vg
