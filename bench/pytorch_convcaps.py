#!/usr/bin/env python3
"""viewgap's `convcaps` (models/convcaps.h) written again in PyTorch, for timing side by side
(issue 29 section 6; bench/compare_convcaps.sh runs both).

The same network, configuration and routing semantics, written from viewgap's headers
(kernels/conv_em_routing.h, kernels/em_routing.h, kernels/conv_votes.h) and not from its code:
  conv1      5x5/2 VALID, 1 -> A channels, ReLU                       B x 14 x 14 x A
  primary    1x1 (a dense layer per position): B types of 4x4 pose + activation logit
  convcaps1  K x K / 2 windows, votes M W per (kernel position, child type, parent type),
             EM routing over windows                                   6 x 6 x C
  convcaps2  K x K / 1, the same                                       4 x 4 x D
  class      W shared over positions + coordinate addition (paper: the receptive field's
             centre over the image side, added to pose elements 3 and 7), dense EM routing
             over all 4 x 4 x D children                               5 class capsules
(The grid sides are those of a 32 x 32 input; --image 28, Fashion-MNIST's side, gives 12 -> 5 -> 3,
and --classes 10 ten class capsules, as viewgap's `convcaps` has on `--data fashion-mnist`.)
Routing (every capsule layer): 3 iterations, M-step w = R a / S, S = sum_i R a, mu and sigma2
the weighted moments (sigma2 floored at 1e-6), cost_j = sum_h (beta_v + log(sigma2_h) / 2) S_j,
a = sigmoid(lambda_t (beta_a - cost)), lambda_t = 0.01 (1 - 0.95^(t+1)) (the official schedule);
E-step log p = -1/2 sum_h ((V - mu)^2 / sigma2 + log(2 pi sigma2)), R = exp(log p + log a)
normalised per child: in the convolutional layers over every (window, parent type) the child
feeds, in the class layer over the classes. Initial R = 1 / (windows containing the child x J).
Full backpropagation through every iteration by autograd (only LSE shifts are detached). Spread
loss on the class activations, margin annealed 0.2 -> 0.9 over the timed steps; Adam lr 2e-3.
float32, one thread. The images are random (N(0, 1), random labels): this measures speed only.

Prints one JSON line: training and forward-only (torch.no_grad) images/s, medians over the timed
steps after warm-up, the parameter count, the image side and classes, and peak RSS.

Usage: /usr/bin/python3 bench/pytorch_convcaps.py [--A 64 --B 8 --C 16 --D 16] [--batch 32]
           [--steps 3] [--warmup 1] [--image 32] [--classes 5] [--check]
--image SIDE and --classes N set the input's side (one channel) and the class capsules (defaults: the
rendered data's 32 and 5; Fashion-MNIST: --image 28 --classes 10). A side under 17 leaves the net no
class grid (exit 2).
--check also runs a tiny net in float64 against tests/convcaps_reference.py (the numpy reference viewgap's
test compares convcaps with), every capsule layer's poses and activations, at 32 x 32 and 5 classes
whatever --image and --classes say, and checks that four Adam steps on one fixed batch (at --image and
--classes) lower its loss.
"""
import json
import math

import torch
import torch.nn.functional as F

import one_line_args
from torch_timing import time_training

TOOL = 'pytorch_convcaps.py'

POSE = 16
LOG_2PI = math.log(2 * math.pi)
SIGMA2_MIN = 1e-6
ITERS = 3
LAMBDA_FINAL = 0.01
N_CLASSES = 5  # the class capsules and the input's side: main() sets both from --classes and --image
IMAGE = 32
K = 3


def grid_sides(image):
    """The capsule grids' sides for an input side: conv1 5x5/2 VALID, ConvCaps1 K/2, ConvCaps2 K/1."""
    s0 = (image - 5) // 2 + 1
    s1 = (s0 - K) // 2 + 1
    return s0, s1, s1 - K + 1


MIN_IMAGE = next(side for side in range(5, 100) if min(grid_sides(side)) >= 1)  # 17 at K = 3


def lam(t):  # the official schedule's inverse temperature of iteration t (0-based)
    return LAMBDA_FINAL * (1 - 0.95 ** (t + 1))


def m_step(R, a_in, V, beta_a, beta_v, lam_t):
    """R: b,P,I,J; a_in: b,P,I; V: b,P,I,J,16 -> mu b,P,J,16, a b,P,J, sigma2, diff = V - mu."""
    ra = R * a_in.unsqueeze(-1)
    S = ra.sum(2)                                                    # b,P,J
    w = (ra / S.unsqueeze(2)).unsqueeze(-1)                          # b,P,I,J,1
    mu = (w * V).sum(2)                                              # b,P,J,16
    diff = V - mu.unsqueeze(2)
    d2 = diff * diff
    sigma2 = (w * d2).sum(2).clamp_min(SIGMA2_MIN)
    log_s2 = torch.log(sigma2)
    cost = (beta_v.unsqueeze(-1) + 0.5 * log_s2).sum(-1) * S
    a = torch.sigmoid(lam_t * (beta_a - cost))
    return mu, a, sigma2, log_s2, d2


def log_p_plus_log_a(d2, sigma2, log_s2, a):
    """log p_{ij} + log a_j for every vote: b,P,I,J."""
    log_p = -0.5 * ((d2 / sigma2.unsqueeze(2)).sum(-1) + (log_s2 + LOG_2PI).sum(-1).unsqueeze(2))
    return log_p + torch.log(a).unsqueeze(2)


class Windows:
    """Where each (window, kernel position) reads on the child grid: child[p, k] = y * W + x."""

    def __init__(self, H, stride):
        Ho = (H - K) // stride + 1
        oy = torch.arange(Ho).view(Ho, 1, 1, 1) * stride
        ox = torch.arange(Ho).view(1, Ho, 1, 1) * stride
        ky = torch.arange(K).view(1, 1, K, 1)
        kx = torch.arange(K).view(1, 1, 1, K)
        self.H, self.Ho, self.stride = H, Ho, stride
        self.child = ((oy + ky) * H + (ox + kx)).reshape(-1)          # Ho*Wo*K*K
        self.n_windows = torch.zeros(H * H).index_add_(0, self.child, torch.ones(self.child.numel()))


class ConvCaps(torch.nn.Module):
    def __init__(self, H, Ci, Co, stride):
        super().__init__()
        self.win = Windows(H, stride)
        self.Ci, self.Co = Ci, Co
        self.W = torch.nn.Parameter(torch.randn(K * K * Ci, Co, 4, 4) * 0.5)  # (ky, kx, i), o
        self.beta_a = torch.nn.Parameter(torch.zeros(Co))
        self.beta_v = torch.nn.Parameter(torch.zeros(Co))

    def votes(self, M):
        """M: b,H,W,Ci,16 -> V: b,P,I,J,16 with I = (ky, kx, i)."""
        b, H, Wd, Ci, _ = M.shape
        s, Ho = self.win.stride, self.win.Ho
        Mp = M.unfold(1, K, s).unfold(2, K, s)                       # b,Ho,Wo,Ci,16,ky,kx
        Mp = Mp.permute(0, 1, 2, 5, 6, 3, 4).reshape(b * Ho * Ho, K * K * Ci, 4, 4)
        V = torch.einsum('nqac,qocd->nqoad', Mp, self.W)            # per (kernel pos, i): one bmm
        return V.reshape(b, Ho * Ho, K * K * Ci, self.Co, POSE)

    def forward(self, M, a_child):
        """M: b,H,W,Ci,16; a_child: b,H,W,Ci -> mu b,Ho,Wo,Co,16, a b,Ho,Wo,Co."""
        b, H, _, Ci, _ = M.shape
        J, w = self.Co, self.win
        P, KK = w.Ho * w.Ho, K * K
        V = self.votes(M)
        a_flat = a_child.reshape(b, H * H, Ci)
        a_in = a_flat[:, w.child].reshape(b, P, KK * Ci)             # each window's children
        R = (1.0 / (w.n_windows[w.child] * J)).view(1, P, KK, 1, 1).expand(b, P, KK, Ci, J).reshape(b, P, KK * Ci, J)
        idx = w.child.view(1, -1, 1).expand(b, P * KK, Ci)
        for t in range(ITERS):
            mu, a, sigma2, log_s2, d2 = m_step(R, a_in, V, self.beta_a, self.beta_v, lam(t))
            if t == ITERS - 1:
                break
            # E-step: each child's R over every (window, parent type) it feeds: a log-sum-exp over
            # the types inside each window, then over the windows holding the child (by index_add).
            lg = log_p_plus_log_a(d2, sigma2, log_s2, a).reshape(b, P * KK, Ci, J)
            lse_j = torch.logsumexp(lg, -1)                           # b, P*KK, Ci
            m = torch.full((b, H * H, Ci), -math.inf).scatter_reduce(
                1, idx, lse_j.detach(), reduce='amax', include_self=True)
            m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
            m_w = m[:, w.child]
            s_c = torch.zeros(b, H * H, Ci).index_add(1, w.child, torch.exp(lse_j - m_w))
            lse_c = (torch.log(s_c[:, w.child]) + m_w).unsqueeze(-1)  # b, P*KK, Ci, 1
            R = torch.exp(lg - lse_c).reshape(b, P, KK * Ci, J)
        return mu.reshape(b, w.Ho, w.Ho, J, POSE), a.reshape(b, w.Ho, w.Ho, J)


class ClassCaps(torch.nn.Module):
    def __init__(self, side, D, J):
        super().__init__()
        self.J = J
        self.W = torch.nn.Parameter(torch.randn(D, J, 4, 4) * 0.5)
        self.beta_a = torch.nn.Parameter(torch.zeros(J))
        self.beta_v = torch.nn.Parameter(torch.zeros(J))
        # The receptive field's centre pixel over the image side: conv1 centres output y1 on
        # 2 + 2 y1, ConvCaps1 (K/2) on 4 + 4 y, ConvCaps2 (K/1) on 8 + 4 y (K = 3).
        off = 2 + 2 * (K - 1) / 2
        off = off + 4 * (K - 1) / 2
        c = torch.tensor([(off + 4 * y + 0.5) / IMAGE for y in range(side)])
        coord = torch.zeros(side, side, POSE)
        coord[:, :, 3] = c.view(side, 1)  # the row, to element (0, 3)
        coord[:, :, 7] = c.view(1, side)  # the column, to element (1, 3)
        self.register_buffer('coord', coord.view(side, side, 1, 1, POSE))

    def forward(self, M, a_child):
        b, H, Wd, D, _ = M.shape
        J = self.J
        V = torch.einsum('nqac,qocd->nqoad', M.reshape(b * H * Wd, D, 4, 4), self.W)
        V = (V.reshape(b, H, Wd, D, J, POSE) + self.coord).reshape(b, 1, H * Wd * D, J, POSE)
        a_in = a_child.reshape(b, 1, H * Wd * D)
        R = torch.full((b, 1, H * Wd * D, J), 1.0 / J)
        for t in range(ITERS):
            mu, a, sigma2, log_s2, d2 = m_step(R, a_in, V, self.beta_a, self.beta_v, lam(t))
            if t == ITERS - 1:
                break
            R = torch.softmax(log_p_plus_log_a(d2, sigma2, log_s2, a), -1)
        return mu.reshape(b, J, POSE), a.reshape(b, J)


class ConvCapsNet(torch.nn.Module):
    def __init__(self, A, B, C, D):
        super().__init__()
        self.B = B
        s0, s1, s2 = grid_sides(IMAGE)
        self.conv1 = torch.nn.Conv2d(1, A, 5, stride=2)
        self.primary = torch.nn.Linear(A, B * (POSE + 1))
        self.caps1 = ConvCaps(s0, B, C, 2)
        self.caps2 = ConvCaps(s1, C, D, 1)
        self.cls = ClassCaps(s2, D, N_CLASSES)
        # viewgap's init: He-normal conv1 and primary, capsule W from N(0, 0.5^2) (above), zero
        # biases and betas.
        with torch.no_grad():
            self.conv1.weight.normal_(0, math.sqrt(2 / 25))
            self.conv1.bias.zero_()
            self.primary.weight.normal_(0, math.sqrt(2 / A))
            self.primary.bias.zero_()

    def forward(self, x, layers=None):
        """The class activations; `layers` (a dict), if given, receives every capsule layer's mu and a."""
        f = F.relu(self.conv1(x)).permute(0, 2, 3, 1)                 # b,14,14,A channel-last
        p = self.primary(f)                                           # b,14,14,B*17
        b, h, w, _ = p.shape
        poses = p[..., :self.B * POSE].reshape(b, h, w, self.B, POSE)
        a = torch.sigmoid(p[..., self.B * POSE:])
        for name, layer in (('convcaps1', self.caps1), ('convcaps2', self.caps2), ('class', self.cls)):
            poses, a = layer(poses, a)
            if layers is not None:
                layers[name + '.mu'], layers[name + '.a'] = poses, a
        return a                                                      # the class activations


def spread_loss(a, labels, margin):
    at = a.gather(1, labels.view(-1, 1))
    r = F.relu(margin - (at - a))
    r = r.scatter(1, labels.view(-1, 1), 0.0)                         # i != t
    return (r * r).sum(1).mean()


def check_against_reference():
    """A tiny net (A=3, B=2, C=3, D=2, 2 images) in float64 against tests/convcaps_reference.py,
    the numpy reference viewgap's own test checks convcaps against (given the same weights in
    viewgap's layouts): every capsule layer's mu and a must agree to 1e-9. Returns the worst
    difference per layer. Always at a 32 x 32 input and 5 classes, whatever --image and --classes say."""
    global IMAGE, N_CLASSES
    import importlib.util
    import os
    import tempfile
    import numpy as np
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location('ref', os.path.join(here, '..', 'tests', 'convcaps_reference.py'))
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    torch.set_default_dtype(torch.float64)
    run_sizes = IMAGE, N_CLASSES
    IMAGE, N_CLASSES = 32, 5
    try:
        torch.manual_seed(5)
        net = ConvCapsNet(3, 2, 3, 2)
        with torch.no_grad():
            for name, p in net.named_parameters():  # betas away from 0, so the check reads them
                if 'beta' in name:
                    p.copy_(torch.tensor([0.3 * (k % 3) - 0.2 for k in range(p.numel())]))
        x = torch.randn(2, 1, IMAGE, IMAGE)
        got = {}
        with torch.no_grad():
            net(x, got)
        with tempfile.TemporaryDirectory() as d:
            def write(name, t):
                t.detach().to(torch.float32).numpy().astype('<f4').tofile(os.path.join(d, name + '.f32'))
            # viewgap's layouts: the primary layer's weight is A x row (torch's Linear: row x A).
            write('images', x)
            write('conv1.weight', net.conv1.weight)
            write('conv1.bias', net.conv1.bias)
            write('primary.weight', net.primary.weight.t())
            write('primary.bias', net.primary.bias)
            for vg, layer in (('convcaps1', net.caps1), ('convcaps2', net.caps2), ('class', net.cls)):
                for part in ('W', 'beta_a', 'beta_v'):
                    write(vg + '.' + part, getattr(layer, part))
            coord = net.cls.coord.view(-1, POSE)
            side = int(math.isqrt(coord.shape[0]))
            coords = coord[:, 3].view(side, side)[:, 0].tolist() + coord[:, 7].view(side, side)[0].tolist()
            meta = {'batch': 2, 'in_channels': 1, 'image_side': IMAGE, 'A': 3, 'B': 2, 'C': 3, 'D': 2, 'K': K,
                    'classes': N_CLASSES, 'iters': ITERS, 'lambda': LAMBDA_FINAL, 'lambda_schedule': True,
                    'sigma2_min': SIGMA2_MIN, 'norm': 'paper', 'coord_place': 'paper', 'coords': coords}
            # The reference reads the weights as float32 files: give the net the same rounded values.
            with torch.no_grad():
                for p in net.parameters():
                    p.copy_(p.to(torch.float32).to(torch.float64))
                x = x.to(torch.float32).to(torch.float64)
                got = {}
                net(x, got)
            want = ref.forward(d, meta, np.float64)
    finally:
        torch.set_default_dtype(torch.float32)
        IMAGE, N_CLASSES = run_sizes
    worst = {}
    for name, w in want.items():
        g = got[name].numpy().reshape(w.shape)
        worst[name] = float(np.abs(g - w).max())
        assert worst[name] <= 1e-9 * max(1.0, float(np.abs(w).max())), (name, worst[name])
    return worst


def fail(message):
    one_line_args.fail(TOOL, message)


def main():
    global IMAGE, N_CLASSES
    ap = one_line_args.parser(TOOL, description=__doc__.split('\n')[0])
    for n, d in (('A', 64), ('B', 8), ('C', 16), ('D', 16)):
        ap.add_argument('--' + n, type=int, default=d)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--steps', type=int, default=3, help='timed training steps (and forward passes)')
    ap.add_argument('--warmup', type=int, default=1)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--image', type=int, default=32, metavar='SIDE',
                    help='the images\' side in pixels, one channel (Fashion-MNIST: 28); at least 17')
    ap.add_argument('--classes', type=int, default=5, metavar='N',
                    help='class capsules (Fashion-MNIST: 10); at least 2')
    ap.add_argument('--check', action='store_true',
                    help='also check that a few steps on one fixed batch reduce its loss, and a tiny net '
                         'against tests/convcaps_reference.py (needs numpy)')
    args = ap.parse_args()
    if min(args.A, args.B, args.C, args.D, args.batch, args.steps) < 1 or args.warmup < 0:
        fail('sizes, --batch and --steps must be >= 1, --warmup >= 0')
    if min(grid_sides(args.image)) < 1:
        fail(f'--image {args.image}: too small for the net (conv1 5x5/2, then {K}x{K}/2 '
             f'and {K}x{K}/1 leave grids of {" -> ".join(map(str, grid_sides(args.image)))}); at least {MIN_IMAGE}')
    if args.classes < 2:
        fail(f'--classes {args.classes}: expected at least 2')
    IMAGE, N_CLASSES = args.image, args.classes
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    net = ConvCapsNet(args.A, args.B, args.C, args.D)
    n_params = sum(p.numel() for p in net.parameters())
    # viewgap's ConvCapsConfig::param_count() for the same sizes (one input channel, K = 3, N_CLASSES
    # classes; the image side changes no weight's shape).
    A, B, C, D = args.A, args.B, args.C, args.D
    expected = (A * 25 + A) + (A * B * 17 + B * 17) + (9 * B * C * 16 + 2 * C) + (9 * C * D * 16 + 2 * D) + \
        (D * N_CLASSES * 16 + 2 * N_CLASSES)
    assert n_params == expected, (n_params, expected)
    if (A, B, C, D) == (64, 8, 16, 16) and N_CLASSES in (5, 10):  # 10: viewgap's on --data fashion-mnist
        assert n_params == {5: 67154, 10: 68444}[N_CLASSES], n_params
    if (A, B, C, D) == (32, 32, 32, 32) and N_CLASSES == 5:
        assert n_params == 316394, n_params
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    x = torch.randn(args.batch, 1, IMAGE, IMAGE)
    y = torch.randint(0, N_CLASSES, (args.batch,))

    out = {'model': 'convcaps', 'framework': f'pytorch {torch.__version__}', 'threads': torch.get_num_threads(),
           'A': A, 'B': B, 'C': C, 'D': D, 'batch': args.batch, 'params': n_params, 'data': 'random',
           'image': IMAGE, 'classes': N_CLASSES}
    if args.check:
        out['reference_max_abs_diff'] = check_against_reference()
        # One fixed batch, margin fixed at 0.2: the loss after a few Adam steps must be below the first.
        losses = []
        for _ in range(4):
            opt.zero_grad(set_to_none=True)
            loss = spread_loss(net(x), y, 0.2)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out['check_losses'] = losses
        assert losses[-1] < losses[0], losses

    def train_step(i, total):
        opt.zero_grad(set_to_none=True)
        loss = spread_loss(net(x), y, 0.2 + 0.7 * i / max(1, total - 1))
        loss.backward()
        opt.step()
        return loss.item()

    out.update(time_training('pytorch_convcaps.py', args.batch, args.warmup, args.steps, train_step, lambda: net(x)))
    print(json.dumps(out))


if __name__ == '__main__':
    main()
