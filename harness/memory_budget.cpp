#include "harness/memory_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "data/protocol.h"
#include "harness/output.h"
#include "harness/run_flags.h"
#include "models/numbers.h"
#include "models/registry.h"

namespace vg {

// Images, their labels and viewpoints, and whatever else the protocol's dataset holds.
double dataset_bytes(const DataConfig& d) { return protocol_of(d).bytes(d); }

namespace {

double model_params(const std::string& m, const ModelOptions& opts, const ImageShape& shape) {
  return double(model_param_count(m, opts, shape));
}

}  // namespace

// Weights, gradient, Adam's two moments and a working copy; activations at the
// largest batch (the evaluation batch at least): conv1's output (16 channels
// at half the side) and its gradient, and a layer after it as wide as the
// model's parameters allow, and the image; or the activations the model's
// registry entry declares where that is more; and what its step holds
// whatever the batch. With more threads than one, a helper's buffers in the
// step and the copy of the model the epochs are evaluated on (harness/train.h):
// its weights, an evaluation batch and a one-thread step's fixed buffers.
double model_bytes(const std::string& m, const ModelOptions& opts, int batch, const ImageShape& shape, int threads) {
  const double params = model_params(m, opts, shape), conv1 = 16.0 * std::ceil(shape.side / 2.0) * std::ceil(shape.side / 2.0);
  const double width = std::max(params / conv1, 136.0);
  const double per_image =
      std::max(4.0 * conv1 + 4 * width + double(shape.pixels()), double(model_activation_floats(m, opts, shape)));
  const double fixed = double(model_step_floats(m, opts, shape, threads));
  double floats = 5 * params + double(std::max(batch, kEvalBatch)) * per_image + fixed;
  if (threads > 1) floats += params + kEvalBatch * per_image + double(model_step_floats(m, opts, shape, 1));
  return floats * sizeof(float);
}

// Memory this process may still use: MemAvailable, and the cgroup's limit if lower.
double available_bytes() {
  double avail = std::numeric_limits<double>::infinity();
  std::ifstream mi("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (mi >> key >> kb >> unit)
    if (key == "MemAvailable:") avail = kb * 1024;
  auto read_num = [](const char* path, double* v) {
    std::ifstream f(path);
    std::string t;
    if (!(f >> t)) return false;
    const ParsedNumber<long long> x = parse_whole(t);
    if (!x) return false;
    *v = double(x.value);
    return true;
  };
  double limit = 0, used = 0;
  if (read_num("/sys/fs/cgroup/memory.max", &limit) && read_num("/sys/fs/cgroup/memory.current", &used))
    avail = std::min(avail, limit - used);
  return avail;
}

// In the largest unit that keeps a digit above zero, so that a size never
// reads "0.0 GB".
std::string gigabytes(double bytes) {
  char buf[48];
  if (bytes >= 0.05e9 || !std::isfinite(bytes)) std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  else if (bytes >= 0.05e6) std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else if (bytes >= 0.05e3) std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

// The flags the user set that drive the estimate of model `m`: each of its
// options in `given`, --batch-size and `shape`'s flag whose default would
// lower it, the largest drop first. A refusal names them, not a flag at its
// default (a model's size option) that the user never typed.
std::vector<SizeDriver> model_size_drivers(const std::string& m, const ModelOptions& given, int batch,
                                           const SizeFlag& batch_flag, const ImageShape& shape,
                                           const SizeFlag& shape_flag, int threads) {
  const double bytes = model_bytes(m, given, batch, shape, threads);
  std::vector<SizeDriver> out;
  auto lower = [&](const std::string& flag, const std::string& value, double without) {
    if (without < bytes) out.push_back({flag, value, bytes - without});
  };
  for (const auto& [name, value] : given) {
    ModelOptions less = given;
    less.erase(name);
    double without = bytes;
    try {
      without = model_bytes(m, less, batch, shape, threads);
    } catch (const std::exception&) {
      continue;  // the option is what makes the model valid: not a size
    }
    lower("--" + name, value, without);
  }
  if (batch_flag.set) lower("--batch-size", batch_flag.value, model_bytes(m, given, batch_flag.default_value, shape, threads));
  if (shape_flag.set) {
    ImageShape at_default = shape;
    at_default.side = ImageShape{}.side;
    lower(shape_flag.flag, shape_flag.value, model_bytes(m, given, batch, at_default, threads));
  }
  std::stable_sort(out.begin(), out.end(), [](const SizeDriver& a, const SizeDriver& b) { return a.drop > b.drop; });
  return out;
}

void refuse_model_size(const std::vector<SizeDriver>& drivers, const std::string& model_flag,
                       const std::string& model_value, const std::string& why) {
  if (drivers.empty()) throw UsageError(model_flag, model_value, why);
  std::string with;
  for (size_t i = 1; i < drivers.size(); ++i)
    with += (with.empty() ? "" : ", ") + drivers[i].flag + " '" + drivers[i].value + "'";
  throw UsageError(drivers.front().flag, drivers.front().value, why + (with.empty() ? "" : " (with " + with + ")"));
}

}  // namespace vg
