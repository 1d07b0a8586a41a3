#include "harness/cli.h"

#include <omp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "harness/report.h"
#include "harness/train.h"
#include "kernels/isa.h"

namespace vg {

namespace {

// Bad input: printed as one line, exit code 2.
struct UsageError : std::runtime_error {
  UsageError(const std::string& flag, const std::string& value, const std::string& why)
      : std::runtime_error(flag + " '" + value + "': " + why) {}
};

// Flags of `run` as the user typed them; validated into RunOptions.
struct RunFlags {
  std::string seed = "0", n_epochs = "10", lr = "2e-3", batch_size = "32", threads = "1";
  std::string train_az = "0:150", test_az = "200:330", elevations = "10:50";
  std::string n_train_views = "6", n_test_views = "6", n_elev = "3";
  std::string n_per_combo = "5", n_eval_per_combo = "2";
  std::string em_iters = "3", em_lambda = "1", em_eps = "0";
  std::string models = "caps,cnn", cnn_hidden = "64";
  std::string out_json;
  bool quiet = false;
};

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

RunOptions validate_run(const RunFlags& f, int* threads) {
  RunOptions o;
  o.train.seed = uint64_t(parse_int("--seed", f.seed, 0, (1ll << 53)));
  o.train.n_epochs = int(parse_int("--n-epochs", f.n_epochs, 1, 100000));
  o.train.lr = float(parse_real("--lr", f.lr, 0, 10, true));
  o.train.batch_size = int(parse_int("--batch-size", f.batch_size, 1, 4096));
  *threads = int(parse_int("--threads", f.threads, 1, 1024));
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
  return o;
}

int do_run(const RunFlags& f) {
  int threads = 1;
  const RunOptions opt = validate_run(f, &threads);
  omp_set_num_threads(threads);
  auto log = spdlog::stderr_color_mt("viewgap");
  log->set_pattern("[%T.%e] %v");
  if (f.quiet) log->set_level(spdlog::level::warn);
  log->info("viewgap run: seed {}, {} epochs, models {}, {} thread(s), ISA {}", opt.train.seed,
            opt.train.n_epochs, f.models, threads, isa_name(selected_isa()));
  const RunResult r = run_experiment(opt, [&](const std::string& model, const EpochStats& e) {
    log->info("[{}] epoch {:>3}/{}  loss {:.4f}  familiar {:.3f}  held-out {:.3f}  ({:.3f} s)", model,
              e.epoch, opt.train.n_epochs, e.loss, e.familiar, e.heldout, e.seconds);
  });
  std::cout << format_run_table(opt, r) << std::flush;
  if (!f.out_json.empty()) {
    write_file_atomic(f.out_json, run_to_json(opt, r, threads).dump(2) + "\n");
    log->info("wrote {}", f.out_json);
  }
  return 0;
}

}  // namespace

int cli_main(int argc, char** argv) {
  CLI::App app{"viewgap: novel-viewpoint generalisation of matrix capsules (EM routing) vs CNNs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("viewgap 0.1.0"));

  RunFlags rf;
  CLI::App* run = app.add_subcommand("run", "Train and evaluate the models on one configuration");
  run->add_option("--seed", rf.seed, "Seed of data, initialisation and shuffling")->capture_default_str();
  run->add_option("--n-epochs", rf.n_epochs, "Training epochs")->capture_default_str();
  run->add_option("--lr", rf.lr, "Adam learning rate")->capture_default_str();
  run->add_option("--batch-size", rf.batch_size, "Training batch size")->capture_default_str();
  run->add_option("--threads", rf.threads, "Threads of the oneDNN kernels and data synthesis")->capture_default_str();
  run->add_option("--train-azimuths", rf.train_az, "Training azimuth range A:B in degrees (wraps mod 360)")->capture_default_str();
  run->add_option("--test-azimuths", rf.test_az, "Held-out azimuth range A:B in degrees")->capture_default_str();
  run->add_option("--n-train-views", rf.n_train_views, "Evenly spaced training azimuths")->capture_default_str();
  run->add_option("--n-test-views", rf.n_test_views, "Evenly spaced held-out azimuths")->capture_default_str();
  run->add_option("--elevations", rf.elevations, "Elevation range A:B in degrees")->capture_default_str();
  run->add_option("--n-elev", rf.n_elev, "Evenly spaced elevations")->capture_default_str();
  run->add_option("--n-per-combo", rf.n_per_combo, "Training images per (class, azimuth, elevation)")->capture_default_str();
  run->add_option("--n-eval-per-combo", rf.n_eval_per_combo, "Evaluation images per combination")->capture_default_str();
  run->add_option("--em-iters", rf.em_iters, "EM routing iterations")->capture_default_str();
  run->add_option("--em-lambda", rf.em_lambda, "Inverse temperature of the EM activation")->capture_default_str();
  run->add_option("--em-eps", rf.em_eps, "Added to sum(R a) in the M-step (the seed used 1e-9)")->capture_default_str();
  run->add_option("--models", rf.models, "Comma-separated: caps, cnn, cnnN (hidden width N)")->capture_default_str();
  run->add_option("--cnn-hidden", rf.cnn_hidden, "Hidden width of the model 'cnn' (136 matches the capsules)")->capture_default_str();
  run->add_option("--out-json", rf.out_json, "Write the full results as JSON (atomically)");
  run->add_flag("--quiet,-q", rf.quiet, "No progress on stderr");

  // CLI11 says only "A subcommand is required" for a mistyped one: name it.
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(subs.begin(), subs.end(), [&](const CLI::App* a) { return a->get_name() == argv[1]; })) {
    std::fprintf(stderr, "viewgap: error: unknown command '%s' (expected run)\n", argv[1]);
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
    // VIEWGAP_ISA is input too: validate it before any work.
    (void)selected_isa();
    if (run->parsed()) return do_run(rf);
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
