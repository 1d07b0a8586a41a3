// Triangle meshes: what the toys' parts (data/toy_parts.h) build and the
// rasteriser (data/raster.h) draws. Object frame: y up, the object standing on
// (or about) the origin; a triangle's vertices run counter-clockwise seen from
// outside the solid, so its outward normal is (b - a) x (c - a).
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace vg {

using Vec3 = std::array<float, 3>;

struct Mesh {
  std::vector<Vec3> vertices;
  std::vector<std::array<int32_t, 3>> triangles;  // indices into vertices

  // Appends `other`'s triangles (its indices shifted past this mesh's vertices).
  void append(const Mesh& other) {
    const auto base = int32_t(vertices.size());
    vertices.insert(vertices.end(), other.vertices.begin(), other.vertices.end());
    for (const auto& t : other.triangles) triangles.push_back({t[0] + base, t[1] + base, t[2] + base});
  }
};

}  // namespace vg
