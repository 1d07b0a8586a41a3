#!/usr/bin/env python3
"""Figures from viewgap's own outputs (PNG, plus a GIF of training).

  python3 tools/plot.py run RUN_JSON_OR_DUMP_DIR --out DIR [--no-gif]
  python3 tools/plot.py sweep SWEEP_DIR --out DIR [--gap G]
  python3 tools/plot.py norb NORB_DIR --out DIR

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
per grid point). A sweep run with --validation on has frontier.csv: sweep_frontier.png (per grid
point) draws each model's novel error against the familiar validation error it reached, with the
published points of its kind of change marked (the paper's Table 2 points of its
viewpoint protocol, or Sabour et al.'s affNIST result for an in-plane change); without validation errors it is skipped with a note. Rows of kind paired-grid (`sweep --pair-grid 'A|B'`) get
sweep_paired_grid.png: a row of panels per pairing, a line per model, A - B against gap.
CIs are error bars at a few x (a one-gap sweep too) and bands between many; every model
has its own colour, marker and line style, and series sharing an x are set slightly
apart, so a line under another (cnn under cnn136) still shows. It reads schema 4 and
schema 3 (before the axis columns: an azimuth axis in degrees).

`norb` takes a directory of smallNORB's six files (smallNORB's own, or `viewgap export-norb
DIR`'s, e.g. --shapes toys): every toy of every category at one view (norb_instances.png),
each category's first training and test toy around the circle (norb_viewpoints.png), and the
lightings with the stereo pair's right camera (norb_lightings.png).

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
import os
import sys

try:
    import numpy  # noqa: F401
    import matplotlib  # noqa: F401
except ImportError:
    # `python3` may be a pyenv or venv interpreter without Debian's dist-packages.
    if os.path.exists("/usr/bin/python3") and not os.environ.get("VIEWGAP_PLOT_REEXEC"):
        os.environ["VIEWGAP_PLOT_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.stderr.write("plot.py: error: matplotlib/numpy not found: install python3-matplotlib "
                     "python3-numpy (bash tools/deps.sh)\n")
    sys.exit(2)

# The figures live in the package viewgap_plots beside this file (its __init__ lists the modules);
# found from here, so that plot.py runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.files import InputError  # noqa: E402
from viewgap_plots.run_figures import cmd_run  # noqa: E402
from viewgap_plots.sweep_figures import cmd_sweep  # noqa: E402
from viewgap_plots.norb_figures import cmd_norb  # noqa: E402


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
    n = sub.add_parser("norb", help="figures of a smallNORB-format directory (e.g. export-norb --shapes toys)")
    n.add_argument("input", help="the directory of the six files")
    n.add_argument("--out", required=True, help="output directory for the PNGs")
    args = ap.parse_args(argv)
    try:
        written, skipped, why = {"run": cmd_run, "sweep": cmd_sweep, "norb": cmd_norb}[args.cmd](args)
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
