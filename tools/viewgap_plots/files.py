"""Reading viewgap's documents (JSON, CSV, .npy) and writing figures: a bad input becomes one
InputError naming the file; an output goes through a temporary file and a rename."""
import csv
import json
import math
import os
import stat
import tempfile

import numpy as np

from .style import plt

# The format version each viewgap document kind has (harness/report.h, harness/sweep_store.h).
SCHEMA_VERSION = {"viewgap-run": 4, "viewgap-sweep": 4, "viewgap-dump": 2}
# Older versions still read: a version 1 dump is a version 2 one without "reconstructions";
# a version 2 run has no held-out axis, a version 3 one no per-model "options" (neither is
# read here); a version 3 sweep's axis is azimuth, in degrees (sweep_v4 renames its columns).
ALSO_READS = {"viewgap-dump": (1,), "viewgap-run": (2, 3), "viewgap-sweep": (3,)}


class InputError(Exception):
    def __init__(self, path, what):
        super().__init__(f"{path}: {what}")


def regular_input(path):
    """`path`, if it names a regular file (through symlinks). Every reader here opens its
    file only after this: a FIFO would block the open until a writer came, a device or a
    directory is no document. As viewgap's own readers (harness/sweep_store.h: read_input_file)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})")
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a special file")
        raise InputError(path, f"is {kind}, not a regular file")
    return path


def load_json(path, kind):
    regular_input(path)
    try:
        with open(path) as f:
            d = json.load(f)
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e})")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read ({e})")
    if not isinstance(d, dict):
        raise InputError(path, "not a JSON object")
    if d.get("schema_version") not in (SCHEMA_VERSION[kind],) + ALSO_READS.get(kind, ()):
        raise InputError(path, f"schema_version {d.get('schema_version')!r}, this plot.py reads "
                               f"{SCHEMA_VERSION[kind]} (made by another viewgap version?)")
    if d.get("kind") != kind:
        raise InputError(path, f"kind {d.get('kind')!r}, expected {kind!r}")
    return d


def get(d, dotted, path, typ=None):
    """d['a']['b'] for dotted='a.b', or an InputError naming the missing field."""
    cur = d
    for k in dotted.split("."):
        if not isinstance(cur, dict) or k not in cur:
            raise InputError(path, f"missing field '{dotted}'")
        cur = cur[k]
    if typ is not None and not isinstance(cur, typ):
        raise InputError(path, f"field '{dotted}' has the wrong type ({type(cur).__name__})")
    return cur


def numbers(values, n, path, what):
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(path, f"'{what}' is not a list of numbers")
    if a.ndim != 1 or (n is not None and len(a) != n):
        raise InputError(path, f"'{what}' has {a.size} values, expected {n}")
    return a


def read_csv(path, columns, numeric):
    """Rows as dicts; `numeric` columns parsed to float (empty -> nan)."""
    regular_input(path)
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            rows = list(reader)
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(path, f"cannot read ({e})")
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(path, f"missing column(s) {', '.join(missing)}")
    if not rows:
        raise InputError(path, "no data rows")
    for i, r in enumerate(rows, start=2):
        for c in numeric:
            v = (r.get(c) or "").strip()
            try:
                r[c] = float(v) if v else math.nan
            except ValueError:
                raise InputError(path, f"line {i}: column '{c}' is not a number ({v!r})")
    return rows


def load_npy(path, shape):
    regular_input(path)
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(path, "no such file")
    except (OSError, ValueError) as e:
        raise InputError(path, f"not a readable .npy array ({e})")
    if a.ndim != 4 or tuple(a.shape[:2]) != tuple(shape):
        raise InputError(path, f"shape {a.shape}, expected ({shape[0]}, {shape[1]}, H, W)")
    return a


def output_target(path):
    """The file a figure at `path` is written to: symlinks followed to the file they name.
    Anything else that exists there (a directory, a FIFO, a device) is refused."""
    target = os.path.realpath(path)
    if os.path.lexists(target) and not os.path.isfile(target):
        where = "" if target == os.path.abspath(path) else f" (it leads to {target})"
        raise InputError(path, f"exists and is not a regular file{where}; plot.py writes only regular files")
    return target


def atomic(path, write):
    """write(tmp) to a temporary file beside the target, then rename it onto the target."""
    target = output_target(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp.",
                               suffix=os.path.splitext(target)[1])
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(tmp)
        mode = os.stat(target).st_mode & 0o7777 if os.path.exists(target) else 0o666 & ~umask
        os.chmod(tmp, mode)  # mkstemp makes 0600; keep a file's permissions, or the usual ones
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save(fig, path, written):
    try:
        atomic(path, lambda tmp: fig.savefig(tmp, format="png", bbox_inches="tight"))
    finally:
        plt.close(fig)
    written.append(path)


def make_out(d):
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise InputError(d, f"cannot create the output directory ({e.strerror})")
    if not os.access(d, os.W_OK):
        raise InputError(d, "output directory is not writable")
