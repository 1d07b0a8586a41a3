#!/usr/bin/env python3
"""docs/cli.md (and protocols.md's registry table) against the binary's own --help, whose
lists of models, data sources, splits and protocols the registries write.

  python3 tests/test_cli_docs.py          (plain unittest; exit code 1 on failure)

Every name is read from `viewgap --help` and `viewgap CMD --help`, none is written here, so a
model, source, split, protocol, command or flag added to (or removed from) the code fails this
test until the docs say so. The binary is $VIEWGAP_EXE, or build/release/viewgap.
"""
import os
import re
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXE = os.environ.get("VIEWGAP_EXE") or os.path.join(ROOT, "build", "release", "viewgap")
CLI_MD = os.path.join(ROOT, "docs", "cli.md")
PROTOCOLS_MD = os.path.join(ROOT, "docs", "protocols.md")


def help_text(*cmd):
    r = subprocess.run([EXE, *cmd, "--help"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"viewgap {' '.join(cmd)} --help: exit {r.returncode}: {r.stderr}")
    return r.stdout


def help_options(text):
    """--name -> its help, from CLI11's Options: block (a long entry wraps onto indented lines)."""
    opts, name = {}, None
    for line in text.split("Options:", 1)[1].splitlines():
        m = re.match(r"^  (?:-\w,)?(--[\w-]+)(?:,-\w)?(?: [A-Z]+(?:=\S*)?(?: \.\.\.)?(?: REQUIRED)?)?(?:\s+(.*))?$", line)
        if m:
            name = m.group(1)
            opts[name] = (m.group(2) or "").strip()
        elif name and line.startswith("    ") and line.strip():
            opts[name] = (opts[name] + " " + line.strip()).strip()
        elif not line.strip():
            name = None
    opts.pop("--help", None)
    return opts


def subcommands(text):
    out = []
    for line in text.split("Subcommands:", 1)[1].splitlines():
        m = re.match(r"^  ([a-z][\w-]*)\s", line)
        if m:
            out.append(m.group(1))
    return out


def names_after(help_line, lead):
    """'Comma-separated, of: caps, cnn, ...' -> ['caps', 'cnn', ...]."""
    assert lead in help_line, f"expected {lead!r} in {help_line!r}"
    return [n.strip().strip("`") for n in help_line.split(lead, 1)[1].replace(" or ", ", ").split(",") if n.strip()]


def split_lists(help_line):
    """--split's help 'with --data S: a, b; --data T: c' -> {S: [a, b], T: [c]}; docs/cli.md's
    row is written the same way, with the source in backticks."""
    out = {}
    for part in re.split(r";\s*", help_line):
        m = re.search(r"--data ([\w:-]+?)`?: (.*)$", part.replace("`--data", "--data"))
        if m:
            out[m.group(1)] = [n.strip(" `().") for n in m.group(2).replace(" or ", ", ").split(",") if n.strip(" `")]
    return out


def sources(help_line):
    """--data's help 'synthetic (rendered), norb:DIR (...), ... or idx:DIR (...); docs/data.md'
    -> ['synthetic', 'norb:DIR', ..., 'idx:DIR']: the words outside the parentheses."""
    outside, depth = "", 0
    for ch in help_line:
        depth += ch == "("
        if depth == 0:
            outside += ch
        depth -= ch == ")"
    return [w.strip() for w in outside.split(";")[0].replace(" or ", ",").split(",") if w.strip()]


def sections(md):
    """'## name' -> its text (its ### subsections included)."""
    out, name = {}, None
    for line in md.splitlines():
        m = re.match(r"^## (.+)$", line)
        if m:
            name = m.group(1).strip()
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def table_rows(text):
    """Each table row's cells; a header row (the one above the |---| rule) left out."""
    rule = re.compile(r"^\|[-| ]+\|$")
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or rule.match(line) or (i + 1 < len(lines) and rule.match(lines[i + 1])):
            continue
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def flag_rows(text):
    """--flag -> the 'what' cell of the flag table row naming it (a row may name several)."""
    out = {}
    for cells in table_rows(text):
        for flag in re.findall(r"`(--[\w-]+)", cells[0]):
            out[flag] = cells[-1]
    return out


class CliDocs(unittest.TestCase):
    maxDiff = None
    @classmethod
    def setUpClass(cls):
        if not os.access(EXE, os.X_OK):
            raise unittest.SkipTest(f"no viewgap binary at {EXE}")
        with open(CLI_MD, encoding="utf-8") as f:
            cls.md = f.read()
        cls.sections = sections(cls.md)
        cls.top = help_text()
        cls.commands = subcommands(cls.top)
        cls.help = {c: help_options(help_text(c)) for c in cls.commands}

    def test_help_lists_the_commands(self):
        # A parse that finds nothing would pass every test below.
        self.assertIn("run", self.commands)
        self.assertIn("--models", self.help["run"])

    def test_every_command_has_a_section_and_a_row(self):
        rows = {m for cells in table_rows(self.md) for m in re.findall(r"^\[`([\w-]+)`\]\(#", cells[0])}
        for c in self.commands:
            self.assertTrue(c in self.sections, f"docs/cli.md has no '## {c}' section")
            self.assertIn(c, rows, f"docs/cli.md's table of commands has no row for {c}")
        self.assertEqual(rows - set(self.commands), set(), "docs/cli.md lists commands viewgap --help does not")
        m = re.search(r"`viewgap` has (\w+) commands", self.md)
        words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}
        self.assertIsNotNone(m, "docs/cli.md no longer says how many commands viewgap has")
        self.assertEqual(m.group(1), words.get(len(self.commands)), "docs/cli.md's count of commands")

    def test_models_list(self):
        want = names_after(self.help["run"]["--models"], "of: ")
        rows = flag_rows(self.sections["run"])
        self.assertEqual(names_after(rows["--models"], "of: "), want, "docs/cli.md's --models row (run)")

    def test_profile_model_list(self):
        want = names_after(self.help["profile"]["--model"], "The model: ")
        rows = flag_rows(self.sections["profile"])
        self.assertEqual(names_after(rows["--model"], "The model: "), want, "docs/cli.md's --model row (profile)")

    def test_data_sources(self):
        want = sources(self.help["run"]["--data"])
        self.assertGreaterEqual(len(want), 2, self.help["run"]["--data"])
        row = flag_rows(self.sections["run"])["--data"]
        for s in want:
            self.assertRegex(row, rf"(^|[ (`]){re.escape(s)}([ )`,;]|$)", f"docs/cli.md's --data row lacks source {s}")

    def test_splits_of_each_source(self):
        want = split_lists(self.help["run"]["--split"])
        self.assertEqual(set(want), set(sources(self.help["run"]["--data"])), "--split's help names every source")
        got = split_lists(flag_rows(self.sections["run"])["--split"])
        self.assertEqual(got, want, "docs/cli.md's --split row (run): the splits of each --data")

    def test_protocols_with_default_gaps_are_in_protocols_md(self):
        # sweep --gaps' help names each protocol that steps a gap; protocols.md's registry table
        # names each protocol in full.
        gaps = self.help["sweep"]["--gaps"]
        names = re.findall(r"(?:default: |; )([a-z][\w-]*) [\d.]", gaps)
        self.assertGreaterEqual(len(names), 2, gaps)
        with open(PROTOCOLS_MD, encoding="utf-8") as f:
            table = [cells[0] for cells in table_rows(sections(f.read())["Protocols in the code"])]
        listed = {n.strip() for cell in table for n in cell.split(",")}
        for n in names:
            self.assertIn(n, listed, f"docs/protocols.md's registry table lacks protocol {n}")

    def test_every_flag_is_in_its_commands_tables(self):
        # sweep, eval and profile take run's flags and model options, which run's tables hold.
        run_rows = flag_rows(self.sections["run"])
        for c in self.commands:
            rows = flag_rows(self.sections.get(c, ""))  # a missing section fails the test above
            for flag in self.help[c]:
                if c in ("sweep", "eval", "profile") and flag in run_rows:
                    continue
                self.assertTrue(flag in rows, f"docs/cli.md's '## {c}' tables lack {flag}")

    def test_no_flag_in_a_commands_tables_that_it_lacks(self):
        for c in self.commands:
            for flag in flag_rows(self.sections.get(c, "")):
                self.assertTrue(flag in self.help[c], f"docs/cli.md's '## {c}' tables list {flag}, which viewgap {c} --help does not")

    def test_defaults(self):
        # The 'default' column, where a table has one, against the help's =DEFAULT.
        # A change in the help's format would match nothing and pass: count what was compared.
        compared = 0
        for c in self.commands:
            text = help_text(c)
            for cells in table_rows(self.sections.get(c, "")):
                flags = re.findall(r"`(--[\w-]+)`", cells[0])
                if len(cells) != 3 or len(flags) != 1:
                    continue
                m = re.search(rf"^  (?:-\w,)?{re.escape(flags[0])} [A-Z]+=(\S+)", text, re.M)
                if m and cells[1].startswith("`"):
                    self.assertEqual(cells[1].strip("`"), m.group(1), f"docs/cli.md's default of {flags[0]} ({c})")
                    compared += 1
        self.assertGreater(compared, 20, "docs/cli.md's defaults: too few compared with the help")


if __name__ == "__main__":
    unittest.main()
