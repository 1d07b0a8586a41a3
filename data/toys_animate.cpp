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

// A four-legged animal, head towards +x: an ellipsoid body on four tapered
// legs (a walking stride swings diagonal pairs), a neck rising at an angle, a
// head with a snout, ears of one of three kinds, and a tail.
Mesh build_animal(Draw& d) {
  const double body_len = d(0.9, 1.6);         // the body ellipsoid's length
  const double girth = d(0.28, 0.46);          // its height
  const double width = girth * d(0.7, 1.0);    // its width
  const double leg_len = d(0.3, 1.1);          // hip to ground
  const double leg_r = girth * d(0.11, 0.2);   // thickness at the hip
  const double stride = d(0.0, 22.0);          // degrees each leg swings
  const double neck_len = d(0.1, 0.8);
  const double neck_angle = d(10.0, 75.0);     // above horizontal
  const double head = d(0.12, 0.24);           // head half-length
  const double snout = head * d(0.3, 1.4);     // snout length
  const int ears = d.pick(3);                  // round, pointed, long
  const double tail_len = d(0.1, 0.8);
  const double tail_angle = d(-70.0, 40.0);    // above horizontal, pointing back

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

// A standing human figure facing +x: legs, pelvis and a torso wider at the
// shoulders, neck and head; each arm and leg a two-segment chain posed by
// its own angles (raised sideways, swung forward or back, bent at the elbow
// or knee), with joints, hands and feet.
Mesh build_human(Draw& d) {
  const double leg_len = d(0.72, 1.0);          // hip height
  const double torso_len = d(0.5, 0.68);        // hip to shoulder
  const double shoulder = d(0.16, 0.26);        // half-width at the shoulders
  const double hip = shoulder * d(0.7, 0.95);   // half-width at the hips
  const double depth = d(0.5, 0.7);             // torso front-to-back / side-to-side
  const double head_r = d(0.085, 0.135);
  const double arm_len = d(0.55, 0.75);
  const double limb_r = d(0.032, 0.055);
  double raise[2], arm_swing[2], elbow[2], spread[2], leg_swing[2], knee[2];
  for (int s = 0; s < 2; ++s) {
    raise[s] = d(5.0, 95.0);       // arm out to the side, degrees from hanging
    arm_swing[s] = d(-45.0, 70.0); // arm forward (+) or back
    elbow[s] = d(0.0, 100.0);      // forearm bent forward
    spread[s] = d(2.0, 16.0);      // leg out to the side
    leg_swing[s] = d(-22.0, 22.0); // leg forward (+) or back
    knee[s] = d(0.0, 45.0);        // shin bent back
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
