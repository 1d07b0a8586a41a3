// The protocols of the rendered shapes (--data synthetic): a held-out azimuth
// window (the default; a sweep steps it by gap), an elevation extrapolation
// (--test-elevations), and the paper's two splits as presets of those flags
// (docs/protocols.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "data/protocol.h"

namespace vg {

namespace {

void configure_synthetic(const FlagSource& f, DataConfig* d) {
  d->train_azimuths = f.range("train-azimuths", "n-train-views");
  d->test_azimuths = f.range("test-azimuths", "n-test-views");
  d->elevations = f.range("elevations", "n-elev");
  d->shapes = parse_shapes(f.value("shapes"));
  const std::string test_elev = f.value("test-elevations"), n_test_elev = f.value("n-test-elev");
  if (!test_elev.empty() || !n_test_elev.empty()) {
    if (test_elev.empty()) throw FlagError("n-test-elev", n_test_elev, "needs --test-elevations");
    // Without a count: as many held-out elevations as training ones.
    const std::string count = n_test_elev.empty() ? f.value("n-elev") : n_test_elev;
    d->test_elevations = f.range("test-elevations", "n-test-elev", &count);
  }
  d->n_per_combo = int(f.integer("n-per-combo", 1, 10000));
  d->n_eval_per_combo = int(f.integer("n-eval-per-combo", 1, 10000));
  d->noise_std = f.real("noise", 0, 0.5);
}

// Images, their labels and viewpoints, and the clean renders of the largest split.
double bytes(const DataConfig& d) {
  const double clean = double(kNumClasses) * d.elevations.count * 36;
  return (synthetic_images(d) + clean) * kImagePixels * sizeof(float) + synthetic_images(d) * 12;
}

// The count flag raised furthest above its default (DataConfig's, the run
// flags' too) is the one to blame; the message shows every factor.
FlagError too_big(const FlagSource& f, const DataConfig& d, const std::string& why) {
  const DataConfig def;
  const std::pair<const char*, int> counts[] = {{"n-per-combo", def.n_per_combo},
                                                {"n-eval-per-combo", def.n_eval_per_combo},
                                                {"n-elev", def.elevations.count},
                                                {"n-train-views", def.train_azimuths.count},
                                                {"n-test-views", def.test_azimuths.count}};
  const char* worst = counts[0].first;
  double ratio = 0;
  for (const auto& [name, count] : counts)
    if (const double r = std::stod(f.value(name)) / count; r > ratio) ratio = r, worst = name;
  std::ostringstream o;
  o << "the dataset (5 classes x " << d.elevations.count << " elevations x (" << d.train_azimuths.count
    << " training views x " << d.n_per_combo << " + " << d.train_azimuths.count + d.test_azimuths.count + 36
    << " evaluation views x " << d.n_eval_per_combo << ") = " << std::llround(synthetic_images(d)) << " images) "
    << why;
  return FlagError(worst, f.value(worst), o.str());
}

// The held-out window `distance` degrees beyond the training range's end, `width` wide.
DataConfig window_at(const DataConfig& cfg, double distance, double width) {
  DataConfig o = cfg;
  o.test_azimuths.from = cfg.train_azimuths.to + distance;
  o.test_azimuths.to = cfg.train_azimuths.to + distance + width;
  return o;
}

double window_gap(const DataConfig& cfg) { return azimuth_gap(cfg.train_azimuths.values(), cfg.test_azimuths.values()); }

std::string window_text(const DataConfig& cfg) {
  std::ostringstream o;
  o << cfg.test_azimuths.from << ":" << cfg.test_azimuths.to;
  return o.str();
}

// The held-out elevation band `distance` degrees beyond the training band, on
// the side --test-elevations puts it (above, unless it lies wholly below),
// keeping its width and count (the sweep's --test-width is the azimuth
// window's); the held-out azimuths stay as given.
DataConfig band_at(const DataConfig& cfg, double distance, double) {
  DataConfig o = cfg;
  const AngleRange &tr = cfg.elevations, &te = cfg.test_elevations;
  const double width = te.to - te.from;
  if (te.to < tr.from) {
    o.test_elevations.to = tr.from - distance;
    o.test_elevations.from = o.test_elevations.to - width;
  } else {
    o.test_elevations.from = tr.to + distance;
    o.test_elevations.to = o.test_elevations.from + width;
  }
  return o;
}

std::string band_text(const DataConfig& cfg) {
  std::ostringstream o;
  o << cfg.test_elevations.from << ":" << cfg.test_elevations.to;
  return o.str();
}

std::string describe(const DataConfig& d, const Dataset& data) {
  char line[256];
  std::snprintf(line, sizeof line, "train azimuths %g:%g (%d views), held-out %g:%g (%d views); true gap %g deg\n",
                d.train_azimuths.from, d.train_azimuths.to, d.train_azimuths.count, d.test_azimuths.from,
                d.test_azimuths.to, d.test_azimuths.count, data.gap_deg);
  std::string out = line;
  if (d.test_elevations.count > 0) {
    std::snprintf(line, sizeof line, "train elevations %g:%g (%d), held-out %g:%g (%d); elevation true gap %g deg\n",
                  d.elevations.from, d.elevations.to, d.elevations.count, d.test_elevations.from,
                  d.test_elevations.to, d.test_elevations.count, data.elev_gap_deg);
    out += line;
  }
  return out;
}

bool no_test_elevations(const FlagSource& f) { return f.value("test-elevations").empty(); }
bool test_elevations_given(const FlagSource& f) { return !f.value("test-elevations").empty(); }

// Everything but the name, the split, the axis, the default rule and the preset.
Protocol synthetic(const char* name, const char* split, HeldOutAxis axis) {
  Protocol p{.name = name, .source = "synthetic", .split = split, .axis = axis};
  p.configure = configure_synthetic;
  p.check = check_geometry;
  p.training_size = synthetic_training_size;
  p.images = synthetic_images;
  p.bytes = bytes;
  p.too_big = too_big;
  p.make = make_synthetic_dataset;
  const bool by_azimuth = axis.name == std::string("azimuth");
  p.axis_values = by_azimuth ? circle_azimuths : profile_elevations;
  p.distance = by_azimuth ? azimuth_distance : elevation_distance;
  p.at_distance = by_azimuth ? window_at : band_at;
  p.swept_flag = by_azimuth ? "test-azimuths" : nullptr;
  p.sweeps_width = by_azimuth;
  p.sweep_gap = by_azimuth ? window_gap : elevation_gap;
  p.heldout_text = by_azimuth ? window_text : band_text;
  p.describe = describe;
  return p;
}

}  // namespace

TrainingSize synthetic_training_size(const DataConfig& d) {
  const long long n = 1ll * kNumClasses * d.train_azimuths.count * d.elevations.count * d.n_per_combo;
  return {n, std::to_string(n) + " images = 5 classes x " + std::to_string(d.train_azimuths.count) + " views x " +
                 std::to_string(d.elevations.count) + " elevations x " + std::to_string(d.n_per_combo) +
                 " per combination"};
}

Protocol azimuth_window_protocol() {
  Protocol p = synthetic("azimuth-window", nullptr, {"azimuth", "deg"});
  p.default_for = no_test_elevations;
  p.holds = [](const Protocol&, const DataConfig& c) { return !c.plane && c.test_elevations.count == 0; };
  return p;
}

Protocol elevation_extrapolation_protocol() {
  Protocol p = synthetic("elevation-extrapolation", nullptr, {"elevation", "deg"});
  p.default_for = test_elevations_given;
  p.holds = [](const Protocol&, const DataConfig& c) { return !c.plane && c.test_elevations.count > 0; };
  p.chosen_by = {{"test-elevations", "60:80"}};
  // A band moved by g above the training elevations (10:50 by default) keeps
  // its width and stays within 90.
  p.default_gaps = "0,10,20";
  return p;
}

namespace {

// The paper's splits fix their held-out views, as on smallNORB's files: a
// sweep runs them as given (no gaps), whatever the data source.
Protocol paper_preset(const char* name, HeldOutAxis axis) {
  Protocol p = synthetic(name, name, axis);
  p.holds = nullptr;
  p.at_distance = nullptr;
  p.swept_flag = nullptr;
  p.sweeps_width = false;
  return p;
}

}  // namespace

// Train on azimuths 300..40 (a third of the circle), test on 60..280; all 9 elevations.
Protocol paper_azimuth_protocol() {
  Protocol p = paper_preset("paper-azimuth", {"azimuth", "deg"});
  p.preset = {{"train-azimuths", "300:400"}, {"n-train-views", "6"}, {"test-azimuths", "60:280"},
              {"n-test-views", "12"}, {"elevations", "30:70"}, {"n-elev", "9"}};
  return p;
}

// All 18 azimuths; train on the 3 lowest of the 9 elevations, test on the 6 highest.
Protocol paper_elevation_protocol() {
  Protocol p = paper_preset("paper-elevation", {"elevation", "deg"});
  p.preset = {{"train-azimuths", "0:340"}, {"n-train-views", "18"}, {"test-azimuths", "0:340"},
              {"n-test-views", "18"}, {"elevations", "30:40"}, {"n-elev", "3"},
              {"test-elevations", "45:70"}, {"n-test-elev", "6"}};
  return p;
}

Source synthetic_source() {
  return {.name = "synthetic",
          .help = "rendered",
          .rendered = true,
          .viewpoints = true,
          .holds = [](const DataConfig& c) { return !c.norb && !c.idx; },
          // The object's frame, or a protocol's canvas (data/plane_views.h).
          .shape = [](const DataConfig& c) { return ImageShape{1, c.plane ? c.plane->canvas : kImageSide, kNumClasses}; },
          .class_name = [](const DataConfig& c, int cls) { return class_name(c.shapes, cls); },
          .data_text = [](const DataConfig&) { return std::string("synthetic"); }};
}

}  // namespace vg
