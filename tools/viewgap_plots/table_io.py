"""Reading a sweep's CSV tables and writing a Markdown table, for the table tools: a bad input or
output is one line on stderr and exit 2, an output goes through a temporary file and a rename, so
that an interrupted tool leaves the old table or the new one, never half of one. Standard library
only: the table tools need no matplotlib."""
import csv
import os
import stat
import sys
import tempfile


def fail(tool, msg):
    sys.stderr.write(f"{tool}: error: {msg}\n")
    sys.exit(2)


def read_rows(tool, path, columns):
    """The rows of the CSV at `path` as dicts, after checking that it is a regular file (a FIFO
    would block the open) with `columns` in its header; a header alone gives []."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        fail(tool, f"{path}: cannot read ({e.strerror})")
    if not stat.S_ISREG(mode):
        fail(tool, f"{path}: not a regular file")
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        fail(tool, f"{path}: cannot read ({e})")
    missing = [c for c in columns if c not in header]
    if missing:
        fail(tool, f"{path}: missing column(s) {', '.join(missing)}")
    return rows


def number(tool, path, r, column):
    """Row r's `column` of the CSV at `path` as a float, NaN where empty; a row cut short or a
    value that is no number is one line, exit 2."""
    if r.get(column) is None:  # a row cut short
        fail(tool, f"{path}: a row without its '{column}' column (a truncated file?)")
    v = r[column].strip()
    try:
        return float(v) if v else float("nan")
    except ValueError:
        fail(tool, f"{path}: column '{column}' is not a number ({v!r})")


def write_table(tool, path, text):
    """`text` to the file `path` names (a symlink followed to its file), in UTF-8 whatever the
    locale, through a temporary file beside it and a rename. Anything else already there (a
    directory, a FIFO, a device) is refused before anything is written."""
    target = os.path.realpath(path)
    if os.path.lexists(target) and not os.path.isfile(target):
        fail(tool, f"{path}: exists and is not a regular file; the table is written only to a regular file")
    directory = os.path.dirname(target)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp.")
    except OSError as e:
        fail(tool, f"{path}: cannot write ({e.strerror})")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        # mkstemp makes 0600: keep the old table's permissions, or give the usual ones.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, os.stat(target).st_mode & 0o7777 if os.path.exists(target) else 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as e:  # an interrupt, too, leaves no temporary file behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            fail(tool, f"{path}: cannot write ({e.strerror})")
        raise
