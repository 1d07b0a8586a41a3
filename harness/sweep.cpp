#include "harness/sweep.h"

#include <omp.h>
#include <tbb/concurrent_queue.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <deque>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "models/numbers.h"
#include "harness/report.h"
#include "harness/stats.h"

namespace vg {

namespace {

const char* kCircleHeader = "cell,seed,gap,grid,model,azimuth_deg,distance_deg,accuracy\n";

std::string num(double v, const char* f = "%.6f") {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
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
// short), and the header. A missing file has no lines.
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

// A number as written by this file's num(); `nan_ok` admits "nan".
bool read_num(const std::string& s, double lo, double hi, double* v, bool nan_ok = false) {
  if (nan_ok && s == "nan") {
    *v = NAN;
    return true;
  }
  const ParsedNumber<double> x = parse_real_number(s);
  if (!x || x.value < lo || x.value > hi) return false;
  *v = x.value;
  return true;
}

// One table defines cells.csv: its header (the names, in order), its writer
// and its resume reader. `write` renders one field of a row; `read` checks a
// field's text against the plan's cell and stores it in the row, false if it
// is damaged. Fields are read in order, so a field may rely on earlier ones
// (the accuracies are "nan" exactly when the status says the model failed).
struct CellField {
  const char* name;
  std::string (*write)(const CellRow&);
  bool (*read)(const std::string& text, const SweepCell& cell, CellRow& r);
};

const CellField kCellFields[] = {
    {"cell", [](const CellRow& r) { return std::to_string(r.cell); },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.cell = c.id; return t == std::to_string(c.id); }},
    {"seed", [](const CellRow& r) { return std::to_string(r.seed); },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.seed = c.seed; return t == std::to_string(c.seed); }},
    {"gap", [](const CellRow& r) { return num(r.gap, "%g"); },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.gap = c.gap; return t == num(c.gap, "%g"); }},
    {"true_gap_deg", [](const CellRow& r) { return num(r.true_gap, "%g"); },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.true_gap = c.true_gap; return t == num(c.true_gap, "%g"); }},
    {"grid", [](const CellRow& r) { return r.grid; },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.grid = t; return t == c.grid; }},
    {"model", [](const CellRow& r) { return r.model; },  // checked against the plan's models by the reader
     [](const std::string& t, const SweepCell&, CellRow& r) { r.model = t; return !t.empty(); }},
    {"status", [](const CellRow& r) { return r.status; },
     [](const std::string& t, const SweepCell&, CellRow& r) { r.status = t; return t == "ok" || t == "failed"; }},
    {"familiar", [](const CellRow& r) { return num(r.familiar); },
     [](const std::string& t, const SweepCell&, CellRow& r) { return read_num(t, 0, 1, &r.familiar, r.status != "ok"); }},
    {"heldout", [](const CellRow& r) { return num(r.heldout); },
     [](const std::string& t, const SweepCell&, CellRow& r) { return read_num(t, 0, 1, &r.heldout, r.status != "ok"); }},
    {"drop", [](const CellRow& r) { return num(r.drop); },
     [](const std::string& t, const SweepCell&, CellRow& r) { return read_num(t, -1, 1, &r.drop, r.status != "ok"); }},
    {"n_params", [](const CellRow& r) { return std::to_string(r.n_params); },
     [](const std::string& t, const SweepCell&, CellRow& r) {
       const ParsedNumber<long long> n = parse_whole(t);
       r.n_params = n && n.value >= 0 ? size_t(n.value) : 0;
       return n && n.value >= 0;
     }},
    {"steps", [](const CellRow& r) { return std::to_string(r.steps); },
     [](const std::string& t, const SweepCell&, CellRow& r) {
       const ParsedNumber<long long> n = parse_whole(t);
       r.steps = n && n.value >= 0 ? long(n.value) : 0;
       return n && n.value >= 0;
     }},
    {"validation", [](const CellRow& r) { return num(r.validation); },
     [](const std::string& t, const SweepCell&, CellRow& r) { return read_num(t, 0, 1, &r.validation, true); }},
    {"seconds", [](const CellRow& r) { return num(r.seconds, "%.3f"); },
     [](const std::string& t, const SweepCell&, CellRow& r) { return read_num(t, 0, 1e9, &r.seconds); }},
    {"reason", [](const CellRow& r) { return r.reason; },  // the writer strips commas and newlines
     [](const std::string& t, const SweepCell&, CellRow& r) { r.reason = t; return (r.status == "ok") == t.empty(); }},
};
constexpr size_t kNCellFields = std::size(kCellFields);

std::string cells_header() {
  std::string s;
  for (const CellField& f : kCellFields) {
    if (!s.empty()) s += ',';
    s += f.name;
  }
  s += '\n';
  return s;
}

std::string cell_line(const CellRow& r) {
  std::string s;
  for (size_t i = 0; i < kNCellFields; ++i) {
    if (i) s += ',';
    s += kCellFields[i].write(r);
  }
  s += '\n';
  return s;
}

// The circle every cell of a plan reports (the dataset's definition).
std::vector<double> plan_circle(const SweepPlan& plan) {
  return circle_azimuths(plan.cells.empty() ? DataConfig{} : plan.cells.front().opt.data);
}

// Rows already in DIR that make up whole cells of this plan. A cell is finished
// only if every per-cell file holds all of its rows, each complete and agreeing
// with the plan (cell id, seed, gap, grid, model; the circle's azimuths and
// distances): one cells.csv row per model and, for an ok model, exactly one
// circle.csv row per circle azimuth (a failed model has none). Anything less (a
// torn or deleted line, a cut or missing file, a hand-edited row, a duplicate)
// and the cell runs again.
std::vector<CellRow> read_finished(const std::string& dir, const SweepPlan& plan) {
  const std::vector<std::string>& models = plan.models;
  const std::vector<double> azimuths = plan_circle(plan);
  const size_t n_az = azimuths.size();
  auto plan_cell = [&](const std::string& id_text) -> const SweepCell* {
    const ParsedNumber<long long> id = parse_whole(id_text);
    if (!id || id.value < 0 || id.value >= (long long)plan.cells.size()) return nullptr;
    return &plan.cells[size_t(id.value)];
  };
  auto model_of = [&](const std::string& m) { return std::find(models.begin(), models.end(), m) != models.end(); };

  std::set<int> bad;                                   // cells seen damaged
  std::map<std::pair<int, std::string>, CellRow> by;   // (cell, model) -> row
  for (const std::string& line : complete_lines(dir + "/cells.csv")) {
    const auto f = fields(line);
    const SweepCell* c = f.size() == kNCellFields ? plan_cell(f[0]) : nullptr;
    if (c == nullptr) continue;  // not a row of this plan's
    CellRow r;
    bool good = true;
    for (size_t i = 0; i < kNCellFields && good; ++i) good = kCellFields[i].read(f[i], *c, r);
    good = good && model_of(r.model);
    if (!good || by.count({r.cell, r.model})) {
      bad.insert(c->id);
      continue;
    }
    by[{r.cell, r.model}] = r;
  }
  // (cell, model) -> per circle azimuth: the row's distance and accuracy.
  std::map<std::pair<int, std::string>, std::vector<std::pair<int, std::pair<double, double>>>> circle;
  for (const std::string& line : complete_lines(dir + "/circle.csv")) {
    const auto f = fields(line);
    const SweepCell* c = f.size() == 8 ? plan_cell(f[0]) : nullptr;
    if (c == nullptr) continue;
    size_t a = 0;
    while (a < n_az && num(azimuths[a], "%g") != f[5]) ++a;
    double acc = 0;
    const bool good = a < n_az && f[1] == std::to_string(c->seed) && f[2] == num(c->gap, "%g") &&
                      f[3] == c->grid && model_of(f[4]) &&
                      f[6] == num(azimuth_gap(training_azimuths(c->opt.data), {azimuths[a]}), "%g") &&
                      read_num(f[7], 0, 1, &acc);
    if (!good) {
      bad.insert(c->id);
      continue;
    }
    double dist = 0;
    read_num(f[6], 0, 180, &dist);
    circle[{c->id, f[4]}].push_back({int(a), {dist, acc}});
  }
  std::vector<CellRow> rows;
  for (const SweepCell& c : plan.cells) {
    if (bad.count(c.id)) continue;
    std::vector<CellRow> cell_rows;
    for (const std::string& m : models) {
      const auto it = by.find({c.id, m});
      if (it == by.end()) break;
      CellRow r = it->second;
      const auto& circ = circle[{c.id, m}];
      if (r.status == "ok") {
        if (circ.size() != n_az) break;
        r.circle_acc.assign(n_az, NAN);
        r.circle_dist.assign(n_az, NAN);
        for (const auto& [a, v] : circ) {
          r.circle_dist[size_t(a)] = v.first;
          r.circle_acc[size_t(a)] = v.second;
        }
        if (std::any_of(r.circle_acc.begin(), r.circle_acc.end(), [](double x) { return std::isnan(x); })) break;
      } else if (!circ.empty()) {
        break;
      }
      cell_rows.push_back(r);
    }
    if (cell_rows.size() == models.size()) rows.insert(rows.end(), cell_rows.begin(), cell_rows.end());
  }
  return rows;
}

void sort_rows(std::vector<CellRow>& rows, const std::vector<std::string>& models) {
  auto rank = [&](const std::string& m) { return std::find(models.begin(), models.end(), m) - models.begin(); };
  std::sort(rows.begin(), rows.end(), [&](const CellRow& a, const CellRow& b) {
    return a.cell != b.cell ? a.cell < b.cell : rank(a.model) < rank(b.model);
  });
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
  for (const char* f : {kSweepLockFile, "meta.json", "cells.csv", "circle.csv", "summary.csv", "azimuth.csv"})
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
  for (const char* f : {"meta.json", "cells.csv", "circle.csv", "summary.csv", "azimuth.csv"}) {
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
    std::ifstream f(meta);
    j = nlohmann::json::parse(f);
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
  if (theirs != ours) {
    const std::string diff = config_difference(j.contains("config") ? j["config"] : nlohmann::json(), plan.config);
    throw std::runtime_error("holds a different sweep: " + (diff.empty() ? std::string("another configuration") : diff) +
                             " (config hash " + theirs + ", this one " + ours + ")");
  }
  if (!plan.resume) throw std::runtime_error("already holds this sweep; add --resume to continue it");
  return lock;
}

namespace {
// While alive, an interrupt reports this sweep's progress.
struct InterruptProgress {
  InterruptProgress(const std::atomic<int>* done, int total) { set_interrupt_progress(done, total); }
  ~InterruptProgress() { set_interrupt_progress(nullptr, 0); }
};

void remove_if_present(const std::string& path) {
  WriteGuard guard;
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot remove '" + path + "': " + std::strerror(errno));
}
}  // namespace

namespace {
// meta.json of a sweep of `total` cells, before any has run.
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

int write_final_tables(const SweepPlan& plan, std::vector<CellRow>& rows, int total, bool statistics,
                       nlohmann::json& meta, std::chrono::steady_clock::time_point t0);
}  // namespace

namespace {
// One cell: the same run_experiment as `viewgap run`, with a failing model
// recorded (and the others run) instead of thrown.
std::vector<CellRow> run_cell(const SweepPlan& plan, const SweepCell& c) {
  omp_set_num_threads(1);  // one thread per cell: cells are the parallelism
  RunOptions opt = c.opt;
  opt.keep_going = true;
  RunResult res;
  std::string data_error;
  try {
    res = run_experiment(opt);
  } catch (const std::exception& e) {
    data_error = *e.what() ? e.what() : "unknown error";
  }
  std::vector<CellRow> mine;
  for (size_t k = 0; k < plan.models.size(); ++k) {
    CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, plan.models[k], "ok", "", 0, 0, 0, 0, 0, {}, {}};
    const ModelResult* m = data_error.empty() ? &res.models[k] : nullptr;
    if (m != nullptr && m->error.empty()) {
      r.familiar = m->familiar;
      r.heldout = m->heldout;
      r.drop = m->drop;
      r.n_params = m->n_params;
      r.steps = m->steps;
      r.validation = m->validation;
      r.circle_acc = m->circle_acc;
      for (double a : res.data.circle_az) r.circle_dist.push_back(azimuth_gap(res.data.train_az, {a}));
    } else {
      r.status = "failed";
      r.familiar = r.heldout = r.drop = NAN;
      r.reason = m != nullptr ? m->error : data_error;
      std::replace(r.reason.begin(), r.reason.end(), ',', ';');
      std::replace(r.reason.begin(), r.reason.end(), '\n', ' ');
      std::replace(r.reason.begin(), r.reason.end(), '\r', ' ');
    }
    if (m != nullptr) r.seconds = m->train_s + m->eval_s + m->circle_s;
    mine.push_back(r);
  }
  return mine;
}

// A cell's rows as a worker rank sends them to rank 0: every number exactly
// (JSON doubles round-trip; NaN travels as null), so rank 0 writes the bytes the
// worker would have. The cell's seed, gap and grid are rank 0's own plan's.
nlohmann::json rows_json(const std::vector<CellRow>& rows) {
  auto real = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json out = nlohmann::json::array();
  for (const CellRow& r : rows) {
    nlohmann::json acc = nlohmann::json::array(), dist = nlohmann::json::array();
    for (double v : r.circle_acc) acc.push_back(real(v));
    for (double v : r.circle_dist) dist.push_back(real(v));
    out.push_back({{"cell", r.cell}, {"model", r.model}, {"status", r.status}, {"reason", r.reason},
                   {"familiar", real(r.familiar)}, {"heldout", real(r.heldout)}, {"drop", real(r.drop)},
                   {"seconds", r.seconds}, {"n_params", r.n_params}, {"steps", r.steps},
                   {"validation", real(r.validation)}, {"circle_acc", acc}, {"circle_dist", dist}});
  }
  return out;
}

std::vector<CellRow> rows_from_json(const nlohmann::json& j, const SweepPlan& plan) {
  auto real = [](const nlohmann::json& v) { return v.is_null() ? double(NAN) : v.get<double>(); };
  std::vector<CellRow> rows;
  for (const nlohmann::json& x : j) {
    const int id = x.at("cell").get<int>();
    if (id < 0 || id >= int(plan.cells.size())) throw std::runtime_error("a worker sent cell " + std::to_string(id) + ", not in the plan");
    const SweepCell& c = plan.cells[size_t(id)];
    CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, x.at("model").get<std::string>(), x.at("status").get<std::string>(),
              x.at("reason").get<std::string>(), real(x.at("familiar")), real(x.at("heldout")), real(x.at("drop")),
              x.at("seconds").get<double>(), x.at("n_params").get<size_t>(), {}, {}};
    r.steps = x.at("steps").get<long>();
    r.validation = real(x.at("validation"));
    for (const auto& v : x.at("circle_acc")) r.circle_acc.push_back(real(v));
    for (const auto& v : x.at("circle_dist")) r.circle_dist.push_back(real(v));
    rows.push_back(std::move(r));
  }
  return rows;
}

// What the ranks of an MPI sweep say (payloads are text). A worker says HELLO
// with its number of slots (--jobs) and sends each finished cell as RESULT;
// rank 0 answers every HELLO slot and every RESULT with CELL: the id of the
// next cell for that slot, or -1 when there is none (the slot ends). Before any
// of this, rank 0 sends every worker GO: "0" to start, or the exit code of a
// failure that ends the sweep before it starts.
enum Tag : int { kGo = 1, kHello = 2, kResult = 3, kCell = 4 };

// Hands out the cells still to run, one at a time, to local slots and worker
// ranks alike: cells vary in duration, so a slot takes the next as it frees.
class Dispenser {
 public:
  explicit Dispenser(std::vector<const SweepCell*> todo) : todo_(std::move(todo)) {}
  const SweepCell* take() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_ || next_ == todo_.size() ? nullptr : todo_[next_++];
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }

 private:
  std::mutex mu_;
  std::vector<const SweepCell*> todo_;
  size_t next_ = 0;
  bool stopped_ = false;
};

// `jobs` slots on TBB, each running the cells `take` gives until it gives none,
// handing each cell's rows to `land`.
void run_slots(int jobs, const std::function<const SweepCell*()>& take,
               const std::function<void(std::vector<CellRow>)>& land, const std::function<std::vector<CellRow>(const SweepCell&)>& run) {
  // Without this, TBB caps its workers at the core count and warns on stderr.
  tbb::global_control workers(tbb::global_control::max_allowed_parallelism, size_t(std::max(jobs, 1)));
  tbb::task_arena arena(jobs);
  arena.execute([&] {
    tbb::parallel_for(0, jobs, [&](int) {
      while (const SweepCell* c = take()) land(run(*c));
    }, tbb::simple_partitioner());
  });
}

// Polling MPI costs the cells on that core (each poll runs Open MPI's progress
// engine: at every 200 us, cells ran 25 % slower), and a message waits up to
// one period. So rank 0 polls every 1/200 of the mean cell time seen so far
// (2.7 ms for the default cell of 0.55 s: the wait stays ~0.25 % of a cell),
// within these bounds; a worker polls only while a reply is due, at the floor.
constexpr auto kPollFloor = std::chrono::microseconds(200);
constexpr auto kPollCeiling = std::chrono::milliseconds(20);
constexpr double kPollsPerCell = 200;
}  // namespace

SweepOutcome run_sweep(const SweepPlan& plan, Cluster* cluster) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = plan.dir;
  const std::vector<double> azimuths = plan_circle(plan);
  SweepOutcome out;

  std::vector<CellRow> rows = plan.resume ? read_finished(dir, plan) : std::vector<CellRow>{};
  std::erase_if(rows, [&](const CellRow& r) { return !plan.in_shard(plan.cells[size_t(r.cell)]); });
  std::set<int> finished;
  for (const CellRow& r : rows) finished.insert(r.cell);
  out.resumed = int(finished.size());
  std::vector<const SweepCell*> todo;
  int total = 0;
  for (const SweepCell& c : plan.cells) {
    if (!plan.in_shard(c)) continue;
    ++total;
    if (!finished.count(c.id)) todo.push_back(&c);
  }

  // meta.json first: from its first table on, the directory is this sweep's.
  nlohmann::json meta = sweep_meta(plan, total);
  meta["cells_done"] = out.resumed;
  write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");
  // The statistics exist only for a complete sweep.
  if (!todo.empty()) {
    remove_if_present(dir + "/summary.csv");
    remove_if_present(dir + "/azimuth.csv");
  }
  // Rewrite the kept rows (dropping anything of unfinished cells) before appending.
  sort_rows(rows, plan.models);
  std::string cells_text = cells_header(), circle_text = kCircleHeader;
  for (const CellRow& r : rows) {
    cells_text += cell_line(r);
    circle_text += circle_lines(r, azimuths);
  }
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);

  AppendFile cells_f(dir + "/cells.csv"), circle_f(dir + "/circle.csv");
  std::mutex mu;
  std::atomic<int> done{out.resumed};
  const InterruptProgress interrupt_note(&done, total);
  std::string write_error;
  double cell_seconds = 0;  // of the cells landed (the pace of MPI polling)
  int cells_landed = 0;
  progress(plan.quiet, done, total, 0, 0);
  Dispenser cells(todo);

  // A cell lands whole: its circle rows, then its cell rows (a cell counts only
  // with both), with interrupts held off until both are written. Local slots
  // and (on rank 0 of an MPI job) the workers' cells land here alike.
  auto land = [&](std::vector<CellRow> mine) {
    std::string circle_add, cells_add;
    for (const CellRow& r : mine) {
      circle_add += circle_lines(r, azimuths);
      cells_add += cell_line(r);
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!write_error.empty()) return;
    try {
      WriteGuard guard;
      circle_f.append(circle_add);
      cells_f.append(cells_add);
      for (const CellRow& r : mine) {
        out.failed += r.status != "ok";
        cell_seconds += r.seconds;
      }
      ++cells_landed;
      rows.insert(rows.end(), mine.begin(), mine.end());
      ++done;
    } catch (const std::exception& e) {
      write_error = e.what();  // the first failed write stops the sweep
      cells.stop();
      return;
    }
    ++out.ran;
    progress(plan.quiet, done, total,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), out.ran);
  };
  auto take = [&] { return cells.take(); };
  auto run = [&](const SweepCell& c) { return run_cell(plan, c); };

  if (cluster == nullptr || cluster->size() == 1) {
    run_slots(plan.jobs, take, land, run);
  } else {
    // Rank 0: its own slots run on a thread of their own, while this thread
    // (the one MPI allows) serves the workers: a cell for every free slot, and
    // their finished cells landed as they arrive.
    for (int r = 1; r < cluster->size(); ++r) cluster->send(r, kGo, "0");
    std::thread local([&] { run_slots(plan.jobs, take, land, run); });
    std::vector<int> slots(size_t(cluster->size()), -1), ended(size_t(cluster->size()), 0);
    double wait_s = 0;
    int remote_cells = 0;
    auto all_ended = [&] {
      for (int r = 1; r < cluster->size(); ++r)
        if (slots[size_t(r)] < 0 || ended[size_t(r)] < slots[size_t(r)]) return false;
      return true;
    };
    std::string msg;
    auto poll_period = [&] {
      std::lock_guard<std::mutex> lock(mu);
      const std::chrono::duration<double> d(cells_landed ? cell_seconds / cells_landed / kPollsPerCell : 0.001);
      return std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(d),
                        std::chrono::microseconds(kPollFloor), std::chrono::microseconds(kPollCeiling));
    };
    try {
      while (!all_ended()) {
        int src = 0, tag = 0;
        if (!cluster->poll(&src, &tag, &msg)) {
          std::this_thread::sleep_for(poll_period());
          continue;
        }
        int asking = 0;  // slots of `src` asking for a cell
        if (tag == kHello) {
          slots[size_t(src)] = std::stoi(msg);
          asking = slots[size_t(src)];
        } else if (tag == kResult) {
          const nlohmann::json j = nlohmann::json::parse(msg);
          wait_s += j.at("wait_s").get<double>();
          ++remote_cells;
          land(rows_from_json(j.at("rows"), plan));
          asking = 1;
        } else {
          throw std::runtime_error("rank " + std::to_string(src) + " sent an unknown message (tag " + std::to_string(tag) + ")");
        }
        for (int k = 0; k < asking; ++k) {
          const SweepCell* c = take();
          ended[size_t(src)] += c == nullptr;
          cluster->send(src, kCell, std::to_string(c == nullptr ? -1 : c->id));
        }
      }
    } catch (const std::exception& e) {
      if (!plan.quiet && isatty(2)) std::fputc('\n', stderr);
      std::fprintf(stderr, "viewgap sweep: error: %s\n", e.what());
      cluster->abort(1);
    }
    local.join();
    meta["mpi"] = {{"ranks", cluster->size()},
                   {"worker_cells", remote_cells},
                   {"worker_wait_s_per_cell", remote_cells ? wait_s / remote_cells : 0.0}};
  }
  if (!write_error.empty()) {
    if (!plan.quiet && isatty(2)) std::fputc('\n', stderr);  // end the progress line
    if (cluster != nullptr && cluster->size() > 1) {
      std::fprintf(stderr, "viewgap sweep: error: %s\n", write_error.c_str());
      cluster->abort(1);
    }
    throw std::runtime_error(write_error);
  }

  out.failed = write_final_tables(plan, rows, total, plan.shards == 1, meta, t0);
  out.wall_s = meta["wall_time_s"].get<double>();
  return out;
}

void dismiss_workers(Cluster& cluster, int code) {
  for (int r = 1; r < cluster.size(); ++r) cluster.send(r, kGo, std::to_string(code));
}

bool sit_out_sweep(Cluster& cluster) {
  std::string msg;
  int src = 0, tag = 0;
  while (!cluster.poll(&src, &tag, &msg)) std::this_thread::sleep_for(kPollFloor);
  if (tag != kGo || msg != "0") return false;
  cluster.send(0, kHello, "0");  // no slots: rank 0 hands this rank nothing
  return true;
}

int serve_sweep(const SweepPlan& plan, Cluster& cluster) {
  // An interrupt ends a worker without a word: it writes nothing, and rank 0
  // reports how far the sweep got.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  std::string msg;
  int src = 0, tag = 0;
  while (!cluster.poll(&src, &tag, &msg)) std::this_thread::sleep_for(kPollFloor);
  // Dismissed: rank 0 has said why and exits with the code; a worker's own
  // non-zero exit would make the launcher kill rank 0 mid-sentence.
  if (tag != kGo || msg != "0") return 0;

  // The slots run on TBB on a thread of their own; this thread talks to rank 0.
  tbb::concurrent_bounded_queue<int> inbox;                 // cell ids (-1: the slot ends)
  tbb::concurrent_queue<std::string> outbox;  // finished cells
  std::mutex out_mu;                           // a finished cell wakes this thread
  std::condition_variable out_cv;
  const int jobs = plan.jobs;
  std::thread slots([&] {
    auto take = [&]() -> const SweepCell* {
      int id = -1;
      inbox.pop(id);
      return id < 0 ? nullptr : &plan.cells[size_t(id)];
    };
    auto land = [&](std::vector<CellRow> rows) {
      {
        std::lock_guard<std::mutex> lock(out_mu);
        outbox.push(rows_json(rows).dump());
      }
      out_cv.notify_one();
    };
    run_slots(jobs, take, land, [&](const SweepCell& c) { return run_cell(plan, c); });
  });
  cluster.send(0, kHello, std::to_string(jobs));
  int ended = 0;
  // Time from asking for a cell to getting it, per ask (the dispatch cost).
  std::deque<std::chrono::steady_clock::time_point> asked(size_t(jobs), std::chrono::steady_clock::now());
  double last_wait = 0;
  int awaiting = jobs;  // cells asked for and not yet answered
  try {
    while (ended < jobs) {
      std::string result;
      while (outbox.try_pop(result)) {
        cluster.send(0, kResult, "{\"wait_s\":" + std::to_string(last_wait) + ",\"rows\":" + result + "}");
        asked.push_back(std::chrono::steady_clock::now());
        ++awaiting;
      }
      if (cluster.poll(&src, &tag, &msg)) {
        if (tag == kGo) {  // rank 0 failed (and said so): end after the cells in hand
          for (int k = 0; k < jobs; ++k) inbox.push(-1);
          slots.join();
          return 0;
        }
        if (tag != kCell) throw std::runtime_error("rank 0 sent an unknown message (tag " + std::to_string(tag) + ")");
        const int id = std::stoi(msg);
        if (id >= int(plan.cells.size())) throw std::runtime_error("rank 0 handed out cell " + msg + ", not in this rank's plan");
        last_wait = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked.front()).count();
        asked.pop_front();
        --awaiting;
        ended += id < 0;
        inbox.push(id);
      } else if (awaiting > 0) {
        std::this_thread::sleep_for(kPollFloor);  // a reply is due within rank 0's period
      } else {
        // Every slot is busy: sleep until one finishes (MPI is not polled
        // meanwhile; a dismissal waits for the timeout).
        std::unique_lock<std::mutex> lock(out_mu);
        out_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !outbox.empty(); });
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "viewgap sweep (rank %d): error: %s\n", cluster.rank(), e.what());
    cluster.abort(1);
  }
  slots.join();
  // The last results of ended slots are already sent: a slot ends only after
  // its last cell's result, which was sent before rank 0 answered it with -1.
  return 0;
}

namespace {
// The tables of `rows` (every row of `total` cells) into plan.dir: sorted, so
// --jobs 1 and --jobs N (and any sharding, merged) give the same bytes (timing
// aside), written as one step (an interrupt waits for all of them); with
// `statistics`, summary.csv and azimuth.csv too; then meta.json. Returns the
// number of failed cells.
int write_final_tables(const SweepPlan& plan, std::vector<CellRow>& rows, int total, bool statistics,
                       nlohmann::json& meta, std::chrono::steady_clock::time_point t0) {
  const std::string& dir = plan.dir;
  const std::vector<double> azimuths = plan_circle(plan);
  WriteGuard guard;
  sort_rows(rows, plan.models);
  std::string cells_text = cells_header(), circle_text = kCircleHeader;
  std::set<int> failed_ids, done_ids;
  for (const CellRow& r : rows) {
    cells_text += cell_line(r);
    circle_text += circle_lines(r, azimuths);
    done_ids.insert(r.cell);
    if (r.status != "ok") failed_ids.insert(r.cell);
  }
  write_file_atomic(dir + "/cells.csv", cells_text);
  write_file_atomic(dir + "/circle.csv", circle_text);
  // Statistics from the tables as written, so a resumed sweep (which reads its
  // earlier cells back from them) gives the same bytes as an uninterrupted one.
  rows = read_finished(dir, plan);
  if (int(rows.size()) != total * int(plan.models.size()))
    throw std::runtime_error("cannot read back '" + dir + "/cells.csv' and '" + dir + "/circle.csv' whole (changed by another program?)");
  if (statistics) {
    write_file_atomic(dir + "/summary.csv", summary_csv(rows, plan.models, plan.reference));
    write_file_atomic(dir + "/azimuth.csv", azimuth_csv(rows, plan.models));
  }
  meta["cells_done"] = int(done_ids.size());
  meta["cells_failed"] = int(failed_ids.size());
  meta["wall_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_file_atomic(dir + "/meta.json", meta.dump(2) + "\n");
  return int(failed_ids.size());
}
}  // namespace

SweepOutcome merge_shards(const SweepPlan& plan, const std::vector<std::string>& dirs) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<CellRow> rows;
  std::set<int> shards_seen;
  int n_shards = 0;
  for (const std::string& d : dirs) {
    nlohmann::json meta;
    try {
      std::ifstream f(d + "/meta.json");
      if (!f) throw std::runtime_error("no meta.json");
      meta = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
      throw std::runtime_error("'" + d + "': not a sweep directory (" + e.what() + ")");
    }
    if (meta.value("kind", "") != "viewgap-sweep" || meta.value("schema_version", 0) != kSweepSchemaVersion)
      throw std::runtime_error("'" + d + "': not a sweep of this viewgap's format");
    nlohmann::json cfg = meta["config"];
    const std::string shard = cfg.value("shard", "");
    cfg.erase("shard");
    if (cfg != plan.config) throw std::runtime_error("'" + d + "': a shard of another sweep configuration");
    int k = -1, n = 0;
    if (std::sscanf(shard.c_str(), "%d/%d", &k, &n) != 2 || k < 0 || n < 1 || k >= n)
      throw std::runtime_error("'" + d + "': not a shard (made without --shard K/N)");
    if (n_shards != 0 && n != n_shards)
      throw std::runtime_error("'" + d + "': shard " + shard + " of another split than " + std::to_string(n_shards));
    n_shards = n;
    if (!shards_seen.insert(k).second) throw std::runtime_error("'" + d + "': shard " + shard + " given twice");
    SweepPlan mine = plan;
    mine.shard = k;
    mine.shards = n;
    std::vector<CellRow> got = read_finished(d, mine);
    std::erase_if(got, [&](const CellRow& r) { return !mine.in_shard(plan.cells[size_t(r.cell)]); });
    int expect = 0;
    for (const SweepCell& c : plan.cells) expect += mine.in_shard(c);
    const int have = int(got.size() / std::max<size_t>(1, plan.models.size()));
    if (have != expect)
      throw std::runtime_error("'" + d + "': shard " + shard + " has " + std::to_string(have) + " of its " +
                               std::to_string(expect) + " cells finished (rerun it with --resume)");
    rows.insert(rows.end(), got.begin(), got.end());
  }
  if (int(shards_seen.size()) != n_shards)
    throw std::runtime_error("shards missing: " + std::to_string(shards_seen.size()) + " of " +
                             std::to_string(n_shards) + " given");
  nlohmann::json meta = sweep_meta(plan, int(plan.cells.size()));
  meta["merged_from"] = dirs;
  SweepOutcome out;
  out.resumed = int(plan.cells.size());
  out.failed = write_final_tables(plan, rows, int(plan.cells.size()), true, meta, t0);
  out.wall_s = meta["wall_time_s"].get<double>();
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

std::string summary_csv(const std::vector<CellRow>& unsorted, const std::vector<std::string>& models,
                        const std::string& reference) {
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
    if (std::find(models.begin(), models.end(), reference) == models.end()) continue;
    for (const std::string& other : models) {
      if (other == reference) continue;
      for (const char* metric : {"heldout", "drop"}) {
        std::vector<double> a, b, d;
        for (const auto& [seed, rc] : ok[reference]) {
          const auto it = ok[other].find(seed);
          if (it == ok[other].end()) continue;
          a.push_back(metric[0] == 'h' ? rc->heldout : rc->drop);
          b.push_back(metric[0] == 'h' ? it->second->heldout : it->second->drop);
          d.push_back(a.back() - b.back());
        }
        const Paired p = paired_compare(a, b);
        // For the drop, smaller is better: the reference wins where d < 0.
        const bool lower_better = metric[0] == 'd';
        const int wins = lower_better ? p.losses : p.wins, losses = lower_better ? p.wins : p.losses;
        const double prob = p.n == 0 ? NAN : lower_better ? 1.0 - p.prob_improvement : p.prob_improvement;
        out += key + "paired," + reference + '-' + other + ',' + metric + ',' + stat_cols(summarize(d)) + ',' +
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
