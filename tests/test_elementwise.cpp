// Every elementwise variant (Adam update, ReLU backward, transpose) against the scalar
// reference, bit for bit: the variants do the same IEEE operations in the same
// order, so any difference is a bug (an FMA, a reordering, a wrong tail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/elementwise.h"
#include "tests/test_util.h"

namespace vg {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Elementwise, ReferenceAdamFirstStepIsLrTimesSign) {
  // t = 1: lr_c1 = lr / 0.1 and inv_sqrt_c2 = 1 / sqrt(0.001), so the step is
  // lr g / (|g| + eps'): lr * sign(g) to float rounding.
  std::vector<float> w{1.f, 1.f, 1.f}, m(3, 0.f), v(3, 0.f), g{0.5f, -2.f, 1e-3f};
  const float lr = 1e-2f;
  adam_update_f32__scalar(w.data(), m.data(), v.data(), g.data(), 3, 0.9f, 0.999f, lr / 0.1f,
                          float(1 / std::sqrt(0.001)), 1e-8f);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(w[k], 1.f - lr * std::copysign(1.f, g[k]), 1e-6f) << k;
}

TEST(Elementwise, ReferenceReluBackwardMasksNonPositiveOutputs) {
  std::vector<float> d{1.f, 2.f, 3.f, 4.f, NAN}, y{1.f, 0.f, -1.f, NAN, 2.f};
  relu_backward_f32__scalar(d.data(), y.data(), d.size());
  EXPECT_EQ(d[0], 1.f);
  EXPECT_EQ(d[1], 0.f);
  EXPECT_EQ(d[2], 0.f);
  EXPECT_EQ(d[3], 0.f);            // NaN > 0 is false
  EXPECT_TRUE(std::isnan(d[4]));   // a NaN gradient passes where the unit is on
}

class ElementwiseVariant : public ::testing::TestWithParam<int> {};

TEST_P(ElementwiseVariant, MatchesScalarBitForBitAtTileSizesAndMisalignedPointers) {
  int n = 0;
  const ElementwiseKernels& k = elementwise_variants(&n)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  // Around every tile up to 16 lanes (tile-1, tile, tile+1, 10*tile+3), one
  // float of offset so that every pointer is misaligned.
  for (size_t N : {1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 43, 83, 163, 1000}) {
    auto w0 = test::randn(N + 1, 1 + N), m0 = test::randn(N + 1, 2 + N, 0.1f),
         v0 = test::randn(N + 1, 3 + N, 0.1f), g = test::randn(N + 1, 4 + N);
    for (float& x : v0) x = x * x;  // second moments are non-negative
    g[N / 2 + 1] = 0.f;             // a zero gradient, and a tiny one
    g[1] = 1e-30f;
    auto wr = w0, mr = m0, vr = v0, wv = w0, mv = m0, vv = v0;
    // Two steps with the bias corrections of t = 1 and t = 7.
    for (int t : {1, 7}) {
      const float lr_c1 = float(2e-3 / (1 - std::pow(0.9, t)));
      const float isc = float(1 / std::sqrt(1 - std::pow(0.999, t)));
      adam_update_f32__scalar(wr.data() + 1, mr.data() + 1, vr.data() + 1, g.data() + 1, N, 0.9f, 0.999f, lr_c1, isc, 1e-8f);
      k.adam_update(wv.data() + 1, mv.data() + 1, vv.data() + 1, g.data() + 1, N, 0.9f, 0.999f, lr_c1, isc, 1e-8f);
    }
    EXPECT_TRUE(same_bits(wr, wv)) << isa_name(k.isa) << " N=" << N;
    EXPECT_TRUE(same_bits(mr, mv)) << isa_name(k.isa) << " N=" << N;
    EXPECT_TRUE(same_bits(vr, vv)) << isa_name(k.isa) << " N=" << N;
    EXPECT_NE(wr, w0);  // it did update

    auto y = test::randn(N + 1, 5 + N), dr = test::randn(N + 1, 6 + N);
    y[1] = 0.f;
    y[N] = -0.f;
    auto dv = dr;
    relu_backward_f32__scalar(dr.data() + 1, y.data() + 1, N);
    k.relu_backward(dv.data() + 1, y.data() + 1, N);
    EXPECT_TRUE(same_bits(dr, dv)) << isa_name(k.isa) << " N=" << N;
  }
}

TEST(Elementwise, ReferenceTransposeMovesEveryElementToItsMirror) {
  // src[r][c] = 1000 r + c, so each destination names where it came from.
  for (auto [rows, cols] : {std::pair{1, 1}, {1, 7}, {5, 1}, {3, 17}, {32, 40}, {33, 35}}) {
    std::vector<float> src(size_t(rows) * cols), dst(src.size(), -1.f);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) src[size_t(r) * cols + c] = float(1000 * r + c);
    transpose_f32__scalar(dst.data(), src.data(), rows, cols);
    for (int c = 0; c < cols; ++c)
      for (int r = 0; r < rows; ++r)
        ASSERT_EQ(dst[size_t(c) * rows + r], float(1000 * r + c)) << rows << "x" << cols << " at " << r << "," << c;
  }
}

// Around the tiles (4 and 8) in both dimensions, the dense layers' shape
// (32 x 4096), and misaligned pointers: the same bytes as the reference, NaN
// and -0 included, and nothing written outside the destination.
TEST_P(ElementwiseVariant, TransposeMatchesScalarAtTileEdges) {
  int n = 0;
  const ElementwiseKernels& k = elementwise_variants(&n)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  for (int rows : {1, 3, 4, 7, 8, 9, 16, 17, 32})
    for (int cols : {1, 4, 5, 8, 9, 15, 16, 17, 31, 4096}) {
      auto src = test::randn(size_t(rows) * cols + 1, uint64_t(rows * 10000 + cols));
      src[1] = NAN;
      src[src.size() - 1] = -0.f;
      std::vector<float> ref(src.size() + 1, 7.f), got(src.size() + 1, 7.f);  // one guard float at each end
      transpose_f32__scalar(ref.data() + 1, src.data() + 1, rows, cols);
      k.transpose(got.data() + 1, src.data() + 1, rows, cols);
      EXPECT_TRUE(same_bits(ref, got)) << isa_name(k.isa) << " " << rows << "x" << cols;
      EXPECT_EQ(got.front(), 7.f);
      EXPECT_EQ(got.back(), 7.f);
    }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ElementwiseVariant, ::testing::Range(0, [] {
                           int n = 0;
                           elementwise_variants(&n);
                           return n;
                         }()),
                         [](const ::testing::TestParamInfo<int>& p) {
                           int n = 0;
                           return std::string(isa_name(elementwise_variants(&n)[p.param].isa));
                         });

}  // namespace
}  // namespace vg
