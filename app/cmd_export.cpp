// `viewgap export-norb DIR`: the synthetic shapes, or the toys, as smallNORB's six files.
#include <chrono>
#include <cstdio>

#include "app/commands.h"
#include "data/export_norb.h"
#include "harness/new_files.h"

namespace vg {

int do_export_norb(const ExportFlags& f) {
  NorbExportConfig c;
  c.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  // The toys, or the point shapes' sets (seed, asym).
  c.toys = f.shapes == "toys";
  if (!c.toys && f.shapes != "seed" && f.shapes != "asym")
    throw UsageError("--shapes", f.shapes, "unknown shape set (expected seed, asym or toys)");
  if (!c.toys) c.shapes = parse_shapes_flag(f.shapes);
  c.instances = int(parse_int("--instances", f.instances, 1, 5));  // the NYU files' numbers hold 10 toys
  c.lightings = int(parse_int("--lightings", f.lightings, 1, kNorbLightings));
  for (const auto& [name, value] : {std::pair{"variety", f.variety}, {"lights", f.lights}})
    if (!c.toys && f.typed.count(name)) throw UsageError(std::string("--") + name, value, "only with --shapes toys");
  if (f.variety != "wide" && f.variety != "narrow") throw UsageError("--variety", f.variety, "expected wide or narrow");
  if (f.lights != "rig" && f.lights != "mixed") throw UsageError("--lights", f.lights, "expected rig or mixed");
  c.variety = f.variety == "wide" ? ToyVariety::wide : ToyVariety::narrow;
  c.lights = f.lights == "rig" ? ToyLights::rig : ToyLights::mixed;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    // No half of a dataset: a reader would take three files for a whole split.
    write_new_files(f.dir, norb_export_paths(f.dir), norb_export_bytes(c), [&](const PutFile& put) {
      for (NorbPart part : {NorbPart::training, NorbPart::testing})
        for (const ExportFile& file : norb_export_part(c, f.dir, part)) put(file.path, file.bytes);
    });
  } catch (const NewFilesRefused& e) {
    throw UsageError("DIR", f.dir, e.what());
  }
  if (!f.quiet)
    std::fprintf(stderr, "viewgap export-norb: %ld stereo pairs of 96 x 96 (%s shapes, %d instance(s), %d lighting(s)) in %s, %.1f s\n",
                 2 * norb_export_records(c), f.shapes.c_str(), c.instances, c.lightings, f.dir.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace vg
