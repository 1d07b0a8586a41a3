"""A sweep's series against gap or distance: mean with its 95 % CI, set slightly apart sideways
so that a line under another still shows."""
import math

import numpy as np

from .style import style


def offsets(n, span):
    """x offsets that spread n series sideways around a shared x, a small fraction of the axis span."""
    step = (span or 1.0) * 0.012
    return [(k - (n - 1) / 2) * step for k in range(n)]


def span_of(rows, field="gap"):
    v = [r[field] for r in rows]
    return (max(v) - min(v)) if v else 0.0


def gap_ticks(ax, rows):
    gaps = sorted({r["gap"] for r in rows})
    true = {r["gap"]: r.get("true_gap", math.nan) for r in rows}
    ax.set_xticks(gaps, [f"{g:g}" + (f"\n(true {true[g]:g})" if not math.isnan(true[g]) and true[g] != g
                                     else "") for g in gaps])
    if len(gaps) == 1:  # one gap: its series (offsets() sets them apart) grouped close around the tick
        lo, hi = ax.dataLim.intervalx if ax.has_data() else (gaps[0], gaps[0])
        w = max(0.1, 1.6 * max(abs(lo - gaps[0]), abs(hi - gaps[0])))
        ax.set_xlim(gaps[0] - w, gaps[0] + w)


def ci_series(ax, x, rows, label, c, key, dx=0.0, ms=5):
    """Mean against x with its 95 % CI: error bars at a few x (at a single x fill_between draws
    nothing), a light band between several; series `key` picks marker and line style."""
    x = np.asarray(x, dtype=float) + dx
    mean = np.array([r["mean"] for r in rows])
    lo, hi = np.array([r["ci_lo"] for r in rows]), np.array([r["ci_hi"] for r in rows])
    marker, ls = style(key)
    if len(x) <= 6:
        err = np.vstack([np.clip(mean - lo, 0, None), np.clip(hi - mean, 0, None)])
        ax.errorbar(x, mean, yerr=np.where(np.isnan(err), 0, err), fmt=marker, ls=ls, color=c, ms=ms,
                    capsize=3, lw=1.4, elinewidth=1, label=label)
    else:
        ax.plot(x, mean, marker=marker, ls=ls, color=c, ms=ms, lw=1.4, label=label)
    if len(x) > 1:
        ax.fill_between(x, lo, hi, color=c, alpha=0.15 if len(x) > 6 else 0.12, lw=0)


def band(ax, rows, label, c, key=None, dx=0.0):
    """Mean vs gap with its 95 % CI (see ci_series)."""
    rows = sorted(rows, key=lambda r: r["gap"])
    ci_series(ax, [r["gap"] for r in rows], rows, label, c, key or label, dx)
