// The protocol registry, and choosing a protocol from the flags.
#include "data/protocol.h"

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
      translation_protocol(),
      rotation_protocol(),
      scale_protocol(),
      shear_protocol(),
  };
  return registry;
}

namespace {

bool is_prefix(const std::string& source) { return !source.empty() && source.back() == ':'; }

// Does --data `value` name `source` ("synthetic" exactly, "norb:" as a prefix)?
bool reads(const std::string& source, const std::string& value) {
  return is_prefix(source) ? value.rfind(source, 0) == 0 : value == source;
}

// "norb:DIR" for a prefix source, as --data's messages write it.
std::string source_form(const std::string& source) { return is_prefix(source) ? source + "DIR" : source; }

}  // namespace

const Protocol& select_protocol(const FlagSource& flags) {
  const std::vector<Protocol>& all = protocol_registry();
  const std::string data = flags.value("data");
  std::vector<std::string> sources;
  for (const Protocol& p : all)
    if (std::find(sources.begin(), sources.end(), p.source) == sources.end()) sources.push_back(p.source);
  const auto source = std::find_if(sources.begin(), sources.end(), [&](const std::string& s) { return reads(s, data); });
  if (source == sources.end()) {
    std::string expected;
    for (const std::string& s : sources) expected += (expected.empty() ? "" : " or ") + source_form(s);
    throw FlagError("data", data, "expected " + expected);
  }
  // A flag only another source reads, set here, would be silently ignored.
  for (const Protocol& p : all)
    if (p.source != *source)
      for (const char* name : p.source_flags)
        if (std::string(name) != "data" && flags.changed(name))
          throw FlagError(name, flags.value(name), "applies to --data " + source_form(p.source) + " only");
  const std::string split = flags.value("split");
  std::string names;
  const Protocol* chosen = nullptr;
  for (const Protocol& p : all) {
    if (p.source != *source) continue;
    if (p.split != nullptr) names += (names.empty() ? "" : ", ") + std::string(p.split);
    if (chosen == nullptr &&
        (split.empty() ? p.default_for != nullptr && p.default_for(flags) : p.split != nullptr && split == p.split))
      chosen = &p;
  }
  if (chosen == nullptr) throw FlagError("split", split, "unknown split (expected " + names + ")");
  // A protocol's own flag, set while another is chosen, would be silently ignored.
  for (const Protocol& p : all)
    for (const DataFlag& f : p.flags)
      if (flags.changed(f.name) &&
          std::none_of(chosen->flags.begin(), chosen->flags.end(),
                       [&](const DataFlag& c) { return c.name == std::string(f.name); }))
        throw FlagError(f.name, flags.value(f.name),
                        "applies with --split " + std::string(p.split ? p.split : p.name) + " only");
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

const Protocol& protocol_of(const DataConfig& cfg) {
  const char* name = cfg.plane ? cfg.plane->factor->protocol : cfg.norb ? (cfg.norb->split == NorbSplitKind::azimuth     ? "norb-paper-azimuth"
                                 : cfg.norb->split == NorbSplitKind::elevation ? "norb-paper-elevation"
                                                                               : "norb-full")
                     : cfg.test_elevations.count > 0 ? "elevation-extrapolation"
                                                     : "azimuth-window";
  for (const Protocol& p : protocol_registry())
    if (p.name == std::string(name)) return p;
  throw std::logic_error(std::string("protocol_of: '") + name + "' is not registered");
}

Dataset make_dataset(const DataConfig& cfg) { return protocol_of(cfg).make(cfg); }

ShapeSet parse_shapes(const std::string& v) {
  if (v == "seed") return ShapeSet::seed;
  if (v == "asym") return ShapeSet::asym;
  throw FlagError("shapes", v, "unknown shape set (expected seed, asym)");
}

// smallNORB's files carry its class numbers (animal, human, plane, truck, car).
const char* class_name(const DataConfig& cfg, int cls) {
  return cfg.norb ? kNorbClassNames[cls] : class_name(cfg.shapes, cls);
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
