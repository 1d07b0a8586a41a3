// The toys' render cache (see toy_cache.h for the format and its rules).
#include "data/toy_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "core/fd.h"
#include "data/toys.h"

namespace vg {

namespace {

namespace fs = std::filesystem;

constexpr uint8_t kMagic[8] = {'V', 'G', 'T', 'O', 'Y', 'S', 0, 1};
constexpr const char* kSuffix = ".vgtoys";
// A temporary file this old is a writer that died, not one still writing.
constexpr auto kStaleTemp = std::chrono::hours(24);

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int k = 0; k < 4; ++k) b.push_back(uint8_t(v >> (8 * k)));
}
uint32_t get32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint32_t crc_of(const uint8_t* p, size_t n) { return uint32_t(crc32(crc32(0L, Z_NULL, 0), p, uInt(n))); }

// One line on stderr, once per process for each message: a sweep opens its
// world once a cell.
void warn(const std::string& line) {
  static std::mutex m;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(m);
  if (!said.insert(line).second) return;
  std::fprintf(stderr, "viewgap: toy cache: %s\n", line.c_str());
}

std::string exact(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", v);
  return b;
}

std::string gigabytes(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GB", double(bytes) / 1e9);
  return b;
}

size_t header_bytes(const std::string& key, int n) { return 8 + 4 + key.size() + 4 + 4 * size_t(n) + 4; }

std::vector<uint8_t> header(const std::string& key, const std::vector<uint32_t>& crcs) {
  std::vector<uint8_t> h(std::begin(kMagic), std::end(kMagic));
  put32(h, uint32_t(key.size()));
  h.insert(h.end(), key.begin(), key.end());
  put32(h, uint32_t(crcs.size()));
  for (uint32_t c : crcs) put32(h, c);
  put32(h, crc_of(h.data(), h.size()));
  return h;
}

bool pread_all(int fd, uint8_t* p, size_t n, uint64_t off) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= size_t(r), off += uint64_t(r);
  }
  return true;
}

// 0, or the errno of the write that failed.
int pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t off) {
  while (n > 0) {
    const ssize_t r = ::pwrite(fd, p, n, off_t(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return EIO;
    p += r, n -= size_t(r), off += uint64_t(r);
  }
  return 0;
}

// An open set: its file (-1: none) and records' CRCs, or what is wrong with it.
struct Entry {
  int fd = -1;
  std::vector<uint32_t> crcs;
  std::string problem;  // "" with fd -1: absent
};

// `path` if it is the set of n records that `key` names, read-only.
Entry open_entry(const std::string& path, const std::string& key, int n) {
  Entry e;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.fd < 0) return e;  // absent, or unreadable: filling it says what is wrong, if anything
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return {-1, {}, std::string("cannot stat: ") + std::strerror(errno)};
  if (!S_ISREG(st.st_mode)) return {-1, {}, "not a regular file"};
  const uint64_t size = uint64_t(st.st_size);
  const size_t hb = header_bytes(key, n);
  const uint64_t want = hb + uint64_t(n) * kNorbPairBytes;
  std::vector<uint8_t> h(size_t(std::min<uint64_t>(size, hb)));
  if (!pread_all(fd.fd, h.data(), h.size(), 0)) return {-1, {}, "cannot read its header"};
  if (h.size() < 8 || std::memcmp(h.data(), kMagic, 8) != 0) return {-1, {}, "not a toy cache file (its magic)"};
  const auto cut = [&] { return "truncated: " + std::to_string(size) + " bytes, its header alone needs " + std::to_string(hb); };
  if (h.size() < 12) return {-1, {}, cut()};
  if (get32(h.data() + 8) != key.size()) return {-1, {}, "another world's file (its key)"};
  if (h.size() < 12 + key.size()) return {-1, {}, cut()};
  if (std::memcmp(h.data() + 12, key.data(), key.size()) != 0) return {-1, {}, "another world's file (its key)"};
  if (h.size() < hb) return {-1, {}, cut()};
  if (get32(h.data() + 12 + key.size()) != uint32_t(n))
    return {-1, {}, "holds " + std::to_string(get32(h.data() + 12 + key.size())) + " records, not " + std::to_string(n)};
  if (crc_of(h.data(), hb - 4) != get32(h.data() + hb - 4)) return {-1, {}, "its header fails its checksum"};
  if (size != want)
    return {-1, {}, (size < want ? "truncated: " : "too long: ") + std::to_string(size) + " bytes, expected " +
                        std::to_string(want)};
  e.crcs.resize(size_t(n));
  for (int i = 0; i < n; ++i) e.crcs[size_t(i)] = get32(h.data() + 16 + key.size() + 4 * size_t(i));
  ::fcntl(fd.fd, F_SETFL, ::fcntl(fd.fd, F_GETFL) & ~O_NONBLOCK);
  ::futimens(fd.fd, nullptr);  // its last use, which eviction reads (best effort: a read-only cache still serves)
  e.fd = fd.release();
  return e;
}

}  // namespace

void toy_cache_make_room(const std::string& dir, uint64_t bytes, const std::string& keep, uint64_t max_bytes) {
  struct Old {
    fs::path path;
    uint64_t size;
    fs::file_time_type used;
  };
  std::vector<Old> sets;
  uint64_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    const auto used = it->last_write_time(e2);
    if (e2) continue;
    if (name.rfind(".toys-", 0) == 0 && name.find(".tmp-") != std::string::npos) {
      if (now - used > kStaleTemp) fs::remove(it->path(), e2);
      continue;
    }
    if (name.rfind("toys-", 0) != 0 || !name.ends_with(kSuffix) || it->path().string() == keep) continue;
    const uint64_t size = it->file_size(e2);
    if (e2) continue;
    sets.push_back({it->path(), size, used});
    total += size;
  }
  std::sort(sets.begin(), sets.end(), [](const Old& a, const Old& b) { return a.used < b.used; });
  for (const Old& s : sets) {
    if (total + bytes <= max_bytes) break;
    std::error_code e2;
    if (fs::remove(s.path, e2)) total -= s.size;
  }
}

namespace {

// Draws `set` into `path` through a temporary file beside it, renamed into
// place once whole; the file stays open (read-write) for the run.
Entry fill(const NorbSet& set, const std::string& dir, const std::string& path, const std::string& key) {
  static std::atomic<unsigned> count{0};
  const std::string tmp = dir + "/." + fs::path(path).filename().string() + ".tmp-" + std::to_string(::getpid()) +
                          "-" + std::to_string(count.fetch_add(1));
  Fd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.fd < 0) return {-1, {}, "cannot write " + dir + ": " + std::strerror(errno)};
  const int n = set.size();
  const size_t hb = header_bytes(key, n);
  std::vector<uint32_t> crcs(static_cast<size_t>(n));
  std::atomic<int> failed{0};
  // Static chunks: a thread walks a view's lightings in order and rasterises it once.
#pragma omp parallel
  {
    std::vector<uint8_t> pair(kNorbPairBytes);
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      if (failed.load(std::memory_order_relaxed) != 0) continue;
      set.read_pair(i, pair.data());
      crcs[size_t(i)] = crc_of(pair.data(), pair.size());
      if (const int err = pwrite_all(fd.fd, pair.data(), pair.size(), hb + uint64_t(i) * kNorbPairBytes)) {
        int none = 0;
        failed.compare_exchange_strong(none, err);
      }
    }
  }
  int err = failed.load();
  if (err == 0) {
    const std::vector<uint8_t> h = header(key, crcs);
    err = pwrite_all(fd.fd, h.data(), h.size(), 0);
  }
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return {-1, {}, "cannot write " + tmp + ": " + std::strerror(err)};
  }
  return {fd.release(), std::move(crcs), ""};
}

// Set `part` of the world `key` names, from the cache in `dir`, drawn into it
// first if absent; `drawn` where it cannot be.
NorbSet cached(const NorbSet& drawn, const ToyConfig& cfg, const std::string& key, const std::string& dir,
               const std::string& part) {
  const std::string path = toy_cache_file(dir, cfg, part);
  const int n = drawn.size();
  const uint64_t bytes = toy_cache_bytes(key, n);
  // One fill at a time in a process: a sweep's other cells then find the
  // world made, not make it again.
  static std::mutex filling;
  std::unique_lock<std::mutex> lock(filling);
  Entry e = open_entry(path, key, n);
  if (e.fd < 0) {
    // One line whatever happens next: what was wrong with the file, and where the set now comes from.
    const std::string bad = e.problem.empty() ? "" : path + ": " + e.problem + ": not trusted, drawn afresh";
    const auto in_memory = [&](const std::string& why) {
      warn(bad.empty() ? why + ": the toys are drawn in memory" : bad + " in memory (" + why + ")");
      return drawn;
    };
    if (bytes > kToyCacheMaxBytes)
      return in_memory("a set of " + gigabytes(bytes) + " is over the cache's bound of " +
                       gigabytes(kToyCacheMaxBytes) + ", not cached");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return in_memory("cannot create " + dir + ": " + ec.message());
    toy_cache_make_room(dir, bytes, path);
    e = fill(drawn, dir, path, key);
    if (e.fd < 0) return in_memory(e.problem);
    if (!bad.empty()) warn(bad + " and rewritten");
  }
  lock.unlock();
  auto crcs = std::make_shared<const std::vector<uint32_t>>(std::move(e.crcs));
  auto removed = std::make_shared<std::atomic<bool>>(false);
  auto valid = [crcs, removed, path](int i, const uint8_t* pair) {
    if (crc_of(pair, kNorbPairBytes) == (*crcs)[size_t(i)]) return true;
    // Removed, so that the next run writes it whole again.
    if (!removed->exchange(true)) ::unlink(path.c_str());
    warn(path + ": a record fails its checksum: not trusted, its damaged records drawn afresh (the file is removed)");
    return false;
  };
  auto redraw = [drawn](int i, uint8_t* dst) { drawn.read_pair(i, dst); };
  return NorbSet::stored(drawn.labels(), drawn.info(), e.fd, header_bytes(key, n), valid, redraw, drawn.dat_name());
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string toy_cache_dir() {
  // XDG's rule: a relative XDG_CACHE_HOME is invalid and ignored.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/viewgap";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/viewgap";
  return "";
}

std::string toy_cache_key(const ToyConfig& cfg) {
  // Every field by name: a field added to ToyConfig stops this compiling
  // until it is keyed here too (two worlds must never share a file).
  const auto& [instances, lightings, stereo_deg, perspective, min_size, scale, variety, lights, azimuth_step, seed] = cfg;
  std::ostringstream o;
  o << "toys generator " << kToyGeneratorVersion << ", instances " << instances << ", lightings " << lightings
    << ", stereo_deg " << exact(stereo_deg) << ", projection " << (perspective ? "perspective" : "orthographic")
    << ", min_size " << exact(min_size) << ", scale " << exact(scale) << ", variety "
    << (variety == ToyVariety::wide ? "wide" : "narrow") << ", lights " << (lights == ToyLights::rig ? "rig" : "mixed")
    << ", azimuth_step " << azimuth_step << ", seed " << seed;
  return o.str();
}

std::string toy_cache_file(const std::string& dir, const ToyConfig& cfg, const std::string& part) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(toy_cache_key(cfg))));
  return dir + "/toys-" + hash + "-" + part + kSuffix;
}

uint64_t toy_cache_bytes(const std::string& key, int n) { return header_bytes(key, n) + uint64_t(n) * kNorbPairBytes; }

NorbData toy_world(const ToyConfig& cfg, ToyCacheUse use, const std::string& dir_given) {
  NorbData d = toy_norb_data(cfg);
  if (!use.train && !use.test && !use.validation) return d;
  const std::string dir = dir_given.empty() ? toy_cache_dir() : dir_given;
  if (dir.empty()) {
    warn("neither XDG_CACHE_HOME nor HOME is set: the toys are drawn in memory");
    return d;
  }
  const std::string key = toy_cache_key(cfg);
  const std::tuple<NorbSet*, const char*, bool> sets[] = {
      {&d.train, "training", use.train}, {&d.test, "testing", use.test}, {&d.validation, "validation", use.validation}};
  for (const auto& [set, part, wanted] : sets)
    if (wanted) *set = cached(*set, cfg, key, dir, part);
  return d;
}

}  // namespace vg
