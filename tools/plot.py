#!/usr/bin/env python3
"""Figures from viewgap's own outputs (PNG, plus a GIF of training).

  python3 tools/plot.py run RUN_JSON_OR_DUMP_DIR --out DIR [--no-gif]
  python3 tools/plot.py sweep SWEEP_DIR --out DIR [--gap G]

`run` takes the JSON of `viewgap run --out-json F`, or the directory of
`viewgap run --dump DIR` (run.json, dump.json, dataset_*.npy). From run.json alone it
draws the training curves, the familiar/held-out bars and the accuracy around the
circle; a dump adds the dataset grids, the class-capsule poses, the decoder's
reconstructions (when a model has a decoder, e.g. dr) and, from the per-epoch circle
accuracies, the training animation.

`sweep` takes the directory of `viewgap sweep --out DIR` (summary.csv, azimuth.csv,
cells.csv, meta.json): accuracy and drop vs gap (sweep_gap.png), the paired reference - X
differences (sweep_paired.png, with a table of wins/ties/losses and Wilcoxon p), and
accuracy vs distance from the training views (sweep_distance.png: every gap, or --gap G),
along the sweep's held-out axis (its name and unit label the x axes). A sweep with a
--grid gets sweep_gap_POINT.png and sweep_distance_POINT.png per grid point, and ONE
sweep_paired.png with every grid point's paired differences (a column per pair, a series
per grid point). Rows of kind paired-grid (`sweep --pair-grid 'A|B'`) get
sweep_paired_grid.png: a row of panels per pairing, a line per model, A - B against gap.
CIs are error bars at a few x (a one-gap sweep too) and bands between many; every model
has its own colour, marker and line style, and series sharing an x are set slightly
apart, so a line under another (cnn under cnn136) still shows. It reads schema 4 and
schema 3 (before the axis columns: an azimuth axis in degrees).

Every figure's title names the data source (synthetic, or the smallNORB-format
directory) and the protocol. A run's circle shades the views the run recorded (its
config's train_azimuths and test_azimuths: under --data norb the files' views);
older JSONs, which name no protocol, get it from their other fields.

Bad input (missing or malformed file, another schema_version or kind, a bad argument,
an output path that is not a regular file) is reported as one line
`plot.py: error: <file>: <what>` with exit code 2. Unknown fields are ignored. Output
goes through a temporary file and a rename; a symlink is followed to the file it names.
"""
import argparse
import csv
import json
import math
import os
import sys
import tempfile

try:
    import numpy as np
    import matplotlib
except ImportError:
    # `python3` may be a pyenv or venv interpreter without Debian's dist-packages.
    if os.path.exists("/usr/bin/python3") and not os.environ.get("VIEWGAP_PLOT_REEXEC"):
        os.environ["VIEWGAP_PLOT_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.stderr.write("plot.py: error: matplotlib/numpy not found: install python3-matplotlib "
                     "python3-numpy (bash tools/deps.sh)\n")
    sys.exit(2)
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import animation  # noqa: E402

# The format version each viewgap document kind has (harness/report.h, harness/sweep_store.h).
SCHEMA_VERSION = {"viewgap-run": 3, "viewgap-sweep": 4, "viewgap-dump": 2}
# Older versions still read: a version 1 dump is a version 2 one without "reconstructions";
# a version 2 run has no held-out axis; a version 3 sweep's axis is azimuth, in degrees
# (sweep_v4 renames its columns).
ALSO_READS = {"viewgap-dump": (1,), "viewgap-run": (2,), "viewgap-sweep": (3,)}
# Schema 3's column names and their schema 4 names.
SWEEP_V3_COLUMNS = {"true_gap_deg": "true_gap", "distance_deg": "distance", "azimuth_deg": "value"}
CHANCE = 0.2
COLORS = {"caps": "tab:blue", "cnn": "tab:orange", "cnn136": "tab:green"}
EXTRA_COLORS = ["tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.titlesize": 11, "figure.titlesize": 12})


class InputError(Exception):
    def __init__(self, path, what):
        super().__init__(f"{path}: {what}")


def color(model):
    """A fixed colour per model name across all figures; unknown names get the next spare."""
    if model not in COLORS:
        COLORS[model] = EXTRA_COLORS[(len(COLORS) - 3) % len(EXTRA_COLORS)]
    return COLORS[model]


def plural(n, word):
    return f"{n} {word}" + ("" if str(n) == "1" else "s")


# ---- reading -------------------------------------------------------------------------------

def load_json(path, kind):
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e})")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read ({e})")
    if not isinstance(d, dict):
        raise InputError(path, "not a JSON object")
    if d.get("schema_version") not in (SCHEMA_VERSION[kind],) + ALSO_READS.get(kind, ()):
        raise InputError(path, f"schema_version {d.get('schema_version')!r}, this plot.py reads "
                               f"{SCHEMA_VERSION[kind]} (made by another viewgap version?)")
    if d.get("kind") != kind:
        raise InputError(path, f"kind {d.get('kind')!r}, expected {kind!r}")
    return d


def get(d, dotted, path, typ=None):
    """d['a']['b'] for dotted='a.b', or an InputError naming the missing field."""
    cur = d
    for k in dotted.split("."):
        if not isinstance(cur, dict) or k not in cur:
            raise InputError(path, f"missing field '{dotted}'")
        cur = cur[k]
    if typ is not None and not isinstance(cur, typ):
        raise InputError(path, f"field '{dotted}' has the wrong type ({type(cur).__name__})")
    return cur


def numbers(values, n, path, what):
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(path, f"'{what}' is not a list of numbers")
    if a.ndim != 1 or (n is not None and len(a) != n):
        raise InputError(path, f"'{what}' has {a.size} values, expected {n}")
    return a


def read_csv(path, columns, numeric):
    """Rows as dicts; `numeric` columns parsed to float (empty -> nan)."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            rows = list(reader)
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(path, f"cannot read ({e})")
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    if not rows:
        raise InputError(path, "no data rows")
    for i, r in enumerate(rows, start=2):
        for c in numeric:
            v = (r.get(c) or "").strip()
            try:
                r[c] = float(v) if v else math.nan
            except ValueError:
                raise InputError(path, f"line {i}: column '{c}' is not a number ({v!r})")
    return rows


def output_target(path):
    """The file a figure at `path` is written to: symlinks followed to the file they name.
    Anything else that exists there (a directory, a FIFO, a device) is refused."""
    target = os.path.realpath(path)
    if os.path.lexists(target) and not os.path.isfile(target):
        where = "" if target == os.path.abspath(path) else f" (it leads to {target})"
        raise InputError(path, f"exists and is not a regular file{where}; plot.py writes only regular files")
    return target


def atomic(path, write):
    """write(tmp) to a temporary file beside the target, then rename it onto the target."""
    target = output_target(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp.",
                               suffix=os.path.splitext(target)[1])
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(tmp)
        mode = os.stat(target).st_mode & 0o7777 if os.path.exists(target) else 0o666 & ~umask
        os.chmod(tmp, mode)  # mkstemp makes 0600; keep a file's permissions, or the usual ones
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save(fig, path, written):
    try:
        atomic(path, lambda tmp: fig.savefig(tmp, format="png", bbox_inches="tight"))
    finally:
        plt.close(fig)
    written.append(path)


def make_out(d):
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise InputError(d, f"cannot create the output directory ({e.strerror})")
    if not os.access(d, os.W_OK):
        raise InputError(d, "output directory is not writable")


# ---- run figures ---------------------------------------------------------------------------

def source_text(data):
    """The data source as a title names it: "synthetic", or "smallNORB-format DIR"."""
    data = data or "synthetic"
    return f"smallNORB-format {data.split(':', 1)[1]}" if data.startswith("norb:") else data


def run_source(c, axis):
    """(data source, protocol) of a run's config: recorded since "protocol" was, inferred before."""
    data = c.get("data") or {}
    source = source_text("norb:" + data["norb"] if isinstance(data.get("norb"), str) else "synthetic")
    protocol = c.get("protocol") or axis.get("protocol") or data.get("protocol")
    if not protocol:
        protocol = ("norb-" + data["split"] if data.get("split") else
                    "elevation-extrapolation" if c.get("test_elevations") else "azimuth-window")
    return source, protocol


def run_caption(run, path):
    c = get(run, "config", path, dict)
    for k in ("train_azimuths.from", "train_azimuths.to", "test_azimuths.from", "test_azimuths.to"):
        get(run, "config." + k, path, (int, float))
    tr, te = c["train_azimuths"], c["test_azimuths"]
    gap = run.get("dataset", {}).get("gap_deg")
    axis = run.get("dataset", {}).get("axis") or {}
    source, protocol = run_source(c, axis)
    if axis.get("name") not in (None, "azimuth", "elevation"):  # an in-plane change at the training views
        data = c.get("data") or {}
        return (f"seed {c.get('seed')}, {plural(c.get('n_epochs'), 'epoch')}; {source}, {protocol}: train az "
                f"{tr.get('from'):g}:{tr.get('to'):g}° ({tr.get('count')} views), {axis['name']} up to "
                f"{data.get('train_max', 0):g} {axis.get('unit', '')}, held-out {data.get('test_from', '?'):g}:"
                f"{data.get('test_to', '?'):g} {axis.get('unit', '')}")
    return (f"seed {c.get('seed')}, {plural(c.get('n_epochs'), 'epoch')}; {source}, {protocol}: train az "
            f"{tr.get('from'):g}:{tr.get('to'):g}° ({tr.get('count')} views), held-out "
            f"{te.get('from'):g}:{te.get('to'):g}° ({te.get('count')} views)"
            + (f"; true gap {gap:g}°" if isinstance(gap, (int, float)) else ""))


def image_grid(images, rows, cols, col_fmt, title, path, written):
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(1.5 * len(cols) + 0.8, 1.5 * len(rows) + 0.8),
                             squeeze=False)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            ax.imshow(images[i, j], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)
            if i == 0:
                ax.set_title(col_fmt.format(c), fontsize=10)
            if j == 0:
                ax.set_ylabel(r, fontsize=10)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, path, written)


def fig_training_curves(run, caption, path, out, written):
    fig, (ax_l, ax_a) = plt.subplots(1, 2, figsize=(11, 4.2))
    for m in run["models"]:
        h = get(m, "history", path, list)
        if not h:
            continue
        ep = numbers([e.get("epoch") for e in h], None, path, f"{m['name']}.history.epoch")
        loss = numbers([e.get("loss") for e in h], None, path, f"{m['name']}.history.loss")
        c = color(m["name"])
        ax_l.plot(ep, loss, "o-", color=c, label=m["name"])
        for key, ls in (("familiar", "-"), ("heldout", "--")):
            acc = numbers([e.get(key) for e in h], None, path, f"{m['name']}.history.{key}")
            ax_a.plot(ep, acc, ls, marker="o", color=c,
                      label=f"{m['name']} {'familiar' if key == 'familiar' else 'held-out'}")
    ax_l.set_yscale("log")
    ax_l.set(xlabel="epoch", ylabel="mean training loss (cross-entropy, log scale)", title="training loss")
    ax_a.axhline(CHANCE, color="gray", lw=1, ls=":", label="chance (0.2)")
    ax_a.set(xlabel="epoch", ylabel="accuracy (fraction correct)", ylim=(0, 1.02),
             title="accuracy after each epoch")
    for ax in (ax_l, ax_a):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=8)
    fig.suptitle(f"Training curves — {caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "training_curves.png"), written)


def fig_familiar_heldout(run, caption, path, out, written):
    models = run["models"]
    fig, (ax, ax_c) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 1.6]})
    x = np.arange(len(models))
    for i, m in enumerate(models):
        fam, held = get(m, "familiar", path, (int, float)), get(m, "heldout", path, (int, float))
        c = color(m["name"])
        ax.bar(i - 0.2, fam, 0.38, color=c, edgecolor="black", label="familiar" if i == 0 else None)
        ax.bar(i + 0.2, held, 0.38, color=c, edgecolor="black", hatch="//", alpha=0.6,
               label="held-out" if i == 0 else None)
        for dx, v in ((-0.2, fam), (0.2, held)):
            ax.text(i + dx, v + 0.01, f"{v:.3f}", ha="center", va="bottom", fontsize=8)
        ax.annotate("", xy=(i + 0.42, held), xytext=(i + 0.42, fam),
                    arrowprops=dict(arrowstyle="->", color="crimson", lw=1.5))
        ax.text(i, -0.13, f"drop {fam - held:.3f}", ha="center", va="top", color="crimson",
                fontsize=10, fontweight="bold", transform=ax.get_xaxis_transform())
    ax.axhline(CHANCE, color="gray", lw=1, ls=":", label="chance")
    ax.set_xticks(x, [f"{m['name']}\n({m.get('n_params', 0):,} params)" for m in models], fontsize=8)
    ax.set(ylabel="accuracy (fraction correct)", ylim=(0, 1.2), title="familiar vs held-out views")
    ax.legend(fontsize=8, loc="upper center", ncol=3)

    classes = list(run.get("dataset", {}).get("classes") or models[0].get("heldout_per_class", {}))
    w = 0.8 / len(models)
    for i, m in enumerate(models):
        pc = m.get("heldout_per_class") or {}
        vals = [pc.get(k, math.nan) for k in classes]
        ax_c.bar(np.arange(len(classes)) + (i - (len(models) - 1) / 2) * w, vals, w,
                 color=color(m["name"]), edgecolor="black", label=m["name"])
    ax_c.axhline(CHANCE, color="gray", lw=1, ls=":", label="chance")
    ax_c.set_xticks(np.arange(len(classes)), classes)
    ax_c.set(xlabel="class", ylabel="held-out accuracy", ylim=(0, 1.2), title="held-out accuracy per class")
    ax_c.legend(fontsize=8, loc="upper center", ncol=len(models) + 1)
    for a in (ax, ax_c):
        a.set_yticks(np.linspace(0, 1, 6))
    fig.suptitle(f"Familiar vs held-out accuracy — {caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "familiar_heldout.png"), written)


def shade_range(ax, rng, **kw):
    """Shade an azimuth range A:B (wraps modulo 360) on a 0..360 axis."""
    a, b = rng["from"] % 360, rng["from"] % 360 + (rng["to"] - rng["from"])
    spans = [(a, min(b, 360))] + ([(0, b - 360)] if b > 360 else [])
    for k, (lo, hi) in enumerate(spans):
        ax.axvspan(lo - 0.5, hi + 0.5, **dict(kw, label=kw.get("label") if k == 0 else None))


def circle_axes(ax, run, path):
    c = run["config"]
    shade_range(ax, get(c, "train_azimuths", path, dict), color="tab:green", alpha=0.15,
                label="training range")
    shade_range(ax, get(c, "test_azimuths", path, dict), facecolor="none", edgecolor="tab:red",
                hatch="\\\\", alpha=0.35, label="held-out range")
    for v in c["train_azimuths"].get("values", []):
        ax.axvline(v % 360, color="tab:green", lw=0.8, alpha=0.6)
    for v in c["test_azimuths"].get("values", []):
        ax.axvline(v % 360, color="tab:red", lw=0.8, ls="--", alpha=0.6)
    ax.axhline(CHANCE, color="gray", lw=1, ls=":", label="chance")
    ax.set(xlabel="azimuth (degrees)", ylabel="accuracy (fraction correct)", xlim=(-5, 355), ylim=(0, 1.05))
    ax.set_xticks(range(0, 360, 30))


def circle_data(run, path):
    az = numbers(get(run, "dataset.circle_azimuths", path, list), None, path, "dataset.circle_azimuths")
    accs = {m["name"]: numbers(get(m, "circle_accuracy", path, list), len(az), path,
                               f"{m['name']}.circle_accuracy") for m in run["models"]}
    return az, accs


def fig_circle(run, caption, path, out, written):
    az, accs = circle_data(run, path)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    circle_axes(ax, run, path)
    for name, acc in accs.items():
        ax.plot(az, acc, "o-", color=color(name), label=name, ms=4)
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    # Images per azimuth: the circle split's, where recorded (smallNORB's files hold their own count).
    circle = (run.get("dataset", {}).get("sizes") or {}).get("circle")
    n = (circle // len(az) if isinstance(circle, int) and len(az) and circle % len(az) == 0 else
         len(run["config"].get("elevations", {}).get("values", [])) * 5 * (run["config"].get("n_eval_per_combo") or 0))
    ax.set_title(f"Accuracy around the circle, every {az[1] - az[0]:g}°"
                 + (f" ({n} images per azimuth)" if n else "") + f"\n{caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "circle_accuracy.png"), written)


def fig_axis(run, caption, path, out, written):
    """Accuracy along a held-out axis that is no viewing angle (a shift, a turn):
    the run's axis sweep, with the training range shaded."""
    axis = get(run, "dataset.axis", path, dict)
    values = numbers(get(axis, "values", path, list), None, path, "dataset.axis.values")
    dist = numbers(get(axis, "distances", path, list), len(values), path, "dataset.axis.distances")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    trained = [v for v, d in zip(values, dist) if d == 0]
    if trained:
        ax.axvspan(min(trained), max(trained), color="tab:green", alpha=0.15, label="training range")
    for m in run["models"]:
        acc = numbers(get(m, "axis_accuracy", path, list), len(values), path, f"{m['name']}.axis_accuracy")
        ax.plot(values, acc, "o-", color=color(m["name"]), label=m["name"], ms=4)
    ax.axhline(0.2, color="gray", ls=":", label="chance")
    ax.set_xlabel(f"{axis.get('name')} ({axis.get('unit')})")
    ax.set_ylabel("accuracy (fraction correct)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    ax.set_title(f"Accuracy against {axis.get('name')}, at the training viewpoints\n{caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "axis_accuracy.png"), written)


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
            ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)
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
            ax.imshow(ims[i, j], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)
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


def gif_training(run, caption, path, out, written):
    az, _ = circle_data(run, path)
    hist = {m["name"]: [numbers(h, len(az), path, f"{m['name']}.circle_history")
                        for h in get(m, "circle_history", path, list)] for m in run["models"]}
    n = max(len(h) for h in hist.values())
    if n == 0:
        raise InputError(path, "'circle_history' is empty")
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=80)
    circle_axes(ax, run, path)
    lines = {name: ax.plot([], [], "o-", color=color(name), label=name, ms=3)[0] for name in hist}
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    title = ax.set_title("epoch\ncaption")  # two lines, so that tight_layout leaves room
    fig.tight_layout()

    def frame(i):
        e = min(i, n - 1)
        for name, h in hist.items():
            lines[name].set_data(az, h[min(e, len(h) - 1)])
        title.set_text(f"Accuracy around the circle after epoch {e + 1}/{n}\n{caption}")
        return list(lines.values()) + [title]

    hold = 4  # the final frame stays a little longer
    anim = animation.FuncAnimation(fig, frame, frames=n + hold, blit=False)
    dst = os.path.join(out, "training.gif")
    try:
        atomic(dst, lambda tmp: anim.save(tmp, writer=animation.PillowWriter(fps=2)))
    finally:
        plt.close(fig)
    written.append(dst)


def load_npy(path, shape):
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except (OSError, ValueError) as e:
        raise InputError(path, f"not a readable .npy array ({e})")
    if a.ndim != 4 or tuple(a.shape[:2]) != tuple(shape):
        raise InputError(path, f"shape {a.shape}, expected ({shape[0]}, {shape[1]}, H, W)")
    return a


def cmd_run(args):
    src, written, skipped = args.input, [], []
    if os.path.isdir(src):
        run_path, dump_path = os.path.join(src, "run.json"), os.path.join(src, "dump.json")
        has_dump = os.path.exists(dump_path)
    else:
        run_path, has_dump = src, False
    run = load_json(run_path, "viewgap-run")
    models = get(run, "models", run_path, list)
    if not models or not all(isinstance(m, dict) and isinstance(m.get("name"), str) for m in models):
        raise InputError(run_path, "'models' must be a non-empty list of objects with a 'name'")
    caption = run_caption(run, run_path)
    make_out(args.out)

    if has_dump:
        dump = load_json(dump_path, "viewgap-dump")
        classes = get(dump, "classes", dump_path, list)
        azs, els = get(dump, "azimuths", dump_path, list), get(dump, "elevations", dump_path, list)
        ims = load_npy(os.path.join(src, "dataset_azimuths.npy"), (len(classes), len(azs)))
        image_grid(ims, classes, azs, "az {:g}°",
                   f"Synthetic smallNORB: {len(classes)} classes × {len(azs)} azimuths at elevation "
                   f"{dump.get('azimuth_elevation', '?')}° (one noisy 32×32 sample each, seed {run['config'].get('seed')})"
                   f"\n{caption}",
                   os.path.join(args.out, "dataset_azimuths.png"), written)
        ims = load_npy(os.path.join(src, "dataset_elevations.npy"), (len(classes), len(els)))
        image_grid(ims, classes, els, "el {:g}°",
                   f"Synthetic smallNORB: {len(classes)} classes × {len(els)} elevations at azimuth "
                   f"{dump.get('elevation_azimuth', '?')}° (seed {run['config'].get('seed')})\n{caption}",
                   os.path.join(args.out, "dataset_elevations.png"), written)
    else:
        skipped += ["dataset_azimuths.png", "dataset_elevations.png"]

    fig_training_curves(run, caption, run_path, args.out, written)
    fig_familiar_heldout(run, caption, run_path, args.out, written)
    fig_circle(run, caption, run_path, args.out, written)
    if (run.get("dataset", {}).get("axis") or {}).get("name") not in (None, "azimuth", "elevation"):
        fig_axis(run, caption, run_path, args.out, written)

    if has_dump:
        fig_poses(dump, caption, dump_path, args.out, written)
        if not fig_reconstructions(dump, src, caption, dump_path, args.out, written):
            skipped.append("reconstructions.png (none in the dump: no model with a decoder)")
    else:
        skipped += ["capsule_poses.png", "reconstructions.png"]
    if args.no_gif:
        skipped.append("training.gif (--no-gif)")
    elif all(m.get("circle_history") for m in models):  # `run --out-json` writes it empty
        gif_training(run, caption, run_path, args.out, written)
    else:
        skipped.append("training.gif")
    return written, skipped, (None if has_dump else
                              "needs `viewgap run --dump DIR` (dataset samples, poses, per-epoch circle accuracy)")


# ---- sweep figures -------------------------------------------------------------------------

def find_key(d, key):
    """The first value of `key` anywhere in nested dicts (config layouts may nest run flags)."""
    if isinstance(d, dict):
        if key in d:
            return d[key]
        for v in d.values():
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def read_sweep_csv(path, version, columns, numeric):
    """read_csv of a sweep table, its rows in schema 4's terms whatever its version."""
    old = {v: k for k, v in SWEEP_V3_COLUMNS.items()} if version == 3 else {}
    rows = read_csv(path, [old.get(c, c) for c in columns], [old.get(c, c) for c in numeric])
    if version != 3:
        return rows
    return [dict({SWEEP_V3_COLUMNS.get(k, k): v for k, v in r.items()}, axis="azimuth", unit="deg") for r in rows]


def read_sweep(d):
    """meta.json, summary.csv, azimuth.csv and cells.csv of a sweep directory, in schema 4's terms."""
    meta = load_json(os.path.join(d, "meta.json"), "viewgap-sweep")
    v = meta["schema_version"]
    sum_path, az_path, cells_path = (os.path.join(d, f) for f in ("summary.csv", "azimuth.csv", "cells.csv"))
    axis = ["axis", "unit"] if v >= 4 else []
    summary = read_sweep_csv(sum_path, v, "grid,gap,kind,model,metric,n,mean,ci_lo,ci_hi".split(",") + axis,
                             "gap,true_gap,n,mean,ci_lo,ci_hi,wins,ties,losses,p_value".split(","))
    az_rows = read_sweep_csv(az_path, v, "grid,gap,model,distance,n,mean,ci_lo,ci_hi".split(",") + axis,
                             "gap,distance,n,mean,ci_lo,ci_hi".split(","))
    cells = read_sweep_csv(cells_path, v, "cell,seed,gap,grid,model,status".split(",") + axis, ["seed", "gap"])
    for r in summary:
        if r["kind"] not in ("model", "paired", "paired-grid"):
            raise InputError(sum_path, f"unknown kind {r['kind']!r}")
    return meta, summary, az_rows, cells, az_path


def axis_of(rows):
    """(name, unit) of the held-out axis the rows lie on, e.g. ("azimuth", "deg")."""
    axes = list(dict.fromkeys((r["axis"], r["unit"]) for r in rows))
    return axes[0] if len(axes) == 1 else ("held-out axis", "/".join(sorted({u for _, u in axes})))


def unit_text(unit):
    return {"deg": "degrees", "px": "pixels"}.get(unit, unit)


def unit_mark(unit):
    return "°" if unit == "deg" else f" {unit}"


MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]
LINESTYLES = ["-", "--", ":", "-."]
_STYLES = {}


def style(key):
    """A fixed marker and line style per series name, so that a line under another (cnn under cnn136,
    identical values) still shows its own markers and dashes."""
    if key not in _STYLES:
        k = len(_STYLES)
        _STYLES[key] = (MARKERS[k % len(MARKERS)], LINESTYLES[k % len(LINESTYLES)])
    return _STYLES[key]


def offsets(n, span):
    """x offsets that spread n series sideways around a shared x, a small fraction of the axis span."""
    step = (span or 1.0) * 0.012
    return [(k - (n - 1) / 2) * step for k in range(n)]


def gap_ticks(ax, rows):
    gaps = sorted({r["gap"] for r in rows})
    true = {r["gap"]: r.get("true_gap", math.nan) for r in rows}
    ax.set_xticks(gaps, [f"{g:g}" + (f"\n(true {true[g]:g})" if not math.isnan(true[g]) and true[g] != g
                                     else "") for g in gaps])
    if len(gaps) == 1:  # one gap: its series (offsets() sets them apart) grouped close around the tick
        lo, hi = ax.dataLim.intervalx if ax.has_data() else (gaps[0], gaps[0])
        w = max(0.1, 1.6 * max(abs(lo - gaps[0]), abs(hi - gaps[0])))
        ax.set_xlim(gaps[0] - w, gaps[0] + w)


def ci_series(ax, x, rows, label, c, key, dx=0.0, ms=5):
    """Mean against x with its 95 % CI: error bars at a few x (at a single x fill_between draws
    nothing), a light band between several; series `key` picks marker and line style."""
    x = np.asarray(x, dtype=float) + dx
    mean = np.array([r["mean"] for r in rows])
    lo, hi = np.array([r["ci_lo"] for r in rows]), np.array([r["ci_hi"] for r in rows])
    marker, ls = style(key)
    if len(x) <= 6:
        err = np.vstack([np.clip(mean - lo, 0, None), np.clip(hi - mean, 0, None)])
        ax.errorbar(x, mean, yerr=np.where(np.isnan(err), 0, err), fmt=marker, ls=ls, color=c, ms=ms,
                    capsize=3, lw=1.4, elinewidth=1, label=label)
    else:
        ax.plot(x, mean, marker=marker, ls=ls, color=c, ms=ms, lw=1.4, label=label)
    if len(x) > 1:
        ax.fill_between(x, lo, hi, color=c, alpha=0.15 if len(x) > 6 else 0.12, lw=0)


def band(ax, rows, label, c, key=None, dx=0.0):
    """Mean vs gap with its 95 % CI (see ci_series)."""
    rows = sorted(rows, key=lambda r: r["gap"])
    ci_series(ax, [r["gap"] for r in rows], rows, label, c, key or label, dx)


def span_of(rows, field="gap"):
    v = [r[field] for r in rows]
    return (max(v) - min(v)) if v else 0.0


def fig_sweep_gap(summary, title, out, suffix, written):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3))
    models = [r["model"] for r in summary if r["kind"] == "model"]
    models = list(dict.fromkeys(models))
    dxs = offsets(len(models), span_of(summary))
    for ax, metric, ylabel in ((axes[0], "heldout", "held-out accuracy"),
                               (axes[1], "drop", "drop = familiar − held-out accuracy")):
        for m, dx in zip(models, dxs):
            rows = [r for r in summary if r["kind"] == "model" and r["model"] == m and r["metric"] == metric]
            if rows:
                band(ax, rows, m, color(m), m, dx)
        if metric == "heldout":
            ax.axhline(CHANCE, color="gray", lw=1, ls=":", label="chance")
        gap_ticks(ax, summary)
        ax.margins(x=0.08)
        name, unit = axis_of(summary)
        ax.set(xlabel=f"{name} gap between training and held-out views ({unit_text(unit)})", ylabel=ylabel,
               title=f"{ylabel.split(' =')[0]} vs gap (mean, 95 % bootstrap CI)")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, os.path.join(out, f"sweep_gap{suffix}.png"), written)


def wtl_text(r):
    """A paired row's wins/ties/losses and Wilcoxon p, e.g. "28/1/1 p=2e-05"."""
    if math.isnan(r["wins"]):
        return "–"
    return (f"{r['wins']:.0f}/{r['ties']:.0f}/{r['losses']:.0f}"
            + (f" p={r['p_value']:.2g}" if not math.isnan(r["p_value"]) else ""))


def wtl_table(ax, series, gaps):
    """Wins/ties/losses and p per series and gap as a table under the axes: the numbers never sit on
    the lines or on each other, however many series there are."""
    cells = [[wtl_text(rows[g]) if g in rows else "" for g in gaps] for _, _, rows in series]
    table = ax.table(cellText=cells, rowLabels=[label for label, _, _ in series],
                     colLabels=[f"gap {g:g}" for g in gaps], loc="bottom", cellLoc="center",
                     bbox=[0, -0.28 - 0.085 * (len(series) + 1), 1, 0.085 * (len(series) + 1)])
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    for (i, j), cell in table.get_celld().items():
        cell.set_linewidth(0.3)
        if i > 0 and j == -1:
            cell.get_text().set_color(series[i - 1][1])


def fig_sweep_paired(summary, title, out, suffix, written):
    pairs = list(dict.fromkeys(r["model"] for r in summary if r["kind"] == "paired"))
    if not pairs:
        return False
    gaps = sorted({r["gap"] for r in summary})
    dxs = offsets(len(pairs), span_of(summary))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2 + 0.3 * len(pairs)))
    for ax, metric, ylabel in ((axes[0], "heldout", "Δ held-out accuracy (caps − X)\n> 0: capsules better"),
                               (axes[1], "drop", "Δ drop (caps − X)\n< 0: capsules lose less")):
        series = []
        for p, dx in zip(pairs, dxs):
            rows = sorted((r for r in summary if r["kind"] == "paired" and r["model"] == p
                           and r["metric"] == metric), key=lambda r: r["gap"])
            if not rows:
                continue
            c = color(p.split("-", 1)[-1])
            label = p.replace("-", " − ", 1)
            band(ax, rows, label, c, p.split("-", 1)[-1], dx)
            series.append((label, c, {r["gap"]: r for r in rows}))
        ax.axhline(0, color="black", lw=1.2)
        ax.margins(x=0.15)
        gap_ticks(ax, summary)
        name, unit = axis_of(summary)
        ax.set(xlabel=f"{name} gap ({unit_text(unit)})", ylabel=ylabel,
               title=f"paired difference, {'held-out' if metric == 'heldout' else 'drop'} (mean, 95 % CI)\n"
                     "table: the reference's wins/ties/losses over seeds, Wilcoxon p")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
        if series:
            wtl_table(ax, series, gaps)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, os.path.join(out, f"sweep_paired{suffix}.png"), written)
    return True


def fig_sweep_paired_by_grid(summary, grids, title, out, written):
    """A grid sweep's paired differences in one figure: a column per pair (reference − X), a row per
    metric, a series per grid point (its own colour, marker and line, offset sideways), against gap."""
    pairs = list(dict.fromkeys(r["model"] for r in summary if r["kind"] == "paired"))
    if not pairs:
        return False
    colors = {g: plt.cm.tab10(k % 10) if len(grids) <= 10 else plt.cm.tab20(k % 20) for k, g in enumerate(grids)}
    dxs = dict(zip(grids, offsets(len(grids), span_of(summary))))
    fig, axes = plt.subplots(2, len(pairs), figsize=(max(7, 4.6 * len(pairs)), 8), squeeze=False)
    name, unit = axis_of(summary)
    for j, p in enumerate(pairs):
        for i, (metric, ylabel) in enumerate((("heldout", "Δ held-out accuracy\n> 0: reference better"),
                                              ("drop", "Δ drop\n< 0: reference loses less"))):
            ax = axes[i][j]
            for g in grids:
                rows = sorted((r for r in summary if r["kind"] == "paired" and r["model"] == p
                               and r["metric"] == metric and r["grid"] == g), key=lambda r: r["gap"])
                if rows:
                    band(ax, rows, g or "(no grid)", colors[g], "grid:" + g, dxs[g])
            ax.axhline(0, color="black", lw=1.2)
            ax.margins(x=0.15)
            gap_ticks(ax, summary)
            ax.set(xlabel=f"{name} gap ({unit_text(unit)})", ylabel=ylabel if j == 0 else None,
                   title=f"{p.replace('-', ' − ', 1)}, {'held-out' if metric == 'heldout' else 'drop'}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 2), fontsize=8,
               title="grid point (mean, 95 % CI over seeds)", title_fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(title + "\npaired differences at every grid point (wins/ties/losses and p in summary.csv)")
    fig.tight_layout(rect=(0, 0.04 + 0.025 * math.ceil(len(labels) / 2), 1, 1))
    save(fig, os.path.join(out, "sweep_paired.png"), written)
    return True


def fig_sweep_paired_grid(summary, title, out, written):
    """Rows of kind paired-grid (`sweep --pair-grid 'A|B'`): a row of panels per pairing, a line per
    model, the difference A − B with its 95 % CI against gap."""
    pairings = list(dict.fromkeys(r["grid"] for r in summary if r["kind"] == "paired-grid"))
    if not pairings:
        return False
    fig, axes = plt.subplots(len(pairings), 2, figsize=(12, 4.6 * len(pairings) + 0.6), squeeze=False)
    name, unit = axis_of(summary)
    for i, pg in enumerate(pairings):
        rows_pg = [r for r in summary if r["kind"] == "paired-grid" and r["grid"] == pg]
        models = list(dict.fromkeys(r["model"] for r in rows_pg))
        dxs = offsets(len(models), span_of(rows_pg))
        a, _, b = pg.partition(" vs ")
        for ax, metric, ylabel in ((axes[i][0], "heldout", "Δ held-out accuracy (A − B)\n> 0: A better"),
                                   (axes[i][1], "drop", "Δ drop (A − B)\n< 0: A loses less")):
            series = []
            for m, dx in zip(models, dxs):
                rows = sorted((r for r in rows_pg if r["model"] == m and r["metric"] == metric),
                              key=lambda r: r["gap"])
                if rows:
                    band(ax, rows, m, color(m), m, dx)
                    series.append((m, color(m), {r["gap"]: r for r in rows}))
            ax.axhline(0, color="black", lw=1.2)
            ax.margins(x=0.15)
            gap_ticks(ax, rows_pg)
            ax.set(xlabel=f"{name} gap ({unit_text(unit)})", ylabel=ylabel,
                   title=f"A = {a}\nB = {b or '?'}: {'held-out' if metric == 'heldout' else 'drop'} (mean, 95 % CI)")
            ax.title.set_fontsize(9)
            ax.legend(fontsize=8)
            if series:
                wtl_table(ax, series, sorted({r["gap"] for r in rows_pg}))
    fig.suptitle(title + "\none grid point against another, model by model, seed by seed (table: A's wins/ties/losses, Wilcoxon p)")
    fig.tight_layout()
    save(fig, os.path.join(out, "sweep_paired_grid.png"), written)
    return True


def fig_sweep_distance(az_rows, gaps, true_gaps, title, out, suffix, written):
    fig, axes = plt.subplots(1, len(gaps), figsize=(max(7.5, 4.2 * len(gaps) + 1), 4.2), squeeze=False, sharey=True)
    name, unit = axis_of(az_rows)
    for ax, g in zip(axes[0], gaps):
        rows = [r for r in az_rows if r["gap"] == g]
        models = list(dict.fromkeys(r["model"] for r in rows))
        for m, dx in zip(models, offsets(len(models), span_of(rows, "distance"))):
            rs = sorted((r for r in rows if r["model"] == m), key=lambda r: r["distance"])
            ci_series(ax, [r["distance"] for r in rs], rs, m, color(m), m, dx, ms=3)
        ax.axhline(CHANCE, color="gray", lw=1, ls=":", label="chance")
        if g in true_gaps and not math.isnan(true_gaps[g]):
            ax.axvline(true_gaps[g], color="tab:red", lw=1, ls="--", label=f"nearest held-out {name}")
        ax.set(xlabel=f"distance from nearest training {name} ({unit_text(unit)})", title=f"gap {g:g}{unit_mark(unit)}",
               ylim=(0, 1.05))
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("accuracy (mean over seeds, 95 % CI)")
    fig.suptitle(title)
    fig.tight_layout()
    name = f"sweep_distance{suffix}" + (f"_gap{gaps[0]:g}" if len(gaps) == 1 and len(set(r['gap'] for r in az_rows)) > 1 else "")
    save(fig, os.path.join(out, name + ".png"), written)


def sweep_source(meta):
    """(data source, protocol) of a sweep: recorded in run_config, else from its flags."""
    rc = meta.get("run_config") or {}
    flags = (meta.get("config") or {}).get("run_flags") or {}
    data = flags.get("data") or "synthetic"
    source = source_text(data)
    protocol = rc.get("protocol")
    if not protocol:
        split = flags.get("split") or ""
        protocol = (("norb-" + (split or "paper-azimuth")) if data.startswith("norb:") else split or
                    ("elevation-extrapolation" if flags.get("test-elevations") else "azimuth-window"))
    return source, protocol


def cmd_sweep(args):
    d, written = args.input, []
    if not os.path.isdir(d):
        raise InputError(d, "not a directory (expected the --out DIR of viewgap sweep)")
    meta, summary, az_rows, cells, az_path = read_sweep(d)
    make_out(args.out)

    cfg = meta.get("config")
    epochs = find_key(cfg, "n-epochs") or find_key(cfg, "n_epochs")
    train = find_key(cfg, "train-azimuths") or find_key(cfg, "train_azimuths")
    source, protocol = sweep_source(meta)
    recorded = (meta.get("run_config") or {}).get("train_azimuths")
    if isinstance(recorded, dict) and "views" in (meta.get("run_config") or {}):  # the views that ran
        train = f"{recorded.get('from'):g}:{recorded.get('to'):g}"
    # Rows of kind paired-grid have a grid "A vs B" of their own: a figure of their own.
    grids = list(dict.fromkeys(r["grid"] for r in summary if r["kind"] != "paired-grid"))

    def title_of(rows, grid):
        ok = [c for c in cells if c["status"] == "ok" and (grid is None or c["grid"] == grid)]
        failed = len({c["cell"] for c in cells if (grid is None or c["grid"] == grid) and c["status"] != "ok"})
        seeds = sorted({c["seed"] for c in ok})
        gaps = sorted({r["gap"] for r in rows})
        name, unit = axis_of(rows)
        return (f"viewgap sweep, {source}, {protocol}: {plural(len(seeds), 'seed')}"
                + (f" ({seeds[0]:g}–{seeds[-1]:g})" if seeds else "")
                + f" × {name} gaps {', '.join(f'{g:g}' for g in gaps)}{unit_mark(unit)}"
                + (f", {plural(epochs, 'epoch')}" if epochs else "")
                + (f", train az {train}" if isinstance(train, str) else "")
                + (f"; {grid}" if grid else "") + (f"; {failed} failed cells excluded" if failed else ""))

    for grid in grids:
        suffix = "" if len(grids) == 1 else "_" + "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in grid)
        s = [r for r in summary if r["grid"] == grid and r["kind"] != "paired-grid"]
        title = title_of(s, grid)
        true_gaps = {r["gap"]: r.get("true_gap", math.nan) for r in s}
        fig_sweep_gap(s, title, args.out, suffix, written)
        if len(grids) == 1:
            fig_sweep_paired(s, title, args.out, suffix, written)
        a = [r for r in az_rows if r["grid"] == grid]
        if args.gap is not None:
            if not any(r["gap"] == args.gap for r in a):
                raise InputError(az_path, f"no rows for --gap {args.gap:g} (gaps: "
                                          f"{', '.join(f'{g:g}' for g in sorted({r['gap'] for r in a}))})")
            fig_sweep_distance(a, [args.gap], true_gaps, title, args.out, suffix, written)
        elif a:
            fig_sweep_distance(a, sorted({r["gap"] for r in a}), true_gaps, title, args.out, suffix, written)
    if len(grids) > 1:  # every grid point's paired differences in one figure, not one per grid point
        s = [r for r in summary if r["kind"] != "paired-grid"]
        fig_sweep_paired_by_grid(s, grids, title_of(s, None) + f"; {len(grids)} grid points", args.out, written)
    pg = [r for r in summary if r["kind"] == "paired-grid"]
    if pg:
        fig_sweep_paired_grid(pg, title_of(pg, None), args.out, written)
    return written, [], None


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`plot.py: error: ...`, exit 2) like every other."""

    def error(self, message):
        sys.stderr.write(f"plot.py: error: {' '.join(message.split())} (see plot.py --help)\n")
        sys.exit(2)


def main(argv=None):
    ap = Parser(prog="plot.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="figures of one `viewgap run` (JSON or --dump DIR)")
    r.add_argument("input", help="run JSON, or the directory of `viewgap run --dump`")
    r.add_argument("--out", required=True, help="output directory for the PNGs")
    r.add_argument("--no-gif", action="store_true", help="skip the training animation")
    s = sub.add_parser("sweep", help="figures of a `viewgap sweep --out DIR`")
    s.add_argument("input", help="the sweep's output directory")
    s.add_argument("--out", required=True, help="output directory for the PNGs")
    s.add_argument("--gap", type=float, help="only this gap in the accuracy-vs-distance figure")
    args = ap.parse_args(argv)
    try:
        written, skipped, why = (cmd_run if args.cmd == "run" else cmd_sweep)(args)
    except InputError as e:
        sys.stderr.write(f"plot.py: error: {e}\n")
        return 2
    except Exception as e:  # noqa: BLE001 -- anything unexpected in the input: one line, no traceback
        msg = " ".join(str(e).split())
        sys.stderr.write(f"plot.py: error: {args.input}: unexpected content ({type(e).__name__}: {msg})\n")
        return 2
    for w in written:
        print(w)
    if skipped:
        print(f"skipped: {', '.join(skipped)}" + (f" ({why})" if why else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
