#!/usr/bin/env python3
"""The docs quote only generated numbers: every difference with its CI, every accuracy
with its CI, and the wins / ties / losses and Wilcoxon p quoted beside them, in
README.md, docs/results.md, results/README.md and docs/smallnorb.md, must be in
results/SUMMARY.md; and SUMMARY.md must be what tools/results_summary.py writes from
the committed tables now.

The words for claims follow the one rule docs/results.md states (#the-rule-for-claims):
a direction ("ahead", "behind", "beats", "wins", "better", "worse", ...) only where the 95 %
CI excludes 0 and Wilcoxon p < 0.05; "tie" or "level" only where the CI holds 0 and p >= 0.05;
"not resolved", with p beside it, where the two disagree (allowed wherever the CI holds 0).
In README.md, results/README.md and docs/*.md it checks:
- each difference quoted with its CI (3 or 4 decimals: "+0.010 [+0.000, +0.020]") against
  the claim word that governs it: the nearest before it in its sentence, else the first after
  it (before the next CI or ';'); its p is a table row's "Wilcoxon p" cell, else its SUMMARY
  rows' (where they agree on the side of 0.05), else the one quoted after it, else unknown
  (the CI alone decides);
- each p quoted in a sentence with no CI against the claim word nearest before it;
- a CI over fewer than 10 seeds (its SUMMARY rows' n) has its seed count in its paragraph
  (or, in a table, in the paragraph that introduces it).
It skips, and cannot judge: a direction in a sentence with neither a CI nor a p ("1-NN is
ahead of every trained model"), a range of differences ("+0.009 to +0.046"), comparisons of
two means ("0.996 both"), negated directions ("no better than"), seed counts ("better on 28
of 30 seeds", "1 tie", "wins / ties / losses"), and fenced code blocks.

  python3 tests/test_results_numbers.py     (plain unittest; exit code 1 on failure)

A number the docs quote from before the tables were regenerated is listed in
HISTORICAL with the commit and file it comes from, and checked against that
commit's file where git has it. Needs python3 only (no binary).
"""
import csv
import glob
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

# Quoted from the tables as they were before a change to how the dataset is made (each
# entry names the commit whose tables hold it), allowed only in docs/results.md and only in a
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


# The one rule for the words beside a quoted difference (docs/results.md#the-rule-for-claims):
# a direction only where the 95 % CI excludes 0 and Wilcoxon p < 0.05; "tie" or "level" only
# where the CI holds 0 and p >= 0.05; otherwise "not resolved", with p beside it.
CLAIM_DOCS = ["README.md", "results/README.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
CLAIM_NUM = r"[+−-]\d+\.\d{3,4}"  # a per-seed CSV's 4 decimals too: −0.0003 [−0.0014, +0.0007]
CLAIM_CI = re.compile(rf"({CLAIM_NUM})(?:, 95 % CI)? \[({CLAIM_NUM}), ({CLAIM_NUM})\]")
DIRECTION = (r"ahead|behind|beats?|better|worse|trails?|outperforms?|wins?|won|leads?|lags?"
             r"|(?:loses?|lost|errs?) (?:less|more)")
NULL = r"ties?|tied|level|not resolved|unresolved|no difference"
UNRESOLVED = r"not resolved|unresolved"
CLAIM_WORD = re.compile(rf"\b(?:{DIRECTION}|{NULL})\b")
SEED_COUNT = re.compile(r"\s+(?:on|in)\s+(?:\d|every|all|each|most)")  # "better on 28 of 30 seeds"
NEGATED = re.compile(r"\b(?:not|no|never|nor)\s+(?:\w+\s+)?$")        # "no better than"
SENTENCE_END = re.compile(r"[.!?](?:\*\*)?(?=\s+[A-Z*(`\[])")


def claim_kind(u, w):
    """A negated direction ("no better than") claims no direction: any difference may carry it."""
    word = w.group(0)
    if NEGATED.search(u[max(0, w.start() - 30):w.start()]) and re.fullmatch(DIRECTION, word):
        return "negated"
    if re.fullmatch(UNRESOLVED, word):
        return "unresolved"
    return "null" if re.fullmatch(NULL, word) else "direction"


def claim_words(u, start, end):
    """The claim words of u[start:end], less seed counts and table headers'
    "better / tie / worse"."""
    out = []
    for w in CLAIM_WORD.finditer(u, start, end):
        if SEED_COUNT.match(u, w.end()):
            continue
        if re.search(r"\d ?$", u[:w.start()]):  # "1 tie": a seed count
            continue
        if "/" in u[max(0, w.start() - 3):w.start()] + u[w.end():w.end() + 3]:
            continue
        if w.group(0) == "level" and re.search(r"(?:noise|rounding) $", u[:w.start()]):
            continue
        out.append(w)
    return out


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
        # The issue's example: the seed's split as it was quoted before the regeneration.
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


    def p_of(self, ci, tail):
        """The Wilcoxon p of a quoted difference: its SUMMARY rows' (when they agree on the
        side of 0.05), else the one quoted after it, else None."""
        ps = set()
        for r in self.rows:
            if ci in r:
                cell = r.split("|")[-3].strip()
                if P_CELL.match(cell):
                    ps.add(float(cell) < 0.05)
        if len(ps) == 1:
            return ps.pop()
        q = P_QUOTED.search(tail)
        return float(q.group(1)) < 0.05 if q and not ps else None

    def check_claims(self, doc, text):
        """Each quoted difference with its CI against the word that governs it: the nearest
        claim word before it in its sentence, else the first after it (before the next CI)."""
        bad = []
        for header, unit in units(text):
            u = norm(unit)
            found = list(CLAIM_CI.finditer(u))
            for i, m in enumerate(found):
                lo, hi = float(m.group(2)), float(m.group(3))
                excludes = (lo > 0 and hi > 0) or (lo < 0 and hi < 0)
                nxt = found[i + 1].start() if i + 1 < len(found) else len(u)
                ends = [e.end() for e in SENTENCE_END.finditer(u)]
                start = max([e for e in ends if e <= m.start()], default=0)
                stop = min([e for e in ends if e >= m.end()] + [len(u)])
                before = claim_words(u, start, m.start())
                semi = u.find(";", m.end())
                after = claim_words(u, m.end(), min(stop, nxt, semi if semi >= 0 else len(u)))
                word = before[-1] if before else (after[0] if after else None)
                if word is None:
                    continue
                ci = f"{m.group(1)} [{m.group(2)}, {m.group(3)}]"
                significant = self.p_of(ci, u[m.end():nxt])
                if header and header[-1] in ("Wilcoxon p", "p") and P_CELL.match(u.strip().strip("|").split("|")[-1].strip()):
                    significant = float(u.strip().strip("|").split("|")[-1].strip()) < 0.05
                if excludes and significant is not False:
                    allowed = {"direction"}
                elif not excludes and significant is not True:
                    allowed = {"null", "unresolved"}
                else:
                    allowed = {"unresolved"}
                kind = claim_kind(u, word)
                if kind == "negated":
                    continue
                where = f"{doc}: '{word.group(0)}' beside {ci}"
                if kind not in allowed:
                    why = ("the CI excludes 0" if excludes else "the CI holds 0") + (
                        "" if significant is None else ", p %s 0.05" % ("<" if significant else ">="))
                    bad.append(f"{where} ({why}): '{unit.strip()[:140]}'")
                elif allowed == {"unresolved"} and not (P_QUOTED.search(u[start:stop]) or header):
                    bad.append(f"{where}: not resolved, but no p beside it: '{unit.strip()[:140]}'")
        return bad

    def check_p_claims(self, doc, text):
        """A sentence (or its clause up to a ';') that quotes a Wilcoxon p and no difference
        with its CI: the claim word nearest before each p must fit that p alone: no direction
        where p >= 0.05, no "tie" or "level" where p < 0.05."""
        bad = []
        for _, unit in units(text):
            u = norm(unit)
            ends = [0] + [e.end() for e in SENTENCE_END.finditer(u)] + [len(u)]
            for a, b in zip(ends, ends[1:]):
                if CLAIM_CI.search(u, a, b):
                    continue
                for q in P_QUOTED.finditer(u, a, b):
                    start = max(a, u.rfind(";", a, q.start()) + 1)
                    words = claim_words(u, start, q.start())
                    if not words:
                        continue
                    kind = claim_kind(u, words[-1])
                    significant = float(q.group(1).rstrip(".")) < 0.05
                    if (kind == "direction" and not significant) or (kind == "null" and significant):
                        bad.append(f"{doc}: '{words[-1].group(0)}' with p = {q.group(1)} and no CI: "
                                   f"'{u[a:b].strip()[:140]}'")
        return bad

    def check_few_seeds(self, doc, text):
        """A CI over fewer than 10 seeds (its SUMMARY rows' n) is quoted with its seed count
        in the same paragraph or row: over 3 seeds the percentile bootstrap has 10 distinct
        resamples and the CI is about the seeds' range, not a 95 % interval."""
        bad, intro = [], ""
        for header, unit in units(text):
            u = norm(unit)
            if header is None:
                intro = u  # a table is read with the paragraph that introduces it
            seen = u if header is None else intro + " " + u
            for m in list(DIFF_CI.finditer(u)) + list(ACC_CI.finditer(u)):
                ns = set()
                for r in self.rows:
                    if m.group(0) in r:
                        cells = [c.strip() for c in r.strip().strip("|").split("|")]
                        i = next(k for k, c in enumerate(cells) if m.group(0) in c)
                        if i > 0 and cells[i - 1].isdigit():
                            ns.add(int(cells[i - 1]))
                        elif i > 1 and cells[i - 2].isdigit():  # a row's familiar CI after n
                            ns.add(int(cells[i - 2]))
                if ns and max(ns) < 10:
                    n = max(ns)
                    said = {3: "three", 5: "five"}.get(n, str(n))
                    if not re.search(rf"\b(?:{n}|{said}) seeds\b", seen, re.I):
                        bad.append(f"{doc}: {m.group(0)} is over {n} seeds, not said beside it: "
                                   f"'{unit.strip()[:120]}'")
        return bad

    def assert_every_claim_doc(self, check):
        bad = []
        for doc in CLAIM_DOCS:
            with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
                bad += check(doc, f.read())
        self.assertFalse(bad, "\n" + "\n".join(bad))

    def test_claims_follow_the_rule(self):
        self.assert_every_claim_doc(self.check_claims)

    def test_claims_with_p_alone_follow_the_rule(self):
        self.assert_every_claim_doc(self.check_p_claims)

    def test_cis_over_few_seeds_say_so(self):
        self.assert_every_claim_doc(self.check_few_seeds)

    def test_a_wrong_claim_is_caught(self):
        # The toys' elevation row: CI touching 0, p = 0.058.
        self.assertTrue(self.check_claims("x", "The CNN beats the capsules on elevation, +0.010 [+0.000, +0.020].\n"))
        self.assertFalse(self.check_claims("x", "On elevation they tie, +0.010 [+0.000, +0.020] (p = 0.058).\n"))
        # Turns of 90°–150°: CI across 0 but p = 0.0053: neither a direction nor a tie.
        turns = "+0.014 [−0.001, +0.027]"
        self.assertTrue(self.check_claims("x", f"Only turns of 90°–150° tie ({turns}).\n"))
        self.assertTrue(self.check_claims("x", f"At turns of 90°–150° the capsules are ahead ({turns}).\n"))
        self.assertTrue(self.check_claims("x", f"At turns of 90°–150° it is not resolved ({turns}).\n"))  # no p
        self.assertFalse(self.check_claims("x", f"At turns of 90°–150° it is not resolved ({turns}, p = 0.0053).\n"))
        # A resolved difference called a tie, and seed counts, which any difference may carry.
        self.assertTrue(self.check_claims("x", "At 0° they tie: −0.054 [−0.077, −0.033].\n"))
        self.assertFalse(self.check_claims("x", "The CNN is better at 0° (−0.054 [−0.077, −0.033], caps better on 4 of 30 seeds).\n"))


    def test_the_issues_examples_are_caught(self):
        # Issue 55's four sentences, each as it was and as the rule words it.
        c = self.check_claims
        self.assertTrue(c("x", "The CNN beats the capsules on the toys' elevation protocol at +0.010 "
                               "[+0.000, +0.020], Wilcoxon p = 0.058.\n"))
        self.assertFalse(c("x", "On elevation it is not resolved, +0.010 [+0.000, +0.020], p = 0.058.\n"))
        self.assertTrue(c("x", "Full backpropagation at λ = 1 is ahead there (+0.022 [−0.002, +0.047]).\n"))
        self.assertFalse(c("x", "Full backpropagation at λ = 1 is not resolved there (+0.022 [−0.002, +0.047], p = 0.05).\n"))
        self.assertTrue(c("x", "At 90°–150° they tie, +0.014 [−0.001, +0.027].\n"))
        self.assertTrue(c("x", "1-NN beats every trained model at small shears (CNN − nn1 −0.0003 [−0.0014, +0.0007]).\n"))
        self.assertFalse(c("x", "At small shears 1-NN and the CNN are level (CNN − nn1 −0.0003 [−0.0014, +0.0007]).\n"))
        # Wins and leads are directions; a count of seeds is not a claim.
        self.assertTrue(c("x", "The capsules win at 60°: +0.001 [−0.018, +0.020].\n"))
        self.assertFalse(c("x", "At 60°, +0.001 [−0.018, +0.020], the capsules win on 15 of 30 seeds (p = 0.9).\n"))
        # A p with no CI beside it.
        self.assertTrue(self.check_p_claims("x", "On azimuth dr is behind the CNN (Wilcoxon p = 0.79).\n"))
        self.assertTrue(self.check_p_claims("x", "At turns of 90°–150° they tie (p = 0.005).\n"))
        self.assertFalse(self.check_p_claims("x", "On azimuth dr is behind the CNN (p = 0.0033); on elevation "
                                                  "it is not resolved (p = 0.43).\n"))
        self.assertFalse(self.check_p_claims("x", "dr is no better than the CNN (p = 0.79).\n"))
        # A CI over 5 seeds says so.
        five = "cnn-paper − convcaps +0.072 [+0.028, +0.111], p = 0.12"
        self.assertTrue(self.check_few_seeds("x", f"Not resolved: {five}.\n"))
        self.assertFalse(self.check_few_seeds("x", f"Not resolved: {five} over 5 seeds.\n"))


if __name__ == "__main__":
    unittest.main()
