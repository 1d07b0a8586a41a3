// The per-category builders behind toy_mesh (data/toys.h), split by family:
// data/toys_animate.cpp (animals, humans) and data/toys_vehicles.cpp
// (airplanes, trucks, cars). Each builds its toy in its own units, y up, front
// towards +x; toy_mesh centres and scales the result.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "data/toy_parts.h"

namespace vg::toys {

// A parameter's range: a toy draws it uniform in (lo, hi).
struct Span {
  double lo, hi;
};

// One toy's parameter draws. Builders draw every parameter up front in a
// fixed order, used or not, so one parameter's draw never shifts another's.
// A category's body plans (toy_plans in data/toys.h) differ only in their
// Spans, never in what is drawn or in what order: plan 0's bytes are the
// narrow variety's whatever the other plans hold.
class Draw {
 public:
  Draw(int category, int instance)
      : s_(0, Purpose::Toys, uint64_t(category), uint64_t(instance)), instance_(instance) {}
  // Uniform in (lo, hi).
  double operator()(double lo, double hi) { return lo + (hi - lo) * s_.uniform(); }
  double operator()(Span r) { return (*this)(r.lo, r.hi); }
  // Uniform in 0..n-1.
  int pick(int n) { return int(s_.below(uint32_t(n))); }
  // A toy's kind (a car's body style, an airplane's engine count) cycles
  // with the instance instead, so any n consecutive instances hold every
  // kind once: the 10 toys of a split never miss one by chance.
  int cycle(int n) const { return instance_ % n; }

 private:
  Stream s_;
  int instance_;
};

// How many kinds a category's toys cycle through (Draw::cycle): an
// airplane's engine count, a truck's cab and body, a car's body style.
constexpr int kAirplaneKinds = 3, kTruckKinds = 6, kCarStyles = 4;

// `plan` is one of the category's body plans (toy_plans), 0 the narrow
// variety's only one.
Mesh build_animal(Draw& d, int plan);
Mesh build_human(Draw& d, int plan);
Mesh build_airplane(Draw& d, int plan);
Mesh build_truck(Draw& d, int plan);
Mesh build_car(Draw& d, int plan);

}  // namespace vg::toys
