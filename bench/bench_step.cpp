// One whole training step (forward, loss, backward, Adam) and one evaluation
// batch per model, on real images.
#include <benchmark/benchmark.h>

#include "harness/dataset.h"
#include "harness/profile.h"
#include "harness/train.h"

namespace vg {
namespace {

// FLOPs of a batch through every layer (forward; with backward if `train`), as
// the model counts them for `viewgap profile`.
double batch_flops(const Model& model, int B, bool train) {
  double f = 0;
  for (const LayerInfo& l : model.layers(B)) f += l.forward_flops + (train ? l.backward_flops : 0);
  return f;
}

const Dataset& data() {
  static const Dataset d = make_dataset(DataConfig{});
  return d;
}

void BM_train_step(benchmark::State& state, std::string name, ModelOptions opts) {
  const int B = int(state.range(0));
  auto model = make_model(name, opts, B);
  model->init(0);
  Trainer trainer(*model, AdamConfig{}, B);
  std::vector<float> x(data().train.images.begin(), data().train.images.begin() + size_t(B) * kImagePixels);
  std::vector<int> y(data().train.labels.begin(), data().train.labels.begin() + B);
  for (auto _ : state) benchmark::DoNotOptimize(trainer.step(x.data(), y.data(), B, 0.0));
  state.counters["FLOPS"] = benchmark::Counter(batch_flops(*model, B, true),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

void BM_eval_batch(benchmark::State& state, std::string name) {
  const int B = int(state.range(0));
  auto model = make_model(name, {}, B);
  model->init(0);
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(data().circle.images.data(), B));
  state.counters["FLOPS"] = benchmark::Counter(batch_flops(*model, B, false),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

BENCHMARK_CAPTURE(BM_train_step, caps, std::string("caps"), ModelOptions{})->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step, cnn, std::string("cnn"), ModelOptions{})->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step, cnn136, std::string("cnn136"), ModelOptions{})->ArgName("batch")->Arg(32);
// The routing and loss variants (--em-grad full, --loss spread): the paper's model.
BENCHMARK_CAPTURE(BM_train_step, caps_em_grad_full, std::string("caps"), ModelOptions{{"em-grad", "full"}})
    ->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step, caps_paper, std::string("caps"),
                  ModelOptions{{"em-grad", "full"}, {"loss", "spread"}, {"em-lambda-schedule", "official"}})
    ->ArgName("batch")->Arg(32);
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
