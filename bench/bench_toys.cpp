// The toys dataset (data/toy_views.h): the whole smallNORB-sized set drawn as
// export-norb draws it (both splits, 2 x 24,300 stereo pairs of 96 x 96, on
// every OpenMP thread; target <= 10 s on 2 cores), the data a --data toys run
// makes before it trains (the paper's azimuth split: every test record and the
// training records at its six azimuths, as centre crops), and one view's
// pieces: its two rasterisations and one lighting's shading plus noise.
// Counters: pairs per second.
#include <benchmark/benchmark.h>

#include <vector>

#include "data/dataset.h"
#include "data/export_norb.h"
#include "data/protocol.h"
#include "data/toy_views.h"
#include "data/toys.h"

namespace vg {
namespace {

void BM_toys_full_set(benchmark::State& state) {
  const ToyConfig cfg{};
  int64_t pairs = 0;
  for (auto _ : state) {
    for (const NorbPart part : {NorbPart::training, NorbPart::testing}) {
      const NorbExportSplit s = render_toy_split(cfg, part);
      benchmark::DoNotOptimize(s.dat.data());
      pairs += int64_t(s.labels.size());
    }
  }
  state.counters["pairs/s"] = benchmark::Counter(double(pairs), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_toys_full_set)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// make_dataset of `--data toys` at its defaults (--split paper-azimuth).
void BM_toys_run_data(benchmark::State& state) {
  DataConfig cfg;
  cfg.norb = NorbConfig{};
  cfg.norb->dir = "toys";
  cfg.norb->toys = ToyConfig{};
  cfg.norb->cache = false;  // the drawing, not the render cache's copy
  cfg.norb->split = NorbSplitKind::azimuth;
  int64_t images = 0;
  for (auto _ : state) {
    const Dataset d = make_dataset(cfg);
    images += d.train.size() + d.familiar.size() + d.heldout.size();
    benchmark::DoNotOptimize(d.train.images.data());
  }
  state.counters["pairs/s"] = benchmark::Counter(double(images), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_toys_run_data)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(1);

// One view of one toy: both cameras rasterised (arg 0), or one lighting
// shaded on both (arg 1), at 96 x 96.
void BM_toys_view(benchmark::State& state) {
  const ToyShelf shelf(ToyConfig{});
  const ToyConfig cfg{};
  ToyStereo stereo;
  std::vector<float> pair(kNorbPairBytes);
  int k = 0;
  toy_stereo(shelf.mesh(0, 0), 40, 45, cfg, kNorbSide, &stereo);
  for (auto _ : state) {
    const int c = k % kToyCategories, i = (k / kToyCategories) % 10;
    if (state.range(0) == 0) toy_stereo(shelf.mesh(c, i), 20.0 * (k % 18), 30 + 5 * (k % 9), cfg, kNorbSide, &stereo);
    else toy_shade_pair(stereo, k % kToyLightings, ToyLights::mixed, pair.data());
    benchmark::DoNotOptimize(pair.data());
    ++k;
  }
  state.counters["pairs/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_toys_view)->ArgName("shade")->Arg(0)->Arg(1);

}  // namespace
}  // namespace vg
