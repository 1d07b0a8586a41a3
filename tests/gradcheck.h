// The models' finite-difference check of an analytic gradient, in float.
//
// A central difference with step s errs two ways: the forward pass's float
// rounding, whose share shrinks as 1/s, and the loss's curvature (ReLU kinks,
// a steep E-step), which grows with s. The gradients checked here span 1e-8
// to 1e2, so no one step resolves them all. Each derivative is therefore
// taken on a ladder of steps h * 3^k, k = -5 .. 5, smallest first (see
// walk_ladder): it holds where two neighbouring quotients both agree with the
// analytic value. Rounding cannot put two quotients a factor 3 apart within a
// few percent of the same value by chance, and a wrong gradient misses at
// every step. Where float cannot resolve a tensor's derivative at any step,
// it is excused only if the tensor carries a negligible share of the
// gradient; a test point where the loss barely depends on a tensor that
// matters (saturated activations) must be moved.
//
// Each quotient is divided by the change the analytic gradient predicts for
// the displacement as stored (float(w + s u) - float(w - s u)), so the
// rounding of the perturbed weights is not counted as error. docs/models.md
// ("Gradient checks") gives the rules in one place.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "models/model.h"

namespace vg::test {

// One derivative, walked up the ladder. `probe(s)` displaces the weights by
// +-s and returns the loss's central difference and the analytic gradient's
// prediction of it for the displacement as stored. The derivative holds at
// the first two neighbouring steps whose ratios both lie within tol of 1.
// It fails if the ratios settle on another value: two neighbours within tol
// of each other, both more than `wrong` from 1, each difference at least 512
// ulps of the loss (so rounding moves the ratio by well under tol). If they
// settle nowhere, it is below the float loss's resolution. `trail` gets every
// step's ratio.
struct Difference {
  double delta, predicted;
};
enum class Ladder { holds, fails, below_resolution };
inline Ladder walk_ladder(const std::function<Difference(double)>& probe, double h, double tol, double wrong,
                          double ulp, std::string* trail) {
  double prev = NAN;
  bool prev_big = false, settled = false;
  for (int k = -5; k <= 5; ++k) {
    const double s = h * std::pow(3.0, k);
    const Difference d = probe(s);
    const double r = d.delta / d.predicted;
    char buf[48];
    std::snprintf(buf, sizeof buf, " %.1e:%.4g", s, r);
    *trail += buf;
    if (std::fabs(r - 1) <= tol && std::fabs(prev - 1) <= tol) return Ladder::holds;  // false for NaN
    const bool big = std::fabs(d.delta) >= 512 * ulp;
    settled = settled || (big && prev_big && std::fabs(r - prev) <= tol * std::fabs(r) && std::fabs(r - 1) > wrong &&
                          std::fabs(prev - 1) > wrong);
    prev = r;
    prev_big = big;
  }
  return settled ? Ladder::fails : Ladder::below_resolution;
}

// For each of p's tensors (`grad` holds them all, flat): the derivative of
// `loss` along grad / |grad| (within 2 %) and along each of its three largest
// entries (within 3 %). Every derivative must hold or be below resolution
// (an entry, a bias above all, sums over many ReLUs, and a step that crosses
// one of their kinks moves its ratio by several percent: it fails only if it
// settles more than 10 % from 1);
// a tensor's own derivative may be below resolution only where its gradient
// is under 1e-3 of the largest tensor's (it then barely moves the loss, and
// the routing kernels' own tests check the betas this leaves out, in double).
// `who` prefixes each failure. The loss's rounding is taken as an ulp of
// `rounding_scale` (0: of the loss at the base point; a loss whose terms
// cancel passes the sum of their magnitudes).
inline void check_tensor_gradients(ParamSet& p, const std::vector<float>& grad, const std::function<double()>& loss,
                                   double h, const std::string& who, double rounding_scale = 0) {
  const float scale = float(rounding_scale > 0 ? rounding_scale : std::fabs(loss()));
  const double ulp = std::nextafter(scale, INFINITY) - scale;
  std::vector<double> norms(size_t(p.num_tensors()));
  for (int t = 0; t < p.num_tensors(); ++t) {
    const float* g = grad.data() + p.tensor(t).offset;
    double n2 = 0;
    for (size_t k = 0; k < p.tensor(t).size; ++k) n2 += double(g[k]) * g[k];
    norms[size_t(t)] = std::sqrt(n2);
  }
  const double largest = *std::max_element(norms.begin(), norms.end());
  for (int t = 0; t < p.num_tensors(); ++t) {
    const auto& T = p.tensor(t);
    float* w = p.value(t);
    const float* g = grad.data() + T.offset;
    const double gnorm = norms[size_t(t)];
    if (gnorm == 0) {
      ADD_FAILURE() << who << T.name << ": zero gradient";
      continue;
    }
    const std::vector<float> w0(w, w + T.size);
    std::vector<float> plus(T.size);
    auto along_gradient = [&](double s) {
      double predicted = 0;
      for (size_t k = 0; k < T.size; ++k) plus[k] = float(w0[k] + s * g[k] / gnorm);
      for (size_t k = 0; k < T.size; ++k) w[k] = float(w0[k] - s * g[k] / gnorm);
      for (size_t k = 0; k < T.size; ++k) predicted += double(g[k]) * (double(plus[k]) - w[k]);
      const double fm = loss();
      std::copy(plus.begin(), plus.end(), w);
      const double fp = loss();
      std::copy(w0.begin(), w0.end(), w);
      return Difference{fp - fm, predicted};
    };
    std::string trail;
    const Ladder whole = walk_ladder(along_gradient, h, 2e-2, 2e-2, ulp, &trail);
    EXPECT_TRUE(whole == Ladder::holds || (whole == Ladder::below_resolution && gnorm < 1e-3 * largest))
        << who << T.name << " |grad| " << gnorm << " (largest tensor's " << largest << "), step:ratio" << trail;
    std::vector<size_t> idx(T.size);
    std::iota(idx.begin(), idx.end(), 0);
    const size_t n = std::min<size_t>(3, T.size);
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(),
                      [&](size_t a, size_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
    for (size_t r = 0; r < n && g[idx[r]] != 0; ++r) {
      const size_t k = idx[r];
      auto along_entry = [&](double s) {
        const float wp = float(w0[k] + s), wm = float(w0[k] - s);
        w[k] = wp;
        const double fp = loss();
        w[k] = wm;
        const double fm = loss();
        w[k] = w0[k];
        return Difference{fp - fm, double(g[k]) * (double(wp) - wm)};
      };
      trail.clear();
      EXPECT_NE(walk_ladder(along_entry, h, 3e-2, 1e-1, ulp, &trail), Ladder::fails)
          << who << T.name << "[" << k << "] grad " << g[k] << ", step:ratio" << trail;
    }
  }
}

// A whole model's test point: conv1.bias = 0.1, so that the (mostly black)
// background's pre-activations sit away from the ReLU kink at 0, where a
// difference quotient straddles two slopes.
inline void move_off_relu_kink(Model& m) {
  ParamSet& p = m.params();
  for (int t = 0; t < p.num_tensors(); ++t)
    if (p.tensor(t).name == "conv1.bias") std::fill_n(p.value(t), p.tensor(t).size, 0.1f);
}

}  // namespace vg::test
