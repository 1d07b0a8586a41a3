// Every elementwise variant side by side: the Adam update, the ReLU backward and
// the transpose are memory-bound, so the counter is bytes per second (Adam reads
// w, m, v, g and writes w, m, v: 28 bytes per parameter; ReLU backward reads d, y
// and writes d; the transpose reads and writes each float once). The noise is
// compute-bound: values per second. The weight gradient counts its 2 B K N FLOPs;
// with Adam fused, so does BM_weight_grad_then_adam, the two calls it replaces.
#include <benchmark/benchmark.h>

#include <cmath>
#include <utility>

#include "kernels/elementwise.h"
#include "kernels/rng.h"

namespace vg {
namespace {

std::vector<float> randn(size_t n, uint64_t tag) {
  Stream s(2, Purpose::Test, tag);
  std::vector<float> v(n);
  for (auto& x : v) x = float(s.normal());
  return v;
}

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

// A dense layer's weight gradient at batch B = 32 (K 4096 inputs; N 136: the
// capsules' primary layer, 64: the CNN's hidden one): alone, fused with Adam,
// and as the gradient followed by adam_update, which the fused form replaces.
enum class WeightGrad { alone, fused, then_adam };
void BM_weight_grad(benchmark::State& state, const ElementwiseKernels* k, WeightGrad form) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0)), K = int(state.range(1)), N = int(state.range(2));
  const size_t KN = size_t(K) * N;
  auto src_t = randn(size_t(K) * B, 8), dd = randn(size_t(B) * N, 9), w = randn(KN, 10),
       m = randn(KN, 11), v = randn(KN, 12);
  for (float& x : dd) x *= 1e-3f;
  for (float& x : v) x = x * x;
  std::vector<float> g(KN), scratch(weight_grad_adam_scratch(N));
  const AdamScalars a{0.9f, 0.999f, 2e-3f, 1.f, 1e-8f};
  for (auto _ : state) {
    if (form == WeightGrad::fused) {
      k->weight_grad_adam(w.data(), m.data(), v.data(), scratch.data(), src_t.data(), dd.data(), B, K, N, a);
    } else {
      k->weight_grad(g.data(), src_t.data(), dd.data(), B, K, N);
      if (form == WeightGrad::then_adam)
        k->adam_update(w.data(), m.data(), v.data(), g.data(), KN, a.b1, a.b2, a.lr_c1, a.inv_sqrt_c2, a.eps);
    }
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * B * double(KN), benchmark::Counter::kIsIterationInvariantRate);
}

// One registration per variant in the kernel list. Sizes: the CNN's and the
// capsule model's parameter counts; conv1's output at batch 32.
const int registered = [] {
  int n = 0;
  const ElementwiseKernels* ek = elementwise_variants(&n);
  for (int v = 0; v < n; ++v) {
    const std::string isa = isa_name(ek[v].isa);
    benchmark::RegisterBenchmark(("BM_adam_update/" + isa).c_str(), BM_adam_update, &ek[v])
        ->ArgName("params")->Arg(262949)->Arg(558258);
    benchmark::RegisterBenchmark(("BM_relu_backward/" + isa).c_str(), BM_relu_backward, &ek[v])
        ->ArgName("n")->Arg(32 * 16 * 16 * 16);
    benchmark::RegisterBenchmark(("BM_transpose/" + isa).c_str(), BM_transpose, &ek[v])
        ->ArgNames({"rows", "cols"})->Args({32, 4096});
    benchmark::RegisterBenchmark(("BM_normal/" + isa).c_str(), BM_normal, &ek[v])->ArgName("n")->Arg(1024);
    for (auto [name, form] : {std::pair{"BM_weight_grad/", WeightGrad::alone},
                              std::pair{"BM_weight_grad_adam/", WeightGrad::fused},
                              std::pair{"BM_weight_grad_then_adam/", WeightGrad::then_adam}})
      benchmark::RegisterBenchmark((name + isa).c_str(), BM_weight_grad, &ek[v], form)
          ->ArgNames({"batch", "in", "out"})->Args({32, 4096, 136})->Args({32, 4096, 64});
  }
  return n;
}();

}  // namespace
}  // namespace vg
