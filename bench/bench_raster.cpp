// The toys' renderer (data/raster.h): one rasterisation of a closed mesh of
// about 2,000 triangles (a latitude-longitude sphere, 32 x 32) at 96 and 48
// pixels, views cycling over azimuth and elevation as the dataset's do, and one
// shading pass at 96. Counters: triangles and pixels per second.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "data/mesh.h"
#include "data/raster.h"

namespace vg {
namespace {

// A unit sphere: `rings` bands of latitude, `segments` of longitude, poles
// as fans; counter-clockwise seen from outside. 2 x 32 x 31 = 1,984 triangles.
Mesh sphere(int rings, int segments) {
  Mesh m;
  const double pi = 3.14159265358979323846;
  m.vertices.push_back({0, 1, 0});
  for (int i = 1; i < rings; ++i) {
    const double th = pi * i / rings;
    for (int j = 0; j < segments; ++j) {
      const double ph = 2 * pi * j / segments;
      m.vertices.push_back({float(std::sin(th) * std::sin(ph)), float(std::cos(th)), float(std::sin(th) * std::cos(ph))});
    }
  }
  m.vertices.push_back({0, -1, 0});
  const auto south = int32_t(m.vertices.size() - 1);
  auto at = [segments](int ring, int j) { return int32_t(1 + (ring - 1) * segments + (j % segments)); };
  for (int j = 0; j < segments; ++j) {
    m.triangles.push_back({0, at(1, j), at(1, j + 1)});
    for (int i = 1; i + 1 < rings; ++i) {
      m.triangles.push_back({at(i, j), at(i + 1, j), at(i + 1, j + 1)});
      m.triangles.push_back({at(i, j), at(i + 1, j + 1), at(i, j + 1)});
    }
    m.triangles.push_back({at(rings - 1, j), south, at(rings - 1, j + 1)});
  }
  return m;
}

Camera view(uint64_t k) {
  Camera c;
  c.azimuth_deg = double(k % 18) * 20;
  c.elevation_deg = 30 + double(k % 5) * 5;
  return c;
}

void BM_raster(benchmark::State& state) {
  const Mesh m = sphere(32, 32);
  const int side = int(state.range(0));
  Surface s;
  uint64_t k = 0;
  for (auto _ : state) {
    rasterize(m, view(k++), side, &s);
    benchmark::DoNotOptimize(s.depth.data());
  }
  state.counters["triangles/s"] =
      benchmark::Counter(double(m.triangles.size()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pixels/s"] = benchmark::Counter(double(side) * side, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_raster)->ArgName("side")->Arg(96)->Arg(48);

void BM_raster_shade(benchmark::State& state) {
  const int side = int(state.range(0));
  Surface s;
  rasterize(sphere(32, 32), view(0), side, &s);
  std::vector<float> img(size_t(side) * size_t(side));
  const Light light{{0.48f, 0.8f, 0.36f}, 0.9f, 0.15f};
  for (auto _ : state) {
    shade(s, light, 0.8f, 0.f, img.data());
    benchmark::DoNotOptimize(img.data());
  }
  state.counters["pixels/s"] = benchmark::Counter(double(side) * side, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_raster_shade)->ArgName("side")->Arg(96);

}  // namespace
}  // namespace vg
