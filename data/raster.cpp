// The rasteriser behind data/raster.h: a per-view vertex transform, then one
// bounding-box scan per front-facing triangle with edge functions stepped one
// pixel at a time, and a depth buffer.
//
// Exactness is what makes the top-left rule work: vertices are snapped to a
// 2^-12 pixel grid and pixel centres are at k + 1/2, so every edge function
// value is a multiple of 2^-24 whose magnitude stays below 2^27 (coordinates
// bounded by kScreenBound); a double holds all of these exactly, including the
// sums of the incremental steps. Hence a pixel centre on an edge shared by two
// triangles gets exactly 0 from both (the two evaluations are exact negations),
// and the top-left rule hands it to exactly one of them.
#include "data/raster.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace vg {
namespace {

constexpr double kScreenBound = 4096;  // |column|, |row| of a drawable vertex, in pixels
constexpr int kMaxSide = 2048;         // pixel centres stay inside the same bound
constexpr double kNearFraction = 0.01;  // perspective near plane at distance / 100

// Rounds to the nearest multiple of 2^-12 (ties to even) for |x| < 2^39:
// adding 1.5 * 2^40 leaves the sum an ulp of 2^-12, and subtracting it back is
// exact. Plain double arithmetic, so the same on every IEEE machine, and no
// libm call per vertex.
inline double snap(double x) {
  constexpr double k = 0x1.8p40;
  return (x + k) - k;
}

// floor and ceil of a snapped coordinate (|x| <= kScreenBound + 1): the shift
// makes the argument positive, where conversion to int truncates, i.e. floors;
// all of it exact. Cheaper than std::floor where SSE4.1 is not assumed.
inline int floor_bounded(double x) { return int(x + 8192.0) - 8192; }
inline int ceil_bounded(double x) { return 8192 - int(8192.0 - x); }

}  // namespace

// Sine and cosine of an angle in degrees by plain double arithmetic: reduced
// exactly (fmod) to [-45, 45] degrees and a quadrant, then Taylor series to
// x^17 (the next term is below 1e-19 at pi/4). libm's sin and cos are not the
// same function on every machine (glibc picks an FMA build at run time), and
// the camera frame feeds every pixel. Exact at multiples of 90 degrees.
void sin_cos_deg(double deg, double* s, double* c) {
  if (!std::isfinite(deg)) {
    *s = *c = NAN;
    return;
  }
  double r = std::fmod(deg, 360.0);
  if (r < 0) r += 360.0;
  const int k = int(std::floor(r / 90.0 + 0.5));  // nearest quadrant, 0..4
  const double x = (r - 90.0 * k) * (3.14159265358979323846 / 180.0);
  const double x2 = x * x;
  double sp = 1.0 / 355687428096000.0;  // 1/17!, then down to 1/3!
  double cp = 1.0 / 20922789888000.0;   // 1/16!, then down to 1/2!
  const double sin_inv[] = {1.0 / 1307674368000.0, 1.0 / 6227020800.0, 1.0 / 39916800.0, 1.0 / 362880.0,
                            1.0 / 5040.0,          1.0 / 120.0,        1.0 / 6.0};
  const double cos_inv[] = {1.0 / 87178291200.0, 1.0 / 479001600.0, 1.0 / 3628800.0, 1.0 / 40320.0,
                            1.0 / 720.0,         1.0 / 24.0,        1.0 / 2.0};
  for (int i = 0; i < 7; ++i) {  // alternating signs, Horner in x^2
    sp = sin_inv[i] - x2 * sp;
    cp = cos_inv[i] - x2 * cp;
  }
  const double sn = x - x * x2 * sp, cs = 1.0 - x2 * cp;
  switch (k & 3) {
    case 0: *s = sn, *c = cs; break;
    case 1: *s = cs, *c = -sn; break;
    case 2: *s = -sn, *c = -cs; break;
    default: *s = -cs, *c = sn; break;
  }
}

namespace {

struct Frame {
  double eye[3], right[3], up[3], fwd[3];
  double centre, scale;  // pixel = centre +/- scale * (x or y) [/ z]
  double near;
  bool perspective;
};

Frame camera_frame(const Camera& cam, int side) {
  double sa, ca, se, ce, sf, cf;
  sin_cos_deg(cam.azimuth_deg, &sa, &ca);
  sin_cos_deg(cam.elevation_deg, &se, &ce);
  sin_cos_deg(0.5 * cam.fov_deg, &sf, &cf);
  const double d[3] = {ce * sa, se, ce * ca};  // from the target towards the eye
  Frame f{};
  for (int i = 0; i < 3; ++i) f.fwd[i] = -d[i];
  f.right[0] = ca, f.right[1] = 0, f.right[2] = -sa;
  f.up[0] = -se * sa, f.up[1] = ce, f.up[2] = -se * ca;
  const double target[3] = {0, cam.target_y, 0};
  for (int i = 0; i < 3; ++i) f.eye[i] = target[i] + cam.distance * d[i];
  f.centre = 0.5 * side;
  f.perspective = cam.perspective;
  f.scale = cam.perspective ? f.centre * (cf / sf) : f.centre / cam.half_width;
  f.near = kNearFraction * cam.distance;
  return f;
}

// A vertex on the screen: snapped pixel coordinates, and the depth key the
// buffer compares, larger = nearer: 1/z under perspective (linear on the
// screen), -z orthographically.
struct ScreenVertex {
  double x, y, key;
  bool ok;  // inside the near plane and the screen bound
};

void project(const Mesh& mesh, const Frame& f, std::vector<ScreenVertex>* out) {
  out->resize(mesh.vertices.size());
  for (size_t i = 0; i < mesh.vertices.size(); ++i) {
    const Vec3& p = mesh.vertices[i];
    const double q[3] = {double(p[0]) - f.eye[0], double(p[1]) - f.eye[1], double(p[2]) - f.eye[2]};
    const double x = q[0] * f.right[0] + q[1] * f.right[1] + q[2] * f.right[2];
    const double y = q[0] * f.up[0] + q[1] * f.up[1] + q[2] * f.up[2];
    const double z = q[0] * f.fwd[0] + q[1] * f.fwd[1] + q[2] * f.fwd[2];
    ScreenVertex& v = (*out)[i];
    double sx, sy;
    if (f.perspective) {
      const double w = 1.0 / z;
      sx = f.centre + f.scale * (x * w);
      sy = f.centre - f.scale * (y * w);
      v.key = w;
      v.ok = z >= f.near;  // false for NaN too
    } else {
      sx = f.centre + f.scale * x;
      sy = f.centre - f.scale * y;
      v.key = -z;
      v.ok = true;
    }
    // Written so that NaN fails: snap() and the exactness argument need the bound.
    v.ok = v.ok && std::fabs(sx) <= kScreenBound && std::fabs(sy) <= kScreenBound;
    v.x = v.ok ? snap(sx) : 0;
    v.y = v.ok ? snap(sy) : 0;
  }
}

// The unit outward normal (b - a) x (c - a), world frame.
Vec3 unit_normal(const Vec3& a, const Vec3& b, const Vec3& c) {
  const double u[3] = {double(b[0]) - a[0], double(b[1]) - a[1], double(b[2]) - a[2]};
  const double v[3] = {double(c[0]) - a[0], double(c[1]) - a[1], double(c[2]) - a[2]};
  const double n[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]};
  const double len = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (!(len > 0)) return {0, 0, 0};
  return {float(n[0] / len), float(n[1] / len), float(n[2] / len)};
}

// Edge p -> q of a triangle wound so that its interior is on the positive side.
// Value at pixel centre (x, y): (q.x - p.x)(y - p.y) - (q.y - p.y)(x - p.x),
// less 2^-24 unless the edge is a top or left one; stepping one column adds
// step_c, one row step_r. Values are multiples of 2^-24, so "value - 2^-24 >= 0"
// is "value > 0", exactly, and a pixel is inside when all three are >= 0.
struct Edge {
  double step_c, step_r, at;  // at: the value at the first pixel of the box
  double shift;               // 0 or 2^-24, taken off the edge function
};

Edge make_edge(const ScreenVertex& p, const ScreenVertex& q, double x0, double y0) {
  const double dx = q.x - p.x, dy = q.y - p.y;
  // Top-left rule, in screen coordinates (y down) with this winding: a top edge
  // is horizontal and runs to the right, a left edge runs up. Centres exactly
  // on such an edge are in.
  const bool top_left = dy < 0 || (dy == 0 && dx > 0);
  const double shift = top_left ? 0.0 : 0x1p-24;
  return {-dy, dx, dx * (y0 - p.y) - dy * (x0 - p.x) - shift, shift};
}

}  // namespace

void rasterize(const Mesh& mesh, const Camera& cam, int side, Surface* out) {
  rasterize(mesh, cam, side, out, nullptr);
}

void rasterize(const Mesh& mesh, const Camera& cam, int side, Surface* out, RasterStats* stats) {
  if (side < 1 || side > kMaxSide)
    throw std::invalid_argument("rasterize: side " + std::to_string(side) + " outside [1, " +
                                std::to_string(kMaxSide) + "]");
  const size_t n_pix = size_t(side) * size_t(side);
  out->side = side;
  const Frame f = camera_frame(cam, side);
  // The depth buffer holds the key until the end, starting from "nothing":
  // perspective keys 1/z are all positive (z >= near), so 0 is below them.
  out->depth.assign(n_pix, f.perspective ? 0.f : -INFINITY);
  out->normal.assign(n_pix, Vec3{0, 0, 0});
  float* key_buf = out->depth.data();
  Vec3* normal_buf = out->normal.data();

  std::vector<ScreenVertex> sv;
  project(mesh, f, &sv);

  RasterStats st;
  for (const auto& t : mesh.triangles) {
    const ScreenVertex& a = sv[size_t(t[0])];
    const ScreenVertex* b = &sv[size_t(t[1])];
    const ScreenVertex* c = &sv[size_t(t[2])];
    if (!(a.ok && b->ok && c->ok)) {
      ++st.skipped;
      continue;
    }
    // Twice the signed area, exact. Counter-clockwise seen from outside in the
    // y-up world is negative here, as rows run down; flipping b and c makes
    // the interior the positive side of every edge.
    const double area = (b->x - a.x) * (c->y - a.y) - (b->y - a.y) * (c->x - a.x);
    if (!(area < 0)) {
      ++st.culled;
      continue;
    }
    std::swap(b, c);
    // Pixels whose centre (col + 0.5, row + 0.5) can lie inside.
    const double xmin = std::min({a.x, b->x, c->x}), xmax = std::max({a.x, b->x, c->x});
    const double ymin = std::min({a.y, b->y, c->y}), ymax = std::max({a.y, b->y, c->y});
    const int col0 = std::max(0, ceil_bounded(xmin - 0.5)), col1 = std::min(side - 1, floor_bounded(xmax - 0.5));
    const int row0 = std::max(0, ceil_bounded(ymin - 0.5)), row1 = std::min(side - 1, floor_bounded(ymax - 0.5));
    ++st.drawn;
    if (col0 > col1 || row0 > row1) continue;

    const double x0 = col0 + 0.5, y0 = row0 + 0.5;
    // Edge i faces vertex i: its value over the area is vertex i's barycentric weight.
    Edge e0 = make_edge(*b, *c, x0, y0), e1 = make_edge(*c, a, x0, y0), e2 = make_edge(a, *b, x0, y0);
    const double inv_area = 1.0 / -area;
    const double ka = a.key * inv_area, kb = b->key * inv_area, kc = c->key * inv_area;
    const double k_shift = e0.shift * ka + e1.shift * kb + e2.shift * kc;  // puts the shifts back

    const Vec3 n = unit_normal(mesh.vertices[size_t(t[0])], mesh.vertices[size_t(t[1])], mesh.vertices[size_t(t[2])]);
    int64_t fragments = 0;
    for (int r = row0; r <= row1; ++r) {
      double w0 = e0.at, w1 = e1.at, w2 = e2.at;
      const size_t base = size_t(r) * size_t(side);
      for (int col = col0; col <= col1; ++col) {
        // One test, not three: which pixels of a small triangle are inside is
        // what a branch predictor cannot guess.
        if (std::min(std::min(w0, w1), w2) >= 0) {
          ++fragments;
          const float key = float(w0 * ka + w1 * kb + w2 * kc + k_shift);
          const size_t i = base + size_t(col);
          if (key > key_buf[i]) {
            key_buf[i] = key;
            normal_buf[i] = n;
          }
        }
        w0 += e0.step_c, w1 += e1.step_c, w2 += e2.step_c;
      }
      e0.at += e0.step_r, e1.at += e1.step_r, e2.at += e2.step_r;
    }
    st.fragments += fragments;
  }

  // Keys back to view-space depth. The empty key (0 = 1/infinity, or -infinity)
  // turns into INFINITY by the same arithmetic, so the loop has no branch.
  if (f.perspective) {
    for (size_t i = 0; i < n_pix; ++i) key_buf[i] = 1.f / key_buf[i];
  } else {
    for (size_t i = 0; i < n_pix; ++i) key_buf[i] = -key_buf[i];
  }
  if (stats) *stats = st;
}

void shade(const Surface& s, const Light& light, float albedo, float background, float* img) {
  const size_t n = size_t(s.side) * size_t(s.side);
  const float d0 = light.direction[0], d1 = light.direction[1], d2 = light.direction[2];
  const float* depth = s.depth.data();
  const Vec3* normal = s.normal.data();
  // Every pixel lit, then the uncovered ones replaced: no branch, so the
  // compiler vectorises it; the covered pixels' arithmetic is the same.
  for (size_t i = 0; i < n; ++i) {
    const Vec3& nv = normal[i];
    const float cosine = std::max(0.f, nv[0] * d0 + nv[1] * d1 + nv[2] * d2);
    const float lit = std::min(1.f, albedo * (light.ambient + light.intensity * cosine));
    img[i] = depth[i] != INFINITY ? lit : background;
  }
}

}  // namespace vg
