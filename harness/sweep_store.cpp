// A sweep's directory (interface: harness/sweep_store.h): checking and
// locking it before a sweep, its meta.json, the final tables and statistics,
// and merging shards into it. The tables' rows as text and read back:
// sweep_tables.cpp.
#include "harness/sweep_store.h"

#include "harness/sweep_resume.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/frontier.h"
#include "harness/report.h"
#include "harness/sweep_summary.h"

namespace vg {

namespace {

// The first flag whose value differs between two sweep configurations:
// "--lr is '1e-3' there, '2e-3' here"; "" if none does.
std::string config_difference(const nlohmann::json& theirs, const nlohmann::json& ours) {
  auto show = [](const nlohmann::json& v) {
    if (v.is_null()) return std::string("(not set)");
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  auto at = [](const nlohmann::json& j, const std::string& k) {
    return j.is_object() && j.contains(k) ? j.at(k) : nlohmann::json();
  };
  auto differ = [&](const std::string& flag, const nlohmann::json& a, const nlohmann::json& b) {
    return a == b ? std::string() : flag + " is '" + show(a) + "' there, '" + show(b) + "' here";
  };
  for (const auto& [key, flag] : {std::pair{"seeds", "--seeds"}, {"gaps", "--gaps"}, {"test_width", "--test-width"},
                                  {"grid", "--grid"}})
    if (auto d = differ(flag, at(theirs, key), at(ours, key)); !d.empty()) return d;
  const nlohmann::json tr = at(theirs, "run_flags"), orf = at(ours, "run_flags");
  std::set<std::string> names;
  for (const auto* j : {&tr, &orf})
    if (j->is_object())
      for (const auto& [k, v] : j->items()) names.insert(k);
  for (const std::string& k : names)
    if (auto d = differ("--" + k, at(tr, k), at(orf, k)); !d.empty()) return d;
  const bool rt = at(theirs, "reproducible") == true, ro = at(ours, "reproducible") == true;
  if (rt != ro) return std::string("--reproducible is ") + (rt ? "on" : "off") + " there, " + (ro ? "on" : "off") + " here";
  return "";
}

// Files a sweep directory may hold besides temporary ones.
bool is_sweep_file(const std::string& name) {
  // "checkpoints": the trainings in progress (harness/sweep_checkpoints.h).
  for (const char* f : {kSweepLockFile, "meta.json", "cells.csv", "circle.csv", "trajectory.csv", "provenance.csv",
                        "summary.csv", "frontier.csv", "azimuth.csv", "checkpoints"})
    if (name == f) return true;
  return false;
}

}  // namespace

std::unique_ptr<DirLock> prepare_sweep_dir(const SweepPlan& plan) {
  namespace fs = std::filesystem;
  const std::string& dir = plan.dir;
  std::error_code ec;
  // Someone else's directory is refused before anything is written in it.
  auto check_contents = [&](bool locked) {
    if (!fs::is_directory(dir, ec) || fs::exists(dir + "/meta.json", ec)) return;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name == kSweepLockFile || (!locked && is_temp_name(name))) continue;
      throw std::runtime_error("is not empty and holds no viewgap sweep" +
                               std::string(locked ? " (" + name + ")" : ""));
    }
  };
  if (fs::is_directory(dir, ec) && !fs::exists(dir + "/meta.json", ec) && !fs::exists(dir + "/" + kSweepLockFile, ec))
    check_contents(false);
  make_output_dir(dir);
  auto lock = std::make_unique<DirLock>(dir, kSweepLockFile);
  // Under the lock, no live process writes here: temporary files are leftovers.
  remove_stale_temps(dir, true);
  // Its files are written in place of what they are: regular files (or links to one) only.
  for (const char* f : {"meta.json", "cells.csv", "circle.csv", "trajectory.csv", "provenance.csv", "summary.csv",
                        "frontier.csv", "azimuth.csv"}) {
    struct stat st;
    if (::lstat((dir + "/" + f).c_str(), &st) != 0) continue;
    try {
      check_writable(dir + "/" + f);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(f) + ": " + e.what());
    }
  }
  const std::string meta = dir + "/meta.json";
  if (!fs::exists(meta, ec)) {
    check_contents(true);  // only the lock: a sweep killed before its first table
    return lock;
  }
  nlohmann::json j;
  try {
    std::string text;
    read_input_file(meta, &text);
    j = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    throw std::runtime_error("holds an unreadable meta.json");
  }
  if (!j.is_object() || j.value("kind", "") != "viewgap-sweep")
    throw std::runtime_error("holds a meta.json that is not a viewgap sweep's");
  // Another version's tables would be misread: say so rather than guess.
  const int version = j.contains("schema_version") && j["schema_version"].is_number_integer() ? j["schema_version"].get<int>() : 0;
  if (version != kSweepSchemaVersion)
    throw std::runtime_error("holds a sweep of format version " + std::to_string(version) + "; this viewgap writes version " +
                             std::to_string(kSweepSchemaVersion) + " (the format changed: start a new sweep in another directory)");
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (!is_sweep_file(e.path().filename().string()))
      throw std::runtime_error("holds '" + e.path().filename().string() + "', which is not a sweep's file");
  const std::string theirs = j.value("config_hash", ""), ours = config_hash(plan.config);
  // A recheck's configuration differs in --model-eval-every alone (resumed_sweep_flags).
  if (theirs != ours && !(plan.recheck && j.contains("config") && differ_only_in_model_checks(j["config"], plan.config))) {
    const std::string diff = config_difference(j.contains("config") ? j["config"] : nlohmann::json(), plan.config);
    throw std::runtime_error("holds a different sweep: " + (diff.empty() ? std::string("another configuration") : diff) +
                             " (config hash " + theirs + ", this one " + ours + ")");
  }
  if (!plan.resume) throw std::runtime_error("already holds this sweep; add --resume to continue it");
  return lock;
}

nlohmann::json sweep_meta(const SweepPlan& plan, int total) {
  return {{"schema_version", kSweepSchemaVersion},
          {"kind", "viewgap-sweep"},
          {"config", plan.config},
          {"config_hash", config_hash(plan.config)},
          {"run_config", plan.run_config},
          {"models", plan.models},
          {"cells_total", total},
          {"cells_done", 0},
          {"cells_failed", 0},
          {"jobs", plan.jobs},
          {"wall_time_s", nullptr},
          {"meta", build_meta(1)}};
}

namespace {

// The tables of `rows` (every row of `total` cells) into plan.dir: sorted, so
// --jobs 1 and --jobs N (and any sharding, merged) give the same bytes (timing
// aside), written as one step (an interrupt waits for all of them); with
// `statistics`, summary.csv and azimuth.csv too; then meta.json, with
// `finish` called on it last (it sets the timing). Returns the number of
// failed cells.
int write_tables(const SweepPlan& plan, std::vector<CellRow>& rows, int total, bool statistics, bool trajectory,
                 nlohmann::json& meta, const std::function<void(nlohmann::json&)>& finish) {
  const std::string& dir = plan.dir;
  WriteGuard guard;
  sort_rows(rows, plan.models);
  std::string cells_text = cells_header(), circle_text = kCircleHeader, trajectory_text = kTrajectoryHeader,
              provenance_text = kProvenanceHeader;
  std::set<int> failed_ids, done_ids;
  for (const CellRow& r : rows) {
    if (!done_ids.count(r.cell)) provenance_text += provenance_line(r);
    cells_text += cell_line(r);
    circle_text += circle_lines(r, plan.cells[size_t(r.cell)].axis_values);
    trajectory_text += trajectory_lines(r);
    done_ids.insert(r.cell);
    if (r.status != "ok") failed_ids.insert(r.cell);
  }
  write_file_atomic(dir + "/provenance.csv", provenance_text);
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);
  if (trajectory) write_file_atomic(dir + "/trajectory.csv", trajectory_text);
  else remove_output(dir + "/trajectory.csv");  // a merge --force of sweeps begun before it
  // Statistics from the tables as written, so a resumed sweep (which reads its
  // earlier cells back from them) gives the same bytes as an uninterrupted one.
  rows = read_finished(dir, plan);
  if (int(rows.size()) != total * int(plan.models.size()))
    throw std::runtime_error("cannot read back '" + dir + "/cells.csv' and '" + dir + "/circle.csv' whole (changed by another program?)");
  if (statistics) {
    write_file_atomic(dir + "/summary.csv", summary_csv(rows, plan.models, plan.reference, plan.grid_pairs, plan.grid_pair_models));
    // From trajectory.csv: none for a sweep begun before it.
    if (trajectory) write_file_atomic(dir + "/frontier.csv", frontier_csv(rows, plan.models, plan.reference));
    else remove_output(dir + "/frontier.csv");
    write_file_atomic(dir + "/azimuth.csv", azimuth_csv(rows, plan.models));
  }
  meta["cells_done"] = int(done_ids.size());
  meta["cells_failed"] = int(failed_ids.size());
  finish(meta);
  write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");
  return int(failed_ids.size());
}

}  // namespace

int write_final_tables(const SweepPlan& plan, std::vector<CellRow>& rows, int total, bool statistics, bool trajectory,
                       nlohmann::json& meta, std::chrono::steady_clock::time_point t0) {
  return write_tables(plan, rows, total, statistics, trajectory, meta, [&](nlohmann::json& m) {
    m["wall_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

nlohmann::json read_sweep_meta(const std::string& d) {
  nlohmann::json meta;
  try {
    std::string text;
    if (!read_input_file(d + "/meta.json", &text)) throw std::runtime_error("no meta.json");
    meta = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error("'" + d + "': not a sweep directory (" + e.what() + ")");
  }
  if (!meta.is_object() || meta.value("kind", "") != "viewgap-sweep" || !meta.contains("config") ||
      !meta["config"].is_object())
    throw std::runtime_error("'" + d + "': not a viewgap sweep");
  if (const int v = meta.value("schema_version", 0); v != kSweepSchemaVersion)
    throw std::runtime_error("'" + d + "': a sweep of format version " + std::to_string(v) +
                             "; this viewgap merges version " + std::to_string(kSweepSchemaVersion) +
                             " (rerun the shards with this viewgap into new directories)");
  return meta;
}

MergedShards read_shards(const SweepPlan& plan, const std::vector<std::string>& dirs) {
  MergedShards out;
  std::map<int, std::pair<std::string, nlohmann::json>> by_k;  // K -> (directory, its wall_time_s)
  int n_shards = 0;
  for (const std::string& d : dirs) {
    const nlohmann::json meta = read_sweep_meta(d);
    nlohmann::json cfg = meta["config"];
    const std::string shard = cfg.value("shard", "");
    cfg.erase("shard");
    if (cfg != plan.config) {
      // Each flag that differs, as merging whole sweeps (and --resume) say it.
      std::string diff;
      for (const std::string& x : config_differences(plan.config, cfg)) diff += (diff.empty() ? "" : "; ") + x;
      throw std::runtime_error("'" + d + "': a shard of another sweep configuration than '" + dirs.front() + "' (" +
                               diff + ")");
    }
    int k = -1, n = 0;
    if (std::sscanf(shard.c_str(), "%d/%d", &k, &n) != 2 || k < 0 || n < 1 || k >= n)
      throw std::runtime_error("'" + d + "': not a shard (made without --shard K/N)");
    if (n_shards != 0 && n != n_shards)
      throw std::runtime_error("'" + d + "': shard " + shard + " of another split than " + std::to_string(n_shards));
    n_shards = n;
    if (by_k.count(k))
      throw std::runtime_error("'" + d + "': shard " + shard + " given twice (also '" + by_k[k].first + "')");
    SweepPlan mine = plan;
    mine.shard = k;
    mine.shards = n;
    std::vector<CellRow> got;
    try {
      got = read_finished(d, mine);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error("'" + d + "': " + e.what());
    }
    std::erase_if(got, [&](const CellRow& r) { return !mine.in_shard(plan.cells[size_t(r.cell)]); });
    int expect = 0;
    for (const SweepCell& c : plan.cells) expect += mine.in_shard(c);
    const int have = int(got.size() / std::max<size_t>(1, plan.models.size()));
    if (have != expect)
      throw std::runtime_error("'" + d + "': shard " + shard + " has " + std::to_string(have) + " of its " +
                               std::to_string(expect) + " cells finished (rerun it with --resume)");
    out.rows.insert(out.rows.end(), got.begin(), got.end());
    out.trajectory = out.trajectory && has_trajectory(d);
    const nlohmann::json wall = meta.value("wall_time_s", nlohmann::json());
    by_k[k] = {d, wall.is_number() ? wall : nlohmann::json()};
  }
  if (int(by_k.size()) != n_shards) {
    std::string missing;
    for (int k = 0; k < n_shards; ++k)
      if (!by_k.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k) + "/" + std::to_string(n_shards);
    throw std::runtime_error("shards missing: " + missing + " (" + std::to_string(by_k.size()) + " of " +
                             std::to_string(n_shards) + " given)");
  }
  out.dirs = dirs;
  for (const auto& [k, dw] : by_k) out.wall_s.push_back(dw.second);
  return out;
}

SweepOutcome write_merged(const SweepPlan& plan, MergedShards shards, std::chrono::steady_clock::time_point t0) {
  nlohmann::json meta = sweep_meta(plan, int(plan.cells.size()));
  meta["merged_from"] = shards.dirs;
  SweepOutcome out;
  out.resumed = int(plan.cells.size());
  out.failed = write_tables(plan, shards.rows, int(plan.cells.size()), true, shards.trajectory, meta, [&](nlohmann::json& m) {
    // The shards ran the sweep, side by side in a job array or one after
    // another: the longest is its wall time if they overlapped, the sum if not.
    const bool known = std::all_of(shards.wall_s.begin(), shards.wall_s.end(), [](const auto& w) { return w.is_number(); });
    double sum = 0, longest = 0;
    for (const nlohmann::json& w : shards.wall_s)
      if (w.is_number()) sum += w.get<double>(), longest = std::max(longest, w.get<double>());
    m["wall_time_s"] = known ? nlohmann::json(longest) : nlohmann::json();
    m["shards_wall_time_s"] = shards.wall_s;
    m["shards_wall_time_sum_s"] = known ? nlohmann::json(sum) : nlohmann::json();
    out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m["merge_time_s"] = out.wall_s;
  });
  return out;
}

}  // namespace vg
