// The protocol registry, and choosing a protocol from the flags.
#include "data/protocol.h"

#include "data/idx_plane.h"
#include "data/norb_plane.h"
#include "data/plane_views.h"

#include <algorithm>
#include <cmath>

namespace vg {

const std::vector<Protocol>& protocol_registry() {
  static const std::vector<Protocol> registry = {
      azimuth_window_protocol(),
      elevation_extrapolation_protocol(),
      paper_azimuth_protocol(),
      paper_elevation_protocol(),
      norb_protocol(NorbSplitKind::azimuth),
      norb_protocol(NorbSplitKind::elevation),
      norb_protocol(NorbSplitKind::full),
      toys_protocol(NorbSplitKind::azimuth),
      toys_protocol(NorbSplitKind::elevation),
      toys_protocol(NorbSplitKind::full),
      toys_window_protocol(),
      translation_protocol(),
      rotation_protocol(),
      scale_protocol(),
      shear_protocol(),
      affine_protocol(),
      norb_translation_protocol(),
      norb_rotation_protocol(),
      norb_scale_protocol(),
      norb_shear_protocol(),
      norb_affine_protocol(),
      fashion_mnist_protocol(),
      fashion_translation_protocol(),
      fashion_rotation_protocol(),
      fashion_scale_protocol(),
      fashion_shear_protocol(),
      fashion_affine_protocol(),
      idx_protocol(),
      idx_translation_protocol(),
      idx_rotation_protocol(),
      idx_scale_protocol(),
      idx_shear_protocol(),
      idx_affine_protocol(),
  };
  return registry;
}

namespace {

// "a, b or c".
std::string either(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

bool declares_flag(const Protocol& p, const std::string& name) {
  return std::any_of(p.flags.begin(), p.flags.end(), [&](const DataFlag& f) { return f.name == name; });
}

bool reads_flag(const Source& s, const std::string& name) {
  return std::find(s.flags.begin(), s.flags.end(), name) != s.flags.end();
}

// Where a source flag applies, from the sources that read it:
// "applies to --data norb:DIR or toys only".
std::string applies_to_sources(const std::string& name) {
  std::vector<std::string> sources;
  for (const Source& s : source_registry())
    if (reads_flag(s, name)) sources.push_back(s.form());
  return "applies to --data " + either(sources) + " only";
}

// Where a protocol's flag applies, from the protocols that declare it. Where
// some of `source`'s own splits declare it, those splits: "applies with
// --split rotation only" (another source's splits of other names would
// mislead: smallNORB's translation takes no --standardize though Fashion-MNIST's
// does). Where none does, every split that declares it and their sources:
// "applies with --split translation only, on --data synthetic".
std::string applies_with_splits(const std::string& name, const Source& source) {
  auto split_of = [](const Protocol& p) { return std::string(p.split != nullptr ? p.split : p.name); };
  auto add = [](std::vector<std::string>& list, const std::string& v) {
    if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
  };
  std::vector<std::string> here, splits, sources;
  for (const Protocol& p : protocol_registry()) {
    if (!declares_flag(p, name)) continue;
    add(splits, split_of(p)), add(sources, source_named(p.source).form());
    if (p.source == std::string(source.name)) add(here, split_of(p));
  }
  if (!here.empty()) return "applies with --split " + either(here) + " only";
  return "applies with --split " + either(splits) + " only, on --data " + either(sources);
}

}  // namespace

const Protocol& select_protocol(const FlagSource& flags) {
  const std::vector<Protocol>& all = protocol_registry();
  const std::string data = flags.value("data");
  const std::vector<Source>& sources = source_registry();
  const auto source = std::find_if(sources.begin(), sources.end(), [&](const Source& s) { return s.reads(data); });
  if (source == sources.end()) {
    std::string expected;
    for (const Source& s : sources) expected += (expected.empty() ? "" : " or ") + s.form();
    throw FlagError("data", data, "expected " + expected);
  }
  // A flag only another source reads, set here, would be silently ignored.
  for (const Source& s : sources)
    if (&s != &*source)
      for (const char* name : s.flags)
        if (std::string(name) != "data" && flags.changed(name) && !reads_flag(*source, name))
          throw FlagError(name, flags.value(name), applies_to_sources(name));
  const std::string split = flags.value("split");
  std::string names;
  const Protocol* chosen = nullptr;
  for (const Protocol& p : all) {
    if (p.source != std::string(source->name)) continue;
    if (p.split != nullptr) names += (names.empty() ? "" : ", ") + std::string(p.split);
    if (chosen == nullptr &&
        (split.empty() ? p.default_for != nullptr && p.default_for(flags) : p.split != nullptr && split == p.split))
      chosen = &p;
  }
  if (chosen == nullptr) throw FlagError("split", split, "unknown split (expected " + names + ")");
  // A protocol's own flag, set while another is chosen, would be silently ignored.
  for (const DataFlag& f : protocol_flags())
    if (flags.changed(f.name) && !declares_flag(*chosen, f.name))
      throw FlagError(f.name, flags.value(f.name), applies_with_splits(f.name, *source));
  return *chosen;
}

const std::vector<DataFlag>& protocol_flags() {
  static const std::vector<DataFlag> flags = [] {
    std::vector<DataFlag> out;
    for (const Protocol& p : protocol_registry())
      for (const DataFlag& f : p.flags)
        if (std::none_of(out.begin(), out.end(), [&](const DataFlag& o) { return o.name == std::string(f.name); }))
          out.push_back(f);
    return out;
  }();
  return flags;
}

namespace {

// Does cfg (of p's source) hold exactly the views preset protocol p sets?
// (The paper's splits are presets of the rendering flags: their data is the
// flags', and a run records the split by name.)
bool matches_preset(const Protocol& p, const DataConfig& cfg) {
  if (p.preset.empty() || cfg.plane) return false;
  bool sets_test_elevations = false;
  for (const auto& [flag, value] : p.preset) {
    const std::string f = flag, v = value;
    const AngleRange* r = f == "train-azimuths" || f == "n-train-views" ? &cfg.train_azimuths
                          : f == "test-azimuths" || f == "n-test-views" ? &cfg.test_azimuths
                          : f == "elevations" || f == "n-elev"          ? &cfg.elevations
                          : f == "test-elevations" || f == "n-test-elev" ? &cfg.test_elevations
                                                                          : nullptr;
    if (r == nullptr) return false;
    sets_test_elevations = sets_test_elevations || f == "test-elevations";
    const auto colon = v.find(':');
    if (colon == std::string::npos ? r->count != std::stoi(v)
                                   : r->from != std::stod(v.substr(0, colon)) || r->to != std::stod(v.substr(colon + 1)))
      return false;
  }
  return sets_test_elevations || cfg.test_elevations.count == 0;
}

}  // namespace

const Protocol& protocol_of(const DataConfig& cfg) {
  const std::string source = source_of(cfg).name;
  for (const Protocol& p : protocol_registry())
    if (p.source == source && matches_preset(p, cfg)) return p;
  for (const Protocol& p : protocol_registry())
    if (p.source == source && p.holds != nullptr && p.holds(p, cfg)) return p;
  throw std::logic_error("protocol_of: no protocol of --data " + source + " holds this configuration");
}

Dataset make_dataset(const DataConfig& cfg) {
  const Protocol& p = protocol_of(cfg);
  Dataset d = p.make(cfg);
  // An empty set would be scored 0.000 as if measured. Protocols refuse their
  // own flags that lead here before any work; this catches one that does not.
  for (const auto& [set, what] : {std::pair{&d.train, "training"}, {&d.familiar, "familiar"}, {&d.heldout, "held-out"}})
    if (set->size() == 0)
      throw FlagError("split", p.split ? p.split : p.name,
                      std::string("leaves the ") + what + " set empty (--data " + source_of(cfg).data_text(cfg) + ")");
  return d;
}

ViewList view_list(const AngleRange& r) { return {r.from, r.to, r.values()}; }

ViewList view_list(std::vector<double> values, bool circular) {
  ViewList out;
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.empty()) return out;
  // The arc starts after the widest empty stretch between neighbours (the
  // one from the last round to the first included, for azimuths).
  size_t start = 0;
  double widest = circular ? values.front() + 360 - values.back() : -1;
  for (size_t i = 1; circular && i < values.size(); ++i)
    if (values[i] - values[i - 1] > widest) widest = values[i] - values[i - 1], start = i;
  std::rotate(values.begin(), values.begin() + std::ptrdiff_t(start), values.end());
  out.from = values.front();
  out.to = values.back() + (values.back() < values.front() ? 360 : 0);
  out.values = values;
  return out;
}

RecordedViews flag_views(const DataConfig& cfg) {
  RecordedViews v{view_list(cfg.train_azimuths), view_list(cfg.test_azimuths), view_list(cfg.elevations), {}};
  if (cfg.test_elevations.count > 0) v.test_elevations = view_list(cfg.test_elevations);
  return v;
}

RecordedViews recorded_views(const DataConfig& cfg) {
  const Protocol& p = protocol_of(cfg);
  return p.views != nullptr ? p.views(cfg) : flag_views(cfg);
}

ShapeSet parse_shapes(const std::string& v) {
  if (v == "seed") return ShapeSet::seed;
  if (v == "asym") return ShapeSet::asym;
  throw FlagError("shapes", v, "unknown shape set (expected seed, asym)");
}

const char* class_name(const DataConfig& cfg, int cls) { return source_of(cfg).class_name(cfg, cls); }

std::vector<std::string> class_names(const DataConfig& cfg) {
  std::vector<std::string> n;
  for (int c = 0; c < image_shape(cfg).classes; ++c) n.push_back(class_name(cfg, c));
  return n;
}

std::vector<double> heldout_distances(const Protocol& p, const DataConfig& cfg, const Split& s) {
  std::vector<double> out;
  out.reserve(size_t(s.size()));
  for (int i = 0; i < s.size(); ++i) out.push_back(p.distance(cfg, s.axis[size_t(i)]));
  return out;
}

std::vector<double> axis_distances(const Protocol& p, const DataConfig& cfg) {
  std::vector<double> out;
  for (double v : p.axis_values(cfg)) out.push_back(p.distance(cfg, v));
  return out;
}

double azimuth_distance(const DataConfig& cfg, double azimuth) { return azimuth_gap(training_azimuths(cfg), {azimuth}); }

double elevation_distance(const DataConfig& cfg, double elevation) {
  double dist = INFINITY;
  for (double e : training_elevations(cfg)) dist = std::min(dist, std::fabs(elevation - e));
  return dist;
}

}  // namespace vg
