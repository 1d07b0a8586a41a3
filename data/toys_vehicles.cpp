// Airplanes, trucks and cars (toy_mesh categories 2, 3 and 4), front
// towards +x, y up; trucks and cars stand on y = 0, an airplane's fuselage
// axis is y = 0. Units: roughly metres for cars and trucks; toy_mesh rescales.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "data/toy_builders.h"

namespace vg::toys {
namespace {


// A wing-like panel: root section centred on the origin, span along +z,
// chord along x (leading edge towards +x), thickness along y, its leading
// edge swept back by `sweep` degrees. Lofted along x, then turned so the
// loft's x becomes z (and the section's z becomes -x).
Mesh panel(double span, double root_chord, double tip_chord, double sweep, double thickness) {
  const double tip_centre = root_chord / 2 - span * tan_deg(sweep) - tip_chord / 2;  // in x
  const Mesh m = loft({station(0, 0, thickness * root_chord / 2, root_chord / 2),
                       station(span, 0, thickness * tip_chord / 2, tip_chord / 2, -tip_centre)},
                      8, 2);
  return transformed(m, Affine().rotate_y(-90));
}

// A wheel on the ground at (x, z): a cylinder turned so its axis is z.
void wheel(Mesh* m, double x, double z, double r, double w, int segments) {
  place(m, cylinder(r, w, segments), Affine().rotate_x(90).translate(x, r, z));
  place(m, cylinder(r * 0.55, w * 1.08, 8), Affine().rotate_x(90).translate(x, r, z));  // the hub
}

// A box-like loft from x0 to x1 on the floor y0 up to y1, rounded corners
// `round` long at each end (a cab, a cargo box, a trailer).
Mesh rounded_block(double x0, double x1, double y0, double y1, double half_width, double round) {
  const double y = (y0 + y1) / 2, h = (y1 - y0) / 2;
  return loft({station(x0, y, h * 0.92, half_width * 0.94), station(x0 + round, y, h, half_width),
               station(x1 - round, y, h, half_width), station(x1, y, h * 0.92, half_width * 0.94)},
              12, 8);
}

}  // namespace

// An airplane's body plan: the ranges its proportions are drawn from.
struct AirplanePlan {
  Span len;        // fuselage length
  Span r;          // fuselage radius
  Span span;       // wing tip to tip / len
  Span chord;      // wing root chord / len
  Span taper;      // tip chord / root chord
  Span sweep;      // leading-edge sweep, degrees
  Span dihedral;   // degrees
  Span wing_x;     // wing root centre behind the middle / len
  Span tail_size;
  Span nose_len;   // / len
  Span tail_cone;  // / len
  Span nacelle;    // engine radius / fuselage radius
};

// An airliner; a fighter (a short, thick fuselage, a pointed nose and a
// broad, sharply swept, nearly delta wing set back); a light aircraft or a
// glider (a long, straight, untapered wing).
constexpr AirplanePlan kAirplanePlans[] = {
    {{3.0, 5.0}, {0.17, 0.3}, {0.7, 1.25}, {0.13, 0.22}, {0.25, 0.7}, {0.0, 40.0}, {-2.0, 8.0}, {0.0, 0.12},
     {0.8, 1.3}, {0.08, 0.2}, {0.25, 0.38}, {0.32, 0.5}},
    {{3.0, 4.5}, {0.22, 0.38}, {0.45, 0.75}, {0.3, 0.5}, {0.05, 0.3}, {40.0, 65.0}, {-6.0, 0.0}, {0.1, 0.22},
     {0.8, 1.2}, {0.2, 0.35}, {0.15, 0.25}, {0.3, 0.45}},
    {{2.5, 4.0}, {0.18, 0.3}, {1.3, 2.0}, {0.09, 0.15}, {0.6, 1.0}, {0.0, 6.0}, {0.0, 6.0}, {0.0, 0.1},
     {0.7, 1.1}, {0.1, 0.2}, {0.3, 0.45}, {0.3, 0.45}},
};

// An airplane: a lofted fuselage (rounded nose, upswept tail cone), swept
// tapered wings low, mid or high, a tail of one of three shapes
// (conventional, T-tail, V-tail), and 0, 2 or 4 engines under the wings (a
// propeller on the nose when there are none).
Mesh build_airplane(Draw& d, int plan) {
  const AirplanePlan& p = kAirplanePlans[plan];
  const double len = d(p.len);
  const double r = d(p.r);
  const double span = len * d(p.span);
  const double chord = len * d(p.chord);
  const double taper = d(p.taper);
  const double sweep = d(p.sweep);
  const double dihedral = d(p.dihedral);
  const double wing_x = -len * d(p.wing_x);
  const int wing_pos = d.pick(3);                 // low, mid, high
  const int engines = 2 * d.cycle(kAirplaneKinds);  // 0, 2 or 4
  const int tail = d.pick(3);                     // conventional, T, V
  const double tail_size = d(p.tail_size);
  const double nose_len = len * d(p.nose_len);
  const double tail_cone = len * d(p.tail_cone);
  const double nacelle = d(p.nacelle);

  Mesh m;
  // Fuselage, tail end first: the tail cone rises and narrows, the nose is a
  // quarter ellipse ending in a point.
  const double xt = -len / 2, xn = len / 2 - nose_len;
  std::vector<LoftStation> f = {station(xt, r * 0.65, r * 0.22, r * 0.18),
                                station(xt + tail_cone * 0.5, r * 0.35, r * 0.62, r * 0.6),
                                station(xt + tail_cone, 0, r, r)};
  for (double q : {0.0, 0.4, 0.7, 0.9}) {
    const double rr = r * std::sqrt(1 - q * q);
    f.push_back(station(xn + q * nose_len, -r * 0.15 * q, rr, rr));
  }
  f.push_back(LoftStation{len / 2, -r * 0.15, 0, 0, 0, 0});
  place(&m, loft(f, 12, 2), Affine());

  // Wings, mirrored for the left side (the mirror flips the winding back).
  const double wing_y = (wing_pos - 1) * r * 0.7, half = span / 2, tip = chord * taper;
  const Mesh wing = panel(half, chord, tip, sweep, 0.12);
  const Affine right = Affine().rotate_x(-dihedral).translate(wing_x, wing_y, 0);
  place(&m, wing, right);
  place(&m, wing, right.scale(1, 1, -1));

  // Engines: nacelles along x under the wing at fixed fractions of the half-span.
  const double er = r * nacelle;
  for (int e = 0; e < engines; ++e) {
    const double q = engines == 2 ? 0.34 : (e < 2 ? 0.28 : 0.58), s = q * half;
    const double c = chord + (tip - chord) * q;                // local chord
    const double le = wing_x + chord / 2 - s * tan_deg(sweep);
    const double el = std::max(c * 0.9, er * 4);
    const double y = wing_y + s * tan_deg(dihedral) - er * 1.25;
    const double z = (e % 2 ? 1 : -1) * s;
    place(&m, lathe({{er * 0.8, -el / 2}, {er, -el * 0.2}, {er, el * 0.3}, {er * 0.85, el / 2}}, 10),
          Affine().rotate_z(-90).translate(le - el * 0.2, y, z));
    place(&m, box(c * 0.5, er * 1.2, er * 0.25), Affine().translate(le - c * 0.35, y + er, z));  // pylon
  }
  if (engines == 0) {  // a propeller: spinner and two crossed blades
    place(&m, frustum(r * 0.45, 0, r * 0.8, 10), Affine().rotate_z(-90).translate(len / 2 + r * 0.2, -r * 0.15, 0));
    for (double t : {45.0, 135.0})
      place(&m, box(r * 0.08, r * 3.4, r * 0.35), Affine().rotate_x(t).translate(len / 2 + r * 0.1, -r * 0.15, 0));
  }

  // Tail: a fin (or two, canted, for a V-tail) and a horizontal stabiliser.
  const double ts = tail_size, tail_chord = chord * 0.6 * ts, tail_sweep = std::min(sweep + 10, 45.0);
  const double tx = xt + tail_chord * 0.55, ty = r * 0.6;
  const double fin_h = r * 2.6 * ts;
  if (tail == 2) {
    const Mesh v = panel(span * 0.16 * ts, tail_chord, tail_chord * 0.5, tail_sweep, 0.1);
    const Affine vr = Affine().rotate_x(-38).translate(tx, ty, 0);
    place(&m, v, vr);
    place(&m, v, vr.scale(1, 1, -1));
  } else {
    const Mesh fin = panel(fin_h, tail_chord * 1.1, tail_chord * 0.55, std::max(tail_sweep, 30.0), 0.12);
    place(&m, fin, Affine().rotate_x(-90).translate(tx, ty, 0));
    const Mesh h = panel(span * 0.2 * ts, tail_chord, tail_chord * 0.5, tail_sweep, 0.1);
    // A T-tail sits on the fin's tip, which the fin's sweep carries aft.
    const double hx = tail == 1 ? tx - fin_h * 0.9 * tan_deg(std::max(tail_sweep, 30.0)) : tx;
    const double hy = tail == 1 ? ty + fin_h * 0.9 : ty;
    place(&m, h, Affine().translate(hx, hy, 0));
    place(&m, h, Affine().scale(1, 1, -1).translate(hx, hy, 0));
  }
  return m;
}

// A truck's body plan: the ranges its proportions are drawn from.
struct TruckPlan {
  Span wr;           // wheel radius
  Span width;
  Span cab_h;        // cab roof above the ground
  Span cab_len;
  Span hood_len;
  Span hood_h;       // bonnet height, fraction of the cab's
  Span body_len;     // rigid truck's body
  Span trailer_len;
  Span box_h;        // cargo box or trailer height above its floor
};

// A road truck; a heavy one (a dump truck, a fire engine, a tanker: big
// wheels, a tall wide cab, a short low body); a light one (a delivery
// truck: small wheels, a low cab, a long tall box).
constexpr TruckPlan kTruckPlans[] = {
    {{0.4, 0.55}, {1.9, 2.4}, {2.2, 3.1}, {1.3, 2.2}, {0.9, 1.7}, {0.45, 0.7}, {2.5, 5.0}, {5.0, 8.5}, {1.5, 2.4}},
    {{0.58, 0.75}, {2.3, 2.6}, {2.7, 3.3}, {1.6, 2.4}, {1.3, 2.1}, {0.6, 0.8}, {2.4, 3.6}, {4.0, 6.0}, {0.8, 1.4}},
    {{0.3, 0.4}, {1.7, 2.0}, {1.9, 2.4}, {1.1, 1.6}, {0.6, 1.1}, {0.5, 0.7}, {3.2, 4.8}, {6.5, 9.0}, {2.1, 2.8}},
};

// A truck, front at x = 0 running back: a cab, conventional (a bonnet ahead
// of it) or cab-over, on a chassis; either a rigid truck carrying a cargo box
// or an open bed, or a tractor pulling a semi-trailer; 1 or 2 rear axles, and
// 1 to 3 trailer axles, a wheel each side per axle.
Mesh build_truck(Draw& d, int plan) {
  const TruckPlan& p = kTruckPlans[plan];
  const double wr = d(p.wr);
  const double width = d(p.width);
  const int kind = d.cycle(kTruckKinds);   // cab (kind % 2) and body (kind / 2)
  const int cab_over = kind % 2;           // 0: conventional, 1: cab-over
  const double cab_h = d(p.cab_h);
  const double cab_len = d(p.cab_len);
  const double hood_len = d(p.hood_len);
  const double hood_h = d(p.hood_h);
  const bool semi = kind / 2 == 0;         // a tractor and semi-trailer
  const bool open_bed = kind / 2 == 2;     // else a rigid truck with a cargo box
  const double body_len = d(p.body_len);
  const double trailer_len = d(p.trailer_len);
  const double box_h = d(p.box_h);
  const int rear_axles = 1 + d.pick(2);
  const int trailer_axles = 1 + d.pick(3);

  Mesh m;
  const double hw = width / 2, floor_y = wr * 1.15;
  const double hood = cab_over ? 0 : hood_len;
  const double cab_front = -hood, cab_rear = cab_front - cab_len;
  // Cab: a rounded block whose roof drops towards the front (the windscreen).
  {
    const double y0 = floor_y, y1 = cab_h, yc = (y0 + y1) / 2, h = (y1 - y0) / 2;
    const double slope = cab_over ? 0.15 : 0.3;
    place(&m, loft({station(cab_rear, yc, h * 0.95, hw * 0.95), station(cab_rear + 0.12, yc, h, hw),
                    station(cab_front - slope - 0.1, yc, h, hw),
                    station(cab_front, yc - h * 0.1, h * 0.88, hw * 0.96)},
                   12, 8),
          Affine());
  }
  if (!cab_over)
    place(&m, rounded_block(-hood - 0.1, 0, wr * 0.8, floor_y + (cab_h - floor_y) * hood_h, hw * 0.8, 0.15), Affine());
  place(&m, box(0.25, 0.35, width * 0.95), Affine().translate(-0.1, wr * 0.95, 0));  // bumper

  double rear = cab_rear;  // the truck's rearmost x so far
  std::vector<double> axles = {cab_over ? cab_front - cab_len * 0.45 : -hood * 0.55};
  if (semi) {
    const double t0 = cab_rear - 0.35, t1 = t0 - trailer_len, ty = wr * 2 + 0.3;
    place(&m, rounded_block(t1, t0, ty, ty + box_h + 0.3, hw, 0.1), Affine());
    place(&m, box(trailer_len * 0.9, 0.25, width * 0.5), Affine().translate((t0 + t1) / 2, ty - 0.1, 0));  // its frame
    place(&m, box(0.15, ty - wr * 0.6, width * 0.7), Affine().translate(t0 - 1.5, (ty + wr * 0.6) / 2, 0));  // landing legs
    for (int k = 0; k < rear_axles; ++k) axles.push_back(cab_rear - 0.9 - k * wr * 2.3);
    for (int k = 0; k < trailer_axles; ++k) axles.push_back(t1 + 1.0 + k * wr * 2.3);
    for (int s = -1; s <= 1; s += 2)  // fuel tanks under the cab
      place(&m, cylinder(0.28, cab_len * 0.6, 10), Affine().rotate_z(90).translate(cab_rear + cab_len * 0.45, wr + 0.1, s * (hw - 0.35)));
    rear = std::min(rear, cab_rear - 1.0 - rear_axles * wr * 2.3);
  } else {
    const double b0 = cab_rear - 0.15, b1 = b0 - body_len, by = wr * 2 + 0.15;
    if (open_bed) {
      place(&m, box(body_len, 0.25, width), Affine().translate((b0 + b1) / 2, by, 0));
      for (int s = -1; s <= 1; s += 2)
        place(&m, box(body_len, box_h * 0.35, 0.08), Affine().translate((b0 + b1) / 2, by + box_h * 0.175, s * (hw - 0.04)));
      place(&m, box(0.1, box_h * 0.6, width), Affine().translate(b0 - 0.05, by + box_h * 0.3, 0));  // headboard
      place(&m, box(0.08, box_h * 0.35, width), Affine().translate(b1 + 0.04, by + box_h * 0.175, 0));  // tailgate
    } else {
      place(&m, rounded_block(b1, b0, by, by + box_h, hw, 0.08), Affine());
    }
    for (int k = 0; k < rear_axles; ++k) axles.push_back(b1 + body_len * 0.28 + k * wr * 2.3);
    rear = b1;
  }
  place(&m, box(-rear - 0.2, 0.3, width * 0.6), Affine().translate(rear / 2 - 0.1, wr * 0.95, 0));  // chassis
  for (double x : axles)
    for (int s = -1; s <= 1; s += 2) wheel(&m, x, s * (hw - 0.2), wr, 0.35, 12);
  return m;
}

// A car's body plan: the ranges its proportions are drawn from.
struct CarPlan {
  Span wb;           // wheelbase
  Span front_oh;     // overhangs beyond the axles
  Span rear_oh;
  Span width;
  Span wr;           // wheel radius
  Span belt;         // top of the lower body
  Span glass;        // cabin height above the belt (doubled for a van)
  Span rake;         // windscreen: run per rise
  Span hood_drop;
  Span cabin_shift;  // cabin's position along the wheelbase
  Span cab_roof;     // pickup's cab: length of its roof
};

// A family car; a sports car (long, low and wide, a long bonnet, a raked
// windscreen, the cabin set back); an off-roader (a jeep, an SUV: big
// wheels, a high body, short overhangs, an upright windscreen).
constexpr CarPlan kCarPlans[] = {
    {{2.1, 3.1}, {0.55, 1.05}, {0.5, 1.2}, {1.6, 1.9}, {0.28, 0.44}, {0.72, 0.95}, {0.36, 0.62}, {1.0, 1.8},
     {0.0, 0.12}, {-0.3, 0.3}, {0.5, 0.9}},
    {{2.3, 2.8}, {0.85, 1.25}, {0.6, 1.0}, {1.8, 2.0}, {0.3, 0.35}, {0.6, 0.72}, {0.26, 0.38}, {2.0, 2.8},
     {0.04, 0.12}, {-0.45, -0.15}, {0.4, 0.6}},
    {{2.2, 2.8}, {0.35, 0.65}, {0.35, 0.7}, {1.75, 2.0}, {0.42, 0.52}, {1.05, 1.3}, {0.5, 0.7}, {0.45, 0.9},
     {0.0, 0.04}, {-0.2, 0.2}, {0.7, 1.1}},
};

// A car: a lower body lofted nose to tail with the bonnet dropping towards
// the front, a narrower cabin on top shaped by the style (sedan: a sloping
// rear window and a boot; hatchback: roof to the tail, a steep hatch; van: a
// tall roof over the whole length; pickup: a short cab and an open bed), and
// four wheels.
Mesh build_car(Draw& d, int plan) {
  const CarPlan& p = kCarPlans[plan];
  const int style = d.cycle(kCarStyles);    // sedan, hatchback, van, pickup
  const double wb = d(p.wb) * (style == 1 ? 0.85 : 1.0);  // hatchbacks are short
  const double front_oh = d(p.front_oh);
  const double rear_oh = d(p.rear_oh) * (style == 1 ? 0.65 : 1.0);
  const double width = d(p.width);
  const double wr = d(p.wr);
  const double belt = d(p.belt);
  const double glass = d(p.glass);
  const double rake = d(p.rake);
  const double hood_drop = d(p.hood_drop);
  const double cabin_shift = d(p.cabin_shift);
  const double cab_roof = d(p.cab_roof);

  Mesh m;
  const double hw = width / 2, y0 = wr * 0.6, xf = wb / 2 + front_oh, xr = -wb / 2 - rear_oh;
  auto body = [&](double x, double top, double bottom) {
    return LoftStation{x, (top + bottom) / 2, 0, (top - bottom) / 2, hw, hw * 0.95};
  };
  place(&m, loft({body(xr, belt - 0.06, y0 + 0.12), body(xr + 0.15, belt, y0), body(xf - 0.3, belt - hood_drop, y0),
                  body(xf, belt - hood_drop - 0.14, y0 + 0.1)},
                 16, 4),
        Affine());

  // The cabin, tail to nose: its roof line as (x, height above the belt);
  // height `low` means a station sunk into the body (a window's base).
  const double roof = style == 2 ? glass * 2 : glass, low = 0.04;
  double ws = wb / 2 - 0.1 + cabin_shift;  // windscreen base
  if (style == 2) ws = xf - front_oh * 0.55;
  const double rf = ws - roof * (style == 2 ? 0.7 : rake);  // roof front
  std::vector<std::array<double, 2>> line;
  if (style == 0) {
    const double rb = -wb / 2 - rear_oh * 0.3 + cabin_shift;
    line = {{rb, low}, {rb + glass * 1.3, roof}, {rf, roof}};
  } else if (style == 1) {
    line = {{xr + 0.12, low}, {xr + 0.12 + glass * 0.4, roof}, {rf, roof}};
  } else if (style == 2) {
    line = {{xr + 0.05, roof * 0.95}, {xr + 0.2, roof}, {rf, roof}};
  } else {
    const double back = rf - cab_roof;
    line = {{back, roof * 0.97}, {back + 0.08, roof}, {rf, roof}};
  }
  line.push_back({ws, low});
  std::vector<LoftStation> cabin;
  for (const auto& [x, h] : line) {
    const double bottom = belt - 0.06, top = belt + h;
    cabin.push_back({x, (top + bottom) / 2, 0, (top - bottom) / 2, hw * 0.9, hw * (h > low ? 0.72 : 0.88)});
  }
  place(&m, loft(cabin, 16, 4), Affine());

  if (style == 3) {  // the bed: side walls and a tailgate above the belt
    const double b0 = rf - cab_roof - 0.05, b1 = xr + 0.02, wall = 0.28;
    for (int s = -1; s <= 1; s += 2)
      place(&m, box(b0 - b1, wall, 0.07), Affine().translate((b0 + b1) / 2, belt + wall / 2 - 0.03, s * (hw - 0.06)));
    place(&m, box(0.07, wall, width - 0.12), Affine().translate(b1 + 0.05, belt + wall / 2 - 0.03, 0));
  }
  for (double x : {-wb / 2, wb / 2})
    for (int s = -1; s <= 1; s += 2) wheel(&m, x, s * (hw - 0.08), wr, 0.24, 14);
  return m;
}

}  // namespace vg::toys
