#include "harness/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/report.h"
#include "kernels/fma_probe.h"

namespace vg {

namespace {

struct Event {
  const char* layer;
  bool backward;
  double t0_us, t1_us;
};

struct Recorder final : LayerProfiler {
  Clock::time_point origin = Clock::now();
  std::vector<Event> events;
  bool on = false;
  void record(const char* layer, bool backward, Clock::time_point t0, Clock::time_point t1) override {
    if (!on) return;
    events.push_back({layer, backward, std::chrono::duration<double, std::micro>(t0 - origin).count(),
                      std::chrono::duration<double, std::micro>(t1 - origin).count()});
  }
};

// The pass a row times. The trainer times its own work through the layers'
// hook, whose flag knows only forward and backward: its loss is the loss and
// its gradient at once, and Adam's update is neither pass.
const char* pass_name(const std::string& layer, bool backward) {
  if (layer == "step") return "step";
  if (layer == "loss") return "loss+grad";
  if (layer == "adam") return "update";
  return backward ? "backward" : "forward";
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double h = (v.size() - 1) * p;
  const size_t lo = size_t(h);
  return lo + 1 < v.size() ? v[lo] + (h - lo) * (v[lo + 1] - v[lo]) : v[lo];
}

}  // namespace

void run_profile(const ProfileOptions& opt) {
  const double peak = fma_peak_gflops(0.2);
  DataConfig dc = opt.data;
  dc.seed = opt.train.seed;
  const Dataset data = make_dataset(dc);
  auto model = make_model(opt.model, opt.train.model, opt.batch, data.train.shape());
  model->init(opt.train.seed);
  AdamConfig ac;
  ac.lr = opt.train.lr_of(opt.model);
  Trainer trainer(*model, ac, opt.batch);
  Recorder rec;
  rec.events.reserve(size_t(opt.steps) * 24);
  model->set_profiler(&rec);

  const int B = opt.batch, N = data.train.size();
  const size_t pixels = data.train.pixels();
  std::vector<float> x(size_t(B) * pixels);
  std::vector<int> y(B);
  for (int step = 0; step < opt.warmup + opt.steps; ++step) {
    for (int b = 0; b < B; ++b) {
      const int k = (step * B + b) % N;
      std::copy_n(data.train.image(k), pixels, x.data() + size_t(b) * pixels);
      y[b] = data.train.labels[k];
    }
    rec.on = step >= opt.warmup;
    LayerScope whole(&rec, "step", false);
    trainer.step(x.data(), y.data(), B, double(step) / (opt.warmup + opt.steps));
  }

  // Per (layer, pass): durations of every call, in order of first appearance.
  std::vector<std::pair<std::string, bool>> order;
  std::map<std::pair<std::string, bool>, std::vector<double>> dur;
  for (const Event& e : rec.events) {
    const auto key = std::make_pair(std::string(e.layer), e.backward);
    if (!dur.count(key)) order.push_back(key);
    dur[key].push_back(e.t1_us - e.t0_us);
  }
  const std::vector<double>& steps = dur[{"step", false}];
  double step_total = 0;
  for (double v : steps) step_total += v;
  // FLOPs per call, as the model counts them ("loss" and "adam" count 0).
  std::map<std::pair<std::string, bool>, double> flops_of;
  for (const LayerInfo& l : model->layers(B)) {
    flops_of[{l.name, false}] = l.forward_flops;
    flops_of[{l.name, true}] = l.backward_flops;
  }
  auto layer_flops = [&](const std::pair<std::string, bool>& key) {
    const auto it = flops_of.find(key);
    return it == flops_of.end() ? 0.0 : it->second;
  };
  std::string csv =
      "model,batch,layer,pass,calls,median_us,p90_us,share,flops,gflops,peak_pct,peak_gflops\n";
  std::ostringstream table;
  char line[256];
  std::snprintf(line, sizeof line, "%s, batch %d, %d steps, images %s; FMA peak of this core %.1f GFLOP/s\n",
                opt.model.c_str(), B, opt.steps, data.train.shape().text().c_str(), peak);
  table << line;
  // The name columns as wide as their longest entry (convcaps' "convcaps1.routing"),
  // so every row's numbers stand under their headings.
  int layer_w = 12, pass_w = 8;
  for (const auto& key : order) {
    layer_w = std::max(layer_w, int(key.first.size()));
    pass_w = std::max(pass_w, int(std::strlen(pass_name(key.first, key.second))));
  }
  std::snprintf(line, sizeof line, "%-*s %-*s %6s %10s %10s %7s %10s %8s %7s\n", layer_w, "layer", pass_w, "pass",
                "calls", "median_us", "p90_us", "share", "MFLOP", "GFLOP/s", "%peak");
  table << line;
  double step_flops = 0;
  for (const auto& key : order) {
    if (key.first != "step")
      step_flops += layer_flops(key) * double(dur[key].size()) / steps.size();
  }
  for (const auto& key : order) {
    const std::vector<double>& v = dur[key];
    double sum = 0;
    for (double t : v) sum += t;
    const bool is_step = key.first == "step";
    const double flops = is_step ? step_flops : layer_flops(key);
    const double med = percentile(v, 0.5), p90 = percentile(v, 0.9);
    const double gf = flops > 0 ? flops / (med * 1e3) : 0;
    const char* pass = pass_name(key.first, key.second);
    std::snprintf(line, sizeof line, "%s,%d,%s,%s,%zu,%.2f,%.2f,%.4f,%.0f,%.2f,%.1f,%.1f\n",
                  opt.model.c_str(), B, key.first.c_str(), pass, v.size(), med, p90,
                  sum / step_total, flops, gf, 100 * gf / peak, peak);
    csv += line;
    std::snprintf(line, sizeof line, "%-*s %-*s %6zu %10.1f %10.1f %6.1f%% %10.2f %8.1f %6.1f%%\n", layer_w,
                  key.first.c_str(), pass_w, pass, v.size(), med, p90, 100 * sum / step_total, flops / 1e6, gf,
                  100 * gf / peak);
    table << line;
  }
  write_file_atomic(opt.out_csv, csv);
  if (!opt.trace.empty()) {
    nlohmann::json ev = nlohmann::json::array();
    for (const Event& e : rec.events)
      ev.push_back({{"name", e.layer}, {"cat", pass_name(e.layer, e.backward)}, {"ph", "X"},
                    {"ts", e.t0_us}, {"dur", e.t1_us - e.t0_us}, {"pid", 1},
                    {"tid", std::string(e.layer) == "step" ? 1 : 2}});
    const nlohmann::json trace = {{"traceEvents", ev}, {"displayTimeUnit", "ms"},
                                  {"otherData", build_meta(1)}};
    write_file_atomic(opt.trace, trace.dump() + "\n");
  }
  std::fputs(table.str().c_str(), stdout);
  // Where the rows went, as `run` says of its JSON (stderr: stdout is the table).
  std::fprintf(stderr, "viewgap profile: wrote %s%s\n", opt.out_csv.c_str(),
               opt.trace.empty() ? "" : (" and " + opt.trace).c_str());
}

}  // namespace vg
