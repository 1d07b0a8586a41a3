// The source registry, and a configuration's source.
#include "data/source.h"

#include <algorithm>
#include <stdexcept>

#include "data/dataset.h"

namespace vg {

const std::vector<Source>& source_registry() {
  static const std::vector<Source> registry = {
      synthetic_source(),
      norb_source(),
      toys_source(),
      fashion_mnist_source(),
      idx_source(),
  };
  return registry;
}

const Source& source_named(const std::string& name) {
  for (const Source& s : source_registry())
    if (name == s.name) return s;
  throw std::logic_error("source_named: '" + name + "' is not registered");
}

const Source& source_of(const DataConfig& cfg) {
  for (const Source& s : source_registry())
    if (s.holds(cfg)) return s;
  throw std::logic_error("source_of: no registered source holds this configuration");
}

ImageShape image_shape(const DataConfig& cfg) { return source_of(cfg).shape(cfg); }

bool Source::takes_dir() const { return std::string(name).ends_with(':'); }

bool Source::reads(const std::string& data_flag) const {
  return takes_dir() ? data_flag.starts_with(name) : data_flag == name;
}

std::string Source::form() const { return takes_dir() ? std::string(name) + "DIR" : std::string(name); }

std::string Source::record() const { return takes_dir() ? std::string(name, std::string(name).size() - 1) : name; }

}  // namespace vg
