// viewgap export-norb: the rendered shapes, or the toys, as smallNORB's six
// files (data/norb.h's format): a test fixture for the loader, and a dataset
// whose novel-viewpoint results can be set beside the 32 x 32 path's.
// - 96 x 96 stereo pairs: two cameras kNorbStereoDeg apart in azimuth;
// - smallNORB's grid: 18 azimuths (0..340 by 20), 9 elevations (30..70 by 5);
// - lighting l (0..5) as brightness: intensity x (0.5 + 0.1 l);
// - instances as small shape variations: each axis stretched or shrunk by up
//   to kNorbInstanceStretch (NYU's instance numbers: 4,6,7,8,9 train, 0,1,2,3,5 test);
// - Gaussian pixel noise of kNorbExportNoise grey levels, from the stream
//   (seed, Noise, part, record), then rounded to uint8.
// The toys' records are the toys source's own (data/toy_views.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/norb.h"
#include "data/render.h"
#include "data/toy_views.h"

namespace vg {

inline constexpr double kNorbStereoDeg = 5.0;
inline constexpr double kNorbInstanceStretch = 0.08;
inline constexpr double kNorbExportNoise = 3.0;
struct NorbExportConfig {
  uint64_t seed = 0;
  ShapeSet shapes = ShapeSet::seed;
  bool toys = false;  // the toys' records instead of the shapes' (`shapes` unused)
  int instances = 5;  // per split, 1..5 (the first of NYU's numbers)
  int lightings = 6;  // 1..6
  // The toys' variety and lights (with `toys`), the toys' defaults unless set.
  ToyVariety variety = ToyConfig{}.variety;
  ToyLights lights = ToyConfig{}.lights;
};
struct NorbExportSplit {
  std::vector<uint8_t> dat;  // the -dat file's bytes (norb_pairs_file): N x 2 x 96 x 96 after its header
  std::vector<int32_t> labels;
  std::vector<NorbInfo> info;
};
// Records ordered by (class, instance, elevation, azimuth, lighting), as many
// as 5 x instances x 9 x 18 x lightings (24,300 at the defaults).
NorbExportSplit render_norb_split(const NorbExportConfig& cfg, NorbPart part);
// The toys' records of `part` (data/toy_views.h: toy_norb_data), as the same
// files hold them: export-norb --shapes toys, read back, gives --data toys's bytes.
NorbExportSplit render_toy_split(const ToyConfig& cfg, NorbPart part);  // the world cfg.seed

// The six files an export into `dir` writes, the records of each part, and
// the bytes the six take.
std::vector<std::string> norb_export_paths(const std::string& dir);
long norb_export_records(const NorbExportConfig& cfg);
double norb_export_bytes(const NorbExportConfig& cfg);
// The three files of `part` under `dir`, in the order to write them: -info,
// -cat, then -dat (norb_files).
struct ExportFile {
  std::string path;
  std::vector<uint8_t> bytes;
};
std::vector<ExportFile> norb_export_part(const NorbExportConfig& cfg, const std::string& dir, NorbPart part);

}  // namespace vg
