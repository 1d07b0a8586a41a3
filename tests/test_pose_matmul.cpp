// Every pose-matmul variant against the scalar reference, and the reference
// against a hand computation and finite differences.
#include <gtest/gtest.h>

#include <cfloat>

#include "kernels/pose_matmul.h"
#include "tests/test_util.h"

namespace vg {
namespace {

constexpr int I = 8, J = 5;

TEST(PoseMatmul, ReferenceMatchesHandComputation) {
  // M = identity with M[0][3] = 2: row 0 of V is W row 0 + 2 * W row 3.
  std::vector<float> M(16, 0.f), W(16), V(16);
  for (int k = 0; k < 4; ++k) M[k * 4 + k] = 1.f;
  M[3] = 2.f;
  for (int k = 0; k < 16; ++k) W[k] = float(k);
  pose_matmul_f32__scalar(V.data(), M.data(), W.data(), 1, 1, 1);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(V[c], W[c] + 2.f * W[12 + c]);
  for (int k = 4; k < 16; ++k) EXPECT_EQ(V[k], W[k]);
}

TEST(PoseMatmul, ReferenceBackwardMatchesFiniteDifferences) {
  // f = <G, M W> is bilinear, so central differences are exact up to rounding.
  const int B = 3;
  auto M = test::randn(B * I * 16, 1), W = test::randn(I * J * 16, 2), G = test::randn(B * I * J * 16, 3);
  std::vector<float> V(G.size()), dM(M.size(), 0.f), dW(W.size(), 0.f);
  pose_matmul_backward_f32__scalar(dM.data(), dW.data(), G.data(), M.data(), W.data(), B, I, J);
  auto f = [&] {
    pose_matmul_f32__scalar(V.data(), M.data(), W.data(), B, I, J);
    return test::dot(V, G);
  };
  const float h = 1e-2f;
  for (auto* pair : {&M, &W}) {
    auto& x = *pair;
    const auto& g = pair == &M ? dM : dW;
    for (size_t k = 0; k < x.size(); k += 7) {
      const float x0 = x[k];
      x[k] = x0 + h; const double fp = f();
      x[k] = x0 - h; const double fm = f();
      x[k] = x0;
      EXPECT_NEAR((fp - fm) / (2 * h), g[k], 2e-3 * (1 + std::fabs(g[k]))) << "k=" << k;
    }
  }
}

TEST(PoseMatmul, BackwardAccumulates) {
  const int B = 2;
  auto M = test::randn(B * I * 16, 4), W = test::randn(I * J * 16, 5), G = test::randn(B * I * J * 16, 6);
  std::vector<float> dM1(M.size(), 0.f), dW1(W.size(), 0.f), dM2(M.size(), 1.f), dW2(W.size(), 1.f);
  pose_matmul_backward_f32__scalar(dM1.data(), dW1.data(), G.data(), M.data(), W.data(), B, I, J);
  pose_matmul_backward_f32__scalar(dM2.data(), dW2.data(), G.data(), M.data(), W.data(), B, I, J);
  // Starting from 1 instead of 0 changes only the rounding of the sums.
  for (size_t k = 0; k < dM1.size(); ++k) EXPECT_NEAR(dM2[k], dM1[k] + 1.f, 1e-5);
  for (size_t k = 0; k < dW1.size(); ++k) EXPECT_NEAR(dW2[k], dW1[k] + 1.f, 1e-5);
}

class PoseMatmulVariant : public ::testing::TestWithParam<int> {};

TEST_P(PoseMatmulVariant, MatchesScalarAtTileSizesAndMisalignedPointers) {
  int n = 0;
  const PoseMatmulKernels& k = pose_matmul_variants(&n)[GetParam()];
  if (!isa_supported(k.isa)) GTEST_SKIP() << isa_name(k.isa) << " not supported on this CPU";
  // Batch sizes around any tile up to 16 lanes: tile-1, tile, tile+1, 10*tile+3.
  for (int B : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 43, 83, 163}) {
    // One float of offset: every pointer is misaligned for SIMD.
    auto Mb = test::randn(B * I * 16 + 1, 10 + B), Wb = test::randn(I * J * 16 + 1, 11),
         Gb = test::randn(B * I * J * 16 + 1, 12 + B);
    const float *M = Mb.data() + 1, *W = Wb.data() + 1, *G = Gb.data() + 1;
    std::vector<float> Vr(B * I * J * 16 + 1), Vv(Vr.size());
    pose_matmul_f32__scalar(Vr.data() + 1, M, W, B, I, J);
    k.forward(Vv.data() + 1, M, W, B, I, J);
    // Each output is a 4-term dot product: error <= 4 * eps * sum |m||w| (a few ulps).
    for (int n2 = 0; n2 < B * I * J * 16; ++n2) {
      const int b = n2 / (I * J * 16), i = (n2 / (J * 16)) % I, j = (n2 / 16) % J, r = (n2 / 4) % 4, c = n2 % 4;
      double mag = 0;
      for (int q = 0; q < 4; ++q) mag += std::fabs(M[(b * I + i) * 16 + r * 4 + q] * W[(i * J + j) * 16 + q * 4 + c]);
      ASSERT_NEAR(Vv[n2 + 1], Vr[n2 + 1], 8 * FLT_EPSILON * mag + 1e-30) << isa_name(k.isa) << " B=" << B;
    }
    std::vector<float> dMr(B * I * 16 + 1, 0.f), dWr(I * J * 16 + 1, 0.f), dMv(dMr), dWv(dWr);
    pose_matmul_backward_f32__scalar(dMr.data() + 1, dWr.data() + 1, G, M, W, B, I, J);
    k.backward(dMv.data() + 1, dWv.data() + 1, G, M, W, B, I, J);
    // dM sums 4 J terms, dW sums 4 B terms, in any order: each side within
    // terms * eps * (the sum of the products' magnitudes) of the exact sum.
    std::vector<double> magM(size_t(B) * I * 16, 0.0), magW(size_t(I) * J * 16, 0.0);
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < I; ++i)
        for (int j = 0; j < J; ++j)
          for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c) {
              const double g = std::fabs(G[((b * I + i) * J + j) * 16 + r * 4 + c]);
              for (int q = 0; q < 4; ++q) {
                magM[(b * I + i) * 16 + r * 4 + q] += g * std::fabs(W[(i * J + j) * 16 + q * 4 + c]);
                magW[(i * J + j) * 16 + q * 4 + c] += g * std::fabs(M[(b * I + i) * 16 + r * 4 + q]);
              }
            }
    for (size_t q = 0; q < magM.size(); ++q)
      ASSERT_NEAR(dMv[q + 1], dMr[q + 1], 2 * 4.0 * J * FLT_EPSILON * magM[q] + 1e-30) << isa_name(k.isa) << " B=" << B;
    for (size_t q = 0; q < magW.size(); ++q)
      ASSERT_NEAR(dWv[q + 1], dWr[q + 1], 2 * 4.0 * B * FLT_EPSILON * magW[q] + 1e-30) << isa_name(k.isa) << " B=" << B;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, PoseMatmulVariant, ::testing::Range(0, test::variant_count(pose_matmul_variants)),
                         test::variant_names(pose_matmul_variants));

}  // namespace
}  // namespace vg
