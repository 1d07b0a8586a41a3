// Every elementwise variant side by side: the Adam update, the ReLU backward and
// the transpose are memory-bound, so the counter is bytes per second (Adam reads
// w, m, v, g and writes w, m, v: 28 bytes per parameter; ReLU backward reads d, y
// and writes d; the transpose reads and writes each float once). The noise is
// compute-bound: values per second.
#include <benchmark/benchmark.h>

#include <cmath>

#include "bench/bench_util.h"
#include "core/rng.h"
#include "kernels/elementwise.h"

namespace vg {
namespace {

std::vector<float> randn(size_t n, uint64_t tag) { return bench::randn(n, tag, 2); }

void BM_adam_update(benchmark::State& state, const ElementwiseKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const size_t n = size_t(state.range(0));
  auto w = randn(n, 1), m = randn(n, 2), v = randn(n, 3), g = randn(n, 4);
  for (float& x : v) x = x * x;
  for (auto _ : state) {
    k->adam_update(w.data(), m.data(), v.data(), g.data(), n, 0.9f, 0.999f, 2e-3f, 1.f, 1e-8f);
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(kAdamBytesPerParam * double(n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
  state.SetItemsProcessed(state.iterations() * int64_t(n));
}

void BM_relu_backward(benchmark::State& state, const ElementwiseKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const size_t n = size_t(state.range(0));
  auto d = randn(n, 5), y = randn(n, 6);
  for (auto _ : state) {
    k->relu_backward(d.data(), y.data(), n);
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(3.0 * sizeof(float) * double(n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
}

// A dense layer's input (batch x features) transposed for its weight gradient.
void BM_transpose(benchmark::State& state, const ElementwiseKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int rows = int(state.range(0)), cols = int(state.range(1));
  auto src = randn(size_t(rows) * cols, 7);
  std::vector<float> dst(src.size());
  for (auto _ : state) {
    k->transpose(dst.data(), src.data(), rows, cols);
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(2.0 * sizeof(float) * double(src.size()),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1024);
}

// Gaussian noise from a Philox stream: a 32 x 32 image's worth per call, as data
// synthesis draws it (the counter is values per second).
void BM_normal(benchmark::State& state, const ElementwiseKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const size_t n = size_t(state.range(0));
  std::vector<float> out(n);
  uint64_t image = 0;
  for (auto _ : state) {
    k->normal(out.data(), n, 0.04f, 12345, ++image, 0);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * int64_t(n));
}

// One registration per variant in the kernel list. Sizes: 2048 parameters (the
// 28 KB fit in L1: Adam's rate without memory), the CNN's and the capsule
// model's parameter counts; the ReLU backward's below.
const int registered = [] {
  int n = 0;
  const ElementwiseKernels* ek = elementwise_variants(&n);
  for (int v = 0; v < n; ++v) {
    const std::string isa = isa_name(ek[v].isa);
    benchmark::RegisterBenchmark(("BM_adam_update/" + isa).c_str(), BM_adam_update, &ek[v])
        ->ArgName("params")->Arg(2048)->Arg(262949)->Arg(558258);
    // Arrays in L1 (24 KB) and in L2 (432 KB); conv1's output at batch 32; then ConvCaps1's
    // votes, one image's (2.65 MB an array, beyond L2) and a batch's (85 MB): two reads and
    // a write a float, the full EM backward's traffic over V and dV, so its bytes/s are that
    // backward's memory bound, and the first two the rates of the routing's passes over a
    // window's votes in L1 and in L2 (docs/performance.md#the-bounds-and-the-arithmetic-behind-each).
    benchmark::RegisterBenchmark(("BM_relu_backward/" + isa).c_str(), BM_relu_backward, &ek[v])
        ->ArgName("n")->Arg(2048)->Arg(36864)->Arg(32 * 16 * 16 * 16)->Arg(36 * 72 * 16 * 16)
        ->Arg(32 * 36 * 72 * 16 * 16);
    benchmark::RegisterBenchmark(("BM_transpose/" + isa).c_str(), BM_transpose, &ek[v])
        ->ArgNames({"rows", "cols"})->Args({32, 4096});
    benchmark::RegisterBenchmark(("BM_normal/" + isa).c_str(), BM_normal, &ek[v])->ArgName("n")->Arg(1024);
  }
  return n;
}();

}  // namespace
}  // namespace vg
