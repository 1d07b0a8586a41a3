// Every convolutional-vote variant side by side, with FLOPS counters, at the
// paper's small smallNORB model (A=64, B=8, C=D=16): ConvCaps1 (14x14x8 ->
// 6x6x16, K=3, s=2), ConvCaps2 (6x6x16 -> 4x4x16, K=3, s=1) and the class
// capsules (4x4x16 -> 5, shared weights, coordinate addition). The context
// records the core's FMA peak (kernels/fma_probe) to read the rates against.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "bench/bench_util.h"
#include "core/rng.h"
#include "kernels/conv_votes.h"
#include "kernels/fma_probe.h"

namespace vg {
namespace {

using bench::randn;

ConvVotesShape shape_of(const benchmark::State& state, bool shared) {
  const int B = int(state.range(0)), H = int(state.range(1)), W = int(state.range(2)), Ci = int(state.range(3)),
            Co = int(state.range(4));
  return shared ? ConvVotesShape::class_caps(B, H, W, Ci, Co)
                : ConvVotesShape::conv(B, H, W, Ci, Co, int(state.range(5)), int(state.range(6)));
}

// The class layer runs with coordinate addition (the paper's placement), as the model does.
void BM_votes_forward(benchmark::State& state, const ConvVotesKernels* k, bool shared) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const ConvVotesShape s = shape_of(state, shared);
  auto M = randn(s.m_size(), 1), W = randn(s.w_size(), 2), row = randn(s.H, 3), col = randn(s.W, 4);
  const VoteCoords vc{row.data(), col.data(), CoordPlace::paper};
  const VoteCoords* coords = shared ? &vc : nullptr;
  std::vector<float> V(s.v_size());
  for (auto _ : state) {
    k->forward(V.data(), M.data(), W.data(), coords, s);
    benchmark::DoNotOptimize(V.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_votes_forward_flops(s, coords != nullptr),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * int64_t(s.B));
}

void BM_votes_backward(benchmark::State& state, const ConvVotesKernels* k, bool shared) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const ConvVotesShape s = shape_of(state, shared);
  auto M = randn(s.m_size(), 1), W = randn(s.w_size(), 2), dV = randn(s.v_size(), 5);
  std::vector<float> dM(M.size()), dW(W.size());
  for (auto _ : state) {
    k->backward(dM.data(), dW.data(), dV.data(), M.data(), W.data(), s);
    benchmark::DoNotOptimize(dM.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(conv_votes_backward_flops(s), benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * int64_t(s.B));
}

// One registration per variant in the kernel list: adding a kernel adds its benchmark.
const int registered = [] {
  int n = 0;
  const ConvVotesKernels* ck = conv_votes_variants(&n);
  for (int v = 0; v < n; ++v) {
    const std::string isa = isa_name(ck[v].isa);
    for (const char* pass : {"forward", "backward"}) {
      const bool fwd = pass[0] == 'f';
      benchmark::RegisterBenchmark(("BM_conv_votes_" + std::string(pass) + "/" + isa).c_str(),
                                   fwd ? BM_votes_forward : BM_votes_backward, &ck[v], false)
          ->ArgNames({"batch", "H", "W", "Ci", "Co", "K", "s"})
          ->Args({1, 14, 14, 8, 16, 3, 2})
          ->Args({32, 14, 14, 8, 16, 3, 2})  // ConvCaps1
          ->Args({1, 6, 6, 16, 16, 3, 1})
          ->Args({32, 6, 6, 16, 16, 3, 1});  // ConvCaps2
      benchmark::RegisterBenchmark(("BM_class_votes_" + std::string(pass) + "/" + isa).c_str(),
                                   fwd ? BM_votes_forward : BM_votes_backward, &ck[v], true)
          ->ArgNames({"batch", "H", "W", "Ci", "Co"})
          ->Args({32, 4, 4, 16, 5});
    }
  }
  char peak[32];
  std::snprintf(peak, sizeof peak, "%.1f", fma_peak_gflops());
  benchmark::AddCustomContext("fma_peak_gflops", peak);
  return n;
}();

}  // namespace
}  // namespace vg
