// The combined affine protocol (--split affine): every in-plane change at
// once, as affNIST draws each test digit's turn, scale and shear together
// (Sabour et al. 2017, from Tieleman's affNIST: rotation within +-20 degrees,
// scale 0.8..1.2, shear +-0.2). Its held-out axis is the strength s, in
// multiples of those ranges: at strength s an image is turned by s x 20
// degrees, scaled by (1 + s x 0.2) or its inverse and sheared by s x 0.2, with
// the three signs its direction (one of 8). Training draws strengths uniform
// in [0, S] (--train-affine, none by default) with a random direction; held-out
// strengths lie beyond, so a model meets changes larger than any it saw in
// every factor at once. The translation protocol covers the fourth, the shift.
#include <algorithm>
#include <cmath>

#include "data/idx_plane.h"
#include "data/norb_plane.h"
#include "data/plane_views.h"

namespace vg {

namespace {

constexpr double kTurnDeg = 20, kScaleBy = 0.2, kShearBy = 0.2;  // affNIST's ranges: strength 1

// Direction k (mod 8): its three bits are the signs of the turn, the scale's
// exponent and the shear.
PlaneTransform affine_at(double m, int k) {
  const auto sign = [k](int bit) { return (k >> bit) % 2 == 0 ? 1.0 : -1.0; };
  const double scale = std::pow(1 + m * kScaleBy, sign(1));
  return PlaneTransform::make(sign(0) * m * kTurnDeg, scale, sign(2) * m * kShearBy, 0, 0);
}
// Strength uniform in [0, m] (u1), direction uniform over the 8 (u2).
PlaneTransform affine_draw(double m, double u1, double u2, double* magnitude) {
  *magnitude = u1 * m;
  return affine_at(*magnitude, std::min(7, int(u2 * 8)));
}

const PlaneFactor kAffine{
    .protocol = "affine",
    .axis = {"affine", "affNIST"},
    .neutral = 0,
    .limit = 3,
    .limit_why = "at strength 3 an image is turned 60 degrees, scaled 1.6x and sheared 0.6 at once",
    .profile_step = 0.25,
    .train = {"train-affine", "0", "With --split affine: training strengths, uniform in [0, S] (1 = affNIST's turn, scale and shear ranges)"},
    .test = {"test-affine", "1:2", "With --split affine: held-out strengths A:B, each in 8 sign combinations"},
    .count = {"n-test-affine", "3", "With --split affine: evenly spaced held-out strengths"},
    .at = affine_at,
    .draw = affine_draw,
};

void configure(const FlagSource& f, DataConfig* cfg) { configure_plane(kAffine, f, cfg); }

}  // namespace

// Gap g holds out strengths g..g+1 (the default range's width) beyond
// training's largest, within the limit of 3.
Protocol affine_protocol() { return with_default_gaps(plane_protocol(kAffine, configure), "0.5,1,2"); }
Protocol norb_affine_protocol() { return with_default_gaps(norb_plane_protocol<kAffine>("norb-affine"), "0.5,1,2"); }
Protocol fashion_affine_protocol() {
  return with_default_gaps(idx_plane_protocol<kAffine>("fashion-mnist-affine", "fashion-mnist"), "0.5,1,2");
}
Protocol idx_affine_protocol() { return with_default_gaps(idx_plane_protocol<kAffine>("idx-affine", "idx:"), "0.5,1,2"); }

}  // namespace vg
