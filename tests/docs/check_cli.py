#!/usr/bin/env python3
"""Check docs/cli.md against the rdmamsg tool's --help.

Usage: check_cli.py --rdmamsg PATH --source-dir DIR

Reads `rdmamsg --help` and every subcommand's --help (as
tests/man/check_man.py reads them; the manual page rdmamsg(1) is checked
there) and compares with docs/cli.md:

- every subcommand (status, bench throughput, ...) is named in the page;
- every option of every command is named in the page (`--window`), and
  every option the page names exists;
- the table under "## Exit codes" lists exactly the codes of the help's
  "Exit codes:", each saying at least what the help says.

Exit status: 0 when they agree, 1 with one line per mismatch, 2 when the
program cannot be run. Run by ctest as docs.cli.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "man"))
import check_man  # noqa: E402  (load_program, walk, plain: the help texts, read once)

PAGE = "docs/cli.md"


def main():
    parser = argparse.ArgumentParser(description="Check docs/cli.md against rdmamsg --help.")
    parser.add_argument("--rdmamsg", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    with open(os.path.join(args.source_dir, PAGE), encoding="utf-8") as f:
        doc = f.read()

    problems = check_man.Problems()
    root, _ = check_man.load_program(args.rdmamsg, PAGE, doc, problems)
    commands = list(check_man.walk(root))
    words = " ".join(doc.split())

    for c in commands:
        if c.path and not re.search(r"\b" + re.escape(" ".join(c.path)) + r"\b", words):
            problems.add(PAGE, f"the command '{' '.join(c.path)}' is not named")
    known = set()
    for c in commands:
        known |= c.help.options | c.implicit
        for o in sorted(c.help.options - check_man.HELP_OPTIONS):
            if o.startswith("--") and not re.search(re.escape(o) + r"(?![\w-])", doc):
                where = " ".join(c.path) or "rdmamsg"
                problems.add(PAGE, f"option {o} of '{where}' is not named")
    for o in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", doc)) - known):
        problems.add(PAGE, f"names {o}, which no --help lists")

    section = re.search(r"^## Exit codes\s*\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    rows = {}
    for line in (section.group(1) if section else "").splitlines():
        m = re.match(r"^\|\s*(\d+)\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = check_man.plain(m.group(2))
    if not section:
        problems.add(PAGE, "no section '## Exit codes'")
    listed = root.help.exit_codes
    for code, text in listed.items():
        if code not in rows:
            problems.add(PAGE, f"exit code {code} ({text}) is not in the table")
        elif check_man.plain(text) not in rows[code]:
            problems.add(PAGE, f"exit code {code} does not say what --help says: '{text}'")
    for code in sorted(rows.keys() - listed.keys(), key=int):
        problems.add(PAGE, f"exit code {code} is in the table, but not in --help")

    for line in problems.lines:
        print(line)
    if problems.lines:
        print(f"check_cli: {len(problems.lines)} mismatch(es)", file=sys.stderr)
        return 1
    print(f"check_cli: {PAGE} agrees with the {len(commands)} commands' --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
