// One whole training step (forward, loss, backward, Adam) and one evaluation
// batch per model, on real images.
#include <benchmark/benchmark.h>

#include "harness/dataset.h"
#include "harness/profile.h"
#include "harness/train.h"

namespace vg {
namespace {

// FLOPs of one image through every layer (forward; with backward if `train`),
// counted as `viewgap profile` counts them.
double model_flops_per_image(const std::string& name, bool train) {
  const char* caps[] = {"conv1", "primary", "votes", "em_routing", "logits"};
  const char* cnn[] = {"conv1", "hidden", "out"};
  const int hidden = std::max(0, cnn_width(name, 64));
  double f = 0;
  for (const char* layer : name == "caps" ? std::vector<const char*>(caps, caps + 5)
                                          : std::vector<const char*>(cnn, cnn + 3))
    for (bool backward : {false, true})
      if (!backward || train) f += layer_flops(name, layer, backward, 1, hidden, 3);
  return f;
}

const Dataset& data() {
  static const Dataset d = make_dataset(DataConfig{});
  return d;
}

void BM_train_step(benchmark::State& state, std::string name) {
  const int B = int(state.range(0));
  TrainConfig tc;
  auto model = make_model(name, tc, B);
  model->init(0);
  Adam adam(model->params().count(), AdamConfig{});
  std::vector<float> x(data().train.images.begin(), data().train.images.begin() + size_t(B) * kImagePixels);
  std::vector<int> y(data().train.labels.begin(), data().train.labels.begin() + B);
  std::vector<float> d(size_t(B) * kNumClasses);
  for (auto _ : state) {
    const float* logits = model->forward(x.data(), B);
    benchmark::DoNotOptimize(softmax_xent(d.data(), logits, y.data(), B, kNumClasses));
    model->backward(d.data(), B);
    adam.step(model->params());
  }
  state.counters["FLOPS"] = benchmark::Counter(B * model_flops_per_image(name, true),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

void BM_eval_batch(benchmark::State& state, std::string name) {
  const int B = int(state.range(0));
  TrainConfig tc;
  auto model = make_model(name, tc, B);
  model->init(0);
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(data().circle.images.data(), B));
  state.counters["FLOPS"] = benchmark::Counter(B * model_flops_per_image(name, false),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

BENCHMARK_CAPTURE(BM_train_step, caps, std::string("caps"))->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step, cnn, std::string("cnn"))->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step, cnn136, std::string("cnn136"))->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_eval_batch, caps, std::string("caps"))->ArgName("batch")->Arg(180)->Arg(256);
BENCHMARK_CAPTURE(BM_eval_batch, cnn, std::string("cnn"))->ArgName("batch")->Arg(180)->Arg(256);

void BM_make_dataset(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(make_dataset(DataConfig{}).train.images.data());
  state.SetItemsProcessed(state.iterations() * 1890);
}
BENCHMARK(BM_make_dataset)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vg

namespace vg {
namespace {

// Adam over all parameters of a model: memory-bound (reads w, m, v, g; writes w, m, v).
void BM_adam_step(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  ParamSet p;
  p.add("w", n);
  p.allocate();
  std::fill(p.grads().begin(), p.grads().end(), 1e-3f);
  Adam adam(n, AdamConfig{});
  for (auto _ : state) adam.step(p);
  state.counters["bytes_per_second"] = benchmark::Counter(7.0 * 4 * n, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * int64_t(n));
}
BENCHMARK(BM_adam_step)->ArgName("params")->Arg(262949)->Arg(558258);

}  // namespace
}  // namespace vg
