// libFuzzer target for the smallNORB reader (data/norb.h): every input must
// end in a NorbError or in a set that holds exactly what the files say.
// Built and run by tools/fuzz.sh norb (clang++-14 -fsanitize=fuzzer,address,undefined).
//
// One input is the three files of a split:
//   bytes 0..3   len_cat   (uint32, little-endian)
//   bytes 4..7   len_info  (uint32, little-endian)
//   bytes 8..11  dat_delta (int32, little-endian)
//   then len_cat bytes of -cat, len_info bytes of -info, and the rest begins
//   -dat: those bytes, then fill bytes (fill_byte(k) at -dat offset k) up to
//   claimed + dat_delta bytes in all, where claimed = 24 + the product of the
//   four int32 at -dat bytes 8..23 (negative or missing ones count 0); the
//   fill is 0 bytes at least and kMaxFill (8 pairs, 147,456) at most.
// Lengths past the end are clamped (an input shorter than 12 bytes is three
// empty files), so every input is some triple. Why the fill: pixels are 99.5 %
// of a valid triple and the reader only copies them, so with every pixel in
// the input almost every mutation would land in them. With the fill the seeds
// are ~150 bytes and mutations land in headers and records. Sizing it from the
// -dat header lets one mutation of N there give a -dat that agrees with itself
// but not with -cat and -info; dat_delta reaches the truncated and trailing
// sizes. The fill is a hash of the offset, so a pair read from the wrong place
// cannot match. Each file is copied to its own exact-size heap block, so ASan
// sees a read past the end of any one of them.
//
// A finding is: a sanitizer report; any exception other than NorbError; a
// NorbError whose message is not one line naming the file; a loaded set whose
// labels, info or pixels differ from the file bytes or break a range the
// reader promises; or one allocation larger than the three files together plus
// 1 KiB while the reader runs (it validates dims against the file sizes before
// allocating; a set holds a copy of the pixels, so that is its floor).
//
// `norb_fuzz --write-seeds=DIR` writes the seed corpus instead of fuzzing:
// valid triples from the project's writer (norb_encode_pairs/_ints), N = 1, 2, 5,
// with -cat as rank 1 (N) and rank 2 (N x 1), each checked to expand to exactly
// the writer's bytes. libFuzzer ignores flags that start with "--", so the flag
// reaches LLVMFuzzerInitialize only.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/norb.h"
#include "fuzz/fuzz_common.h"

namespace {

using namespace vg;
using Bytes = std::vector<uint8_t>;

constexpr size_t kAllocSlack = 1024;  // names, error strings, control blocks

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "norb_fuzz: FINDING: %s\n", what);
  std::abort();
}

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void put_le32(Bytes& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(uint8_t(v >> (8 * k)));
}

constexpr size_t kInputHeader = 12;
constexpr size_t kMaxFill = 8 * size_t(kNorbPairBytes);  // room for N up to 8
constexpr size_t kSeedDatKept = 24 + 8;                  // -dat header and a few pixels

uint8_t fill_byte(size_t offset) { return uint8_t((uint32_t(offset) * 2654435761u) >> 24); }
// fill_byte of every offset a default-length input reaches, computed once.
const Bytes& fill_table() {
  static const Bytes t = [] {
    Bytes b(kMaxFill + 4096);
    for (size_t k = 0; k < b.size(); ++k) b[k] = fill_byte(k);
    return b;
  }();
  return t;
}

// What a -dat header claims the file's size is (saturating; see the top).
uint64_t dat_claimed(std::span<const uint8_t> dat) {
  uint64_t bytes = 1;
  for (size_t k = 0; k < 4; ++k) {
    const int32_t d = 8 + 4 * k + 4 <= dat.size() ? int32_t(le32(dat.data() + 8 + 4 * k)) : 0;
    if (__builtin_mul_overflow(bytes, uint64_t(std::max(d, 0)), &bytes)) bytes = UINT64_MAX / 2;
  }
  return 24 + bytes;
}

// The three files of one input, each in its own exact-size allocation.
struct Triple {
  Bytes dat, cat, info;
};
Triple split_input(const uint8_t* data, size_t size) {
  if (size < kInputHeader) return {};
  std::span<const uint8_t> rest(data + kInputHeader, size - kInputHeader);
  const size_t lc = std::min<size_t>(le32(data), rest.size());
  Triple t;
  t.cat.assign(rest.begin(), rest.begin() + ptrdiff_t(lc));
  rest = rest.subspan(lc);
  const size_t li = std::min<size_t>(le32(data + 4), rest.size());
  t.info.assign(rest.begin(), rest.begin() + ptrdiff_t(li));
  rest = rest.subspan(li);
  const int64_t want = int64_t(std::min<uint64_t>(dat_claimed(rest), UINT32_MAX)) + int32_t(le32(data + 8));
  const size_t fill = size_t(std::clamp<int64_t>(want - int64_t(rest.size()), 0, kMaxFill));
  t.dat.resize(rest.size() + fill);
  std::copy(rest.begin(), rest.end(), t.dat.begin());
  const Bytes& table = fill_table();
  size_t k = rest.size();
  if (k < std::min(t.dat.size(), table.size())) {  // not for 0 bytes: an empty vector's data() may be null
    const size_t end = std::min(t.dat.size(), table.size());
    std::memcpy(t.dat.data() + k, table.data() + k, end - k);
    k = end;
  }
  for (; k < t.dat.size(); ++k) t.dat[k] = fill_byte(k);
  return t;
}

// The inverse for a triple whose -dat, from byte `kept` on, is the fill.
Bytes join_input(const Bytes& dat, const Bytes& cat, const Bytes& info, size_t kept) {
  Bytes out;
  put_le32(out, uint32_t(cat.size()));
  put_le32(out, uint32_t(info.size()));
  put_le32(out, uint32_t(int32_t(int64_t(dat.size()) - int64_t(dat_claimed(dat)))));
  out.insert(out.end(), cat.begin(), cat.end());
  out.insert(out.end(), info.begin(), info.end());
  out.insert(out.end(), dat.begin(), dat.begin() + ptrdiff_t(kept));
  return out;
}

// What the reader promises of a set it returns, checked against the raw files:
// the header sizes are fixed (rank 4 dat: 24 bytes; rank 1 or 2 cat, rank 2
// info: 20), every label and info value is the file's and in range, every pair
// reads back as the file's bytes, and pairs outside 0..N-1 are refused.
void check_loaded(const NorbSet& s, const Triple& t) {
  const int n = s.size();
  if (n <= 0) finding("a loaded set is empty");
  if (s.labels().size() != size_t(n) || s.info().size() != size_t(n)) finding("labels, info and size disagree");
  if (t.dat.size() != 24 + size_t(n) * kNorbPairBytes) finding("N disagrees with the -dat size");
  if (t.cat.size() != 20 + 4 * size_t(n) || t.info.size() != 20 + 16 * size_t(n))
    finding("N disagrees with the -cat or -info size");
  static Bytes pair(kNorbPairBytes);
  for (int i = 0; i < n; ++i) {
    const int32_t l = s.labels()[size_t(i)];
    const NorbInfo& r = s.info()[size_t(i)];
    if (l < 0 || l >= kNorbClasses) finding("label out of range");
    if (r.instance < 0 || r.instance >= kNorbInstances || r.elevation < 0 || r.elevation >= kNorbElevations ||
        r.azimuth < 0 || r.azimuth > kNorbAzimuthMax || r.azimuth % 2 != 0 || r.lighting < 0 ||
        r.lighting >= kNorbLightings)
      finding("info out of range");
    if (int32_t(le32(t.cat.data() + 20 + 4 * size_t(i))) != l) finding("label differs from the -cat bytes");
    const uint8_t* row = t.info.data() + 20 + 16 * size_t(i);
    if (int32_t(le32(row)) != r.instance || int32_t(le32(row + 4)) != r.elevation ||
        int32_t(le32(row + 8)) != r.azimuth || int32_t(le32(row + 12)) != r.lighting)
      finding("info differs from the -info bytes");
    s.read_pair(i, pair.data());
    if (std::memcmp(pair.data(), t.dat.data() + 24 + size_t(i) * kNorbPairBytes, kNorbPairBytes) != 0)
      finding("a pair differs from the -dat bytes");
  }
  for (int bad : {-1, n}) {
    try {
      s.read_pair(bad, pair.data());
      finding("read_pair accepted an index outside 0..N-1");
    } catch (const NorbError&) {
    }
  }
}

// norb.h: "one line naming the file and what is wrong".
void check_error(const NorbError& e) {
  const std::string m = e.what();
  if (m.find('\n') != std::string::npos) finding("a NorbError message spans lines");
  for (const char* f : {"fuzz-dat: ", "fuzz-cat: ", "fuzz-info: "})
    if (m.rfind(f, 0) == 0 && m.size() > std::strlen(f)) return;
  finding("a NorbError message does not start with the file's name");
}

// ---- Seeds: valid triples from the project's writer.

// Record i: every field at its top value for i = 0 and stepping down, so the
// seeds sit next to every range check. Pixels are the fill, so a seed keeps
// only the -dat header and a few of them.
Bytes seed_input(int n, bool cat_2d) {
  Bytes pairs(size_t(n) * kNorbPairBytes);
  for (size_t k = 0; k < pairs.size(); ++k) pairs[k] = fill_byte(24 + k);  // -dat offset 24 + k
  std::vector<int32_t> labels, flat;
  for (int i = 0; i < n; ++i) {
    labels.push_back((kNorbClasses - 1 + i) % kNorbClasses);
    flat.insert(flat.end(), {kNorbInstances - 1 - i % kNorbInstances, kNorbElevations - 1 - i % kNorbElevations,
                             kNorbAzimuthMax - 2 * (i % 18), kNorbLightings - 1 - i % kNorbLightings});
  }
  const int32_t cat1[] = {n}, cat2[] = {n, 1}, info_dims[] = {n, kNorbInfoCols};
  const Bytes dat = norb_encode_pairs(pairs);
  const Bytes cat = cat_2d ? norb_encode_ints(labels, cat2) : norb_encode_ints(labels, cat1);
  const Bytes info = norb_encode_ints(flat, info_dims);
  const Bytes in = join_input(dat, cat, info, kSeedDatKept);
  const Triple t = split_input(in.data(), in.size());
  if (t.dat != dat || t.cat != cat || t.info != info) {
    std::fprintf(stderr, "norb_fuzz: seed N=%d does not expand to the writer's bytes\n", n);
    std::exit(1);
  }
  return in;
}

void write_seeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  int written = 0;
  for (int n : {1, 2, 5})
    for (bool cat_2d : {false, true}) {
      const Bytes in = seed_input(n, cat_2d);
      // A seed the reader refuses would be a writer/reader mismatch: say so now.
      const Triple t = split_input(in.data(), in.size());
      try {
        check_loaded(norb_parse_split(t.dat, t.cat, t.info, "fuzz"), t);
      } catch (const NorbError& e) {
        std::fprintf(stderr, "norb_fuzz: seed N=%d refused: %s\n", n, e.what());
        std::exit(1);
      }
      fuzz::write_file("norb_fuzz", std::filesystem::path(dir) / ("seed_n" + std::to_string(n) + (cat_2d ? "_cat2d" : "_cat1d")), in);
      ++written;
    }
  std::printf("norb_fuzz: %d seeds in %s\n", written, dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::initialize(*argc, *argv, write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Triple t = split_input(data, size);
  const size_t files = t.dat.size() + t.cat.size() + t.info.size();
  std::optional<NorbSet> s;
  fuzz::largest = 0;
  fuzz::watch = true;
  try {
    s = norb_parse_split(t.dat, t.cat, t.info, "fuzz");
  } catch (const NorbError& e) {
    fuzz::watch = false;
    check_error(e);
  }
  fuzz::watch = false;
  if (fuzz::largest > files + kAllocSlack) finding("an allocation larger than the files + 1 KiB");
  if (!s) return 0;
  try {
    check_loaded(*s, t);
  } catch (const NorbError& e) {  // a set the reader returned refuses its own pairs
    std::fprintf(stderr, "norb_fuzz: %s\n", e.what());
    finding("read_pair refused an index inside 0..N-1");
  }
  return 0;
}
