#!/usr/bin/env python3
"""Check that docs/client-api.md shows the first programs exactly as they are.

Usage: check_examples.py --source-dir DIR

Every file of DIR/examples/first/ must appear in docs/client-api.md as the
first fenced code block after a heading that names it
(`examples/first/FILE`), byte for byte (the file's last newline aside), and
every heading that names a file there must name one that exists. The files
themselves are compiled and run against two daemons by the examples.first.*
tests (tests/docs/run_first.py), so the page shows programs that work.

Exit status: 0 when they agree, 1 with one line per difference. Run by
ctest as docs.examples.
"""
import argparse
import difflib
import os
import re
import sys

PAGE = "docs/client-api.md"
FOLDER = "examples/first"


def blocks(doc):
    """{file named by a heading: (line number, text of the next fenced block)}."""
    result, lines, i = {}, doc.split("\n"), 0
    while i < len(lines):
        m = re.match(r"^#+ .*`" + re.escape(FOLDER) + r"/([^`]+)`", lines[i])
        i += 1
        if not m:
            continue
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        start = i + 1
        i = start
        while i < len(lines) and lines[i] != "```":
            i += 1
        result[m.group(1)] = (start, "\n".join(lines[start:i]))
        i += 1
    return result


def main():
    parser = argparse.ArgumentParser(description="Check the first programs in the page.")
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    root = os.path.abspath(args.source_dir)
    with open(os.path.join(root, PAGE), encoding="utf-8") as f:
        shown = blocks(f.read())
    files = sorted(os.listdir(os.path.join(root, FOLDER)))
    problems = []
    for name in files:
        with open(os.path.join(root, FOLDER, name), encoding="utf-8") as f:
            text = f.read().rstrip("\n")
        if name not in shown:
            problems.append(f"{PAGE}: {FOLDER}/{name} is not shown (a heading naming "
                            f"`{FOLDER}/{name}`, then its code)")
            continue
        line, block = shown[name]
        if block != text:
            diff = difflib.unified_diff(text.split("\n"), block.split("\n"),
                                        f"{FOLDER}/{name}", f"{PAGE}:{line}", lineterm="", n=1)
            problems.append(f"{PAGE}:{line}: the code differs from {FOLDER}/{name}:\n"
                            + "\n".join(diff))
    for name in sorted(shown.keys() - set(files)):
        problems.append(f"{PAGE}:{shown[name][0]}: shows {FOLDER}/{name}, which does not exist")
    for p in problems:
        print(p)
    if problems:
        print(f"check_examples: {len(problems)} difference(s)", file=sys.stderr)
        return 1
    print(f"check_examples: {PAGE} shows the {len(files)} first programs as they are")
    return 0


if __name__ == "__main__":
    sys.exit(main())
