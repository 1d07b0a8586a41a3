// Every EM-routing variant side by side, with FLOPS counters: the forward
// (M- and E-steps, 3 iterations) and both backward schemes, EmGrad::stopgrad
// and EmGrad::full, at the seed's shape (8 primary capsules, 5 classes).
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "kernels/em_routing.h"
#include "kernels/rng.h"

namespace vg {
namespace {

constexpr int I = 8, J = 5;

using bench::randn;

void BM_em_routing_forward(benchmark::State& state, const EmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0));
  EmConfig cfg;
  auto V = randn(size_t(B) * I * J * 16, 4), a = randn(size_t(B) * I, 5), ba = randn(J, 6), bv = randn(J, 7);
  std::vector<float> mu(size_t(B) * J * 16), ao(size_t(B) * J);
  EmState st;
  st.resize(B, I, J);
  for (auto _ : state) {
    em_routing_forward(mu.data(), ao.data(), st, V.data(), a.data(), ba.data(), bv.data(), B, I, J, cfg, *k);
    benchmark::DoNotOptimize(mu.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(em_routing_forward_flops(B, I, J, cfg.iters), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

void BM_em_routing_backward(benchmark::State& state, const EmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0));
  EmConfig cfg;
  auto V = randn(size_t(B) * I * J * 16, 4), a = randn(size_t(B) * I, 5), ba = randn(J, 6), bv = randn(J, 7);
  auto dmu = randn(size_t(B) * J * 16, 8), da = randn(size_t(B) * J, 9);
  std::vector<float> mu(size_t(B) * J * 16), ao(size_t(B) * J), dV(V.size()), dba(J), dbv(J);
  EmState st;
  st.resize(B, I, J);
  em_routing_forward(mu.data(), ao.data(), st, V.data(), a.data(), ba.data(), bv.data(), B, I, J, cfg, *k);
  for (auto _ : state) {
    em_routing_backward(dV.data(), nullptr, dba.data(), dbv.data(), dmu.data(), da.data(), V.data(), mu.data(), ao.data(), st, B, I, J, cfg, *k);
    benchmark::DoNotOptimize(dV.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(em_routing_backward_flops(B, I, J), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

// EM routing with EmGrad::full: the forward that keeps every iteration's
// state, and the backward through all iterations (each ISA's
// em_backward_full_f32__<isa>, the scalar one the reference; compare with
// BM_em_routing_backward, the stop-gradient one).
void BM_em_routing_forward_full(benchmark::State& state, const EmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0));
  EmConfig cfg;
  cfg.grad = EmGrad::full;
  auto V = randn(size_t(B) * I * J * 16, 4), a = randn(size_t(B) * I, 5), ba = randn(J, 6), bv = randn(J, 7);
  std::vector<float> mu(size_t(B) * J * 16), ao(size_t(B) * J);
  EmState st;
  st.resize(B, I, J, cfg);
  for (auto _ : state) {
    em_routing_forward(mu.data(), ao.data(), st, V.data(), a.data(), ba.data(), bv.data(), B, I, J, cfg, *k);
    benchmark::DoNotOptimize(mu.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(em_routing_forward_flops(B, I, J, cfg.iters), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

void BM_em_routing_backward_full(benchmark::State& state, const EmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0));
  EmConfig cfg;
  cfg.grad = EmGrad::full;
  auto V = randn(size_t(B) * I * J * 16, 4), a = randn(size_t(B) * I, 5), ba = randn(J, 6), bv = randn(J, 7);
  auto dmu = randn(size_t(B) * J * 16, 8), da = randn(size_t(B) * J, 9);
  std::vector<float> mu(size_t(B) * J * 16), ao(size_t(B) * J), dV(V.size()), da_in(a.size()), dba(J), dbv(J);
  EmState st;
  st.resize(B, I, J, cfg);
  em_routing_forward(mu.data(), ao.data(), st, V.data(), a.data(), ba.data(), bv.data(), B, I, J, cfg, *k);
  for (auto _ : state) {
    em_routing_backward(dV.data(), da_in.data(), dba.data(), dbv.data(), dmu.data(), da.data(), V.data(),
                        mu.data(), ao.data(), st, B, I, J, cfg, *k);
    benchmark::DoNotOptimize(dV.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(em_routing_backward_full_flops(B, I, J, cfg.iters), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

// One registration per variant in the kernel list: adding a kernel adds its benchmarks.
const int registered = [] {
  int n = 0;
  const EmRoutingKernels* ek = em_routing_variants(&n);
  for (int v = 0; v < n; ++v) {
    const std::string isa = isa_name(ek[v].isa);
    benchmark::RegisterBenchmark(("BM_em_routing_forward/" + isa).c_str(), BM_em_routing_forward, &ek[v])
        ->ArgName("batch")->Arg(32)->Arg(256);
    benchmark::RegisterBenchmark(("BM_em_routing_backward/" + isa).c_str(), BM_em_routing_backward, &ek[v])
        ->ArgName("batch")->Arg(32)->Arg(256);
    benchmark::RegisterBenchmark(("BM_em_routing_forward_full/" + isa).c_str(), BM_em_routing_forward_full, &ek[v])
        ->ArgName("batch")->Arg(32)->Arg(256);
    benchmark::RegisterBenchmark(("BM_em_routing_backward_full/" + isa).c_str(), BM_em_routing_backward_full, &ek[v])
        ->ArgName("batch")->Arg(32)->Arg(256);
  }
  return n;
}();

}  // namespace
}  // namespace vg
