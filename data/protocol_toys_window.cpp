// The toys' window split (--data toys --split window): the rendered shapes'
// held-out azimuth window (azimuth-window, data/protocol_synthetic.cpp) on
// category-level data, so that a sweep steps the gap with toys no model saw.
// Training: the training toys at --train-azimuths' views; familiar: the test
// toys there; held out: the test toys at --test-azimuths'; every elevation and
// lighting of the toys' records, with smallNORB's preprocessing.
//
// The records lie every 10 degrees (smallNORB's azimuth codes, of which its
// files hold every other one), so both windows' ends, a sweep's gaps and its
// --test-width are multiples of 10, and a window holds every 10 degrees of its
// range: 0:60 is 7 azimuths.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "data/norb_plane.h"
#include "data/protocol.h"
#include "data/toys.h"

namespace vg {
namespace {

const double kGridDeg = norb_azimuth_deg(1);

bool on_grid(double a) { return std::fabs(a / kGridDeg - std::round(a / kGridDeg)) < 1e-9; }

// Every grid azimuth of from:to.
AngleRange grid_window(double from, double to) {
  return {from, to, int(std::lround((to - from) / kGridDeg)) + 1};
}

AngleRange window_flag(const FlagSource& f, const char* name) {
  const auto [from, to] = f.interval(name, 0, 720);
  if (!on_grid(from) || !on_grid(to))
    throw FlagError(name, f.value(name), "the toys' azimuths lie every 10 degrees: expected A:B in multiples of 10");
  if (to - from >= 360) throw FlagError(name, f.value(name), "B - A must be under 360 (0:350 is the whole circle)");
  return grid_window(from, to);
}

// The split's sizes and training views, known from the windows alone: each
// azimuth holds every category's toys at every elevation and lighting.
void size_split(DataConfig* d) {
  NorbConfig& c = *d->norb;
  const long per_azimuth = long(kToyCategories) * c.toys->instances * kNorbElevations * c.toys->lightings;
  c.train_images = d->train_azimuths.count * per_azimuth;
  c.images_in_memory = 2 * c.train_images + d->test_azimuths.count * per_azimuth;  // training, familiar, held out
  c.train_az = d->train_azimuths.values();
  std::sort(c.train_az.begin(), c.train_az.end());
  c.train_elev.clear();
  for (int e = 0; e < kNorbElevations; ++e) c.train_elev.push_back(norb_elevation_deg(e));
  c.gap_deg = azimuth_gap(d->train_azimuths.values(), d->test_azimuths.values());
}

void configure(const FlagSource& f, DataConfig* d) {
  NorbConfig c = configure_norb_source(f, d, true);
  if (!c.toys) throw std::logic_error("the window split reads the toys only");
  c.split = NorbSplitKind::window;
  c.toys->azimuth_step = 1;
  d->train_azimuths = window_flag(f, "train-azimuths");
  d->test_azimuths = window_flag(f, "test-azimuths");
  d->norb = c;
  size_split(d);
}

std::string window_text(const DataConfig& d) {
  std::ostringstream o;
  o << d.test_azimuths.from << ":" << d.test_azimuths.to;
  return o.str();
}

// The rendered shapes' rules (ranges, overlap; a sweep's gap-0 window may
// touch the training range's end), and the grid's: a start off the grid is
// where the window lies (a sweep's gap), an end off it its width.
std::optional<GeometryProblem> check(const DataConfig& d, bool allow_touching_end) {
  if (auto p = check_geometry(d, allow_touching_end)) return p;
  const AngleRange& te = d.test_azimuths;
  if (!on_grid(te.from) || !on_grid(te.to))
    return GeometryProblem{on_grid(te.from) ? GeometryPart::test_range : GeometryPart::test_overlap,
                           "the toys' azimuths lie every 10 degrees", "test-azimuths"};
  return std::nullopt;
}

// The held-out window `distance` degrees beyond the training range's end, `width` wide.
DataConfig window_at(const DataConfig& cfg, double distance, double width) {
  DataConfig o = cfg;
  o.test_azimuths = grid_window(cfg.train_azimuths.to + distance, cfg.train_azimuths.to + distance + width);
  size_split(&o);
  return o;
}

double window_gap(const DataConfig& d) { return d.norb->gap_deg; }

}  // namespace

Protocol toys_window_protocol() {
  Protocol p = toys_protocol(NorbSplitKind::window);
  p.configure = configure;
  p.check = check;
  p.at_distance = window_at;
  p.swept_flag = "test-azimuths";
  p.sweeps_width = true;
  p.sweep_gap = window_gap;
  p.heldout_text = window_text;
  return p;
}

}  // namespace vg
