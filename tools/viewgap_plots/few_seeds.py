"""The note every table prints under statistics over fewer than FEW seeds, and its short form in
a sweep figure's titles (issue 55). Standard library only: the table tools, which need no
matplotlib, import it too."""

# Below this many seeds a table says how little its CIs and p values can mean.
FEW = 5


def few(counts):
    """The seed counts under FEW among `counts` (strings of a CSV or numbers; 0 and NaN, which have
    no statistics, skipped), sorted."""
    return sorted({int(float(n)) for n in counts if 0 < float(n) < FEW})


def few_seeds_note(counts, what="Rows", paired=()):
    """The note for a table whose `what` (its rows, cells or sections) have the seed counts
    `counts`, or None when none is under FEW. `paired`: the seed counts of the rows that print a
    Wilcoxon p, which gets its own sentence."""
    few_seeds, few_pairs = few(counts), few(paired)
    if not few_seeds and not few_pairs:
        return None
    # A percentile bootstrap over so few seeds can only return means of
    # their values: its interval lies within their range.
    note = (f"{what} over {' or '.join(map(str, few_seeds or few_pairs))} seeds: their CI is a percentile bootstrap "
            "over that many values, so it lies within the seeds' range; read it as their spread, not as a "
            "bound on the mean.")
    if few_pairs:
        # Exact, the least two-sided p over n pairs is 2/2^n (every difference one sign); viewgap's
        # normal approximation (harness/stats.h), used where differences tie or vanish, gives no less
        # than 0.07 over 4.
        floors = ", ".join(f"{2 / 2 ** n:g} over {n} pair{'s' if n > 1 else ''}" for n in few_pairs)
        note += f" Their Wilcoxon p cannot reach 0.05 over so few pairs (exact, its least value is {floors})."
    return note


def few_seeds_caption(counts):
    """The note's first sentence for a figure's title, as its last line; "" when no count is under FEW."""
    n = few(counts)
    return f"\nover {' or '.join(map(str, n))} seeds a CI is the seeds' spread, not a bound on the mean" if n else ""


def few_pairs_caption(counts):
    """The note's second sentence for a figure that prints Wilcoxon p, as a title's last line; "" when
    no count is under FEW."""
    n = few(counts)
    return f"\nover {' or '.join(map(str, n))} pairs a Wilcoxon p cannot reach 0.05" if n else ""
