// The naive reference of EM routing over convolutional windows, in double,
// written from the paper's equations (looping over parents and children,
// finding each child's parents by scanning every window), and the routing
// problems the tests of tests/test_conv_em_routing*.cpp share.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/conv_em_routing.h"
#include "tests/test_util.h"

namespace vg::cem_test {

constexpr int H = kPoseDim;
constexpr double u = FLT_EPSILON / 2;
inline double gamma_n(double n) { return n * u / (1 - n * u); }

// ---------------------------------------------------------------------------
// The naive reference, in double. Windows p = (b, oy, ox), children q = (ky,
// kx, ci) of a window, parent types j; V[p][q][j][h] as the kernels' layout.
struct Ref {
  ConvVotesShape s;
  int P, I, J;
  std::vector<double> R, la;     // P x I x J assignments; P x I log a of each window's children
  std::vector<double> mu, s2;    // P x J x 16
  std::vector<double> a, S;      // P x J
  // With `noisy`, every intermediate the float kernels round (R a, mu,
  // sigma2, L, the cost, a, log p, R) is moved by FLT_EPSILON relative, with a
  // pseudo-random sign: a model of the kernels' rounding (see amplification()).
  bool noisy = false;
  uint64_t state = 1;
  double jitter(double x) {
    if (!noisy) return x;
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return x * (1 + ((state >> 63) ? FLT_EPSILON : -FLT_EPSILON));
  }
  explicit Ref(const ConvVotesShape& sh)
      : s(sh), P(sh.B * sh.Ho() * sh.Wo()), I(sh.I()), J(sh.Co), R(size_t(P) * I * J), la(size_t(P) * I),
        mu(size_t(P) * J * H), s2(size_t(P) * J * H), a(size_t(P) * J), S(size_t(P) * J) {}
  // The input grid position of child q of window p.
  void child(int p, int q, int* b, int* y, int* x, int* ci) const {
    const int ox = p % s.Wo(), oy = p / s.Wo() % s.Ho();
    *b = p / (s.Wo() * s.Ho());
    *ci = q % s.Ci;
    *x = ox * s.step() + (q / s.Ci) % s.kw();
    *y = oy * s.step() + q / (s.Ci * s.kw());
  }
  size_t v(int p, int q, int j, int h) const { return ((size_t(p) * I + q) * J + j) * H + h; }
  // Every (p, q) that holds child (b, y, x, ci), by scanning all windows.
  std::vector<std::pair<int, int>> holders(int b, int y, int x, int ci) const {
    std::vector<std::pair<int, int>> out;
    for (int p = 0; p < P; ++p)
      for (int q = 0; q < I; ++q) {
        int bb, yy, xx, cc;
        child(p, q, &bb, &yy, &xx, &cc);
        if (bb == b && yy == y && xx == x && cc == ci) out.push_back({p, q});
      }
    return out;
  }
};

// R^0 (paper: 1 / (windows holding the child x J); official: 1/J) and log a_in.
void ref_init(Ref& r, const std::vector<double>& z, ConvEmNorm norm);

// M-step of every parent (p, j) over its window's children (the paper's
// Procedure 1 with EmConfig's eps, floor and cost normalisation).
void ref_m_step(Ref& r, const std::vector<double>& V, const std::vector<double>& ba,
                const std::vector<double>& bv, const EmConfig& cfg, double lambda);

// log p_{c,(p,j)} + log a_pj of every (p, q, j).
std::vector<double> ref_log_p(Ref& r, const std::vector<double>& V);

// The sets of (p, q, j) entries the E-step normalises together: per child,
// every (window, type) holding it (paper) or, per type, every window holding
// it (official). Children no window holds have none.
std::vector<std::vector<size_t>> ref_groups(const Ref& r, ConvEmNorm norm);

// E-step: R = exp(lp) normalised over each set of ref_groups.
void ref_e_step(Ref& r, const std::vector<double>& V, const std::vector<std::vector<size_t>>& groups);

// The whole routing; groups: ref_groups(Ref(s), cfg.norm), found once by the caller.
Ref ref_routing(const std::vector<double>& V, const std::vector<double>& z, const std::vector<double>& ba,
                const std::vector<double>& bv, const ConvVotesShape& s, const ConvEmConfig& cfg,
                const std::vector<std::vector<size_t>>& groups, bool noisy = false);

inline std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// ---------------------------------------------------------------------------
// A routing problem as after some training: votes that agree loosely (a pose
// per parent plus noise, so sigma2 sits off its floor) and beta_a centred on
// each type's mean cost over the windows, so activations are not saturated.
// Routed by the variant k; with `misalign` the kernels read the votes one
// float off their alignment (vk(), a copy of V).
struct Problem {
  ConvVotesShape s;
  ConvEmConfig cfg;
  std::vector<float> V, z, ba, bv, mu, a, V_buf;
  ConvEmState st;
  const ConvEmRoutingKernels* k;
  bool misalign;
  const float* vk() const { return V_buf.data() + misalign; }
  Problem(const ConvVotesShape& sh, const ConvEmConfig& c, uint64_t tag,
          const ConvEmRoutingKernels& kernels = *conv_em_routing_for(Isa::scalar), bool off = false)
      : s(sh), cfg(c), k(&kernels), misalign(off) {
    const int P = s.B * s.Ho() * s.Wo();
    V = test::randn(s.v_size(), tag);
    const auto common = test::randn(size_t(P) * s.Co * H, tag + 1);
    for (size_t n = 0; n < V.size(); ++n) {
      const size_t pj = n / (size_t(s.I()) * s.Co * H) * s.Co + n / H % s.Co;
      V[n] = common[pj * H + n % H] + 0.5f * V[n];
    }
    V_buf.assign(V.size() + 1, 0.f);
    std::copy(V.begin(), V.end(), V_buf.begin() + misalign);
    z = test::randn(size_t(s.B) * s.H * s.W * s.Ci, tag + 2);
    ba = test::randn(s.Co, tag + 3, 0.3f);
    bv = test::randn(s.Co, tag + 4, 0.3f);
    mu.resize(size_t(P) * s.Co * H);
    a.resize(size_t(P) * s.Co);
    st.resize(s, cfg);
    forward();
    for (int j = 0; j < s.Co; ++j) {
      double mean = 0;
      for (int p = 0; p < P; ++p) {
        double L = 0;
        for (int h = 0; h < H; ++h) L += std::log(st.em.sigma2[(size_t(p) * s.Co + j) * H + h]);
        const EmLogitCoeffs k = em_logit_coeffs(cfg);
        mean += (k.kv * bv[j] + k.kl * L) * st.em.sum_ra[size_t(p) * s.Co + j] / (cfg.cost_norm ? s.I() : 1) / P;
      }
      // The logit ka beta_a - cost is 0 on average: beta_a = mean cost / ka.
      ba[j] = float(mean / em_logit_coeffs(cfg).ka);
    }
    forward();
  }
  void forward() {
    conv_em_routing_forward(mu.data(), a.data(), st, vk(), z.data(), ba.data(), bv.data(), s, cfg, *k);
  }
};

std::string describe(const ConvVotesShape& s, const ConvEmConfig& c);

// The shapes of the checks: stride 1 (an interior child feeds K x K = 9
// windows), stride 2 (up to 4), 7 x 7 at stride 2, and 6 x 6 at stride 2,
// whose last row and column no window covers.
std::vector<ConvVotesShape> shapes();

// Option sets: the defaults, the official lambda schedule (final lambda 2),
// cost normalisation, and the seed's eps (1e-2 here, so it matters) with a
// variance floor that clamps some variances; then the official code's
// choices: its activation logit (4), its mean carry (5), and both with the
// official schedule (6).
constexpr int kOptionSets = 7;
ConvEmConfig option_set(int opt, int iters, EmGrad grad, ConvEmNorm norm);

}  // namespace vg::cem_test
