// The toys' render cache: smallNORB is one fixed set of photographs, so the
// toys' world (ToyConfig, its seed included) is drawn once and its records
// read from disk after that, the same bytes as drawing them (docs/toys.md).
//
// One file per set of a world (training, testing, validation), in
// $XDG_CACHE_HOME/viewgap/ (else ~/.cache/viewgap/), named by a hash of the
// world's key (toy_cache_key: the generator's version and every ToyConfig
// field). A file holds:
//   8 bytes   magic "VGTOYS" + format version (2 bytes)
//   u32       length K of the key, then the key's K bytes
//   u32       N, the set's records
//   N x u32   CRC-32 of each record's pair
//   u32       CRC-32 of everything above
//   N x 2 x 96 x 96 bytes, the pairs in the set's order
// all integers little-endian. On open the magic, the key, N, the header's
// CRC and the file's exact size are checked (a foreign, damaged or truncated
// file is drawn afresh and rewritten, with one line on stderr); each pair's
// CRC is checked as it is read (one that fails is drawn instead).
//
// A file is written to a temporary name in the same directory and renamed
// into place, so no reader sees half of one; two processes filling it at once
// write the same bytes, and the last rename wins. A directory that cannot be
// written leaves the set drawn in memory (one line on stderr). The directory
// is bounded by kToyCacheMaxBytes: the least recently used files go to make
// room, and a set larger than the bound is not cached.
#pragma once
#include <cstdint>
#include <string>

#include "data/norb.h"
#include "data/toy_views.h"

namespace vg {

// 4 GiB: the default world's three sets (3 x 24,300 pairs, 1.34 GB) and two
// more of its size; --toy-instances 50 (4.5 GB a set) is not cached.
inline constexpr uint64_t kToyCacheMaxBytes = uint64_t(4) << 30;

// Which sets of a world a run reads pixels from: those are drawn into the
// cache when absent (the others are drawn when read, as toy_norb_data's).
struct ToyCacheUse {
  bool train = false, test = false, validation = false;
};

// $XDG_CACHE_HOME/viewgap, else $HOME/.cache/viewgap; "" when neither is set.
std::string toy_cache_dir();

// What names a world: the generator's version and every ToyConfig field
// (exact: doubles in hexadecimal), e.g. "toys generator 1, instances 5, ...".
std::string toy_cache_key(const ToyConfig& cfg);

// The file of set `part` ("training", "testing" or "validation") of cfg's world in `dir`.
std::string toy_cache_file(const std::string& dir, const ToyConfig& cfg, const std::string& part);

// The bytes a cached set of n records takes.
uint64_t toy_cache_bytes(const std::string& key, int n);

// Room for `bytes` more in `dir` under `max_bytes`: the least recently used
// sets go first (but `keep`, about to be replaced), and temporary files a
// writer that died left a day ago.
void toy_cache_make_room(const std::string& dir, uint64_t bytes, const std::string& keep,
                         uint64_t max_bytes = kToyCacheMaxBytes);

// toy_norb_data(cfg), the sets `use` names read from the cache in `dir` (""
// for toy_cache_dir()), drawn into it first where absent or not valid.
// Warnings (a damaged file, an unwritable directory) go to stderr, one line
// each, once per process.
NorbData toy_world(const ToyConfig& cfg, ToyCacheUse use, const std::string& dir = "");

}  // namespace vg
