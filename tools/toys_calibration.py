#!/usr/bin/env python3
"""The toys' calibration table (issue 56; tools/make_results.sh toys-calibration;
docs/toys.md, "Calibration").

  toys_calibration.py --sweep [LABEL=]DIR [--sweep ...] --out FILE

Reads each DIR/summary.csv, a `viewgap sweep --data toys --split full` over a
--grid of the generator's flags (the baselines over every combination, the
trained models over fewer), and writes FILE: each model's test error on the
standard split (every view of the test toys) at each setting of the generator,
the mean over seeds with the sweep's own 95 % CI (the one rule of every table,
docs/results.md), beside smallNORB's published figures and the calibration's
targets. A grid point names only the flags its sweep varies; the others stand
at their defaults, so points of different sweeps line up. Only baselines are
tuned on: no capsule model runs in these sweeps. A LABEL names a sweep's
setting its rows share and the others lack ("centre crops"): its models'
rows are "MODEL (LABEL)". A sweep not yet run is
skipped with a line on stderr. Errors are one line, exit 2.
"""
import argparse
import csv
import os
import sys

# The package beside this file, found from here so that this runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.few_seeds import few_seeds_note  # noqa: E402
from viewgap_plots.table_io import fail as fail_as, write_table  # noqa: E402

TOOL = "toys_calibration.py"

# smallNORB's standard split, raw pixels (LeCun, Huang & Bottou 2004, CVPR, as
# issue 56 quotes them), and the targets the generator is calibrated to.
PUBLISHED = {
    "nn1": ("K-NN about 18 %", "15-25 %"),
    "linear": ("far from chance (no jitter)", "below 50 %"),
    "cnn": ("convolutional net about 7 %", "below nn1"),
    "cnn-paper": ("the EM paper's CNN 5.2 %", "at most 10 %, 5 points below nn1"),
}


def fail(msg):
    fail_as(TOOL, msg)


def read_summary(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    need = {"grid", "kind", "model", "metric", "n", "mean", "ci_lo", "ci_hi"}
    if not rows or not need <= set(rows[0]):
        fail(f"{path}: not a sweep's summary.csv (needs columns {', '.join(sorted(need))})")
    return rows


def number(row, key):
    try:
        return float(row[key])
    except ValueError:
        fail(f"summary.csv: {key} '{row[key]}' of {row['model']} at '{row['grid']}' is not a number")


# The generator's flags a calibration grid varies, their values where it does
# not (the toys' first setting, which make_results.sh types in every
# calibration sweep) and the order of a column's name.
DEFAULTS = {"toy-variety": "narrow", "toy-min-size": "0.7", "toy-scale": "1", "toy-lights": "mixed"}


def setting(grid):
    """A grid point's full setting of the generator: 'a=x;b=y' with the rest at their defaults."""
    got = dict(DEFAULTS)
    for part in filter(None, grid.split(";")):
        key, eq, value = part.partition("=")
        if not eq or key not in DEFAULTS:
            fail(f"summary.csv: grid '{grid}' varies '{key}', not one of {', '.join(DEFAULTS)}")
        got[key] = value
    return tuple(got[k] for k in DEFAULTS)


def cell(row):
    """Error = 1 - accuracy: the accuracy's CI turned over."""
    if row is None:
        return "—"
    mean, lo, hi = 1 - number(row, "mean"), 1 - number(row, "ci_hi"), 1 - number(row, "ci_lo")
    return f"{100 * mean:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}] ({row['n']})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", required=True, action="append")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    grids, models, found = [], [], {}
    for arg in a.sweep:
        label, eq, sweep = arg.rpartition("=")
        if eq and not label:
            fail(f"--sweep '{arg}': an empty label")
        path = os.path.join(sweep, "summary.csv")
        if not os.path.exists(path):
            sys.stderr.write(f"toys_calibration.py: {sweep}: no summary.csv yet, its rows are left out\n")
            continue
        for r in read_summary(path):
            # --split full: the familiar split is every view of the test toys.
            if r["kind"] != "model" or r["metric"] != "familiar":
                continue
            g, m = setting(r["grid"]), r["model"] + (f" ({label})" if label else "")
            if g not in grids:
                grids.append(g)
            if m not in models:
                models.append(m)
            found[(m, g)] = r
    if not found:
        fail("no summary.csv holds a model's familiar accuracy")
    grids.sort()
    order = sorted(models, key=lambda m: (list(PUBLISHED).index(m.split(" ")[0]) if m.split(" ")[0] in PUBLISHED
                                          else len(PUBLISHED), m))
    # A row per setting of the generator (its flags in columns), a column per
    # model: the table stays as wide as the models, whatever the grids.
    lines = [
        "# The toys' calibration: test error on the standard split",
        "",
        "Generated by `tools/toys_calibration.py` from the `summary.csv` of the sweeps in this folder "
        "(`bash tools/make_results.sh toys-calibration`, `toys-calibration-trained`, `toys-calibration-lights` "
        "and `toys-calibration-lr`; results/README.md). Each cell: "
        "the error on every view of the test toys (`--split full`, the paper's preprocessing), mean over seeds "
        "with the sweep's 95 % CI (seeds); — where a model did not run. A row: a setting of the generator's flags. "
        "Only baselines run here: the capsule models' numbers are the claim under test "
        "and are not looked at while calibrating (docs/toys.md).",
        "",
        "| " + " | ".join(f"`--{k}`" for k in DEFAULTS) + " | " + " | ".join(f"`{m}`" for m in order) + " |",
        "|" + "---|" * (len(DEFAULTS) + len(order)),
    ]
    for g in grids:
        lines.append("| " + " | ".join(g) + " | " + " | ".join(cell(found.get((m, g))) for m in order) + " |")
    for k, label in enumerate(("smallNORB, published", "target")):
        cells = [label] + [""] * (len(DEFAULTS) - 1) + [PUBLISHED.get(m.split(" ")[0], ("", ""))[k] for m in order]
        lines.append("| " + " | ".join(cells) + " |")
    note = few_seeds_note((r["n"] for r in found.values()), "Cells")
    if note:
        lines += ["", note]
    write_table(TOOL, a.out, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
