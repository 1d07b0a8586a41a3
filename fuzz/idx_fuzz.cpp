// libFuzzer target for the IDX reader (data/idx.h): every input must end in an
// IdxError or in images / labels that hold exactly what the file says.
// Built and run by tools/fuzz.sh idx (clang++-14 -fsanitize=fuzzer,address,undefined).
//
// One input is one file: byte 0 says which reader takes it (even: images,
// odd: labels), the rest is the file, plain or gzipped. The seeds are small
// valid files from the project's writer, each plain and gzipped, so mutations
// land in IDX headers, in gzip headers and in deflate blocks alike.
//
// A finding is: a sanitizer report; any exception other than IdxError; an
// IdxError whose message is not one line naming the file; a parsed plain file
// whose pixels or labels differ from its bytes, or whose sizes disagree with
// its header; or one allocation larger than the file allows while the reader
// runs: the file's size plus 1 KiB for a plain file; for a gzipped one,
// deflate's largest ratio (1032:1) times it (the reader checks the header
// against the gzip trailer and that ratio before it allocates the output), or
// zlib's own 32 KiB window if that is larger, plus 1 KiB.
//
// `idx_fuzz --write-seeds=DIR` writes the seed corpus instead of fuzzing
// (libFuzzer ignores flags that start with "--").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/idx.h"
#include "fuzz/fuzz_common.h"

namespace {

using namespace vg;
using Bytes = std::vector<uint8_t>;

constexpr size_t kAllocSlack = 1024;  // names, error strings
constexpr size_t kDeflateRatio = 1032;
constexpr size_t kZlibWindow = size_t(1) << 15;  // inflate's sliding window, one allocation

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "idx_fuzz: FINDING: %s\n", what);
  std::abort();
}

bool gzipped(const Bytes& f) { return f.size() >= 2 && f[0] == 0x1f && f[1] == 0x8b; }

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// What the reader promises of a plain file it accepts.
void check_plain(const Bytes& f, bool images, size_t data_bytes, const uint8_t* data) {
  const size_t header = images ? 16 : 8;
  if (f.size() != header + data_bytes) finding("accepted a plain file whose size is not its header's");
  if (f[0] != 0 || f[1] != 0 || f[2] != kIdxUbyte || f[3] != (images ? 3 : 1)) finding("accepted a wrong magic");
  uint64_t product = 1;
  for (size_t k = 0; k < (images ? 3u : 1u); ++k) product *= be32(f.data() + 4 + 4 * k);
  if (product != data_bytes) finding("the data's size is not the dimensions' product");
  if (data_bytes > 0 && std::memcmp(data, f.data() + header, data_bytes) != 0) finding("the data differs from the file");
}

void check_error(const IdxError& e) {
  const std::string m = e.what();
  if (m.find('\n') != std::string::npos) finding("an IdxError message spans lines");
  if (m.rfind("fuzz: ", 0) != 0 || m.size() <= 6) finding("an IdxError message does not start with the file's name");
}

void write_seeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  int written = 0;
  auto seed = [&](const std::string& name, uint8_t which, const Bytes& file) {
    for (bool gz : {false, true}) {
      Bytes in = {which};
      const Bytes body = gz ? idx_gzip(file) : file;
      in.insert(in.end(), body.begin(), body.end());
      fuzz::write_file("idx_fuzz", std::filesystem::path(dir) / (name + (gz ? "_gz" : "")), in);
      ++written;
    }
  };
  for (int n : {1, 3}) {
    IdxImages im{n, 2, 3, Bytes(size_t(n) * 6)};
    for (size_t k = 0; k < im.pixels.size(); ++k) im.pixels[k] = uint8_t(37 * k + 11);
    seed("images_n" + std::to_string(n), 0, idx_encode_images(im));
    Bytes labels(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) labels[size_t(i)] = uint8_t(9 - i);
    seed("labels_n" + std::to_string(n), 1, idx_encode_labels(labels));
  }
  std::printf("idx_fuzz: %d seeds in %s\n", written, dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::initialize(*argc, *argv, write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool images = data[0] % 2 == 0;
  const Bytes file(data + 1, data + size);  // its own exact-size block, for ASan
  const size_t bound =
      (gzipped(file) ? std::max(kDeflateRatio * file.size(), kZlibWindow) : file.size()) + kAllocSlack;
  fuzz::largest = 0;
  fuzz::watch = true;
  try {
    if (images) {
      const IdxImages im = idx_parse_images(file, "fuzz");
      fuzz::watch = false;
      if (im.pixels.size() != size_t(im.count) * size_t(im.rows) * size_t(im.cols))
        finding("the pixels' size is not count x rows x columns");
      if (!gzipped(file)) check_plain(file, true, im.pixels.size(), im.pixels.data());
    } else {
      const Bytes labels = idx_parse_labels(file, "fuzz");
      fuzz::watch = false;
      if (!gzipped(file)) check_plain(file, false, labels.size(), labels.data());
    }
  } catch (const IdxError& e) {
    fuzz::watch = false;
    check_error(e);
  }
  fuzz::watch = false;
  if (fuzz::largest > bound) finding("an allocation larger than the file allows");
  return 0;
}
