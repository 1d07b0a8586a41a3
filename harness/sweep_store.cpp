#include "harness/sweep_store.h"

#include "core/file_kind.h"
#include "harness/sweep_resume.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "harness/frontier.h"
#include "harness/report.h"
#include "harness/sweep_summary.h"
#include "models/numbers.h"

namespace vg {

std::string num(double v, const char* f) {
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string circle_lines(const CellRow& r, const std::vector<double>& values) {
  std::string s;
  for (size_t a = 0; a < r.axis_acc.size(); ++a)
    s += std::to_string(r.cell) + ',' + std::to_string(r.seed) + ',' + num(r.gap, "%g") + ',' + r.grid + ',' +
         r.model + ',' + r.axis + ',' + r.unit + ',' + num(values[a], "%g") + ',' + num(r.axis_dist[a], "%g") + ',' +
         num(r.axis_acc[a]) + '\n';
  return s;
}

std::string trajectory_lines(const CellRow& r) {
  std::string s;
  for (const TrajectoryPoint& t : r.trajectory)
    s += std::to_string(r.cell) + ',' + std::to_string(r.seed) + ',' + num(r.gap, "%g") + ',' + r.grid + ',' +
         r.model + ',' + std::to_string(t.epoch) + ',' + std::to_string(t.step) + ',' + num(t.validation_error) + ',' +
         num(t.familiar_error) + ',' + num(t.heldout_error) + '\n';
  return s;
}

std::string provenance_line(const CellRow& r) {
  const Provenance& p = r.provenance;
  return std::to_string(r.cell) + ',' + std::to_string(r.seed) + ',' + p.commit + ',' + p.dirty + ',' + p.compiler +
         ',' + p.cpu + ',' + p.isa + ',' + p.host + '\n';
}

bool has_provenance(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir + "/provenance.csv", ec) || !std::filesystem::exists(dir + "/cells.csv", ec);
}

bool has_trajectory(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir + "/trajectory.csv", ec) || !std::filesystem::exists(dir + "/cells.csv", ec);
}

bool read_input_file(const std::string& path, std::string* text) {
  // O_NONBLOCK: a FIFO opened for reading would wait for a writer; it is
  // refused below, before anything is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw std::runtime_error("'" + path + "': cannot open: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw std::runtime_error("'" + path + "': cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error("'" + path + "' is " + non_regular_kind(st.st_mode) + ", not a regular file");
  text->clear();
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw std::runtime_error("'" + path + "': cannot read: " + std::strerror(errno));
    if (r == 0) return true;
    text->append(buf, size_t(r));
  }
}

namespace {

// Lines of a file, dropping a last line that lacks its newline (a write cut
// short), and the header. A missing file has no lines.
std::vector<std::string> complete_lines(const std::string& path) {
  std::string text;
  read_input_file(path, &text);
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
    {"axis", [](const CellRow& r) { return r.axis; },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.axis = c.axis; return t == c.axis; }},
    {"unit", [](const CellRow& r) { return r.unit; },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.unit = c.unit; return t == c.unit; }},
    {"gap", [](const CellRow& r) { return num(r.gap, "%g"); },
     [](const std::string& t, const SweepCell& c, CellRow& r) { r.gap = c.gap; return t == num(c.gap, "%g"); }},
    {"true_gap", [](const CellRow& r) { return num(r.true_gap, "%g"); },
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

}  // namespace

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

// Rows already in DIR that make up whole cells of this plan. A cell is finished
// only if every per-cell file holds all of its rows, each complete and agreeing
// with the plan (cell id, seed, axis, gap, grid, model; the axis sweep's
// positions and distances): one cells.csv row per model and, where the sweep
// keeps one (has_provenance), one provenance.csv row; for an ok model,
// exactly one circle.csv row per position and (where the sweep keeps one:
// has_trajectory) trajectory.csv's rows of epochs 1..K in order, the last at
// the model's steps (none for a failed model, nor one without steps), and
// under --eval-every a row at every check inside an epoch. Anything
// less (a torn or deleted line, a cut or missing file, a hand-edited row, a
// duplicate) and the cell runs again.
std::vector<CellRow> read_finished(const std::string& dir, const SweepPlan& plan) {
  const std::vector<std::string>& models = plan.models;
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
  // (cell, model) -> per position of the axis sweep: the row's distance and accuracy.
  std::map<std::pair<int, std::string>, std::vector<std::pair<int, std::pair<double, double>>>> circle;
  for (const std::string& line : complete_lines(dir + "/circle.csv")) {
    const auto f = fields(line);
    const SweepCell* c = f.size() == 10 ? plan_cell(f[0]) : nullptr;
    if (c == nullptr) continue;
    const std::vector<double>& values = c->axis_values;
    size_t a = 0;
    while (a < values.size() && num(values[a], "%g") != f[7]) ++a;
    double acc = 0;
    const bool good = a < values.size() && f[1] == std::to_string(c->seed) && f[2] == num(c->gap, "%g") &&
                      f[3] == c->grid && model_of(f[4]) && f[5] == c->axis && f[6] == c->unit &&
                      f[8] == num(c->axis_distances[a], "%g") && read_num(f[9], 0, 1, &acc);
    if (!good) {
      bad.insert(c->id);
      continue;
    }
    circle[{c->id, f[4]}].push_back({int(a), {c->axis_distances[a], acc}});
  }
  // (cell, model) -> its epochs, in the file's order.
  const bool trajectory = has_trajectory(dir);
  std::map<std::pair<int, std::string>, std::vector<TrajectoryPoint>> traj;
  for (const std::string& line : trajectory ? complete_lines(dir + "/trajectory.csv") : std::vector<std::string>{}) {
    const auto f = fields(line);
    const SweepCell* c = f.size() == 10 ? plan_cell(f[0]) : nullptr;
    if (c == nullptr) continue;
    TrajectoryPoint t;
    const ParsedNumber<long long> epoch = parse_whole(f[5]), step = parse_whole(f[6]);
    const bool good = f[1] == std::to_string(c->seed) && f[2] == num(c->gap, "%g") && f[3] == c->grid &&
                      model_of(f[4]) && epoch && epoch.value >= 1 && epoch.value <= (1LL << 30) && step &&
                      step.value >= 0 && read_num(f[7], 0, 1, &t.validation_error, true) &&
                      read_num(f[8], 0, 1, &t.familiar_error) && read_num(f[9], 0, 1, &t.heldout_error);
    if (!good) {
      bad.insert(c->id);
      continue;
    }
    t.epoch = int(epoch.value);
    t.step = long(step.value);
    traj[{c->id, f[4]}].push_back(t);
  }
  // cell -> the build and machine that ran it. A sweep begun before
  // provenance.csv has none: its cells are finished without, "unknown".
  const bool provenance = has_provenance(dir);
  std::map<int, Provenance> prov;
  for (const std::string& line : provenance ? complete_lines(dir + "/provenance.csv") : std::vector<std::string>{}) {
    const auto f = fields(line);
    const SweepCell* c = f.size() == 8 ? plan_cell(f[0]) : nullptr;
    if (c == nullptr) continue;
    const bool good = f[1] == std::to_string(c->seed) && (f[3] == "yes" || f[3] == "no" || f[3] == "unknown") &&
                      std::none_of(f.begin() + 2, f.end(), [](const std::string& x) { return x.empty(); });
    if (!good || prov.count(c->id)) {
      bad.insert(c->id);
      continue;
    }
    prov[c->id] = Provenance{f[2], f[3], f[4], f[5], f[6], f[7]};
  }
  // Epochs 1..K in order, steps never going back, the last at the training's end.
  auto whole_epochs = [](const std::vector<TrajectoryPoint>& t, long steps) {
    for (size_t e = 0; e < t.size(); ++e)
      if (t[e].epoch != int(e) + 1 || (e > 0 && t[e].step < t[e - 1].step)) return false;
    return t.empty() ? steps == 0 : t.back().step == steps;
  };
  // Under --eval-every E, an epoch's checks come before its end, under its
  // number: every multiple of E below the training's steps (and up to
  // --eval-until's U, where set) is a row (a check, or an epoch's end), every
  // other row an epoch's end, the k-th at k times the first's (all but the
  // last, at the training's end).
  auto whole_trajectory = [&](const std::vector<TrajectoryPoint>& t, long steps, long E, long U) {
    if (E <= 0) return whole_epochs(t, steps);
    if (t.empty() || t.back().step != steps) return steps == 0 && t.empty();
    long epoch_steps = 0, before = 0;
    for (size_t e = 0; e < t.size(); ++e) {
      const int epoch = e == 0 ? 0 : t[e - 1].epoch;
      const bool end = e + 1 == t.size() || t[e + 1].epoch != t[e].epoch;
      if ((t[e].epoch != epoch && t[e].epoch != epoch + 1) || t[e].step <= before) return false;
      const long next = (before / E + 1) * E;
      if (next < t[e].step && (U == 0 || next <= U)) return false;  // a multiple of E with no row
      if (end && epoch_steps == 0) epoch_steps = t[e].step;
      const bool check = t[e].step % E == 0 && (U == 0 || t[e].step <= U);
      if (end ? e + 1 < t.size() && t[e].step != long(t[e].epoch) * epoch_steps : !check) return false;
      before = t[e].step;
    }
    return true;
  };
  std::vector<CellRow> rows;
  for (const SweepCell& c : plan.cells) {
    if (bad.count(c.id) || (provenance && !prov.count(c.id))) continue;
    std::vector<CellRow> cell_rows;
    for (const std::string& m : models) {
      const auto it = by.find({c.id, m});
      if (it == by.end()) break;
      CellRow r = it->second;
      const auto& circ = circle[{c.id, m}];
      if (r.status == "ok") {
        const size_t n = c.axis_values.size();
        if (circ.size() != n) break;
        r.axis_acc.assign(n, NAN);
        r.axis_dist.assign(n, NAN);
        for (const auto& [a, v] : circ) {
          r.axis_dist[size_t(a)] = v.first;
          r.axis_acc[size_t(a)] = v.second;
        }
        if (std::any_of(r.axis_acc.begin(), r.axis_acc.end(), [](double x) { return std::isnan(x); })) break;
        if (trajectory) {
          r.trajectory = traj[{c.id, m}];
          if (!whole_trajectory(r.trajectory, r.steps, c.opt.train.eval_every, c.opt.train.eval_until)) break;
        }
      } else if (!circ.empty() || !traj[{c.id, m}].empty()) {
        break;
      }
      if (provenance) r.provenance = prov[c.id];
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
  if (theirs != ours) {
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
