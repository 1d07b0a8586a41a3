#include "harness/run_flags.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "harness/checkpoint.h"
#include "harness/memory_budget.h"
#include "harness/output.h"
#include "harness/report.h"
#include "models/numbers.h"
#include "models/registry.h"

namespace vg {

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


namespace {

const FlagSpec kRunFlags[] = {
    {"seed", &RunFlags::seed, "Seed of data (not --data toys' world: --toy-seed), initialisation and shuffling"},
    {"n-epochs", &RunFlags::n_epochs, "Training epochs"},
    {"max-steps", &RunFlags::max_steps,
     "A budget of training steps beside --n-epochs: training ends at whichever comes first, the last epoch at "
     "its step (evaluated on the images it saw)",
     false},
    {"lr", &RunFlags::lr, "Adam learning rate"},
    {"model-lr", &RunFlags::model_lr,
     "Learning rates of some models, MODEL=LR[,MODEL=LR...]; the others train at --lr (a model's best rate "
     "depends on the data: dr needs 1e-3 on the toys)",
     false},
    {"lr-schedule", &RunFlags::lr_schedule,
     "Each model's rate over training, a function of the step: constant, exp:RATE:STEPS (RATE^(step/STEPS); "
     "capsule_em's exp:0.96:20000), exp-staircase:RATE:STEPS (RATE^floor(step/STEPS)) or cosine[:FLOOR] (down to "
     "FLOOR x the rate, default 0, over the training's steps)",
     false},
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
     "A named split of the data source (docs/protocols.md)"},
    {"data", &RunFlags::data, "The data source (docs/data.md)"},
    {"n-per-combo", &RunFlags::n_per_combo, "Training images per (class, azimuth, elevation)"},
    {"n-eval-per-combo", &RunFlags::n_eval_per_combo, "Evaluation images per combination"},
    {"noise", &RunFlags::noise,
     "Standard deviation of the Gaussian pixel noise on every rendered image, in [0, 0.5] (images span 0..1)", false},
    {"models", &RunFlags::models, "Comma-separated model names"},
    {"stop-at-familiar", &RunFlags::stop_at_familiar,
     "Stop each model when its accuracy on a familiar validation split reaches ACC in (0, 1] (--n-epochs caps it)"},
    {"match-familiar", &RunFlags::match_familiar,
     "Train MODEL (one of --models) first, in full; stop every other model at its final familiar validation accuracy"},
    {"stop-check-every", &RunFlags::stop_check_every,
     "Steps between checks of the stopping rule (default: after each epoch)"},
    {"eval-every", &RunFlags::eval_every,
     "Steps between checks inside an epoch: the familiar validation, familiar test and held-out errors then, the "
     "JSON's checks (default: at epoch ends only, the history)",
     false},
    {"eval-until", &RunFlags::eval_until,
     "--eval-every's checks up to this step only, the epoch ends after it: a dense start, where a fast model's "
     "familiar error falls through the frontier's levels, without dense checks all through (default: all through)",
     false},
    {"check-sample", &RunFlags::check_sample,
     "Images of each split a check scores (familiar validation, familiar test, held-out): a fixed subsample of at "
     "most N per split, drawn from the seed, the same at every check and for every model (the history, checks and "
     "trajectory.csv); the final results score every image (default: every image at every check)",
     false},
    {"validation", &RunFlags::validation,
     "on: also score a familiar validation split (as many images per combination as the familiar test split) after "
     "every epoch, the history's and trajectory.csv's validation column, from which a sweep makes frontier.csv (the "
     "stopping rules make one anyway)",
     false},
};

// The text of run flag or model option `name` (what --grid NAME=... sets), or
// nullptr; `Flags` is RunFlags or const RunFlags.
template <class Flags>
auto run_flag(Flags& f, const std::string& name) -> decltype(&f.seed) {
  for (const FlagSpec& s : kRunFlags)
    if (name == s.name) return &(f.*(s.field));
  if (const auto it = f.model.find(name); it != f.model.end()) return &it->second;
  if (const auto it = f.protocol.find(name); it != f.protocol.end()) return &it->second;
  return nullptr;
}


}  // namespace

std::string default_models_flag() {
  std::string list;
  for (const std::string& m : default_models()) list += (list.empty() ? "" : ",") + m;
  return list;
}

std::span<const FlagSpec> run_flag_specs() { return kRunFlags; }
std::string* run_flag(RunFlags& f, const std::string& name) { return run_flag<RunFlags>(f, name); }
const std::string* run_flag(const RunFlags& f, const std::string& name) { return run_flag<const RunFlags>(f, name); }

bool flag_set(const RunFlags& f, const RunFlags& defaults, const std::string& name) {
  if (f.typed.count(name) > 0) return true;
  const std::string *v = run_flag(f, name), *d = run_flag(defaults, name);
  return v != nullptr && d != nullptr && *v != *d;
}

DataShape data_shape(const RunFlags& f, const DataConfig& d) {
  DataShape s{image_shape(d), "", ""};
  if (const char* flag = protocol_of(d).shape_flag) {
    s.flag = std::string("--") + flag;
    s.value = *run_flag(f, flag);
  }
  return s;
}

ModelOptions given_model_options(const ModelOptions& all, const std::set<std::string>& typed) {
  ModelOptions given;
  for (const ModelOption* o : model_options())
    if (const auto it = all.find(o->name); it != all.end() && (typed.count(o->name) > 0 || it->second != o->default_value))
      given.insert(*it);
  return given;
}

void check_models(const std::string& flag, const std::string& value, const std::vector<std::string>& models,
                  const ModelOptions& given, const DataShape& data) {
  for (const std::string& m : models) {
    try {
      check_model(m, given, data.shape);
    } catch (const ModelOptionError& e) {
      throw UsageError("--" + e.flag, e.value, e.why);
    } catch (const ShapeError& e) {
      if (!data.flag.empty()) throw UsageError(data.flag, data.value, e.what());
      throw UsageError(flag, value, e.what());
    } catch (const std::invalid_argument& e) {
      throw UsageError(flag, value, e.what());
    }
  }
  for (const auto& [name, v] : given) {
    bool read = false;
    std::string readers, ignored;  // ignored: why the first model that lists it does not act on it
    for (const ModelEntry& e : model_registry())
      if (std::any_of(e.options.begin(), e.options.end(), [&](const ModelOption* o) { return name == o->name; })) {
        readers += (readers.empty() ? "" : ", ") + std::string(e.name);
        for (const std::string& m : models) {
          if (find_model(m) != &e) continue;
          const std::string why = option_ignored(m, name, given);
          read = read || why.empty();
          if (ignored.empty()) ignored = why;
        }
      }
    if (!read && !ignored.empty()) throw UsageError("--" + name, v, ignored);
    if (!read)
      throw UsageError("--" + name, v, "no model in " + flag + " '" + value + "' uses it (it applies to " + readers + ")");
  }
}

long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi) {
  long long x = 0;
  if (const std::string why = whole_in(v, lo, hi, &x); !why.empty()) throw UsageError(flag, v, why);
  return x;
}

double parse_real(const std::string& flag, const std::string& v, double lo, double hi,
                  bool lo_open, bool single) {
  double x = 0;
  if (const std::string why = real_in(v, lo, hi, lo_open, single, &x); !why.empty()) throw UsageError(flag, v, why);
  return x;
}

// "A:B" in degrees and its count flag; whether the range makes sense is

namespace {

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

}  // namespace

namespace {

// The run flags as a protocol reads them (data/protocol.h), against the
// command's defaults; --dump too, which a data source may not support.
class RunFlagSource final : public FlagSource {
 public:
  RunFlagSource(const RunFlags& f, const RunFlags& defaults) : f_(f), defaults_(defaults) {}
  std::string value(const std::string& name) const override { return text(f_, name); }
  // Typed counts as set: a flag typed at its default is ignored no less.
  bool changed(const std::string& name) const override {
    return f_.typed.count(name) > 0 || text(f_, name) != text(defaults_, name);
  }
  long long integer(const std::string& name, long long lo, long long hi) const override {
    return parse_int("--" + name, value(name), lo, hi);
  }
  double real(const std::string& name, double lo, double hi) const override {
    return parse_real("--" + name, value(name), lo, hi, false);
  }
  AngleRange range(const std::string& name, const std::string& count_name, const std::string* count) const override {
    return parse_range("--" + name, value(name), "--" + count_name, count ? *count : value(count_name));
  }
  std::pair<double, double> interval(const std::string& name, double lo, double hi) const override {
    const std::string v = value(name), flag = "--" + name;
    const auto colon = v.find(':');
    if (colon == std::string::npos || v.find(':', colon + 1) != std::string::npos)
      throw UsageError(flag, v, "expected A:B, e.g. " + fmt_num(lo + (hi - lo) / 4) + ":" + fmt_num(lo + (hi - lo) / 2));
    auto end = [&](const std::string& t) {
      double x = 0;
      if (const std::string why = real_in(t, lo, hi, false, false, &x); !why.empty()) throw UsageError(flag, v, why);
      return x;
    };
    const double a = end(v.substr(0, colon)), b = end(v.substr(colon + 1));
    if (b < a) throw UsageError(flag, v, "B < A: a range runs up from A to B");
    return {a, b};
  }

 private:
  static std::string text(const RunFlags& f, const std::string& name) {
    if (name == "dump") return f.dump;
    const std::string* v = run_flag(f, name);
    if (v == nullptr) throw std::logic_error("a protocol read '" + name + "', which is no run flag");
    return *v;
  }
  const RunFlags &f_, &defaults_;
};

}  // namespace

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

void check_geometry_flags(const RunFlags& f, const DataConfig& d, bool allow_touching_end, const TestFlags* t) {
  const auto p = protocol_of(d).check(d, allow_touching_end);
  if (!p) return;
  if (t != nullptr && p->part == GeometryPart::test_range) throw UsageError(t->range_flag, t->range_value, p->why);
  if (t != nullptr && (p->part == GeometryPart::test_overlap || p->part == GeometryPart::test_elev_range))
    throw UsageError(t->overlap_flag, t->overlap_value, t->overlap_prefix + p->why);
  if (p->flag == nullptr) throw std::logic_error("a geometry problem names no flag: " + p->why);
  std::string value = *run_flag(f, p->flag);
  if (value.empty() && p->fallback != nullptr) value = *run_flag(f, p->fallback);
  throw UsageError(std::string("--") + p->flag, value, p->why);
}


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


namespace {

// The flags with the protocol's preset (--split) applied; a flag the preset
// sets that the user also set (changed from the command's `defaults`) is a conflict.
RunFlags with_preset(const Protocol& p, const RunFlags& given, const RunFlags& defaults) {
  RunFlags f = given;
  for (const auto& [flag, value] : p.preset) {
    // Typed at the default but not at the preset's value, it would be overridden too.
    if (*run_flag(f, flag) != *run_flag(defaults, flag) || (f.typed.count(flag) > 0 && *run_flag(f, flag) != value))
      throw UsageError("--split", given.split, std::string("conflicts with --") + flag + " '" + *run_flag(f, flag) +
                                                   "' (the preset sets it to " + value + ")");
    *run_flag(f, flag) = value;
  }
  return f;
}

}  // namespace

// The defaults of `sweep`'s run flags (its training range is 0:60).
CheckpointInterval parse_checkpoint_every(const std::string& flag, const std::string& v) {
  const std::string want =
      "expected a step count (e.g. 500) or a duration in whole seconds, minutes or hours (e.g. 30s, 10m, 2h)";
  const char unit = v.empty() ? '\0' : v.back();
  const bool duration = unit == 's' || unit == 'm' || unit == 'h';
  const std::string digits = duration ? v.substr(0, v.size() - 1) : v;
  if (digits.empty() || digits.size() > 12 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw UsageError(flag, v, want);
  const long n = std::stol(digits);
  if (!duration) {
    if (n < 1 || n > 1000000000) throw UsageError(flag, v, "a step count from 1 to 1000000000");
    return {n, 0};
  }
  const double seconds = double(n) * (unit == 'h' ? 3600 : unit == 'm' ? 60 : 1);
  if (seconds < 1 || seconds > 7 * 86400) throw UsageError(flag, v, "a duration from 1s to 168h");
  return {0, seconds};
}

RunFlags sweep_run_defaults() {
  RunFlags f;
  f.train_az = "0:60";
  return f;
}

// --shapes, for run, sweep and export-norb.
ShapeSet parse_shapes_flag(const std::string& v) {
  return flag_errors([&] { return parse_shapes(v); });
}



const Protocol& select_run_protocol(const RunFlags& flags, const RunFlags& defaults) {
  return flag_errors([&]() -> const Protocol& { return select_protocol(RunFlagSource(flags, defaults)); });
}

DataShape run_data_shape(const RunFlags& flags, DataConfig* config) {
  const RunFlags defaults;
  const Protocol& protocol = select_run_protocol(flags, defaults);
  const RunFlags f = with_preset(protocol, flags, defaults);
  DataConfig d;
  flag_errors([&] { protocol.configure(RunFlagSource(f, defaults), &d); });
  if (config != nullptr) *config = d;
  return data_shape(f, d);
}

RunOptions validate_run(const RunFlags& flags, int* threads, bool sweep) {
  const RunFlags defaults = sweep ? sweep_run_defaults() : RunFlags{};
  const Protocol& protocol = select_run_protocol(flags, defaults);
  const RunFlags f = with_preset(protocol, flags, defaults);
  RunOptions o;
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  o.train.n_epochs = int(parse_int("--n-epochs", f.n_epochs, 1, 100000));
  o.train.lr = float(parse_real("--lr", f.lr, 0, 10, true, true));
  if (!f.max_steps.empty()) o.train.max_steps = long(parse_int("--max-steps", f.max_steps, 1, 1000000000000ll));
  if (const std::string why = parse_lr_schedule(f.lr_schedule, &o.train.lr_schedule); !why.empty())
    throw UsageError("--lr-schedule", f.lr_schedule, why);
  o.train.batch_size = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  *threads = int(parse_int("--threads", f.threads, 1, 1024));
  o.reproducible = f.reproducible;
  flag_errors([&] { protocol.configure(RunFlagSource(f, defaults), &o.data); });

  o.models.clear();
  for (const std::string& m : split(f.models, ',')) {
    if (find_model(m) == nullptr) throw UsageError("--models", f.models, "unknown model '" + m + "' (expected " + model_names() + ")");
    for (const auto& seen : o.models)
      if (seen == m) throw UsageError("--models", f.models, "model '" + m + "' listed twice");
    o.models.push_back(m);
  }
  if (o.models.empty()) throw UsageError("--models", f.models, "no model given");
  if (!f.model_lr.empty())
    for (const std::string& entry : split(f.model_lr, ',')) {
      const size_t eq = entry.find('=');
      const std::string m = entry.substr(0, eq);
      if (eq == std::string::npos || m.empty())
        throw UsageError("--model-lr", f.model_lr, "expected MODEL=LR[,MODEL=LR...], got '" + entry + "'");
      if (std::find(o.models.begin(), o.models.end(), m) == o.models.end())
        throw UsageError("--model-lr", f.model_lr, "model '" + m + "' is not among --models '" + f.models + "'");
      if (find_model(m)->fit_in_one_pass)
        throw UsageError("--model-lr", f.model_lr, "model '" + m + "' takes no training step (it is fit in one pass)");
      if (o.train.model_lr.count(m) > 0)
        throw UsageError("--model-lr", f.model_lr, "model '" + m + "' given twice");
      const std::string v = entry.substr(eq + 1);
      double x = 0;
      if (const std::string why = real_in(v, 0, 10, true, true, &x); !why.empty())
        throw UsageError("--model-lr", f.model_lr, "learning rate '" + v + "' of '" + m + "': " + why);
      o.train.model_lr[m] = float(x);
    }
  // --lr set while every model that trains has its own rate would do nothing.
  if (!o.train.model_lr.empty() && flag_set(f, defaults, "lr") &&
      std::all_of(o.models.begin(), o.models.end(),
                  [&](const std::string& m) { return find_model(m)->fit_in_one_pass || o.train.model_lr.count(m) > 0; }))
    throw UsageError("--lr", f.lr, "every model that trains has its own rate in --model-lr '" + f.model_lr + "'");
  o.train.model = given_model_options(f.model, f.typed);
  check_models("--models", f.models, o.models, o.train.model, data_shape(f, o.data));
  // Models fit in one pass (nn1) take no training step: the training flags would do nothing.
  if (std::all_of(o.models.begin(), o.models.end(), [](const std::string& m) { return find_model(m)->fit_in_one_pass; }))
    for (const char* name : {"n-epochs", "max-steps", "lr", "lr-schedule", "batch-size", "stop-at-familiar",
                             "stop-check-every", "eval-every", "eval-until", "check-sample", "validation"})
      if (flag_set(f, defaults, name))
        throw UsageError(std::string("--") + name, *run_flag(f, name),
                         "no model in --models '" + f.models + "' trains (each is fit in one pass)");

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
    // The rule stops the other models that train; one fit in one pass (nn1)
    // has no training to stop, so it does not count.
    if (std::none_of(o.models.begin(), o.models.end(), [&](const std::string& m) {
          return m != f.match_familiar && !find_model(m)->fit_in_one_pass;
        }))
      throw UsageError("--match-familiar", f.match_familiar,
                       "needs another model that trains to stop at its accuracy (--models '" + f.models +
                           "' has none: a model fit in one pass has no training to stop)");
    o.match_familiar = f.match_familiar;
  }
  if (!f.stop_check_every.empty()) {
    if (f.stop_at_familiar.empty() && f.match_familiar.empty())
      throw UsageError("--stop-check-every", f.stop_check_every, "has no effect without --stop-at-familiar or --match-familiar");
    o.train.stop_every = int(parse_int("--stop-check-every", f.stop_check_every, 1, 100000000));
  }
  if (!f.eval_every.empty()) {
    o.train.eval_every = long(parse_int("--eval-every", f.eval_every, 1, 100000000));
  }
  if (!f.eval_until.empty()) {
    if (f.eval_every.empty()) throw UsageError("--eval-until", f.eval_until, "has no effect without --eval-every");
    o.train.eval_until = long(parse_int("--eval-until", f.eval_until, 1, 100000000));
    if (o.train.eval_until < o.train.eval_every)
      throw UsageError("--eval-until", f.eval_until, "is before --eval-every's first check (step " + f.eval_every + "): no check would run");
  }
  if (!f.check_sample.empty()) {
    o.train.check_sample = int(parse_int("--check-sample", f.check_sample, 1, 100000000));
    // --dump's animation scores the circle after every epoch, on every image.
    if (!f.dump.empty()) throw UsageError("--check-sample", f.check_sample, "conflicts with --dump (give one of them)");
  }
  if (f.validation != "on" && f.validation != "off") throw UsageError("--validation", f.validation, "expected on or off");
  // The frontier (the novel error at each familiar validation error) needs the
  // split without a rule that stops training on it.
  if (o.stop_at_familiar > 0 || !o.match_familiar.empty() || f.validation == "on")
    o.data.n_val_per_combo = o.data.n_eval_per_combo;

  if (!sweep) check_geometry_flags(f, o.data, false);
  // One step per epoch of a batch holding every image would train at chance.
  const TrainingSize train = protocol.training_size(o.data);
  if (o.train.batch_size > train.images)
    throw UsageError("--batch-size", f.batch_size, "larger than the training set (" + train.text + ")");
  // A budget the epochs end before would do nothing.
  const long steps_per_epoch = long((train.images + o.train.batch_size - 1) / o.train.batch_size);
  if (o.train.max_steps > 0 && o.train.total_steps(steps_per_epoch) < o.train.max_steps)
    throw UsageError("--max-steps", f.max_steps,
                     "never reached: --n-epochs " + f.n_epochs + " ends training after " +
                         std::to_string(o.train.total_steps(steps_per_epoch)) + " steps (" +
                         std::to_string(steps_per_epoch) + " an epoch); raise --n-epochs");
  if (sweep) return o;
  check_memory(f, o, 1, "1", 1, *threads);

  // Outputs: each file written once; regular files (or new ones) only.
  std::vector<OutputFile> outputs;
  if (!f.out_json.empty()) outputs.push_back({"--out-json", f.out_json, f.out_json});
  if (!f.dump.empty())
    for (const std::string& file : dump_files(f.dump)) outputs.push_back({"--dump", f.dump, file});
  // --save-model: a model file each (docs/checkpoints.md); several models need "{model}" to tell them apart.
  if (!f.save_model.empty()) {
    if (o.models.size() > 1 && f.save_model.find("{model}") == std::string::npos)
      throw UsageError("--save-model", f.save_model,
                       "names one file for the " + std::to_string(o.models.size()) +
                           " models of --models; put {model} in it (e.g. model-{model}.vgm) for each one's name");
    for (const std::string& m : o.models) {
      if (find_model(m)->fit_in_one_pass)
        throw UsageError("--save-model", f.save_model,
                         "model '" + m + "' is fit in one pass and has no weights to save (it keeps its training set)");
      outputs.push_back({"--save-model", f.save_model, model_file_path(f.save_model, m)});
    }
  }
  // Checkpoints: a file per model that trains by steps (one fit in one pass
  // has no training to resume), by --checkpoint or else beside --save-model's.
  std::vector<OutputFile> checkpoints;
  if (!f.checkpoint.empty() || !f.checkpoint_every.empty() || f.resume) {
    const CheckpointInterval every = f.checkpoint_every.empty()
                                         ? CheckpointInterval{0, kDefaultCheckpointSeconds}
                                         : parse_checkpoint_every("--checkpoint-every", f.checkpoint_every);
    const std::string pattern = !f.checkpoint.empty() ? f.checkpoint : f.save_model.empty() ? "" : f.save_model + ".ckpt";
    const std::string flag = !f.checkpoint.empty() ? "--checkpoint" : f.save_model.empty() ? "" : "--save-model";
    if (pattern.empty()) {
      if (f.resume) throw UsageError("--resume", "needs --checkpoint FILE (or --save-model FILE: then FILE.ckpt), the checkpoints to continue from");
      throw UsageError("--checkpoint-every", f.checkpoint_every,
                       "needs --checkpoint FILE (or --save-model FILE: then FILE.ckpt), where to write them");
    }
    if (o.models.size() > 1 && pattern.find("{model}") == std::string::npos)
      throw UsageError(flag, flag == "--checkpoint" ? f.checkpoint : f.save_model,
                       "names one checkpoint for the " + std::to_string(o.models.size()) +
                           " models of --models; put {model} in it (e.g. run-{model}.ckpt) for each one's name");
    for (const std::string& m : o.models)
      if (!find_model(m)->fit_in_one_pass)
        checkpoints.push_back({flag, flag == "--checkpoint" ? f.checkpoint : f.save_model, model_file_path(pattern, m)});
    outputs.insert(outputs.end(), checkpoints.begin(), checkpoints.end());
    o.train.checkpoint.file = pattern;
    o.train.checkpoint.every_steps = every.steps;
    o.train.checkpoint.every_seconds = every.seconds;
    o.train.checkpoint.resume = f.resume;
  }
  check_distinct_outputs(outputs);
  for (const OutputFile& out : outputs) {
    if (out.flag != "--save-model" && out.flag != "--checkpoint") continue;
    try {
      check_writable(out.file);
    } catch (const std::runtime_error& e) {
      throw UsageError(out.flag, out.value, (out.file != out.value ? out.file + ": " : "") + e.what());
    }
  }
  // A checkpoint there already is a training to continue: only --resume may replace it.
  for (const OutputFile& out : checkpoints) {
    struct stat st;
    if (!f.resume && ::stat(out.file.c_str(), &st) == 0)
      throw UsageError(out.flag, out.value, out.file + " holds a checkpoint already: add --resume to continue from it, or remove it");
  }
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

}  // namespace vg
