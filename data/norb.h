// The real smallNORB files (Huang & LeCun, NYU "binary matrix" format): a
// validating reader, a writer of the same format, the paper's preprocessing
// (Hinton, Sabour & Frosst 2018, section 5) and its azimuth / elevation splits.
//
// The format, as the NYU readme (cs.nyu.edu/~ylclab/data/norb-v1.0-small/)
// states it and as public readers use it (quoted in facebookresearch/vissl
// extra_scripts/datasets/create_small_norb_elevation_data_files.py and
// ndrplz/small_norb smallnorb/dataset.py):
//   int32 magic   0x1E3D4C55 byte matrix (uint8), 0x1E3D4C54 integer matrix (int32)
//   int32 ndim
//   int32 dim[max(3, ndim)]  (a 1D or 2D matrix still stores 3 dims, the unused being 1)
//   data, last index fastest; every integer little-endian.
// -dat: 4D N x 2 x 96 x 96 uint8 (24 header bytes); -cat: 1D N int32 (20 header
// bytes), 0 animal, 1 human, 2 plane, 3 truck, 4 car; -info: 2D N x 4 int32
// (20 header bytes): instance 0..9, elevation 0..8 (30 + 5e degrees), azimuth
// 0,2,..,34 (10a degrees), lighting 0..5.
//
// Images stay uint8 in the file: a split keeps only its labels and info in
// memory and reads a pair (18,432 bytes) with pread when a batch needs it, so
// resident memory does not grow with the data (a mapping would count every
// page an epoch touches, ~900 MB for both splits).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/rng.h"

namespace vg {

// Every problem with a file or a request: one line naming the file and what is wrong.
struct NorbError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr uint32_t kNorbMagicByte = 0x1E3D4C55;  // uint8 elements
inline constexpr uint32_t kNorbMagicInt = 0x1E3D4C54;   // int32 elements
inline constexpr int kNorbCameras = 2;
inline constexpr int kNorbSide = 96;
inline constexpr int kNorbImageBytes = kNorbSide * kNorbSide;
inline constexpr int kNorbPairBytes = kNorbCameras * kNorbImageBytes;
inline constexpr int kNorbInfoCols = 4;
inline constexpr int kNorbClasses = 5;
inline constexpr int kNorbInstances = 10, kNorbElevations = 9, kNorbAzimuthMax = 34, kNorbLightings = 6;
inline constexpr int kNorbPerSplit = 24300;  // 5 classes x 5 instances x 9 x 18 x 6
inline constexpr const char* kNorbClassNames[kNorbClasses] = {"animal", "human", "plane", "truck", "car"};

// One row of -info.
struct NorbInfo {
  int32_t instance, elevation, azimuth, lighting;
};
inline double norb_azimuth_deg(int azimuth) { return 10.0 * azimuth; }
inline double norb_elevation_deg(int elevation) { return 30.0 + 5.0 * elevation; }

enum class NorbPart { training, testing };
// The three paths of a split as the NYU distribution names them, inside `dir`:
// smallnorb-5x46789x9x18x6x2x96x96-training-{dat,cat,info}.mat (test: 5x01235, testing).
struct NorbFiles {
  std::string dat, cat, info;
};
NorbFiles norb_files(const std::string& dir, NorbPart part);

// One split: labels and info in memory, images read from -dat on demand.
class NorbSet {
 public:
  NorbSet() = default;
  int size() const { return int(labels_.size()); }
  const std::vector<int32_t>& labels() const { return labels_; }
  const std::vector<NorbInfo>& info() const { return info_; }
  // Copies pair i (camera-major, 2 x 96 x 96 uint8) to dst.
  void read_pair(int i, uint8_t* dst) const;
  const std::string& dat_name() const { return dat_name_; }
  // Its pairs are drawn when read (NorbSet::rendered), not read from a file or memory.
  bool drawn_when_read() const;

  // A set whose pairs are drawn when read (the toys dataset, data/toy_views.h):
  // render(i, dst) writes pair i, a pure function of i, from any thread.
  static NorbSet rendered(std::vector<int32_t> labels, std::vector<NorbInfo> info,
                          std::function<void(int i, uint8_t* dst)> render, std::string name);

  // A set whose pairs lie in the open file `fd` (the set owns it), pair i at
  // offset + i x 2 x 96 x 96, each passed to `valid(i, pair)` as it is read;
  // one that fails, or cannot be read, is drawn by `redraw(i, dst)` instead
  // (the toys' render cache, data/toy_cache.h: a damaged record is drawn
  // afresh, never trusted).
  static NorbSet stored(std::vector<int32_t> labels, std::vector<NorbInfo> info, int fd, uint64_t offset,
                        std::function<bool(int i, const uint8_t* pair)> valid,
                        std::function<void(int i, uint8_t* dst)> redraw, std::string name);

  // A set of `pairs` (N x 2 x 96 x 96 bytes) held in memory.
  static NorbSet in_memory(std::vector<int32_t> labels, std::vector<NorbInfo> info, std::vector<uint8_t> pairs,
                           std::string name);

  struct Source;  // an open -dat file, an owned byte buffer, a renderer or a checked file

 private:
  friend NorbSet norb_load_split(const NorbFiles&);
  friend NorbSet norb_parse_split(std::span<const uint8_t>, std::span<const uint8_t>, std::span<const uint8_t>,
                                  const std::string&);
  static NorbSet from_source(std::vector<int32_t> labels, std::vector<NorbInfo> info, std::shared_ptr<Source> src,
                             std::string name);
  std::vector<int32_t> labels_;
  std::vector<NorbInfo> info_;
  std::shared_ptr<const Source> src_;
  std::string dat_name_;
};

// Reads and validates a split's triple. Everything is checked before anything
// is allocated: magic, rank, each dimension, the dimensions against the file
// size exactly, N across the triple, then label and info ranges.
NorbSet norb_load_split(const NorbFiles& files);
// The same checks on three in-memory files (named `name`-dat etc. in errors);
// the set keeps its own copy of the pixels. The fuzz tests' entry point.
NorbSet norb_parse_split(std::span<const uint8_t> dat, std::span<const uint8_t> cat,
                         std::span<const uint8_t> info, const std::string& name);

struct NorbData {
  NorbSet train, test;
  // Toys of neither split, for the stopping rules' familiar validation set
  // (the toys dataset, data/toy_views.h); smallNORB's files have none.
  NorbSet validation;
};
// Both splits from a directory holding the six NYU files (uncompressed).
NorbData norb_load_dir(const std::string& dir);

// Writes a split's triple in exactly the NYU format (pairs: N x 2 x 96 x 96).
void norb_write_split(const NorbFiles& files, std::span<const uint8_t> pairs, std::span<const int32_t> labels,
                      std::span<const NorbInfo> info);
// The bytes of one file: a byte matrix (N x 2 x 96 x 96) or an int32 matrix of
// the given dims (rank 1 for -cat, 2 for -info).
std::vector<uint8_t> norb_encode_pairs(std::span<const uint8_t> pairs);
// A -dat file of n pairs, all zero, to fill in place: its header, then pair i
// at kNorbPairsHeader + i x 2 x 96 x 96 (a writer needs no second copy).
inline constexpr size_t kNorbPairsHeader = 24;
std::vector<uint8_t> norb_pairs_file(int32_t n);
std::vector<uint8_t> norb_encode_ints(std::span<const int32_t> values, std::span<const int32_t> dims);

// ---- Preprocessing (paper, section 5: 48x48, random 32x32 crops with
// brightness and contrast jitter for training, centre crops for evaluation).
inline constexpr int kNorbHalfSide = 48;
inline constexpr int kNorbCropSide = 32;
inline constexpr int kNorbCropPixels = kNorbCropSide * kNorbCropSide;

enum class NorbCameras { both, first, second };
inline int norb_channels(NorbCameras c) { return c == NorbCameras::both ? 2 : 1; }
// The cameras a sample uses, in channel order, into cams; returns their number.
int norb_camera_list(NorbCameras c, int cams[2]);

struct NorbPrep {
  NorbCameras cameras = NorbCameras::both;
  // Training jitter, drawn once per sample and shared by its channels:
  // x -> clip((x - mean) * contrast + mean + brightness, 0, 1), where mean is
  // the channel's crop mean, brightness ~ U(-max_brightness, max_brightness),
  // contrast ~ U(1 - max_contrast, 1 + max_contrast). 0 turns each off.
  float max_brightness = 0.f;
  float max_contrast = 0.f;
  // After the jitter, each sample standardised over all its channels' pixels:
  // x -> (x - mean) / max(std, 1 / sqrt(N)), as google-research's capsule_em
  // feeds smallNORB (tf.image.per_image_standardization, norb/norb_record.py);
  // the paper does not say. Off: crops stay in [0, 1].
  bool standardize = false;
  // Training crops at the centre, as evaluation's, instead of the paper's
  // random 32x32 crops of the 48x48 image: the setting of LeCun, Huang &
  // Bottou's (2004) smallNORB baselines, whose linear classifier and K-NN
  // saw no translation jitter. The jitter's draws are made all the same.
  bool centre_train_crops = false;
};

// 96x96 uint8 -> 48x48 float in [0, 1]: the mean of each 2x2 block / 255.
void norb_downsample(const uint8_t* src96, float* dst48);
// A 32x32 window of a 48x48 image at (row0, col0), both in 0..16.
void norb_crop(const float* src48, int row0, int col0, float* dst32);
inline constexpr int kNorbCentreOffset = (kNorbHalfSide - kNorbCropSide) / 2;  // 8

// The augmentation stream of dataset index i in an epoch: a pure function of
// (seed, epoch, i), so a sample's crop never depends on batch or thread.
inline constexpr Purpose kNorbAugmentPurpose = Purpose(0x4E4F5242u);  // "NORB"
inline Stream norb_augment_stream(uint64_t seed, uint64_t epoch, uint64_t index) {
  return Stream(seed, kNorbAugmentPurpose, epoch, index);
}

// NorbPrep's jitter on `channels` crops of 32 x 32 at dst, from two uniform
// draws in (0, 1) (ub: brightness, uc: contrast); nothing when both are off.
void norb_jitter(float* dst, int channels, const NorbPrep& prep, float ub, float uc);

// NorbPrep's standardisation of one sample (channels x 32 x 32 at dst); nothing when off.
void norb_standardize(float* dst, int channels, const NorbPrep& prep);
// The standardisation itself, of any n floats: x -> (x - mean) / max(std, 1 / sqrt(n)),
// tf.image.per_image_standardization's rule (every source that offers --standardize).
void standardize_pixels(float* dst, int n);

// One pair -> channels x 32 x 32 floats in [0, 1] (standardised if prep says so).
void norb_eval_sample(const uint8_t* pair, const NorbPrep& prep, float* dst);
void norb_train_sample(const uint8_t* pair, const NorbPrep& prep, Stream& rng, float* dst);

// Batches of a set: owns its scratch, so a batch allocates nothing.
class NorbBatcher {
 public:
  NorbBatcher(const NorbSet& set, NorbPrep prep);
  int channels() const { return norb_channels(prep_.cameras); }
  // dst: n x channels x 32 x 32; idx index the set.
  void eval_batch(const int* idx, int n, float* dst);
  void train_batch(const int* idx, int n, uint64_t seed, uint64_t epoch, float* dst);

 private:
  const NorbSet* set_;
  NorbPrep prep_;
  std::vector<uint8_t> pair_;
};

// ---- The paper's splits (section 5.1) as index lists. `train` indexes the
// training set; `familiar` and `novel` index the test set (familiar: the
// training viewpoints, novel: the others).
struct NorbSplit {
  std::vector<int> train, familiar, novel;
};
// Train on azimuths 300..40 deg (values 30,32,34,0,2,4), all elevations;
// novel: test images at 60..280 deg.
NorbSplit norb_split_azimuth(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test);
// Train on the 3 lowest elevations (30..40 deg); novel: the 6 highest (45..70).
NorbSplit norb_split_elevation(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test);
// Every viewpoint: the whole training set, the whole test set as familiar.
NorbSplit norb_split_full(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test);
// Two windows of azimuth codes (the toys' window split): train on the training
// set's records at `train_azimuths`, all elevations; familiar: the test set's
// there; novel: the test set's at `heldout_azimuths` (a code in both is in both).
NorbSplit norb_split_window(const std::vector<NorbInfo>& train, const std::vector<NorbInfo>& test,
                            const std::vector<int>& train_azimuths, const std::vector<int>& heldout_azimuths);

}  // namespace vg
