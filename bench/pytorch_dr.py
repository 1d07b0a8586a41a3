#!/usr/bin/env python3
"""viewgap's `dr` (models/dr.{h,cpp}, kernels/dr_routing.h) written again in PyTorch, trained on
Fashion-MNIST: an independent implementation to set beside viewgap's own `dr` result (test accuracy
0.903 after 30 epochs, Adam 1e-3, batch 32, no augmentation; results/fashion_mnist/dr), for issue 52's
"far anchor" (the published CapsNet on Fashion-MNIST: 0.936, 8M parameters, shift + flip augmentation).
--shift and --flip give that augmentation, so what it is worth can be measured.

The network at 28 x 28 x 1 and 10 classes, as viewgap builds it (sizes per image):
  conv1        5x5/2, pad 2 each side, 1 -> 16 channels, ReLU           16 x 14 x 14 = 3136
  primary      dense 3136 -> 16 x 8, squash per capsule                  u      16 x 8
  predictions  u_hat_{j|i} = W_ij u_i  (W_ij 16 x 8 per pair)            u_hat  16 x 10 x 16
  routing      b = 0; 3 times: c = softmax_j(b), s_j = sum_i c_ij u_hat_{j|i}, v_j = squash(s_j),
               then (but the last time) b += u_hat_{j|i} . v_j; gradient through every iteration
               (viewgap's --dr-grad full: the softmaxes and the agreements, autograd here)
  scores       lengths |v_j| = |s_j|^2 / (1 + |s_j|^2), from s as viewgap computes them   10
  decoder      v masked by the true class (training only): FC 160 -> 256 ReLU -> 512 ReLU -> 784 sigmoid
squash(s) = s |s| / (1 + |s|^2). Loss per batch: the margin loss (models/loss.cpp)
sum_k T_k max(0, 0.9 - |v_k|)^2 + 0.5 (1 - T_k) max(0, |v_k| - 0.1)^2, mean over the batch, plus
0.0005 x the sum of squared pixel errors of the reconstruction, mean over the batch (viewgap's
--recon-weight). Initialisation (DrNet::init): He-normal (std sqrt(2 / fan_in)) conv1, primary,
fc1 and fc2 weights, N(0, 1 / 512) fc3 weights (the sigmoid layer), W_ij ~ N(0, 0.5^2)
(--dr-init-std), zero biases. Adam lr 1e-3 (viewgap's --model-lr dr=1e-3), betas 0.9, 0.999,
eps 1e-8, constant rate; batch 32, the training set reshuffled each epoch (1,875 steps of 32);
pixels / 255, nothing else. Evaluation: the 10,000 test images, decoder off, prediction = the
longest class capsule. Parameters: 416 + 401,536 + 20,480 + 574,992 = 997,424, viewgap's n_params
(results/fashion_mnist/dr/cells.csv), asserted.

Where it cannot match viewgap exactly:
  - Random numbers: viewgap draws its weights and its epochs' orders from its own counter-based streams
    (core/rng.h); here torch's generator (seeded by --seed) does. The same distributions, not the
    same draws, so no run here is the same run as a viewgap seed: compare distributions over seeds.
  - conv1's output is flattened channel-major (PyTorch's NCHW) where viewgap's is NHWC: a fixed
    permutation of the primary layer's input rows, which i.i.d. initial weights make immaterial.
  - The squash's norm is sqrt(max(|s|^2, 1e-30)) so its gradient stays finite at s = 0, where
    viewgap's kernel returns 0 by hand; the two differ only for |s| < 1e-15.
  - Float arithmetic: oneDNN and viewgap's SIMD kernels against PyTorch's, so results differ in
    rounding from the first step and diverge over training (as two viewgap ISAs' do).
  - The augmentation (--shift, --flip) is not in viewgap's `dr` runs (it has none); the
    reconstruction target is the augmented image, the network's input, as in Sabour et al.

Augmentation (training images only): --shift N translates each image by dx, dy drawn uniformly from
{-N, ..., N} with zero fill (Sabour et al. 2017: "shifted by up to 2 pixels in each direction with
zero padding": --shift 2); --flip mirrors each image left-right with probability 1/2 (the
zalandoresearch/fashion-mnist benchmark's CapsNet entry: 0.936 with random shift and flip).

Output: one JSON line per epoch, flushed, {"epoch", "test_accuracy", "train_loss" (the epoch's mean
per image of the whole loss, margin + reconstruction, as viewgap's epoch loss), "train_recon_loss",
"steps", "seconds" (the epoch's training and evaluation)}, and a last line {"final": true,
"best_test_accuracy", "best_epoch", "last_test_accuracy", "params", "seconds", "seconds_per_step",
the flags, torch's version and threads}.

Usage: /usr/bin/python3 bench/pytorch_dr.py [--epochs 30] [--lr 1e-3] [--batch 32] [--seed 0]
           [--threads 1] [--iters 3] [--shift N] [--flip] [--max-steps S] [--data DIR]
--data: a directory with train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte, each plain or gzipped (.gz); default /usr/share/datasets/fashion-mnist
(Debian's dataset-fashion-mnist). --max-steps ends training after S steps in all (the epoch it falls
in is evaluated then), for smoke tests. --threads N also sets OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and
MKL_NUM_THREADS before numpy and torch load (Debian's torch multiplies in OpenBLAS, whose thread pool
torch.set_num_threads does not reach). Bad arguments: exit 2 with one line naming the flag.
Speed: bench/README.md.
"""
import gzip
import json
import math
import os
import re
import sys
import time

import one_line_args

TOOL = 'pytorch_dr.py'


def _pin_blas_threads(argv):
    """--threads for OpenBLAS and OpenMP too, before numpy or torch loads them: Debian's torch does its
    matmuls in OpenBLAS (pthreads build), whose own pool torch.set_num_threads does not reach; left at
    its default it adds a thread per core, which on a loaded machine made steps 1.4-4x slower."""
    n = '1'
    for k, a in enumerate(argv):
        if a == '--threads' and k + 1 < len(argv):
            n = argv[k + 1]
        elif a.startswith('--threads='):
            n = a.split('=', 1)[1]
    if re.fullmatch(r'[1-9][0-9]{0,3}', n):  # anything else: main() refuses it
        for var in ('OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
            os.environ[var] = n


if __name__ == '__main__':
    _pin_blas_threads(sys.argv[1:])

import numpy as np  # noqa: E402 (after the thread count is pinned)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

SIDE = 28
CLASSES = 10
CONV_CHANNELS = 16
N_PRIMARY = 16
IN_DIM = 8      # primary capsule dimension (kDrInDim)
OUT_DIM = 16    # class capsule dimension (kDrOutDim)
HIDDEN1, HIDDEN2 = 256, 512
RECON_WEIGHT = 0.0005
ROUTE_INIT_STD = 0.5
M_POS, M_NEG, M_LAMBDA = 0.9, 0.1, 0.5
VIEWGAP_PARAMS = 997424  # results/fashion_mnist/dr/cells.csv, n_params at 28 x 28 x 1, 10 classes
DEFAULT_DATA = '/usr/share/datasets/fashion-mnist'


def expected_params():
    """DrNet::param_count at 28 x 28 x 1, 10 classes, with the decoder."""
    conv_out = CONV_CHANNELS * ((SIDE + 4 - 5) // 2 + 1) ** 2
    prim = N_PRIMARY * IN_DIM
    d0 = CLASSES * OUT_DIM
    return ((25 * CONV_CHANNELS + CONV_CHANNELS) + (conv_out * prim + prim) + N_PRIMARY * CLASSES * IN_DIM * OUT_DIM
            + (d0 * HIDDEN1 + HIDDEN1) + (HIDDEN1 * HIDDEN2 + HIDDEN2) + (HIDDEN2 * SIDE * SIDE + SIDE * SIDE))


def squash_with_norm2(s):
    """squash(s) = s |s| / (1 + |s|^2) over the last axis, and |s|^2."""
    n2 = (s * s).sum(-1, keepdim=True)
    return s * (torch.sqrt(n2.clamp_min(1e-30)) / (1 + n2)), n2


class DrNet(torch.nn.Module):
    def __init__(self, iters):
        super().__init__()
        self.iters = iters
        self.conv1 = torch.nn.Conv2d(1, CONV_CHANNELS, 5, stride=2, padding=2)
        conv_out = CONV_CHANNELS * ((SIDE + 4 - 5) // 2 + 1) ** 2
        self.primary = torch.nn.Linear(conv_out, N_PRIMARY * IN_DIM)
        # W[i, j] is the 8 x 16 map u_i -> u_hat_{j|i} (viewgap stores it k-major the same way).
        self.W = torch.nn.Parameter(torch.empty(N_PRIMARY, CLASSES, IN_DIM, OUT_DIM))
        self.fc1 = torch.nn.Linear(CLASSES * OUT_DIM, HIDDEN1)
        self.fc2 = torch.nn.Linear(HIDDEN1, HIDDEN2)
        self.fc3 = torch.nn.Linear(HIDDEN2, SIDE * SIDE)
        with torch.no_grad():  # DrNet::init
            for layer in (self.conv1, self.primary, self.fc1, self.fc2):
                layer.weight.normal_(0, math.sqrt(2 / layer.weight[0].numel()))
            self.fc3.weight.normal_(0, math.sqrt(1 / HIDDEN2))
            self.W.normal_(0, ROUTE_INIT_STD)
            for layer in (self.conv1, self.primary, self.fc1, self.fc2, self.fc3):
                layer.bias.zero_()

    def capsules(self, x):
        """Class capsules v (B x 10 x 16) and their lengths (B x 10)."""
        B = x.shape[0]
        h = F.relu(self.conv1(x)).flatten(1)
        u, _ = squash_with_norm2(self.primary(h).view(B, N_PRIMARY, IN_DIM))
        uhat = torch.einsum('bik,ijkd->bijd', u, self.W)  # B x I x J x 16
        b = torch.zeros(B, N_PRIMARY, CLASSES, dtype=x.dtype)
        for r in range(self.iters):
            c = torch.softmax(b, dim=2)
            s = torch.einsum('bij,bijd->bjd', c, uhat)
            v, n2 = squash_with_norm2(s)
            if r + 1 < self.iters:
                b = b + torch.einsum('bijd,bjd->bij', uhat, v)
        return v, (n2 / (1 + n2)).squeeze(-1)

    def reconstruct(self, v, labels):
        mask = F.one_hot(labels, CLASSES).to(v.dtype).unsqueeze(-1)
        h = F.relu(self.fc1((v * mask).flatten(1)))
        h = F.relu(self.fc2(h))
        return torch.sigmoid(self.fc3(h))


def margin_loss(lengths, labels):
    t = F.one_hot(labels, CLASSES).to(lengths.dtype)
    per = t * F.relu(M_POS - lengths) ** 2 + M_LAMBDA * (1 - t) * F.relu(lengths - M_NEG) ** 2
    return per.sum(1).mean()


# ---- data ----

def read_idx(path, want_rank):
    """An IDX file (plain or gzipped, by gzip's magic) as a numpy uint8 array; ValueError naming the problem."""
    with open(path, 'rb') as f:
        raw = f.read()
    if raw[:2] == b'\x1f\x8b':
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08 or raw[3] != want_rank:
        raise ValueError(f'{path}: not an IDX file of unsigned bytes of rank {want_rank}')
    dims = [int.from_bytes(raw[4 + 4 * k:8 + 4 * k], 'big') for k in range(want_rank)]
    header = 4 + 4 * want_rank
    if len(raw) != header + int(np.prod(dims)):
        raise ValueError(f'{path}: {len(raw) - header} bytes of data for dimensions {dims}')
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def find_file(directory, stem):
    for name in (stem, stem + '.gz'):
        p = os.path.join(directory, name)
        if os.path.isfile(p):
            return p
    raise FileNotFoundError(f'no {stem}[.gz] in {directory}')


def load_split(directory, prefix):
    x = read_idx(find_file(directory, f'{prefix}-images-idx3-ubyte'), 3)
    y = read_idx(find_file(directory, f'{prefix}-labels-idx1-ubyte'), 1)
    if x.shape[1:] != (SIDE, SIDE) or x.shape[0] != y.shape[0] or y.max() >= CLASSES:
        raise ValueError(f'{directory}: {prefix} images {x.shape}, labels {y.shape} (max {y.max()}): '
                         f'expected N x {SIDE} x {SIDE} and N labels below {CLASSES}')
    images = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)  # pixels / 255, as viewgap
    return images, torch.from_numpy(y.astype(np.int64))


# ---- augmentation ----

def shift_batch(x, n, gen):
    """Each image translated by dx, dy uniform in {-n, ..., n}, zero fill."""
    B = x.shape[0]
    padded = F.pad(x, (n, n, n, n))
    oy = torch.randint(0, 2 * n + 1, (B,), generator=gen)  # crop offsets: shift = n - offset
    ox = torch.randint(0, 2 * n + 1, (B,), generator=gen)
    ar = torch.arange(SIDE)
    rows = (oy[:, None] + ar)[:, :, None]
    cols = (ox[:, None] + ar)[:, None, :]
    return padded[torch.arange(B)[:, None, None], 0, rows, cols].unsqueeze(1)


def flip_batch(x, gen):
    flip = torch.rand(x.shape[0], generator=gen) < 0.5
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


# ---- training ----

def evaluate(net, images, labels, batch=500):
    net.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, images.shape[0], batch):
            _, lengths = net.capsules(images[start:start + batch])
            correct += int((lengths.argmax(1) == labels[start:start + batch]).sum())
    net.train()
    return correct / images.shape[0]


def fail(message):
    one_line_args.fail(TOOL, message)


def main():
    ap = one_line_args.parser(TOOL, description=__doc__.split('\n')[0], allow_abbrev=False)  # --threads is read before parsing
    ap.add_argument('--epochs', type=int, default=30)
    ap.add_argument('--lr', type=float, default=1e-3)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--threads', type=int, default=1, help='torch.set_num_threads')
    ap.add_argument('--iters', type=int, default=3, help='routing iterations')
    ap.add_argument('--shift', type=int, default=0, metavar='N',
                    help='random translation of training images by up to N pixels in x and y (0: none)')
    ap.add_argument('--flip', action='store_true', help='random left-right flip of training images')
    ap.add_argument('--max-steps', type=int, default=None, metavar='S', help='stop after S training steps in all')
    ap.add_argument('--data', default=DEFAULT_DATA, metavar='DIR')
    args = ap.parse_args()
    if args.epochs < 1:
        fail(f'--epochs {args.epochs}: expected at least 1')
    if not (math.isfinite(args.lr) and args.lr > 0):
        fail(f'--lr {args.lr}: expected a finite rate > 0')
    if args.batch < 1:
        fail(f'--batch {args.batch}: expected at least 1')
    if args.seed < 0:
        fail(f'--seed {args.seed}: expected at least 0')
    if args.threads < 1:
        fail(f'--threads {args.threads}: expected at least 1')
    if not 1 <= args.iters <= 100:
        fail(f'--iters {args.iters}: expected 1 to 100 (viewgap\'s --dr-iters range)')
    if not 0 <= args.shift < SIDE:
        fail(f'--shift {args.shift}: expected 0 to {SIDE - 1}')
    if args.max_steps is not None and args.max_steps < 1:
        fail(f'--max-steps {args.max_steps}: expected at least 1')
    try:
        train_x, train_y = load_split(args.data, 'train')
        test_x, test_y = load_split(args.data, 't10k')
    except (OSError, ValueError) as e:
        fail(f'--data {args.data}: {e}')

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    net = DrNet(args.iters)
    n_params = sum(p.numel() for p in net.parameters())
    assert n_params == expected_params() == VIEWGAP_PARAMS, (n_params, expected_params(), VIEWGAP_PARAMS)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
    # The epochs' orders and the augmentation from streams of their own, so --shift/--flip leave the order alone.
    order_gen = torch.Generator().manual_seed(args.seed * 2 + 1)
    aug_gen = torch.Generator().manual_seed(args.seed * 2 + 2)

    N = train_x.shape[0]
    step, best, best_epoch, acc = 0, -1.0, 0, float('nan')
    t_start = time.perf_counter()
    train_s = 0.0
    net.train()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        order = torch.randperm(N, generator=order_gen)
        loss_sum = recon_sum = 0.0
        seen = 0
        for start in range(0, N, args.batch):
            if args.max_steps is not None and step >= args.max_steps:
                break
            idx = order[start:start + args.batch]
            x, y = train_x[idx], train_y[idx]
            if args.shift:
                x = shift_batch(x, args.shift, aug_gen)
            if args.flip:
                x = flip_batch(x, aug_gen)
            B = x.shape[0]
            v, lengths = net.capsules(x)
            rec = net.reconstruct(v, y)
            recon = RECON_WEIGHT * ((rec - x.flatten(1)) ** 2).sum() / B
            loss = margin_loss(lengths, y) + recon
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            lv = loss.item()
            if not math.isfinite(lv):
                print(f'pytorch_dr.py: non-finite loss at epoch {epoch}, step {step + 1}', file=sys.stderr)
                sys.exit(1)
            loss_sum += lv * B
            recon_sum += recon.item() * B
            seen += B
            step += 1
        train_s += time.perf_counter() - t0
        if seen == 0:
            break
        acc = evaluate(net, test_x, test_y)
        if acc > best:
            best, best_epoch = acc, epoch
        print(json.dumps({'epoch': epoch, 'test_accuracy': acc, 'train_loss': loss_sum / seen,
                          'train_recon_loss': recon_sum / seen, 'steps': step,
                          'seconds': round(time.perf_counter() - t0, 3)}), flush=True)
        if args.max_steps is not None and step >= args.max_steps:
            break

    print(json.dumps({'final': True, 'best_test_accuracy': best, 'best_epoch': best_epoch, 'last_test_accuracy': acc,
                      'params': n_params, 'steps': step, 'seconds': round(time.perf_counter() - t_start, 3),
                      'seconds_per_step': round(train_s / max(step, 1), 6), 'epochs': args.epochs, 'lr': args.lr,
                      'batch': args.batch, 'seed': args.seed, 'iters': args.iters, 'shift': args.shift,
                      'flip': args.flip, 'max_steps': args.max_steps, 'framework': f'pytorch {torch.__version__}',
                      'threads': torch.get_num_threads()}), flush=True)


if __name__ == '__main__':
    main()
