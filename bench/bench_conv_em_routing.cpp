// EM routing over convolutional windows, every variant, with FLOPS counters,
// at the paper's ConvCaps1 (14x14x8 -> 6x6x16, K 3, stride 2) and ConvCaps2
// (6x6x16 -> 4x4x16, K 3, stride 1) shapes: the forward (3 iterations, the
// paper's normalisation) and both backward schemes.
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "kernels/conv_em_routing.h"

namespace vg {
namespace {

using bench::randn;

// Layer 3 is ConvCaps1's windows at a 5x5 input: 4 windows, whose votes and
// their gradient (0.6 MB an image) stay in L2 where layer 1's (5.3 MB) do not,
// so that a pass's cost per vote can be told from the cache's.
ConvVotesShape layer_shape(int layer, int B) {
  if (layer == 3) return ConvVotesShape::conv(B, 5, 5, 8, 16, 3, 2);
  return layer == 1 ? ConvVotesShape::conv(B, 14, 14, 8, 16, 3, 2) : ConvVotesShape::conv(B, 6, 6, 16, 16, 3, 1);
}

// Votes, input logits and betas of one layer, routed once (the backward's state).
struct Layer {
  ConvVotesShape s;
  ConvEmConfig cfg;
  std::vector<float> V, z, ba, bv, mu, a, dmu, da, dV, dz, dba, dbv;
  ConvEmState st;
  Layer(int layer, int B, EmGrad grad) : s(layer_shape(layer, B)) {
    cfg.grad = grad;
    const size_t P = size_t(s.B) * s.Ho() * s.Wo();
    V = randn(s.v_size(), 4), z = randn(size_t(s.B) * s.H * s.W * s.Ci, 5), ba = randn(s.Co, 6), bv = randn(s.Co, 7);
    mu.resize(P * s.Co * 16), a.resize(P * s.Co), dV.resize(V.size()), dz.resize(z.size()), dba.resize(s.Co), dbv.resize(s.Co);
    dmu = randn(mu.size(), 8), da = randn(a.size(), 9);
    st.resize(s, cfg);
  }
  void forward(const ConvEmRoutingKernels& k, ConvEmRecord rec = {}) {
    conv_em_routing_forward(mu.data(), a.data(), st, V.data(), z.data(), ba.data(), bv.data(), s, cfg, k, rec);
  }
  void backward(const ConvEmRoutingKernels& k) {
    conv_em_routing_backward(dV.data(), dz.data(), dba.data(), dbv.data(), 0, dmu.data(), da.data(), V.data(),
                             mu.data(), a.data(), st, s, cfg, k);
  }
};

void BM_conv_em_routing_forward(benchmark::State& state, const ConvEmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  Layer l(int(state.range(0)), int(state.range(1)), EmGrad::stopgrad);
  for (auto _ : state) {
    l.forward(*k);
    benchmark::DoNotOptimize(l.mu.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_em_routing_forward_flops(l.s, l.cfg.iters),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * l.s.B);
}

void BM_conv_em_routing_backward(benchmark::State& state, const ConvEmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  Layer l(int(state.range(0)), int(state.range(1)), EmGrad::stopgrad);
  l.forward(*k);
  for (auto _ : state) {
    l.backward(*k);
    benchmark::DoNotOptimize(l.dV.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_em_routing_backward_flops(l.s), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * l.s.B);
}

// EmGrad::full: the forward that keeps every iteration's state, and the
// backward through all of them (each ISA's conv_em_backward_full_f32__<isa>,
// the scalar one the reference).
void BM_conv_em_routing_forward_full(benchmark::State& state, const ConvEmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  Layer l(int(state.range(0)), int(state.range(1)), EmGrad::full);
  for (auto _ : state) {
    l.forward(*k);
    benchmark::DoNotOptimize(l.mu.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_em_routing_forward_flops(l.s, l.cfg.iters),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * l.s.B);
}

void BM_conv_em_routing_backward_full(benchmark::State& state, const ConvEmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  Layer l(int(state.range(0)), int(state.range(1)), EmGrad::full);
  l.forward(*k);
  for (auto _ : state) {
    l.backward(*k);
    benchmark::DoNotOptimize(l.dV.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_em_routing_backward_full_flops(l.s, l.cfg.iters),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * l.s.B);
}

// What the full backward runs first in the model (ConvCaps::backward): the
// routing's history rebuilt from a record of the forward (ConvEmRecord).
void BM_conv_em_routing_replay(benchmark::State& state, const ConvEmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  Layer l(int(state.range(0)), int(state.range(1)), EmGrad::full);
  std::vector<float> record(ConvEmRecord::floats(l.s, l.cfg.iters, l.cfg.norm));
  ConvEmRecord rec;
  rec.record = record.data();
  l.forward(*k, rec);
  rec = {};
  rec.replay = record.data();
  for (auto _ : state) {
    l.forward(*k, rec);
    benchmark::DoNotOptimize(l.mu.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_em_routing_replay_flops(l.s, l.cfg.iters),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * l.s.B);
}

// One E-step (its likelihoods, then the per-child normalisation) on the
// routed state: a forward runs iters - 1 of them, a replay as many.
void BM_conv_em_e_step(benchmark::State& state, const ConvEmRoutingKernels* k) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  Layer l(int(state.range(0)), int(state.range(1)), EmGrad::stopgrad);
  l.forward(*k);
  for (auto _ : state) {
    k->e_step(l.st, l.V.data(), l.mu.data(), l.s, l.cfg.norm, nullptr);
    benchmark::DoNotOptimize(l.st.em.log_r.data());
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_em_routing_forward_flops(l.s, 2) - 2 * conv_em_routing_forward_flops(l.s, 1),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * l.s.B);
}

// One registration per variant in the kernel list; layer 1 = ConvCaps1, 2 = ConvCaps2.
const int registered = [] {
  int n = 0;
  const ConvEmRoutingKernels* ck = conv_em_routing_variants(&n);
  for (int v = 0; v < n; ++v) {
    const std::string isa = isa_name(ck[v].isa);
    auto args = [](benchmark::internal::Benchmark* b) {
      // batch 1: the model's call (it routes one image at a time, its votes in cache);
      // batch 32: a training batch's votes at once (85 MB at layer 1: memory-bound).
      b->ArgNames({"layer", "batch"})->Args({1, 1})->Args({2, 1})->Args({3, 1})->Args({1, 32})->Args({2, 32})->Unit(benchmark::kMicrosecond);
    };
    args(benchmark::RegisterBenchmark(("BM_conv_em_routing_forward/" + isa).c_str(), BM_conv_em_routing_forward, &ck[v]));
    args(benchmark::RegisterBenchmark(("BM_conv_em_routing_backward/" + isa).c_str(), BM_conv_em_routing_backward, &ck[v]));
    args(benchmark::RegisterBenchmark(("BM_conv_em_routing_forward_full/" + isa).c_str(), BM_conv_em_routing_forward_full,
                                      &ck[v]));
    args(benchmark::RegisterBenchmark(("BM_conv_em_routing_backward_full/" + isa).c_str(), BM_conv_em_routing_backward_full,
                                      &ck[v]));
    args(benchmark::RegisterBenchmark(("BM_conv_em_routing_replay/" + isa).c_str(), BM_conv_em_routing_replay, &ck[v]));
    args(benchmark::RegisterBenchmark(("BM_conv_em_e_step/" + isa).c_str(), BM_conv_em_e_step, &ck[v]));
  }
  return n;
}();

}  // namespace
}  // namespace vg
