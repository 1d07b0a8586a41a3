// The affine protocols (--split rotation, scale, shear): train on objects
// turned, scaled or sheared in the image plane within a range (none by
// default), and test beyond it, at the training viewpoints, as affNIST tests
// MNIST models on affine changes they never saw. One factor per protocol, so
// each has one held-out axis: the magnitude of that factor. Each runs on
// smallNORB's files too (data/norb_plane.h).
#include <cmath>

#include "data/idx_plane.h"
#include "data/norb_plane.h"
#include "data/plane_views.h"

namespace vg {

namespace {

double sign(int k) { return k % 2 == 0 ? 1.0 : -1.0; }

PlaneTransform rotation_at(double m, int k) { return PlaneTransform::make(sign(k) * m, 1, 0, 0, 0); }
PlaneTransform rotation_draw(double m, double u, double, double* magnitude) {
  const double t = (2 * u - 1) * m;
  *magnitude = std::fabs(t);
  return PlaneTransform::make(t, 1, 0, 0, 0);
}

// A scale m enlarges by m or shrinks by 1 / m; training draws log-uniformly.
PlaneTransform scale_at(double m, int k) { return PlaneTransform::make(0, k % 2 == 0 ? m : 1 / m, 0, 0, 0); }
PlaneTransform scale_draw(double m, double u, double, double* magnitude) {
  const double s = std::exp((2 * u - 1) * std::log(m));
  *magnitude = std::max(s, 1 / s);
  return PlaneTransform::make(0, s, 0, 0, 0);
}

PlaneTransform shear_at(double m, int k) { return PlaneTransform::make(0, 1, sign(k) * m, 0, 0); }
PlaneTransform shear_draw(double m, double u, double, double* magnitude) {
  const double h = (2 * u - 1) * m;
  *magnitude = std::fabs(h);
  return PlaneTransform::make(0, 1, h, 0, 0);
}

const PlaneFactor kRotation{
    .protocol = "rotation",
    .axis = {"rotation", "deg"},
    .neutral = 0,
    .limit = 180,
    .limit_why = "a turn's magnitude lies in [0, 180] degrees",
    .profile_step = 15,
    .train = {"train-rotation", "0", "With --split rotation: training turns, uniform in +-R degrees"},
    .test = {"test-rotations", "30:90", "With --split rotation: held-out turns A:B in degrees, either way"},
    .count = {"n-test-rotations", "3", "With --split rotation: evenly spaced held-out turns"},
    .at = rotation_at,
    .draw = rotation_draw,
};

const PlaneFactor kScale{
    .protocol = "scale",
    .axis = {"scale", "x"},
    .neutral = 1,
    .limit = 2,
    .limit_why = "at 2x the object fills the frame, at 1/2 it is 12 pixels wide",
    .profile_step = 0.125,
    .train = {"train-scale", "1", "With --split scale: training scales, log-uniform in [1/S, S]"},
    .test = {"test-scales", "1.25:1.75", "With --split scale: held-out scale factors A:B (>= 1), enlarged or shrunk"},
    .count = {"n-test-scales", "3", "With --split scale: evenly spaced held-out scale factors"},
    .at = scale_at,
    .draw = scale_draw,
};

const PlaneFactor kShear{
    .protocol = "shear",
    .axis = {"shear", "slope"},
    .neutral = 0,
    .limit = 1,
    .limit_why = "a shear of 1 slants the vertical by 45 degrees",
    .profile_step = 0.1,
    .train = {"train-shear", "0", "With --split shear: training shears, uniform in +-H (x += H y)"},
    .test = {"test-shears", "0.2:0.6", "With --split shear: held-out shears A:B, either way"},
    .count = {"n-test-shears", "3", "With --split shear: evenly spaced held-out shears"},
    .at = shear_at,
    .draw = shear_draw,
};

void configure_rotation(const FlagSource& f, DataConfig* cfg) { configure_plane(kRotation, f, cfg); }
void configure_scale(const FlagSource& f, DataConfig* cfg) { configure_plane(kScale, f, cfg); }
void configure_shear(const FlagSource& f, DataConfig* cfg) { configure_plane(kShear, f, cfg); }

}  // namespace

namespace {

// Gap g holds out the default range's width beyond training's largest, within
// each factor's limit: turns g..g+60 deg (<= 180), scales 1+g..1.5+g (<= 2),
// shears g..g+0.4 (<= 1).
}  // namespace

Protocol rotation_protocol() { return with_default_gaps(plane_protocol(kRotation, configure_rotation), "15,45,90"); }
Protocol scale_protocol() { return with_default_gaps(plane_protocol(kScale, configure_scale), "0.125,0.25,0.5"); }
Protocol shear_protocol() { return with_default_gaps(plane_protocol(kShear, configure_shear), "0.1,0.3,0.6"); }
Protocol norb_rotation_protocol() { return with_default_gaps(norb_plane_protocol<kRotation>("norb-rotation"), "15,45,90"); }
Protocol norb_scale_protocol() { return with_default_gaps(norb_plane_protocol<kScale>("norb-scale"), "0.125,0.25,0.5"); }
Protocol norb_shear_protocol() { return with_default_gaps(norb_plane_protocol<kShear>("norb-shear"), "0.1,0.3,0.6"); }
Protocol fashion_rotation_protocol() {
  return with_default_gaps(idx_plane_protocol<kRotation>("fashion-mnist-rotation", "fashion-mnist"), "15,45,90");
}
Protocol idx_rotation_protocol() { return with_default_gaps(idx_plane_protocol<kRotation>("idx-rotation", "idx:"), "15,45,90"); }
Protocol fashion_scale_protocol() {
  return with_default_gaps(idx_plane_protocol<kScale>("fashion-mnist-scale", "fashion-mnist"), "0.125,0.25,0.5");
}
Protocol idx_scale_protocol() { return with_default_gaps(idx_plane_protocol<kScale>("idx-scale", "idx:"), "0.125,0.25,0.5"); }
Protocol fashion_shear_protocol() {
  return with_default_gaps(idx_plane_protocol<kShear>("fashion-mnist-shear", "fashion-mnist"), "0.1,0.3,0.6");
}
Protocol idx_shear_protocol() { return with_default_gaps(idx_plane_protocol<kShear>("idx-shear", "idx:"), "0.1,0.3,0.6"); }

}  // namespace vg
