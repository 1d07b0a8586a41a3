// The convolutional capsule votes: the scalar reference against a naive loop
// (double accumulation) and against central differences, and every variant
// against the scalar reference. Tolerances are the rounding bounds of the
// sums: a float sum of n products is within gamma_n * sum |terms| of the exact
// one (gamma_n = n u / (1 - n u), u = FLT_EPSILON / 2), whatever the order or
// fusing; the naive loop counts the terms and sums their magnitudes.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/conv_votes.h"
#include "tests/test_util.h"

namespace vg {
namespace {

double gamma_n(double n) {
  const double u = FLT_EPSILON / 2;
  return n * u / (1 - n * u);
}

// An output in double with the sum of its terms' magnitudes and their count.
struct Exact {
  std::vector<double> val, mag, terms;
  explicit Exact(size_t n) : val(n, 0.0), mag(n, 0.0), terms(n, 0.0) {}
  void add(size_t k, double t) { val[k] += t, mag[k] += std::fabs(t), terms[k] += 1; }
};

// Where vote n comes from: decoded from its flat index, independently of the kernels' loops.
struct VoteSite {
  size_t child, wrow;  // offsets of M's and W's 4x4 (in floats)
  int y, x;
};
VoteSite site_of(const ConvVotesShape& s, size_t n) {
  const size_t pose = n / 16;
  const int o = int(pose % s.Co);
  const size_t q = (pose / s.Co) % s.I(), win = pose / (size_t(s.Co) * s.I());
  const int ox = int(win % s.Wo()), oy = int(win / s.Wo() % s.Ho()), b = int(win / (size_t(s.Wo()) * s.Ho()));
  const int i = int(q % s.Ci), pos = int(q / s.Ci), kx = pos % s.kw(), ky = pos / s.kw();
  const int y = oy * s.step() + ky, x = ox * s.step() + kx;
  const int kpos = s.shared() ? 0 : ky * s.K + kx;
  return {((size_t(b) * s.H + y) * s.W + x) * s.Ci * 16 + i * 16, ((size_t(kpos) * s.Ci + i) * s.Co + o) * 16, y, x};
}

Exact naive_forward(const std::vector<float>& M, const std::vector<float>& W, const VoteCoords* coords,
                    const ConvVotesShape& s) {
  Exact V(s.v_size());
  for (size_t n = 0; n < V.val.size(); ++n) {
    const VoteSite at = site_of(s, n);
    const int r = int(n % 16) / 4, c = int(n % 4);
    for (int k = 0; k < 4; ++k) V.add(n, double(M[at.child + r * 4 + k]) * W[at.wrow + k * 4 + c]);
    if (coords && int(n % 16) == coords->row_elem()) V.add(n, coords->row[at.y]);
    if (coords && int(n % 16) == coords->col_elem()) V.add(n, coords->col[at.x]);
  }
  return V;
}

// dM and dW from dV, each added onto the given start values (counted as a term).
void naive_backward(Exact& dM, Exact& dW, const std::vector<float>& dV, const std::vector<float>& M,
                    const std::vector<float>& W, const ConvVotesShape& s) {
  for (size_t n = 0; n < dV.size(); ++n) {
    const VoteSite at = site_of(s, n);
    const int r = int(n % 16) / 4, c = int(n % 4);
    for (int k = 0; k < 4; ++k) {
      dM.add(at.child + r * 4 + k, double(dV[n]) * W[at.wrow + k * 4 + c]);
      dW.add(at.wrow + k * 4 + c, double(M[at.child + r * 4 + k]) * dV[n]);
    }
  }
}

Exact starting_at(const std::vector<float>& x) {
  Exact e(x.size());
  for (size_t k = 0; k < x.size(); ++k) e.add(k, x[k]);
  return e;
}

// Float results (read from x + off) within `bounds` gamma_n * sum|terms| of the exact ones.
void expect_within(const float* x, const Exact& e, double bounds, const std::string& what) {
  for (size_t k = 0; k < e.val.size(); ++k)
    ASSERT_NEAR(x[k], e.val[k], bounds * gamma_n(e.terms[k]) * e.mag[k] + 1e-30) << what << " at " << k;
}

struct Case {
  ConvVotesShape s;
  int coords;  // 0 none, 1 paper, 2 official
};

std::string name(const Case& c) {
  const auto& s = c.s;
  return (s.shared() ? "class" : "conv K=" + std::to_string(s.K) + " s=" + std::to_string(s.stride)) +
         " B=" + std::to_string(s.B) + " H=" + std::to_string(s.H) + " W=" + std::to_string(s.W) +
         " Ci=" + std::to_string(s.Ci) + " Co=" + std::to_string(s.Co) + " coords=" + std::to_string(c.coords);
}

// Coordinate tables of the shape (any values: the kernel does not scale them).
struct Coords {
  std::vector<float> row, col;
  VoteCoords vc;
  Coords(const ConvVotesShape& s, int which) : row(test::randn(s.H, 90)), col(test::randn(s.W, 91)) {
    vc = {row.data(), col.data(), which == 2 ? CoordPlace::official : CoordPlace::paper};
  }
  const VoteCoords* get(int which) const { return which ? &vc : nullptr; }
};

// K in {1, 3, 5}, s in {1, 2}, odd and unequal H and W, a stride that leaves
// the last row unused, a window as large as the input, and class forms.
const std::vector<Case> kReferenceCases = {
    {ConvVotesShape::conv(2, 7, 7, 3, 5, 3, 2), 0},  {ConvVotesShape::conv(1, 5, 9, 1, 1, 1, 1), 1},
    {ConvVotesShape::conv(2, 9, 7, 2, 3, 5, 1), 2},  {ConvVotesShape::conv(1, 8, 8, 4, 4, 3, 2), 0},
    {ConvVotesShape::conv(1, 5, 5, 2, 17, 5, 2), 1}, {ConvVotesShape::class_caps(2, 4, 4, 16, 5), 1},
    {ConvVotesShape::class_caps(3, 3, 5, 2, 3), 2},  {ConvVotesShape::class_caps(1, 1, 1, 1, 1), 0},
};

TEST(ConvVotes, ReferenceMatchesNaiveLoop) {
  for (const Case& c : kReferenceCases) {
    const auto& s = c.s;
    ASSERT_TRUE(s.valid()) << name(c);
    auto M = test::randn(s.m_size(), 1), W = test::randn(s.w_size(), 2), dV = test::randn(s.v_size(), 3);
    const Coords co(s, c.coords);
    std::vector<float> V(s.v_size(), NAN);
    conv_votes_forward_f32__scalar(V.data(), M.data(), W.data(), co.get(c.coords), s);
    expect_within(V.data(), naive_forward(M, W, co.get(c.coords), s), 1, name(c) + " V");
    // Backward onto nonzero start values.
    auto dM = test::randn(s.m_size(), 4), dW = test::randn(s.w_size(), 5);
    Exact eM = starting_at(dM), eW = starting_at(dW);
    naive_backward(eM, eW, dV, M, W, s);
    conv_votes_backward_f32__scalar(dM.data(), dW.data(), dV.data(), M.data(), W.data(), s);
    expect_within(dM.data(), eM, 1, name(c) + " dM");
    expect_within(dW.data(), eW, 1, name(c) + " dW");
  }
}

TEST(ConvVotes, CoordinatesLandOnTheirElements) {
  // Zero poses: each vote is its child's coordinates alone.
  const auto s = ConvVotesShape::class_caps(2, 3, 4, 2, 3);
  const std::vector<float> M(s.m_size(), 0.f), W = test::randn(s.w_size(), 2);
  const std::vector<float> row = {0.1f, 0.2f, 0.3f}, col = {1.f, 2.f, 3.f, 4.f};
  for (CoordPlace place : {CoordPlace::paper, CoordPlace::official}) {
    const VoteCoords vc{row.data(), col.data(), place};
    const int er = place == CoordPlace::paper ? 3 : 1, ec = place == CoordPlace::paper ? 7 : 0;
    std::vector<float> V(s.v_size(), NAN);
    conv_votes_forward_f32__scalar(V.data(), M.data(), W.data(), &vc, s);
    for (int b = 0; b < s.B; ++b)
      for (int y = 0; y < s.H; ++y)
        for (int x = 0; x < s.W; ++x)
          for (int i = 0; i < s.Ci; ++i)
            for (int o = 0; o < s.Co; ++o) {
              const float* v = V.data() + ((((size_t(b) * s.H + y) * s.W + x) * s.Ci + i) * s.Co + o) * 16;
              for (int e = 0; e < 16; ++e)
                ASSERT_EQ(v[e], e == er ? row[y] : e == ec ? col[x] : 0.f) << "b=" << b << " y=" << y << " x=" << x;
            }
  }
}

TEST(ConvVotes, ClassFormIsTheConvFormWithTiledWeights) {
  // One window over a square input with W[i,o] at every kernel position: the same votes, bit for bit.
  const int B = 2, H = 3, Ci = 3, Co = 4;
  const auto cls = ConvVotesShape::class_caps(B, H, H, Ci, Co);
  const auto conv = ConvVotesShape::conv(B, H, H, Ci, Co, H, 1);
  auto M = test::randn(cls.m_size(), 1), W = test::randn(cls.w_size(), 2);
  std::vector<float> Wt;
  for (int p = 0; p < H * H; ++p) Wt.insert(Wt.end(), W.begin(), W.end());
  ASSERT_EQ(Wt.size(), conv.w_size());
  ASSERT_EQ(cls.v_size(), conv.v_size());
  const Coords co(cls, 1);
  std::vector<float> Vc(cls.v_size()), Vk(conv.v_size());
  conv_votes_forward_f32__scalar(Vc.data(), M.data(), W.data(), &co.vc, cls);
  conv_votes_forward_f32__scalar(Vk.data(), M.data(), Wt.data(), &co.vc, conv);
  EXPECT_EQ(Vc, Vk);
}

TEST(ConvVotes, ReferenceBackwardMatchesFiniteDifferences) {
  // f = <G, V(M, W)> is linear in each entry of M and of W, so central
  // differences are exact but for the float rounding of V: at most
  // sum_n |G_n| gamma_n(V_n) mag(V_n) at each end (double sums add ~1e-16).
  // Coordinates are on: constants, they cancel.
  for (const Case& c : {Case{ConvVotesShape::conv(2, 5, 5, 2, 3, 3, 2), 1}, Case{ConvVotesShape::conv(1, 4, 5, 2, 2, 1, 1), 2},
                        Case{ConvVotesShape::class_caps(2, 2, 3, 2, 3), 1}}) {
    const auto& s = c.s;
    auto M = test::randn(s.m_size(), 11), W = test::randn(s.w_size(), 12);
    const auto G = test::randn(s.v_size(), 13);
    const Coords co(s, c.coords);
    std::vector<float> dM(M.size(), 0.f), dW(W.size(), 0.f), V(s.v_size());
    conv_votes_backward_f32__scalar(dM.data(), dW.data(), G.data(), M.data(), W.data(), s);
    Exact eM(M.size()), eW(W.size());
    naive_backward(eM, eW, G, M, W, s);
    auto f = [&](double* err) {
      conv_votes_forward_f32__scalar(V.data(), M.data(), W.data(), co.get(c.coords), s);
      const Exact e = naive_forward(M, W, co.get(c.coords), s);
      double sum = 0, bound = 0, gv = 0;
      for (size_t n = 0; n < V.size(); ++n) {
        sum += double(G[n]) * V[n];
        bound += std::fabs(G[n]) * gamma_n(e.terms[n]) * e.mag[n];
        gv += std::fabs(double(G[n]) * V[n]);
      }
      *err = bound + gv * V.size() * DBL_EPSILON;
      return sum;
    };
    const double h = 0.5;
    for (int t = 0; t < 2; ++t) {
      auto& x = t == 0 ? M : W;
      const auto& g = t == 0 ? dM : dW;
      const Exact& eg = t == 0 ? eM : eW;
      for (size_t k = 0; k < x.size(); k += 5) {
        // Divided by the step as stored (x0 +- h rounds in float); the
        // analytic value is off by its own sum's rounding.
        const float x0 = x[k], xp = x0 + float(h), xm = x0 - float(h);
        double ep, em;
        x[k] = xp;
        const double fp = f(&ep);
        x[k] = xm;
        const double fm = f(&em);
        x[k] = x0;
        const double step = double(xp) - double(xm);
        const double tol = (ep + em) / step + gamma_n(eg.terms[k]) * eg.mag[k] + 1e-30;
        EXPECT_NEAR((fp - fm) / step, g[k], tol) << name(c) << (t == 0 ? " dM[" : " dW[") << k << "]";
      }
    }
  }
}

TEST(ConvVotes, BackwardAccumulates) {
  // From zeros and from ones: the same sums, one term more.
  const auto s = ConvVotesShape::conv(2, 5, 5, 3, 4, 3, 1);
  auto M = test::randn(s.m_size(), 4), W = test::randn(s.w_size(), 5), G = test::randn(s.v_size(), 6);
  std::vector<float> dM1(M.size(), 0.f), dW1(W.size(), 0.f), dM2(M.size(), 1.f), dW2(W.size(), 1.f);
  conv_votes_backward_f32__scalar(dM1.data(), dW1.data(), G.data(), M.data(), W.data(), s);
  conv_votes_backward_f32__scalar(dM2.data(), dW2.data(), G.data(), M.data(), W.data(), s);
  Exact eM = starting_at(std::vector<float>(M.size(), 1.f)), eW = starting_at(std::vector<float>(W.size(), 1.f));
  naive_backward(eM, eW, G, M, W, s);
  for (size_t k = 0; k < dM1.size(); ++k)
    ASSERT_NEAR(dM2[k], dM1[k] + 1.0, 2 * gamma_n(eM.terms[k]) * eM.mag[k] + FLT_EPSILON * std::fabs(dM1[k] + 1.0)) << k;
  for (size_t k = 0; k < dW1.size(); ++k)
    ASSERT_NEAR(dW2[k], dW1[k] + 1.0, 2 * gamma_n(eW.terms[k]) * eW.mag[k] + FLT_EPSILON * std::fabs(dW1[k] + 1.0)) << k;
}

// Sizes around the SIMD variants' blocks of 1024 (weight row, parent type)
// pairs of packed diagonals (rows 64 + 1 at Co = 16, Co = 1023 / 1025 splitting
// the parent types), odd counts around vector widths, the paper's layer shapes
// (ConvCaps1 takes two blocks), and the tiny ones.
const std::vector<Case> kVariantCases = {
    {ConvVotesShape::conv(3, 7, 7, 3, 5, 3, 2), 0},     {ConvVotesShape::conv(2, 9, 7, 4, 16, 3, 1), 1},
    {ConvVotesShape::conv(1, 5, 6, 5, 13, 1, 1), 2},    {ConvVotesShape::conv(2, 7, 5, 1, 63, 5, 2), 0},
    {ConvVotesShape::conv(1, 5, 5, 2, 65, 3, 2), 1},    {ConvVotesShape::conv(2, 14, 14, 8, 16, 3, 2), 0},
    {ConvVotesShape::conv(1, 6, 6, 16, 16, 3, 1), 2},   {ConvVotesShape::conv(1, 9, 9, 3, 21, 5, 2), 1},
    {ConvVotesShape::class_caps(3, 4, 4, 16, 5), 1},    {ConvVotesShape::class_caps(2, 3, 5, 7, 9), 2},
    {ConvVotesShape::class_caps(1, 1, 1, 1, 1), 0},     {ConvVotesShape::class_caps(2, 5, 3, 3, 64), 1},
    {ConvVotesShape::class_caps(1, 2, 2, 1, 65), 2},    {ConvVotesShape::class_caps(2, 3, 3, 21, 3), 0},
    {ConvVotesShape::class_caps(2, 2, 3, 65, 16), 1},   {ConvVotesShape::class_caps(1, 1, 2, 1, 1025), 2},
    {ConvVotesShape::conv(1, 5, 4, 1, 1023, 3, 2), 0},  {ConvVotesShape::conv(1, 7, 7, 64, 16, 1, 2), 1},
};

class ConvVotesVariant : public ::testing::TestWithParam<int> {};

TEST_P(ConvVotesVariant, MatchesScalarAtTileSizesAndMisalignedPointers) {
  int n = 0;
  const ConvVotesKernels& k = conv_votes_variants(&n)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  // The reference itself is checked against the naive loop (ReferenceMatchesNaiveLoop).
  if (k.isa == Isa::scalar) GTEST_SKIP() << "the scalar variant is the reference";
  for (size_t ci = 0; ci < kVariantCases.size(); ++ci) {
    const Case& c = kVariantCases[ci];
    const auto& s = c.s;
    const std::string what = std::string(isa_name(k.isa)) + " " + name(c);
    // Every other case one float off: every pointer misaligned for SIMD.
    const size_t off = ci % 2;
    auto Mb = test::randn(s.m_size() + off, 20 + ci), Wb = test::randn(s.w_size() + off, 40 + ci),
         Gb = test::randn(s.v_size() + off, 60 + ci);
    const std::vector<float> M(Mb.begin() + off, Mb.end()), W(Wb.begin() + off, Wb.end()), G(Gb.begin() + off, Gb.end());
    const Coords co(s, c.coords);
    std::vector<float> Vr(s.v_size() + off, NAN), Vv(Vr);
    conv_votes_forward_f32__scalar(Vr.data() + off, Mb.data() + off, Wb.data() + off, co.get(c.coords), s);
    k.forward(Vv.data() + off, Mb.data() + off, Wb.data() + off, co.get(c.coords), s);
    // Both within gamma_n mag of the exact votes: within twice that of each other.
    const Exact eV = naive_forward(M, W, co.get(c.coords), s);
    for (size_t q = 0; q < s.v_size(); ++q)
      ASSERT_NEAR(Vv[q + off], Vr[q + off], 2 * gamma_n(eV.terms[q]) * eV.mag[q] + 1e-30) << what << " V at " << q;
    auto dMr = test::randn(s.m_size() + off, 80 + ci), dWr = test::randn(s.w_size() + off, 100 + ci);
    auto dMv = dMr, dWv = dWr;
    Exact eM = starting_at(std::vector<float>(dMr.begin() + off, dMr.end())),
          eW = starting_at(std::vector<float>(dWr.begin() + off, dWr.end()));
    naive_backward(eM, eW, G, M, W, s);
    conv_votes_backward_f32__scalar(dMr.data() + off, dWr.data() + off, Gb.data() + off, Mb.data() + off, Wb.data() + off, s);
    k.backward(dMv.data() + off, dWv.data() + off, Gb.data() + off, Mb.data() + off, Wb.data() + off, s);
    for (size_t q = 0; q < s.m_size(); ++q)
      ASSERT_NEAR(dMv[q + off], dMr[q + off], 2 * gamma_n(eM.terms[q]) * eM.mag[q] + 1e-30) << what << " dM at " << q;
    for (size_t q = 0; q < s.w_size(); ++q)
      ASSERT_NEAR(dWv[q + off], dWr[q + off], 2 * gamma_n(eW.terms[q]) * eW.mag[q] + 1e-30) << what << " dW at " << q;
  }
}

TEST(ConvVotes, DispatchPicksTheSelectedIsa) {
  // VIEWGAP_ISA (or the best the CPU has). Every ISA this build can select has a
  // conv_votes variant, so a scalar fallback here means a variant went missing.
  const Isa want = selected_isa();
  EXPECT_NE(conv_votes_for(want), nullptr) << isa_name(want);
  EXPECT_EQ(conv_votes_kernels().isa, want) << isa_name(want);
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ConvVotesVariant, ::testing::Range(0, test::variant_count(conv_votes_variants)),
                         test::variant_names(conv_votes_variants));

}  // namespace
}  // namespace vg
