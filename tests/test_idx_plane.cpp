// The in-plane protocols on an IDX set (data/idx_plane.h): the image on its
// canvas, moved exactly by a whole-pixel shift and a quarter turn, the
// held-out images the test images under their recorded magnitude, and the
// canvas's flag judged against the images' side. (tests/test_protocol.cpp
// runs them through every protocol's tests on the fixture.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "data/idx.h"
#include "data/idx_plane.h"
#include "tests/protocol_util.h"
#include "tests/test_util.h"

namespace vg {
namespace {

// A side x side image whose every pixel differs from its neighbours.
std::vector<uint8_t> ramp(int side) {
  std::vector<uint8_t> v(size_t(side) * size_t(side));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(1 + (i * 37) % 254);
  return v;
}

TEST(IdxPlane, AWholePixelShiftMovesThePixelsExactly) {
  const int side = 6, canvas = 10;
  const std::vector<uint8_t> src = ramp(side);
  for (const auto& [tx, ty] : {std::pair{0, 0}, {3, -2}, {-4, 4}, {-9, 0}}) {
    std::vector<float> out(size_t(canvas) * canvas, -1.f);
    idx_plane_image(src.data(), side, canvas, {.tx = double(tx), .ty = double(ty)}, false, out.data());
    for (int r = 0; r < canvas; ++r)
      for (int c = 0; c < canvas; ++c) {
        const int sr = r - 2 - ty, sc = c - 2 - tx;  // the image starts (10 - 6) / 2 = 2 pixels in
        const float want = sr >= 0 && sr < side && sc >= 0 && sc < side ? float(src[size_t(sr * side + sc)]) / 255.f : 0.f;
        ASSERT_EQ(out[size_t(r * canvas + c)], want) << tx << "," << ty << " at " << r << "," << c;
      }
  }
}

TEST(IdxPlane, AQuarterTurnAndAResampledIdentityMoveThePixelsExactly) {
  const int side = 6, canvas = 8;
  const std::vector<uint8_t> src = ramp(side);
  std::vector<float> plain(size_t(canvas) * canvas), same(plain.size()), turned(plain.size());
  idx_plane_image(src.data(), side, canvas, {}, false, plain.data());
  // A scale of exactly 1 through the resampling path reads every pixel at its own place.
  idx_plane_image(src.data(), side, canvas, PlaneTransform::make(0, 1, 0, 0.0, 0), false, same.data());
  EXPECT_EQ(same, plain);
  PlaneTransform scale1 = PlaneTransform::make(0, 1, 0, 0, 0);
  scale1.tx = 1e-12;  // not a whole pixel: resampled, and snapped back onto the pixels
  idx_plane_image(src.data(), side, canvas, scale1, false, same.data());
  EXPECT_EQ(same, plain);
  idx_plane_image(src.data(), side, canvas, PlaneTransform::make(90, 1, 0, 0, 0), false, turned.data());
  // p -> centre + R (p - centre): output (r, c) reads the image at R^-1 of it.
  const double centre = (canvas - 1) / 2.0;
  for (int r = 0; r < canvas; ++r)
    for (int c = 0; c < canvas; ++c) {
      const double x = c - centre, y = r - centre;  // R(90): (x, y) -> (-y, x); R^-1: (x, y) -> (y, -x)
      const int sc = int(std::lround(centre + y)), sr = int(std::lround(centre - x));
      EXPECT_EQ(turned[size_t(r * canvas + c)], plain[size_t(sr * canvas + sc)]) << r << "," << c;
    }
}

// Each held-out image is its test image under the magnitude it records, in one of the directions.
TEST(IdxPlane, HeldOutImagesAreTheTestImagesUnderTheirMagnitude) {
  for (const char* split : {"translation", "rotation", "affine"}) {
    SCOPED_TRACE(split);
    const Protocol* p = nullptr;
    for (const Protocol& q : protocol_registry())
      if (q.source == std::string("idx:") && q.split == std::string(split)) p = &q;
    ASSERT_NE(p, nullptr);
    const DataConfig cfg = test::configured(*p);
    const Dataset d = p->make(cfg);
    const IdxData& files = *cfg.idx->data;
    const int canvas = cfg.plane->canvas;
    ASSERT_EQ(d.heldout.side, canvas);
    ASSERT_EQ(d.heldout.size(), files.test.size());
    std::vector<float> want(size_t(canvas) * canvas);
    for (int j = 0; j < d.heldout.size(); ++j) {
      bool found = false;
      for (int k = 0; k < 8 && !found; ++k) {
        idx_plane_image(files.test.images.image(j), cfg.idx->side, canvas, cfg.plane->factor->at(d.heldout.axis[size_t(j)], k),
                        false, want.data());
        found = std::equal(want.begin(), want.end(), d.heldout.image(j));
      }
      EXPECT_TRUE(found) << "held-out image " << j;
      EXPECT_EQ(d.heldout.labels[size_t(j)], files.test.labels[size_t(j)]);
    }
    // The circle is the test file unchanged, at the centre.
    idx_plane_image(files.test.images.image(0), cfg.idx->side, canvas, {}, false, want.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), d.circle.image(0)));
  }
}

TEST(IdxPlane, TheCanvasIsJudgedAgainstTheImagesSide) {
  const std::string data = " --data " + test::fixture_data("idx:") + " --split translation --models linear --n-epochs 1";
  for (const char* bad : {"26", "129", "33"}) {
    const test::Outcome o = test::run(std::string("run") + data + " --canvas " + bad);
    EXPECT_EQ(o.code, 2) << bad << "\n" << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find(std::string("--canvas '") + bad + "'"), std::string::npos) << o.err;
  }
  // affNIST's canvas: the run builds its models for 40 x 40.
  const test::Outcome o = test::run(std::string("run") + data + " --canvas 40 --train-shift 2");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("on a 40 x 40 canvas"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace vg
