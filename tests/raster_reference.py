#!/usr/bin/env python3
"""An independent check of data/raster.cpp: a numpy ray caster.

Called by tests/test_raster.cpp (Raster.MatchesAnIndependentNumpyRayCaster)
with a directory holding meta.json (mesh, cameras, light) and, per camera v,
the C++ rasteriser's depth_v.f32 and shaded image_v.f32 (side x side, float32,
row-major). Exit status 0 when they agree, 1 with a report when not.

Written from data/raster.h's conventions, not from the C++: the camera is a
rotation matrix Ry(azimuth) Rx(-elevation) applied to a camera that looks down
-z with +y up, and each pixel is found by casting the ray through its centre and
intersecting it with every front-facing triangle in 3D (float64), where the C++
projects the vertices and scans edge functions on the screen.

What is compared, and why the tolerances:
  * coverage exactly, except at pixels whose centre lies within 1e-3 pixel of a
    front-facing triangle's edge on the screen: the rasteriser snaps projected
    vertices to 1/4096 pixel (for exact edge tests), which moves an edge by at
    most 2 x 2^-13 sqrt(2) = 3.5e-4 pixel, so only such pixels can change hands
    or fall on an edge whose tie the top-left rule settles;
  * depth to 1e-4 relative: the snap tilts the interpolated plane, and the C++
    keeps 1/z in float;
  * the shaded value to 1e-5: both light the same face's normal, the C++ in float.
The script also fails if too few pixels were compared for the check to mean
anything.
"""
import json
import math
import os
import sys

import numpy as np

EDGE_TOL_PX = 1e-3
DEPTH_RTOL = 1e-4
SHADE_TOL = 1e-5


def rotation(azimuth_deg, elevation_deg):
    """Columns: the camera's right, up and backward (towards the eye) axes in world."""
    a, e = math.radians(azimuth_deg), math.radians(elevation_deg)
    ry = np.array([[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]])
    rx = np.array([[1, 0, 0], [0, math.cos(-e), -math.sin(-e)], [0, math.sin(-e), math.cos(-e)]])
    return ry @ rx


def render(verts, tris, cam, side, light, albedo, background):
    """Ray-cast depth, coverage, shade, and the per-pixel distance to the nearest edge."""
    R = rotation(cam["azimuth_deg"], cam["elevation_deg"])
    right, up, back = R[:, 0], R[:, 1], R[:, 2]
    target = np.array([0.0, cam["target_y"], 0.0])
    eye = target + cam["distance"] * back
    persp = cam["perspective"]
    # Pixel centres in normalised image coordinates: u to the right, v up, both in [-1, 1].
    idx = np.arange(side) + 0.5
    u = np.tile(idx / side * 2 - 1, side)
    v = np.repeat(1 - idx / side * 2, side)
    n_pix = side * side
    if persp:
        t = math.tan(math.radians(cam["fov_deg"]) / 2)
        origin = np.broadcast_to(eye, (n_pix, 3))
        direction = (u * t)[:, None] * right + (v * t)[:, None] * up - back  # forward component 1
    else:
        hw = cam["half_width"]
        origin = eye + (u * hw)[:, None] * right + (v * hw)[:, None] * up
        direction = np.broadcast_to(-back, (n_pix, 3))

    def to_pixels(p):
        """World point -> (column, row) on the screen, in pixels."""
        q = p - eye
        x, y, depth = q @ right, q @ up, -(q @ back)
        if persp:
            x, y = x / (depth * t), y / (depth * t)
        else:
            x, y = x / hw, y / hw
        return np.array([(x + 1) * side / 2, (1 - y) * side / 2])

    # The screen projection (used only to find pixels near edges) must agree with
    # the rays: the ray through a vertex's projected position passes through it.
    for p in verts:
        col, row = to_pixels(p)
        pu, pv = col / side * 2 - 1, 1 - row / side * 2
        if persp:
            ray_o, ray_d = eye, pu * t * right + pv * t * up - back
        else:
            ray_o, ray_d = eye + pu * hw * right + pv * hw * up, -back
        q = p - ray_o
        miss = np.linalg.norm(q - (q @ ray_d) / (ray_d @ ray_d) * ray_d)
        assert miss < 1e-9, f"projection and rays disagree by {miss} at vertex {p}"

    best = np.full(n_pix, np.inf)
    normal = np.zeros((n_pix, 3))
    edge_dist = np.full(n_pix, np.inf)
    centres = np.stack([np.tile(idx, side), np.repeat(idx, side)], axis=1)
    for tri in tris:
        a, b, c = (verts[i] for i in tri)
        n = np.cross(b - a, c - a)
        if np.linalg.norm(n) == 0:
            continue
        n = n / np.linalg.norm(n)
        # Front-facing: the outward normal points back towards the viewer.
        view = (a - eye) if persp else -back
        if n @ view >= 0:
            continue
        # Ray-triangle intersection (solve origin + s dir = a + beta (b - a) + gamma (c - a)).
        e1, e2 = b - a, c - a
        pvec = np.cross(direction, e2)
        det = pvec @ e1
        ok = np.abs(det) > 1e-12
        inv = np.where(ok, 1 / np.where(ok, det, 1), 0)
        tvec = origin - a
        beta = np.einsum("ij,ij->i", tvec, pvec) * inv
        qvec = np.cross(tvec, e1)
        gamma = np.einsum("ij,ij->i", direction, qvec) * inv
        s = (qvec @ e2) * inv
        inside = ok & (beta >= 0) & (gamma >= 0) & (beta + gamma <= 1)
        if persp:
            inside &= s > 0
        # The direction's forward component is 1, so s is the view-space depth.
        nearer = inside & (s < best)
        best[nearer] = s[nearer]
        normal[nearer] = n
        # Distance from each pixel centre to this triangle's three edges on screen.
        pa, pb, pc = to_pixels(a), to_pixels(b), to_pixels(c)
        for p0, p1 in ((pa, pb), (pb, pc), (pc, pa)):
            d = p1 - p0
            w = np.clip(((centres - p0) @ d) / (d @ d), 0, 1)
            dist = np.linalg.norm(centres - (p0 + w[:, None] * d), axis=1)
            edge_dist = np.minimum(edge_dist, dist)
    covered = np.isfinite(best)
    lam = np.maximum(0, normal @ np.asarray(light["direction"], dtype=np.float64))
    img = np.where(covered, np.minimum(1, albedo * (light["ambient"] + light["intensity"] * lam)), background)
    return best, covered, img, edge_dist


def main(d):
    meta = json.load(open(os.path.join(d, "meta.json")))
    side = meta["side"]
    verts = np.array(meta["vertices"], dtype=np.float32).astype(np.float64)
    tris = meta["triangles"]
    failures, compared_total, covered_total = [], 0, 0
    for k, cam in enumerate(meta["cameras"]):
        depth = np.fromfile(os.path.join(d, f"depth_{k}.f32"), dtype=np.float32).astype(np.float64)
        image = np.fromfile(os.path.join(d, f"image_{k}.f32"), dtype=np.float32).astype(np.float64)
        ref_depth, ref_cov, ref_img, edge_dist = render(verts, tris, cam, side, meta["light"], meta["albedo"],
                                                        meta["background"])
        away = edge_dist > EDGE_TOL_PX
        cov = np.isfinite(depth)
        compared = int(away.sum())
        compared_total += compared
        covered_total += int((away & ref_cov).sum())
        label = f"camera {k} {cam}"
        bad = np.flatnonzero(away & (cov != ref_cov))
        if bad.size:
            failures.append(f"{label}: coverage differs at pixels {bad[:10].tolist()} (C++ covered: "
                            f"{cov[bad[:10]].tolist()})")
        both = away & cov & ref_cov
        rel = np.abs(depth[both] - ref_depth[both]) / ref_depth[both]
        if rel.size and rel.max() > DEPTH_RTOL:
            failures.append(f"{label}: depth off by {rel.max():.3g} relative")
        diff = np.abs(image[away] - ref_img[away])
        if diff.size and diff.max() > SHADE_TOL:
            i = np.flatnonzero(away)[np.argmax(diff)]
            failures.append(f"{label}: shade {image[i]} vs {ref_img[i]} at pixel {i}")
        print(f"{label}: {compared}/{side * side} pixels compared, {int((away & ref_cov).sum())} covered")
    # The check must see the scene: most pixels compared, plenty of them covered.
    n_all = side * side * len(meta["cameras"])
    if compared_total < 0.8 * n_all or covered_total < 0.2 * n_all:
        failures.append(f"only {compared_total} pixels compared, {covered_total} covered, of {n_all}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
