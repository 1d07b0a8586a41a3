#!/usr/bin/env python3
"""viewgap's `cnn-paper` (models/cnn.{h,cpp}, docs/models.md) written again in PyTorch, for timing
side by side (issue 52 section 7; bench/compare_fashion.sh runs both).

The same network, as a PyTorch user would write it (nn.Conv2d, nn.MaxPool2d, nn.Linear, nn.Dropout):
  conv1    5x5/1 SAME (pad 2), C -> 32, ReLU, max-pool 2x2/2     side/2 x side/2 x 32
  conv2    5x5/1 SAME (pad 2), 32 -> 64, ReLU, max-pool 2x2/2    side/4 x side/4 x 64
  hidden   dense -> 1024, ReLU, inverted dropout 0.5 in training (off at evaluation)
  out      dense 1024 -> classes logits, softmax cross-entropy
He-normal weights (std sqrt(2 / fan_in)), zero biases, Adam lr 2e-3 (betas 0.9, 0.999, eps 1e-8, as
viewgap's), batch 32. float32, one thread. The images are random (N(0, 1), random labels): this
measures speed only. (viewgap draws its dropout masks from its own counter-based generator and
PyTorch from its own: the same rate, not the same bits.)

Parameters: (25 C 32 + 32) + (25 32 64 + 64) + ((side/4)^2 64 1024 + 1024) + (1024 classes + classes),
viewgap's count for the same shape (asserted): 4,252,549 at 32 x 32 x 1 and 5 classes (the rendered
data), 3,274,634 at 28 x 28 x 1 and 10 classes (Fashion-MNIST).

Prints one JSON line: training and forward-only (eval mode, torch.no_grad) images/s, medians over
the timed steps after warm-up, the parameter count, the image side and classes, and peak RSS.

Usage: /usr/bin/python3 bench/pytorch_cnn_paper.py [--image 32] [--classes 5] [--channels 1]
           [--batch 32] [--steps 20] [--warmup 3] [--seed 0] [--check]
Fashion-MNIST: --image 28 --classes 10. The side must be at least 4 (two 2x2 pools).
--check also checks that eight Adam steps on one fixed batch (dropout on) lower its loss (at He init
and lr 2e-3 it jumps on the second step and falls below the first by the fifth).
Bad arguments: exit 2 with one line.
"""
import json
import math

import torch
import torch.nn.functional as F

import one_line_args
from torch_timing import time_training

TOOL = 'pytorch_cnn_paper.py'

HIDDEN = 1024
DROPOUT = 0.5


def expected_params(channels, side, classes):
    """viewgap's parameter count of cnn-paper for an input of channels x side x side."""
    flat = (side // 2 // 2) ** 2 * 64
    return (25 * channels * 32 + 32) + (25 * 32 * 64 + 64) + (flat * HIDDEN + HIDDEN) + (HIDDEN * classes + classes)


class PaperCnn(torch.nn.Module):
    def __init__(self, channels, side, classes):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.pool = torch.nn.MaxPool2d(2, 2)
        self.hidden = torch.nn.Linear((side // 2 // 2) ** 2 * 64, HIDDEN)
        self.drop = torch.nn.Dropout(DROPOUT)  # inverted: kept units scaled by 1 / (1 - rate)
        self.out = torch.nn.Linear(HIDDEN, classes)
        # viewgap's init: He-normal weights over each layer's fan-in, zero biases.
        with torch.no_grad():
            for layer in (self.conv1, self.conv2, self.hidden, self.out):
                fan_in = layer.weight[0].numel()
                layer.weight.normal_(0, math.sqrt(2 / fan_in))
                layer.bias.zero_()

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = self.drop(F.relu(self.hidden(x.flatten(1))))
        return self.out(x)


def fail(message):
    one_line_args.fail(TOOL, message)


def main():
    ap = one_line_args.parser(TOOL, description=__doc__.split('\n')[0])
    ap.add_argument('--image', type=int, default=32, metavar='SIDE',
                    help='the images\' side in pixels (Fashion-MNIST: 28); at least 4')
    ap.add_argument('--classes', type=int, default=5, metavar='N', help='classes (Fashion-MNIST: 10); at least 2')
    ap.add_argument('--channels', type=int, default=1, help='input channels (smallNORB: 2)')
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--steps', type=int, default=20, help='timed training steps (and forward passes)')
    ap.add_argument('--warmup', type=int, default=3)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--check', action='store_true',
                    help='also check that a few Adam steps on one fixed batch reduce its loss')
    args = ap.parse_args()
    if min(args.channels, args.batch, args.steps) < 1 or args.warmup < 0:
        fail('--channels, --batch and --steps must be >= 1, --warmup >= 0')
    if args.image < 4:
        fail(f'--image {args.image}: too small for the net (two 2x2 max-pools need a side of at least 4)')
    if args.classes < 2:
        fail(f'--classes {args.classes}: expected at least 2')
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    net = PaperCnn(args.channels, args.image, args.classes)
    n_params = sum(p.numel() for p in net.parameters())
    expected = expected_params(args.channels, args.image, args.classes)
    assert n_params == expected, (n_params, expected)
    known = {(1, 32, 5): 4252549, (2, 32, 5): 4253349, (1, 28, 10): 3274634}  # docs/models.md; fashion-mnist
    assert n_params == known.get((args.channels, args.image, args.classes), n_params), n_params
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    x = torch.randn(args.batch, args.channels, args.image, args.image)
    y = torch.randint(0, args.classes, (args.batch,))

    out = {'model': 'cnn-paper', 'framework': f'pytorch {torch.__version__}', 'threads': torch.get_num_threads(),
           'channels': args.channels, 'batch': args.batch, 'params': n_params, 'data': 'random',
           'image': args.image, 'classes': args.classes}

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    net.train()
    if args.check:
        losses = [train_step() for _ in range(8)]
        out['check_losses'] = losses
        assert losses[-1] < losses[0], losses

    def forward():
        net.eval()
        net(x)

    out.update(time_training('pytorch_cnn_paper.py', args.batch, args.warmup, args.steps,
                             lambda i, total: train_step(), forward))
    print(json.dumps(out))


if __name__ == '__main__':
    main()
