// The toys dataset (--data toys, export-norb --shapes toys): toy_mesh's
// objects (data/toys.h) photographed the way smallNORB photographed its toys
// (LeCun, Huang & Bottou 2004): 96 x 96 stereo pairs at 18 azimuths x 9
// elevations x 6 lightings, instances 0..N-1 the training toys and N..2N-1 the
// test toys, each record's pixels a pure function of (world seed, record).
//
// The set is smallNORB in memory: its records are NorbInfo rows and its pairs
// are drawn when read (NorbSet::rendered), so the paper's preprocessing and
// splits (data/norb.h, data/protocol_norb.cpp) run on it unchanged, and an
// exported set read back gives the same bytes.
//
// The scene: the toy (bounding sphere of radius 1 at the origin) on a uniform
// background, seen from `kToyDistance` through a lens whose field of view holds
// the sphere within the central 32 x 32 of the paper's 48 x 48 images; two
// parallel cameras a small baseline apart; lights fixed to the camera (the toys
// turn, the rig stays), so a lighting lights the side facing the camera alike
// at every azimuth; Gaussian pixel noise of kToyNoise grey levels.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "data/mesh.h"
#include "data/norb.h"
#include "data/raster.h"
#include "data/toys.h"

namespace vg {

inline constexpr int kToyLightings = 6;
inline constexpr double kToyDistance = 6.0;
inline constexpr double kToyFovDeg = 30.0;
inline constexpr float kToyAlbedo = 0.9f;
inline constexpr float kToyBackground = 0.55f;
inline constexpr double kToyNoise = 3.0;       // grey levels (of 255)
// smallNORB's rig: two parallel cameras, their baseline subtending this at the
// toy (2 deg: 0.21 object units, a disparity of ~6 px at 96 x 96).
inline constexpr double kToyStereoDeg = 2.0;
inline constexpr int kToyMaxInstances = 50;    // per split
// Toy sizes are uniform in [kToyMinSize, 1] by default (ToyConfig::min_size).
inline constexpr double kToyMinSize = 0.7;

// Where the six lightings stand (--toy-lights). mixed: four key lights from
// the corners and above, one frontal, one raking from the side, one dim (the
// toys' first lights). rig: the same six intensities and ambient terms, each
// light within about 25 degrees of the camera's axis, as lamps mounted beside
// the cameras on one rig light the toy (docs/toys.md, "Calibration").
enum class ToyLights { mixed, rig };

// What --data toys (and export-norb --shapes toys) draws.
struct ToyConfig {
  int instances = 5;   // per split: training toys 0..N-1, test toys N..2N-1 (validation 2N..3N-1)
  int lightings = kToyLightings;  // the first L of the six
  double stereo_deg = kToyStereoDeg;  // 0: both cameras at one place
  bool perspective = true;            // else orthographic, the same width at the toy's centre
  // How large the toys stand in the frame: each toy's size is uniform in
  // [min_size, 1] (toy_size; 1: every toy the same size, as smallNORB's
  // "normalized object sizes"), times `scale` (1: a toy of size 1 fills the
  // central two thirds of the 96 x 96 frame, the paper's 32 x 32 crop of 48 x 48;
  // 1.5: the whole frame).
  double min_size = kToyMinSize;
  double scale = 1;
  // How different the toys of one category are (data/toys.h), and where the
  // lights stand: the calibrated setting (docs/toys.md, "Calibration"), under
  // which the standard split's baselines stand as smallNORB's do. narrow and
  // mixed were the toys' first, and every toys result made before it.
  ToyVariety variety = ToyVariety::wide;
  ToyLights lights = ToyLights::rig;
  // The records' azimuths, in smallNORB's azimuth codes (10 deg each): 2 gives
  // its 18 (0, 20, .., 340; what export-norb writes), 1 every 10 degrees (the
  // window split's grid). A record's pixels do not depend on it.
  int azimuth_step = 2;
  // The world (--toy-seed): keys the pixel noise's stream. smallNORB is one
  // fixed set of photographs, so the run's --seed never reaches it (a run's
  // seed varies a model's initialisation and data order only). The toys'
  // shapes, sizes and poses are the same in every world.
  uint64_t seed = 0;
};

// The camera of a record's view, before the stereo pair's baseline moves it.
Camera toy_camera(double azimuth_deg, double elevation_deg, bool perspective);
// Lighting l (0..5) of a camera under `lights`: its light's direction in the world frame.
Light toy_light(int lighting, const Camera& cam, ToyLights lights = ToyLights::mixed);

// Physical toys differ in size: toy (category, instance) stands in the scene
// at toy_size times toy_mesh's unit bounding sphere, uniform in
// [min_size, 1] from the stream (1, Toys, category, instance).
double toy_size(int category, int instance, double min_size = kToyMinSize);

// Every toy a configuration uses, made once (each of its variety, at its
// toy_size, times the scale): categories x 3N instances (the training, test
// and validation toys).
class ToyShelf {
 public:
  explicit ToyShelf(const ToyConfig& cfg);
  const Mesh& mesh(int category, int instance) const;
  int instances() const { return instances_; }  // per category, all three sets

 private:
  int instances_;
  std::vector<Mesh> meshes_;
};

// One view's two cameras (both at the record's azimuth and elevation, camera 0
// half the baseline to the left, camera 1 to the right) and what each sees.
struct ToyStereo {
  Camera camera[2];
  Surface surface[2];
};
void toy_stereo(const Mesh& mesh, double azimuth_deg, double elevation_deg, const ToyConfig& cfg, int side,
                ToyStereo* out);
// Its pair under lighting l of `lights`: 2 x side x side floats in [0, 1].
void toy_shade_pair(const ToyStereo& s, int lighting, ToyLights lights, float* out);

// One view's noise-free stereo pair: 2 x side x side floats in [0, 1], camera 0 first.
void toy_clean_pair(const Mesh& mesh, double azimuth_deg, double elevation_deg, int lighting, const ToyConfig& cfg,
                    int side, float* out);

// smallNORB's records of the toys (at cfg.azimuth_step's azimuths): the
// training toys (0..N-1), the test toys (N..2N-1) and, as `validation`, toys of neither (2N..3N-1, for the stopping
// rules' familiar validation set, which no test toy may steer), each set's
// (class, instance, elevation, azimuth, lighting) in the NYU files' order, every pair drawn when read:
// toy_clean_pair at 96 x 96 plus noise from the stream (cfg.seed, Noise, the
// record's view, its lighting), rounded to uint8. Throws std::invalid_argument
// for a configuration out of range. (The render cache, data/toy_cache.h, serves
// the same records from disk.)
NorbData toy_norb_data(const ToyConfig& cfg);

}  // namespace vg
