// The translation and affine protocols' shared machinery (data/plane_views.h).
#include "data/plane_views.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <string>

#include "core/rng.h"
#include "kernels/elementwise.h"

namespace vg {

namespace {

const PlaneFactor& factor_of(const DataConfig& cfg) { return *cfg.plane->factor; }

std::string g(double v) { return plane_number(v); }

std::vector<double> axis_values(const DataConfig& cfg) { return plane_axis_steps(factor_of(cfg), plane_limit(*cfg.plane)); }

double distance(const DataConfig& cfg, double value) { return std::max(0.0, value - cfg.plane->train_max); }

// Samples ordered by (class, azimuth, elevation, magnitude, sample). Sample i's
// pixel noise is the stream (seed, Noise, id, i) and its drawn change (training
// splits) the stream (seed, Plane, id, i); a held-out sample's direction is i
// mod 8 (a shift; its parity for the others), so every direction is as common.
// The bytes do not depend on the number of threads.
Split plane_split(const DataConfig& cfg, SplitId id, const std::vector<double>& magnitudes, int per_combo,
                  bool drawn) {
  const PlaneFactor& f = factor_of(cfg);
  const std::vector<double> az = cfg.train_azimuths.values(), el = cfg.elevations.values();
  const int n_az = int(az.size()), n_el = int(el.size()), n_m = drawn ? 1 : int(magnitudes.size());
  const int n = kNumClasses * n_az * n_el * n_m * std::max(per_combo, 0);
  const int canvas = cfg.plane->canvas;
  const size_t pixels = size_t(canvas) * size_t(canvas);
  Split s;
  s.side = canvas;
  s.images.resize(size_t(n) * pixels);
  s.labels.resize(size_t(n));
  s.azimuth.resize(size_t(n));
  s.elevation.resize(size_t(n));
  s.axis.resize(size_t(n));
#pragma omp parallel for schedule(static) if (n >= kDatasetParallelMinItems)
  for (int i = 0; i < n; ++i) {
    int rest = i / per_combo;
    const int m = rest % n_m, e = (rest /= n_m) % n_el, a = (rest /= n_el) % n_az, cls = rest / n_az;
    double magnitude = 0;
    PlaneTransform t;
    if (drawn) {
      Stream r(cfg.seed, Purpose::Plane, uint32_t(id), uint64_t(i));
      const double u1 = r.uniform(), u2 = r.uniform();
      t = f.draw(cfg.plane->train_max, u1, u2, &magnitude);
    } else {
      magnitude = magnitudes[size_t(m)];
      t = f.at(magnitude, i);
    }
    std::vector<float> clean(pixels);
    render_clean(cls, az[size_t(a)], el[size_t(e)], t, clean.data(), cfg.shapes, canvas);
    float* dst = s.images.data() + size_t(i) * pixels;
    fill_normal(Stream(cfg.seed, Purpose::Noise, uint32_t(id), uint64_t(i)), dst, pixels, float(cfg.noise_std));
    for (size_t p = 0; p < pixels; ++p) dst[p] = std::clamp(clean[p] + dst[p], 0.f, 1.f);
    s.labels[size_t(i)] = cls;
    s.azimuth[size_t(i)] = float(az[size_t(a)]);
    s.elevation[size_t(i)] = float(el[size_t(e)]);
    s.axis[size_t(i)] = float(magnitude);
  }
  return s;
}

Dataset make(const DataConfig& cfg) {
  const PlaneFactor& f = factor_of(cfg);
  Dataset d;
  d.train_az = d.test_az = cfg.train_azimuths.values();
  d.elevations = d.test_elevations = cfg.elevations.values();
  d.circle_az = circle_azimuths(cfg);
  d.axis_values = axis_values(cfg);
  d.train = plane_split(cfg, SplitId::Train, {}, cfg.n_per_combo, true);
  d.familiar = plane_split(cfg, SplitId::Familiar, {}, cfg.n_eval_per_combo, true);
  d.heldout = plane_split(cfg, SplitId::HeldOut, plane_test_magnitudes(*cfg.plane), cfg.n_eval_per_combo, false);
  d.axis_sweep = plane_split(cfg, SplitId::ElevationProfile, d.axis_values, cfg.n_eval_per_combo, false);
  if (cfg.n_val_per_combo > 0) d.validation = plane_split(cfg, SplitId::Validation, {}, cfg.n_val_per_combo, true);
  // The azimuth circle, unchanged in the plane (on the same canvas): how the views alone generalise.
  d.circle = make_split(cfg, SplitId::Circle, d.circle_az, cfg.n_eval_per_combo);
  d.circle.axis.assign(size_t(d.circle.size()), float(f.neutral));
  return d;
}

double images(const DataConfig& d) {
  const double views = double(kNumClasses) * d.train_azimuths.count * d.elevations.count;
  const double circle = double(kNumClasses) * 36 * d.elevations.count * d.n_eval_per_combo;
  return views * (d.n_per_combo + d.n_val_per_combo +
                  d.n_eval_per_combo * (1.0 + d.plane->test_count + double(axis_values(d).size()))) +
         circle;
}

double bytes(const DataConfig& d) {
  return images(d) * (double(d.plane->canvas) * d.plane->canvas * sizeof(float) + 16);
}

FlagError too_big(const FlagSource& f, const DataConfig& d, const std::string& why) {
  const std::string worst = f.changed("n-per-combo") ? "n-per-combo" : "n-eval-per-combo";
  return FlagError(worst, f.value(worst),
                   "the dataset (" + std::to_string(std::llround(images(d))) + " images) " + why);
}

// The held-out magnitudes against the training ones and the factor's limit.
// At a sweep's gap 0 (`allow_touching_end`) they may start at training's largest.
std::optional<GeometryProblem> check(const DataConfig& cfg, bool allow_touching_end) {
  if (auto p = check_training_views(cfg)) return p;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  const std::string range = g(p.test_from) + ":" + g(p.test_to);
  if (p.test_to > plane_limit(p) + 1e-9)
    return GeometryProblem{GeometryPart::test_overlap,
                           "held-out " + std::string(f.axis.name) + " " + range + " exceeds " + g(plane_limit(p)) +
                               " (" + f.limit_why +
                               (f.canvas ? ", --" + std::string(f.canvas->name) + " " + std::to_string(p.canvas) : "") +
                               ")",
                           f.test.name};
  const bool touching = std::fabs(p.test_from - p.train_max) < 1e-9;
  if (p.test_from < p.train_max - 1e-9 || (touching && !allow_touching_end))
    return GeometryProblem{GeometryPart::test_overlap,
                           "held-out " + std::string(f.axis.name) + " " + range + " overlaps training's (up to " +
                               g(p.train_max) + ", --" + f.train.name + "): held-out must lie beyond it",
                           f.test.name};
  return std::nullopt;
}

// A sweep's held-out range: `distance` beyond training's largest, as wide as
// the range given (the sweep's --test-width is the azimuth window's), capped
// at the limit only by check()'s refusal.
DataConfig at_distance(const DataConfig& cfg, double distance, double) {
  DataConfig o = cfg;
  const double width = cfg.plane->test_to - cfg.plane->test_from;
  o.plane->test_from = cfg.plane->train_max + distance;
  o.plane->test_to = o.plane->test_from + width;
  return o;
}

double sweep_gap(const DataConfig& cfg) { return cfg.plane->test_from - cfg.plane->train_max; }

std::string heldout_text(const DataConfig& cfg) { return g(cfg.plane->test_from) + ":" + g(cfg.plane->test_to); }

std::string describe(const DataConfig& d, const Dataset&) {
  const PlaneFactor& f = factor_of(d);
  char line[360];
  // The canvas where it is not the frame (on the frame the line names none).
  const std::string canvas = d.plane->canvas == kImageSide
                                 ? ""
                                 : "; " + std::to_string(d.plane->canvas) + " x " + std::to_string(d.plane->canvas) +
                                       " canvas";
  std::snprintf(line, sizeof line,
                "views: azimuths %g:%g (%d), elevations %g:%g (%d); %s: training up to %g %s, held-out %g:%g (%d)%s\n",
                d.train_azimuths.from, d.train_azimuths.to, d.train_azimuths.count, d.elevations.from, d.elevations.to,
                d.elevations.count, f.axis.name, d.plane->train_max, f.axis.unit, d.plane->test_from,
                d.plane->test_to, d.plane->test_count, canvas.c_str());
  return line;
}

nlohmann::json source_json(const DataConfig& d) {
  const PlaneFactor& f = factor_of(d);
  nlohmann::json j = {{"protocol", f.protocol}, {"axis", f.axis.name}, {"unit", f.axis.unit},
                      {"train_max", d.plane->train_max}, {"test_from", d.plane->test_from},
                      {"test_to", d.plane->test_to}, {"test_count", d.plane->test_count}};
  if (f.canvas) j["canvas"] = d.plane->canvas;  // a factor that has one: its side in pixels
  return j;
}

}  // namespace

std::vector<double> plane_test_magnitudes(const PlaneConfig& p) {
  std::vector<double> v;
  for (int i = 0; i < p.test_count; ++i)
    v.push_back(p.test_count == 1 ? p.test_from : p.test_from + (p.test_to - p.test_from) * i / (p.test_count - 1));
  return v;
}

double plane_limit(const PlaneConfig& p) {
  const PlaneFactor& f = *p.factor;
  return f.limit_on ? f.limit_on(p.canvas) : f.limit;
}

void configure_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* d) {
  // The held-out views are the training viewpoints, changed in the plane.
  for (const char* other : {"test-azimuths", "n-test-views", "test-elevations", "n-test-elev"})
    if (flags.changed(other))
      throw FlagError(other, flags.value(other),
                      std::string("--split ") + f.protocol + " holds out " + f.axis.name +
                          "s at the training viewpoints, not other views");
  d->train_azimuths = flags.range("train-azimuths", "n-train-views");
  d->elevations = flags.range("elevations", "n-elev");
  d->test_azimuths = d->train_azimuths;
  d->shapes = parse_shapes(flags.value("shapes"));
  d->n_per_combo = int(flags.integer("n-per-combo", 1, 10000));
  d->n_eval_per_combo = int(flags.integer("n-eval-per-combo", 1, 10000));
  d->noise_std = flags.real("noise", 0, 0.5);
  PlaneConfig p;
  p.factor = &f;
  if (f.canvas) {  // first: the magnitudes' limit grows with it
    const char* name = f.canvas->name;
    const long long side = flags.integer(name, 0, 1ll << 30);
    const std::string range = " (a canvas is " + std::to_string(kMinCanvas) + " to " + std::to_string(kMaxCanvas) +
                              " pixels a side)";
    if (side < kMinCanvas)
      throw FlagError(name, flags.value(name),
                      "smaller than the object's " + std::to_string(kImageSide) + " x " + std::to_string(kImageSide) +
                          " frame" + range);
    if (side > kMaxCanvas) throw FlagError(name, flags.value(name), "too large" + range);
    p.canvas = int(side);
  }
  configure_plane_magnitudes(f, flags, &p);
  d->plane = p;
}

void configure_plane_magnitudes(const PlaneFactor& f, const FlagSource& flags, PlaneConfig* p) {
  const double limit = plane_limit(*p);
  p->train_max = flags.real(f.train.name, f.neutral, limit);
  const auto [from, to] = flags.interval(f.test.name, f.neutral, limit);
  p->test_from = from;
  p->test_to = to;
  p->test_count = int(flags.integer(f.count.name, 1, 64));
  const std::string range = flags.value(f.test.name);
  if (p->test_count >= 2 && to == from)
    throw FlagError(f.test.name, range, std::to_string(p->test_count) + " magnitudes of " + range + " would all be one");
  if (p->test_count == 1 && to != from)
    throw FlagError(f.count.name, flags.value(f.count.name), "1 magnitude of " + range + " would drop " + g(to));
}

Protocol plane_protocol(const PlaneFactor& f, void (*configure)(const FlagSource&, DataConfig*)) {
  Protocol p{.name = f.protocol, .source = "synthetic", .split = f.protocol, .axis = f.axis};
  p.holds = [](const Protocol& self, const DataConfig& c) { return c.plane && c.plane->factor->protocol == std::string(self.split); };
  p.configure = configure;
  p.check = check;
  p.training_size = synthetic_training_size;
  p.images = images;
  p.bytes = bytes;
  p.too_big = too_big;
  p.make = make;
  p.axis_values = axis_values;
  p.distance = distance;
  p.at_distance = at_distance;
  p.swept_flag = f.test.name;
  p.sweep_gap = sweep_gap;
  p.heldout_text = heldout_text;
  p.describe = describe;
  p.source_json = source_json;
  p.flags = {f.train, f.test, f.count};
  if (f.canvas) {
    p.flags.push_back(*f.canvas);
    p.shape_flag = f.canvas->name;
  }
  return p;
}

bool is_shift(const PlaneFactor& f) { return std::string(f.axis.name) == "shift"; }

PlaneTransform draw_on_pixels(const PlaneFactor& f, double m, double u1, double u2, double* magnitude) {
  if (!is_shift(f)) return f.draw(m, u1, u2, magnitude);
  const int s = int(std::lround(m)), span = 2 * s + 1;
  const int dx = std::min(int(u1 * span), span - 1) - s, dy = std::min(int(u2 * span), span - 1) - s;
  *magnitude = std::max(std::abs(dx), std::abs(dy));
  return {.tx = double(dx), .ty = double(dy)};
}

std::vector<int> plane_test_ranks(uint64_t seed, SplitId id, int n) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Stream r(seed, Purpose::Plane, uint32_t(id), ~uint64_t(0));
  for (int k = n - 1; k > 0; --k) std::swap(order[size_t(k)], order[r.below(uint32_t(k + 1))]);
  std::vector<int> rank(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) rank[size_t(order[size_t(k)])] = k;
  return rank;
}

std::string plane_number(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::vector<double> plane_axis_steps(const PlaneFactor& f, double limit) {
  std::vector<double> v;
  // Steps up to the limit (an odd canvas's is a half pixel: the step below it).
  const long n = long(std::floor((limit - f.neutral) / f.profile_step + 1e-6));
  // As the samples record them (Split::axis is float), so a sample's value is one of these.
  for (long i = 0; i <= n; ++i) v.push_back(double(float(f.neutral + double(i) * f.profile_step)));
  return v;
}

std::optional<GeometryProblem> check_plane_on_pixels(const DataConfig& cfg, bool allow_touching_end, double limit,
                                                    const std::string& why_limit, const std::string& whole_why) {
  const PlaneFactor& f = *cfg.plane->factor;
  const PlaneConfig& p = *cfg.plane;
  const auto whole = [](double v) { return v == std::floor(v); };
  const std::string name = f.axis.name, range = plane_number(p.test_from) + ":" + plane_number(p.test_to);
  if (p.train_max > limit + 1e-9)
    return GeometryProblem{GeometryPart::train_range,
                           "training " + name + " up to " + plane_number(p.train_max) + " exceeds " + plane_number(limit) +
                               why_limit,
                           f.train.name};
  if (is_shift(f) && !whole(p.train_max))
    return GeometryProblem{GeometryPart::train_range, whole_why + ": training's largest must be whole", f.train.name};
  if (p.test_to > limit + 1e-9)
    return GeometryProblem{GeometryPart::test_overlap,
                           "held-out " + name + " " + range + " exceeds " + plane_number(limit) + why_limit, f.test.name};
  if (is_shift(f)) {
    if (!whole(p.test_from) || !whole(p.test_to))
      return GeometryProblem{GeometryPart::test_overlap, "held-out shifts " + range + ": " + whole_why, f.test.name};
    for (double m : plane_test_magnitudes(p))
      if (!whole(m))
        return GeometryProblem{GeometryPart::test_count,
                               std::to_string(p.test_count) + " shifts evenly spaced over " + range + " include " +
                                   plane_number(m) + ", not a whole pixel (" + whole_why + ")",
                               f.count.name};
  }
  const bool touching = std::fabs(p.test_from - p.train_max) < 1e-9;
  if (p.test_from < p.train_max - 1e-9 || (touching && !allow_touching_end))
    return GeometryProblem{GeometryPart::test_overlap,
                           "held-out " + name + " " + range + " overlaps training's (up to " + plane_number(p.train_max) +
                               ", --" + f.train.name + "): held-out must lie beyond it",
                           f.test.name};
  return std::nullopt;
}

}  // namespace vg
