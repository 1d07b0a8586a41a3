// The translation and affine protocols (data/plane_views.h): each held-out
// image is its training viewpoint's render moved by the change its axis
// position says, training draws changes within its range, and their flags are
// checked before any work. (Disjointness, determinism and threads: the
// registry-wide tests in test_protocol.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "data/plane_views.h"
#include "harness/run_flags.h"
#include "tests/test_util.h"

namespace vg {
namespace {

DataConfig configured(const std::string& split, const std::vector<std::pair<std::string, std::string>>& set = {}) {
  RunFlags f;
  f.split = split;
  f.n_train_views = "2";
  f.n_elev = "1";
  f.elevations = "30:30";
  f.train_az = "0:90";
  for (const auto& [flag, value] : set) *run_flag(f, flag) = value;
  int threads = 1;
  return validate_run(f, &threads).data;
}

double mean_square(const float* a, const std::vector<float>& b) {
  double s = 0;
  for (size_t p = 0; p < b.size(); ++p) s += (a[p] - b[p]) * (a[p] - b[p]);
  return s / double(b.size());
}

// The change of magnitude m each direction k of a factor makes, written out
// from the protocols' definitions (not their code): 8 compass directions of a
// shift, either sign of a turn or shear, a scale or its inverse; for the
// combined affine change of strength m, affNIST's ranges times m (a turn of 20 m
// degrees, a scale of 1 + 0.2 m or its inverse, a shear of 0.2 m), all 8 signs.
std::vector<PlaneTransform> candidates(const std::string& axis, double m) {
  std::vector<PlaneTransform> out;
  if (axis == "shift") {
    for (int dx = -1; dx <= 1; ++dx)
      for (int dy = -1; dy <= 1; ++dy)
        if (dx != 0 || dy != 0) out.push_back({.tx = m * dx, .ty = m * dy});
  } else if (axis == "rotation") {
    out = {PlaneTransform::make(m, 1, 0, 0, 0), PlaneTransform::make(-m, 1, 0, 0, 0)};
  } else if (axis == "affine") {
    for (double turn : {20 * m, -20 * m})
      for (double scale : {1 + 0.2 * m, 1 / (1 + 0.2 * m)})
        for (double shear : {0.2 * m, -0.2 * m}) out.push_back(PlaneTransform::make(turn, scale, shear, 0, 0));
  } else if (axis == "scale") {
    out = {PlaneTransform::make(0, m, 0, 0, 0), PlaneTransform::make(0, 1 / m, 0, 0, 0)};
  } else {
    out = {PlaneTransform::make(0, 1, m, 0, 0), PlaneTransform::make(0, 1, -m, 0, 0)};
  }
  return out;
}

// Every held-out image is, up to its pixel noise (std 0.04), the render of
// its class and viewpoint under one of the changes of its recorded magnitude,
// and far from the unchanged render.
TEST(PlaneProtocols, HeldOutImagesAreTheRenderMovedByTheirMagnitude) {
  for (const char* split : {"translation", "rotation", "scale", "shear", "affine"}) {
    SCOPED_TRACE(split);
    const DataConfig cfg = configured(split);
    const Protocol& p = protocol_of(cfg);
    const Dataset d = p.make(cfg);
    ASSERT_GT(d.heldout.size(), 0);
    std::vector<float> clean(kImagePixels);
    for (int i = 0; i < d.heldout.size(); ++i) {
      const float* img = d.heldout.image(i);
      const double m = d.heldout.axis[size_t(i)];
      double best = INFINITY;
      for (const PlaneTransform& t : candidates(p.axis.name, m)) {
        render_clean(d.heldout.labels[size_t(i)], d.heldout.azimuth[size_t(i)], d.heldout.elevation[size_t(i)], t,
                     clean.data(), cfg.shapes);
        best = std::min(best, mean_square(img, clean));
      }
      render_clean(d.heldout.labels[size_t(i)], d.heldout.azimuth[size_t(i)], d.heldout.elevation[size_t(i)],
                   clean.data(), cfg.shapes);
      const double unchanged = mean_square(img, clean);
      EXPECT_LT(best, 0.04 * 0.04 * 1.3) << i;  // the noise, less what clamping to [0, 1] removes
      EXPECT_GT(unchanged, 3 * best) << i;
    }
  }
}

// Training draws its changes within the training range, and with a range, not all alike.
TEST(PlaneProtocols, TrainingChangesLieWithinTheTrainingRange) {
  const std::pair<const char*, const char*> ranges[] = {
      {"train-shift", "2"}, {"train-rotation", "20"}, {"train-scale", "1.2"}, {"train-shear", "0.1"},
      {"train-affine", "0.5"}};
  const char* splits[] = {"translation", "rotation", "scale", "shear", "affine"};
  const char* tests[] = {"test-shifts", "test-rotations", "test-scales", "test-shears", "test-affine"};
  const char* beyond[] = {"3:6", "30:90", "1.25:1.75", "0.2:0.6", "1:2"};
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE(splits[k]);
    const DataConfig cfg = configured(splits[k], {{ranges[k].first, ranges[k].second}, {tests[k], beyond[k]}});
    const Dataset d = protocol_of(cfg).make(cfg);
    const double hi = std::stod(ranges[k].second);
    float lo_seen = INFINITY, hi_seen = -INFINITY;
    for (const Split* s : {&d.train, &d.familiar})
      for (float a : s->axis) {
        EXPECT_LE(a, hi + 1e-6);
        lo_seen = std::min(lo_seen, a);
        hi_seen = std::max(hi_seen, a);
      }
    EXPECT_GT(hi_seen - lo_seen, 0.5 * (hi - cfg.plane->factor->neutral));
    for (float a : d.heldout.axis) EXPECT_GT(a, hi);
  }
}

// The hostile inputs, each one line naming the flag, exit 2, before any work.
TEST(PlaneProtocols, BadFlagsAreOneLineNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"--split translation --test-shifts 10:20", "--test-shifts '10:20'"},
      {"--split rotation --test-rotations 90:200", "--test-rotations '90:200'"},
      {"--split scale --test-scales 0:1.5", "--test-scales '0:1.5'"},
      {"--split scale --train-scale -1", "--train-scale '-1'"},
      {"--split translation --train-shift 4 --test-shifts 3:6", "--test-shifts '3:6'"},
      {"--split shear --test-shears 0.6:0.2", "--test-shears '0.6:0.2'"},
      {"--split rotation --train-shift 2", "--train-shift '2'"},
      {"--train-shift 2", "--train-shift '2'"},
      {"--split translation --test-azimuths 200:300", "--test-azimuths '200:300'"},
      {"--split translation --n-test-shifts 1", "--n-test-shifts '1'"},
      {"--split affine --test-affine 2:4", "--test-affine '2:4'"},
      {"--split affine --train-affine 1.5 --test-affine 1:2", "--test-affine '1:2'"},
      {"--split shear --train-affine 0.5", "--train-affine '0.5'"},
  };
  for (const auto& [args, named] : cases) {
    SCOPED_TRACE(args);
    const test::Outcome o = test::run(std::string("run --quiet --n-epochs 1 ") + args);
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(named), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "");
  }
}

// A sweep over shifts: its gaps are pixels beyond training's, in the tables.
TEST(PlaneProtocols, SweepStepsTheHeldOutShift) {
  const std::string dir = vg::test::temp_dir() + "viewgap_plane_sweep." + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const test::Outcome o = test::run("sweep --out " + dir +
                                    " --split translation --seeds 0:1 --gaps 0,4 --n-epochs 1 --models cnn,nn1 --quiet");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string cells = test::slurp(dir + "/cells.csv");
  EXPECT_NE(cells.find(",shift,px,0,0,"), std::string::npos) << cells;
  EXPECT_NE(cells.find(",shift,px,4,4,"), std::string::npos) << cells;
  // The swept flag belongs to the sweep unless --gaps given.
  const test::Outcome fixed = test::run("sweep --out " + dir + "_x --split translation --test-shifts 2:4 --quiet");
  EXPECT_EQ(fixed.code, 2);
  EXPECT_NE(fixed.err.find("--test-shifts"), std::string::npos) << fixed.err;
  std::filesystem::remove_all(dir);
}

// Shards of a translation sweep merge into the unsharded tables: merge reads
// the protocol's own swept flag, and a sweep without the default reference
// model (caps) merges too.
TEST(PlaneProtocols, ShardsOfAShiftSweepMergeIntoTheUnshardedTables) {
  const std::string base = vg::test::temp_dir() + "viewgap_plane_merge." + std::to_string(getpid());
  std::filesystem::remove_all(base);
  const std::string args = " --split translation --seeds 0:1 --gaps 1,3 --n-epochs 1 --models cnn,nn1 --quiet";
  ASSERT_EQ(test::run("sweep --out " + base + "/full" + args).code, 0);
  for (int k = 0; k < 2; ++k) {
    const test::Outcome o = test::run("sweep --out " + base + "/s" + std::to_string(k) + args + " --shard " +
                                      std::to_string(k) + "/2");
    ASSERT_EQ(o.code, 0) << o.err;
  }
  const test::Outcome m = test::run("merge " + base + "/s0 " + base + "/s1 --out " + base + "/merged");
  ASSERT_EQ(m.code, 0) << m.err;
  for (const char* f : {"summary.csv", "azimuth.csv", "circle.csv"})
    EXPECT_EQ(test::slurp(base + "/merged/" + f), test::slurp(base + "/full/" + f)) << f;
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace vg
