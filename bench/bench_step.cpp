// One whole training step (forward, loss, backward, Adam) and one evaluation
// batch per model, on real images; and viewgap_bench's main, which takes the
// same model flags as `viewgap run`:
//   viewgap_bench --model caps --em-grad full --loss spread --benchmark_filter=model/
// benchmarks a step of that model spec as "train_step/model/..." beside the
// registered variants. Every other argument goes to Google Benchmark.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "data/dataset.h"
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

// The same step with one more core idle: a thread of a run's pool (EvalPool)
// waiting in help_until, as the run's second thread does once it has nothing
// else to do, takes each step's widest weight gradient and its Adam update
// (Trainer::set_helper), and convcaps' images to route (models/side_job.h).
// Both threads at one OpenMP thread, as in a run.
void BM_train_step_helped(benchmark::State& state, std::string name, ModelOptions opts) {
  const int B = int(state.range(0));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto model = make_model(name, opts, B);
  model->init(0);
  Trainer trainer(*model, AdamConfig{}, B);
  EvalPool pool;
  bool stop = false;  // read under the pool's lock
  std::thread helper([&] {
    omp_set_num_threads(1);
    pool.help_until([&] { return stop; });
  });
  trainer.set_helper(&pool);
  std::vector<float> x(data().train.images.begin(), data().train.images.begin() + size_t(B) * kImagePixels);
  std::vector<int> y(data().train.labels.begin(), data().train.labels.begin() + B);
  for (auto _ : state) benchmark::DoNotOptimize(trainer.step(x.data(), y.data(), B, 0.0));
  pool.update([&] { stop = true; });
  helper.join();
  omp_set_num_threads(saved);
  state.counters["FLOPS"] = benchmark::Counter(batch_flops(*model, B, true),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

void BM_eval_batch(benchmark::State& state, std::string name, ModelOptions opts = {}) {
  const int B = int(state.range(0));
  auto model = make_model(name, opts, B);
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
BENCHMARK_CAPTURE(BM_train_step, dr, std::string("dr"), ModelOptions{})->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step, dr_no_decoder, std::string("dr"), ModelOptions{{"recon-weight", "0"}})->ArgName("batch")->Arg(32);
// convcaps at the paper's recipe (its registry defaults, which a run applies).
const ModelOptions kConvcapsRecipe{{"loss", "spread"}, {"em-grad", "full"}, {"em-lambda-schedule", "official"}};
BENCHMARK_CAPTURE(BM_train_step, convcaps, std::string("convcaps"), kConvcapsRecipe)->ArgName("batch")->Arg(32);
BENCHMARK_CAPTURE(BM_train_step_helped, caps, std::string("caps"), ModelOptions{})
    ->ArgName("batch")->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_train_step_helped, cnn, std::string("cnn"), ModelOptions{})
    ->ArgName("batch")->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_train_step_helped, dr, std::string("dr"), ModelOptions{})
    ->ArgName("batch")->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_train_step_helped, convcaps, std::string("convcaps"), kConvcapsRecipe)
    ->ArgName("batch")->Arg(32)->UseRealTime();
BENCHMARK_CAPTURE(BM_eval_batch, caps, std::string("caps"))->ArgName("batch")->Arg(52)->Arg(64)->Arg(180)->Arg(256);
BENCHMARK_CAPTURE(BM_eval_batch, cnn, std::string("cnn"))->ArgName("batch")->Arg(52)->Arg(64)->Arg(180)->Arg(256);
BENCHMARK_CAPTURE(BM_eval_batch, dr, std::string("dr"))->ArgName("batch")->Arg(52)->Arg(64)->Arg(180)->Arg(256);

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

// --model NAME and --OPTION VALUE (or --OPTION=VALUE) for the registry's model
// options; a bad one is one line on stderr and exit 2, as in viewgap.
int main(int argc, char** argv) {
  std::string model;
  vg::ModelOptions opts;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], value;
    const bool ours = a.rfind("--", 0) == 0 && !a.starts_with("--benchmark");
    if (!ours) {
      rest.push_back(argv[i]);
      continue;
    }
    std::string name = a.substr(2);
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "viewgap_bench: error: %s needs a value\n", a.c_str());
      return 2;
    }
    if (name == "model") {
      model = value;
    } else if (vg::find_option(name) != nullptr) {
      opts[name] = value;
    } else {
      std::fprintf(stderr, "viewgap_bench: error: %s: not a model option (see `viewgap run --help`)\n", a.c_str());
      return 2;
    }
  }
  if (model.empty() && !opts.empty()) {
    std::fprintf(stderr, "viewgap_bench: error: model options need --model NAME\n");
    return 2;
  }
  if (!model.empty()) {
    try {
      vg::check_model(model, opts);
      const vg::ModelEntry* entry = vg::find_model(model);
      for (const auto& [name, value] : opts)
        if (std::none_of(entry->options.begin(), entry->options.end(), [&](const vg::ModelOption* o) { return name == o->name; }))
          throw vg::ModelOptionError(name, value, "model " + model + " does not read this option");
        else if (const std::string why = vg::option_ignored(model, name, opts); !why.empty())
          throw vg::ModelOptionError(name, value, why);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "viewgap_bench: error: %s\n", e.what());
      return 2;
    }
    benchmark::RegisterBenchmark("train_step/model", vg::BM_train_step, model, opts)->ArgName("batch")->Arg(32);
    benchmark::RegisterBenchmark("eval_batch/model", vg::BM_eval_batch, model, opts)->ArgName("batch")->Arg(256);
  }
  int n = int(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
