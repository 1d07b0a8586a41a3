// The in-plane protocols on smallNORB's files (data/norb_plane.h).
#include "data/norb_plane.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <sstream>

#include "core/rng.h"

namespace vg {

namespace {

constexpr int kHalfPixels = kNorbHalfSide * kNorbHalfSide;
// The crop's largest offset from the centre: (48 - 32) / 2.
constexpr double kNorbShiftLimit = kNorbCentreOffset;

bool whole(double v) { return v == std::floor(v); }

const PlaneFactor& factor_of(const DataConfig& cfg) { return *cfg.plane->factor; }

std::string g(double v) { return plane_number(v); }

// The axis sweep's positions: neutral to smallNORB's limit in the factor's steps.
std::vector<double> axis_values(const DataConfig& cfg) { return plane_axis_steps(factor_of(cfg), norb_plane_limit(factor_of(cfg))); }

// A pair's cameras downsampled to 48 x 48, with each one's background.
struct Halves {
  int channels = 0;
  float px[2][kHalfPixels];
  float background[2];
  void load(const uint8_t* pair, NorbCameras cameras) {
    int cams[2];
    channels = norb_camera_list(cameras, cams);
    for (int ch = 0; ch < channels; ++ch) {
      norb_downsample(pair + size_t(cams[ch]) * kNorbImageBytes, px[ch]);
      background[ch] = norb_border_mean(px[ch]);
    }
  }
  void window(const PlaneTransform& t, float* dst) const {
    for (int ch = 0; ch < channels; ++ch) norb_plane_window(px[ch], t, background[ch], dst + ch * kNorbCropPixels);
  }
};

// What a training sample is drawn from: the files, the factor and its range,
// the cameras and jitter, the seed.
struct TrainDraw {
  std::shared_ptr<const NorbData> files;
  const PlaneFactor* factor;
  double train_max;
  NorbPrep prep;
  uint64_t seed;
  // Training image i of `epoch` into dst; its change's magnitude returned.
  double operator()(int i, uint64_t epoch, float* dst) const {
    std::array<uint8_t, kNorbPairBytes> pair;  // on the stack: a training step allocates nothing
    files->train.read_pair(i, pair.data());
    return from_pair(pair.data(), i, epoch, dst);
  }
  // The same from image i's pair. Four draws always (the change's two, then
  // brightness and contrast), so a setting never shifts another's draws.
  double from_pair(const uint8_t* pair, int i, uint64_t epoch, float* dst) const {
    Stream rng = norb_augment_stream(seed, epoch, uint64_t(i));
    const double u1 = rng.uniform(), u2 = rng.uniform();
    const float ub = float(rng.uniform()), uc = float(rng.uniform());
    double magnitude = 0;
    const PlaneTransform t = draw_on_pixels(*factor, train_max, u1, u2, &magnitude);
    norb_plane_sample(pair, prep.cameras, t, dst);
    norb_jitter(dst, norb_channels(prep.cameras), prep, ub, uc);
    return magnitude;
  }
};

Split empty_split(const NorbSet& set, int channels) {
  Split s;
  s.channels = channels;
  const size_t n = size_t(set.size());
  s.images.resize(n * s.pixels());
  s.labels.resize(n);
  s.azimuth.resize(n);
  s.elevation.resize(n);
  s.axis.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const NorbInfo& r = set.info()[i];
    s.labels[i] = set.labels()[i];
    s.azimuth[i] = float(norb_azimuth_deg(r.azimuth));
    s.elevation[i] = float(norb_elevation_deg(r.elevation));
  }
  return s;
}

// Runs body(i, pair) for every pair of `set` on the OpenMP threads; the first
// read that fails is thrown after the loop (an exception must not leave the
// parallel region).
template <class Body>
void for_each_pair(const NorbSet& set, Body body) {
  const int n = set.size();
  std::string error;
#pragma omp parallel
  {
    std::vector<uint8_t> pair(kNorbPairBytes);
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      try {
        set.read_pair(i, pair.data());
      } catch (const NorbError& e) {
#pragma omp critical(norb_plane_read)
        if (error.empty()) error = e.what();
        continue;
      }
      body(i, pair.data());
    }
  }
  if (!error.empty()) throw NorbError(error);
}

// Training: every image of the training instances, drawn afresh each epoch
// (Split::draw) and held once as drawn at epoch 0 (what a model fit in one
// pass sees). Test: every image of the test instances four times: familiar
// (a change drawn within the training range), held-out (one of the held-out
// magnitudes), the axis sweep (one of axis_values) and the circle (unchanged).
Dataset make(const DataConfig& cfg) {
  const NorbConfig& nc = *cfg.norb;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  const auto files = std::make_shared<const NorbData>(open_norb(nc, {.train = true, .test = true}));
  const int channels = norb_channels(nc.prep.cameras);
  Dataset d;
  std::vector<int> all_train(size_t(files->train.size())), all_test(size_t(files->test.size()));
  std::iota(all_train.begin(), all_train.end(), 0);
  std::iota(all_test.begin(), all_test.end(), 0);
  d.train_az = norb_angles(files->train, all_train, false);
  d.elevations = norb_angles(files->train, all_train, true);
  d.test_az = norb_angles(files->test, all_test, false);
  d.test_elevations = norb_angles(files->test, all_test, true);
  d.circle_az = circle_azimuths(cfg);
  d.gap_deg = azimuth_gap(d.train_az, d.test_az);
  d.elev_gap_deg = 0;
  for (double t : d.test_elevations) {
    double nearest = INFINITY;
    for (double e : d.elevations) nearest = std::min(nearest, std::fabs(t - e));
    d.elev_gap_deg = std::max(d.elev_gap_deg, nearest);
  }
  d.axis_values = axis_values(cfg);

  const TrainDraw draw{files, &f, p.train_max, nc.prep, cfg.seed};
  d.train = empty_split(files->train, channels);
  for_each_pair(files->train, [&](int i, const uint8_t* pair) {
    d.train.axis[size_t(i)] = float(draw.from_pair(pair, i, 0, d.train.images.data() + size_t(i) * d.train.pixels()));
  });
  d.train.draw = [draw](int i, uint64_t epoch, float* dst) { draw(i, epoch, dst); };

  d.familiar = empty_split(files->test, channels);
  d.heldout = empty_split(files->test, channels);
  d.axis_sweep = empty_split(files->test, channels);
  d.circle = empty_split(files->test, channels);
  const std::vector<double> held = plane_test_magnitudes(p);
  const int n = files->test.size(), n_held = int(held.size()), n_axis = int(d.axis_values.size());
  const std::vector<int> held_rank = plane_test_ranks(cfg.seed, SplitId::HeldOut, n),
                         axis_rank = plane_test_ranks(cfg.seed, SplitId::ElevationProfile, n);
  for_each_pair(files->test, [&](int j, const uint8_t* pair) {
    Halves h;
    h.load(pair, nc.prep.cameras);
    const size_t at = size_t(j) * d.familiar.pixels();
    Stream r(cfg.seed, Purpose::Plane, uint32_t(SplitId::Familiar), uint64_t(j));
    const double u1 = r.uniform(), u2 = r.uniform();
    double magnitude = 0;
    h.window(draw_on_pixels(f, p.train_max, u1, u2, &magnitude), d.familiar.images.data() + at);
    d.familiar.axis[size_t(j)] = float(magnitude);
    const int hr = held_rank[size_t(j)], ar = axis_rank[size_t(j)];
    h.window(f.at(held[size_t(hr % n_held)], hr / n_held), d.heldout.images.data() + at);
    d.heldout.axis[size_t(j)] = float(held[size_t(hr % n_held)]);
    h.window(f.at(d.axis_values[size_t(ar % n_axis)], ar / n_axis), d.axis_sweep.images.data() + at);
    d.axis_sweep.axis[size_t(j)] = float(d.axis_values[size_t(ar % n_axis)]);
    h.window(PlaneTransform{}, d.circle.images.data() + at);
    d.circle.axis[size_t(j)] = float(f.neutral);
  });
  return d;
}

// The plane protocols' judgement at smallNORB's limit, the crop's whole pixels.
std::optional<GeometryProblem> check(const DataConfig& cfg, bool allow_touching_end) {
  const PlaneFactor& f = factor_of(cfg);
  const std::string why_limit = is_shift(f) ? " (a 32x32 crop of smallNORB's 48x48 image moves at most " +
                                                  g(kNorbShiftLimit) + " pixels)"
                                            : " (" + std::string(f.limit_why) + ")";
  return check_plane_on_pixels(cfg, allow_touching_end, norb_plane_limit(f), why_limit,
                               "smallNORB's shifts move the crop by whole pixels");
}

std::string describe(const DataConfig& cfg, const Dataset& d) {
  const NorbConfig& n = *cfg.norb;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  std::ostringstream o;
  o << norb_source_text(n) << ", split " << f.protocol << ", cameras " << norb_cameras_name(n.prep.cameras) << "\n"
    << d.train.size() << " training images (every view of the training instances), " << d.heldout.size()
    << " test images; " << f.axis.name << ": training up to " << p.train_max << " " << f.axis.unit << ", held-out "
    << p.test_from << ":" << p.test_to << " (" << p.test_count << ", one per test image)\n";
  return o.str();
}

nlohmann::json source_json(const DataConfig& cfg) {
  const NorbConfig& n = *cfg.norb;
  const PlaneFactor& f = factor_of(cfg);
  const PlaneConfig& p = *cfg.plane;
  nlohmann::json j = norb_source_json(n);
  j.update({{"split", f.protocol},
          {"cameras", norb_cameras_name(n.prep.cameras)},
          {"brightness", n.prep.max_brightness},
          {"contrast", n.prep.max_contrast},
          {"axis", f.axis.name},
          {"unit", f.axis.unit},
          {"train_max", p.train_max},
          {"test_from", p.test_from},
          {"test_to", p.test_to},
          {"test_count", p.test_count}});
  return j;
}

}  // namespace

double norb_plane_limit(const PlaneFactor& f) { return is_shift(f) ? kNorbShiftLimit : f.limit; }

float norb_border_mean(const float* src) {
  constexpr int s = kNorbHalfSide;
  double sum = 0;
  for (int c = 0; c < s; ++c) sum += double(src[c]) + double(src[(s - 1) * s + c]);
  for (int r = 1; r < s - 1; ++r) sum += double(src[r * s]) + double(src[r * s + s - 1]);
  return float(sum / (4 * s - 4));
}

void norb_plane_window(const float* src, const PlaneTransform& t, float background, float* dst) {
  constexpr int s = kNorbHalfSide, o = kNorbCentreOffset;
  const bool moves_only = t.a == 1 && t.b == 0 && t.c == 0 && t.d == 1;
  if (moves_only && whole(t.tx) && whole(t.ty) && std::fabs(t.tx) <= o && std::fabs(t.ty) <= o) {
    norb_crop(src, o - int(t.ty), o - int(t.tx), dst);
    return;
  }
  // Output pixel q reads the source at centre + A^-1 (q - centre - t).
  const double det = t.a * t.d - t.b * t.c;
  const double ia = t.d / det, ib = -t.b / det, ic = -t.c / det, id = t.a / det;
  constexpr double centre = (s - 1) / 2.0;
  auto at = [&](int r, int c) { return r >= 0 && r < s && c >= 0 && c < s ? double(src[r * s + c]) : double(background); };
  // A point within 1e-9 of a pixel is that pixel (a quarter turn's cosine is 6e-17, not 0).
  auto snap = [](double v) { return std::fabs(v - std::round(v)) < 1e-9 ? std::round(v) : v; };
  for (int r = 0; r < kNorbCropSide; ++r)
    for (int c = 0; c < kNorbCropSide; ++c) {
      const double qx = c + o - centre - t.tx, qy = r + o - centre - t.ty;
      const double x = snap(centre + ia * qx + ib * qy), y = snap(centre + ic * qx + id * qy);
      const double x0 = std::floor(x), y0 = std::floor(y), fx = x - x0, fy = y - y0;
      const int cx = int(x0), cy = int(y0);
      const double top = (1 - fx) * at(cy, cx) + fx * at(cy, cx + 1);
      const double bottom = (1 - fx) * at(cy + 1, cx) + fx * at(cy + 1, cx + 1);
      dst[r * kNorbCropSide + c] = float((1 - fy) * top + fy * bottom);
    }
}

void norb_plane_sample(const uint8_t* pair, NorbCameras cameras, const PlaneTransform& t, float* dst) {
  float half[kHalfPixels];
  int cams[2];
  const int nc = norb_camera_list(cameras, cams);
  for (int ch = 0; ch < nc; ++ch) {
    norb_downsample(pair + size_t(cams[ch]) * kNorbImageBytes, half);
    norb_plane_window(half, t, norb_border_mean(half), dst + ch * kNorbCropPixels);
  }
}

void configure_norb_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* d) {
  NorbConfig c = configure_norb_source(flags, d);
  configure_plane(f, flags, d);
  // Every view of the training instances; the held-out change is in the plane.
  c.split = NorbSplitKind::full;
  const std::string data = flags.value("data");
  try {
    const NorbData files = open_norb(c);
    const NorbSplit s = norb_split_of(files, c.split, c.dir);
    if (int(s.familiar.size()) < d->plane->test_count)
      throw NorbError(c.dir + ": --split " + f.protocol + ": " + std::to_string(s.familiar.size()) +
                      " test images cannot hold " + std::to_string(d->plane->test_count) + " held-out magnitudes");
    c.train_images = long(s.train.size());
    c.train_az = norb_angles(files.train, s.train, false);
    c.train_elev = norb_angles(files.train, s.train, true);
    c.gap_deg = 0;
    // In memory: the training images as drawn at epoch 0, and the test images
    // four times (familiar, held-out, axis sweep, circle).
    c.images_in_memory = long(s.train.size()) + 4 * long(s.familiar.size());
  } catch (const NorbError& e) {
    throw FlagError("data", data, e.what());
  }
  d->norb = c;
}

Protocol norb_plane_protocol(const PlaneFactor& f, const char* name, void (*configure)(const FlagSource&, DataConfig*)) {
  // The synthetic twin's distance, sweep and held-out text (they read only
  // the magnitudes); smallNORB's sizes, recorded views and flags.
  Protocol p = plane_protocol(f, configure);
  const Protocol files = norb_protocol(NorbSplitKind::full);
  p.name = name;
  p.source = files.source;
  p.check = check;
  p.make = make;
  p.axis_values = axis_values;
  p.describe = describe;
  p.source_json = source_json;
  p.training_size = files.training_size;
  p.images = files.images;
  p.bytes = files.bytes;
  p.too_big = files.too_big;
  p.views = files.views;
  // The files' flags but --standardize and --train-crops: they act on the
  // paper's crops (data/norb.h: NorbPrep), and the window here is not one, so
  // these splits refuse them instead of ignoring them.
  p.flags = {f.train, f.test, f.count};
  for (const DataFlag& d : files.flags)
    if (d.name != std::string("standardize") && d.name != std::string("train-crops")) p.flags.push_back(d);
  return p;
}

}  // namespace vg
