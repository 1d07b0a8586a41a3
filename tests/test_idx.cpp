// The IDX reader (data/idx.h): round trips through the writer, plain and
// gzipped; every check the header names, each with a file that fails only it;
// files that are not regular; a deterministic mutation sweep.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

#include "core/read_file.h"
#include "core/rng.h"
#include "data/idx.h"
#include "data/protocol.h"
#include "harness/run_flags.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using Bytes = std::vector<uint8_t>;

IdxImages sample_images(int n, int side, uint64_t tag) {
  IdxImages im{n, side, side, Bytes(size_t(n) * side * side)};
  Stream s(3, Purpose::Test, tag);
  for (uint8_t& b : im.pixels) b = uint8_t(s.below(256));
  return im;
}
Bytes sample_labels(int n, int classes) {
  Bytes l(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) l[size_t(i)] = uint8_t((i * 7) % classes);
  return l;
}

// The message `f` throws; "" when it does not throw.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const IdxError& e) {
    return e.what();
  }
  return "";
}
std::string images_error(const Bytes& b) { return error_of([&] { idx_parse_images(b, "fx"); }); }
std::string labels_error(const Bytes& b) { return error_of([&] { idx_parse_labels(b, "fx"); }); }

void put_be32(Bytes& b, size_t at, uint32_t v) {
  for (int k = 0; k < 4; ++k) b[at + size_t(k)] = uint8_t(v >> (8 * (3 - k)));
}

std::string fresh_dir(const std::string& name) {
  const std::string d = test::temp_dir() + "idx_" + name + "/";
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// A directory holding the four files of a small set (gzipped or not).
std::string write_set(const std::string& name, bool gz, int n_train = 12, int n_test = 5, int side = 4) {
  const std::string d = fresh_dir(name);
  const IdxFiles f = idx_files(d);
  auto put = [&](const std::string& path, const Bytes& plain) {
    idx_write_file(gz ? path + ".gz" : path, gz ? idx_gzip(plain) : plain);
  };
  put(f.train_images, idx_encode_images(sample_images(n_train, side, 1)));
  put(f.train_labels, idx_encode_labels(sample_labels(n_train, 10)));
  put(f.test_images, idx_encode_images(sample_images(n_test, side, 2)));
  put(f.test_labels, idx_encode_labels(sample_labels(n_test, 10)));
  return d;
}

TEST(Idx, RoundTripPlainAndGzipped) {
  const IdxImages im = sample_images(5, 6, 9);
  const Bytes labels = sample_labels(5, 10);
  for (bool gz : {false, true}) {
    const Bytes fi = idx_encode_images(im), fl = idx_encode_labels(labels);
    const IdxImages back = idx_parse_images(gz ? idx_gzip(fi) : fi, "fx");
    EXPECT_EQ(back.count, 5);
    EXPECT_EQ(back.rows, 6);
    EXPECT_EQ(back.cols, 6);
    EXPECT_EQ(back.pixels, im.pixels);
    EXPECT_EQ(idx_parse_labels(gz ? idx_gzip(fl) : fl, "fx"), labels);
  }
}

TEST(Idx, HeaderIsBigEndianAsTheFormatSays) {
  // Bytes written by hand, not by the writer: 2 images of 1 x 2, labels 3, 9.
  const Bytes images = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 10, 20, 30, 40};
  const IdxImages im = idx_parse_images(images, "fx");
  EXPECT_EQ(im.count, 2);
  EXPECT_EQ(im.rows, 1);
  EXPECT_EQ(im.cols, 2);
  EXPECT_EQ(im.pixels, (Bytes{10, 20, 30, 40}));
  EXPECT_EQ(idx_parse_labels(Bytes{0, 0, 8, 1, 0, 0, 0, 2, 3, 9}, "fx"), (Bytes{3, 9}));
}

TEST(Idx, EachHeaderCheckRefusesItsOwnFault) {
  const Bytes good = idx_encode_images(sample_images(3, 4, 5));
  ASSERT_EQ(images_error(good), "");
  struct Case {
    const char* what;
    std::function<void(Bytes&)> spoil;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"empty", [](Bytes& b) { b.clear(); }, "too short for the 4-byte IDX magic"},
      {"not IDX", [](Bytes& b) { b[0] = 0x1E; }, "is not an IDX file's"},
      {"int32 elements", [](Bytes& b) { b[2] = 0x0C; }, "type 0x0C (int32), expected 0x08"},
      {"rank 1 images", [](Bytes& b) { b[3] = 1; }, "rank 1, expected 3"},
      {"short header", [](Bytes& b) { b.resize(10); }, "too short for the 16-byte header"},
      {"zero images", [](Bytes& b) { put_be32(b, 4, 0); }, "dimension 0 is 0"},
      {"huge side", [](Bytes& b) { put_be32(b, 8, 0x80000000u); }, "dimension 1 is 2147483648"},
      {"truncated", [](Bytes& b) { b.pop_back(); }, "truncated"},
      {"trailing byte", [](Bytes& b) { b.push_back(0); }, "the header says 3 x 4 x 4 (64 bytes)"},
      {"count larger than the data", [](Bytes& b) { put_be32(b, 4, 4); }, "truncated"},
  };
  for (const Case& c : cases) {
    Bytes b = good;
    c.spoil(b);
    const std::string e = images_error(b);
    EXPECT_NE(e.find(c.says), std::string::npos) << c.what << ": " << e;
    EXPECT_EQ(e.rfind("fx: ", 0), 0u) << c.what << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << c.what;
  }
  Bytes labels = idx_encode_labels(sample_labels(4, 10));
  labels[3] = 3;
  EXPECT_NE(labels_error(labels).find("rank 3, expected 1"), std::string::npos) << labels_error(labels);
}

TEST(Idx, GzipFaultsAreNamed) {
  const Bytes plain = idx_encode_images(sample_images(4, 8, 6));
  const Bytes gz = idx_gzip(plain);
  ASSERT_EQ(images_error(gz), "");
  Bytes cut = gz;
  cut.resize(gz.size() / 2);
  EXPECT_NE(images_error(cut).find("the gzip trailer"), std::string::npos) << images_error(cut);
  // Cut, with the trailer's length still right: the stream itself runs out.
  Bytes cut_keep_trailer(gz.begin(), gz.begin() + std::ptrdiff_t(gz.size() / 2));
  cut_keep_trailer.insert(cut_keep_trailer.end(), gz.end() - 4, gz.end());
  const std::string e1 = images_error(cut_keep_trailer);
  EXPECT_TRUE(e1.find("truncated") != std::string::npos || e1.find("corrupt gzip") != std::string::npos) << e1;
  Bytes crc = gz;
  crc[crc.size() - 6] ^= 0x40;  // inside the CRC-32
  EXPECT_NE(images_error(crc).find("corrupt gzip stream (zlib: incorrect data check)"), std::string::npos)
      << images_error(crc);
  Bytes trailing = gz;
  trailing.push_back(0);  // moves the trailer: caught by its length
  EXPECT_NE(images_error(trailing).find("not one gzip member"), std::string::npos) << images_error(trailing);
  trailing.pop_back();  // bytes after the stream that end like its trailer: caught after inflating
  trailing.insert(trailing.end(), gz.end() - 4, gz.end());
  EXPECT_NE(images_error(trailing).find("4 bytes follow the gzip stream"), std::string::npos) << images_error(trailing);
  // A header that claims far more than the stream: refused before allocating it.
  Bytes big = plain;
  put_be32(big, 4, 1u << 30);
  const std::string e2 = images_error(idx_gzip(big));
  EXPECT_NE(e2.find("the gzip trailer"), std::string::npos) << e2;
  // A plain stream longer than its header says, inside the header's first bytes.
  Bytes long_labels = idx_encode_labels(sample_labels(1, 10));
  long_labels.insert(long_labels.end(), 12, 0);
  EXPECT_NE(labels_error(idx_gzip(long_labels)).find("the gzip trailer"), std::string::npos);
}

TEST(Idx, LoadsADirectoryPlainOrGzipped) {
  for (bool gz : {false, true}) {
    const std::string d = write_set(gz ? "gz" : "plain", gz);
    const IdxData data = idx_load_dir(d, 10);
    EXPECT_EQ(data.train.size(), 12);
    EXPECT_EQ(data.test.size(), 5);
    EXPECT_EQ(data.side(), 4);
    EXPECT_EQ(data.classes, 10);
    EXPECT_EQ(data.train.images.pixels, sample_images(12, 4, 1).pixels);
    EXPECT_EQ(data.test.labels, sample_labels(5, 10));
    // Classes from the training labels where the data's are not known.
    EXPECT_EQ(idx_load_dir(d, 0).classes, 10);
  }
}

TEST(Idx, DirectoryFaultsNameTheFile) {
  const std::string d = write_set("faults", false);
  const IdxFiles f = idx_files(d);
  auto load_error = [&] { return error_of([&] { idx_load_dir(d, 10); }); };
  ASSERT_EQ(load_error(), "");
  // Counts that disagree.
  idx_write_file(f.test_labels, idx_encode_labels(sample_labels(4, 10)));
  EXPECT_EQ(load_error(), f.test_labels + ": 4 labels for the 5 images of " + f.test_images);
  // A label out of range of the data's classes, and of the training labels' range.
  Bytes bad = sample_labels(5, 10);
  bad[3] = 10;
  idx_write_file(f.test_labels, idx_encode_labels(bad));
  EXPECT_EQ(load_error(), f.test_labels + ": label 10 at record 3 is out of range 0..9 (the data's 10 classes)");
  bad[3] = 9;
  idx_write_file(f.test_labels, idx_encode_labels(bad));
  idx_write_file(f.train_labels, idx_encode_labels(sample_labels(12, 5)));
  EXPECT_NE(error_of([&] { idx_load_dir(d, 0); }).find("out of range 0..4 (the training labels' range)"), std::string::npos);
  idx_write_file(f.train_labels, idx_encode_labels(sample_labels(12, 10)));
  // Images of another side in the test part; non-square images.
  idx_write_file(f.test_images, idx_encode_images(sample_images(5, 5, 2)));
  EXPECT_NE(load_error().find("5 x 5 pixels, the training images 4 x 4"), std::string::npos) << load_error();
  IdxImages wide{5, 4, 3, Bytes(60)};
  idx_write_file(f.test_images, idx_encode_images(wide));
  EXPECT_NE(load_error().find("images of 4 x 3 pixels: viewgap takes square images"), std::string::npos);
  // A missing file.
  std::filesystem::remove(f.test_images);
  EXPECT_NE(load_error().find(f.test_images + ": cannot open: No such file"), std::string::npos) << load_error();
}

TEST(Idx, RefusesWhatIsNotARegularFileWithoutWaiting) {
  const std::string d = write_set("kinds", false);
  const IdxFiles f = idx_files(d);
  std::filesystem::remove(f.train_labels);
  ASSERT_EQ(::mkfifo(f.train_labels.c_str(), 0600), 0);  // a read would wait for a writer
  EXPECT_EQ(error_of([&] { idx_load_dir(d, 10); }), f.train_labels + ": is a FIFO, not a regular file");
  std::filesystem::remove(f.train_labels);
  std::filesystem::create_directory(f.train_labels);
  EXPECT_EQ(error_of([&] { idx_load_dir(d, 10); }), f.train_labels + ": is a directory, not a regular file");
}

TEST(Idx, PrefersThePlainFileAndFallsBackToGz) {
  const std::string d = fresh_dir("names");
  EXPECT_EQ(idx_files(d).train_images, d + "train-images-idx3-ubyte");  // neither: named plain
  idx_write_file(d + "train-images-idx3-ubyte.gz", {});
  EXPECT_EQ(idx_files(d).train_images, d + "train-images-idx3-ubyte.gz");
  idx_write_file(d + "train-images-idx3-ubyte", {});
  EXPECT_EQ(idx_files(d).train_images, d + "train-images-idx3-ubyte");
}

// Mutations of valid files, plain and gzipped: every one loads exactly what
// its bytes say or is refused with one line naming the file; none crashes.
TEST(IdxFuzz, MutatedFilesParseOrRefuse) {
  const Bytes plain = idx_encode_images(sample_images(3, 5, 8));
  const Bytes gz = idx_gzip(plain);
  int loaded = 0, refused = 0;
  std::set<std::string> kinds;
  for (int it = 0; it < 20000; ++it) {
    Stream rng(5, Purpose::Test, 0x1D7, uint64_t(it));
    Bytes b = rng.below(2) ? gz : plain;
    for (uint64_t m = 0, k = 1 + rng.below(3); m < k; ++m) {
      switch (rng.below(4)) {
        case 0: if (!b.empty()) b[rng.below(uint32_t(b.size()))] ^= uint8_t(1u << rng.below(8)); break;
        case 1: b.resize(rng.below(uint32_t(b.size() + 1))); break;
        case 2: b.push_back(uint8_t(rng.below(256))); break;
        default: if (b.size() > 4) b[rng.below(uint32_t(std::min<size_t>(b.size(), 16)))] = uint8_t(rng.below(256)); break;
      }
    }
    try {
      const IdxImages im = idx_parse_images(b, "fx");
      ASSERT_EQ(im.pixels.size(), size_t(im.count) * im.rows * im.cols) << it;
      if (!(b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b)) {
        ASSERT_TRUE(std::equal(im.pixels.begin(), im.pixels.end(), b.begin() + 16)) << it;
      }
      ++loaded;
    } catch (const IdxError& e) {
      const std::string m = e.what();
      ASSERT_EQ(m.rfind("fx: ", 0), 0u) << it << ": " << m;
      ASSERT_EQ(m.find('\n'), std::string::npos) << it;
      kinds.insert(m.substr(0, std::min<size_t>(m.size(), 24)));
      ++refused;
    }
  }
  EXPECT_GT(loaded, 500);  // pixel flips leave a plain file valid
  EXPECT_GT(refused, 10000);
  EXPECT_GE(kinds.size(), 8u);  // the mutations reach most of the checks
}

// A stopping rule takes a seeded twelfth of the training file for validation:
// disjoint from training, together all of it, the same for a seed and another
// for another seed; without a rule every training image trains. --validation
// on (the frontier's) takes the same part.
TEST(IdxSource, ValidationPartIsDrawnBySeed) {
  const std::string d = write_set("validation", false, 240, 30, 4);
  auto dataset = [&](uint64_t seed, bool rule, bool validation = false) {
    RunFlags f;
    f.data = "idx:" + d;
    if (rule) *run_flag(f, "stop-at-familiar") = "0.9";
    if (validation) f.validation = "on";
    int threads = 1;
    DataConfig cfg = validate_run(f, &threads).data;
    cfg.seed = seed;
    return make_dataset(cfg);
  };
  const Dataset all = dataset(1, false);
  EXPECT_EQ(all.train.size(), 240);
  EXPECT_EQ(all.validation.size(), 0);
  // Each image's bytes identify it (random 4 x 4 images do not repeat).
  auto image_set = [](const Split& s) {
    std::set<std::vector<float>> out;
    for (int i = 0; i < s.size(); ++i) out.insert(std::vector<float>(s.image(i), s.image(i) + s.pixels()));
    return out;
  };
  const Dataset a = dataset(1, true), b = dataset(2, true), a2 = dataset(1, true);
  EXPECT_EQ(a.validation.size(), 20);
  EXPECT_EQ(a.train.size(), 220);
  const auto train = image_set(a.train), val = image_set(a.validation);
  for (const auto& im : val) EXPECT_EQ(train.count(im), 0u);
  auto every = train;
  every.insert(val.begin(), val.end());
  EXPECT_EQ(every, image_set(all.train));
  EXPECT_EQ(a2.validation.images, a.validation.images);
  EXPECT_NE(b.validation.images, a.validation.images);
  const Dataset v = dataset(1, false, true);
  EXPECT_EQ(v.validation.images, a.validation.images);
  EXPECT_EQ(v.train.images, a.train.images);
}

// ---- The IDX sources through the command line.

// A small 28 x 28, 10-class set whose classes a model can tell apart: class c
// lights a bar at row 2c + 4, with noise, so every model learns something.
std::string write_learnable_set(const std::string& name, int n_train, int n_test) {
  const std::string d = fresh_dir(name);
  const IdxFiles f = idx_files(d);
  auto part = [](int n, uint64_t tag, Bytes* labels) {
    IdxImages im{n, 28, 28, Bytes(size_t(n) * 28 * 28)};
    Stream s(11, Purpose::Test, tag);
    for (int i = 0; i < n; ++i) {
      const int c = i % 10;
      labels->push_back(uint8_t(c));
      uint8_t* px = im.pixels.data() + size_t(i) * 784;
      for (int p = 0; p < 784; ++p) px[p] = uint8_t(s.below(60));
      for (int col = 4; col < 24; ++col) px[(2 * c + 4) * 28 + col] = uint8_t(200 + s.below(56));
    }
    return im;
  };
  Bytes train_labels, test_labels;
  idx_write_file(f.train_images + ".gz", idx_gzip(idx_encode_images(part(n_train, 1, &train_labels))));
  idx_write_file(f.train_labels + ".gz", idx_gzip(idx_encode_labels(train_labels)));
  idx_write_file(f.test_images, idx_encode_images(part(n_test, 2, &test_labels)));
  idx_write_file(f.test_labels, idx_encode_labels(test_labels));
  return d;
}

// Every registered model builds for 1 x 28 x 28 and 10 classes from the
// data's shape, trains and is evaluated; the run JSON records the source.
TEST(IdxSource, EveryRegisteredModelTrainsAtTheSetsShape) {
  const std::string d = write_learnable_set("models", 200, 50);
  const std::vector<std::string> trained = test::registered_models(true);
  for (const std::string& m : test::registered_models(false)) {
    const std::string json = test::temp_dir() + "idx_" + m + ".json";
    const bool steps = std::find(trained.begin(), trained.end(), m) != trained.end();
    const test::Outcome o = test::run("run --data idx:" + d + " --models " + m +
                                      (steps ? " --n-epochs 1 --batch-size 20" : "") + " --out-json " + json);
    ASSERT_EQ(o.code, 0) << m << ": " << o.err;
    EXPECT_NE(o.out.find("200 training images, 50 test images of 28 x 28, 10 classes"), std::string::npos) << m << o.out;
    const nlohmann::json j = nlohmann::json::parse(test::slurp(json));
    EXPECT_EQ(j["config"]["protocol"], "idx-standard") << m;
    EXPECT_EQ(j["config"]["data"]["classes"], 10) << m;
    EXPECT_EQ(j["config"]["data"]["side"], 28) << m;
  }
}

TEST(IdxSource, BadInputIsOneLineNamingTheFlagOrFile) {
  const std::string d = write_learnable_set("bad", 40, 20);
  const IdxFiles f = idx_files(d);
  auto refused = [](const std::string& args, const std::string& says) {
    const test::Outcome o = test::run(args);
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << args << ": " << o.err;
    EXPECT_NE(o.err.find(says), std::string::npos) << args << ": " << o.err;
  };
  refused("run --data idx:", "--data 'idx:': expected idx:DIR");
  refused("run --data idx:" + d + " --split paper-azimuth", "--split 'paper-azimuth': unknown split (expected standard, translation, rotation, scale, shear, affine)");
  refused("run --data idx:" + d + " --noise 0.1", "--noise '0.1': does not apply to --data idx:");
  refused("run --data idx:" + d + " --toy-instances 3", "--toy-instances '3'");
  refused("run --data idx:" + d + " --cameras first", "--cameras 'first'");
  refused("run --data idx:" + d + " --standardize maybe", "--standardize 'maybe': expected on or off");
  refused("run --data idx:" + d + "missing", "cannot open");
  // A broken file: named in the one line, before any training.
  Bytes labels = read_regular_file(f.test_labels);
  labels[labels.size() - 1] = 10;
  idx_write_file(f.test_labels, labels);
  refused("run --data idx:" + d + " --models linear", f.test_labels + ": label 10 at record 19 is out of range 0..9");
}

}  // namespace
}  // namespace vg
