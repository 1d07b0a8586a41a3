// The sweep tables' statistics: one cell's summary (mean, bootstrap CI of 30
// seeds' accuracies, 10,000 resamples) and one paired comparison, as
// `viewgap sweep` and `merge` compute them for every row of summary.csv.
// Target: well under 10 ms each, so a grid of hundreds of rows summarises in
// seconds. Counter: rows per second.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/rng.h"
#include "harness/stats.h"

namespace vg {
namespace {

std::vector<double> accuracies(int n, uint64_t seed) {
  Stream s(seed, Purpose::Test, 0x57);
  std::vector<double> x(static_cast<size_t>(n));
  for (double& v : x) v = 0.5 + 0.3 * s.uniform();
  return x;
}

void BM_summarize(benchmark::State& state) {
  const std::vector<double> x = accuracies(int(state.range(0)), 6);
  for (auto _ : state) benchmark::DoNotOptimize(summarize(x, 10000, 0).ci_lo);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_summarize)->ArgName("seeds")->Arg(30)->Unit(benchmark::kMillisecond);

void BM_paired_compare(benchmark::State& state) {
  const std::vector<double> a = accuracies(int(state.range(0)), 6), b = accuracies(int(state.range(0)), 7);
  for (auto _ : state) benchmark::DoNotOptimize(paired_compare(a, b, 10000, 0).p_value);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_paired_compare)->ArgName("seeds")->Arg(30)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace vg
