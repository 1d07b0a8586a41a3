// Bad input a fair user meets, through the binary: each class is refused before
// any work, exit 2, one line naming the flag (or argument) and its value, and
// leaves nothing half-written. Also what the tools tell the user they wrote.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/norb.h"
#include "tests/test_util.h"

using vg::test::shim_env;

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::lines;
using test::Outcome;
using test::run;
using test::slurp;

// A refusal that waits on nothing: `timeout` turns a hang into a failure (124).
constexpr const char* kNoHang = "timeout 60";

std::string fresh_dir(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_bad_" + name + "." + std::to_string(getpid());
  fs::remove_all(d);
  return d;
}

void expect_refused(const Outcome& o, const std::string& mention) {
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find(mention), std::string::npos) << "wanted '" << mention << "' in: " << o.err;
}

// Records at each (azimuth index, elevation index), one lighting each.
std::vector<NorbInfo> views(const std::vector<std::pair<int, int>>& az_el) {
  std::vector<NorbInfo> v;
  for (const auto& [az, el] : az_el) v.push_back({0, el, az, 0});
  return v;
}

// Every smallNORB viewpoint (18 azimuths x 9 elevations).
std::vector<NorbInfo> every_view() {
  std::vector<std::pair<int, int>> az_el;
  for (int el = 0; el < kNorbElevations; ++el)
    for (int az = 0; az <= kNorbAzimuthMax; az += 2) az_el.push_back({az, el});
  return views(az_el);
}

// A smallNORB directory whose splits hold these records (black pairs, labels
// cycling through the classes).
std::string norb_dir(const std::string& name, const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test) {
  const std::string dir = fresh_dir(name);
  fs::create_directories(dir);
  for (const auto& [part, info] : {std::pair{NorbPart::training, &train}, std::pair{NorbPart::testing, &test}}) {
    std::vector<int32_t> labels(info->size());
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % kNorbClasses);
    const std::vector<uint8_t> pairs(info->size() * kNorbPairBytes, 0);
    norb_write_split(norb_files(dir, part), pairs, labels, *info);
  }
  return dir;
}

// ---- Non-regular input files: refused before they are read, not waited on.

TEST(BadInput, NorbFileThatIsAFifoIsRefusedNamingDataAndThePath) {
  const std::string dir = norb_dir("fifo", every_view(), every_view());
  const std::string dat = norb_files(dir, NorbPart::training).dat;
  fs::remove(dat);
  ASSERT_EQ(::mkfifo(dat.c_str(), 0600), 0);
  const std::string json = dir + "/run.json";
  for (const std::string& cmd : {"run --quiet --out-json " + json, "sweep --quiet --seeds 0 --out " + dir + "/sweep"}) {
    SCOPED_TRACE(cmd);
    expect_refused(run(cmd + " --data norb:" + dir, kNoHang), "--data 'norb:" + dir + "': " + dat + ": is a FIFO, not a regular file");
  }
  EXPECT_FALSE(fs::exists(json));
  EXPECT_FALSE(fs::exists(dir + "/sweep"));
  fs::remove_all(dir);
}

// smallNORB is served as .mat.gz: a user who has not unpacked it is told so.
TEST(BadInput, GzippedNorbFileSaysToGunzipIt) {
  const std::string dir = norb_dir("gz", every_view(), every_view());
  const std::string dat = norb_files(dir, NorbPart::training).dat;
  fs::rename(dat, dat + ".gz");
  expect_refused(run("run --quiet --data norb:" + dir), "--data 'norb:" + dir + "': " + dat + ": cannot open: No such file or directory, but " +
                                                           dat + ".gz is there: gunzip it (viewgap reads the uncompressed files)");
  fs::remove_all(dir);
}

// ---- Empty splits: a familiar or held-out set of nothing would be scored
// 0.000 ("0 held-out at azimuths ,"); refused naming --data and the split.

TEST(BadInput, NorbSplitThatLeavesASetEmptyIsRefused) {
  struct Case {
    std::string name;
    std::vector<NorbInfo> test;
    std::string split, what;
  };
  // Azimuth index 0 (0 deg) and elevation index 0 (30 deg) are training views
  // of both paper splits; 10 (100 deg) and 5 (55 deg) are held out.
  const Case cases[] = {
      {"heldout", views({{0, 0}, {2, 4}, {32, 8}}), "paper-azimuth", "every test image lies at the split's training viewpoints (azimuths 300..40 deg): the held-out set is empty"},
      {"familiar", views({{10, 0}, {12, 4}}), "paper-azimuth", "no test image lies at the split's training viewpoints (azimuths 300..40 deg): the familiar set is empty"},
      {"elev_heldout", views({{0, 0}, {10, 2}}), "paper-elevation", "every test image lies at the split's training viewpoints (elevations 30..40 deg): the held-out set is empty"},
      {"elev_familiar", views({{0, 5}, {10, 8}}), "paper-elevation", "no test image lies at the split's training viewpoints (elevations 30..40 deg): the familiar set is empty"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = norb_dir("empty_" + c.name, every_view(), c.test);
    const std::string mention = "--data 'norb:" + dir + "': " + dir + ": --split " + c.split + ": " + c.what;
    expect_refused(run("run --quiet --split " + c.split + " --data norb:" + dir + " --out-json " + dir + "/run.json"), mention);
    expect_refused(run("sweep --quiet --seeds 0 --split " + c.split + " --data norb:" + dir + " --out " + dir + "/sweep"), mention);
    EXPECT_FALSE(fs::exists(dir + "/run.json"));
    EXPECT_FALSE(fs::exists(dir + "/sweep"));
    fs::remove_all(dir);
  }
}

// ---- export-norb: the output is probed before any rendering, and a failed
// export leaves no part of a dataset behind.

// /proc is a directory root may write by its mode, but it takes no file: only
// creating one tells. (Not root: refused by the permission test.)
TEST(BadInput, ExportNorbProbesThatItsFilesCanBeCreatedBeforeRendering) {
  const Outcome o = run("export-norb /proc --instances 1 --lightings 1 --quiet");
  expect_refused(o, "DIR '/proc': ");
  if (::geteuid() == 0) {
    EXPECT_NE(o.err.find("cannot create a file in it"), std::string::npos) << o.err;
  }
}

TEST(BadInput, ExportNorbThatFailsMidwayRemovesWhatItWrote) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string shim = shim_env();
  const std::string args = " --instances 1 --lightings 1 --quiet";
  // The calls of a whole export; the disk then fills up at its last write (the
  // testing split's -dat), after five of the six files are in place.
  const std::string probe = fresh_dir("export_probe"), log = probe + ".log";
  fs::remove(log);
  ASSERT_EQ(run("export-norb " + probe + args, shim + " VIEWGAP_FAULT_LOG=" + log).code, 0);
  std::ifstream in(log);
  long n = 0, last_write = 0;
  std::string call;
  while (in >> n >> call)
    if (call == "write" || call == "pwrite" || call == "writev") last_write = n;
  ASSERT_GT(last_write, 0);
  const std::string dir = fresh_dir("export_full") + "/nested";
  const Outcome o = run("export-norb " + dir + args, shim + " VIEWGAP_FAULT_ENOSPC_AT=" + std::to_string(last_write));
  EXPECT_EQ(o.code, 1) << o.err;  // a full disk is not bad input
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("No space left on device"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir)) << "left behind: the directory it made";
  EXPECT_FALSE(fs::exists(fs::path(dir).parent_path())) << "left behind: the directory it made";
  fs::remove_all(probe);
  fs::remove(log);
}

// ---- tools/seed_table.py: with --seeds 3 the mean of seeds 0-2 is the mean of
// every seed, one row (it was printed twice).

#ifdef VIEWGAP_PYTHON_EXE
TEST(SeedTable, MeanOfTheSeedsThreeSeedsIsOneRow) {
  const std::string dir = fresh_dir("seed_table");
  fs::create_directories(dir);
  // A stand-in viewgap: writes a run JSON of caps and cnn where --out-json says.
  const std::string exe = dir + "/viewgap";
  std::ofstream(exe) << "#!/bin/sh\n"
                        "while [ $# -gt 0 ]; do [ \"$1\" = --out-json ] && out=$2; shift; done\n"
                        "echo '{\"meta\": {\"git_commit\": \"abc\"}, \"models\": ["
                        "{\"name\": \"caps\", \"familiar\": 0.9, \"heldout\": 0.7, \"drop\": 0.2},"
                        "{\"name\": \"cnn\", \"familiar\": 1.0, \"heldout\": 0.6, \"drop\": 0.4}]}' > \"$out\"\n";
  fs::permissions(exe, fs::perms::owner_all);
  for (int seeds : {3, 4}) {
    SCOPED_TRACE(seeds);
    const std::string cmd = std::string(VIEWGAP_PYTHON_EXE) + " " + VIEWGAP_SOURCE_DIR + "/tools/seed_table.py --seeds " +
                            std::to_string(seeds) + " --exe " + exe + " --out " + dir + " >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    const std::string md = slurp(dir + "/seed_table.md");
    auto count = [&](const std::string& s) {
      int k = 0;
      for (size_t at = md.find(s); at != std::string::npos; at = md.find(s, at + 1)) ++k;
      return k;
    };
    EXPECT_EQ(count("| **mean 0-2** |"), 1) << md;
    EXPECT_EQ(count("| **mean 0-3** |"), seeds == 4 ? 1 : 0) << md;
  }
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace vg
