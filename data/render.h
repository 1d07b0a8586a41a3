// The rendered shapes: five 3D point sets per shape set (SPEC section 1), each
// drawn at a viewpoint as a sum of Gaussian blobs in a 32 x 32 frame. The
// synthetic source's splits (data/dataset.h), the in-plane protocols' views
// (data/plane_views.h) and export-norb's files (data/export_norb.h) draw with it.
#pragma once
#include <array>
#include <vector>

namespace vg {

// The rendered object's frame (and smallNORB's crops): 32 x 32 pixels. What a
// model reads is the data's ImageShape (image_shape, Split::shape), whose side
// is this frame's unless a protocol draws on a larger canvas (--canvas).
inline constexpr int kImageSide = 32;
inline constexpr int kImagePixels = kImageSide * kImageSide;
// Both data sources have five classes (class_name, data/protocol.h: class_names).
inline constexpr int kNumClasses = 5;
inline constexpr const char* kClassNames[kNumClasses] = {"cross", "L", "T", "frame", "tripod"};

// The shape sets (--shapes). `seed`: the seed's five (SPEC section 1); cross and
// frame look the same every 90 degrees of azimuth and T every 180, so their
// held-out views are familiar ones. `asym`: five shapes with no rotational
// symmetry about the vertical axis, so every class carries the gap.
enum class ShapeSet { seed, asym };
inline constexpr const char* kAsymClassNames[kNumClasses] = {"hook", "stairs", "prongs", "chair", "helix"};
inline const char* class_name(ShapeSet s, int cls) {
  return s == ShapeSet::asym ? kAsymClassNames[cls] : kClassNames[cls];
}

using Point3 = std::array<float, 3>;
// The points of class `cls` (0..4), exactly as SPEC section 1 lists them.
std::vector<Point3> shape_points(int cls);
// The points of class `cls` of shape set `set`.
std::vector<Point3> shape_points(int cls, ShapeSet set);

// Noise-free render of class `cls` at (azimuth, elevation) into img[32*32]
// (row-major, row v then column u), values in [0, 1].
void render_clean(int cls, double azimuth_deg, double elevation_deg, float* img,
                  ShapeSet set = ShapeSet::seed);

// An in-plane affine change of a render about the centre of the object's frame
// (pixel 16, 16 of the 32 x 32 image), in its pixels:
// p -> centre + [a b; c d] (p - centre) + (tx, ty), p = (column, row).
// The translation and affine protocols draw their held-out views with it.
struct PlaneTransform {
  double a = 1, b = 0, c = 0, d = 1, tx = 0, ty = 0;
  bool identity() const { return a == 1 && b == 0 && c == 0 && d == 1 && tx == 0 && ty == 0; }
  // Shear (x += shear * y), then scale, then rotation by rotation_deg, then the shift.
  static PlaneTransform make(double rotation_deg, double scale, double shear, double tx, double ty);
};
// render_clean under `plane` (the identity gives render_clean's bytes), on a
// canvas x canvas image (canvas >= 1): the object keeps its size in pixels and
// its 32 x 32 frame sits at the canvas's centre, (canvas - 32) / 2 pixels in
// from each edge (a canvas of 40: the frame plus 4 pixels each side, as
// affNIST's 40 x 40 holds MNIST's 28 x 28); a canvas of 32 is the frame itself.
void render_clean(int cls, double azimuth_deg, double elevation_deg, const PlaneTransform& plane, float* img,
                  ShapeSet set = ShapeSet::seed, int canvas = kImageSide);

// Renders `points` at (azimuth, elevation) into a side x side frame (values in
// [0, 1]) at the centre of a canvas x canvas image (canvas < 0: the frame
// itself); `plane` moves each projected point in the image plane. The one
// renderer of every function above, and of export-norb's 96 x 96 pairs.
void render_points(const std::vector<Point3>& points, double azimuth_deg, double elevation_deg, int side,
                   float* img, const PlaneTransform& plane = {}, int canvas = -1);

}  // namespace vg
