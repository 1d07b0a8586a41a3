// In-plane changes of the rendered views (a shift, a turn, a scale, a shear)
// as a protocol's held-out axis: the machinery the translation and affine
// protocols share. Every split keeps the training viewpoints (azimuths x
// elevations); what is novel about a held-out image is how far its in-plane
// change lies beyond the changes training saw (the question of capsules'
// equivariance, docs/protocols.md).
#pragma once
#include "data/protocol.h"

namespace vg {

// One factor of in-plane change, and the flags that set it. Magnitudes are
// >= neutral; a sample's change has a magnitude and a direction (one of 8
// for a shift, a sign for the others).
struct PlaneFactor {
  const char* protocol;  // the protocol's name and --split value
  HeldOutAxis axis;      // e.g. {"shift", "px"}
  double neutral;        // the magnitude that changes nothing: 0, or 1 for a scale
  double limit;          // the largest magnitude a flag may ask for
  const char* limit_why; // why, for the message that refuses more
  double profile_step;   // the axis sweep's magnitudes: neutral, neutral + step, ..., limit
  DataFlag train, test, count;  // --train-X (training's largest magnitude), --test-Xs A:B, --n-test-Xs
  // The change of magnitude m in direction k (k mod 8 for a shift, k mod 2 a sign).
  PlaneTransform (*at)(double m, int k);
  // A training change of magnitude at most m, from u1, u2 uniform in [0, 1);
  // *magnitude receives its own magnitude.
  PlaneTransform (*draw)(double m, double u1, double u2, double* magnitude);
  // A factor drawn on a canvas of its own (the translation protocol's
  // --canvas, kMinCanvas to kMaxCanvas pixels a side, default the 32-pixel
  // frame): the flag, and the largest magnitude on a canvas of side N
  // (`limit` is the frame's). Unset: every image is the frame, the limit `limit`.
  std::optional<DataFlag> canvas = std::nullopt;
  double (*limit_on)(int canvas) = nullptr;
};
inline constexpr int kMinCanvas = kImageSide, kMaxCanvas = 128;

// The largest magnitude of p's factor on p's canvas.
double plane_limit(const PlaneConfig& p);
// The held-out magnitudes: test_count evenly spaced from test_from to test_to.
std::vector<double> plane_test_magnitudes(const PlaneConfig& p);

// p with its sweep's default --gaps (Protocol::default_gaps).
inline Protocol with_default_gaps(Protocol p, const char* gaps) {
  p.default_gaps = gaps;
  return p;
}

// A magnitude as messages write it (2, 0.25, 1.5).
std::string plane_number(double v);
// The axis sweep's positions: neutral to `limit` in f's profile steps.
std::vector<double> plane_axis_steps(const PlaneFactor& f, double limit);

// ---- On images of pixels (smallNORB's files, the IDX sets), whose shifts move
// whole pixels, exactly, never resampled.
bool is_shift(const PlaneFactor& f);
// A training change of magnitude at most m from two uniforms in (0, 1): a
// shift's coordinates uniform over the whole pixels -m..m, the others the
// factor's own draw.
PlaneTransform draw_on_pixels(const PlaneFactor& f, double m, double u1, double u2, double* magnitude);
// Which held-out magnitude and direction each of n test images gets: its rank
// in a permutation of the test set keyed by (seed, split), cycled over the
// magnitudes and then the directions, so every magnitude is as common, each
// sees every direction, and none follows the files' order of classes or views.
std::vector<int> plane_test_ranks(uint64_t seed, SplitId id, int n);
// The judgement of cfg's magnitudes on such images: within `limit` (beyond
// it, `why_limit` says why: " (...)"), a shift's in whole pixels (else
// `whole_why` says why), held-out beyond training (the sweep's gap-0 range may
// touch it: allow_touching_end).
std::optional<GeometryProblem> check_plane_on_pixels(const DataConfig& cfg, bool allow_touching_end, double limit,
                                                    const std::string& why_limit, const std::string& whole_why);

// The protocol of the rendered shapes whose held-out axis is `f` (a static
// object: the configuration points to it). `configure` calls configure_plane(f, ...).
Protocol plane_protocol(const PlaneFactor& f, void (*configure)(const FlagSource&, DataConfig*));
void configure_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* cfg);
// Its training and held-out magnitudes alone, into p (whose factor and canvas
// are set): the part every source's in-plane protocols share.
void configure_plane_magnitudes(const PlaneFactor& f, const FlagSource& flags, PlaneConfig* p);

}  // namespace vg
