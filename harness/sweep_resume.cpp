#include "harness/sweep_resume.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "harness/sweep_store.h"
#include "models/registry.h"

namespace vg {

namespace {

std::string number(const nlohmann::json& v) {
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v.get<double>());
  return buf;
}

std::string list(const nlohmann::json& a) {
  std::string s;
  for (const auto& v : a) {
    if (!s.empty()) s += ',';
    s += number(v);
  }
  return s;
}

}  // namespace

SweepFlags sweep_flags_of(const nlohmann::json& cfg) {
  SweepFlags f;
  f.seeds = list(cfg.at("seeds"));
  f.test_width = number(cfg.at("test_width"));
  const nlohmann::json& rf = cfg.at("run_flags");
  for (const auto& axis : cfg.at("grid")) {
    std::string g = axis.at(0).get<std::string>() + "=";
    for (const auto& v : axis.at(1)) {
      if (g.back() != '=') g += ',';
      g += v.get<std::string>();
    }
    f.grid.push_back(g);
  }
  for (const auto& [name, value] : rf.items()) {
    std::string* field = run_flag(f.run, name);
    if (field == nullptr) throw std::runtime_error("flag --" + name + " unknown to this viewgap");
    *field = value.get<std::string>();
  }
  // --gaps given: the protocol's swept flag is hashed (a protocol whose gaps
  // move its own held-out set marks the configuration instead).
  const Protocol& protocol = select_run_protocol(f.run, sweep_run_defaults());
  const bool given = protocol.swept_flag != nullptr ? rf.contains(protocol.swept_flag) : !cfg.contains("moves_given_set");
  f.gaps = given ? "given" : list(cfg.at("gaps"));
  // The default reference is recorded too; given back explicitly it would be
  // refused where the sweep's models do not include it.
  f.reference = cfg.value("reference", "");
  if (f.reference == default_models().front()) f.reference.clear();
  f.run.reproducible = cfg.value("reproducible", false);
  f.shard = cfg.value("shard", "");
  if (cfg.contains("pair_grid")) f.pair_grid = cfg.at("pair_grid").get<std::vector<std::string>>();
  if (cfg.contains("typed_at_default"))
    for (const auto& name : cfg.at("typed_at_default")) f.run.typed.insert(name.get<std::string>());
  return f;
}

std::vector<std::string> config_differences(const nlohmann::json& theirs, const nlohmann::json& ours) {
  auto show = [](const nlohmann::json& v) {
    if (v.is_null()) return std::string("(not set)");
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  auto at = [](const nlohmann::json& j, const std::string& k) {
    return j.is_object() && j.contains(k) ? j.at(k) : nlohmann::json();
  };
  auto keys = [](const nlohmann::json& a, const nlohmann::json& b) {
    std::set<std::string> names;
    for (const auto* j : {&a, &b})
      if (j->is_object())
        for (const auto& [k, v] : j->items()) names.insert(k);
    return names;
  };
  std::vector<std::string> out;
  auto differ = [&](const std::string& flag, const nlohmann::json& a, const nlohmann::json& b) {
    if (a != b) out.push_back(flag + " is '" + show(a) + "' there, '" + show(b) + "' here");
  };
  // The sweep's own fields first, by the flag that sets them; then the run flags.
  const std::pair<const char*, const char*> own[] = {{"seeds", "--seeds"}, {"gaps", "--gaps"},
                                                     {"test_width", "--test-width"}, {"grid", "--grid"},
                                                     {"reference", "--reference"}, {"shard", "--shard"},
                                                     {"moves_given_set", "--gaps (the held-out set moved)"},
                                                     {"reproducible", "--reproducible"}, {"pair_grid", "--pair-grid"},
                                                     {"typed_at_default", "model options typed at their defaults"}};
  for (const auto& [key, flag] : own) differ(flag, at(theirs, key), at(ours, key));
  const nlohmann::json tr = at(theirs, "run_flags"), orf = at(ours, "run_flags");
  for (const std::string& k : keys(tr, orf)) differ("--" + k, at(tr, k), at(orf, k));
  for (const std::string& k : keys(theirs, ours)) {
    bool known = k == "run_flags";
    for (const auto& [key, flag] : own) known = known || k == key;
    if (!known) differ(k, at(theirs, k), at(ours, k));
  }
  return out;
}

bool differ_only_in_model_checks(nlohmann::json a, nlohmann::json b) {
  for (nlohmann::json* j : {&a, &b})
    if (j->is_object() && j->contains("run_flags") && (*j)["run_flags"].is_object()) (*j)["run_flags"].erase("model-eval-every");
  return a == b;
}

KeptRows keep_whole_rows(SweepPlan& plan) {
  KeptRows out;
  if (!plan.resume) return out;
  std::vector<CellRow> alone;
  std::set<int> finished;
  for (const CellRow& r : read_finished(plan.dir, plan, &alone)) finished.insert(r.cell);
  std::set<std::pair<int, std::string>> whole;
  for (const CellRow& r : alone) whole.insert({r.cell, r.model});
  // A group's cells share one training of each model, so a model's rows are
  // kept in all of its cells still to run or in none.
  std::map<std::pair<int, size_t>, bool> keep;  // (group, model) -> kept
  for (const SweepCell& c : plan.cells) {
    if (!plan.in_shard(c) || finished.count(c.id)) continue;
    for (size_t k = 0; k < plan.models.size(); ++k) {
      const bool w = whole.count({c.id, plan.models[k]}) > 0;
      const auto [it, first] = keep.emplace(std::make_pair(c.group, k), w);
      if (!first) it->second = it->second && w;
    }
  }
  std::set<std::string> again;
  for (SweepCell& c : plan.cells) {
    if (!plan.in_shard(c) || finished.count(c.id)) continue;
    for (size_t k = 0; k < plan.models.size(); ++k) {
      if (!keep.at({c.group, k})) {
        if (plan.trained_in(c, k) == c.id) again.insert(plan.models[k]);
        continue;
      }
      if (c.trained_in.empty())
        for (size_t j = 0; j < plan.models.size(); ++j) c.trained_in.push_back(c.id);
      c.trained_in[k] = SweepCell::kKeptRow;
      ++out.rows;
    }
  }
  for (const std::string& m : plan.models)
    if (again.count(m)) out.trained_again.push_back(m);
  return out;
}

namespace {

// The flags typed beside --resume that define a sweep (not where it goes,
// how fast or how loudly it runs).
bool defines_a_sweep(const std::set<std::string>& typed) {
  return std::any_of(typed.begin(), typed.end(), [](const std::string& name) {
    return name != "out" && name != "resume" && name != "jobs" && name != "quiet" && name != "checkpoint-every";
  });
}

}  // namespace

SweepFlags resumed_sweep_flags(const SweepFlags& f) {
  if (!f.resume) return f;
  const std::string meta_path = f.out + "/meta.json";
  nlohmann::json meta;
  SweepFlags stored;
  std::string text;
  try {
    // Refuses what is not a regular file (a FIFO would block) before reading it.
    if (!read_input_file(meta_path, &text)) {
      // Nothing to resume: with the sweep's flags given (a job array passes
      // them with every --resume) it starts; with none it would start the
      // default sweep, which nobody asked to resume.
      if (defines_a_sweep(f.run.typed)) return f;
      throw UsageError("--out", f.out, "holds no sweep to --resume (no meta.json); give the sweep's flags to start one there");
    }
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError("--out", f.out, e.what());
  }
  try {
    meta = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    return f;  // not JSON: prepare_sweep_dir says what is wrong with it
  }
  if (!meta.is_object() || meta.value("kind", "") != "viewgap-sweep" ||
      meta.value("schema_version", 0) != kSweepSchemaVersion)
    return f;  // another kind or version: prepare_sweep_dir says so
  // A value there this viewgap cannot read or refuses is meta.json's fault,
  // not a flag's the user typed: its configuration is read and planned alone
  // first, and a refusal names the file.
  auto recorded = [&](const std::string& why) {
    return UsageError("--out", f.out, meta_path + ": the sweep's recorded configuration: " + why + " (not a flag given here)");
  };
  try {
    stored = sweep_flags_of(meta.at("config"));
  } catch (const std::exception& e) {
    throw recorded(e.what());
  }
  try {
    SweepFlags alone = stored;
    alone.out = f.out;
    alone.resume = true;
    (void)plan_sweep(alone);
  } catch (const UsageError& e) {
    throw recorded(e.what());
  }
  SweepFlags out = stored;
  out.out = f.out;
  out.resume = true;
  out.quiet = f.quiet;
  out.jobs = f.jobs;
  out.checkpoint_every = f.checkpoint_every;
  out.run.typed.insert(f.run.typed.begin(), f.run.typed.end());  // beside what the sweep recorded typed
  const std::set<std::string>& typed = f.run.typed;
  auto typed_flag = [&](const char* name) { return typed.count(name) > 0; };
  if (typed_flag("seeds")) out.seeds = f.seeds;
  if (typed_flag("gaps")) out.gaps = f.gaps;
  if (typed_flag("test-width")) out.test_width = f.test_width;
  if (typed_flag("grid")) out.grid = f.grid;
  if (typed_flag("pair-grid")) out.pair_grid = f.pair_grid;
  if (typed_flag("reference")) out.reference = f.reference;
  if (typed_flag("shard")) out.shard = f.shard;
  if (typed_flag("reproducible")) out.run.reproducible = f.run.reproducible;
  for (const std::string& name : typed)
    if (std::string* field = run_flag(out.run, name)) *field = *run_flag(f.run, name);
  const nlohmann::json ours = plan_sweep(out).config, theirs = meta.at("config");
  if (typed_flag("model-eval-every") && theirs != ours && differ_only_in_model_checks(theirs, ours)) {
    // Other checks of some models: their trainings run again, the others' rows are kept.
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(f.out + "/checkpoints", ec) && !fs::is_empty(f.out + "/checkpoints", ec))
      throw UsageError("--model-eval-every", f.run.model_eval_every,
                       "the sweep in '" + f.out + "' has trainings in progress (checkpoints/): resume it with its own "
                       "checks ('" + stored.run.model_eval_every + "') until they finish, then change them");
    out.recheck = true;
    return out;
  }
  if (const std::vector<std::string> diff = config_differences(theirs, ours); !diff.empty()) {
    std::string all;
    for (const std::string& d : diff) {
      if (!all.empty()) all += "; ";
      all += d;
    }
    throw UsageError("--out", f.out, "holds a different sweep: " + all + " (flags given beside --resume must agree with its meta.json)");
  }
  return out;
}

}  // namespace vg
