// Synthetic smallNORB (SPEC section 1): point sets, renderer, splits.
#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "data/grey_bytes.h"
#include "kernels/rng.h"

namespace vg {

namespace {

// Wraps an angle into [0, 360); the second test catches -tiny + 360 == 360.
double wrap360(double deg) {
  double v = std::fmod(deg, 360.0);
  if (v < 0) v += 360.0;
  if (v >= 360.0) v -= 360.0;
  return v;
}

// numpy.linspace: start + i*step, with the last value exactly `stop`.
std::vector<float> linspace(double start, double stop, int n) {
  std::vector<float> out(static_cast<size_t>(n));
  const double step = n > 1 ? (stop - start) / (n - 1) : 0.0;
  for (int i = 0; i < n; ++i) out[size_t(i)] = float(i == n - 1 ? stop : start + i * step);
  return out;
}

constexpr double kMargin = 4.0, kSpan = 24.0, kSigma = 1.6;

}  // namespace

std::vector<double> AngleRange::values() const {
  std::vector<double> out;
  if (count <= 0) return out;
  if (count == 1) return {wrap360(from)};
  const double step = (to - from) / (count - 1);
  for (int i = 0; i < count; ++i) out.push_back(wrap360(i == count - 1 ? to : from + i * step));
  return out;
}

double circular_distance(double a_deg, double b_deg) {
  const double d = wrap360(std::fabs(a_deg - b_deg));
  return std::min(d, 360.0 - d);
}

// With an empty set there is no pair; 180 (the largest possible distance) is returned.
double azimuth_gap(const std::vector<double>& train_az, const std::vector<double>& test_az) {
  double gap = 180.0;
  for (double a : train_az)
    for (double b : test_az) gap = std::min(gap, circular_distance(a, b));
  return gap;
}

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
                   float* img, const PlaneTransform& plane = {}, int canvas = -1) {
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

// A parallel loop first wakes its workers, and its end waits for the slowest: on
// small VMs that can cost more than the default dataset's loops hold (1-3 ms of
// work each; docs/performance.md#the-datasets-threads). So loops of fewer items
// than kDatasetParallelMinItems (renders or noisy images, ~1 us each) run on one thread.

// Clean renders of a set of (azimuth, elevation) views, every class at each,
// each distinct view rendered once: the default dataset's five splits ask for
// 810 renders of 600 distinct views (training, familiar and circle share theirs).
class CleanViews {
 public:
  using View = std::pair<double, double>;  // (azimuth, elevation) in degrees
  CleanViews(const DataConfig& cfg, std::vector<View> views)
      : views_(std::move(views)), side_(image_side(cfg)), pixels_(size_t(side_) * size_t(side_)) {
    std::sort(views_.begin(), views_.end());
    views_.erase(std::unique(views_.begin(), views_.end()), views_.end());
    images_.resize(views_.size() * kNumClasses * pixels_);
    const int n = int(views_.size()) * kNumClasses;
#pragma omp parallel for schedule(dynamic) if (n >= kDatasetParallelMinItems)
    for (int k = 0; k < n; ++k) {
      const View& v = views_[size_t(k / kNumClasses)];
      render_clean(k % kNumClasses, v.first, v.second, {}, images_.data() + size_t(k) * pixels_, cfg.shapes, side_);
    }
  }
  const float* find(int cls, double az, double el) const {
    const auto it = std::lower_bound(views_.begin(), views_.end(), View{az, el});
    if (it == views_.end() || *it != View{az, el}) throw std::logic_error("CleanViews: a view was not rendered");
    return images_.data() + (size_t(it - views_.begin()) * kNumClasses + size_t(cls)) * pixels_;
  }
  int side() const { return side_; }

 private:
  std::vector<View> views_;
  int side_;       // of every render: image_side(cfg)
  size_t pixels_;  // per render
  std::vector<float> images_;
};

void add_grid(std::vector<CleanViews::View>& views, const std::vector<double>& az, const std::vector<double>& el) {
  for (double a : az)
    for (double e : el) views.emplace_back(a, e);
}

// The split's samples: per_combo noisy copies of each (class, azimuth, elevation)'s clean render.
Split noisy_split(const DataConfig& cfg, SplitId id, const std::vector<double>& azimuths,
                  const std::vector<double>& elev, int per_combo, const CleanViews& views) {
  const int n_az = int(azimuths.size()), n_el = int(elev.size());
  const int n = kNumClasses * n_az * n_el * std::max(per_combo, 0);
  Split s;
  s.side = views.side();
  const int pixels = s.side * s.side;
  s.images.resize(size_t(n) * size_t(pixels));
  s.labels.resize(size_t(n));
  s.azimuth.resize(size_t(n));
  s.elevation.resize(size_t(n));
  // Each combination's clean render, looked up here: nothing may throw inside the parallel loop.
  std::vector<const float*> clean(size_t(kNumClasses) * n_az * n_el);
  for (size_t k = 0; k < clean.size(); ++k)
    clean[k] = views.find(int(k) / (n_az * n_el), azimuths[k / size_t(n_el) % size_t(n_az)], elev[k % size_t(n_el)]);
  // Sample i belongs to combo i / per_combo; its own noise stream keeps the bytes
  // independent of thread count and scheduling.
#pragma omp parallel for schedule(static) if (n >= kDatasetParallelMinItems)
  for (int i = 0; i < n; ++i) {
    const int k = i / per_combo;
    const int cls = k / (n_az * n_el), a = (k / n_el) % n_az, e = k % n_el;
    s.labels[size_t(i)] = cls;
    s.azimuth[size_t(i)] = float(azimuths[size_t(a)]);
    s.elevation[size_t(i)] = float(elev[size_t(e)]);
    const float* src = clean[size_t(k)];
    float* dst = s.images.data() + size_t(i) * size_t(pixels);
    Stream(cfg.seed, Purpose::Noise, uint32_t(id), uint64_t(i)).fill_normal(dst, size_t(pixels), float(cfg.noise_std));
    for (int p = 0; p < pixels; ++p) dst[p] = std::clamp(src[p] + dst[p], 0.f, 1.f);
  }
  return s;
}
}  // namespace

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

NorbExportSplit render_norb_split(const NorbExportConfig& cfg, NorbPart part) {
  if (cfg.instances < 1 || cfg.instances > 5 || cfg.lightings < 1 || cfg.lightings > kNorbLightings)
    throw std::invalid_argument("render_norb_split: 1..5 instances and 1..6 lightings");
  // NYU's instance numbers per split, and a stretch (-1, 0, +1 in x, y, z) per instance.
  constexpr int kTrain[5] = {4, 6, 7, 8, 9}, kTest[5] = {0, 1, 2, 3, 5};
  constexpr int kStretch[10][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {-1, 0, 0}, {0, -1, 0},
                                   {0, 0, -1}, {1, 1, 0}, {-1, 0, 1}, {0, -1, -1}, {1, -1, 1}};
  const int* instance = part == NorbPart::training ? kTrain : kTest;
  constexpr int kAz = kNorbAzimuthMax / 2 + 1, kEl = kNorbElevations;
  const int n_views = kNorbClasses * cfg.instances * kEl * kAz;  // lighting changes no geometry
  NorbExportSplit s;
  const int n = n_views * cfg.lightings;  // record i: view i / lightings, lighting i % lightings
  s.dat = norb_pairs_file(n);
  s.labels.resize(size_t(n));
  s.info.resize(size_t(n));
  // One clean render per view and camera, then its records, written into the file.
#pragma omp parallel
  {
    std::vector<float> clean(kNorbPairBytes), noise(kNorbPairBytes);
#pragma omp for schedule(dynamic)
    for (int v = 0; v < n_views; ++v) {
      const int cls = v / (cfg.instances * kEl * kAz), inst = instance[(v / (kEl * kAz)) % cfg.instances];
      const int el = (v / kAz) % kEl, az = v % kAz;
      std::vector<Point3> points = shape_points(cls, cfg.shapes);
      for (Point3& q : points)
        for (int axis = 0; axis < 3; ++axis) q[size_t(axis)] *= float(1.0 + kNorbInstanceStretch * kStretch[inst][axis]);
      for (int cam = 0; cam < 2; ++cam)
        render_points(points, norb_azimuth_deg(2 * az) + (cam == 0 ? -0.5 : 0.5) * kNorbStereoDeg,
                      norb_elevation_deg(el), kNorbSide, clean.data() + size_t(cam) * kNorbImageBytes);
      for (int light = 0; light < cfg.lightings; ++light) {
        const int i = v * cfg.lightings + light;
        s.labels[size_t(i)] = cls;
        s.info[size_t(i)] = NorbInfo{inst, el, 2 * az, light};
        Stream rng(cfg.seed, Purpose::Noise, 16 + uint32_t(part), uint64_t(i));
        rng.fill_normal(noise.data(), kNorbPairBytes, float(kNorbExportNoise));
        const float gain = 255.f * (0.5f + 0.1f * float(light));
        uint8_t* dst = s.dat.data() + kNorbPairsHeader + size_t(i) * kNorbPairBytes;
        grey_bytes(clean.data(), gain, noise.data(), kNorbPairBytes, dst);
      }
    }
  }
  return s;
}

Split make_split(const DataConfig& cfg, SplitId id, const std::vector<double>& azimuths,
                 int per_combo) {
  return make_split(cfg, id, azimuths, cfg.elevations.values(), per_combo);
}

std::vector<double> heldout_elevations(const DataConfig& cfg) {
  return cfg.test_elevations.count > 0 ? cfg.test_elevations.values() : cfg.elevations.values();
}

double elevation_gap(const DataConfig& cfg) {
  double gap = INFINITY;
  for (double t : heldout_elevations(cfg))
    for (double e : cfg.elevations.values()) gap = std::min(gap, std::fabs(t - e));
  return gap;
}

Split make_split(const DataConfig& cfg, SplitId id, const std::vector<double>& azimuths,
                 const std::vector<double>& elev, int per_combo) {
  std::vector<CleanViews::View> views;
  add_grid(views, azimuths, elev);
  return noisy_split(cfg, id, azimuths, elev, per_combo, CleanViews(cfg, std::move(views)));
}

// Does not reject a zero gap: validating user input (train and test sharing an
// azimuth) is the CLI's job; here gap_deg == 0 reports it.
std::vector<double> circle_azimuths(const DataConfig& cfg) {
  std::vector<double> az;
  if (cfg.norb && cfg.norb->split == NorbSplitKind::window) {
    for (const AngleRange* r : {&cfg.train_azimuths, &cfg.test_azimuths})
      for (double a : r->values()) az.push_back(a);
    std::sort(az.begin(), az.end());
    az.erase(std::unique(az.begin(), az.end()), az.end());
    return az;
  }
  const int step = cfg.norb ? int(norb_azimuth_deg(2)) : 10;  // smallNORB: its 18 azimuths
  for (int a = 0; a < 360; a += step) az.push_back(a);
  return az;
}

std::vector<double> profile_elevations(const DataConfig& cfg) {
  std::vector<double> el;
  if (cfg.norb) {
    if (cfg.norb->split == NorbSplitKind::elevation)
      for (int e = 0; e < kNorbElevations; ++e) el.push_back(norb_elevation_deg(e));
  } else if (cfg.test_elevations.count > 0) {
    for (int e = 0; e <= 80; e += 10) el.push_back(e);
  }
  return el;
}

std::vector<double> training_azimuths(const DataConfig& cfg) {
  return cfg.norb ? cfg.norb->train_az : cfg.train_azimuths.values();
}

std::vector<double> training_elevations(const DataConfig& cfg) {
  return cfg.norb ? cfg.norb->train_elev : cfg.elevations.values();
}

double synthetic_images(const DataConfig& d) {
  return double(kNumClasses) * d.elevations.count *
         (double(d.train_azimuths.count) * d.n_per_combo +
          (double(d.train_azimuths.count) + d.test_azimuths.count + 36) * d.n_eval_per_combo);
}

Dataset make_synthetic_dataset(const DataConfig& cfg) {
  Dataset d;
  d.train_az = cfg.train_azimuths.values();
  d.test_az = cfg.test_azimuths.values();
  d.elevations = cfg.elevations.values();
  d.circle_az = circle_azimuths(cfg);
  d.gap_deg = azimuth_gap(d.train_az, d.test_az);
  d.test_elevations = heldout_elevations(cfg);
  d.elev_gap_deg = elevation_gap(cfg);
  // An elevation extrapolation's axis is the elevation (its sweep, the
  // profile: the training azimuths at every profile elevation); otherwise the
  // azimuth (its sweep, the circle).
  const bool by_elevation = cfg.test_elevations.count > 0;
  const std::vector<double> profile = profile_elevations(cfg);
  d.axis_values = by_elevation ? profile : d.circle_az;
  // Every split's views rendered once, then each split's noisy samples.
  std::vector<CleanViews::View> wanted;
  add_grid(wanted, d.train_az, d.elevations);
  add_grid(wanted, d.test_az, d.test_elevations);
  add_grid(wanted, d.train_az, profile);
  add_grid(wanted, d.circle_az, d.elevations);
  const CleanViews views(cfg, std::move(wanted));
  auto split = [&](SplitId id, const std::vector<double>& az, const std::vector<double>& el, int per_combo) {
    Split s = noisy_split(cfg, id, az, el, per_combo, views);
    s.axis = by_elevation ? s.elevation : s.azimuth;
    return s;
  };
  d.train = split(SplitId::Train, d.train_az, d.elevations, cfg.n_per_combo);
  d.familiar = split(SplitId::Familiar, d.train_az, d.elevations, cfg.n_eval_per_combo);
  d.heldout = split(SplitId::HeldOut, d.test_az, d.test_elevations, cfg.n_eval_per_combo);
  if (by_elevation) d.axis_sweep = split(SplitId::ElevationProfile, d.train_az, profile, cfg.n_eval_per_combo);
  d.circle = split(SplitId::Circle, d.circle_az, d.elevations, cfg.n_eval_per_combo);
  if (cfg.n_val_per_combo > 0) d.validation = split(SplitId::Validation, d.train_az, d.elevations, cfg.n_val_per_combo);
  return d;
}

namespace {

// Problems of one range and its count, or "" / nullopt.
std::optional<GeometryProblem> check_range(const AngleRange& r, GeometryPart range_part,
                                           GeometryPart count_part, bool is_azimuth) {
  auto g = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  if (r.to < r.from)
    return GeometryProblem{range_part, "B < A: a range runs up from A to B" +
                                           std::string(is_azimuth ? " (write 300:420 to cross 0)" : "")};
  if (is_azimuth && r.to - r.from >= 360)
    return GeometryProblem{range_part, "spans 360 degrees or more, so its views repeat (" + g(r.from) +
                                           " and " + g(r.from + 360) + " are one azimuth)"};
  if (!is_azimuth && (r.from < -90 || r.to > 90))
    return GeometryProblem{range_part, "elevations lie in [-90, 90]"};
  const std::string many = is_azimuth ? " views of " : " elevations of ", one = is_azimuth ? "1 view" : "1 elevation";
  if (r.count >= 2 && r.to == r.from)
    return GeometryProblem{range_part, std::to_string(r.count) + many + g(r.from) + ":" + g(r.to) +
                                           " would all be one (give a range with A < B, or ask for 1)"};
  if (r.count == 1 && r.to != r.from)
    return GeometryProblem{count_part, one + " of " + g(r.from) + ":" + g(r.to) + " would use " + g(r.from) +
                                           " and drop " + g(r.to) + " (use " + g(r.from) + ":" + g(r.from) +
                                           ", or 2 or more)"};
  const std::vector<double> v = r.values();
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = i + 1; j < v.size(); ++j)
      if (circular_distance(v[i], v[j]) < 1e-9)
        return GeometryProblem{range_part, std::to_string(r.count) + many + g(r.from) + ":" + g(r.to) +
                                               " are not distinct (a wider range, or fewer)"};
  return std::nullopt;
}

// The run flag each part is read from (GeometryPart's order), and the flag
// whose value it takes when not given.
constexpr std::pair<const char*, const char*> kGeometryFlags[] = {
    {"train-azimuths", nullptr}, {"n-train-views", nullptr}, {"test-azimuths", nullptr},
    {"n-test-views", nullptr},   {"test-azimuths", nullptr}, {"elevations", nullptr},
    {"n-elev", nullptr},         {"test-elevations", nullptr}, {"n-test-elev", "n-elev"}};

std::optional<GeometryProblem> named(std::optional<GeometryProblem> p) {
  if (p) std::tie(p->flag, p->fallback) = kGeometryFlags[size_t(p->part)];
  return p;
}

std::optional<GeometryProblem> check_geometry_parts(const DataConfig& cfg, bool allow_touching_end) {
  const AngleRange &tr = cfg.train_azimuths, &te = cfg.test_azimuths;
  if (auto p = check_range(tr, GeometryPart::train_range, GeometryPart::train_count, true)) return p;
  if (auto p = check_range(te, GeometryPart::test_range, GeometryPart::test_count, true)) return p;
  if (auto p = check_range(cfg.elevations, GeometryPart::elev_range, GeometryPart::elev_count, false)) return p;
  constexpr double eps = 1e-9;
  if (cfg.test_elevations.count > 0) {
    if (auto p = check_range(cfg.test_elevations, GeometryPart::test_elev_range, GeometryPart::test_elev_count, false))
      return p;
    const AngleRange& el = cfg.elevations;
    bool outside_band = true;
    // `allow_touching_end`: a sweep's gap-0 band starts on the band's edge.
    auto touches = [&](double t) { return std::fabs(t - el.from) < eps || std::fabs(t - el.to) < eps; };
    for (double t : cfg.test_elevations.values())
      outside_band = outside_band && (t < el.from - eps || t > el.to + eps || (allow_touching_end && touches(t)));
    // An elevation extrapolation: every held-out view differs from every
    // training view in elevation, so the azimuths may be shared.
    if (outside_band) {
      return std::nullopt;
    }
  }
  const double span = tr.to - tr.from;
  for (double t : te.values()) {
    const double offset = wrap360(t - tr.from);  // where t lies going up from A
    const bool at_end = std::fabs(offset - span) < eps;
    const bool inside = offset <= span + eps || offset >= 360 - eps;
    if (!inside || (at_end && allow_touching_end)) continue;
    bool shared = false;
    for (double a : tr.values()) shared = shared || circular_distance(a, t) < eps;
    std::ostringstream why;
    why << "held-out azimuth " << t << (shared ? " is also a training azimuth" : " lies inside the training range")
        << " (" << tr.from << ":" << tr.to << ")";
    return GeometryProblem{GeometryPart::test_overlap, why.str()};
  }
  return std::nullopt;
}

}  // namespace

std::optional<GeometryProblem> check_geometry(const DataConfig& cfg, bool allow_touching_end) {
  return named(check_geometry_parts(cfg, allow_touching_end));
}

std::optional<GeometryProblem> check_training_views(const DataConfig& cfg) {
  if (auto p = check_range(cfg.train_azimuths, GeometryPart::train_range, GeometryPart::train_count, true))
    return named(p);
  return named(check_range(cfg.elevations, GeometryPart::elev_range, GeometryPart::elev_count, false));
}

}  // namespace vg
