// The renderer's in-plane transform (data/dataset.h: PlaneTransform), which the
// translation and affine protocols draw their views with.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "data/dataset.h"

namespace vg {
namespace {

using Image = std::vector<float>;
constexpr int S = kImageSide;

Image render(int cls, double az, double el, const PlaneTransform* plane = nullptr, ShapeSet set = ShapeSet::seed) {
  Image img(kImagePixels);
  if (plane)
    render_clean(cls, az, el, *plane, img.data(), set);
  else
    render_clean(cls, az, el, img.data(), set);
  return img;
}

// The matrix make() composes, against its definition R(t) S(s) H(h).
TEST(PlaneTransform, MakeComposesShearScaleRotation) {
  const double t = 0.7, s = 1.3, h = -0.4;
  const PlaneTransform p = PlaneTransform::make(t * 180 / M_PI, s, h, 2.5, -1);
  const double R[2][2] = {{std::cos(t), -std::sin(t)}, {std::sin(t), std::cos(t)}};
  const double SH[2][2] = {{s, s * h}, {0, s}};
  double m[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) m[i][j] = R[i][0] * SH[0][j] + R[i][1] * SH[1][j];
  EXPECT_NEAR(p.a, m[0][0], 1e-15);
  EXPECT_NEAR(p.b, m[0][1], 1e-15);
  EXPECT_NEAR(p.c, m[1][0], 1e-15);
  EXPECT_NEAR(p.d, m[1][1], 1e-15);
  EXPECT_EQ(p.tx, 2.5);
  EXPECT_EQ(p.ty, -1);
  EXPECT_TRUE(PlaneTransform::make(0, 1, 0, 0, 0).identity());
}

// The identity is the plain render, bit for bit (the seed's data keep their bytes).
TEST(PlaneTransform, IdentityIsThePlainRender) {
  const PlaneTransform id;
  for (int cls = 0; cls < kNumClasses; ++cls)
    for (ShapeSet set : {ShapeSet::seed, ShapeSet::asym})
      EXPECT_EQ(render(cls, 40, 30, &id, set), render(cls, 40, 30, nullptr, set)) << cls;
}

// A whole-pixel shift moves the image by whole pixels: pixel (r, c) of the
// shifted render is pixel (r - ty, c - tx) of the plain one. Only the rounding
// of the blob profiles (started at the clipped reach) may differ.
TEST(PlaneTransform, WholePixelShiftMovesTheImage) {
  for (const auto& [tx, ty] : {std::pair{3, 0}, std::pair{0, -2}, std::pair{-4, 5}}) {
    const PlaneTransform p{.tx = double(tx), .ty = double(ty)};
    const Image a = render(3, 70, 20), b = render(3, 70, 20, &p);
    double moved = 0;
    for (int r = 0; r < S; ++r)
      for (int c = 0; c < S; ++c) {
        const int r0 = r - ty, c0 = c - tx;
        // A pixel whose source lies outside the frame was never rendered there.
        if (r0 >= 0 && r0 < S && c0 >= 0 && c0 < S) {
          EXPECT_NEAR(b[size_t(r * S + c)], a[size_t(r0 * S + c0)], 1e-5) << tx << "," << ty << " at " << r << "," << c;
        }
        moved += std::fabs(b[size_t(r * S + c)] - a[size_t(r * S + c)]);
      }
    EXPECT_GT(moved, 10.0) << "the shift changed nothing";
  }
}

// A quarter turn about pixel (16, 16) maps whole pixels to whole pixels:
// (column, row) = centre + R(90) (p - centre), R(90) = [0 -1; 1 0]. The blobs
// are round, so the turned render is the plain one's pixels permuted.
TEST(PlaneTransform, QuarterTurnPermutesPixelsAboutTheObjectCentre) {
  const PlaneTransform p = PlaneTransform::make(90, 1, 0, 0, 0);
  const Image a = render(1, 10, 30), b = render(1, 10, 30, &p);
  const int c0 = 16;
  int compared = 0;
  for (int r = 0; r < S; ++r)
    for (int c = 0; c < S; ++c) {
      // b at (c, r) = a at the p with centre + R (p - centre) = (c, r): p = centre + R^-1 (q - centre).
      const int pc = c0 + (r - c0), pr = c0 - (c - c0);
      if (pc < 0 || pc >= S || pr < 0 || pr >= S) continue;
      EXPECT_NEAR(b[size_t(r * S + c)], a[size_t(pr * S + pc)], 1e-5) << r << "," << c;
      ++compared;
    }
  EXPECT_GT(compared, 900);
}

// Scaling about the centre moves the ink toward it: the mean distance of the
// ink from the centre shrinks by about the factor (the blobs keep their width).
TEST(PlaneTransform, ScaleShrinksTheObjectAboutItsCentre) {
  auto spread = [](const Image& img) {
    double m = 0, w = 0;
    for (int r = 0; r < S; ++r)
      for (int c = 0; c < S; ++c) {
        const double v = img[size_t(r * S + c)];
        m += v * std::hypot(r - 16.0, c - 16.0);
        w += v;
      }
    return m / w;
  };
  const PlaneTransform half = PlaneTransform::make(0, 0.5, 0, 0, 0);
  for (int cls = 0; cls < kNumClasses; ++cls) {
    const double full = spread(render(cls, 30, 30)), small = spread(render(cls, 30, 30, &half));
    EXPECT_LT(small, 0.75 * full) << cls;
    EXPECT_GT(small, 0.35 * full) << cls;
  }
}

}  // namespace
}  // namespace vg
