// IDX reader and writer (idx.h says the format and where it is documented).
#include "data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/fd.h"
#include "core/read_file.h"

namespace vg {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) { throw IdxError(name + ": " + what); }

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}
void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int k = 3; k >= 0; --k) out.push_back(uint8_t(v >> (8 * k)));
}
uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

const char* type_name(uint8_t t) {
  switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
  }
  return "no IDX type";
}

std::string hex_bytes(const uint8_t* p, size_t n) {
  std::string s = "0x";
  char b[3];
  for (size_t k = 0; k < n; ++k) {
    std::snprintf(b, sizeof b, "%02X", p[k]);
    s += b;
  }
  return s;
}

// The rank-3 images file and the rank-1 labels file.
enum class Kind { images, labels };
int rank_of(Kind k) { return k == Kind::images ? 3 : 1; }
const char* shape_text(Kind k) { return k == Kind::images ? "N x rows x columns" : "N"; }

// The largest header either kind has: the magic and three dimensions.
constexpr size_t kMaxHeader = 4 + 4 * 3;

struct Header {
  size_t header_bytes = 0;
  uint64_t total_bytes = 0;  // header and data
  std::vector<uint32_t> dims;
};

// Checks a header (`head`: the file's first plain bytes, up to kMaxHeader of
// them) and returns what it says; the caller checks the size it implies.
Header check_header(std::span<const uint8_t> head, Kind kind, const std::string& name) {
  if (head.size() < 4) fail(name, std::to_string(head.size()) + " bytes, too short for the 4-byte IDX magic");
  const uint8_t* m = head.data();
  if (m[0] != 0 || m[1] != 0)
    fail(name, "magic " + hex_bytes(m, 4) + " is not an IDX file's (it starts with two zero bytes)");
  if (m[2] != kIdxUbyte)
    fail(name, "magic " + hex_bytes(m, 4) + ": elements of type 0x" + hex_bytes(m + 2, 1).substr(2) + " (" +
                   type_name(m[2]) + "), expected 0x08 (unsigned byte)");
  const int rank = m[3];
  if (rank != rank_of(kind))
    fail(name, "magic " + hex_bytes(m, 4) + ": rank " + std::to_string(rank) + ", expected " +
                   std::to_string(rank_of(kind)) + " (" + shape_text(kind) + ")");
  Header h;
  h.header_bytes = 4 + 4 * size_t(rank);
  if (head.size() < h.header_bytes)
    fail(name, std::to_string(head.size()) + " bytes, too short for the " + std::to_string(h.header_bytes) +
                   "-byte header of rank " + std::to_string(rank));
  uint64_t data = 1;
  for (int k = 0; k < rank; ++k) {
    const uint32_t d = be32(m + 4 + 4 * k);
    // int: counts and sides index with int everywhere else.
    if (d == 0 || d > uint32_t(std::numeric_limits<int>::max()))
      fail(name, "dimension " + std::to_string(k) + " is " + std::to_string(d) + " (" + shape_text(kind) +
                     "; each must be 1.." + std::to_string(std::numeric_limits<int>::max()) + ")");
    if (__builtin_mul_overflow(data, uint64_t(d), &data)) fail(name, "the dimensions' product overflows 64 bits");
    h.dims.push_back(d);
  }
  if (__builtin_add_overflow(data, uint64_t(h.header_bytes), &h.total_bytes))
    fail(name, "the dimensions' product overflows 64 bits");
  return h;
}

std::string dims_text(const Header& h) {
  std::string s;
  for (uint32_t d : h.dims) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

bool is_gzip(std::span<const uint8_t> f) { return f.size() >= 2 && f[0] == 0x1f && f[1] == 0x8b; }

// Deflate's largest ratio: 258 bytes from a 1-bit code at best, i.e. at most
// 1032 output bytes for an input byte (zlib's FAQ gives 1032:1).
constexpr uint64_t kMaxDeflateRatio = 1032;

struct Inflater {
  z_stream z{};
  bool open = false;
  ~Inflater() {
    if (open) inflateEnd(&z);
  }
};

// A gzipped file's plain bytes: the header is inflated first and checked, the
// whole is allocated only after its size agrees with the gzip trailer.
std::vector<uint8_t> gunzip(std::span<const uint8_t> file, Kind kind, const std::string& name, Header* h) {
  // A gzip member is at least its 10-byte header and 8-byte trailer.
  if (file.size() < 18) fail(name, "gzip stream truncated: " + std::to_string(file.size()) + " bytes");
  Inflater in;
  // 16 + MAX_WBITS: a gzip wrapper, whose CRC-32 and length zlib checks at the end.
  if (inflateInit2(&in.z, 16 + MAX_WBITS) != Z_OK) fail(name, "zlib cannot start inflating");
  in.open = true;
  in.z.next_in = const_cast<Bytef*>(file.data());
  in.z.avail_in = uInt(std::min<size_t>(file.size(), std::numeric_limits<uInt>::max()));
  size_t fed = in.z.avail_in;
  auto feed = [&] {  // files larger than 4 GiB reach zlib in pieces
    if (in.z.avail_in == 0 && fed < file.size()) {
      in.z.next_in = const_cast<Bytef*>(file.data() + fed);
      in.z.avail_in = uInt(std::min<size_t>(file.size() - fed, std::numeric_limits<uInt>::max()));
      fed += in.z.avail_in;
    }
  };
  auto corrupt = [&](int rc) -> std::string {
    if (rc == Z_DATA_ERROR) return std::string("corrupt gzip stream (zlib: ") + (in.z.msg ? in.z.msg : "data error") + ")";
    if (rc == Z_MEM_ERROR) return "zlib is out of memory";
    return "corrupt gzip stream (zlib error " + std::to_string(rc) + ")";
  };
  uint8_t head[kMaxHeader];
  size_t got = 0;
  int rc = Z_OK;
  while (got < kMaxHeader && rc != Z_STREAM_END) {
    feed();
    in.z.next_out = head + got;
    in.z.avail_out = uInt(kMaxHeader - got);
    rc = inflate(&in.z, Z_SYNC_FLUSH);
    got = kMaxHeader - in.z.avail_out;
    if (rc == Z_BUF_ERROR && in.z.avail_in == 0 && fed == file.size())
      fail(name, "gzip stream truncated inside the IDX header");
    if (rc != Z_OK && rc != Z_STREAM_END) fail(name, corrupt(rc));
  }
  *h = check_header(std::span<const uint8_t>(head, got), kind, name);
  const uint32_t trailer = le32(file.data() + file.size() - 4);  // the length mod 2^32
  if (uint32_t(h->total_bytes) != trailer)
    fail(name, "the header says " + dims_text(*h) + " (" + std::to_string(h->total_bytes) +
                   " bytes), the gzip trailer " + std::to_string(trailer) + " bytes (mod 2^32): truncated or not one gzip member");
  if (h->total_bytes / kMaxDeflateRatio > file.size())
    fail(name, "the header says " + dims_text(*h) + " (" + std::to_string(h->total_bytes) + " bytes), more than " +
                   std::to_string(file.size()) + " gzipped bytes can hold");
  if (got > h->total_bytes)
    fail(name, "the gzip stream holds more than the " + std::to_string(h->total_bytes) + " bytes the header says (" +
                   dims_text(*h) + ")");
  std::vector<uint8_t> plain(size_t(h->total_bytes));
  std::memcpy(plain.data(), head, got);
  size_t out = got;
  // One byte past the end: a stream that goes on past the header's size fails below.
  uint8_t extra = 0;
  while (rc != Z_STREAM_END) {
    feed();
    const bool past = out == plain.size();
    in.z.next_out = past ? &extra : plain.data() + out;
    in.z.avail_out = past ? 1 : uInt(std::min<size_t>(plain.size() - out, std::numeric_limits<uInt>::max()));
    const uInt before = in.z.avail_out;
    rc = inflate(&in.z, Z_NO_FLUSH);
    const size_t produced = before - in.z.avail_out;
    if (past && produced > 0)
      fail(name, "the gzip stream holds more than the " + std::to_string(h->total_bytes) + " bytes the header says (" +
                     dims_text(*h) + ")");
    out += produced;
    if (rc == Z_BUF_ERROR && in.z.avail_in == 0 && fed == file.size())
      fail(name, "gzip stream truncated after " + std::to_string(out) + " of " + std::to_string(h->total_bytes) +
                     " bytes");
    if (rc != Z_OK && rc != Z_STREAM_END) fail(name, corrupt(rc));
  }
  if (out != plain.size())
    fail(name, "the gzip stream ends after " + std::to_string(out) + " bytes, the header says " +
                   std::to_string(h->total_bytes) + " (" + dims_text(*h) + ")");
  if (in.z.avail_in > 0 || fed < file.size())
    fail(name, std::to_string(file.size() - fed + in.z.avail_in) + " bytes follow the gzip stream");
  return plain;
}

// The data bytes of a file of `kind`, header checked against the size.
std::vector<uint8_t> parse(std::span<const uint8_t> file, Kind kind, const std::string& name, Header* h) {
  if (is_gzip(file)) {
    std::vector<uint8_t> plain = gunzip(file, kind, name, h);
    plain.erase(plain.begin(), plain.begin() + std::ptrdiff_t(h->header_bytes));
    return plain;
  }
  *h = check_header(file.first(std::min(file.size(), kMaxHeader)), kind, name);
  if (file.size() != h->total_bytes)
    fail(name, std::to_string(file.size()) + " bytes, the header says " + dims_text(*h) + " (" +
                   std::to_string(h->total_bytes) + " bytes)" + (file.size() < h->total_bytes ? ": truncated" : ""));
  return {file.begin() + std::ptrdiff_t(h->header_bytes), file.end()};
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

IdxImages idx_parse_images(std::span<const uint8_t> file, const std::string& name) {
  Header h;
  IdxImages out;
  out.pixels = parse(file, Kind::images, name, &h);
  out.count = int(h.dims[0]);
  out.rows = int(h.dims[1]);
  out.cols = int(h.dims[2]);
  return out;
}

std::vector<uint8_t> idx_parse_labels(std::span<const uint8_t> file, const std::string& name) {
  Header h;
  return parse(file, Kind::labels, name, &h);
}

namespace {
// A file of the set, its read errors as the reader's own.
std::vector<uint8_t> read_idx_file(const std::string& path) {
  try {
    return read_regular_file(path);
  } catch (const FileReadError& e) {
    throw IdxError(e.what());  // already "PATH: what is wrong"
  }
}
}  // namespace

IdxFiles idx_files(const std::string& dir) {
  const std::string base = (dir.empty() || dir.back() == '/') ? dir : dir + "/";
  auto pick = [&](const char* stem) {
    const std::string plain = base + stem;
    if (exists(plain) || !exists(plain + ".gz")) return plain;  // a missing file is named as the plain one
    return plain + ".gz";
  };
  return {pick("train-images-idx3-ubyte"), pick("train-labels-idx1-ubyte"), pick("t10k-images-idx3-ubyte"),
          pick("t10k-labels-idx1-ubyte")};
}

IdxData idx_load_dir(const std::string& dir, int classes) {
  const IdxFiles f = idx_files(dir);
  IdxData d;
  auto part = [](const std::string& images, const std::string& labels) {
    IdxPart p;
    p.images = idx_parse_images(read_idx_file(images), images);
    p.labels = idx_parse_labels(read_idx_file(labels), labels);
    if (size_t(p.images.count) != p.labels.size())
      fail(labels, std::to_string(p.labels.size()) + " labels for the " + std::to_string(p.images.count) +
                       " images of " + images);
    if (p.images.rows != p.images.cols)
      fail(images, "images of " + std::to_string(p.images.rows) + " x " + std::to_string(p.images.cols) +
                       " pixels: viewgap takes square images");
    return p;
  };
  d.train = part(f.train_images, f.train_labels);
  d.test = part(f.test_images, f.test_labels);
  if (d.test.images.rows != d.train.images.rows)
    fail(f.test_images, "images of " + std::to_string(d.test.images.rows) + " x " + std::to_string(d.test.images.cols) +
                            " pixels, the training images " + std::to_string(d.train.images.rows) + " x " +
                            std::to_string(d.train.images.cols));
  const std::string& train_labels = f.train_labels;
  d.classes = classes > 0 ? classes : 1 + *std::max_element(d.train.labels.begin(), d.train.labels.end());
  for (const auto& [labels, name] : {std::pair{&d.train.labels, &train_labels}, {&d.test.labels, &f.test_labels}})
    for (size_t i = 0; i < labels->size(); ++i)
      if ((*labels)[i] >= d.classes)
        fail(*name, "label " + std::to_string((*labels)[i]) + " at record " + std::to_string(i) + " is out of range 0.." +
                        std::to_string(d.classes - 1) +
                        (classes > 0 ? " (the data's " + std::to_string(classes) + " classes)" : " (the training labels' range)"));
  return d;
}

// ---- The writer.

std::vector<uint8_t> idx_encode_images(const IdxImages& images) {
  std::vector<uint8_t> out = {0, 0, kIdxUbyte, 3};
  for (int d : {images.count, images.rows, images.cols}) put_be32(out, uint32_t(d));
  out.insert(out.end(), images.pixels.begin(), images.pixels.end());
  return out;
}

std::vector<uint8_t> idx_encode_labels(std::span<const uint8_t> labels) {
  std::vector<uint8_t> out = {0, 0, kIdxUbyte, 1};
  put_be32(out, uint32_t(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

std::vector<uint8_t> idx_gzip(std::span<const uint8_t> plain) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IdxError("idx_gzip: zlib cannot start deflating");
  std::vector<uint8_t> out(deflateBound(&z, uLong(plain.size())));
  z.next_in = const_cast<Bytef*>(plain.data());
  z.avail_in = uInt(plain.size());
  z.next_out = out.data();
  z.avail_out = uInt(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.erase(out.begin() + std::ptrdiff_t(z.total_out), out.end());  // shrinks: what deflate wrote
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw IdxError("idx_gzip: zlib could not finish the stream");
  return out;
}

void idx_write_file(const std::string& path, std::span<const uint8_t> bytes) {
  const std::string tmp = path + ".tmp";
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (f.fd < 0) fail(tmp, std::string("cannot create: ") + std::strerror(errno));
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t w = ::write(f.fd, bytes.data() + at, bytes.size() - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      fail(tmp, std::string("cannot write: ") + std::strerror(err));
    }
    at += size_t(w);
  }
  if (::fsync(f.fd) != 0 || ::close(f.fd) != 0) {
    f.fd = -1;
    ::unlink(tmp.c_str());
    fail(tmp, std::string("cannot write: ") + std::strerror(errno));
  }
  f.fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(path, std::string("cannot rename into place: ") + std::strerror(err));
  }
}

}  // namespace vg
