// The tables' rows as text and back (interface: harness/sweep_store.h): each
// table's lines, cells.csv's fields (each one's writer beside its reader), and
// read_finished, which reads whole cells back for --resume and merge. The
// directory, its lock, the final tables and merging shards: sweep_store.cpp.
#include "harness/sweep_store.h"

#include "core/file_kind.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

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
// duplicate) and the cell runs again. With `whole_alone`, the rows of the
// other cells that are whole on their own (a model's rows by the rule above,
// the cell's provenance row there) go there, for --resume to keep
// (keep_whole_rows): a model whose checks did not change beside one whose did.
std::vector<CellRow> read_finished(const std::string& dir, const SweepPlan& plan, std::vector<CellRow>* whole_alone) {
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
  // Under --eval-every (or the model's --model-eval-every), an epoch's checks
  // come before its end, under its number: every step of the model's schedule
  // below the training's steps is a row (a check, or an epoch's end), every
  // other row an epoch's end, the k-th at k times the first's (all but the
  // last, at the training's end).
  auto whole_trajectory = [&](const std::vector<TrajectoryPoint>& t, long steps, const CheckSchedule& checks) {
    if (!checks.any()) return whole_epochs(t, steps);
    if (t.empty() || t.back().step != steps) return steps == 0 && t.empty();
    long epoch_steps = 0, before = 0;
    for (size_t e = 0; e < t.size(); ++e) {
      const int epoch = e == 0 ? 0 : t[e - 1].epoch;
      const bool end = e + 1 == t.size() || t[e + 1].epoch != t[e].epoch;
      if ((t[e].epoch != epoch && t[e].epoch != epoch + 1) || t[e].step <= before) return false;
      if (checks.next_after(before) < t[e].step) return false;  // a step of the schedule with no row
      if (end && epoch_steps == 0) epoch_steps = t[e].step;
      if (end ? e + 1 < t.size() && t[e].step != long(t[e].epoch) * epoch_steps : !checks.due(t[e].step))
        return false;
      before = t[e].step;
    }
    return true;
  };
  // One model's row of cell c, whole, or nothing.
  auto whole_row = [&](const SweepCell& c, const std::string& m) -> std::optional<CellRow> {
    const auto it = by.find({c.id, m});
    if (it == by.end()) return std::nullopt;
    CellRow r = it->second;
    const auto& circ = circle[{c.id, m}];
    if (r.status == "ok") {
      const size_t n = c.axis_values.size();
      if (circ.size() != n) return std::nullopt;
      r.axis_acc.assign(n, NAN);
      r.axis_dist.assign(n, NAN);
      for (const auto& [a, v] : circ) {
        r.axis_dist[size_t(a)] = v.first;
        r.axis_acc[size_t(a)] = v.second;
      }
      if (std::any_of(r.axis_acc.begin(), r.axis_acc.end(), [](double x) { return std::isnan(x); })) return std::nullopt;
      if (trajectory) {
        r.trajectory = traj[{c.id, m}];
        if (!whole_trajectory(r.trajectory, r.steps, c.opt.train.checks_of(m))) return std::nullopt;
      }
    } else if (!circ.empty() || !traj[{c.id, m}].empty()) {
      return std::nullopt;
    }
    if (provenance) r.provenance = prov[c.id];
    return r;
  };
  std::vector<CellRow> rows;
  for (const SweepCell& c : plan.cells) {
    if (bad.count(c.id) || (provenance && !prov.count(c.id))) continue;
    std::vector<CellRow> cell_rows;
    for (const std::string& m : models)
      if (std::optional<CellRow> r = whole_row(c, m)) cell_rows.push_back(std::move(*r));
    if (cell_rows.size() == models.size()) rows.insert(rows.end(), cell_rows.begin(), cell_rows.end());
    else if (whole_alone != nullptr) whole_alone->insert(whole_alone->end(), cell_rows.begin(), cell_rows.end());
  }
  return rows;
}

void sort_rows(std::vector<CellRow>& rows, const std::vector<std::string>& models) {
  auto rank = [&](const std::string& m) { return std::find(models.begin(), models.end(), m) - models.begin(); };
  std::sort(rows.begin(), rows.end(), [&](const CellRow& a, const CellRow& b) {
    return a.cell != b.cell ? a.cell < b.cell : rank(a.model) < rank(b.model);
  });
}

}  // namespace vg
