#!/usr/bin/python3
"""The default `viewgap run` written as a PyTorch user would write it.

The user's alternative to viewgap, for bench/compare_pytorch.sh. Written from
../shared/SPEC.md, sections 1 to 3, not translated from viewgap's code:
- the synthetic dataset: five point sets; 450 training, 180 familiar, 180
  held-out and 1,080 circle images of 32x32 with N(0, 0.04^2) noise;
- the capsule model: conv1, 8 primary capsules, 4x4 votes, 3 iterations of EM
  routing with the seed's stop-gradient scheme, no epsilon in the M-step;
- the CNN;
- Adam (lr 2e-3), batch 32, 10 epochs reshuffled each epoch, evaluation after
  every epoch, and the circle split at the end.
It is float32, one thread, vectorised over the batch, with evaluation in
inference mode and batches of 256. Its random streams are torch's and numpy's,
so its numbers are a draw from the same distribution as viewgap's, not the same
bits.

  python3 bench/pytorch_run.py [--seed S] [--epochs N]
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SIDE, MARGIN, SPAN, SIGMA = 32, 4.0, 24.0, 1.6


def lin(a, b, n):
    return np.linspace(a, b, n)


def shapes():
    """The five point sets of SPEC section 1, as arrays of shape P x 3."""
    cross = [(0, 0, 0)] + [tuple(s * d if k == ax else 0 for k in range(3))
                           for ax in range(3) for d in (0.35, 0.7) for s in (1, -1)]
    L = ([(x, -0.7, -0.6) for x in lin(-0.8, 0.8, 9)] + [(-0.8, y, -0.6) for y in lin(-0.6, 0.8, 8)]
         + [(-0.8, -0.7, z) for z in lin(-0.5, 0.5, 5)])
    T = ([(x, 0.7, 0) for x in lin(-0.8, 0.8, 9)] + [(0, y, 0) for y in lin(-0.7, 0.6, 7)]
         + [(0, 0.7, z) for z in lin(-0.4, 0.4, 5)])
    c = 0.7
    corners = [np.array((x, y, z)) for x in (-c, c) for y in (-c, c) for z in (-c, c)]
    frame = []
    for i, p in enumerate(corners):
        for q in corners[i + 1:]:
            if np.sum(p != q) == 1:  # an edge of the cube
                frame += [tuple(p + t * (q - p)) for t in lin(0, 1, 5)]
    tripod = [(0, 0, 0)]
    for d in lin(0, 0.85, 6)[1:]:
        tripod += [(d, 0, 0), (0, d, 0), (-0.7 * d, -0.7 * d, -0.7 * d)]
    return [np.array(s, dtype=np.float64) for s in (cross, L, T, frame, tripod)]


def render(points, az_deg, el_deg):
    """Clean images of one class at the views (az[k], el[k]): K x 32 x 32."""
    az, el = np.radians(az_deg)[:, None], np.radians(el_deg)[:, None]
    x, y, z = points[:, 0][None], points[:, 1][None], points[:, 2][None]
    x1, z1 = np.cos(az) * x + np.sin(az) * z, -np.sin(az) * x + np.cos(az) * z
    yr, zr = np.cos(el) * y - np.sin(el) * z1, np.sin(el) * y + np.cos(el) * z1
    u, v = (x1 + 1) / 2 * SPAN + MARGIN, (1 - yr) / 2 * SPAN + MARGIN
    w = 0.6 + 0.4 * (zr + 1) / 2
    grid = np.arange(SIDE)[None, None, :]
    ex = np.exp(-(grid - u[..., None]) ** 2 / (2 * SIGMA ** 2))
    ey = w[..., None] * np.exp(-(grid - v[..., None]) ** 2 / (2 * SIGMA ** 2))
    return np.clip(np.einsum('kpr,kpc->krc', ey, ex), 0, 1)


def make_split(rng, pts, azimuths, elevations, per_combo, noise=0.04):
    az, el = np.meshgrid(azimuths, elevations, indexing='ij')
    az, el = az.ravel(), el.ravel()
    images, labels, views = [], [], []
    for cls, p in enumerate(pts):
        clean = render(p, az, el).astype(np.float32)
        images.append(np.repeat(clean, per_combo, axis=0))
        labels.append(np.full(len(az) * per_combo, cls))
        views.append(np.repeat(az, per_combo))
    x = np.concatenate(images)
    x = np.clip(x + rng.normal(0, noise, x.shape).astype(np.float32), 0, 1)
    return (torch.from_numpy(x[:, None]), torch.from_numpy(np.concatenate(labels)),
            np.concatenate(views))


def he_(layer):
    nn.init.normal_(layer.weight, 0, math.sqrt(2.0 / layer.weight[0].numel()))
    nn.init.zeros_(layer.bias)
    return layer


class CNN(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.conv1 = he_(nn.Conv2d(1, 16, 5, stride=2, padding=2))
        self.fc1, self.fc2 = he_(nn.Linear(4096, hidden)), he_(nn.Linear(hidden, 5))

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(F.relu(self.conv1(x)).flatten(1))))


class CapsNet(nn.Module):
    """conv1, 8 primary capsules (4x4 pose + activation), EM routing to 5 class capsules."""

    def __init__(self, iters=3, lam=1.0):
        super().__init__()
        self.iters, self.lam = iters, lam
        self.conv1 = he_(nn.Conv2d(1, 16, 5, stride=2, padding=2))
        self.primary = he_(nn.Linear(4096, 8 * 17))
        self.W = nn.Parameter(torch.randn(8, 5, 4, 4) * 0.5)
        self.beta_a, self.beta_v = nn.Parameter(torch.zeros(5)), nn.Parameter(torch.zeros(5))

    def forward(self, x):
        B = x.shape[0]
        p = self.primary(F.relu(self.conv1(x)).flatten(1)).view(B, 8, 17)
        M = p[:, :, :16].reshape(B, 8, 4, 4)
        log_a_in = F.logsigmoid(p[:, :, 16]).detach()        # the primary activations get no gradient
        V = torch.einsum('bikl,ijlm->bijkm', M, self.W).reshape(B, 8, 5, 16)
        log_r = torch.full((B, 8, 5), -math.log(5.0))
        for it in range(self.iters):
            # M-step in the log domain (true weighted moments, no epsilon); R and
            # sum R a are detached, gradient reaches V through mu and sigma2.
            log_ra = (log_r + log_a_in[:, :, None]).detach()
            log_s = torch.logsumexp(log_ra, dim=1)                     # B x J
            w = torch.exp(log_ra - log_s[:, None])[..., None]          # B x I x J x 1
            mu = (w * V).sum(1)                                        # B x J x 16
            sigma2 = (w * (V - mu.detach()[:, None]) ** 2).sum(1).clamp_min(1e-6)
            cost = ((self.beta_v[:, None] + 0.5 * torch.log(sigma2)).sum(-1)) * torch.exp(log_s)
            logit_a = self.lam * (self.beta_a - cost)
            if it == self.iters - 1:
                break
            with torch.no_grad():  # E-step: R is detached
                log_p = (-(V - mu[:, None]) ** 2 / (2 * sigma2[:, None])
                         - 0.5 * torch.log(2 * math.pi * sigma2[:, None])).sum(-1)
                log_r = torch.log_softmax(log_p + F.logsigmoid(logit_a)[:, None], dim=2)
        a = torch.sigmoid(logit_a)
        return (mu ** 2).sum(-1) / 16 + 4 * (a - 0.5)


@torch.inference_mode()
def accuracy(model, x, y, per_sample=False):
    right = torch.cat([model(x[i:i + 256]).argmax(1) == y[i:i + 256] for i in range(0, len(x), 256)])
    return right if per_sample else right.float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--epochs', type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    pts = shapes()
    elev = lin(10, 50, 3)
    train_az, test_az, circle_az = lin(0, 150, 6), lin(200, 330, 6), np.arange(0, 360, 10.0)
    train = make_split(rng, pts, train_az, elev, 5)
    familiar = make_split(rng, pts, train_az, elev, 2)
    heldout = make_split(rng, pts, test_az, elev, 2)
    circle = make_split(rng, pts, circle_az, elev, 2)
    t_data = time.perf_counter() - t0
    print(f"pytorch {torch.__version__}, 1 thread; seed {args.seed}, {args.epochs} epochs; "
          f"train {len(train[1])}, familiar {len(familiar[1])}, held-out {len(heldout[1])}, circle {len(circle[1])}")
    print(f"{'model':<6} {'params':>8} {'familiar':>9} {'held-out':>9} {'drop':>7} {'train s':>8} {'eval s':>7}")
    for name, model in (('caps', CapsNet()), ('cnn', CNN())):
        opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.999), eps=1e-8)
        t_train = t_eval = 0.0
        for epoch in range(args.epochs):
            t1 = time.perf_counter()
            order = torch.randperm(len(train[1]))
            for i in range(0, len(order), 32):
                idx = order[i:i + 32]
                loss = F.cross_entropy(model(train[0][idx]), train[1][idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            t2 = time.perf_counter()
            fam, held = accuracy(model, *familiar[:2]), accuracy(model, *heldout[:2])
            t_eval += time.perf_counter() - t2
            t_train += t2 - t1
        t3 = time.perf_counter()
        right = accuracy(model, *circle[:2], per_sample=True).numpy()
        per_az = [right[circle[2] == a].mean() for a in circle_az]  # accuracy per circle azimuth
        t_eval += time.perf_counter() - t3
        params = sum(p.numel() for p in model.parameters())
        print(f"{name:<6} {params:>8} {fam:>9.3f} {held:>9.3f} {fam - held:>7.3f} {t_train:>8.3f} {t_eval:>7.3f}"
              f"   (circle mean {np.mean(per_az):.3f})")
    print(f"wall time {time.perf_counter() - t0:.3f} s (dataset {t_data:.3f} s)")


if __name__ == '__main__':
    main()
