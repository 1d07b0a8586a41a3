#include "harness/sweep_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "harness/memory_budget.h"
#include "harness/report.h"
#include "models/numbers.h"
#include "models/registry.h"

namespace vg {

namespace {

// A model option goes into the configuration hash away from its default, and
// at its default as it declares (models/registry.h: HashedAtDefault), so the
// sweeps made before an option existed keep their hash.
bool hashed_option(const std::string& name, const std::string& value, const std::vector<std::string>& models) {
  const ModelOption* o = find_option(name);
  if (o == nullptr) return false;
  if (value != o->default_value) return true;
  switch (o->hashed_at_default) {
    case HashedAtDefault::always: return true;
    case HashedAtDefault::never: return false;
    case HashedAtDefault::when_read: break;
  }
  for (const std::string& m : models)
    if (const ModelEntry* e = find_model(m))
      if (std::find(e->options.begin(), e->options.end(), o) != e->options.end()) return true;
  return false;
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

// A value as what it means: every number in it (between the separators of
// the flags' forms: A:B, MODEL=LR, a comma list) read, so "2e-3" and "0.002",
// "1" and "01", "dr=1e-3" and "dr=0.001" are one value.
std::string canonical_value(const std::string& v) {
  std::string out, atom;
  auto flush = [&] {
    std::ostringstream o;
    o.precision(17);
    if (const auto w = parse_whole(atom)) o << w.value;
    else if (const auto r = parse_real_number(atom)) o << r.value;
    else o << atom;
    out += o.str();
    atom.clear();
  };
  for (char c : v) {
    if (c == ':' || c == '=' || c == ',' || c == ';' || c == '|') {
      flush();
      out += c;
    } else {
      atom += c;
    }
  }
  flush();
  return out;
}

}  // namespace

std::string config_hash(const nlohmann::json& config) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : config.dump()) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

namespace {
// --pair-grid's "A|B": each side the settings ("name=value", joined by ',' or
// ';') that pick exactly one grid point of `points`; as the grid column's strings.
std::vector<std::pair<std::string, std::string>> grid_pairs(
    const std::vector<std::string>& given, const std::vector<std::vector<std::pair<std::string, std::string>>>& points) {
  auto text = [](const std::vector<std::pair<std::string, std::string>>& point) {
    std::string s;
    for (const auto& [name, value] : point) s += (s.empty() ? "" : ";") + name + "=" + value;
    return s;
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& g : given) {
    if (points.size() < 2) throw UsageError("--pair-grid", g, "pairs grid points: give --grid with two values or more");
    const size_t bar = g.find('|');
    if (bar == std::string::npos || g.find('|', bar + 1) != std::string::npos)
      throw UsageError("--pair-grid", g, "expected two grid points as A|B, e.g. 'loss=spread|loss=xent'");
    std::string side[2] = {g.substr(0, bar), g.substr(bar + 1)}, picked[2];
    for (int k = 0; k < 2; ++k) {
      std::string settings = side[k];
      std::replace(settings.begin(), settings.end(), ';', ',');
      std::vector<std::pair<std::string, std::string>> want;
      for (const std::string& s : split(settings, ',')) {
        const size_t eq = s.find('=');
        if (eq == std::string::npos || eq == 0)
          throw UsageError("--pair-grid", g, "'" + s + "' is not NAME=VALUE");
        want.emplace_back(s.substr(0, eq), s.substr(eq + 1));
      }
      std::vector<std::string> matches;
      for (const auto& point : points) {
        const bool all = std::all_of(want.begin(), want.end(), [&](const auto& w) {
          return std::any_of(point.begin(), point.end(), [&](const auto& p) {
            return p.first == w.first && canonical_value(p.second) == canonical_value(w.second);
          });
        });
        if (all) matches.push_back(text(point));
      }
      if (matches.empty()) {
        std::string names;
        for (const auto& point : points) names += (names.empty() ? "" : ", ") + text(point);
        throw UsageError("--pair-grid", g, "no grid point has " + side[k] + " (the grid points: " + names + ")");
      }
      if (matches.size() > 1)
        throw UsageError("--pair-grid", g, side[k] + " matches " + std::to_string(matches.size()) + " grid points (" +
                                               matches[0] + ", " + matches[1] + (matches.size() > 2 ? ", ..." : "") +
                                               "): give a value of every --grid axis it leaves open");
      picked[k] = matches.front();
    }
    if (picked[0] == picked[1]) throw UsageError("--pair-grid", g, "both sides are the grid point " + picked[0]);
    // The same pairing twice, however spelled, would write its rows twice.
    for (size_t j = 0; j < out.size(); ++j)
      if (out[j] == std::pair{picked[0], picked[1]})
        throw UsageError("--pair-grid", g, "pairs " + picked[0] + " with " + picked[1] + ", as --pair-grid '" +
                                               given[j] + "' does (give each pairing once)");
    out.emplace_back(picked[0], picked[1]);
  }
  return out;
}

using GridPoint = std::vector<std::pair<std::string, std::string>>;

// The flags a --grid axis sets: its NAME, or the flags it joins with '+'.
std::vector<std::string> grid_flags(const std::string& g) {
  std::vector<std::string> names = split(g.substr(0, g.find('=')), '+');
  if (names.empty()) names.emplace_back();  // "=..." names no flag: refused as such
  return names;
}

// Which gridded flags each model's training reads (reads[k][a]). A model option
// is read by the models that list it (ModelEntry::options); any other flag
// (the data, the training: --lr, --n-epochs) by every model. Under
// --match-familiar every other model stops at the matched model's accuracy,
// so it reads what that model reads besides its own (`matched`: the model of
// every grid point, "" where none; gridded, the flag is read by every model).
std::vector<std::vector<char>> axes_read(const std::vector<std::string>& models, const std::vector<std::string>& axes,
                                         const std::set<std::string>& matched) {
  std::vector<std::vector<char>> reads(models.size(), std::vector<char>(axes.size(), 0));
  for (size_t k = 0; k < models.size(); ++k)
    for (size_t a = 0; a < axes.size(); ++a) {
      const ModelOption* o = find_option(axes[a]);
      const std::vector<const ModelOption*>& listed = find_model(models[k])->options;
      reads[k][a] = o == nullptr || std::find(listed.begin(), listed.end(), o) != listed.end();
    }
  const std::vector<std::vector<char>> own = reads;
  for (const std::string& name : matched) {
    const auto m = std::find(models.begin(), models.end(), name);
    if (m == models.end()) continue;
    for (size_t k = 0; k < models.size(); ++k)
      for (size_t a = 0; a < axes.size(); ++a) reads[k][a] |= own[size_t(m - models.begin())][a];
  }
  return reads;
}

// The values of the axes model k reads at a grid point: two points with the
// same train it the same, bit for bit (its seed, data and options are the same).
std::vector<std::string> training_key(const std::vector<std::vector<char>>& reads, size_t k, const GridPoint& point) {
  std::vector<std::string> key;
  for (size_t a = 0; a < point.size(); ++a)
    if (reads[k][a]) key.push_back(point[a].second);
  return key;
}

// SweepCell::trained_in of every cell, and SweepPlan::grid_pair_models. The
// first grid point of a training key trains it, for each seed; a shard keeps
// its trainings to itself (a point in another shard trains it again), so every
// shard's cells stay whole and the shards of a plan stay independent.
void share_trainings(SweepPlan& plan, const std::vector<std::string>& axes, const std::vector<GridPoint>& points, size_t n_seeds, size_t n_gaps) {
  const size_t n_models = plan.models.size(), per_point = n_seeds * n_gaps;
  std::set<std::string> matched;
  for (size_t p = 0; p < points.size(); ++p) matched.insert(plan.cells[p * per_point].opt.match_familiar);
  const std::vector<std::vector<char>> reads = axes_read(plan.models, axes, matched);
  // same[k][p]: the points before p that train model k as p does, in order.
  std::vector<std::vector<std::vector<size_t>>> same(n_models, std::vector<std::vector<size_t>>(points.size()));
  for (size_t k = 0; k < n_models; ++k) {
    std::vector<std::vector<std::string>> keys;
    for (const GridPoint& point : points) keys.push_back(training_key(reads, k, point));
    for (size_t p = 0; p < points.size(); ++p)
      for (size_t q = 0; q < p; ++q)
        if (keys[q] == keys[p]) same[k][p].push_back(q);
  }
  for (size_t p = 0; p < points.size(); ++p)
    for (size_t si = 0; si < n_seeds; ++si) {
      const size_t shard = (p * n_seeds + si) % size_t(plan.shards);
      std::vector<size_t> owner(n_models, p);
      for (size_t k = 0; k < n_models; ++k)
        for (size_t q : same[k][p])
          if ((q * n_seeds + si) % size_t(plan.shards) == shard) {
            owner[k] = q;
            break;
          }
      // The matched model's accuracy is every other model's target: a
      // training of any other model here trains it here too.
      const auto m = std::find(plan.models.begin(), plan.models.end(), plan.cells[p * per_point].opt.match_familiar);
      if (m != plan.models.end() && std::count(owner.begin(), owner.end(), p) > 0) owner[size_t(m - plan.models.begin())] = p;
      for (size_t gi = 0; gi < n_gaps; ++gi) {
        SweepCell& c = plan.cells[p * per_point + gi * n_seeds + si];
        c.trained_in.resize(n_models);
        for (size_t k = 0; k < n_models; ++k) c.trained_in[k] = int(owner[k] * per_point + gi * n_seeds + si);
      }
    }
  auto point_of = [&](const std::string& grid) {
    for (size_t p = 0; p < points.size(); ++p)
      if (plan.cells[p * per_point].grid == grid) return p;
    throw std::logic_error("no grid point '" + grid + "'");
  };
  for (const auto& [ga, gb] : plan.grid_pairs) {
    const size_t a = point_of(ga), b = point_of(gb);
    std::vector<std::string> differ;
    for (size_t k = 0; k < n_models; ++k)
      if (training_key(reads, k, points[a]) != training_key(reads, k, points[b])) differ.push_back(plan.models[k]);
    plan.grid_pair_models.push_back(differ);
  }
}
}  // namespace

SweepPlan plan_sweep(const SweepFlags& f) {
  const std::vector<uint64_t> seeds = parse_seeds(f.seeds);
  // "--gaps given": one held-out set, the run flags' own (--test-azimuths,
  // --test-elevations or a --split preset), instead of held-out sets stepped
  // by distance. A protocol with a fixed held-out set runs once, as given.
  const RunFlags defaults = sweep_run_defaults();
  const Protocol& protocol = select_run_protocol(f.run, defaults);
  // A sweep flag set (typed, or away from its default) that the sweep would ignore is refused.
  auto sweep_flag_set = [&](const char* name, const std::string& value, const std::string& def) {
    return f.run.typed.count(name) > 0 || value != def;
  };
  const bool gaps_set = sweep_flag_set("gaps", f.gaps, SweepFlags{}.gaps);
  const bool width_set = sweep_flag_set("test-width", f.test_width, SweepFlags{}.test_width);
  // A protocol with a fixed held-out set (smallNORB's splits, the paper's
  // presets on any source) runs it as given; --gaps may only say so.
  auto refuse_fixed = [&](const Protocol& p, const std::string& grid) {
    if (p.at_distance != nullptr) return;
    const Source& source = source_named(p.source);
    // A rendered source's fixed splits are presets among swept ones: --split names which.
    const std::string by = grid.empty() ? "with --data " + source.record() + (source.rendered ? " --split " + std::string(p.split) : "")
                                        : "with grid point '" + grid + "'";
    if (gaps_set && f.gaps != "given")
      throw UsageError("--gaps", f.gaps, by + " the split fixes the held-out views (leave --gaps out, or give 'given')");
    if (width_set)
      throw UsageError("--test-width", f.test_width, by + " the split fixes the held-out views (leave --test-width out)");
  };
  refuse_fixed(protocol, "");
  const bool fixed = protocol.at_distance == nullptr;
  const bool given = f.gaps == "given" || fixed;
  if (given && width_set)
    throw UsageError("--test-width", f.test_width, "--gaps given runs the held-out views as given (leave --test-width out)");
  if (!given && protocol.swept_flag != nullptr && flag_set(f.run, defaults, protocol.swept_flag))
    throw UsageError(std::string("--") + protocol.swept_flag, *run_flag(f.run, protocol.swept_flag),
                     "applies with --gaps given only (gaps step the held-out window)");
  // The flags a protocol's sweep sets itself (no grid axis may set them).
  auto swept = [](const std::string& name) {
    for (const Protocol& p : protocol_registry())
      if (p.swept_flag != nullptr && name == p.swept_flag) return true;
    return false;
  };
  std::vector<double> gaps;
  // Not given, the gaps are the protocol's own (each fits its axis's limits).
  const std::string gaps_text = gaps_set || protocol.default_gaps == nullptr ? f.gaps : protocol.default_gaps;
  for (const std::string& g : given ? std::vector<std::string>{"0"} : split(gaps_text, ',')) {
    const double v = parse_real("--gaps", g, 0, 359, false);
    if (std::find(gaps.begin(), gaps.end(), v) != gaps.end()) throw UsageError("--gaps", gaps_text, "gap " + fmt_num(v) + " listed twice");
    gaps.push_back(v);
  }
  if (gaps.empty()) throw UsageError("--gaps", gaps_text, "no gap given");
  const double width = parse_real("--test-width", f.test_width, 0, 359, false);
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  int jobs = f.jobs.empty() ? hw : int(parse_int("--jobs", f.jobs, 1, 1024));

  // Grid axes: NAME=v1,v2,... over any run flag but those the sweep owns. NAME
  // may join several flags with '+' that take each value together (a recipe
  // of options that only make sense as one: the official routing's four), so
  // a grid point sets every one of them; the config keeps the axis as typed.
  std::vector<std::pair<std::string, std::vector<std::string>>> axes;
  std::vector<std::string> gridded;  // every flag the axes set, in order
  for (const std::string& g : f.grid) {
    const auto eq = g.find('=');
    const std::string name = g.substr(0, eq);
    for (const std::string& n : grid_flags(g)) {
      RunFlags probe;
      if (eq == std::string::npos || run_flag(probe, n) == nullptr || n == "seed" || swept(n) || n == "threads" ||
          n == "models")
        throw UsageError("--grid", g,
                         "expected NAME=v1,v2,... with NAME a run flag or model option (e.g. lr, em-grad, loss), "
                         "or several joined by '+'");
      if (std::find(gridded.begin(), gridded.end(), n) != gridded.end())
        throw UsageError("--grid", g, "flag '" + n + "' gridded twice");
      // The grid would silently win over the flag: both set one thing.
      if (*run_flag(f.run, n) != *run_flag(sweep_run_defaults(), n))
        throw UsageError("--grid", g, "conflicts with --" + n + " '" + *run_flag(f.run, n) + "' (give one of them)");
      gridded.push_back(n);
    }
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
  // Cartesian product of the axes: the grid points, each flag a joined axis
  // sets with its own (name, value), so a point reads as its flags' settings.
  std::vector<GridPoint> points{{}};
  for (const auto& [name, values] : axes) {
    std::vector<GridPoint> next;
    for (const auto& p : points)
      for (const auto& v : values) {
        next.push_back(p);
        for (const std::string& n : grid_flags(name)) next.back().emplace_back(n, v);
      }
    points = next;
  }

  SweepPlan plan;
  std::vector<std::pair<RunFlags, RunOptions>> sized;  // per grid point, for the memory check
  plan.dir = f.out;
  plan.resume = f.resume;
  plan.recheck = f.recheck;
  plan.quiet = f.quiet;
  if (!f.checkpoint_every.empty()) {
    const CheckpointInterval every = parse_checkpoint_every("--checkpoint-every", f.checkpoint_every);
    plan.checkpoint_steps = every.steps;
    plan.checkpoint_seconds = every.seconds;
  } else if (f.resume && std::filesystem::is_directory(f.out + "/checkpoints")) {
    // A sweep that checkpointed goes on checkpointing when resumed without the
    // flag (the interval is not part of its configuration), at run's default:
    // otherwise hours of a resumed training would hang on no checkpoint at all.
    plan.checkpoint_seconds = kDefaultCheckpointSeconds;
  }
  for (size_t point_index = 0; point_index < points.size(); ++point_index) {
    const auto& point = points[point_index];
    RunFlags rf = f.run;
    std::string grid;
    for (const auto& [name, value] : point) {
      *run_flag(rf, name) = value;
      rf.typed.insert(name);  // a grid value is typed: the validation its flag gets
      grid += (grid.empty() ? "" : ";") + name + "=" + value;
    }
    int threads = 1;
    RunOptions base;
    try {
      base = validate_run(rf, &threads, true);
    } catch (const UsageError& e) {
      // A grid value at fault is named as the user typed it: in --grid.
      const std::string what = e.what();
      for (const std::string& g : f.grid)
        for (const auto& [name, value] : point)
          if (what.rfind("--" + name + " '" + printable(value) + "'", 0) == 0 &&
              std::ranges::count(grid_flags(g), name) > 0)
            throw UsageError("--grid", g, what);
      throw;
    }
    // Valid for its flag, a value must still fit the tables' "name=value;..." on one line.
    for (const auto& [name, value] : point)
      if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f || c == ';' || c == '"'; }))
        throw UsageError("--grid", name + "=" + value,
                         "holds a character the tables cannot (a control character, ';' or '\"')");
    plan.models = base.models;
    // By default the first default model is the reference (no paired
    // statistics without it); a reference asked for must be among the models.
    if (!f.reference.empty() && std::find(base.models.begin(), base.models.end(), f.reference) == base.models.end())
      throw UsageError("--reference", f.reference, "is not among --models '" + rf.models + "'");
    plan.reference = f.reference.empty() ? default_models().front() : f.reference;
    if (!f.reference.empty() && base.models.size() < 2)
      throw UsageError("--reference", f.reference, "has no other model in --models '" + rf.models + "' to pair with");
    // A grid point gets the protocol checks of the flags above, as its own protocol.
    const Protocol& p = select_run_protocol(rf, defaults);
    if (&p != &protocol) refuse_fixed(p, grid);
    if (!given && p.at_distance == nullptr)  // a grid point that chose a fixed held-out set
      throw UsageError("--gaps", f.gaps, "grid point '" + grid + "' fixes the held-out views (give --gaps given)");
    if (!given && p.swept_flag != nullptr && flag_set(rf, defaults, p.swept_flag))
      throw UsageError(std::string("--") + p.swept_flag, *run_flag(rf, p.swept_flag),
                       "applies with --gaps given only (gaps step the held-out set), with grid point '" + grid + "'");
    // The held-out set at distance g from the training set; the protocol's
    // geometry rules judge it (a window touching the training range's end, at
    // gap 0, is the one exception).
    auto window = [&](double g) {
      RunOptions o = base;
      if (!given) o.data = p.at_distance(base.data, g, width);
      return o;
    };
    // If the window does not fit beside the training range even at gap 0, its
    // width is at fault. A protocol whose held-out set keeps its own extent
    // (sweeps_width false) reads no --test-width.
    if (given) {
      check_geometry_flags(rf, base.data, false);
    } else if (!p.sweeps_width && width_set) {
      throw UsageError("--test-width", f.test_width,
                       "this protocol's sweep moves its held-out set (" + p.heldout_text(base.data) +
                           ") and keeps its width (leave --test-width out)");
    } else if (p.swept_flag != nullptr) {
      const TestFlags width{"--test-width", f.test_width, "--test-width", f.test_width,
                            "a window this wide (" + p.heldout_text(window(0).data) +
                                " at gap 0) reaches round to the training range: "};
      check_geometry_flags(rf, window(0).data, true, &width);
    }
    for (double g : gaps) {
      const RunOptions opt = window(g);
      if (!given) {
        const TestFlags at_gap{"--test-width", f.test_width, "--gaps", gaps_text,
                               (gaps_set ? "gap " : "the protocol's default gap ") + fmt_num(g) + " (held-out window " + p.heldout_text(opt.data) + "): "};
        check_geometry_flags(rf, opt.data, true, &at_gap);
      }
      const double true_gap = p.sweep_gap(opt.data);
      const std::vector<double> values = p.axis_values(opt.data), distances = axis_distances(p, opt.data);
      for (size_t si = 0; si < seeds.size(); ++si) {
        const uint64_t seed = seeds[si];
        SweepCell c;
        c.id = int(plan.cells.size());
        c.group = int(point_index * seeds.size() + si);
        c.seed = seed;
        c.gap = given ? true_gap : g;
        c.true_gap = true_gap;
        c.grid = grid;
        c.opt = opt;
        c.opt.train.seed = seed;
        c.axis = p.axis.name;
        c.unit = p.axis.unit;
        c.axis_values = values;
        c.axis_distances = distances;
        plan.cells.push_back(c);
      }
    }
    sized.emplace_back(rf, window(gaps.front()));
  }
  // Trainings run `jobs` at a time (never more than there are), each with a
  // dataset per gap and its model: by default as many as fit; asked for, too
  // many is an error.
  jobs = std::min(jobs, plan.cells.empty() ? 1 : plan.cells.back().group + 1);
  const int per_group = int(gaps.size());
  for (const auto& [rf, opt] : sized) {
    if (f.jobs.empty()) jobs = std::min(jobs, jobs_that_fit(opt, per_group));
    check_memory(rf, opt, jobs, f.jobs.empty() ? std::to_string(jobs) : f.jobs, per_group);
  }
  plan.jobs = jobs;
  // Everything that defines the results (not --jobs, --resume, --quiet, --out).
  nlohmann::json run_flags;
  // A data source's own flags only when it is chosen, so sweeps made before
  // them keep their hash; the swept flag only when the sweep does not set it.
  auto source_flag = [](const Source& s, const std::string& name) {
    return std::find(s.flags.begin(), s.flags.end(), name) != s.flags.end();
  };
  auto hashed = [&](const std::string& name) {
    if (name == "seed" || name == "threads") return false;
    if (!given && protocol.swept_flag != nullptr && name == protocol.swept_flag) return false;
    if (source_flag(source_named(protocol.source), name)) return true;
    for (const Source& s : source_registry())
      if (source_flag(s, name)) return false;
    return true;
  };
  for (const FlagSpec& s : run_flag_specs())
    if (hashed(s.name) && (s.hashed_at_default || f.run.*(s.field) != defaults.*(s.field)))
      run_flags[s.name] = f.run.*(s.field);
  for (const auto& [name, value] : f.run.model)
    if (hashed_option(name, value, plan.models)) run_flags[name] = value;
  // An option typed at its registry-wide default still overrides a model's own
  // default (models/registry.h: model_options_of), which its value alone does
  // not tell: recorded so that --resume and merge restore it (absent where no
  // model has its own default for it, so every other sweep keeps its hash).
  nlohmann::json typed_at_default = nlohmann::json::array();
  for (const ModelOption* o : model_options()) {
    if (f.run.typed.count(o->name) == 0 || option_value(f.run.model, *o) != o->default_value) continue;
    bool own = false;
    for (const std::string& m : plan.models)
      for (const auto& [name, value] : find_model(m)->defaults) own = own || o->name == std::string(name);
    if (own) typed_at_default.push_back(o->name);
  }
  // The chosen protocol's own only: other sweeps keep their hash; so do its
  // sweeps made before a flag it added since (hashed away from their value only).
  for (const DataFlag& d : protocol.flags)
    if (!d.how_switch && hashed(d.name) && (d.unhashed_value == nullptr || *run_flag(f.run, d.name) != d.unhashed_value))
      run_flags[d.name] = *run_flag(f.run, d.name);
  plan.config = {{"seeds", seeds}, {"gaps", gaps}, {"test_width", width},
                 {"grid", axes}, {"run_flags", run_flags}, {"reference", plan.reference}};
  // Absent for a source of files, so that their sweeps keep their hash.
  if (const int v = source_named(protocol.source).version; v > 0) plan.config["source_version"] = v;
  // The typed configuration of the first cell, in the run JSON's form (not
  // hashed), and the views every grid point and gap trains on and holds out.
  plan.run_config = run_config_json(plan.cells.front().opt, 1);
  nlohmann::json views = nlohmann::json::array();
  for (size_t i = 0; i < plan.cells.size(); i += seeds.size()) {
    const SweepCell& c = plan.cells[i];
    nlohmann::json v = views_json(c.opt.data);
    v["grid"] = c.grid;
    v["gap"] = c.gap;
    v["true_gap"] = c.true_gap;
    views.push_back(v);
  }
  plan.run_config["views"] = views;
  if (!typed_at_default.empty()) plan.config["typed_at_default"] = typed_at_default;
  if (f.run.reproducible) plan.config["reproducible"] = true;  // absent: older sweeps keep their hash
  // A protocol that moves the flags' own held-out set hashes the same flags
  // with --gaps 0 as with --gaps given: the moved sweep says so (absent
  // otherwise, so every other sweep keeps its hash; merge reads it).
  if (!given && protocol.swept_flag == nullptr) plan.config["moves_given_set"] = true;
  plan.grid_pairs = grid_pairs(f.pair_grid, points);
  if (!f.pair_grid.empty()) plan.config["pair_grid"] = f.pair_grid;  // absent: other sweeps keep their hash
  // --shard K/N: the cells whose training group is K mod N.
  if (!f.shard.empty()) {
    const auto slash = f.shard.find('/');
    const ParsedNumber<long long> k = parse_whole(f.shard.substr(0, slash));
    const ParsedNumber<long long> n = parse_whole(slash == std::string::npos ? "" : f.shard.substr(slash + 1));
    if (!k || !n || n.value < 1 || n.value > 1000000 || k.value < 0 || k.value >= n.value)
      throw UsageError("--shard", f.shard, "expected K/N with 0 <= K < N (e.g. 3/16: the trainings (seed x grid point) whose index is 3 mod 16)");
    plan.shard = int(k.value);
    plan.shards = int(n.value);
    if (plan.shards > 1) plan.config["shard"] = f.shard;
  }
  share_trainings(plan, gridded, points, seeds.size(), gaps.size());
  return plan;
}

}  // namespace vg
