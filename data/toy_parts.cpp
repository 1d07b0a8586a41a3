#include "data/toy_parts.h"

#include "data/raster.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace vg {

double sin_deg(double deg) {
  double s, c;
  sin_cos_deg(deg, &s, &c);
  return s;
}
double cos_deg(double deg) {
  double s, c;
  sin_cos_deg(deg, &s, &c);
  return c;
}
double tan_deg(double deg) {
  double s, c;
  sin_cos_deg(deg, &s, &c);
  return s / c;
}

namespace {
// x^e for e a power of two (2, 1, 1/2, 1/4, 1/8: loft's squareness 1 to 16)
// by squaring or square roots, each correctly rounded: no libm pow.
double power(double x, double e) {
  if (e >= 1) {
    for (; e > 1; e /= 2) x *= x;
    return x;
  }
  for (; e < 1; e *= 2) x = std::sqrt(x);
  return x;
}
}  // namespace
namespace {

using P3 = std::array<double, 3>;

Vec3 to_float(const P3& p) { return {float(p[0]), float(p[1]), float(p[2])}; }

// The mesh joining `rings` in order: each ring either holds n points or is a
// single point (a pole). Every full ring runs counter-clockwise seen from
// beyond the last ring looking back, i.e. with d the direction from one ring
// to the next, (next point - point) x d points out of the solid; then the
// side quads below and the end fans all face outwards. A full ring at either
// end is closed by a fan about its centroid.
Mesh join_rings(const std::vector<std::vector<P3>>& rings, int n) {
  Mesh m;
  std::vector<int32_t> base;
  for (const auto& ring : rings) {
    base.push_back(int32_t(m.vertices.size()));
    for (const auto& p : ring) m.vertices.push_back(to_float(p));
  }
  auto at = [&](size_t i, int j) { return rings[i].size() == 1 ? base[i] : base[i] + int32_t(j % n); };
  for (size_t i = 0; i + 1 < rings.size(); ++i) {
    const bool pole_here = rings[i].size() == 1, pole_next = rings[i + 1].size() == 1;
    if (pole_here && pole_next) throw std::invalid_argument("toy parts: two poles in a row");
    for (int j = 0; j < n; ++j) {
      const int32_t a = at(i, j), b = at(i, j + 1), c = at(i + 1, j + 1), d = at(i + 1, j);
      if (!pole_here) m.triangles.push_back({a, b, c});
      if (!pole_next) m.triangles.push_back({a, c, d});
    }
  }
  auto cap = [&](size_t i, bool at_start) {
    if (rings[i].size() == 1) return;
    P3 c{0, 0, 0};
    for (const auto& p : rings[i])
      for (int k = 0; k < 3; ++k) c[k] += p[k] / double(n);
    const auto centre = int32_t(m.vertices.size());
    m.vertices.push_back(to_float(c));
    for (int j = 0; j < n; ++j) {
      if (at_start) m.triangles.push_back({centre, at(i, j + 1), at(i, j)});
      else m.triangles.push_back({centre, at(i, j), at(i, j + 1)});
    }
  };
  cap(0, true);
  cap(rings.size() - 1, false);
  return m;
}

void check_segments(int segments, int least, const char* what) {
  if (segments < least)
    throw std::invalid_argument(std::string(what) + ": segments must be at least " + std::to_string(least));
}

// The profile {(r, y)} revolved about y, its rings stretched by sx along x
// and sz along z. Ring points (sx r cos t, y, -sz r sin t) for t rising run
// counter-clockwise seen from +y, the direction the profile climbs.
Mesh revolve(const std::vector<std::array<double, 2>>& profile, int segments, double sx, double sz) {
  check_segments(segments, 3, "lathe");
  if (profile.size() < 2) throw std::invalid_argument("lathe: the profile needs at least two points");
  std::vector<double> co(static_cast<size_t>(segments)), si(static_cast<size_t>(segments));
  for (int j = 0; j < segments; ++j) {
    sin_cos_deg(360.0 * j / segments, &si[size_t(j)], &co[size_t(j)]);
  }
  std::vector<std::vector<P3>> rings;
  for (size_t i = 0; i < profile.size(); ++i) {
    const auto [r, y] = profile[i];
    const bool end = i == 0 || i + 1 == profile.size();
    if (r < 0 || (r == 0 && !end)) throw std::invalid_argument("lathe: radii must be positive between the ends");
    if (r == 0) {
      rings.push_back({P3{0, y, 0}});
      continue;
    }
    std::vector<P3> ring;
    for (int j = 0; j < segments; ++j) ring.push_back({sx * r * co[size_t(j)], y, -sz * r * si[size_t(j)]});
    rings.push_back(std::move(ring));
  }
  return join_rings(rings, segments);
}

}  // namespace

Affine::Affine() : m_{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0} {}

Affine Affine::then(const Affine& next) const {
  Affine out;
  const auto& a = next.m_;
  const auto& b = m_;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) {
      double s = c == 3 ? a[size_t(4 * r + 3)] : 0.0;
      for (int k = 0; k < 3; ++k) s += a[size_t(4 * r + k)] * b[size_t(4 * k + c)];
      out.m_[size_t(4 * r + c)] = s;
    }
  }
  return out;
}

Affine Affine::scale(double sx, double sy, double sz) const {
  Affine s;
  s.m_ = {sx, 0, 0, 0, 0, sy, 0, 0, 0, 0, sz, 0};
  return then(s);
}

Affine Affine::translate(double x, double y, double z) const {
  Affine s;
  s.m_[3] = x;
  s.m_[7] = y;
  s.m_[11] = z;
  return then(s);
}

// The rotation by `deg` carrying axis `from` towards axis `to`: the image of
// e_from is c e_from + s e_to, that of e_to is c e_to - s e_from.
Affine Affine::rotate(int from, int to, double deg) const {
  double s, c;
  sin_cos_deg(deg, &s, &c);
  Affine r;
  r.m_[size_t(4 * from + from)] = c;
  r.m_[size_t(4 * to + to)] = c;
  r.m_[size_t(4 * to + from)] = s;
  r.m_[size_t(4 * from + to)] = -s;
  return then(r);
}
Affine Affine::rotate_x(double deg) const { return rotate(1, 2, deg); }
Affine Affine::rotate_y(double deg) const { return rotate(2, 0, deg); }
Affine Affine::rotate_z(double deg) const { return rotate(0, 1, deg); }

std::array<double, 3> Affine::apply(const std::array<double, 3>& p) const {
  std::array<double, 3> out;
  for (int r = 0; r < 3; ++r)
    out[size_t(r)] = m_[size_t(4 * r)] * p[0] + m_[size_t(4 * r + 1)] * p[1] + m_[size_t(4 * r + 2)] * p[2] +
                     m_[size_t(4 * r + 3)];
  return out;
}

Vec3 Affine::apply(const Vec3& p) const { return to_float(apply(P3{p[0], p[1], p[2]})); }

double Affine::determinant() const {
  const auto& m = m_;
  return m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8]) +
         m[2] * (m[4] * m[9] - m[5] * m[8]);
}

Mesh transformed(const Mesh& part, const Affine& where) {
  Mesh out;
  out.vertices.reserve(part.vertices.size());
  for (const auto& v : part.vertices) out.vertices.push_back(where.apply(v));
  out.triangles = part.triangles;
  if (where.determinant() < 0)
    for (auto& t : out.triangles) std::swap(t[1], t[2]);
  return out;
}

void place(Mesh* into, const Mesh& part, const Affine& where) { into->append(transformed(part, where)); }

Mesh box(double sx, double sy, double sz) {
  if (!(sx > 0 && sy > 0 && sz > 0)) throw std::invalid_argument("box: sides must be positive");
  // Corner i has bit 0 for +x, bit 1 for +y, bit 2 for +z.
  Mesh m;
  const double x = sx / 2, y = sy / 2, z = sz / 2;
  for (int i = 0; i < 8; ++i)
    m.vertices.push_back(to_float({i & 1 ? x : -x, i & 2 ? y : -y, i & 4 ? z : -z}));
  // Each face as a quad (a, b, c, d) counter-clockwise seen from outside.
  const int quads[6][4] = {{0, 4, 6, 2}, {1, 3, 7, 5},   // -x, +x
                           {0, 1, 5, 4}, {2, 6, 7, 3},   // -y, +y
                           {0, 2, 3, 1}, {4, 5, 7, 6}};  // -z, +z
  for (const auto& q : quads) {
    m.triangles.push_back({q[0], q[1], q[2]});
    m.triangles.push_back({q[0], q[2], q[3]});
  }
  return m;
}

Mesh frustum(double r_bottom, double r_top, double h, int segments) {
  if (!(h > 0) || r_bottom < 0 || r_top < 0 || (r_bottom == 0 && r_top == 0))
    throw std::invalid_argument("frustum: needs a positive height and at least one positive radius");
  return revolve({{r_bottom, -h / 2}, {r_top, h / 2}}, segments, 1, 1);
}

Mesh cylinder(double r, double h, int segments) { return frustum(r, r, h, segments); }

Mesh ellipsoid(double rx, double ry, double rz, int segments) {
  check_segments(segments, 4, "ellipsoid");
  if (segments % 2 != 0) throw std::invalid_argument("ellipsoid: segments must be even");
  if (!(rx > 0 && ry > 0 && rz > 0)) throw std::invalid_argument("ellipsoid: semi-axes must be positive");
  const int bands = segments / 2;
  std::vector<std::array<double, 2>> profile;
  for (int k = 0; k <= bands; ++k) {
    double sp, cp;
    sin_cos_deg(180.0 * k / bands, &sp, &cp);
    const double r = k == 0 || k == bands ? 0.0 : sp;  // the poles exactly on the axis
    profile.push_back({r, -ry * cp});
  }
  return revolve(profile, segments, rx, rz);
}

Mesh lathe(const std::vector<std::array<double, 2>>& profile, int segments) {
  return revolve(profile, segments, 1, 1);
}

Mesh loft(const std::vector<LoftStation>& stations, int segments, double squareness) {
  check_segments(segments, 4, "loft");
  if (stations.size() < 2) throw std::invalid_argument("loft: needs at least two stations");
  if (squareness != 1 && squareness != 2 && squareness != 4 && squareness != 8 && squareness != 16)
    throw std::invalid_argument("loft: squareness must be 1, 2, 4, 8 or 16");
  // Unit superellipse points (u, v) = (sgn cos t |cos t|^e, sgn sin t |sin t|^e),
  // e = 2 / squareness, at t = 2 pi (j + 1/2) / n: the half step puts points
  // near the corners of square sections rather than at mid-sides.
  const double e = 2.0 / squareness;
  std::vector<double> us(static_cast<size_t>(segments)), vs(static_cast<size_t>(segments));
  for (int j = 0; j < segments; ++j) {
    double s, c;
    sin_cos_deg(360.0 * (j + 0.5) / segments, &s, &c);
    us[size_t(j)] = std::copysign(power(std::fabs(c), e), c);
    vs[size_t(j)] = std::copysign(power(std::fabs(s), e), s);
  }
  std::vector<std::vector<P3>> rings;
  for (size_t i = 0; i < stations.size(); ++i) {
    const auto& st = stations[i];
    const bool point = st.half_height == 0 && st.half_width == 0 && st.top_half_width == 0;
    const bool end = i == 0 || i + 1 == stations.size();
    if (i > 0 && !(st.x > stations[i - 1].x)) throw std::invalid_argument("loft: stations must advance along x");
    if (point && end) {
      rings.push_back({P3{st.x, st.y, st.z}});
      continue;
    }
    if (!(st.half_height > 0 && st.half_width > 0 && st.top_half_width > 0))
      throw std::invalid_argument("loft: a section needs positive size (or all zero, at an end)");
    // Seen from +x (ahead), screen right is -z and up is +y; (-z, y) = (u, v)
    // then runs counter-clockwise as join_rings wants.
    std::vector<P3> ring;
    for (int j = 0; j < segments; ++j) {
      const double u = us[size_t(j)], v = vs[size_t(j)];
      const double w = st.half_width + (st.top_half_width - st.half_width) * (v + 1) / 2;
      ring.push_back({st.x, st.y + st.half_height * v, st.z - w * u});
    }
    rings.push_back(std::move(ring));
  }
  return join_rings(rings, segments);
}

}  // namespace vg
