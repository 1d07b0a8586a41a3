#include "harness/report.h"

#include <fcntl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <spdlog/version.h>
#include <tbb/version.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "data/protocol.h"
#include "kernels/dnnl_common.h"
#include "models/numbers.h"
#include "kernels/isa.h"

#include "git_version.h"  // generated at build time
#ifndef VIEWGAP_CXX_FLAGS
#define VIEWGAP_CXX_FLAGS ""
#endif
#ifndef VIEWGAP_BUILD_TYPE
#define VIEWGAP_BUILD_TYPE ""
#endif

namespace vg {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}

namespace {
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json range_json(const ViewList& v) {
  return {{"from", v.from}, {"to", v.to}, {"count", v.values.size()}, {"values", v.values}};
}
}  // namespace

nlohmann::json views_json(const DataConfig& d) {
  const RecordedViews v = recorded_views(d);
  return {{"train_azimuths", range_json(v.train_azimuths)},
          {"test_azimuths", range_json(v.test_azimuths)},
          {"elevations", range_json(v.train_elevations)},
          {"test_elevations", v.test_elevations.values.empty() ? nlohmann::json(nullptr) : range_json(v.test_elevations)}};
}

namespace {
std::string host_name() {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  return host;
}
const std::string kCompiler = std::string("GCC ") + __VERSION__;
}  // namespace

std::string build_commit() { return VIEWGAP_GIT_COMMIT; }

const Provenance& this_provenance() {
  static const Provenance p = [] {
    // A table's field: commas and line breaks would split it.
    auto field = [](std::string s) {
      for (char& c : s)
        if (c == ',') c = ';';
        else if (c == '\n' || c == '\r') c = ' ';
      return s.empty() ? std::string("unknown") : s;
    };
    Provenance out;
    const std::string commit = build_commit();
    const std::string suffix = "-dirty";
    const bool dirty = commit.size() > suffix.size() && commit.ends_with(suffix);
    out.commit = field(dirty ? commit.substr(0, commit.size() - suffix.size()) : commit);
    out.dirty = out.commit == "unknown" ? "unknown" : dirty ? "yes" : "no";
    out.compiler = field(kCompiler);
    out.cpu = field(cpu_model());
    out.isa = field(isa_name(selected_isa()));
    out.host = field(host_name());
    return out;
  }();
  return p;
}

nlohmann::json build_meta(int threads) {
  const dnnl_version_t* dv = dnnl_version();
  return {
      {"git_commit", build_commit()},
      {"compiler", kCompiler},
      {"cxx_flags", VIEWGAP_CXX_FLAGS},
      {"build_type", VIEWGAP_BUILD_TYPE},
      {"cpu", cpu_model()},
      {"cores", sysconf(_SC_NPROCESSORS_ONLN)},
      {"isa", isa_name(selected_isa())},
      {"onednn_isa", onednn_isa()},
      {"threads", threads},
      {"onednn", std::to_string(dv->major) + "." + std::to_string(dv->minor) + "." +
                     std::to_string(dv->patch)},
      {"tbb", TBB_VERSION_STRING},
      {"spdlog", std::to_string(SPDLOG_VER_MAJOR) + "." + std::to_string(SPDLOG_VER_MINOR) + "." +
                     std::to_string(SPDLOG_VER_PATCH)},
      {"host", host_name()},
      {"utc", utc_now()},
  };
}

std::string run_fingerprint(const RunResult& r) {
  uint64_t h = 1469598103934665603ull;
  auto bytes = [&](const void* p, size_t n) {
    for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<const unsigned char*>(p)[k]) * 1099511628211ull;
  };
  auto reals = [&](const std::vector<double>& x) {
    const uint64_t n = x.size();
    bytes(&n, sizeof n);
    bytes(x.data(), x.size() * sizeof(double));
  };
  for (const ModelResult& m : r.models) {
    bytes(m.name.data(), m.name.size() + 1);
    reals(m.step_loss);
    reals({m.familiar, m.heldout});
    reals(m.heldout_per_class);
    reals(m.circle_acc);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return hex;
}

// Model options typed as the registry declares them (numbers as numbers).
nlohmann::json model_options_json(const ModelOptions& opts) {
  nlohmann::json j = nlohmann::json::object();
  for (const ModelOption* o : model_options()) {
    const auto it = opts.find(o->name);
    if (it == opts.end()) continue;
    const std::string& v = it->second;
    if (o->kind == OptionKind::integer) {
      if (const auto x = parse_whole(v)) { j[o->name] = x.value; continue; }
    } else if (o->kind == OptionKind::real) {
      if (const auto x = parse_real_number(v)) { j[o->name] = x.value; continue; }
    }
    j[o->name] = v;
  }
  return j;
}

nlohmann::json run_config_json(const RunOptions& opt, int threads) {
  const TrainConfig& t = opt.train;
  nlohmann::json j = {
      {"seed", t.seed},
      {"n_epochs", t.n_epochs},
      {"lr", t.lr},
      // --model-lr: the models that trained at a rate of their own (each model's "lr" says).
      {"model_lr", t.model_lr},
      {"batch_size", t.batch_size},
      {"threads", threads},
      {"reproducible", opt.reproducible},
      {"models", opt.models},
      // The options the user set; what each model ran with is its own "options".
      {"model_options", model_options_json(t.model)},
      {"shapes", opt.data.shapes == ShapeSet::asym ? "asym" : "seed"},
      {"n_per_combo", opt.data.n_per_combo},
      {"n_eval_per_combo", opt.data.n_eval_per_combo},
      {"n_val_per_combo", opt.data.n_val_per_combo},
      {"noise_std", opt.data.noise_std},
      {"stop_at_familiar", opt.stop_at_familiar > 0 ? nlohmann::json(opt.stop_at_familiar) : nlohmann::json(nullptr)},
      {"match_familiar", opt.match_familiar.empty() ? nlohmann::json(nullptr) : nlohmann::json(opt.match_familiar)},
      {"stop_check_every", t.stop_every > 0 ? nlohmann::json(t.stop_every) : nlohmann::json(nullptr)},
  };
  // A budget and a schedule where set only: the configuration of a run
  // without them (a checkpoint's CONF, which --resume compares) is as it was.
  if (t.max_steps > 0) j["max_steps"] = t.max_steps;
  if (t.lr_schedule.kind != LrScheduleKind::constant) j["lr_schedule"] = lr_schedule_text(t.lr_schedule);
  if (t.eval_every > 0) j["eval_every"] = t.eval_every;
  if (t.eval_until > 0) j["eval_until"] = t.eval_until;
  if (!t.model_checks.empty()) {
    nlohmann::json own = nlohmann::json::object();
    for (const auto& [m, span] : t.model_checks) own[m] = {{"every", span.every}, {"until", span.until}};
    j["model_eval_every"] = own;
  }
  if (t.check_sample > 0) j["check_sample"] = t.check_sample;
  // The views that ran (smallNORB's files', not the rendering flags'), and
  // the protocol and data source that chose them.
  j.update(views_json(opt.data));
  const Protocol& p = protocol_of(opt.data);
  const Source& source = source_of(opt.data);
  j["protocol"] = p.name;
  j["source"] = source.record();
  // Where the renderer drew no image, its own fields did nothing.
  if (!source.rendered)
    for (const char* unused : {"shapes", "n_per_combo", "n_eval_per_combo", "noise_std"}) j[unused] = nullptr;
  // Absent where the protocol's source gives none (the synthetic data: its readers expect none).
  if (p.source_json != nullptr) j["data"] = p.source_json(opt.data);
  return j;
}

namespace {
// Where a model's training time went: its steps' total, the first (which also
// builds the backward primitives and first touches the gradient buffers and
// the optimizer's state) and the median. null for a model fit in one pass (nn1).
nlohmann::json step_timing(std::vector<double> s) {
  if (s.empty()) return nullptr;
  const double first = s.front(), sum = std::accumulate(s.begin(), s.end(), 0.0);
  const auto mid = s.begin() + std::ptrdiff_t(s.size() / 2);
  std::nth_element(s.begin(), mid, s.end());
  return {{"n", s.size()}, {"sum", sum}, {"first", first}, {"median", *mid}};
}

int size_of(const std::vector<const Split*>& splits) {
  int n = 0;
  for (const Split* s : splits) n += s->size();
  return n;
}
}  // namespace

nlohmann::json run_to_json(const RunOptions& opt, const RunResult& r, int threads) {
  using nlohmann::json;
  const json cfg = run_config_json(opt, threads);
  std::vector<double> dist;
  for (double a : r.data.circle_az) dist.push_back(azimuth_gap(r.data.train_az, {a}));
  DataConfig dc = opt.data;
  dc.seed = opt.train.seed;
  const Protocol& p = protocol_of(dc);
  json data = {
      {"gap_deg", r.data.gap_deg},
      {"elevation_gap_deg", r.data.elev_gap_deg},
      {"train_elevations", r.data.elevations},
      {"test_elevations", r.data.test_elevations},
      {"sizes", {{"train", r.data.train.size()}, {"familiar", r.data.familiar.size()},
                 {"heldout", r.data.heldout.size()}, {"circle", size_of(r.data.circle_splits())},
                 {"axis", size_of(r.data.axis_splits())}, {"validation", r.data.validation.size()}}},
      {"classes", class_names(opt.data)},
      // What the models read: every image's channels and side, and the classes (core/image_shape.h).
      {"image", {{"channels", r.data.train.channels}, {"side", r.data.train.side}, {"classes", r.data.train.classes}}},
      {"circle_azimuths", r.data.circle_az},
      {"circle_distance_deg", dist},
      // The held-out axis (data/protocol.h: HeldOutAxis) and its sweep's positions.
      {"axis", {{"name", p.axis.name}, {"unit", p.axis.unit}, {"protocol", p.name},
                {"true_gap", p.sweep_gap(dc)}, {"values", r.data.axis_values},
                {"distances", axis_distances(p, dc)}}},
  };
  json models = json::array();
  for (const ModelResult& m : r.models) {
    json hist = json::array();
    for (const EpochStats& e : m.history) {
      hist.push_back({{"epoch", e.epoch}, {"step", e.step}, {"loss", e.loss}, {"familiar", e.familiar},
                      {"heldout", e.heldout},
                      {"validation", std::isnan(e.validation) ? json(nullptr) : json(e.validation)},
                      {"seconds", e.seconds}});
      // Only a spread-loss model's epochs: the loss at the margin its training ends at.
      if (!std::isnan(e.final_margin_loss))
        hist.back().update({{"final_margin_loss", e.final_margin_loss}, {"final_margin", e.final_margin}});
    }
    // --eval-every: the checks inside an epoch, beside the history of epoch ends.
    json checks = json::array();
    for (const EpochStats& e : m.checks) {
      checks.push_back({{"epoch", e.epoch}, {"step", e.step}, {"loss", e.loss}, {"familiar", e.familiar},
                        {"heldout", e.heldout},
                        {"validation", std::isnan(e.validation) ? json(nullptr) : json(e.validation)},
                        {"seconds", e.seconds}});
      if (!std::isnan(e.final_margin_loss))
        checks.back().update({{"final_margin_loss", e.final_margin_loss}, {"final_margin", e.final_margin}});
    }
    json per_class;
    for (size_t c = 0; c < m.heldout_per_class.size(); ++c) per_class[class_name(opt.data, int(c))] = m.heldout_per_class[c];
    models.push_back({{"name", m.name},
                      {"options", model_options_json(model_options_of(m.name, opt.train.model))},
                      {"lr", opt.train.lr_of(m.name)},
                      {"n_params", m.n_params},
                      {"familiar", m.familiar},
                      {"heldout", m.heldout},
                      {"drop", m.drop},
                      {"heldout_per_class", per_class},
                      {"class_activations", std::isnan(m.act_accuracy) ? json(nullptr)
                                            : json{{"heldout_argmax_accuracy", m.act_accuracy},
                                                   {"heldout_mean_true", m.act_true},
                                                   {"heldout_mean_other", m.act_other}}},
                      {"circle_accuracy", m.circle_acc},
                      {"axis_accuracy", m.axis_acc},
                      {"circle_history", m.circle_history},
                      {"history", hist},
                      {"step_loss", m.step_loss},
                      {"steps", m.steps},
                      {"stopped_early", m.stopped_early},
                      {"validation", std::isnan(m.validation) ? json(nullptr) : json(m.validation)},
                      {"stop_target", std::isnan(m.stop_target) ? json(nullptr) : json(m.stop_target)},
                      {"target_reached", std::isnan(m.stop_target) ? json(nullptr)
                                                                   : json(m.validation >= m.stop_target)},
                      {"timing_s", {{"train", m.train_s}, {"eval", m.eval_s}, {"circle", m.circle_s},
                                    {"steps", step_timing(m.step_s)}}}});
    if (opt.train.checks_of(m.name).any()) models.back()["checks"] = checks;
    if (m.interrupted) models.back()["interrupted"] = true;  // its history so far; no final evaluation
  }
  json out = {{"schema_version", kRunSchemaVersion},
          {"kind", "viewgap-run"},
          {"config", cfg},
          {"dataset", data},
          {"models", models},
          {"fingerprint", run_fingerprint(r)},
          {"timing_s", {{"dataset", r.dataset_s}, {"total", r.total_s}}},
          {"meta", build_meta(threads)}};
  if (std::any_of(r.models.begin(), r.models.end(), [](const ModelResult& m) { return m.interrupted; }))
    out["interrupted"] = true;
  return out;
}

namespace {
std::string fmt3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}
}  // namespace

std::string format_run_table(const RunOptions& opt, const RunResult& r, const std::string& heading) {
  std::ostringstream o;
  char line[256];
  const auto& d = opt.data;
  if (heading.empty()) o << "seed " << opt.train.seed << ", " << opt.train.n_epochs << " epochs; ";
  else o << heading;
  o << protocol_of(d).describe(d, r.data);
  // The name column is as wide as the longest name (8 at least, the seed's table).
  int name_w = 8;
  for (const ModelResult& m : r.models) name_w = std::max(name_w, int(m.name.size()));
  std::snprintf(line, sizeof line, "%-*s %9s %9s %9s %7s %9s\n", name_w, "model", "params", "familiar",
                "held-out", "drop", "time (s)");
  o << line;
  for (const ModelResult& m : r.models) {
    std::snprintf(line, sizeof line, "%-*s %9zu %9.3f %9.3f %7.3f %9.3f", name_w, m.name.c_str(),
                  m.n_params, m.familiar, m.heldout, m.drop, m.train_s + m.eval_s + m.circle_s);
    o << line;
    // Under a stopping rule: where each model stopped, and whether it got there.
    if (!std::isnan(m.stop_target))
      o << "   stopped at step " << m.steps << ", validation " << fmt3(m.validation)
        << (m.validation >= m.stop_target ? " >= " : " < ") << "target " << fmt3(m.stop_target)
        << (m.validation >= m.stop_target ? "" : " (not reached by --n-epochs)");
    else if (!std::isnan(m.validation))
      o << "   step " << m.steps << ", validation " << fmt3(m.validation)
        << (opt.match_familiar == m.name ? " (the target)" : "");
    o << '\n';
  }
  const double chance = 1.0 / image_shape(d).classes;
  std::snprintf(line, sizeof line, "%-*s %9s %9.3f %9.3f %7.3f\n", name_w, "chance", "", chance, chance, 0.0);
  o << line;
  std::snprintf(line, sizeof line, "wall time %.3f s (dataset %.3f s)\n", r.total_s, r.dataset_s);
  o << line;
  o << "fingerprint " << run_fingerprint(r)
    << (opt.reproducible ? " (--reproducible: the same on every x86-64 CPU with AVX2+FMA)\n"
                         : " (this CPU's fastest paths)\n");
  return o.str();
}

namespace {
// NumPy .npy (format 1.0) of a float32 C-order array.
std::string npy(const std::vector<float>& data, const std::vector<int>& shape) {
  std::string dims;
  for (int d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  return out;
}
}  // namespace

std::vector<ClassPose> class_poses(Model& model, const Split& split) {
  std::vector<ClassPose> out;
  const int J = split.classes;
  for (int c = 0; c < J; ++c) {
    const auto it = std::find(split.labels.begin(), split.labels.end(), c);
    if (it == split.labels.end()) continue;
    const float* scores = model.forward(split.image(int(it - split.labels.begin())), 1);
    const ClassCapsules caps = model.class_capsules();
    if (caps.pose_dim == 0) return {};
    ClassPose p;
    p.label = c;
    p.predicted = int(std::max_element(scores, scores + J) - scores);
    p.pose_dim = caps.pose_dim;
    p.mu.assign(caps.poses, caps.poses + size_t(J) * caps.pose_dim);
    p.a.assign(caps.activations, caps.activations + J);
    out.push_back(p);
  }
  return out;
}

ClassReconstructions class_reconstructions(const std::string& model_name, Model& model, const Split& split) {
  constexpr int kMaxExamples = 100;  // per class, for the dimensions' variances
  ClassReconstructions r;
  r.side = split.side;
  const size_t plane = size_t(split.side) * size_t(split.side);  // the figure shows each image's first channel
  std::vector<float> out(split.pixels());
  auto add = [&](const float* image) { r.images.insert(r.images.end(), image, image + plane); };
  for (int c = 0; c < split.classes; ++c) {
    std::vector<int> examples;
    for (int i = 0; i < split.size() && int(examples.size()) < kMaxExamples; ++i)
      if (split.labels[i] == c) examples.push_back(i);
    if (examples.empty()) continue;
    // The true class capsule of each example; the first is the one shown.
    std::vector<std::vector<float>> caps;
    int predicted = 0;
    for (int i : examples) {
      const float* scores = model.forward(split.image(i), 1);
      const ClassCapsules cc = model.class_capsules();
      if (cc.pose_dim == 0) return {};
      caps.emplace_back(cc.poses + size_t(c) * cc.pose_dim, cc.poses + size_t(c + 1) * cc.pose_dim);
      if (caps.size() > 1) continue;
      predicted = int(std::max_element(scores, scores + split.classes) - scores);
      if (!model.decode(caps[0].data(), c, out.data())) return {};  // no decoder: no figure
    }
    const std::vector<float>& v = caps[0];
    const int D = int(v.size());
    std::vector<double> var(D, 0.0);
    for (int d = 0; d < D; ++d) {
      double mean = 0;
      for (const auto& u : caps) mean += u[d];
      mean /= double(caps.size());
      for (const auto& u : caps) var[d] += (u[d] - mean) * (u[d] - mean);
    }
    std::vector<int> dims(D);
    std::iota(dims.begin(), dims.end(), 0);
    std::stable_sort(dims.begin(), dims.end(), [&](int a, int b) { return var[a] > var[b]; });
    dims.resize(std::min(D, kReconDims));
    add(split.image(examples[0]));
    add(out.data());
    for (int d : dims)
      for (double delta : kReconDeltas) {
        std::vector<float> shifted = v;
        shifted[d] += float(delta);
        model.decode(shifted.data(), c, out.data());
        add(out.data());
      }
    r.labels.push_back(c);
    r.predicted.push_back(predicted);
    r.dims.push_back(dims);
  }
  if (!r.labels.empty()) r.model = model_name;
  return r;
}

std::vector<std::string> dump_files(const std::string& dir) {
  return {dir + "/dataset_azimuths.npy", dir + "/dataset_elevations.npy", dir + "/reconstructions.npy",
          dir + "/dump.json", dir + "/run.json"};
}

void write_dump(const std::string& dir, uint64_t seed, const nlohmann::json& run_json,
                const std::vector<ClassPose>& poses, const ClassReconstructions& recons) {
  DataConfig dc;
  dc.seed = seed;
  if (run_json["config"].value("shapes", "seed") == "asym") dc.shapes = ShapeSet::asym;
  const std::vector<double> azimuths = {0, 60, 120, 180, 240, 300};
  dc.elevations = {30, 30, 1};
  const Split by_az = make_split(dc, SplitId::Figures, azimuths, 1);
  write_file_atomic(dir + "/dataset_azimuths.npy", npy(by_az.images, {by_az.classes, 6, by_az.side, by_az.side}));
  dc.elevations = {0, 80, 5};
  const Split by_el = make_split(dc, SplitId::Figures, {60}, 1);
  write_file_atomic(dir + "/dataset_elevations.npy", npy(by_el.images, {by_el.classes, 5, by_el.side, by_el.side}));
  nlohmann::json cp = nlohmann::json::array();
  for (const ClassPose& p : poses) {
    nlohmann::json mu = nlohmann::json::array();
    for (size_t j = 0; j < p.a.size(); ++j)
      mu.push_back(std::vector<float>(p.mu.begin() + j * p.pose_dim, p.mu.begin() + (j + 1) * p.pose_dim));
    cp.push_back({{"label", p.label}, {"predicted", p.predicted}, {"mu", mu}, {"a", p.a}});
  }
  // Without a decoder no reconstructions.npy is written (one left by an earlier
  // run stays, unreferenced).
  nlohmann::json rec = nullptr;
  if (!recons.model.empty()) {
    const std::vector<int> shape = {int(recons.labels.size()), recons.columns(), recons.side, recons.side};
    write_file_atomic(dir + "/reconstructions.npy", npy(recons.images, shape));
    rec = {{"model", recons.model},
           {"file", "reconstructions.npy"},
           {"shape", shape},
           {"labels", recons.labels},
           {"predicted", recons.predicted},
           {"dims", recons.dims},
           {"deltas", std::vector<double>(std::begin(kReconDeltas), std::end(kReconDeltas))}};
  }
  const nlohmann::json dump = {{"schema_version", kDumpSchemaVersion},
                               {"kind", "viewgap-dump"},
                               {"classes", class_names(dc)},
                               {"azimuths", azimuths},
                               {"azimuth_elevation", 30},
                               {"elevations", {0, 20, 40, 60, 80}},
                               {"elevation_azimuth", 60},
                               {"class_poses", cp},
                               {"reconstructions", rec}};
  write_file_atomic(dir + "/dump.json", dump.dump(2) + "\n");
  write_file_atomic(dir + "/run.json", run_json.dump(2) + "\n");
}

}  // namespace vg
