"""What every figure shares: the Agg backend, one colour, marker and line style per series
across all figures of a process, the chance line, and the words of titles and axis labels."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
                     "axes.titlesize": 11, "figure.titlesize": 12})

CHANCE = 0.2  # five classes
COLORS = {"caps": "tab:blue", "cnn": "tab:orange", "cnn136": "tab:green"}
EXTRA_COLORS = ["tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "*"]
LINESTYLES = ["-", "--", ":", "-."]
_STYLES = {}


def color(model):
    """A fixed colour per model name across all figures; unknown names get the next spare."""
    if model not in COLORS:
        COLORS[model] = EXTRA_COLORS[(len(COLORS) - 3) % len(EXTRA_COLORS)]
    return COLORS[model]


def style(key):
    """A fixed marker and line style per series name, so that a line under another (cnn under cnn136,
    identical values) still shows its own markers and dashes."""
    if key not in _STYLES:
        k = len(_STYLES)
        _STYLES[key] = (MARKERS[k % len(MARKERS)], LINESTYLES[k % len(LINESTYLES)])
    return _STYLES[key]


def chance_line(ax, label="chance"):
    ax.axhline(CHANCE, color="gray", lw=1, ls=":", label=label)


def plural(n, word):
    return f"{n} {word}" + ("" if str(n) == "1" else "s")


def source_text(data):
    """The data source as a title names it: "synthetic", or "smallNORB-format DIR"."""
    data = data or "synthetic"
    return f"smallNORB-format {data.split(':', 1)[1]}" if data.startswith("norb:") else data


def unit_text(unit):
    return {"deg": "degrees", "px": "pixels"}.get(unit, unit)


def unit_mark(unit):
    return "°" if unit == "deg" else f" {unit}"
