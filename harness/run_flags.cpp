// The run flags' table, how a flag is found and read, and the checks that
// several commands share; validate_run.cpp turns them into RunOptions.
#include "harness/run_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "harness/output.h"
#include "harness/run_flag_source.h"
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
    {"model-eval-every", &RunFlags::model_eval_every,
     "Checks of some models of their own beside --eval-every's, MODEL=STEPS[:UNTIL][,...]: at every multiple of "
     "STEPS up to step UNTIL (default: all through); a fast model's dense start (cnn-paper=2:60) without dense "
     "checks of the slow ones",
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

namespace {

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

}  // namespace

std::string RunFlagSource::value(const std::string& name) const { return text(f_, name); }

bool RunFlagSource::changed(const std::string& name) const {
  return f_.typed.count(name) > 0 || text(f_, name) != text(defaults_, name);
}

long long RunFlagSource::integer(const std::string& name, long long lo, long long hi) const {
  return parse_int("--" + name, value(name), lo, hi);
}

double RunFlagSource::real(const std::string& name, double lo, double hi) const {
  return parse_real("--" + name, value(name), lo, hi, false);
}

AngleRange RunFlagSource::range(const std::string& name, const std::string& count_name, const std::string* count) const {
  return parse_range("--" + name, value(name), "--" + count_name, count ? *count : value(count_name));
}

std::pair<double, double> RunFlagSource::interval(const std::string& name, double lo, double hi) const {
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

std::string RunFlagSource::text(const RunFlags& f, const std::string& name) {
  if (name == "dump") return f.dump;
  const std::string* v = run_flag(f, name);
  if (v == nullptr) throw std::logic_error("a protocol read '" + name + "', which is no run flag");
  return *v;
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

}  // namespace vg
