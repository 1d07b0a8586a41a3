// The dynamic-routing model `dr`: every kernel variant against the scalar
// reference, the layers' and the whole model's gradients against central
// differences (full and stop-gradient routing, squash at tiny norms, the
// decoder), routing invariants, the registry's options, and a short training run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/rng.h"
#include "data/dataset.h"
#include "harness/train.h"
#include "kernels/dr_routing.h"
#include "kernels/elementwise.h"
#include "models/dr.h"
#include "models/registry.h"
#include "tests/gradcheck.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::sample_images;

constexpr int H = kDrOutDim, K = kDrInDim;

std::vector<float> absv(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  std::transform(x.begin(), x.end(), y.begin(), [](float v) { return std::fabs(v); });
  return y;
}

// ---- Every SIMD variant against the scalar reference -------------------------------

class DrVariant : public ::testing::TestWithParam<int> {};

// Tolerance of a sum of `terms` products: terms * eps * sum |products| (the
// magnitude from the scalar kernel run on absolute values), plus a little for
// the fused multiply-adds' different rounding.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& mag,
                  double terms, const char* what, int B, int I, int J) {
  for (size_t q = 1; q < want.size(); ++q)  // [0] is the misalignment pad
    ASSERT_NEAR(got[q], want[q], (terms + 2) * FLT_EPSILON * mag[q] + 1e-30)
        << what << " B=" << B << " I=" << I << " J=" << J << " at " << q - 1;
}

TEST_P(DrVariant, MatchesScalarAtTileSizesAndMisalignedPointers) {
  int n = 0;
  const DrRoutingKernels& k = dr_routing_variants(&n)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  const DrRoutingKernels& r = *dr_routing_for(Isa::scalar);
  // The vector axis is the capsule dimension (16, whole); sizes around tiles
  // of 1, 4, 8 and 16 along b, i and j, and 10 * tile + 3.
  for (int B : {1, 3, 4, 5, 16, 17, 43})
    for (int I : {1, 7, 8, 16, 17})
      for (int J : {1, 5, 8, 9, 64}) {
        if (B * I * J > 20000) continue;
        const size_t nu = size_t(B) * I * K + 1, nw = size_t(I) * J * K * H + 1, nh = size_t(B) * I * J * H + 1,
                     nl = size_t(B) * I * J + 1, nv = size_t(B) * J * H + 1;
        const uint64_t tag = uint64_t(B) * 10007 + I * 101 + J;
        auto u = test::randn(nu, tag), W = test::randn(nw, tag + 1), G = test::randn(nh, tag + 2),
             L = test::randn(nl, tag + 3, 2.f), V = test::randn(nv, tag + 4), dS = test::randn(nv, tag + 5);
        const auto au = absv(u), aW = absv(W), aG = absv(G), aV = absv(V), adS = absv(dS);
        // Every pointer one float past an allocation: misaligned for any vector.
        auto run = [&](const DrRoutingKernels& kk, int which, std::vector<float>& o1, std::vector<float>& o2,
                       const std::vector<float>& x_u, const std::vector<float>& x_W, const std::vector<float>& x_G,
                       const std::vector<float>& x_V, const std::vector<float>& x_dS) {
          switch (which) {
            case 0: kk.predict(o1.data() + 1, x_u.data() + 1, x_W.data() + 1, B, I, J); break;
            case 1: kk.predict_backward(o1.data() + 1, o2.data() + 1, x_G.data() + 1, x_u.data() + 1, x_W.data() + 1, B, I, J); break;
            case 2: kk.agree(o1.data() + 1, L.data() + 1, x_G.data() + 1, x_V.data() + 1, B, I, J); break;
            case 3: kk.agree_backward(o1.data() + 1, o2.data() + 1, L.data() + 1, x_G.data() + 1, x_V.data() + 1, B, I, J); break;
          }
          (void)x_dS;
        };
        {  // predictions: 8-term dot products
          std::vector<float> a(nh), b(nh), m(nh), d1, d2;
          run(r, 0, a, d1, u, W, G, V, dS);
          run(k, 0, b, d2, u, W, G, V, dS);
          run(r, 0, m, d1, au, aW, aG, aV, adS);
          expect_close(b, a, m, K, "predict", B, I, J);
        }
        {  // du sums 16 J terms, dW sums B terms (from 0.5, to test accumulation)
          std::vector<float> du_r(nu, .5f), dW_r(nw, .5f), du_v(du_r), dW_v(dW_r), du_m(nu, .5f), dW_m(nw, .5f);
          run(r, 1, du_r, dW_r, u, W, G, V, dS);
          run(k, 1, du_v, dW_v, u, W, G, V, dS);
          run(r, 1, du_m, dW_m, au, aW, aG, aV, adS);
          expect_close(du_v, du_r, du_m, 16.0 * J + 1, "predict_backward du", B, I, J);
          expect_close(dW_v, dW_r, dW_m, B + 1, "predict_backward dW", B, I, J);
        }
        {  // agreement: 16-term dot products added to the logits
          std::vector<float> a(nl), b(nl), m(nl), d1, d2;
          run(r, 2, a, d1, u, W, G, V, dS);
          run(k, 2, b, d2, u, W, G, V, dS);
          auto aL = absv(L);
          r.agree(m.data() + 1, aL.data() + 1, aG.data() + 1, aV.data() + 1, B, I, J);
          expect_close(b, a, m, H + 1, "agree", B, I, J);
        }
        {  // agreement backward: dv sums I terms, du_hat one
          std::vector<float> dv_r(nv, .5f), dh_r(nh, .5f), dv_v(dv_r), dh_v(dh_r), dv_m(nv, .5f), dh_m(nh, .5f);
          run(r, 3, dv_r, dh_r, u, W, G, V, dS);
          run(k, 3, dv_v, dh_v, u, W, G, V, dS);
          auto aL = absv(L);
          r.agree_backward(dv_m.data() + 1, dh_m.data() + 1, aL.data() + 1, aG.data() + 1, aV.data() + 1, B, I, J);
          expect_close(dv_v, dv_r, dv_m, I + 1, "agree_backward dv", B, I, J);
          expect_close(dh_v, dh_r, dh_m, 2, "agree_backward duhat", B, I, J);
        }
        {  // combination: softmax (the same scalar exps), then I-term sums with c in (0, 1]
          std::vector<float> s_r(nv), c_r(nl), s_v(nv), c_v(nl), s_m(nv), c_m(nl);
          r.combine(s_r.data() + 1, c_r.data() + 1, L.data() + 1, G.data() + 1, B, I, J);
          k.combine(s_v.data() + 1, c_v.data() + 1, L.data() + 1, G.data() + 1, B, I, J);
          r.combine(s_m.data() + 1, c_m.data() + 1, L.data() + 1, aG.data() + 1, B, I, J);
          const std::vector<float> ones(nl, 1.f);
          expect_close(c_v, c_r, ones, 1, "combine c", B, I, J);
          expect_close(s_v, s_r, s_m, I + 2, "combine s", B, I, J);
          // Backward, with and without the softmax's logit gradient.
          for (bool logits : {false, true}) {
            std::vector<float> dh_r(nh, .5f), dl_r(nl, .5f), dh_v(dh_r), dl_v(dl_r), dh_m(nh, .5f);
            r.combine_backward(dh_r.data() + 1, logits ? dl_r.data() + 1 : nullptr, dS.data() + 1, c_r.data() + 1,
                               G.data() + 1, B, I, J);
            k.combine_backward(dh_v.data() + 1, logits ? dl_v.data() + 1 : nullptr, dS.data() + 1, c_r.data() + 1,
                               G.data() + 1, B, I, J);
            std::vector<float> dl_m(nl, 0.f);
            r.combine_backward(dh_m.data() + 1, nullptr, adS.data() + 1, c_r.data() + 1, aG.data() + 1, B, I, J);
            expect_close(dh_v, dh_r, dh_m, 2, "combine_backward duhat", B, I, J);
            if (!logits) {
              for (size_t q = 1; q < nl; ++q) ASSERT_EQ(dl_v[q], .5f) << "dlogits written when null";
              continue;
            }
            // dl_ij = c_ij (dc_ij - sum_k c_ik dc_ik), dc a 16-term dot product:
            // the error is bounded by c_ij (e_ij + sum_k c_ik e_ik) + 0.5 eps,
            // e_ik = 18 eps sum_h |uhat||ds|.
            for (int b = 0; b < B; ++b)
              for (int i = 0; i < I; ++i) {
                const size_t row = size_t(b) * I + i;
                std::vector<double> e(J);
                double ce = 0;
                for (int j = 0; j < J; ++j) {
                  double m = 0;
                  for (int h = 0; h < H; ++h) m += double(aG[1 + (row * J + j) * H + h]) * adS[1 + (size_t(b) * J + j) * H + h];
                  e[j] = (H + 2) * FLT_EPSILON * m;
                  ce += c_r[1 + row * J + j] * e[j];
                }
                for (int j = 0; j < J; ++j) {
                  const size_t q = 1 + row * J + j;
                  ASSERT_NEAR(dl_v[q], dl_r[q], 2 * c_r[q] * (e[j] + ce) + 2 * FLT_EPSILON)
                      << "combine_backward dlogits B=" << B << " I=" << I << " J=" << J;
                }
              }
          }
        }
      }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, DrVariant, ::testing::Range(0, test::variant_count(dr_routing_variants)),
                         test::variant_names(dr_routing_variants));

// ---- Layers against central differences ----------------------------------------------

// Central difference of f along coordinate q of x, in double from float evaluations.
double central(std::vector<float>& x, size_t q, float h, const std::function<double()>& f) {
  const float x0 = x[q];
  x[q] = x0 + h;
  const double fp = f();
  x[q] = x0 - h;
  const double fm = f();
  x[q] = x0;
  return (fp - fm) / (double(x0 + h) - double(x0 - h));
}

TEST(DrSquash, BackwardMatchesFiniteDifferencesFromTinyToLargeNorms) {
  // f = <g, squash(s)>. The step is relative to |s|; the difference quotient's
  // float noise is ~ eps |f| / h, and its curvature error ~ h^2 |f'''|, both
  // well under 1e-3 of |f'| at h = 1e-3 |s| (derivatives of squash scale as 1/|s|).
  for (int dim : {K, H})
    for (double norm : {1e-12, 1e-6, 1e-3, 0.1, 0.7, 1.0, 3.0, 50.0}) {
      auto s = test::randn(size_t(dim), uint64_t(dim * 1000 + std::log10(norm) * 7 + 50));
      const double n0 = std::sqrt(test::dot(s, s));
      for (auto& x : s) x = float(x * norm / n0);
      const auto g = test::randn(size_t(dim), 99);
      std::vector<float> v(dim), ds(dim);
      dr_squash_backward(ds.data(), g.data(), s.data(), 1, dim);
      auto f = [&] {
        dr_squash_forward(v.data(), s.data(), 1, dim);
        return test::dot(v, g);
      };
      double gmax = 0;
      for (float d : ds) gmax = std::max(gmax, double(std::fabs(d)));
      for (int q = 0; q < dim; ++q) {
        const double fd = central(s, size_t(q), float(1e-3 * norm), f);
        EXPECT_NEAR(fd, ds[q], 2e-3 * gmax) << "dim " << dim << " |s| " << norm << " coord " << q;
      }
      // |squash(s)| < 1 (where float can tell |s|^2 / (1 + |s|^2) from 1).
      dr_squash_forward(v.data(), s.data(), 1, dim);
      EXPECT_LT(std::sqrt(test::dot(v, v)), 1.0);
    }
}

TEST(DrSquash, ZeroAndDenormalInputsGiveFiniteValuesAndGradients) {
  for (float x : {0.f, 1e-30f, 1e-40f, -1e-44f}) {
    std::vector<float> s(H, x), v(H), ds(H), g(H, 1.f);
    s[3] = 0.f;
    dr_squash_forward(v.data(), s.data(), 1, H);
    dr_squash_backward(ds.data(), g.data(), s.data(), 1, H);
    for (int h = 0; h < H; ++h) {
      EXPECT_TRUE(std::isfinite(v[h]) && std::isfinite(ds[h])) << x;
      EXPECT_LE(std::fabs(v[h]), std::fabs(s[h])) << x;  // squash shrinks: |v| = |s|^2 / (1 + |s|^2)
    }
    if (x == 0.f) {
      for (int h = 0; h < H; ++h) EXPECT_EQ(ds[h], 0.f);  // the Jacobian at 0 is 0
    }
  }
}

TEST(DrPredict, ReferenceBackwardMatchesFiniteDifferences) {
  // f = <G, W u> is bilinear: central differences are exact up to rounding.
  const int B = 3, I = 4, J = 5;
  auto u = test::randn(size_t(B) * I * K, 1), W = test::randn(size_t(I) * J * K * H, 2),
       G = test::randn(size_t(B) * I * J * H, 3);
  std::vector<float> uh(G.size()), du(u.size(), 0.f), dW(W.size(), 0.f);
  dr_predict_backward_f32__scalar(du.data(), dW.data(), G.data(), u.data(), W.data(), B, I, J);
  auto f = [&] {
    dr_predict_f32__scalar(uh.data(), u.data(), W.data(), B, I, J);
    return test::dot(uh, G);
  };
  for (size_t q = 0; q < u.size(); q += 3) EXPECT_NEAR(central(u, q, 1e-2f, f), du[q], 2e-3 * (1 + std::fabs(du[q])));
  for (size_t q = 0; q < W.size(); q += 37) EXPECT_NEAR(central(W, q, 1e-2f, f), dW[q], 2e-3 * (1 + std::fabs(dW[q])));
}

// f(u_hat) = <Gv, v> + <Gl, |v|> through the whole routing.
struct RoutingProbe {
  int B, I, J, iters;
  std::vector<float> uhat, Gv, Gl, v, len;
  DrState st;
  RoutingProbe(int B_, int I_, int J_, int iters_, float scale)
      : B(B_), I(I_), J(J_), iters(iters_), uhat(test::randn(size_t(B_) * I_ * J_ * H, 21, scale)),
        Gv(test::randn(size_t(B_) * J_ * H, 22)), Gl(test::randn(size_t(B_) * J_, 23)),
        v(size_t(B_) * J_ * H), len(size_t(B_) * J_) {}
  double f() {
    dr_routing_forward(v.data(), len.data(), st, uhat.data(), B, I, J, iters, *dr_routing_for(Isa::scalar));
    return test::dot(v, Gv) + test::dot(len, Gl);
  }
  std::vector<float> grad(DrGrad g) {
    f();
    std::vector<float> d(uhat.size(), 0.f);
    dr_routing_backward(d.data(), Gv.data(), Gl.data(), uhat.data(), st, B, I, J, iters, g, *dr_routing_for(Isa::scalar));
    return d;
  }
};

TEST(DrRouting, FullBackwardThroughEveryIterationMatchesFiniteDifferences) {
  // Prediction scales 0.05 (squash near 0, where routing barely moves c),
  // 0.3 and 1 (lengths near 1, c far from uniform). Tolerance: 1e-2 of the
  // gradient's largest entry (float forward, h = 2e-3: the quotient's noise is
  // ~ eps |f| / h ~ 1e-4 |f|, its curvature error ~ h^2).
  for (int iters : {1, 2, 3, 5})
    for (float scale : {0.05f, 0.3f, 1.f}) {
      RoutingProbe p(2, 6, 5, iters, scale);
      const auto g = p.grad(DrGrad::full);
      double gmax = 0;
      for (float x : g) gmax = std::max(gmax, double(std::fabs(x)));
      ASSERT_GT(gmax, 0.0);
      for (size_t q = 0; q < p.uhat.size(); q += 7) {
        const double fd = central(p.uhat, q, 2e-3f, [&] { return p.f(); });
        EXPECT_NEAR(fd, g[q], 1e-2 * gmax) << iters << " iterations, scale " << scale << ", coord " << q;
      }
    }
}

TEST(DrRouting, StopGradientIsTheGradientWithCouplingsFrozen) {
  for (int iters : {1, 3}) {
    RoutingProbe p(2, 6, 5, iters, 1.f);
    const auto g = p.grad(DrGrad::stopgrad);
    p.st.frozen = true;  // forward reruns the last combination with the stored c
    double gmax = 0;
    for (float x : g) gmax = std::max(gmax, double(std::fabs(x)));
    for (size_t q = 0; q < p.uhat.size(); q += 5) {
      const double fd = central(p.uhat, q, 2e-3f, [&] { return p.f(); });
      EXPECT_NEAR(fd, g[q], 1e-2 * gmax) << iters << " iterations, coord " << q;
    }
    p.st.frozen = false;
    // With one iteration c is uniform and constant: both schemes agree exactly.
    if (iters == 1) EXPECT_EQ(g, p.grad(DrGrad::full));
    else EXPECT_NE(g, p.grad(DrGrad::full));
  }
}

TEST(DrRouting, CouplingsSumToOneLengthsBelowOneAndZeroInputsStayFinite) {
  for (float scale : {0.f, 1e-30f, 0.1f, 1.f, 30.f}) {
    RoutingProbe p(3, 16, 5, 3, 1.f);
    for (auto& x : p.uhat) x *= scale;
    p.f();
    const size_t nij = size_t(p.B) * p.I * p.J;
    for (int r = 0; r < p.iters; ++r)
      for (size_t row = 0; row < size_t(p.B) * p.I; ++row) {
        double sum = 0;
        for (int j = 0; j < p.J; ++j) {
          const float c = p.st.c[r * nij + row * p.J + j];
          EXPECT_GE(c, 0.f);
          sum += c;
        }
        EXPECT_NEAR(sum, 1.0, 4 * p.J * FLT_EPSILON) << "iteration " << r;
      }
    for (size_t q = 0; q < p.len.size(); ++q) {
      double n2 = 0;
      for (int h = 0; h < H; ++h) n2 += double(p.v[q * H + h]) * p.v[q * H + h];
      // |v| < 1 unless float rounds |s|^2 / (1 + |s|^2) to 1 (|s| > ~4000).
      if (scale <= 1.f) {
        EXPECT_LT(p.len[q], 1.f) << scale;
      }
      EXPECT_LE(p.len[q], 1.f);
      EXPECT_NEAR(std::sqrt(n2), p.len[q], 1e-5 + 1e-5 * p.len[q]) << "length is |v|";
    }
    for (DrGrad g : {DrGrad::full, DrGrad::stopgrad}) {
      const auto d = p.grad(g);
      EXPECT_TRUE(all_finite(d.data(), d.size())) << scale;
      if (scale == 0.f) {
        for (float x : d) EXPECT_EQ(x, 0.f);
      }
    }
  }
}

// ---- The whole model ------------------------------------------------------------------

// The training loss: margin loss on the lengths plus the model's reconstruction term.
double train_loss(DrNet& m, const std::vector<float>& x, const std::vector<int>& y, int B, float* d = nullptr) {
  std::vector<float> scratch(size_t(B) * kNumClasses);
  m.set_training_labels(y.data());
  const float* s = m.forward(x.data(), B);
  const double l = loss_forward_backward(m.loss(), d ? d : scratch.data(), s, y.data(), B, kNumClasses, 0.5, 0) +
                   m.model_loss();
  m.set_training_labels(nullptr);
  return l;
}

// As tests/test_models.cpp's check: per tensor, the derivative along the
// analytic gradient and the three largest entries, by central differences on
// tests/gradcheck.h's ladder of steps.
void check_dr_gradients(DrNet& m, const std::vector<float>& x, const std::vector<int>& y, int B, double h) {
  ParamSet& p = m.params();
  for (int t = 0; t < p.num_tensors(); ++t)  // off the conv ReLU's kink for the black background
    if (p.tensor(t).name == "conv1.bias") std::fill_n(p.value(t), p.tensor(t).size, 0.1f);
  std::vector<float> d(size_t(B) * kNumClasses);
  train_loss(m, x, y, B, d.data());
  m.set_training_labels(y.data());
  m.forward(x.data(), B);
  m.backward(d.data(), B);
  m.set_training_labels(nullptr);
  const std::vector<float> grad = p.grads();
  if (m.config().grad == DrGrad::stopgrad) m.freeze_routing(true);
  test::check_tensor_gradients(p, grad, [&] { return train_loss(m, x, y, B); }, h, "");
  m.freeze_routing(false);
}

TEST(DrGradientCheck, WholeModelWithAndWithoutDecoderFullAndStopGradient) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  // The decoder at the default weight and at 100x it (so its gradient into
  // the encoder is not negligible beside the margin loss's).
  const std::pair<DrGrad, float> cases[] = {{DrGrad::full, 0.f}, {DrGrad::full, 0.0005f}, {DrGrad::stopgrad, 0.05f}};
  for (const auto& [grad, w] : cases) {
      DrConfig c;
      c.grad = grad;
      c.recon_weight = w;
      DrNet m(c, B);
      m.init(11);
      SCOPED_TRACE(std::string(grad == DrGrad::full ? "full" : "stopgrad") + ", recon-weight " + std::to_string(w));
      check_dr_gradients(m, x, y, B, 1e-3);
    }
}

TEST(DrModel, ParameterCountsWithinTwentyPercentOfTheEmModel) {
  DrConfig c;
  c.recon_weight = 0;
  const size_t bare = DrNet::param_count(c);
  EXPECT_EQ(DrNet(c, 2).params().count(), bare);
  // conv 416 + primary 4096 x 128 + 128 + W 16 x 5 x 8 x 16.
  EXPECT_EQ(bare, 416u + 4096u * 128 + 128 + 16u * 5 * 8 * 16);
  EXPECT_NEAR(double(bare), 558258.0, 0.2 * 558258);
  const size_t with = DrNet::param_count(DrConfig{});
  EXPECT_EQ(with, bare + (80u * 256 + 256) + (256u * 512 + 512) + (512u * 1024 + 1024));
  EXPECT_EQ(model_param_count("dr", {}), with);
  EXPECT_EQ(model_param_count("dr", {{"recon-weight", "0"}}), bare);
}

// --dr-init-std reaches the routing weights (their sample standard deviation
// within 3 %: its standard error over 10,240 weights is 0.7 %), and sets where
// the class capsules start on the squash: at 0.5 long (its flat part, where a
// capsule pushed to length ~1 for every input gets ~1e-3 of the gradient it had,
// docs/toys.md), at the official code's 0.1 short. |s| scales with the weights,
// so the length |s|^2 / (1 + |s|^2) falls by over 4x for any |s| < 2.8.
TEST(DrModel, RoutingWeightsStartAtTheOptionsStandardDeviation) {
  const int B = 8;
  std::vector<float> images(size_t(B) * 1024);
  Stream rng(7, Purpose::Noise, 0, 0);
  fill_normal(rng, images.data(), images.size(), 1.f);  // standardised images' scale
  double mean_len[2];
  for (int k = 0; k < 2; ++k) {
    const char* std_text = k == 0 ? "0.5" : "0.1";
    auto model = make_model("dr", {{"dr-init-std", std_text}, {"recon-weight", "0"}}, B);
    model->init(3);
    auto& dr = dynamic_cast<DrNet&>(*model);
    const float* w = dr.params().value(dr.route_w);
    const size_t n = dr.params().tensor(dr.route_w).size;
    double s2 = 0;
    for (size_t i = 0; i < n; ++i) s2 += double(w[i]) * w[i];
    EXPECT_NEAR(std::sqrt(s2 / double(n)), std::atof(std_text), 0.03 * std::atof(std_text)) << std_text;
    const float* len = model->forward(images.data(), B);
    mean_len[k] = std::accumulate(len, len + B * 5, 0.0) / (B * 5);
  }
  EXPECT_GT(mean_len[0], 0.5);
  EXPECT_LT(mean_len[1], 0.25 * mean_len[0]);
}

TEST(DrModel, DecoderMasksByTheTrueClassInTrainingAndThePredictedOneInEvaluation) {
  const int B = 6;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  DrNet m(DrConfig{}, B);
  m.init(3);
  std::vector<int> wrong(B);
  for (int b = 0; b < B; ++b) wrong[b] = (y[b] + 1) % kNumClasses;
  m.set_training_labels(wrong.data());
  m.forward(x.data(), B);
  const double loss_wrong = m.model_loss();
  for (int b = 0; b < B; ++b) EXPECT_EQ(m.decoder_classes()[b], wrong[b]);
  m.set_training_labels(nullptr);
  const float* s = m.forward(x.data(), B);
  for (int b = 0; b < B; ++b)
    EXPECT_EQ(m.decoder_classes()[b], int(std::max_element(s + b * kNumClasses, s + (b + 1) * kNumClasses) - (s + b * kNumClasses)));
  // The loss is w * mean over the batch of the per-image sum of squared errors.
  double sse = 0;
  for (int p = 0; p < B * kImagePixels; ++p) sse += double(m.reconstruction()[p] - x[p]) * (m.reconstruction()[p] - x[p]);
  EXPECT_NEAR(m.model_loss(), 0.0005 * sse / B, 1e-9 * sse);
  EXPECT_GT(loss_wrong, 0.0);
  for (int p = 0; p < B * kImagePixels; ++p) ASSERT_TRUE(m.reconstruction()[p] > 0.f && m.reconstruction()[p] < 1.f);
  // Without a decoder: no term and no decoder parameters.
  DrConfig off;
  off.recon_weight = 0;
  DrNet bare(off, B);
  bare.init(3);
  bare.set_training_labels(y.data());
  bare.forward(x.data(), B);
  EXPECT_EQ(bare.model_loss(), 0.0);
  EXPECT_EQ(bare.layers(B).size(), 4u);
  EXPECT_EQ(m.layers(B).back().name, "decoder");
}

TEST(DrModel, DecodeOfTheTrueClassCapsuleIsTheReconstructionAndPerturbingChangesIt) {
  const int B = 4;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  DrNet m(DrConfig{}, B);
  m.init(5);
  // Batch 1 (decode's own batch size: the same oneDNN primitive, so the same bits).
  for (int b = 0; b < B; ++b) {
    const float* img = x.data() + size_t(b) * kImagePixels;
    m.set_training_labels(&y[b]);
    m.forward(img, 1);
    const std::vector<float> rec(m.reconstruction(), m.reconstruction() + kImagePixels);
    const double loss = m.model_loss();
    std::vector<float> caps(m.class_capsules().poses + y[b] * kDrOutDim,
                            m.class_capsules().poses + (y[b] + 1) * kDrOutDim);
    std::vector<float> out(kImagePixels, -1.f);
    ASSERT_TRUE(m.decode(caps.data(), y[b], out.data()));
    for (int p = 0; p < kImagePixels; ++p) ASSERT_EQ(out[p], rec[p]) << "example " << b << " pixel " << p;
    // One dimension shifted: another image, still in (0, 1).
    for (int d : {0, 7, 15}) {
      std::vector<float> shifted = caps, out2(kImagePixels);
      shifted[d] += 0.25f;
      ASSERT_TRUE(m.decode(shifted.data(), y[b], out2.data()));
      double diff = 0;
      for (int p = 0; p < kImagePixels; ++p) {
        diff += std::abs(out2[p] - out[p]);
        ASSERT_TRUE(out2[p] > 0.f && out2[p] < 1.f);
      }
      EXPECT_GT(diff, 1e-3) << "dimension " << d;
    }
    // decode leaves the last forward as it was.
    for (int p = 0; p < kImagePixels; ++p) ASSERT_EQ(m.reconstruction()[p], rec[p]);
    EXPECT_EQ(m.model_loss(), loss);
    EXPECT_EQ(m.decoder_classes()[0], y[b]);
  }
  m.set_training_labels(nullptr);
  // From a batch forward: the same up to the GEMM's blocking.
  m.set_training_labels(y.data());
  m.forward(x.data(), B);
  std::vector<float> out(kImagePixels);
  for (int b = 0; b < B; ++b) {
    ASSERT_TRUE(m.decode(m.class_capsules().poses + (size_t(b) * kNumClasses + y[b]) * kDrOutDim, y[b], out.data()));
    for (int p = 0; p < kImagePixels; ++p) ASSERT_NEAR(out[p], m.reconstruction()[b * kImagePixels + p], 1e-6);
  }
  m.set_training_labels(nullptr);
  // Without a decoder, and for models without one: false, out untouched.
  DrConfig off;
  off.recon_weight = 0;
  DrNet bare(off, 1);
  bare.init(5);
  out.assign(kImagePixels, -1.f);
  EXPECT_FALSE(bare.decode(out.data(), 0, out.data()));
  EXPECT_FALSE(make_model("cnn", {}, 1)->decode(out.data(), 0, out.data()));
  EXPECT_EQ(out[0], -1.f);
  EXPECT_THROW(m.decode(out.data(), kNumClasses, out.data()), std::invalid_argument);
}

TEST(DrModel, ZeroImagesAndEveryIsaGiveFiniteCloseScores) {
  const int B = 5;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  const std::vector<float> zeros(size_t(B) * kImagePixels, 0.f);
  std::vector<float> ref;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon}) {
    if (!isa_supported(isa) || dr_routing_for(isa) == nullptr) continue;
    DrConfig c;
    c.isa = isa;
    DrNet m(c, B);
    m.init(4);
    const float* s = m.forward(zeros.data(), B);
    EXPECT_TRUE(all_finite(s, size_t(B) * kNumClasses)) << isa_name(isa);
    EXPECT_EQ(m.first_non_finite_layer(B), "") << isa_name(isa);
    s = m.forward(x.data(), B);
    std::vector<float> got(s, s + B * kNumClasses);
    if (ref.empty()) ref = got;
    for (size_t q = 0; q < ref.size(); ++q) EXPECT_NEAR(got[q], ref[q], 1e-4) << isa_name(isa);
    const ClassCapsules cc = m.class_capsules();
    EXPECT_EQ(cc.pose_dim, 16);
    EXPECT_EQ(cc.activations, s);
  }
}

TEST(DrModel, NonFiniteWeightsAreNamedByLayer) {
  const int B = 2;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  DrNet m(DrConfig{}, B);
  m.init(5);
  m.params().value(m.route_w)[3] = NAN;
  m.forward(x.data(), B);
  EXPECT_EQ(m.first_non_finite_layer(B), "predictions");
}

TEST(DrModel, NonFiniteRoutingIsNamedAndStopsTheStep) {
  // Predictions of ~1e20: |s|^2 overflows in the routing's squash.
  const int B = 2;
  std::vector<int> y;
  const auto x = sample_images(B, &y);
  DrNet m(DrConfig{}, B);
  m.init(5);
  for (size_t k = 0; k < m.params().tensor(m.route_w).size; ++k) m.params().value(m.route_w)[k] *= 1e21f;
  Trainer t(m, AdamConfig{}, B);
  EXPECT_FALSE(std::isfinite(t.step(x.data(), y.data(), B, 0.0)));
  EXPECT_EQ(m.first_non_finite_layer(B), "class (dynamic routing)");
  EXPECT_EQ(m.params().first_non_finite(false), "");  // no update after a non-finite loss
}

TEST(DrTraining, NonFiniteInputStopsTheRunNamingModelLayerAndEpoch) {
  DataConfig dc;
  dc.n_per_combo = 1;
  Dataset d = make_dataset(dc);
  for (float& p : d.train.images) p = NAN;
  TrainConfig tc;
  tc.n_epochs = 2;
  try {
    train_and_evaluate("dr", d, tc);
    ADD_FAILURE() << "expected NonFiniteError";
  } catch (const NonFiniteError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("dr: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("epoch 1"), std::string::npos) << msg;
    // Named as the input on every ISA: oneDNN's conv + ReLU maps NaN pixels
    // to 0 at AVX-512 (the NaN reaches the loss through the reconstruction
    // target) and passes them on at SSE4.1 (DNNL_MAX_CPU_ISA=SSE41).
    EXPECT_NE(msg.find("input"), std::string::npos) << msg;
  }
}

TEST(DrRegistry, BadOptionValuesAreOneLineErrors) {
  auto why = [](const ModelOptions& o) -> std::string {
    try {
      check_model("dr", o);
    } catch (const ModelOptionError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(why({{"dr-iters", "0"}}).rfind("--dr-iters '0': ", 0), 0u);
  EXPECT_EQ(why({{"recon-weight", "-1"}}).rfind("--recon-weight '-1': ", 0), 0u);
  EXPECT_EQ(why({{"recon-weight", "inf"}}).rfind("--recon-weight 'inf': ", 0), 0u);
  EXPECT_EQ(why({{"recon-weight", "nan"}}).rfind("--recon-weight 'nan': ", 0), 0u);
  EXPECT_EQ(why({{"dr-grad", "half"}}).rfind("--dr-grad 'half': ", 0), 0u);
  for (const char* v : {"0", "-0.1", "nan", "inf", "x"})
    EXPECT_EQ(why({{"dr-init-std", v}}).rfind(std::string("--dr-init-std '") + v + "': ", 0), 0u) << v;
  EXPECT_EQ(why({{"dr-iters", "2"}, {"recon-weight", "0"}, {"dr-grad", "stopgrad"}}), "");
  for (const std::string& e : {why({{"dr-iters", "0"}}), why({{"dr-grad", "x"}})})
    EXPECT_EQ(e.find('\n'), std::string::npos);
  // dr trains the margin loss whatever --loss says: it does not read the option.
  const ModelEntry* e = find_model("dr");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(std::none_of(e->options.begin(), e->options.end(), [](const ModelOption* o) { return std::string(o->name) == "loss"; }));
  EXPECT_EQ(make_model("dr", {}, 2)->loss().kind, LossKind::margin);
}

TEST(DrTraining, LearnsWellAboveChanceInAFewEpochs) {
  RunOptions o;
  o.train.seed = 1;
  o.train.n_epochs = 4;
  o.models = {"dr"};
  const RunResult r = run_experiment(o);
  ASSERT_EQ(r.models.size(), 1u);
  const ModelResult& m = r.models[0];
  EXPECT_GT(m.familiar, 0.6);  // chance is 0.2
  EXPECT_GT(m.heldout, 0.3);
  EXPECT_LT(m.history.back().loss, m.history.front().loss);
  EXPECT_GT(m.act_true, m.act_other);  // the lengths are the class activations
}

}  // namespace
}  // namespace vg
