// The toys dataset's pictures (data/toy_views.h).
#include "data/toy_views.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>
#include <stdexcept>
#include <string>

#include "core/rng.h"
#include "data/dataset.h"
#include "data/export_norb.h"
#include "data/grey_bytes.h"
#include "data/toys.h"
#include "kernels/elementwise.h"

namespace vg {

namespace {

double tan_deg(double deg) {
  double s, c;
  sin_cos_deg(deg, &s, &c);
  return s / c;
}

// The six lightings in the camera's frame (right, up, towards the camera),
// with their intensity and ambient term. Like smallNORB's six, they change the
// shading of every face but never the silhouette.
struct CameraLight {
  double right, up, towards;
  float intensity, ambient;
};
// mixed: four key lights from the corners and above, one frontal and flat,
// one raking from the side, one dim.
constexpr CameraLight kMixedLights[kToyLightings] = {
    {-0.5, 0.6, 0.62, 0.8f, 0.2f},  {0.5, 0.6, 0.62, 0.8f, 0.2f},   {0.0, 1.0, 0.25, 0.85f, 0.2f},
    {0.0, 0.2, 1.0, 0.7f, 0.3f},    {-0.95, 0.1, 0.3, 0.9f, 0.15f}, {0.3, 0.5, 0.8, 0.45f, 0.35f},
};
// rig: the same intensities and ambient terms, every light within ~27 degrees
// of the camera's axis (lamps beside the cameras: no face the camera sees is
// lit only by the ambient term).
constexpr CameraLight kRigLights[kToyLightings] = {
    {-0.3, 0.3, 1.0, 0.8f, 0.2f},  {0.3, 0.3, 1.0, 0.8f, 0.2f},   {0.0, 0.5, 1.0, 0.85f, 0.2f},
    {0.0, 0.0, 1.0, 0.7f, 0.3f},   {-0.4, 0.1, 1.0, 0.9f, 0.15f}, {0.2, 0.4, 1.0, 0.45f, 0.35f},
};

// The unit vectors of a camera: towards it from the target, its right, its up.
struct Frame {
  double towards[3], right[3], up[3];
};
Frame frame_of(const Camera& c) {
  double sa, ca, se, ce;  // sin_cos_deg, not libm: the same bits on every machine
  sin_cos_deg(c.azimuth_deg, &sa, &ca);
  sin_cos_deg(c.elevation_deg, &se, &ce);
  Frame f{{ce * sa, se, ce * ca}, {}, {}};
  // right = y x towards, normalised (the camera never looks straight down: |e| < 90).
  const double rx = f.towards[2], rz = -f.towards[0], rn = std::sqrt(rx * rx + rz * rz);
  f.right[0] = rx / rn, f.right[1] = 0, f.right[2] = rz / rn;
  // up = towards x right
  f.up[0] = f.towards[1] * f.right[2] - f.towards[2] * f.right[1];
  f.up[1] = f.towards[2] * f.right[0] - f.towards[0] * f.right[2];
  f.up[2] = f.towards[0] * f.right[1] - f.towards[1] * f.right[0];
  return f;
}

void check(const ToyConfig& c) {
  if (c.instances < 1 || c.instances > kToyMaxInstances)
    throw std::invalid_argument("toys: " + std::to_string(c.instances) + " instances per split (1.." +
                                std::to_string(kToyMaxInstances) + ")");
  if (c.lightings < 1 || c.lightings > kToyLightings)
    throw std::invalid_argument("toys: " + std::to_string(c.lightings) + " lightings (1..6)");
  if (!(c.stereo_deg >= 0 && c.stereo_deg <= 20))
    throw std::invalid_argument("toys: a stereo baseline of " + std::to_string(c.stereo_deg) + " deg (0..20)");
  if (!(c.min_size > 0 && c.min_size <= 1))
    throw std::invalid_argument("toys: a smallest size of " + std::to_string(c.min_size) + " (0..1]");
  if (!(c.scale >= 0.25 && c.scale <= 2))
    throw std::invalid_argument("toys: a scale of " + std::to_string(c.scale) + " (0.25..2)");
  if (c.azimuth_step != 1 && c.azimuth_step != 2)
    throw std::invalid_argument("toys: an azimuth step of " + std::to_string(c.azimuth_step) + " codes (1 or 2)");
}

}  // namespace

Camera toy_camera(double azimuth_deg, double elevation_deg, bool perspective) {
  Camera c;
  c.azimuth_deg = azimuth_deg;
  c.elevation_deg = elevation_deg;
  c.target_y = 0;
  c.perspective = perspective;
  c.distance = kToyDistance;
  c.fov_deg = kToyFovDeg;
  // Orthographic: the perspective view's width at the target.
  c.half_width = kToyDistance * tan_deg(0.5 * kToyFovDeg);
  return c;
}

Light toy_light(int lighting, const Camera& cam, ToyLights lights) {
  if (lighting < 0 || lighting >= kToyLightings)
    throw std::invalid_argument("toy_light: lighting " + std::to_string(lighting) + " (0..5)");
  const CameraLight& l = (lights == ToyLights::rig ? kRigLights : kMixedLights)[lighting];
  const Frame f = frame_of(cam);
  double d[3];
  for (int k = 0; k < 3; ++k) d[k] = l.right * f.right[k] + l.up * f.up[k] + l.towards * f.towards[k];
  const double n = std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  return Light{{float(d[0] / n), float(d[1] / n), float(d[2] / n)}, l.intensity, l.ambient};
}

ToyShelf::ToyShelf(const ToyConfig& cfg) : instances_(3 * cfg.instances) {
  check(cfg);
  meshes_.reserve(size_t(kToyCategories) * size_t(instances_));
  for (int c = 0; c < kToyCategories; ++c)
    for (int i = 0; i < instances_; ++i) {
      Mesh m = toy_mesh(c, i, cfg.variety);
      const float size = float(toy_size(c, i, cfg.min_size) * cfg.scale);
      for (Vec3& v : m.vertices)
        for (float& x : v) x *= size;
      meshes_.push_back(std::move(m));
    }
}

double toy_size(int category, int instance, double min_size) {
  // Its own stream (seed 1): toy_mesh's (seed 0) draws stay as they are.
  Stream s(1, Purpose::Toys, uint64_t(category), uint64_t(instance));
  return min_size + (1.0 - min_size) * s.uniform();
}

const Mesh& ToyShelf::mesh(int category, int instance) const {
  if (category < 0 || category >= kToyCategories || instance < 0 || instance >= instances_)
    throw std::out_of_range("ToyShelf: no toy (" + std::to_string(category) + ", " + std::to_string(instance) + ")");
  return meshes_[size_t(category) * size_t(instances_) + size_t(instance)];
}

void toy_stereo(const Mesh& mesh, double azimuth_deg, double elevation_deg, const ToyConfig& cfg, int side,
                ToyStereo* out) {
  check(cfg);
  // Parallel cameras, camera 0 on the left: moving a camera by b along its
  // right is moving the toy by -b, and keeps both image planes one plane, so
  // the pair differs by a horizontal disparity alone (f b / depth).
  const double half_baseline = kToyDistance * tan_deg(0.5 * cfg.stereo_deg);
  Mesh moved = mesh;
  for (int cam = 0; cam < 2; ++cam) {
    out->camera[cam] = toy_camera(azimuth_deg, elevation_deg, cfg.perspective);
    const Frame f = frame_of(out->camera[cam]);
    const double shift = cam == 0 ? half_baseline : -half_baseline;
    for (size_t v = 0; v < mesh.vertices.size(); ++v)
      for (int k = 0; k < 3; ++k)
        moved.vertices[v][size_t(k)] = float(double(mesh.vertices[v][size_t(k)]) + shift * f.right[k]);
    rasterize(moved, out->camera[cam], side, &out->surface[cam]);
  }
}

void toy_shade_pair(const ToyStereo& s, int lighting, ToyLights lights, float* out) {
  const size_t pixels = size_t(s.surface[0].side) * size_t(s.surface[0].side);
  for (int cam = 0; cam < 2; ++cam)
    shade(s.surface[cam], toy_light(lighting, s.camera[cam], lights), kToyAlbedo, kToyBackground,
          out + size_t(cam) * pixels);
}

void toy_clean_pair(const Mesh& mesh, double azimuth_deg, double elevation_deg, int lighting, const ToyConfig& cfg,
                    int side, float* out) {
  ToyStereo s;
  toy_stereo(mesh, azimuth_deg, elevation_deg, cfg, side, &s);
  toy_shade_pair(s, lighting, cfg.lights, out);
}

namespace {

// The records of toys first..first+N-1 in the NYU files' order (render_norb_split's):
// class, instance, elevation, azimuth, lighting.
void records(const ToyConfig& cfg, int first, std::vector<int32_t>* labels, std::vector<NorbInfo>* info) {
  for (int c = 0; c < kToyCategories; ++c)
    for (int i = first; i < first + cfg.instances; ++i)
      for (int e = 0; e < kNorbElevations; ++e)
        for (int a = 0; a < 36; a += cfg.azimuth_step)  // azimuth codes: 10 deg each
          for (int l = 0; l < cfg.lightings; ++l) {
            labels->push_back(c);
            info->push_back(NorbInfo{i, e, a, l});
          }
}

// Each set's own number, so a thread's last view is never another set's.
std::atomic<uint64_t> g_toy_sets{0};

}  // namespace

NorbData toy_norb_data(const ToyConfig& cfg) {
  check(cfg);
  const uint64_t seed = cfg.seed;
  const auto shelf = std::make_shared<const ToyShelf>(cfg);
  NorbData d;
  const std::pair<NorbSet*, const char*> sets[] = {{&d.train, "training"}, {&d.test, "testing"}, {&d.validation, "validation"}};
  for (int k = 0; k < 3; ++k) {
    std::vector<int32_t> labels;
    std::vector<NorbInfo> info;
    records(cfg, k * cfg.instances, &labels, &info);
    const uint64_t set_id = g_toy_sets.fetch_add(1) + 1;
    auto render = [shelf, cfg, seed, labels, info, set_id](int i, uint8_t* dst) {
      const NorbInfo& r = info[size_t(i)];
      const uint64_t view = (uint64_t(labels[size_t(i)]) << 32) | (uint64_t(r.instance) << 16) |
                            (uint64_t(r.elevation) << 8) | uint64_t(r.azimuth);
      // A thread's last view: a view's records differ only in lighting and lie
      // side by side, so a reader walking them in order rasterises each view once.
      thread_local struct {
        uint64_t set = 0, view = 0;
        ToyStereo stereo;
      } last;
      if (last.set != set_id || last.view != view) {
        toy_stereo(shelf->mesh(labels[size_t(i)], r.instance), norb_azimuth_deg(r.azimuth),
                   norb_elevation_deg(r.elevation), cfg, kNorbSide, &last.stereo);
        last.set = set_id, last.view = view;
      }
      thread_local std::vector<float> clean = std::vector<float>(size_t(kNorbPairBytes)),
                                      noise = std::vector<float>(size_t(kNorbPairBytes));
      toy_shade_pair(last.stereo, r.lighting, cfg.lights, clean.data());
      // Keyed by what the record is, not where it lies: a subset, or another
      // count of lightings, draws the same pixels for the same record.
      Stream rng(seed, Purpose::Noise, 0x70790000ull + uint64_t(r.lighting), view);
      fill_normal(rng, noise.data(), size_t(kNorbPairBytes), float(kToyNoise));
      grey_bytes(clean.data(), 255.f, noise.data(), kNorbPairBytes, dst);
    };
    *sets[k].first = NorbSet::rendered(std::move(labels), std::move(info), std::move(render),
                                       std::string("toys-") + sets[k].second);
  }
  return d;
}

NorbExportSplit render_toy_split(const ToyConfig& cfg, NorbPart part) {
  if (cfg.azimuth_step != 2) throw std::invalid_argument("toys: smallNORB's files hold its 18 azimuths (azimuth step 2)");
  const NorbData d = toy_norb_data(cfg);
  const NorbSet& set = part == NorbPart::training ? d.train : d.test;
  NorbExportSplit s;
  const int n = set.size();
  s.dat = norb_pairs_file(n);
  s.labels = set.labels();
  s.info = set.info();
  // Static chunks: a thread walks a view's lightings in order and rasterises it once.
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) set.read_pair(i, s.dat.data() + kNorbPairsHeader + size_t(i) * kNorbPairBytes);
  return s;
}

}  // namespace vg
