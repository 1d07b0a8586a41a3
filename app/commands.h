// The commands of the command line (app/cli.cpp registers their flags, parses
// and dispatches): each one's flags as typed and its action, which judges them
// before any work. A command throws what goes wrong (UsageError: bad input);
// cli_main turns it into one line and the exit code (app/cli.h).
#pragma once
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "harness/eval.h"
#include "harness/run_flags.h"
#include "harness/sweep_plan.h"
#include "models/registry.h"

namespace vg {

// `viewgap export-norb DIR`: the synthetic shapes, or the toys, as smallNORB's six files.
struct ExportFlags {
  std::string dir, seed = "0", shapes = "seed", instances = "5", lightings = "6", variety = "wide", lights = "rig";
  bool quiet = false;
  std::set<std::string> typed;  // the options given, by name without "--"
};

// viewgap merge DIR... --out DIR: the parts' configuration, read from their
// meta.json, becomes the sweep's flags again (the same parser and plan as
// `sweep`), so the merge checks every part against that plan
// (harness/sweep_merge.h).
struct MergeFlags {
  std::vector<std::string> dirs;
  std::string out;
  bool force = false;
};

// viewgap profile: one model's training steps, timed layer by layer.
struct ProfileFlags {
  std::string model = default_models().front(), batch_size = "32", steps = "200", warmup = "20", seed = "0";
  std::string threads = "1", out = "profile.csv", trace;
  ModelOptions options = RunFlags::default_model_options();
  std::set<std::string> typed;  // the options given on the command line
  bool reproducible = false;
  RunFlags data;  // run's data flags (--data, --split, each protocol's): the images profiled
};

int do_run(const RunFlags& f);             // app/cmd_run.cpp
int do_eval(const EvalFlags& f);           // app/cmd_run.cpp
int do_sweep(const SweepFlags& f);         // app/cmd_sweep.cpp
int do_merge(const MergeFlags& m);         // app/cmd_sweep.cpp
int do_export_norb(const ExportFlags& f);  // app/cmd_export.cpp
int do_profile(const ProfileFlags& f);     // app/cmd_profile.cpp

// Shared by the commands (app/cli.cpp).
// The results table lost to a full disk or a closed pipe is a failure, not a
// success: exit 1, one line (main() checks once more at exit).
void flush_stdout();
// --reproducible: the same bits on every x86-64 CPU with AVX2 and FMA. oneDNN is
// capped at AVX2 (its AVX-512 kernels sum in another order) and our kernels are
// pinned to their AVX2 variants; everything else already runs the same code on
// every such CPU (docs/reproducibility.md). Runs before any kernel does.
void enable_reproducible();
// The one line for a failure, and its exit code: 2 bad input, 3 non-finite
// training, 1 anything else.
int report_error(const std::exception_ptr& ep, const std::string& command);

}  // namespace vg
