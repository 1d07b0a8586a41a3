// The novel-versus-familiar frontier; the rule, the level grid and the table: frontier.h.
#include "harness/frontier.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "harness/stats.h"

namespace vg {

namespace {

// A number at the tables' precision, in millionths: the rule compares these,
// so an error read back from trajectory.csv and one computed in memory agree.
long long micro(double v) { return std::llround(v * 1e6); }

}  // namespace

bool has_validation(const std::vector<TrajectoryPoint>& t) {
  return !t.empty() &&
         std::none_of(t.begin(), t.end(), [](const TrajectoryPoint& p) { return std::isnan(p.validation_error); });
}

const TrajectoryPoint* first_reaching(const std::vector<TrajectoryPoint>& t, double level) {
  const long long l = micro(level);
  for (const TrajectoryPoint& p : t)
    if (!std::isnan(p.validation_error) && micro(p.validation_error) <= l) return &p;
  return nullptr;
}

std::vector<double> frontier_levels(const std::vector<CellRow>& rows) {
  long long lo = LLONG_MAX, hi = LLONG_MIN;
  for (const CellRow& r : rows) {
    if (r.status != "ok" || !has_validation(r.trajectory)) continue;
    for (const TrajectoryPoint& p : r.trajectory) lo = std::min(lo, micro(p.validation_error));
    hi = std::max(hi, micro(r.trajectory.front().validation_error));
  }
  std::vector<double> levels;
  if (lo > hi) return levels;
  const long long step = micro(kFrontierStep);
  auto up = [&](long long x) { return (x + step - 1) / step * step; };  // errors are >= 0
  for (long long l = up(lo); l <= up(hi); l += step) levels.push_back(double(l) / 1e6);
  return levels;
}

std::string frontier_csv(const std::vector<CellRow>& unsorted, const std::vector<std::string>& models,
                         const std::string& reference, std::vector<double> levels) {
  std::vector<CellRow> rows = unsorted;
  sort_rows(rows, models);
  if (levels.empty()) levels = frontier_levels(rows);
  std::string out =
      "grid,axis,unit,gap,true_gap,level,kind,model,metric,seeds,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,"
      "prob_improvement,p_value\n";
  auto takes_part = [](const CellRow& r) { return r.status == "ok" && has_validation(r.trajectory); };
  std::vector<std::string> shown;  // the models with a validation trajectory somewhere
  for (const std::string& m : models)
    if (std::any_of(rows.begin(), rows.end(), [&](const CellRow& r) { return r.model == m && takes_part(r); }))
      shown.push_back(m);
  const bool paired = std::find(shown.begin(), shown.end(), reference) != shown.end();

  // Neighbouring levels often stop every training at the same check: the
  // statistics of a sample already seen are looked up, not bootstrapped again.
  std::map<std::vector<double>, Summary> summaries;
  std::map<std::pair<std::vector<double>, std::vector<double>>, Paired> pairs;
  auto summary_of = [&](const std::vector<double>& x) -> const Summary& {
    auto it = summaries.find(x);
    if (it == summaries.end()) it = summaries.emplace(x, summarize(x)).first;
    return it->second;
  };
  auto paired_of = [&](const std::vector<double>& a, const std::vector<double>& b) -> const Paired& {
    auto it = pairs.find({a, b});
    if (it == pairs.end()) it = pairs.emplace(std::make_pair(a, b), paired_compare(a, b)).first;
    return it->second;
  };
  auto stat_cols = [](size_t seeds, const Summary& s) {
    return std::to_string(seeds) + ',' + std::to_string(s.n) + ',' + num(s.mean) + ',' + num(s.sd) + ',' +
           num(s.median) + ',' + num(s.iqm) + ',' + num(s.ci_lo) + ',' + num(s.ci_hi);
  };

  // (grid, gap) in order of first appearance in cell-sorted rows, as summary.csv.
  std::vector<std::pair<std::string, double>> groups;
  for (const CellRow& r : rows)
    if (std::find(groups.begin(), groups.end(), std::make_pair(r.grid, r.gap)) == groups.end())
      groups.emplace_back(r.grid, r.gap);
  for (const auto& [grid, gap] : groups) {
    std::map<std::string, std::map<uint64_t, const std::vector<TrajectoryPoint>*>> traj;  // model -> seed -> checks
    std::string key;
    for (const CellRow& r : rows)
      if (r.grid == grid && r.gap == gap) {
        key = grid + ',' + r.axis + ',' + r.unit + ',' + num(gap, "%g") + ',' + num(r.true_gap, "%g") + ',';
        if (takes_part(r)) traj[r.model][r.seed] = &r.trajectory;
      }
    for (const double level : levels) {
      const std::string at = key + num(level, "%g") + ',';
      std::map<std::string, std::map<uint64_t, const TrajectoryPoint*>> stop;  // model -> seed -> first check at L
      for (const std::string& m : shown)
        for (const auto& [seed, t] : traj[m])
          if (const TrajectoryPoint* p = first_reaching(*t, level)) stop[m][seed] = p;
      for (const std::string& m : shown)
        for (const char* metric : {"heldout_error", "familiar_error"}) {
          std::vector<double> x;
          for (const auto& [seed, p] : stop[m]) x.push_back(metric[0] == 'h' ? p->heldout_error : p->familiar_error);
          out += at + "model," + m + ',' + metric + ',' + stat_cols(traj[m].size(), summary_of(x)) + ",,,,,\n";
        }
      if (!paired) continue;
      for (const std::string& other : shown) {
        if (other == reference) continue;
        size_t seeds = 0;
        std::vector<double> a, b, d;
        for (const auto& [seed, t] : traj[reference]) {
          if (!traj[other].count(seed)) continue;
          ++seeds;
          const auto pa = stop[reference].find(seed), pb = stop[other].find(seed);
          if (pa == stop[reference].end() || pb == stop[other].end()) continue;
          a.push_back(pa->second->heldout_error);
          b.push_back(pb->second->heldout_error);
          d.push_back(a.back() - b.back());
        }
        // d is R - X in error: R is better where d < 0, so paired_compare's wins are R's losses.
        const Paired& p = paired_of(a, b);
        const double prob = p.n == 0 ? NAN : 1.0 - p.prob_improvement;
        out += at + "paired," + reference + '-' + other + ",heldout_error," + stat_cols(seeds, summary_of(d)) + ',' +
               std::to_string(p.losses) + ',' + std::to_string(p.ties) + ',' + std::to_string(p.wins) + ',' +
               num(prob) + ',' + num(p.p_value, "%.6g") + '\n';
      }
    }
  }
  return out;
}

}  // namespace vg
