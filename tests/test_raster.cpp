// The rasteriser (data/raster.h): the depth test, the top-left rule on shared
// edges, the camera conventions the header pins, shading's exact values, bitwise
// repeatability, and a whole scene against tests/raster_reference.py, a numpy
// ray caster written from the header's conventions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/mesh.h"
#include "data/raster.h"
#include "tests/test_util.h"

namespace vg {
namespace {

Vec3 sub(const Vec3& a, const Vec3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
double dot(const Vec3& a, const Vec3& b) { return double(a[0]) * b[0] + double(a[1]) * b[1] + double(a[2]) * b[2]; }
Vec3 cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

// A convex polygon as a triangle fan, wound so that (b - a) x (c - a) points
// away from `inside` (the mesh convention, whatever order the corners come in).
void add_face(Mesh* m, std::vector<Vec3> poly, const Vec3& inside) {
  const Vec3 n = cross(sub(poly[1], poly[0]), sub(poly[2], poly[0]));
  if (dot(n, sub(poly[0], inside)) < 0) std::reverse(poly.begin(), poly.end());
  const auto base = int32_t(m->vertices.size());
  m->vertices.insert(m->vertices.end(), poly.begin(), poly.end());
  for (int32_t i = 1; i + 1 < int32_t(poly.size()); ++i) m->triangles.push_back({base, base + i, base + i + 1});
}

Mesh box(const Vec3& lo, const Vec3& hi) {
  Mesh m;
  const Vec3 mid{(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2};
  for (int axis = 0; axis < 3; ++axis)
    for (float at : {lo[axis], hi[axis]}) {
      const int u = (axis + 1) % 3, v = (axis + 2) % 3;
      std::vector<Vec3> q(4);
      const float us[4] = {lo[u], hi[u], hi[u], lo[u]}, vs[4] = {lo[v], lo[v], hi[v], hi[v]};
      for (int k = 0; k < 4; ++k) {
        q[size_t(k)][size_t(axis)] = at;
        q[size_t(k)][size_t(u)] = us[k];
        q[size_t(k)][size_t(v)] = vs[k];
      }
      add_face(&m, q, mid);
    }
  return m;
}

// A square in the plane z = z0 facing +z, [x0, x1] x [y0, y1].
Mesh sheet(float x0, float x1, float y0, float y1, float z0) {
  Mesh m;
  add_face(&m, {{x0, y0, z0}, {x1, y0, z0}, {x1, y1, z0}, {x0, y1, z0}}, {0, 0, z0 - 1});
  return m;
}

// The same square tiled by cells x cells quads, each split into two triangles
// (diagonals alternating); interior vertices moved by up to `jitter` cells in x
// and in y, which below 0.25 cannot fold a triangle over (the tests check none is
// culled).
Mesh tiled_sheet(float lo, float hi, int cells, float jitter, uint32_t seed = 7) {
  const float h = (hi - lo) / float(cells);
  std::vector<Vec3> grid(size_t(cells + 1) * size_t(cells + 1));
  uint32_t s = seed;
  auto uniform = [&s] {  // in [-1, 1), a fixed LCG: the test needs no RNG of its own
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) / float(1u << 23) - 1.f;
  };
  for (int j = 0; j <= cells; ++j)
    for (int i = 0; i <= cells; ++i) {
      float x = lo + float(i) * h, y = lo + float(j) * h;
      if (i > 0 && i < cells && j > 0 && j < cells) x += jitter * h * uniform(), y += jitter * h * uniform();
      grid[size_t(j) * size_t(cells + 1) + size_t(i)] = {x, y, 0};
    }
  Mesh m;
  m.vertices = grid;
  auto at = [cells](int i, int j) { return int32_t(j * (cells + 1) + i); };
  for (int j = 0; j < cells; ++j)
    for (int i = 0; i < cells; ++i) {
      const int32_t a = at(i, j), b = at(i + 1, j), c = at(i + 1, j + 1), d = at(i, j + 1);  // CCW seen from +z
      if ((i + j) % 2) m.triangles.push_back({a, b, c}), m.triangles.push_back({a, c, d});
      else m.triangles.push_back({a, b, d}), m.triangles.push_back({b, c, d});
    }
  return m;
}

Camera front(bool perspective) {
  Camera c;
  c.azimuth_deg = 0, c.elevation_deg = 0, c.perspective = perspective;
  return c;
}

int count_covered(const Surface& s) {
  int n = 0;
  for (int i = 0; i < s.side * s.side; ++i) n += s.covered(i);
  return n;
}

int count_normal(const Surface& s, const Vec3& n) {
  int k = 0;
  for (int i = 0; i < s.side * s.side; ++i) k += s.covered(i) && s.normal[size_t(i)] == n;
  return k;
}

bool same_bytes(const Surface& a, const Surface& b) {
  return a.side == b.side && a.depth.size() == b.depth.size() && a.normal.size() == b.normal.size() &&
         std::memcmp(a.depth.data(), b.depth.data(), a.depth.size() * sizeof(float)) == 0 &&
         std::memcmp(a.normal.data(), b.normal.data(), a.normal.size() * sizeof(Vec3)) == 0;
}

// ---------------------------------------------------------------- depth test

TEST(Raster, NearFaceHidesFarFaceInEitherOrder) {
  const Mesh near = sheet(-0.5f, 0.5f, -0.5f, 0.5f, 0.5f), far = sheet(-1, 1, -1, 1, -0.5f);
  for (bool persp : {true, false}) {
    SCOPED_TRACE(persp ? "perspective" : "orthographic");
    Mesh near_first = near, far_first = far;
    near_first.append(far);
    far_first.append(near);
    Surface s1, s2;
    RasterStats st;
    rasterize(near_first, front(persp), 64, &s1, &st);
    rasterize(far_first, front(persp), 64, &s2);
    EXPECT_TRUE(same_bytes(s1, s2));
    EXPECT_GT(st.fragments, count_covered(s1));  // the faces did overlap
    // The centre shows the near face (distance 6 - 0.5), a corner of the far face's
    // visible ring the far one (6 + 0.5).
    const int centre = 32 * 64 + 32, ring = 32 * 64 + (persp ? 14 : 8);
    EXPECT_NEAR(s1.depth[centre], 5.5f, 1e-5f);
    EXPECT_NEAR(s1.depth[ring], 6.5f, 1e-5f);
    EXPECT_NEAR(s2.depth[centre], 5.5f, 1e-5f);
  }
}

TEST(Raster, ClosedBoxShowsOnlyItsNearFaces) {
  // From azimuth 0, elevation 0 only the +z face is visible, at depth 6 - 0.5.
  const Mesh b = box({-0.5f, -0.5f, -0.5f}, {0.5f, 0.5f, 0.5f});
  Surface s;
  RasterStats st;
  rasterize(b, front(true), 48, &s, &st);
  EXPECT_EQ(count_normal(s, Vec3{0, 0, 1}), count_covered(s));
  EXPECT_GT(count_covered(s), 100);
  EXPECT_NEAR(s.depth[24 * 48 + 24], 5.5f, 1e-5f);
  EXPECT_EQ(st.drawn, 2);  // the other ten triangles face away or are edge-on
  EXPECT_EQ(st.culled, 10);
}

// ---------------------------------------------------------- the top-left rule

// Orthographic, 32 pixels over 32 units: pixel centres sit at half-integers, so a
// grid of half-integer vertices puts edges (horizontal, vertical, diagonal)
// through pixel centres everywhere. The square [-10.5, 9.5]^2 then holds 20 x 20
// pixels: its top and left sides' centres in, its bottom and right sides' out.
Camera unit_pixels() {
  Camera c = front(false);
  c.half_width = 16;
  return c;
}

TEST(Raster, TwoTrianglesFormingASquareDrawEachPixelOnce) {
  Surface s;
  RasterStats st;
  rasterize(sheet(-10.5f, 9.5f, -10.5f, 9.5f, 0), unit_pixels(), 32, &s, &st);
  EXPECT_EQ(st.drawn, 2);
  EXPECT_EQ(st.fragments, 400);  // the diagonal through 20 centres, each drawn once
  EXPECT_EQ(count_covered(s), 400);
  // Column c's centre is at x = c + 0.5 - 16, row r's at y = 16 - (r + 0.5).
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      EXPECT_EQ(s.covered(r * 32 + c), r >= 6 && r <= 25 && c >= 5 && c <= 24) << r << " " << c;
}

TEST(Raster, ATilingDrawsItsAreaExactlyOnce) {
  // 40 x 40 cells of half a pixel: 3200 triangles, vertices at centres and corners.
  {
    Surface s;
    RasterStats st;
    rasterize(tiled_sheet(-10.5f, 9.5f, 40, 0), unit_pixels(), 32, &s, &st);
    EXPECT_EQ(st.drawn, 3200);
    EXPECT_EQ(st.fragments, 400);
    EXPECT_EQ(count_covered(s), 400);
  }
  // Jittered interior vertices: shared edges at arbitrary slopes. The square's
  // border avoids pixel centres (x = +-1 at 38.4 pixels from the middle): the
  // analytic count is the centres inside, 76 x 76.
  Camera c = front(false);
  c.half_width = 1.25;
  int inside = 0;
  for (int k = 0; k < 96; ++k) inside += std::fabs(((k + 0.5) / 96 * 2 - 1) * 1.25) < 1;
  ASSERT_EQ(inside, 76);
  for (uint32_t seed : {1u, 2u, 3u}) {
    Surface s;
    RasterStats st;
    rasterize(tiled_sheet(-1, 1, 16, 0.2f, seed), c, 96, &s, &st);
    EXPECT_EQ(st.drawn, 512);
    EXPECT_EQ(st.fragments, inside * inside) << seed;
    EXPECT_EQ(count_covered(s), inside * inside) << seed;
  }
}

TEST(Raster, ATilingInPerspectiveHasNoHoleAndNoOverlap) {
  Camera c;
  c.azimuth_deg = 25, c.elevation_deg = 35, c.distance = 4;
  for (uint32_t seed : {4u, 5u}) {
    Surface s;
    RasterStats st;
    rasterize(tiled_sheet(-1, 1, 24, 0.2f, seed), c, 96, &s, &st);
    ASSERT_EQ(st.drawn, 2 * 24 * 24);
    EXPECT_EQ(st.fragments, count_covered(s));  // no pixel drawn twice
    EXPECT_GT(count_covered(s), 1500);
    // The square projects to a convex quadrilateral: each row's and each column's
    // coverage is one run, so a dropped pixel inside shows as a gap.
    for (int line = 0; line < 96; ++line)
      for (bool rows : {true, false}) {
        int first = -1, last = -1, n = 0;
        for (int k = 0; k < 96; ++k) {
          const int i = rows ? line * 96 + k : k * 96 + line;
          if (!s.covered(i)) continue;
          if (first < 0) first = k;
          last = k, ++n;
        }
        if (n) {
          EXPECT_EQ(n, last - first + 1) << (rows ? "row " : "column ") << line << " seed " << seed;
        }
      }
  }
}

// ----------------------------------------------------------- the conventions

// Where a small box's pixels lie relative to the image centre: mean column and row.
std::pair<double, double> where(const Vec3& at, const Camera& cam, int side = 64) {
  const float h = 0.15f;
  Surface s;
  rasterize(box({at[0] - h, at[1] - h, at[2] - h}, {at[0] + h, at[1] + h, at[2] + h}), cam, side, &s);
  double sc = 0, sr = 0;
  int n = 0;
  for (int r = 0; r < side; ++r)
    for (int c = 0; c < side; ++c)
      if (s.covered(r * side + c)) sc += c + 0.5, sr += r + 0.5, ++n;
  EXPECT_GT(n, 0);
  return {sc / n - side / 2.0, sr / n - side / 2.0};
}

TEST(Raster, AzimuthTurnsFromPlusZTowardsPlusX) {
  for (bool persp : {true, false}) {
    SCOPED_TRACE(persp ? "perspective" : "orthographic");
    Camera c = front(persp);
    EXPECT_GT(where({1, 0, 0}, c).first, 5);   // +x on the right at azimuth 0
    EXPECT_LT(where({0, 1, 0}, c).second, -5);  // +y above the centre (rows run down)
    EXPECT_NEAR(where({0, 0, 1}, c).first, 0, 0.5);
    c.azimuth_deg = 90;  // camera on +x: +z on the left, +x in the middle
    EXPECT_LT(where({0, 0, 1}, c).first, -5);
    EXPECT_NEAR(where({1, 0, 0}, c).first, 0, 0.5);
    c.azimuth_deg = 180;
    EXPECT_LT(where({1, 0, 0}, c).first, -5);
    c.azimuth_deg = 0, c.elevation_deg = 60;  // looking down: +z (nearer) below the centre
    EXPECT_GT(where({0, 0, 1}, c).second, 5);
    EXPECT_LT(where({0, 1, 0}, c).second, -5);
  }
}

TEST(Raster, ElevationBringsTheTopFaceIntoView) {
  const Mesh b = box({-0.5f, -0.5f, -0.5f}, {0.5f, 0.5f, 0.5f});
  const Vec3 top{0, 1, 0}, bottom{0, -1, 0};
  for (bool persp : {true, false}) {
    SCOPED_TRACE(persp ? "perspective" : "orthographic");
    Camera c = front(persp);
    c.azimuth_deg = 30;
    auto faces = [&](double elevation, const Vec3& n) {
      c.elevation_deg = elevation;
      Surface s;
      rasterize(b, c, 64, &s);
      return count_normal(s, n);
    };
    if (!persp) {
      EXPECT_EQ(faces(0, top), 0);  // edge-on orthographically
    }
    EXPECT_GT(faces(10, top), 0);
    EXPECT_GT(faces(60, top), 2 * faces(10, top));
    EXPECT_EQ(faces(-20, top), 0);
    EXPECT_GT(faces(-20, bottom), 0);
    EXPECT_EQ(faces(20, bottom), 0);
  }
}

TEST(Raster, PerspectiveDrawsTheNearEdgeLarger) {
  // A slab's top face from above and in front: its near edge (z = +1) is the
  // lowest row of top-face pixels, its far edge the highest.
  const Mesh slab = box({-1, -0.1f, -1}, {1, 0.1f, 1});
  for (bool persp : {true, false}) {
    Camera c = front(persp);
    c.elevation_deg = 30, c.half_width = 1.6;
    Surface s;
    rasterize(slab, c, 96, &s);
    std::vector<int> width;
    for (int r = 0; r < 96; ++r) {
      int w = 0;
      for (int col = 0; col < 96; ++col) w += s.covered(r * 96 + col) && s.normal[size_t(r * 96 + col)] == Vec3{0, 1, 0};
      if (w) width.push_back(w);
    }
    ASSERT_GT(width.size(), 10u);
    if (persp) {
      EXPECT_GT(width.back(), width.front() + 10);
    } else {
      EXPECT_NEAR(width.back(), width.front(), 1);
    }
  }
}

TEST(Raster, FieldOfViewSpansTheWholeImage) {
  // fov is the full angle across the image: at distance 6 and fov 24, a square
  // of half-size 6 tan(12) / 2 in the target's plane covers the middle half, its
  // border on pixel boundaries 16 and 48 of 64. Orthographic: half_width likewise.
  Camera c = front(true);
  const float h = float(6 * std::tan(12 * 3.14159265358979323846 / 180) / 2);
  Camera o = front(false);
  o.half_width = 2;
  for (const auto& [cam, half] : {std::pair{c, h}, std::pair{o, 1.f}}) {
    for (float ty : {0.f, 0.7f}) {
      Camera cc = cam;
      cc.target_y = ty;  // the target's plane moves with it: the image stays put
      Surface s;
      rasterize(sheet(-half, half, ty - half, ty + half, 0), cc, 64, &s);
      EXPECT_EQ(count_covered(s), 32 * 32);
      for (int r = 0; r < 64; ++r)
        for (int col = 0; col < 64; ++col)
          ASSERT_EQ(s.covered(r * 64 + col), r >= 16 && r < 48 && col >= 16 && col < 48) << r << " " << col;
    }
  }
}

TEST(Raster, DepthIsViewSpaceDistanceAlongTheViewDirection) {
  // A face 1 unit towards the camera from the target, seen straight on at
  // distance 6: depth 5 at every pixel (perspective too: z, not ray length).
  for (bool persp : {true, false}) {
    Surface s;
    rasterize(sheet(-1, 1, -1, 1, 1), front(persp), 32, &s);
    ASSERT_GT(count_covered(s), 0);
    for (int i = 0; i < 32 * 32; ++i)
      if (s.covered(i)) {
        ASSERT_NEAR(s.depth[size_t(i)], 5.f, 2e-6f) << i;
      } else {
        ASSERT_EQ(s.depth[size_t(i)], INFINITY);
      }
  }
  // A tilted face: depth grows linearly in z along it, so the perspective
  // interpolation must be of 1/z. Its middle row, column by column, against the
  // ray through each pixel centre meeting the plane z = x (seen from the front).
  Mesh tilt;
  add_face(&tilt, {{-1, -1, -1}, {1, -1, 1}, {1, 1, 1}, {-1, 1, -1}}, {1, 0, -1});
  const Camera c = front(true);
  Surface s;
  rasterize(tilt, c, 64, &s);
  const double t = std::tan(12 * 3.14159265358979323846 / 180);
  int checked = 0;
  for (int col = 0; col < 64; ++col) {
    const size_t i = size_t(31 * 64 + col);
    if (!s.covered(int(i))) continue;
    // The ray from the eye (0, 0, 6) through the centre reaches x = u d at depth
    // d, where z = 6 - d; on the plane z = x that is d = 6 / (1 + u).
    const double u = ((col + 0.5) / 32 - 1) * t;
    EXPECT_NEAR(s.depth[i], 6 / (1 + u), 1e-4) << col;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(Raster, BackFacesAndTheNearPlane) {
  const Mesh front_sheet = sheet(-1, 1, -1, 1, 0);
  Camera c = front(true);
  c.azimuth_deg = 180;  // from behind: culled
  Surface s;
  RasterStats st;
  rasterize(front_sheet, c, 32, &s, &st);
  EXPECT_EQ(count_covered(s), 0);
  EXPECT_EQ(st.culled, 2);
  // A triangle reaching behind the eye is skipped under perspective, drawn orthographically.
  Mesh through;
  through.vertices = {{-1, -1, 0}, {1, -1, 0}, {0, 1, 8}};
  through.triangles = {{0, 1, 2}};
  c.azimuth_deg = 0;
  rasterize(through, c, 32, &s, &st);
  EXPECT_EQ(st.skipped, 1);
  EXPECT_EQ(count_covered(s), 0);
  rasterize(through, front(false), 32, &s, &st);
  EXPECT_EQ(st.skipped, 0);
  EXPECT_GT(count_covered(s), 0);
  EXPECT_THROW(rasterize(front_sheet, c, 0, &s), std::invalid_argument);
  EXPECT_THROW(rasterize(front_sheet, c, 4096, &s), std::invalid_argument);
}

TEST(Raster, CameraTrigonometryIsAccurateAndExactAtRightAngles) {
  // The camera's own sine and cosine (same bits on every machine) against libm
  // in long double, on the angle reduced exactly to one turn first (a double
  // radian of -725 degrees is itself 1e-15 off).
  double s, c;
  for (double deg = -725; deg <= 725; deg += 0.37) {
    sin_cos_deg(deg, &s, &c);
    const long double rad = std::fmod(deg, 360.0) * 3.14159265358979323846264338L / 180;
    ASSERT_NEAR(s, double(std::sin(rad)), 1e-15) << deg;
    ASSERT_NEAR(c, double(std::cos(rad)), 1e-15) << deg;
  }
  const double exact[][3] = {{0, 0, 1}, {90, 1, 0}, {180, 0, -1}, {270, -1, 0}, {-90, -1, 0}, {450, 1, 0}};
  for (const auto& e : exact) {
    sin_cos_deg(e[0], &s, &c);
    EXPECT_EQ(s, e[1]) << e[0];
    EXPECT_EQ(c, e[2]) << e[0];
  }
  sin_cos_deg(INFINITY, &s, &c);
  EXPECT_TRUE(std::isnan(s) && std::isnan(c));
}

// ------------------------------------------------------------------- shading

TEST(Raster, ShadeGivesLambertPlusAmbientExactly) {
  Surface s;
  s.side = 3;
  s.depth = {1, 1, 1, 1, 1, 1, INFINITY, 1, 1};
  const float c60 = 0.866025403784f;  // light 60 degrees off the normal (0, 1, 0): cosine 0.5 exactly
  s.normal = {{0, 1, 0}, {0, -1, 0}, {1, 0, 0}, {0, 0, 1}, {-1, 0, 0}, {0, 1, 0}, {0, 0, 0}, {0, 1, 0}, {0, 1, 0}};
  Light l;
  l.direction = {0, 1, 0}, l.intensity = 1.f, l.ambient = 0.2f;
  std::vector<float> img(9, -1);
  shade(s, l, 0.8f, 0.25f, img.data());
  EXPECT_EQ(img[0], 0.8f * (0.2f + 1.f));  // facing the light
  EXPECT_FLOAT_EQ(img[0], 0.96f);
  EXPECT_EQ(img[1], 0.8f * 0.2f);  // facing away: ambient only
  EXPECT_EQ(img[2], 0.8f * 0.2f);  // perpendicular
  EXPECT_EQ(img[6], 0.25f);        // uncovered: the background, as given
  l.direction = {c60, 0.5f, 0};
  shade(s, l, 0.8f, 0.25f, img.data());
  EXPECT_EQ(img[0], 0.8f * (0.2f + 0.5f));
  EXPECT_FLOAT_EQ(img[0], 0.56f);
  EXPECT_EQ(img[4], 0.8f * 0.2f);  // n = -x, away from the light's +x part
  EXPECT_EQ(img[2], 0.8f * (0.2f + 1.f * c60));
  l.direction = {0, 1, 0};
  shade(s, l, 1.5f, 0.25f, img.data());  // 1.5 x 1.2: clamped
  EXPECT_EQ(img[0], 1.f);
  EXPECT_EQ(img[1], 1.5f * 0.2f);
  EXPECT_EQ(img[6], 0.25f);
}

TEST(Raster, RasterisedNormalsAreExactlyTheFaces) {
  // Axis-aligned faces give exact unit normals, so shading a box lit from above
  // gives albedo (ambient + intensity) on the whole top face, bit for bit.
  Camera c = front(true);
  c.azimuth_deg = 30, c.elevation_deg = 40;
  Surface s;
  rasterize(box({-0.5f, -0.5f, -0.5f}, {0.5f, 0.5f, 0.5f}), c, 48, &s);
  std::vector<float> img(48 * 48);
  shade(s, Light{}, 0.7f, 0.f, img.data());
  int top = 0;
  for (int i = 0; i < 48 * 48; ++i) {
    if (!s.covered(i)) {
      ASSERT_EQ(img[size_t(i)], 0.f);
      continue;
    }
    const Vec3& n = s.normal[size_t(i)];
    const bool axis = std::fabs(n[0]) + std::fabs(n[1]) + std::fabs(n[2]) == 1.f;
    ASSERT_TRUE(axis) << n[0] << " " << n[1] << " " << n[2];
    const bool lit = n == Vec3{0, 1, 0};
    top += lit;
    // The side faces are perpendicular to the light: ambient only.
    ASSERT_EQ(img[size_t(i)], lit ? 0.7f * (0.2f + 1.f) : 0.7f * 0.2f) << i;
  }
  EXPECT_GT(top, 50);
}

// --------------------------------------------------------------- determinism

TEST(Raster, SameInputsGiveTheSameBytes) {
  // Random overlapping triangles at random orientations: ties and near-ties in depth.
  Mesh m;
  uint32_t s = 11;
  auto u = [&s] {
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) / float(1u << 23) - 1.f;
  };
  for (int t = 0; t < 500; ++t) {
    const auto base = int32_t(m.vertices.size());
    for (int k = 0; k < 3; ++k) m.vertices.push_back({u(), u(), u()});
    m.triangles.push_back({base, base + 1, base + 2});
  }
  Camera c;
  c.azimuth_deg = 37, c.elevation_deg = 21;
  Surface a, b, reused;
  rasterize(box({-1, -1, -1}, {1, 1, 1}), c, 96, &reused);  // a Surface already filled
  rasterize(m, c, 96, &a);
  rasterize(m, c, 96, &b);
  rasterize(m, c, 96, &reused);
  EXPECT_GT(count_covered(a), 1000);
  EXPECT_TRUE(same_bytes(a, b));
  EXPECT_TRUE(same_bytes(a, reused));
  std::vector<float> ia(96 * 96), ib(96 * 96);
  shade(a, Light{}, 0.9f, 0.1f, ia.data());
  shade(b, Light{}, 0.9f, 0.1f, ib.data());
  EXPECT_EQ(std::memcmp(ia.data(), ib.data(), ia.size() * sizeof(float)), 0);
}

// -------------------------------------------------- the independent reference

// A cube with a tetrahedron in front of it (each hides part of the other from
// some camera), at 24 x 24 under perspective and orthographic cameras, against
// tests/raster_reference.py: coverage exactly, depth and shading to tolerances
// that script's docstring states, away from triangle edges.
TEST(Raster, MatchesAnIndependentNumpyRayCaster) {
  const std::string python = vg::test::paths::python;
  if (std::system((python + " -c 'import numpy' >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no python3 with numpy";
  Mesh scene = box({-0.6f, -0.6f, -0.6f}, {0.6f, 0.6f, 0.6f});
  const std::vector<Vec3> tet = {{0.9f, -0.1f, 0.9f}, {0.1f, 0.0f, 1.2f}, {0.5f, 0.75f, 1.0f}, {0.45f, 0.25f, 1.55f}};
  const Vec3 tc{(tet[0][0] + tet[1][0] + tet[2][0] + tet[3][0]) / 4, (tet[0][1] + tet[1][1] + tet[2][1] + tet[3][1]) / 4,
                (tet[0][2] + tet[1][2] + tet[2][2] + tet[3][2]) / 4};
  for (int skip = 0; skip < 4; ++skip) {
    std::vector<Vec3> face;
    for (int k = 0; k < 4; ++k)
      if (k != skip) face.push_back(tet[size_t(k)]);
    add_face(&scene, face, tc);
  }
  struct View {
    double az, el, ty;
    bool persp;
  };
  const View views[] = {{30, 20, 0, true},   {-60, 45, 0.2, true}, {200, -15, 0, true}, {75, 5, -0.1, true},
                        {30, 20, 0, false},  {100, 70, 0, false},  {-140, 30, 0.3, false}};
  const int side = 24;
  const Light light{{0.48f, 0.8f, 0.36f}, 0.9f, 0.15f};
  const float albedo = 0.85f, background = 0.05f;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("viewgap_raster_ref_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json meta = {{"side", side},
                         {"vertices", scene.vertices},
                         {"triangles", scene.triangles},
                         {"light", {{"direction", light.direction}, {"intensity", light.intensity}, {"ambient", light.ambient}}},
                         {"albedo", albedo},
                         {"background", background},
                         {"cameras", nlohmann::json::array()}};
  for (size_t v = 0; v < std::size(views); ++v) {
    Camera c;
    c.azimuth_deg = views[v].az, c.elevation_deg = views[v].el, c.target_y = views[v].ty;
    c.perspective = views[v].persp, c.distance = 5, c.fov_deg = 30, c.half_width = 1.6;
    meta["cameras"].push_back({{"azimuth_deg", c.azimuth_deg}, {"elevation_deg", c.elevation_deg},
                               {"target_y", c.target_y}, {"perspective", c.perspective}, {"distance", c.distance},
                               {"fov_deg", c.fov_deg}, {"half_width", c.half_width}});
    Surface s;
    rasterize(scene, c, side, &s);
    std::vector<float> img(size_t(side * side));
    shade(s, light, albedo, background, img.data());
    for (const auto& [name, data] : {std::pair{"depth", s.depth.data()}, std::pair{"image", img.data()}}) {
      std::ofstream o(dir / (std::string(name) + "_" + std::to_string(v) + ".f32"), std::ios::binary);
      o.write(reinterpret_cast<const char*>(data), std::streamsize(side * side * sizeof(float)));
      ASSERT_TRUE(o.good());
    }
  }
  std::ofstream(dir / "meta.json") << meta.dump();
  const std::string cmd = python + " " + vg::test::paths::source_dir + "/tests/raster_reference.py " + dir.string() + " 2>&1";
  const test::Captured r = test::capture(cmd);
  EXPECT_EQ(r.status, 0) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vg
