"""A sweep's paired differences (reference − X, and grid point A − B), seed by seed, with the
reference's wins/ties/losses and Wilcoxon p in a table under the axes."""
import math
import os

from .few_seeds import few_pairs_caption
from .files import save
from .series import band, gap_ticks, offsets, span_of
from .style import color, plt, unit_text
from .tables import axis_of, grid_text

METRIC_WORDS = {"heldout": "held-out", "drop": "drop"}


def gap_label(rows):
    """The gap axis's label, and what a gap holds out where the sweep recorded it (held_out_text)."""
    name, unit = axis_of(rows)
    held = rows[0].get("held_out") if rows else None
    return f"{name} gap ({unit_text(unit)})" + (f"\n{held}" if held else "")


def difference_axes(ax, tick_rows, xlabel, ylabel, title):
    """A difference's axes: the line at zero (neither better), the gaps of `tick_rows` as ticks."""
    ax.axhline(0, color="black", lw=1.2)
    ax.margins(x=0.15)
    gap_ticks(ax, tick_rows)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)


def wtl_text(r):
    """A paired row's wins/ties/losses and Wilcoxon p, e.g. "28/1/1 p=2e-05"."""
    if math.isnan(r["wins"]):
        return "–"
    return (f"{r['wins']:.0f}/{r['ties']:.0f}/{r['losses']:.0f}"
            + (f" p={r['p_value']:.2g}" if not math.isnan(r["p_value"]) else ""))


def wtl_table(ax, series, gaps):
    """Wins/ties/losses and p per series and gap as a table under the axes: the numbers never sit on
    the lines or on each other, however many series there are."""
    cells = [[wtl_text(rows[g]) if g in rows else "" for g in gaps] for _, _, rows in series]
    table = ax.table(cellText=cells, rowLabels=[label for label, _, _ in series],
                     colLabels=[f"gap {g:g}" for g in gaps], loc="bottom", cellLoc="center",
                     bbox=[0, -0.28 - 0.085 * (len(series) + 1), 1, 0.085 * (len(series) + 1)])
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    for (i, j), cell in table.get_celld().items():
        cell.set_linewidth(0.3)
        if i > 0 and j == -1:
            cell.get_text().set_color(series[i - 1][1])


def fig_sweep_paired(summary, title, out, suffix, written):
    pairs = list(dict.fromkeys(r["model"] for r in summary if r["kind"] == "paired"))
    if not pairs:
        return False
    gaps = sorted({r["gap"] for r in summary})
    dxs = offsets(len(pairs), span_of(summary))
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2 + 0.3 * len(pairs)))
    for ax, metric, ylabel in ((axes[0], "heldout", "Δ held-out accuracy (caps − X)\n> 0: capsules better"),
                               (axes[1], "drop", "Δ drop (caps − X)\n< 0: capsules lose less")):
        series = []
        for p, dx in zip(pairs, dxs):
            rows = sorted((r for r in summary if r["kind"] == "paired" and r["model"] == p
                           and r["metric"] == metric), key=lambda r: r["gap"])
            if not rows:
                continue
            c = color(p.split("-", 1)[-1])
            label = p.replace("-", " − ", 1)
            band(ax, rows, label, c, p.split("-", 1)[-1], dx)
            series.append((label, c, {r["gap"]: r for r in rows}))
        difference_axes(ax, summary, gap_label(summary), ylabel,
                        f"paired difference, {METRIC_WORDS[metric]} (mean, 95 % CI)\n"
                        "table: the reference's wins/ties/losses over seeds, Wilcoxon p"
                        + few_pairs_caption(r["n"] for _, _, rows in series for r in rows.values()))
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8)
        if series:
            wtl_table(ax, series, gaps)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, os.path.join(out, f"sweep_paired{suffix}.png"), written)
    return True


def fig_sweep_paired_by_grid(summary, grids, title, out, written):
    """A grid sweep's paired differences in one figure: a column per pair (reference − X), a row per
    metric, a series per grid point (its own colour, marker and line, offset sideways), against gap."""
    pairs = list(dict.fromkeys(r["model"] for r in summary if r["kind"] == "paired"))
    if not pairs:
        return False
    colors = {g: plt.cm.tab10(k % 10) if len(grids) <= 10 else plt.cm.tab20(k % 20) for k, g in enumerate(grids)}
    dxs = dict(zip(grids, offsets(len(grids), span_of(summary))))
    fig, axes = plt.subplots(2, len(pairs), figsize=(max(7, 4.6 * len(pairs)), 8), squeeze=False)
    xlabel = gap_label(summary)
    for j, p in enumerate(pairs):
        for i, (metric, ylabel) in enumerate((("heldout", "Δ held-out accuracy\n> 0: reference better"),
                                              ("drop", "Δ drop\n< 0: reference loses less"))):
            ax = axes[i][j]
            for g in grids:
                rows = sorted((r for r in summary if r["kind"] == "paired" and r["model"] == p
                               and r["metric"] == metric and r["grid"] == g), key=lambda r: r["gap"])
                if rows:
                    band(ax, rows, grid_text(g) or "(no grid)", colors[g], "grid:" + g, dxs[g])
            difference_axes(ax, summary, xlabel, ylabel if j == 0 else None,
                            f"{p.replace('-', ' − ', 1)}, {METRIC_WORDS[metric]}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 2), fontsize=8,
               title="grid point (mean, 95 % CI over seeds)", title_fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(title + "\npaired differences at every grid point (wins/ties/losses and p in summary.csv)")
    fig.tight_layout(rect=(0, 0.04 + 0.025 * math.ceil(len(labels) / 2), 1, 1))
    save(fig, os.path.join(out, "sweep_paired.png"), written)
    return True


def fig_sweep_paired_grid(summary, title, out, written):
    """Rows of kind paired-grid (`sweep --pair-grid 'A|B'`): a row of panels per pairing, a line per
    model, the difference A − B with its 95 % CI against gap."""
    pairings = list(dict.fromkeys(r["grid"] for r in summary if r["kind"] == "paired-grid"))
    if not pairings:
        return False
    fig, axes = plt.subplots(len(pairings), 2, figsize=(12, 4.6 * len(pairings) + 0.6), squeeze=False)
    xlabel = gap_label(summary)
    for i, pg in enumerate(pairings):
        rows_pg = [r for r in summary if r["kind"] == "paired-grid" and r["grid"] == pg]
        models = list(dict.fromkeys(r["model"] for r in rows_pg))
        dxs = offsets(len(models), span_of(rows_pg))
        a, _, b = pg.partition(" vs ")
        for ax, metric, ylabel in ((axes[i][0], "heldout", "Δ held-out accuracy (A − B)\n> 0: A better"),
                                   (axes[i][1], "drop", "Δ drop (A − B)\n< 0: A loses less")):
            series = []
            for m, dx in zip(models, dxs):
                rows = sorted((r for r in rows_pg if r["model"] == m and r["metric"] == metric),
                              key=lambda r: r["gap"])
                if rows:
                    band(ax, rows, m, color(m), m, dx)
                    series.append((m, color(m), {r["gap"]: r for r in rows}))
            difference_axes(ax, rows_pg, xlabel, ylabel,
                            f"{METRIC_WORDS[metric]} (mean, 95 % CI)\nA = {grid_text(a)}\nB = {grid_text(b) or '?'}")
            ax.title.set_fontsize(9)
            ax.legend(fontsize=8)
            if series:
                wtl_table(ax, series, sorted({r["gap"] for r in rows_pg}))
    fig.suptitle(title + "\none grid point against another, model by model, seed by seed (table: A's wins/ties/losses, "
                 "Wilcoxon p)" + few_pairs_caption(r["n"] for r in summary if r["kind"] == "paired-grid"))
    fig.tight_layout()
    save(fig, os.path.join(out, "sweep_paired_grid.png"), written)
    return True
