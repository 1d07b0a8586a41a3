// smallNORB input pipeline: a batch of stereo pairs read from a -dat file
// (pread, as training does) and preprocessed to 2 x 32 x 32 floats, and the
// preprocessing alone. Counter: pairs per second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/norb.h"

namespace vg {
namespace {

// A 512-pair split written once to a temporary directory.
const NorbSet& bench_set() {
  static const NorbSet set = [] {
    constexpr int n = 512;
    const std::string dir = std::filesystem::temp_directory_path() / ("viewgap_bench_norb." + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::vector<uint8_t> pairs(size_t(n) * kNorbPairBytes);
    Stream s(5, Purpose::Test, 0x0B);
    for (auto& p : pairs) p = uint8_t(s.next_u32());
    std::vector<int32_t> labels(n);
    std::vector<NorbInfo> info(n);
    for (int i = 0; i < n; ++i) {
      labels[size_t(i)] = i % 5;
      info[size_t(i)] = {i % 10, i % 9, 2 * (i % 18), i % 6};
    }
    const NorbFiles f = norb_files(dir, NorbPart::training);
    norb_write_split(f, pairs, labels, info);
    NorbSet loaded = norb_load_split(f);
    std::filesystem::remove_all(dir);  // the open descriptor keeps the data readable
    return loaded;
  }();
  return set;
}

void BM_norb_batch(benchmark::State& state) {
  const NorbSet& set = bench_set();
  const bool train = state.range(1) != 0;
  NorbBatcher batcher(set, NorbPrep{NorbCameras::both, train ? 0.2f : 0.f, train ? 0.3f : 0.f});
  const int batch = int(state.range(0));
  std::vector<int> idx(static_cast<size_t>(batch));
  std::vector<float> out(size_t(batch) * 2 * kNorbCropPixels);
  uint64_t step = 0;
  for (auto _ : state) {
    for (int b = 0; b < batch; ++b) idx[size_t(b)] = int((step * uint64_t(batch) + uint64_t(b)) * 7919 % uint64_t(set.size()));
    if (train) batcher.train_batch(idx.data(), batch, 0, step, out.data());
    else batcher.eval_batch(idx.data(), batch, out.data());
    benchmark::DoNotOptimize(out.data());
    ++step;
  }
  state.counters["pairs/s"] = benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_norb_batch)->ArgNames({"batch", "train"})->Args({32, 0})->Args({32, 1});

void BM_norb_preprocess(benchmark::State& state) {
  std::vector<uint8_t> pair(kNorbPairBytes);
  Stream s(6, Purpose::Test, 0x0C);
  for (auto& p : pair) p = uint8_t(s.next_u32());
  std::vector<float> out(2 * kNorbCropPixels);
  const NorbPrep prep{NorbCameras::both, 0.2f, 0.3f};
  uint64_t i = 0;
  for (auto _ : state) {
    Stream rng = norb_augment_stream(0, 0, i++);
    norb_train_sample(pair.data(), prep, rng, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["pairs/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_norb_preprocess);

}  // namespace
}  // namespace vg
