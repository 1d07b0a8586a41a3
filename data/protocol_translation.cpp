// The translation protocol (--split translation): train on objects centred,
// or shifted within +-S pixels (--train-shift), and test at shifts of d
// pixels beyond (--test-shifts), at the training viewpoints. Its held-out axis
// is the shift: the largest of |dx| and |dy|, in pixels.
// The canvas (--canvas N, 32 to 128) is every image's side, the model's
// input: the object keeps its 32 x 32 frame's size at the canvas's centre, as
// affNIST sets MNIST's 28 x 28 digits on 40 x 40. On the default 32 x 32 (the
// frame itself) a shift beyond 4 pixels cuts the object at the edge, as a
// crop would; a canvas of 32 + 2m holds about m + 4 before the edge cuts it. A shift
// may reach N / 2, where the object's centre leaves the canvas.
#include "data/idx_plane.h"
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

// The object's centre stays on the canvas.
double shift_limit(int canvas) { return canvas / 2.0; }

const PlaneFactor kShift{
    .protocol = "translation",
    .axis = {"shift", "px"},
    .neutral = 0,
    .limit = 16,
    .limit_why = "the object's centre would leave the canvas",
    .profile_step = 1,
    .train = {"train-shift", "0", "With --split translation: training shifts, uniform in +-S pixels in x and y"},
    .test = {"test-shifts", "3:6", "With --split translation: held-out shifts A:B in pixels (the larger of |dx|, |dy|)"},
    .count = {"n-test-shifts", "4", "With --split translation: evenly spaced held-out shifts, each in 8 directions"},
    .at = shift_at,
    .draw = shift_draw,
    .canvas = DataFlag{"canvas", "32",
                       "With --split translation: the images' side N in pixels (32 to 128), the object at its "
                       "centre at its 32 x 32 size (an IDX set's images at theirs: N from their side); shifts up to N/2",
                       /*unhashed_value=*/"32"},
    .limit_on = shift_limit,
};

void configure(const FlagSource& flags, DataConfig* cfg) { configure_plane(kShift, flags, cfg); }

}  // namespace

// Gap g holds out shifts g..g+3 px (beyond --train-shift): within the 16 px
// of the default canvas, and the 8 px smallNORB's crop allows.
Protocol translation_protocol() { return with_default_gaps(plane_protocol(kShift, configure), "1,3,6"); }
Protocol norb_translation_protocol() { return with_default_gaps(norb_plane_protocol<kShift>("norb-translation"), "1,3,5"); }
Protocol fashion_translation_protocol() {
  return with_default_gaps(idx_plane_protocol<kShift>("fashion-mnist-translation", "fashion-mnist"), "1,3,6");
}
Protocol idx_translation_protocol() { return with_default_gaps(idx_plane_protocol<kShift>("idx-translation", "idx:"), "1,3,6"); }

}  // namespace vg
