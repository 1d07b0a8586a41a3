// The toys' render cache (data/toy_cache.h) and the fixed world (--toy-seed):
// a hit is the drawn records, a damaged file is drawn afresh with one line,
// an unwritable directory falls back to memory, two fillers at once leave one
// valid file, and the run's --seed never reaches the world.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "data/toy_cache.h"
#include "data/toys.h"
#include "harness/run_flags.h"
#include "test_util.h"

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::Outcome;

// Every test process (and each viewgap it starts) keeps its toys out of the
// user's cache, in its own scratch directory, removed when it exits.
const bool kCacheHomeSet = [] { return setenv("XDG_CACHE_HOME", (test::temp_dir() + "xdg_cache").c_str(), 1) == 0; }();

const ToyConfig kSmall{.instances = 1, .lightings = 1};
constexpr ToyCacheUse kAll{.train = true, .test = true, .validation = true};

std::string fresh(const std::string& name) {
  static int count = 0;
  return test::fresh_dir("toy_cache_" + name + std::to_string(count++));
}

std::vector<uint8_t> pairs_of(const NorbSet& s) {
  std::vector<uint8_t> out(size_t(s.size()) * kNorbPairBytes);
  for (int i = 0; i < s.size(); ++i) s.read_pair(i, out.data() + size_t(i) * kNorbPairBytes);
  return out;
}

void expect_same(const NorbData& a, const NorbData& b) {
  for (const auto& [x, y] : {std::pair{&a.train, &b.train}, {&a.test, &b.test}, {&a.validation, &b.validation}}) {
    ASSERT_EQ(x->size(), y->size());
    EXPECT_EQ(x->labels(), y->labels());
    EXPECT_TRUE(pairs_of(*x) == pairs_of(*y));
  }
}

int files_in(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(ToyCache, AHitIsTheRecordsDrawn) {
  ASSERT_TRUE(kCacheHomeSet);
  const std::string dir = fresh("hit");
  const NorbData drawn = toy_norb_data(kSmall);
  testing::internal::CaptureStderr();
  const NorbData filled = toy_world(kSmall, kAll, dir);
  expect_same(drawn, filled);
  const NorbData hit = toy_world(kSmall, kAll, dir);
  expect_same(drawn, hit);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // no warning on a healthy cache
  // One file a set, each of the size the format says; no temporary file left.
  EXPECT_EQ(files_in(dir), 3);
  const std::string key = toy_cache_key(kSmall);
  for (const char* part : {"training", "testing", "validation"})
    EXPECT_EQ(fs::file_size(toy_cache_file(dir, kSmall, part)), toy_cache_bytes(key, drawn.train.size())) << part;
  // A set the run does not read is not written.
  const std::string only = fresh("only");
  toy_world(kSmall, {.test = true}, only);
  EXPECT_EQ(files_in(only), 1);
  EXPECT_TRUE(fs::exists(toy_cache_file(only, kSmall, "testing")));
}

// Two worlds must never share a file: every ToyConfig field changes the key
// (toy_cache_key also names each field, so a new one does not compile unkeyed).
TEST(ToyCache, EveryFieldOfTheWorldChangesItsKey) {
  std::vector<ToyConfig> worlds(11, kSmall);
  worlds[1].instances = 2;
  worlds[2].lightings = 2;
  worlds[3].stereo_deg = 2.5;
  worlds[4].perspective = false;
  worlds[5].min_size = 0.8;
  worlds[6].scale = 1.5;
  worlds[7].variety = kSmall.variety == ToyVariety::wide ? ToyVariety::narrow : ToyVariety::wide;
  worlds[8].azimuth_step = 1;
  worlds[9].seed = 1;
  worlds[10].lights = kSmall.lights == ToyLights::rig ? ToyLights::mixed : ToyLights::rig;
  std::set<std::string> keys, files;
  for (const ToyConfig& w : worlds) keys.insert(toy_cache_key(w)), files.insert(toy_cache_file("d", w, "testing"));
  EXPECT_EQ(keys.size(), worlds.size());
  EXPECT_EQ(files.size(), worlds.size());
  EXPECT_NE(toy_cache_key(kSmall).find("generator " + std::to_string(kToyGeneratorVersion)), std::string::npos);
}

// Writes `bytes` at `offset` of `path` (or, offset < 0, cuts the file by -offset bytes).
void damage(const std::string& path, long offset, const std::string& bytes = "") {
  if (offset < 0) {
    fs::resize_file(path, fs::file_size(path) - uint64_t(-offset));
    return;
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// A damaged, truncated or foreign file is not trusted: the records are the
// drawn ones, the run says so in one line, and the file is made whole again
// (or, for a record found damaged while read, removed for the next run).
TEST(ToyCache, ADamagedTruncatedOrForeignFileIsDrawnAfreshWithOneLine) {
  const NorbData drawn = toy_norb_data(kSmall);
  const std::string key = toy_cache_key(kSmall);
  const uint64_t size = toy_cache_bytes(key, drawn.test.size());
  const long pixels = long(size) - long(drawn.test.size()) * kNorbPairBytes;  // where the pairs start
  struct Case {
    const char* what;
    std::function<void(const std::string& path)> harm;
    const char* said;
    bool rewritten;  // at open (else a record found bad when read: the file removed)
  };
  ToyConfig other = kSmall;
  other.seed = 1;
  const std::vector<Case> cases = {
      {"a pair's byte", [&](const std::string& p) { damage(p, pixels + 5000, "\x7f\x01"); }, "a record fails its checksum", false},
      {"truncated", [](const std::string& p) { damage(p, -1000); }, "truncated", true},
      {"cut to its magic", [](const std::string& p) { fs::resize_file(p, 8); }, "truncated", true},
      {"a CRC", [&](const std::string& p) { damage(p, 8 + 4 + long(key.size()) + 4 + 8, "\x55"); }, "header fails its checksum", true},
      {"foreign", [](const std::string& p) { damage(p, 0, "PK\x03\x04"); }, "not a toy cache file", true},
      {"another world's", [&](const std::string& p) {
         const std::string d = fresh("otherworld");
         toy_world(other, {.test = true}, d);
         fs::copy_file(toy_cache_file(d, other, "testing"), p, fs::copy_options::overwrite_existing);
       }, "another world's file", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string dir = fresh("damage");
    const std::string path = toy_cache_file(dir, kSmall, "testing");
    toy_world(kSmall, {.test = true}, dir);
    c.harm(path);
    testing::internal::CaptureStderr();
    const NorbData read = toy_world(kSmall, {.test = true}, dir);
    EXPECT_TRUE(pairs_of(read.test) == pairs_of(drawn.test));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(test::lines(err), 1) << err;
    EXPECT_NE(err.find(c.said), std::string::npos) << err;
    EXPECT_NE(err.find(path), std::string::npos) << err;
    if (c.rewritten) {
      EXPECT_EQ(fs::file_size(path), size);
      testing::internal::CaptureStderr();
      EXPECT_TRUE(pairs_of(toy_world(kSmall, {.test = true}, dir).test) == pairs_of(drawn.test));
      EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    } else {
      EXPECT_FALSE(fs::exists(path));
    }
  }
}

TEST(ToyCache, AnUnwritableDirectoryDrawsInMemoryWithOneLine) {
  const NorbData drawn = toy_norb_data(kSmall);
  // Under a plain file: no directory can be made there, even by root.
  const std::string file = fresh("unwritable") + "file";
  std::ofstream(file) << "x";
  testing::internal::CaptureStderr();
  const NorbData d = toy_world(kSmall, kAll, file + "/viewgap");
  const std::string err = testing::internal::GetCapturedStderr();
  expect_same(drawn, d);
  EXPECT_EQ(test::lines(err), 1) << err;
  EXPECT_NE(err.find("drawn in memory"), std::string::npos) << err;
  // A directory without write permission (root writes anyway).
  if (geteuid() != 0) {
    const std::string ro = fresh("readonly");
    ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
    testing::internal::CaptureStderr();
    expect_same(drawn, toy_world(kSmall, kAll, ro));
    const std::string e2 = testing::internal::GetCapturedStderr();
    EXPECT_EQ(test::lines(e2), 1) << e2;
    EXPECT_NE(e2.find("cannot write"), std::string::npos) << e2;
    EXPECT_EQ(files_in(ro), 0);
    ::chmod(ro.c_str(), 0755);
  }
}

// The bound: the least recently used sets go first to make room.
TEST(ToyCache, TheOldestSetsGoToMakeRoom) {
  const std::string dir = fresh("bound");
  ToyConfig w[3] = {kSmall, kSmall, kSmall};
  w[1].seed = 1, w[2].seed = 2;
  for (const ToyConfig& c : w) toy_world(c, {.test = true}, dir);
  const uint64_t one = fs::file_size(toy_cache_file(dir, w[0], "testing"));
  // World 0 used last: world 1 is the oldest.
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(toy_cache_file(dir, w[1], "testing"), now - std::chrono::hours(3));
  fs::last_write_time(toy_cache_file(dir, w[2], "testing"), now - std::chrono::hours(2));
  fs::last_write_time(toy_cache_file(dir, w[0], "testing"), now - std::chrono::hours(1));
  toy_cache_make_room(dir, one, "", 3 * one);  // room for one more: one goes
  EXPECT_FALSE(fs::exists(toy_cache_file(dir, w[1], "testing")));
  EXPECT_TRUE(fs::exists(toy_cache_file(dir, w[2], "testing")));
  EXPECT_TRUE(fs::exists(toy_cache_file(dir, w[0], "testing")));
  // A hit marks its set used: world 2 is now the oldest.
  toy_world(w[2], {.test = true}, dir);
  toy_cache_make_room(dir, 2 * one, "", 3 * one);
  EXPECT_FALSE(fs::exists(toy_cache_file(dir, w[0], "testing")));
  EXPECT_TRUE(fs::exists(toy_cache_file(dir, w[2], "testing")));
}

// ---- Through the binary.

std::string fingerprint_of(const Outcome& o) {
  const size_t at = o.out.find("fingerprint ");
  return at == std::string::npos ? "" : o.out.substr(at, 28);
}

// Two processes filling one cache at once leave one valid file a set, and
// both runs, and a run with --no-cache, are the same bits.
TEST(ToyCache, TwoFillersAtOnceLeaveOneValidFileAndTheSameRun) {
  const std::string home = fresh("concurrent");
  const std::string env = "XDG_CACHE_HOME=" + home;
  const std::string args = "run --data toys --toy-instances 1 --toy-lightings 1 --models nn1,linear --n-epochs 1";
  const std::string a = home + "a.out", b = home + "b.out";
  const std::string exe = vg::test::paths::exe;
  const std::string both = "(" + env + " " + exe + " " + args + " >" + a + " 2>&1 & " + env + " " + exe + " " + args +
                           " >" + b + " 2>&1 & wait)";
  ASSERT_EQ(std::system(both.c_str()), 0);
  const Outcome none = test::run(args + " --no-cache", env);
  ASSERT_EQ(none.code, 0) << none.err;
  const std::string fp = fingerprint_of(none);
  ASSERT_NE(fp, "");
  EXPECT_EQ(fingerprint_of({0, test::slurp(a), ""}), fp) << test::slurp(a);
  EXPECT_EQ(fingerprint_of({0, test::slurp(b), ""}), fp) << test::slurp(b);
  const std::string dir = home + "viewgap";
  EXPECT_EQ(files_in(dir), 2);  // training and testing; no temporary file
  testing::internal::CaptureStderr();
  expect_same(toy_norb_data(kSmall), toy_world(kSmall, {.train = true, .test = true}, dir));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // A hit is the same run again.
  const Outcome hit = test::run(args, env);
  EXPECT_EQ(fingerprint_of(hit), fp) << hit.err;
}

// The run's configuration of the world: --toy-seed picks it, --seed never does.
ToyConfig world_of(const std::string& seed, const std::string& toy_seed) {
  RunFlags f;
  f.data = "toys";
  f.seed = seed;
  *run_flag(f, "toy-instances") = "1";
  *run_flag(f, "toy-lightings") = "1";
  if (!toy_seed.empty()) *run_flag(f, "toy-seed") = toy_seed, f.typed.insert("toy-seed");
  int threads = 1;
  return *validate_run(f, &threads).data.norb->toys;
}

TEST(ToyCache, TheToySeedPicksTheWorldAndTheRunSeedDoesNot) {
  EXPECT_EQ(world_of("0", "").seed, 0u);
  EXPECT_EQ(world_of("7", "").seed, 0u);
  EXPECT_EQ(world_of("7", "3").seed, 3u);
  EXPECT_EQ(world_of("0", "9007199254740992").seed, 9007199254740992u);
  // Another world: other records; the same world under another --seed: the same.
  const auto first = [](const ToyConfig& c) {
    std::vector<uint8_t> p(kNorbPairBytes);
    toy_norb_data(c).test.read_pair(0, p.data());
    return p;
  };
  EXPECT_EQ(first(world_of("7", "")), first(world_of("0", "")));
  EXPECT_NE(first(world_of("0", "3")), first(world_of("0", "")));
}

TEST(ToyCache, BadToyFlagsAreOneLineNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run --data toys --toy-seed -1", "--toy-seed '-1'"},
      {"run --data toys --toy-seed 1.5", "--toy-seed '1.5'"},
      {"run --data toys --toy-seed 9007199254740993", "--toy-seed '9007199254740993'"},
      {"run --data toys --toy-seed x", "--toy-seed 'x'"},
      {"run --toy-seed 3", "--toy-seed '3'"},
      {"run --no-cache", "--no-cache"},
      {"run --data toys --no-cache=maybe", "--no-cache"},
  };
  for (const auto& [args, want] : cases) {
    const Outcome o = test::run(args + " --quiet");
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << args << "\n" << o.err;
    EXPECT_NE(o.err.find(want), std::string::npos) << args << "\n" << o.err;
  }
}

}  // namespace
}  // namespace vg
