// Every EM-routing variant side by side, with FLOPS counters: the forward
// (M- and E-steps, 3 iterations) and both backward schemes, EmGrad::stopgrad
// and EmGrad::full, at the seed's shape (8 primary capsules, 5 classes); and
// the pieces the convolutional routing's replay and full backward run at the
// paper's ConvCaps1 shapes.
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "core/rng.h"
#include "kernels/em_routing.h"

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

// The full backward's exp (exp_portable) over one ConvCaps1 window's log R
// (72 x 16), against libm's expf beside it; items are exps.
void BM_em_exp_portable(benchmark::State& state, const EmRoutingKernels* k) {
  if (k && !isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  auto x = randn(72 * 16, 3);
  for (float& v : x) v = -std::fabs(v) * 4.f;
  std::vector<float> y(x.size());
  for (auto _ : state) {
    std::copy(x.begin(), x.end(), y.begin());
    if (k) k->exp_portable(y.data(), y.size());
    else
      for (float& v : y) v = std::exp(v);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(x.size()));
}

// The replay's two kernels (conv_em_routing.h's ConvEmRecord) at ConvCaps1's
// 36 windows of 72 children and 16 types: the likelihoods (3 flops a pose
// element, 2 a pair) and the M-step weights (3 a pair).
void BM_em_likelihoods(benchmark::State& state, const EmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = 36, I = 72, J = 16;
  const auto V = randn(size_t(B) * I * J * kPoseDim, 4), mu = randn(size_t(B) * J * kPoseDim, 5),
             log_a = randn(size_t(B) * J, 6);
  auto sigma2 = randn(mu.size(), 7);
  for (float& v : sigma2) v = 0.1f + std::fabs(v);
  std::vector<float> lr(size_t(B) * I * J);
  for (auto _ : state) {
    k->likelihoods(lr.data(), V.data(), mu.data(), sigma2.data(), log_a.data(), B, I, J);
    benchmark::DoNotOptimize(lr.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(double(B) * I * J * (3 * kPoseDim + 2), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

void BM_em_m_weights(benchmark::State& state, const EmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = 36, I = 72, J = 16;
  auto log_r = randn(size_t(B) * I * J, 8), log_a = randn(size_t(B) * I, 9);
  for (float& v : log_r) v = -std::fabs(v) * 3.f;
  for (float& v : log_a) v = -std::fabs(v);
  std::vector<float> w(log_r.size()), S(size_t(B) * J);
  for (auto _ : state) {
    k->m_weights(w.data(), S.data(), log_r.data(), log_a.data(), B, I, J, 0.f);
    benchmark::DoNotOptimize(w.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(3.0 * B * I * J, benchmark::Counter::kIsIterationInvariantRate);
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
    benchmark::RegisterBenchmark(("BM_em_exp_portable/" + isa).c_str(), BM_em_exp_portable, &ek[v]);
    benchmark::RegisterBenchmark(("BM_em_likelihoods/" + isa).c_str(), BM_em_likelihoods, &ek[v])->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("BM_em_m_weights/" + isa).c_str(), BM_em_m_weights, &ek[v])->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_em_exp_portable/libm_expf", BM_em_exp_portable, nullptr);
  return n;
}();

}  // namespace
}  // namespace vg
