#!/usr/bin/env python3
"""Reproduce the seed's three-seed table (and a ten-seed mean) with viewgap.

Runs `viewgap run` for each seed at the default configuration, then writes
results/seed_table.csv (long form: seed,model,familiar,heldout,drop) and
results/seed_table.md (the table beside the seed's numbers, with the machine
and wall time), both atomically.

Usage: python3 tools/seed_table.py [--seeds 10] [--exe build/release/viewgap] [--out results]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

# The package beside this file, found from here so that this runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.table_io import fail as fail_as, write_table  # noqa: E402

TOOL = "seed_table.py"
SEED_TABLE = {"caps": (0.970, 0.726, 0.244), "cnn": (1.000, 0.696, 0.304)}


def fail(msg):
    fail_as(TOOL, msg)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--exe", default="build/release/viewgap")
    ap.add_argument("--out", default="results")
    ap.add_argument("--reproducible", action="store_true",
                    help="run viewgap --reproducible (the same bits on every AVX2+FMA CPU)")
    a = ap.parse_args()
    if a.seeds < 3:
        fail("--seeds must be >= 3, got %d" % a.seeds)
    if not os.access(a.exe, os.X_OK):
        fail("--exe '%s' is not an executable (build first)" % a.exe)
    os.makedirs(a.out, exist_ok=True)
    rows, t0, meta = [], time.time(), None
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(a.seeds):
            path = os.path.join(tmp, "run.json")
            subprocess.run([a.exe, "run", "--quiet", "--seed", str(s), "--threads", "1",
                            "--out-json", path] + (["--reproducible"] if a.reproducible else []),
                           check=True, stdout=subprocess.DEVNULL)
            j = json.load(open(path))
            meta = j["meta"]
            for m in j["models"]:
                rows.append((s, m["name"], m["familiar"], m["heldout"], m["drop"]))
    wall = time.time() - t0
    csv = "seed,model,familiar,heldout,drop\n" + "".join(
        "%d,%s,%.6f,%.6f,%.6f\n" % r for r in rows)
    write_table(TOOL, os.path.join(a.out, "seed_table.csv"), csv)

    def mean(model, col, seeds):
        return statistics.mean(r[col] for r in rows if r[1] == model and r[0] in seeds)

    md = ["| seed | caps familiar | caps held-out | caps drop | CNN familiar | CNN held-out | CNN drop |",
          "|---|---|---|---|---|---|---|"]
    for s in range(a.seeds):
        c = [r for r in rows if r[0] == s]
        d = {r[1]: r for r in c}
        md.append("| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |" % (
            s, *d["caps"][2:], *d["cnn"][2:]))
    # The seed's three, then every seed: one row when those are the same seeds.
    means = [("mean 0-2", range(3))] + ([("mean 0-%d" % (a.seeds - 1), range(a.seeds))] if a.seeds > 3 else [])
    for label, seeds in means:
        md.append("| **%s** | %s |" % (label, " | ".join(
            "%.3f" % mean(m, col, seeds) for m in ("caps", "cnn") for col in (2, 3, 4))))
    md.append("| seed's table (0-2) | %s |" % " | ".join(
        "%.3f" % v for m in ("caps", "cnn") for v in SEED_TABLE[m]))
    md.append("")
    md.append("Made by `python3 tools/seed_table.py --seeds %d%s` on %s (%d cores), commit %s, "
              "%.1f s wall for %d runs." % (a.seeds, " --reproducible" if a.reproducible else "",
                                             cpu_model(), os.cpu_count(), meta["git_commit"], wall,
                                             a.seeds))
    write_table(TOOL, os.path.join(a.out, "seed_table.md"), "\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
