"""Figures of a smallNORB-format directory (smallNORB's own files, or `viewgap export-norb`'s,
e.g. --shapes toys): the toys of every category, each toy around the circle, and the six
lightings, like the figures people know from smallNORB (LeCun, Huang & Bottou 2004)."""
import os

import numpy as np

from .files import InputError, make_out, regular_input, save
from .style import plt

# The reader's rules (data/norb.h, data/norb.cpp): a file viewgap would refuse is refused
# here too, with its reason, instead of being drawn. tests/test_plots.py checks these
# numbers against data/norb.h.
MAGIC_BYTE, MAGIC_INT = 0x1E3D4C55, 0x1E3D4C54
CAMERAS, SIDE, INFO_COLS = 2, 96, 4
CLASSES = ["animal", "human", "plane", "truck", "car"]
INSTANCES, ELEVATIONS, AZIMUTH_MAX, LIGHTINGS = 10, 9, 34, 6
FILES = {"training": "smallnorb-5x46789x9x18x6x2x96x96-training-{}.mat",
         "testing": "smallnorb-5x01235x9x18x6x2x96x96-testing-{}.mat"}


def _matrix(path, kind):
    """The NYU binary matrix at path (kind 'dat', 'cat' or 'info'), checked as the reader
    checks it: magic, rank, dims, N > 0 and the exact size; the data after the header
    (memory-mapped)."""
    regular_input(path)
    size = os.path.getsize(path)
    try:
        head = np.fromfile(path, dtype="<u4", count=min(size, 24) // 4)
    except OSError as e:
        raise InputError(path, f"cannot read ({e})")
    if size < 8:
        raise InputError(path, f"{size} bytes, too short for the 8-byte magic and rank")
    magic = MAGIC_BYTE if kind == "dat" else MAGIC_INT
    if int(head[0]) != magic:
        raise InputError(path, f"magic {int(head[0]):#010x}, expected {magic:#010x} (not a smallNORB {kind} file)")
    ndim = int(head[1].astype("<i4"))
    ranks = {"dat": (4,), "info": (2,), "cat": (1, 2)}[kind]
    if ndim not in ranks:
        raise InputError(path, f"rank {ndim}, expected {ranks[0]}")
    offset = 8 + 4 * max(3, ndim)
    if size < offset:
        raise InputError(path, f"truncated header: {size} bytes, a rank-{ndim} header needs {offset}")
    dims = [int(d) for d in head[2:2 + ndim].astype("<i4")]
    if any(d < 0 for d in dims):
        raise InputError(path, f"a negative dimension ({dims})")
    want = {"dat": {1: CAMERAS, 2: SIDE, 3: SIDE}, "info": {1: INFO_COLS}, "cat": {1: 1}}[kind]
    for k, v in want.items():
        if k < ndim and dims[k] != v:
            raise InputError(path, f"dimension {k} is {dims[k]}, expected {v} (dims {dims})")
    if dims[0] == 0:
        raise InputError(path, "N is 0: no records")
    dtype = np.uint8 if kind == "dat" else np.dtype("<i4")
    expect = offset + int(np.prod(dims)) * np.dtype(dtype).itemsize
    if size != expect:
        raise InputError(path, f"size {size} does not match its dims {dims} ({expect} bytes)")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(dims))


def _check_records(path, labels, info):
    """Every label and info field in the reader's ranges (the first bad record named)."""
    bad = np.flatnonzero((labels < 0) | (labels >= len(CLASSES)))
    if bad.size:
        i = int(bad[0])
        raise InputError(path, f"record {i}: label {int(labels[i])} outside 0..{len(CLASSES) - 1}")
    for col, what, hi in ((0, "instance", INSTANCES - 1), (1, "elevation", ELEVATIONS - 1),
                          (2, "azimuth", AZIMUTH_MAX), (3, "lighting", LIGHTINGS - 1)):
        bad = np.flatnonzero((info[:, col] < 0) | (info[:, col] > hi))
        if bad.size:
            i = int(bad[0])
            raise InputError(path, f"record {i}: {what} {int(info[i, col])} outside 0..{hi}")
    odd = np.flatnonzero(info[:, 2] % 2 != 0)
    if odd.size:
        i = int(odd[0])
        raise InputError(path, f"record {i}: azimuth {int(info[i, 2])} is odd (must be 0, 2, .., {AZIMUTH_MAX})")


def load_split(directory, part):
    """(pairs N x 2 x 96 x 96, labels N, info N x 4) of one split."""
    name = os.path.join(directory, FILES[part])
    pairs = _matrix(name.format("dat"), "dat")
    labels = np.asarray(_matrix(name.format("cat"), "cat")).reshape(-1)
    info = np.asarray(_matrix(name.format("info"), "info")).reshape(-1, 4)
    if len(labels) != len(pairs):
        raise InputError(name.format("cat"), f"N = {len(labels)} but {name.format('dat')} has N = {len(pairs)}")
    if len(info) != len(pairs):
        raise InputError(name.format("info"), f"N = {len(info)} but {name.format('dat')} has N = {len(pairs)}")
    _check_records(name.format("cat"), labels, np.zeros((len(labels), 4), dtype=np.int64))
    _check_records(name.format("info"), np.zeros(len(info), dtype=np.int64), info)
    return pairs, labels, info


def _find(split, cls, instance=None, elevation=None, azimuth=None, lighting=None):
    """Index of the first record matching every given field, or None."""
    pairs, labels, info = split
    ok = labels == cls
    for col, want in enumerate((instance, elevation, azimuth, lighting)):
        if want is not None:
            ok &= info[:, col] == want
    hits = np.flatnonzero(ok)
    return int(hits[0]) if hits.size else None


def _grid(cells, rows, cols, row_labels, col_labels, title, path, written):
    """Draws cells[r][c] (a 96 x 96 uint8 image or None) as one figure."""
    fig, axes = plt.subplots(rows, cols, figsize=(1.1 * cols + 1.0, 1.1 * rows + 0.7), squeeze=False)
    for r in range(rows):
        for c in range(cols):
            ax = axes[r][c]
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if cells[r][c] is not None:
                ax.imshow(cells[r][c], cmap="gray", vmin=0, vmax=255)
            if c == 0:
                ax.set_ylabel(row_labels[r], fontsize=8)
            if r == 0:
                ax.set_title(col_labels[c], fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, path, written)


def cmd_norb(args):
    """The figures of a smallNORB-format directory: (written paths, skipped, why)."""
    train, test = load_split(args.input, "training"), load_split(args.input, "testing")
    src = os.path.basename(os.path.normpath(args.input))
    make_out(args.out)
    written = []
    # Every toy of every category at one view: training toys, then test toys.
    toys = []
    for split, part in ((train, "train"), (test, "test")):
        for inst in sorted(set(split[2][:, 0].tolist())):
            toys.append((split, part, inst))
    cells = []
    for cls in range(5):
        row = []
        for split, _, inst in toys:
            k = _find(split, cls, inst, elevation=2, azimuth=4, lighting=0)
            row.append(None if k is None else split[0][k, 0])
        cells.append(row)
    _grid(cells, 5, len(toys), CLASSES, [f"{p} {i}" for _, p, i in toys],
          f"{src}: every toy (elevation 40°, azimuth 40°, lighting 0, left camera)",
          os.path.join(args.out, "norb_instances.png"), written)
    # Instances x viewpoints: each category's first training and first test toy, around the circle.
    azimuths = list(range(0, 36, 4))
    cells, labels = [], []
    for cls in range(5):
        for split, part in ((train, "train"), (test, "test")):
            inst = int(split[2][split[1] == cls][0, 0]) if np.any(split[1] == cls) else None
            labels.append(f"{CLASSES[cls]} {part} {inst}")
            row = []
            for a in azimuths:
                k = None if inst is None else _find(split, cls, inst, elevation=2, azimuth=a, lighting=0)
                row.append(None if k is None else split[0][k, 0])
            cells.append(row)
    _grid(cells, len(cells), len(azimuths), labels, [f"{10 * a}°" for a in azimuths],
          f"{src}: toys around the circle (elevation 40°, lighting 0)",
          os.path.join(args.out, "norb_viewpoints.png"), written)
    # The lightings, and the stereo pair's second camera beside the first.
    lightings = sorted(set(test[2][:, 3].tolist()))
    cells = []
    for cls in range(5):
        row = []
        for light in lightings:
            k = _find(test, cls, elevation=4, azimuth=6, lighting=light)
            row.append(None if k is None else test[0][k, 0])
        k = _find(test, cls, elevation=4, azimuth=6, lighting=lightings[0])
        row.append(None if k is None else test[0][k, 1])
        cells.append(row)
    _grid(cells, 5, len(lightings) + 1, CLASSES,
          [f"lighting {l}" for l in lightings] + [f"lighting {lightings[0]}, right camera"],
          f"{src}: the lightings (a test toy, elevation 50°, azimuth 60°)",
          os.path.join(args.out, "norb_lightings.png"), written)
    return written, [], ""
