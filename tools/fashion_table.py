#!/usr/bin/env python3
"""viewgap's models on Fashion-MNIST's standard split beside the published figures
(tools/make_results.sh fashion; docs/data.md).

  fashion_table.py --dir results/fashion_mnist

Reads DIR/nn1.json (a `viewgap run` of nn1), DIR/nn1_numpy.json (tools/fashion_nn1.py)
and every DIR/*/summary.csv (a `viewgap sweep --data fashion-mnist` of one or more
models), with each sweep's cells.csv for the parameter counts and trajectory.csv for the
learning curves where it has them; writes DIR/table.md. Errors are one line, exit 2.
"""
import argparse
import csv
import glob
import json
import os
import sys

# The package beside this file, found from here so that this runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.few_seeds import few_seeds_note  # noqa: E402
from viewgap_plots.table_io import fail as fail_as, number, read_rows, write_table  # noqa: E402

TOOL = "fashion_table.py"

# Published test accuracies, with where each is printed. Xiao, Rasul & Vollgraf 2017,
# "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning Algorithms",
# arXiv:1708.07747, Table 3 (scikit-learn classifiers, the best of each one's grid);
# zalandoresearch/fashion-mnist README, "Benchmark" (submitted models).
# Sabour et al.'s CapsNet has no Fashion-MNIST figure of its own; these two reimplementations'
# READMEs give one each: naturomics's trains on the images / 255 alone, XifengGuo's (the
# benchmark's entry) with random shifts of up to 2 pixels and flips, keeping its best test epoch.
CAPSNET_SOURCES = ("naturomics/CapsNet-Tensorflow README (0.906); zalandoresearch/fashion-mnist README, "
                   "benchmark table, from XifengGuo/CapsNet-Fashion-MNIST (0.936)")
ANCHORS = {
    "nn1": ("k-nearest neighbours, best of the grid: 0.854 (k = 5, L1 distance, distance-weighted)",
            "Xiao, Rasul & Vollgraf 2017, Table 3"),
    "linear": ("logistic regression, best of the grid: 0.842", "Xiao, Rasul & Vollgraf 2017, Table 3"),
    "caps": ("no published figure for this small EM-routing network; the nearest capsule network, CapsNet "
             "with dynamic routing (8M parameters): 0.906 on the images alone, 0.936 with shift and flip "
             "augmentation", CAPSNET_SOURCES),
    "cnn": ("two convolutional layers with max pooling: 0.916–0.934",
            "zalandoresearch/fashion-mnist README, benchmark table"),
    "cnn-paper": ("two convolutional layers with max pooling: 0.916–0.934",
                  "zalandoresearch/fashion-mnist README, benchmark table"),
    "dr": ("CapsNet with dynamic routing, 8M parameters: 0.906 on the images alone (50 epochs); 0.936 with "
           "shift and flip augmentation (100 epochs, its best epoch on the test set)", CAPSNET_SOURCES),
    "convcaps": ("no published Fashion-MNIST figure; the EM paper reports 0.44 % error on MNIST",
                 "Hinton, Sabour & Frosst 2018, section 5"),
}


def fail(msg):
    fail_as(TOOL, msg)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        fail(f"{path}: not JSON ({e})")


# The EM routing's four options where the paper and its official code (capsule_em) differ
# (docs/models.md): a sweep that sets them names its recipe beside the model.
ROUTING_FLAGS = ("em-logit", "em-norm", "em-mean", "em-class-lambda")


def recipe(flags):
    """How a sweep's run flags route, for its rows' label: "" at the paper's routing."""
    official = [f for f in ROUTING_FLAGS if flags.get(f) == "official"]
    if len(official) == len(ROUTING_FLAGS):
        return "the official code's routing"
    return ", ".join(f"--{f} official" for f in official)


def sweep_rows(d):
    """[(model, n seeds, mean, ci_lo, ci_hi, epochs, sweep dir, recipe)] of every sweep under d."""
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*", "summary.csv"))):
        sweep = os.path.dirname(path)
        meta = read_json(os.path.join(sweep, "meta.json"))
        flags = meta.get("config", {}).get("run_flags", {})
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["kind"] == "model" and r["metric"] == "heldout":
                    out.append((r["model"], int(r["n"]), float(r["mean"]), float(r["ci_lo"]), float(r["ci_hi"]),
                                flags.get("n-epochs"), os.path.relpath(sweep, d), recipe(flags)))
    return out


def whole(path, r, column):
    """Row r's `column` as an int; an empty or fractional value is one line, exit 2."""
    v = number(TOOL, path, r, column)
    if v != v or v != int(v):
        fail(f"{path}: column '{column}' is not a whole number ({r[column]!r})")
    return int(v)


def n_params(sweep):
    """{model: its parameter count, or "a–b" where its cells differ} from sweep/cells.csv, or {}
    where the sweep has none."""
    path = os.path.join(sweep, "cells.csv")
    if not os.path.exists(path):
        return {}
    counts = {}
    for r in read_rows(TOOL, path, ("model", "status", "n_params")):
        if r["status"] == "ok":
            counts.setdefault(r["model"], set()).add(whole(path, r, "n_params"))
    return {m: f"{min(c):,}" if len(c) == 1 else f"{min(c):,}–{max(c):,}" for m, c in counts.items()}


def curve_epochs(last):
    """The epochs a learning curve shows: 1, 2, 5, every fifth after it, and the last."""
    return sorted({e for e in (1, 2, 5, *range(10, last + 1, 5), last) if e <= last})


def learning_curves(sweep, label):
    """Table lines of test accuracy by epoch for each model of sweep/trajectory.csv (none where
    the sweep has no such file): the mean over the seeds whose curve reaches the model's last
    epoch, the lowest and highest seed in brackets, and each seed's best epoch. On the standard
    split the held-out images are the test images, so the held-out error is the test error."""
    path = os.path.join(sweep, "trajectory.csv")
    if not os.path.exists(path):
        return []
    acc = {}  # model -> seed -> epoch -> test accuracy
    for r in read_rows(TOOL, path, ("seed", "model", "epoch", "heldout_error")):
        if not (r.get("heldout_error") or "").strip():
            fail(f"{path}: a row without its test error (column 'heldout_error')")
        a = 1 - number(TOOL, path, r, "heldout_error")
        acc.setdefault(r["model"], {}).setdefault(whole(path, r, "seed"), {})[whole(path, r, "epoch")] = a
    lines = []
    for model in sorted(acc):
        seeds = acc[model]
        last = max(max(e) for e in seeds.values())
        full = {s: c for s, c in seeds.items() if all(e in c for e in range(1, last + 1))}
        if not full:
            continue
        epochs = curve_epochs(last)
        if not lines:
            lines = ["| model | seeds | " + " | ".join(f"epoch {e}" for e in epochs) + " | best epoch |",
                     "|---|---|" + "---|" * len(epochs) + "---|"]
        cells = []
        for e in epochs:
            v = [c[e] for c in full.values()]
            cells.append(f"{sum(v) / len(v):.4f}" + (f" [{min(v):.4f}, {max(v):.4f}]" if len(v) > 1 else ""))
        best = [max(c.values()) for c in full.values()]
        at = sorted(max(c, key=lambda e: (c[e], -e)) for c in full.values())
        cells.append(f"{sum(best) / len(best):.4f} (epoch {at[0]}" + (f"–{at[-1]})" if at[-1] != at[0] else ")"))
        lines.append(f"| `{model}` ({label}/) | {len(full)} | " + " | ".join(cells) + " |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    d = a.dir
    nn1 = read_json(os.path.join(d, "nn1.json"))
    ref = read_json(os.path.join(d, "nn1_numpy.json"))
    model = next((m for m in nn1["models"] if m["name"] == "nn1"), None)
    if model is None:
        fail(f"{d}/nn1.json: no nn1 model")
    n_test = ref["test_images"]
    ours = round(model["heldout"] * n_test)
    lines = [
        "# Fashion-MNIST, the standard split, beside the published figures",
        "",
        "Generated by `tools/make_results.sh fashion` (tools/fashion_table.py); test accuracy on the",
        f"{n_test:,} test images after training on the 60,000 training images, pixels / 255.",
        "",
        "| model here | parameters | seeds | epochs | test accuracy (95 % CI over seeds) | published | source |",
        "|---|---|---|---|---|---|---|",
        f"| `nn1` (raw pixels, Euclidean) | — | deterministic | — | {model['heldout']:.4f} ({ours:,} of {n_test:,}) |"
        f" {ANCHORS['nn1'][0]} | {ANCHORS['nn1'][1]} |",
    ]
    rows = sweep_rows(d)
    params = {sweep: n_params(os.path.join(d, sweep)) for sweep in {r[6] for r in rows}}
    for name, n, mean, lo, hi, epochs, sweep, how in rows:
        anchor, source = ANCHORS.get(name, ("—", "—"))
        label = f"`{name}`" + (f" ({how})" if how else "")
        lines.append(f"| {label} | {params[sweep].get(name, '—')} | {n} | {epochs} | {mean:.4f} [{lo:.4f}, {hi:.4f}] "
                     f"(`{sweep}/`) | {anchor} | {source} |")
    note = few_seeds_note(r[1] for r in rows)
    if note:
        lines += ["", note]
    curves = []
    for sweep in sorted(params):
        table = learning_curves(os.path.join(d, sweep), sweep)
        curves += table if not curves else table[2:]
    if curves:
        lines += ["", "**Learning curves.** Test accuracy after each epoch, the mean over the seeds with the lowest and "
                  "highest seed in brackets (each sweep's `trajectory.csv`); the last column is the mean of each "
                  "seed's best epoch, and which epochs those were. The standard split has no validation part "
                  "unless asked for, so a best epoch is chosen on the test images: read it as an upper bound.",
                  "", *curves]
    agree = "equal" if ours == ref["correct"] else "DIFFERENT"
    lines += [
        "",
        "**1-NN checked exactly.** An independent numpy 1-NN on the same files (tools/fashion_nn1.py:",
        "exact integer distances, the first training image among equals) classifies",
        f"{ref['correct']:,} of {n_test:,} test images correctly ({ref['accuracy']:.4f}; "
        f"{ref['queries_with_tied_nearest']} queries have a tied nearest image); viewgap's `nn1`, {ours:,}: {agree}.",
        "",
    ]
    write_table(TOOL, os.path.join(d, "table.md"), "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
