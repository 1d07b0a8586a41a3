// viewgap export-norb's files (data/export_norb.h).
#include "data/export_norb.h"

#include <stdexcept>

#include "core/rng.h"
#include "data/grey_bytes.h"
#include "kernels/elementwise.h"

namespace vg {

NorbExportSplit render_norb_split(const NorbExportConfig& cfg, NorbPart part) {
  if (cfg.instances < 1 || cfg.instances > 5 || cfg.lightings < 1 || cfg.lightings > kNorbLightings)
    throw std::invalid_argument("render_norb_split: 1..5 instances and 1..6 lightings");
  // NYU's instance numbers per split, and a stretch (-1, 0, +1 in x, y, z) per instance.
  constexpr int kTrain[5] = {4, 6, 7, 8, 9}, kTest[5] = {0, 1, 2, 3, 5};
  constexpr int kStretch[10][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {-1, 0, 0}, {0, -1, 0},
                                   {0, 0, -1}, {1, 1, 0}, {-1, 0, 1}, {0, -1, -1}, {1, -1, 1}};
  const int* instance = part == NorbPart::training ? kTrain : kTest;
  constexpr int kAz = kNorbAzimuthMax / 2 + 1, kEl = kNorbElevations;
  const int n_views = kNorbClasses * cfg.instances * kEl * kAz;  // lighting changes no geometry
  NorbExportSplit s;
  const int n = n_views * cfg.lightings;  // record i: view i / lightings, lighting i % lightings
  s.dat = norb_pairs_file(n);
  s.labels.resize(size_t(n));
  s.info.resize(size_t(n));
  // One clean render per view and camera, then its records, written into the file.
#pragma omp parallel
  {
    std::vector<float> clean(kNorbPairBytes), noise(kNorbPairBytes);
#pragma omp for schedule(dynamic)
    for (int v = 0; v < n_views; ++v) {
      const int cls = v / (cfg.instances * kEl * kAz), inst = instance[(v / (kEl * kAz)) % cfg.instances];
      const int el = (v / kAz) % kEl, az = v % kAz;
      std::vector<Point3> points = shape_points(cls, cfg.shapes);
      for (Point3& q : points)
        for (int axis = 0; axis < 3; ++axis) q[size_t(axis)] *= float(1.0 + kNorbInstanceStretch * kStretch[inst][axis]);
      for (int cam = 0; cam < 2; ++cam)
        render_points(points, norb_azimuth_deg(2 * az) + (cam == 0 ? -0.5 : 0.5) * kNorbStereoDeg,
                      norb_elevation_deg(el), kNorbSide, clean.data() + size_t(cam) * kNorbImageBytes);
      for (int light = 0; light < cfg.lightings; ++light) {
        const int i = v * cfg.lightings + light;
        s.labels[size_t(i)] = cls;
        s.info[size_t(i)] = NorbInfo{inst, el, 2 * az, light};
        Stream rng(cfg.seed, Purpose::Noise, 16 + uint32_t(part), uint64_t(i));
        fill_normal(rng, noise.data(), kNorbPairBytes, float(kNorbExportNoise));
        const float gain = 255.f * (0.5f + 0.1f * float(light));
        uint8_t* dst = s.dat.data() + kNorbPairsHeader + size_t(i) * kNorbPairBytes;
        grey_bytes(clean.data(), gain, noise.data(), kNorbPairBytes, dst);
      }
    }
  }
  return s;
}

std::vector<std::string> norb_export_paths(const std::string& dir) {
  std::vector<std::string> paths;
  for (NorbPart part : {NorbPart::training, NorbPart::testing}) {
    const NorbFiles f = norb_files(dir, part);
    paths.insert(paths.end(), {f.dat, f.cat, f.info});
  }
  return paths;
}

long norb_export_records(const NorbExportConfig& cfg) {
  return long(kNorbClasses) * cfg.instances * kNorbElevations * (kNorbAzimuthMax / 2 + 1) * cfg.lightings;
}

double norb_export_bytes(const NorbExportConfig& cfg) {
  const double n = double(norb_export_records(cfg));
  return 2 * (kNorbPairsHeader + n * kNorbPairBytes + 20 + 4 * n + 20 + 16 * n);
}

std::vector<ExportFile> norb_export_part(const NorbExportConfig& cfg, const std::string& dir, NorbPart part) {
  const NorbFiles files = norb_files(dir, part);
  const ToyConfig toys{
      .instances = cfg.instances, .lightings = cfg.lightings, .variety = cfg.variety, .lights = cfg.lights, .seed = cfg.seed};
  NorbExportSplit s = cfg.toys ? render_toy_split(toys, part) : render_norb_split(cfg, part);
  std::vector<int32_t> info;
  for (const NorbInfo& r : s.info) info.insert(info.end(), {r.instance, r.elevation, r.azimuth, r.lighting});
  const int32_t n = int32_t(s.labels.size()), cat_dims[] = {n}, info_dims[] = {n, kNorbInfoCols};
  std::vector<ExportFile> out;
  out.push_back({files.info, norb_encode_ints(info, info_dims)});
  out.push_back({files.cat, norb_encode_ints(s.labels, cat_dims)});
  out.push_back({files.dat, std::move(s.dat)});
  return out;
}

}  // namespace vg
