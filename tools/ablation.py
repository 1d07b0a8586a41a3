#!/usr/bin/env python3
"""The routing/loss ablation: a table and a figure from viewgap sweeps over
--em-grad x --loss x --em-lambda-schedule, and whether the class activations
carry the class in each variant.

  ablation.py --sweep "seed split=DIR" --sweep "gap 90=DIR" --exe build/release/viewgap \
              --seeds 10 --out results

Reads each DIR's summary.csv (written by `viewgap sweep ... --grid ...`), runs
`viewgap run --models caps --reproducible` for --seeds seeds of every variant at
the seed's split to read the class activations from the run JSON, and writes
OUT/ablation.md and OUT/figures/ablation.png. Errors are one line, exit 2.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

# The package beside this file, found from here so that this runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.few_seeds import few_seeds_note  # noqa: E402
from viewgap_plots.table_io import fail as fail_as, write_table  # noqa: E402

TOOL = "ablation.py"
VARIANT_FLAGS = ("em-grad", "loss", "em-lambda-schedule")


def fail(msg):
    fail_as(TOOL, msg)


def variant_name(grid):
    """'em-grad=full;loss=spread;em-lambda-schedule=official' -> 'full / spread / official'."""
    kv = dict(p.split("=", 1) for p in grid.split(";") if "=" in p)
    return " / ".join(kv.get(k, "?") for k in VARIANT_FLAGS)


def read_summary(d):
    path = os.path.join(d, "summary.csv")
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    out = {}
    for r in rows:
        out[(r["grid"], r["kind"], r["model"], r["metric"])] = r
    grids = list(dict.fromkeys(r["grid"] for r in rows))
    if not grids or not all(variant_name(g).count("?") == 0 for g in grids):
        fail(f"{path}: not a sweep over --grid {', '.join(VARIANT_FLAGS)}")
    return grids, out


def fmt_ci(r):
    return f"{float(r['mean']):+.3f} [{float(r['ci_lo']):+.3f}, {float(r['ci_hi']):+.3f}]"


def activation_stats(exe, grid, seeds):
    kv = dict(p.split("=", 1) for p in grid.split(";"))
    acc, true, other = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(seeds):
            path = os.path.join(tmp, "run.json")
            args = [exe, "run", "--models", "caps", "--reproducible", "--quiet", "--seed", str(s), "--out-json", path]
            for k, v in kv.items():
                args += [f"--{k}", v]
            r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                fail(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
            m = json.load(open(path))["models"][0]["class_activations"]
            acc.append(m["heldout_argmax_accuracy"])
            true.append(m["heldout_mean_true"])
            other.append(m["heldout_mean_other"])
    return statistics.mean(acc), statistics.mean(true), statistics.mean(other)


def figure(splits, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), sharey=False)
    markers = ["o", "s", "^", "D"]
    for si, (name, grids, s) in enumerate(splits):
        x = range(len(grids))
        off = (si - (len(splits) - 1) / 2) * 0.18
        caps = [s[(g, "model", "caps", "heldout")] for g in grids]
        axes[0].errorbar([i + off for i in x], [float(r["mean"]) for r in caps],
                         yerr=[[float(r["mean"]) - float(r["ci_lo"]) for r in caps],
                               [float(r["ci_hi"]) - float(r["mean"]) for r in caps]],
                         fmt=markers[si % 4], capsize=3, label=f"caps, {name}")
        cnn = [float(s[(g, "model", "cnn", "heldout")]["mean"]) for g in grids]
        axes[0].hlines(statistics.mean(cnn), -0.5, len(grids) - 0.5, colors=f"C{si}", linestyles="--",
                       label=f"CNN, {name}")
        d = [s[(g, "paired", "caps-cnn", "heldout")] for g in grids]
        axes[1].errorbar([i + off for i in x], [float(r["mean"]) for r in d],
                         yerr=[[float(r["mean"]) - float(r["ci_lo"]) for r in d],
                               [float(r["ci_hi"]) - float(r["mean"]) for r in d]],
                         fmt=markers[si % 4], capsize=3, label=name)
    labels = [variant_name(g).replace(" / ", "\n") for g in splits[0][1]]
    for ax in axes:
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("held-out accuracy (mean, 95 % CI)")
    axes[0].set_title("capsule variants (em-grad / loss / lambda schedule)")
    axes[1].axhline(0, color="k", lw=0.8)
    axes[1].set_ylabel("caps - CNN held-out accuracy (paired mean, 95 % CI)")
    axes[1].set_title("paired difference to the CNN")
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="append", required=True, help="NAME=DIR of a viewgap sweep")
    ap.add_argument("--exe", default="build/release/viewgap")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per variant for the activation table")
    ap.add_argument("--out", default="results")
    a = ap.parse_args()
    if not os.access(a.exe, os.X_OK):
        fail(f"--exe '{a.exe}' is not an executable (build first)")
    if a.seeds < 1:
        fail(f"--seeds must be >= 1, got {a.seeds}")
    splits = []
    for spec in a.sweep:
        if "=" not in spec:
            fail(f"--sweep '{spec}': expected NAME=DIR")
        name, d = spec.split("=", 1)
        grids, s = read_summary(d)
        splits.append((name, grids, s))
    os.makedirs(os.path.join(a.out, "figures"), exist_ok=True)

    md = ["| variant (em-grad / loss / λ schedule) | split | caps familiar | caps held-out | caps drop | CNN held-out "
          "| caps − CNN held-out (95 % CI) | caps better / tie / worse | Wilcoxon p |",
          "|---|---|---|---|---|---|---|---|---|"]
    n_pairs = []
    for g in splits[0][1]:
        for name, grids, s in splits:
            if g not in grids:
                fail(f"sweep '{name}' lacks the grid point {g}")
            m = lambda model, metric: float(s[(g, "model", model, metric)]["mean"])
            p = s[(g, "paired", "caps-cnn", "heldout")]
            n_pairs.append(p["n"])
            md.append(f"| {variant_name(g)} | {name} | {m('caps', 'familiar'):.3f} | {m('caps', 'heldout'):.3f} "
                      f"| {m('caps', 'drop'):.3f} | {m('cnn', 'heldout'):.3f} | {fmt_ci(p)} "
                      f"| {p['wins']} / {p['ties']} / {p['losses']} | {float(p['p_value']):.2g} |")
    note = few_seeds_note(n_pairs, "Rows", n_pairs)
    if note:
        md += ["", note]
    md += ["", f"Do the class activations carry the class? Held-out split of the seed's configuration, "
               f"seeds 0–{a.seeds - 1}, `viewgap run --models caps --reproducible` per variant: how often the true "
               f"class has the largest activation, and the mean activation of the true class and of the others.",
           "", "| variant | argmax(a) = class | mean a (true class) | mean a (other classes) |", "|---|---|---|---|"]
    for g in splits[0][1]:
        acc, t, o = activation_stats(a.exe, g, a.seeds)
        md.append(f"| {variant_name(g)} | {acc:.3f} | {t:.3f} | {o:.3f} |")
    write_table(TOOL, os.path.join(a.out, "ablation.md"), "\n".join(md) + "\n")
    figure(splits, os.path.join(a.out, "figures", "ablation.png"))
    print("\n".join(md))


if __name__ == "__main__":
    main()
