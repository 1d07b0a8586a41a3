// smallNORB reader (data/norb.h): round trips, every validation error, the
// preprocessing, the paper's splits, and a deterministic mutation fuzz test.
#include "data/norb.h"
#include "data/grey_bytes.h"
#include "harness/cache_line.h"
#include "tests/test_util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <new>
#include <set>
#include <string>
#include <vector>

// The largest single allocation while a test is watching (this thread only),
// and every thread's count of allocations (vg::test::allocations_on_this_thread).
// A pass-through to malloc otherwise, so the other tests see no difference.
namespace {
thread_local bool g_watch = false;
thread_local size_t g_largest = 0;
thread_local size_t g_count = 0, g_count_onednn = 0;
thread_local bool g_attribute = false;
// Whether the caller of operator new is code in oneDNN's library.
__attribute__((noinline)) bool called_from_onednn(void* return_address) {
  Dl_info info;
  return dladdr(return_address, &info) && info.dli_fname && std::strstr(info.dli_fname, "libdnnl");
}
}  // namespace
vg::test::Allocations vg::test::allocations_on_this_thread() { return {g_count, g_count_onednn}; }
void vg::test::attribute_allocations(bool on) { g_attribute = on; }
void* operator new(std::size_t n) {
  ++g_count;
  if (g_attribute && called_from_onednn(__builtin_return_address(0))) ++g_count_onednn;
  if (g_watch && n > g_largest) g_largest = n;
  if (void* p = vg::cache_line_alloc(n)) return p;  // as viewgap's own operator new
  throw std::bad_alloc();
}
// Not inlined: GCC would otherwise see free() meet operator new (-Wmismatched-new-delete).
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// Every other form too, so no allocation meets a deallocator of another family
// (libstdc++'s temporary buffers use the nothrow new with the plain delete;
// ASan reports any mismatch).
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++g_count;
  if (g_attribute && called_from_onednn(__builtin_return_address(0))) ++g_count_onednn;
  if (g_watch && n > g_largest) g_largest = n;
  return vg::cache_line_alloc(n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using namespace vg;
using Bytes = std::vector<uint8_t>;

// ---- Fixture content: a pure function of the record index (same as tools/make_norb_fixture.py).
constexpr int kFull = 24300;
const int kTrainInstances[5] = {4, 6, 7, 8, 9};

uint8_t pixel(int i, int cam, int r, int c) { return uint8_t((31 * int64_t(i) + 101 * cam + 3 * r + 5 * c) % 256); }
void record(int i, const int* instances, int32_t& label, NorbInfo& info) {
  const int64_t j = (int64_t(i) * 7919) % kFull;
  label = int32_t(j / 4860);
  info = {instances[j / 972 % 5], int32_t(j / 108 % 9), int32_t(2 * (j / 6 % 18)), int32_t(j % 6)};
}

struct Split3 {
  Bytes pairs;
  std::vector<int32_t> labels;
  std::vector<NorbInfo> info;
};
Split3 make_split(int n) {
  Split3 s;
  s.pairs.resize(size_t(n) * kNorbPairBytes);
  s.labels.resize(size_t(n));
  s.info.resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    record(i, kTrainInstances, s.labels[size_t(i)], s.info[size_t(i)]);
    for (int cam = 0; cam < 2; ++cam)
      for (int r = 0; r < kNorbSide; ++r)
        for (int c = 0; c < kNorbSide; ++c)
          s.pairs[size_t(i) * kNorbPairBytes + size_t(cam) * kNorbImageBytes + size_t(r) * kNorbSide + size_t(c)] =
              pixel(i, cam, r, c);
  }
  return s;
}

struct Encoded {
  Bytes dat, cat, info;
};
Encoded encode(const Split3& s) {
  std::vector<int32_t> flat;
  for (const NorbInfo& r : s.info) flat.insert(flat.end(), {r.instance, r.elevation, r.azimuth, r.lighting});
  const int32_t n = int32_t(s.labels.size());
  const int32_t cd[] = {n}, id[] = {n, 4};
  return {norb_encode_pairs(s.pairs), norb_encode_ints(s.labels, cd), norb_encode_ints(flat, id)};
}

void put32(Bytes& b, size_t at, int64_t v) {
  for (int k = 0; k < 4; ++k) b[at + size_t(k)] = uint8_t(uint64_t(v) >> (8 * k));
}

std::string tmpdir(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_norb_" + name + "." + std::to_string(getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// The error message of parsing (dat, cat, info) in memory; "" if it loads.
std::string parse_error(const Encoded& e) {
  try {
    norb_parse_split(e.dat, e.cat, e.info, "fx");
  } catch (const NorbError& err) {
    return err.what();
  }
  return "";
}

// Expects one line starting with `file: ` and containing `what`.
void expect_error(const std::string& msg, const std::string& file, const std::string& what) {
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind(file + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << "wanted '" << what << "' in: " << msg;
}

// ---- Round trips.

// grey_byte is the byte the writers always stored, uint8_t(clamp(lround(v),
// 0, 255)): on a fine grid over the bytes' range and beyond, at and beside
// every half (where rounding half away from zero and the clamps decide), and on
// random floats of any size lround is defined for (|v| < 2^63).
TEST(Norb, GreyByteIsLroundClampedToAByte) {
  const auto reference = [](float v) { return uint8_t(std::clamp(std::lround(v), 0l, 255l)); };
  int checked = 0;
  const auto check = [&](float v) {
    ASSERT_EQ(int(grey_byte(v)), int(reference(v))) << "v = " << v;
    ++checked;
  };
  for (int k = -300 * 1024; k <= 300 * 1024; ++k) check(float(k) / 1024.f);
  for (int n = -3; n <= 260; ++n) {
    float up = float(n) + 0.5f, down = up;
    for (int ulp = 0; ulp < 16; ++ulp) {
      check(up), check(down);
      up = std::nextafter(up, INFINITY), down = std::nextafter(down, -INFINITY);
    }
  }
  Stream rng(0, Purpose::Noise, 0x6279, 0);
  for (int k = 0; k < 100000; ++k) {
    const float mag = std::ldexp(1.f, int(rng.uniform() * 60) - 20);
    check(float((rng.uniform() * 2 - 1) * mag));
  }
  for (float v : {0.f, -0.f, 0.49999997f, 0.5f, 254.5f, 255.49998f, 255.5f, -0.5f, -1.5f, 1e18f, -1e18f})
    check(v);
  EXPECT_GT(checked, 700000);
}

TEST(Norb, WrittenFilesHaveTheNyuLayout) {
  const Encoded e = encode(make_split(3));
  const uint8_t dat_head[] = {0x55, 0x4C, 0x3D, 0x1E, 4, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 96, 0, 0, 0, 96, 0, 0, 0};
  const uint8_t cat_head[] = {0x54, 0x4C, 0x3D, 0x1E, 1, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0};
  const uint8_t info_head[] = {0x54, 0x4C, 0x3D, 0x1E, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0};
  ASSERT_EQ(e.dat.size(), 24u + 3 * 2 * 96 * 96);
  ASSERT_EQ(e.cat.size(), 20u + 3 * 4);
  ASSERT_EQ(e.info.size(), 20u + 3 * 16);
  EXPECT_TRUE(std::equal(std::begin(dat_head), std::end(dat_head), e.dat.begin()));
  EXPECT_TRUE(std::equal(std::begin(cat_head), std::end(cat_head), e.cat.begin()));
  EXPECT_TRUE(std::equal(std::begin(info_head), std::end(info_head), e.info.begin()));
  EXPECT_EQ(e.dat[24 + 5], pixel(0, 0, 0, 5));
  EXPECT_EQ(e.dat[24 + kNorbImageBytes + 96], pixel(0, 1, 1, 0));  // camera-major, row-major
}

TEST(Norb, RoundTripThroughFiles) {
  const std::string dir = tmpdir("roundtrip");
  const Split3 train = make_split(7), test = make_split(4);
  norb_write_split(norb_files(dir, NorbPart::training), train.pairs, train.labels, train.info);
  norb_write_split(norb_files(dir, NorbPart::testing), test.pairs, test.labels, test.info);
  EXPECT_TRUE(std::filesystem::exists(dir + "/smallnorb-5x46789x9x18x6x2x96x96-training-dat.mat"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/smallnorb-5x01235x9x18x6x2x96x96-testing-info.mat"));
  const NorbData d = norb_load_dir(dir);
  for (const auto& [set, want] : {std::pair{&d.train, &train}, std::pair{&d.test, &test}}) {
    ASSERT_EQ(set->size(), int(want->labels.size()));
    EXPECT_EQ(set->labels(), want->labels);
    Bytes pair(kNorbPairBytes);
    for (int i = 0; i < set->size(); ++i) {
      const NorbInfo& a = set->info()[size_t(i)];
      const NorbInfo& b = want->info[size_t(i)];
      EXPECT_TRUE(a.instance == b.instance && a.elevation == b.elevation && a.azimuth == b.azimuth &&
                  a.lighting == b.lighting);
      set->read_pair(i, pair.data());
      EXPECT_EQ(0, std::memcmp(pair.data(), want->pairs.data() + size_t(i) * kNorbPairBytes, kNorbPairBytes));
    }
  }
  EXPECT_THROW(d.train.read_pair(7, std::vector<uint8_t>(kNorbPairBytes).data()), NorbError);
  std::filesystem::remove_all(dir);
}

TEST(Norb, ReadsTheFixtureScriptsFiles) {
  // An independent writer: tools/make_norb_fixture.py (numpy), checked byte by byte.
  const std::string tool = std::filesystem::path(__FILE__).parent_path().parent_path() / "tools/make_norb_fixture.py";
  if (access("/usr/bin/python3", X_OK) != 0 || !std::filesystem::exists(tool)) GTEST_SKIP() << "no python3 or tool";
  const std::string dir = tmpdir("script");
  ASSERT_EQ(0, std::system(("/usr/bin/python3 " + tool + " --out " + dir + " --n 9").c_str()));
  const NorbData d = norb_load_dir(dir);
  const int test_instances[5] = {0, 1, 2, 3, 5};
  for (const auto& [set, inst] : {std::pair{&d.train, kTrainInstances}, std::pair{&d.test, test_instances}}) {
    ASSERT_EQ(set->size(), 9);
    Bytes pair(kNorbPairBytes);
    for (int i = 0; i < 9; ++i) {
      int32_t label;
      NorbInfo info;
      record(i, inst, label, info);
      EXPECT_EQ(set->labels()[size_t(i)], label);
      EXPECT_EQ(set->info()[size_t(i)].instance, info.instance);
      EXPECT_EQ(set->info()[size_t(i)].azimuth, info.azimuth);
      EXPECT_EQ(set->info()[size_t(i)].elevation, info.elevation);
      EXPECT_EQ(set->info()[size_t(i)].lighting, info.lighting);
      set->read_pair(i, pair.data());
      for (int cam = 0; cam < 2; ++cam)
        for (int r = 0; r < 96; r += 7)
          for (int c = 0; c < 96; c += 5)
            ASSERT_EQ(pair[size_t(cam * kNorbImageBytes + r * 96 + c)], pixel(i, cam, r, c));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Norb, CatMayBeStoredAsNx1) {
  // The NYU readme calls -cat "24,300x1"; the files are rank 1. Both load.
  Encoded e = encode(make_split(2));
  const int32_t labels[] = {1, 4}, dims[] = {2, 1};
  e.cat = norb_encode_ints(labels, dims);
  EXPECT_EQ(parse_error(e), "");
}

// ---- Every validation error: one line, naming the file and the problem.

TEST(NorbErrors, BadMagic) {
  Encoded e = encode(make_split(2));
  put32(e.dat, 0, kNorbMagicInt);
  expect_error(parse_error(e), "fx-dat", "magic 0x1E3D4C54 (int32 matrix), expected 0x1E3D4C55 (uint8 byte matrix)");
  e = encode(make_split(2));
  put32(e.cat, 0, 0x554C3D1E);  // byte-swapped
  expect_error(parse_error(e), "fx-cat", "big-endian");
  e = encode(make_split(2));
  put32(e.info, 0, 0x12345678);
  expect_error(parse_error(e), "fx-info", "not a binary-matrix magic");
}

TEST(NorbErrors, WrongRank) {
  Encoded e = encode(make_split(2));
  put32(e.dat, 4, 3);
  expect_error(parse_error(e), "fx-dat", "rank 3, expected 4 (N x 2 x 96 x 96)");
  e = encode(make_split(2));
  put32(e.info, 4, -7);
  expect_error(parse_error(e), "fx-info", "rank -7, expected 2 (N x 4)");
  e = encode(make_split(2));
  put32(e.cat, 4, 3);
  expect_error(parse_error(e), "fx-cat", "rank 3, expected 1 (N)");
}

TEST(NorbErrors, WrongDimension) {
  Encoded e = encode(make_split(2));
  put32(e.dat, 16, 95);
  expect_error(parse_error(e), "fx-dat", "dimension 2 is 95, expected 96 (rows; dims 2 x 2 x 95 x 96)");
  e = encode(make_split(2));
  put32(e.dat, 12, 3);
  expect_error(parse_error(e), "fx-dat", "dimension 1 is 3, expected 2 (cameras");
  e = encode(make_split(2));
  put32(e.info, 12, 5);
  expect_error(parse_error(e), "fx-info", "dimension 1 is 5, expected 4");
  e = encode(make_split(2));
  put32(e.dat, 8, -1);
  expect_error(parse_error(e), "fx-dat", "dimension 0 is -1 (negative)");
  e = encode(make_split(2));
  put32(e.cat, 8, 0);
  expect_error(parse_error(e), "fx-cat", "N is 0");
}

TEST(NorbErrors, DimsDisagreeWithFileSize) {
  Encoded e = encode(make_split(2));
  put32(e.dat, 8, 3);  // claims one pair more than the file holds
  expect_error(parse_error(e), "fx-dat", "truncated: dims 3 x 2 x 96 x 96 need 55320 bytes, the file has 36888");
  e = encode(make_split(2));
  put32(e.info, 8, 1);
  expect_error(parse_error(e), "fx-info", "16 trailing bytes after the 1 x 4 data");
}

TEST(NorbErrors, TruncatedFile) {
  Encoded e = encode(make_split(2));
  e.dat.pop_back();
  expect_error(parse_error(e), "fx-dat", "truncated: dims 2 x 2 x 96 x 96 need 36888 bytes, the file has 36887");
  e = encode(make_split(2));
  e.dat.resize(17);
  expect_error(parse_error(e), "fx-dat", "truncated header: 17 bytes, a rank-4 header needs 24");
  e = encode(make_split(2));
  e.cat.resize(5);
  expect_error(parse_error(e), "fx-cat", "5 bytes, too short for the 8-byte magic and rank");
  e = encode(make_split(2));
  e.info.clear();
  expect_error(parse_error(e), "fx-info", "0 bytes");
}

TEST(NorbErrors, TrailingBytes) {
  Encoded e = encode(make_split(2));
  e.dat.push_back(0);
  expect_error(parse_error(e), "fx-dat", "1 trailing byte after the 2 x 2 x 96 x 96 data (file 36889 bytes, expected 36888)");
  e = encode(make_split(2));
  e.cat.insert(e.cat.end(), 8, 0);
  expect_error(parse_error(e), "fx-cat", "8 trailing bytes");
}

TEST(NorbErrors, NDiffersAcrossTheTriple) {
  Encoded e = encode(make_split(3));
  e.cat = encode(make_split(2)).cat;
  expect_error(parse_error(e), "fx-cat", "N = 2 but fx-dat has N = 3");
  e = encode(make_split(3));
  e.info = encode(make_split(4)).info;
  expect_error(parse_error(e), "fx-info", "N = 4 but fx-dat has N = 3");
}

TEST(NorbErrors, LabelOutOfRange) {
  for (int bad : {5, -1, std::numeric_limits<int32_t>::min()}) {
    Encoded e = encode(make_split(3));
    put32(e.cat, 20 + 4 * 2, bad);
    expect_error(parse_error(e), "fx-cat", "record 2: label " + std::to_string(bad) + " outside 0..4");
  }
}

TEST(NorbErrors, InfoOutOfRange) {
  const struct { int col, value; const char* what; } cases[] = {
      {0, 10, "instance 10 outside 0..9"}, {0, -1, "instance -1 outside 0..9"},
      {1, 9, "elevation 9 outside 0..8"},  {2, 36, "azimuth 36 outside 0..34"},
      {2, -2, "azimuth -2 outside 0..34"}, {3, 6, "lighting 6 outside 0..5"},
      {2, 3, "azimuth 3 is odd (must be 0, 2, .., 34)"}, {2, 35, "azimuth 35 outside 0..34"}};
  for (const auto& c : cases) {
    Encoded e = encode(make_split(3));
    put32(e.info, 20 + 16 * 1 + 4 * size_t(c.col), c.value);
    expect_error(parse_error(e), "fx-info", std::string("record 1: ") + c.what);
  }
}

TEST(NorbErrors, FilesOnDisk) {
  const std::string dir = tmpdir("errors");
  const NorbFiles f = norb_files(dir, NorbPart::training);
  try {
    norb_load_split(f);
    FAIL() << "loaded a missing file";
  } catch (const NorbError& err) {
    expect_error(err.what(), f.dat, "cannot open: No such file or directory");
  }
  const Split3 s = make_split(2);
  norb_write_split(f, s.pairs, s.labels, s.info);
  std::filesystem::remove(f.info);
  std::filesystem::create_directory(f.info);
  try {
    norb_load_split(f);
    FAIL() << "loaded a directory";
  } catch (const NorbError& err) {
    expect_error(err.what(), f.info, "not a regular file");
  }
  std::filesystem::remove(f.info);
  norb_write_split(f, s.pairs, s.labels, s.info);
  std::filesystem::resize_file(f.dat, 24 + kNorbPairBytes + 100);
  try {
    norb_load_split(f);
    FAIL() << "loaded a truncated file";
  } catch (const NorbError& err) {
    expect_error(err.what(), f.dat, "truncated: dims 2 x 2 x 96 x 96 need 36888 bytes, the file has 18556");
  }
  std::filesystem::remove_all(dir);
}

// A FIFO (or any file that is not a regular one) is refused before it is read:
// opened for reading, a FIFO would wait for a writer that never comes.
TEST(NorbErrors, FifoIsRefusedNotWaitedOn) {
  const std::string dir = tmpdir("fifo");
  const NorbFiles f = norb_files(dir, NorbPart::training);
  const Split3 s = make_split(2);
  norb_write_split(f, s.pairs, s.labels, s.info);
  std::filesystem::remove(f.cat);
  ASSERT_EQ(::mkfifo(f.cat.c_str(), 0600), 0);
  auto load = std::async(std::launch::async, [&] {
    try {
      norb_load_split(f);
    } catch (const NorbError& err) {
      return std::string(err.what());
    }
    return std::string("loaded");
  });
  if (load.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "waited 20 s on the FIFO";
    ::close(::open(f.cat.c_str(), O_WRONLY | O_NONBLOCK));  // a writer comes and goes: the reader's open returns
  }
  expect_error(load.get(), f.cat, "is a FIFO, not a regular file");
  std::filesystem::remove_all(dir);
}

// smallNORB is served gzipped: a file found only as .gz says to gunzip it.
TEST(NorbErrors, GzippedFileSaysToGunzipIt) {
  const std::string dir = tmpdir("gz");
  const NorbFiles f = norb_files(dir, NorbPart::testing);
  const Split3 s = make_split(2);
  norb_write_split(f, s.pairs, s.labels, s.info);
  std::filesystem::rename(f.info, f.info + ".gz");  // the name is what matters, not the bytes
  try {
    norb_load_split(f);
    FAIL() << "loaded without -info";
  } catch (const NorbError& err) {
    expect_error(err.what(), f.info, "cannot open: No such file or directory, but " + f.info + ".gz is there: gunzip it");
  }
  std::filesystem::remove_all(dir);
}

// A header claiming 2^40 elements (59,652,324 pairs of 18,432 bytes) must be
// refused from the file size alone, before anything near that is allocated.
TEST(NorbErrors, HugeHeaderRefusedBeforeAllocation) {
  Encoded e = encode(make_split(1));
  put32(e.dat, 8, 59652324);
  put32(e.cat, 8, 59652324);
  put32(e.info, 8, 59652324);
  g_largest = 0;
  g_watch = true;
  const std::string msg = parse_error(e);
  g_watch = false;
  expect_error(msg, "fx-dat", "truncated: dims 59652324 x 2 x 96 x 96 need 1099511635992 bytes");
  EXPECT_LT(g_largest, 4096u) << "largest allocation while refusing";
  // The same on disk (the reader sees the size with fstat, reads 24 bytes).
  const std::string dir = tmpdir("huge");
  const NorbFiles f = norb_files(dir, NorbPart::testing);
  write_bytes(f.dat, e.dat);
  write_bytes(f.cat, e.cat);
  write_bytes(f.info, e.info);
  g_largest = 0;
  g_watch = true;
  EXPECT_THROW(norb_load_split(f), NorbError);
  g_watch = false;
  EXPECT_LT(g_largest, 4096u);
  std::filesystem::remove_all(dir);
}

// ---- Fuzzing: seeded mutations of a valid triple; every input ends in a valid
// set or a NorbError, and no allocation exceeds what the inputs' sizes imply.

struct FuzzOutcome {
  int loaded = 0, refused = 0;
  std::set<std::string> kinds;  // distinct refusals, numbers and file names stripped
};

std::string error_kind(const std::string& msg) {
  const std::string m = msg.substr(msg.find(": ") + 2);
  std::string k;
  for (size_t i = 0; i < m.size();) {
    const bool hex = m.compare(i, 2, "0x") == 0;
    if (hex || std::isdigit(static_cast<unsigned char>(m[i])) || (m[i] == '-' && i + 1 < m.size() && std::isdigit(static_cast<unsigned char>(m[i + 1])))) {
      i += hex ? 2 : 1;
      while (i < m.size() && std::isxdigit(static_cast<unsigned char>(m[i]))) ++i;
      k += '#';
    } else {
      k += m[i++];
    }
  }
  return k;
}

void mutate(Bytes& b, Stream& rng, int n_records) {
  const int32_t interesting[] = {0, 1, -1, 2, 3, 4, 5, 96, 97, 1 << 30, std::numeric_limits<int32_t>::max(),
                                 std::numeric_limits<int32_t>::min(), 59652324, n_records - 1, n_records + 1,
                                 int32_t(kNorbMagicByte), int32_t(kNorbMagicInt)};
  switch (rng.below(7)) {
    case 0:  // flip a header byte
      if (!b.empty()) b[rng.below(uint32_t(std::min<size_t>(b.size(), 28)))] ^= uint8_t(1u << rng.below(8));
      break;
    case 1:  // flip any byte
      if (!b.empty()) b[rng.below(uint32_t(b.size()))] ^= uint8_t(1u + rng.below(255));
      break;
    case 2:  // a header field set to an edge value
      if (b.size() >= 24) put32(b, 4 * rng.below(6), interesting[rng.below(std::size(interesting))]);
      break;
    case 3:  // truncate
      b.resize(rng.below(uint32_t(b.size() + 1)));
      break;
    case 4:  // extend
      b.resize(b.size() + 1 + rng.below(64), uint8_t(rng.next_u32()));
      break;
    case 5:  // an int32 in the data region set to anything
      if (b.size() >= 28) put32(b, 20 + 4 * rng.below(uint32_t((b.size() - 20) / 4)), int32_t(rng.next_u32() % 64) - 16);
      break;
    case 6:  // a random 32-bit word anywhere aligned
      if (b.size() >= 4) put32(b, 4 * rng.below(uint32_t(b.size() / 4)), int32_t(rng.next_u32()));
      break;
  }
}

void check_loaded(const NorbSet& s) {
  ASSERT_GT(s.size(), 0);
  ASSERT_EQ(s.labels().size(), s.info().size());
  Bytes pair(kNorbPairBytes);
  for (int i = 0; i < s.size(); ++i) {
    const int32_t l = s.labels()[size_t(i)];
    const NorbInfo& r = s.info()[size_t(i)];
    ASSERT_TRUE(l >= 0 && l < 5);
    ASSERT_TRUE(r.instance >= 0 && r.instance < 10 && r.elevation >= 0 && r.elevation < 9 && r.azimuth >= 0 &&
                r.azimuth <= 34 && r.azimuth % 2 == 0 && r.lighting >= 0 && r.lighting < 6);
    s.read_pair(i, pair.data());
  }
}

FuzzOutcome fuzz_memory(int iterations, uint64_t seed) {
  const int n = 3;
  const Encoded base = encode(make_split(n));
  FuzzOutcome out;
  for (int it = 0; it < iterations; ++it) {
    Stream rng(seed, Purpose::Test, 0xF022, uint64_t(it));
    Encoded e = base;
    const int n_mut = 1 + int(rng.below(3));
    for (int m = 0; m < n_mut; ++m) {
      const uint32_t which = rng.below(10);  // the small files' headers and data matter most
      mutate(which < 4 ? e.dat : which < 7 ? e.cat : e.info, rng, n);
    }
    const size_t input = e.dat.size() + e.cat.size() + e.info.size();
    g_largest = 0;
    g_watch = true;
    try {
      const NorbSet s = norb_parse_split(e.dat, e.cat, e.info, "fuzz");
      g_watch = false;
      check_loaded(s);
      ++out.loaded;
    } catch (const NorbError& err) {
      g_watch = false;
      EXPECT_EQ(std::string(err.what()).find('\n'), std::string::npos);
      out.kinds.insert(error_kind(err.what()));
      ++out.refused;
    }
    EXPECT_LE(g_largest, input + 1024) << "iteration " << it;
    if (testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing iteration " << it;
      break;
    }
  }
  return out;
}

TEST(NorbFuzz, MutatedBuffersLoadOrRefuse) {
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kMutations = 200000;
  const FuzzOutcome o = fuzz_memory(kMutations, 13);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ fuzz ] %d mutated triples: %d loaded, %d refused (%zu distinct errors), 0 crashes, %.1f s\n",
              kMutations, o.loaded, o.refused, o.kinds.size(), s);
  EXPECT_EQ(o.loaded + o.refused, kMutations);
  EXPECT_GT(o.loaded, kMutations / 20);  // pixel flips leave the triple valid
  EXPECT_GT(o.refused, kMutations / 2);
  EXPECT_GE(o.kinds.size(), 20u);  // the mutations reach most of the checks
}

TEST(NorbFuzz, MutatedFilesLoadOrRefuse) {
  const std::string dir = tmpdir("fuzzfiles");
  const Encoded base = encode(make_split(2));
  const NorbFiles f = norb_files(dir, NorbPart::training);
  int loaded = 0, refused = 0;
  for (int it = 0; it < 400; ++it) {
    Stream rng(7, Purpose::Test, 0xF11E, uint64_t(it));
    Encoded e = base;
    mutate(rng.below(2) ? e.dat : rng.below(2) ? e.cat : e.info, rng, 2);
    write_bytes(f.dat, e.dat);
    write_bytes(f.cat, e.cat);
    write_bytes(f.info, e.info);
    try {
      check_loaded(norb_load_split(f));
      ++loaded;
    } catch (const NorbError&) {
      ++refused;
    }
    if (testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(loaded + refused, 400);
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
  std::filesystem::remove_all(dir);
}

// ---- Preprocessing.

TEST(NorbPrep, DownsampleIsTheMeanOfEach2x2Block) {
  Bytes img(kNorbImageBytes);
  for (int r = 0; r < 96; ++r)
    for (int c = 0; c < 96; ++c) img[size_t(r * 96 + c)] = uint8_t((r / 2 * 7 + c / 2 * 3) % 256);
  std::vector<float> half(48 * 48);
  norb_downsample(img.data(), half.data());
  for (int r = 0; r < 48; ++r)
    for (int c = 0; c < 48; ++c) ASSERT_EQ(half[size_t(r * 48 + c)], float((r * 7 + c * 3) % 256 * 4) / 1020.f);
  // One block of 0, 1, 2, 3 -> 1.5 / 255; all 255 -> exactly 1.
  std::fill(img.begin(), img.end(), 255);
  img[0] = 0; img[1] = 1; img[96] = 2; img[97] = 3;
  norb_downsample(img.data(), half.data());
  EXPECT_FLOAT_EQ(half[0], 1.5f / 255.f);
  EXPECT_EQ(half[1], 1.0f);
  EXPECT_EQ(half[48 * 48 - 1], 1.0f);
}

// A pair whose downsampled value encodes the camera and the 48x48 position.
Bytes position_pair() {
  Bytes pair(kNorbPairBytes);
  for (int cam = 0; cam < 2; ++cam)
    for (int r = 0; r < 96; ++r)
      for (int c = 0; c < 96; ++c) pair[size_t(cam * kNorbImageBytes + r * 96 + c)] = uint8_t(cam * 100 + (r / 2) * 2 + (c / 2) % 2);
  return pair;
}
float half_value(int cam, int r, int c) { return float((cam * 100 + r * 2 + c % 2) * 4) / 1020.f; }

TEST(NorbPrep, CentreCropOfBothCamerasOrOne) {
  const Bytes pair = position_pair();
  std::vector<float> out(2 * kNorbCropPixels);
  norb_eval_sample(pair.data(), NorbPrep{}, out.data());
  for (int ch = 0; ch < 2; ++ch)
    for (int r = 0; r < 32; ++r)
      for (int c = 0; c < 32; ++c)
        ASSERT_EQ(out[size_t(ch * kNorbCropPixels + r * 32 + c)], half_value(ch, r + 8, c + 8)) << ch << " " << r << " " << c;
  std::vector<float> one(kNorbCropPixels);
  norb_eval_sample(pair.data(), NorbPrep{NorbCameras::second}, one.data());
  EXPECT_TRUE(std::equal(one.begin(), one.end(), out.begin() + kNorbCropPixels));
  norb_eval_sample(pair.data(), NorbPrep{NorbCameras::first}, one.data());
  EXPECT_TRUE(std::equal(one.begin(), one.end(), out.begin()));
  for (float v : out) EXPECT_TRUE(v >= 0.f && v <= 1.f);
}

TEST(NorbPrep, RandomCropsAreSeededReproducibleAndCoverEveryOffset) {
  const Bytes pair = position_pair();
  std::vector<float> a(2 * kNorbCropPixels), b(a.size());
  std::set<int> rows, cols;
  int differ_by_epoch = 0;
  for (int i = 0; i < 600; ++i) {
    Stream s1 = norb_augment_stream(42, 3, uint64_t(i)), s2 = norb_augment_stream(42, 3, uint64_t(i));
    norb_train_sample(pair.data(), NorbPrep{}, s1, a.data());
    norb_train_sample(pair.data(), NorbPrep{}, s2, b.data());
    ASSERT_EQ(a, b);
    // The offsets are the stream's first two draws below 17.
    Stream s3 = norb_augment_stream(42, 3, uint64_t(i));
    const int r0 = int(s3.below(17)), c0 = int(s3.below(17));
    rows.insert(r0);
    cols.insert(c0);
    ASSERT_EQ(a[0], half_value(0, r0, c0));
    ASSERT_EQ(a[kNorbCropPixels + 31 * 32 + 31], half_value(1, r0 + 31, c0 + 31));
    Stream s4 = norb_augment_stream(42, 4, uint64_t(i));
    norb_train_sample(pair.data(), NorbPrep{}, s4, b.data());
    differ_by_epoch += a != b;
  }
  EXPECT_EQ(rows.size(), 17u);
  EXPECT_EQ(cols.size(), 17u);
  EXPECT_EQ(*rows.rbegin(), 16);
  EXPECT_GT(differ_by_epoch, 500);
}

// --standardize on: each sample, both channels together, at mean 0 and
// standard deviation 1 (TF's per_image_standardization); a flat crop, whose
// deviation is 0, is divided by 1 / sqrt(N) instead, so it stays finite.
TEST(NorbPrep, StandardizeGivesMeanZeroAndUnitDeviation) {
  std::vector<uint8_t> pair(kNorbPairBytes);
  vg::Stream s(3, vg::Purpose::Test, 0x57);
  for (auto& p : pair) p = uint8_t(s.next_u32());
  for (const NorbCameras cams : {NorbCameras::both, NorbCameras::first}) {
    const int ch = norb_channels(cams), n = ch * kNorbCropPixels;
    std::vector<float> raw(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    norb_eval_sample(pair.data(), NorbPrep{cams}, raw.data());
    NorbPrep on{cams};
    on.standardize = true;
    norb_eval_sample(pair.data(), on, x.data());
    double mean = 0, var = 0, raw_mean = 0;
    for (int p = 0; p < n; ++p) mean += x[size_t(p)] / double(n), raw_mean += raw[size_t(p)] / double(n);
    for (int p = 0; p < n; ++p) var += (x[size_t(p)] - mean) * (x[size_t(p)] - mean) / n;
    EXPECT_NEAR(mean, 0, 1e-6);
    EXPECT_NEAR(var, 1, 1e-5);
    // The same picture: an affine map of the raw crop with a positive slope.
    const double slope = (x[0] - x[1]) / (raw[0] - raw[1]);
    EXPECT_GT(slope, 0);
    for (int p = 0; p < n; p += 97) EXPECT_NEAR(x[size_t(p)], (raw[size_t(p)] - raw_mean) * slope, 1e-4);
  }
  std::vector<uint8_t> flat(kNorbPairBytes, 77);
  std::vector<float> x(2 * kNorbCropPixels);
  NorbPrep on;
  on.standardize = true;
  norb_eval_sample(flat.data(), on, x.data());
  for (float v : x) EXPECT_EQ(v, 0.f);
}

TEST(NorbPrep, JitterStaysWithinItsBounds) {
  // Mid-grey with a faint checkerboard: no clipping, so brightness and contrast show exactly.
  Bytes pair(kNorbPairBytes);
  for (int k = 0; k < kNorbPairBytes; ++k) pair[size_t(k)] = uint8_t((k / 2 + k / 192) % 2 ? 140 : 116);
  const NorbPrep prep{NorbCameras::both, 0.2f, 0.3f};
  std::vector<float> plain(2 * kNorbCropPixels), out(plain.size());
  float lo_b = 1, hi_b = -1, lo_c = 9, hi_c = 0;
  for (int i = 0; i < 2000; ++i) {
    Stream s = norb_augment_stream(1, 0, uint64_t(i)), t = s;
    norb_train_sample(pair.data(), NorbPrep{}, t, plain.data());
    norb_train_sample(pair.data(), prep, s, out.data());
    for (int ch = 0; ch < 2; ++ch) {
      double m0 = 0, m1 = 0, v0 = 0, v1 = 0;
      for (int p = 0; p < kNorbCropPixels; ++p) {
        const float x = plain[size_t(ch * kNorbCropPixels + p)], y = out[size_t(ch * kNorbCropPixels + p)];
        ASSERT_TRUE(y >= 0.f && y <= 1.f);
        m0 += x; m1 += y; v0 += x * x; v1 += y * y;
      }
      m0 /= kNorbCropPixels; m1 /= kNorbCropPixels;
      const double sd0 = std::sqrt(v0 / kNorbCropPixels - m0 * m0), sd1 = std::sqrt(v1 / kNorbCropPixels - m1 * m1);
      lo_b = std::min(lo_b, float(m1 - m0)); hi_b = std::max(hi_b, float(m1 - m0));
      lo_c = std::min(lo_c, float(sd1 / sd0)); hi_c = std::max(hi_c, float(sd1 / sd0));
    }
  }
  EXPECT_GE(lo_b, -0.2f - 1e-4f);
  EXPECT_LE(hi_b, 0.2f + 1e-4f);
  EXPECT_LT(lo_b, -0.18f);  // and the whole range is used
  EXPECT_GT(hi_b, 0.18f);
  EXPECT_GE(lo_c, 0.7f - 1e-3f);
  EXPECT_LE(hi_c, 1.3f + 1e-3f);
  EXPECT_LT(lo_c, 0.73f);
  EXPECT_GT(hi_c, 1.27f);
}

TEST(NorbPrep, BatchesDependOnlyOnSeedEpochAndIndex) {
  const Split3 s = make_split(6);
  const Encoded e = encode(s);
  const NorbSet set = norb_parse_split(e.dat, e.cat, e.info, "b");
  NorbBatcher batcher(set, NorbPrep{NorbCameras::both, 0.1f, 0.1f});
  ASSERT_EQ(batcher.channels(), 2);
  const int big[] = {5, 2, 0}, small[] = {2};
  std::vector<float> x(3 * 2 * kNorbCropPixels), y(2 * kNorbCropPixels);
  batcher.train_batch(big, 3, 9, 1, x.data());
  batcher.train_batch(small, 1, 9, 1, y.data());
  EXPECT_TRUE(std::equal(y.begin(), y.end(), x.begin() + 2 * kNorbCropPixels));
  batcher.eval_batch(big, 3, x.data());
  norb_eval_sample(s.pairs.data() + 0 * kNorbPairBytes, NorbPrep{}, y.data());
  EXPECT_TRUE(std::equal(y.begin(), y.end(), x.begin() + 2 * 2 * kNorbCropPixels));
}

// ---- Splits.

std::vector<NorbInfo> every_viewpoint() {
  std::vector<NorbInfo> v;
  for (int e = 0; e < 9; ++e)
    for (int a = 0; a <= 34; a += 2) v.push_back({0, e, a, e % 6});
  return v;
}

std::set<int> values(const std::vector<NorbInfo>& info, const std::vector<int>& idx, int NorbInfo::*field) {
  std::set<int> s;
  for (int i : idx) s.insert(info[size_t(i)].*field);
  return s;
}

TEST(NorbSplits, PaperAzimuth) {
  const std::vector<NorbInfo> train = every_viewpoint(), test = every_viewpoint();
  const NorbSplit s = norb_split_azimuth(train, test);
  EXPECT_EQ(s.train.size(), 9u * 6);
  EXPECT_EQ(s.familiar.size(), 9u * 6);
  EXPECT_EQ(s.novel.size(), 9u * 12);
  std::set<int> train_deg, novel_deg;
  for (int a : values(train, s.train, &NorbInfo::azimuth)) train_deg.insert(int(norb_azimuth_deg(a)));
  for (int a : values(test, s.novel, &NorbInfo::azimuth)) novel_deg.insert(int(norb_azimuth_deg(a)));
  EXPECT_EQ(train_deg, (std::set<int>{0, 20, 40, 300, 320, 340}));
  EXPECT_EQ(values(test, s.familiar, &NorbInfo::azimuth), values(train, s.train, &NorbInfo::azimuth));
  EXPECT_EQ(*novel_deg.begin(), 60);
  EXPECT_EQ(*novel_deg.rbegin(), 280);
  EXPECT_EQ(novel_deg.size(), 12u);
  EXPECT_EQ(values(train, s.train, &NorbInfo::elevation).size(), 9u);  // every elevation
}

TEST(NorbSplits, PaperElevation) {
  const std::vector<NorbInfo> train = every_viewpoint(), test = every_viewpoint();
  const NorbSplit s = norb_split_elevation(train, test);
  EXPECT_EQ(s.train.size(), 3u * 18);
  EXPECT_EQ(s.familiar.size(), 3u * 18);
  EXPECT_EQ(s.novel.size(), 6u * 18);
  EXPECT_EQ(values(train, s.train, &NorbInfo::elevation), (std::set<int>{0, 1, 2}));
  EXPECT_EQ(values(test, s.novel, &NorbInfo::elevation), (std::set<int>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(norb_elevation_deg(2), 40.0);
  EXPECT_EQ(norb_elevation_deg(3), 45.0);
  EXPECT_EQ(values(train, s.train, &NorbInfo::azimuth).size(), 18u);
}

TEST(NorbSplits, FullAndPartition) {
  const std::vector<NorbInfo> train = every_viewpoint();
  std::vector<NorbInfo> test = every_viewpoint();
  test.resize(50);
  const NorbSplit full = norb_split_full(train, test);
  EXPECT_EQ(full.train.size(), train.size());
  EXPECT_EQ(full.familiar.size(), 50u);
  EXPECT_TRUE(full.novel.empty());
  for (const NorbSplit& s : {norb_split_azimuth(train, test), norb_split_elevation(train, test)}) {
    std::vector<int> all = s.familiar;
    all.insert(all.end(), s.novel.begin(), s.novel.end());
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 50u);  // familiar and novel partition the test set
    for (int i = 0; i < 50; ++i) EXPECT_EQ(all[size_t(i)], i);
  }
}

// A set of the given records (pixels as make_split's).
NorbSet set_at(const std::vector<NorbInfo>& info) {
  Split3 s = make_split(int(info.size()));
  s.info = info;
  const Encoded e = encode(s);
  return norb_parse_split(e.dat, e.cat, e.info, "fx");
}

// A split that leaves its training, familiar or held-out set empty is refused,
// naming the split, rather than scored 0.000 on nothing; `full` holds nothing out.
TEST(NorbSplits, EmptySetsAreRefusedNamingTheSplit) {
  auto at = [](int azimuth, int elevation) {
    return std::vector<NorbInfo>{{0, elevation, azimuth, 0}, {0, elevation, azimuth, 1}};
  };
  const std::vector<NorbInfo> every = every_viewpoint();
  struct Case {
    std::vector<NorbInfo> train, test;
    NorbSplitKind kind;
    std::string what;
  };
  const Case cases[] = {
      {at(10, 0), every, NorbSplitKind::azimuth,  // azimuth 100 deg: no training view
       "--split paper-azimuth: no training image lies at the split's training viewpoints (azimuths 300..40 deg): "
       "the training set is empty"},
      {every, at(0, 0), NorbSplitKind::azimuth,
       "--split paper-azimuth: every test image lies at the split's training viewpoints (azimuths 300..40 deg): "
       "the held-out set is empty"},
      {every, at(10, 0), NorbSplitKind::azimuth, "--split paper-azimuth: no test image lies at the split's training "
                                                 "viewpoints (azimuths 300..40 deg): the familiar set is empty"},
      {every, at(0, 1), NorbSplitKind::elevation, "--split paper-elevation: every test image lies at the split's "
                                                  "training viewpoints (elevations 30..40 deg): the held-out set is empty"},
      {every, at(0, 5), NorbSplitKind::elevation, "--split paper-elevation: no test image lies at the split's training "
                                                  "viewpoints (elevations 30..40 deg): the familiar set is empty"},
  };
  for (const Case& c : cases) {
    const NorbData d{set_at(c.train), set_at(c.test), {}};
    try {
      norb_split_of(d, c.kind, "DIR");
      ADD_FAILURE() << "accepted: " << c.what;
    } catch (const NorbError& err) {
      expect_error(err.what(), "DIR", c.what);
    }
  }
  const NorbSplit full = norb_split_of(NorbData{set_at(every), set_at(at(0, 0)), {}}, NorbSplitKind::full, "DIR");
  EXPECT_EQ(full.familiar.size(), 2u);
  EXPECT_TRUE(full.novel.empty());
}

// ---- Full size (24,300 pairs per split): set VIEWGAP_NORB_DIR to a directory
// of the six files (tools/make_norb_fixture.py --full, or the real ones).
// Loads both splits and preprocesses every pair once; measure with /usr/bin/time -v.
TEST(NorbFullSize, LoadAndOneEpochOfBatches) {
  const char* dir = std::getenv("VIEWGAP_NORB_DIR");
  if (!dir) GTEST_SKIP() << "VIEWGAP_NORB_DIR not set";
  const auto t0 = std::chrono::steady_clock::now();
  const NorbData d = norb_load_dir(dir);
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_EQ(d.train.size(), kNorbPerSplit);
  ASSERT_EQ(d.test.size(), kNorbPerSplit);
  const NorbSplit split = norb_split_azimuth(d.train.info(), d.test.info());
  NorbBatcher train(d.train, NorbPrep{NorbCameras::both, 0.2f, 0.3f}), test(d.test, NorbPrep{});
  std::vector<float> batch(32 * 2 * kNorbCropPixels);
  double checksum = 0;
  std::vector<int> all(kNorbPerSplit);
  for (int i = 0; i < kNorbPerSplit; ++i) all[size_t(i)] = (int64_t(i) * 7919) % kNorbPerSplit;
  for (int b = 0; b < kNorbPerSplit; b += 32) {
    const int n = std::min(32, kNorbPerSplit - b);
    train.train_batch(all.data() + b, n, 0, 0, batch.data());
    checksum += batch[0];
    test.eval_batch(all.data() + b, n, batch.data());
    checksum += batch[1];
  }
  const auto t2 = std::chrono::steady_clock::now();
  std::printf("[ norb ] load %.3f s; one pass over 2 x 24300 pairs %.2f s; azimuth split %zu/%zu/%zu; checksum %.3f\n",
              std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
              split.train.size(), split.familiar.size(), split.novel.size(), checksum);
}

}  // namespace
