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
// every machine (plain float and double arithmetic, no contraction into FMAs,
// and the camera's trigonometry from sin_cos_deg below rather than libm).
//
// The camera frame, exactly. With a = azimuth, e = elevation, d = (cos e sin a,
// sin e, cos e cos a), the camera looks along forward f = -d; right is
// r = (cos a, 0, -sin a) and up u = r x f = (-sin e sin a, cos e, -sin e cos a).
// So at azimuth 0, elevation 0 the camera sits on +z looking down -z: +x is to
// the right of the image centre and +y above it; raising e brings the top of
// the object into view; at a = 90 deg, +z is on the left. The image centre
// (side/2, side/2) looks at the target. Perspective: the eye is at
// target + distance * d and a view-space point (x, y, z) = ((p - eye).r,
// (p - eye).u, (p - eye).f) lands at column side/2 (1 + x / (z tan(fov/2))),
// row side/2 (1 - y / (z tan(fov/2))). Orthographic: the same frame, with
// x / half_width and y / half_width in place of x / (z tan(fov/2)).
//
// Limits. Projected vertices are snapped to 1/4096 pixel, which makes every
// edge test exact (so the top-left rule holds bit for bit); a triangle is
// skipped, not clipped, when a vertex lies nearer than distance / 100 to the
// eye or behind it (perspective), or projects more than 4096 pixels from the
// image's corner. The toys always sit wholly in front of the camera, well
// inside these bounds.
#pragma once
#include <cmath>
#include <cstdint>
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
// depth is view-space z, (p - eye).f, at the pixel's centre: perspective
// interpolates 1/z linearly on the screen (correct for a plane) and stores its
// reciprocal; orthographic interpolates z itself. The eye is target + distance
// * d in both projections, so orthographic depth may be negative for geometry
// behind it (orthographic draws it all). Of two surfaces at equal depth (the
// buffer compares float keys), the triangle earlier in the mesh wins.
struct Surface {
  int side = 0;
  std::vector<float> depth;  // side x side, row-major
  std::vector<Vec3> normal;  // side x side; {0, 0, 0} where uncovered
  bool covered(int i) const { return depth[size_t(i)] != INFINITY; }
};

// Draws every triangle of `mesh` seen by `cam` into a side x side Surface
// (1 <= side <= 2048; else std::invalid_argument, as larger images leave the
// bounds that keep the edge tests exact). Triangles facing away from the camera
// are skipped (closed solids; a single sheet shows only its front), as are
// those of zero area on the screen (seen edge-on).
void rasterize(const Mesh& mesh, const Camera& cam, int side, Surface* out);

// What one rasterisation did, for tests and benchmarks: fragments counts pixel
// centres found inside a drawn triangle before the depth test (a pixel covered
// by one layer of a tiling is one fragment: none drawn twice, none dropped).
struct RasterStats {
  int64_t drawn = 0;      // front-facing triangles set up
  int64_t culled = 0;     // facing away from the camera, or of zero area on screen
  int64_t skipped = 0;    // a vertex past the near plane or the screen bound
  int64_t fragments = 0;
};
void rasterize(const Mesh& mesh, const Camera& cam, int side, Surface* out, RasterStats* stats);

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

// The camera setup's sine and cosine of an angle in degrees: plain double
// arithmetic, so the same bits everywhere (libm's need not be), within 1e-15
// of the true values and exact at multiples of 90 degrees.
void sin_cos_deg(double deg, double* s, double* c);

}  // namespace vg
