"""A sweep's novel-versus-familiar frontier (frontier.csv, harness/frontier.h): each model's novel
error at the first check where its familiar validation error reached each level, with the
published points of its kind of change marked (published_points)."""
import os

from .files import InputError, read_csv, regular_input, save
from .published import published_points
from .series import ci_series, offsets
from .style import color, plt, unit_mark

NO_VALIDATION = "no validation trajectories: the frontier needs `viewgap sweep --validation on`"

COLUMNS = "grid,axis,unit,gap,true_gap,level,kind,model,metric,seeds,n,mean,ci_lo,ci_hi".split(",")
NUMERIC = "gap,true_gap,level,seeds,n,mean,ci_lo,ci_hi,wins,ties,losses,p_value".split(",")


def read_frontier(d):
    """frontier.csv's rows, [] for a header alone (a sweep without validation), None without the
    file (a sweep made before it, or one without trajectory.csv)."""
    path = os.path.join(d, "frontier.csv")
    if not os.path.lexists(path):
        return None
    regular_input(path)
    try:
        with open(path) as f:
            header = f.readline()
            body = f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read ({e})")
    missing = [c for c in COLUMNS if c not in header.strip().split(",")]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    if not body:
        return []
    rows = read_csv(path, COLUMNS, NUMERIC)
    for r in rows:
        if r["kind"] not in ("model", "paired"):
            raise InputError(path, f"unknown kind {r['kind']!r}")
    return rows


def fig_sweep_frontier(rows, title, out, suffix, written):
    """A panel per gap: novel error against the familiar validation error level, a line per model
    (mean over the seeds that reached the level, 95 % CI band), the published points marked."""
    rows = [r for r in rows if r["kind"] == "model" and r["metric"] == "heldout_error" and r["n"] > 0]
    points, citation = published_points(rows[0]["axis"] if rows else "")
    gaps = sorted({r["gap"] for r in rows})
    fig, axes = plt.subplots(1, len(gaps), figsize=(max(7.5, 4.6 * len(gaps) + 1), 4.6), squeeze=False,
                             sharey=True)
    models = list(dict.fromkeys(r["model"] for r in rows))
    levels = sorted({r["level"] for r in rows})
    span = (levels[-1] - levels[0]) if len(levels) > 1 else 0.0
    for ax, g in zip(axes[0], gaps):
        for m, dx in zip(models, offsets(len(models), span)):
            rs = sorted((r for r in rows if r["gap"] == g and r["model"] == m), key=lambda r: r["level"])
            if rs:
                ci_series(ax, [r["level"] for r in rs], rs, m, color(m), m, dx, ms=3)
        for label, fam, novel, capsules in points:
            ax.plot([fam], [novel], ls="none", marker="*" if capsules else "X", ms=10, color="black",
                    label=label if ax is axes[0][0] else None, zorder=5)
        unit = rows[0]["unit"] if rows else ""
        ax.set(xlabel="familiar validation error reached (level L)", title=f"gap {g:g}{unit_mark(unit)}")
        ax.set_xlim(left=0)
    # Set once all panels are drawn: the panels share y, and an earlier limit would stop it growing.
    top = max([r["ci_hi"] for r in rows if r["ci_hi"] == r["ci_hi"]] + [r["mean"] for r in rows] +
              [p[2] for p in points])
    axes[0][0].set_ylim(0, 1.05 * top)
    axes[0][0].set_ylabel("novel (held-out) error at the first check reaching L\n(mean, 95 % bootstrap CI)")
    axes[0][0].legend(fontsize=7, title=f"{citation} marked" if citation else None, title_fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, os.path.join(out, f"sweep_frontier{suffix}.png"), written)
