#!/usr/bin/env python3
"""Tests of tools/plot.py: every figure is written, decodes and is not blank; bad input
is one line on stderr with exit code 2.

  python3 tests/test_plots.py            (plain unittest; exit code 1 on failure)

Runs on the outputs of a tiny real `viewgap run` (and `run --dump`, `sweep`, when the
binary has them), and on the fixtures in tools/fixtures/ otherwise. The binary is
$VIEWGAP_EXE, or build/release/viewgap; the real-run tests are skipped without it.
"""
import csv
import json
import os
import shutil
import stat
import importlib.util
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    from PIL import Image
except ImportError:
    # `python3` may be a pyenv or venv interpreter without Debian's dist-packages.
    if os.path.exists("/usr/bin/python3") and not os.environ.get("VIEWGAP_PLOT_REEXEC"):
        os.environ["VIEWGAP_PLOT_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOT = os.path.join(ROOT, "tools", "plot.py")
PACKAGE = os.path.join(ROOT, "tools", "viewgap_plots")  # plot.py's modules
FIXTURES = os.path.join(ROOT, "tools", "fixtures")
EXE = os.environ.get("VIEWGAP_EXE") or os.path.join(ROOT, "build", "release", "viewgap")

RUN_ONLY = ["training_curves.png", "familiar_heldout.png", "circle_accuracy.png"]
DUMP_ONLY = ["dataset_azimuths.png", "dataset_elevations.png", "capsule_poses.png"]
RECONSTRUCTIONS = "reconstructions.png"  # a dump with a decoder's images (dr)
SWEEP = ["sweep_gap.png", "sweep_paired.png", "sweep_distance.png"]
VARIANCE_FLOOR = 1e-3  # of grey levels in [0, 1]; a blank figure has 0


def has_exe():
    return os.path.isfile(EXE) and os.access(EXE, os.X_OK)


def exe_supports(*args):
    """True if `viewgap ARGS --help` succeeds and (for a flag) mentions it."""
    if not has_exe():
        return False
    sub, flag = args[0], (args[1] if len(args) > 1 else None)
    r = subprocess.run([EXE, sub, "--help"], capture_output=True, text=True)
    return r.returncode == 0 and (flag is None or flag in r.stdout)


def plot(*args):
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True)


def viewgap(*args):
    r = subprocess.run([EXE, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"viewgap {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")


def viewgap_outcome(*args):
    """`viewgap ARGS`, its exit code and output (no check)."""
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)


def package_modules():
    return sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py")


def plots():
    """The package behind plot.py, its modules loaded (its readers and figures, to check what they read
    and draw): plots().tables.read_sweep, plots().paired_figures.fig_sweep_paired, ..."""
    import importlib
    if os.path.dirname(PACKAGE) not in sys.path:
        sys.path.insert(0, os.path.dirname(PACKAGE))
    for m in package_modules():
        importlib.import_module("viewgap_plots." + m)
    return sys.modules["viewgap_plots"]


def verdict_module():
    """tools/verdict_table.py loaded as a module, to call its functions."""
    spec = importlib.util.spec_from_file_location("verdict_table", os.path.join(ROOT, "tools", "verdict_table.py"))
    v = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(v)
    return v


class PlotTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test_plots.")
        self.addCleanup(shutil.rmtree, self.tmp)

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def assert_sweep_plots_on_axis(self, d, version, axis):
        """Sweep `d` of format `version` plots, and its tables read as on `axis`; its summary and distance rows."""
        with open(os.path.join(d, "meta.json")) as f:
            self.assertEqual(json.load(f)["schema_version"], version)
        out = self.path("fig")
        self.assert_plotted(plot("sweep", d, "--out", out), out, SWEEP)
        _, summary, az_rows, cells, _ = plots().tables.read_sweep(d)
        for rows in (summary, az_rows, cells):
            self.assertEqual(plots().tables.axis_of(rows), axis)
        return summary, az_rows

    def assert_plotted(self, r, out, names):
        self.assertEqual(r.returncode, 0, r.stderr)
        for n in names:
            p = os.path.join(out, n)
            self.assertTrue(os.path.isfile(p), f"{n} not written")
            with Image.open(p) as im:
                frames = getattr(im, "n_frames", 1)
                if n.endswith(".gif"):
                    self.assertGreaterEqual(frames, 2, f"{n}: not animated")
                for k in range(frames):
                    im.seek(k)
                    a = np.asarray(im.convert("L"), dtype=np.float64) / 255
                    self.assertGreater(min(a.shape), 200, f"{n}: tiny image {a.shape}")
                    self.assertGreater(a.var(), VARIANCE_FLOOR, f"{n} frame {k}: blank")
        leftovers = [f for f in os.listdir(out) if f.startswith(".tmp.")]
        self.assertEqual(leftovers, [], "temporary files left behind")

    def assert_error(self, r, needle):
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("plot.py: error: "), lines[0])
        self.assertIn(needle, lines[0])

    # -- from fixtures (no binary needed) --

    def test_fixture_dump(self):
        dump = self.path("dump")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "dump", dump,
                        "--run", os.path.join(FIXTURES, "run.json")], check=True)
        out = self.path("fig")
        self.assert_plotted(plot("run", dump, "--out", out), out,
                            RUN_ONLY + DUMP_ONLY + [RECONSTRUCTIONS, "training.gif"])

    def test_fixture_dump_without_a_decoder_and_of_version_1(self):
        dump = self.path("dump")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "dump", dump,
                        "--run", os.path.join(FIXTURES, "run.json")], check=True)
        os.remove(os.path.join(dump, "reconstructions.npy"))
        self.edit_json(dump, "dump.json", lambda d: d.update(reconstructions=None))
        out = self.path("fig")
        r = plot("run", dump, "--out", out, "--no-gif")
        self.assert_plotted(r, out, RUN_ONLY + DUMP_ONLY)
        self.assertIn("reconstructions.png (none in the dump", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, RECONSTRUCTIONS)))
        # A version 1 dump (before reconstructions) still plots.
        self.edit_json(dump, "dump.json", lambda d: (d.pop("reconstructions"), d.update(schema_version=1)))
        shutil.rmtree(out)
        self.assert_plotted(plot("run", dump, "--out", out, "--no-gif"), out, RUN_ONLY + DUMP_ONLY)
        self.assertFalse(os.path.exists(os.path.join(out, RECONSTRUCTIONS)))

    def test_fixture_sweep(self):
        out = self.path("fig")
        self.assert_plotted(plot("sweep", os.path.join(FIXTURES, "sweep"), "--out", out), out, SWEEP)
        r = plot("sweep", os.path.join(FIXTURES, "sweep"), "--out", out, "--gap", "30")
        self.assert_plotted(r, out, ["sweep_distance_gap30.png"])

    def test_fixture_sweep_frontier(self):
        """frontier.csv (tools/fixtures/make_fixtures.py frontier): sweep_frontier.png, a line per model
        over the levels seeds reached, and the paper's Table 2 points of its protocol (azimuth) on
        every panel; an in-plane axis gets Sabour et al.'s affNIST points instead. A frontier without
        rows (a sweep without --validation on) is skipped with a note."""
        d = self.path("sweep")
        shutil.copytree(os.path.join(FIXTURES, "sweep"), d)
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d], check=True)
        out = self.path("fig")
        r = plot("sweep", d, "--out", out)
        self.assert_plotted(r, out, SWEEP + ["sweep_frontier.png"])
        self.assertNotIn("skipped", r.stderr)
        m = plots().frontier_figures
        figs = self.captured_figures(m)
        rows = m.read_frontier(d)
        m.fig_sweep_frontier(rows, "t", out, "", [])
        axes = figs["sweep_frontier.png"].axes
        self.assertEqual(len(axes), 3)  # gaps 0, 30, 60
        for ax in axes:
            points = {(round(float(l.get_xdata()[0]), 3), round(float(l.get_ydata()[0]), 3))
                      for l in ax.lines if len(l.get_xdata()) == 1}
            self.assertEqual({(f, n) for p, _, f, n in plots().published.PAPER_TABLE2 if p == "azimuth"}, points)
            self.assertLessEqual(ax.get_ylim()[0], 0)
            self.assertGreaterEqual(ax.get_ylim()[1], max(r["ci_hi"] for r in rows if r["kind"] == "model"))
        m.fig_sweep_frontier([{**r, "axis": "shift"} for r in rows], "t", out, "", [])
        points = {(round(float(l.get_xdata()[0]), 4), round(float(l.get_ydata()[0]), 4))
                  for l in figs["sweep_frontier.png"].axes[0].lines if len(l.get_xdata()) == 1}
        self.assertEqual({(0.0078, 0.34), (0.0077, 0.21)}, points)
        m.fig_sweep_frontier([{**r, "axis": "none"} for r in rows], "t", out, "", [])  # a standard split: none
        self.assertFalse([l for l in figs["sweep_frontier.png"].axes[0].lines if len(l.get_xdata()) == 1])
        # caps reaches the lowest level on every seed, cnn on one: their lines start there with those n.
        first = {r["model"]: r for r in rows if r["level"] == 0.02 and r["gap"] == 0 and r["metric"] == "heldout_error"}
        self.assertEqual((first["caps"]["n"], first["cnn"]["n"]), (5, 1))
        # A header alone: no figure, a note that says why.
        with open(os.path.join(d, "frontier.csv")) as f:
            header = f.readline()
        with open(os.path.join(d, "frontier.csv"), "w") as f:
            f.write(header)
        out2 = self.path("fig2")
        r = plot("sweep", d, "--out", out2)
        self.assert_plotted(r, out2, SWEEP)
        self.assertFalse(os.path.exists(os.path.join(out2, "sweep_frontier.png")))
        self.assertIn("skipped: sweep_frontier.png (no validation trajectories", r.stderr)

    def test_results_sweep_of_schema_3(self):
        """results/ holds sweeps of schema 3 (before the axis columns): they still plot, on an azimuth axis."""
        d = os.path.join(ROOT, "results", "sweep_canonical")
        summary, az_rows = self.assert_sweep_plots_on_axis(d, 3, ("azimuth", "deg"))
        self.assertIn("true_gap", summary[0])
        self.assertIn("distance", az_rows[0])

    def captured_figures(self, m):
        """Make figure module m's save() keep each figure (its artists to check) instead of writing it."""
        figs = {}

        def keep(fig, path, written):
            figs[os.path.basename(path)] = fig
            written.append(path)
        self.addCleanup(setattr, m, "save", m.save)
        self.addCleanup(lambda: [m.plt.close(f) for f in figs.values()])
        m.save = keep
        return figs

    def test_results_grid_sweep_of_one_gap(self):
        """results/ablation_gap90 (8 grid points, the one gap 90, format 3): ONE paired figure for all
        grid points, not one per grid point; no paired-grid figure (no --pair-grid); the CIs of a
        one-gap figure are error bars (fill_between draws nothing at a single x)."""
        d = os.path.join(ROOT, "results", "ablation_gap90")
        out = self.path("fig")
        r = plot("sweep", d, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        written = [os.path.basename(p) for p in r.stdout.split()]
        self.assertEqual([n for n in written if n.startswith("sweep_paired")], ["sweep_paired.png"])
        self.assert_plotted(r, out, ["sweep_paired.png"])
        self.assertEqual(len([n for n in written if n.startswith("sweep_gap_")]), 8)
        import matplotlib.container
        m = plots().sweep_figures
        _, summary, _, _, _ = plots().tables.read_sweep(d)
        self.assertEqual({r["gap"] for r in summary}, {90.0})
        figs = self.captured_figures(m)
        grid = summary[0]["grid"]
        m.fig_sweep_gap([r for r in summary if r["grid"] == grid], "t", out, "", [])
        heldout = figs["sweep_gap.png"].axes[0]
        bars = [c for c in heldout.containers if isinstance(c, matplotlib.container.ErrorbarContainer)]
        models = {r["model"] for r in summary if r["grid"] == grid and r["kind"] == "model"}
        self.assertEqual(len(bars), len(models), "one set of CI error bars per model")
        for c in bars:
            segs = c.lines[2][0].get_segments()
            self.assertEqual(len(segs), 1)
            (x0, lo), (x1, hi) = segs[0]
            self.assertAlmostEqual(x0, 90, delta=1)  # at the gap, set slightly apart per model
            self.assertLess(lo, hi)
        xs = [c.lines[0].get_xdata()[0] for c in bars]
        self.assertEqual(len(set(xs)), len(xs), "models at one gap drawn side by side, not on top")

    def test_titles_name_source_and_protocol_and_the_circle_shades_the_recorded_views(self):
        """Every title names the data source and protocol; a run recorded on smallNORB-format
        files shades the files' views (300-40 to train on), as its config records them."""
        m, plt = plots().run_figures, plots().style.plt
        with open(os.path.join(FIXTURES, "run.json")) as f:
            old = json.load(f)
        # A run JSON from before "protocol" was recorded: inferred from its fields.
        self.assertIn("; synthetic, azimuth-window: train az 0:150°", m.run_caption(old, "run.json"))
        norb = json.loads(json.dumps(old))
        norb["schema_version"] = 3
        norb["config"].update(
            protocol="norb-paper-azimuth", source="norb",
            data={"norb": "/data/norb", "split": "paper-azimuth", "cameras": "both"},
            train_azimuths={"from": 300, "to": 400, "count": 6, "values": [300, 320, 340, 0, 20, 40]},
            test_azimuths={"from": 60, "to": 280, "count": 12, "values": list(range(60, 300, 20))})
        caption = m.run_caption(norb, "run.json")
        self.assertIn("smallNORB-format /data/norb, norb-paper-azimuth: train az 300:400° (6 views), "
                      "held-out 60:280° (12 views)", caption)
        fig, ax = plt.subplots()
        m.circle_axes(ax, norb, "run.json")
        spans = []
        for p in ax.patches:
            xs = [x for x, _ in p.get_xy()] if hasattr(p, "get_xy") and not hasattr(p, "get_width") \
                else [p.get_x(), p.get_x() + p.get_width()]
            spans.append((min(xs), max(xs)))
        plt.close(fig)
        self.assertIn((299.5, 360.5), spans)  # the training arc, across 0
        self.assertIn((-0.5, 40.5), spans)
        self.assertIn((59.5, 280.5), spans)  # the held-out arc
        self.assertNotIn((-0.5, 150.5), spans)  # not the rendering flags' default
        run = self.write("norb_run.json", json.dumps(norb))
        out = self.path("fig")
        self.assert_plotted(plot("run", run, "--out", out), out, RUN_ONLY)
        # Sweeps: recorded in run_config, or from the flags of an older meta.json.
        sweep_source = plots().sweep_figures.sweep_source
        self.assertEqual(sweep_source({"config": {"run_flags": {"data": "norb:/d", "split": ""}}}),
                         ("smallNORB-format /d", "norb-paper-azimuth"))
        self.assertEqual(sweep_source({"config": {"run_flags": {"split": "paper-elevation"}}}),
                         ("synthetic", "paper-elevation"))
        self.assertEqual(sweep_source({"run_config": {"protocol": "translation"}, "config": {}}),
                         ("synthetic", "translation"))

    def test_every_module_imports_on_its_own_and_plot_py_from_anywhere(self):
        """Each module of the package imports in a fresh interpreter (no hidden dependence on another
        being loaded first); plot.py, loaded by path from another directory, finds its package."""
        for m in ["viewgap_plots"] + ["viewgap_plots." + m for m in package_modules()]:
            with self.subTest(m):
                r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, sys.argv[1]); import {m}",
                                    os.path.dirname(PACKAGE)], capture_output=True, text=True, cwd=self.tmp)
                self.assertEqual(r.returncode, 0, r.stderr)
        load = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('p', sys.argv[1]); "
                "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); assert callable(m.main)")
        r = subprocess.run([sys.executable, "-c", load, PLOT], capture_output=True, text=True, cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)

    # -- from real viewgap outputs --

    @unittest.skipUnless(has_exe(), f"no viewgap binary at {EXE}")
    def test_real_run_json(self):
        run = self.path("run.json")
        viewgap("run", "--n-epochs", "1", "--n-per-combo", "1", "--quiet", "--out-json", run)
        out = self.path("fig")
        r = plot("run", run, "--out", out)
        self.assert_plotted(r, out, RUN_ONLY)
        self.assertIn("skipped", r.stderr)
        for n in DUMP_ONLY:
            self.assertFalse(os.path.exists(os.path.join(out, n)))

    @unittest.skipUnless(has_exe(), f"no viewgap binary at {EXE}")
    def test_real_run_of_an_in_plane_axis(self):
        # A held-out axis that is no viewing angle gets its own figure, titled by its protocol.
        run = self.path("run.json")
        viewgap("run", "--split", "translation", "--n-epochs", "1", "--n-per-combo", "1", "--quiet",
                "--out-json", run)
        out = self.path("fig")
        self.assert_plotted(plot("run", run, "--out", out), out, RUN_ONLY + ["axis_accuracy.png"])
        with open(run) as f:
            axis = json.load(f)["dataset"]["axis"]
        self.assertEqual((axis["name"], axis["unit"], axis["protocol"]), ("shift", "px", "translation"))

    @unittest.skipUnless(has_exe(), f"no viewgap binary at {EXE}")
    def test_real_norb_directory_of_the_toys(self):
        # The toys exported in smallNORB's format, one toy a category and split, two lightings:
        # every toy, the circle and the lightings, each a real picture; a directory that is not
        # one is one line.
        d = self.path("toys")
        viewgap("export-norb", d, "--shapes", "toys", "--instances", "1", "--lightings", "2", "--quiet")
        out = self.path("fig")
        self.assert_plotted(plot("norb", d, "--out", out),
                            out, ["norb_instances.png", "norb_viewpoints.png", "norb_lightings.png"])
        os.remove(os.path.join(d, "smallnorb-5x01235x9x18x6x2x96x96-testing-cat.mat"))
        self.assert_error(plot("norb", d, "--out", out), "testing-cat.mat")

    @unittest.skipUnless(exe_supports("run", "--dump"), "viewgap run has no --dump yet")
    def test_real_run_dump(self):
        dump = self.path("dump")
        # caps first (the poses), cnn without capsules, dr with a decoder (the reconstructions).
        viewgap("run", "--models", "caps,cnn,dr", "--n-epochs", "2", "--n-per-combo", "1", "--quiet",
                "--dump", dump)
        for f in ("run.json", "dump.json", "dataset_azimuths.npy", "dataset_elevations.npy",
                  "reconstructions.npy"):
            self.assertTrue(os.path.isfile(os.path.join(dump, f)), f"viewgap run --dump wrote no {f}")
        with open(os.path.join(dump, "dump.json")) as f:
            rec = json.load(f)["reconstructions"]
        self.assertEqual(rec["model"], "dr")
        self.assertEqual(rec["shape"], [5, 2 + 4 * 6, 32, 32])
        a = np.load(os.path.join(dump, rec["file"]))
        self.assertEqual(list(a.shape), rec["shape"])
        self.assertTrue(((a >= 0) & (a <= 1)).all())
        # A shifted dimension changes the decoder's image.
        self.assertGreater(np.abs(a[:, 2] - a[:, 1]).max(), 1e-4)
        out = self.path("fig")
        self.assert_plotted(plot("run", dump, "--out", out), out,
                            RUN_ONLY + DUMP_ONLY + [RECONSTRUCTIONS, "training.gif"])

    @unittest.skipUnless(exe_supports("sweep"), "viewgap has no sweep yet")
    def test_real_sweep(self):
        sweep = self.path("sweep")
        viewgap("sweep", "--seeds", "0:2", "--gaps", "0,30", "--n-epochs", "1", "--n-per-combo", "1",
                "--jobs", "2", "--quiet", "--out", sweep)
        out = self.path("fig")
        self.assert_plotted(plot("sweep", sweep, "--out", out), out, SWEEP)
        self.assertEqual(plots().tables.axis_of(plots().tables.read_sweep(sweep)[1]), ("azimuth", "deg"))

    @unittest.skipUnless(exe_supports("sweep", "--validation"), "viewgap sweep has no --validation yet")
    def test_real_sweep_with_validation_draws_the_frontier(self):
        sweep = self.path("sweep")
        viewgap("sweep", "--seeds", "0:2", "--gaps", "0,30", "--n-epochs", "3", "--n-per-combo", "1",
                "--models", "cnn,linear", "--reference", "cnn", "--validation", "on", "--jobs", "2", "--quiet", "--out", sweep)
        out = self.path("fig")
        r = plot("sweep", sweep, "--out", out)
        self.assert_plotted(r, out, SWEEP + ["sweep_frontier.png"])
        self.assertNotIn("skipped", r.stderr)

    @unittest.skipUnless(exe_supports("sweep", "--pair-grid"), "viewgap sweep has no --pair-grid yet")
    def test_real_grid_sweep_with_pair_grid(self):
        """A grid sweep: one sweep_paired.png for both grid points, and sweep_paired_grid.png for the
        rows of kind paired-grid (--pair-grid), a line per model; several models' labels apart. The
        grid is over --lr, which every model reads (a grid over --loss would train cnn and cnn136
        once for both points and pair caps alone)."""
        sweep = self.path("sweep")
        viewgap("sweep", "--seeds", "0:2", "--gaps", "0,30", "--n-epochs", "1", "--n-per-combo", "1",
                "--models", "caps,cnn,cnn136", "--grid", "lr=1e-3,2e-3", "--pair-grid", "lr=1e-3|lr=2e-3",
                "--jobs", "2", "--quiet", "--out", sweep)
        out = self.path("fig")
        r = plot("sweep", sweep, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        written = sorted(os.path.basename(p) for p in r.stdout.split())
        self.assertEqual([n for n in written if n.startswith("sweep_paired")],
                         ["sweep_paired.png", "sweep_paired_grid.png"])
        self.assert_plotted(r, out, ["sweep_paired.png", "sweep_paired_grid.png", "sweep_gap_lr-1e-3.png",
                                     "sweep_gap_lr-2e-3.png"])
        m = plots().paired_figures
        _, summary, _, _, _ = plots().tables.read_sweep(sweep)
        pg = [r for r in summary if r["kind"] == "paired-grid"]
        self.assertEqual({r["grid"] for r in pg}, {"lr=1e-3 vs lr=2e-3"})
        figs = self.captured_figures(m)
        m.fig_sweep_paired_grid(pg, "t", out, [])
        ax = figs["sweep_paired_grid.png"].axes[0]
        self.assertEqual(ax.get_legend_handles_labels()[1], ["caps", "cnn", "cnn136"])
        # Without --pair-grid a grid sweep still has one paired figure and no paired-grid one.
        sweep2 = self.path("sweep2")
        viewgap("sweep", "--seeds", "0:1", "--gaps", "30", "--n-epochs", "1", "--n-per-combo", "1",
                "--grid", "loss=spread,xent", "--jobs", "2", "--quiet", "--out", sweep2)
        r = plot("sweep", sweep2, "--out", self.path("fig2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([os.path.basename(p) for p in r.stdout.split() if "sweep_paired" in p], ["sweep_paired.png"])

    @unittest.skipUnless(exe_supports("sweep"), "viewgap has no sweep yet")
    def test_real_one_gap_sweep_of_several_models(self):
        """A one-gap sweep of five models: its figures are written, the paired one with labels apart."""
        sweep = self.path("sweep")
        viewgap("sweep", "--seeds", "0:2", "--gaps", "30", "--n-epochs", "1", "--n-per-combo", "1",
                "--models", "caps,cnn,cnn136,dr,nn1", "--jobs", "2", "--quiet", "--out", sweep)
        out = self.path("fig")
        self.assert_plotted(plot("sweep", sweep, "--out", out), out, SWEEP)
        m = plots().paired_figures
        _, summary, _, _, _ = plots().tables.read_sweep(sweep)
        figs = self.captured_figures(m)
        m.fig_sweep_paired(summary, "t", out, "", [])
        fig = figs["sweep_paired.png"]
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        texts = [t for ax in fig.axes for t in ax.texts if t.get_text()]
        self.assertEqual(texts, [], "no wins/ties/losses labels on the lines (they sit in a table)")
        boxes = [c.get_window_extent(r) for ax in fig.axes for t in ax.tables
                 for c in t.get_celld().values()]
        self.assertGreater(len(boxes), 0)
        for ax in fig.axes:  # the tables lie below their axes, not over the lines
            for t in ax.tables:
                self.assertLess(t.get_window_extent(r).y1, ax.get_window_extent(r).y0)

    @unittest.skipUnless(exe_supports("sweep"), "viewgap has no sweep yet")
    def test_real_elevation_sweep(self):
        """A sweep along the elevation: its tables (schema 4) name the axis, which labels the figures."""
        sweep = self.path("sweep")
        viewgap("sweep", "--test-elevations", "60:80", "--seeds", "0:2", "--gaps", "0,10", "--n-epochs", "1",
                "--n-per-combo", "1", "--jobs", "2", "--quiet", "--out", sweep)
        summary, az_rows = self.assert_sweep_plots_on_axis(sweep, 4, ("elevation", "deg"))
        self.assertEqual(sorted({r["true_gap"] for r in summary}), [0.0, 10.0])

    # -- bad input --

    def write(self, name, text):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def test_bad_run_json(self):
        out = self.path("fig")
        with open(os.path.join(FIXTURES, "run.json")) as f:
            good = json.load(f)
        cases = {
            "malformed.json": ("{\"schema_version\": 1, \"kind\": ", "not valid JSON"),
            "old.json": (json.dumps(dict(good, schema_version=0)), "schema_version 0"),
            "kind.json": (json.dumps(dict(good, kind="viewgap-sweep")), "kind 'viewgap-sweep'"),
            "nomodels.json": (json.dumps({k: v for k, v in good.items() if k != "models"}),
                              "missing field 'models'"),
            "list.json": ("[1, 2]", "not a JSON object"),
        }
        short = json.loads(json.dumps(good))
        short["models"][0]["circle_accuracy"] = [0.5, 0.5]
        cases["short.json"] = (json.dumps(short), "'caps.circle_accuracy' has 2 values")
        for name, (text, needle) in cases.items():
            with self.subTest(name):
                self.assert_error(plot("run", self.write(name, text), "--out", out), needle)
        self.assert_error(plot("run", self.path("absent.json"), "--out", out), "absent.json: no such file")

    def test_bad_dump_dir(self):
        dump = self.path("dump")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "dump", dump,
                        "--run", os.path.join(FIXTURES, "run.json")], check=True)
        os.remove(os.path.join(dump, "dataset_elevations.npy"))
        self.assert_error(plot("run", dump, "--out", self.path("fig")), "dataset_elevations.npy: no such file")
        np.save(os.path.join(dump, "dataset_elevations.npy"), np.zeros((5, 5, 32, 32), np.float32))
        np.save(os.path.join(dump, "reconstructions.npy"), np.zeros((5, 20, 32, 32), np.float32))
        self.assert_error(plot("run", dump, "--out", self.path("fig")),
                          "reconstructions.npy: shape (5, 20, 32, 32), expected (5, 26, H, W)")
        self.edit_json(dump, "dump.json", lambda d: d["reconstructions"].update(file="../x.npy"))
        self.assert_error(plot("run", dump, "--out", self.path("fig")), "'reconstructions.file' must be a file name")

    def test_bad_sweep(self):
        out = self.path("fig")
        for name, edit, needle in (
                ("nometa", lambda d: os.remove(os.path.join(d, "meta.json")), "meta.json: no such file"),
                ("oldmeta", lambda d: self.edit(d, "meta.json", '"schema_version": 3', '"schema_version": 2'),
                 "schema_version 2"),
                ("column", lambda d: self.edit(d, "summary.csv", "ci_lo", "lo"), "missing column(s) ci_lo"),
                ("number", lambda d: self.edit(d, "azimuth.csv", "\n,0,caps,0.0,5,", "\n,0,caps,zero,5,"),
                 "line 2: column 'distance_deg' is not a number")):
            with self.subTest(name):
                d = self.path(name)
                shutil.copytree(os.path.join(FIXTURES, "sweep"), d)
                edit(d)
                self.assert_error(plot("sweep", d, "--out", out), needle)
        self.assert_error(plot("sweep", self.path("absent"), "--out", out), "not a directory")

    def test_toys_table_pairs_each_section_with_its_own_reference(self):
        """tools/toys_table.py: a section's Δ column is against the model every other one is
        paired with (hyphenated names too); a sweep with no such model is one line, exit 2."""
        header = "kind,model,metric,n,mean,ci_lo,ci_hi,wins,ties,losses\n"
        rows = {"paper": header + "model,convcaps,familiar,5,0.8,0.7,0.9,,,\n"
                                  "model,convcaps,heldout,5,0.6,0.5,0.7,,,\n"
                                  "model,cnn-paper,familiar,5,0.9,0.85,0.95,,,\n"
                                  "model,cnn-paper,heldout,5,0.65,0.6,0.7,,,\n"
                                  "paired,cnn-paper-convcaps,heldout,5,0.05,0.01,0.09,4,0,1\n",
                "unpaired": header + "model,caps,familiar,5,0.8,0.7,0.9,,,\n"
                                     "model,caps,heldout,5,0.6,0.5,0.7,,,\n"
                                     "model,cnn,familiar,5,0.9,0.85,0.95,,,\n"
                                     "model,cnn,heldout,5,0.65,0.6,0.7,,,\n"}
        for name, text in rows.items():
            os.makedirs(self.path(name))
            with open(self.path(name, "summary.csv"), "w") as f:
                f.write(text)
        table = os.path.join(ROOT, "tools", "toys_table.py")
        r = subprocess.run([sys.executable, table, "--sweep", "azimuth=" + self.path("paper"), "--out", self.path("t")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("t", "table.md")) as f:
            md = f.read()
        self.assertIn("| model | familiar error | novel error | Δ novel vs cnn-paper |", md)
        # convcaps: error 1 - accuracy with its CI turned round; the CNN's wins are its losses.
        self.assertIn("| convcaps | 0.200 [0.100, 0.300] | 0.400 [0.300, 0.500] | +0.050 [+0.010, +0.090], 1/0/4 |", md)
        self.assertIn("| cnn-paper | 0.100 [0.050, 0.150] | 0.350 [0.300, 0.400] | — |", md)
        r = subprocess.run([sys.executable, table, "--sweep", "azimuth=" + self.path("unpaired"), "--out", self.path("u")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("no one model is paired with every other", r.stderr)
        self.assertFalse(os.path.exists(self.path("u", "table.md")))

    def verdict(self, *args):
        return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "verdict_table.py"), *args],
                              capture_output=True, text=True, cwd=self.tmp)

    def test_verdict_table_compares_at_the_level_both_networks_reach(self):
        """tools/verdict_table.py on the fixture frontier (caps reaches 0.02 on every seed, cnn 0.06
        only): the paper's 3.7 % is below what both reach, so the row compares at 0.06 and says
        so; --target moves the level; the row's Δ is the paired row's; a sweep whose reference is
        the CNN (its pairs cnn-caps) gives the same table, the sign turned and the tallies swapped."""
        d = self.path("az")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d, "--gaps", "20",
                        "--models", "caps,cnn"], check=True)
        with open(os.path.join(d, "frontier.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        pair = {round(float(r["level"]), 3): r for r in rows if r["kind"] == "paired"}

        def table(sweep, *extra):
            out = self.path("v.md")
            r = self.verdict("--sweep", "azimuth=" + sweep, "--caps", "caps", "--cnn", "cnn", "--out", out, *extra)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                md = f.read()
            return md, [l for l in md.splitlines() if l.startswith("| azimuth |")]

        def diff(p):
            return (f"| {float(p['mean']):+.3f} [{float(p['ci_lo']):+.3f}, {float(p['ci_hi']):+.3f}] | "
                    f"{p['wins']}/{p['ties']}/{p['losses']} |")
        md, row = table(d)
        self.assertEqual(len(row), 1, md)
        self.assertIn("| 0.060 (nearest 0.037) |", row[0])
        self.assertIn(diff(pair[0.06]), row[0])
        # Its CI excludes 0, but 5 pairs cannot bring p below 0.05: not resolved, by the one rule.
        self.assertLess(float(pair[0.06]["ci_hi"]), 0)
        self.assertIn("| not resolved (p = 0.062); ", row[0])
        # Halfway between two levels, the lower: 0.0625 is as near 0.06 as 0.065.
        _, row = table(d, "--target", "azimuth=0.0625")
        self.assertIn("| 0.060 (nearest 0.0625) |", row[0])
        self.assertIn("the target 0.037 is below every level both reached on every seed", md)
        self.assertNotIn("do not overlap", md)  # the fixture's familiar errors are 0.9 L for both
        self.assertIn("| 0.060 ← |", md)
        self.assertNotIn("| 0.050 |", md)  # cnn's seeds 1-4 had not reached 0.05
        _, row = table(d, "--target", "azimuth=0.1")
        self.assertIn("| 0.100 (nearest 0.1) |", row[0])
        self.assertIn(diff(pair[0.1]), row[0])
        # The same sweep with the CNN as its reference.
        flipped = self.path("flipped", "az")
        os.makedirs(flipped)
        with open(os.path.join(flipped, "frontier.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            for r in rows:
                if r["kind"] == "paired":
                    neg = {k: f"{-float(r[k]):.6f}" for k in ("mean", "median", "iqm")}
                    r = {**r, **neg, "model": "cnn-caps", "ci_lo": f"{-float(r['ci_hi']):.6f}",
                         "ci_hi": f"{-float(r['ci_lo']):.6f}", "wins": r["losses"], "losses": r["wins"]}
                w.writerow(r)
        self.assertEqual(table(d)[0].replace(d, "DIR"), table(flipped)[0].replace(flipped, "DIR"))

    def test_grid_points_in_titles_join_the_flags_of_one_value(self):
        """A joined grid axis's point names its value once; a grid point without a shared value, or
        that is not flag=value pairs, reads as the sweep wrote it."""
        g = plots().tables.grid_text
        self.assertEqual(g("em-logit=official;em-norm=official;em-mean=official"), "em-logit, em-norm, em-mean=official")
        self.assertEqual(g("a=1;b=2;c=1"), "a, c=1; b=2")
        self.assertEqual(g("em-grad=full;loss=xent"), "em-grad=full;loss=xent")
        self.assertEqual(g(""), "")
        self.assertEqual(g("odd"), "odd")

    def test_verdict_table_reads_every_level_by_the_one_rule(self):
        """The sentence under each level table: a direction where the printed CI excludes 0 and the
        printed p is below 0.05, adjacent levels (0.005 apart) as one run, and how many of each
        direction were tight matches."""
        v = verdict_module()
        d = lambda lo, hi, p: (0.0, lo, hi, 0, 0, 0, p, 10)  # noqa: E731
        self.assertEqual(v.side_of(d(-0.04, -0.01, 0.01)), "ahead")
        self.assertEqual(v.side_of(d(0.01, 0.04, 0.049)), "behind")
        self.assertIsNone(v.side_of(d(-0.04, -0.01, 0.064)))   # p decides
        self.assertIsNone(v.side_of(d(-0.04, -0.0004, 0.01)))  # printed −0.000 holds 0
        self.assertIsNone(v.side_of(d(0.0004, 0.04, 0.01)))    # printed +0.000 holds 0
        self.assertIsNone(v.side_of(d(-0.04, -0.01, 0.0496)))  # printed 0.05 is not below 0.05
        self.assertEqual(v.spans([0.27, 0.28, 0.395, 0.4, 0.405]), "0.270, 0.280, 0.395–0.405")
        text = v.across_levels([(0.3, "ahead", True), (0.305, "ahead", False), (0.4, None, True),
                                (0.6, "behind", False)])
        self.assertIn("At the 4 levels both reach on every seed", text)
        self.assertIn("capsules ahead at 2 (0.300–0.305; 1 of them where", text)
        self.assertIn("capsules behind at 1 (0.600; 0 of them where", text)

    def test_verdict_table_draws_every_model_on_one_frontier(self):
        """--figures DIR: one figure a protocol, the capsule network once per recipe, the CNN once
        and the yardsticks' models, each a line; an output directory that cannot be made is one
        line, exit 2."""
        d, y = self.path("nets"), self.path("yard")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d, "--gaps", "20",
                        "--models", "caps,cnn"], check=True)
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", y, "--gaps", "20",
                        "--models", "caps,dr"], check=True)
        with open(os.path.join(y, "frontier.csv")) as f:  # the yardsticks' caps is another model than the sweep's
            text = f.read().replace(",caps,", ",nn,").replace(",caps-dr,", ",nn-dr,")
        with open(os.path.join(y, "frontier.csv"), "w") as f:
            f.write(text)
        out = self.path("figs")
        r = self.verdict("--sweep", "azimuth=" + d, "--caps", "caps", "--cnn", "cnn",
                         "--out", self.path("v.md"), "--figures", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_plotted(r, out, ["sweep_frontier_azimuth.png"])
        # In process, with the yardsticks (their frontier.csv alone): a line a model, the paper's
        # two azimuth points beside them.
        v = verdict_module()
        figs = self.captured_figures(plots().frontier_figures)
        v.frontier_figures({"azimuth": d}, {"azimuth": y}, "caps", "cnn", None, self.path("figs2"))
        labels = [t.get_text() for t in figs["sweep_frontier_azimuth.png"].axes[0].get_legend().get_texts()]
        self.assertEqual(labels, ["caps", "cnn", "nn", "dr", "CNN, azimuth", "capsules, azimuth"])
        with open(self.path("blocker"), "w") as f:
            f.write("a file where the directory belongs")
        r = self.verdict("--sweep", "azimuth=" + d, "--caps", "caps", "--cnn", "cnn", "--out", self.path("v.md"),
                         "--figures", os.path.join(self.path("blocker"), "sub"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_verdict_table_budget_says_where_each_training_was_lowest(self):
        """The budget rows: trainings, steps, core-hours from cells.csv; from trajectory.csv the mean
        of each training's lowest familiar validation error in the first half of its steps and in
        all of them, and how many reached it in the last tenth of their steps (a tie counts at its
        first step)."""
        d = self.path("az")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d, "--gaps", "20",
                        "--models", "caps,cnn"], check=True)
        with open(os.path.join(d, "cells.csv"), "w") as f:
            f.write("seed,grid,model,status,steps,seconds,n_params\n")
            for seed in (0, 1):
                f.write(f"{seed},,caps,ok,100,3600,68754\n{seed},,cnn,ok,100,720,4253349\n")
        # caps: seed 0 lowest (0.2) at step 95, seed 1 at step 50 (its 0.3 again at 99 is a tie);
        # cnn: seed 0 lowest at step 90, exactly nine tenths (not in the last tenth), seed 1 at 20.
        # In the first half of the 100 steps (step <= 50): caps 0.3 and 0.3, cnn 0.18 and 0.12.
        traj = [(0, "caps", 50, 0.3), (0, "caps", 95, 0.2), (1, "caps", 50, 0.3), (1, "caps", 99, 0.3),
                (0, "cnn", 40, 0.18), (0, "cnn", 90, 0.1), (0, "cnn", 95, 0.15), (1, "cnn", 20, 0.12),
                (1, "cnn", 100, 0.2)]
        with open(os.path.join(d, "trajectory.csv"), "w") as f:
            f.write("cell,seed,gap,grid,model,epoch,step,validation_error,familiar_error,heldout_error\n")
            f.writelines(f"0,{s},20,,{m},1,{step},{e},0.5,0.5\n" for s, m, step, e in traj)
        out = self.path("v.md")
        r = self.verdict("--sweep", "azimuth=" + d, "--caps", "caps", "--cnn", "cnn", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            md = f.read()
        self.assertIn("| azimuth | — | caps | 68,754 | 2 | 100 | 1 | 0.300 | 0.250 | 1 of 2 |", md)
        self.assertIn("| azimuth | — | cnn | 4,253,349 | 2 | 100 | 0.2 | 0.150 | 0.110 | 0 of 2 |", md)
        # The viewpoint protocols are set beside smallNORB's figures alone, not affNIST's.
        self.assertIn("Hinton, Sabour & Frosst 2018, Table 2 (smallNORB) | azimuth |", md)
        self.assertNotIn("affNIST", md)

    def test_verdict_table_counts_a_shared_training_where_it_ran(self):
        """One training that served two protocols writes its time in one protocol's rows; the
        other's rows of that seed each hold the group's evaluation time. Each protocol's budget
        counts the training where it ran; a training run again on its own keeps its own time, and
        one whose checks differ is another training."""
        v = verdict_module()
        rows = {"rot": [(0, "1000", "100", "100"), (1, "900", "90", "90"), (2, "800", "80", "80")],
                "aff": [(0, "100", "100", "100"), (1, "950", "95", "95"), (2, "70", "70", "70")]}
        checks = {"rot": {0: "0.3", 1: "0.4", 2: "0.2"}, "aff": {0: "0.3", 1: "0.4", 2: "0.25"}}
        sweeps = {}
        for p in rows:
            d = sweeps[p] = self.path(p)
            os.makedirs(d)
            with open(os.path.join(d, "cells.csv"), "w") as f:
                f.write("seed,grid,model,status,steps,seconds,n_params\n")
                f.writelines(f"{seed},,caps,ok,100,{x},7\n" for seed, *xs in rows[p] for x in xs)
            with open(os.path.join(d, "trajectory.csv"), "w") as f:
                f.write("cell,seed,gap,grid,model,epoch,step,validation_error,familiar_error,heldout_error\n")
                f.writelines(f"0,{seed},{gap},,caps,1,50,{e},0.5,0.5\n" for seed, e in checks[p].items()
                             for gap in (1, 2, 3))
        secs = {p: {k[2]: x for k, x in s_.items()} for p, (_, _, s_) in v.training_seconds(sweeps, "caps", "cnn").items()}
        # Seed 0 ran in rot's group; seed 1 ran in each; seed 2's checks differ: aff's is its own.
        self.assertEqual(secs, {"rot": {"0": 1200, "1": 1080, "2": 960}, "aff": {"0": 1200, "1": 1140, "2": 210}})

    def test_verdict_table_says_how_each_sweep_trained(self):
        """The training section reads each sweep's meta.json; the convcaps defaults it names are
        the binary's own (run --help marks them), so a change of default fails here first."""
        d = self.path("az")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d, "--gaps", "20",
                        "--models", "caps,cnn"], check=True)
        flags = {"n-epochs": "40", "batch-size": "32", "lr": "2e-3", "model-lr": "cnn=5e-4", "check-sample": "2000",
                 "eval-every": "16", "eval-until": "508", "standardize": "on", "brightness": "0.25",
                 "contrast": "0.8"}
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"config": {"run_flags": flags, "grid": [["em-logit+em-norm", ["paper", "official"]]]}}, f)
        v = verdict_module()
        # convcaps's own defaults hold unless typed: --loss xent typed at the registry value, --em-grad
        # typed away from it, --em-lambda-schedule at convcaps's own.
        conv = {**flags, "loss": "xent", "em-grad": "full", "em-lambda-schedule": "fixed", "em-iters": "2",
                "spread-margin": "0.2:0.9", "model-lr": "cnn=5e-4,dr=1e-3", "check-sample": "",
                "brightness": "0.0", "max-steps": "900", "model-eval-every": "cnn=2:60,dr=5"}
        c = self.path("conv")
        os.makedirs(c)
        with open(os.path.join(c, "meta.json"), "w") as f:
            json.dump({"config": {"run_flags": conv, "typed_at_default": ["loss"]}}, f)
        self.assertEqual(v.training_text("azimuth", c, "convcaps"),
                         "- azimuth: 40 epochs or 900 steps, whichever ends first at batch 32; Adam at 2e-3 (cnn at "
                         "5e-4, dr at 1e-3), constant rate; checks of every image of each split every 16 steps up to "
                         "step 508 and at each epoch's end (cnn's also every 2 steps up to step 60, dr's also every "
                         "5 steps); per-image standardisation, contrast jitter ×(1 ± 0.8); "
                         "convcaps --loss xent, --em-iters 2, --em-lambda-schedule official, --em-grad full.")
        self.assertIsNone(v.training_text("azimuth", self.path("nowhere"), "convcaps"))
        out = self.path("v.md")
        r = self.verdict("--sweep", "azimuth=" + d, "--caps", "caps", "--cnn", "cnn", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            md = f.read()
        self.assertIn("- azimuth: 40 epochs at batch 32; Adam at 2e-3 (cnn at 5e-4), constant rate; checks of 2000 "
                      "images of each split every 16 steps up to step 508 and at each epoch's end; per-image "
                      "standardisation, brightness jitter ±0.25, contrast jitter ×(1 ± 0.8); the grid sets "
                      "--em-logit, --em-norm to paper or official.", md)
        with open(os.path.join(d, "meta.json"), "w") as f:
            f.write("{")
        r = self.verdict("--sweep", "azimuth=" + d, "--caps", "caps", "--cnn", "cnn", "--out", out + "2")
        self.assertEqual(r.returncode, 2)
        self.assertIn("meta.json: no config.run_flags", r.stderr)
        if not os.path.exists(EXE):
            self.skipTest("no viewgap binary")
        help_text = subprocess.run([EXE, "run", "--help"], capture_output=True, text=True, check=True).stdout
        line = {l.split()[0]: l for l in help_text.splitlines() if l.strip().startswith("--")}
        for option, (registry, own) in v.CONVCAPS_OWN.items():
            text = help_text[help_text.index(line["--" + option].strip()):][:400]
            self.assertRegex(text, rf"TEXT={registry}\s", option)
            self.assertIn(f"[convcaps's own default: {own}]", text, option)

    def test_verdict_table_sets_in_plane_protocols_beside_affnist(self):
        """A verdict of an in-plane protocol adds Sabour et al.'s affNIST figures (79 % against 66 %:
        novel errors 0.21 and 0.34, -38.2 %) and both networks' sizes to the published table, and,
        with no published level of its own, compares at the lowest level both reach."""
        d = self.path("tr")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d, "--gaps", "20",
                        "--models", "caps,cnn"], check=True)
        out = self.path("v.md")
        # The fixture is an azimuth sweep: whatever its label, it is set beside smallNORB alone.
        r = self.verdict("--sweep", "translation=" + d, "--caps", "caps", "--cnn", "cnn", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            self.assertNotIn("affNIST", f.read())
        with open(os.path.join(d, "frontier.csv")) as f:
            text = f.read().replace(",azimuth,deg,", ",shift,px,")
        with open(os.path.join(d, "frontier.csv"), "w") as f:
            f.write(text)
        r = self.verdict("--sweep", "translation=" + d, "--caps", "caps", "--cnn", "cnn", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            md = f.read()
        self.assertIn("| Sabour, Frosst & Hinton 2017, section 5.2 | trained on MNIST moved about a 40 × 40 canvas, "
                      "tested on affNIST | 0.0078 (CNN) and 0.0077 (CapsNet), matched | 0.34 | 0.21 | -38.2 % |", md)
        self.assertIn("Sabour, Frosst & Hinton 2017: CapsNet 8.2M parameters at 28 × 28", md)
        self.assertIn("| 0.060 (lowest both reach) |", md)

    def test_verdict_table_yardsticks_are_read_gap_by_gap(self):
        """--yardsticks with a sweep of several gaps: a gap column, each gap's rows at the level
        the two networks matched at that gap, the yardsticks' frontier rows there."""
        d = self.path("nets")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d,
                        "--models", "caps,cnn"], check=True)
        shutil.copy(os.path.join(FIXTURES, "sweep", "cells.csv"), d)  # the budget's rows
        y = self.path("yard")
        shutil.copytree(os.path.join(FIXTURES, "sweep"), y)
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", y], check=True)
        out = self.path("v.md")
        r = self.verdict("--sweep", "azimuth=" + d, "--yardsticks", "azimuth=" + y, "--caps", "caps", "--cnn", "cnn",
                         "--target", "azimuth=0.1", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            md = f.read()
        with open(os.path.join(y, "frontier.csv"), newline="") as f:
            yrows = [x for x in csv.DictReader(f) if x["kind"] == "model" and x["metric"] == "heldout_error"
                     and x["model"] == "cnn136" and round(float(x["level"]), 3) == 0.1]
        self.assertEqual(len(yrows), 3)  # gaps 0, 30, 60
        for x in yrows:
            line = [l for l in md.splitlines() if l.startswith(f"| {float(x['gap']):g} | cnn136 |")]
            self.assertEqual(len(line), 1, md)
            self.assertIn(f"| 0.100 | ", line[0])
            self.assertIn(f"{float(x['mean']):.3f} [{float(x['ci_lo']):.3f}, {float(x['ci_hi']):.3f}] "
                          f"({x['n']}/{x['seeds']}) |", line[0])
        # The budget: the two networks' trainings from cells.csv, one a seed, its seconds summed
        # over the gaps' rows (cnn136 is neither network).
        with open(os.path.join(d, "cells.csv"), newline="") as f:
            cells = [x for x in csv.DictReader(f) if x["model"] == "cnn"]
        seconds = {}
        for x in cells:
            seconds[x["seed"]] = seconds.get(x["seed"], 0.0) + float(x["seconds"])
        self.assertEqual(len(seconds), 5)
        self.assertIn(f"| azimuth | — | cnn | {int(cells[0]['n_params']):,} | 5 | {int(cells[0]['steps']):,} | "
                      f"{sum(seconds.values()) / 5 / 3600:.3g} |", md)
        self.assertNotIn("| cnn136 | ", md.split("## The budget")[1].split("##")[0])
        # Where a gap has several matched levels (one a recipe), each row names its recipe.
        v = verdict_module()
        counts = []
        self.assertEqual(v.yardstick_at(None, 0, "nn1", ["official", "other"], 0.265, counts),
                         "0.265 (official, other) | — | — (no trajectory: fit in one pass, or no validation) |")
        yf = v.Frontier(y)
        self.assertEqual(v.yardstick_at(yf, 0, "cnn136", [], None, counts),
                         "— | — | — (no level both networks reached at this gap) |")
        self.assertEqual(v.yardstick_at(yf, 0, "cnn136", [], 0.001, counts), "0.001 | — | — (0/5 seeds reached it) |")
        self.assertEqual(counts, [])

    def test_fashion_table_gives_parameters_and_learning_curves_of_whole_seeds(self):
        """fashion_table.py: each model's parameter count from cells.csv, and its test accuracy by
        epoch over the seeds whose curve is whole (a seed still training is left out), with the
        seeds' range and their best epochs."""
        d = self.path("fashion")
        s = os.path.join(d, "trained")
        os.makedirs(s)
        for f in ("nn1.json", "nn1_numpy.json"):
            shutil.copy(os.path.join(ROOT, "results", "fashion_mnist", f), d)
        with open(os.path.join(s, "meta.json"), "w") as f:
            json.dump({"config": {"run_flags": {"n-epochs": 3}}}, f)
        head = ("grid,axis,unit,gap,true_gap,kind,model,metric,seeds,n,mean,sd,median,iqm,ci_lo,ci_hi,"
                "wins,ties,losses,prob_improvement,p_value\n")
        with open(os.path.join(s, "summary.csv"), "w") as f:
            f.write(head + ",none,deg,0,0,model,convcaps,heldout,2,2,0.8,0.01,0.8,0.8,0.79,0.81,,,,,\n")
        with open(os.path.join(s, "cells.csv"), "w") as f:
            f.write("cell,seed,model,status,n_params\n0,0,convcaps,ok,68444\n1,1,convcaps,ok,68444\n"
                    "2,2,convcaps,interrupted,0\n")
        # Seeds 0 and 1 whole; seed 2 stopped after epoch 1 and is left out. Errors chosen so that
        # seed 0 is best at epoch 2 and seed 1 at epoch 3.
        errors = {0: (0.3, 0.1, 0.2), 1: (0.4, 0.3, 0.2), 2: (0.9,)}
        with open(os.path.join(s, "trajectory.csv"), "w") as f:
            f.write("cell,seed,gap,grid,model,epoch,step,validation_error,familiar_error,heldout_error\n")
            for seed, errs in errors.items():
                for e, err in enumerate(errs, 1):
                    f.write(f"{seed},{seed},0,,convcaps,{e},{e * 10},nan,{err},{err}\n")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fashion_table.py"), "--dir", d],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(d, "table.md")) as f:
            md = f.read().splitlines()
        row = next(l for l in md if l.startswith("| `convcaps` | "))
        self.assertEqual(row.split(" | ")[1:5], ["68,444", "2", "3", "0.8000 [0.7900, 0.8100] (`trained/`)"])
        self.assertIn("| model | seeds | epoch 1 | epoch 2 | epoch 3 | best epoch |", md)
        self.assertIn("| `convcaps` (trained/) | 2 | 0.6500 [0.6000, 0.7000] | 0.8000 [0.7000, 0.9000] | "
                      "0.8000 [0.8000, 0.8000] | 0.8500 (epoch 2–3) |", md)
        # The same sweep by the official code's routing: its rows name the recipe.
        o = os.path.join(d, "official")
        shutil.copytree(s, o)
        with open(os.path.join(o, "meta.json"), "w") as f:
            json.dump({"config": {"run_flags": {"n-epochs": 3, "em-logit": "official", "em-norm": "official",
                                                "em-mean": "official", "em-class-lambda": "official"}}}, f)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fashion_table.py"), "--dir", d],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(d, "table.md")) as f:
            md = f.read().splitlines()
        self.assertEqual([l.split(" | ")[0] for l in md if "0.7900, 0.8100" in l],
                         ["| `convcaps` (the official code's routing)", "| `convcaps`"])

    def test_verdict_table_errors_are_one_line(self):
        """Bad flags, a missing or headless frontier, an absent network and an output that is a
        directory: one line naming it, exit 2, nothing written."""
        d = self.path("az")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", d, "--gaps", "20",
                        "--models", "caps,cnn"], check=True)
        empty = self.path("empty")
        os.makedirs(empty)
        with open(os.path.join(empty, "frontier.csv"), "w") as f:
            f.write("grid,axis,unit,gap,true_gap,level,kind,model,metric,seeds,n,mean,sd,median,iqm,ci_lo,ci_hi,"
                    "wins,ties,losses,prob_improvement,p_value\n")
        out, taken = self.path("v.md"), self.path("taken")
        os.makedirs(taken)
        ok = ["--caps", "caps", "--cnn", "cnn"]
        for args, needle in ((["--sweep", "azimuth", "--out", out], "--sweep 'azimuth': expected PROTOCOL=VALUE"),
                             (["--sweep", "azimuth=" + d, "--target", "azimuth=2", "--out", out],
                              "--target 'azimuth=2': expected a familiar error in (0, 1)"),
                             (["--sweep", "azimuth=" + d, "--target", "elevation=0.04", "--out", out],
                              "no --sweep for protocol 'elevation'"),
                             (["--sweep", "azimuth=" + self.path("absent"), "--out", out], "cannot read"),
                             (["--sweep", "azimuth=" + empty, "--out", out], "no rows (a sweep without --validation on"),
                             (["--sweep", "azimuth=" + d, "--caps", "convcaps", "--out", out],
                              "no rows of model 'convcaps'"),
                             (["--sweep", "azimuth=" + d, "--out", taken], "exists and is not a regular file")):
            with self.subTest(args=args):
                r = self.verdict(*(ok + args))
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("verdict_table.py: error: "), lines[0])
                self.assertIn(needle, lines[0])
                self.assertFalse(os.path.exists(out))
        self.assertEqual(os.listdir(taken), [])

    def test_table2_shows_the_seeds_only_where_rows_differ(self):
        """tools/table2.py: sweeps of one seed count say it once in the text; a protocol grown to
        more seeds than another gives both tables a seeds column, each row its own count."""
        res = os.path.join(ROOT, "results")
        table = os.path.join(ROOT, "tools", "table2.py")
        # The committed sweep's rows as if it had run 5 seeds and 30: only n changes.
        with open(os.path.join(res, "table2_azimuth_convcaps", "summary.csv")) as f:
            rows = list(csv.DictReader(f))
        five, thirty = self.path("five"), self.path("thirty")
        for d, n in ((five, "5"), (thirty, "30")):
            shutil.copytree(os.path.join(res, "table2_azimuth_convcaps"), d)
            with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows({**r, "n": n} for r in rows)
        for name, sweeps, header, cells in (
                ("uniform", ["azimuth/convcaps=" + five, "elevation/convcaps=" + five],
                 "| protocol | shapes | model | familiar error (95 % CI) | novel error (95 % CI) | steps |\n", "5 seeds per row;"),
                ("mixed", ["azimuth/convcaps=" + thirty, "elevation/convcaps=" + five],
                 "| protocol | shapes | model | familiar error (95 % CI) | novel error (95 % CI) | steps | seeds |\n",
                 "The seeds per row are in the last column;")):
            with self.subTest(name):
                args = [sys.executable, table, "--out", self.path(name), "--file", "t.md"]
                for s in sweeps:
                    args += ["--sweep", s]
                os.makedirs(self.path(name))
                r = subprocess.run(args, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(self.path(name, "t.md")) as f:
                    md = f.read()
                self.assertIn(header, md)
                self.assertIn(cells, md)
                lines = [l for l in md.splitlines() if l.startswith("| azimuth | seed | convcaps |")]
                self.assertEqual(len(lines), 2, md)  # the error row and the paired row
                for l in lines:
                    self.assertEqual(l.endswith(" | 30 |"), name == "mixed", l)
                el = [l for l in md.splitlines() if l.startswith("| elevation | seed | convcaps |")]
                for l in el:
                    self.assertEqual(l.endswith(" | 5 |"), name == "mixed", l)

    def sweep_of_n(self, src, dst, n, files=("summary.csv",)):
        """A copy of sweep directory `src` (its `files`) at `dst`, every summary row's seed count n."""
        os.makedirs(dst)
        for f in files:
            shutil.copy(os.path.join(src, f), dst)
        with open(os.path.join(src, "summary.csv")) as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(dst, "summary.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows({**r, "n": str(n)} for r in rows)
        return dst

    def viewgap_stub(self):
        """A viewgap that writes a fixed run JSON: fixed class activations (ablation.py's second table)
        and a caps row at fixed errors (seed_table.py)."""
        exe = self.write("viewgap_stub", "#!/bin/sh\nwhile [ $# -gt 1 ] && [ \"$1\" != --out-json ]; do shift; done\n"
                         "echo '{\"meta\": {\"git_commit\": \"stub\"}, \"models\": [{\"name\": \"caps\", "
                         "\"familiar\": 1, \"heldout\": 1, \"drop\": 0, \"class_activations\": "
                         "{\"heldout_argmax_accuracy\": 1, \"heldout_mean_true\": 1, \"heldout_mean_other\": 0}}]}' "
                         "> \"$2\"\n")
        os.chmod(exe, 0o755)
        return exe

    def table_tools(self, n, d):
        """{tool: (arguments, the file it writes, whether its table has a Wilcoxon p)} of each table tool
        with a few-seeds note, over copies under d of the committed sweeps, their seed counts n."""
        res = os.path.join(ROOT, "results")
        exe = self.viewgap_stub()
        sweep = lambda name, *files: self.sweep_of_n(os.path.join(res, name), os.path.join(d, name), n,
                                                     ("summary.csv",) + files)
        os.makedirs(os.path.join(d, "fashion_mnist"))
        for f in ("nn1.json", "nn1_numpy.json"):
            shutil.copy(os.path.join(res, "fashion_mnist", f), os.path.join(d, "fashion_mnist"))
        shutil.copy(os.path.join(res, "seed_table.csv"), d)

        def frontier(dst):  # no committed sweep has the two networks' frontier yet: the fixture's
            subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "frontier", dst,
                            "--seeds", str(n), "--gaps", "20", "--models", "caps,cnn"], check=True)
            return dst
        return {
            "table2.py": (["--out", d, "--file", "t.md", "--sweep", "azimuth/convcaps=" + sweep("table2_azimuth_convcaps", "cells.csv")],
                          os.path.join(d, "t.md"), True),
            "toys_table.py": (["--sweep", "azimuth=" + sweep("toys_paper_azimuth"), "--out", os.path.join(d, "toys")],
                              os.path.join(d, "toys", "table.md"), False),
            "toys_calibration.py": (["--sweep", sweep(os.path.join("toys_calibration", "baselines")),
                                     "--out", os.path.join(d, "calibration.md")], os.path.join(d, "calibration.md"), False),
            "fashion_table.py": (["--dir", os.path.dirname(sweep(os.path.join("fashion_mnist", "linear"), "meta.json"))],
                                 os.path.join(d, "fashion_mnist", "table.md"), False),
            "ablation.py": (["--exe", exe, "--seeds", "1", "--out", d, "--sweep", "gap 90=" + sweep("ablation_gap90")],
                            os.path.join(d, "ablation.md"), True),
            "results_summary.py": (["--results", d], os.path.join(d, "SUMMARY.md"), True),
            "verdict_table.py": (["--sweep", "azimuth=" + frontier(os.path.join(d, "verdict")), "--caps", "caps",
                                  "--cnn", "cnn", "--out", os.path.join(d, "verdict.md")],
                                 os.path.join(d, "verdict.md"), True),
        }

    def test_summary_lists_the_frontier_at_the_lowest_whole_level_and_each_changing_multiple_of_0_05(self):
        """results_summary.py's frontier rows: a level every seed of the pair reached (n = seeds)
        only, the lowest such and then the multiples of 0.05 whose row differs from the one before;
        model rows and levels some seed missed are not listed."""
        d = self.path("results")
        shutil.copytree(os.path.join(FIXTURES, "sweep"), os.path.join(d, "s"))
        shutil.copy(os.path.join(ROOT, "results", "seed_table.csv"), d)
        head = "grid,axis,unit,gap,true_gap,level,kind,model,metric,seeds,n,mean,sd,median,iqm,ci_lo,ci_hi," \
               "wins,ties,losses,prob_improvement,p_value\n"
        def row(level, kind, n, mean, model="cnn-caps", metric="heldout_error"):
            return (f",azimuth,deg,0,0,{level},{kind},{model},{metric},5,{n},{mean},0.01,{mean},{mean},"
                    f"{mean - 0.01},{mean + 0.01},4,0,1,0.8,0.01\n")
        models = "".join(row(0.32, "model", 5, e, m, k) for m, k, e in [
            ("cnn", "familiar_error", 0.31), ("cnn", "heldout_error", 0.4), ("caps", "familiar_error", 0.3),
            ("caps", "heldout_error", 0.411)])
        with open(os.path.join(d, "s", "frontier.csv"), "w") as f:
            f.write(head + models + row(0.30, "paired", 4, -0.5) + row(0.32, "paired", 5, -0.011)
                    + row(0.33, "paired", 5, -0.022) + row(0.35, "paired", 5, -0.033) + row(0.4, "paired", 5, -0.033)
                    + row(0.45, "paired", 5, -0.044))
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "results_summary.py"), "--results", d],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(d, "SUMMARY.md")) as f:
            listed = [line.split(" | ")[1:7] for line in f if line.endswith("`s/frontier.csv` |\n")]
        self.assertEqual(listed, [["0.320", "cnn − caps", "heldout_error", "5", "cnn 0.310, 0.400; caps 0.300, 0.411",
                                   "−0.011 [−0.021, −0.001]"],
                                  ["0.350", "cnn − caps", "heldout_error", "5", "cnn —, —; caps —, —",
                                   "−0.033 [−0.043, −0.023]"],
                                  ["0.450", "cnn − caps", "heldout_error", "5", "cnn —, —; caps —, —",
                                   "−0.044 [−0.054, −0.034]"]])

    def test_tables_over_fewer_than_5_seeds_carry_the_note(self):
        """Every table tool: statistics over 3 seeds get the note under the table (their CI is the
        seeds' spread; a Wilcoxon p over 3 pairs cannot reach 0.05), over 5 they do not. The
        committed sweeps stand in, their seed counts rewritten."""
        tools = os.path.join(ROOT, "tools")
        ci, p = "seeds: their CI is a percentile bootstrap over that many values", "Wilcoxon p cannot reach 0.05"
        for n in (3, 5):
            d = self.path(f"n{n}")
            for name, (args, out, has_p) in self.table_tools(n, d).items():
                with self.subTest(tool=name, seeds=n):
                    r = subprocess.run([sys.executable, os.path.join(tools, name)] + args, capture_output=True,
                                       text=True, cwd=self.tmp)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    with open(out) as f:
                        md = f.read()
                    if n == 3:
                        self.assertIn(f" over 3 {ci}", md)
                        self.assertEqual(p in md, has_p, md)
                        if has_p:
                            self.assertIn("its least value is 0.25 over 3 pairs", md)
                    else:
                        self.assertNotIn(ci, md)
                        self.assertNotIn(p, md)

    def test_table_tools_refuse_an_output_that_is_a_directory(self):
        """Every table tool whose table's file is an existing directory: one line on stderr, exit 2,
        nothing written into that directory and no temporary file left beside it."""
        d = self.path("dir_out")
        tools = self.table_tools(5, d)
        seeds = os.path.join(d, "seeds")
        tools["seed_table.py"] = (["--exe", self.viewgap_stub(), "--seeds", "3", "--out", seeds],
                                  os.path.join(seeds, "seed_table.csv"), None)
        for name, (args, out, _) in tools.items():
            with self.subTest(tool=name):
                os.makedirs(out)
                r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", name)] + args, capture_output=True,
                                   text=True, cwd=self.tmp)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith(f"{name}: error: "), lines[0])
                self.assertIn("not a regular file", lines[0])
                self.assertEqual(os.listdir(out), [])
                self.assertEqual([f for f in os.listdir(os.path.dirname(out)) if f.startswith(".tmp.")], [])
                os.rmdir(out)  # results_summary.py reads ablation.md: the next tool finds no directory there

    def test_sweep_figures_over_fewer_than_5_seeds_say_so_in_their_titles(self):
        """The sweep figures of a 3-seed fixture sweep end their title with the note's short form and
        give the paired figure's p its floor; those of the 5-seed fixture do not."""
        import argparse
        sf, pf = plots().sweep_figures, plots().paired_figures
        three = self.path("three")
        subprocess.run([sys.executable, os.path.join(FIXTURES, "make_fixtures.py"), "sweep", three, "--seeds", "3"],
                       check=True)
        for d, few in ((three, True), (os.path.join(FIXTURES, "sweep"), False)):
            with self.subTest(seeds=3 if few else 5):
                kept = self.captured_figures(sf), self.captured_figures(pf)
                sf.cmd_sweep(argparse.Namespace(input=d, out=self.path("fig"), gap=None))
                figs = {**kept[0], **kept[1]}
                self.assertEqual(sorted(figs), sorted(SWEEP))
                for name, fig in figs.items():
                    self.assertEqual(fig._suptitle.get_text().endswith(
                        "\nover 3 seeds a CI is the seeds' spread, not a bound on the mean"), few, name)
                paired = " ".join(ax.get_title() for ax in figs["sweep_paired.png"].axes)
                self.assertEqual("Wilcoxon p\nover 3 pairs a Wilcoxon p cannot reach 0.05" in paired, few, paired)

    def test_argument_errors_are_one_line(self):
        for args, needle in ((["run"], "the following arguments are required: input"),
                             ([], "the following arguments are required"),
                             (["frobnicate"], "invalid choice: 'frobnicate'"),
                             (["sweep", self.path("x"), "--out", self.path("o"), "--gap", "abc"],
                              "argument --gap: invalid float value: 'abc'"),
                             (["run", "x.json", "--out", "o", "--bogus"], "unrecognized arguments: --bogus")):
            with self.subTest(args=args):
                self.assert_error(plot(*args), needle)

    def test_output_that_is_not_a_regular_file_is_refused(self):
        out = self.path("fig")
        os.makedirs(out)
        fifo = os.path.join(out, "training_curves.png")
        os.mkfifo(fifo)
        self.assert_error(plot("run", os.path.join(FIXTURES, "run.json"), "--out", out, "--no-gif"),
                          "training_curves.png: exists and is not a regular file")
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        # A symlink is followed: the file it names is written, the link stays a link.
        out2 = self.path("fig2")
        os.makedirs(out2)
        os.symlink("elsewhere.png", os.path.join(out2, "training_curves.png"))
        r = plot("run", os.path.join(FIXTURES, "run.json"), "--out", out2, "--no-gif")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(os.path.join(out2, "training_curves.png")))
        self.assertTrue(os.path.isfile(os.path.join(out2, "elsewhere.png")))

    # -- smallNORB-format directories: the reader's rules, and files that are no files --

    NORB_FILES = {"training": "smallnorb-5x46789x9x18x6x2x96x96-training-{}.mat",
                  "testing": "smallnorb-5x01235x9x18x6x2x96x96-testing-{}.mat"}

    def norb_dir(self, name, damage=None):
        """Six files of every smallNORB view (black pairs); damage(part, kind, header, data)
        may change the first split's header or data (numpy arrays) before it is written."""
        d = self.path(name)
        os.makedirs(d)
        info = np.array([(0, el, az, 0) for el in range(9) for az in range(0, 36, 2)], dtype="<i4")
        n = len(info)
        for part, pattern in self.NORB_FILES.items():
            for kind, magic, data in (("dat", 0x1E3D4C55, np.zeros((n, 2, 96, 96), dtype=np.uint8)),
                                      ("cat", 0x1E3D4C54, (np.arange(n) % 5).astype("<i4")),
                                      ("info", 0x1E3D4C54, info.copy())):
                dims = list(data.shape)
                header = np.array([magic, len(dims)] + dims + [1] * (3 - len(dims)), dtype="<u4")
                if damage is not None and part == "training":
                    header, data = damage(kind, header, data)
                with open(os.path.join(d, pattern.format(kind)), "wb") as f:
                    f.write(header.astype("<u4").tobytes())
                    f.write(np.ascontiguousarray(data).tobytes())
        return d

    def test_norb_constants_are_the_readers(self):
        # plot.py checks smallNORB's files by the numbers of data/norb.h, the reader's.
        import re
        sys.path.insert(0, os.path.dirname(PACKAGE))
        from viewgap_plots import norb_figures as nf
        with open(os.path.join(ROOT, "data", "norb.h")) as f:
            header = f.read()
        def const(name):
            m = re.search(r"\b" + name + r"\s*=\s*(0x[0-9A-Fa-f]+|\d+)", header)
            self.assertIsNotNone(m, name)
            return int(m.group(1), 0)
        self.assertEqual(nf.MAGIC_BYTE, const("kNorbMagicByte"))
        self.assertEqual(nf.MAGIC_INT, const("kNorbMagicInt"))
        self.assertEqual(nf.CAMERAS, const("kNorbCameras"))
        self.assertEqual(nf.SIDE, const("kNorbSide"))
        self.assertEqual(nf.INFO_COLS, const("kNorbInfoCols"))
        self.assertEqual(len(nf.CLASSES), const("kNorbClasses"))
        for ours, theirs in ((nf.INSTANCES, "kNorbInstances"), (nf.ELEVATIONS, "kNorbElevations"),
                             (nf.AZIMUTH_MAX, "kNorbAzimuthMax"), (nf.LIGHTINGS, "kNorbLightings")):
            self.assertEqual(ours, const(theirs), theirs)

    def test_norb_files_the_reader_refuses_are_refused(self):
        # Each damage the reader (data/norb.cpp) refuses, plot.py refuses too, naming the file;
        # and, where the binary is here, viewgap refuses the same directory naming the same file.
        def field(col, value):
            def damage(kind, header, data):
                if kind == "info":
                    data = data.copy()
                    data[3, col] = value
                return header, data
            return damage

        def label(value):
            def damage(kind, header, data):
                if kind == "cat":
                    data = data.copy()
                    data[3] = value
                return header, data
            return damage

        def header_at(kind_of, k, value):
            def damage(kind, header, data):
                if kind == kind_of:
                    header = header.copy()
                    header[k] = value & 0xFFFFFFFF
                return header, data
            return damage

        def trailing(kind_of):
            def damage(kind, header, data):
                if kind == kind_of:
                    data = np.concatenate([data.reshape(-1).view(np.uint8), np.zeros(1, np.uint8)])
                return header, data
            return damage

        cases = {
            "label7": (label(7), "cat.mat: record 3: label 7 outside 0..4"),
            "label-1": (label(-1), "cat.mat: record 3: label -1 outside 0..4"),
            "lighting6": (field(3, 6), "info.mat: record 3: lighting 6 outside 0..5"),
            "instance10": (field(0, 10), "info.mat: record 3: instance 10 outside 0..9"),
            "elevation9": (field(1, 9), "info.mat: record 3: elevation 9 outside 0..8"),
            "azimuth36": (field(2, 36), "info.mat: record 3: azimuth 36 outside 0..34"),
            "azimuth_odd": (field(2, 3), "info.mat: record 3: azimuth 3 is odd"),
            "rank": (header_at("info", 1, 3), "info.mat: rank 3"),
            "magic": (header_at("dat", 0, 0x1E3D4C54), "dat.mat: magic"),
            "cameras": (header_at("dat", 3, 3), "dat.mat: dimension 1 is 3, expected 2"),
            "negative": (header_at("cat", 2, -5), "cat.mat: a negative dimension"),
            "trailing": (trailing("info"), "info.mat: size"),
        }
        for name, (damage, needle) in cases.items():
            with self.subTest(name):
                d = self.norb_dir("norb_" + name, damage)
                self.assert_error(plot("norb", d, "--out", self.path("fig_" + name)), needle)
                if has_exe():
                    r = viewgap_outcome("run", "--quiet", "--data", "norb:" + d, "--models", "nn1")
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn(needle.split(":")[0], r.stderr)
        d = self.norb_dir("norb_sound")
        r = plot("norb", d, "--out", self.path("fig_sound"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_gap_axis_says_what_a_gap_holds_out_on_an_in_plane_axis(self):
        # An in-plane sweep's gap g holds out a range starting g beyond training's largest:
        # the gap axis says which, from the protocol's record in run_config; an azimuth
        # window's label stays as it was.
        sys.path.insert(0, os.path.dirname(PACKAGE))
        from viewgap_plots.sweep_figures import held_out_text
        from viewgap_plots.paired_figures import gap_label
        def meta(**data):
            return {"run_config": {"data": data}}
        self.assertEqual(held_out_text(meta(axis="shift", unit="px", train_max=0, test_from=1, test_to=4)),
                         "gap g holds out shifts g..g+3 px")
        self.assertEqual(held_out_text(meta(axis="scale", unit="x", train_max=1, test_from=1.125, test_to=1.625)),
                         "gap g holds out scales 1+g..1.5+g x")
        self.assertIsNone(held_out_text({"run_config": {"data": None}}))
        self.assertIsNone(held_out_text({}))
        rows = [{"axis": "shift", "unit": "px", "held_out": "gap g holds out shifts g..g+3 px"}]
        self.assertEqual(gap_label(rows), "shift gap (pixels)\ngap g holds out shifts g..g+3 px")
        self.assertEqual(gap_label([{"axis": "azimuth", "unit": "deg"}]), "azimuth gap (degrees)")

    def test_inputs_that_are_not_regular_files_are_refused_without_waiting(self):
        # A FIFO would block an open() until a writer came: each reader refuses it first.
        d = self.norb_dir("norb_fifo")
        for kind in ("dat", "cat", "info"):
            with self.subTest(kind):
                p = os.path.join(d, self.NORB_FILES["testing"].format(kind))
                os.rename(p, p + ".keep")
                os.mkfifo(p)
                r = subprocess.run([sys.executable, PLOT, "norb", d, "--out", self.path("fig")],
                                   capture_output=True, text=True, timeout=60)
                self.assert_error(r, "is a FIFO, not a regular file")
                os.remove(p)
                os.rename(p + ".keep", p)
        run = self.path("run_fifo.json")
        os.mkfifo(run)
        r = subprocess.run([sys.executable, PLOT, "run", run, "--out", self.path("fig")],
                           capture_output=True, text=True, timeout=60)
        self.assert_error(r, "run_fifo.json: is a FIFO, not a regular file")
        sweep = self.path("sweep_fifo")
        shutil.copytree(os.path.join(FIXTURES, "sweep"), sweep)
        os.remove(os.path.join(sweep, "summary.csv"))
        os.mkfifo(os.path.join(sweep, "summary.csv"))
        r = subprocess.run([sys.executable, PLOT, "sweep", sweep, "--out", self.path("fig")],
                           capture_output=True, text=True, timeout=60)
        self.assert_error(r, "summary.csv: is a FIFO, not a regular file")

    def edit_json(self, d, name, change):
        p = os.path.join(d, name)
        with open(p) as f:
            doc = json.load(f)
        change(doc)
        with open(p, "w") as f:
            json.dump(doc, f)

    def edit(self, d, name, old, new):
        p = os.path.join(d, name)
        with open(p) as f:
            text = f.read()
        self.assertIn(old, text)
        with open(p, "w") as f:
            f.write(text.replace(old, new, 1))


if __name__ == "__main__":
    unittest.main(verbosity=2)
