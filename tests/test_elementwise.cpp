// Every elementwise variant (Adam update, ReLU backward, transpose, normal noise) against the scalar
// reference, bit for bit: the variants do the same IEEE operations in the same
// order, so any difference is a bug (an FMA, a reordering, a wrong tail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
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

// normal_pair against Box-Muller in double with libm, on the same two uniforms:
// words spread over the range, and the edges (u1 at its smallest and largest,
// the angle at every quarter turn and an ulp on either side, where the
// reduction changes quadrant).
TEST(Elementwise, ReferenceNormalPairIsBoxMuller) {
  std::vector<uint32_t> words{0u, 1u << 9, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu};
  for (uint32_t q = 0; q <= 4; ++q)
    for (int d : {-1, 0, 1}) words.push_back(uint32_t((int64_t(q) << 30) + (int64_t(d) << 8)));
  Stream s(5, Purpose::Test);
  for (int i = 0; i < 20000; ++i) words.push_back(s.next_u32());
  double worst_r = 0, worst_trig = 0;
  for (size_t a = 0; a < words.size(); ++a) {
    const uint32_t w1 = words[a], w2 = words[(a * 7 + 3) % words.size()];
    const double u1 = (double(w1 >> 9) + 0.5) / (1 << 23), u2 = double(w2 >> 8) / (1 << 24);
    const double r = std::sqrt(-2 * std::log(u1)), t = 2 * M_PI * u2;
    float c = 0, sn = 0, c1 = 0, s1 = 0;
    normal_pair(w1, w2, 1.f, &c1, &s1);
    normal_pair(w1, w2, 3.f, &c, &sn);
    // The radius to a few float ulps, and the unit vector to 2e-7.
    const double got_r = std::hypot(double(c1), double(s1));
    worst_r = std::max(worst_r, std::fabs(got_r - r) / r);
    worst_trig = std::max({worst_trig, std::fabs(c1 / got_r - std::cos(t)), std::fabs(s1 / got_r - std::sin(t))});
    EXPECT_NEAR(c, 3 * c1, 4e-7 * std::fabs(3 * c1) + 1e-30);  // std only scales
    EXPECT_NEAR(sn, 3 * s1, 4e-7 * std::fabs(3 * s1) + 1e-30);
  }
  EXPECT_LT(worst_r, 5e-7);
  EXPECT_LT(worst_trig, 2e-7);
}

// Lengths around every variant's 4 / 8 blocks of 4 values (odd ones end in half
// a pair), counters that carry into their high word, misaligned output: the
// same bytes as the reference and nothing written past the end.
TEST_P(ElementwiseVariant, NormalMatchesScalarBitForBit) {
  int n = 0;
  const ElementwiseKernels& k = elementwise_variants(&n)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  for (size_t N : {0, 1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1024, 18432})
    for (uint64_t ctr0 : {uint64_t(0), uint64_t(0xFFFFFFFDu), uint64_t(7) << 40}) {
      const uint64_t key = mix64(N), sub = mix64(ctr0 + 1);
      std::vector<float> ref(N + 2, 7.f), got(N + 2, 7.f);  // one guard float at each end
      normal_f32__scalar(ref.data() + 1, N, 0.5f, key, sub, ctr0);
      k.normal(got.data() + 1, N, 0.5f, key, sub, ctr0);
      EXPECT_TRUE(same_bits(ref, got)) << isa_name(k.isa) << " n " << N << " ctr0 " << ctr0;
      EXPECT_EQ(got.front(), 7.f);
      EXPECT_EQ(got.back(), 7.f);
    }
  // The reference is normal_pair on the stream's words, in order.
  std::vector<float> ref(6);
  normal_f32__scalar(ref.data(), 6, 1.f, 11, 12, 13);
  uint32_t w[8];
  Philox4x32::block(w, 11, 12, 13);
  Philox4x32::block(w + 4, 11, 12, 14);
  float c = 0, s = 0;
  for (int p = 0; p < 3; ++p) {
    normal_pair(w[2 * p], w[2 * p + 1], 1.f, &c, &s);
    EXPECT_EQ(ref[size_t(2 * p)], c);
    EXPECT_EQ(ref[size_t(2 * p + 1)], s);
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, ElementwiseVariant, ::testing::Range(0, test::variant_count(elementwise_variants)),
                         test::variant_names(elementwise_variants));

}  // namespace
}  // namespace vg
