// The in-plane protocols on smallNORB's files (data/norb_plane.h): each runs
// on an exported fixture; a held-out shift is the file's crop at its offset,
// bit for bit; a neutral change is the centre crop; a quarter turn, a scale
// and the background are the hand-computed ones; training draws stay within
// the training range; threads change nothing; a sweep steps the shift; and
// the smallNORB flags (the norb protocols' own) are checked too.
// (Disjointness, determinism and distances: the registry-wide tests in
// test_protocol.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data/norb_plane.h"
#include "harness/run_flags.h"
#include "tests/test_util.h"

namespace vg {
namespace {

// smallNORB's format, tiny: one instance, one lighting, every 9th record of
// each split (90 images, every class), written once per process.
const std::string& fixture() {
  static const std::string dir = [] {
    const std::string d = vg::test::temp_dir() + "viewgap_norb_plane." + std::to_string(getpid());
    test::write_norb_fixture(d, 9);
    return d;
  }();
  return dir;
}

DataConfig configured(const std::string& split, const std::vector<std::pair<std::string, std::string>>& set = {}) {
  RunFlags f;
  f.data = "norb:" + fixture();
  f.split = split;
  for (const auto& [flag, value] : set) *run_flag(f, flag) = value;
  int threads = 1;
  DataConfig d = validate_run(f, &threads).data;
  d.seed = 5;
  return d;
}

// Camera `cam` of pair `i` of the test (or training) file at 48 x 48, each
// pixel the mean of its 2 x 2 block / 255, written out here from the format.
std::vector<float> half_image(const NorbSet& set, int i, int cam) {
  std::vector<uint8_t> pair(kNorbPairBytes);
  set.read_pair(i, pair.data());
  const uint8_t* img = pair.data() + size_t(cam) * kNorbImageBytes;
  std::vector<float> out(48 * 48);
  for (int r = 0; r < 48; ++r)
    for (int c = 0; c < 48; ++c) {
      const int sum = img[(2 * r) * 96 + 2 * c] + img[(2 * r) * 96 + 2 * c + 1] + img[(2 * r + 1) * 96 + 2 * c] +
                      img[(2 * r + 1) * 96 + 2 * c + 1];
      out[size_t(r * 48 + c)] = float(sum) / 1020.f;
    }
  return out;
}

// The 32 x 32 window of a 48 x 48 image whose top-left is (row0, col0).
std::vector<float> window(const std::vector<float>& half, int row0, int col0) {
  std::vector<float> out;
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c) out.push_back(half[size_t((row0 + r) * 48 + col0 + c)]);
  return out;
}

bool same(const float* a, const std::vector<float>& b) { return std::memcmp(a, b.data(), b.size() * sizeof(float)) == 0; }

// Every held-out image is both cameras' crops moved by one of the 8
// directions of its recorded shift (the object moves by (dx, dy): the crop by
// (-dx, -dy)), bit for bit; and the circle is the centre crop.
TEST(NorbPlane, HeldOutShiftIsTheFileCropAtItsOffset) {
  const DataConfig cfg = configured("translation", {{"test-shifts", "2:8"}, {"n-test-shifts", "4"}});
  const Dataset d = protocol_of(cfg).make(cfg);
  const NorbData files = norb_load_dir(fixture());
  ASSERT_EQ(d.heldout.size(), files.test.size());
  ASSERT_EQ(d.heldout.channels, 2);
  std::set<double> magnitudes;
  std::set<std::pair<int, int>> offsets;
  for (int j = 0; j < d.heldout.size(); ++j) {
    const int m = int(d.heldout.axis[size_t(j)]);
    ASSERT_EQ(double(m), d.heldout.axis[size_t(j)]);
    magnitudes.insert(m);
    int matches = 0;
    for (int dx = -1; dx <= 1; ++dx)
      for (int dy = -1; dy <= 1; ++dy) {
        if (dx == 0 && dy == 0) continue;
        bool both = true;
        for (int cam = 0; cam < 2; ++cam)
          both = both && same(d.heldout.image(j) + cam * 1024, window(half_image(files.test, j, cam), 8 - m * dy, 8 - m * dx));
        if (both) {
          ++matches;
          offsets.insert({m * dx, m * dy});
        }
      }
    EXPECT_EQ(matches, 1) << j << " at shift " << m;
    for (int cam = 0; cam < 2; ++cam)
      EXPECT_TRUE(same(d.circle.image(j) + cam * 1024, window(half_image(files.test, j, cam), 8, 8))) << j;
    EXPECT_EQ(d.heldout.labels[size_t(j)], files.test.labels()[size_t(j)]);
  }
  EXPECT_EQ(magnitudes, (std::set<double>{2, 4, 6, 8}));
  EXPECT_GE(offsets.size(), 16u);  // the directions are spread over the magnitudes
}

// A turn by 0 and a scale by 1 change nothing: the centre crop, bit for bit;
// so are the familiar images of protocols trained on no change.
TEST(NorbPlane, NeutralChangesAreTheCentreCrop) {
  const NorbData files = norb_load_dir(fixture());
  const std::vector<float> half = half_image(files.test, 3, 1);
  std::vector<float> out(1024);
  for (const PlaneTransform& t : {PlaneTransform::make(0, 1, 0, 0, 0), PlaneTransform{}}) {
    norb_plane_window(half.data(), t, 0.5f, out.data());
    EXPECT_TRUE(same(out.data(), window(half, 8, 8)));
  }
  for (const char* split : {"rotation", "scale", "shear"}) {
    SCOPED_TRACE(split);
    const DataConfig cfg = configured(split);
    const Dataset d = protocol_of(cfg).make(cfg);
    for (int j = 0; j < d.familiar.size(); j += 7)
      for (int cam = 0; cam < 2; ++cam) {
        const std::vector<float> centre = window(half_image(files.test, j, cam), 8, 8);
        EXPECT_TRUE(same(d.familiar.image(j) + cam * 1024, centre)) << j;
        EXPECT_FALSE(same(d.heldout.image(j) + cam * 1024, centre)) << j;
      }
  }
}

// A quarter turn permutes the pixels: rows grow downward, so +90 degrees
// turns clockwise on screen, and output (R, C) of the 48 x 48 image reads
// source (47 - C, R) (-90: (C, 47 - R)); the window is rows and columns 8..39.
TEST(NorbPlane, QuarterTurnOfAPatternIsHandComputed) {
  std::vector<float> pattern(48 * 48);
  for (int r = 0; r < 48; ++r)
    for (int c = 0; c < 48; ++c) pattern[size_t(r * 48 + c)] = float((r * 53 + c * 7) % 97) / 97.f;
  std::vector<float> out(1024);
  norb_plane_window(pattern.data(), PlaneTransform::make(90, 1, 0, 0, 0), 0.5f, out.data());
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      ASSERT_EQ(out[size_t(r * 32 + c)], pattern[size_t((47 - (c + 8)) * 48 + (r + 8))]) << r << "," << c;
  norb_plane_window(pattern.data(), PlaneTransform::make(-90, 1, 0, 0, 0), 0.5f, out.data());
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      ASSERT_EQ(out[size_t(r * 32 + c)], pattern[size_t((c + 8) * 48 + (47 - (r + 8)))]) << r << "," << c;
}

// A shift moves the object as the renderer's PlaneTransform does: by tx
// columns and ty rows (the crop by the opposite), whole pixels bit for bit.
TEST(NorbPlane, ShiftMovesTheObjectByItsOffset) {
  std::vector<float> spot(48 * 48, 0.1f);
  spot[24 * 48 + 24] = 0.9f;  // pixel (16, 16) of the centre window
  std::vector<float> out(1024);
  norb_plane_window(spot.data(), {.tx = 2, .ty = -3}, 0.f, out.data());
  EXPECT_EQ(out[size_t((16 - 3) * 32 + 16 + 2)], 0.9f);
  EXPECT_EQ(std::count(out.begin(), out.end(), 0.9f), 1);
  EXPECT_TRUE(same(out.data(), window(spot, 8 + 3, 8 - 2)));
}

// Bilinear resampling keeps a ramp a ramp: under a scale s about the centre
// 23.5, output column C reads source column 23.5 + (C - 23.5) / s. Shrunk,
// the window's corners read from outside the image: the border ring's mean.
TEST(NorbPlane, ScaleOfARampAndTheBackgroundAreHandComputed) {
  std::vector<float> ramp(48 * 48);
  for (int r = 0; r < 48; ++r)
    for (int c = 0; c < 48; ++c) ramp[size_t(r * 48 + c)] = float(c) / 47.f;
  std::vector<float> out(1024);
  norb_plane_window(ramp.data(), PlaneTransform::make(0, 1.5, 0, 0, 0), 0.f, out.data());
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      ASSERT_NEAR(out[size_t(r * 32 + c)], (23.5 + (c + 8 - 23.5) / 1.5) / 47.0, 1e-6) << r << "," << c;
  // A frame of 0.25 around 0.75: the ring's mean is 0.25.
  std::vector<float> framed(48 * 48, 0.75f);
  for (int k = 0; k < 48; ++k)
    framed[size_t(k)] = framed[size_t(47 * 48 + k)] = framed[size_t(k * 48)] = framed[size_t(k * 48 + 47)] = 0.25f;
  EXPECT_EQ(norb_border_mean(framed.data()), 0.25f);
  norb_plane_window(framed.data(), PlaneTransform::make(0, 0.5, 0, 0, 0), norb_border_mean(framed.data()), out.data());
  EXPECT_EQ(out[0], 0.25f);            // source (-7.5, -7.5): outside
  EXPECT_EQ(out[16 * 32 + 16], 0.75f);  // source (24.5, 24.5): inside
}

// Training draws changes within the training range (a shift: whole pixels,
// the crop within +-S of the centre), each a pure function of (seed, epoch,
// sample), not all alike; held-out ones lie beyond.
TEST(NorbPlane, TrainingDrawsLieWithinTheTrainingRange) {
  const DataConfig cfg = configured("translation", {{"train-shift", "3"}, {"test-shifts", "4:7"}});
  const Dataset d = protocol_of(cfg).make(cfg);
  ASSERT_TRUE(bool(d.train.draw));
  const NorbData files = norb_load_dir(fixture());
  std::set<std::pair<int, int>> seen;
  std::vector<float> x(d.train.pixels()), again(d.train.pixels());
  for (uint64_t epoch : {1, 2, 3})
    for (int i = 0; i < d.train.size(); i += 5) {
      d.train.draw(i, epoch, x.data());
      d.train.draw(i, epoch, again.data());
      ASSERT_EQ(x, again);
      const std::vector<float> half = half_image(files.train, i, 0);
      int found = 0;
      for (int dx = -3; dx <= 3; ++dx)
        for (int dy = -3; dy <= 3; ++dy)
          if (same(x.data(), window(half, 8 - dy, 8 - dx))) {
            ++found;
            seen.insert({dx, dy});
          }
      EXPECT_GE(found, 1) << i << " in epoch " << epoch;
    }
  EXPECT_GE(seen.size(), 20u);
  for (const Split* s : {&d.train, &d.familiar})
    for (float a : s->axis) EXPECT_LE(a, 3.f);
  for (float a : d.heldout.axis) EXPECT_GE(a, 4.f);
  // A turn's training range: every recorded magnitude within it, several seen.
  const DataConfig rot = configured("rotation", {{"train-rotation", "20"}});
  const Dataset r = protocol_of(rot).make(rot);
  std::set<float> turns;
  for (const Split* s : {&r.train, &r.familiar})
    for (float a : s->axis) {
      EXPECT_LE(a, 20.f);
      turns.insert(a);
    }
  EXPECT_GT(turns.size(), 10u);
  for (float a : r.heldout.axis) EXPECT_GE(a, 30.f);
}

std::string norb_args(const std::string& split) { return " --data norb:" + fixture() + " --split " + split; }

// Each protocol runs end to end.
TEST(NorbPlane, EachProtocolRunsOnTheFiles) {
  for (const char* split : {"translation", "rotation", "scale", "shear"}) {
    SCOPED_TRACE(split);
    const test::Outcome o = test::run("run --n-epochs 1 --models linear,nn1 --quiet" + norb_args(split));
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("split " + std::string(split) + ", cameras both"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("fingerprint"), std::string::npos) << o.out;
  }
}

// Every registered model takes the shift's data (one camera: one input channel).
TEST(NorbPlane, EveryModelRunsTheShift) {
  std::string models;
  for (const std::string& m : test::registered_models(false)) models += (models.empty() ? "" : ",") + m;
  const std::string json = vg::test::temp_dir() + "viewgap_norb_plane_run." + std::to_string(getpid()) + ".json";
  const test::Outcome o = test::run("run --n-epochs 1 --batch-size 45 --quiet --models " + models + " --out-json " +
                                    json + norb_args("translation") + " --cameras first");
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(test::slurp(json));
  EXPECT_EQ(j.at("config").at("protocol"), "norb-translation");
  EXPECT_EQ(j.at("config").at("source"), "norb");
  EXPECT_EQ(j.at("config").at("data").at("cameras"), "first");
  EXPECT_EQ(j.at("dataset").at("axis").at("name"), "shift");
  EXPECT_EQ(j.at("models").size(), test::registered_models(false).size());
  std::filesystem::remove(json);
}

// The training draws (a shift, jitter) and the evaluation do not depend on the threads.
TEST(NorbPlane, ThreadsChangeNoResult) {
  std::string tail[2];
  for (int t : {1, 2}) {
    const test::Outcome o = test::run("run --n-epochs 2 --models linear,nn1 --quiet --train-shift 2 --brightness 0.2 "
                                      "--contrast 0.2 --threads " + std::to_string(t) + norb_args("translation"));
    ASSERT_EQ(o.code, 0) << o.err;
    ASSERT_NE(o.out.find("fingerprint"), std::string::npos) << o.out;
    tail[t - 1] = o.out.substr(o.out.find("fingerprint"));
  }
  EXPECT_EQ(tail[0], tail[1]);
}

// A sweep over the distance in pixels: its cells hold shift rows; a gap
// whose held-out window passes 8 pixels is refused, naming --gaps.
TEST(NorbPlane, SweepStepsTheHeldOutShift) {
  const std::string dir = vg::test::temp_dir() + "viewgap_norb_plane_sweep." + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const test::Outcome o = test::run("sweep --out " + dir + " --seeds 0 --gaps 0,2 --n-epochs 1 --models linear,nn1 "
                                    "--reference linear --quiet" + norb_args("translation"));
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string cells = test::slurp(dir + "/cells.csv");
  EXPECT_NE(cells.find(",shift,px,0,0,"), std::string::npos) << cells;
  EXPECT_NE(cells.find(",shift,px,2,2,"), std::string::npos) << cells;
  const test::Outcome far = test::run("sweep --out " + dir + "_far --seeds 0 --gaps 2,6 --models nn1 --quiet" +
                                      norb_args("translation"));
  EXPECT_EQ(far.code, 2) << far.err;
  EXPECT_NE(far.err.find("--gaps '2,6': gap 6"), std::string::npos) << far.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "_far/meta.json"));
  std::filesystem::remove_all(dir);
}

// Bad values, each one line naming the flag, exit 2, before any work; the
// smallNORB flags are the norb protocols' own, refused with the rendered data.
TEST(NorbPlane, BadFlagsAreOneLineNamingTheFlag) {
  const std::string t = norb_args("translation");
  const std::pair<std::string, std::string> cases[] = {
      {t + " --train-shift 9", "--train-shift '9': training shift up to 9 exceeds 8"},
      {t + " --train-shift 1.5", "--train-shift '1.5': smallNORB's shifts move the crop by whole pixels"},
      {t + " --test-shifts 6:10", "--test-shifts '6:10': held-out shift 6:10 exceeds 8"},
      {t + " --test-shifts 3.5:6", "--test-shifts '3.5:6'"},
      {t + " --test-shifts 3:6 --n-test-shifts 3", "--n-test-shifts '3': 3 shifts evenly spaced over 3:6 include 4.5"},
      {t + " --train-shift 4 --test-shifts 3:6", "--test-shifts '3:6'"},
      {t + " --n-per-combo 3", "--n-per-combo '3': applies to --data synthetic only"},
      {t + " --noise 0.1", "--noise '0.1': applies to --data synthetic only"},
      {t + " --cameras third", "--cameras 'third': expected both, first or second"},
      {t + " --brightness 2", "--brightness '2'"},
      {t + " --stop-at-familiar 0.9", "--stop-at-familiar '0.9': needs a familiar validation split"},
      {t + " --train-rotation 10", "--train-rotation '10': applies with --split rotation only"},
      {norb_args("rotation") + " --test-rotations 90:200", "--test-rotations '90:200'"},
      {norb_args("scale") + " --test-scales 0.5:1.5", "--test-scales '0.5:1.5'"},
      {" --split translation --cameras first", "--cameras 'first': applies to --data norb:DIR or toys only"},
      {" --brightness 0.1", "--brightness '0.1': applies to --data norb:DIR or toys only"},
      {" --split rotation --contrast 0.1", "--contrast '0.1': applies to --data norb:DIR or toys only"},
  };
  for (const auto& [args, named] : cases) {
    SCOPED_TRACE(args);
    const test::Outcome o = test::run("run --quiet --n-epochs 1" + args);
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(named), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "");
  }
}

// harness/ names no smallNORB flag: the norb protocols declare them.
TEST(NorbPlane, SmallNorbFlagsAreTheNorbProtocolsOwn) {
  for (const FlagSpec& s : run_flag_specs())
    for (const char* name : {"cameras", "brightness", "contrast"}) EXPECT_NE(std::string(s.name), name);
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    std::set<std::string> own;
    for (const DataFlag& f : p.flags) own.insert(f.name);
    const bool norb = std::string(p.source) == "norb:" || std::string(p.source) == "toys";  // smallNORB's format
    for (const char* name : {"cameras", "brightness", "contrast"}) EXPECT_EQ(own.count(name), norb ? 1u : 0u) << name;
  }
  const RunFlags f;
  EXPECT_EQ(*run_flag(f, "cameras"), "both");
  EXPECT_EQ(*run_flag(f, "brightness"), "0");
  EXPECT_EQ(*run_flag(f, "contrast"), "0");
}

}  // namespace
}  // namespace vg
