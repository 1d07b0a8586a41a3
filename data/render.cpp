// The rendered shapes: their point sets and the blob renderer (data/render.h).
#include "data/render.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace vg {

namespace {

// numpy.linspace: start + i*step, with the last value exactly `stop`.
std::vector<float> linspace(double start, double stop, int n) {
  std::vector<float> out(static_cast<size_t>(n));
  const double step = n > 1 ? (stop - start) / (n - 1) : 0.0;
  for (int i = 0; i < n; ++i) out[size_t(i)] = float(i == n - 1 ? stop : start + i * step);
  return out;
}

constexpr double kMargin = 4.0, kSpan = 24.0, kSigma = 1.6;

}  // namespace

std::vector<Point3> shape_points(int cls) {
  std::vector<Point3> p;
  switch (cls) {
    case 0:  // cross: origin plus +-0.35, +-0.7 on each axis
      p.push_back({0, 0, 0});
      for (int axis = 0; axis < 3; ++axis)
        for (float v : {-0.7f, -0.35f, 0.35f, 0.7f}) {
          Point3 q{0, 0, 0};
          q[size_t(axis)] = v;
          p.push_back(q);
        }
      break;
    case 1:  // L
      for (float x : linspace(-0.8, 0.8, 9)) p.push_back({x, -0.7f, -0.6f});
      for (float y : linspace(-0.6, 0.8, 8)) p.push_back({-0.8f, y, -0.6f});
      for (float z : linspace(-0.5, 0.5, 5)) p.push_back({-0.8f, -0.7f, z});
      break;
    case 2:  // T; (0, 0.7, 0) is listed twice (bar and z prong), as in the seed
      for (float x : linspace(-0.8, 0.8, 9)) p.push_back({x, 0.7f, 0.0f});
      for (float y : linspace(-0.7, 0.6, 7)) p.push_back({0.0f, y, 0.0f});
      for (float z : linspace(-0.4, 0.4, 5)) p.push_back({0.0f, 0.7f, z});
      break;
    case 3:  // frame: 12 cube edges x 5 points; corners appear once per edge
      for (int axis = 0; axis < 3; ++axis)
        for (float a : {-0.7f, 0.7f})
          for (float b : {-0.7f, 0.7f})
            for (float t : linspace(-0.7, 0.7, 5)) {
              Point3 q{};
              q[size_t(axis)] = t;
              q[size_t((axis + 1) % 3)] = a;
              q[size_t((axis + 2) % 3)] = b;
              p.push_back(q);
            }
      break;
    case 4: {  // tripod: origin plus three prongs, d in linspace(0, 0.85, 6) without 0
      p.push_back({0, 0, 0});
      const std::vector<float> d = linspace(0.0, 0.85, 6);
      for (size_t i = 1; i < d.size(); ++i) p.push_back({d[i], 0, 0});
      for (size_t i = 1; i < d.size(); ++i) p.push_back({0, d[i], 0});
      for (size_t i = 1; i < d.size(); ++i) {
        const float m = -0.7f * d[i];
        p.push_back({m, m, m});
      }
      break;
    }
    default:
      break;
  }
  return p;
}

namespace {
// Points every `step` along the segment a -> b, a included, b excluded.
void segment(std::vector<Point3>& p, Point3 a, Point3 b, int n) {
  for (int i = 0; i < n; ++i) {
    const float t = float(i) / float(n);
    p.push_back({a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]), a[2] + t * (b[2] - a[2])});
  }
}
}  // namespace

// The asym set: y is the vertical axis (azimuth turns about it). Each shape's
// footprint in the x-z plane has no rotational symmetry, and each has its own
// height profile, so the five stay apart from every viewpoint.
std::vector<Point3> shape_points(int cls, ShapeSet set) {
  if (set == ShapeSet::seed) return shape_points(cls);
  std::vector<Point3> p;
  switch (cls) {
    case 0:  // hook: a post, an arm along +x at the top, a short drop at its end, a foot along +z
      segment(p, {-0.5f, -0.8f, -0.3f}, {-0.5f, 0.6f, -0.3f}, 8);
      segment(p, {-0.5f, 0.6f, -0.3f}, {0.6f, 0.6f, -0.3f}, 6);
      segment(p, {0.6f, 0.6f, -0.3f}, {0.6f, 0.2f, -0.3f}, 3);
      segment(p, {-0.5f, -0.8f, -0.3f}, {-0.5f, -0.8f, 0.5f}, 4);
      break;
    case 1:  // stairs: three rising steps along +x, the treads running back along -z
      for (int s = 0; s < 3; ++s) {
        const float x = -0.7f + 0.5f * float(s), y = -0.6f + 0.45f * float(s);
        segment(p, {x, y, 0.3f}, {x + 0.5f, y, 0.3f}, 3);
        segment(p, {x + 0.5f, y, 0.3f}, {x + 0.5f, y + 0.45f, 0.3f}, 2);
        segment(p, {x, y, 0.3f}, {x, y, 0.3f - 0.3f * float(s + 1)}, 2);
      }
      break;
    case 2:  // prongs: a stem and three unequal prongs at unequal angles
      segment(p, {0, -0.7f, 0}, {0, 0.3f, 0}, 5);
      segment(p, {0, 0.3f, 0}, {0.85f, 0.5f, 0}, 5);
      segment(p, {0, 0.3f, 0}, {0, 0.1f, 0.45f}, 3);
      segment(p, {0, 0.3f, 0}, {-0.5f, 0.75f, -0.5f}, 4);
      p.push_back({0.85f, 0.5f, 0});
      break;
    case 3:  // chair: a seat, a back on one side only, two legs of unequal length
      segment(p, {-0.5f, 0, -0.4f}, {0.5f, 0, -0.4f}, 5);
      segment(p, {0.5f, 0, -0.4f}, {0.5f, 0, 0.4f}, 4);
      segment(p, {0.5f, 0, 0.4f}, {-0.5f, 0, 0.4f}, 5);
      segment(p, {-0.5f, 0, -0.4f}, {-0.5f, 0.8f, -0.4f}, 4);   // the back's post
      segment(p, {-0.5f, 0.8f, -0.4f}, {-0.5f, 0.8f, 0.4f}, 4);  // and its rail
      segment(p, {0.5f, 0, 0.4f}, {0.5f, -0.8f, 0.4f}, 4);       // long leg
      segment(p, {0.5f, 0, -0.4f}, {0.5f, -0.4f, -0.4f}, 2);     // short leg
      break;
    case 4:  // helix: a rising spiral of shrinking radius over 1.5 turns
      for (int i = 0; i < 24; ++i) {
        const double t = 3.0 * std::numbers::pi * i / 23.0, r = 0.8 - 0.45 * i / 23.0;
        p.push_back({float(r * std::cos(t)), float(-0.8 + 1.5 * i / 23.0), float(r * std::sin(t))});
      }
      break;
    default:
      break;
  }
  return p;
}

namespace {
// Where a blob centred at c reaches: the pixels i in [lo, hi) of [0, side) with
// exp(-(i - c)^2 k) >= 2^-30. Outside, it would add less than 1e-9 to a pixel.
struct Reach {
  int lo, hi;
};
Reach blob_reach(double c, double k, int side) {
  const double radius = std::sqrt(30 * std::numbers::ln2 / k);  // 10.3 px at 32 x 32
  return {std::clamp(int(std::ceil(c - radius)), 0, side), std::clamp(int(std::floor(c + radius)) + 1, 0, side)};
}

// g[i] = scale exp(-(i - c)^2 k) for i in [lo, hi), from neighbour ratios:
// g[i+1] = g[i] r_i with r_i = exp(-(2 (i - c) + 1) k) = r_{i-1} exp(-2 k), so
// three exps instead of one per pixel. In double, the products' error after 96
// steps is < 1e-12 relative, far below the float they are stored in.
void gaussian_profile(double c, double k, double scale, Reach reach, float* g) {
  const double d = reach.lo - c;
  double gi = scale * std::exp(-d * d * k), ri = std::exp(-(2 * d + 1) * k);
  const double q = std::exp(-2 * k);
  for (int i = reach.lo; i < reach.hi; ++i) {
    g[i] = float(gi);
    gi *= ri;
    ri *= q;
  }
}

}  // namespace

// Renders `points` at (azimuth, elevation) into canvas x canvas (canvas < 0:
// side x side), values in [0, 1]: the 32 x 32 geometry (margin, span, blob
// width) scaled by side / 32, its side x side frame at the canvas's centre
// ((canvas - side) / 2 pixels in from each edge). Each
// point adds a separable Gaussian blob, the outer product of a row and a column
// profile over the blob's reach, accumulated in float in the points' order.
// `plane` moves each projected point (the blob's centre) in the image plane,
// about the image's centre; the blob itself keeps its shape (a point's spread
// is the camera's, not the object's). The identity leaves u, v untouched, so
// the seed's renders keep their bits.
void render_points(const std::vector<Point3>& points, double azimuth_deg, double elevation_deg, int side,
                   float* img, const PlaneTransform& plane, int canvas) {
  if (canvas < 0) canvas = side;
  const double offset = 0.5 * (canvas - side);  // where the frame starts on the canvas (0: it is the canvas)
  constexpr double deg = std::numbers::pi / 180.0;
  const double ca = std::cos(azimuth_deg * deg), sa = std::sin(azimuth_deg * deg);
  const double ce = std::cos(elevation_deg * deg), se = std::sin(elevation_deg * deg);
  const double scale = double(side) / kImageSide;
  const double margin = kMargin * scale, span = kSpan * scale, sigma = kSigma * scale;
  const double inv2s2 = 1.0 / (2.0 * sigma * sigma);
  std::vector<float> acc(size_t(canvas) * canvas, 0.f), ex(static_cast<size_t>(canvas)), ey(static_cast<size_t>(canvas));
  for (const Point3& q : points) {
    // p' = R_x(el) . R_y(az) . p
    const double x1 = ca * q[0] + sa * q[2], y1 = q[1], z1 = -sa * q[0] + ca * q[2];
    const double x = x1, y = ce * y1 - se * z1, z = se * y1 + ce * z1;
    double u = (x + 1) / 2 * span + margin, v = (1 - y) / 2 * span + margin;
    if (!plane.identity()) {
      const double c = margin + 0.5 * span, du = u - c, dv = v - c;  // the object frame's centre
      u = c + plane.a * du + plane.b * dv + plane.tx * scale;
      v = c + plane.c * du + plane.d * dv + plane.ty * scale;
    }
    if (offset != 0) u += offset, v += offset;  // skipped on the frame itself: its bits stay the seed's
    const double w = 0.6 + 0.4 * (z + 1) / 2;
    const Reach cols = blob_reach(u, inv2s2, canvas), rows = blob_reach(v, inv2s2, canvas);
    gaussian_profile(u, inv2s2, 1.0, cols, ex.data());
    gaussian_profile(v, inv2s2, w, rows, ey.data());
    for (int r = rows.lo; r < rows.hi; ++r) {
      const float a = ey[size_t(r)];
      float* row = acc.data() + size_t(r) * canvas;
      for (int c = cols.lo; c < cols.hi; ++c) row[c] += a * ex[size_t(c)];
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) img[i] = std::clamp(acc[i], 0.f, 1.f);
}

void render_clean(int cls, double azimuth_deg, double elevation_deg, float* img, ShapeSet set) {
  render_points(shape_points(cls, set), azimuth_deg, elevation_deg, kImageSide, img);
}

void render_clean(int cls, double azimuth_deg, double elevation_deg, const PlaneTransform& plane, float* img,
                  ShapeSet set, int canvas) {
  if (canvas < 1) throw std::invalid_argument("render_clean: a canvas of " + std::to_string(canvas) + " pixels");
  render_points(shape_points(cls, set), azimuth_deg, elevation_deg, kImageSide, img, plane, canvas);
}

PlaneTransform PlaneTransform::make(double rotation_deg, double scale, double shear, double tx, double ty) {
  const double t = rotation_deg * std::numbers::pi / 180.0, co = std::cos(t), si = std::sin(t);
  // R(t) . S(scale) . H(shear): shear x by y first, then scale, then rotate
  // (image rows grow downward, so a positive angle turns clockwise on screen).
  return {.a = scale * co, .b = scale * (co * shear - si), .c = scale * si, .d = scale * (si * shear + co),
          .tx = tx, .ty = ty};
}

}  // namespace vg
