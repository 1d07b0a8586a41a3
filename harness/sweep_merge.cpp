#include "harness/sweep_merge.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "harness/sweep_resume.h"

namespace vg {

namespace {

// The flags that plan the sweep of configuration `cfg` again, writing `out`;
// a refusal names `dir`, whose meta.json gave it.
SweepFlags flags_of(const nlohmann::json& cfg, const std::string& dir, const std::string& out) {
  SweepFlags f;
  try {
    f = sweep_flags_of(cfg);
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + dir + "': its meta.json records a sweep this viewgap cannot merge (" + e.what() + ")");
  }
  f.out = out;
  f.quiet = true;
  return f;
}

SweepPlan plan_of(const SweepFlags& f, const std::string& dir) {
  try {
    return plan_sweep(f);
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + dir + "': its meta.json records a sweep this viewgap cannot plan again (" + e.what() + ")");
  }
}

std::string joined(const std::vector<std::string>& parts) {
  std::string all;
  for (const std::string& p : parts) all += (all.empty() ? "" : "; ") + p;
  return all;
}

// Whole sweeps of one configuration but for their seeds: each one's rows,
// read against its own plan, renumbered as the cells of the union's.
SweepMerge merge_seeds(const std::vector<std::string>& dirs, const std::vector<nlohmann::json>& metas,
                       const std::string& out, bool force) {
  if (dirs.size() == 1)
    throw std::invalid_argument("'" + dirs.front() + "': a whole sweep, and nothing to merge it with (merge takes every "
                                "shard of one sweep, or two or more whole sweeps of disjoint seeds)");
  nlohmann::json common = metas.front()["config"];
  common.erase("seeds");
  std::map<uint64_t, size_t> seed_in;  // seed -> the directory holding it
  for (size_t k = 0; k < dirs.size(); ++k) {
    nlohmann::json cfg = metas[k]["config"];
    if (cfg.contains("shard"))
      throw std::invalid_argument("'" + dirs[k] + "': a shard (sweep --shard " + cfg["shard"].get<std::string>() +
                                  "), and '" + dirs.front() + "' a whole sweep: merge shards with shards, whole sweeps with whole sweeps");
    if (!cfg.contains("seeds") || !cfg["seeds"].is_array()) throw std::invalid_argument("'" + dirs[k] + "': a sweep without seeds");
    for (const auto& s : cfg["seeds"]) {
      const uint64_t seed = s.get<uint64_t>();
      if (const auto it = seed_in.find(seed); it != seed_in.end())
        throw std::invalid_argument("'" + dirs[k] + "': seed " + std::to_string(seed) + " is also in '" +
                                    dirs[it->second] + "' (merged sweeps hold disjoint seeds)");
      seed_in[seed] = k;
    }
    cfg.erase("seeds");
    if (cfg != common)
      throw std::invalid_argument("'" + dirs[k] + "': a sweep of another configuration than '" + dirs.front() +
                                  "' (" + joined(config_differences(common, cfg)) + ")");
  }
  SweepFlags f = flags_of(metas.front()["config"], dirs.front(), out);
  f.seeds.clear();
  for (const auto& [seed, k] : seed_in) f.seeds += (f.seeds.empty() ? "" : ",") + std::to_string(seed);
  f.resume = force;  // lets prepare_sweep_dir accept a sweep of this configuration
  SweepMerge m;
  m.by_seeds = true;
  m.plan = plan_of(f, dirs.front());
  std::map<std::tuple<uint64_t, std::string, double>, int> cell_of;  // (seed, grid point, gap) -> the union's cell
  for (const SweepCell& c : m.plan.cells) cell_of[{c.seed, c.grid, c.gap}] = c.id;
  for (size_t k = 0; k < dirs.size(); ++k) {
    const SweepPlan mine = plan_of(flags_of(metas[k]["config"], dirs[k], dirs[k]), dirs[k]);
    std::vector<CellRow> got;
    try {
      got = read_finished(dirs[k], mine);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument("'" + dirs[k] + "': " + e.what());
    }
    const size_t have = got.size() / std::max<size_t>(1, mine.models.size());
    if (have != mine.cells.size())
      throw std::invalid_argument("'" + dirs[k] + "': has " + std::to_string(have) + " of its " +
                                  std::to_string(mine.cells.size()) + " cells finished (rerun it with --resume)");
    for (CellRow& r : got) {
      const SweepCell& c = mine.cells[size_t(r.cell)];
      r.cell = cell_of.at({c.seed, c.grid, c.gap});
    }
    m.parts.rows.insert(m.parts.rows.end(), got.begin(), got.end());
    m.parts.trajectory = m.parts.trajectory && has_trajectory(dirs[k]);
    const nlohmann::json wall = metas[k].value("wall_time_s", nlohmann::json());
    m.parts.wall_s.push_back(wall.is_number() ? wall : nlohmann::json());
  }
  m.parts.dirs = dirs;
  return m;
}

}  // namespace

SweepMerge read_sweep_merge(const std::vector<std::string>& dirs, const std::string& out, bool force) {
  if (dirs.empty()) throw std::invalid_argument("merge: no directory given");
  std::vector<nlohmann::json> metas;
  try {
    for (const std::string& d : dirs) metas.push_back(read_sweep_meta(d));
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());
  }
  const nlohmann::json& first = metas.front()["config"];
  if (!first.contains("shard")) return merge_seeds(dirs, metas, out, force);
  // Shards: the first one's configuration is the sweep's, which read_shards
  // checks every shard against.
  SweepFlags f = flags_of(first, dirs.front(), out);
  f.shard.clear();  // the merged sweep is the whole
  f.resume = force;
  SweepMerge m;
  m.plan = plan_of(f, dirs.front());
  try {
    m.parts = read_shards(m.plan, dirs);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(e.what());  // names the shard directory at fault
  }
  return m;
}

}  // namespace vg
