// The capsule layers of models/caps_layers.h on their own: the class layer's
// backward against central differences in both vote forms (the seed's
// per-child W and the paper's shared W with coordinate addition), the
// gradient contract (backward overwrites), and where coordinate addition
// puts a child's coordinates.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "models/caps_layers.h"
#include "gradcheck.h"
#include "test_util.h"

namespace vg {
namespace {

// A class layer with its inputs held as tensors of the same ParamSet, so one
// finite-difference check covers the weights and the inputs' gradients alike.
struct ClassLayerCase {
  ClassCapsShape s;
  EmConfig cfg;
  int B = 3;
  ParamSet p;
  int poses = -1, a_logit = -1;
  ClassCaps layer;
  std::vector<float> c_mu, c_a;  // the objective's fixed coefficients

  ClassLayerCase(const ClassCapsShape& shape, const EmConfig& c, std::vector<float> coords, CoordPlace place)
      : s(shape), cfg(c),
        layer(shape, c, *pose_matmul_for(Isa::scalar), *conv_votes_for(Isa::scalar), *em_routing_for(Isa::scalar),
              std::move(coords), place) {
    poses = p.add("in.poses", size_t(B) * s.I() * kPoseDim);
    a_logit = p.add("in.a_logit", size_t(B) * s.I());
    layer.declare(p, "class");
    p.allocate();
    layer.size_for(B);
    std::mt19937 rng(7);
    std::normal_distribution<float> n(0.f, 1.f);
    for (float& v : p.values()) v = n(rng);
    // Betas near the cost's scale, as training finds them: activations away from 0 and 1.
    for (int j = 0; j < s.J; ++j) p.value(layer.beta_a)[j] = 8.f + 0.5f * n(rng), p.value(layer.beta_v)[j] = 0.2f * n(rng);
    for (int t : {poses, layer.w}) {  // moderate votes: variances well above the floor
      for (size_t k = 0; k < p.tensor(t).size; ++k) p.value(t)[k] *= 0.5f;
    }
    c_mu.resize(size_t(B) * s.J * kPoseDim);
    c_a.resize(size_t(B) * s.J);
    for (float& v : c_mu) v = n(rng);
    for (float& v : c_a) v = n(rng);
  }
  // sum c_mu mu + sum c_a a; `scale`: the sum of the terms' magnitudes, which
  // bounds the float rounding of the objective (its terms cancel, so |L| does not).
  double objective(double* scale = nullptr) {
    layer.forward(p.value(poses), p.value(a_logit), p, B, nullptr);
    double L = 0, S = 0;
    for (size_t k = 0; k < c_mu.size(); ++k) L += double(c_mu[k]) * layer.mu()[k], S += std::fabs(c_mu[k] * layer.mu()[k]);
    for (size_t k = 0; k < c_a.size(); ++k) L += double(c_a[k]) * layer.a()[k], S += std::fabs(c_a[k] * layer.a()[k]);
    if (scale) *scale = S;
    return L;
  }
  // The analytic gradient of objective() in p's flat layout.
  std::vector<float> gradient() {
    objective();
    layer.backward(p.grad(poses), p.grad(a_logit), c_mu.data(), c_a.data(), p, B, nullptr);
    return p.grads();
  }
};

std::vector<float> centre_coords(int H, int W) {
  std::vector<float> c;
  for (int y = 0; y < H; ++y) c.push_back((y + 0.5f) / H);
  for (int x = 0; x < W; ++x) c.push_back((x + 0.5f) / W);
  return c;
}

TEST(CapsLayers, ClassCapsFullBackwardMatchesFiniteDifferencesInBothVoteForms) {
  struct Form {
    const char* name;
    ClassCapsShape s;
    bool coords;
    CoordPlace place;
  };
  const Form forms[] = {
      {"per-child W (the seed's)", {1, 1, 6, 3, ClassVotes::per_child}, false, CoordPlace::paper},
      {"shared W, paper's coordinates", {3, 2, 2, 4, ClassVotes::shared}, true, CoordPlace::paper},
      {"shared W, official coordinates", {2, 3, 2, 3, ClassVotes::shared}, true, CoordPlace::official},
      {"shared W, no coordinates", {2, 2, 3, 3, ClassVotes::shared}, false, CoordPlace::paper},
  };
  for (const Form& f : forms)
    for (int iters : {1, 2, 3}) {
      EmConfig cfg;
      cfg.grad = EmGrad::full;
      cfg.iters = iters;
      cfg.lambda = 0.5f;
      ClassLayerCase c(f.s, cfg, f.coords ? centre_coords(f.s.H, f.s.W) : std::vector<float>{}, f.place);
      SCOPED_TRACE(std::string(f.name) + ", " + std::to_string(iters) + " iterations");
      const std::vector<float> g = c.gradient();
      double scale = 0;
      c.objective(&scale);
      test::check_tensor_gradients(c.p, g, [&] { return c.objective(); }, 1e-3, "", scale);
    }
}

TEST(CapsLayers, ClassCapsBackwardOverwritesItsGradients) {
  // The seam's contract: a second backward gives the same gradients, not twice
  // them, whatever the buffers held before.
  for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full}) {
    EmConfig cfg;
    cfg.grad = grad;
    ClassLayerCase c({2, 2, 2, 3, ClassVotes::shared}, cfg, centre_coords(2, 2), CoordPlace::paper);
    const std::vector<float> g1 = c.gradient();
    std::fill(c.p.grads().begin(), c.p.grads().end(), 1e3f);
    const std::vector<float> g2 = c.gradient();
    ASSERT_EQ(g1.size(), g2.size());
    for (size_t k = 0; k < g1.size(); ++k) ASSERT_EQ(g1[k], g2[k]) << k;
    if (grad == EmGrad::stopgrad) {  // no gradient reaches the activations, and that is written as 0
      const float* da = c.p.grad(c.a_logit);
      for (size_t k = 0; k < c.p.tensor(c.a_logit).size; ++k) ASSERT_EQ(da[k], 0.f);
    }
  }
}

TEST(CapsLayers, CoordinateAdditionAddsARowAndAColumnCoordinate) {
  // The votes with coordinates minus those without: the child at (y, x) gets
  // row[y] at one element and col[x] at another (paper: 3 and 7, the first two
  // of the right-hand column; official code: the row at 1, the column at 0),
  // nothing elsewhere.
  const ClassCapsShape s{3, 2, 2, 2, ClassVotes::shared};
  for (CoordPlace place : {CoordPlace::paper, CoordPlace::official}) {
    EmConfig cfg;
    ClassLayerCase with(s, cfg, centre_coords(3, 2), place), without(s, cfg, {}, place);
    with.objective();
    without.objective();
    const int re = place == CoordPlace::paper ? 3 : 1, ce = place == CoordPlace::paper ? 7 : 0;
    const std::vector<float> c = centre_coords(3, 2);
    for (int b = 0; b < with.B; ++b)
      for (int y = 0; y < 3; ++y)
        for (int x = 0; x < 2; ++x)
          for (int t = 0; t < 2; ++t)
            for (int j = 0; j < s.J; ++j)
              for (int e = 0; e < kPoseDim; ++e) {
                const size_t i = (size_t(y) * 2 + x) * 2 + t;
                const size_t k = ((size_t(b) * s.I() + i) * s.J + j) * kPoseDim + e;
                const float expect = e == re ? c[size_t(y)] : e == ce ? c[size_t(3 + x)] : 0.f;
                EXPECT_NEAR(with.layer.votes()[k] - without.layer.votes()[k], expect,
                            4 * FLT_EPSILON * (std::fabs(without.layer.votes()[k]) + 1))
                    << "b" << b << " y" << y << " x" << x << " e" << e;
              }
  }
}

// The convolutional layer, its inputs again held as tensors beside its own.
struct ConvLayerCase {
  ConvCapsShape s;
  int B = 2;
  ParamSet p;
  int poses = -1, a_logit = -1;
  ConvCaps layer;
  std::vector<float> c_mu, c_a;

  ConvLayerCase(const ConvCapsShape& shape, const ConvEmConfig& c)
      : s(shape), layer(shape, c, *conv_votes_for(Isa::scalar), *conv_em_routing_for(Isa::scalar)) {
    const int children = s.H * s.W * s.Ci, parents = s.Ho() * s.Wo() * s.Co;
    poses = p.add("in.poses", size_t(B) * children * kPoseDim);
    a_logit = p.add("in.a_logit", size_t(B) * children);
    layer.declare(p, "conv");
    p.allocate();
    layer.size_for(B);
    std::mt19937 rng(11);
    std::normal_distribution<float> n(0.f, 1.f);
    for (float& v : p.values()) v = n(rng);
    for (int j = 0; j < s.Co; ++j) p.value(layer.beta_a)[j] = 8.f + 0.5f * n(rng), p.value(layer.beta_v)[j] = 0.2f * n(rng);
    for (int t : {poses, layer.w})
      for (size_t k = 0; k < p.tensor(t).size; ++k) p.value(t)[k] *= 0.5f;
    c_mu.resize(size_t(B) * parents * kPoseDim);
    c_a.resize(size_t(B) * parents);
    for (float& v : c_mu) v = n(rng);
    for (float& v : c_a) v = n(rng);
  }
  double objective(double* scale = nullptr) {
    layer.forward(p.value(poses), p.value(a_logit), p, B, nullptr);
    double L = 0, S = 0;  // on the output logits, which the next layer reads
    for (size_t k = 0; k < c_mu.size(); ++k) L += double(c_mu[k]) * layer.mu()[k], S += std::fabs(c_mu[k] * layer.mu()[k]);
    for (size_t k = 0; k < c_a.size(); ++k)
      L += double(c_a[k]) * layer.a_logit()[k], S += std::fabs(c_a[k] * layer.a_logit()[k]);
    if (scale) *scale = S;
    return L;
  }
  std::vector<float> gradient() {
    objective();
    layer.backward(p.grad(poses), p.grad(a_logit), c_mu.data(), c_a.data(), p, B, nullptr);
    return p.grads();
  }
};

TEST(CapsLayers, ConvCapsOutputLogitsAreTheActivationsLogits) {
  // At the default lambda many activations round to 1 in float; their logits
  // still come from log a (to the clamp), and log sigmoid(z) gives log a back.
  ConvEmConfig cfg;
  ConvLayerCase c({5, 5, 2, 3, 3, 2}, cfg);
  c.objective();
  const float* log_a = c.layer.log_a();
  int clamped = 0, rounded_to_one = 0;
  for (size_t n = 0; n < c.c_a.size(); ++n) {
    const double z = c.layer.a_logit()[n], la = log_a[n];
    if (std::fabs(z) == ConvCaps::kMaxLogit) {
      ++clamped;
      EXPECT_GE(std::fabs(la > -0.5 ? -std::log(-std::expm1(la)) : la), ConvCaps::kMaxLogit) << n;
      continue;
    }
    rounded_to_one += c.layer.a()[n] == 1.f;
    const double log_sig = std::min(z, 0.0) - std::log1p(std::exp(-std::fabs(z)));
    EXPECT_NEAR(log_sig, la, 16 * FLT_EPSILON * std::fabs(la) + 1e-30) << n << " z " << z;
  }
  EXPECT_LT(clamped, int(c.c_a.size()));
  EXPECT_GT(rounded_to_one, 0);  // the case the logits are for
}

TEST(CapsLayers, ConvCapsFullBackwardMatchesFiniteDifferences) {
  // Stride 1 (every interior child feeds 9 windows) and 2 (up to 4), both
  // normalisations; the kernel's own tests check the routing in double.
  const ConvCapsShape shapes[] = {{4, 4, 2, 3, 3, 1}, {5, 5, 2, 2, 3, 2}};
  for (const ConvCapsShape& sh : shapes)
    for (ConvEmNorm norm : {ConvEmNorm::paper, ConvEmNorm::official})
      for (int iters : {1, 3}) {
        ConvEmConfig cfg;
        cfg.grad = EmGrad::full;
        cfg.iters = iters;
        cfg.lambda = 0.5f;
        cfg.norm = norm;
        ConvLayerCase c(sh, cfg);
        SCOPED_TRACE("stride " + std::to_string(sh.stride) + (norm == ConvEmNorm::paper ? ", paper" : ", official") +
                     ", " + std::to_string(iters) + " iterations");
        const std::vector<float> g = c.gradient();
        double scale = 0;
        c.objective(&scale);
        test::check_tensor_gradients(c.p, g, [&] { return c.objective(); }, 1e-3, "", scale);
      }
}

// Under --em-grad full the layer routes one image at a time and routes each
// again in backward (ConvCaps::reroute): its gradients must be the bits of one
// whole-batch forward and backward through the kernels, history kept for all.
TEST(CapsLayers, ConvCapsFullBackwardRoutingAgainEqualsOneWholeBatchCall) {
  ConvEmConfig cfg;
  cfg.grad = EmGrad::full;
  cfg.lambda = 0.5f;
  ConvLayerCase c({5, 5, 2, 2, 3, 2}, cfg);
  const std::vector<float> layer = c.gradient();
  const ConvVotesShape v = c.s.votes(c.B);
  const ConvVotesKernels& vk = *conv_votes_for(Isa::scalar);
  const ConvEmRoutingKernels& ek = *conv_em_routing_for(Isa::scalar);
  ParamSet& p = c.p;
  const float* M = p.value(c.poses);
  std::vector<float> V(v.v_size()), dV(v.v_size(), 0.f), mu(size_t(c.B) * v.Ho() * v.Wo() * v.Co * kPoseDim),
      a(size_t(c.B) * v.Ho() * v.Wo() * v.Co);
  vk.forward(V.data(), M, p.value(c.layer.w), nullptr, v);
  ConvEmState st;
  st.resize(v, cfg);
  conv_em_routing_forward(mu.data(), a.data(), st, V.data(), p.value(c.a_logit), p.value(c.layer.beta_a),
                          p.value(c.layer.beta_v), v, cfg, ek);
  for (size_t k = 0; k < mu.size(); ++k) ASSERT_EQ(mu[k], c.layer.mu()[k]) << k;
  for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], c.layer.a()[k]) << k;
  // The layer's dz -> da, as ConvCaps::backward takes it.
  std::vector<float> da(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    const float la = c.layer.log_a()[k], one_minus = a[k] <= 0.5f ? 1.f - a[k] : -std::expm1(la);
    da[k] = std::fabs(c.layer.a_logit()[k]) < ConvCaps::kMaxLogit ? c.c_a[k] / (a[k] * one_minus) : 0.f;
  }
  std::vector<float> g(p.grads().size(), 0.f);
  auto at = [&](int t) { return g.data() + (p.grad(t) - p.grads().data()); };
  conv_em_routing_backward(dV.data(), at(c.a_logit), at(c.layer.beta_a), at(c.layer.beta_v), 0, c.c_mu.data(),
                           da.data(), V.data(), mu.data(), a.data(), st, v, cfg, ek);
  vk.backward(at(c.poses), at(c.layer.w), dV.data(), M, p.value(c.layer.w), v);
  for (size_t k = 0; k < g.size(); ++k) ASSERT_EQ(layer[k], g[k]) << k;
}

TEST(CapsLayers, ConvCapsBackwardOverwritesItsGradients) {
  for (EmGrad grad : {EmGrad::stopgrad, EmGrad::full}) {
    ConvEmConfig cfg;
    cfg.grad = grad;
    ConvLayerCase c({5, 5, 2, 2, 3, 2}, cfg);
    const std::vector<float> g1 = c.gradient();
    std::fill(c.p.grads().begin(), c.p.grads().end(), 1e3f);
    const std::vector<float> g2 = c.gradient();
    for (size_t k = 0; k < g1.size(); ++k) ASSERT_EQ(g1[k], g2[k]) << k;
  }
}

TEST(CapsLayers, ConvCapsRefusesAWindowLargerThanItsInput) {
  EXPECT_THROW(ConvCaps({2, 2, 1, 1, 3, 1}, ConvEmConfig{}, *conv_votes_for(Isa::scalar),
                        *conv_em_routing_for(Isa::scalar)),
               std::invalid_argument);
}

}  // namespace
}  // namespace vg
