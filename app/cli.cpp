// The command line: each command's flags registered (CLI11), parsed and judged,
// then dispatched to its action (app/commands.h, app/cmd_*.cpp); every failure
// one line and its exit code.
#include "app/cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>

#include "app/commands.h"
#include "harness/checkpoint.h"
#include "harness/cluster.h"
#include "harness/eval.h"
#include "harness/output.h"
#include "harness/report.h"
#include "harness/run_flags.h"
#include "harness/sweep_plan.h"
#include "kernels/dnnl_common.h"
#include "kernels/isa.h"
#include "models/registry.h"

namespace vg {

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int err = errno;
  std::clearerr(stdout);
  throw std::runtime_error(std::string("cannot write standard output: ") + (err ? std::strerror(err) : "write error"));
}

void enable_reproducible() {
  const std::string missing = isa_missing_features(Isa::avx2);
  if (!missing.empty())
    throw UsageError("--reproducible", "this CPU lacks " + missing +
                                           " (reproducible mode needs x86-64 with AVX2 and FMA)");
  // The AVX-512 kernels give the AVX2 kernels' bits (Cli.Avx512KernelsGiveTheAvx2KernelsBits):
  // the faster of the two where the CPU has it, or the one VIEWGAP_ISA names.
  const char* env = std::getenv("VIEWGAP_ISA");
  Isa isa = isa_supported(Isa::avx512) ? Isa::avx512 : Isa::avx2;
  if (env != nullptr && *env != '\0') {
    const std::string e = env;
    if (e != isa_name(Isa::avx2) && e != isa_name(Isa::avx512))
      throw UsageError("--reproducible", "conflicts with VIEWGAP_ISA='" + e +
                                             "' (reproducible mode runs the avx2 or avx512 kernels, which give the same bits; unset it)");
    isa = parse_isa(e);
    if (!isa_supported(isa))
      throw UsageError("--reproducible", "VIEWGAP_ISA='" + e + "': this CPU lacks " + isa_missing_features(isa));
  }
  pin_isa(isa);
  pin_onednn_isa_avx2();
}

int report_error(const std::exception_ptr& ep, const std::string& command) {
  try {
    std::rethrow_exception(ep);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "viewgap %s: error: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const CheckpointError& e) {  // a file given to resume from: bad input
    std::fprintf(stderr, "viewgap %s: error: %s\n", command.c_str(), printable(e.what()).c_str());
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

namespace {

// The models' options (models/registry.h) as flags of any command that builds a model.
// A model's own default (ModelEntry::defaults) is named in the option's help.
void add_model_flags(CLI::App* app, ModelOptions& opts) {
  for (const ModelOption* m : model_options()) {
    std::string help = m->help;
    for (const ModelEntry& e : model_registry())
      for (const auto& [name, value] : e.defaults)
        if (name == std::string(m->name)) help += std::string(" [") + e.name + "'s own default: " + value + "]";
    app->add_option(std::string("--") + m->name, opts[m->name], help)->capture_default_str();
  }
}

// Registers every run flag except those in `skip`, and the model options
// (`model_options`).
// `protocols`: which protocols' data flags to add (empty: all of them).
void add_run_flags(CLI::App* app, RunFlags& f, const std::vector<std::string>& skip, bool model_options = true,
                   const std::vector<std::string>& protocols = {}) {
  for (const FlagSpec& s : run_flag_specs()) {
    if (std::find(skip.begin(), skip.end(), s.name) != skip.end()) continue;
    // The registries' models and splits, named in --models' and --split's help.
    std::string help = s.help;
    if (std::string(s.name) == "models") help = "Comma-separated, of: " + model_names();
    if (std::string(s.name) == "data") {
      // "synthetic (rendered), norb:DIR (smallNORB's ...) or idx:DIR (...)".
      const std::vector<Source>& sources = source_registry();
      help.clear();
      for (size_t i = 0; i < sources.size(); ++i)
        help += std::string(i == 0 ? "" : i + 1 == sources.size() ? " or " : ", ") + sources[i].form() + " (" +
                sources[i].help + ")";
      help += "; docs/data.md";
    }
    if (std::string(s.name) == "split") {
      // Per data source: "--data synthetic: a, b; --data norb:DIR: c".
      std::vector<std::pair<std::string, std::string>> by_source;
      for (const Protocol& p : protocol_registry()) {
        if (p.split == nullptr) continue;
        const std::string source = source_named(p.source).form();
        auto it = std::find_if(by_source.begin(), by_source.end(), [&](const auto& s) { return s.first == source; });
        if (it == by_source.end()) it = by_source.insert(by_source.end(), {source, ""});
        it->second += (it->second.empty() ? "" : ", ") + std::string(p.split);
      }
      for (size_t i = 0; i < by_source.size(); ++i)
        help += (i ? "; --data " : ": with --data ") + by_source[i].first + ": " + by_source[i].second;
    }
    app->add_option(std::string("--") + s.name, f.*(s.field), help)->capture_default_str();
  }
  for (const DataFlag& d : protocol_flags()) {
    if (!protocols.empty() && std::find(protocols.begin(), protocols.end(), d.name) == protocols.end()) continue;
    if (d.how_switch) {
      const std::string name = d.name;
      app->add_flag_callback(std::string("--") + d.name, [&f, name] { f.protocol[name] = "on"; }, d.help);
      continue;
    }
    app->add_option(std::string("--") + d.name, f.protocol[d.name], d.help)->capture_default_str();
  }
  if (model_options) add_model_flags(app, f.model);
}

// Each protocol's default gaps (Protocol::default_gaps), as --gaps' help says them.
std::string default_gaps_text() {
  std::string text;
  for (const Protocol& p : protocol_registry()) {
    if (p.at_distance == nullptr) continue;
    text += (text.empty() ? "" : "; ") + std::string(p.name) + " " + (p.default_gaps ? p.default_gaps : SweepFlags{}.gaps) +
            (std::string(p.axis.unit) == "deg" ? "" : " " + std::string(p.axis.unit));
  }
  return text;
}

// An option's name as typed ("--seed"): CLI11's get_name() is empty for a
// hidden option (eval's training flags), its long names are not.
std::string option_name(const CLI::Option* o) {
  const std::vector<std::string>& names = o->get_lnames();
  return names.empty() ? o->get_name() : "--" + names.front();
}

// CLI11 says only "--seed: At Most 1 required but received 2" for a flag given
// twice: name it and both values. "" if no option was given too often.
std::string repeated_option(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->get_expected_max() == 1 && o->count() > 1) {
        std::string values;
        for (const std::string& v : o->results()) values += (values.empty() ? "'" : ", '") + v + "'";
        return option_name(o) + " given " + std::to_string(o->count()) + " times (" + values + "): give it once";
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

// The options of `sub` given on the command line, by name without "--":
// a flag typed at its default value is still refused where it is ignored.
std::set<std::string> typed_options(const CLI::App* sub) {
  std::set<std::string> out;
  for (const CLI::Option* o : sub->get_options())
    if (o->count() > 0 && option_name(o).rfind("--", 0) == 0) out.insert(option_name(o).substr(2));
  return out;
}

// An empty value is never "absent": --out-json "", --jobs "" are errors like any
// other bad value (one rule for every option of the command).
void check_no_empty_values(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->get_expected_min() > 0 && o->count() > 0)
        for (const std::string& v : o->results())
          if (v.empty()) throw UsageError(option_name(o), v, "empty value");
}

}  // namespace

int cli_main(int argc, char** argv) {
  // Under mpirun every rank parses the same flags: rank 0 alone reports what is wrong.
  const bool mute = launched_by_mpi() && launcher_rank() != 0;
  // Nor do they report an interrupt (the launcher's, when the job ends): they write nothing.
  if (mute) end_silently_on_interrupt();
  CLI::App app{"viewgap: novel-viewpoint generalisation of matrix capsules (EM routing) vs CNNs"};
  app.require_subcommand(1);
  // The commit as meta.json records it: tools/make_results.sh takes its provenance's from here.
  app.set_version_flag("--version", "viewgap 0.1.0, commit " + build_commit());

  RunFlags rf;
  CLI::App* run = app.add_subcommand("run", "Train and evaluate the models on one configuration");
  add_run_flags(run, rf, {});
  run->add_option("--out-json", rf.out_json, "Write the full results as JSON (atomically)");
  run->add_option("--save-model", rf.save_model,
                  "Write each trained model to FILE (atomically; docs/checkpoints.md); with several --models, "
                  "FILE holds {model}, which each model's name replaces");
  run->add_option("--checkpoint", rf.checkpoint,
                  "Write a checkpoint of each model's training to FILE as it goes (atomically; docs/checkpoints.md); "
                  "with several --models, FILE holds {model}. Default with --save-model FILE: FILE.ckpt");
  run->add_option("--checkpoint-every", rf.checkpoint_every,
                  "Checkpoint interval: steps (500) or a duration (30s, 10m, 2h); default 10m (with --checkpoint)");
  run->add_flag("--resume", rf.resume,
                "Continue each model's training from its checkpoint (same flags; bit-identical to a run never stopped)");
  run->add_option("--dump", rf.dump, "Also write figure inputs to DIR (dataset samples, poses, snapshots)");
  run->add_flag("--quiet,-q", rf.quiet, "No progress on stderr");
  const char* repro_help = "Bit-identical results on every x86-64 CPU with AVX2+FMA (oneDNN capped at AVX2; our kernels AVX2 or AVX-512, which give the same bits; each model trains on one thread)";
  run->add_flag("--reproducible", rf.reproducible, repro_help);

  EvalFlags vf;
  CLI::App* eval = app.add_subcommand(
      "eval", "Evaluate a saved model (run --save-model, or a checkpoint) on any data and protocol of its image shape");
  eval->add_option("--model-file", vf.model_file,
                   "The model file (or checkpoint) to evaluate: its model, options and image shape are its own "
                   "(docs/checkpoints.md)")
      ->required();
  const std::vector<std::string> training(eval_skipped_run_flags().begin(), eval_skipped_run_flags().end());
  add_run_flags(eval, vf.run, training, false);
  std::string not_taken;
  for (const std::string& name : training) not_taken += (not_taken.empty() ? "--" : ", --") + name;
  // Hidden, so that each is refused by name (harness/eval.h: EvalFlags::not_taken),
  // with a value or without one (CLI11's own message for a missing value of a
  // hidden option names no option).
  std::vector<std::string> hidden = training;
  for (const ModelOption* m : model_options()) hidden.push_back(m->name);
  for (const std::string& name : hidden) eval->add_option("--" + name, vf.not_taken[name])->group("")->expected(0, 1);
  eval->add_option("--out-json", vf.run.out_json, "Write the results as JSON in a run's layout (atomically)");
  eval->add_flag("--quiet,-q", vf.run.quiet, "No progress on stderr");
  eval->add_flag("--reproducible", vf.run.reproducible, repro_help);
  eval->footer("The data flags make the images `run` makes of them (the same --seed, the same images). Not taken (exit 2): " +
               not_taken + " and the models' options: they concern training, and the file holds its model.");

  SweepFlags sf;
  CLI::App* sweep = app.add_subcommand("sweep", "Seeds x gaps along the held-out axis (x any run flag) in parallel, with statistics");
  sweep->add_option("--seeds", sf.seeds, "Seeds: A:B (inclusive) or a comma list")->capture_default_str();
  sweep->add_option("--gaps", sf.gaps,
                    "Gaps between the training views and the held-out set along the protocol's axis, in its unit; "
                    "'given': the held-out set of --test-azimuths/--test-elevations/--split as given (default: " +
                        default_gaps_text() + ")");
  sweep->add_option("--test-width", sf.test_width, "Width of the held-out azimuth window in degrees (stepped azimuth gaps only)")->capture_default_str();
  sweep->add_option("--grid", sf.grid,
                    "NAME=v1,v2,...: also sweep the run flag or model option --NAME (repeatable; NAME+NAME+...=v1,...: "
                    "those flags take each value together); a model that reads "
                    "none of the gridded options trains once per seed, its rows written at every grid point");
  sweep->add_option("--pair-grid", sf.pair_grid,
                    "A|B: paired statistics of every model whose training differs between grid points A and B, at A "
                    "against itself at B, each side the settings that pick it (e.g. 'loss=spread,em-grad=full|loss=xent'; "
                    "repeatable)");
  sweep->add_option("--reference", sf.reference, "Paired statistics: this model minus each other one (default " + default_models().front() + ")");
  sweep->add_option("--jobs", sf.jobs, "Trainings (each with its cells at every gap) run in parallel (default: the number of cores, or as many as fit in memory)");
  sweep->add_option("--out", sf.out, "Output directory; with several --split values (A,B,...), a sweep each where '{split}' in it names the split")->required();
  sweep->add_flag("--resume", sf.resume, "Continue the sweep in --out, skipping finished cells (its configuration from meta.json: flags given must agree, but --model-eval-every, whose change trains again only the models whose checks changed)");
  sweep->add_option("--checkpoint-every", sf.checkpoint_every,
                    "Checkpoint each training in progress into --out/checkpoints every N steps or a duration "
                    "(30s, 10m); --resume continues from them");
  sweep->add_option("--shard", sf.shard,
                    "K/N: run only the trainings (seed x grid point, each with its cells at every gap) whose index is K mod N (a Slurm array task: K = $SLURM_ARRAY_TASK_ID)");
  sweep->add_flag("--quiet,-q", sf.quiet, "No progress on stderr");
  sweep->add_flag("--reproducible", sf.run.reproducible, repro_help);
  sf.run.train_az = sweep_run_defaults().train_az;
  MergeFlags mf;
  CLI::App* merge = app.add_subcommand("merge", "Merge the shards of a sweep (sweep --shard K/N), or sweeps of disjoint --seeds, into the tables of the whole");
  merge->add_option("DIR", mf.dirs, "The shard directories, every K of 0..N-1 once; or whole sweeps of one configuration but for their seeds")->required();
  merge->add_option("--out", mf.out, "Output directory")->required();
  merge->add_flag("--force", mf.force, "Replace the tables of a sweep of the same configuration in --out");
  ExportFlags ef;
  CLI::App* exp = app.add_subcommand("export-norb",
                                     "Write the synthetic shapes, or the toys, as smallNORB's six files (96 x 96 stereo, its viewpoints)");
  exp->add_option("DIR", ef.dir, "Output directory (created if absent; no file there is replaced)")->required();
  exp->add_option("--seed", ef.seed, "Seed of the pixel noise (with --shapes toys: the world, as --data toys' --toy-seed)")->capture_default_str();
  exp->add_option("--shapes", ef.shapes, "The shape set: seed, asym, or toys (the toys dataset's meshes, data/toy_views.h)")->capture_default_str();
  exp->add_option("--instances", ef.instances, "Instances per class and split, 1..5 (smallNORB: 5)")->capture_default_str();
  exp->add_option("--lightings", ef.lightings, "Lighting levels, 1..6 (smallNORB: 6)")->capture_default_str();
  exp->add_option("--variety", ef.variety, "With --shapes toys: wide or narrow, as --data toys' --toy-variety")
      ->capture_default_str();
  exp->add_option("--lights", ef.lights, "With --shapes toys: rig or mixed, as --data toys' --toy-lights")
      ->capture_default_str();
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
  {  // the flags that set the images' shape, so that a model is timed at the shape a run would give it
    std::vector<std::string> not_data;
    for (const FlagSpec& s : run_flag_specs())
      if (std::string(s.name) != "data" && std::string(s.name) != "split") not_data.push_back(s.name);
    add_run_flags(prof, pf.data, not_data, /*model_options=*/false, {"canvas"});
  }
  prof->add_option("--out", pf.out, "CSV: one row per layer and pass")->capture_default_str();
  prof->add_option("--trace", pf.trace, "Also write a Chrome trace-event JSON (Perfetto, chrome://tracing)");
  prof->add_flag("--reproducible", pf.reproducible, repro_help);
  add_run_flags(sweep, sf.run, {"seed", "threads"});  // --test-azimuths: with --gaps given only

  // CLI11 says only "A subcommand is required" for a mistyped one: name it.
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(subs.begin(), subs.end(), [&](const CLI::App* a) { return a->get_name() == argv[1]; })) {
    if (!mute) std::fprintf(stderr, "viewgap: error: unknown command '%s' (expected run, eval, sweep, merge, profile or export-norb)\n",
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
    if ((run->parsed() && rf.reproducible) || (eval->parsed() && vf.run.reproducible) ||
        (sweep->parsed() && sf.run.reproducible) || (prof->parsed() && pf.reproducible))
      enable_reproducible();
    // VIEWGAP_ISA is input too: validate it before any work.
    (void)selected_isa();
    rf.typed = typed_options(run);
    vf.run.typed = typed_options(eval);
    sf.run.typed = typed_options(sweep);
    pf.typed = typed_options(prof);
    pf.data.typed = pf.typed;
    ef.typed = typed_options(exp);
    if (run->parsed()) return do_run(rf);
    if (eval->parsed()) return do_eval(vf);
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