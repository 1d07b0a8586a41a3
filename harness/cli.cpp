#include "harness/cli.h"

#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "harness/output.h"
#include "harness/report.h"
#include "harness/profile.h"
#include "harness/sweep.h"
#include "harness/train.h"
#include "kernels/dnnl_common.h"
#include "kernels/isa.h"
#include "models/numbers.h"
#include "models/registry.h"

namespace vg {

namespace {

// A value as one printable line: control characters (a newline in a grid
// value) shown escaped, so an error stays one line.
std::string printable(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else out += char(c);
  }
  return out;
}

// Bad input: printed as one line, exit code 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& flag, const std::string& value, const std::string& why)
      : std::runtime_error(flag + " '" + printable(value) + "': " + printable(why)) {}
  // A flag that takes no value.
  UsageError(const std::string& flag, const std::string& why) : std::runtime_error(flag + ": " + why) {}
};

// The results table lost to a full disk or a closed pipe is a failure, not a
// success: exit 1, one line (main() checks once more at exit).
void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int err = errno;
  std::clearerr(stdout);
  throw std::runtime_error(std::string("cannot write standard output: ") + (err ? std::strerror(err) : "write error"));
}

// --reproducible: the same bits on every x86-64 CPU with AVX2 and FMA. oneDNN is
// capped at AVX2 (its AVX-512 kernels sum in another order) and our kernels are
// pinned to their AVX2 variants; everything else already runs the same code on
// every such CPU (see README, "Reproducibility"). Runs before any kernel does.
void enable_reproducible() {
  const std::string missing = isa_missing_features(Isa::avx2);
  if (!missing.empty())
    throw UsageError("--reproducible", "this CPU lacks " + missing +
                                           " (reproducible mode needs x86-64 with AVX2 and FMA)");
  const char* env = std::getenv("VIEWGAP_ISA");
  if (env != nullptr && *env != '\0' && std::string(env) != isa_name(Isa::avx2))
    throw UsageError("--reproducible", std::string("conflicts with VIEWGAP_ISA='") + env +
                                           "' (reproducible mode pins the kernels at avx2; unset it)");
  pin_isa(Isa::avx2);
  pin_onednn_isa_avx2();
}

// Flags of `run` as the user typed them; validated into RunOptions.
struct RunFlags {
  std::string seed = "0", n_epochs = "10", lr = "2e-3", batch_size = "32", threads = "1";
  std::string train_az = "0:150", test_az = "200:330", elevations = "10:50";
  std::string test_elevations, n_test_elev, split;  // "": the training elevations; no preset
  std::string shapes = "seed";
  std::string data = "synthetic", cameras = "both", brightness = "0", contrast = "0";  // --data norb:DIR
  std::string n_train_views = "6", n_test_views = "6", n_elev = "3";
  std::string n_per_combo = "5", n_eval_per_combo = "2";
  std::string models = "caps,cnn";
  std::string stop_at_familiar, match_familiar, stop_check_every;  // "": off / after each epoch
  ModelOptions model = default_model_options();  // --cnn-hidden, --em-*, --loss, ...: the models' own
  std::string out_json, dump;
  bool quiet = false, reproducible = false;

  // Every model option at its default, so each flag has a string to bind to.
  static ModelOptions default_model_options() {
    ModelOptions o;
    for (const ModelOption& m : model_options()) o[m.name] = m.default_value;
    return o;
  }
};

// The run flags that take a value, once: `run` and `sweep` register them from
// here, and `sweep --grid NAME=...` finds its axis here.
struct FlagSpec {
  const char* name;
  std::string RunFlags::*field;
  const char* help;
};
const FlagSpec kRunFlags[] = {
    {"seed", &RunFlags::seed, "Seed of data, initialisation and shuffling"},
    {"n-epochs", &RunFlags::n_epochs, "Training epochs"},
    {"lr", &RunFlags::lr, "Adam learning rate"},
    {"batch-size", &RunFlags::batch_size, "Training batch size"},
    {"threads", &RunFlags::threads,
     "Cores: the models train concurrently, one per core, and each epoch is evaluated on whichever core is free "
     "(results do not depend on it)"},
    {"train-azimuths", &RunFlags::train_az, "Training azimuth range A:B in degrees (wraps mod 360)"},
    {"test-azimuths", &RunFlags::test_az, "Held-out azimuth range A:B in degrees"},
    {"n-train-views", &RunFlags::n_train_views, "Evenly spaced training azimuths"},
    {"n-test-views", &RunFlags::n_test_views, "Evenly spaced held-out azimuths"},
    {"elevations", &RunFlags::elevations, "Elevation range A:B in degrees"},
    {"n-elev", &RunFlags::n_elev, "Evenly spaced elevations"},
    {"test-elevations", &RunFlags::test_elevations,
     "Held-out elevation range A:B (default: the training elevations); outside the training band: elevation extrapolation"},
    {"n-test-elev", &RunFlags::n_test_elev, "Evenly spaced held-out elevations (default: --n-elev)"},
    {"shapes", &RunFlags::shapes, "The shape set: seed (the seed's five) or asym (no rotational symmetry)"},
    {"split", &RunFlags::split,
     "A named split: paper-azimuth or paper-elevation (smallNORB's viewpoints, README); with --data norb:DIR also full"},
    {"data", &RunFlags::data, "synthetic (rendered) or norb:DIR (smallNORB's six NYU files in DIR, README)"},
    {"cameras", &RunFlags::cameras, "With --data norb: both (2 input channels), first or second"},
    {"brightness", &RunFlags::brightness, "With --data norb: training brightness jitter, uniform in +-B (0..1)"},
    {"contrast", &RunFlags::contrast, "With --data norb: training contrast jitter, a factor uniform in 1 +- C (0..1)"},
    {"n-per-combo", &RunFlags::n_per_combo, "Training images per (class, azimuth, elevation)"},
    {"n-eval-per-combo", &RunFlags::n_eval_per_combo, "Evaluation images per combination"},
    {"models", &RunFlags::models, "Comma-separated model names"},
    {"stop-at-familiar", &RunFlags::stop_at_familiar,
     "Stop each model when its accuracy on a familiar validation split reaches ACC in (0, 1] (--n-epochs caps it)"},
    {"match-familiar", &RunFlags::match_familiar,
     "Train MODEL (one of --models) first, in full; stop every other model at its final familiar validation accuracy"},
    {"stop-check-every", &RunFlags::stop_check_every,
     "Steps between checks of the stopping rule (default: after each epoch)"},
};

// The models' options (models/registry.h) as flags of any command that builds a model.
void add_model_flags(CLI::App* app, ModelOptions& opts) {
  for (const ModelOption& m : model_options())
    app->add_option(std::string("--") + m.name, opts[m.name], m.help)->capture_default_str();
}

// Registers every run flag except those in `skip`, and the model options.
void add_run_flags(CLI::App* app, RunFlags& f, const std::vector<std::string>& skip) {
  for (const FlagSpec& s : kRunFlags) {
    if (std::find(skip.begin(), skip.end(), s.name) != skip.end()) continue;
    // The registry's models, named in --models' help.
    const std::string help = std::string(s.name) == "models" ? "Comma-separated, of: " + model_names() : s.help;
    app->add_option(std::string("--") + s.name, f.*(s.field), help)->capture_default_str();
  }
  add_model_flags(app, f.model);
}

// The text of run flag or model option `name` (what --grid NAME=... sets), or
// nullptr; `Flags` is RunFlags or const RunFlags.
template <class Flags>
auto run_flag(Flags& f, const std::string& name) -> decltype(&f.seed) {
  for (const FlagSpec& s : kRunFlags)
    if (name == s.name) return &(f.*(s.field));
  if (const auto it = f.model.find(name); it != f.model.end()) return &it->second;
  return nullptr;
}

// Checks `models` (from --models or --model) and every option they read; an
// option set away from its default that none of them reads is an error too.
void check_models(const std::string& flag, const std::string& value, const std::vector<std::string>& models,
                  const ModelOptions& opts) {
  for (const std::string& m : models) {
    try {
      check_model(m, opts);
    } catch (const ModelOptionError& e) {
      throw UsageError("--" + e.flag, e.value, e.why);
    } catch (const std::invalid_argument& e) {
      throw UsageError(flag, value, e.what());
    }
  }
  for (const ModelOption& o : model_options()) {
    const std::string v = option_value(opts, o.name);
    if (v == o.default_value) continue;
    bool read = false;
    std::string readers;
    for (const ModelEntry& e : model_registry())
      if (std::find_if(e.options.begin(), e.options.end(), [&](const char* n) { return o.name == std::string(n); }) !=
          e.options.end()) {
        readers += (readers.empty() ? "" : ", ") + std::string(e.name);
        for (const std::string& m : models) read = read || find_model(m) == &e;
      }
    if (!read)
      throw UsageError(std::string("--") + o.name, v,
                       "no model in " + flag + " '" + value + "' uses it (it applies to " + readers + ")");
  }
}

// Every number a flag carries is read by the one rule of models/numbers.h.
long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi) {
  long long x = 0;
  if (const std::string why = whole_in(v, lo, hi, &x); !why.empty()) throw UsageError(flag, v, why);
  return x;
}

// `single`: the value is stored as a float, so it must stay nonzero and finite there.
double parse_real(const std::string& flag, const std::string& v, double lo, double hi,
                  bool lo_open, bool single = false) {
  double x = 0;
  if (const std::string why = real_in(v, lo, hi, lo_open, single, &x); !why.empty()) throw UsageError(flag, v, why);
  return x;
}

// "A:B" in degrees and its count flag; whether the range makes sense is
// check_geometry's judgement (data/dataset.h), shared by run and sweep.
AngleRange parse_range(const std::string& flag, const std::string& v, const std::string& count_flag,
                       const std::string& count) {
  const auto colon = v.find(':');
  if (colon == std::string::npos || v.find(':', colon + 1) != std::string::npos)
    throw UsageError(flag, v, "expected A:B in degrees, e.g. 0:150");
  auto angle = [&](const std::string& t) {
    const ParsedNumber<double> x = parse_real_number(t);
    if (!x) throw UsageError(flag, v, "expected A:B in degrees, e.g. 0:150 (decimal numbers, no spaces)");
    if (std::fabs(x.value) > 3600) throw UsageError(flag, v, "angles must lie within -3600 and 3600 degrees");
    return x.value;
  };
  AngleRange r;
  r.from = angle(v.substr(0, colon));
  r.to = angle(v.substr(colon + 1));
  r.count = int(parse_int(count_flag, count, 1, 360));
  return r;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string fmt_num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// Names the flag of a geometry problem. `run` takes --test-azimuths; a sweep
// builds its held-out window from --test-width and --gaps, so it names those.
struct TestFlags {
  std::string range_flag, range_value;      // the window's own shape
  std::string overlap_flag, overlap_value;  // where it lies against the training range
  std::string overlap_prefix;               // e.g. "gap 30: "
};

void check_geometry_flags(const RunFlags& f, const DataConfig& d, bool allow_touching_end, const TestFlags& t) {
  const auto p = check_geometry(d, allow_touching_end);
  if (!p) return;
  switch (p->part) {
    case GeometryPart::train_range: throw UsageError("--train-azimuths", f.train_az, p->why);
    case GeometryPart::train_count: throw UsageError("--n-train-views", f.n_train_views, p->why);
    case GeometryPart::test_range: throw UsageError(t.range_flag, t.range_value, p->why);
    case GeometryPart::test_count: throw UsageError("--n-test-views", f.n_test_views, p->why);
    case GeometryPart::test_overlap: throw UsageError(t.overlap_flag, t.overlap_value, t.overlap_prefix + p->why);
    case GeometryPart::elev_range: throw UsageError("--elevations", f.elevations, p->why);
    case GeometryPart::elev_count: throw UsageError("--n-elev", f.n_elev, p->why);
    case GeometryPart::test_elev_range: throw UsageError("--test-elevations", f.test_elevations, p->why);
    case GeometryPart::test_elev_count:  // its default is --n-elev's value
      throw UsageError("--n-test-elev", f.n_test_elev.empty() ? f.n_elev : f.n_test_elev, p->why);
  }
}

// A file an output flag writes.
struct OutputFile {
  std::string flag, value, file;
};

// The same file named twice (directly, through symlinks, "./x" or "d/../x") would
// be written twice, the second replacing the first: refused.
void check_distinct_outputs(const std::vector<OutputFile>& outputs) {
  std::vector<std::string> keys;
  for (const OutputFile& o : outputs) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(resolve_output_path(o.file), ec);
    keys.push_back(std::filesystem::weakly_canonical(abs, ec).string());
    for (size_t j = 0; j + 1 < keys.size(); ++j)
      if (keys[j] == keys.back()) {
        const OutputFile& first = outputs[j];
        throw UsageError(o.flag, o.value, "is the same file as " + first.flag + " '" + first.value + "'" +
                                              (first.file != first.value ? " writes (" + first.file + ")" : ""));
      }
  }
}

// ---- sizes: refused up front instead of dying in std::bad_alloc mid-run ----

double dataset_images(const DataConfig& d) {
  return double(kNumClasses) * d.elevations.count *
         (double(d.train_azimuths.count) * d.n_per_combo +
          (double(d.train_azimuths.count) + d.test_azimuths.count + 36) * d.n_eval_per_combo);
}

// Images, their labels and viewpoints, and the clean renders of the largest split.
double dataset_bytes(const DataConfig& d) {
  if (d.norb) return double(d.norb->images_in_memory) * (norb_channels(d.norb->prep.cameras) * kImagePixels * 4 + 12);
  const double clean = double(kNumClasses) * d.elevations.count * 36;
  return (dataset_images(d) + clean) * kImagePixels * sizeof(float) + dataset_images(d) * 12;
}

double model_params(const std::string& m, const ModelOptions& opts) { return double(model_param_count(m, opts)); }

// Weights, gradient, Adam's two moments and a working copy; activations at the
// largest batch (the evaluation batch at least): conv1's output and its
// gradient, and a layer after it as wide as the model's parameters allow, or
// what the model says it holds where that is more (cnn-paper's six layers).
double model_bytes(const std::string& m, const ModelOptions& opts, int batch) {
  const double width = std::max(model_params(m, opts) / 4096, 136.0);
  const double per_image = std::max(4.0 * 4096 + 4 * width + 1024, double(model_activation_floats(m, opts)));
  return 20 * model_params(m, opts) + double(std::max(batch, kEvalBatch)) * per_image * sizeof(float);
}

// Libraries, oneDNN's scratch and everything else, measured at ~40 MB.
constexpr double kBaseBytes = 64e6;

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

std::string gigabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

// The dataset flag raised furthest above its default: the one to blame for a
// dataset that cannot fit (the message shows every factor).
[[noreturn]] void blame_dataset(const RunFlags& f, const RunOptions& o, const std::string& why) {
  const RunFlags def;
  const std::pair<const char*, std::string RunFlags::*> flags[] = {
      {"--n-per-combo", &RunFlags::n_per_combo}, {"--n-eval-per-combo", &RunFlags::n_eval_per_combo},
      {"--n-elev", &RunFlags::n_elev},           {"--n-train-views", &RunFlags::n_train_views},
      {"--n-test-views", &RunFlags::n_test_views}};
  const char* worst = flags[0].first;
  std::string value = f.*(flags[0].second);
  double ratio = 0;
  for (const auto& [name, field] : flags) {
    const double r = double(parse_whole(f.*field).value) / double(parse_whole(def.*field).value);
    if (r > ratio) ratio = r, worst = name, value = f.*field;
  }
  const DataConfig& d = o.data;
  std::ostringstream o2;
  o2 << "the dataset (5 classes x " << d.elevations.count << " elevations x (" << d.train_azimuths.count
     << " training views x " << d.n_per_combo << " + " << d.train_azimuths.count + d.test_azimuths.count + 36
     << " evaluation views x " << d.n_eval_per_combo << ") = " << std::llround(dataset_images(d)) << " images) "
     << why;
  throw UsageError(worst, value, o2.str());
}

// Refuses a configuration whose `jobs` cells at once (1 for `run`) cannot fit in memory.
void check_memory(const RunFlags& f, const RunOptions& o, int jobs, const std::string& jobs_text) {
  if (dataset_images(o.data) > 2e6) blame_dataset(f, o, "would exceed 2 million images");
  const ModelOptions& mo = o.train.model;
  std::string big = o.models.front();
  for (const std::string& m : o.models)
    if (model_bytes(m, mo, o.train.batch_size) > model_bytes(big, mo, o.train.batch_size)) big = m;
  const double data = dataset_bytes(o.data), model = model_bytes(big, mo, o.train.batch_size);
  const double avail = available_bytes(), need = jobs * (data + model) + kBaseBytes;
  if (need <= avail) return;
  const std::string more = "more than the " + gigabytes(avail) + " of memory available";
  if (jobs > 1 && data + model + kBaseBytes <= avail)
    throw UsageError("--jobs", jobs_text, std::to_string(jobs) + " cells at once need about " + gigabytes(need) + ", " + more);
  if (model >= data) {
    const std::string why = "model '" + big + "' (" + fmt_num(std::round(model_params(big, mo) / 1e5) / 10) +
                            " M parameters) needs about " + gigabytes(model + kBaseBytes) + ", " + more;
    if (const char* opt = size_option(big)) throw UsageError(std::string("--") + opt, option_value(f.model, opt), why);
    throw UsageError("--models", f.models, why);
  }
  blame_dataset(f, o, "needs about " + gigabytes(data + kBaseBytes) + ", " + more);
}

// How many cells fit in memory at once (at least 1; check_memory refuses less).
int jobs_that_fit(const RunOptions& o) {
  double model = 0;
  for (const std::string& m : o.models) model = std::max(model, model_bytes(m, o.train.model, o.train.batch_size));
  const double per_cell = dataset_bytes(o.data) + model;
  return int(std::clamp(std::floor((available_bytes() - kBaseBytes) / per_cell), 1.0, 1024.0));
}

// Validates every flag into RunOptions, throwing UsageError naming the first
// bad one. `sweep`: the held-out window, memory and outputs are the sweep's to
// check (it builds one window per gap and runs cells in parallel).
// The named splits (--split): smallNORB's viewpoints, as the paper uses them.
struct SplitPreset {
  const char* name;
  std::vector<std::pair<const char*, const char*>> flags;  // run flag -> value
};
const SplitPreset kSplitPresets[] = {
    // Train on azimuths 300..40 (a third of the circle), test on 60..280; all 9 elevations.
    {"paper-azimuth", {{"train-azimuths", "300:400"}, {"n-train-views", "6"}, {"test-azimuths", "60:280"},
                       {"n-test-views", "12"}, {"elevations", "30:70"}, {"n-elev", "9"}}},
    // All 18 azimuths; train on the 3 lowest of the 9 elevations, test on the 6 highest.
    {"paper-elevation", {{"train-azimuths", "0:340"}, {"n-train-views", "18"}, {"test-azimuths", "0:340"},
                         {"n-test-views", "18"}, {"elevations", "30:40"}, {"n-elev", "3"},
                         {"test-elevations", "45:70"}, {"n-test-elev", "6"}}},
};


// The flags with --split's preset applied; a flag the preset sets that the
// user also set (changed from the command's `defaults`) is a conflict.
RunFlags with_split(const RunFlags& given, RunFlags defaults) {
  if (given.split.empty()) return given;
  RunFlags f = given;
  std::string names;
  for (const SplitPreset& p : kSplitPresets) {
    names += (names.empty() ? "" : ", ") + std::string(p.name);
    if (given.split != p.name) continue;
    for (const auto& [flag, value] : p.flags) {
      if (*run_flag(f, flag) != *run_flag(defaults, flag))
        throw UsageError("--split", given.split, std::string("conflicts with --") + flag + " '" + *run_flag(f, flag) +
                                                     "' (the preset sets it to " + value + ")");
      *run_flag(f, flag) = value;
    }
    return f;
  }
  throw UsageError("--split", given.split, "unknown split (expected " + names + ")");
}

// The defaults of `sweep`'s run flags (its training range is 0:60).
RunFlags sweep_run_defaults() {
  RunFlags f;
  f.train_az = "0:60";
  return f;
}

// --shapes, for run, sweep and export-norb.
ShapeSet parse_shapes(const std::string& v) {
  if (v == "seed") return ShapeSet::seed;
  if (v == "asym") return ShapeSet::asym;
  throw UsageError("--shapes", v, "unknown shape set (expected seed, asym)");
}

// The run flags that describe the synthetic data, and those of --data norb:DIR.
const char* const kSyntheticFlags[] = {"train-azimuths", "test-azimuths", "n-train-views", "n-test-views",
                                       "elevations", "n-elev", "test-elevations", "n-test-elev", "shapes",
                                       "n-per-combo", "n-eval-per-combo"};
const char* const kNorbFlags[] = {"data", "cameras", "brightness", "contrast"};

// --data norb:DIR: the split, cameras and jitter, and the files' index (read
// and checked now, so a bad file is a one-line error before any work).
NorbConfig validate_norb(const RunFlags& f, const RunFlags& defaults, long* n_train) {
  NorbConfig c;
  c.dir = f.data.substr(5);
  if (c.dir.empty()) throw UsageError("--data", f.data, "expected norb:DIR (the directory of smallNORB's six files)");
  for (const char* name : kSyntheticFlags)
    if (*run_flag(f, name) != *run_flag(defaults, name))
      throw UsageError(std::string("--") + name, *run_flag(f, name),
                       "applies to --data synthetic only (smallNORB's viewpoints come from --split)");
  if (f.split.empty() || f.split == "paper-azimuth") c.split = NorbSplitKind::azimuth;
  else if (f.split == "paper-elevation") c.split = NorbSplitKind::elevation;
  else if (f.split == "full") c.split = NorbSplitKind::full;
  else throw UsageError("--split", f.split, "unknown split (expected paper-azimuth, paper-elevation, full)");
  if (f.cameras == "both") c.prep.cameras = NorbCameras::both;
  else if (f.cameras == "first") c.prep.cameras = NorbCameras::first;
  else if (f.cameras == "second") c.prep.cameras = NorbCameras::second;
  else throw UsageError("--cameras", f.cameras, "expected both, first or second");
  c.prep.max_brightness = float(parse_real("--brightness", f.brightness, 0, 1, false));
  c.prep.max_contrast = float(parse_real("--contrast", f.contrast, 0, 1, false));
  if (!f.stop_at_familiar.empty() || !f.match_familiar.empty())
    throw UsageError(f.stop_at_familiar.empty() ? "--match-familiar" : "--stop-at-familiar",
                     f.stop_at_familiar.empty() ? f.match_familiar : f.stop_at_familiar,
                     "needs a familiar validation split, which --data norb does not make");
  if (!f.dump.empty()) throw UsageError("--dump", f.dump, "draws the synthetic data only (not --data norb)");
  try {
    const NorbData d = norb_load_dir(c.dir);
    const NorbSplit s = norb_split_of(d, c.split, c.dir);
    *n_train = long(s.train.size());
    c.train_az = norb_angles(d.train, s.train, false);
    c.gap_deg = s.novel.empty() ? 0.0 : azimuth_gap(c.train_az, norb_angles(d.test, s.novel, false));
    // In memory: centre crops of the training and test images (the held-out split
    // again under `full`), channels x 32 x 32 floats each.
    c.images_in_memory = long(s.train.size() + s.familiar.size() + s.novel.size()) +
                         (c.split == NorbSplitKind::full ? long(s.familiar.size()) : 0);
  } catch (const NorbError& e) {
    throw UsageError("--data", f.data, e.what());
  }
  return c;
}

RunOptions validate_run(const RunFlags& flags, int* threads, bool sweep = false) {
  const RunFlags defaults = sweep ? sweep_run_defaults() : RunFlags{};
  const bool norb = flags.data != "synthetic";
  if (norb && flags.data.rfind("norb:", 0) != 0)
    throw UsageError("--data", flags.data, "expected synthetic or norb:DIR");
  if (!norb)
    for (const char* name : kNorbFlags)
      if (*run_flag(flags, name) != *run_flag(defaults, name))
        throw UsageError(std::string("--") + name, *run_flag(flags, name),
                         "applies to --data norb:DIR only");
  const RunFlags f = norb ? flags : with_split(flags, defaults);
  RunOptions o;
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  o.train.n_epochs = int(parse_int("--n-epochs", f.n_epochs, 1, 100000));
  o.train.lr = float(parse_real("--lr", f.lr, 0, 10, true, true));
  o.train.batch_size = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  *threads = int(parse_int("--threads", f.threads, 1, 1024));
  o.reproducible = f.reproducible;
  o.data.train_azimuths = parse_range("--train-azimuths", f.train_az, "--n-train-views", f.n_train_views);
  o.data.test_azimuths = parse_range("--test-azimuths", f.test_az, "--n-test-views", f.n_test_views);
  o.data.elevations = parse_range("--elevations", f.elevations, "--n-elev", f.n_elev);
  o.data.shapes = parse_shapes(f.shapes);
  if (!f.test_elevations.empty() || !f.n_test_elev.empty()) {
    if (f.test_elevations.empty())
      throw UsageError("--n-test-elev", f.n_test_elev, "needs --test-elevations");
    // Without a count: as many held-out elevations as training ones.
    o.data.test_elevations = parse_range("--test-elevations", f.test_elevations, "--n-test-elev",
                                         f.n_test_elev.empty() ? f.n_elev : f.n_test_elev);
  }
  o.data.n_per_combo = int(parse_int("--n-per-combo", f.n_per_combo, 1, 10000));
  o.data.n_eval_per_combo = int(parse_int("--n-eval-per-combo", f.n_eval_per_combo, 1, 10000));
  long norb_train = 0;
  if (norb) o.data.norb = validate_norb(f, defaults, &norb_train);

  o.models.clear();
  for (const std::string& m : split(f.models, ',')) {
    if (find_model(m) == nullptr) throw UsageError("--models", f.models, "unknown model '" + m + "' (expected " + model_names() + ")");
    for (const auto& seen : o.models)
      if (seen == m) throw UsageError("--models", f.models, "model '" + m + "' listed twice");
    o.models.push_back(m);
  }
  if (o.models.empty()) throw UsageError("--models", f.models, "no model given");
  o.train.model = f.model;
  check_models("--models", f.models, o.models, f.model);

  // Stopping at a familiar accuracy, measured on a validation split of its own
  // (as many images per combination as the familiar test split).
  if (!f.stop_at_familiar.empty()) {
    if (!f.match_familiar.empty())
      throw UsageError("--stop-at-familiar", f.stop_at_familiar, "conflicts with --match-familiar (which sets the target)");
    o.stop_at_familiar = parse_real("--stop-at-familiar", f.stop_at_familiar, 0, 1, /*lo_open=*/true);
  }
  if (!f.match_familiar.empty()) {
    if (std::find(o.models.begin(), o.models.end(), f.match_familiar) == o.models.end())
      throw UsageError("--match-familiar", f.match_familiar, "not among --models '" + f.models + "'");
    if (o.models.size() < 2)
      throw UsageError("--match-familiar", f.match_familiar, "needs another model to stop at its accuracy");
    o.match_familiar = f.match_familiar;
  }
  if (!f.stop_check_every.empty()) {
    if (f.stop_at_familiar.empty() && f.match_familiar.empty())
      throw UsageError("--stop-check-every", f.stop_check_every, "has no effect without --stop-at-familiar or --match-familiar");
    o.train.stop_every = int(parse_int("--stop-check-every", f.stop_check_every, 1, 100000000));
  }
  if (o.stop_at_familiar > 0 || !o.match_familiar.empty()) o.data.n_val_per_combo = o.data.n_eval_per_combo;

  if (!sweep && !norb)
    check_geometry_flags(f, o.data, false, {"--test-azimuths", f.test_az, "--test-azimuths", f.test_az, ""});
  // One step per epoch of a batch holding every image would train at chance.
  const long long train_images = 1ll * kNumClasses * o.data.train_azimuths.count * o.data.elevations.count *
                                 o.data.n_per_combo;
  if (norb && o.train.batch_size > norb_train)
    throw UsageError("--batch-size", f.batch_size,
                     "larger than the training set (" + std::to_string(norb_train) + " images in the split)");
  if (!norb && o.train.batch_size > train_images)
    throw UsageError("--batch-size", f.batch_size,
                     "larger than the training set (" + std::to_string(train_images) + " images = 5 classes x " +
                         std::to_string(o.data.train_azimuths.count) + " views x " +
                         std::to_string(o.data.elevations.count) + " elevations x " +
                         std::to_string(o.data.n_per_combo) + " per combination)");
  if (sweep) return o;
  check_memory(f, o, 1, "1");

  // Outputs: each file written once; regular files (or new ones) only.
  std::vector<OutputFile> outputs;
  if (!f.out_json.empty()) outputs.push_back({"--out-json", f.out_json, f.out_json});
  if (!f.dump.empty())
    for (const std::string& file : dump_files(f.dump)) outputs.push_back({"--dump", f.dump, file});
  check_distinct_outputs(outputs);
  if (!f.out_json.empty()) {
    try {
      check_writable(f.out_json);
    } catch (const std::runtime_error& e) {
      throw UsageError("--out-json", f.out_json, e.what());
    }
  }
  if (!f.dump.empty()) {
    try {
      make_output_dir(f.dump);
      remove_stale_temps(resolve_output_path(f.dump), false);
      for (const std::string& file : dump_files(f.dump)) check_writable(file);
    } catch (const std::runtime_error& e) {
      throw UsageError("--dump", f.dump, e.what());
    }
  }
  return o;
}

int do_run(const RunFlags& f) {
  int threads = 1;
  RunOptions opt = validate_run(f, &threads);
  opt.threads = threads;
  opt.train.circle_every_epoch = !f.dump.empty();  // snapshots for the animation
  omp_set_num_threads(threads);
  auto log = spdlog::stderr_color_mt("viewgap");
  log->set_pattern("[%T.%e] %v");
  if (f.quiet) log->set_level(spdlog::level::warn);
  log->info("viewgap run: seed {}, {} epochs, models {}, {} thread(s), ISA {} (oneDNN {}){}",
            opt.train.seed, opt.train.n_epochs, f.models, threads, isa_name(selected_isa()),
            onednn_isa(), opt.reproducible ? ", reproducible" : "");
  std::vector<ClassPose> poses;
  ClassReconstructions recons;
  const RunResult r = run_experiment(
      opt,
      [&](const std::string& model, const EpochStats& e) {
        log->info("[{}] epoch {:>3}/{}  loss {:.4f}  familiar {:.3f}  held-out {:.3f}  ({:.3f} s)",
                  model, e.epoch, opt.train.n_epochs, e.loss, e.familiar, e.heldout, e.seconds);
      },
      [&](const std::string& name, Model& model, const Dataset& data) {
        // The figures show the first model with class capsules, and the first
        // with a decoder.
        if (f.dump.empty()) return;
        if (poses.empty() && model.class_capsules().pose_dim > 0) poses = class_poses(model, data.heldout);
        if (recons.model.empty()) recons = class_reconstructions(name, model, data.heldout);
      });
  std::cout << format_run_table(opt, r);  // flushed, and checked, by flush_stdout() below
  const nlohmann::json j = run_to_json(opt, r, threads);
  if (!f.out_json.empty()) {
    write_file_atomic(f.out_json, j.dump(2) + "\n");
    log->info("wrote {}", f.out_json);
  }
  if (!f.dump.empty()) {
    write_dump(f.dump, opt.train.seed, j, poses, recons);
    log->info("wrote figure inputs to {}", f.dump);
  }
  flush_stdout();
  return 0;
}

struct SweepFlags {
  RunFlags run;
  std::string seeds = "0:29", gaps = "0,30,60,90,120", test_width = "60", jobs, out, reference;
  std::string shard;  // "K/N"
  std::string merge;  // `viewgap merge`: the shard directories, one a line
  std::vector<std::string> grid;
  bool resume = false, quiet = false;
};

std::vector<uint64_t> parse_seeds(const std::string& v) {
  std::vector<uint64_t> seeds;
  const auto colon = v.find(':');
  if (colon != std::string::npos) {
    const long long a = parse_int("--seeds", v.substr(0, colon), 0, 1ll << 53);
    const long long b = parse_int("--seeds", v.substr(colon + 1), 0, 1ll << 53);
    if (b < a) throw UsageError("--seeds", v, "empty range (B < A)");
    if (b - a >= 100000) throw UsageError("--seeds", v, "more than 100000 seeds");
    for (long long s = a; s <= b; ++s) seeds.push_back(uint64_t(s));
  } else {
    for (const std::string& x : split(v, ','))
      seeds.push_back(uint64_t(parse_int("--seeds", x, 0, 1ll << 53)));
  }
  if (seeds.empty()) throw UsageError("--seeds", v, "no seed given");
  std::vector<uint64_t> sorted = seeds;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw UsageError("--seeds", v, "a seed is listed twice");
  return seeds;
}

// A grid value as what it means, so "2e-3" and "0.002" (or "1" and "01") are one value.
std::string canonical_value(const std::string& v) {
  std::ostringstream o;
  o.precision(17);
  if (const auto w = parse_whole(v)) {
    o << w.value;
  } else if (const auto r = parse_real_number(v)) {
    o << r.value;
  } else if (const auto colon = v.find(':'); colon != std::string::npos && parse_real_number(v.substr(0, colon)) &&
                                             parse_real_number(v.substr(colon + 1))) {
    o << parse_real_number(v.substr(0, colon)).value << ':' << parse_real_number(v.substr(colon + 1)).value;
  } else {
    return v;
  }
  return o.str();
}

int sweep_on(const SweepFlags& f, Cluster* cluster) {
  const std::vector<uint64_t> seeds = parse_seeds(f.seeds);
  // "--gaps given": one held-out set, the run flags' own (--test-azimuths,
  // --test-elevations or a --split preset), instead of windows stepped by gap.
  // smallNORB's split fixes the held-out views: one window, as given.
  const bool norb = f.run.data != RunFlags{}.data;
  if (norb && f.gaps != SweepFlags{}.gaps && f.gaps != "given")
    throw UsageError("--gaps", f.gaps, "with --data norb the split fixes the held-out views (leave --gaps out, or give 'given')");
  const bool given = f.gaps == "given" || norb;
  if (!given && f.run.test_az != RunFlags{}.test_az)
    throw UsageError("--test-azimuths", f.run.test_az, "applies with --gaps given only (gaps step the held-out window)");
  std::vector<double> gaps;
  for (const std::string& g : given ? std::vector<std::string>{"0"} : split(f.gaps, ',')) {
    const double v = parse_real("--gaps", g, 0, 359, false);
    if (std::find(gaps.begin(), gaps.end(), v) != gaps.end()) throw UsageError("--gaps", f.gaps, "gap " + fmt_num(v) + " listed twice");
    gaps.push_back(v);
  }
  if (gaps.empty()) throw UsageError("--gaps", f.gaps, "no gap given");
  const double width = parse_real("--test-width", f.test_width, 0, 359, false);
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  int jobs = f.jobs.empty() ? hw : int(parse_int("--jobs", f.jobs, 1, 1024));

  // Grid axes: NAME=v1,v2,... over any run flag but those the sweep owns.
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  for (const std::string& g : f.grid) {
    const auto eq = g.find('=');
    const std::string name = g.substr(0, eq);
    RunFlags probe;
    if (eq == std::string::npos || run_flag(probe, name) == nullptr || name == "seed" ||
        name == "test-azimuths" || name == "threads" || name == "models")
      throw UsageError("--grid", g, "expected NAME=v1,v2,... with NAME a run flag or model option (e.g. lr, em-grad, loss)");
    for (const auto& a : axes)
      if (a.first == name) throw UsageError("--grid", g, "flag '" + name + "' gridded twice");
    std::vector<std::string> values = split(g.substr(eq + 1), ',');
    if (values.empty() || std::find(values.begin(), values.end(), "") != values.end())
      throw UsageError("--grid", g, "empty value");
    // The same value twice would run duplicate cells and count them twice.
    for (size_t i = 0; i < values.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (canonical_value(values[i]) == canonical_value(values[j]))
          throw UsageError("--grid", g, "'" + values[j] + "' and '" + values[i] + "' are the same " + name);
    axes.emplace_back(name, values);
  }
  // Cartesian product of the axes: the grid points.
  std::vector<std::vector<std::pair<std::string, std::string>>> points{{}};
  for (const auto& [name, values] : axes) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& p : points)
      for (const auto& v : values) {
        next.push_back(p);
        next.back().emplace_back(name, v);
      }
    points = next;
  }

  SweepPlan plan;
  std::vector<std::pair<RunFlags, RunOptions>> sized;  // per grid point, for the memory check
  plan.dir = f.out;
  plan.resume = f.resume;
  plan.quiet = f.quiet;
  for (const auto& point : points) {
    RunFlags rf = f.run;
    std::string grid;
    for (const auto& [name, value] : point) {
      *run_flag(rf, name) = value;
      grid += (grid.empty() ? "" : ";") + name + "=" + value;
    }
    int threads = 1;
    const RunOptions base = validate_run(rf, &threads, true);  // names any bad fixed or grid value
    plan.models = base.models;
    // By default caps is the reference (no paired statistics without it); a
    // reference asked for must be among the models.
    if (!f.reference.empty() && std::find(base.models.begin(), base.models.end(), f.reference) == base.models.end())
      throw UsageError("--reference", f.reference, "is not among --models '" + rf.models + "'");
    plan.reference = f.reference.empty() ? "caps" : f.reference;
    const AngleRange& tr = base.data.train_azimuths;
    // The held-out window of gap g starts g degrees after the training range
    // ends; run's geometry rules judge it (a window touching the range's end,
    // at gap 0, is the one exception).
    auto window = [&](double g) {
      RunOptions o = base;
      if (given) return o;
      o.data.test_azimuths.from = tr.to + g;
      o.data.test_azimuths.to = tr.to + g + width;
      return o;
    };
    auto span = [&](const RunOptions& o) {
      return fmt_num(o.data.test_azimuths.from) + ":" + fmt_num(o.data.test_azimuths.to);
    };
    // If the window does not fit beside the training range even at gap 0, its width is at fault.
    if (given && !norb)
      check_geometry_flags(rf, base.data, false, {"--test-azimuths", rf.test_az, "--test-azimuths", rf.test_az, ""});
    else if (!given)
      check_geometry_flags(rf, window(0).data, true,
                           {"--test-width", f.test_width, "--test-width", f.test_width,
                            "a window this wide (" + span(window(0)) + " at gap 0) reaches round to the training range: "});
    for (double g : gaps) {
      const RunOptions opt = window(g);
      if (!norb)
        check_geometry_flags(rf, opt.data, true,
                             {"--test-width", f.test_width, "--gaps", f.gaps,
                              "gap " + fmt_num(g) + " (held-out window " + span(opt) + "): "});
      // smallNORB: the split's own azimuth gap (paper-azimuth: 20 degrees).
      const double true_gap =
          norb ? opt.data.norb->gap_deg : azimuth_gap(tr.values(), opt.data.test_azimuths.values());
      for (uint64_t seed : seeds) {
        SweepCell c;
        c.id = int(plan.cells.size());
        c.seed = seed;
        c.gap = given ? true_gap : g;
        c.true_gap = true_gap;
        c.grid = grid;
        c.opt = opt;
        c.opt.train.seed = seed;
        plan.cells.push_back(c);
      }
    }
    sized.emplace_back(rf, window(gaps.front()));
  }
  // Cells run `jobs` at a time (never more than there are), each with its own
  // dataset and model: by default as many as fit; asked for, too many is an error.
  jobs = std::min(jobs, int(plan.cells.size()));
  for (const auto& [rf, opt] : sized) {
    if (f.jobs.empty()) jobs = std::min(jobs, jobs_that_fit(opt));
    check_memory(rf, opt, jobs, f.jobs.empty() ? std::to_string(jobs) : f.jobs);
  }
  plan.jobs = jobs;
  // Everything that defines the results (not --jobs, --resume, --quiet, --out).
  nlohmann::json run_flags;
  // The flags of --data norb only when set, so sweeps made before them keep their hash.
  for (const FlagSpec& s : kRunFlags)
    if (std::string(s.name) != "seed" && (given || std::string(s.name) != "test-azimuths") &&
        std::string(s.name) != "threads" &&
        (norb || std::find_if(std::begin(kNorbFlags), std::end(kNorbFlags),
                              [&](const char* n) { return s.name == std::string(n); }) == std::end(kNorbFlags)))
      run_flags[s.name] = f.run.*(s.field);
  for (const auto& [name, value] : f.run.model) run_flags[name] = value;
  plan.config = {{"seeds", seeds}, {"gaps", gaps}, {"test_width", width},
                 {"grid", axes}, {"run_flags", run_flags}, {"reference", plan.reference}};
  // The typed configuration of the first cell, in the run JSON's form (not hashed).
  plan.run_config = run_config_json(plan.cells.front().opt, 1);
  if (f.run.reproducible) plan.config["reproducible"] = true;  // absent: older sweeps keep their hash
  // --shard K/N: the cells with id = K mod N; --merge: the shards' tables into --out.
  std::vector<std::string> merge_dirs;
  if (!f.shard.empty()) {
    const auto slash = f.shard.find('/');
    const ParsedNumber<long long> k = parse_whole(f.shard.substr(0, slash));
    const ParsedNumber<long long> n = parse_whole(slash == std::string::npos ? "" : f.shard.substr(slash + 1));
    if (!k || !n || n.value < 1 || n.value > 1000000 || k.value < 0 || k.value >= n.value)
      throw UsageError("--shard", f.shard, "expected K/N with 0 <= K < N (e.g. 3/16: the cells whose index is 3 mod 16)");
    plan.shard = int(k.value);
    plan.shards = int(n.value);
    if (plan.shards > 1) plan.config["shard"] = f.shard;
  }
  if (!f.merge.empty()) merge_dirs = split(f.merge, '\n');
  // Started by mpirun/srun: rank 0 runs the sweep and writes; the other ranks
  // run the cells it hands them (harness/cluster.h).
  if (cluster != nullptr) {
    if (!f.shard.empty())
      throw UsageError("--shard", f.shard, "conflicts with an MPI launch (mpirun/srun hands out the cells; shards are for job arrays)");
    if (cluster->rank() != 0) return serve_sweep(plan, *cluster);
  }
  std::unique_ptr<DirLock> lock;
  try {
    lock = prepare_sweep_dir(plan);
  } catch (const WriteError&) {
    throw;  // a full disk is not bad input: exit 1
  } catch (const std::runtime_error& e) {
    throw UsageError("--out", f.out, e.what());
  }
  if (!merge_dirs.empty()) {
    SweepOutcome r;
    try {
      r = merge_shards(plan, merge_dirs);
    } catch (const WriteError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(e.what());  // names the shard directory at fault
    }
    std::printf("%d cells merged from %zu shards (%d failed); results in %s\n", int(plan.cells.size()),
                merge_dirs.size(), r.failed, f.out.c_str());
    flush_stdout();
    return 0;
  }
  const SweepOutcome r = run_sweep(plan, cluster);
  int in_shard = 0;
  for (const SweepCell& c : plan.cells) in_shard += plan.in_shard(c);
  std::printf("%d cells%s (%d run now, %d resumed, %d failed) in %.1f s; results in %s\n", in_shard,
              plan.shards > 1 ? (" of " + std::to_string(plan.cells.size()) + ", shard " + f.shard).c_str() : "",
              r.ran, r.resumed, r.failed, r.wall_s, f.out.c_str());
  flush_stdout();
  return 0;
}

// The one line for a failure, and its exit code: 2 bad input, 3 non-finite
// training, 1 anything else.
int report_error(const std::exception_ptr& ep, const std::string& command) {
  try {
    std::rethrow_exception(ep);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "viewgap %s: error: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "viewgap: error: %s\n", printable(e.what()).c_str());
    return 2;
  } catch (const NonFiniteError& e) {
    std::fprintf(stderr, "viewgap: stopped: %s\n", printable(e.what()).c_str());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "viewgap: error: %s\n", printable(e.what()).c_str());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "viewgap: error: unknown failure\n");
    return 1;
  }
}

// `sweep`: under mpirun/srun every rank joins the job before it judges the
// flags, so that a failure on any rank ends the job in order: rank 0 says what
// is wrong (one line) and then dismisses the others, which end silently with
// exit 0 (a worker's non-zero exit would make the launcher kill rank 0 before
// it has spoken). A worker that fails alone says so and sits the sweep out.
int do_sweep(const SweepFlags& f) {
  if (!launched_by_mpi() || !f.merge.empty()) return sweep_on(f, nullptr);
  const std::unique_ptr<Cluster> cluster = Cluster::join();
  try {
    return sweep_on(f, cluster.get());
  } catch (...) {
    if (cluster->rank() == 0) {
      const int code = report_error(std::current_exception(), "sweep");
      dismiss_workers(*cluster, code);
      return code;
    }
    if (sit_out_sweep(*cluster)) {
      std::fprintf(stderr, "viewgap sweep (rank %d): ", cluster->rank());
      report_error(std::current_exception(), "sweep");
    }
    return 0;
  }
}

// `viewgap export-norb DIR`: the synthetic shapes as smallNORB's six files.
struct ExportFlags {
  std::string dir, seed = "0", shapes = "seed", instances = "5", lightings = "6";
  bool quiet = false;
};

int do_export_norb(const ExportFlags& f) {
  NorbExportConfig c;
  c.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  c.shapes = parse_shapes(f.shapes);
  c.instances = int(parse_int("--instances", f.instances, 1, 5));
  c.lightings = int(parse_int("--lightings", f.lightings, 1, kNorbLightings));
  // Every output judged before any work: DIR made if absent, and none of the
  // six files there yet (an export never replaces a file).
  const std::pair<NorbPart, NorbFiles> parts[] = {{NorbPart::training, norb_files(f.dir, NorbPart::training)},
                                                   {NorbPart::testing, norb_files(f.dir, NorbPart::testing)}};
  try {
    make_output_dir(f.dir);
    remove_stale_temps(resolve_output_path(f.dir), false);
    for (const auto& [part, files] : parts)
      for (const std::string* path : {&files.dat, &files.cat, &files.info}) {
        struct stat st;
        if (::lstat(path->c_str(), &st) == 0)
          throw std::runtime_error("holds " + *path + " already (export-norb replaces no file: remove it, or choose another DIR)");
        check_writable(*path);
      }
  } catch (const std::runtime_error& e) {
    throw UsageError("DIR", f.dir, e.what());
  }
  const auto t0 = std::chrono::steady_clock::now();
  long pairs = 0;
  for (const auto& [part, files] : parts) {
    NorbExportSplit s = render_norb_split(c, part);
    std::vector<int32_t> info;
    for (const NorbInfo& r : s.info) info.insert(info.end(), {r.instance, r.elevation, r.azimuth, r.lighting});
    const int32_t n = int32_t(s.labels.size()), cat_dims[] = {n}, info_dims[] = {n, kNorbInfoCols};
    write_file_atomic(files.info, norb_encode_ints(info, info_dims));
    write_file_atomic(files.cat, norb_encode_ints(s.labels, cat_dims));
    write_file_atomic(files.dat, s.dat);
    pairs += n;
  }
  if (!f.quiet)
    std::fprintf(stderr, "viewgap export-norb: %ld stereo pairs of 96 x 96 (%s shapes, %d instance(s), %d lighting(s)) in %s, %.1f s\n",
                 pairs, f.shapes.c_str(), c.instances, c.lightings, f.dir.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

// viewgap merge DIR... --out DIR: the shards' configuration, read from the
// first one's meta.json, becomes the sweep's flags again (the same parser and
// plan as `sweep`), so the merge checks every shard against that plan.
struct MergeFlags {
  std::vector<std::string> dirs;
  std::string out;
  bool force = false;
};

int do_merge(const MergeFlags& m) {
  for (const std::string& d : m.dirs)
    if (d.empty()) throw UsageError("DIR", d, "empty directory name");
  const std::string& first = m.dirs.front();
  nlohmann::json cfg;
  try {
    std::ifstream in(first + "/meta.json");
    if (!in) throw std::runtime_error("no meta.json");
    cfg = nlohmann::json::parse(in).at("config");
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + first + "': not a sweep directory (" + e.what() + ")");
  }
  SweepFlags f;
  auto number = [](const nlohmann::json& v) {
    if (v.is_number_integer()) return std::to_string(v.get<long long>());
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v.get<double>());
    return std::string(buf);
  };
  auto list = [&](const nlohmann::json& a) {
    std::string s;
    for (const auto& v : a) s += (s.empty() ? "" : ",") + number(v);
    return s;
  };
  try {
    if (!cfg.contains("shard")) throw std::runtime_error("made without --shard K/N");
    f.seeds = list(cfg.at("seeds"));
    f.test_width = number(cfg.at("test_width"));
    const nlohmann::json& rf = cfg.at("run_flags");
    f.gaps = rf.contains("test-azimuths") ? "given" : list(cfg.at("gaps"));
    for (const auto& axis : cfg.at("grid")) {
      std::string g = axis.at(0).get<std::string>() + "=";
      for (const auto& v : axis.at(1)) g += (g.back() == '=' ? "" : ",") + v.get<std::string>();
      f.grid.push_back(g);
    }
    for (const auto& [name, value] : rf.items()) {
      std::string* field = run_flag(f.run, name);
      if (field == nullptr) throw std::runtime_error("flag --" + name + " unknown to this viewgap");
      *field = value.get<std::string>();
    }
    f.reference = cfg.value("reference", "");
    f.run.reproducible = cfg.value("reproducible", false);
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + first + "': not a shard of a sweep this viewgap can merge (" + e.what() + ")");
  }
  std::error_code ec;
  if (std::filesystem::exists(m.out + "/meta.json", ec) && !m.force)
    throw UsageError("--out", m.out, "holds a sweep already; add --force to replace its tables with the merge");
  f.out = m.out;
  f.resume = m.force;  // lets prepare_sweep_dir accept a sweep of this configuration
  f.quiet = true;
  for (const std::string& d : m.dirs) f.merge += (f.merge.empty() ? "" : "\n") + d;
  return do_sweep(f);
}

struct ProfileFlags {
  std::string model = "caps", batch_size = "32", steps = "200", warmup = "20", seed = "0";
  std::string threads = "1", out = "profile.csv", trace;
  ModelOptions options = RunFlags::default_model_options();
  bool reproducible = false;
};

int do_profile(const ProfileFlags& f) {
  ProfileOptions o;
  if (find_model(f.model) == nullptr) throw UsageError("--model", f.model, "unknown model (expected " + model_names() + ")");
  check_models("--model", f.model, {f.model}, f.options);
  if (find_model(f.model)->fit_in_one_pass)
    throw UsageError("--model", f.model, "is fit in one pass over the training set: it has no training step to profile");
  o.model = f.model;
  o.train.model = f.options;
  o.batch = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  o.steps = int(parse_int("--steps", f.steps, 1, 1000000));
  o.warmup = int(parse_int("--warmup", f.warmup, 0, 1000000));
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, 1ll << 53));
  const int threads = int(parse_int("--threads", f.threads, 1, 1024));
  if (f.reproducible && threads != 1)
    throw UsageError("--threads", f.threads, "--reproducible runs on one thread (oneDNN splits its sums by thread count)");
  const double need = model_bytes(f.model, f.options, o.batch) + dataset_bytes(DataConfig{}) + kBaseBytes;
  if (need > available_bytes()) {
    const char* opt = size_option(f.model);
    throw UsageError(opt ? std::string("--") + opt : "--model", opt ? option_value(f.options, opt) : f.model,
                     "needs about " + gigabytes(need) + ", more than the " + gigabytes(available_bytes()) +
                         " of memory available");
  }
  std::vector<OutputFile> outputs;
  for (const auto& [flag, path] : {std::pair{"--out", f.out}, std::pair{"--trace", f.trace}}) {
    if (path.empty() && std::string(flag) == "--trace") continue;
    try {
      check_writable(path);
    } catch (const std::runtime_error& e) {
      throw UsageError(flag, path, e.what());
    }
    outputs.push_back({flag, path, path});
  }
  check_distinct_outputs(outputs);
  o.out_csv = f.out;
  o.trace = f.trace;
  omp_set_num_threads(threads);
  run_profile(o);
  flush_stdout();
  return 0;
}

// CLI11 says only "--seed: At Most 1 required but received 2" for a flag given
// twice: name it and both values. "" if no option was given too often.
std::string repeated_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->get_expected_max() == 1 && o->count() > 1) {
        std::string values;
        for (const std::string& v : o->results()) values += (values.empty() ? "'" : ", '") + v + "'";
        return o->get_name() + " given " + std::to_string(o->count()) + " times (" + values + "): give it once";
      }
  return "";
}

// CLI11's message for a parse error, made to name the flag and its value where
// it does not: a flag given twice, a flag whose value is missing ("--seed=").
std::string parse_error_line(CLI::App& app, const CLI::ParseError& e) {
  const std::string repeated = repeated_option(app);
  if (!repeated.empty()) return repeated;
  const std::string what = e.what();
  const auto colon = what.find(": ");
  if (what.rfind("--", 0) == 0 && colon != std::string::npos && what.find(" required ") != std::string::npos &&
      what.size() >= 8 && what.compare(what.size() - 8, 8, " missing") == 0)
    return what.substr(0, colon) + " '': no value given";
  return what;
}

// An empty value is never "absent": --out-json "", --jobs "" are errors like any
// other bad value (one rule for every option of the command).
void check_no_empty_values(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->get_expected_min() > 0 && o->count() > 0)
        for (const std::string& v : o->results())
          if (v.empty()) throw UsageError(o->get_name(), v, "empty value");
}

}  // namespace

int cli_main(int argc, char** argv) {
  // Under mpirun every rank parses the same flags: rank 0 alone reports what is wrong.
  const bool mute = launched_by_mpi() && launcher_rank() != 0;
  // Nor do they report an interrupt (the launcher's, when the job ends): they write nothing.
  if (mute)
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  CLI::App app{"viewgap: novel-viewpoint generalisation of matrix capsules (EM routing) vs CNNs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("viewgap 0.1.0"));

  RunFlags rf;
  CLI::App* run = app.add_subcommand("run", "Train and evaluate the models on one configuration");
  add_run_flags(run, rf, {});
  run->add_option("--out-json", rf.out_json, "Write the full results as JSON (atomically)");
  run->add_option("--dump", rf.dump, "Also write figure inputs to DIR (dataset samples, poses, snapshots)");
  run->add_flag("--quiet,-q", rf.quiet, "No progress on stderr");
  const char* repro_help = "Bit-identical results on every x86-64 CPU with AVX2+FMA (pins oneDNN and the kernels at AVX2; one thread)";
  run->add_flag("--reproducible", rf.reproducible, repro_help);

  SweepFlags sf;
  CLI::App* sweep = app.add_subcommand("sweep", "Seeds x azimuth gaps (x any run flag) in parallel, with statistics");
  sweep->add_option("--seeds", sf.seeds, "Seeds: A:B (inclusive) or a comma list")->capture_default_str();
  sweep->add_option("--gaps", sf.gaps,
                    "Gaps in degrees between the training range and the held-out window; 'given': the held-out "
                    "set of --test-azimuths/--test-elevations/--split as given")->capture_default_str();
  sweep->add_option("--test-width", sf.test_width, "Width of the held-out window in degrees")->capture_default_str();
  sweep->add_option("--grid", sf.grid, "NAME=v1,v2,...: also sweep the run flag or model option --NAME (repeatable)");
  sweep->add_option("--reference", sf.reference, "Paired statistics: this model minus each other one (default caps)");
  sweep->add_option("--jobs", sf.jobs, "Cells run in parallel (default: the number of cores)");
  sweep->add_option("--out", sf.out, "Output directory")->required();
  sweep->add_flag("--resume", sf.resume, "Continue the sweep in --out, skipping finished cells");
  sweep->add_option("--shard", sf.shard,
                    "K/N: run only the cells whose index is K mod N (a Slurm array task: K = $SLURM_ARRAY_TASK_ID)");
  sweep->add_flag("--quiet,-q", sf.quiet, "No progress on stderr");
  sweep->add_flag("--reproducible", sf.run.reproducible, repro_help);
  sf.run.train_az = sweep_run_defaults().train_az;
  MergeFlags mf;
  CLI::App* merge = app.add_subcommand("merge", "Merge the shards of a sweep (sweep --shard K/N) into the tables of the whole");
  merge->add_option("DIR", mf.dirs, "The shard directories, every K of 0..N-1 once")->required();
  merge->add_option("--out", mf.out, "Output directory")->required();
  merge->add_flag("--force", mf.force, "Replace the tables of a sweep of the same configuration in --out");
  ExportFlags ef;
  CLI::App* exp = app.add_subcommand("export-norb",
                                     "Write the synthetic shapes as smallNORB's six files (96 x 96 stereo, its viewpoints)");
  exp->add_option("DIR", ef.dir, "Output directory (created if absent; no file there is replaced)")->required();
  exp->add_option("--seed", ef.seed, "Seed of the pixel noise")->capture_default_str();
  exp->add_option("--shapes", ef.shapes, "The shape set: seed or asym")->capture_default_str();
  exp->add_option("--instances", ef.instances, "Instances per class and split, 1..5 (smallNORB: 5)")->capture_default_str();
  exp->add_option("--lightings", ef.lightings, "Lighting levels, 1..6 (smallNORB: 6)")->capture_default_str();
  exp->add_flag("--quiet,-q", ef.quiet, "No summary on stderr");
  ProfileFlags pf;
  CLI::App* prof = app.add_subcommand("profile", "Per-layer timings of training steps -> CSV (and a Chrome trace)");
  prof->add_option("--model", pf.model, "The model: " + model_names())->capture_default_str();
  prof->add_option("--batch-size", pf.batch_size, "Batch size")->capture_default_str();
  prof->add_option("--steps", pf.steps, "Timed training steps")->capture_default_str();
  prof->add_option("--warmup", pf.warmup, "Untimed steps first")->capture_default_str();
  prof->add_option("--seed", pf.seed, "Seed of data and initialisation")->capture_default_str();
  prof->add_option("--threads", pf.threads, "oneDNN threads")->capture_default_str();
  add_model_flags(prof, pf.options);
  prof->add_option("--out", pf.out, "CSV: one row per layer and pass")->capture_default_str();
  prof->add_option("--trace", pf.trace, "Also write a Chrome trace-event JSON (Perfetto, chrome://tracing)");
  prof->add_flag("--reproducible", pf.reproducible, repro_help);
  add_run_flags(sweep, sf.run, {"seed", "threads"});  // --test-azimuths: with --gaps given only

  // CLI11 says only "A subcommand is required" for a mistyped one: name it.
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(subs.begin(), subs.end(), [&](const CLI::App* a) { return a->get_name() == argv[1]; })) {
    if (!mute) std::fprintf(stderr, "viewgap: error: unknown command '%s' (expected run, sweep, merge, profile or export-norb)\n",
                 printable(argv[1]).c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!mute) std::fprintf(stderr, "viewgap: error: %s\n", printable(parse_error_line(app, e)).c_str());
    return 2;
  }
  try {
    check_no_empty_values(app);
    if ((run->parsed() && rf.reproducible) || (sweep->parsed() && sf.run.reproducible) ||
        (prof->parsed() && pf.reproducible))
      enable_reproducible();
    // VIEWGAP_ISA is input too: validate it before any work.
    (void)selected_isa();
    if (run->parsed()) return do_run(rf);
    if (sweep->parsed()) return do_sweep(sf);
    if (prof->parsed()) return do_profile(pf);
    if (merge->parsed()) return do_merge(mf);
    if (exp->parsed()) return do_export_norb(ef);
  } catch (...) {
    if (mute) return 1;
    return report_error(std::current_exception(), app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name());
  }
  return 0;
}



}  // namespace vg
