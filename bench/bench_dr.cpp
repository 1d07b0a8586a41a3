// Every dynamic-routing kernel variant side by side, with FLOPS counters: the
// predictions (forward, backward), the combination and the agreement (forward,
// backward), and the whole routing of the model 'dr' (3 iterations; backward
// through all of them). Shapes are the model's: 16 primary capsules, 5 classes.
#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "core/rng.h"
#include "kernels/dr_routing.h"

namespace vg {
namespace {

constexpr int I = 16, J = 5, H = kDrOutDim, K = kDrInDim;

std::vector<float> randn(size_t n, uint64_t tag) { return bench::randn(n, tag, 2); }

enum class Op { predict, predict_backward, combine, combine_backward, agree, agree_backward, routing, routing_backward };

void BM_dr(benchmark::State& state, const DrRoutingKernels* k, Op op) {
  if (!isa_supported(k->isa)) return state.SkipWithError("ISA not supported on this CPU");
  const int B = int(state.range(0)), iters = 3;
  auto u = randn(size_t(B) * I * K, 1), W = randn(size_t(I) * J * K * H, 2), uh = randn(size_t(B) * I * J * H, 3),
       l = randn(size_t(B) * I * J, 4), v = randn(size_t(B) * J * H, 5), g = randn(size_t(B) * J * H, 6),
       gl = randn(size_t(B) * J, 7);
  std::vector<float> o1(uh.size()), o2(W.size()), o3(l.size()), o4(v.size());
  DrState st;
  if (op == Op::routing_backward) dr_routing_forward(o4.data(), o3.data(), st, uh.data(), B, I, J, iters, *k);
  double flops = 0;
  switch (op) {
    case Op::predict: flops = dr_predict_flops(B, I, J); break;
    case Op::predict_backward: flops = 2 * dr_predict_flops(B, I, J); break;
    case Op::combine: flops = dr_combine_flops(B, I, J); break;
    case Op::combine_backward: flops = dr_combine_backward_flops(B, I, J, true); break;
    case Op::agree: flops = dr_agree_flops(B, I, J); break;
    case Op::agree_backward: flops = dr_agree_backward_flops(B, I, J); break;
    case Op::routing: flops = dr_routing_forward_flops(B, I, J, iters); break;
    case Op::routing_backward: flops = dr_routing_backward_flops(B, I, J, iters, DrGrad::full); break;
  }
  for (auto _ : state) {
    switch (op) {
      case Op::predict: k->predict(o1.data(), u.data(), W.data(), B, I, J); break;
      case Op::predict_backward: k->predict_backward(o1.data(), o2.data(), uh.data(), u.data(), W.data(), B, I, J); break;
      case Op::combine: k->combine(o4.data(), o3.data(), l.data(), uh.data(), B, I, J); break;
      case Op::combine_backward: k->combine_backward(o1.data(), o3.data(), g.data(), l.data(), uh.data(), B, I, J); break;
      case Op::agree: k->agree(o3.data(), l.data(), uh.data(), v.data(), B, I, J); break;
      case Op::agree_backward: k->agree_backward(o4.data(), o1.data(), l.data(), uh.data(), v.data(), B, I, J); break;
      case Op::routing: dr_routing_forward(o4.data(), o3.data(), st, uh.data(), B, I, J, iters, *k); break;
      case Op::routing_backward:
        dr_routing_backward(o1.data(), g.data(), gl.data(), uh.data(), st, B, I, J, iters, DrGrad::full, *k);
        break;
    }
    benchmark::DoNotOptimize(o1.data());
    benchmark::DoNotOptimize(o3.data());
    benchmark::DoNotOptimize(o4.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(state.iterations() * B);
}

// One registration per variant in the kernel list.
const int registered = [] {
  const std::pair<Op, const char*> ops[] = {
      {Op::predict, "BM_dr_predict"},   {Op::predict_backward, "BM_dr_predict_backward"},
      {Op::combine, "BM_dr_combine"},   {Op::combine_backward, "BM_dr_combine_backward"},
      {Op::agree, "BM_dr_agree"},       {Op::agree_backward, "BM_dr_agree_backward"},
      {Op::routing, "BM_dr_routing"},   {Op::routing_backward, "BM_dr_routing_backward_full"}};
  int n = 0;
  const DrRoutingKernels* k = dr_routing_variants(&n);
  for (const auto& [op, name] : ops)
    for (int v = 0; v < n; ++v)
      benchmark::RegisterBenchmark((std::string(name) + "/" + isa_name(k[v].isa)).c_str(), BM_dr, &k[v], op)
          ->ArgName("batch")->Arg(32)->Arg(256);
  return n;
}();

}  // namespace
}  // namespace vg
