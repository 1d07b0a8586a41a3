"""A sweep directory's tables (meta.json, summary.csv, azimuth.csv, cells.csv), read in schema 4's
terms whatever its version."""
import os

from .files import InputError, load_json, read_csv

# Schema 3's column names and their schema 4 names.
SWEEP_V3_COLUMNS = {"true_gap_deg": "true_gap", "distance_deg": "distance", "azimuth_deg": "value"}


def find_key(d, key):
    """The first value of `key` anywhere in nested dicts (config layouts may nest run flags)."""
    if isinstance(d, dict):
        if key in d:
            return d[key]
        for v in d.values():
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def read_sweep_csv(path, version, columns, numeric):
    """read_csv of a sweep table, its rows in schema 4's terms whatever its version."""
    old = {v: k for k, v in SWEEP_V3_COLUMNS.items()} if version == 3 else {}
    rows = read_csv(path, [old.get(c, c) for c in columns], [old.get(c, c) for c in numeric])
    if version != 3:
        return rows
    return [dict({SWEEP_V3_COLUMNS.get(k, k): v for k, v in r.items()}, axis="azimuth", unit="deg") for r in rows]


def read_sweep(d):
    """meta.json, summary.csv, azimuth.csv and cells.csv of a sweep directory, in schema 4's terms."""
    meta = load_json(os.path.join(d, "meta.json"), "viewgap-sweep")
    v = meta["schema_version"]
    sum_path, az_path, cells_path = (os.path.join(d, f) for f in ("summary.csv", "azimuth.csv", "cells.csv"))
    axis = ["axis", "unit"] if v >= 4 else []
    summary = read_sweep_csv(sum_path, v, "grid,gap,kind,model,metric,n,mean,ci_lo,ci_hi".split(",") + axis,
                             "gap,true_gap,n,mean,ci_lo,ci_hi,wins,ties,losses,p_value".split(","))
    az_rows = read_sweep_csv(az_path, v, "grid,gap,model,distance,n,mean,ci_lo,ci_hi".split(",") + axis,
                             "gap,distance,n,mean,ci_lo,ci_hi".split(","))
    cells = read_sweep_csv(cells_path, v, "cell,seed,gap,grid,model,status".split(",") + axis, ["seed", "gap"])
    for r in summary:
        if r["kind"] not in ("model", "paired", "paired-grid"):
            raise InputError(sum_path, f"unknown kind {r['kind']!r}")
    return meta, summary, az_rows, cells, az_path


def axis_of(rows):
    """(name, unit) of the held-out axis the rows lie on, e.g. ("azimuth", "deg")."""
    axes = list(dict.fromkeys((r["axis"], r["unit"]) for r in rows))
    return axes[0] if len(axes) == 1 else ("held-out axis", "/".join(sorted({u for _, u in axes})))


def grid_text(grid):
    """A grid point as a title shows it: the flags of one value joined, so that a joined axis
    ("em-logit=official;em-norm=official") reads "em-logit, em-norm=official"."""
    pairs = [p.partition("=") for p in grid.split(";") if p]
    if not pairs or any(not sep for _, sep, _ in pairs):
        return grid
    by_value = {}
    for k, _, v in pairs:
        by_value.setdefault(v, []).append(k)
    if len(by_value) == len(pairs):  # no value shared: as the sweep wrote it
        return grid
    return "; ".join(f"{', '.join(ks)}={v}" for v, ks in by_value.items())
