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

// The protocol of the rendered shapes whose held-out axis is `f` (a static
// object: the configuration points to it). `configure` calls configure_plane(f, ...).
Protocol plane_protocol(const PlaneFactor& f, void (*configure)(const FlagSource&, DataConfig*));
void configure_plane(const PlaneFactor& f, const FlagSource& flags, DataConfig* cfg);

}  // namespace vg
