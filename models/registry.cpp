#include "models/registry.h"


#include "models/baselines.h"
#include "models/capsnet.h"
#include "models/convcaps.h"
#include "models/cnn.h"
#include "models/dr.h"
#include "models/numbers.h"

namespace vg {

const std::vector<ModelOption>& model_options() {
  static const std::vector<ModelOption> options = {
      {"cnn-hidden", OptionKind::integer, "64", "Hidden width of the model 'cnn' (136 matches the capsules)"},
      {"em-iters", OptionKind::integer, "3", "EM routing iterations"},
      {"em-lambda", OptionKind::real, "1", "Inverse temperature of the EM activation (the final one with a schedule)"},
      {"em-lambda-schedule", OptionKind::choice, "fixed",
       "fixed (--em-lambda every iteration) or official[:FINAL]: lambda_i = FINAL (1 - 0.95^(i+1)), FINAL 0.01 by default"},
      {"em-eps", OptionKind::real, "0", "Added to sum(R a) in the M-step (the seed used 1e-9)"},
      {"em-min-var", OptionKind::real, "1e-6", "Floor of the EM variances sigma^2"},
      {"em-cost-norm", OptionKind::choice, "off", "on: Gritzman's cost normalisation (cost / number of children)"},
      {"em-grad", OptionKind::choice, "stopgrad", "stopgrad (the seed's) or full (backpropagate through every EM iteration)"},
      {"em-logit", OptionKind::choice, "paper",
       "convcaps: EM activation logit: paper (lambda (beta_a - S sum_h (beta_v + ln sigma_h))) or official (capsule_em: "
       "lambda (-S (sum_h ln sigma_h^2 + 16 (ln 2pi + 1) beta_v) - 5000 beta_a))"},
      {"em-mean", OptionKind::choice, "paper",
       "convcaps: EM M-step mean: paper (the R a-weighted mean of the votes) or official (capsule_em: 0.9 of it + 0.1 of the "
       "previous iteration's, 0 before the first; the variance about that mean)"},
      {"loss", OptionKind::choice, "xent",
       "Capsule models' loss: xent (the seed's logits), spread (the paper's, on activations) or margin (Sabour et al.)"},
      {"spread-margin", OptionKind::range, "0.2:0.9", "Spread loss margin A:B, annealed linearly over training"},
      {"spread-margin-schedule", OptionKind::choice, "linear",
       "How the spread margin grows: linear (--spread-margin A to B over the training's steps) or official "
       "(capsule_em: 0.2 + 0.79 sigmoid(min(10, step / 50000 - 4)) of the global step, 0.9 only after ~400k steps)"},
      {"dr-iters", OptionKind::integer, "3", "Routing-by-agreement iterations of the model 'dr'"},
      {"recon-weight", OptionKind::real, "0.0005",
       "Weight of dr's reconstruction loss (sum of squared pixel errors, batch mean); 0: no decoder"},
      {"dropout", OptionKind::real, "0.5",
       "Dropout rate of cnn-paper's hidden layer (inverted; a mask per step from the seed; off at evaluation), 0 <= rate < 1"},
      {"dr-grad", OptionKind::choice, "full",
       "full (backpropagate through every routing iteration) or stopgrad (dr's coupling coefficients constant)"},
      {"dr-init-std", OptionKind::real, "0.5",
       "dr: standard deviation of the routing weights W_ij at initialisation (> 0; Sabour et al.'s official code: 0.1, "
       "which starts the class capsules short, where the squash is steep)"},
      {"caps-a", OptionKind::integer, "64", "convcaps: conv1's channels A (the paper's small model 64, large 32)"},
      {"caps-b", OptionKind::integer, "8", "convcaps: primary capsule types B"},
      {"caps-c", OptionKind::integer, "16", "convcaps: ConvCaps1 capsule types C (at most 64)"},
      {"caps-d", OptionKind::integer, "16", "convcaps: ConvCaps2 capsule types D (at most 64)"},
      {"caps-k", OptionKind::integer, "3", "convcaps: window K of both convolutional capsule layers (odd)"},
      {"em-norm", OptionKind::choice, "paper",
       "convcaps: E-step normalisation of the convolutional layers: paper (over every parent a child feeds) or "
       "official (capsule_em: each parent type on its own)"},
      {"coord-add", OptionKind::choice, "paper",
       "convcaps: coordinate addition: paper (receptive-field centre / image side, to pose elements 3 and 7) or "
       "official (capsule_em: (y + 0.5) / grid side, to elements 0 and 1)"},
      {"em-class-lambda", OptionKind::choice, "paper",
       "convcaps: the class layer's lambda: paper (the other layers') or official (capsule_em: a quarter of it)"},
  };
  return options;
}

std::string option_value(const ModelOptions& opts, const std::string& name) {
  if (auto it = opts.find(name); it != opts.end()) return it->second;
  for (const ModelOption& o : model_options())
    if (name == o.name) return o.default_value;
  throw std::logic_error("no model option '" + name + "'");
}

namespace {

// Numbers by the command line's one rule (models/numbers.h).
long long integer(const ModelOptions& opts, const char* name, long long lo, long long hi) {
  const std::string v = option_value(opts, name);
  long long x = 0;
  if (const std::string why = whole_in(v, lo, hi, &x); !why.empty()) throw ModelOptionError(name, v, why);
  return x;
}

double real(const ModelOptions& opts, const char* name, double lo, double hi, bool lo_open) {
  const std::string v = option_value(opts, name);
  double x = 0;
  if (const std::string why = real_in(v, lo, hi, lo_open, /*single=*/true, &x); !why.empty())
    throw ModelOptionError(name, v, why);
  return x;
}

std::string choice(const ModelOptions& opts, const char* name, std::initializer_list<const char*> valid) {
  const std::string v = option_value(opts, name);
  std::string list;
  for (const char* c : valid) {
    if (v == c) return v;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw ModelOptionError(name, v, "expected one of " + list);
}

EmConfig em_config(const ModelOptions& opts) {
  EmConfig em;
  em.iters = int(integer(opts, "em-iters", 1, 100));
  em.lambda = float(real(opts, "em-lambda", 0, 1e6, true));
  em.eps = float(real(opts, "em-eps", 0, 1, false));
  em.sigma2_min = float(real(opts, "em-min-var", 0, 1, true));
  em.grad = choice(opts, "em-grad", {"stopgrad", "full"}) == "full" ? EmGrad::full : EmGrad::stopgrad;
  em.cost_norm = choice(opts, "em-cost-norm", {"off", "on"}) == "on";
  const std::string sched = option_value(opts, "em-lambda-schedule");
  if (sched == "official" || sched.rfind("official:", 0) == 0) {
    em.lambda_schedule = true;
    em.lambda = 0.01f;
    if (sched != "official") {
      ModelOptions final_value{{"em-lambda-schedule", sched.substr(9)}};
      try {
        em.lambda = float(real(final_value, "em-lambda-schedule", 0, 1e6, true));
      } catch (const ModelOptionError& e) {
        throw ModelOptionError("em-lambda-schedule", sched, "the final lambda after 'official:' " + e.why);
      }
    }
  } else if (sched != "fixed") {
    throw ModelOptionError("em-lambda-schedule", sched, "expected fixed, official or official:FINAL");
  }
  return em;
}

LossConfig loss_config(const ModelOptions& opts) {
  LossConfig loss;
  const std::string name = option_value(opts, "loss");
  try {
    loss.kind = parse_loss(name);
  } catch (const std::invalid_argument& e) {
    throw ModelOptionError("loss", name, e.what());
  }
  const std::string m = option_value(opts, "spread-margin");
  const auto colon = m.find(':');
  if (colon == std::string::npos) throw ModelOptionError("spread-margin", m, "expected A:B, e.g. 0.2:0.9");
  ModelOptions ends{{"spread-margin", m.substr(0, colon)}};
  try {
    loss.spread_from = float(real(ends, "spread-margin", 0, 1, false));
    ends["spread-margin"] = m.substr(colon + 1);
    loss.spread_to = float(real(ends, "spread-margin", 0, 1, false));
  } catch (const ModelOptionError&) {
    throw ModelOptionError("spread-margin", m, "expected A:B with 0 <= A <= B <= 1");
  }
  if (loss.spread_from > loss.spread_to)
    throw ModelOptionError("spread-margin", m, "the margin must grow: A <= B");
  loss.spread_schedule = choice(opts, "spread-margin-schedule", {"linear", "official"}) == "official"
                             ? SpreadSchedule::official
                             : SpreadSchedule::linear;
  return loss;
}

// "cnn" -> --cnn-hidden; "cnnN" -> N (1..65536, the bound --cnn-hidden has).
int cnn_hidden(const std::string& name, const ModelOptions& opts) {
  if (name == "cnn") return int(integer(opts, "cnn-hidden", 1, 65536));
  ModelOptions width{{"cnn-hidden", name.substr(3)}};
  try {
    return int(integer(width, "cnn-hidden", 1, 65536));
  } catch (const ModelOptionError&) {
    throw std::invalid_argument("model '" + name + "': the hidden width after 'cnn' must be a whole number from 1 to 65536");
  }
}

// The shape every model needs (ShapeError otherwise): at least one channel,
// one pixel and two classes, at most `max_classes` (capsule models route to
// at most 64 class capsules), and images whose floats an int counts.
void check_shape(const std::string& name, const ImageShape& shape, int max_classes = 1 << 20) {
  if (shape.channels < 1 || shape.side < 1) throw ShapeError(name, shape, "an image needs a channel and a pixel");
  if (shape.classes < 2) throw ShapeError(name, shape, "a classifier needs 2 classes at least");
  if (shape.classes > max_classes)
    throw ShapeError(name, shape, "at most " + std::to_string(max_classes) + " class capsules");
  if (shape.pixels() > (size_t(1) << 24)) throw ShapeError(name, shape, "more than 2^24 floats per image");
}

CapsConfig caps_config(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape, 64);
  CapsConfig c;
  c.em = em_config(opts);
  c.loss = loss_config(opts);
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  return c;
}

size_t caps_params(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  const CapsConfig c = caps_config(name, opts, shape);
  const ConvShape conv1{c.in_channels, c.image_side, c.image_side, c.conv_channels, 5, 2, 2};
  const size_t conv = size_t(conv1.weight_size()) + size_t(c.conv_channels);
  const size_t in = size_t(conv1.out_size()), prim = size_t(c.n_primary) * (kPoseDim + 1);
  return conv + in * prim + prim + size_t(c.n_primary) * c.n_classes * kPoseDim + 2 * size_t(c.n_classes);
}

std::unique_ptr<Model> make_caps(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                                 int max_batch) {
  return std::make_unique<CapsNet>(caps_config(name, opts, shape), max_batch);
}

// The seed's CNN ("cnn", "cnnN").
CnnConfig cnn_config(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape);
  CnnConfig c;
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  c.hidden = cnn_hidden(name, opts);
  return c;
}
size_t cnn_params(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return cnn_config(name, opts, shape).param_count();
}
std::unique_ptr<Model> make_cnn(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                                int max_batch) {
  return std::make_unique<Cnn>(cnn_config(name, opts, shape), max_batch);
}

// The paper's CNN baseline (models/cnn.h).
CnnConfig cnn_paper_config(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape);
  const float rate = float(real(opts, "dropout", 0, 1, false));
  if (rate >= 1) throw ModelOptionError("dropout", option_value(opts, "dropout"), "must be below 1 (1 drops every unit)");
  const CnnConfig c = CnnConfig::paper(shape.channels, rate, shape.side, shape.classes);
  if (const std::string why = c.shape_problem(); !why.empty()) throw ShapeError(name, shape, why);
  return c;
}
size_t cnn_paper_params(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return cnn_paper_config(name, opts, shape).param_count();
}
size_t cnn_paper_activations(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return cnn_paper_config(name, opts, shape).activation_floats();
}
std::unique_ptr<Model> make_cnn_paper(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                                      int max_batch) {
  return std::make_unique<Cnn>(cnn_paper_config(name, opts, shape), max_batch);
}

std::unique_ptr<Model> make_nn1(const std::string& name, const ModelOptions&, const ImageShape& shape, int max_batch) {
  check_shape(name, shape);
  return std::make_unique<NearestNeighbour>(max_batch, shape);
}
size_t nn1_params(const std::string& name, const ModelOptions&, const ImageShape& shape) {
  check_shape(name, shape);
  return 0;
}

std::unique_ptr<Model> make_linear(const std::string& name, const ModelOptions&, const ImageShape& shape,
                                   int max_batch) {
  check_shape(name, shape);
  return std::make_unique<Linear>(LossConfig{}, max_batch, shape);
}
size_t linear_params(const std::string& name, const ModelOptions&, const ImageShape& shape) {
  check_shape(name, shape);
  return shape.pixels() * size_t(shape.classes) + size_t(shape.classes);
}

// The paper's network (models/convcaps.h). Sizes are validated here, so a
// network that does not fit its input is refused before anything is built:
// an input too small for conv1 and any window is the shape's fault, one too
// small for the window asked for, --caps-k's.
ConvCapsConfig convcaps_config(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape, 64);
  ConvCapsConfig c;
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  c.A = int(integer(opts, "caps-a", 1, 4096));
  c.B = int(integer(opts, "caps-b", 1, 1024));
  c.C = int(integer(opts, "caps-c", 1, 64));
  c.D = int(integer(opts, "caps-d", 1, 64));
  c.K = int(integer(opts, "caps-k", 1, 31));
  if (c.K % 2 == 0) throw ModelOptionError("caps-k", option_value(opts, "caps-k"), "must be odd (a window has a centre)");
  if (c.conv1_side() < 1)
    throw ShapeError(name, shape, "conv1 (5x5, stride 2, no padding) needs 5 x 5 pixels");
  if (c.caps2_side() < 1)
    throw ModelOptionError("caps-k", option_value(opts, "caps-k"),
                           "too large: a " + std::to_string(c.image_side) + "x" + std::to_string(c.image_side) +
                               " input shrinks to " + std::to_string(c.conv1_side()) + " after conv1 and " +
                               std::to_string(c.caps1_side()) + " after ConvCaps1, too small for a " +
                               std::to_string(c.K) + "x" + std::to_string(c.K) + " window");
  static_cast<EmConfig&>(c.em) = em_config(opts);
  c.em.norm = choice(opts, "em-norm", {"paper", "official"}) == "official" ? ConvEmNorm::official : ConvEmNorm::paper;
  c.coords = choice(opts, "coord-add", {"paper", "official"}) == "official" ? CoordPlace::official : CoordPlace::paper;
  c.em.logit = choice(opts, "em-logit", {"paper", "official"}) == "official" ? EmLogit::official : EmLogit::paper;
  c.em.mean_carry = choice(opts, "em-mean", {"paper", "official"}) == "official" ? 0.1f : 0.f;
  c.class_lambda_scale = choice(opts, "em-class-lambda", {"paper", "official"}) == "official" ? 0.25f : 1.f;
  c.loss = loss_config(opts);
  return c;
}
size_t convcaps_params(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return convcaps_config(name, opts, shape).param_count();
}
size_t convcaps_activations(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return convcaps_config(name, opts, shape).activation_floats();
}
size_t convcaps_step_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape, int threads) {
  return convcaps_config(name, opts, shape).step_floats(threads);
}
std::unique_ptr<Model> make_convcaps(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                                     int max_batch) {
  return std::make_unique<ConvCapsNet>(convcaps_config(name, opts, shape), max_batch);
}

// dr trains the margin loss always and reads no --loss (see models/dr.h).
DrConfig dr_config(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  check_shape(name, shape, 64);
  DrConfig c;
  c.iters = int(integer(opts, "dr-iters", 1, 100));
  const std::string w = option_value(opts, "recon-weight");
  c.recon_weight = float(real(opts, "recon-weight", 0, 1e6, false));
  if (c.recon_weight == 0.f && real(opts, "recon-weight", 0, 1e6, false) != 0)
    throw ModelOptionError("recon-weight", w, "too small for a float (use 0 for no decoder)");
  c.grad = choice(opts, "dr-grad", {"full", "stopgrad"}) == "full" ? DrGrad::full : DrGrad::stopgrad;
  c.route_init_std = float(real(opts, "dr-init-std", 0, 100, true));
  c.in_channels = shape.channels;
  c.image_side = shape.side;
  c.n_classes = shape.classes;
  return c;
}
size_t dr_params(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return DrNet::param_count(dr_config(name, opts, shape));
}
std::unique_ptr<Model> make_dr(const std::string& name, const ModelOptions& opts, const ImageShape& shape,
                               int max_batch) {
  return std::make_unique<DrNet>(dr_config(name, opts, shape), max_batch);
}

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

// One line per model.
const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> models = {
      {"caps", "matrix capsules with EM routing (the seed's)",
       {"em-iters", "em-lambda", "em-lambda-schedule", "em-eps", "em-min-var", "em-cost-norm", "em-grad", "loss", "spread-margin",
        "spread-margin-schedule"},
       make_caps, caps_params, nullptr, false, nullptr,
       // The seed's stop-gradient is not forward's gradient; after 3 full
       // iterations a variance can sit at its floor, where the loss bends on a
       // 1e-4 scale (GradientCheck.CapsNetFullBackprop... checks that case).
       {{"em-grad", "full"}, {"em-iters", "2"}}},
      {"cnnN", "CNN baseline; 'cnn' has --cnn-hidden units, 'cnnN' N", {"cnn-hidden"}, make_cnn, cnn_params, "cnn-hidden"},
      {"cnn-paper",
       "the paper's CNN baseline (Hinton, Sabour & Frosst 2018): conv 5x5 32 + 2x2 max-pool, conv 5x5 64 + 2x2 max-pool, "
       "FC 1024 + --dropout, SAME padding (32 -> 16 -> 8 at 32 x 32); 4,252,549 parameters (4,253,349 with two input "
       "channels)",
       {"dropout"}, make_cnn_paper, cnn_paper_params, nullptr, false, cnn_paper_activations},
      {"nn1", "1-nearest-neighbour on raw pixels (no training): a yardstick", {}, make_nn1, nn1_params, nullptr, true},
      {"linear", "softmax regression on raw pixels (1024 -> 5 at 32 x 32): a yardstick", {}, make_linear, linear_params},
      {"dr", "vector capsules with dynamic routing and a reconstruction decoder (Sabour et al. 2017)", {"dr-iters", "recon-weight", "dr-grad", "dr-init-std"}, make_dr, dr_params,
       nullptr, false, nullptr, {{"dr-grad", "full"}}},
      {"convcaps",
       "the paper's capsule network (Hinton, Sabour & Frosst 2018): conv1 5x5/2 A, 1x1 primary capsules B, "
       "ConvCaps K/2 C and K/1 D with EM routing over windows, class capsules with coordinate addition; "
       "67,154 parameters at the defaults and 32 x 32 (68,754 with two input channels)",
       {"caps-a", "caps-b", "caps-c", "caps-d", "caps-k", "em-norm", "coord-add", "em-iters", "em-lambda",
        "em-lambda-schedule", "em-eps", "em-min-var", "em-cost-norm", "em-grad", "em-logit", "em-mean",
        "em-class-lambda", "loss", "spread-margin", "spread-margin-schedule"},
       make_convcaps, convcaps_params, "caps-a", false, convcaps_activations,
       // A small network keeps the check fast; the full backward through 2 iterations as caps's.
       {{"em-grad", "full"}, {"em-iters", "2"}, {"caps-a", "4"}, {"caps-b", "2"}, {"caps-c", "3"}, {"caps-d", "3"}},
       // The paper's recipe (section 3 and its smallNORB runs): spread loss, the
       // gradient through every EM iteration, and the lambda schedule of the
       // official capsule_em code (the paper gives no schedule). docs/models.md.
       {{"loss", "spread"}, {"em-grad", "full"}, {"em-lambda-schedule", "official"}},
       convcaps_step_floats},
  };
  return models;
}

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
  return numbered ? nullptr : e->size_option;
}

ModelOptions model_options_of(const std::string& name, const ModelOptions& given) {
  const ModelEntry& e = entry(name);
  ModelOptions out;
  for (const char* o : e.options) out[o] = option_value(given, o);
  for (const auto& [o, v] : e.defaults)
    if (given.count(o) == 0) out[o] = v;
  return out;
}

size_t model_param_count(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  return entry(name).param_count(name, model_options_of(name, opts), shape);
}

size_t model_activation_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  const ModelEntry& e = entry(name);
  return e.activation_floats ? e.activation_floats(name, model_options_of(name, opts), shape) : 0;
}

size_t model_step_floats(const std::string& name, const ModelOptions& opts, const ImageShape& shape, int threads) {
  const ModelEntry& e = entry(name);
  return e.step_floats ? e.step_floats(name, model_options_of(name, opts), shape, threads) : 0;
}

void check_model(const std::string& name, const ModelOptions& opts, const ImageShape& shape) {
  (void)model_param_count(name, opts, shape);
}

std::string option_ignored(const std::string& name, const std::string& option, const ModelOptions& given) {
  const ModelEntry& e = entry(name);
  if (e.size_option != nullptr && option == e.size_option && size_option(name) == nullptr)
    return "model '" + name + "' has its size in its name";
  const ModelOptions opts = model_options_of(name, given);
  if (option == "em-lambda" && option_value(opts, "em-lambda-schedule") != "fixed") {
    const std::string sched = option_value(opts, "em-lambda-schedule");
    if (given.count("em-lambda-schedule") == 0)
      return "model '" + name + "' runs --em-lambda-schedule '" + sched +
             "' by default, which sets lambda (add --em-lambda-schedule fixed, or give the final one as official:FINAL)";
    return "--em-lambda-schedule '" + sched + "' sets lambda (give the final one as official:FINAL)";
  }
  if ((option == "spread-margin" || option == "spread-margin-schedule") && option_value(opts, "loss") != "spread")
    return "--loss '" + option_value(opts, "loss") + "' has no margin (it applies with --loss spread)";
  if (option == "spread-margin" && option_value(opts, "spread-margin-schedule") == "official")
    return "--spread-margin-schedule 'official' sets the margin (0.2 + 0.79 sigmoid(min(10, step / 50000 - 4)))";
  return "";
}

std::unique_ptr<Model> make_model(const std::string& name, const ModelOptions& opts, int max_batch,
                                  const ImageShape& shape) {
  return entry(name).make(name, model_options_of(name, opts), shape, max_batch);
}

}  // namespace vg
