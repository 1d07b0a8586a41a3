// The memory budget: what a dataset and a model will take, what this process
// may still use, and which of the user's flags drive a model's size, so that
// a configuration too big for memory is refused up front (check_memory,
// profile) instead of dying in std::bad_alloc mid-run.
#pragma once
#include <string>
#include <vector>

#include "core/image_shape.h"
#include "data/dataset.h"
#include "harness/run_flags.h"
#include "models/registry.h"

namespace vg {

// Bytes the dataset holds (the protocol's count).
double dataset_bytes(const DataConfig& d);
// Weights, gradient, Adam's two moments and a working copy, the activations
// at the largest batch and the step's fixed buffers, for images of `shape`;
// with threads > 1 also a helper's buffers and the evaluations' copy of the model.
double model_bytes(const std::string& m, const ModelOptions& opts, int batch, const ImageShape& shape = {},
                   int threads = 1);
// Libraries, oneDNN's scratch and everything else, measured at ~40 MB.
inline constexpr double kBaseBytes = 64e6;
// Memory this process may still use: MemAvailable, and the cgroup's limit if lower.
double available_bytes();
// "1.2 GB", or in MB (kB, bytes) where GB would round to 0.
std::string gigabytes(double bytes);
// A flag that drives a memory estimate: set by the user or not, its value,
// the value it has when not set (--batch-size's), and its name where it varies.
struct SizeFlag {
  bool set = false;
  std::string value;
  int default_value = 0;
  std::string flag;
};
// A flag the user set whose default would make model `m` smaller, and by how many bytes.
struct SizeDriver {
  std::string flag, value;
  double drop = 0;
};
// The flags the user set that drive model m's estimate (its options in
// `given`, the batch, the images' side), the largest drop first.
std::vector<SizeDriver> model_size_drivers(const std::string& m, const ModelOptions& given, int batch,
                                           const SizeFlag& batch_flag, const ImageShape& shape,
                                           const SizeFlag& shape_flag, int threads = 1);
// Refuses a model too big for memory, naming the first driver and the others
// beside it ("with --batch-size '4096'"), or, with none set, the model's flag.
[[noreturn]] void refuse_model_size(const std::vector<SizeDriver>& drivers, const std::string& model_flag,
                                    const std::string& model_value, const std::string& why);

// Refuses a configuration whose `jobs` runs at once (1 for `run`; a sweep's trainings) cannot fit in memory.
// `datasets`: the datasets each job holds (a sweep's group: one per gap).
// `threads`: a run's --threads (a sweep's trainings run on one thread each).
void check_memory(const RunFlags& f, const RunOptions& o, int jobs, const std::string& jobs_text, int datasets = 1,
                  int threads = 1);
// How many jobs of `datasets` datasets fit in memory at once (at least 1; check_memory refuses less).
int jobs_that_fit(const RunOptions& o, int datasets = 1);

}  // namespace vg
