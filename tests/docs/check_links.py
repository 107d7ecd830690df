#!/usr/bin/env python3
"""Check that the links between the documents lead somewhere.

Usage: check_links.py --source-dir DIR

Reads README.md, CHANGELOG.md and docs/*.md under DIR. Every Markdown link
to a relative path ([text](docs/x.md), [text](x.md#anchor), [text](#anchor))
must name a file that exists and, with an anchor, a heading of that file
(anchors made as GitHub makes them: lower case, punctuation dropped, spaces
as hyphens, -1, -2, … for repeated headings). Links to http(s) and mailto
are not followed. Exit status: 0 when every link resolves, 1 with one line
per broken link, 2 when the arguments are wrong. Run by ctest as docs.links.
"""
import argparse
import glob
import os
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """The anchors of a Markdown file's headings (outside code blocks)."""
    seen, result, fenced = {}, set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).lower()
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            result.add(slug if n == 0 else f"{slug}-{n}")
    return result


def links(path):
    """(line number, target) of every link in a Markdown file, outside code."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            line = re.sub(r"`[^`]*`", "", line)
            for m in LINK.finditer(line):
                yield i, m.group(1)


def main():
    parser = argparse.ArgumentParser(description="Check the documents' links.")
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    root = os.path.abspath(args.source_dir)
    files = [os.path.join(root, n) for n in ("README.md", "CHANGELOG.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        print(f"check_links: no documents under {root}", file=sys.stderr)
        return 2
    cache, problems = {}, []
    for path in files:
        for line_no, target in links(path):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            where = f"{os.path.relpath(path, root)}:{line_no}"
            if not os.path.exists(dest):
                problems.append(f"{where}: {target}: no file {os.path.relpath(dest, root)}")
                continue
            if anchor and dest.endswith(".md"):
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    problems.append(f"{where}: {target}: {os.path.relpath(dest, root)} has no "
                                    f"heading #{anchor}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_links: {len(problems)} broken link(s)", file=sys.stderr)
        return 1
    print(f"check_links: every link of {len(files)} documents resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
