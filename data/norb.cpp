// smallNORB reader, writer, preprocessing and splits (see norb.h for the format
// and where it is documented).
#include "data/norb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/fd.h"
#include "core/file_kind.h"
#include "data/grey_bytes.h"

namespace vg {

namespace {

enum class Kind { dat, cat, info };

// The largest header we accept: rank 4 (-dat) stores 4 dims; ranks 1 and 2 store 3.
constexpr size_t kMaxHeader = 8 + 4 * 4;

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void put_le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(uint8_t(v >> (8 * k)));
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw NorbError(name + ": " + what); }

std::string magic_name(uint32_t m) {
  switch (m) {
    case 0x1E3D4C51: return "float32 matrix";
    case 0x1E3D4C52: return "packed matrix";
    case 0x1E3D4C53: return "float64 matrix";
    case kNorbMagicInt: return "int32 matrix";
    case kNorbMagicByte: return "uint8 byte matrix";
    case 0x1E3D4C56: return "int16 matrix";
  }
  if (__builtin_bswap32(m) >= 0x1E3D4C51 && __builtin_bswap32(m) <= 0x1E3D4C56) return "byte-swapped magic: a big-endian file?";
  return "not a binary-matrix magic";
}

const char* shape_text(Kind k) {
  switch (k) {
    case Kind::dat: return "N x 2 x 96 x 96";
    case Kind::cat: return "N";
    case Kind::info: return "N x 4";
  }
  return "";
}

// What a valid header says.
struct Header {
  int64_t n = 0;
  size_t header_bytes = 0;
  uint64_t data_bytes = 0;
};

// Checks a header against the file's full size. `head` holds the file's first
// min(size, kMaxHeader) bytes. Nothing is allocated here.
Header check_header(std::span<const uint8_t> head, uint64_t size, Kind kind, const std::string& name) {
  if (size < 8) fail(name, std::to_string(size) + " bytes, too short for the 8-byte magic and rank");
  const uint32_t magic = le32(head.data());
  const uint32_t want = kind == Kind::dat ? kNorbMagicByte : kNorbMagicInt;
  if (magic != want)
    fail(name, "magic " + hex32(magic) + " (" + magic_name(magic) + "), expected " + hex32(want) + " (" +
                   magic_name(want) + ")");
  const int32_t ndim = int32_t(le32(head.data() + 4));
  const bool rank_ok = kind == Kind::dat    ? ndim == 4
                       : kind == Kind::info ? ndim == 2
                                            : (ndim == 1 || ndim == 2);  // the readme also calls -cat "N x 1"
  if (!rank_ok)
    fail(name, "rank " + std::to_string(ndim) + ", expected " + (kind == Kind::dat ? "4" : kind == Kind::info ? "2" : "1") +
                   " (" + shape_text(kind) + ")");
  Header h;
  h.header_bytes = 8 + 4 * size_t(std::max<int32_t>(3, ndim));
  if (size < h.header_bytes)
    fail(name, "truncated header: " + std::to_string(size) + " bytes, a rank-" + std::to_string(ndim) + " header needs " +
                   std::to_string(h.header_bytes));
  // Dims beyond the rank are padding, documented as 1 and ignored by every reader; not checked.
  int64_t dims[4] = {};
  std::string dims_text;
  for (int k = 0; k < ndim; ++k) {
    dims[k] = int32_t(le32(head.data() + 8 + 4 * k));
    dims_text += (k ? " x " : "") + std::to_string(dims[k]);
    if (dims[k] < 0) fail(name, "dimension " + std::to_string(k) + " is " + std::to_string(dims[k]) + " (negative)");
  }
  auto expect_dim = [&](int k, int64_t v, const char* what) {
    if (dims[k] != v)
      fail(name, "dimension " + std::to_string(k) + " is " + std::to_string(dims[k]) + ", expected " + std::to_string(v) +
                     " (" + what + "; dims " + dims_text + ")");
  };
  if (kind == Kind::dat) {
    expect_dim(1, kNorbCameras, "cameras");
    expect_dim(2, kNorbSide, "rows");
    expect_dim(3, kNorbSide, "columns");
  } else if (kind == Kind::info) {
    expect_dim(1, kNorbInfoCols, "instance, elevation, azimuth, lighting");
  } else if (ndim == 2) {
    expect_dim(1, 1, "one label per record");
  }
  h.n = dims[0];
  if (h.n == 0) fail(name, "N is 0: no records");
  // Checked products: a header may claim anything.
  uint64_t bytes = kind == Kind::dat ? 1 : 4;
  for (int k = 0; k < ndim; ++k)
    if (__builtin_mul_overflow(bytes, uint64_t(dims[k]), &bytes)) fail(name, "dimensions " + dims_text + " overflow 64 bits");
  h.data_bytes = bytes;
  const uint64_t want_size = h.header_bytes + h.data_bytes;  // data_bytes < 2^31 * 18432: no overflow
  if (size < want_size)
    fail(name, "truncated: dims " + dims_text + " need " + std::to_string(want_size) + " bytes, the file has " +
                   std::to_string(size));
  if (size > want_size)
    fail(name, std::to_string(size - want_size) + (size - want_size == 1 ? " trailing byte" : " trailing bytes") + " after the " + dims_text + " data (file " +
                   std::to_string(size) + " bytes, expected " + std::to_string(want_size) + ")");
  return h;
}

void check_same_n(const Header& a, const std::string& a_name, const Header& b, const std::string& b_name) {
  if (a.n != b.n) fail(b_name, "N = " + std::to_string(b.n) + " but " + a_name + " has N = " + std::to_string(a.n));
}

// Labels and info from their validated data bytes; every value range-checked.
std::vector<int32_t> decode_labels(const uint8_t* data, int64_t n, const std::string& name) {
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t v = int32_t(le32(data + 4 * i));
    if (v < 0 || v >= kNorbClasses)
      fail(name, "record " + std::to_string(i) + ": label " + std::to_string(v) + " outside 0..4");
    labels[size_t(i)] = v;
  }
  return labels;
}

std::vector<NorbInfo> decode_info(const uint8_t* data, int64_t n, const std::string& name) {
  std::vector<NorbInfo> info(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int32_t v[4];
    for (int k = 0; k < 4; ++k) v[k] = int32_t(le32(data + 16 * i + 4 * k));
    auto range = [&](int k, const char* what, int hi) {
      if (v[k] < 0 || v[k] > hi)
        fail(name, "record " + std::to_string(i) + ": " + what + " " + std::to_string(v[k]) + " outside 0.." +
                       std::to_string(hi));
    };
    range(0, "instance", kNorbInstances - 1);
    range(1, "elevation", kNorbElevations - 1);
    range(2, "azimuth", kNorbAzimuthMax);
    range(3, "lighting", kNorbLightings - 1);
    if (v[2] % 2 != 0)
      fail(name, "record " + std::to_string(i) + ": azimuth " + std::to_string(v[2]) + " is odd (must be 0, 2, .., 34)");
    info[size_t(i)] = {v[0], v[1], v[2], v[3]};
  }
  return info;
}

void pread_full(int fd, uint8_t* dst, size_t n, uint64_t offset, const std::string& name) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, dst, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(name, std::string("read failed: ") + std::strerror(errno));
    if (r == 0) fail(name, "file shrank while reading (" + std::to_string(n) + " bytes missing at offset " + std::to_string(offset) + ")");
    dst += r; n -= size_t(r); offset += uint64_t(r);
  }
}

// Opens a file and validates its header; returns the fd with the header.
struct OpenFile {
  std::unique_ptr<Fd> fd;
  Header h;
};
OpenFile open_checked(const std::string& path, Kind kind) {
  // O_NONBLOCK: opening a FIFO (or a terminal) for reading would wait for a
  // writer; it is refused below instead, before anything is read.
  auto fd = std::make_unique<Fd>(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd->fd < 0) {
    const int err = errno;
    struct stat gz {};
    // The NYU site serves the files gzipped: name the step that was missed.
    if (err == ENOENT && ::stat((path + ".gz").c_str(), &gz) == 0)
      fail(path, "cannot open: " + std::string(std::strerror(err)) + ", but " + path +
                     ".gz is there: gunzip it (viewgap reads the uncompressed files)");
    fail(path, std::string("cannot open: ") + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd->fd, &st) != 0) fail(path, std::string("cannot stat: ") + std::strerror(errno));
  if (const std::string kind_of = non_regular_kind(st.st_mode); !kind_of.empty())
    fail(path, "is " + kind_of + ", not a regular file");
  // A regular file never blocks; the flag is dropped so later reads are plain.
  ::fcntl(fd->fd, F_SETFL, ::fcntl(fd->fd, F_GETFL) & ~O_NONBLOCK);
  const uint64_t size = uint64_t(st.st_size);
  uint8_t head[kMaxHeader] = {};
  const size_t n = size_t(std::min<uint64_t>(size, kMaxHeader));
  pread_full(fd->fd, head, n, 0, path);
  const Header h = check_header(std::span<const uint8_t>(head, n), size, kind, path);
  return {std::move(fd), h};
}

}  // namespace

struct NorbSet::Source {
  int fd = -1;                 // the -dat file, or -1 for an in-memory set
  uint64_t offset = 0;         // of pair 0 in the file
  std::vector<uint8_t> bytes;  // in-memory pixels
  std::function<void(int, uint8_t*)> render;  // set: pairs are drawn, not stored (or, with valid, redrawn)
  std::function<bool(int, const uint8_t*)> valid;  // set: each pair read from fd is checked
  ~Source() { if (fd >= 0) ::close(fd); }
};

void NorbSet::read_pair(int i, uint8_t* dst) const {
  if (i < 0 || i >= size())
    fail(dat_name_, "pair " + std::to_string(i) + " outside 0.." + std::to_string(size() - 1));
  if (src_->render && !src_->valid) {
    src_->render(i, dst);
    return;
  }
  const size_t at = size_t(i) * kNorbPairBytes;
  if (src_->fd < 0) {
    std::memcpy(dst, src_->bytes.data() + at, kNorbPairBytes);
    return;
  }
  if (!src_->valid) {
    pread_full(src_->fd, dst, kNorbPairBytes, src_->offset + at, dat_name_);
    return;
  }
  bool ok = true;
  try {
    pread_full(src_->fd, dst, kNorbPairBytes, src_->offset + at, dat_name_);
  } catch (const NorbError&) {
    ok = false;  // a file cut short after it was opened: the pair is drawn instead
  }
  if (!ok || !src_->valid(i, dst)) src_->render(i, dst);
}

bool NorbSet::drawn_when_read() const { return src_ && src_->render && !src_->valid; }

NorbFiles norb_files(const std::string& dir, NorbPart part) {
  const std::string base = (dir.empty() || dir.back() == '/') ? dir : dir + "/";
  const std::string stem = part == NorbPart::training ? "smallnorb-5x46789x9x18x6x2x96x96-training-"
                                                      : "smallnorb-5x01235x9x18x6x2x96x96-testing-";
  return {base + stem + "dat.mat", base + stem + "cat.mat", base + stem + "info.mat"};
}

NorbSet norb_load_split(const NorbFiles& files) {
  OpenFile dat = open_checked(files.dat, Kind::dat);
  OpenFile cat = open_checked(files.cat, Kind::cat);
  OpenFile info = open_checked(files.info, Kind::info);
  check_same_n(dat.h, files.dat, cat.h, files.cat);
  check_same_n(dat.h, files.dat, info.h, files.info);
  // Sizes now agree with the headers: what we allocate is what the files hold.
  std::vector<uint8_t> buf(size_t(cat.h.data_bytes));
  pread_full(cat.fd->fd, buf.data(), buf.size(), cat.h.header_bytes, files.cat);
  NorbSet s;
  s.labels_ = decode_labels(buf.data(), cat.h.n, files.cat);
  buf.resize(size_t(info.h.data_bytes));
  pread_full(info.fd->fd, buf.data(), buf.size(), info.h.header_bytes, files.info);
  s.info_ = decode_info(buf.data(), info.h.n, files.info);
  auto src = std::make_shared<NorbSet::Source>();
  src->offset = dat.h.header_bytes;
  src->fd = dat.fd->release();
  // Batches read pairs in shuffled order: no read-ahead.
  ::posix_fadvise(src->fd, 0, 0, POSIX_FADV_RANDOM);
  s.src_ = std::move(src);
  s.dat_name_ = files.dat;
  return s;
}

NorbSet norb_parse_split(std::span<const uint8_t> dat, std::span<const uint8_t> cat, std::span<const uint8_t> info,
                         const std::string& name) {
  const std::string dn = name + "-dat", cn = name + "-cat", in = name + "-info";
  auto head = [](std::span<const uint8_t> b) { return b.first(std::min(b.size(), kMaxHeader)); };
  const Header dh = check_header(head(dat), dat.size(), Kind::dat, dn);
  const Header ch = check_header(head(cat), cat.size(), Kind::cat, cn);
  const Header ih = check_header(head(info), info.size(), Kind::info, in);
  check_same_n(dh, dn, ch, cn);
  check_same_n(dh, dn, ih, in);
  NorbSet s;
  s.labels_ = decode_labels(cat.data() + ch.header_bytes, ch.n, cn);
  s.info_ = decode_info(info.data() + ih.header_bytes, ih.n, in);
  auto src = std::make_shared<NorbSet::Source>();
  src->bytes.assign(dat.begin() + ptrdiff_t(dh.header_bytes), dat.end());
  s.src_ = std::move(src);
  s.dat_name_ = dn;
  return s;
}

NorbSet NorbSet::from_source(std::vector<int32_t> labels, std::vector<NorbInfo> info, std::shared_ptr<Source> src,
                             std::string name) {
  NorbSet s;
  s.labels_ = std::move(labels);
  s.info_ = std::move(info);
  s.src_ = std::move(src);
  s.dat_name_ = std::move(name);
  return s;
}

NorbSet NorbSet::rendered(std::vector<int32_t> labels, std::vector<NorbInfo> info,
                          std::function<void(int, uint8_t*)> render, std::string name) {
  if (labels.size() != info.size()) throw std::invalid_argument("NorbSet::rendered: labels and info differ in length");
  auto src = std::make_shared<NorbSet::Source>();
  src->render = std::move(render);
  return from_source(std::move(labels), std::move(info), std::move(src), std::move(name));
}

NorbSet NorbSet::stored(std::vector<int32_t> labels, std::vector<NorbInfo> info, int fd, uint64_t offset,
                        std::function<bool(int, const uint8_t*)> valid, std::function<void(int, uint8_t*)> redraw,
                        std::string name) {
  auto src = std::make_shared<NorbSet::Source>();
  src->fd = fd;  // owned from here, closed even if the checks below throw
  if (labels.size() != info.size() || fd < 0 || !valid || !redraw)
    throw std::invalid_argument("NorbSet::stored: labels and info differ in length, or no file, check or redraw");
  src->offset = offset;
  src->valid = std::move(valid);
  src->render = std::move(redraw);
  return from_source(std::move(labels), std::move(info), std::move(src), std::move(name));
}

NorbSet NorbSet::in_memory(std::vector<int32_t> labels, std::vector<NorbInfo> info, std::vector<uint8_t> pairs,
                           std::string name) {
  if (labels.size() != info.size() || pairs.size() != labels.size() * size_t(kNorbPairBytes))
    throw std::invalid_argument("NorbSet::in_memory: labels, info and pairs differ in length");
  auto src = std::make_shared<NorbSet::Source>();
  src->bytes = std::move(pairs);
  return from_source(std::move(labels), std::move(info), std::move(src), std::move(name));
}

NorbData norb_load_dir(const std::string& dir) {
  return {norb_load_split(norb_files(dir, NorbPart::training)), norb_load_split(norb_files(dir, NorbPart::testing)), {}};
}

std::vector<uint8_t> norb_pairs_file(int32_t n) {
  if (n < 0) throw NorbError("norb_pairs_file: negative N");
  std::vector<uint8_t> out;
  out.reserve(kNorbPairsHeader + size_t(n) * kNorbPairBytes);
  put_le32(out, kNorbMagicByte);
  put_le32(out, 4);
  for (uint32_t d : {uint32_t(n), uint32_t(kNorbCameras), uint32_t(kNorbSide), uint32_t(kNorbSide)}) put_le32(out, d);
  out.resize(kNorbPairsHeader + size_t(n) * kNorbPairBytes, 0);
  return out;
}

std::vector<uint8_t> norb_encode_pairs(std::span<const uint8_t> pairs) {
  if (pairs.size() % kNorbPairBytes != 0) throw NorbError("norb_encode_pairs: size is not a multiple of 2 x 96 x 96");
  std::vector<uint8_t> out = norb_pairs_file(int32_t(pairs.size() / kNorbPairBytes));
  if (!pairs.empty()) std::memcpy(out.data() + kNorbPairsHeader, pairs.data(), pairs.size());
  return out;
}

std::vector<uint8_t> norb_encode_ints(std::span<const int32_t> values, std::span<const int32_t> dims) {
  std::vector<uint8_t> out;
  put_le32(out, kNorbMagicInt);
  put_le32(out, uint32_t(dims.size()));
  for (size_t k = 0; k < std::max<size_t>(3, dims.size()); ++k) put_le32(out, k < dims.size() ? uint32_t(dims[k]) : 1u);
  for (int32_t v : values) put_le32(out, uint32_t(v));
  return out;
}

void norb_write_split(const NorbFiles& files, std::span<const uint8_t> pairs, std::span<const int32_t> labels,
                      std::span<const NorbInfo> info) {
  const int32_t n = int32_t(labels.size());
  if (pairs.size() != size_t(n) * kNorbPairBytes || info.size() != size_t(n))
    throw NorbError("norb_write_split: pairs, labels and info differ in N");
  std::vector<int32_t> flat;
  flat.reserve(info.size() * 4);
  for (const NorbInfo& r : info) flat.insert(flat.end(), {r.instance, r.elevation, r.azimuth, r.lighting});
  const int32_t cat_dims[] = {n}, info_dims[] = {n, kNorbInfoCols};
  auto write = [](const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    f.close();
    if (!f) fail(path, "cannot write");
  };
  write(files.dat, norb_encode_pairs(pairs));
  write(files.cat, norb_encode_ints(labels, cat_dims));
  write(files.info, norb_encode_ints(flat, info_dims));
}

// ---- Preprocessing.

// After the clamp to [-1, 256], int(c) truncates exactly, c - int(c) is exact
// (a float's fraction needs no more bits than it has), and rounding half away
// adds one where that fraction is >= 0.5; below zero both forms give <= 0,
// which the last clamp makes 0.
uint8_t grey_byte(float v) {
  const float c = std::min(std::max(v, -1.f), 256.f);
  const int t = int(c);
  const int r = t + int(c - float(t) >= 0.5f);
  return uint8_t(std::min(std::max(r, 0), 255));
}

void grey_bytes(const float* __restrict clean, float gain, const float* __restrict noise, int n,
                uint8_t* __restrict dst) {
  for (int p = 0; p < n; ++p) dst[p] = grey_byte(clean[p] * gain + noise[p]);
}

void norb_downsample(const uint8_t* src, float* dst) {
  for (int r = 0; r < kNorbHalfSide; ++r) {
    const uint8_t* a = src + 2 * r * kNorbSide;
    const uint8_t* b = a + kNorbSide;
    for (int c = 0; c < kNorbHalfSide; ++c) {
      const int sum = a[2 * c] + a[2 * c + 1] + b[2 * c] + b[2 * c + 1];
      dst[r * kNorbHalfSide + c] = float(sum) / 1020.f;  // mean / 255, correctly rounded
    }
  }
}

void norb_crop(const float* src, int row0, int col0, float* dst) {
  for (int r = 0; r < kNorbCropSide; ++r)
    std::memcpy(dst + r * kNorbCropSide, src + (row0 + r) * kNorbHalfSide + col0, kNorbCropSide * sizeof(float));
}

int norb_camera_list(NorbCameras c, int cams[2]) {
  if (c == NorbCameras::second) { cams[0] = 1; return 1; }
  cams[0] = 0; cams[1] = 1;
  return c == NorbCameras::both ? 2 : 1;
}

namespace {

void crop_channels(const uint8_t* pair, NorbCameras cameras, int row0, int col0, float* dst) {
  float half[kNorbHalfSide * kNorbHalfSide];
  int cams[2];
  const int nc = norb_camera_list(cameras, cams);
  for (int ch = 0; ch < nc; ++ch) {
    norb_downsample(pair + size_t(cams[ch]) * kNorbImageBytes, half);
    norb_crop(half, row0, col0, dst + ch * kNorbCropPixels);
  }
}

}  // namespace

void norb_eval_sample(const uint8_t* pair, const NorbPrep& prep, float* dst) {
  crop_channels(pair, prep.cameras, kNorbCentreOffset, kNorbCentreOffset, dst);
  norb_standardize(dst, norb_channels(prep.cameras), prep);
}

void norb_train_sample(const uint8_t* pair, const NorbPrep& prep, Stream& rng, float* dst) {
  // Four draws always, in this order, so a setting never shifts another's draws.
  constexpr uint32_t kPositions = kNorbHalfSide - kNorbCropSide + 1;  // 17
  const int row0 = int(rng.below(kPositions)), col0 = int(rng.below(kPositions));
  const float ub = float(rng.uniform()), uc = float(rng.uniform());
  if (prep.centre_train_crops) crop_channels(pair, prep.cameras, kNorbCentreOffset, kNorbCentreOffset, dst);
  else crop_channels(pair, prep.cameras, row0, col0, dst);
  norb_jitter(dst, norb_channels(prep.cameras), prep, ub, uc);
  norb_standardize(dst, norb_channels(prep.cameras), prep);
}

void norb_standardize(float* dst, int channels, const NorbPrep& prep) {
  if (prep.standardize) standardize_pixels(dst, channels * kNorbCropPixels);
}

void standardize_pixels(float* dst, int n) {
  double sum = 0, sq = 0;
  for (int p = 0; p < n; ++p) sum += dst[p];
  const double mean = sum / n;
  for (int p = 0; p < n; ++p) sq += (dst[p] - mean) * (dst[p] - mean);
  const double scale = 1.0 / std::max(std::sqrt(sq / n), 1.0 / std::sqrt(double(n)));
  for (int p = 0; p < n; ++p) dst[p] = float((dst[p] - mean) * scale);
}

void norb_jitter(float* dst, int channels, const NorbPrep& prep, float ub, float uc) {
  if (prep.max_brightness <= 0.f && prep.max_contrast <= 0.f) return;
  const float brightness = prep.max_brightness * (2.f * ub - 1.f);
  const float contrast = 1.f + prep.max_contrast * (2.f * uc - 1.f);
  for (int ch = 0; ch < channels; ++ch) {
    float* x = dst + ch * kNorbCropPixels;
    double sum = 0;
    for (int p = 0; p < kNorbCropPixels; ++p) sum += x[p];
    const float mean = float(sum / kNorbCropPixels);
    for (int p = 0; p < kNorbCropPixels; ++p)
      x[p] = std::clamp((x[p] - mean) * contrast + mean + brightness, 0.f, 1.f);
  }
}

NorbBatcher::NorbBatcher(const NorbSet& set, NorbPrep prep) : set_(&set), prep_(prep), pair_(kNorbPairBytes) {}

void NorbBatcher::eval_batch(const int* idx, int n, float* dst) {
  const size_t stride = size_t(channels()) * kNorbCropPixels;
  for (int b = 0; b < n; ++b) {
    set_->read_pair(idx[b], pair_.data());
    norb_eval_sample(pair_.data(), prep_, dst + b * stride);
  }
}

void NorbBatcher::train_batch(const int* idx, int n, uint64_t seed, uint64_t epoch, float* dst) {
  const size_t stride = size_t(channels()) * kNorbCropPixels;
  for (int b = 0; b < n; ++b) {
    set_->read_pair(idx[b], pair_.data());
    Stream rng = norb_augment_stream(seed, epoch, uint64_t(idx[b]));
    norb_train_sample(pair_.data(), prep_, rng, dst + b * stride);
  }
}

// ---- Splits (Hinton, Sabour & Frosst 2018, section 5.1).

namespace {

bool paper_train_azimuth(int a) { return a >= 30 || a <= 4; }  // 300..340 and 0..40 degrees
bool paper_train_elevation(int e) { return e <= 2; }           // 30, 35, 40 degrees

template <class Pred>
NorbSplit split_by(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test, Pred familiar) {
  NorbSplit s;
  for (int i = 0; i < int(train.size()); ++i)
    if (familiar(train[size_t(i)])) s.train.push_back(i);
  for (int i = 0; i < int(test.size()); ++i) (familiar(test[size_t(i)]) ? s.familiar : s.novel).push_back(i);
  return s;
}

}  // namespace

NorbSplit norb_split_azimuth(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test) {
  return split_by(train, test, [](const NorbInfo& r) { return paper_train_azimuth(r.azimuth); });
}

NorbSplit norb_split_elevation(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test) {
  return split_by(train, test, [](const NorbInfo& r) { return paper_train_elevation(r.elevation); });
}

NorbSplit norb_split_full(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test) {
  return split_by(train, test, [](const NorbInfo&) { return true; });
}

NorbSplit norb_split_window(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test,
                            const std::vector<int>& train_azimuths, const std::vector<int>& heldout_azimuths) {
  auto in = [](const std::vector<int>& codes, const NorbInfo& r) {
    return std::find(codes.begin(), codes.end(), r.azimuth) != codes.end();
  };
  NorbSplit s = split_by(train, test, [&](const NorbInfo& r) { return in(train_azimuths, r); });
  s.novel.clear();
  for (int i = 0; i < int(test.size()); ++i)
    if (in(heldout_azimuths, test[size_t(i)])) s.novel.push_back(i);
  return s;
}

}  // namespace vg
