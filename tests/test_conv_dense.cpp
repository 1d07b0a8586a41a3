// Conv2d and Dense (oneDNN) against their direct-loop references, and the references
// against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/rng.h"
#include "kernels/conv.h"
#include "kernels/dense.h"
#include "kernels/dnnl_common.h"
#include "kernels/pool.h"

namespace vg {
namespace {

using Vec = std::vector<float>;
constexpr uint64_t kSeed = 2024;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Vec normal(size_t n, float scale, uint64_t a, uint64_t b) {
  Stream s(kSeed, Purpose::Test, a, b);
  Vec v(n);
  for (float& x : v) x = float(scale * s.normal());
  return v;
}
Vec uniform01(size_t n, uint64_t a, uint64_t b) {  // image-like pixels
  Stream s(kSeed, Purpose::Test, a, b);
  Vec v(n);
  for (float& x : v) x = float(s.uniform());
  return v;
}
Vec abs_of(const Vec& v) {
  Vec r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = std::fabs(v[i]);
  return r;
}

// Compares a oneDNN result with the reference. Both are float sums of `terms` products
// in different orders, whose rounding errors grow like sqrt(terms) * eps * sum|a||b|;
// the tolerance is that times 4. `mag` holds sum|a||b| (+|bias|) per output, computed
// by running the reference on absolute values. The worst error seen per quantity, in
// units of eps * sqrt(terms) * mag, goes to the XML report to show the margin.
class Checker {
 public:
  static constexpr double kSafety = 4.0;

  void expect_close(const std::string& what, const Vec& got, const Vec& want, const Vec& mag,
                    int terms) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const double unit = std::numeric_limits<float>::epsilon() * std::sqrt(double(terms));
    int bad = 0;
    double& worst = worst_[what];
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(double(got[i]) - double(want[i]));
      const double tol = kSafety * unit * mag[i];
      if (mag[i] > 0) worst = std::max(worst, err / (unit * mag[i]));
      if (!(err <= tol) && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i]
                      << ", tolerance " << tol;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " outside tolerance";
  }

  ~Checker() {
    for (const auto& [what, e] : worst_)
      ::testing::Test::RecordProperty(what + "_worst_err_in_eps_sqrt_n", std::to_string(e));
  }

 private:
  std::map<std::string, double> worst_;
};

// Batch sizes in the order they are used: new sizes, then sizes seen before, so a
// cached per-batch primitive is reused after another size ran in between.
const int kBatches[] = {1, 2, 32, 33, 2, 32, 1};

// ---- references on hand-computable cases ----------------------------------------

// 3x3 image 1..9; channel 0 sums the 3x3 neighbourhood (all-ones kernel), channel 1
// is the identity tap with bias -5 (so ReLU clips the first five pixels).
const Vec kImage = {1, 2, 3, 4, 5, 6, 7, 8, 9};
ConvShape hand_shape(int stride) {
  ConvShape s;
  s.height = s.width = 3;
  s.out_channels = 2;
  s.kernel = 3;
  s.stride = stride;
  s.pad = 1;
  return s;
}
Vec hand_weights() {
  Vec w(2 * 9, 0.f);
  for (int i = 0; i < 9; ++i) w[i] = 1.f;
  w[9 + 4] = 1.f;
  return w;
}

// The ISA in the JSON's meta.onednn_isa names one of this architecture's: oneDNN
// 2.6 returns aarch64's flags in x86's enum, where 0x1f read "avx512_mic_4ops".
TEST(Onednn, IsaNamesOneOfThisArchitecture) {
  const std::string isa = onednn_isa();
#if defined(__x86_64__)
  EXPECT_TRUE(isa.rfind("avx", 0) == 0 || isa == "sse41") << isa;
#elif defined(__aarch64__)
  EXPECT_TRUE(isa == "asimd" || isa.rfind("sve_", 0) == 0) << isa;
#endif
}

TEST(ConvReference, HandComputedStride1) {
  const ConvShape s = hand_shape(1);
  const Vec w = hand_weights(), bias = {0.f, -5.f};
  Vec dst(2 * 9);
  conv2d_forward_ref(dst.data(), kImage.data(), w.data(), bias.data(), s, 1, /*relu=*/true);
  // nhwc: (pixel, channel) pairs.
  const Vec sums = {12, 21, 16, 27, 45, 33, 24, 39, 28};
  for (int p = 0; p < 9; ++p) {
    EXPECT_EQ(dst[2 * p], sums[p]) << "pixel " << p;
    EXPECT_EQ(dst[2 * p + 1], std::max(kImage[p] - 5.f, 0.f)) << "pixel " << p;
  }

  // diff_dst = 1 on channel 0, 0 on channel 1: each tap's gradient is the sum of the
  // pixels it touches; the bias gradient counts the outputs.
  Vec diff_dst(2 * 9, 0.f);
  for (int p = 0; p < 9; ++p) diff_dst[2 * p] = 1.f;
  Vec dw(18, kNaN), db(2, kNaN);
  conv2d_backward_weights_ref(dw.data(), db.data(), diff_dst.data(), kImage.data(), s, 1);
  // Tap (kh,kw) sees the image shifted by (kh-1,kw-1), the same window as the output
  // pixel (kh,kw) sums above.
  for (int t = 0; t < 9; ++t) {
    EXPECT_EQ(dw[t], sums[t]) << "tap " << t;
    EXPECT_EQ(dw[9 + t], 0.f);
  }
  EXPECT_EQ(db[0], 9.f);
  EXPECT_EQ(db[1], 0.f);
}

TEST(ConvReference, HandComputedStride2) {
  const ConvShape s = hand_shape(2);
  ASSERT_EQ(s.out_height(), 2);
  const Vec w = hand_weights(), bias = {0.f, -5.f};
  Vec dst(2 * 4);
  conv2d_forward_ref(dst.data(), kImage.data(), w.data(), bias.data(), s, 1, /*relu=*/false);
  // Outputs are centred on the corner pixels 1, 3, 7, 9.
  const Vec want = {12, -4, 16, -2, 24, 2, 28, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dst[i], want[i]) << i;
}

TEST(DenseReference, HandComputed) {
  // src 2x2, weights 2x3, bias 3.
  const Vec src = {1, 2, 3, 4}, w = {1, 0, -1, 2, 1, 0}, bias = {0.5f, -10.f, 1.f};
  Vec dst(6);
  dense_forward_ref(dst.data(), src.data(), w.data(), bias.data(), 2, 2, 3, false);
  EXPECT_EQ(dst, (Vec{5.5f, -8.f, 0.f, 11.5f, -6.f, -2.f}));
  dense_forward_ref(dst.data(), src.data(), w.data(), bias.data(), 2, 2, 3, true);
  EXPECT_EQ(dst, (Vec{5.5f, 0.f, 0.f, 11.5f, 0.f, 0.f}));

  const Vec diff_dst = {1, 0, 0, 0, 1, 1};
  Vec diff_src(4, kNaN);
  dense_backward_data_ref(diff_src.data(), diff_dst.data(), w.data(), 2, 2, 3);
  EXPECT_EQ(diff_src, (Vec{1, 2, -1, 1}));

  Vec dw(6, kNaN), db(3, kNaN);
  dense_backward_weights_ref(dw.data(), db.data(), diff_dst.data(), src.data(), 2, 2, 3);
  EXPECT_EQ(dw, (Vec{1, 3, 3, 2, 4, 4}));
  EXPECT_EQ(db, (Vec{1, 1, 1}));
}

// ---- oneDNN against the references ----------------------------------------------

// (ReLU, output channels). 16 is conv1's; with 8 and 16 one channel block of
// oneDNN's nChw8c / nChw16c holds them all, so the conv writes the caller's
// nhwc buffer in place (whichever ISA picks which); 24 and 32 need the reorder.
class Conv2dVsReference : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(Conv2dVsReference, ForwardAndBackwardWeights) {
  const bool relu = std::get<0>(GetParam());
  ConvShape s;  // conv1: 1->16, 5x5, stride 2, pad 2, 32x32
  s.out_channels = std::get<1>(GetParam());
  Conv2d conv(s, relu);
  const Vec w = normal(s.weight_size(), std::sqrt(2.f / 25.f), 1, 0);
  const Vec bias = normal(s.out_channels, 0.1f, 2, 0);
  const Vec w_abs = abs_of(w), bias_abs = abs_of(bias);
  Checker check;
  int call = 0;
  for (const int batch : kBatches) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", call " + std::to_string(call));
    const Vec src = uniform01(size_t(batch) * s.in_size(), 3, call);
    const Vec diff_dst = normal(size_t(batch) * s.out_size(), 1.f, 4, call);
    ++call;

    Vec dst(size_t(batch) * s.out_size(), kNaN), want(dst.size()), mag(dst.size());
    conv.forward(dst.data(), src.data(), w.data(), bias.data(), batch);
    conv2d_forward_ref(want.data(), src.data(), w.data(), bias.data(), s, batch, relu);
    conv2d_forward_ref(mag.data(), abs_of(src).data(), w_abs.data(), bias_abs.data(), s, batch,
                       false);
    check.expect_close("conv_dst", dst, want, mag, s.in_channels * s.kernel * s.kernel + 1);

    Vec dw(s.weight_size(), kNaN), db(s.out_channels, kNaN);
    Vec dw_want(dw.size()), db_want(db.size()), dw_mag(dw.size()), db_mag(db.size());
    conv.backward_weights(dw.data(), db.data(), diff_dst.data(), src.data(), batch);
    conv2d_backward_weights_ref(dw_want.data(), db_want.data(), diff_dst.data(), src.data(), s,
                                batch);
    conv2d_backward_weights_ref(dw_mag.data(), db_mag.data(), abs_of(diff_dst).data(),
                                abs_of(src).data(), s, batch);
    const int terms = batch * s.out_height() * s.out_width();
    check.expect_close("conv_diff_weights", dw, dw_want, dw_mag, terms);
    check.expect_close("conv_diff_bias", db, db_want, db_mag, terms);
  }
}

INSTANTIATE_TEST_SUITE_P(Conv1, Conv2dVsReference, ::testing::Combine(::testing::Bool(), ::testing::Values(16, 8, 24, 32)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "relu" : "linear") + "_out" +
                                  std::to_string(std::get<1>(info.param));
                         });

struct DenseCase {
  int in, out;
  bool relu;
};

class DenseVsReference : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseVsReference, ForwardAndBackward) {
  const auto [K, N, relu] = GetParam();
  Dense dense(K, N, relu);
  const Vec w = normal(size_t(K) * N, std::sqrt(2.f / K), 10, 0);
  const Vec bias = normal(N, 0.1f, 11, 0);
  const Vec w_abs = abs_of(w), bias_abs = abs_of(bias);
  Checker check;
  int call = 0;
  for (const int B : kBatches) {
    SCOPED_TRACE("batch " + std::to_string(B) + ", call " + std::to_string(call));
    const Vec src = normal(size_t(B) * K, 1.f, 12, call);
    const Vec diff_dst = normal(size_t(B) * N, 1.f, 13, call);
    const Vec src_abs = abs_of(src), diff_dst_abs = abs_of(diff_dst);
    ++call;

    Vec dst(size_t(B) * N, kNaN), want(dst.size()), mag(dst.size());
    dense.forward(dst.data(), src.data(), w.data(), bias.data(), B);
    dense_forward_ref(want.data(), src.data(), w.data(), bias.data(), B, K, N, relu);
    dense_forward_ref(mag.data(), src_abs.data(), w_abs.data(), bias_abs.data(), B, K, N, false);
    check.expect_close("dense_dst", dst, want, mag, K + 1);

    Vec diff_src(size_t(B) * K, kNaN), ds_want(diff_src.size()), ds_mag(diff_src.size());
    dense.backward_data(diff_src.data(), diff_dst.data(), w.data(), B);
    dense_backward_data_ref(ds_want.data(), diff_dst.data(), w.data(), B, K, N);
    dense_backward_data_ref(ds_mag.data(), diff_dst_abs.data(), w_abs.data(), B, K, N);
    check.expect_close("dense_diff_src", diff_src, ds_want, ds_mag, N);

    Vec dw(size_t(K) * N, kNaN), db(N, kNaN);
    Vec dw_want(dw.size()), db_want(db.size()), dw_mag(dw.size()), db_mag(db.size());
    dense.backward_weights(dw.data(), db.data(), diff_dst.data(), src.data(), B);
    dense_backward_weights_ref(dw_want.data(), db_want.data(), diff_dst.data(), src.data(), B, K,
                               N);
    dense_backward_weights_ref(dw_mag.data(), db_mag.data(), diff_dst_abs.data(), src_abs.data(),
                               B, K, N);
    check.expect_close("dense_diff_weights", dw, dw_want, dw_mag, B);
    check.expect_close("dense_diff_bias", db, db_want, db_mag, B);
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, DenseVsReference,
                         ::testing::Values(DenseCase{4096, 136, false},  // capsule primary
                                           DenseCase{4096, 136, true},   // CNN --cnn-hidden 136
                                           DenseCase{4096, 64, true},    // CNN hidden
                                           DenseCase{64, 5, false},      // CNN logits
                                           DenseCase{136, 5, false}),
                         [](const auto& info) {
                           const DenseCase& c = info.param;
                           return std::to_string(c.in) + "x" + std::to_string(c.out) +
                                  (c.relu ? "_relu" : "_linear");
                         });

// ---- the paper CNN's layers: channel-last convolution with backward-data, max-pooling ----

// nchw -> nhwc: the references read and write nchw.
Vec to_nhwc(const Vec& v, int batch, int C, int H, int W) {
  Vec r(v.size());
  for (int b = 0; b < batch; ++b)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < H * W; ++i) r[(size_t(b) * H * W + i) * C + c] = v[(size_t(b) * C + c) * H * W + i];
  return r;
}

struct ConvCase {
  const char* name;
  ConvShape shape;
  bool channel_last;
};

class ConvBackwardData : public ::testing::TestWithParam<ConvCase> {};

// Forward, backward-weights and backward-data against the references, with the
// src in either layout (the reference's nchw converted).
TEST_P(ConvBackwardData, MatchesTheReferenceInEitherSrcLayout) {
  const ConvShape s = GetParam().shape;
  const bool last = GetParam().channel_last;
  Conv2d conv(s, /*relu=*/false, last);
  const Vec w = normal(s.weight_size(), std::sqrt(2.f / float(s.in_channels * 25)), 11, 0);
  const Vec bias = normal(s.out_channels, 0.1f, 12, 0);
  const Vec w_abs = abs_of(w), bias_abs = abs_of(bias);
  Checker check;
  int call = 0;
  for (const int batch : {1, 3, 1}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + ", call " + std::to_string(call));
    const Vec src = normal(size_t(batch) * s.in_size(), 1.f, 13, call);  // nchw
    const Vec diff_dst = normal(size_t(batch) * s.out_size(), 1.f, 14, call);
    ++call;
    const Vec src_in = last ? to_nhwc(src, batch, s.in_channels, s.height, s.width) : src;
    Vec dst(size_t(batch) * s.out_size(), kNaN), want(dst.size()), mag(dst.size());
    conv.forward(dst.data(), src_in.data(), w.data(), bias.data(), batch);
    conv2d_forward_ref(want.data(), src.data(), w.data(), bias.data(), s, batch, false);
    conv2d_forward_ref(mag.data(), abs_of(src).data(), w_abs.data(), bias_abs.data(), s, batch, false);
    check.expect_close("conv_dst", dst, want, mag, s.in_channels * s.kernel * s.kernel + 1);

    Vec dw(s.weight_size(), kNaN), db(s.out_channels, kNaN), dw_want(dw.size()), db_want(db.size());
    Vec dw_mag(dw.size()), db_mag(db.size());
    conv.prepare_backward(batch, /*data=*/true);
    conv.backward_weights(dw.data(), db.data(), diff_dst.data(), src_in.data(), batch);
    conv2d_backward_weights_ref(dw_want.data(), db_want.data(), diff_dst.data(), src.data(), s, batch);
    conv2d_backward_weights_ref(dw_mag.data(), db_mag.data(), abs_of(diff_dst).data(), abs_of(src).data(), s, batch);
    check.expect_close("conv_diff_weights", dw, dw_want, dw_mag, batch * s.out_height() * s.out_width());
    check.expect_close("conv_diff_bias", db, db_want, db_mag, batch * s.out_height() * s.out_width());

    Vec ds(size_t(batch) * s.in_size(), kNaN), ds_want(ds.size()), ds_mag(ds.size());
    conv.backward_data(ds.data(), diff_dst.data(), w.data(), batch);
    conv2d_backward_data_ref(ds_want.data(), diff_dst.data(), w.data(), s, batch);
    conv2d_backward_data_ref(ds_mag.data(), abs_of(diff_dst).data(), w_abs.data(), s, batch);
    if (last) {
      ds_want = to_nhwc(ds_want, batch, s.in_channels, s.height, s.width);
      ds_mag = to_nhwc(ds_mag, batch, s.in_channels, s.height, s.width);
    }
    check.expect_close("conv_diff_src", ds, ds_want, ds_mag, s.out_channels * s.kernel * s.kernel);
  }
}

INSTANTIATE_TEST_SUITE_P(PaperCnn, ConvBackwardData,
                         ::testing::Values(ConvCase{"conv2", {32, 16, 16, 64, 5, 1, 2}, true},
                                           ConvCase{"conv1_two_channels", {2, 32, 32, 32, 5, 1, 2}, false},
                                           ConvCase{"stride2_channel_last", {3, 11, 9, 8, 5, 2, 2}, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// The paper CNN's two pools and an odd size (the last row and column fall outside every window).
const PoolShape kPools[] = {{32, 32, 32, 2, 2}, {64, 16, 16, 2, 2}, {3, 5, 7, 2, 2}};

// Max is exact, and with stride = kernel each input feeds one window: oneDNN and
// the reference agree bit for bit (random normal inputs: no ties).
TEST(MaxPool2d, ForwardAndBackwardEqualTheReference) {
  for (const PoolShape& s : kPools) {
    MaxPool2d pool(s);
    int call = 0;
    for (const int batch : kBatches) {
      SCOPED_TRACE("C " + std::to_string(s.channels) + ", batch " + std::to_string(batch));
      const Vec src = normal(size_t(batch) * s.in_size(), 1.f, 21, call);
      const Vec diff_dst = normal(size_t(batch) * s.out_size(), 1.f, 22, call);
      ++call;
      Vec dst(size_t(batch) * s.out_size(), kNaN), want(dst.size());
      pool.forward(dst.data(), src.data(), batch);
      maxpool2d_forward_ref(want.data(), src.data(), s, batch);
      EXPECT_EQ(dst, want);
      Vec ds(size_t(batch) * s.in_size(), kNaN), ds_want(ds.size());
      pool.backward(ds.data(), diff_dst.data(), batch);
      maxpool2d_backward_ref(ds_want.data(), diff_dst.data(), src.data(), s, batch);
      EXPECT_EQ(ds, ds_want);
    }
  }
}

// ReLU outputs tie at 0 in whole windows: the gradient goes to one input of the
// window (the first in row-major order, as the reference says), not split or lost.
TEST(MaxPool2d, ATiedWindowRoutesItsGradientToItsFirstInput) {
  const PoolShape s{8, 4, 4, 2, 2};
  MaxPool2d pool(s);
  const Vec src(size_t(s.in_size()), 0.f);
  const Vec diff_dst = normal(size_t(s.out_size()), 1.f, 23, 0);
  Vec dst(size_t(s.out_size())), ds(size_t(s.in_size()), kNaN), want(ds.size());
  pool.forward(dst.data(), src.data(), 1);
  pool.backward(ds.data(), diff_dst.data(), 1);
  maxpool2d_backward_ref(want.data(), diff_dst.data(), src.data(), s, 1);
  EXPECT_EQ(ds, want);
}

// The backward is the gradient of L = sum(dst * r): central differences of L in
// single inputs (a step small against the gaps between a window's values).
TEST(MaxPool2d, BackwardMatchesFiniteDifferences) {
  const PoolShape s{64, 16, 16, 2, 2};
  MaxPool2d pool(s);
  Vec src = normal(size_t(2) * s.in_size(), 1.f, 24, 0);
  const Vec r = normal(size_t(2) * s.out_size(), 1.f, 25, 0);
  Vec dst(r.size()), ds(src.size());
  const float h = 1e-3f;
  auto loss = [&] {
    pool.forward(dst.data(), src.data(), 2);
    double l = 0;
    for (size_t k = 0; k < dst.size(); ++k) l += double(dst[k]) * r[k];
    return l;
  };
  loss();
  pool.backward(ds.data(), r.data(), 2);
  int nonzero = 0;
  // Whether input k's window has two values within 2h: the maximum may change hands there.
  auto near_tie = [&](size_t k) {
    const size_t c = k % size_t(s.channels), pixel = k / size_t(s.channels);
    const size_t w = pixel % size_t(s.width), hh = pixel / size_t(s.width) % size_t(s.height);
    const size_t image = pixel / size_t(s.width * s.height);
    std::vector<float> v;
    for (size_t i = hh / 2 * 2; i < hh / 2 * 2 + 2; ++i)
      for (size_t j = w / 2 * 2; j < w / 2 * 2 + 2; ++j)
        v.push_back(src[((image * size_t(s.height) + i) * size_t(s.width) + j) * size_t(s.channels) + c]);
    std::sort(v.begin(), v.end());
    return v[3] - v[2] < 2 * h;
  };
  for (size_t k = 0; k < src.size(); k += 37) {
    if (near_tie(k)) continue;
    const float x0 = src[k];
    src[k] = x0 + h;
    const double fp = loss();
    src[k] = x0 - h;
    const double fm = loss();
    src[k] = x0;
    EXPECT_NEAR((fp - fm) / (2 * double(h)), ds[k], 1e-3 * (1 + std::fabs(ds[k]))) << k;
    nonzero += ds[k] != 0;
  }
  EXPECT_GT(nonzero, 0);
}

}  // namespace
}  // namespace vg
