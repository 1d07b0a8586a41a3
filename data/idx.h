// IDX files: the format of MNIST, Fashion-MNIST, KMNIST and EMNIST. A
// validating reader, and a writer of the same format for tests and fixtures.
//
// The format, as LeCun & Cortes's MNIST page (yann.lecun.com/exdb/mnist/)
// states it and zalandoresearch/fashion-mnist's utils/mnist_reader.py reads it:
//   byte 0, 1  zero
//   byte 2     element type: 0x08 unsigned byte, 0x09 signed byte, 0x0B int16,
//              0x0C int32, 0x0D float32, 0x0E float64
//   byte 3     rank
//   rank x uint32, big-endian: the dimensions
//   data, last index fastest, big-endian elements.
// Images: rank 3, N x rows x columns unsigned bytes (0 background, 255 ink);
// labels: rank 1, N unsigned bytes. Distributions ship each file gzipped
// (Debian's dataset-fashion-mnist, as Zalando does): a file starting with
// gzip's magic 1f 8b is inflated with zlib, whatever its name.
//
// Everything is checked before the data is allocated: the magic, the rank and
// each dimension, the size the header implies against the file's size (for a
// gzipped file, against the gzip trailer's length, and no more than deflate's
// largest ratio allows), then the stream's integrity (zlib checks the CRC) and
// that it ends exactly where the header says. docs/data.md lists the checks.
#pragma once
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace vg {

// Every problem with a file: one line naming the file and what is wrong.
struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr uint8_t kIdxUbyte = 0x08;

struct IdxImages {
  int count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count x rows x cols, row-major
  const uint8_t* image(int i) const { return pixels.data() + size_t(i) * size_t(rows) * size_t(cols); }
};

// One file's bytes, plain or gzipped; `name` starts every error message.
IdxImages idx_parse_images(std::span<const uint8_t> file, const std::string& name);
std::vector<uint8_t> idx_parse_labels(std::span<const uint8_t> file, const std::string& name);

// A directory's four files, as every MNIST-format distribution names them;
// each is read as `name` or, when only that exists, `name.gz`.
struct IdxFiles {
  std::string train_images, train_labels, test_images, test_labels;
};
IdxFiles idx_files(const std::string& dir);

struct IdxPart {
  IdxImages images;
  std::vector<uint8_t> labels;
  int size() const { return images.count; }
};
struct IdxData {
  IdxPart train, test;
  int classes = 0;
  int side() const { return train.images.rows; }
};
// Both parts of a directory, checked against each other: image and label
// counts agree, the images are square and of one size in both parts, and every
// label lies below `classes` (0: one more than the largest training label,
// for an IDX set whose classes viewgap does not know).
IdxData idx_load_dir(const std::string& dir, int classes);

// ---- The writer: IDX bytes for tests, fixtures and the fuzz target's seeds.
std::vector<uint8_t> idx_encode_images(const IdxImages& images);
std::vector<uint8_t> idx_encode_labels(std::span<const uint8_t> labels);
// `plain` as one gzip member (zlib's default level; the bytes are zlib's, the
// same for the same input).
std::vector<uint8_t> idx_gzip(std::span<const uint8_t> plain);
// Writes `bytes` to `path` through a temporary file renamed into place.
void idx_write_file(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace vg
