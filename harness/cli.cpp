#include "harness/cli.h"

#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "harness/report.h"
#include "harness/profile.h"
#include "harness/sweep.h"
#include "harness/train.h"
#include "kernels/dnnl_common.h"
#include "kernels/isa.h"
#include "models/capsnet.h"

namespace vg {

namespace {

// Bad input: printed as one line, exit code 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& flag, const std::string& value, const std::string& why)
      : std::runtime_error(flag + " '" + value + "': " + why) {}
  // A flag that takes no value.
  UsageError(const std::string& flag, const std::string& why) : std::runtime_error(flag + ": " + why) {}
};

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
  std::string n_train_views = "6", n_test_views = "6", n_elev = "3";
  std::string n_per_combo = "5", n_eval_per_combo = "2";
  std::string em_iters = "3", em_lambda = "1", em_eps = "0";
  std::string models = "caps,cnn", cnn_hidden = "64";
  std::string out_json, dump;
  bool quiet = false, reproducible = false;
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
    {"threads", &RunFlags::threads, "Threads of the oneDNN kernels and data synthesis"},
    {"train-azimuths", &RunFlags::train_az, "Training azimuth range A:B in degrees (wraps mod 360)"},
    {"test-azimuths", &RunFlags::test_az, "Held-out azimuth range A:B in degrees"},
    {"n-train-views", &RunFlags::n_train_views, "Evenly spaced training azimuths"},
    {"n-test-views", &RunFlags::n_test_views, "Evenly spaced held-out azimuths"},
    {"elevations", &RunFlags::elevations, "Elevation range A:B in degrees"},
    {"n-elev", &RunFlags::n_elev, "Evenly spaced elevations"},
    {"n-per-combo", &RunFlags::n_per_combo, "Training images per (class, azimuth, elevation)"},
    {"n-eval-per-combo", &RunFlags::n_eval_per_combo, "Evaluation images per combination"},
    {"em-iters", &RunFlags::em_iters, "EM routing iterations"},
    {"em-lambda", &RunFlags::em_lambda, "Inverse temperature of the EM activation"},
    {"em-eps", &RunFlags::em_eps, "Added to sum(R a) in the M-step (the seed used 1e-9)"},
    {"models", &RunFlags::models, "Comma-separated: caps, cnn, cnnN (hidden width N)"},
    {"cnn-hidden", &RunFlags::cnn_hidden, "Hidden width of the model 'cnn' (136 matches the capsules)"},
};

// Registers every run flag except those in `skip`.
void add_run_flags(CLI::App* app, RunFlags& f, const std::vector<std::string>& skip) {
  for (const FlagSpec& s : kRunFlags)
    if (std::find(skip.begin(), skip.end(), s.name) == skip.end())
      app->add_option(std::string("--") + s.name, f.*(s.field), s.help)->capture_default_str();
}

std::string* run_flag(RunFlags& f, const std::string& name) {
  for (const FlagSpec& s : kRunFlags)
    if (name == s.name) return &(f.*(s.field));
  return nullptr;
}

long long parse_int(const std::string& flag, const std::string& v, long long lo, long long hi) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size()) throw UsageError(flag, v, "expected a whole number");
  if (x < lo || x > hi)
    throw UsageError(flag, v, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

double parse_real(const std::string& flag, const std::string& v, double lo, double hi,
                  bool lo_open) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || !std::isfinite(x)) throw UsageError(flag, v, "expected a finite number");
  if (x < lo || (lo_open && x == lo) || x > hi) {
    std::ostringstream o;
    o << "must be " << (lo_open ? "> " : ">= ") << lo << " and <= " << hi;
    throw UsageError(flag, v, o.str());
  }
  return x;
}

AngleRange parse_range(const std::string& flag, const std::string& v, const std::string& count_flag,
                       const std::string& count) {
  AngleRange r;
  try {
    std::tie(r.from, r.to) = parse_angle_range(v);
  } catch (const std::invalid_argument&) {
    throw UsageError(flag, v, "expected A:B in degrees, e.g. 0:150");
  }
  r.count = int(parse_int(count_flag, count, 1, 360));
  return r;
}

// Validates every flag into RunOptions, throwing UsageError naming the first
// bad one. `check_shared` rejects held-out azimuths equal to training ones
// (a sweep's gap-0 window touches the training range on purpose).
RunOptions validate_run(const RunFlags& f, int* threads, bool check_shared = true) {
  RunOptions o;
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  o.train.n_epochs = int(parse_int("--n-epochs", f.n_epochs, 1, 100000));
  o.train.lr = float(parse_real("--lr", f.lr, 0, 10, true));
  o.train.batch_size = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  *threads = int(parse_int("--threads", f.threads, 1, 1024));
  o.reproducible = f.reproducible;
  if (f.reproducible && *threads != 1)
    throw UsageError("--threads", f.threads, "--reproducible runs on one thread (oneDNN splits its sums by thread count)");
  o.train.cnn_hidden = int(parse_int("--cnn-hidden", f.cnn_hidden, 1, 65536));
  o.train.em.iters = int(parse_int("--em-iters", f.em_iters, 1, 100));
  o.train.em.lambda = float(parse_real("--em-lambda", f.em_lambda, 0, 1e6, true));
  o.train.em.eps = float(parse_real("--em-eps", f.em_eps, 0, 1, false));
  o.data.train_azimuths = parse_range("--train-azimuths", f.train_az, "--n-train-views", f.n_train_views);
  o.data.test_azimuths = parse_range("--test-azimuths", f.test_az, "--n-test-views", f.n_test_views);
  o.data.elevations = parse_range("--elevations", f.elevations, "--n-elev", f.n_elev);
  o.data.n_per_combo = int(parse_int("--n-per-combo", f.n_per_combo, 1, 10000));
  o.data.n_eval_per_combo = int(parse_int("--n-eval-per-combo", f.n_eval_per_combo, 1, 10000));

  // Shared azimuths make "held-out" a lie.
  const auto train = o.data.train_azimuths.values(), test = o.data.test_azimuths.values();
  if (check_shared)
  for (double t : test)
    for (double a : train)
      if (circular_distance(a, t) < 1e-9) {
        std::ostringstream why;
        why << "held-out azimuth " << t << " is also a training azimuth (--train-azimuths '"
            << f.train_az << "')";
        throw UsageError("--test-azimuths", f.test_az, why.str());
      }
  // Keep the dataset within memory: about 4 KB per image.
  const double images = double(kNumClasses) * o.data.elevations.count *
                        (double(o.data.train_azimuths.count) * o.data.n_per_combo +
                         (o.data.train_azimuths.count + o.data.test_azimuths.count + 36.0) *
                             o.data.n_eval_per_combo);
  if (images > 2e6) throw UsageError("--n-per-combo", f.n_per_combo, "dataset would exceed 2 million images");

  o.models.clear();
  std::stringstream ss(f.models);
  std::string m;
  while (std::getline(ss, m, ',')) {
    if (!is_model_name(m)) throw UsageError("--models", f.models, "unknown model '" + m + "' (expected caps, cnn or cnnN)");
    for (const auto& seen : o.models)
      if (seen == m) throw UsageError("--models", f.models, "model '" + m + "' listed twice");
    o.models.push_back(m);
  }
  if (o.models.empty()) throw UsageError("--models", f.models, "no model given");
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
    } catch (const std::runtime_error& e) {
      throw UsageError("--dump", f.dump, e.what());
    }
  }
  return o;
}

int do_run(const RunFlags& f) {
  int threads = 1;
  RunOptions opt = validate_run(f, &threads);
  opt.train.circle_every_epoch = !f.dump.empty();  // snapshots for the animation
  omp_set_num_threads(threads);
  auto log = spdlog::stderr_color_mt("viewgap");
  log->set_pattern("[%T.%e] %v");
  if (f.quiet) log->set_level(spdlog::level::warn);
  log->info("viewgap run: seed {}, {} epochs, models {}, {} thread(s), ISA {} (oneDNN {}){}",
            opt.train.seed, opt.train.n_epochs, f.models, threads, isa_name(selected_isa()),
            onednn_isa(), opt.reproducible ? ", reproducible" : "");
  std::vector<ClassPose> poses;
  const RunResult r = run_experiment(
      opt,
      [&](const std::string& model, const EpochStats& e) {
        log->info("[{}] epoch {:>3}/{}  loss {:.4f}  familiar {:.3f}  held-out {:.3f}  ({:.3f} s)",
                  model, e.epoch, opt.train.n_epochs, e.loss, e.familiar, e.heldout, e.seconds);
      },
      [&](const std::string&, Model& model, const Dataset& data) {
        if (f.dump.empty()) return;
        if (auto* caps = dynamic_cast<CapsNet*>(&model)) poses = class_poses(*caps, data.heldout);
      });
  std::cout << format_run_table(opt, r) << std::flush;
  const nlohmann::json j = run_to_json(opt, r, threads);
  if (!f.out_json.empty()) {
    write_file_atomic(f.out_json, j.dump(2) + "\n");
    log->info("wrote {}", f.out_json);
  }
  if (!f.dump.empty()) {
    write_dump(f.dump, opt.train.seed, j, poses);
    log->info("wrote figure inputs to {}", f.dump);
  }
  return 0;
}

struct SweepFlags {
  RunFlags run;
  std::string seeds = "0:29", gaps = "0,30,60,90,120", test_width = "60", jobs, out;
  std::vector<std::string> grid;
  bool resume = false, quiet = false;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string fmt_deg(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

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

int do_sweep(const SweepFlags& f) {
  const std::vector<uint64_t> seeds = parse_seeds(f.seeds);
  std::vector<double> gaps;
  for (const std::string& g : split(f.gaps, ',')) {
    const double v = parse_real("--gaps", g, 0, 359, false);
    if (std::find(gaps.begin(), gaps.end(), v) != gaps.end()) throw UsageError("--gaps", f.gaps, "gap listed twice");
    gaps.push_back(v);
  }
  if (gaps.empty()) throw UsageError("--gaps", f.gaps, "no gap given");
  const double width = parse_real("--test-width", f.test_width, 0, 359, false);
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  const int jobs = f.jobs.empty() ? hw : int(parse_int("--jobs", f.jobs, 1, 1024));

  // Grid axes: NAME=v1,v2,... over any run flag but those the sweep owns.
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  for (const std::string& g : f.grid) {
    const auto eq = g.find('=');
    const std::string name = g.substr(0, eq);
    RunFlags probe;
    if (eq == std::string::npos || run_flag(probe, name) == nullptr || name == "seed" ||
        name == "test-azimuths" || name == "threads" || name == "models")
      throw UsageError("--grid", g, "expected NAME=v1,v2,... with NAME a run flag (e.g. lr, em-iters)");
    for (const auto& a : axes)
      if (a.first == name) throw UsageError("--grid", g, "flag '" + name + "' gridded twice");
    std::vector<std::string> values = split(g.substr(eq + 1), ',');
    if (values.empty() || std::find(values.begin(), values.end(), "") != values.end())
      throw UsageError("--grid", g, "empty value");
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
  plan.jobs = jobs;
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
    RunOptions base = validate_run(rf, &threads, false);  // names any bad fixed or grid value
    plan.models = base.models;
    const AngleRange& tr = base.data.train_azimuths;
    if (tr.to - tr.from >= 360) throw UsageError("--train-azimuths", rf.train_az, "covers the whole circle");
    for (double g : gaps) {
      // The held-out window starts g degrees after the training range ends and
      // must end before it would wrap around onto the training range's start.
      const double from = tr.to + g, to = from + width;
      if (to >= tr.from + 360 - 1e-9)
        throw UsageError("--gaps", f.gaps, "gap " + fmt_deg(g) + " wraps the held-out window " +
                                               fmt_deg(from) + ":" + fmt_deg(to) +
                                               " around into the training range");
      RunOptions opt = base;
      opt.data.test_azimuths.from = from;
      opt.data.test_azimuths.to = to;
      const double true_gap = azimuth_gap(tr.values(), opt.data.test_azimuths.values());
      for (uint64_t seed : seeds) {
        SweepCell c;
        c.id = int(plan.cells.size());
        c.seed = seed;
        c.gap = g;
        c.true_gap = true_gap;
        c.grid = grid;
        c.opt = opt;
        c.opt.train.seed = seed;
        plan.cells.push_back(c);
      }
    }
  }
  // Everything that defines the results (not --jobs, --resume, --quiet, --out).
  nlohmann::json run_flags;
  for (const FlagSpec& s : kRunFlags)
    if (std::string(s.name) != "seed" && std::string(s.name) != "test-azimuths" &&
        std::string(s.name) != "threads")
      run_flags[s.name] = f.run.*(s.field);
  plan.config = {{"seeds", seeds}, {"gaps", gaps}, {"test_width", width},
                 {"grid", axes}, {"run_flags", run_flags}};
  if (f.run.reproducible) plan.config["reproducible"] = true;  // absent: older sweeps keep their hash
  try {
    prepare_sweep_dir(plan);
  } catch (const std::runtime_error& e) {
    throw UsageError("--out", f.out, e.what());
  }
  const SweepOutcome r = run_sweep(plan);
  std::printf("%d cells (%d run now, %d resumed, %d failed) in %.1f s; results in %s\n",
              int(plan.cells.size()), r.ran, r.resumed, r.failed, r.wall_s, f.out.c_str());
  return 0;
}

struct ProfileFlags {
  std::string model = "caps", batch_size = "32", steps = "200", warmup = "20", seed = "0";
  std::string threads = "1", cnn_hidden = "64", em_iters = "3", out = "profile.csv", trace;
  bool reproducible = false;
};

int do_profile(const ProfileFlags& f) {
  ProfileOptions o;
  if (!is_model_name(f.model)) throw UsageError("--model", f.model, "unknown model (expected caps, cnn or cnnN)");
  o.model = f.model;
  o.batch = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  o.steps = int(parse_int("--steps", f.steps, 1, 1000000));
  o.warmup = int(parse_int("--warmup", f.warmup, 0, 1000000));
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, 1ll << 53));
  o.train.cnn_hidden = int(parse_int("--cnn-hidden", f.cnn_hidden, 1, 65536));
  o.train.em.iters = int(parse_int("--em-iters", f.em_iters, 1, 100));
  const int threads = int(parse_int("--threads", f.threads, 1, 1024));
  if (f.reproducible && threads != 1)
    throw UsageError("--threads", f.threads, "--reproducible runs on one thread (oneDNN splits its sums by thread count)");
  for (const auto& [flag, path] : {std::pair{"--out", f.out}, std::pair{"--trace", f.trace}}) {
    if (path.empty() && std::string(flag) == "--trace") continue;
    try {
      check_writable(path);
    } catch (const std::runtime_error& e) {
      throw UsageError(flag, path, e.what());
    }
  }
  o.out_csv = f.out;
  o.trace = f.trace;
  omp_set_num_threads(threads);
  run_profile(o);
  return 0;
}

}  // namespace

int cli_main(int argc, char** argv) {
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
  sweep->add_option("--gaps", sf.gaps, "Gaps in degrees between the training range and the held-out window")->capture_default_str();
  sweep->add_option("--test-width", sf.test_width, "Width of the held-out window in degrees")->capture_default_str();
  sweep->add_option("--grid", sf.grid, "NAME=v1,v2,...: also sweep the run flag --NAME (repeatable)");
  sweep->add_option("--jobs", sf.jobs, "Cells run in parallel (default: the number of cores)");
  sweep->add_option("--out", sf.out, "Output directory")->required();
  sweep->add_flag("--resume", sf.resume, "Continue the sweep in --out, skipping finished cells");
  sweep->add_flag("--quiet,-q", sf.quiet, "No progress on stderr");
  sweep->add_flag("--reproducible", sf.run.reproducible, repro_help);
  sf.run.train_az = "0:60";
  ProfileFlags pf;
  CLI::App* prof = app.add_subcommand("profile", "Per-layer timings of training steps -> CSV (and a Chrome trace)");
  prof->add_option("--model", pf.model, "caps, cnn or cnnN")->capture_default_str();
  prof->add_option("--batch-size", pf.batch_size, "Batch size")->capture_default_str();
  prof->add_option("--steps", pf.steps, "Timed training steps")->capture_default_str();
  prof->add_option("--warmup", pf.warmup, "Untimed steps first")->capture_default_str();
  prof->add_option("--seed", pf.seed, "Seed of data and initialisation")->capture_default_str();
  prof->add_option("--threads", pf.threads, "oneDNN threads")->capture_default_str();
  prof->add_option("--cnn-hidden", pf.cnn_hidden, "Hidden width of the model 'cnn'")->capture_default_str();
  prof->add_option("--em-iters", pf.em_iters, "EM routing iterations")->capture_default_str();
  prof->add_option("--out", pf.out, "CSV: one row per layer and pass")->capture_default_str();
  prof->add_option("--trace", pf.trace, "Also write a Chrome trace-event JSON (Perfetto, chrome://tracing)");
  prof->add_flag("--reproducible", pf.reproducible, repro_help);
  add_run_flags(sweep, sf.run, {"seed", "test-azimuths", "threads"});

  // CLI11 says only "A subcommand is required" for a mistyped one: name it.
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(subs.begin(), subs.end(), [&](const CLI::App* a) { return a->get_name() == argv[1]; })) {
    std::fprintf(stderr, "viewgap: error: unknown command '%s' (expected run, sweep or profile)\n", argv[1]);
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
    std::fprintf(stderr, "viewgap: error: %s\n", e.what());
    return 2;
  }
  try {
    if ((run->parsed() && rf.reproducible) || (sweep->parsed() && sf.run.reproducible) ||
        (prof->parsed() && pf.reproducible))
      enable_reproducible();
    // VIEWGAP_ISA is input too: validate it before any work.
    (void)selected_isa();
    if (run->parsed()) return do_run(rf);
    if (sweep->parsed()) return do_sweep(sf);
    if (prof->parsed()) return do_profile(pf);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "viewgap %s: error: %s\n", app.get_subcommands().empty() ? "" : app.get_subcommands()[0]->get_name().c_str(), e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "viewgap: error: %s\n", e.what());
    return 2;
  } catch (const NonFiniteError& e) {
    std::fprintf(stderr, "viewgap: stopped: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "viewgap: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace vg
