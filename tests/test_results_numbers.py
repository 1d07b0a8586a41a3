#!/usr/bin/env python3
"""The docs quote only generated numbers: every difference with its CI, every accuracy
with its CI, and the wins / ties / losses and Wilcoxon p quoted beside them, in
README.md, docs/results.md, results/README.md and docs/smallnorb.md, must be in
results/SUMMARY.md; and SUMMARY.md must be what tools/results_summary.py writes from
the committed tables now.

  python3 tests/test_results_numbers.py     (plain unittest; exit code 1 on failure)

A number the docs quote from before the tables were regenerated is listed in
HISTORICAL with the commit and file it comes from, and checked against that
commit's file where git has it. Needs python3 only (no binary).
"""
import csv
import io
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = os.path.join(ROOT, "results", "SUMMARY.md")
GENERATOR = os.path.join(ROOT, "tools", "results_summary.py")
DOCS = ["README.md", "docs/results.md", "results/README.md", "docs/smallnorb.md"]

NUM = r"[+−-]\d+\.\d{3}"
DIFF_CI = re.compile(rf"{NUM} \[{NUM}, {NUM}\]")  # +0.085 [+0.066, +0.104]
ACC_CI = re.compile(r"(?<![\d.+−-])\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]")  # 0.519 [0.506, 0.530]
WTL = re.compile(r"(?<![\d:.])(\d+) ?/ ?(\d+) ?/ ?(\d+)(?![\d:])")  # 28 / 1 / 1, 21/4/5
P_QUOTED = re.compile(r"p = (\d[\d.]*(?:e-?\d+)?)")
P_CELL = re.compile(r"^\d[\d.]*(?:e-?\d+)?$")
BARE = re.compile(r"(?<![\d.])\d\.\d{3}(?!\d)")

# Quoted from the tables as they were before commit 52a3403 changed how the dataset is
# made (regenerated in b9e602d), allowed only in docs/results.md and only in a
# paragraph or row that says "before": number -> (commit, file, grid, gap, kind,
# model, metric, what is quoted: "ci" or "mean").
HISTORICAL_DOC = "docs/results.md"
HISTORICAL = {
    "+0.045 [+0.024, +0.067]": ("b9e602d^", "results/sweep_seed_config/summary.csv",
                                "", "50", "paired", "caps-cnn", "heldout", "ci"),
    "0.723": ("b9e602d^", "results/sweep_seed_config/summary.csv", "", "50", "model", "caps", "heldout", "mean"),
    "0.681": ("b9e602d^", "results/ablation_seed_split/summary.csv",
              "em-grad=full;loss=spread;em-lambda-schedule=official", "50", "model", "caps", "heldout", "mean"),
    "+0.053": ("b9e602d^", "results/ablation_seed_split/summary.csv",
               "em-grad=stopgrad;loss=xent;em-lambda-schedule=official", "50", "paired", "caps-cnn", "heldout", "mean"),
}
# Numbers with three decimals that are not results/'s: the seed project's own table
# (its SPEC), the rounding experiment's learning-rate sweeps (docs/results.md gives
# their command; they are not kept in results/), the scale protocol's ranges.
NOT_RESULTS = {"0.970", "0.726", "0.244", "0.696", "0.304",
               "0.730", "0.758", "0.746", "0.735",
               "1.125", "1.625"}


def norm(s):
    return s.replace("−", "-")


def historical(doc, unit, number):
    return (doc == HISTORICAL_DOC and "before" in unit.lower()
            and norm(number).lstrip("+-") in {norm(h).lstrip("+-") for h in HISTORICAL})


def units(text):
    """Table rows one by one (with their table's header), and paragraphs joined into one
    line each; fenced code blocks left out (a tour's printed output is not a result)."""
    out, para, header, fenced = [], [], None, False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("|"):
            if para:
                out.append((None, " ".join(para)))
                para = []
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not all(set(c) <= set("-: ") for c in cells):
                out.append((header, line))
            continue
        header = None
        if not line.strip() or line.lstrip().startswith("- "):
            if para:
                out.append((None, " ".join(para)))
            para = [line.strip()] if line.strip() else []
        else:
            para.append(line.strip())
    if para:
        out.append((None, " ".join(para)))
    return out


def p_matches(quoted, given):
    """The doc's p (k significant digits) and SUMMARY's (2) are roundings of one value."""
    def half_unit(s):  # half a unit in the last significant digit written
        digits = len(s.split("e")[0].replace(".", "").lstrip("0"))
        return 0.5 * 10 ** (math.floor(math.log10(float(s))) - max(digits, 1) + 1) if float(s) > 0 else 0.0
    return abs(float(quoted) - float(given)) <= half_unit(quoted) + half_unit(given) + 1e-15


class ResultsNumbers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(SUMMARY, encoding="utf-8") as f:
            cls.summary = f.read()
        cls.rows = [norm(l) for l in cls.summary.splitlines() if l.startswith("|")]
        cls.tokens = set(BARE.findall(norm(cls.summary)))
        cls.docs = {}
        for d in DOCS:
            with open(os.path.join(ROOT, d), encoding="utf-8") as f:
                cls.docs[d] = f.read()

    def test_summary_is_generated_from_the_tables(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "SUMMARY.md")
            subprocess.run([sys.executable, GENERATOR, "--out", out], check=True)
            with open(out, encoding="utf-8") as f:
                fresh = f.read()
            subprocess.run([sys.executable, GENERATOR, "--out", out], check=True)
            with open(out, encoding="utf-8") as f:
                again = f.read()
        self.assertEqual(fresh, again, "the generator is not deterministic")
        self.assertEqual(self.summary, fresh, "results/SUMMARY.md is stale: run python3 tools/results_summary.py")

    def check_diff_cis(self, doc, text):
        """Each difference with its CI is a SUMMARY row's; a wins / ties / losses or a p
        quoted after it (before the next CI) is that same row's."""
        bad = []
        for header, unit in units(text):
            u = norm(unit)
            found = list(DIFF_CI.finditer(u))
            for i, m in enumerate(found):
                ci = m.group(0)
                if historical(doc, unit, ci):
                    continue
                rows = [r for r in self.rows if ci in r]
                if not rows:
                    bad.append(f"{doc}: {ci} is not in results/SUMMARY.md ('{unit.strip()[:100]}')")
                    continue
                tail = u[m.end():found[i + 1].start() if i + 1 < len(found) else len(u)]
                wtl = WTL.search(tail)
                if wtl and not any("| %s / %s / %s |" % wtl.groups() in r for r in rows):
                    bad.append(f"{doc}: {ci} with {wtl.group(0)}: no SUMMARY row has both")
                quoted = [p.group(1) for p in P_QUOTED.finditer(tail)]
                if header and header[-1] in ("Wilcoxon p", "p"):
                    cell = u.strip().strip("|").split("|")[-1].strip()
                    if P_CELL.match(cell):
                        quoted.append(cell)
                for q in quoted[:1]:
                    ps = [r.split("|")[-3].strip() for r in rows]
                    if not any(p_matches(q, p) for p in ps):
                        bad.append(f"{doc}: {ci} with p = {q}: SUMMARY has p {', '.join(ps)}")
        return bad

    def test_differences_with_cis_are_generated(self):
        bad = []
        for doc, text in self.docs.items():
            bad += self.check_diff_cis(doc, text)
        self.assertFalse(bad, "\n" + "\n".join(bad))

    def test_accuracies_with_cis_are_generated(self):
        bad = [f"{doc}: {m}" for doc, text in self.docs.items() for m in ACC_CI.findall(norm(text))
               if not any(m in r for r in self.rows)]
        self.assertFalse(bad, "\n" + "\n".join(bad))

    def test_every_three_decimal_number_is_in_the_summary(self):
        bad = []
        for doc, text in self.docs.items():
            for _, unit in units(text):
                for n in BARE.findall(norm(unit)):
                    if n not in self.tokens and not historical(doc, unit, n) and n not in NOT_RESULTS:
                        bad.append(f"{doc}: {n} ('{unit.strip()[:100]}')")
        self.assertFalse(bad, "\n" + "\n".join(bad))

    def test_a_stale_number_is_caught(self):
        # The example: the seed's split as it was quoted before the regeneration.
        stale = "caps − CNN +0.045 [+0.024, +0.067], 21/4/5 seeds\n"
        self.assertTrue(self.check_diff_cis("results/README.md", stale))
        self.assertTrue(self.check_diff_cis(HISTORICAL_DOC, stale))  # not said to be from before
        self.assertFalse(self.check_diff_cis(HISTORICAL_DOC, "before, " + stale))
        wrong_wtl = "caps − CNN +0.085 [+0.066, +0.104], 21/4/5 seeds\n"
        self.assertTrue(self.check_diff_cis("stale", wrong_wtl))
        wrong_p = "| 0° | −0.054 [−0.077, −0.033] | 4 / 1 / 25 | 0.03 |\n"
        self.assertTrue(self.check_diff_cis("stale", "| gap | d | w | Wilcoxon p |\n|---|---|---|---|\n" + wrong_p))
        right = "| 0° | −0.054 [−0.077, −0.033] | 4 / 1 / 25 | 7e-5 |\n"
        self.assertFalse(self.check_diff_cis("ok", "| gap | d | w | Wilcoxon p |\n|---|---|---|---|\n" + right))

    def test_historical_numbers_are_what_their_commit_held(self):
        checked = 0
        for quoted, (commit, path, grid, gap, kind, model, metric, what) in HISTORICAL.items():
            try:
                r = subprocess.run(["git", "-C", ROOT, "show", f"{commit}:{path}"], capture_output=True, text=True)
            except OSError:
                break  # no git
            if r.returncode != 0:
                continue  # a shallow clone or an export without history
            row = next((x for x in csv.DictReader(io.StringIO(r.stdout))
                        if (x["grid"], x["gap"], x["kind"], x["model"], x["metric"]) == (grid, gap, kind, model, metric)),
                       None)
            self.assertIsNotNone(row, f"{commit}:{path} has no row {grid},{gap},{kind},{model},{metric}")
            if what == "ci":
                got = f"{float(row['mean']):+.3f} [{float(row['ci_lo']):+.3f}, {float(row['ci_hi']):+.3f}]"
            else:
                got = f"{float(row['mean']):{'+' if quoted[0] in '+−-' else ''}.3f}"
            self.assertEqual(norm(quoted), got, f"{commit}:{path}")
            checked += 1
            self.assertIn(quoted, self.docs[HISTORICAL_DOC], f"{quoted} is quoted nowhere now")
        if not checked:
            self.skipTest("no git history here")


if __name__ == "__main__":
    unittest.main()
