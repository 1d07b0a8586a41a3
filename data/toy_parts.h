// Parametric parts the procedural toys (data/toys.h) are assembled from: each
// a closed triangle mesh, counter-clockwise seen from outside (data/mesh.h),
// so a toy made by appending overlapping parts is a set of closed solids the
// rasteriser can cull back faces of. A `segments` argument is the number of
// vertices around each ring; the toys keep it small (8 to 16) so a whole toy
// stays within a few thousand triangles.
//
// Every part is built in its own frame (centred on the origin or standing on
// it, as each function says) and moved into the toy's frame by an Affine.
#pragma once
#include <array>
#include <vector>

#include "data/mesh.h"

namespace vg {

// Sine, cosine and tangent of an angle in degrees by data/raster.h's
// sin_cos_deg, not libm (whose FMA and plain builds may differ in the last
// bit): a toy's vertices are the same bits on every machine.
double sin_deg(double deg);
double cos_deg(double deg);
double tan_deg(double deg);

// An affine map x -> A x + t, built by chaining steps: each step applies
// after the ones before it, so Affine().scale(2, 1, 1).translate(0, 3, 0)
// stretches first and then moves. Angles in degrees, right-handed: rotate_z
// turns +x towards +y, rotate_x turns +y towards +z, rotate_y +z towards +x.
class Affine {
 public:
  Affine();  // the identity

  [[nodiscard]] Affine scale(double sx, double sy, double sz) const;
  [[nodiscard]] Affine rotate_x(double deg) const;
  [[nodiscard]] Affine rotate_y(double deg) const;
  [[nodiscard]] Affine rotate_z(double deg) const;
  [[nodiscard]] Affine translate(double x, double y, double z) const;
  // This map followed by `next`.
  [[nodiscard]] Affine then(const Affine& next) const;

  std::array<double, 3> apply(const std::array<double, 3>& p) const;
  Vec3 apply(const Vec3& p) const;
  double determinant() const;

 private:
  Affine rotate(int from, int to, double deg) const;
  std::array<double, 12> m_;  // row-major 3 x 4: [A | t]
};

// `part` mapped by `where`. A map with negative determinant (a mirror) would
// turn every triangle inside out, so the winding is reversed to keep it
// counter-clockwise seen from outside.
Mesh transformed(const Mesh& part, const Affine& where);
// Appends transformed(part, where) to *into.
void place(Mesh* into, const Mesh& part, const Affine& where);

// An axis-aligned box of side lengths sx, sy, sz centred on the origin
// (8 vertices, 12 triangles).
Mesh box(double sx, double sy, double sz);

// Solids of revolution about the y axis, centred on the origin in y;
// segments >= 3.
// A cylinder: radius r, height h, a regular `segments`-gon in section, capped.
Mesh cylinder(double r, double h, int segments);
// A frustum: radius r_bottom at y = -h/2, r_top at +h/2; a radius of 0 makes
// that end a point (a cone).
Mesh frustum(double r_bottom, double r_top, double h, int segments);
// An ellipsoid with semi-axes rx, ry, rz: a UV sphere of `segments` meridians
// and segments / 2 bands between its poles (segments even, >= 4), scaled.
// Its vertices lie on the ellipsoid, so it is slightly smaller inside.
Mesh ellipsoid(double rx, double ry, double rz, int segments);

// A lathe: the profile {(radius, y), ...}, listed from bottom to top,
// revolved about the y axis. A first or last radius of 0 closes that end in a
// point; a positive one is capped with a flat disc. Interior radii must be
// positive, and consecutive points distinct.
Mesh lathe(const std::vector<std::array<double, 2>>& profile, int segments);

// A loft: cross-sections swept along +x, joined station to station, so a
// profile can grow, shrink, rise and narrow along the way (fuselages, car
// bodies, cabs, wings). Each section is a superellipse in the (z, y) plane
// centred on (y, z), of half-height `half_height`, whose half-width runs
// linearly from `half_width` at its bottom to `top_half_width` at its top
// (narrower on top: a car's sloping windows). `squareness` is the
// superellipse's exponent for the whole loft, 1, 2, 4, 8 or 16 (powers of two
// need no libm pow): 2 gives ellipses, 8 or more nearly rectangles with
// rounded corners. The first or last section may be
// a point (zero half-height and half-widths: a pointed nose); every other
// needs them positive. Stations must advance along x; an end that is not a
// point is capped with a flat fan. segments >= 4.
struct LoftStation {
  double x = 0, y = 0, z = 0;
  double half_height = 0, half_width = 0, top_half_width = 0;
};
Mesh loft(const std::vector<LoftStation>& stations, int segments, double squareness);
// A station whose half-width is the same at top and bottom.
inline LoftStation station(double x, double y, double half_height, double half_width, double z = 0) {
  return {x, y, z, half_height, half_width, half_width};
}

}  // namespace vg
