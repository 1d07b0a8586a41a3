// The translation protocol (--split translation): train on objects centred,
// or shifted within +-S pixels (--train-shift), and test at shifts of d
// pixels beyond (--test-shifts), at the training viewpoints. Its held-out axis
// is the shift: the largest of |dx| and |dy|, in pixels of the 32 x 32 image.
// The canvas is the model's 32 x 32: beyond 4 pixels the shifted object is
// cut by the frame's edge, as a crop would cut it.
#include "data/norb_plane.h"
#include "data/plane_views.h"

namespace vg {

namespace {

constexpr int kDirections[8][2] = {{1, 0}, {1, 1}, {0, 1}, {-1, 1}, {-1, 0}, {-1, -1}, {0, -1}, {1, -1}};

PlaneTransform shift_at(double m, int k) {
  const int* dir = kDirections[k % 8];
  return {.tx = m * dir[0], .ty = m * dir[1]};
}

// Uniform over the square of side 2m: its magnitude is the larger coordinate.
PlaneTransform shift_draw(double m, double u1, double u2, double* magnitude) {
  const double dx = (2 * u1 - 1) * m, dy = (2 * u2 - 1) * m;
  *magnitude = std::max(std::fabs(dx), std::fabs(dy));
  return {.tx = dx, .ty = dy};
}

const PlaneFactor kShift{
    .protocol = "translation",
    .axis = {"shift", "px"},
    .neutral = 0,
    .limit = 16,
    .limit_why = "the object's centre would leave the 32-pixel frame",
    .profile_step = 1,
    .train = {"train-shift", "0", "With --split translation: training shifts, uniform in +-S pixels in x and y"},
    .test = {"test-shifts", "3:6", "With --split translation: held-out shifts A:B in pixels (the larger of |dx|, |dy|)"},
    .count = {"n-test-shifts", "4", "With --split translation: evenly spaced held-out shifts, each in 8 directions"},
    .at = shift_at,
    .draw = shift_draw,
};

void configure(const FlagSource& flags, DataConfig* cfg) { configure_plane(kShift, flags, cfg); }

}  // namespace

Protocol translation_protocol() { return plane_protocol(kShift, configure); }
Protocol norb_translation_protocol() { return norb_plane_protocol<kShift>("norb-translation"); }

}  // namespace vg
