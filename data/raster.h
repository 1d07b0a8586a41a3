// A z-buffer rasteriser of triangle meshes (data/mesh.h) with Lambertian plus
// ambient shading: what the toys dataset (data/toys.h) draws its images with.
// Geometry and light are separate passes: rasterize() finds each pixel's
// nearest surface once per view and camera, shade() lights it, so smallNORB's
// six lightings of a view cost one rasterisation.
//
// Conventions. World frame: y up; the camera looks at (0, target_y, 0) from
// azimuth a (about y, from +z towards +x) and elevation e (above the xz
// plane), at `distance`. Image: row 0 at the top, column 0 at the left, pixel
// (r, c) sampled at its centre (c + 0.5, r + 0.5). A pixel belongs to the
// triangles whose interior holds its centre; centres exactly on a shared edge
// go to one triangle only (the top-left rule), so no pixel is drawn twice or
// dropped between neighbours. Same mesh, camera and side: the same bits on
// every machine (plain float arithmetic, no contraction into FMAs).
#pragma once
#include <cmath>
#include <vector>

#include "data/mesh.h"

namespace vg {

struct Camera {
  double azimuth_deg = 0, elevation_deg = 30;
  double target_y = 0;       // the point looked at: (0, target_y, 0)
  bool perspective = true;   // else orthographic
  double distance = 6;       // from the target, in object units (perspective)
  double fov_deg = 24;       // full field of view across the image (perspective)
  double half_width = 1.25;  // orthographic: half the image's width in object units
};

// Each pixel's nearest surface: its depth along the view direction (INFINITY
// where no triangle covers the pixel) and the unit outward normal, world frame,
// of the triangle drawn there (flat shading: one normal per triangle).
struct Surface {
  int side = 0;
  std::vector<float> depth;  // side x side, row-major
  std::vector<Vec3> normal;  // side x side; {0, 0, 0} where uncovered
  bool covered(int i) const { return depth[size_t(i)] != INFINITY; }
};

// Draws every triangle of `mesh` seen by `cam` into a side x side Surface
// (side >= 1). Triangles facing away from the camera are skipped (closed
// solids; a single sheet shows only its front).
void rasterize(const Mesh& mesh, const Camera& cam, int side, Surface* out);

// A directional light: `direction` points from the scene towards the light
// (unit length), plus an ambient term.
struct Light {
  Vec3 direction{0, 1, 0};
  float intensity = 1.f;
  float ambient = 0.2f;
};

// img[side x side] = background where uncovered, else
// min(1, albedo x (ambient + intensity x max(0, n . direction))).
void shade(const Surface& s, const Light& light, float albedo, float background, float* img);

}  // namespace vg
