#include "harness/sweep_summary.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "harness/stats.h"

namespace vg {

namespace {
// Groups (grid, gap) in order of first appearance in cell-sorted rows.
std::vector<std::pair<std::string, double>> groups(const std::vector<CellRow>& rows) {
  std::vector<std::pair<std::string, double>> g;
  for (const CellRow& r : rows)
    if (std::find(g.begin(), g.end(), std::make_pair(r.grid, r.gap)) == g.end()) g.emplace_back(r.grid, r.gap);
  return g;
}

std::vector<CellRow> sorted_copy(std::vector<CellRow> rows, const std::vector<std::string>& models) {
  sort_rows(rows, models);
  return rows;
}
}  // namespace

std::string summary_csv(const std::vector<CellRow>& unsorted, const std::vector<std::string>& models,
                        const std::string& reference, const std::vector<std::pair<std::string, std::string>>& grid_pairs,
                        const std::vector<std::vector<std::string>>& grid_pair_models) {
  const std::vector<CellRow> rows = sorted_copy(unsorted, models);
  std::string out =
      "grid,axis,unit,gap,true_gap,kind,model,metric,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,"
      "prob_improvement,p_value\n";
  auto stat_cols = [](const Summary& s) {
    return std::to_string(s.n) + ',' + num(s.mean) + ',' + num(s.sd) + ',' + num(s.median) + ',' +
           num(s.iqm) + ',' + num(s.ci_lo) + ',' + num(s.ci_hi);
  };
  // Per model and seed, the ok rows of a (grid, gap) group; its true gap and axis ("name,unit").
  struct Group {
    std::map<std::string, std::map<uint64_t, const CellRow*>> ok;
    double true_gap = 0;
    std::string axis;
  };
  auto group_of = [&](const std::string& grid, double gap) {
    Group g;
    for (const CellRow& r : rows)
      if (r.grid == grid && r.gap == gap) {
        g.true_gap = r.true_gap;
        g.axis = r.axis + ',' + r.unit;
        if (r.status == "ok") g.ok[r.model][r.seed] = &r;
      }
    return g;
  };
  // The paired rows of a - b over the seeds both have, on the held-out accuracy and the drop.
  auto paired_rows = [&](const std::string& key, const std::string& label, const std::map<uint64_t, const CellRow*>& ra,
                         const std::map<uint64_t, const CellRow*>& rb) {
    std::string lines;
    for (const char* metric : {"heldout", "drop"}) {
      std::vector<double> a, b, d;
      for (const auto& [seed, rc] : ra) {
        const auto it = rb.find(seed);
        if (it == rb.end()) continue;
        a.push_back(metric[0] == 'h' ? rc->heldout : rc->drop);
        b.push_back(metric[0] == 'h' ? it->second->heldout : it->second->drop);
        d.push_back(a.back() - b.back());
      }
      const Paired p = paired_compare(a, b);
      // For the drop, smaller is better: the first wins where d < 0.
      const bool lower_better = metric[0] == 'd';
      const int wins = lower_better ? p.losses : p.wins, losses = lower_better ? p.wins : p.losses;
      const double prob = p.n == 0 ? NAN : lower_better ? 1.0 - p.prob_improvement : p.prob_improvement;
      lines += key + label + ',' + metric + ',' + stat_cols(summarize(d)) + ',' + std::to_string(wins) + ',' +
               std::to_string(p.ties) + ',' + std::to_string(losses) + ',' + num(prob) + ',' + num(p.p_value, "%.6g") + '\n';
    }
    return lines;
  };
  for (const auto& [grid, gap] : groups(rows)) {
    Group grp = group_of(grid, gap);
    auto& ok = grp.ok;
    const std::string key = grid + ',' + grp.axis + ',' + num(gap, "%g") + ',' + num(grp.true_gap, "%g") + ',';
    for (const std::string& m : models)
      for (const char* metric : {"familiar", "heldout", "drop"}) {
        std::vector<double> x;
        for (const auto& [seed, r] : ok[m])
          x.push_back(metric[0] == 'f' ? r->familiar : metric[0] == 'h' ? r->heldout : r->drop);
        out += key + "model," + m + ',' + metric + ',' + stat_cols(summarize(x)) + ",,,,,\n";
      }
    if (std::find(models.begin(), models.end(), reference) == models.end()) continue;
    for (const std::string& other : models)
      if (other != reference) out += paired_rows(key, "paired," + reference + '-' + other, ok[reference], ok[other]);
  }
  // Grid point against grid point, model by model, at each gap of the first.
  for (size_t i = 0; i < grid_pairs.size(); ++i) {
    const auto& [ga, gb] = grid_pairs[i];
    for (const auto& [grid, gap] : groups(rows)) {
      if (grid != ga) continue;
      Group a = group_of(ga, gap), b = group_of(gb, gap);
      const std::string key = ga + " vs " + gb + ',' + a.axis + ',' + num(gap, "%g") + ',' + num(a.true_gap, "%g") + ',';
      for (const std::string& m : models) {
        const std::vector<std::string>* paired = i < grid_pair_models.size() ? &grid_pair_models[i] : nullptr;
        if (paired != nullptr && std::find(paired->begin(), paired->end(), m) == paired->end()) continue;
        out += paired_rows(key, "paired-grid," + m, a.ok[m], b.ok[m]);
      }
    }
  }
  return out;
}

std::string azimuth_csv(const std::vector<CellRow>& unsorted, const std::vector<std::string>& models) {
  const std::vector<CellRow> rows = sorted_copy(unsorted, models);
  std::string out = "grid,gap,model,axis,unit,distance,n,mean,ci_lo,ci_hi\n";
  for (const auto& [grid, gap] : groups(rows))
    for (const std::string& m : models) {
      // distance -> per-seed mean accuracy over the axis positions at that distance
      std::map<double, std::vector<double>> by_dist;
      std::string axis;  // "name,unit"
      for (const CellRow& r : rows) {
        if (r.grid != grid || r.gap != gap || r.model != m || r.status != "ok") continue;
        axis = r.axis + ',' + r.unit;
        std::map<double, std::pair<double, int>> acc;
        for (size_t a = 0; a < r.axis_acc.size(); ++a) {
          const double dist = std::round(r.axis_dist[a] * 1e6) / 1e6;
          acc[dist].first += r.axis_acc[a];
          acc[dist].second += 1;
        }
        for (const auto& [dist, s] : acc) by_dist[dist].push_back(s.first / s.second);
      }
      for (const auto& [dist, x] : by_dist) {
        const Summary s = summarize(x);
        out += grid + ',' + num(gap, "%g") + ',' + m + ',' + axis + ',' + num(dist, "%g") + ',' +
               std::to_string(s.n) + ',' + num(s.mean) + ',' + num(s.ci_lo) + ',' + num(s.ci_hi) + '\n';
      }
    }
  return out;
}

}  // namespace vg
