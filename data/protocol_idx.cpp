// The standard split of an IDX image set (data/idx.h): --data fashion-mnist
// (Debian's dataset-fashion-mnist) or --data idx:DIR (MNIST, KMNIST, EMNIST,
// any directory of the four files). Training on the training file, testing on
// the test file, as every published figure for these sets does; no viewpoint
// is held out, so the held-out set is the familiar one (docs/data.md).
//
// Preprocessing: pixels / 255, and with --standardize on each image
// standardised (tf.image.per_image_standardization's rule). With a stopping
// rule, a seeded part of the training file (kValidationImages) becomes the
// familiar validation split and leaves training.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>

#include "data/idx.h"
#include "data/idx_plane.h"
#include "data/protocol.h"

namespace vg {

namespace {

constexpr const char* kFashionSource = "fashion-mnist";
constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kFashionPackage = "dataset-fashion-mnist";
constexpr int kFashionClasses = 10;
// Zalando's label names (zalandoresearch/fashion-mnist README, "Labels").
constexpr const char* kFashionClassNames[kFashionClasses] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                             "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
// The validation part a stopping rule takes out of the training file: one in
// twelve of Fashion-MNIST's 60,000 (5,000, the size Keras's and many papers'
// validation splits of MNIST use), the same share of any other set.
constexpr int kValidationShare = 12;
// Its draw: a permutation of the training file keyed by the data seed.
constexpr Purpose kIdxValidationPurpose = Purpose(0x49445856u);  // "IDXV"

const DataFlag& kStandardize = kStandardizeFlag;  // smallNORB's, with the same rule

// The flags of the rendered data and of smallNORB-format sources, which an IDX set has no use for.
const char* const kForeignFlags[] = {"train-azimuths", "test-azimuths", "n-train-views", "n-test-views", "elevations",
                                     "n-elev", "test-elevations", "n-test-elev", "shapes", "n-per-combo",
                                     "n-eval-per-combo", "noise", "brightness", "contrast", "cameras"};

// The training file's records in the order a Stream keyed by the seed shuffles
// them (Fisher-Yates from the back); the first `validation` are the validation part.
std::vector<int> validation_order(int n, uint64_t seed) {
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Stream s(seed, kIdxValidationPurpose);
  for (int i = n - 1; i > 0; --i) std::swap(order[size_t(i)], order[s.below(uint32_t(i + 1))]);
  return order;
}

}  // namespace

std::vector<int> idx_records(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

IdxTrainingParts idx_training_parts(const DataConfig& cfg) {
  const IdxConfig& c = *cfg.idx;
  const int n = c.data->train.size();
  IdxTrainingParts parts{idx_records(n), {}};
  if (c.validation_images > 0 && cfg.n_val_per_combo > 0) {
    const std::vector<int> order = validation_order(n, cfg.seed);
    parts.validation.assign(order.begin(), order.begin() + c.validation_images);
    parts.train.assign(order.begin() + c.validation_images, order.end());
    // Each part in file order, so that an image's place in it does not depend on the draw's order.
    std::sort(parts.validation.begin(), parts.validation.end());
    std::sort(parts.train.begin(), parts.train.end());
  }
  return parts;
}

void configure_idx_source(const FlagSource& f, DataConfig* d) {
  const std::string data = f.value("data");
  IdxConfig c;
  c.source = data;
  c.fashion = data == kFashionSource;
  if (c.fashion) {
    c.dir = kFashionDir;
    std::error_code ec;
    if (!std::filesystem::is_directory(c.dir, ec))
      throw FlagError("data", data,
                      std::string("needs Debian's package ") + kFashionPackage + " (apt-get install " + kFashionPackage +
                          "; bash tools/deps.sh installs it), which puts the files in " + kFashionDir);
  } else {
    c.dir = data.substr(data.find(':') + 1);
    if (c.dir.empty()) throw FlagError("data", data, "expected idx:DIR (a directory of the four MNIST-format files)");
  }
  for (const char* name : kForeignFlags)
    if (f.changed(name))
      throw FlagError(name, f.value(name), "does not apply to --data " + data + " (its images are the files')");
  const std::string standardize = f.value(kStandardize.name);
  if (standardize != "on" && standardize != "off") throw FlagError(kStandardize.name, standardize, "expected on or off");
  c.standardize = standardize == "on";
  if (const std::string dump = f.value("dump"); !dump.empty())
    throw FlagError("dump", dump, "draws the synthetic data only (not --data " + data + ")");
  try {
    auto files = std::make_shared<IdxData>(idx_load_dir(c.dir, c.fashion ? kFashionClasses : 0));
    c.classes = files->classes;
    c.side = files->side();
    c.train_images = files->train.size();
    c.test_images = files->test.size();
    c.data = std::move(files);
  } catch (const IdxError& e) {
    throw FlagError("data", data, e.what());
  }
  // A stopping rule, or --validation on (the frontier's), scores a validation
  // part of the training file, which then trains on the rest.
  const std::string wants = !f.value("stop-at-familiar").empty() ? "stop-at-familiar"
                            : !f.value("match-familiar").empty() ? "match-familiar"
                            : f.value("validation") == "on"      ? "validation"
                                                                 : "";
  if (!wants.empty()) {
    c.validation_images = int(c.train_images / kValidationShare);
    if (c.validation_images < c.classes || c.train_images - c.validation_images < c.classes)
      throw FlagError(wants, f.value(wants),
                      "needs a validation part of the training file, and " + std::to_string(c.train_images) +
                          " training images are too few to take one of 1/" + std::to_string(kValidationShare));
  }
  d->idx = std::move(c);
}

namespace {

// Images `idx` of a part as floats / 255 (standardised if asked), with labels.
Split to_split(const IdxPart& part, const std::vector<int>& idx, const IdxConfig& c) {
  Split s;
  s.channels = 1;
  s.side = c.side;
  s.classes = c.classes;
  const int n = int(idx.size());
  const size_t px = s.pixels();
  s.images.resize(size_t(n) * px);
  s.labels.resize(size_t(n));
  // No viewpoints: every image sits at azimuth 0, elevation 0, axis position 0.
  s.azimuth.assign(size_t(n), 0.f);
  s.elevation.assign(size_t(n), 0.f);
  s.axis.assign(size_t(n), 0.f);
#pragma omp parallel for schedule(static) if (n >= kDatasetParallelMinItems)
  for (int i = 0; i < n; ++i) {
    const uint8_t* src = part.images.image(idx[size_t(i)]);
    float* dst = s.images.data() + size_t(i) * px;
    for (size_t p = 0; p < px; ++p) dst[p] = float(src[p]) / 255.f;
    if (c.standardize) standardize_pixels(dst, int(px));
    s.labels[size_t(i)] = part.labels[size_t(idx[size_t(i)])];
  }
  return s;
}

Dataset make_idx_dataset(const DataConfig& cfg) {
  const IdxConfig& c = *cfg.idx;
  const IdxData& files = *c.data;
  Dataset d;
  d.views_from_test = true;
  d.heldout_is_familiar = true;
  const IdxTrainingParts parts = idx_training_parts(cfg);
  if (!parts.validation.empty()) d.validation = to_split(files.train, parts.validation, c);
  d.train = to_split(files.train, parts.train, c);
  d.familiar = to_split(files.test, idx_records(files.test.size()), c);
  d.heldout = d.familiar;
  d.train_az = d.test_az = d.circle_az = d.axis_values = {0.0};
  d.elevations = d.test_elevations = {0.0};
  return d;
}

TrainingSize training_size(const DataConfig& d) {
  const long n = d.idx->train_images - d.idx->validation_images;
  return {n, std::to_string(n) + " images of " + d.idx->source + "'s training file" +
                 (d.idx->validation_images > 0 ? " (less " + std::to_string(d.idx->validation_images) + " for validation)" : "")};
}

// The four splits' floats (the held-out set a copy of the familiar one), labels and viewpoints, and the files' bytes.
double images(const DataConfig& d) { return double(d.idx->train_images + 2 * d.idx->test_images); }
double bytes(const DataConfig& d) {
  const double px = double(d.idx->side) * d.idx->side;
  return images(d) * (px * sizeof(float) + 16) + double(d.idx->train_images + d.idx->test_images) * (px + 1);
}

FlagError too_big(const FlagSource& f, const DataConfig& d, const std::string& why) {
  return FlagError("data", f.value("data"),
                   "the dataset (" + std::to_string(std::llround(images(d))) + " images of " +
                       std::to_string(d.idx->side) + " x " + std::to_string(d.idx->side) + " floats) " + why);
}

std::optional<GeometryProblem> no_problem(const DataConfig&, bool) { return std::nullopt; }
std::vector<double> origin(const DataConfig&) { return {0.0}; }
double no_distance(const DataConfig&, double) { return 0; }
double no_gap(const DataConfig&) { return 0; }

std::string describe(const DataConfig& cfg, const Dataset& d) {
  const IdxConfig& c = *cfg.idx;
  std::ostringstream o;
  o << c.source << " (" << c.dir << "), standard split" << (c.standardize ? ", standardised" : "") << "\n"
    << d.train.size() << " training images, " << d.familiar.size() << " test images of " << c.side << " x " << c.side
    << ", " << c.classes << " classes";
  if (d.validation.size() > 0) o << "; " << d.validation.size() << " training images held for validation";
  o << "\n";
  return o.str();
}

nlohmann::json source_json(const DataConfig& cfg) {
  const IdxConfig& c = *cfg.idx;
  return {{"idx", c.dir},
          {"split", "standard"},
          {"classes", c.classes},
          {"side", c.side},
          {"validation_images", c.validation_images},
          {"standardize", c.standardize}};
}

RecordedViews no_views(const DataConfig&) {
  const ViewList origin{0, 0, {0.0}};
  return {origin, origin, origin, {}};
}

bool always(const FlagSource&) { return true; }

Protocol standard(const char* name, const char* source) {
  Protocol p{.name = name, .source = source, .split = "standard", .axis = {"none", "deg"}};
  p.default_for = always;
  p.holds = [](const Protocol&, const DataConfig& c) { return !c.plane; };
  p.configure = configure_idx_source;
  p.check = no_problem;
  p.training_size = training_size;
  p.images = images;
  p.bytes = bytes;
  p.too_big = too_big;
  p.make = make_idx_dataset;
  p.axis_values = origin;
  p.distance = no_distance;
  p.sweep_gap = no_gap;
  p.describe = describe;
  p.source_json = source_json;
  p.views = no_views;
  p.flags = {kStandardize};
  return p;
}

}  // namespace

const char* idx_class_name(const IdxConfig& c, int cls) {
  static const std::array<std::string, 256> numbers = [] {
    std::array<std::string, 256> a;
    for (int k = 0; k < 256; ++k) a[size_t(k)] = std::to_string(k);
    return a;
  }();
  return c.fashion ? kFashionClassNames[cls] : numbers[size_t(cls)].c_str();
}

Protocol fashion_mnist_protocol() { return standard("fashion-mnist-standard", kFashionSource); }
Protocol idx_protocol() { return standard("idx-standard", "idx:"); }

Source idx_source() {
  return {.name = "idx:",
          .help = "MNIST-format files in DIR",
          .flags = {"data"},
          .holds = [](const DataConfig& c) { return c.idx && !c.idx->fashion; },
          // The files' side, or an in-plane protocol's canvas (data/idx_plane.h).
          .shape = [](const DataConfig& c) { return ImageShape{1, c.plane ? c.plane->canvas : c.idx->side, c.idx->classes}; },
          .class_name = [](const DataConfig& c, int cls) { return idx_class_name(*c.idx, cls); },
          .data_text = [](const DataConfig& c) { return c.idx->source; }};
}

Source fashion_mnist_source() {
  Source s = idx_source();
  s.name = kFashionSource;
  s.help = "Debian's dataset-fashion-mnist";
  s.holds = [](const DataConfig& c) { return c.idx && c.idx->fashion; };
  return s;
}

}  // namespace vg
