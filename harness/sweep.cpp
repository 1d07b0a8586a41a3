#include "harness/sweep.h"

#include <omp.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "harness/report.h"
#include "harness/stats.h"

namespace vg {

namespace {

const char* kCellsHeader =
    "cell,seed,gap,true_gap_deg,grid,model,status,familiar,heldout,drop,n_params,seconds,reason\n";
const char* kCircleHeader = "cell,seed,gap,grid,model,azimuth_deg,distance_deg,accuracy\n";

std::string num(double v, const char* f = "%.6f") {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string cell_line(const CellRow& r) {
  std::ostringstream o;
  o << r.cell << ',' << r.seed << ',' << num(r.gap, "%g") << ',' << num(r.true_gap, "%g") << ','
    << r.grid << ',' << r.model << ',' << r.status << ',' << num(r.familiar) << ','
    << num(r.heldout) << ',' << num(r.drop) << ',' << r.n_params << ',' << num(r.seconds, "%.3f")
    << ',' << r.reason << '\n';
  return o.str();
}

std::string circle_lines(const CellRow& r, const std::vector<double>& azimuths) {
  std::string s;
  for (size_t a = 0; a < r.circle_acc.size(); ++a)
    s += std::to_string(r.cell) + ',' + std::to_string(r.seed) + ',' + num(r.gap, "%g") + ',' +
         r.grid + ',' + r.model + ',' + num(azimuths[a], "%g") + ',' + num(r.circle_dist[a], "%g") +
         ',' + num(r.circle_acc[a]) + '\n';
  return s;
}

// Lines of a file, dropping a last line that lacks its newline (a write cut
// short by a kill), and the header.
std::vector<std::string> complete_lines(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(text.substr(start, nl - start));
  if (!lines.empty()) lines.erase(lines.begin());
  return lines;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

// Rows already in DIR from an interrupted run, keeping only cells with a row
// for every model (a cell is written whole, so a partial one was cut short).
std::vector<CellRow> read_finished(const std::string& dir, const std::vector<std::string>& models) {
  std::map<int, std::vector<CellRow>> by_cell;
  for (const std::string& line : complete_lines(dir + "/cells.csv")) {
    const auto f = fields(line);
    if (f.size() != 13) continue;
    CellRow r;
    try {
      r.cell = std::stoi(f[0]);
      r.seed = std::stoull(f[1]);
      r.gap = std::stod(f[2]);
      r.true_gap = std::stod(f[3]);
      r.familiar = std::stod(f[7]);
      r.heldout = std::stod(f[8]);
      r.drop = std::stod(f[9]);
      r.n_params = std::stoull(f[10]);
      r.seconds = std::stod(f[11]);
    } catch (const std::exception&) {
      continue;
    }
    r.grid = f[4];
    r.model = f[5];
    r.status = f[6];
    r.reason = f[12];
    by_cell[r.cell].push_back(r);
  }
  std::map<std::pair<int, std::string>, std::vector<std::pair<double, double>>> circle;
  for (const std::string& line : complete_lines(dir + "/circle.csv")) {
    const auto f = fields(line);
    if (f.size() != 8) continue;
    try {
      circle[{std::stoi(f[0]), f[4]}].emplace_back(std::stod(f[6]), std::stod(f[7]));
    } catch (const std::exception&) {
    }
  }
  std::vector<CellRow> rows;
  for (auto& [cell, rs] : by_cell) {
    if (rs.size() != models.size()) continue;
    for (CellRow& r : rs) {
      for (const auto& [dist, acc] : circle[{cell, r.model}]) {
        r.circle_dist.push_back(dist);
        r.circle_acc.push_back(acc);
      }
      if (r.status == "ok" && r.circle_acc.size() != 36) r.circle_acc.clear(), r.circle_dist.clear();
      rows.push_back(r);
    }
  }
  return rows;
}

void sort_rows(std::vector<CellRow>& rows, const std::vector<std::string>& models) {
  auto rank = [&](const std::string& m) { return std::find(models.begin(), models.end(), m) - models.begin(); };
  std::sort(rows.begin(), rows.end(), [&](const CellRow& a, const CellRow& b) {
    return a.cell != b.cell ? a.cell < b.cell : rank(a.model) < rank(b.model);
  });
}

std::vector<double> circle_azimuths() {
  std::vector<double> az;
  for (int a = 0; a < 36; ++a) az.push_back(10.0 * a);
  return az;
}

void progress(bool quiet, int done, int total, double elapsed, int ran) {
  if (quiet) return;
  const double rate = elapsed > 0 ? ran / elapsed : 0;
  const double eta = rate > 0 ? (total - done) / rate : 0;
  char line[160];
  std::snprintf(line, sizeof line, "sweep: %d/%d cells, %.2f cells/s, ETA %dm%02ds", done, total,
                rate, int(eta) / 60, int(eta) % 60);
  static bool tty = isatty(2);
  if (tty) {
    std::fprintf(stderr, "\r%s   %s", line, done == total ? "\n" : "");
  } else {
    // Plain lines at every 5 % step, for logs.
    static int last = -1;
    const int step = total ? done * 20 / total : 20;
    if (step != last || done == total) std::fprintf(stderr, "%s\n", line);
    last = step;
  }
  std::fflush(stderr);
}

}  // namespace

std::string config_hash(const nlohmann::json& config) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : config.dump()) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  return buf;
}

void prepare_sweep_dir(const SweepPlan& plan) {
  make_output_dir(plan.dir);
  const std::string meta = plan.dir + "/meta.json";
  if (std::filesystem::exists(meta)) {
    nlohmann::json j;
    try {
      std::ifstream f(meta);
      j = nlohmann::json::parse(f);
    } catch (const std::exception&) {
      throw std::runtime_error("holds an unreadable meta.json");
    }
    if (j.value("kind", "") != "viewgap-sweep") throw std::runtime_error("holds a meta.json that is not a viewgap sweep's");
    const std::string theirs = j.value("config_hash", ""), ours = config_hash(plan.config);
    if (theirs != ours)
      throw std::runtime_error("holds a different sweep (config hash " + theirs + ", this one " + ours + ")");
    if (!plan.resume) throw std::runtime_error("already holds this sweep; add --resume to continue it");
    return;
  }
  for (const auto& e : std::filesystem::directory_iterator(plan.dir))
    if (e.path().filename().string().rfind(".viewgap-probe", 0) != 0)
      throw std::runtime_error("is not empty and holds no viewgap sweep");
}

SweepOutcome run_sweep(const SweepPlan& plan) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = plan.dir;
  const std::vector<double> azimuths = circle_azimuths();
  SweepOutcome out;

  std::vector<CellRow> rows = plan.resume ? read_finished(dir, plan.models) : std::vector<CellRow>{};
  std::set<int> finished;
  for (const CellRow& r : rows) finished.insert(r.cell);
  out.resumed = int(finished.size());
  // Rewrite the kept rows (dropping any cut-short tail) before appending.
  sort_rows(rows, plan.models);
  std::string cells_text = kCellsHeader, circle_text = kCircleHeader;
  for (const CellRow& r : rows) {
    cells_text += cell_line(r);
    circle_text += circle_lines(r, azimuths);
  }
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);

  nlohmann::json meta = {{"schema_version", kSweepSchemaVersion},
                         {"kind", "viewgap-sweep"},
                         {"config", plan.config},
                         {"config_hash", config_hash(plan.config)},
                         {"models", plan.models},
                         {"cells_total", plan.cells.size()},
                         {"cells_done", out.resumed},
                         {"cells_failed", 0},
                         {"jobs", plan.jobs},
                         {"wall_time_s", nullptr},
                         {"meta", build_meta(1)}};
  write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");

  std::vector<const SweepCell*> todo;
  for (const SweepCell& c : plan.cells)
    if (!finished.count(c.id)) todo.push_back(&c);

  std::FILE* cells_f = std::fopen((dir + "/cells.csv").c_str(), "a");
  std::FILE* circle_f = std::fopen((dir + "/circle.csv").c_str(), "a");
  if (!cells_f || !circle_f) throw std::runtime_error("cannot append to " + dir + "/cells.csv");
  std::mutex mu;
  int done = out.resumed;
  progress(plan.quiet, done, int(plan.cells.size()), 0, 0);

  tbb::task_arena arena(plan.jobs);
  arena.execute([&] {
    tbb::parallel_for(size_t(0), todo.size(), [&](size_t k) {
      const SweepCell& c = *todo[k];
      omp_set_num_threads(1);  // one thread per cell: cells are the parallelism
      std::vector<CellRow> mine;
      Dataset data;
      std::string data_error;
      try {
        DataConfig dc = c.opt.data;
        dc.seed = c.seed;
        data = make_dataset(dc);
      } catch (const std::exception& e) {
        data_error = e.what();
      }
      for (const std::string& m : plan.models) {
        CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, m, "ok", "", 0, 0, 0, 0, 0, {}, {}};
        const auto tm = std::chrono::steady_clock::now();
        try {
          if (!data_error.empty()) throw std::runtime_error(data_error);
          const ModelResult res = train_and_evaluate(m, data, c.opt.train);
          r.familiar = res.familiar;
          r.heldout = res.heldout;
          r.drop = res.drop;
          r.n_params = res.n_params;
          r.circle_acc = res.circle_acc;
          for (double a : data.circle_az) r.circle_dist.push_back(azimuth_gap(data.train_az, {a}));
        } catch (const std::exception& e) {
          r.status = "failed";
          r.familiar = r.heldout = r.drop = NAN;
          r.reason = e.what();
          std::replace(r.reason.begin(), r.reason.end(), ',', ';');
          std::replace(r.reason.begin(), r.reason.end(), '\n', ' ');
        }
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - tm).count();
        mine.push_back(r);
      }
      // A cell lands whole: its circle rows, then its cell rows, flushed.
      std::lock_guard<std::mutex> lock(mu);
      for (const CellRow& r : mine) std::fputs(circle_lines(r, azimuths).c_str(), circle_f);
      std::fflush(circle_f);
      for (const CellRow& r : mine) {
        std::fputs(cell_line(r).c_str(), cells_f);
        out.failed += r.status != "ok";
      }
      std::fflush(cells_f);
      rows.insert(rows.end(), mine.begin(), mine.end());
      ++done;
      ++out.ran;
      progress(plan.quiet, done, int(plan.cells.size()),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), out.ran);
    }, tbb::simple_partitioner());
  });
  std::fclose(cells_f);
  std::fclose(circle_f);

  // Final tables: sorted, so --jobs 1 and --jobs N give the same bytes (timing aside).
  sort_rows(rows, plan.models);
  cells_text = kCellsHeader;
  circle_text = kCircleHeader;
  int failed_cells = 0;
  std::set<int> failed_ids;
  for (const CellRow& r : rows) {
    cells_text += cell_line(r);
    circle_text += circle_lines(r, azimuths);
    if (r.status != "ok") failed_ids.insert(r.cell);
  }
  failed_cells = int(failed_ids.size());
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);
  // Statistics from the tables as written, so a resumed sweep (which reads its
  // earlier cells back from them) gives the same bytes as an uninterrupted one.
  rows = read_finished(dir, plan.models);
  write_file_atomic(dir + "/summary.csv", summary_csv(rows, plan.models));
  write_file_atomic(dir + "/azimuth.csv", azimuth_csv(rows, plan.models));
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  meta["cells_done"] = done;
  meta["cells_failed"] = failed_cells;
  meta["wall_time_s"] = out.wall_s;
  write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");
  out.failed = failed_cells;
  return out;
}

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

std::string summary_csv(const std::vector<CellRow>& unsorted, const std::vector<std::string>& models) {
  const std::vector<CellRow> rows = sorted_copy(unsorted, models);
  std::string out =
      "grid,gap,true_gap_deg,kind,model,metric,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,"
      "prob_improvement,p_value\n";
  auto stat_cols = [](const Summary& s) {
    return std::to_string(s.n) + ',' + num(s.mean) + ',' + num(s.sd) + ',' + num(s.median) + ',' +
           num(s.iqm) + ',' + num(s.ci_lo) + ',' + num(s.ci_hi);
  };
  for (const auto& [grid, gap] : groups(rows)) {
    // Per model and seed, the ok rows of this group.
    std::map<std::string, std::map<uint64_t, const CellRow*>> ok;
    double true_gap = 0;
    for (const CellRow& r : rows)
      if (r.grid == grid && r.gap == gap) {
        true_gap = r.true_gap;
        if (r.status == "ok") ok[r.model][r.seed] = &r;
      }
    const std::string key = grid + ',' + num(gap, "%g") + ',' + num(true_gap, "%g") + ',';
    for (const std::string& m : models)
      for (const char* metric : {"familiar", "heldout", "drop"}) {
        std::vector<double> x;
        for (const auto& [seed, r] : ok[m])
          x.push_back(metric[0] == 'f' ? r->familiar : metric[0] == 'h' ? r->heldout : r->drop);
        out += key + "model," + m + ',' + metric + ',' + stat_cols(summarize(x)) + ",,,,,\n";
      }
    if (std::find(models.begin(), models.end(), "caps") == models.end()) continue;
    for (const std::string& other : models) {
      if (other == "caps") continue;
      for (const char* metric : {"heldout", "drop"}) {
        std::vector<double> a, b, d;
        for (const auto& [seed, rc] : ok["caps"]) {
          const auto it = ok[other].find(seed);
          if (it == ok[other].end()) continue;
          a.push_back(metric[0] == 'h' ? rc->heldout : rc->drop);
          b.push_back(metric[0] == 'h' ? it->second->heldout : it->second->drop);
          d.push_back(a.back() - b.back());
        }
        const Paired p = paired_compare(a, b);
        // For the drop, smaller is better: caps wins where d < 0.
        const bool lower_better = metric[0] == 'd';
        const int wins = lower_better ? p.losses : p.wins, losses = lower_better ? p.wins : p.losses;
        const double prob = p.n == 0 ? NAN : lower_better ? 1.0 - p.prob_improvement : p.prob_improvement;
        out += key + "paired,caps-" + other + ',' + metric + ',' + stat_cols(summarize(d)) + ',' +
               std::to_string(wins) + ',' + std::to_string(p.ties) + ',' + std::to_string(losses) +
               ',' + num(prob) + ',' + num(p.p_value, "%.6g") + '\n';
      }
    }
  }
  return out;
}

std::string azimuth_csv(const std::vector<CellRow>& unsorted, const std::vector<std::string>& models) {
  const std::vector<CellRow> rows = sorted_copy(unsorted, models);
  std::string out = "grid,gap,model,distance_deg,n,mean,ci_lo,ci_hi\n";
  for (const auto& [grid, gap] : groups(rows))
    for (const std::string& m : models) {
      // distance -> per-seed mean accuracy over the azimuths at that distance
      std::map<double, std::vector<double>> by_dist;
      for (const CellRow& r : rows) {
        if (r.grid != grid || r.gap != gap || r.model != m || r.status != "ok") continue;
        std::map<double, std::pair<double, int>> acc;
        for (size_t a = 0; a < r.circle_acc.size(); ++a) {
          const double dist = std::round(r.circle_dist[a] * 1e6) / 1e6;
          acc[dist].first += r.circle_acc[a];
          acc[dist].second += 1;
        }
        for (const auto& [dist, s] : acc) by_dist[dist].push_back(s.first / s.second);
      }
      for (const auto& [dist, x] : by_dist) {
        const Summary s = summarize(x);
        out += grid + ',' + num(gap, "%g") + ',' + m + ',' + num(dist, "%g") + ',' +
               std::to_string(s.n) + ',' + num(s.mean) + ',' + num(s.ci_lo) + ',' + num(s.ci_hi) + '\n';
      }
    }
  return out;
}

}  // namespace vg
