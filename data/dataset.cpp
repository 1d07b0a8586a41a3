// The rendered shapes' splits (SPEC section 1), the views of a configuration, and view geometry checks.
#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "core/rng.h"
#include "data/grey_bytes.h"
#include "kernels/elementwise.h"

namespace vg {

namespace {

// Wraps an angle into [0, 360); the second test catches -tiny + 360 == 360.
double wrap360(double deg) {
  double v = std::fmod(deg, 360.0);
  if (v < 0) v += 360.0;
  if (v >= 360.0) v -= 360.0;
  return v;
}

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

namespace {

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
      : views_(std::move(views)), side_(image_shape(cfg).side), pixels_(size_t(side_) * size_t(side_)) {
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
  int side_;       // of every render: image_shape(cfg).side
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
    fill_normal(Stream(cfg.seed, Purpose::Noise, uint32_t(id), uint64_t(i)), dst, size_t(pixels), float(cfg.noise_std));
    for (int p = 0; p < pixels; ++p) dst[p] = std::clamp(src[p] + dst[p], 0.f, 1.f);
  }
  return s;
}
}  // namespace

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
