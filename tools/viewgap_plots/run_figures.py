"""Figures of one `viewgap run` from its JSON: training curves, familiar vs held-out bars, accuracy
around the circle (or along an in-plane axis), the training animation; and the `run` command,
which adds a dump's figures (dump_figures.py)."""
import math
import os

import numpy as np
from matplotlib import animation

from .dump_figures import fig_datasets, fig_poses, fig_reconstructions
from .files import InputError, atomic, get, load_json, make_out, numbers, save
from .style import CHANCE, chance_line, color, plt, plural, source_text


def run_source(c, axis):
    """(data source, protocol) of a run's config: recorded since "protocol" was, inferred before."""
    data = c.get("data") or {}
    source = source_text("norb:" + data["norb"] if isinstance(data.get("norb"), str) else "synthetic")
    protocol = c.get("protocol") or axis.get("protocol") or data.get("protocol")
    if not protocol:
        protocol = ("norb-" + data["split"] if data.get("split") else
                    "elevation-extrapolation" if c.get("test_elevations") else "azimuth-window")
    return source, protocol


def run_caption(run, path):
    c = get(run, "config", path, dict)
    for k in ("train_azimuths.from", "train_azimuths.to", "test_azimuths.from", "test_azimuths.to"):
        get(run, "config." + k, path, (int, float))
    tr, te = c["train_azimuths"], c["test_azimuths"]
    gap = run.get("dataset", {}).get("gap_deg")
    axis = run.get("dataset", {}).get("axis") or {}
    source, protocol = run_source(c, axis)
    views = (f"seed {c.get('seed')}, {plural(c.get('n_epochs'), 'epoch')}; {source}, {protocol}: train az "
             f"{tr.get('from'):g}:{tr.get('to'):g}° ({tr.get('count')} views)")
    if axis.get("name") not in (None, "azimuth", "elevation"):  # an in-plane change at the training views
        data = c.get("data") or {}
        return (f"{views}, {axis['name']} up to {data.get('train_max', 0):g} {axis.get('unit', '')}, held-out "
                f"{data.get('test_from', '?'):g}:{data.get('test_to', '?'):g} {axis.get('unit', '')}")
    return (f"{views}, held-out {te.get('from'):g}:{te.get('to'):g}° ({te.get('count')} views)"
            + (f"; true gap {gap:g}°" if isinstance(gap, (int, float)) else ""))


def fig_training_curves(run, caption, path, out, written):
    fig, (ax_l, ax_a) = plt.subplots(1, 2, figsize=(11, 4.2))
    for m in run["models"]:
        h = get(m, "history", path, list)
        if not h:
            continue
        ep = numbers([e.get("epoch") for e in h], None, path, f"{m['name']}.history.epoch")
        loss = numbers([e.get("loss") for e in h], None, path, f"{m['name']}.history.loss")
        c = color(m["name"])
        ax_l.plot(ep, loss, "o-", color=c, label=m["name"])
        for key, ls in (("familiar", "-"), ("heldout", "--")):
            acc = numbers([e.get(key) for e in h], None, path, f"{m['name']}.history.{key}")
            ax_a.plot(ep, acc, ls, marker="o", color=c,
                      label=f"{m['name']} {'familiar' if key == 'familiar' else 'held-out'}")
    ax_l.set_yscale("log")
    ax_l.set(xlabel="epoch", ylabel="mean training loss (cross-entropy, log scale)", title="training loss")
    chance_line(ax_a, "chance (0.2)")
    ax_a.set(xlabel="epoch", ylabel="accuracy (fraction correct)", ylim=(0, 1.02),
             title="accuracy after each epoch")
    for ax in (ax_l, ax_a):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=8)
    fig.suptitle(f"Training curves — {caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "training_curves.png"), written)


def fig_familiar_heldout(run, caption, path, out, written):
    models = run["models"]
    fig, (ax, ax_c) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [1, 1.6]})
    x = np.arange(len(models))
    for i, m in enumerate(models):
        fam, held = get(m, "familiar", path, (int, float)), get(m, "heldout", path, (int, float))
        c = color(m["name"])
        ax.bar(i - 0.2, fam, 0.38, color=c, edgecolor="black", label="familiar" if i == 0 else None)
        ax.bar(i + 0.2, held, 0.38, color=c, edgecolor="black", hatch="//", alpha=0.6,
               label="held-out" if i == 0 else None)
        for dx, v in ((-0.2, fam), (0.2, held)):
            ax.text(i + dx, v + 0.01, f"{v:.3f}", ha="center", va="bottom", fontsize=8)
        ax.annotate("", xy=(i + 0.42, held), xytext=(i + 0.42, fam),
                    arrowprops=dict(arrowstyle="->", color="crimson", lw=1.5))
        ax.text(i, -0.13, f"drop {fam - held:.3f}", ha="center", va="top", color="crimson",
                fontsize=10, fontweight="bold", transform=ax.get_xaxis_transform())
    chance_line(ax)
    ax.set_xticks(x, [f"{m['name']}\n({m.get('n_params', 0):,} params)" for m in models], fontsize=8)
    ax.set(ylabel="accuracy (fraction correct)", ylim=(0, 1.2), title="familiar vs held-out views")
    ax.legend(fontsize=8, loc="upper center", ncol=3)

    classes = list(run.get("dataset", {}).get("classes") or models[0].get("heldout_per_class", {}))
    w = 0.8 / len(models)
    for i, m in enumerate(models):
        pc = m.get("heldout_per_class") or {}
        vals = [pc.get(k, math.nan) for k in classes]
        ax_c.bar(np.arange(len(classes)) + (i - (len(models) - 1) / 2) * w, vals, w,
                 color=color(m["name"]), edgecolor="black", label=m["name"])
    chance_line(ax_c)
    ax_c.set_xticks(np.arange(len(classes)), classes)
    ax_c.set(xlabel="class", ylabel="held-out accuracy", ylim=(0, 1.2), title="held-out accuracy per class")
    ax_c.legend(fontsize=8, loc="upper center", ncol=len(models) + 1)
    for a in (ax, ax_c):
        a.set_yticks(np.linspace(0, 1, 6))
    fig.suptitle(f"Familiar vs held-out accuracy — {caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "familiar_heldout.png"), written)


def shade_range(ax, rng, **kw):
    """Shade an azimuth range A:B (wraps modulo 360) on a 0..360 axis."""
    a, b = rng["from"] % 360, rng["from"] % 360 + (rng["to"] - rng["from"])
    spans = [(a, min(b, 360))] + ([(0, b - 360)] if b > 360 else [])
    for k, (lo, hi) in enumerate(spans):
        ax.axvspan(lo - 0.5, hi + 0.5, **dict(kw, label=kw.get("label") if k == 0 else None))


def circle_axes(ax, run, path):
    c = run["config"]
    shade_range(ax, get(c, "train_azimuths", path, dict), color="tab:green", alpha=0.15,
                label="training range")
    shade_range(ax, get(c, "test_azimuths", path, dict), facecolor="none", edgecolor="tab:red",
                hatch="\\\\", alpha=0.35, label="held-out range")
    for v in c["train_azimuths"].get("values", []):
        ax.axvline(v % 360, color="tab:green", lw=0.8, alpha=0.6)
    for v in c["test_azimuths"].get("values", []):
        ax.axvline(v % 360, color="tab:red", lw=0.8, ls="--", alpha=0.6)
    chance_line(ax)
    ax.set(xlabel="azimuth (degrees)", ylabel="accuracy (fraction correct)", xlim=(-5, 355), ylim=(0, 1.05))
    ax.set_xticks(range(0, 360, 30))


def circle_data(run, path):
    az = numbers(get(run, "dataset.circle_azimuths", path, list), None, path, "dataset.circle_azimuths")
    accs = {m["name"]: numbers(get(m, "circle_accuracy", path, list), len(az), path,
                               f"{m['name']}.circle_accuracy") for m in run["models"]}
    return az, accs


def fig_circle(run, caption, path, out, written):
    az, accs = circle_data(run, path)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    circle_axes(ax, run, path)
    for name, acc in accs.items():
        ax.plot(az, acc, "o-", color=color(name), label=name, ms=4)
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    # Images per azimuth: the circle split's, where recorded (smallNORB's files hold their own count).
    circle = (run.get("dataset", {}).get("sizes") or {}).get("circle")
    n = (circle // len(az) if isinstance(circle, int) and len(az) and circle % len(az) == 0 else
         len(run["config"].get("elevations", {}).get("values", [])) * 5 * (run["config"].get("n_eval_per_combo") or 0))
    ax.set_title(f"Accuracy around the circle, every {az[1] - az[0]:g}°"
                 + (f" ({n} images per azimuth)" if n else "") + f"\n{caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "circle_accuracy.png"), written)


def fig_axis(run, caption, path, out, written):
    """Accuracy along a held-out axis that is no viewing angle (a shift, a turn):
    the run's axis sweep, with the training range shaded."""
    axis = get(run, "dataset.axis", path, dict)
    values = numbers(get(axis, "values", path, list), None, path, "dataset.axis.values")
    dist = numbers(get(axis, "distances", path, list), len(values), path, "dataset.axis.distances")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    trained = [v for v, d in zip(values, dist) if d == 0]
    if trained:
        ax.axvspan(min(trained), max(trained), color="tab:green", alpha=0.15, label="training range")
    for m in run["models"]:
        acc = numbers(get(m, "axis_accuracy", path, list), len(values), path, f"{m['name']}.axis_accuracy")
        ax.plot(values, acc, "o-", color=color(m["name"]), label=m["name"], ms=4)
    ax.axhline(CHANCE, color="gray", ls=":", label="chance")
    ax.set_xlabel(f"{axis.get('name')} ({axis.get('unit')})")
    ax.set_ylabel("accuracy (fraction correct)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    ax.set_title(f"Accuracy against {axis.get('name')}, at the training viewpoints\n{caption}")
    fig.tight_layout()
    save(fig, os.path.join(out, "axis_accuracy.png"), written)


def gif_training(run, caption, path, out, written):
    az, _ = circle_data(run, path)
    hist = {m["name"]: [numbers(h, len(az), path, f"{m['name']}.circle_history")
                        for h in get(m, "circle_history", path, list)] for m in run["models"]}
    n = max(len(h) for h in hist.values())
    if n == 0:
        raise InputError(path, "'circle_history' is empty")
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=80)
    circle_axes(ax, run, path)
    lines = {name: ax.plot([], [], "o-", color=color(name), label=name, ms=3)[0] for name in hist}
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    title = ax.set_title("epoch\ncaption")  # two lines, so that tight_layout leaves room
    fig.tight_layout()

    def frame(i):
        e = min(i, n - 1)
        for name, h in hist.items():
            lines[name].set_data(az, h[min(e, len(h) - 1)])
        title.set_text(f"Accuracy around the circle after epoch {e + 1}/{n}\n{caption}")
        return list(lines.values()) + [title]

    hold = 4  # the final frame stays a little longer
    anim = animation.FuncAnimation(fig, frame, frames=n + hold, blit=False)
    dst = os.path.join(out, "training.gif")
    try:
        atomic(dst, lambda tmp: anim.save(tmp, writer=animation.PillowWriter(fps=2)))
    finally:
        plt.close(fig)
    written.append(dst)


def cmd_run(args):
    src, written, skipped = args.input, [], []
    if os.path.isdir(src):
        run_path, dump_path = os.path.join(src, "run.json"), os.path.join(src, "dump.json")
        has_dump = os.path.exists(dump_path)
    else:
        run_path, has_dump = src, False
    run = load_json(run_path, "viewgap-run")
    models = get(run, "models", run_path, list)
    if not models or not all(isinstance(m, dict) and isinstance(m.get("name"), str) for m in models):
        raise InputError(run_path, "'models' must be a non-empty list of objects with a 'name'")
    caption = run_caption(run, run_path)
    make_out(args.out)

    if has_dump:
        dump = load_json(dump_path, "viewgap-dump")
        fig_datasets(dump, src, run["config"].get("seed"), caption, dump_path, args.out, written)
    else:
        skipped += ["dataset_azimuths.png", "dataset_elevations.png"]

    fig_training_curves(run, caption, run_path, args.out, written)
    fig_familiar_heldout(run, caption, run_path, args.out, written)
    fig_circle(run, caption, run_path, args.out, written)
    if (run.get("dataset", {}).get("axis") or {}).get("name") not in (None, "azimuth", "elevation"):
        fig_axis(run, caption, run_path, args.out, written)

    if has_dump:
        fig_poses(dump, caption, dump_path, args.out, written)
        if not fig_reconstructions(dump, src, caption, dump_path, args.out, written):
            skipped.append("reconstructions.png (none in the dump: no model with a decoder)")
    else:
        skipped += ["capsule_poses.png", "reconstructions.png"]
    if args.no_gif:
        skipped.append("training.gif (--no-gif)")
    elif all(m.get("circle_history") for m in models):  # `run --out-json` writes it empty
        gif_training(run, caption, run_path, args.out, written)
    else:
        skipped.append("training.gif")
    return written, skipped, (None if has_dump else
                              "needs `viewgap run --dump DIR` (dataset samples, poses, per-epoch circle accuracy)")
