#!/usr/bin/env python3
"""Every number the docs quote, as tables, from the committed results.

  python3 tools/results_summary.py [--results results] [--out results/SUMMARY.md] [--check]

Reads RESULTS/*/summary.csv (every sweep; those one level down that SWEEPS
names); where a sweep has one, its frontier.csv (the paired rows every seed
reached, at the lowest such level and the multiples of 0.05 that change the
row); RESULTS/seed_table.csv; and the class-activation table of
RESULTS/ablation.md, and writes SUMMARY.md (default
RESULTS/SUMMARY.md) through a temporary file and a rename. The output is a pure
function of those files: the same tables give the same bytes. README.md,
docs/results.md and results/README.md quote numbers from it only
(tests/test_results_numbers.py checks them). --check writes nothing and exits 1
when OUT is not what would be written. Errors are one line, exit 2.
"""
import argparse
import csv
import os
import statistics
import sys

# The package beside this file, found from here so that this runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.few_seeds import few_seeds_note  # noqa: E402
from viewgap_plots.table_io import fail as fail_as, write_table  # noqa: E402

TOOL = "results_summary.py"

# The sweeps the docs read, in the order they read them, with a title each; any
# other RESULTS/*/summary.csv follows under its directory's name.
SWEEPS = [
    ("sweep_seed_config", "The seed's split (train 0:150, held out 200:330)"),
    ("sweep_canonical", "Across gaps: the canonical sweep (train 0:60, a 60° window `gap` degrees on)"),
    ("ablation_seed_split", "The routing/loss ablation, the seed's split"),
    ("ablation_gap90", "The routing/loss ablation, gap 90"),
    ("recon_seed_split", "dr's reconstruction loss, the seed's split"),
    ("recon_gap90", "dr's reconstruction loss, gap 90"),
    ("table2_azimuth_seed", "Table 2, azimuth protocol, the seed's capsules"),
    ("table2_azimuth_paper", "Table 2, azimuth protocol, the paper's capsules"),
    ("table2_elevation_seed", "Table 2, elevation protocol, the seed's capsules"),
    ("table2_elevation_paper", "Table 2, elevation protocol, the paper's capsules"),
    ("norb_paper_azimuth", "smallNORB-format data (asym shapes exported), the paper's azimuth split"),
    ("norb_paper_azimuth_convcaps", "smallNORB-format data (asym shapes exported), the paper's azimuth split, the paper's networks"),
    ("synthetic_paper_azimuth", "The 32×32 renderer, the paper's azimuth split (asym shapes)"),
    ("plane_translation", "In-plane: translations never seen"),
    ("plane_rotation", "In-plane: rotations never seen"),
    ("plane_scale", "In-plane: scales never seen"),
    ("plane_shear", "In-plane: shears never seen"),
    ("toys_paper_azimuth", "The toys dataset's first setting, the paper's azimuth split (Table 2 on the toys)"),
    ("toys_paper_elevation", "The toys dataset's first setting, the paper's elevation split (Table 2 on the toys)"),
    ("toys_calibrated_azimuth", "The calibrated toys, the paper's azimuth split (Table 2 on the toys, re-run)"),
    ("toys_calibrated_elevation", "The calibrated toys, the paper's elevation split (Table 2 on the toys, re-run)"),
    ("toys_window", "The toys dataset's first setting across gaps (train 0:60, a 60° window `gap` degrees on)"),
    ("toys_calibrated_window", "The calibrated toys across gaps (train 0:60, a 60° window `gap` degrees on)"),
    ("verdict_toys_azimuth", "The verdict: the paper's networks on the calibrated toys, the paper's azimuth split"),
    ("verdict_toys_elevation", "The verdict: the paper's networks on the calibrated toys, the paper's elevation split"),
    ("fashion_mnist/linear", "Fashion-MNIST, the standard split: softmax regression"),
    ("fashion_mnist/seed_models", "Fashion-MNIST, the standard split: the seed's capsules and CNN, 30 epochs"),
    ("fashion_mnist/dr", "Fashion-MNIST, the standard split: dynamic routing, 30 epochs"),
    ("fashion_mnist/trained", "Fashion-MNIST, the standard split: the paper's networks, 30 epochs"),
    ("fashion_mnist/trained_official", "Fashion-MNIST, the standard split: convcaps by the official code's routing, "
                                       "30 epochs"),
]
TABLE2 = [("azimuth", "seed"), ("azimuth", "paper"), ("elevation", "seed"), ("elevation", "paper")]


def fail(msg):
    fail_as(TOOL, msg)


def signed(x):
    """+0.085, −0.054 (the docs' minus sign)."""
    return f"{x:+.3f}".replace("-", "−")


def acc_ci(r):
    """0.764 [0.745, 0.782] (a drop's CI may reach below 0)."""
    return f"{float(r['mean']):.3f} [{float(r['ci_lo']):.3f}, {float(r['ci_hi']):.3f}]".replace("-", "−")


def diff_ci(r):
    return f"{signed(float(r['mean']))} [{signed(float(r['ci_lo']))}, {signed(float(r['ci_hi']))}]"


def p_value(s):
    return f"{float(s):.2g}"


def read_summary(results, d):
    path = os.path.join(results, d, "summary.csv")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    need = {"grid", "gap", "kind", "model", "metric", "n", "mean", "ci_lo", "ci_hi", "wins", "ties",
            "losses", "prob_improvement", "p_value"}
    if not rows or not need <= set(rows[0]):
        fail(f"{path}: not a sweep's summary.csv (columns {', '.join(sorted(need))})")
    for r in rows:
        r["unit"] = r.get("unit") or "deg"  # format 3 has no unit column: its axis is the azimuth
        r["true_gap"] = r.get("true_gap", r.get("true_gap_deg", ""))
    return rows


def unit_mark(r):
    """The axis's unit as a gap is written: 20°, 3 px."""
    return {"deg": "°", "px": " px"}.get(r["unit"], f" {r['unit']}" if r["unit"] != "none" else "")


def gap_text(r):
    """The nominal gap (--gaps) and the true one, in the axis's unit."""
    return f"{r['gap']}{unit_mark(r)} | {r['true_gap']}{unit_mark(r)}"


def pair_text(pair, names):
    """'cnn-paper-convcaps' -> 'cnn-paper − convcaps': summary.csv joins the two models with
    '-', and a model's name may hold one, so split where both sides are models of the sweep."""
    for i, c in enumerate(pair):
        if c == "-" and pair[:i] in names and pair[i + 1:] in names:
            return f"{pair[:i]} − {pair[i + 1:]}"
    return pair.replace("-", " − ", 1)


def with_note(out, rows, paired):
    """Table lines `out`, and under them the note on fewer than 5 seeds if `rows` need it."""
    note = few_seeds_note((r["n"] for r in rows), "Rows", (r["n"] for r in paired))
    return out + ["", note] if note else out


def sweep_tables(results, d, rows):
    """The sweep's model rows (familiar, held-out, drop per model) and paired rows."""
    src = f"`{d}/summary.csv`"
    has_grid = any(r["grid"] for r in rows)
    g_head, g_rule = ("grid | ", "---|") if has_grid else ("", "")
    cell = lambda r: (f"{r['grid']} | " if has_grid else "") + f"{gap_text(r)} | "
    out = [f"| {g_head}gap | true gap | model | n | familiar (95 % CI) | held-out (95 % CI) | drop (95 % CI) | source |",
           f"|{g_rule}---|---|---|---|---|---|---|---|"]
    models = {}
    for r in rows:
        if r["kind"] == "model":
            models.setdefault((r["grid"], r["gap"], r["model"]), {})[r["metric"]] = r
    for (grid, gap, model), m in models.items():
        first = next(iter(m.values()))
        vals = " | ".join(acc_ci(m[k]) if k in m else "" for k in ("familiar", "heldout", "drop"))
        out.append(f"| {cell(first)}{model} | {first['n']} | {vals} | {src} |")
    names = {model for (_, _, model) in models}
    if not any(r["kind"] == "paired" for r in rows):  # one model: nothing paired
        return with_note(out, rows, [])
    out += ["", f"| {g_head}gap | true gap | pair | metric | n | difference (95 % CI) | wins / ties / losses | "
                f"P(better) | Wilcoxon p | source |",
            f"|{g_rule}---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "paired":
            out.append(f"| {cell(r)}{pair_text(r['model'], names)} | {r['metric']} | {r['n']} | "
                       f"{diff_ci(r)} | {r['wins']} / {r['ties']} / {r['losses']} | "
                       f"{float(r['prob_improvement']):.2f} | {p_value(r['p_value'])} | {src} |")
    return with_note(out, rows, [r for r in rows if r["kind"] == "paired"])


def seed_table(results):
    path = os.path.join(results, "seed_table.csv")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [(int(r["seed"]), r["model"], float(r["familiar"]), float(r["heldout"]), float(r["drop"]))
                    for r in csv.DictReader(f)]
    except (OSError, KeyError, ValueError) as e:
        fail(f"{path}: cannot read ({e})")
    seeds = sorted({r[0] for r in rows})
    out = ["| seeds | caps familiar | caps held-out | caps drop | CNN familiar | CNN held-out | CNN drop | source |",
           "|---|---|---|---|---|---|---|---|"]
    spans = [(str(s), [s]) for s in seeds] + [(f"mean {seeds[0]}–{s}", seeds[:i + 1])
                                              for i, s in enumerate(seeds) if i in (2, len(seeds) - 1)]
    for label, chosen in spans:
        vals = [statistics.mean(r[c] for r in rows if r[1] == m and r[0] in chosen)
                for m in ("caps", "cnn") for c in (2, 3, 4)]
        out.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in vals) + " | `seed_table.csv` |")
    return out


def table2(results, sweeps):
    """tools/table2.py's two tables, computed the same way, from the four table2_* sweeps."""
    err_rows = ["| protocol | shapes | model | familiar error (95 % CI) | novel error (95 % CI) | source |",
                "|---|---|---|---|---|---|"]
    paired = ["| protocol | shapes | capsules | caps − CNN novel error (95 % CI) | relative to the CNN's error | "
              "caps better / tie / worse | Wilcoxon p | source |",
              "|---|---|---|---|---|---|---|---|"]

    def err(r):
        m, lo, hi = float(r["mean"]), float(r["ci_lo"]), float(r["ci_hi"])
        return f"{1 - m:.3f} [{1 - hi:.3f}, {1 - lo:.3f}]"

    shown, pairs = [], []
    for protocol, config in TABLE2:
        d = f"table2_{protocol}_{config}"
        if d not in sweeps:
            continue
        src = f"`{d}/summary.csv`"
        rows = {}
        for r in sweeps[d]:
            shapes = dict(p.split("=", 1) for p in r["grid"].split(";") if "=" in p).get("shapes")
            rows[(shapes, r["kind"], r["model"], r["metric"])] = r
        for shapes in ("seed", "asym"):
            for m in ["caps"] + (["cnn", "nn1", "linear"] if config == "seed" else []):
                fam, nov = rows.get((shapes, "model", m, "familiar")), rows.get((shapes, "model", m, "heldout"))
                if fam is None or nov is None:
                    fail(f"{d}/summary.csv: no {m} rows for shapes={shapes}")
                name = f"caps ({config})" if m == "caps" else m
                shown += [fam, nov]
                err_rows.append(f"| {protocol} | {shapes} | {name} | {err(fam)} | {err(nov)} | {src} |")
            p, cnn = rows.get((shapes, "paired", "caps-cnn", "heldout")), rows.get((shapes, "model", "cnn", "heldout"))
            if p is None or cnn is None:
                fail(f"{d}/summary.csv: no caps-cnn paired row for shapes={shapes}")
            pairs.append(p)
            d_err, lo, hi = -float(p["mean"]), -float(p["ci_hi"]), -float(p["ci_lo"])
            rel = d_err / (1 - float(cnn["mean"])) if float(cnn["mean"]) < 1 else float("nan")
            paired.append(f"| {protocol} | {shapes} | {config}'s | {signed(d_err)} [{signed(lo)}, {signed(hi)}] | "
                          f"{rel * 100:+.0f} %".replace("-", "−") +
                          f" | {p['wins']} / {p['ties']} / {p['losses']} | {p_value(p['p_value'])} | {src} |")
    return with_note(err_rows + [""] + paired, shown + pairs, pairs)


def frontier_tables(results, d):
    """The paired rows of a sweep's frontier.csv (harness/frontier.h) that every seed reached,
    at the lowest familiar-error level each pair reaches on every seed and at each multiple of
    0.05 above it whose row differs from the last one listed (above the level every seed met at
    its first check, rows repeat), with both models' mean errors at the level. Empty when none
    is whole."""
    path = os.path.join(results, d, "frontier.csv")
    if not os.path.isfile(path):
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            every = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    names = {r.get("model") for r in every if r.get("kind") == "model"}
    at = {(r["grid"], r["gap"], r["level"], r["model"], r["metric"]): r["mean"]
          for r in every if r.get("kind") == "model"}
    rows = [r for r in every if r.get("kind") == "paired" and r.get("seeds") == r.get("n")]
    lowest = {}
    for r in rows:
        key = (r["grid"], r["gap"], r["model"], r["metric"])
        lowest[key] = min(lowest.get(key, float("inf")), float(r["level"]))
    order = {key: i for i, key in enumerate(lowest)}  # each pair's rows together, pairs in file order
    rows.sort(key=lambda r: (order[(r["grid"], r["gap"], r["model"], r["metric"])], float(r["level"])))
    keep, last = [], {}
    for r in rows:
        key = (r["grid"], r["gap"], r["model"], r["metric"])
        if float(r["level"]) != lowest[key] and round(float(r["level"]) * 1000) % 50:
            continue
        value = tuple(r[k] for k in ("mean", "ci_lo", "ci_hi", "wins", "ties", "losses"))
        if last.get(key) != value:  # above the level every seed met at its first check, rows repeat
            keep.append(r)
        last[key] = value
    if not keep:
        return []
    src = f"`{d}/frontier.csv`"
    has_grid = any(r["grid"] for r in keep)
    g_head, g_rule = ("grid | ", "---|") if has_grid else ("", "")
    out = [f"| {g_head}gap | familiar error level L | pair | metric | n | each at L: familiar error, metric | "
           f"difference (95 % CI) | wins / ties / losses | Wilcoxon p | source |",
           f"|{g_rule}---|---|---|---|---|---|---|---|---|---|"]

    def means(r, pair):  # "convcaps 0.248, 0.403; cnn-paper 0.262, 0.428": each model's mean errors at L
        def mean(m, k):
            v = at.get((r["grid"], r["gap"], r["level"], m, k))
            return "—" if v is None else f"{float(v):.3f}"
        return "; ".join(f"{m} {mean(m, 'familiar_error')}, {mean(m, r['metric'])}" for m in pair.split(" − "))
    for r in keep:
        pair = pair_text(r["model"], names)
        out.append((f"| {r['grid']} " if has_grid else "") +
                   f"| {r['gap']}{unit_mark(r)} | {float(r['level']):.3f} | {pair} | {r['metric']} | {r['n']} | {means(r, pair)} | "
                   f"{diff_ci(r)} | {r['wins']} / {r['ties']} / {r['losses']} | {p_value(r['p_value'])} | {src} |")
    return with_note(out, keep, keep)


def class_activations(results):
    """The class-activation table of ablation.md (tools/ablation.py runs viewgap for it; no CSV holds it)."""
    path = os.path.join(results, "ablation.md")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    head = next((i for i, l in enumerate(lines) if l.startswith("| variant | argmax(a) = class")), None)
    if head is None:
        fail(f"{path}: no class-activation table")
    out = ["| variant | argmax(a) = class | as a percentage | mean a (true class) | mean a (other classes) | source |",
           "|---|---|---|---|---|---|"]
    for l in lines[head + 2:]:
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if not l.startswith("|") or len(cells) != 4:
            break
        try:
            pct = f"{float(cells[1]) * 100:.0f} %"
        except ValueError:
            fail(f"{path}: bad class-activation row '{l}'")
        out.append(f"| {cells[0]} | {cells[1]} | {pct} | {cells[2]} | {cells[3]} | `ablation.md` |")
    return out


def render(results):
    found = sorted(d for d in os.listdir(results) if os.path.isfile(os.path.join(results, d, "summary.csv")))
    # Sweeps one level down (a part's folder of several outputs) are read where SWEEPS names them.
    found += [d for d, _ in SWEEPS if "/" in d and os.path.isfile(os.path.join(results, d, "summary.csv"))]
    order = [(d, t) for d, t in SWEEPS if d in found] + [(d, d) for d in found if d not in dict(SWEEPS)]
    sweeps = {d: read_summary(results, d) for d, _ in order}
    text = [
        "# Every number the docs quote, generated",
        "",
        "Written by `python3 tools/results_summary.py` (the last step of `bash tools/make_results.sh`) from "
        "the tables in `results/`; do not edit it by hand. It is a pure function of those tables: the same "
        "files give the same bytes. README.md, docs/results.md and results/README.md quote their numbers "
        "from here, and `tests/test_results_numbers.py` checks that they do and that this file is what the "
        "generator writes now. Each row names its source, relative to `results/`.",
        "",
        "Means over seeds with 95 % percentile-bootstrap CIs. A paired row is the per-seed difference R − X "
        "of the sweep's reference R and model X: wins / ties / losses count R better / equal / worse (for "
        "drop, better is smaller), P(better) counts ties half, p is the two-sided Wilcoxon signed-rank test.",
        "",
        "## The seed's table",
        "",
        "The default configuration (`viewgap run --seed S --reproducible`), seeds one by one and their means.",
        "",
    ] + seed_table(results)
    for d, title in order:
        text += ["", f"## {title}", "", f"`results/{d}/`.", ""] + sweep_tables(results, d, sweeps[d])
        frontier = frontier_tables(results, d)
        if frontier:
            text += ["", "The frontier (`frontier.csv`): the paired difference in an error at familiar-error "
                     "level L, each seed stopped where its familiar validation error first reached L; the "
                     "lowest level every seed of the pair reached, and each multiple of 0.05 above it that "
                     "changes the row.", ""]
            text += frontier
    if any(f"table2_{p}_{c}" in sweeps for p, c in TABLE2):
        text += ["", "## Table 2 of the paper, as errors", "",
                 "Error is 1 − accuracy; caps − CNN novel error is minus the paired held-out difference, "
                 "'relative' is it over the CNN's novel error (as `tools/table2.py` computes them).", ""]
        text += table2(results, sweeps)
    if os.path.isfile(os.path.join(results, "ablation.md")):
        text += ["", "## Do the class activations carry the class?", "",
                 "Held-out split of the seed's configuration, seeds 0–9, each ablation variant.", ""]
        text += class_activations(results)
    return "\n".join(text) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results"))
    ap.add_argument("--out", help="default RESULTS/SUMMARY.md")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if OUT differs")
    a = ap.parse_args()
    if not os.path.isdir(a.results):
        fail(f"--results {a.results}: not a directory")
    out = a.out or os.path.join(a.results, "SUMMARY.md")
    text = render(a.results)
    if a.check:
        try:
            with open(out, encoding="utf-8") as f:
                same = f.read() == text
        except OSError:
            same = False
        if not same:
            sys.stderr.write(f"results_summary.py: {out} is not what the tables give; "
                             f"run python3 tools/results_summary.py\n")
            sys.exit(1)
        return
    write_table(TOOL, out, text)


if __name__ == "__main__":
    main()
