// The toys dataset's pictures (data/toy_views.h): determinism, distinct
// instances, lighting against silhouette, the stereo pair's disparity, the
// records' keys, and the export read back through smallNORB's reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/export_norb.h"
#include "data/toy_views.h"
#include "data/toys.h"
#include "test_util.h"

namespace vg {
namespace {

using test::Outcome;
using test::run;

std::vector<float> clean_pair(const Mesh& m, double az, double el, int light, int side, const ToyConfig& cfg = {}) {
  std::vector<float> img(2 * size_t(side) * size_t(side));
  toy_clean_pair(m, az, el, light, cfg, side, img.data());
  return img;
}

// Which pixels of camera `cam` the toy covers (anything not exactly the background).
std::vector<bool> silhouette(const std::vector<float>& pair, int side, int cam) {
  std::vector<bool> s(size_t(side) * size_t(side));
  for (size_t p = 0; p < s.size(); ++p) s[p] = pair[size_t(cam) * s.size() + p] != kToyBackground;
  return s;
}

TEST(ToyViews, SameRecordSameBytesInAnyOrderOnAnyThread) {
  const ToyConfig cfg{.instances = 1, .lightings = 2, .seed = 5};
  ToyConfig world6 = cfg;
  world6.seed = 6;
  const NorbData a = toy_norb_data(cfg), b = toy_norb_data(cfg), other = toy_norb_data(world6);
  const int n = a.test.size();
  ASSERT_EQ(n, 5 * 1 * 9 * 18 * 2);
  // a in order on one thread; b backwards, in parallel (each thread's last view differs).
  std::vector<uint8_t> fwd(size_t(n) * kNorbPairBytes), bwd(fwd.size()), seed6(kNorbPairBytes);
  for (int i = 0; i < n; ++i) a.test.read_pair(i, fwd.data() + size_t(i) * kNorbPairBytes);
#pragma omp parallel for schedule(dynamic, 7) num_threads(2)
  for (int i = n - 1; i >= 0; --i) b.test.read_pair(i, bwd.data() + size_t(i) * kNorbPairBytes);
  EXPECT_EQ(std::memcmp(fwd.data(), bwd.data(), fwd.size()), 0);
  // Another world: other noise, the same picture beneath it.
  other.test.read_pair(0, seed6.data());
  EXPECT_NE(std::memcmp(fwd.data(), seed6.data(), kNorbPairBytes), 0);
  double diff = 0;
  for (int p = 0; p < kNorbPairBytes; ++p) diff += std::abs(int(fwd[size_t(p)]) - int(seed6[size_t(p)]));
  EXPECT_LT(diff / kNorbPairBytes, 2 * kToyNoise);
}

// The same bytes on every machine: records of every category, hashed, against
// the value this x86-64 build gave (it runs under qemu for aarch64 and with
// the scalar kernels too). A change to a mesh, the scene or the rasteriser
// changes it, on purpose: say so in the commit, update the value and bump
// kToyGeneratorVersion (data/toys.h), which keys the render cache.
std::string pinned_hash(ToyConfig cfg) {
  cfg.seed = 11;
  const NorbData d = toy_norb_data(cfg);
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  std::vector<uint8_t> pair(kNorbPairBytes);
  for (int i = 0; i < d.test.size(); i += 181) {
    d.test.read_pair(i, pair.data());
    for (uint8_t b : pair) h = (h ^ b) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

TEST(ToysPinned, RecordsAreTheSameBytesOnEveryMachine) {
  const char* bump = "the records' bytes changed: if on purpose, bump kToyGeneratorVersion (data/toys.h) with the "
                     "hashes, or the render cache serves the old bytes";
  // The toys' first setting, narrow variety under mixed lights (every toys result made before the calibration).
  EXPECT_EQ(pinned_hash({.instances = 1, .lightings = 2, .variety = ToyVariety::narrow, .lights = ToyLights::mixed}),
            "3ad7a8ce6c084cec")
      << bump;
  // Wide variety's test toys 3..5: every category's plans but the humans' third.
  EXPECT_EQ(pinned_hash({.instances = 3, .lightings = 2, .variety = ToyVariety::wide, .lights = ToyLights::mixed}),
            "fdf8b2c71cf2f63d")
      << bump;
  // The default world (wide variety, rig lights).
  EXPECT_EQ(pinned_hash({.instances = 3, .lightings = 2}), "e1e4b721e0e93315") << bump;
  EXPECT_EQ(kToyGeneratorVersion, 1) << "bumped: update the pinned hashes with it";
}

TEST(ToyViews, ARecordsPixelsDoNotDependOnWhatElseTheSetHolds) {
  // Two lightings of five: the same records, the same bytes (noise keyed by the record).
  const NorbData few = toy_norb_data({.instances = 1, .lightings = 2});
  const NorbData all = toy_norb_data({.instances = 1, .lightings = 6});
  std::vector<uint8_t> x(kNorbPairBytes), y(kNorbPairBytes);
  int compared = 0;
  for (int i = 0; i < few.train.size(); i += 97) {
    const NorbInfo r = few.train.info()[size_t(i)];
    for (int j = 0; j < all.train.size(); ++j) {
      const NorbInfo q = all.train.info()[size_t(j)];
      if (all.train.labels()[size_t(j)] != few.train.labels()[size_t(i)] || q.instance != r.instance ||
          q.elevation != r.elevation || q.azimuth != r.azimuth || q.lighting != r.lighting)
        continue;
      few.train.read_pair(i, x.data());
      all.train.read_pair(j, y.data());
      EXPECT_EQ(x, y) << "record " << i;
      ++compared;
    }
  }
  EXPECT_GE(compared, 8);
}

// The window split's records lie every 10 degrees; those at smallNORB's 18
// azimuths are the paper splits' records, byte for byte.
TEST(ToyViews, ARecordsPixelsDoNotDependOnTheAzimuthGrid) {
  const NorbData coarse = toy_norb_data({.instances = 1, .lightings = 1, .seed = 4});
  const NorbData fine = toy_norb_data({.instances = 1, .lightings = 1, .azimuth_step = 1, .seed = 4});
  ASSERT_EQ(fine.test.size(), 2 * coarse.test.size());
  std::vector<uint8_t> x(kNorbPairBytes), y(kNorbPairBytes);
  int compared = 0;
  for (int j = 0; j < fine.test.size(); j += 7) {
    const NorbInfo q = fine.test.info()[size_t(j)];
    if (q.azimuth % 2) continue;
    // The coarse set's index of the same record: one toy a class, ordered (class, elevation, azimuth).
    const int i = (fine.test.labels()[size_t(j)] * kNorbElevations + q.elevation) * 18 + q.azimuth / 2;
    const NorbInfo r = coarse.test.info()[size_t(i)];
    ASSERT_TRUE(r.instance == q.instance && r.elevation == q.elevation && r.azimuth == q.azimuth) << j;
    coarse.test.read_pair(i, x.data());
    fine.test.read_pair(j, y.data());
    EXPECT_EQ(x, y) << "record " << j;
    ++compared;
  }
  EXPECT_GE(compared, 20);
}

// --split window: the training toys at the training window's azimuths (every
// 10 degrees, across 0 here), the test toys there as familiar and at the
// held-out window's as novel; every elevation, and the circle is the two windows.
TEST(ToyViews, TheWindowSplitHoldsEachWindowsViewsOfItsOwnToys) {
  const NorbData d = toy_norb_data({.instances = 2, .lightings = 1, .azimuth_step = 1});
  const std::vector<int> train_codes = {32, 33, 34, 35, 0, 1, 2}, heldout_codes = {6, 7, 8, 9};
  const NorbSplit s = norb_split_window(d.train.info(), d.test.info(), train_codes, heldout_codes);
  auto has = [](const std::vector<int>& codes, int a) { return std::find(codes.begin(), codes.end(), a) != codes.end(); };
  const size_t per_azimuth = 5 * 2 * kNorbElevations;
  EXPECT_EQ(s.train.size(), train_codes.size() * per_azimuth);
  EXPECT_EQ(s.familiar.size(), train_codes.size() * per_azimuth);
  EXPECT_EQ(s.novel.size(), heldout_codes.size() * per_azimuth);
  for (int i : s.train) EXPECT_TRUE(has(train_codes, d.train.info()[size_t(i)].azimuth));
  for (int i : s.familiar) EXPECT_TRUE(has(train_codes, d.test.info()[size_t(i)].azimuth));
  for (int i : s.novel) EXPECT_TRUE(has(heldout_codes, d.test.info()[size_t(i)].azimuth));
  for (int i : s.train) EXPECT_LT(d.train.info()[size_t(i)].instance, 2);  // the training toys
  for (int i : s.novel) EXPECT_GE(d.test.info()[size_t(i)].instance, 2);   // the test toys

  // Through the command line: the run JSON records the windows it ran.
  const std::string json = vg::test::temp_dir() + "viewgap_toys_window." + std::to_string(getpid()) + ".json";
  const Outcome o = run("run --data toys --split window --toy-instances 2 --toy-lightings 1 --train-azimuths 320:380"
                        " --test-azimuths 60:90 --models nn1 --quiet --out-json " + json);
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(test::slurp(json));
  EXPECT_EQ(j["dataset"]["sizes"]["train"], 7 * per_azimuth) << j["dataset"]["sizes"];
  EXPECT_EQ(j["dataset"]["sizes"]["heldout"], 4 * per_azimuth);
  EXPECT_EQ(j["dataset"]["circle_azimuths"], nlohmann::json({0, 10, 20, 60, 70, 80, 90, 320, 330, 340, 350}));
  EXPECT_EQ(j["dataset"]["gap_deg"], 40);
  EXPECT_EQ(j["dataset"]["axis"]["protocol"], "toys-azimuth-window");
  std::filesystem::remove(json);
}

TEST(ToyViews, TrainingAndTestToysAreTheirOwnInstances) {
  const NorbData d = toy_norb_data({.instances = 3, .lightings = 1});
  for (const NorbInfo& r : d.train.info()) EXPECT_TRUE(r.instance >= 0 && r.instance < 3);
  for (const NorbInfo& r : d.test.info()) EXPECT_TRUE(r.instance >= 3 && r.instance < 6);
  for (const NorbInfo& r : d.validation.info()) EXPECT_TRUE(r.instance >= 6 && r.instance < 9);
  EXPECT_EQ(d.train.size(), 5 * 3 * 9 * 18);
  EXPECT_EQ(d.test.size(), d.train.size());
  EXPECT_EQ(d.validation.size(), d.train.size());
}

// At every one of smallNORB's 162 viewpoints, no two toys of a category look
// alike in their noise-free 48 x 48 pictures (the resolution the models
// read): of the pixels either toy covers, at least a tenth differ by more than
// 10 grey levels, over three times the pixel noise (kToyNoise), so no draw of
// noise could make the one picture from the other. Shading counts as well as
// the outline: two cars of one body style may share an outline from behind,
// not their faces. Relative to the toys' area, since toys differ in size.
TEST(ToyViews, EveryInstanceIsDistinctFromEveryOtherAtEveryViewpoint) {
  constexpr int kSide = 48, kInstances = 10;
  constexpr float kGrey = 10.f / 255.f;
  const ToyShelf shelf({.instances = kInstances / 2});
  const ToyConfig cfg{.stereo_deg = 0};
  for (int c = 0; c < kToyCategories; ++c) {
    double fewest = 1;
    for (int e = 0; e < kNorbElevations; ++e)
      for (int a = 0; a <= kNorbAzimuthMax; a += 2) {
        std::vector<std::vector<float>> s;
        for (int i = 0; i < kInstances; ++i)
          s.push_back(clean_pair(shelf.mesh(c, i), norb_azimuth_deg(a), norb_elevation_deg(e), 0, kSide, cfg));
        for (int i = 0; i < kInstances; ++i)
          for (int j = i + 1; j < kInstances; ++j) {
            int differ = 0, covered = 0;
            for (int p = 0; p < kSide * kSide; ++p) {
              const float x = s[size_t(i)][size_t(p)], y = s[size_t(j)][size_t(p)];
              differ += std::fabs(x - y) > kGrey;
              covered += x != kToyBackground || y != kToyBackground;
            }
            const double part = double(differ) / covered;
            fewest = std::min(fewest, part);
            EXPECT_GE(part, 0.1) << "category " << c << ", toys " << i << " and " << j << " at azimuth "
                                 << norb_azimuth_deg(a) << ", elevation " << norb_elevation_deg(e) << ": " << differ
                                 << " of the " << covered << " pixels they cover";
          }
      }
    std::printf("category %d: at least %.0f %% of the pixels two toys cover differ\n", c, 100 * fewest);
  }
}

TEST(ToyViews, LightingChangesShadingButNotTheSilhouette) {
  constexpr int kSide = 96;
  const ToyShelf shelf(ToyConfig{});
  for (int c = 0; c < kToyCategories; ++c) {
    const std::vector<float> first = clean_pair(shelf.mesh(c, 2), 40, 45, 0, kSide);
    const std::vector<bool> outline = silhouette(first, kSide, 0);
    int covered = 0;
    for (bool b : outline) covered += b;
    EXPECT_GT(covered, kSide * kSide / 100) << "category " << c;  // a small thin human covers ~2 %
    for (int l = 1; l < kToyLightings; ++l) {
      const std::vector<float> lit = clean_pair(shelf.mesh(c, 2), 40, 45, l, kSide);
      EXPECT_EQ(silhouette(lit, kSide, 0), outline) << "category " << c << ", lighting " << l;
      int changed = 0;
      for (size_t p = 0; p < outline.size(); ++p) changed += outline[p] && lit[p] != first[p];
      EXPECT_GT(changed, covered / 2) << "category " << c << ", lighting " << l << ": most of the toy relit";
    }
  }
}

// The pair is one picture seen from two parallel cameras: camera 1's image is
// camera 0's moved left (the nearer the toy, the further), never up or down.
TEST(ToyViews, TheStereoPairDiffersByAHorizontalDisparity) {
  constexpr int kSide = 96, kReach = 12;
  const ToyShelf shelf(ToyConfig{});
  for (int c = 0; c < kToyCategories; ++c) {
    const std::vector<float> pair = clean_pair(shelf.mesh(c, 1), 100, 35, 3, kSide);
    const std::vector<bool> left = silhouette(pair, kSide, 0), right = silhouette(pair, kSide, 1);
    EXPECT_NE(left, right) << "category " << c;
    // The shift of camera 1's outline that best matches camera 0's.
    int best = kSide * kSide, best_dx = 0, best_dy = 0;
    for (int dy = -kReach; dy <= kReach; ++dy)
      for (int dx = -kReach; dx <= kReach; ++dx) {
        int differ = 0;
        for (int r = 0; r < kSide; ++r)
          for (int q = 0; q < kSide; ++q) {
            const int r1 = r - dy, q1 = q - dx;
            const bool b = r1 >= 0 && r1 < kSide && q1 >= 0 && q1 < kSide && right[size_t(r1 * kSide + q1)];
            differ += b != left[size_t(r * kSide + q)];
          }
        if (differ < best) best = differ, best_dx = dx, best_dy = dy;
      }
    EXPECT_EQ(best_dy, 0) << "category " << c;
    // f b / d: 96 / 2 / tan(15 deg) x 2 x 6 tan(1 deg) / 6 = 6.25 px at the toy's centre.
    EXPECT_GE(best_dx, 4) << "category " << c;
    EXPECT_LE(best_dx, 9) << "category " << c;
  }
}

TEST(ToyViews, OrthographicAndPerspectiveAgreeInSizeAtTheToysCentre) {
  // A toy's outline covers about as many pixels either way (the orthographic
  // view is as wide as the perspective one at the target); perspective differs.
  constexpr int kSide = 96;
  const ToyShelf shelf(ToyConfig{});
  const ToyConfig persp{}, ortho{.perspective = false};
  for (int c = 0; c < kToyCategories; ++c) {
    const auto p = silhouette(clean_pair(shelf.mesh(c, 0), 60, 40, 0, kSide, persp), kSide, 0);
    const auto o = silhouette(clean_pair(shelf.mesh(c, 0), 60, 40, 0, kSide, ortho), kSide, 0);
    int np = 0, no = 0;
    for (size_t k = 0; k < p.size(); ++k) np += p[k], no += o[k];
    EXPECT_NE(p, o) << "category " << c;
    EXPECT_NEAR(double(no) / np, 1.0, 0.25) << "category " << c;
  }
}

// The shelf's sizes: toy_mesh's unit sphere times toy_size (uniform in
// [min_size, 1]) times the scale; min_size 1 makes every toy the same size.
TEST(ToyViews, TheShelfSizesEachToyByItsSizeAndTheScale) {
  auto radius = [](const Mesh& m) {
    double r = 0;
    for (const Vec3& v : m.vertices) r = std::max(r, std::sqrt(double(v[0]) * v[0] + double(v[1]) * v[1] + double(v[2]) * v[2]));
    return r;
  };
  const ToyShelf plain({.instances = 1}), normalised({.instances = 1, .min_size = 1.0}), scaled({.instances = 1, .min_size = 1.0, .scale = 1.5});
  for (int c = 0; c < kToyCategories; ++c)
    for (int i = 0; i < 3; ++i) {
      const double unit = radius(toy_mesh(c, i));
      EXPECT_NEAR(radius(plain.mesh(c, i)) / unit, toy_size(c, i), 1e-5) << c << "," << i;
      EXPECT_GE(toy_size(c, i), kToyMinSize);
      EXPECT_NEAR(radius(normalised.mesh(c, i)) / unit, 1.0, 1e-5) << c << "," << i;
      EXPECT_NEAR(radius(scaled.mesh(c, i)) / unit, 1.5, 1e-5) << c << "," << i;
    }
}

// --toy-lights rig keeps every light near the camera's axis (no face the
// camera sees left to the ambient term alone); mixed holds a raking one. The
// light moves with the camera: the same angle at every view.
TEST(ToyViews, RigLightsStayNearTheCameraAxisAndMixedOnesRake) {
  for (const auto& [az, el] : {std::pair{0.0, 30.0}, {140.0, 55.0}, {330.0, 70.0}}) {
    const Camera cam = toy_camera(az, el, true);
    double sa, ca, se, ce;
    sin_cos_deg(az, &sa, &ca);
    sin_cos_deg(el, &se, &ce);
    const double towards[3] = {ce * sa, se, ce * ca};
    auto angle = [&](const Light& l) {
      const double c = towards[0] * l.direction[0] + towards[1] * l.direction[1] + towards[2] * l.direction[2];
      return std::acos(std::clamp(c, -1.0, 1.0)) * 180 / M_PI;
    };
    double widest_rig = 0, widest_mixed = 0;
    for (int l = 0; l < kToyLightings; ++l) {
      const Light rig = toy_light(l, cam, ToyLights::rig), mixed = toy_light(l, cam, ToyLights::mixed);
      widest_rig = std::max(widest_rig, angle(rig));
      widest_mixed = std::max(widest_mixed, angle(mixed));
      EXPECT_EQ(rig.intensity, mixed.intensity) << l;
      EXPECT_EQ(rig.ambient, mixed.ambient) << l;
    }
    EXPECT_LT(widest_rig, 27.0) << az << "," << el;
    EXPECT_GT(widest_mixed, 60.0) << az << "," << el;
  }
  // And it reaches the pixels: the same record, other bytes.
  const NorbData mixed = toy_norb_data({.instances = 1, .lightings = 1, .lights = ToyLights::mixed}),
                 rig = toy_norb_data({.instances = 1, .lightings = 1, .lights = ToyLights::rig});
  std::vector<uint8_t> a(static_cast<size_t>(kNorbPairBytes)), b(a.size());
  mixed.train.read_pair(0, a.data());
  rig.train.read_pair(0, b.data());
  EXPECT_NE(a, b);
}

TEST(ToyViews, BadConfigurationsAreRefused) {
  EXPECT_THROW(toy_norb_data({.instances = 0}), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.instances = kToyMaxInstances + 1}), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.lightings = 7}), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.stereo_deg = -1}), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.stereo_deg = NAN}), std::invalid_argument);
  EXPECT_THROW(toy_light(6, toy_camera(0, 30, true)), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.azimuth_step = 3}), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.min_size = 0}), std::invalid_argument);
  EXPECT_THROW(toy_norb_data({.scale = 3}), std::invalid_argument);
  // smallNORB's files hold its 18 azimuths only.
  EXPECT_THROW(render_toy_split({.instances = 1, .lightings = 1, .azimuth_step = 1}, NorbPart::training),
               std::invalid_argument);
}

// ---- Through the binary: the export read back, and --data toys.

// The toys' first setting (narrow, mixed), as every flag of the export's
// reaches its records; the default's are the same ToyConfig's.
TEST(ToyViews, TheExportReadsBackAsTheSameRecords) {
  const std::string dir = vg::test::temp_dir() + "viewgap_toys." + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const Outcome o = run("export-norb " + dir +
                        " --shapes toys --instances 1 --lightings 2 --seed 3 --variety narrow --lights mixed --quiet");
  ASSERT_EQ(o.code, 0) << o.err;
  const NorbData files = norb_load_dir(dir),
                 drawn = toy_norb_data({.instances = 1,
                                        .lightings = 2,
                                        .variety = ToyVariety::narrow,
                                        .lights = ToyLights::mixed,
                                        .seed = 3});
  std::vector<uint8_t> x(kNorbPairBytes), y(kNorbPairBytes);
  for (const auto& [f, d] : {std::pair{&files.train, &drawn.train}, {&files.test, &drawn.test}}) {
    ASSERT_EQ(f->size(), d->size());
    EXPECT_EQ(f->labels(), d->labels());
    for (int i = 0; i < f->size(); ++i) {
      const NorbInfo a = f->info()[size_t(i)], b = d->info()[size_t(i)];
      ASSERT_TRUE(a.instance == b.instance && a.elevation == b.elevation && a.azimuth == b.azimuth &&
                  a.lighting == b.lighting)
          << i;
      f->read_pair(i, x.data());
      d->read_pair(i, y.data());
      ASSERT_EQ(x, y) << "record " << i;
    }
  }
  // --data toys of the export's world and the exported files: the same run, number for number.
  std::string tables[2];
  const std::string common = " --split paper-azimuth --seed 3 --models nn1,linear --n-epochs 2 --quiet";
  for (int k = 0; k < 2; ++k) {
    const std::string json = dir + "/run" + std::to_string(k) + ".json";
    const Outcome r = run("run" +
                          std::string(k == 0 ? " --data toys --toy-instances 1 --toy-lightings 2 --toy-seed 3"
                                               " --toy-variety narrow --toy-lights mixed"
                                             : " --data norb:" + dir) +
                          common + " --out-json " + json);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(test::slurp(json));
    if (k == 0) {
      EXPECT_EQ(j["config"]["data"]["toys"]["instances_per_split"], 1) << j["config"]["data"];
      EXPECT_NE(r.out.find("toys (1 training and 1 test toys per category, 2 lighting(s)"), std::string::npos) << r.out;
    }
    for (auto m : j["models"]) {
      m.erase("timing_s");  // the one thing that may differ
      for (auto& h : m["history"]) h.erase("seconds");
      tables[k] += m.dump();
    }
  }
  EXPECT_EQ(tables[0], tables[1]);
  std::filesystem::remove_all(dir);
}

// The stopping rules read toys of neither split: matching the CNN's familiar
// accuracy runs, and the validation set is the validation toys at the training views.
TEST(ToyViews, MatchedFamiliarAccuracyReadsTheValidationToys) {
  const std::string json = vg::test::temp_dir() + "viewgap_toys_match." + std::to_string(getpid()) + ".json";
  const Outcome o = run("run --data toys --toy-instances 1 --toy-lightings 1 --models cnn,linear --match-familiar cnn"
                        " --n-epochs 2 --quiet --out-json " + json);
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(test::slurp(json));
  EXPECT_EQ(j["dataset"]["sizes"]["validation"], 5 * 9 * 6) << j["dataset"]["sizes"];
  std::filesystem::remove(json);
}

TEST(ToyViews, BadFlagsAreOneLineNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run --data toys --toy-instances 0", "--toy-instances '0'"},
      {"run --data toys --toy-instances 51", "--toy-instances '51'"},
      {"run --data toys --toy-lightings 7", "--toy-lightings '7'"},
      {"run --data toys --stereo-deg -1", "--stereo-deg '-1'"},
      {"run --data toys --stereo-deg 21", "--stereo-deg '21'"},
      {"run --data toys --projection fisheye", "--projection 'fisheye'"},
      {"run --data toys --toy-variety medium", "--toy-variety 'medium'"},
      {"run --data toys --toy-variety Wide", "--toy-variety 'Wide'"},
      {"run --data toys --toy-lights soft", "--toy-lights 'soft'"},
      {"run --toy-instances 3", "--toy-instances '3'"},
      {"run --data toys --split norb-translation", "--split 'norb-translation'"},
      {"run --data toys --train-azimuths 0:40", "--train-azimuths '0:40'"},
      // The window split: windows on the 10-degree grid, apart, under 360; its sweep's gaps and width on the grid.
      {"run --data toys --split window --train-azimuths 0:55", "--train-azimuths '0:55'"},
      {"run --data toys --split window --train-azimuths 0:360", "--train-azimuths '0:360'"},
      {"run --data toys --split window --test-azimuths 200:360", "--test-azimuths '200:360'"},  // 360 is 0, a training view
      {"run --data toys --split window --test-azimuths 100:200", "--test-azimuths '100:200'"},
      {"run --data toys --split window --n-test-views 3", "--n-test-views '3'"},
      {"run --data norb:/tmp --split window", "--split 'window'"},
      {"sweep --data toys --split window --gaps 0,15 --out /tmp/never", "--gaps '0,15'"},
      {"sweep --data toys --split window --test-width 45 --out /tmp/never", "--test-width '45'"},
      {"sweep --data toys --split window --test-azimuths 200:260 --out /tmp/never", "--test-azimuths '200:260'"},
      {"export-norb /tmp/never --shapes toy", "--shapes 'toy'"},
      {"export-norb /tmp/never --shapes toys --variety medium", "--variety 'medium'"},
      {"export-norb /tmp/never --shapes toys --lights soft", "--lights 'soft'"},
      {"export-norb /tmp/never --lights mixed", "--lights 'mixed': only with --shapes toys"},
      {"run --data toys --standardize yes", "--standardize 'yes'"},
      {"run --split translation --standardize on", "--standardize 'on'"},
  };
  for (const auto& [args, want] : cases) {
    const Outcome o = run(args + " --quiet");
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(want), std::string::npos) << args << "\n" << o.err;
  }
}

}  // namespace
}  // namespace vg
