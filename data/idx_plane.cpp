// The in-plane protocols on an IDX set (data/idx_plane.h).
#include "data/idx_plane.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <sstream>

#include "core/rng.h"
#include "data/idx.h"
#include "data/norb.h"

namespace vg {

namespace {

const PlaneFactor& factor_of(const DataConfig& cfg) { return *cfg.plane->factor; }
bool whole(double v) { return v == std::floor(v); }

// The axis sweep's positions: neutral to the canvas's limit in the factor's steps.
std::vector<double> axis_values(const DataConfig& cfg) { return plane_axis_steps(factor_of(cfg), plane_limit(*cfg.plane)); }

// A split of n images on the canvas, labelled from `part`'s records `idx`; no viewpoints.
Split empty_split(const IdxConfig& c, int canvas, const IdxPart& part, const std::vector<int>& idx) {
  Split s;
  s.side = canvas;
  s.classes = c.classes;
  const size_t n = idx.size();
  s.images.resize(n * s.pixels());
  s.labels.resize(n);
  s.azimuth.assign(n, 0.f);
  s.elevation.assign(n, 0.f);
  s.axis.assign(n, 0.f);
  for (size_t i = 0; i < n; ++i) s.labels[i] = part.labels[size_t(idx[i])];
  return s;
}

// Training sample i of `epoch`: record index[i] under a change within the
// training range, drawn from the stream (seed, Plane, 16 epoch, i); its
// magnitude returned. Allocates nothing (a training step draws it).
struct TrainDraw {
  std::shared_ptr<const IdxData> files;
  std::vector<int> index;
  const PlaneFactor* factor;
  double train_max;
  int side, canvas;
  bool standardize;
  uint64_t seed;
  double operator()(int i, uint64_t epoch, float* dst) const {
    Stream r(seed, Purpose::Plane, 16 * epoch + uint32_t(SplitId::Train), uint64_t(i));
    const double u1 = r.uniform(), u2 = r.uniform();
    double magnitude = 0;
    const PlaneTransform t = draw_on_pixels(*factor, train_max, u1, u2, &magnitude);
    idx_plane_image(files->train.images.image(index[size_t(i)]), side, canvas, t, standardize, dst);
    return magnitude;
  }
};

// Training: the training file (less the validation part a stopping rule
// takes), drawn afresh each epoch (Split::draw) and held once as drawn at
// epoch 0 (what a model fit in one pass sees). Validation: its part under a
// change within the training range. Test: the test file four times: familiar
// (a change within the training range), held-out (one of the held-out
// magnitudes), the axis sweep (one of axis_values) and the circle (unchanged).
Dataset make(const DataConfig& cfg) {
  const IdxConfig& c = *cfg.idx;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  const IdxData& files = *c.data;
  Dataset d;
  d.train_az = d.test_az = d.circle_az = {0.0};
  d.elevations = d.test_elevations = {0.0};
  d.axis_values = axis_values(cfg);
  const IdxTrainingParts parts = idx_training_parts(cfg);
  const std::vector<int>& train = parts.train;
  const std::vector<int>& val = parts.validation;
  const TrainDraw draw{c.data, train, &f, p.train_max, c.side, p.canvas, c.standardize, cfg.seed};
  d.train = empty_split(c, p.canvas, files.train, train);
  const int n_train = d.train.size();
#pragma omp parallel for schedule(static) if (n_train >= kDatasetParallelMinItems)
  for (int i = 0; i < n_train; ++i)
    d.train.axis[size_t(i)] = float(draw(i, 0, d.train.images.data() + size_t(i) * d.train.pixels()));
  d.train.draw = [draw](int i, uint64_t epoch, float* dst) { draw(i, epoch, dst); };

  // A change within the training range, fixed per split and image.
  auto familiar_change = [&](SplitId id, int j, double* magnitude) {
    Stream r(cfg.seed, Purpose::Plane, uint32_t(id), uint64_t(j));
    const double u1 = r.uniform(), u2 = r.uniform();
    return draw_on_pixels(f, p.train_max, u1, u2, magnitude);
  };
  d.validation = empty_split(c, p.canvas, files.train, val);
  const int n_val = d.validation.size();
#pragma omp parallel for schedule(static) if (n_val >= kDatasetParallelMinItems)
  for (int j = 0; j < n_val; ++j) {
    double magnitude = 0;
    const PlaneTransform t = familiar_change(SplitId::Validation, j, &magnitude);
    idx_plane_image(files.train.images.image(val[size_t(j)]), c.side, p.canvas, t, c.standardize,
                    d.validation.images.data() + size_t(j) * d.validation.pixels());
    d.validation.axis[size_t(j)] = float(magnitude);
  }

  const std::vector<int> test = idx_records(files.test.size());
  d.familiar = empty_split(c, p.canvas, files.test, test);
  d.heldout = d.axis_sweep = d.circle = d.familiar;
  const std::vector<double> held = plane_test_magnitudes(p);
  const int n = files.test.size(), n_held = int(held.size()), n_axis = int(d.axis_values.size());
  const std::vector<int> held_rank = plane_test_ranks(cfg.seed, SplitId::HeldOut, n),
                         axis_rank = plane_test_ranks(cfg.seed, SplitId::ElevationProfile, n);
#pragma omp parallel for schedule(static) if (n >= kDatasetParallelMinItems)
  for (int j = 0; j < n; ++j) {
    const uint8_t* src = files.test.images.image(j);
    const size_t at = size_t(j) * d.familiar.pixels();
    auto put = [&](Split& s, const PlaneTransform& t, double magnitude) {
      idx_plane_image(src, c.side, p.canvas, t, c.standardize, s.images.data() + at);
      s.axis[size_t(j)] = float(magnitude);
    };
    double magnitude = 0;
    const PlaneTransform t = familiar_change(SplitId::Familiar, j, &magnitude);
    put(d.familiar, t, magnitude);
    const int hr = held_rank[size_t(j)], ar = axis_rank[size_t(j)];
    put(d.heldout, f.at(held[size_t(hr % n_held)], hr / n_held), held[size_t(hr % n_held)]);
    put(d.axis_sweep, f.at(d.axis_values[size_t(ar % n_axis)], ar / n_axis), d.axis_values[size_t(ar % n_axis)]);
    put(d.circle, PlaneTransform{}, f.neutral);
  }
  return d;
}

// The plane protocols' judgement on the canvas's limit, a shift's whole pixels.
std::optional<GeometryProblem> check(const DataConfig& cfg, bool allow_touching_end) {
  const PlaneFactor& f = factor_of(cfg);
  const std::string why_limit =
      " (" + std::string(f.limit_why) + (f.canvas ? ", a canvas of " + std::to_string(cfg.plane->canvas) : std::string()) + ")";
  return check_plane_on_pixels(cfg, allow_touching_end, plane_limit(*cfg.plane), why_limit,
                               "an image's shifts move its pixels whole");
}

long train_images(const DataConfig& d) { return d.idx->train_images - d.idx->validation_images; }

TrainingSize training_size(const DataConfig& d) {
  const long n = train_images(d);
  return {n, std::to_string(n) + " images of " + d.idx->source + "'s training file" +
                 (d.idx->validation_images > 0 ? " (less " + std::to_string(d.idx->validation_images) + " for validation)" : "")};
}

// Training (as drawn at epoch 0), validation and the test file four times,
// each on the canvas; and the files' bytes.
double images(const DataConfig& d) {
  return double(train_images(d) + d.idx->validation_images + 4 * d.idx->test_images);
}
double bytes(const DataConfig& d) {
  const double canvas = d.plane->canvas, side = d.idx->side;
  return images(d) * (canvas * canvas * sizeof(float) + 16) + double(d.idx->train_images + d.idx->test_images) * (side * side + 1);
}

FlagError too_big(const FlagSource& f, const DataConfig& d, const std::string& why) {
  const std::string canvas = std::to_string(d.plane->canvas);
  return FlagError("data", f.value("data"),
                   "the dataset (" + std::to_string(std::llround(images(d))) + " images of " + canvas + " x " + canvas +
                       " floats) " + why);
}

RecordedViews no_views(const DataConfig&) {
  const ViewList origin{0, 0, {0.0}};
  return {origin, origin, origin, {}};
}

std::string describe(const DataConfig& cfg, const Dataset& d) {
  const IdxConfig& c = *cfg.idx;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  std::ostringstream o;
  o << c.source << " (" << c.dir << "), split " << f.protocol << (c.standardize ? ", standardised" : "") << "\n"
    << d.train.size() << " training images, " << d.familiar.size() << " test images of " << c.side << " x " << c.side
    << " on a " << p.canvas << " x " << p.canvas << " canvas, " << c.classes << " classes; " << f.axis.name
    << ": training up to " << p.train_max << " " << f.axis.unit << ", held-out " << p.test_from << ":" << p.test_to
    << " (" << p.test_count << ", one per test image)";
  if (d.validation.size() > 0) o << "; " << d.validation.size() << " training images held for validation";
  o << "\n";
  return o.str();
}

nlohmann::json source_json(const DataConfig& cfg) {
  const IdxConfig& c = *cfg.idx;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  return {{"idx", c.dir},
          {"split", f.protocol},
          {"classes", c.classes},
          {"side", c.side},
          {"canvas", p.canvas},
          {"validation_images", c.validation_images},
          {"standardize", c.standardize},
          {"axis", f.axis.name},
          {"unit", f.axis.unit},
          {"train_max", p.train_max},
          {"test_from", p.test_from},
          {"test_to", p.test_to},
          {"test_count", p.test_count}};
}

}  // namespace

void idx_plane_image(const uint8_t* src, int side, int canvas, const PlaneTransform& t, bool standardize, float* dst) {
  const int off = (canvas - side) / 2;  // where the image starts on the canvas
  const size_t pixels = size_t(canvas) * size_t(canvas);
  const bool moves_only = t.a == 1 && t.b == 0 && t.c == 0 && t.d == 1;
  if (moves_only && whole(t.tx) && whole(t.ty)) {
    std::fill(dst, dst + pixels, 0.f);
    const int dx = off + int(t.tx), dy = off + int(t.ty);
    for (int r = std::max(0, -dy); r < std::min(side, canvas - dy); ++r)
      for (int c = std::max(0, -dx); c < std::min(side, canvas - dx); ++c)
        dst[size_t(r + dy) * size_t(canvas) + size_t(c + dx)] = float(src[r * side + c]) / 255.f;
  } else {
    // Output pixel q reads the image at its centre + A^-1 (q - canvas centre - t).
    const double det = t.a * t.d - t.b * t.c;
    const double ia = t.d / det, ib = -t.b / det, ic = -t.c / det, id = t.a / det;
    const double canvas_centre = (canvas - 1) / 2.0, image_centre = (side - 1) / 2.0;
    auto at = [&](int r, int c) { return r >= 0 && r < side && c >= 0 && c < side ? double(src[r * side + c]) / 255 : 0.0; };
    // A point within 1e-9 of a pixel is that pixel (a quarter turn's cosine is 6e-17, not 0).
    auto snap = [](double v) { return std::fabs(v - std::round(v)) < 1e-9 ? std::round(v) : v; };
    for (int r = 0; r < canvas; ++r)
      for (int c = 0; c < canvas; ++c) {
        const double qx = c - canvas_centre - t.tx, qy = r - canvas_centre - t.ty;
        const double x = snap(image_centre + ia * qx + ib * qy), y = snap(image_centre + ic * qx + id * qy);
        const double x0 = std::floor(x), y0 = std::floor(y), fx = x - x0, fy = y - y0;
        const int cx = int(x0), cy = int(y0);
        const double top = (1 - fx) * at(cy, cx) + fx * at(cy, cx + 1);
        const double bottom = (1 - fx) * at(cy + 1, cx) + fx * at(cy + 1, cx + 1);
        dst[size_t(r) * size_t(canvas) + size_t(c)] = float((1 - fy) * top + fy * bottom);
      }
  }
  if (standardize) standardize_pixels(dst, int(pixels));
}

void configure_idx_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* d) {
  configure_idx_source(flags, d);
  const IdxConfig& c = *d->idx;
  PlaneConfig p;
  p.factor = &f;
  p.canvas = c.side + kIdxCanvasMargin;
  if (f.canvas) {  // first: the magnitudes' limit grows with it
    const char* name = f.canvas->name;
    const long long n = flags.integer(name, 0, 1ll << 30);
    const std::string side = std::to_string(c.side);
    if (n < c.side || n > kMaxCanvas)
      throw FlagError(name, flags.value(name),
                      "a canvas for " + side + " x " + side + " images is " + side + " to " + std::to_string(kMaxCanvas) +
                          " pixels a side");
    if ((n - c.side) % 2 != 0)
      throw FlagError(name, flags.value(name),
                      "the " + side + " x " + side + " images sit at its centre on whole pixels: N - " + side +
                          " must be even");
    p.canvas = int(n);
  }
  configure_plane_magnitudes(f, flags, &p);
  const long test_images = c.test_images;
  if (test_images < p.test_count)
    throw FlagError(f.count.name, flags.value(f.count.name),
                    std::to_string(test_images) + " test images cannot hold " + std::to_string(p.test_count) +
                        " held-out magnitudes");
  d->plane = p;
}

Protocol idx_plane_protocol(const PlaneFactor& f, const char* name, const char* source,
                            void (*configure)(const FlagSource&, DataConfig*)) {
  // The synthetic twin's distance, sweep and held-out text (they read only
  // the magnitudes); the IDX set's images, sizes and flags.
  Protocol p = plane_protocol(f, configure);
  p.name = name;
  p.source = source;
  p.check = check;
  p.make = make;
  p.axis_values = axis_values;
  p.describe = describe;
  p.source_json = source_json;
  p.training_size = training_size;
  p.images = images;
  p.bytes = bytes;
  p.too_big = too_big;
  p.views = no_views;
  p.flags.push_back(kStandardizeFlag);
  return p;
}

}  // namespace vg
