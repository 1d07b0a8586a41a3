// A configuration's data (DataConfig: which source, protocol and views), its
// splits (Split: images, labels, each sample's viewpoint and position along
// the held-out axis) and the Dataset a run trains and tests on; the rendered
// shapes' splits (make_synthetic_dataset) and the checks of a view geometry.
// The renderer is data/render.h, the sources data/source.h, the protocols
// that make a Dataset data/protocol.h.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/image_shape.h"
#include "data/norb.h"
#include "data/render.h"
#include "data/toy_views.h"

namespace vg {

// K evenly spaced angles from `from` to `to` inclusive, in degrees; values wrap
// modulo 360 (300:420 crosses 0). K == 1 gives just `from`.
struct AngleRange {
  double from = 0, to = 0;
  int count = 1;
  std::vector<double> values() const;  // each in [0, 360)
};

// Smallest circular distance in degrees between two angles (in [0, 180]).
double circular_distance(double a_deg, double b_deg);
// Smallest circular distance between any test and any train azimuth.
double azimuth_gap(const std::vector<double>& train_az, const std::vector<double>& test_az);

// One split: N images of channels x side x side floats, labels and the viewpoint of each.
struct Split {
  int channels = 1;           // 1 synthetic; smallNORB: 2 cameras, or 1
  int side = kImageSide;      // 32, or the translation protocol's --canvas
  int classes = kNumClasses;  // labels lie in [0, classes)
  std::vector<float> images;  // N x pixels()
  std::vector<int> labels;    // N
  std::vector<float> azimuth, elevation;  // N, degrees in [0, 360)
  // N: each sample's position along its protocol's held-out axis, in the
  // axis's unit (data/protocol.h: Protocol::axis); its azimuth or its elevation
  // today, a shift or a scale for protocols whose axis is no viewing angle.
  std::vector<float> axis;
  // A training sample drawn afresh every epoch (smallNORB's random crops and
  // jitter): writes sample i of `epoch` to dst (pixels() floats), a pure
  // function of (seed, epoch, i). Empty: image(i) every epoch.
  std::function<void(int i, uint64_t epoch, float* dst)> draw;
  int size() const { return int(labels.size()); }
  // What a model built for this split takes (models/registry.h: make_model).
  ImageShape shape() const { return {channels, side, classes}; }
  size_t pixels() const { return shape().pixels(); }  // per image
  const float* image(int i) const { return images.data() + size_t(i) * pixels(); }
};

// smallNORB's files instead of the renderer (--data norb:DIR, --split).
// `window`: the toys only (--data toys --split window), whose records lie every
// 10 degrees: training azimuths in --train-azimuths, held out in --test-azimuths
// (DataConfig::train_azimuths, test_azimuths), which a sweep steps by gap.
enum class NorbSplitKind { azimuth, elevation, full, window };
// The names --split and --cameras take, and the JSON records.
inline const char* norb_split_name(NorbSplitKind k) {
  return k == NorbSplitKind::azimuth     ? "paper-azimuth"
         : k == NorbSplitKind::elevation ? "paper-elevation"
         : k == NorbSplitKind::window    ? "window"
                                         : "full";
}
inline const char* norb_cameras_name(NorbCameras c) {
  return c == NorbCameras::both ? "both" : c == NorbCameras::first ? "first" : "second";
}
struct NorbConfig {
  std::string dir;  // the six NYU files (data/norb.h: norb_files); "toys" for the toys
  // Set: the toys dataset (--data toys), smallNORB's records drawn in memory
  // (data/toy_views.h) instead of read from `dir`.
  std::optional<ToyConfig> toys;
  // The toys' records read from the render cache (data/toy_cache.h);
  // --no-cache: drawn in memory. The same bytes either way.
  bool cache = true;
  NorbSplitKind split = NorbSplitKind::azimuth;
  NorbPrep prep;    // cameras and training jitter
  long images_in_memory = 0;  // centre crops the dataset holds (the memory check reads it)
  long train_images = 0;      // images in the split's training set
  // The split's training azimuths and elevations (Dataset::train_az,
  // elevations) and its gap along its held-out axis (a sweep's true_gap), read
  // from the files' index when the flags are validated, for a sweep's plan and
  // the held-out axis's distances.
  std::vector<double> train_az, train_elev;
  double gap_deg = 0;
};

// The translation and affine protocols' held-out magnitudes (data/plane_views.h):
// training changes up to train_max, held-out ones test_count from test_from to test_to.
struct PlaneFactor;
struct PlaneConfig {
  const PlaneFactor* factor = nullptr;  // which change, and its protocol
  double train_max = 0, test_from = 0, test_to = 0;
  int test_count = 0;
  // The side of every image (--canvas): the 32 x 32 frame at the centre of a
  // canvas x canvas image (render_clean). 32: the frame itself.
  int canvas = kImageSide;
};

struct IdxData;
// An IDX image set under its standard split (--data fashion-mnist, --data
// idx:DIR; data/protocol_idx.cpp): read and checked when the flags are.
struct IdxConfig {
  std::string dir;
  std::string source;  // as --data names it: "fashion-mnist" or "idx:DIR"
  bool fashion = false;  // Fashion-MNIST: its ten class names
  int classes = 0, side = 0;
  long train_images = 0, test_images = 0;  // the training count before the validation part is taken out
  int validation_images = 0;  // taken out of the training set for the stopping rules (0: none)
  bool standardize = false;
  std::shared_ptr<const IdxData> data;
};

struct DataConfig {
  uint64_t seed = 0;
  AngleRange train_azimuths{0, 150, 6};
  AngleRange test_azimuths{200, 330, 6};
  AngleRange elevations{10, 50, 3};       // training (and familiar) elevations
  // Held-out elevations; count 0: the training ones (azimuth extrapolation).
  // Set apart from the training band, they make an elevation extrapolation.
  AngleRange test_elevations{0, 0, 0};
  int n_per_combo = 5;       // train samples per (class, azimuth, elevation)
  int n_eval_per_combo = 2;  // familiar, held-out and circle samples per combo
  // Samples per combo of a familiar *validation* split (training viewpoints,
  // its own noise) that stopping rules read, so no test data steers training;
  // 0: none (the split is made only when a rule needs it).
  int n_val_per_combo = 0;
  double noise_std = 0.04;
  ShapeSet shapes = ShapeSet::seed;
  // Set: smallNORB (or files in its format) under one of the paper's splits;
  // every field above but `seed` is then unused (the toys' window split reads
  // train_azimuths and test_azimuths, on its 10-degree grid).
  std::optional<NorbConfig> norb;
  // Set: a held-out axis of in-plane change (the translation and affine
  // protocols, data/plane_views.h) at the training viewpoints.
  std::optional<PlaneConfig> plane;
  // Set: an IDX image set's files instead of the renderer; every rendering field is unused.
  std::optional<IdxConfig> idx;
};

// Split ids key the noise streams, so every split has its own fresh noise.
enum class SplitId : uint32_t { Train = 0, Familiar = 1, HeldOut = 2, Circle = 3, Figures = 4, Validation = 5,
                                ElevationProfile = 6 };

// Images ordered by (class, azimuth index, elevation index, sample); the pixel
// noise of sample n of split s is the stream (seed, Noise, s, n), so the bytes
// do not depend on the number of threads.
Split make_split(const DataConfig& cfg, SplitId id, const std::vector<double>& azimuths,
                 int per_combo);
// The same at the given elevations (instead of cfg.elevations).
Split make_split(const DataConfig& cfg, SplitId id, const std::vector<double>& azimuths,
                 const std::vector<double>& elevations, int per_combo);
// Synthesis loops (renders, noisy images) of fewer items run on one thread
// (data/dataset.cpp says why); the bytes are the same either way.
inline constexpr int kDatasetParallelMinItems = 16384;

// The held-out elevations: cfg.test_elevations, or the training ones.
std::vector<double> heldout_elevations(const DataConfig& cfg);
// Smallest distance between a held-out and a training elevation (0: shared).
double elevation_gap(const DataConfig& cfg);

struct Dataset {
  Split train, familiar, heldout;
  // The circle: every azimuth of circle_az at the training elevations (the
  // run's circle_accuracy, whatever the protocol's axis).
  Split circle;
  Split validation;  // empty unless DataConfig::n_val_per_combo > 0
  // The axis sweep: the samples that sweep the protocol's whole held-out axis,
  // at each of axis_values (Split::axis gives each sample's). Its own samples
  // where the circle does not sweep the axis (an elevation extrapolation: the
  // training azimuths at every elevation of axis_values); empty where the
  // circle does (an azimuth axis) or the test set does (views_from_test).
  Split axis_sweep;
  std::vector<double> axis_values;  // the axis sweep's positions, ascending, in the axis's unit
  std::vector<double> train_az, test_az, circle_az, elevations, test_elevations;
  double gap_deg = 0;       // circular gap between train and test azimuths
  double elev_gap_deg = 0;  // gap between train and held-out elevations
  // smallNORB: the circle and the axis sweep are the test set itself (every
  // azimuth and elevation of the test instances), read from the familiar and
  // held-out splits instead of copies of their own.
  bool views_from_test = false;
  bool heldout_is_familiar = false;  // --split full: no viewpoint is novel; held-out repeats familiar

  // The splits the circle is read from, in order.
  std::vector<const Split*> circle_splits() const {
    if (!views_from_test) return {&circle};
    if (heldout_is_familiar) return {&familiar};
    return {&familiar, &heldout};
  }
  // The splits the axis sweep is read from, in order.
  std::vector<const Split*> axis_splits() const {
    if (views_from_test) return circle_splits();
    return {axis_sweep.size() > 0 ? &axis_sweep : &circle};
  }
};

// The azimuths of the circle split: every 10 degrees from 0 to 350 (smallNORB:
// its 18, every 20; the toys' window split: its two windows' azimuths, the
// only ones it draws). The one definition: the dataset renders them, runs and
// sweeps report accuracy per entry.
std::vector<double> circle_azimuths(const DataConfig& cfg);
// The elevations an elevation extrapolation's axis sweep holds: every 10
// degrees from 0 to 80 (smallNORB's paper-elevation split: its 9); none for
// other configurations.
std::vector<double> profile_elevations(const DataConfig& cfg);

// The split of smallNORB's index (in `dir`) that `kind` names; NorbError,
// naming the split, if it leaves the training, familiar or held-out set empty
// (`full` holds nothing out).
NorbSplit norb_split_of(const NorbData& d, NorbSplitKind kind, const std::string& dir);
// The distinct azimuths (or, `elevation`, elevations) of set's records `idx`,
// in degrees, ascending.
std::vector<double> norb_angles(const NorbSet& set, const std::vector<int>& idx, bool elevation);

// The azimuths (elevations) a configuration trains on: train_azimuths'
// (elevations') values, or the smallNORB split's (NorbConfig::train_az, train_elev).
std::vector<double> training_azimuths(const DataConfig& cfg);
std::vector<double> training_elevations(const DataConfig& cfg);

// Builds all four splits (the circle split at circle_azimuths(cfg)); from
// smallNORB's files if cfg.norb is set (throws NorbError for a bad file):
// protocol_of(cfg).make(cfg) (data/protocol.h).
Dataset make_dataset(const DataConfig& cfg);
// The rendered shapes' splits (cfg.norb unset).
Dataset make_synthetic_dataset(const DataConfig& cfg);
// Images the rendered dataset of cfg holds (every split, the circle's 36 views included).
double synthetic_images(const DataConfig& cfg);
// The shape of every image make_dataset(cfg) gives and its classes (each
// split's Split::shape()), known before it is made: the models are built for
// it. Its source's (data/source.h: Source::shape).
ImageShape image_shape(const DataConfig& cfg);

// What is wrong with a split geometry, and in which input (the CLI names the flag).
enum class GeometryPart {
  train_range, train_count, test_range, test_count, test_overlap, elev_range, elev_count,
  test_elev_range, test_elev_count
};
struct GeometryProblem {
  GeometryPart part;
  std::string why;  // one clause, e.g. "B < A (...)"
  // The run flag at fault (without "--"), and the flag whose value it takes
  // when not given (--n-test-elev: --n-elev's), or nullptr.
  const char* flag = nullptr;
  const char* fallback = nullptr;
};

// The one judgement of a geometry, for `run` and `sweep` alike (nullopt: sound).
// - A range A:B runs up from A to B: A <= B, and B - A < 360 (0:360 would hold 0
//   twice); azimuths wrap, so 300:420 crosses 0.
// - K views of A:B: K >= 2 needs A < B (else K copies of one view; the range is
//   at fault), K == 1 needs A == B (else B is silently dropped; the count is at
//   fault); the views are distinct.
// - Elevations lie in [-90, 90].
// - No held-out azimuth lies in the training arc [A, B] (held out means unseen):
//   not on a training azimuth (SPEC section 1), not between two of them.
//   `allow_touching_end`: the one exception, a held-out azimuth exactly at B
//   (a sweep's gap-0 window starts there by construction; its true gap is 0).
//   The exception to that rule: held-out elevations all outside the training
//   band (an elevation extrapolation), where no held-out view can equal a
//   training view, so the azimuths may be shared. Held-out elevations inside
//   the band keep the azimuth rule: a view then may not coincide in both angles.
//   `allow_touching_end` lets a held-out elevation lie on the training band's
//   edge (a sweep's gap-0 band starts there).
std::optional<GeometryProblem> check_geometry(const DataConfig& cfg, bool allow_touching_end = false);
// The training azimuth and elevation ranges alone (protocols whose held-out
// set is no other viewpoint).
std::optional<GeometryProblem> check_training_views(const DataConfig& cfg);

}  // namespace vg
