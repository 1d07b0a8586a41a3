#!/usr/bin/env python3
"""The verdict's table (issue 57): the paper's Table 2 as the paper ran it, the capsule network
against the CNN at a matched familiar error, read off each sweep's frontier.csv, and the paired
differences at every familiar level both reach, with the published numbers beside them.

  verdict_table.py --sweep azimuth=results/verdict_toys_azimuth \
                   --sweep elevation=results/verdict_toys_elevation --out results/verdict_toys.md

Each DIR is a `viewgap sweep --validation on` of the two networks (`--models convcaps,cnn-paper`,
`--reference` either), one section of the table under PROTOCOL; each of its grid points (the
convcaps recipes) is one row. The matched level of a row is the frontier level (harness/frontier.h)
that every seed of both networks reached, nearest the target: the paper's 3.7 % on azimuth and
4.3 % on elevation, `--target PROTOCOL=L` for another, `--target PROTOCOL=lowest` for the lowest
level both reach (the default for a protocol the paper did not run). `--yardsticks PROTOCOL=DIR`
adds a sweep of other models on the same protocol: their final errors (summary.csv) and their
frontier at each of the section's matched levels (one a recipe), gap by gap. Errors are one line,
exit 2.
"""
import argparse
import json
import math
import os
import sys

# The package beside this file, found from here so that this runs from any directory.
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from viewgap_plots.few_seeds import few_seeds_note  # noqa: E402
from viewgap_plots.published import (PAPER_CITATION, PAPER_SIZES, SABOUR_AFFNIST,  # noqa: E402
                                     SABOUR_AFFNIST_CITATION, SABOUR_AFFNIST_PROTOCOL, SABOUR_AFFNIST_SIZES,
                                     SR_CAPSNET, SR_CAPSNET_CITATION, in_plane, paper_point)
from viewgap_plots.table_io import fail as fail_as, number as number_as, read_rows, write_table  # noqa: E402

TOOL = "verdict_table.py"
FRONTIER = "grid,gap,level,kind,model,metric,seeds,n,mean,ci_lo,ci_hi,wins,ties,losses,p_value".split(",")
SUMMARY = "grid,gap,kind,model,metric,n,mean,ci_lo,ci_hi".split(",")
CELLS = "seed,grid,model,status,steps,seconds".split(",")
TRAJECTORY = "seed,grid,model,step,validation_error".split(",")
# The frontier's levels are this far apart (kFrontierStep, harness/frontier.h).
FRONTIER_STEP = 0.005
# The paper's claim: about 30 % fewer novel-view errors at the same familiar error.
CLAIM = -0.30


def fail(msg):
    fail_as(TOOL, msg)


def number(path, r, column):
    return number_as(TOOL, path, r, column)


class Frontier:
    """One sweep's frontier.csv: model rows by (group, model, metric, level), paired rows by
    (group, pair, level); a group is a (grid point, gap), in their order in the file."""

    def __init__(self, d, required=True):
        self.path = os.path.join(d, "frontier.csv")
        rows = read_rows(TOOL, self.path, FRONTIER)
        if not rows and required:
            fail(f"{self.path}: no rows (a sweep without --validation on has no frontier)")
        self.groups, self.model, self.paired, self.axes = [], {}, {}, set()
        for r in rows:
            self.axes.add(r.get("axis", ""))
            for c in ("gap", "level", "seeds", "n", "mean", "ci_lo", "ci_hi", "wins", "ties", "losses", "p_value"):
                r[c] = number(self.path, r, c)
            group = (r["grid"], r["gap"])
            if group not in self.groups:
                self.groups.append(group)
            level = round(r["level"], 6)
            if r["kind"] == "model":
                self.model[(group, r["model"], r["metric"], level)] = r
            elif r["kind"] == "paired":
                self.paired[(group, r["model"], level)] = r
            else:
                fail(f"{self.path}: unknown kind {r['kind']!r}")

    def models(self):
        return list(dict.fromkeys(m for (_, m, _, _) in self.model))

    def levels(self, group):
        return sorted({lv for (g, _, _, lv) in self.model if g == group})

    def name(self, group):
        """A group's name in the tables: its recipe, and its gap where the sweep has several."""
        gaps = {g for _, g in self.groups}
        return recipe(group[0]) + (f", gap {group[1]:g}" if len(gaps) > 1 else "")

    def reached(self, group, model, level):
        """The model's novel-error row at `level` if every one of its seeds reached it, else None."""
        r = self.model.get((group, model, "heldout_error", level))
        return r if r and r["seeds"] > 0 and r["n"] == r["seeds"] else None

    def difference(self, group, caps, cnn, level):
        """(mean, lo, hi, caps wins, ties, caps losses, p, n) of caps − cnn in novel error at
        `level`, from the paired row whichever of the two is the sweep's reference."""
        r = self.paired.get((group, f"{caps}-{cnn}", level))
        if r:
            return r["mean"], r["ci_lo"], r["ci_hi"], r["wins"], r["ties"], r["losses"], r["p_value"], r["n"]
        r = self.paired.get((group, f"{cnn}-{caps}", level))
        if r:  # d = cnn − caps: the sign turns, and cnn's wins are caps's losses
            return -r["mean"], -r["ci_hi"], -r["ci_lo"], r["losses"], r["ties"], r["wins"], r["p_value"], r["n"]
        return None


def relative(cnn, caps):
    """The capsules' novel error against the CNN's as the paper quotes it: a signed percentage."""
    return f"{100 * (caps - cnn) / cnn:+.1f} %"


def recipe(grid):
    """A grid point's name: the value its flags share (`em-logit=paper;em-norm=paper` is `paper`),
    else the point as the sweep wrote it."""
    values = {kv.split("=", 1)[1] for kv in grid.split(";") if "=" in kv}
    return values.pop() if len(values) == 1 else (grid or "—")


def err(r):
    return f"{r['mean']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]"


def signed(m, lo, hi, scale=1.0, pct=False):
    if pct and scale <= 0:
        return "—"
    if pct:
        return f"{100 * m / scale:+.1f} % [{100 * lo / scale:+.1f}, {100 * hi / scale:+.1f}]"
    return f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def overlap(a, b):
    """Whether two rows' 95 % CIs overlap: two familiar errors that do are a close match."""
    return not (a["ci_lo"] > b["ci_hi"] or b["ci_lo"] > a["ci_hi"])


def side_of(d):
    """The project's one rule (docs/results.md, "ahead", "behind" and "not resolved"): a direction
    where the 95 % CI as printed excludes 0 and the Wilcoxon p as printed is below 0.05."""
    _, lo, hi, _, _, _, p, _ = d
    excludes = float(f"{lo:.3f}") > 0 or float(f"{hi:.3f}") < 0  # an end printed ±0.000 holds 0
    if excludes and float(f"{p:.2g}") < 0.05:
        return "ahead" if hi < 0 else "behind"
    return None


def spans(levels):
    """[0.27, 0.28, 0.395, 0.4, 0.405] -> "0.270, 0.280, 0.395–0.405": runs of adjacent frontier levels."""
    runs = []
    for lv in levels:
        if runs and lv - runs[-1][-1] <= FRONTIER_STEP * 1.02:
            runs[-1].append(lv)
        else:
            runs.append([lv])
    return ", ".join(f"{r[0]:.3f}" if len(r) == 1 else f"{r[0]:.3f}–{r[-1]:.3f}" for r in runs)


def across_levels(sides):
    """The reading at every level both reach, in one sentence: (level, side, tight match) each."""
    out = f"At the {len(sides)} levels both reach on every seed, by the same rule: "
    parts = []
    for side in ("ahead", "behind"):
        at = [lv for lv, s, _ in sides if s == side]
        tight = sum(1 for _, s, t in sides if s == side and t)
        if at:
            parts.append(f"capsules {side} at {len(at)} ({spans(at)}; {tight} of them where the two familiar "
                         f"test errors' CIs overlap)")
        else:
            parts.append(f"capsules {side} at none")
    return (out + ", ".join(parts) + ", not resolved at the rest. Adjacent levels share most of their "
            "checks, so a run of levels is one finding, not several; and were they independent, about "
            f"{0.05 * len(sides):.0f} of {len(sides)} tests at p < 0.05 would show a direction by chance.")


def reading(d, cnn_mean):
    """side_of's reading, else not resolved with its p; then where the relative change's CI lies
    against the paper's claim."""
    _, lo, hi, _, _, _, p, _ = d
    side = {"ahead": "capsules ahead", "behind": "capsules behind"}.get(side_of(d), f"not resolved (p = {p:.2g})")
    if cnn_mean <= 0:
        return side
    rlo, rhi = lo / cnn_mean, hi / cnn_mean
    claim = ("the paper's −30 % inside the relative change's CI" if rlo <= CLAIM <= rhi else
             "the relative change's CI above −30 %" if rlo > CLAIM else "the relative change's CI below −30 %")
    return f"{side}; {claim}"


def choose(frontier, group, caps, cnn, target):
    """The level both networks reached on every seed nearest `target` (None: the lowest), ties to
    the lower; None if there is none."""
    both = [lv for lv in frontier.levels(group)
            if frontier.reached(group, caps, lv) and frontier.reached(group, cnn, lv)]
    if not both:
        return None
    # Distances at the tables' six decimals, so that a level halfway between two ties exactly.
    return both[0] if target is None else min(both, key=lambda lv: (round(abs(lv - target), 6), lv))


def trainings_of(d, caps, cnn):
    """A sweep's trainings of the two networks: ({(grid, model): {seed: [steps reached, seconds,
    the rows' seconds]}}, {(grid, model): the n_params its rows give}); seconds: cells.csv's of the
    seed's rows summed over the gaps; ({}, {}) without cells.csv."""
    path = os.path.join(d, "cells.csv")
    trainings, params = {}, {}  # params: a column older files lack
    if not os.path.lexists(path):
        return trainings, params
    for r in read_rows(TOOL, path, CELLS):
        if r["model"] in (caps, cnn) and r["status"] == "ok":
            t = trainings.setdefault((r["grid"], r["model"]), {}).setdefault(r["seed"], [0, 0.0, []])
            t[0] = max(t[0], int(number(path, r, "steps")))
            t[1] += number(path, r, "seconds")
            t[2].append(r["seconds"])
            params.setdefault((r["grid"], r["model"]), set()).add(r.get("n_params") or "")
    return trainings, params


def checks_of(d, trainings):
    """(grid, model, seed) -> its training's checks, the sorted (step, familiar validation error)
    pairs from trajectory.csv ({} without one; each gap's rows repeat them, an empty error is no
    check). One training that served two sweeps (`sweep --split rotation,affine`) has the same
    checks in each."""
    path = os.path.join(d, "trajectory.csv")
    if not os.path.lexists(path):
        return {}
    checks = {}
    for r in read_rows(TOOL, path, TRAJECTORY):
        if (r["grid"], r["model"]) not in trainings:
            continue
        e, step = number(path, r, "validation_error"), number(path, r, "step")
        if step != step:  # NaN: an empty cell
            fail(f"{path}: a row without its step")
        if e == e:  # an empty validation error (NaN) is no check
            checks.setdefault((r["grid"], r["model"], r["seed"]), set()).add((int(step), e))
    return {k: tuple(sorted(v)) for k, v in checks.items()}


def training_seconds(sweeps, caps, cnn):
    """{protocol: ((trainings, params), checks, {(grid, model, seed): seconds})} for sweeps
    {protocol: dir} (trainings_of's, checks_of's):
    the core-seconds of each training with its evaluations. A training's group writes its time on
    its first row and the group's evaluation time on every row (harness/sweep_group.cpp), so a
    protocol whose rows of a seed all hold the same seconds (two or more rows) evaluated a training
    that ran in another protocol's group: it counts that protocol's sum, where the checks are the
    same step for step."""
    runs = {p: trainings_of(d, caps, cnn) for p, d in sweeps.items()}
    checks = {p: checks_of(d, runs[p][0]) for p, d in sweeps.items()}

    def elsewhere(p, key):
        rows = runs[p][0][key[:2]][key[2]][2]
        return len(rows) >= 2 and len(set(rows)) == 1

    out = {}
    for p in runs:
        secs = {}
        for (grid, model), t in runs[p][0].items():
            for seed, (_, x, _) in t.items():
                key = (grid, model, seed)
                ran = [runs[q][0][(grid, model)][seed][1] for q in runs
                       if q != p and key in checks[p] and checks[q].get(key) == checks[p][key]
                       and seed in runs[q][0].get((grid, model), {}) and not elsewhere(q, key)]
                secs[key] = ran[0] if elsewhere(p, key) and ran else x
        out[p] = (runs[p], checks[p], secs)
    return out


def budget(protocol, run, checks, secs):
    """The budget rows of a sweep: per grid point and network, its trainings (one a seed), the
    steps they reached and their mean core-hours (`run`, `checks`, `secs`: training_seconds's
    for it)."""
    trainings, params = run
    lowest = lowest_checks(checks, trainings)
    out = []
    for (grid, model), t in trainings.items():
        steps = sorted(s for s, _, _ in t.values())
        hours = sum(secs[(grid, model, seed)] for seed in t) / len(t) / 3600
        reach = f"{steps[0]:,}" if steps[0] == steps[-1] else f"{steps[0]:,}–{steps[-1]:,}"
        low = {seed: lowest[(grid, model, seed)] for seed in t if (grid, model, seed) in lowest}
        if low:
            late = sum(step > 0.9 * t[seed][0] for seed, (_, step, _) in low.items())
            half = [h for _, _, h in low.values()]
            half_text = "—" if any(h != h for h in half) else f"{sum(half) / len(half):.3f}"
            low_text = f"{half_text} | {sum(e for e, _, _ in low.values()) / len(low):.3f} | {late} of {len(low)}"
        else:
            low_text = "— | — | —"
        n = params[(grid, model)]
        size = f"{int(next(iter(n))):,}" if len(n) == 1 and next(iter(n)).isdigit() else "—"
        out.append(f"| {protocol} | {recipe(grid)} | {model} | {size} | {len(t)} | {reach} | {hours:.3g} | "
                   f"{low_text} |")
    return out


# convcaps's own defaults over the registry-wide values that meta.json's run_flags record
# (ModelEntry::defaults in models/convcaps.cpp): option -> (registry value, convcaps's). An option
# typed at the registry value is listed in config.typed_at_default and then holds for convcaps too.
# tests/test_plots.py holds this table to `viewgap run --help`.
CONVCAPS_OWN = {"loss": ("xent", "spread"), "em-lambda-schedule": ("fixed", "official"),
                "em-grad": ("stopgrad", "full")}


def training_text(protocol, d, caps):
    """One line saying how the sweep in `d` trained, from its meta.json: its budget, rates, checks,
    preprocessing, the options its grid sets and, where `caps` is convcaps, the options that shape
    its routing and loss as they ran; None without a meta.json."""
    path = os.path.join(d, "meta.json")
    if not os.path.lexists(path):
        return None
    try:
        with open(path) as f:
            config = json.load(f)["config"]
        flags, typed, grid = config["run_flags"], config.get("typed_at_default") or [], config.get("grid") or []
        if not isinstance(flags, dict) or not all(isinstance(v, str) for v in flags.values()):
            raise TypeError("run_flags is not a map of strings")
        # The grid's axes (the recipes): "a+b" joins options that take one value together.
        axes = "; ".join(f"the grid sets {', '.join('--' + o for o in str(axis).split('+'))} to "
                         f"{' or '.join(map(str, values))}" for axis, values in grid if values)
        missing = [k for k in ("n-epochs", "batch-size", "lr") if not flags.get(k)]
        if missing:
            raise KeyError(", ".join(missing))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        fail(f"{path}: no config.run_flags with the budget and rates, or a grid that is not [axis, values] "
             f"pairs ({e})")

    def get(key):
        return flags.get(key) or None

    def nonzero(key):
        try:
            return get(key) is not None and float(get(key)) != 0
        except ValueError:
            return True

    budget = f"{get('n-epochs')} epochs" + (f" or {get('max-steps')} steps, whichever ends first"
                                             if get("max-steps") else "")
    stop = [f"stopped {k}" for k in ("stop-at-familiar", "match-familiar") if get(k)]
    lr = f"Adam at {get('lr')}"
    if get("model-lr"):
        lr += " (" + ", ".join(x.replace("=", " at ") for x in get("model-lr").split(",")) + ")"
    sample = f"{get('check-sample')} images" if get("check-sample") else "every image"
    checks = "checks at each epoch's end"
    if get("eval-every"):
        until = f" up to step {get('eval-until')}" if get("eval-until") else ""
        checks = f"checks of {sample} of each split every {get('eval-every')} steps{until} and at each epoch's end"
    if get("model-eval-every"):
        own_checks = []
        for entry in get("model-eval-every").split(","):
            model, _, span = entry.partition("=")
            every, _, until = span.partition(":")
            own_checks.append(f"{model}'s also every {every} steps" + (f" up to step {until}" if until else ""))
        checks += " (" + ", ".join(own_checks) + ")"
    prep = [x for x in ("per-image standardisation" if get("standardize") == "on" else None,
                        f"brightness jitter ±{get('brightness')}" if nonzero("brightness") else None,
                        f"contrast jitter ×(1 ± {get('contrast')})" if nonzero("contrast") else None) if x]
    parts = [f"{budget} at batch {get('batch-size')}", f"{lr}, {get('lr-schedule') or 'constant'} rate"] + stop
    parts += [checks] + ([", ".join(prep)] if prep else []) + ([axes] if axes else [])
    if caps == "convcaps":
        own = {o: get(o) if (o in typed or get(o) not in (None, registry)) else mine
               for o, (registry, mine) in CONVCAPS_OWN.items()}
        loss = f"--loss {own['loss']}" + (f" (margin {get('spread-margin')}, "
                                          f"{get('spread-margin-schedule') or 'linear'})" if own["loss"] == "spread" else "")
        parts.append(f"convcaps {loss}, --em-iters {get('em-iters')}, --em-lambda-schedule "
                     f"{own['em-lambda-schedule']}, --em-grad {own['em-grad']}")
    return f"- {protocol}: " + "; ".join(parts) + "."


def lowest_checks(checks, trainings):
    """(grid, model, seed) -> (the lowest familiar validation error of the training's checks, the
    step of the first check that reached it, the lowest of its checks in the first half of the
    steps it reached: what half the budget would have given), from checks_of's `checks`."""
    out = {}
    for (grid, model, seed), c in checks.items():
        reached = trainings[(grid, model)].get(seed, [0])[0]
        half = [e for step, e in c if 2 * step <= reached]
        out[(grid, model, seed)] = min((e, step) for step, e in c) + (min(half) if half else math.nan,)
    return out


def yardstick_at(yf, gap, model, names, level, counts):
    """A yardstick's cells at a matched level: the level (with the recipes matched there, where a
    gap has several levels), and its familiar and novel error at its first check reaching it,
    from its sweep's frontier `yf` (None: it has none); adds the seeds read to `counts`."""
    cells = ["—", "— (no trajectory: fit in one pass, or no validation)"]
    group = next((grp for grp in (yf.groups if yf else []) if grp[1] == gap), None)
    any_row = None if group is None else next((r for (g, m, mt, _), r in yf.model.items()
                                               if g == group and m == model and mt == "heldout_error"), None)
    if level is None:
        if any_row:
            cells = ["—", "— (no level both networks reached at this gap)"]
    elif any_row:
        fr, nr = (yf.model.get((group, model, mt, round(level, 6))) for mt in ("familiar_error", "heldout_error"))
        if fr and nr and nr["n"] > 0:
            counts += [nr["n"]]
            cells = [err(fr), f"{err(nr)} ({nr['n']:.0f}/{nr['seeds']:.0f})"]
        else:  # no row at L: none of its seeds reached it
            cells = ["—", f"— (0/{any_row['seeds']:.0f} seeds reached it)"]
    lv = "—" if level is None else f"{level:.3f}" + (f" ({', '.join(names)})" if names else "")
    return f"{lv} | {cells[0]} | {cells[1]} |"


def parse_pairs(specs, flag):
    out = {}
    for spec in specs or []:
        if "=" not in spec or not spec.split("=", 1)[0] or not spec.split("=", 1)[1]:
            fail(f"{flag} '{spec}': expected PROTOCOL=VALUE")
        k, v = spec.split("=", 1)
        if k in out:
            fail(f"{flag} '{spec}': protocol '{k}' given twice")
        out[k] = v
    return out


def frontier_figures(sweeps, yardsticks, caps, cnn, data, out):
    """Per protocol, one figure of the frontier (viewgap_plots' sweep_frontier, the published
    points of its kind of change marked): the capsule network once per recipe, the CNN once (it reads no recipe's flag), and
    the yardsticks' models at the sweep's gaps, so every model is read against the same levels."""
    from viewgap_plots.files import InputError, make_out  # matplotlib only when figures are asked for
    from viewgap_plots.frontier_figures import fig_sweep_frontier, read_frontier
    try:
        make_out(out)
        for protocol, d in sweeps.items():
            own = [r for r in read_frontier(d) or [] if r["kind"] == "model"]
            first = own[0]["grid"] if own else ""
            rows = [{**r, "model": f"{caps}, {recipe(r['grid'])} recipe"} if r["model"] == caps and r["grid"] else r
                    for r in own if r["model"] == caps or r["grid"] == first]
            gaps = {r["gap"] for r in rows}
            if protocol in yardsticks:
                rows += [r for r in read_frontier(yardsticks[protocol]) or []
                         if r["kind"] == "model" and r["gap"] in gaps]
            if not rows:
                fail(f"{d}: no frontier rows to draw")
            fig_sweep_frontier(rows, f"The verdict's frontier, {protocol}" + (f", on {data}" if data else "") +
                               f": {caps} by each recipe, {cnn} and the yardsticks", out, f"_{protocol}", [])
    except InputError as e:
        fail(str(e))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", action="append", required=True, help="PROTOCOL=DIR: the two networks' sweep")
    ap.add_argument("--yardsticks", action="append", help="PROTOCOL=DIR: a sweep of other models, same protocol")
    ap.add_argument("--target", action="append", help="PROTOCOL=L (a familiar error in (0, 1)) or PROTOCOL=lowest")
    ap.add_argument("--caps", default="convcaps", help="the capsule network (default convcaps)")
    ap.add_argument("--cnn", default="cnn-paper", help="the CNN (default cnn-paper)")
    ap.add_argument("--data", help="what the sweeps trained on, for the title")
    ap.add_argument("--made-by", help="what made the sweeps, for the first line (default: their directories)")
    ap.add_argument("--out", required=True, help="the Markdown file to write")
    ap.add_argument("--figures", help="a directory: draw each protocol's frontier there, both networks by "
                    "every recipe and the yardsticks on one panel (sweep_frontier_PROTOCOL.png)")
    a = ap.parse_args()
    sweeps = parse_pairs(a.sweep, "--sweep")
    yardsticks = parse_pairs(a.yardsticks, "--yardsticks")
    targets = {}
    for k, v in parse_pairs(a.target, "--target").items():
        if k not in sweeps:
            fail(f"--target '{k}={v}': no --sweep for protocol '{k}'")
        if v == "lowest":
            targets[k] = None
            continue
        try:
            targets[k] = float(v)
        except ValueError:
            fail(f"--target '{k}={v}': expected a familiar error in (0, 1) or 'lowest'")
        if not 0 < targets[k] < 1:
            fail(f"--target '{k}={v}': expected a familiar error in (0, 1) or 'lowest'")
    for k in yardsticks:
        if k not in sweeps:
            fail(f"--yardsticks '{k}': no --sweep for protocol '{k}'")
    caps, cnn = a.caps, a.cnn

    main_rows, level_sections, counts, paired_counts, notes, budgets, trained = [], [], [], [], [], [], []
    axes = set()  # the sweeps' held-out axes: which published results they sit beside
    chosen = {}  # protocol: {gap: {matched level: [the recipes matched there]}}
    seconds = training_seconds(sweeps, caps, cnn)
    for protocol, d in sweeps.items():
        f = Frontier(d)
        for m in (caps, cnn):
            if m not in f.models():
                fail(f"{f.path}: no rows of model '{m}' (models: {', '.join(f.models())})")
        budgets += budget(protocol, *seconds[protocol])
        trained.append(training_text(protocol, d, caps))
        axes |= f.axes
        paper = paper_point(protocol, "CNN")
        target = targets[protocol] if protocol in targets else (paper[0] if paper else None)
        for group in f.groups:
            level = choose(f, group, caps, cnn, target)
            name = f.name(group)
            if level is not None:
                chosen.setdefault(protocol, {}).setdefault(group[1], {}).setdefault(level, []).append(recipe(group[0]))
            if level is None:
                main_rows.append(f"| {protocol} | {name} | none | — | — | — | — | — | — | — | — | "
                                 "no familiar level that every seed of both reached |")
                continue
            fam = [f.model.get((group, m, "familiar_error", level)) for m in (caps, cnn)]
            nov = [f.model[(group, m, "heldout_error", level)] for m in (caps, cnn)]
            if None in fam:
                fail(f"{f.path}: no familiar_error row at level {level:.3f} beside its heldout_error row")
            d_ = f.difference(group, caps, cnn, level)
            if d_ is None:
                fail(f"{f.path}: no paired rows of {caps} and {cnn} (a sweep with --reference {caps} or {cnn}?)")
            m, lo, hi, w, t, l_, p, n = d_
            counts += [r["n"] for r in fam + nov]
            paired_counts.append(n)
            aim = "lowest both reach" if target is None else f"nearest {target:g}"
            main_rows.append(
                f"| {protocol} | {name} | {level:.3f} ({aim}) | {err(fam[0])} | {err(fam[1])} | {err(nov[0])} | "
                f"{err(nov[1])} | {signed(m, lo, hi)} | {w:.0f}/{t:.0f}/{l_:.0f} | {p:.2g} | "
                f"{signed(m, lo, hi, nov[1]['mean'], pct=True)} | {reading(d_, nov[1]['mean'])} |")
            if not overlap(fam[0], fam[1]):
                # The frontier reads a network at its first check at or below L: one whose checks
                # are sparse where its error falls can be read well below L (--eval-every/--eval-until).
                notes.append(f"{protocol}, {name}: at {level:.3f} the two familiar test errors' CIs do not overlap "
                             f"({caps} {fam[0]['mean']:.3f}, {cnn} {fam[1]['mean']:.3f}): the match is loose there.")
            if target is not None and level > target + 1e-9:
                notes.append(f"{protocol}, {name}: the target {target:g} is below every level both reached "
                             f"on every seed; the row compares at {level:.3f}.")
            rows = [f"### {protocol}, {name} (`{d}`)", "",
                    f"| familiar level L | {caps} familiar | {cnn} familiar | {caps} novel | {cnn} novel | "
                    f"Δ novel ({caps} − {cnn}) | w/t/l | p | relative change |", "|---|---|---|---|---|---|---|---|---|"]
            sides = []
            for lv in f.levels(group):
                a_, b_ = f.reached(group, caps, lv), f.reached(group, cnn, lv)
                dd = f.difference(group, caps, cnn, lv) if a_ and b_ else None
                if not dd:
                    continue
                mark = " ←" if lv == level else ""
                fa, fb = (f.model.get((group, m, "familiar_error", lv)) for m in (caps, cnn))
                tight = bool(fa and fb) and overlap(fa, fb)
                sides.append((lv, side_of(dd), tight))
                rows.append(f"| {lv:.3f}{mark} | {err(fa) if fa else '—'} | {err(fb) if fb else '—'} | "
                            f"{err(a_)} | {err(b_)} | {signed(dd[0], dd[1], dd[2])} | "
                            f"{dd[3]:.0f}/{dd[4]:.0f}/{dd[5]:.0f} | {dd[6]:.2g} | "
                            f"{signed(dd[0], dd[1], dd[2], b_['mean'], pct=True)} |")
            level_sections += rows + ["", across_levels(sides), ""]

    made_by = a.made_by or "the sweeps in " + ", ".join(f"`{d}`" for d in list(sweeps.values()) + list(yardsticks.values()))
    lines = [f"# The verdict: {caps} against {cnn} at matched familiar errors" + (f", on {a.data}" if a.data else ""), "",
             f"Generated by `tools/verdict_table.py` from {made_by}. Error = 1 − accuracy on the test "
             "images: familiar at the training views, novel at the held-out ones; mean [95 % bootstrap CI] "
             "over seeds. Each network is read where its familiar *validation* error first reached the "
             "level L (frontier.csv, docs/results.md), as the paper stopped each of its networks at a "
             "matched familiar error. Δ novel: the capsule network's novel error minus the CNN's, paired by "
             "seed (negative: fewer errors), with the capsule network's wins/ties/losses and the Wilcoxon "
             "signed-rank p. Relative change: Δ over the CNN's mean novel error (its CI is Δ's, the "
             "CNN's mean held fixed), the figure the paper quotes. Reading: ahead or behind where Δ's CI "
             "excludes 0 and p < 0.05, else not resolved (docs/results.md's one rule); and where the "
             "relative change's CI lies against the paper's claim of about −30 %.", "",
             "## Table 2 as the paper ran it", "",
             f"| protocol | recipe | matched familiar level L | {caps} familiar | {cnn} familiar | {caps} novel | "
             f"{cnn} novel | Δ novel | w/t/l | p | relative change | reading |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"] + main_rows + [""]
    lines += notes + ([""] if notes else [])
    lines += ["## The budget", "",
              "Each network's size and trainings under each recipe (one a seed; a network that reads no "
              "recipe's flag trains once a seed and is listed under each), the steps they reached and the core-hours "
              "of one with its evaluations, mean over them (cells.csv: each training runs on one core; a "
              "training that served several protocols is counted in each as where it ran); the lowest familiar "
              "validation error a training's checks reached in the first half of its steps and in all of "
              "them, mean over them (the first half is not a training half as long: the spread margin and "
              "any rate schedule run over the whole training), and how many reached their lowest in "
              "the last tenth of their steps, where a longer training would likely have gone lower "
              "(trajectory.csv).", "",
              "| protocol | recipe | network | parameters | trainings | steps reached | core-hours a training | "
              "lowest familiar validation error in the first half of its steps | lowest familiar validation error | "
              "lowest in the last tenth |",
              "|---|---|---|---|---|---|---|---|---|---|"] + budgets + [""]
    if any(trained):
        lines += ["How each sweep trained, from its meta.json (every option not named here at each model's "
                  "default: `viewgap run --help`, "
                  "[docs/models.md](../docs/models.md#convcaps--the-papers-capsule-network)):", ""]
        lines += [t for t in trained if t] + [""]
    lines += ["## Beside the published numbers", "",
              "| source | protocol | familiar error | CNN novel | capsules novel | relative change |",
              "|---|---|---|---|---|---|"]
    for protocol in ("azimuth", "elevation"):
        (fam, c), (_, k) = paper_point(protocol, "CNN"), paper_point(protocol, "capsules")
        lines.append(f"| {PAPER_CITATION} (smallNORB) | {protocol} | {fam:.3f}, matched | {c:.3f} | {k:.3f} | "
                     f"{relative(c, k)} |")
    sr = {n: e for p, n, e in SR_CAPSNET if p == "azimuth"}
    lines += [f"| {SR_CAPSNET_CITATION} | azimuth | not matched | {sr['CNN']:.4f} | {sr['EM routing']:.4f} | "
              f"{relative(sr['CNN'], sr['EM routing'])} |"]
    sizes = [PAPER_SIZES]
    if any(in_plane(a) for a in axes):  # a change in the plane: affNIST's question
        (cf, cn), (kf, kn) = (SABOUR_AFFNIST[n] for n in ("CNN", "CapsNet"))
        lines.append(f"| {SABOUR_AFFNIST_CITATION} | {SABOUR_AFFNIST_PROTOCOL} | {cf:.4f} (CNN) and {kf:.4f} "
                     f"(CapsNet), matched | {cn:.2f} | {kn:.2f} | {relative(cn, kn)} |")
        sizes.append(SABOUR_AFFNIST_SIZES)
    lines += ["", "Sizes: " + "; ".join(sizes) + ". This table's networks: the parameters column of the budget.",
              ""]

    for protocol, d in yardsticks.items():
        path = os.path.join(d, "summary.csv")
        rows = read_rows(TOOL, path, SUMMARY)
        if len({r["grid"] for r in rows}) != 1:
            fail(f"{path}: expected one grid point (a sweep of the protocol's split)")
        acc = {}  # (gap, model, metric): row
        for r in rows:
            if r["kind"] == "model":
                for c in ("gap", "n", "mean", "ci_lo", "ci_hi"):
                    r[c] = number(path, r, c)
                acc[(r["gap"], r["model"], r["metric"])] = r
        if not acc:
            fail(f"{path}: no model rows")
        gaps = list(dict.fromkeys(g for g, _, _ in acc))
        yf = Frontier(d, required=False) if os.path.lexists(os.path.join(d, "frontier.csv")) else None
        levels = chosen.get(protocol, {})
        several = len(gaps) > 1
        lines += [f"## The yardsticks, {protocol} (`{d}`)", "",
                  "Each model's errors where its training ended (by the sweep's stopping rule, if it "
                  "had one: its meta.json), and at each matched level L of the table above (each recipe's, at "
                  "the same gap) where its familiar validation error first reached it.", "",
                  ("| gap " if several else "") + "| model | familiar error, final | novel error, final | "
                  "L | familiar error at L | novel error at L (seeds that reached it) |",
                  ("|---" if several else "") + "|---|---|---|---|---|---|"]
        for gap in gaps:
            for model in dict.fromkeys(m for g, m, _ in acc if g == gap):
                fam, nov = acc.get((gap, model, "familiar")), acc.get((gap, model, "heldout"))
                if not fam or not nov:
                    continue
                counts += [fam["n"], nov["n"]]
                final = [f"{1 - r['mean']:.3f} [{1 - r['ci_hi']:.3f}, {1 - r['ci_lo']:.3f}]" for r in (fam, nov)]
                at_gap = levels.get(gap) or {None: []}
                for level, names in at_gap.items():
                    lines.append((f"| {gap:g} " if several else "") + f"| {model} | {final[0]} | {final[1]} | " +
                                 yardstick_at(yf, gap, model, names if len(at_gap) > 1 else [], level, counts))
        lines.append("")

    lines += ["## Paired differences at every familiar level both networks reach", "",
              "Each level that every seed of both networks reached; ← marks the matched level of the table above. "
              "Each network is read at its first check at or below L: where its checks are sparse while its "
              "familiar error falls, that check lies well below L, which its familiar column shows.",
              ""] + level_sections
    note = few_seeds_note(counts, "Rows", paired_counts)
    if note:
        lines += [note, ""]
    write_table(TOOL, a.out, "\n".join(lines))
    if a.figures:
        frontier_figures(sweeps, yardsticks, caps, cnn, a.data, a.figures)
    print(a.out)


if __name__ == "__main__":
    main()
