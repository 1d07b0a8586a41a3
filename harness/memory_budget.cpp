#include "harness/memory_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <numeric>

#include "data/protocol.h"
#include "harness/output.h"
#include "harness/run_flag_source.h"
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

namespace {

[[noreturn]] void throw_usage(const FlagError& e) { throw UsageError("--" + e.flag, e.value, e.why); }

}  // namespace

// Refuses a configuration whose `jobs` cells at once (1 for `run`) cannot fit in memory.
void check_memory(const RunFlags& f, const RunOptions& o, int jobs, const std::string& jobs_text, int datasets,
                  int threads) {
  const Protocol& protocol = protocol_of(o.data);
  const RunFlagSource flags(f, RunFlags{});
  if (protocol.images(o.data) > 2e6) throw_usage(protocol.too_big(flags, o.data, "would exceed 2 million images"));
  const ModelOptions& mo = o.train.model;
  const ImageShape shape = image_shape(o.data);
  std::string big = o.models.front();
  auto bytes = [&](const std::string& m, int t) { return model_bytes(m, mo, o.train.batch_size, shape, t); };
  for (const std::string& m : o.models)
    if (bytes(m, 1) > bytes(big, 1)) big = m;
  // A run's models train concurrently, one per thread (RunOptions::threads):
  // the largest min(threads, models) of them at once, each with its helper's
  // buffers and its evaluations' copy.
  std::vector<double> each;
  for (const std::string& m : o.models) each.push_back(bytes(m, threads));
  std::sort(each.begin(), each.end(), std::greater<>());
  const size_t side_by_side = std::min(size_t(threads), each.size());
  const double model = std::accumulate(each.begin(), each.begin() + std::ptrdiff_t(side_by_side), 0.0);
  const double data = datasets * dataset_bytes(o.data);
  const double avail = available_bytes(), need = jobs * (data + model) + kBaseBytes;
  if (need <= avail) return;
  const std::string more = "more than the " + gigabytes(avail) + " of memory available";
  if (jobs > 1 && data + model + kBaseBytes <= avail)
    throw UsageError("--jobs", jobs_text, std::to_string(jobs) + " trainings at once need about " + gigabytes(need) + ", " + more);
  if (threads > 1 && data + bytes(big, 1) + kBaseBytes <= avail)
    throw UsageError("--threads", f.threads,
                     "models training side by side, their helpers' buffers and their evaluations' copies "
                     "need about " + gigabytes(need) + ", " + more);
  if (const double one = bytes(big, 1); one >= data) {
    const std::string why = "model '" + big + "' (" + fmt_num(std::round(double(model_param_count(big, mo, shape)) / 1e5) / 10) +
                            " M parameters) needs about " + gigabytes(one + kBaseBytes) + ", " + more;
    const RunFlags defaults;
    const DataShape ds = data_shape(f, o.data);
    const SizeFlag batch{flag_set(f, defaults, "batch-size"), f.batch_size, int(parse_int("--batch-size", defaults.batch_size, 1, 4096)), "--batch-size"};
    const SizeFlag side{!ds.flag.empty() && flag_set(f, defaults, ds.flag.substr(2)), ds.value, 0, ds.flag};
    refuse_model_size(model_size_drivers(big, mo, o.train.batch_size, batch, shape, side, 1), "--models", f.models, why);
  }
  throw_usage(protocol.too_big(flags, o.data, "needs about " + gigabytes(data + kBaseBytes) + ", " + more));
}

// How many jobs fit in memory at once (at least 1; check_memory refuses less).
int jobs_that_fit(const RunOptions& o, int datasets) {
  double model = 0;
  for (const std::string& m : o.models)
    model = std::max(model, model_bytes(m, o.train.model, o.train.batch_size, image_shape(o.data)));
  const double per_cell = datasets * dataset_bytes(o.data) + model;
  return int(std::clamp(std::floor((available_bytes() - kBaseBytes) / per_cell), 1.0, 1024.0));
}

}  // namespace vg
