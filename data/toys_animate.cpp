// Four-legged animals and human figures (toy_mesh categories 0 and 1).
// Units: roughly metres for a medium dog or a child; toy_mesh rescales.
#include <cmath>
#include <numbers>

#include "data/toy_builders.h"

namespace vg::toys {
namespace {


// A limb segment of length `len`, radius r0 at its root and r1 at its end,
// hanging from the origin along -y: the frustum's top at the origin.
Mesh hanging(double len, double r0, double r1, int segments) {
  return transformed(frustum(r1, r0, len, segments), Affine().translate(0, -len / 2, 0));
}

// The same segment pointing along +y from the origin.
Mesh rising(double len, double r0, double r1, int segments) {
  return transformed(frustum(r0, r1, len, segments), Affine().translate(0, len / 2, 0));
}

Mesh sphere(double r, int segments) { return ellipsoid(r, r, r, segments); }

}  // namespace

// An animal's body plan: the ranges its proportions and pose are drawn from.
struct AnimalPlan {
  Span body_len;    // the body ellipsoid's length
  Span girth;       // its height
  Span width;       // its width / its height
  Span leg_len;     // hip to ground
  Span leg_r;       // thickness at the hip / girth
  Span stride;      // degrees each leg swings
  Span neck_len;
  Span neck_angle;  // above horizontal
  Span head;        // head half-length
  Span snout;       // snout length / head
  Span tail_len;
  Span tail_angle;  // above horizontal, pointing back
};

// Slender (a dog, a horse, a deer), heavy (a hippo, a rhino, a bear: a deep
// body on short thick legs, a big low head), long-necked (a giraffe, a
// llama: long legs and a near-upright neck).
constexpr AnimalPlan kAnimalPlans[] = {
    {{0.9, 1.6}, {0.28, 0.46}, {0.7, 1.0}, {0.3, 1.1}, {0.11, 0.2}, {0.0, 22.0}, {0.1, 0.8}, {10.0, 75.0},
     {0.12, 0.24}, {0.3, 1.4}, {0.1, 0.8}, {-70.0, 40.0}},
    {{1.2, 1.8}, {0.6, 0.95}, {0.8, 1.05}, {0.2, 0.55}, {0.2, 0.3}, {0.0, 12.0}, {0.0, 0.25}, {0.0, 30.0},
     {0.22, 0.38}, {0.2, 1.6}, {0.05, 0.3}, {-80.0, -30.0}},
    {{0.8, 1.2}, {0.3, 0.45}, {0.7, 0.9}, {1.0, 1.6}, {0.1, 0.16}, {0.0, 20.0}, {1.0, 1.7}, {55.0, 85.0},
     {0.1, 0.18}, {0.8, 1.6}, {0.2, 0.6}, {-80.0, -40.0}},
};

// A four-legged animal, head towards +x: an ellipsoid body on four tapered
// legs (a walking stride swings diagonal pairs), a neck rising at an angle, a
// head with a snout, ears of one of three kinds, and a tail.
Mesh build_animal(Draw& d, int plan) {
  const AnimalPlan& p = kAnimalPlans[plan];
  const double body_len = d(p.body_len);
  const double girth = d(p.girth);
  const double width = girth * d(p.width);
  const double leg_len = d(p.leg_len);
  const double leg_r = girth * d(p.leg_r);
  const double stride = d(p.stride);
  const double neck_len = d(p.neck_len);
  const double neck_angle = d(p.neck_angle);
  const double head = d(p.head);
  const double snout = head * d(p.snout);
  const int ears = d.pick(3);                  // round, pointed, long
  const double tail_len = d(p.tail_len);
  const double tail_angle = d(p.tail_angle);

  Mesh m;
  const double body_y = leg_len + girth * 0.3;
  place(&m, ellipsoid(body_len / 2, girth / 2, width / 2, 16), Affine().translate(0, body_y, 0));

  // Legs: rooted inside the body, lengthened so a swung foot still reaches the ground.
  const double hip_y = body_y - girth * 0.15;
  for (int k = 0; k < 4; ++k) {
    const double x = (k < 2 ? 0.32 : -0.32) * body_len, z = (k % 2 ? 1 : -1) * width * 0.28;
    const double swing = (k == 0 || k == 3 ? 1 : -1) * stride;
    const double len = hip_y / cos_deg(swing);
    place(&m, hanging(len, leg_r, leg_r * 0.65, 10), Affine().rotate_z(swing).translate(x, hip_y, z));
  }

  // Neck from the front top of the body, tilted from vertical towards +x.
  const double nx = 0.36 * body_len, ny = body_y + girth * 0.12;
  const double neck_r = girth * 0.26;
  place(&m, rising(neck_len + girth * 0.3, neck_r, neck_r * 0.7, 12),
        Affine().translate(0, -girth * 0.3, 0).rotate_z(-(90.0 - neck_angle)).translate(nx, ny, 0));
  const double hx = nx + neck_len * cos_deg(neck_angle), hy = ny + neck_len * sin_deg(neck_angle);

  // Head, and a snout pointing forward and a little down.
  place(&m, ellipsoid(head, head * 0.8, head * 0.72, 12), Affine().translate(hx, hy, 0));
  place(&m, rising(snout + head * 0.5, head * 0.55, head * 0.38, 10),
        Affine().rotate_z(-100.0).translate(hx + head * 0.2, hy - head * 0.1, 0));

  // Ears on top of the head, either side.
  for (int side = -1; side <= 1; side += 2) {
    const double ez = side * head * 0.45, ey = hy + head * 0.55;
    if (ears == 0) place(&m, ellipsoid(head * 0.2, head * 0.28, head * 0.12, 8), Affine().translate(hx - head * 0.2, ey, ez));
    else if (ears == 1) place(&m, rising(head * 0.6, head * 0.22, 0, 8), Affine().rotate_x(side * 15.0).translate(hx - head * 0.2, ey, ez));
    else place(&m, rising(head * 1.4, head * 0.16, head * 0.08, 8), Affine().rotate_x(side * 20.0).rotate_z(20.0).translate(hx - head * 0.3, ey, ez));
  }

  // Tail from the back of the body: direction (-cos t, sin t) is +y turned by 90 - t.
  place(&m, rising(tail_len + girth * 0.2, leg_r * 0.6, leg_r * 0.15, 8),
        Affine().translate(0, -girth * 0.2, 0).rotate_z(90.0 - tail_angle).translate(-0.47 * body_len, body_y + girth * 0.15, 0));
  return m;
}

// A human figure's body plan: the ranges its proportions and pose are drawn from.
struct HumanPlan {
  Span leg_len;    // hip height
  Span torso_len;  // hip to shoulder
  Span shoulder;   // half-width at the shoulders
  Span hip;        // half-width at the hips / shoulder
  Span depth;      // torso front-to-back / side-to-side
  Span head_r;
  Span arm_len;
  Span limb_r;
  // Each side's pose, drawn per side:
  Span raise;      // arm out to the side, degrees from hanging (180: straight up)
  Span arm_swing;  // arm forward (+) or back
  Span elbow;      // forearm bent forward
  Span spread;     // leg out to the side
  Span leg_swing;  // leg forward (+) or back
  Span knee;       // shin bent back
};

// Standing; in action (arms high, a long stride, knees bent: a runner, a
// dancer); bulky (an armoured figure, a robot, an astronaut: broad and
// thick-limbed, arms low); crouching (thighs forward, knees sharply bent).
constexpr HumanPlan kHumanPlans[] = {
    {{0.72, 1.0}, {0.5, 0.68}, {0.16, 0.26}, {0.7, 0.95}, {0.5, 0.7}, {0.085, 0.135}, {0.55, 0.75}, {0.032, 0.055},
     {5.0, 95.0}, {-45.0, 70.0}, {0.0, 100.0}, {2.0, 16.0}, {-22.0, 22.0}, {0.0, 45.0}},
    {{0.72, 1.0}, {0.5, 0.68}, {0.15, 0.24}, {0.7, 0.95}, {0.5, 0.7}, {0.085, 0.13}, {0.6, 0.8}, {0.03, 0.05},
     {60.0, 170.0}, {-60.0, 90.0}, {0.0, 120.0}, {5.0, 30.0}, {-45.0, 45.0}, {20.0, 90.0}},
    {{0.55, 0.8}, {0.55, 0.75}, {0.26, 0.36}, {0.8, 1.0}, {0.6, 0.85}, {0.12, 0.17}, {0.5, 0.7}, {0.06, 0.09},
     {5.0, 40.0}, {-30.0, 40.0}, {0.0, 60.0}, {4.0, 14.0}, {-12.0, 12.0}, {0.0, 20.0}},
    {{0.72, 1.0}, {0.5, 0.68}, {0.16, 0.26}, {0.7, 0.95}, {0.5, 0.7}, {0.085, 0.135}, {0.55, 0.75}, {0.032, 0.055},
     {5.0, 60.0}, {0.0, 80.0}, {20.0, 110.0}, {5.0, 25.0}, {40.0, 85.0}, {70.0, 130.0}},
};

// A human figure facing +x: legs, pelvis and a torso wider at the
// shoulders, neck and head; each arm and leg a two-segment chain posed by
// its own angles (raised sideways, swung forward or back, bent at the elbow
// or knee), with joints, hands and feet.
Mesh build_human(Draw& d, int plan) {
  const HumanPlan& p = kHumanPlans[plan];
  const double leg_len = d(p.leg_len);
  const double torso_len = d(p.torso_len);
  const double shoulder = d(p.shoulder);
  const double hip = shoulder * d(p.hip);
  const double depth = d(p.depth);
  const double head_r = d(p.head_r);
  const double arm_len = d(p.arm_len);
  const double limb_r = d(p.limb_r);
  double raise[2], arm_swing[2], elbow[2], spread[2], leg_swing[2], knee[2];
  for (int s = 0; s < 2; ++s) {
    raise[s] = d(p.raise);
    arm_swing[s] = d(p.arm_swing);
    elbow[s] = d(p.elbow);
    spread[s] = d(p.spread);
    leg_swing[s] = d(p.leg_swing);
    knee[s] = d(p.knee);
  }

  Mesh m;
  // Torso: an elliptical frustum, hips to shoulders, flattened front to back.
  place(&m, frustum(hip, shoulder, torso_len, 12),
        Affine().scale(depth, 1, 1).translate(0, leg_len + torso_len / 2, 0));
  place(&m, ellipsoid(hip * depth * 1.05, hip * 0.55, hip * 1.05, 10), Affine().translate(0, leg_len, 0));
  const double top = leg_len + torso_len;
  place(&m, ellipsoid(shoulder * depth, shoulder * 0.3, shoulder, 12), Affine().translate(0, top, 0));
  place(&m, cylinder(head_r * 0.42, head_r * 0.9, 8), Affine().translate(0, top + head_r * 0.3, 0));
  place(&m, ellipsoid(head_r * 0.95, head_r * 1.15, head_r * 0.88, 12), Affine().translate(0, top + head_r * 1.6, 0));
  place(&m, ellipsoid(head_r * 0.2, head_r * 0.25, head_r * 0.15, 6), Affine().translate(head_r * 0.9, top + head_r * 1.5, 0));

  // A two-segment limb from `root`: the upper segment hangs along -y turned by
  // `upper`, the lower bends by `bend` about z at the joint. Returns the end point.
  auto limb = [&](const double root[3], const Affine& upper, double len, double r, double bend) {
    const double half = len / 2;
    const Affine at_root = upper.translate(root[0], root[1], root[2]);
    place(&m, sphere(r * 1.15, 8), Affine().translate(root[0], root[1], root[2]));
    place(&m, hanging(half, r, r * 0.85, 10), at_root);
    const auto joint = at_root.apply(std::array<double, 3>{0, -half, 0});
    const Affine lower = Affine().rotate_z(bend).then(upper).translate(joint[0], joint[1], joint[2]);
    place(&m, sphere(r * 0.95, 8), Affine().translate(joint[0], joint[1], joint[2]));
    place(&m, hanging(half, r * 0.85, r * 0.7, 10), lower);
    return lower;
  };
  for (int s = 0; s < 2; ++s) {
    const double side = s ? 1 : -1;  // +z is the figure's left
    // Arm: out to the side (rotate_x carries -y towards -z, so the left arm turns by -raise).
    const double sh[3] = {0, top - limb_r * 1.2, side * (shoulder + limb_r * 0.3)};
    const Affine arm = Affine().rotate_x(-side * raise[s]).rotate_z(arm_swing[s]);
    const Affine fore = limb(sh, arm, arm_len, limb_r, elbow[s]);
    const auto hand = fore.apply(std::array<double, 3>{0, -arm_len / 2, 0});
    place(&m, ellipsoid(limb_r * 1.1, limb_r * 1.6, limb_r * 0.8, 8), Affine().translate(hand[0], hand[1], hand[2]));
    // Leg: the knee bends the shin backwards; the foot points forward, flat.
    const double hp[3] = {0, leg_len, side * hip * 0.55};
    const Affine thigh = Affine().rotate_x(-side * spread[s]).rotate_z(leg_swing[s]);
    const double shin_len = leg_len * 1.04;
    const Affine shin = limb(hp, thigh, shin_len, limb_r * 1.35, -knee[s]);
    const auto ankle = shin.apply(std::array<double, 3>{0, -shin_len / 2, 0});
    place(&m, box(limb_r * 5.5, limb_r * 1.5, limb_r * 2.6),
          Affine().translate(limb_r * 1.8, 0, 0).translate(ankle[0], ankle[1], ankle[2]));
  }
  return m;
}

}  // namespace vg::toys
