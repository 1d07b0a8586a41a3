#!/usr/bin/env python3
"""Every model's speed on Fashion-MNIST (28 x 28 x 1, 10 classes): training and evaluation.

For each model, N rounds of `viewgap run --data fashion-mnist --models M --n-epochs 1
--threads 1 --reproducible --quiet` (models alternating within a round), read from the run's
JSON (`timing_s`, docs/results.md):
- training images/s: the batch (32) over the median training step (`timing_s.steps.median`);
- evaluation images/s: the 10,000 test images the epoch's end scores (in inference mode, at the
  evaluation batch; the standard split's familiar and held-out splits are both the test set,
  scored once) over its seconds (`timing_s.eval`);
- the epoch's wall time: its training steps (`timing_s.train`) and that evaluation. A model given
  --max-steps S (`--max-steps M=S`, for the slow ones) trains S steps; its epoch is then
  extrapolated, 1,875 median steps plus the evaluation measured, and says so.
Prints each run, then per model the medians over the rounds. One thread; for a quiet machine.

Usage: python3 bench/fashion_speed.py [--rounds N] [--models M,...] [--max-steps M=S ...]
       (from the repository root, after a release build; needs Debian's dataset-fashion-mnist)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODELS = "caps,cnn,cnn-paper,dr,convcaps,nn1,linear"
STEPS_PER_EPOCH = 60000 // 32 + (60000 % 32 > 0)
# Fit in one pass (no training steps): run refuses the training flags for it.
ONE_PASS = {"nn1"}


def fail(msg):
    print(f"fashion_speed.py: {msg}", file=sys.stderr)
    sys.exit(2)


def whole(flag, text, lo=1):
    try:
        v = int(text)
    except ValueError:
        v = lo - 1
    if v < lo:
        fail(f"{flag} '{text}': expected a whole number >= {lo}")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", default="3")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--max-steps", action="append", default=[], metavar="M=S")
    ap.add_argument("--exe", default="build/release/viewgap")
    a = ap.parse_args()
    rounds = whole("--rounds", a.rounds)
    models = a.models.split(",")
    if not all(models) or len(set(models)) != len(models):
        fail(f"--models '{a.models}': expected distinct model names, comma-separated")
    budget = {}
    for entry in a.max_steps:
        m, eq, s = entry.partition("=")
        if not eq or m not in models:
            fail(f"--max-steps '{entry}': expected M=S with M among --models '{a.models}'")
        budget[m] = whole("--max-steps", s)
    if not os.access(a.exe, os.X_OK):
        fail(f"--exe '{a.exe}': not an executable (build first)")

    runs = {m: [] for m in models}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for m in models:
                out = os.path.join(tmp, f"{m}.json")
                cmd = [a.exe, "run", "--data", "fashion-mnist", "--models", m, "--threads", "1",
                       "--reproducible", "--quiet", "--out-json", out] + ([] if m in ONE_PASS else ["--n-epochs", "1"])
                if m in budget:
                    cmd += ["--max-steps", str(budget[m])]
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    fail(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
                with open(out) as f:
                    j = json.load(f)
                t = j["models"][0]["timing_s"]
                sizes = j["dataset"]["sizes"]
                if sizes["familiar"] != sizes["heldout"] or sizes["validation"] != 0:
                    fail(f"{m}: expected the standard split (familiar = held-out, no validation), got {sizes}")
                step = t["steps"]["median"] if t["steps"] else None
                train_ips = 32 / step if step else None
                eval_ips = sizes["familiar"] / t["eval"]
                epoch_eval = t["eval"]
                epoch = t["train"] + epoch_eval if m not in budget else STEPS_PER_EPOCH * step + epoch_eval
                runs[m].append((train_ips, eval_ips, epoch))
                shown = f"{train_ips:9.1f}" if train_ips else "        —"
                print(f"round {r + 1}: {m:<9} train {shown} img/s, evaluation {eval_ips:9.1f} img/s, "
                      f"epoch {epoch:7.1f} s{' (extrapolated)' if m in budget else ''}", flush=True)
    print(f"\n{rounds} rounds; Fashion-MNIST's standard split, one thread, batch 32 (medians)")
    print("| model | training images/s | evaluation images/s | epoch wall time, s |")
    print("|---|---|---|---|")
    for m in models:
        tr = [x[0] for x in runs[m] if x[0]]
        train = f"{statistics.median(tr):.1f}" if tr else "— (fit in one pass)"
        ev = statistics.median(x[1] for x in runs[m])
        ep = statistics.median(x[2] for x in runs[m])
        note = f" (extrapolated from {budget[m]} steps)" if m in budget else ""
        print(f"| `{m}` | {train} | {ev:.1f} | {ep:.1f}{note} |")


if __name__ == "__main__":
    main()
