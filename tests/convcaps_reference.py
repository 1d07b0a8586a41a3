#!/usr/bin/env python3
"""An independent reference for one forward pass of `convcaps`, from the paper's
equations (Hinton, Sabour & Frosst 2018, section 2 and 3), in numpy.

Usage: convcaps_reference.py DIR
DIR holds what tests/test_convcaps.cpp wrote: meta.json (sizes and routing
options), each parameter tensor as DIR/<name>.f32 (raw little-endian float32,
the C++ layouts), the input images and the model's outputs per layer. This
script recomputes every layer in float64 and in float32 and compares the
model's outputs with the float64 ones. The tolerance is derived, not guessed:
the float32 pass shows how far single-precision rounding alone moves each
output, and the model may differ from float64 by at most 20 times that (plus a
floor of 1e-5 relative to the layer's scale); rounding orders differ between
the two float implementations, so agreement to a small multiple is what a
correct model gives, while a wrong formula moves outputs by O(1).

Exit 0 when every layer agrees; 1 (with the worst element) when not.
"""
import json
import os
import sys

import numpy as np


def load(d, name, shape):
    return np.fromfile(os.path.join(d, name + ".f32"), dtype="<f4").reshape(shape)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def m_step(V, Ra, beta_a, beta_v, lam, floor, cfg, mu_prev):
    """V: P x I x J x 16 votes, Ra: P x I x J = R * a. Returns mu, a, sigma2.
    The official code's options (google-research capsule_em, em_layers.py):
    mean_carry r mixes the previous iteration's mean in, mu = (1 - r) m + r
    mu_prev (mu_prev = 0 before the first), the variance taken about it; the
    official logit is lam (-S (sum_h ln var_h + 16 (ln 2pi + 1) beta_v) -
    5000 beta_a), the paper's lam (beta_a - S sum_h (beta_v + ln sigma_h))."""
    S = Ra.sum(axis=1)                                       # P x J
    w = Ra / S[:, None, :]
    mu = np.einsum("pij,pijh->pjh", w, V)
    r = cfg.get("mean_carry", 0.0)
    if r:
        mu = (1 - r) * mu + r * mu_prev
    var = np.einsum("pij,pijh->pjh", w, (V - mu[:, None]) ** 2)
    var = np.maximum(var, floor)
    if cfg.get("logit", "paper") == "official":
        cost = (np.log(var).sum(axis=2) + 16 * (np.log(2 * np.pi) + 1) * beta_v[None, :]) * S
        a = sigmoid(lam * (-cost - 5000 * beta_a[None, :]))
    else:
        cost = (beta_v[None, :, None] + 0.5 * np.log(var)).sum(axis=2) * S
        a = sigmoid(lam * (beta_a[None, :] - cost))
    return mu, a, var


def log_p(V, mu, var):
    """log N(V | mu, var) summed over the 16 pose elements: P x I x J."""
    return -0.5 * (((V - mu[:, None]) ** 2) / var[:, None] + np.log(2 * np.pi * var[:, None])).sum(axis=3)


def lambdas(cfg):
    if cfg["lambda_schedule"]:
        return [cfg["lambda"] * (1 - 0.95 ** (t + 1)) for t in range(cfg["iters"])]
    return [cfg["lambda"]] * cfg["iters"]


def conv_routing(V, a_child, beta_a, beta_v, H, K, s, cfg, dt):
    """EM routing over the windows of a convolutional capsule layer.
    V: N x Ho x Wo x (K K Ci) x J x 16, a_child: N x H x W x Ci (activations).
    Each child's assignments are normalised over every (window, type) it feeds
    (paper) or over the windows of each type separately (official)."""
    N, Ho, Wo, I, J, _ = V.shape
    Ci = I // (K * K)
    P = N * Ho * Wo
    Vp = V.reshape(P, I, J, 16)
    # Which child (flat index into N x H x W x Ci) sits at (window, q).
    child = np.zeros((N, Ho, Wo, I), dtype=np.int64)
    for n in range(N):
        for oy in range(Ho):
            for ox in range(Wo):
                for ky in range(K):
                    for kx in range(K):
                        for i in range(Ci):
                            y, x = oy * s + ky, ox * s + kx
                            child[n, oy, ox, (ky * K + kx) * Ci + i] = ((n * H + y) * H + x) * Ci + i
    child = child.reshape(P, I)
    n_children = N * H * H * Ci
    a_in = a_child.reshape(-1)[child]                         # P x I
    official = cfg["norm"] == "official"
    # Initial assignments: uniform over the parents a child feeds.
    if official:
        R = np.full((P, I, J), 1.0 / J, dtype=dt)
    else:
        feeds = np.bincount(child.reshape(-1), minlength=n_children).astype(dt)  # windows per child
        R = np.broadcast_to((1.0 / (feeds[child] * J))[:, :, None], (P, I, J)).astype(dt)
    lam = lambdas(cfg)
    mu = np.zeros((P, J, 16), dtype=dt)
    for t in range(cfg["iters"]):
        mu, a, var = m_step(Vp, R * a_in[:, :, None], beta_a, beta_v, dt(lam[t]), dt(cfg["sigma2_min"]), cfg, mu)
        if t == cfg["iters"] - 1:
            break
        logit = log_p(Vp, mu, var) + np.log(a)[:, None, :]    # P x I x J
        # Normalise across every (window, type) a child feeds: a log-sum-exp
        # gathered per child (per child and type, official).
        # Shifted by each child's own maximum, so no child's terms all underflow.
        flat = child.reshape(-1)
        if official:
            top = np.full((n_children, J), -np.inf, dtype=dt)
            np.maximum.at(top, flat, logit.reshape(-1, J))
            e = np.exp(logit - top[child])
            tot = np.zeros((n_children, J), dtype=dt)
            np.add.at(tot, flat, e.reshape(-1, J))
            R = e / tot[child]
        else:
            top = np.full(n_children, -np.inf, dtype=dt)
            np.maximum.at(top, flat, logit.max(axis=2).reshape(-1))
            e = np.exp(logit - top[child][:, :, None])
            tot = np.zeros(n_children, dtype=dt)
            np.add.at(tot, flat, e.sum(axis=2).reshape(-1))
            R = e / tot[child][:, :, None]
    return mu.reshape(N, Ho, Wo, J, 16), a.reshape(N, Ho, Wo, J)


def dense_routing(V, a_in, beta_a, beta_v, cfg, dt):
    """EM routing of every child to every class capsule: V N x I x J x 16."""
    N, I, J, _ = V.shape
    R = np.full((N, I, J), 1.0 / J, dtype=dt)
    lam = [x * cfg.get("class_lambda_scale", 1.0) for x in lambdas(cfg)]  # official: a quarter
    mu = np.zeros((N, J, 16), dtype=dt)
    for t in range(cfg["iters"]):
        mu, a, var = m_step(V, R * a_in[:, :, None], beta_a, beta_v, dt(lam[t]), dt(cfg["sigma2_min"]), cfg, mu)
        if t == cfg["iters"] - 1:
            break
        logit = log_p(V, mu, var) + np.log(a)[:, None, :]
        logit -= logit.max(axis=2, keepdims=True)
        e = np.exp(logit)
        R = e / e.sum(axis=2, keepdims=True)
    return mu, a


def conv_votes(M, W, K, s):
    """M: N x H x W x Ci x 4 x 4, W: K x K x Ci x J x 4 x 4 -> N x Ho x Wo x (K K Ci) x J x 16."""
    N, H, _, Ci = M.shape[:4]
    Ho = (H - K) // s + 1
    J = W.shape[3]
    V = np.zeros((N, Ho, Ho, K * K * Ci, J, 4, 4), dtype=M.dtype)
    for oy in range(Ho):
        for ox in range(Ho):
            for ky in range(K):
                for kx in range(K):
                    patch = M[:, oy * s + ky, ox * s + kx]           # N x Ci x 4 x 4
                    q = (ky * K + kx) * Ci
                    V[:, oy, ox, q:q + Ci] = np.einsum("nirc,ijcd->nijrd", patch, W[ky, kx])
    return V.reshape(N, Ho, Ho, K * K * Ci, J, 16)


def forward(d, meta, dt):
    c = meta
    N, Cin, side = c["batch"], c["in_channels"], c["image_side"]
    A, B, C, D, K, J = c["A"], c["B"], c["C"], c["D"], c["K"], c["classes"]
    f = lambda name, shape: load(d, name, shape).astype(dt)
    x = f("images", (N, Cin, side, side))
    w1, b1 = f("conv1.weight", (A, Cin, 5, 5)), f("conv1.bias", (A,))
    s0 = (side - 5) // 2 + 1
    h = np.zeros((N, s0, s0, A), dtype=dt)
    for y in range(s0):
        for xx in range(s0):
            patch = x[:, :, 2 * y:2 * y + 5, 2 * xx:2 * xx + 5]      # N x Cin x 5 x 5
            h[:, y, xx] = np.einsum("nckl,ockl->no", patch, w1) + b1
    h = np.maximum(h, 0)
    row = B * 17
    wp, bp = f("primary.weight", (A, row)), f("primary.bias", (row,))
    prim = h.reshape(-1, A) @ wp + bp                               # N s0 s0 x row
    poses = prim[:, :B * 16].reshape(N, s0, s0, B, 4, 4)
    a0 = sigmoid(prim[:, B * 16:]).reshape(N, s0, s0, B)
    out = {}
    grid, types, act = s0, B, a0
    for layer, (out_types, stride) in (("convcaps1", (C, 2)), ("convcaps2", (D, 1))):
        W = f(layer + ".W", (K, K, types, out_types, 4, 4))
        V = conv_votes(poses, W, K, stride)
        mu, a = conv_routing(V, act, f(layer + ".beta_a", (out_types,)), f(layer + ".beta_v", (out_types,)),
                             grid, K, stride, c, dt)
        out[layer + ".mu"], out[layer + ".a"] = mu, a
        grid, types, act = mu.shape[1], out_types, a
        poses = mu.reshape(N, grid, grid, types, 4, 4)
    # Class capsules: W shared over positions, plus coordinate addition.
    W = f("class.W", (types, J, 4, 4))
    V = np.einsum("nyxirc,ijcd->nyxijrd", poses, W).reshape(N, grid, grid, types, J, 16)
    coords = np.array(c["coords"], dtype=dt)
    re, ce = (3, 7) if c["coord_place"] == "paper" else (1, 0)  # official: the column first
    V[..., re] += coords[:grid][None, :, None, None, None]
    V[..., ce] += coords[grid:][None, None, :, None, None]
    mu, a = dense_routing(V.reshape(N, grid * grid * types, J, 16), act.reshape(N, -1),
                          f("class.beta_a", (J,)), f("class.beta_v", (J,)), c, dt)
    out["class.mu"], out["class.a"] = mu, a
    return out


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "meta.json")) as fh:
        meta = json.load(fh)
    exact, single = forward(d, meta, np.float64), forward(d, meta, np.float32)
    ok = True
    for name, ref in exact.items():
        got = load(d, "out." + name, ref.shape).astype(np.float64)
        rounding = np.abs(single[name].astype(np.float64) - ref)
        scale = np.abs(ref).max()
        tol = 20 * rounding + 1e-5 * max(scale, 1e-3)
        err = np.abs(got - ref)
        worst = np.unravel_index(np.argmax(err - tol), err.shape)
        status = "ok" if (err <= tol).all() else "MISMATCH"
        ok &= status == "ok"
        print(f"{name:18s} {status}: max |model - float64| {err.max():.3g}, "
              f"max float32 rounding {rounding.max():.3g}, scale {scale:.3g}"
              + ("" if status == "ok" else f"; worst at {worst}: model {got[worst]:.7g}, reference {ref[worst]:.7g}"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
