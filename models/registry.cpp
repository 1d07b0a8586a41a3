#include "models/registry.h"

#include <algorithm>
#include <mutex>

#include "models/baselines.h"
#include "models/capsnet.h"
#include "models/cnn.h"
#include "models/convcaps.h"
#include "models/dr.h"
#include "models/numbers.h"

namespace vg {

// The one list of models: a line per model, its entry from its own file.
const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> models = {
      caps_entry(), cnn_entry(), cnn_paper_entry(), nn1_entry(), linear_entry(), dr_entry(), convcaps_entry(),
  };
  return models;
}

const std::vector<const ModelOption*>& model_options() {
  static const std::vector<const ModelOption*> options = [] {
    std::vector<const ModelOption*> all;
    for (const ModelEntry& e : model_registry())
      for (const ModelOption* o : e.options)
        if (std::find(all.begin(), all.end(), o) == all.end()) all.push_back(o);
    return all;
  }();
  return options;
}

const ModelOption* find_option(const std::string& name) {
  for (const ModelOption* o : model_options())
    if (name == o->name) return o;
  return nullptr;
}

std::string option_value(const ModelOptions& opts, const ModelOption& o) {
  const auto it = opts.find(o.name);
  return it != opts.end() ? it->second : o.default_value;
}

// Numbers by the command line's one rule (models/numbers.h).
long long read_integer(const ModelOptions& opts, const ModelOption& o) {
  const std::string v = option_value(opts, o);
  long long x = 0;
  if (const std::string why = whole_in(v, (long long)o.lo, (long long)o.hi, &x); !why.empty())
    throw ModelOptionError(o.name, v, why);
  return x;
}

double read_real(const ModelOptions& opts, const ModelOption& o) {
  const std::string v = option_value(opts, o);
  double x = 0;
  if (const std::string why = real_in(v, o.lo, o.hi, o.lo_open, /*single=*/true, &x); !why.empty())
    throw ModelOptionError(o.name, v, why);
  return x;
}

std::string read_choice(const ModelOptions& opts, const ModelOption& o) {
  const std::string v = option_value(opts, o);
  std::string list;
  for (const char* c : o.choices) {
    if (c == nullptr) break;
    if (v == c) return v;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw ModelOptionError(o.name, v, "expected one of " + list);
}

void check_shape(const std::string& name, const ImageShape& shape, int max_classes) {
  if (shape.channels < 1 || shape.side < 1) throw ShapeError(name, shape, "an image needs a channel and a pixel");
  if (shape.classes < 2) throw ShapeError(name, shape, "a classifier needs 2 classes at least");
  if (shape.classes > max_classes)
    throw ShapeError(name, shape, "at most " + std::to_string(max_classes) + " class capsules");
  if (shape.pixels() > (size_t(1) << 24)) throw ShapeError(name, shape, "more than 2^24 floats per image");
}

namespace {

// Does `name` (from --models) name `entry`? A registry name ending in N takes digits there.
bool matches(const ModelEntry& e, const std::string& name) {
  const std::string n = e.name;
  if (n.size() > 1 && n.back() == 'N') {
    const std::string stem = n.substr(0, n.size() - 1);
    if (name == stem) return true;
    if (name.size() <= stem.size() || name.compare(0, stem.size(), stem) != 0) return false;
    for (size_t k = stem.size(); k < name.size(); ++k)
      if (name[k] < '0' || name[k] > '9') return false;
    return true;
  }
  return name == n;
}

}  // namespace

const ModelEntry* find_model(const std::string& name) {
  for (const ModelEntry& e : model_registry())
    if (matches(e, name)) return &e;
  return nullptr;
}

std::string model_names() {
  std::string list;
  for (const ModelEntry& e : model_registry()) {
    std::string n = e.name;
    if (n.back() == 'N') list += (list.empty() ? "" : ", ") + n.substr(0, n.size() - 1);
    list += (list.empty() ? "" : ", ") + n;
  }
  return list;
}

const std::vector<std::string>& default_models() {
  static const std::vector<std::string> models{"caps", "cnn"};
  return models;
}

namespace {
const ModelEntry& entry(const std::string& name) {
  const ModelEntry* e = find_model(name);
  if (e == nullptr) throw std::invalid_argument("unknown model '" + name + "' (expected " + model_names() + ")");
  return *e;
}
}  // namespace

const char* size_option(const std::string& name) {
  const ModelEntry* e = find_model(name);
  if (e == nullptr || e->size_option == nullptr) return nullptr;
  const std::string n = e->name;
  const bool numbered = n.back() == 'N' && name.size() >= n.size();  // the name carries the size
  return numbered ? nullptr : e->size_option->name;
}

ModelOptions model_options_of(const std::string& name, const ModelOptions& given) {
  const ModelEntry& e = entry(name);
  ModelOptions out;
  for (const ModelOption* o : e.options) out[o->name] = option_value(given, *o);
  for (const auto& [o, v] : e.defaults)
    if (given.count(o) == 0) out[o] = v;
  return out;
}

std::shared_ptr<const ModelPlan> model_plan(const std::string& name, const ModelOptions& given, const ImageShape& shape) {
  const ModelEntry& e = entry(name);
  const ModelOptions opts = model_options_of(name, given);
  // A run checks its models, sizes them for the memory check (again for each
  // option it might blame) and builds them, a sweep's trainings on several
  // threads: each configuration is parsed once, and its plan shared.
  std::string key = name + '\n' + shape.text();
  for (const auto& [o, v] : opts) key += '\n' + o + '=' + v;
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const ModelPlan>> plans;
  const std::lock_guard lock(mutex);
  std::shared_ptr<const ModelPlan>& plan = plans[key];
  if (plan == nullptr) {
    try {
      plan = e.plan(name, opts, shape);
    } catch (...) {
      plans.erase(key);
      throw;
    }
  }
  return plan;
}

size_t model_param_count(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return model_plan(name, opts, shape)->param_count();
}

size_t model_activation_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return model_plan(name, opts, shape)->activation_floats();
}

size_t model_step_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape, int threads) {
  return model_plan(name, opts, shape)->step_floats(threads);
}

void check_model(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  (void)model_plan(name, opts, shape);
}

std::string option_ignored(const std::string& name, const std::string& option, const ModelOptions& given) {
  const ModelEntry& e = entry(name);
  if (e.size_option != nullptr && option == e.size_option->name && size_option(name) == nullptr)
    return "model '" + name + "' has its size in its name";
  const ModelOption* o = find_option(option);
  if (o == nullptr || o->ignored == nullptr) return "";
  return o->ignored(name, model_options_of(name, given), given);
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& opts, int max_batch,
                                  const ImageShape& shape) {
  return model_plan(name, opts, shape)->make(max_batch);
}

}  // namespace vg
