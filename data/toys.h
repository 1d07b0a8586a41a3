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

// The version of the toys' generator: the meshes, the scene, the rasteriser,
// the noise and the rounding to bytes. Bump it whenever any record's bytes
// change (ToysPinned's hashes change with them): it keys the render cache
// (data/toy_cache.h), which would otherwise serve the old bytes.
inline constexpr int kToyGeneratorVersion = 1;

// smallNORB's label order.
inline constexpr int kToyCategories = 5;
inline constexpr std::array<const char*, kToyCategories> kToyCategoryNames = {"animal", "human", "airplane",
                                                                              "truck", "car"};

// "animal" (four-legged), "human", "airplane", "truck" or "car";
// std::invalid_argument outside 0..4.
const char* toy_category_name(int category);

// How different the toys of one category are (--toy-variety). narrow: one
// body plan per category (a slender quadruped, a standing figure, an
// airliner, a road truck, a family car; a truck's and a car's kinds), its
// proportions and pose drawn. wide: smallNORB's ten toys of a category are
// ten distinct objects (its paper's figure of the 50 toys), so every toy is
// also built on one of several plans, cycled with the instance (toy_plan):
// heavy and long-necked animals beside the slender one; figures in action,
// bulky or crouching beside the standing one; fighters and long-winged light
// aircraft beside the airliner; heavy and light trucks beside the road truck;
// sports cars and off-roaders beside the family car. Each split of 5 or more
// toys holds every plan, as the kinds of narrow variety (a car's body style) do.
enum class ToyVariety { narrow, wide };

// The number of body plans category `category` draws from under wide variety.
int toy_plans(int category);
// The plan toy (category, instance) is built on: 0 under narrow variety;
// under wide, the instance modulo toy_plans(category) (an airplane's shifted
// by one every three toys and a truck's every six, so that plan and kind vary
// independently).
// The shape draws (toy_mesh's stream) are the same on every plan.
int toy_plan(int category, int instance, ToyVariety variety);

// Toy `instance` of `category`: its proportions, part counts and pose are
// drawn from the counter-based stream Stream(0, Purpose::Toys, category,
// instance), so a toy is the same object forever: the same bytes on every
// machine (the angles by sin_cos_deg, the rest plain double arithmetic and
// square roots, never contracted into FMAs; no libm call). A toy's kind (a car's body style,
// a truck's cab and body, an airplane's engine count) cycles with the
// instance, so every 10 consecutive instances hold each kind. A few hundred
// to about 1,300 triangles. std::invalid_argument for a category outside
// 0..4 or a negative instance.
Mesh toy_mesh(int category, int instance, ToyVariety variety = ToyVariety::narrow);

}  // namespace vg
