// The toys dataset's objects: procedural triangle meshes in smallNORB's five
// categories, any number of distinct instances per category (smallNORB has
// 10 physical toys per category; an option draws more). Geometry only: the
// rasteriser (data/raster.h) draws them.
//
// Every toy comes out in the same frame, which renderers rely on:
//   - y up, the toy standing (or flying level) in a natural pose;
//   - its front towards +x: a vehicle's or animal's long axis lies along x,
//     so turning the azimuth changes the silhouette most; a human faces +x;
//   - its bounding box centred on the origin;
//   - scaled so the farthest vertex from the origin lies at distance 1 (the
//     bounding sphere about the origin has radius 1).
// A toy is a union of closed parts, each consistently wound counter-clockwise
// seen from outside (data/toy_parts.h); parts may overlap.
#pragma once
#include <array>

#include "data/mesh.h"

namespace vg {

// smallNORB's label order.
inline constexpr int kToyCategories = 5;
inline constexpr std::array<const char*, kToyCategories> kToyCategoryNames = {"animal", "human", "airplane",
                                                                              "truck", "car"};

// "animal" (four-legged), "human", "airplane", "truck" or "car";
// std::invalid_argument outside 0..4.
const char* toy_category_name(int category);

// Toy `instance` of `category`: its proportions, part counts and pose are
// drawn from the counter-based stream Stream(0, Purpose::Toys, category,
// instance), so a toy is the same object forever: the same bytes on every
// machine (the angles by sin_cos_deg, the rest plain double arithmetic and
// square roots, never contracted into FMAs; no libm call). A toy's kind (a car's body style,
// a truck's cab and body, an airplane's engine count) cycles with the
// instance, so every 10 consecutive instances hold each kind. A few hundred
// to about 1,300 triangles. std::invalid_argument for a category outside
// 0..4 or a negative instance.
Mesh toy_mesh(int category, int instance);

}  // namespace vg
