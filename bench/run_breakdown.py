#!/usr/bin/env python3
"""Where a default `viewgap run`'s time goes, against its FLOP bound.

Runs `viewgap run --quiet --threads T` N times (wall time from outside, the
phases from the JSON's timing_s), then `viewgap profile` for each trained model
(per-layer medians, their FLOPs and the FMA probe's peak of this core), and
prints one table of medians: each part's wall time, the time its FLOPs would
take at the probe's peak, and the difference, which is what keeps the run from
its bound. The training steps are split by layer in the profile's proportions. With
--threads 2 the models' parts run on both cores at once, so the parts add up
to more than the wall time, and the bound is over both cores.

Usage: python3 bench/run_breakdown.py [--runs N] [--threads T] [--exe PATH]
       (from the repository root, after a release build)
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def positive_int(flag):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            v = 0
        if v < 1:
            raise argparse.ArgumentTypeError(f"{flag} '{text}': expected a whole number >= 1")
        return v
    return parse


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=positive_int("--runs"), default=5)
    ap.add_argument("--threads", type=positive_int("--threads"), default=1)
    ap.add_argument("--exe", default="build/release/viewgap")
    a = ap.parse_args()
    if not os.access(a.exe, os.X_OK):
        print(f"run_breakdown.py: --exe '{a.exe}': not an executable (build first)", file=sys.stderr)
        sys.exit(2)

    with tempfile.TemporaryDirectory() as tmp:
        runs, walls = [], []
        for i in range(a.runs):
            out = os.path.join(tmp, f"run{i}.json")
            t0 = time.monotonic()
            subprocess.run([a.exe, "run", "--quiet", "--threads", str(a.threads), "--out-json", out],
                           check=True, stdout=subprocess.DEVNULL)
            walls.append(time.monotonic() - t0)
            with open(out) as f:
                runs.append(json.load(f))
        models = [m["name"] for m in runs[0]["models"]]
        prof = {}
        for m in models:
            out = os.path.join(tmp, f"{m}.csv")
            subprocess.run([a.exe, "profile", "--model", m, "--steps", "300", "--out", out],
                           check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                prof[m] = list(csv.DictReader(f))

    med = statistics.median
    peak = med(float(r["peak_gflops"]) for m in models for r in prof[m]) * 1e9
    d0 = runs[0]["dataset"]["sizes"]
    rows = []  # (part, seconds, bound seconds)

    def add(part, sec, flops=0.0):
        rows.append((part, sec, flops / peak))

    add("process start-up and exit (wall - JSON total)",
        med(w - r["timing_s"]["total"] for w, r in zip(walls, runs)))
    add("data synthesis", med(r["timing_s"]["dataset"] for r in runs))
    if a.threads == 1:  # with more, the models' phases overlap on the cores
        add("outside the phases (models prepared, summaries)",
            med(r["timing_s"]["total"] - r["timing_s"]["dataset"] -
                sum(m["timing_s"][k] for m in r["models"] for k in ("train", "eval", "circle")) for r in runs))
    for i, m in enumerate(models):
        # The median over the runs of f(this model's timing_s).
        t = lambda f: med(f(r["models"][i]["timing_s"]) for r in runs)
        steps = runs[0]["models"][i]["timing_s"]["steps"]
        layers = {(r["layer"], r["pass"]): r for r in prof[m]}
        step_row = layers.get(("step", "step"))
        if steps is None or step_row is None:
            add(f"{m}: fit and evaluation", t(lambda x: x["train"] + x["eval"] + x["circle"]))
            continue
        batch = int(step_row["batch"])
        n_train = runs[0]["config"]["n_epochs"] * d0["train"]
        step_sum = t(lambda x: x["steps"]["sum"])
        first = t(lambda x: x["steps"]["first"] - x["steps"]["median"])
        per_image = lambda r: float(r["flops"]) / batch
        # The profile's step, layer by layer, scaled to this run's steps (the
        # first step's extra set-up shown apart).
        loop = step_sum - first
        for key, r in layers.items():
            if key == ("step", "step"):
                continue
            add(f"{m}: {key[0]} {key[1]}", loop * float(r["share"]), per_image(r) * n_train)
        other = 1 - sum(float(r["share"]) for k, r in layers.items() if k != ("step", "step"))
        add(f"{m}: the rest of a step (batch loss, gradient checks)", loop * other)
        add(f"{m}: the first step's excess over the median step", first)
        add(f"{m}: training outside the steps (batches, shuffles, checks)", t(lambda x: x["train"]) - step_sum)
        fwd = sum(float(r["flops"]) for k, r in layers.items() if k[1] == "forward") / batch
        n_eval = len(runs[0]["models"][i]["history"]) * (d0["familiar"] + d0["heldout"])
        add(f"{m}: per-epoch evaluation ({n_eval} images)", t(lambda x: x["eval"]), fwd * n_eval)
        add(f"{m}: circle evaluation ({d0['circle']} images)", t(lambda x: x["circle"]), fwd * d0["circle"])

    wall = med(walls)
    cores = min(a.threads, os.cpu_count() or 1)
    bound = sum(b for _, _, b in rows)
    print(f"viewgap run --threads {a.threads}, medians of {a.runs} runs; FMA peak {peak / 1e9:.1f} GFLOP/s "
          f"({str(cores) + ' cores: ' if cores > 1 else ''}bound = FLOPs / {'(cores x peak)' if cores > 1 else 'peak'})")
    print(f"{'part':<62} {'wall ms':>8} {'bound ms':>9} {'lost ms':>8}")
    for part, sec, b in rows:
        print(f"{part:<62} {sec * 1e3:8.1f} {b * 1e3:9.1f} {(sec - b) * 1e3:8.1f}")
    print(f"{'sum of the parts' + (' (medians: not quite the wall time)' if cores == 1 else ' (on ' + str(cores) + ' cores at once)'):<62} "
          f"{sum(s for _, s, _ in rows) * 1e3:8.1f} {bound * 1e3:9.1f}")
    print(f"{'wall time':<62} {wall * 1e3:8.1f} {bound / cores * 1e3:9.1f}")
    print(f"share of the FLOP bound: {bound / cores / wall * 100:.0f} % "
          f"({bound * peak / 1e9:.1f} GFLOP in {wall:.3f} s on {cores} core(s) of {peak / 1e9:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
