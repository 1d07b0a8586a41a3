"""The timing loop the PyTorch side-by-side scripts share (pytorch_convcaps.py,
pytorch_cnn_paper.py): `warmup + steps` training steps, then as many forward-only
passes without gradients, the warm-up ones untimed; medians as images/s, and the
process's peak RSS."""
import math
import resource
import statistics
import sys
import time

import torch


def time_training(tool, batch, warmup, steps, train_step, forward):
    """train_step(i, total) -> the step's loss (a float); forward() -> anything.
    Exits 1 with one line on a non-finite loss. Returns the JSON fields of a run."""
    total = warmup + steps
    train_s, loss = [], float('nan')
    for i in range(total):
        t0 = time.perf_counter()
        loss = train_step(i, total)
        dt = time.perf_counter() - t0
        if not math.isfinite(loss):
            print(f'{tool}: non-finite loss at step {i}', file=sys.stderr)
            sys.exit(1)
        if i >= warmup:
            train_s.append(dt)
    fwd_s = []
    with torch.no_grad():
        for i in range(total):
            t0 = time.perf_counter()
            forward()
            if i >= warmup:
                fwd_s.append(time.perf_counter() - t0)
    return {
        'train_step_s': [round(t, 5) for t in train_s],
        'forward_s': [round(t, 5) for t in fwd_s],
        'train_images_per_s': batch / statistics.median(train_s),
        'forward_images_per_s': batch / statistics.median(fwd_s),
        'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        'last_loss': loss,
    }
