// Dataset synthesis (SPEC section 1): shapes, renderer geometry, splits, determinism.
#include "data/dataset.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

using vg::kImagePixels;
using vg::kImageSide;

std::vector<float> clean(int cls, double az, double el) {
  std::vector<float> img(kImagePixels);
  vg::render_clean(cls, az, el, img.data());
  return img;
}

float at(const std::vector<float>& img, int r, int c) { return img[size_t(r * kImageSide + c)]; }

double l2(const float* a, const float* b) {
  double s = 0;
  for (int i = 0; i < kImagePixels; ++i) s += double(a[i] - b[i]) * double(a[i] - b[i]);
  return std::sqrt(s);
}

bool same_bytes(const vg::Split& a, const vg::Split& b) {
  return a.images.size() == b.images.size() && a.labels == b.labels &&
         std::memcmp(a.images.data(), b.images.data(), a.images.size() * sizeof(float)) == 0;
}

void expect_values(const vg::AngleRange& r, const std::vector<double>& want) {
  const std::vector<double> got = r.values();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "index " << i;
}

TEST(Dataset, PointCountsPerClass) {
  EXPECT_EQ(vg::shape_points(0).size(), 13u);          // origin + 4 per axis
  EXPECT_EQ(vg::shape_points(1).size(), 9u + 8 + 5);   // L
  EXPECT_EQ(vg::shape_points(2).size(), 9u + 7 + 5);   // T
  EXPECT_EQ(vg::shape_points(3).size(), 60u);          // 12 edges x 5
  EXPECT_EQ(vg::shape_points(4).size(), 16u);          // origin + 3 prongs x 5
  for (int c = 0; c < vg::kNumClasses; ++c)
    for (const vg::Point3& p : vg::shape_points(c))
      for (float x : p) EXPECT_LE(std::fabs(x), 1.0f);
}

TEST(Dataset, RenderInUnitRangeAndNotBlank) {
  for (int c = 0; c < vg::kNumClasses; ++c)
    for (double az : {0.0, 45.0, 200.0, 330.0})
      for (double el : {10.0, 30.0, 50.0}) {
        const std::vector<float> img = clean(c, az, el);
        const auto [lo, hi] = std::minmax_element(img.begin(), img.end());
        EXPECT_GE(*lo, 0.0f);
        EXPECT_LE(*hi, 1.0f);
        EXPECT_GT(*hi, 0.5f) << "class " << c << " az " << az << " el " << el;
      }
}

// Cross at az 0, el 0: the z axis collapses onto the centre (u = v = 16), which
// saturates; x -> -x maps column u to 32 - u, so column c mirrors column 32 - c.
TEST(Dataset, CrossGeometryAtFrontView) {
  const std::vector<float> img = clean(0, 0, 0);
  // Several pixels saturate, so locate the brightness centroid rather than one argmax.
  double sum = 0, sr = 0, sc = 0;
  for (int r = 0; r < kImageSide; ++r)
    for (int c = 0; c < kImageSide; ++c) {
      sum += at(img, r, c);
      sr += r * at(img, r, c);
      sc += c * at(img, r, c);
    }
  EXPECT_NEAR(sr / sum, 16.0, 0.01);
  EXPECT_NEAR(sc / sum, 16.0, 0.01);
  EXPECT_FLOAT_EQ(at(img, 16, 16), *std::max_element(img.begin(), img.end()));
  EXPECT_FLOAT_EQ(at(img, 16, 16), 1.0f);  // five points of total weight 4.0 stack there
  for (int r = 0; r < kImageSide; ++r)
    for (int c = 1; c < kImageSide; ++c) EXPECT_NEAR(at(img, r, c), at(img, r, 32 - c), 1e-6);
  // (0.7,0,0) projects to u = 1.7/2*24+4 = 24.4, v = 16, w = 0.6+0.4*0.5 = 0.8; pixel
  // (16,24) sees it at distance 0.4 and (0.35,0,0) (u = 20.2) at 3.8; the rest add < 1e-4.
  const double want = 0.8 * (std::exp(-0.16 / 5.12) + std::exp(-14.44 / 5.12));
  EXPECT_NEAR(at(img, 16, 24), want, 1e-4);
  EXPECT_GT(at(img, 16, 24), at(img, 16, 23));
  EXPECT_GT(at(img, 16, 24), at(img, 16, 25));
}

// Tripod: the x prong reaches (0.85,0,0) -> column 26.2 on row 16 at az 0. Under R_y
// (c = cos az, s = sin az): x' = c x + s z, z' = -s x + c z. At az 90 the x prong maps to
// (0,0,-d), the centre column, and the third prong (-0.7d)(1,1,1) to x' = -0.7d, so its tip
// (d = 0.85) lands at u = (1-0.595)*12+4 = 8.86, v = 23.14. At az 270, x' = +0.7d: u = 23.14.
TEST(Dataset, RotationDirection) {
  const std::vector<float> az0 = clean(4, 0, 0), az90 = clean(4, 90, 0), az270 = clean(4, 270, 0);
  EXPECT_GT(at(az0, 16, 26), 0.5f);
  EXPECT_LT(at(az90, 16, 26), 0.01f);
  EXPECT_GT(at(az90, 16, 16), 0.5f);
  EXPECT_GT(at(az90, 23, 9), 0.5f);
  EXPECT_LT(at(az90, 23, 23), 0.01f);
  EXPECT_GT(at(az270, 23, 23), 0.5f);
  EXPECT_LT(at(az270, 23, 9), 0.01f);
}

// Closer is brighter: the third prong's tip has z' = -0.595 at az 0 (w = 0.681) and +0.595
// at az 180 (w = 0.919), mirrored in column. Pixel (25,25) at az 180 is ~1.86 px from the
// tip on each axis: ~0.919*0.259 + 0.013 = 0.251 vs ~0.681*0.259 + 0.010 = 0.187 at az 0.
TEST(Dataset, DepthGating) {
  const std::vector<float> front = clean(4, 0, 0), back = clean(4, 180, 0);
  EXPECT_NEAR(at(front, 25, 7), 0.187, 0.005);
  EXPECT_NEAR(at(back, 25, 25), 0.251, 0.005);
}

// Two noisy copies of one image differ by about 0.04*sqrt(2*1024) = 1.81 in L2. Clean
// renders of different classes must be separated by more than twice that.
TEST(Dataset, ClassesAreDistinct) {
  std::vector<std::vector<float>> img;
  for (int c = 0; c < vg::kNumClasses; ++c) img.push_back(clean(c, 0, 30));
  for (int a = 0; a < vg::kNumClasses; ++a)
    for (int b = a + 1; b < vg::kNumClasses; ++b)
      EXPECT_GT(l2(img[size_t(a)].data(), img[size_t(b)].data()), 2 * 1.81) << a << " vs " << b;
}

TEST(Dataset, AngleRangeValues) {
  expect_values({300, 420, 3}, {300, 0, 60});
  expect_values({0, 150, 6}, {0, 30, 60, 90, 120, 150});
  expect_values({200, 330, 6}, {200, 226, 252, 278, 304, 330});
  expect_values({10, 50, 3}, {10, 30, 50});
  expect_values({45, 90, 1}, {45});
  expect_values({-30, 30, 3}, {330, 0, 30});
}

TEST(Dataset, CircularDistance) {
  EXPECT_DOUBLE_EQ(vg::circular_distance(350, 10), 20);
  EXPECT_DOUBLE_EQ(vg::circular_distance(10, 350), 20);
  EXPECT_DOUBLE_EQ(vg::circular_distance(0, 180), 180);
  EXPECT_DOUBLE_EQ(vg::circular_distance(0, 360), 0);
  EXPECT_DOUBLE_EQ(vg::circular_distance(30, 750), 0);
}

TEST(Dataset, AzimuthGap) {
  const vg::DataConfig cfg;
  // 330 is 30 from 0; every other pair is farther.
  EXPECT_DOUBLE_EQ(vg::azimuth_gap(cfg.train_azimuths.values(), cfg.test_azimuths.values()), 30);
  EXPECT_DOUBLE_EQ(vg::azimuth_gap(vg::AngleRange{0, 60, 3}.values(),
                                   vg::AngleRange{90, 150, 3}.values()), 30);
  EXPECT_DOUBLE_EQ(vg::azimuth_gap(vg::AngleRange{0, 150, 6}.values(),
                                   vg::AngleRange{150, 300, 6}.values()), 0);
}

TEST(Dataset, DefaultSplitSizesAndBalance) {
  const vg::Dataset d = vg::make_dataset(vg::DataConfig{});
  EXPECT_EQ(d.train.size(), 450);
  EXPECT_EQ(d.familiar.size(), 180);
  EXPECT_EQ(d.heldout.size(), 180);
  EXPECT_EQ(d.circle.size(), 1080);
  EXPECT_EQ(d.train_az, (std::vector<double>{0, 30, 60, 90, 120, 150}));
  EXPECT_EQ(d.test_az, (std::vector<double>{200, 226, 252, 278, 304, 330}));
  EXPECT_EQ(d.circle_az.size(), 36u);
  EXPECT_DOUBLE_EQ(d.circle_az.back(), 350);
  EXPECT_DOUBLE_EQ(d.gap_deg, 30);
  EXPECT_EQ(d.elevations, (std::vector<double>{10, 30, 50}));
  for (const vg::Split* s : {&d.train, &d.familiar, &d.heldout, &d.circle}) {
    ASSERT_EQ(s->images.size(), size_t(s->size()) * kImagePixels);
    ASSERT_EQ(s->azimuth.size(), size_t(s->size()));
    ASSERT_EQ(s->elevation.size(), size_t(s->size()));
    std::vector<int> count(vg::kNumClasses, 0);
    for (int y : s->labels) ++count[size_t(y)];
    for (int c : count) EXPECT_EQ(c, s->size() / vg::kNumClasses);
    EXPECT_TRUE(std::is_sorted(s->labels.begin(), s->labels.end()));
    for (float v : s->images) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
  }
  // Ordering (class, azimuth, elevation, sample): train image 5*3*1 + 2*5 + 1 = 26 is
  // class 0, azimuth 30, elevation 50.
  EXPECT_EQ(d.train.labels[26], 0);
  EXPECT_FLOAT_EQ(d.train.azimuth[26], 30.0f);
  EXPECT_FLOAT_EQ(d.train.elevation[26], 50.0f);
  for (float a : d.heldout.azimuth) EXPECT_GE(a, 200.0f);
  // Familiar has fresh noise: same views as train, different bytes.
  EXPECT_NE(std::memcmp(d.train.image(0), d.familiar.image(0), kImagePixels * sizeof(float)), 0);
}

// Each image is its clean render plus N(0, 0.04^2) noise, clipped.
TEST(Dataset, NoiseLevel) {
  const vg::DataConfig cfg;
  const vg::Split s = vg::make_split(cfg, vg::SplitId::Train, {0}, 1);
  const std::vector<float> ref = clean(2, 0, 30);
  const float* img = s.image(2 * 3 + 1);  // class 2, azimuth 0, elevation 30
  // Pixels far from both 0 and 1 are not clipped; their residual std should be ~0.04.
  double ss = 0;
  int n = 0;
  for (int i = 0; i < kImagePixels; ++i)
    if (ref[size_t(i)] > 0.2f && ref[size_t(i)] < 0.8f) {
      ss += double(img[i] - ref[size_t(i)]) * double(img[i] - ref[size_t(i)]);
      ++n;
    }
  ASSERT_GT(n, 50);
  EXPECT_NEAR(std::sqrt(ss / n), 0.04, 0.015);
}

TEST(Dataset, DeterministicBySeedAndThreadCount) {
  vg::DataConfig cfg;
  cfg.seed = 7;
  const std::vector<double> az = cfg.train_azimuths.values();
  const vg::Split a = vg::make_split(cfg, vg::SplitId::Train, az, 2);
  const vg::Split b = vg::make_split(cfg, vg::SplitId::Train, az, 2);
  EXPECT_TRUE(same_bytes(a, b));

  cfg.seed = 8;
  const vg::Split c = vg::make_split(cfg, vg::SplitId::Train, az, 2);
  EXPECT_EQ(a.labels, c.labels);
  EXPECT_FALSE(same_bytes(a, c));
  // Only the noise differs: the mean absolute difference is about that of two
  // N(0, 0.04^2) draws, 0.04*sqrt(2)*sqrt(2/pi) = 0.045, a bit less where clipped.
  double mad = 0;
  for (size_t i = 0; i < a.images.size(); ++i) mad += std::fabs(a.images[i] - c.images[i]);
  mad /= double(a.images.size());
  EXPECT_GT(mad, 0.01);
  EXPECT_LT(mad, 0.06);

  cfg.seed = 7;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const vg::Split one = vg::make_split(cfg, vg::SplitId::Circle, az, 3);
  omp_set_num_threads(2);
  const vg::Split two = vg::make_split(cfg, vg::SplitId::Circle, az, 3);
  EXPECT_TRUE(same_bytes(one, two));
  // Large enough that both loops (renders, noisy images) run in parallel.
  std::vector<double> az360(360), el10(10);
  for (int i = 0; i < 360; ++i) az360[size_t(i)] = i;
  for (int i = 0; i < 10; ++i) el10[size_t(i)] = -45 + 10 * i;
  static_assert(vg::kNumClasses * 360 * 10 >= vg::kDatasetParallelMinItems);
  omp_set_num_threads(1);
  const vg::Split big_one = vg::make_split(cfg, vg::SplitId::Circle, az360, el10, 1);
  omp_set_num_threads(2);
  const vg::Split big_two = vg::make_split(cfg, vg::SplitId::Circle, az360, el10, 1);
  omp_set_num_threads(saved);
  EXPECT_TRUE(same_bytes(big_one, big_two));
}

// Elevation extrapolation: held-out elevations outside the training band may
// share the azimuths (no held-out view equals a training view); inside the band
// the azimuth rule holds. The held-out split renders the held-out elevations,
// and the profile split the training azimuths at 0..80 degrees.
TEST(Dataset, ElevationExtrapolationSplitsAndGeometry) {
  vg::DataConfig cfg;
  cfg.train_azimuths = {0, 340, 18};
  cfg.test_azimuths = {0, 340, 18};
  cfg.elevations = {30, 40, 3};
  cfg.test_elevations = {45, 70, 6};
  EXPECT_FALSE(vg::check_geometry(cfg).has_value());
  EXPECT_EQ(vg::elevation_gap(cfg), 5.0);
  cfg.n_per_combo = 1;
  cfg.n_eval_per_combo = 1;
  const vg::Dataset d = vg::make_dataset(cfg);
  EXPECT_EQ(d.heldout.size(), 5 * 18 * 6);
  for (float e : d.heldout.elevation) EXPECT_TRUE(e >= 45 && e <= 70) << e;
  for (float e : d.familiar.elevation) EXPECT_TRUE(e >= 30 && e <= 40) << e;
  EXPECT_EQ(d.axis_values.size(), 9u);  // the axis sweep: elevations 0..80
  EXPECT_EQ(d.axis_sweep.size(), 5 * 18 * 9);
  EXPECT_EQ(d.axis_splits(), std::vector<const vg::Split*>{&d.axis_sweep});
  EXPECT_EQ(d.axis_sweep.axis, d.axis_sweep.elevation);
  // One held-out elevation inside the band: the shared azimuths are refused.
  cfg.test_elevations = {35, 70, 8};
  const auto p = vg::check_geometry(cfg);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->part, vg::GeometryPart::test_overlap);
  // Without held-out elevations nothing changes: no profile split.
  EXPECT_EQ(vg::make_dataset(vg::DataConfig{}).axis_sweep.size(), 0);
  EXPECT_EQ(vg::heldout_elevations(vg::DataConfig{}), vg::DataConfig{}.elevations.values());
}

// High elevations (looking down from up to 80 degrees) still give each class a
// silhouette of its own: the clean renders of any two classes differ clearly
// at every elevation and azimuth the profile uses.
double render_diff(int c1, double az1, int c2, double az2, double el, vg::ShapeSet set) {
  std::vector<float> a(vg::kImagePixels), b(vg::kImagePixels);
  vg::render_clean(c1, az1, el, a.data(), set);
  vg::render_clean(c2, az2, el, b.data(), set);
  double diff = 0;
  for (int k = 0; k < vg::kImagePixels; ++k) diff += std::fabs(a[k] - b[k]);
  return diff;  // summed over pixels; a whole shape's ink is ~50-150
}

TEST(Dataset, ClassesStayDistinctAtHighElevations) {
  for (vg::ShapeSet set : {vg::ShapeSet::seed, vg::ShapeSet::asym})
    for (double el = 0; el <= 80; el += 10)
      for (double az = 0; az < 360; az += 20)
        for (int c1 = 0; c1 < vg::kNumClasses; ++c1)
          for (int c2 = c1 + 1; c2 < vg::kNumClasses; ++c2)
            EXPECT_GT(render_diff(c1, az, c2, az, el, set), 10.0)
                << vg::class_name(set, c1) << " vs " << vg::class_name(set, c2) << " at az " << az << ", el " << el;
}

// The seed's cross and frame repeat every 90 degrees of azimuth and its T every
// 180; no asym shape repeats under any turn about the vertical axis, so its
// held-out views are new views of every class.
TEST(Dataset, AsymShapesHaveNoRotationalSymmetryAboutTheVerticalAxis) {
  // The seed's shapes turned onto themselves: equal but for the order in which
  // the points' blobs are summed in float (up to 60 terms <= 1 per pixel, so
  // < 60 ulp(1) = 3.6e-6 per pixel, < 3.7e-3 summed over the 1024; a shape's ink is ~50-150).
  EXPECT_LT(render_diff(0, 10, 0, 100, 30, vg::ShapeSet::seed), 3.7e-3);   // cross
  EXPECT_LT(render_diff(3, 10, 3, 100, 30, vg::ShapeSet::seed), 3.7e-3);   // frame
  EXPECT_LT(render_diff(2, 10, 2, 190, 30, vg::ShapeSet::seed), 3.7e-3);   // T
  for (int c = 0; c < vg::kNumClasses; ++c)
    for (double turn : {60.0, 72.0, 90.0, 120.0, 180.0})
      for (double el : {10.0, 30.0, 50.0})
        for (double az = 0; az < 360; az += 30)
          EXPECT_GT(render_diff(c, az, c, az + turn, el, vg::ShapeSet::asym), 5.0)
              << vg::kAsymClassNames[c] << " turned by " << turn << " from az " << az << ", el " << el;
}

}  // namespace
