"""Figures of a `viewgap sweep --out DIR`: accuracy and drop against gap, accuracy against distance
from the training views; and the `sweep` command, which adds the paired figures (paired_figures.py)
and the novel-versus-familiar frontier (frontier_figures.py)."""
import math
import os

from .few_seeds import few_seeds_caption
from .files import InputError, make_out, save
from .frontier_figures import NO_VALIDATION, fig_sweep_frontier, read_frontier
from .paired_figures import fig_sweep_paired, fig_sweep_paired_by_grid, fig_sweep_paired_grid
from .series import band, ci_series, gap_ticks, offsets, span_of
from .style import chance_line, color, plt, plural, source_text, unit_mark, unit_text
from .tables import axis_of, find_key, grid_text, read_sweep


def fig_sweep_gap(summary, title, out, suffix, written):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.3))
    models = [r["model"] for r in summary if r["kind"] == "model"]
    models = list(dict.fromkeys(models))
    dxs = offsets(len(models), span_of(summary))
    for ax, metric, ylabel in ((axes[0], "heldout", "held-out accuracy"),
                               (axes[1], "drop", "drop = familiar − held-out accuracy")):
        for m, dx in zip(models, dxs):
            rows = [r for r in summary if r["kind"] == "model" and r["model"] == m and r["metric"] == metric]
            if rows:
                band(ax, rows, m, color(m), m, dx)
        if metric == "heldout":
            chance_line(ax)
        gap_ticks(ax, summary)
        ax.margins(x=0.08)
        name, unit = axis_of(summary)
        held = summary[0].get("held_out") if summary else None
        ax.set(xlabel=f"{name} gap between training and held-out views ({unit_text(unit)})"
               + (f"\n{held}" if held else ""), ylabel=ylabel,
               title=f"{ylabel.split(' =')[0]} vs gap (mean, 95 % bootstrap CI)")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, os.path.join(out, f"sweep_gap{suffix}.png"), written)


def fig_sweep_distance(az_rows, gaps, true_gaps, title, out, suffix, written):
    fig, axes = plt.subplots(1, len(gaps), figsize=(max(7.5, 4.2 * len(gaps) + 1), 4.2), squeeze=False, sharey=True)
    name, unit = axis_of(az_rows)
    for ax, g in zip(axes[0], gaps):
        rows = [r for r in az_rows if r["gap"] == g]
        models = list(dict.fromkeys(r["model"] for r in rows))
        for m, dx in zip(models, offsets(len(models), span_of(rows, "distance"))):
            rs = sorted((r for r in rows if r["model"] == m), key=lambda r: r["distance"])
            ci_series(ax, [r["distance"] for r in rs], rs, m, color(m), m, dx, ms=3)
        chance_line(ax)
        if g in true_gaps and not math.isnan(true_gaps[g]):
            ax.axvline(true_gaps[g], color="tab:red", lw=1, ls="--", label=f"nearest held-out {name}")
        ax.set(xlabel=f"distance from nearest training {name} ({unit_text(unit)})", title=f"gap {g:g}{unit_mark(unit)}",
               ylim=(0, 1.05))
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("accuracy (mean over seeds, 95 % CI)")
    fig.suptitle(title)
    fig.tight_layout()
    name = f"sweep_distance{suffix}" + (f"_gap{gaps[0]:g}" if len(gaps) == 1 and len(set(r['gap'] for r in az_rows)) > 1 else "")
    save(fig, os.path.join(out, name + ".png"), written)


def sweep_source(meta):
    """(data source, protocol) of a sweep: recorded in run_config, else from its flags."""
    rc = meta.get("run_config") or {}
    flags = (meta.get("config") or {}).get("run_flags") or {}
    data = flags.get("data") or "synthetic"
    source = source_text(data)
    protocol = rc.get("protocol")
    if not protocol:
        split = flags.get("split") or ""
        protocol = (("norb-" + (split or "paper-azimuth")) if data.startswith("norb:") else split or
                    ("elevation-extrapolation" if flags.get("test-elevations") else "azimuth-window"))
    return source, protocol


def held_out_text(meta):
    """What gap g holds out, for a protocol whose held-out set is a range along its axis
    that the sweep moves (the in-plane ones: run_config's data records the first cell's
    train_max, test_from and test_to): e.g. "gap g holds out shifts g..g+3 px". None for
    the others, whose gap is the window's distance, as the label says."""
    data = (meta.get("run_config") or {}).get("data")
    if not isinstance(data, dict):
        return None
    try:
        base, lo, hi = (float(data[k]) for k in ("train_max", "test_from", "test_to"))
        name, unit = str(data["axis"]), str(data["unit"])
    except (KeyError, TypeError, ValueError):
        return None
    width = hi - lo
    span = f"g..g+{width:g}" if base == 0 else f"{base:g}+g..{base + width:g}+g"
    return f"gap g holds out {name}s {span} {unit}"


def cmd_sweep(args):
    d, written = args.input, []
    if not os.path.isdir(d):
        raise InputError(d, "not a directory (expected the --out DIR of viewgap sweep)")
    meta, summary, az_rows, cells, az_path = read_sweep(d)
    make_out(args.out)

    cfg = meta.get("config")
    epochs = find_key(cfg, "n-epochs") or find_key(cfg, "n_epochs")
    train = find_key(cfg, "train-azimuths") or find_key(cfg, "train_azimuths")
    source, protocol = sweep_source(meta)
    recorded = (meta.get("run_config") or {}).get("train_azimuths")
    if isinstance(recorded, dict) and "views" in (meta.get("run_config") or {}):  # the views that ran
        train = f"{recorded.get('from'):g}:{recorded.get('to'):g}"
    held = held_out_text(meta)
    if held:
        for r in summary:
            r["held_out"] = held
    # Rows of kind paired-grid have a grid "A vs B" of their own: a figure of their own.
    grids = list(dict.fromkeys(r["grid"] for r in summary if r["kind"] != "paired-grid"))

    def title_of(rows, grid):
        ok = [c for c in cells if c["status"] == "ok" and (grid is None or c["grid"] == grid)]
        failed = len({c["cell"] for c in cells if (grid is None or c["grid"] == grid) and c["status"] != "ok"})
        seeds = sorted({c["seed"] for c in ok})
        gaps = sorted({r["gap"] for r in rows})
        name, unit = axis_of(rows)
        caption = few_seeds_caption(r["n"] for r in rows)
        return (f"viewgap sweep, {source}, {protocol}: {plural(len(seeds), 'seed')}"
                + (f" ({seeds[0]:g}–{seeds[-1]:g})" if seeds else "")
                + f" × {name} gaps {', '.join(f'{g:g}' for g in gaps)}{unit_mark(unit)}"
                + (f", {plural(epochs, 'epoch')}" if epochs else "")
                + (f", train az {train}" if isinstance(train, str) else "")
                + (f"; {grid_text(grid)}" if grid else "") + (f"; {failed} failed cells excluded" if failed else "") + caption)

    def suffix_of(grid):
        return "" if len(grids) == 1 else "_" + "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in grid)

    for grid in grids:
        suffix = suffix_of(grid)
        s = [r for r in summary if r["grid"] == grid and r["kind"] != "paired-grid"]
        title = title_of(s, grid)
        true_gaps = {r["gap"]: r.get("true_gap", math.nan) for r in s}
        fig_sweep_gap(s, title, args.out, suffix, written)
        if len(grids) == 1:
            fig_sweep_paired(s, title, args.out, suffix, written)
        a = [r for r in az_rows if r["grid"] == grid]
        if args.gap is not None:
            if not any(r["gap"] == args.gap for r in a):
                raise InputError(az_path, f"no rows for --gap {args.gap:g} (gaps: "
                                          f"{', '.join(f'{g:g}' for g in sorted({r['gap'] for r in a}))})")
            fig_sweep_distance(a, [args.gap], true_gaps, title, args.out, suffix, written)
        elif a:
            fig_sweep_distance(a, sorted({r["gap"] for r in a}), true_gaps, title, args.out, suffix, written)
    if len(grids) > 1:  # every grid point's paired differences in one figure, not one per grid point
        s = [r for r in summary if r["kind"] != "paired-grid"]
        fig_sweep_paired_by_grid(s, grids, title_of(s, None) + f"; {len(grids)} grid points", args.out, written)
    pg = [r for r in summary if r["kind"] == "paired-grid"]
    if pg:
        fig_sweep_paired_grid(pg, title_of(pg, None), args.out, written)
    # The frontier needs validation errors in the trajectories: without them, a note, not a figure.
    frontier = [r for r in read_frontier(d) or [] if r["kind"] == "model" and r["n"] > 0]
    if not frontier:
        return written, ["sweep_frontier.png"], NO_VALIDATION
    for grid in grids:
        f = [r for r in frontier if r["grid"] == grid]
        if f:
            s = [r for r in summary if r["grid"] == grid and r["kind"] != "paired-grid"]
            fig_sweep_frontier(f, title_of(s, grid) + "; novel vs familiar frontier", args.out, suffix_of(grid), written)
    return written, [], None
