"""Figures of a `viewgap run --dump DIR` beyond its run.json: the dataset's samples, the
class capsules' poses and the decoder's reconstructions."""
import os

import numpy as np

from .files import InputError, get, load_npy, numbers, save
from .style import plt


def bare(ax):
    """Axes that hold a picture: no ticks, no grid."""
    ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)


def grey_image(ax, image):
    """An image of intensities in [0, 1], its pixels as they are (no smoothing)."""
    ax.imshow(image, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    bare(ax)


def image_grid(images, rows, cols, col_fmt, title, path, written):
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(1.5 * len(cols) + 0.8, 1.5 * len(rows) + 0.8),
                             squeeze=False)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            grey_image(ax, images[i, j])
            if i == 0:
                ax.set_title(col_fmt.format(c), fontsize=10)
            if j == 0:
                ax.set_ylabel(r, fontsize=10)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, path, written)


def fig_datasets(dump, src, seed, caption, path, out, written):
    """The dump's samples: every class at every azimuth (one elevation), and at every elevation."""
    classes = get(dump, "classes", path, list)
    azs, els = get(dump, "azimuths", path, list), get(dump, "elevations", path, list)
    ims = load_npy(os.path.join(src, "dataset_azimuths.npy"), (len(classes), len(azs)))
    image_grid(ims, classes, azs, "az {:g}°",
               f"Synthetic smallNORB: {len(classes)} classes × {len(azs)} azimuths at elevation "
               f"{dump.get('azimuth_elevation', '?')}° (one noisy 32×32 sample each, seed {seed})\n{caption}",
               os.path.join(out, "dataset_azimuths.png"), written)
    ims = load_npy(os.path.join(src, "dataset_elevations.npy"), (len(classes), len(els)))
    image_grid(ims, classes, els, "el {:g}°",
               f"Synthetic smallNORB: {len(classes)} classes × {len(els)} elevations at azimuth "
               f"{dump.get('elevation_azimuth', '?')}° (seed {seed})\n{caption}",
               os.path.join(out, "dataset_elevations.png"), written)


def fig_poses(dump, caption, path, out, written):
    classes = get(dump, "classes", path, list)
    poses = get(dump, "class_poses", path, list)
    if not poses:
        raise InputError(path, "'class_poses' is empty")
    k = len(classes)
    mus = [numbers(np.ravel(get(p, "mu", path, list)), 16 * k, path, "class_poses.mu").reshape(k, 4, 4)
           for p in poses]
    vmax = max(np.abs(m).max() for m in mus) or 1.0
    fig, axes = plt.subplots(len(poses), k, figsize=(1.6 * k + 2.2, 1.7 * len(poses) + 1.2), squeeze=False,
                             layout="constrained")
    for i, p in enumerate(poses):
        a = numbers(get(p, "a", path, list), k, path, "class_poses.a")
        label, pred = int(get(p, "label", path)), int(get(p, "predicted", path))
        for j in range(k):
            ax = axes[i][j]
            im = ax.imshow(mus[i][j], cmap="RdBu_r", vmin=-vmax, vmax=vmax)
            bare(ax)
            ax.set_title(f"a={a[j]:.3f}", fontsize=9, fontweight="bold" if j == pred else None)
            if j == pred:
                for s in ax.spines.values():
                    s.set_edgecolor("tab:green" if pred == label else "tab:red")
                    s.set_linewidth(4)
            if i == len(poses) - 1:
                ax.set_xlabel(f"capsule {classes[j]}", fontsize=9)
            if j == 0:
                ax.set_ylabel(f"true {classes[label]}", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.6, label="pose entry μ")
    fig.suptitle("Class-capsule 4×4 pose matrices μ_j and activations a_j, one held-out example per class\n"
                 f"framed: predicted class (green correct, red wrong)\n{caption}")
    save(fig, os.path.join(out, "capsule_poses.png"), written)


def fig_reconstructions(dump, src, caption, path, out, written):
    """Sabour et al.'s figure: per class, the input, its reconstruction from the true class
    capsule, and reconstructions with one capsule dimension shifted. False if the dump has none."""
    rec = dump.get("reconstructions")
    if rec is None:
        return False
    if not isinstance(rec, dict):
        raise InputError(path, "field 'reconstructions' has the wrong type (expected an object or null)")
    classes = get(dump, "classes", path, list)
    name = get(rec, "file", path, str)
    if not name or os.path.basename(name) != name:
        raise InputError(path, f"'reconstructions.file' must be a file name in the dump directory, not {name!r}")
    labels = [int(v) for v in numbers(get(rec, "labels", path, list), None, path, "reconstructions.labels")]
    predicted = numbers(get(rec, "predicted", path, list), len(labels), path, "reconstructions.predicted")
    deltas = numbers(get(rec, "deltas", path, list), None, path, "reconstructions.deltas")
    dims = get(rec, "dims", path, list)
    if not labels or any(not 0 <= c < len(classes) for c in labels):
        raise InputError(path, f"'reconstructions.labels' must name classes 0..{len(classes) - 1}")
    if len(dims) != len(labels):
        raise InputError(path, f"'reconstructions.dims' has {len(dims)} rows, expected {len(labels)}")
    k = len(dims[0]) if isinstance(dims[0], list) else -1
    dims = [numbers(d, k, path, "reconstructions.dims").astype(int) for d in dims]
    p = len(deltas)
    ims = load_npy(os.path.join(src, name), (len(labels), 2 + k * p))
    model = rec.get("model", "?")

    # Columns: input, reconstruction, then one group of len(deltas) per dimension,
    # the groups set apart by a narrow spacer.
    ratios = [1, 1] + sum(([0.35] + [1] * p for _ in range(k)), [])
    cell = 0.72
    fig = plt.figure(figsize=(cell * sum(ratios) + 1.2, cell * 1.12 * len(labels) + 1.6))
    gs = fig.add_gridspec(len(labels), len(ratios), width_ratios=ratios, wspace=0.06, hspace=0.18)
    for i, (c, pred) in enumerate(zip(labels, predicted)):
        cols = [0, 1] + [2 + g * (p + 1) + 1 + j for g in range(k) for j in range(p)]
        for j, col in enumerate(cols):
            ax = fig.add_subplot(gs[i, col])
            grey_image(ax, ims[i, j])
            if j == 0:
                wrong = int(pred) != c
                ax.set_ylabel(f"{classes[c]}" + (f"\n(pred. {classes[int(pred)]})" if wrong else ""),
                              fontsize=9, color="tab:red" if wrong else "black")
            elif j >= 2 and (j - 2) % p == 0:
                ax.set_ylabel(f"dim {dims[i][(j - 2) // p]}", fontsize=8)
            if i == 0:
                ax.set_title("input" if j == 0 else "reconstr." if j == 1 else
                             f"{deltas[(j - 2) % p]:+.2f}", fontsize=8)
    fig.suptitle(f"Reconstructions by the {model} decoder from the true class capsule, one held-out example "
                 f"per class (red: misclassified);\nthen one capsule dimension shifted by the amount above each "
                 f"column (per row, the {k} dimensions of largest variance over the class's held-out "
                 f"examples)\n{caption}", fontsize=10)
    save(fig, os.path.join(out, "reconstructions.png"), written)
    return True
