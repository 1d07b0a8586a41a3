// Every pose-matmul variant side by side, with FLOPS counters (EM routing is in
// bench_em_routing.cpp).
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "core/rng.h"
#include "harness/report.h"
#include "kernels/pose_matmul.h"

namespace vg {
namespace {

constexpr int I = 8, J = 5;

using bench::randn;

void BM_pose_matmul_forward(benchmark::State& state, const PoseMatmulKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0));
  auto M = randn(size_t(B) * I * 16, 1), W = randn(I * J * 16, 2);
  std::vector<float> V(size_t(B) * I * J * 16);
  for (auto _ : state) {
    k->forward(V.data(), M.data(), W.data(), B, I, J);
    benchmark::DoNotOptimize(V.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * 64 * B * I * J;  // 64 multiply-adds per 4x4 product
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * int64_t(B) * I * J);
}

void BM_pose_matmul_backward(benchmark::State& state, const PoseMatmulKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0));
  auto M = randn(size_t(B) * I * 16, 1), W = randn(I * J * 16, 2), dV = randn(size_t(B) * I * J * 16, 3);
  std::vector<float> dM(M.size()), dW(W.size());
  for (auto _ : state) {
    k->backward(dM.data(), dW.data(), dV.data(), M.data(), W.data(), B, I, J);
    benchmark::DoNotOptimize(dM.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * 2 * 64 * B * I * J;  // dM and dW
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * int64_t(B) * I * J);
}

// One registration per variant in the kernel lists: adding a kernel adds its benchmark.
const int registered = [] {
  int n = 0;
  const PoseMatmulKernels* pk = pose_matmul_variants(&n);
  for (int v = 0; v < n; ++v) {
    const std::string isa = isa_name(pk[v].isa);
    benchmark::RegisterBenchmark(("BM_pose_matmul_forward/" + isa).c_str(), BM_pose_matmul_forward, &pk[v])
        ->ArgName("batch")->Arg(32)->Arg(256)->Arg(1024);
    benchmark::RegisterBenchmark(("BM_pose_matmul_backward/" + isa).c_str(), BM_pose_matmul_backward, &pk[v])
        ->ArgName("batch")->Arg(32)->Arg(256)->Arg(1024);
  }
  benchmark::AddCustomContext("viewgap_isa", isa_name(selected_isa()));
  benchmark::AddCustomContext("cpu", cpu_model());
  return n;
}();

}  // namespace
}  // namespace vg
