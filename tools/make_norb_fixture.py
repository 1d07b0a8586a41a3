#!/usr/bin/python3
"""Write a smallNORB-format fixture: the six NYU files with synthetic content.

The format (NYU "binary matrix", little-endian; see data/norb.h for sources):
int32 magic (0x1E3D4C55 uint8 / 0x1E3D4C54 int32), int32 ndim, max(3, ndim)
int32 dims (unused ones 1), then the data, last index fastest.

Content is a pure function of (split, record i), so a reader can check every byte:
  combo j = (i * 7919) % 24300 (a permutation for the full 24,300, shuffled like
  the NYU files), decoded as lighting = j % 6, azimuth = 2 * (j // 6 % 18),
  elevation = j // 108 % 9, instance = INSTANCES[split][j // 972 % 5], category = j // 4860;
  pixel (camera c, row r, column x) = (31 i + 101 c + 3 r + 5 x) mod 256.
Training instances are 4, 6, 7, 8, 9 and testing 0, 1, 2, 3, 5 (the NYU names).

  tools/make_norb_fixture.py --out DIR [--n 30]   small fixture
  tools/make_norb_fixture.py --out DIR --full     24,300 pairs per split (~900 MB)
"""
import argparse
import os
import struct
import sys

import numpy as np

MAGIC_BYTE = 0x1E3D4C55
MAGIC_INT = 0x1E3D4C54
FULL = 24300
STEM = {
    "training": "smallnorb-5x46789x9x18x6x2x96x96-training-",
    "testing": "smallnorb-5x01235x9x18x6x2x96x96-testing-",
}
INSTANCES = {"training": [4, 6, 7, 8, 9], "testing": [0, 1, 2, 3, 5]}


def header(magic, dims):
    padded = list(dims) + [1] * max(0, 3 - len(dims))
    return struct.pack("<ii", magic, len(dims)) + struct.pack("<%di" % len(padded), *padded)


def records(split, n):
    j = (np.arange(n, dtype=np.int64) * 7919) % FULL
    info = np.stack([np.array(INSTANCES[split])[j // 972 % 5], j // 108 % 9, 2 * (j // 6 % 18), j % 6], axis=1)
    return (j // 4860).astype("<i4"), info.astype("<i4")


def write_split(out, split, n, chunk=128):
    base = os.path.join(out, STEM[split])
    cat, info = records(split, n)
    with open(base + "cat.mat", "wb") as f:
        f.write(header(MAGIC_INT, [n]) + cat.tobytes())
    with open(base + "info.mat", "wb") as f:
        f.write(header(MAGIC_INT, [n, 4]) + info.tobytes())
    c, r, x = np.meshgrid(np.arange(2), np.arange(96), np.arange(96), indexing="ij")
    pattern = (101 * c + 3 * r + 5 * x).astype(np.int64)
    with open(base + "dat.mat", "wb") as f:
        f.write(header(MAGIC_BYTE, [n, 2, 96, 96]))
        for start in range(0, n, chunk):  # streamed: memory stays ~chunk x 18 KB
            i = np.arange(start, min(n, start + chunk), dtype=np.int64)
            f.write(((31 * i[:, None, None, None] + pattern[None]) % 256).astype(np.uint8).tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the six files (created)")
    p.add_argument("--n", type=int, default=30, help="pairs per split (default 30)")
    p.add_argument("--full", action="store_true", help="24,300 pairs per split, the real size")
    a = p.parse_args()
    n = FULL if a.full else a.n
    if not 1 <= n <= FULL:
        sys.exit("make_norb_fixture.py: error: --n %d outside 1..%d" % (n, FULL))
    os.makedirs(a.out, exist_ok=True)
    for split in ("training", "testing"):
        write_split(a.out, split, n)


if __name__ == "__main__":
    main()
