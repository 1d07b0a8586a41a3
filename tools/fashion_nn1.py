#!/usr/bin/env python3
"""Raw-pixel 1-nearest-neighbour on an IDX set, independently of viewgap: numpy
only, Euclidean distance on the bytes, the first training image among equals.

The distances are exact: pixels are integers 0..255, so every square, product
and sum of 784 of them is an integer below 2^53, which float64 holds exactly
(||q - t||^2 = ||q||^2 + ||t||^2 - 2 q.t, computed with BLAS). Ties are
therefore found exactly; they are counted and broken towards the lower
training index, as numpy's argmin does.

Usage: python3 tools/fashion_nn1.py [DIR] [--out FILE]
  DIR: the four files (gzipped or not); /usr/share/datasets/fashion-mnist by default.
  Writes JSON: correct, accuracy, queries whose nearest distance is shared.
"""
import argparse
import gzip
import json
import os
import sys

import numpy as np


def read_idx(path, rank):
    for p in (path, path + ".gz"):
        if os.path.isfile(p):
            raw = (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
            break
    else:
        sys.exit(f"fashion_nn1: {path}: not found (nor {path}.gz)")
    if raw[:2] != b"\0\0" or raw[2] != 8 or raw[3] != rank:
        sys.exit(f"fashion_nn1: {path}: not an unsigned-byte IDX file of rank {rank}")
    dims = [int.from_bytes(raw[4 + 4 * k: 8 + 4 * k], "big") for k in range(rank)]
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * rank)
    if data.size != int(np.prod(dims)):
        sys.exit(f"fashion_nn1: {path}: {data.size} bytes of data, the header says {dims}")
    return data.reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out")
    a = ap.parse_args()
    d = a.dir.rstrip("/") + "/"
    xtr = read_idx(d + "train-images-idx3-ubyte", 3).reshape(-1, 28 * 28).astype(np.float64)
    ytr = read_idx(d + "train-labels-idx1-ubyte", 1)
    xte = read_idx(d + "t10k-images-idx3-ubyte", 3).reshape(-1, 28 * 28).astype(np.float64)
    yte = read_idx(d + "t10k-labels-idx1-ubyte", 1)
    ntr = (xtr * xtr).sum(1)
    correct = ties = 0
    for s in range(0, len(xte), 500):
        q = xte[s:s + 500]
        dist = ntr[None, :] - 2 * (q @ xtr.T)  # + ||q||^2, the same for every training image
        best = dist.min(1)
        ties += int(((dist == best[:, None]).sum(1) > 1).sum())
        correct += int((ytr[dist.argmin(1)] == yte[s:s + 500]).sum())
    out = {"source": a.dir, "test_images": int(len(xte)), "correct": correct,
           "accuracy": correct / len(xte), "queries_with_tied_nearest": ties}
    text = json.dumps(out, indent=1)
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, a.out)
    print(text)


if __name__ == "__main__":
    main()
