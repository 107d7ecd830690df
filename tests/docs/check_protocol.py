#!/usr/bin/env python3
"""Check that docs/protocol.md agrees with the codecs on every number it names.

Usage: check_protocol.py --source-dir DIR

Reads the enums of the headers under DIR and the tables of
DIR/docs/protocol.md, and compares:

- local protocol: the frame kinds (common/local_protocol.h FrameKind, named
  as toString(FrameKind) in common/local_protocol.cc names them) against the
  "### Frames" table; the error codes (common/status.h Errc) against the
  "### Error codes" table (and value 0, ok, named in the text); the framing
  version (kProtocolVersion) against the header table; the shared-memory
  ring versions the daemon takes (common/shm_ring.h kMinVersion..kVersion)
  against SHM_OFFER's row and the text;
- peer protocol (daemon/peer/protocol.h): the Hello's magic, version and
  flags (HelloFlags), the reject reasons (RejectReason), the batch magic,
  the record types (RecordType) against the record table, the IDLE_CLOSE
  actions (IdleClose), and the outcomes a CONFIRM may carry
  (isConfirmOutcome in daemon/peer/protocol.cc) against the CONFIRM row.

Exit status: 0 when everything agrees, 1 with one line per mismatch, 2 when
a header cannot be parsed. Run by ctest as docs.protocol.
"""
import argparse
import os
import re
import sys

problems = []


def fail(text):
    problems.append(f"docs/protocol.md: {text}")


def die(text):
    print(f"check_protocol: {text}", file=sys.stderr)
    sys.exit(2)


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def enum(text, name, where):
    """{value: enumerator} of `enum [class] name [: type] { a = 1, ... }`."""
    m = re.search(r"\benum\s+(?:class\s+)?" + re.escape(name) + r"\b[^{]*\{(.*?)\};",
                  strip_comments(text), re.S)
    if not m:
        die(f"no enum {name} in {where}")
    result = {}
    for item in m.group(1).split(","):
        item = item.strip()
        if not item:
            continue
        e = re.fullmatch(r"(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)", item)
        if not e:
            die(f"{where}: enumerator of {name} without an explicit value: {item!r}")
        result[int(e.group(2), 0)] = e.group(1)
    return result


def constant(text, name, where):
    m = re.search(r"\b" + re.escape(name) + r"\s*=\s*(0x[0-9a-fA-F]+|\d+)", strip_comments(text))
    if not m:
        die(f"no constant {name} in {where}")
    return int(m.group(1), 0)


def section(doc, heading):
    """The text of a '#...# heading' section up to the next heading of its level or above."""
    m = re.search(r"^(#+) " + re.escape(heading) + r"[^\n]*\n", doc, re.M)
    if not m:
        fail(f"no section '{heading}'")
        return ""
    level = len(m.group(1))
    rest = doc[m.end():]
    end = re.search(r"^#{1,%d} " % level, rest, re.M)
    return rest[:end.start()] if end else rest


def table(text):
    """Rows (lists of cells, backticks removed) of the first Markdown table in text."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if all(re.fullmatch(r":?-+:?", c) for c in cells):
                continue
            rows.append(cells)
        elif rows:
            break
    return rows[1:]  # without the header


def bare(cell):
    return cell.replace("`", "").strip()


def upper_snake(enumerator):
    """kIdleClose -> IDLE_CLOSE."""
    name = re.sub(r"^k(?=[A-Z])", "", enumerator)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def compare(what, code, doc):
    """code, doc: {number: name}."""
    for v in sorted(code.keys() - doc.keys()):
        fail(f"{what} {v} ({code[v]}) is not documented")
    for v in sorted(doc.keys() - code.keys()):
        fail(f"{what} {v} ({doc[v]}) is documented but not in the code")
    for v in sorted(code.keys() & doc.keys()):
        if code[v] != doc[v]:
            fail(f"{what} {v} is {code[v]} in the code, {doc[v]} in the page")


def check_local(root, doc):
    header = read(root, "common/local_protocol.h")
    names = dict(re.findall(r"case FrameKind::(\w+):\s*return \"([A-Z_]+)\";",
                            read(root, "common/local_protocol.cc")))
    kinds = {v: names.get(e, e) for v, e in enum(header, "FrameKind", "local_protocol.h").items()}
    frames = {}
    for row in table(section(doc, "Frames")):
        if len(row) >= 2 and bare(row[0]).isdigit():
            frames[int(bare(row[0]))] = bare(row[1])
    compare("frame kind", kinds, frames)

    errc = enum(read(root, "common/status.h"), "Errc", "status.h")
    codes = {}
    for row in table(section(doc, "Error codes")):
        if len(row) >= 2 and bare(row[0]).isdigit():
            codes[int(bare(row[0]))] = bare(row[1])
    compare("error code", {v: n for v, n in errc.items() if v != 0}, codes)
    if 0 in errc and not re.search(r"[Vv]alue 0 \(`" + errc[0] + "`\)", section(doc, "Error codes")):
        fail(f"the error codes do not say that value 0 is `{errc[0]}`")

    version = constant(header, "kProtocolVersion", "local_protocol.h")
    framing = {bare(r[2]): bare(r[3]) for r in table(section(doc, "Framing")) if len(r) >= 4}
    if not re.match(r"^%d\b" % version, framing.get("version", "")):
        fail(f"the frame header's version is {version} in the code, "
             f"'{framing.get('version')}' in the page")

    ring = read(root, "common/shm_ring.h")
    low, high = constant(ring, "kMinVersion", "shm_ring.h"), constant(ring, "kVersion", "shm_ring.h")
    offer = frames.get(constant(header, "shm_offer", "local_protocol.h"))
    row = next((r for r in table(section(doc, "Frames")) if bare(r[1]) == offer), None)
    m = re.search(r"ringVersion` \((\d+) to (\d+)\)", row[3]) if row else None
    if not m or (int(m.group(1)), int(m.group(2))) != (low, high):
        fail(f"SHM_OFFER's ringVersion is {low} to {high} in the code, "
             f"{m.group(0) if m else 'not given'} in the page")
    m = re.search(r"daemon accepts offers of versions (\d+) to (\d+)", doc.replace("\n", " "))
    if not m or (int(m.group(1)), int(m.group(2))) != (low, high):
        fail(f"'The daemon accepts offers of versions {low} to {high}' is not in the page")


def check_peer(root, doc):
    header = read(root, "daemon/peer/protocol.h")
    where = "daemon/peer/protocol.h"
    hello = {bare(r[2]): r[3] for r in table(section(doc, "Handshake")) if len(r) >= 4}
    magic = constant(header, "kHelloMagic", where)
    if f"0x{magic:08x}" not in hello.get("magic", "").lower():
        fail(f"the Hello's magic is 0x{magic:08x} in the code, '{hello.get('magic')}' in the page")
    version = constant(header, "kProtocolVersion", where)
    if not re.match(r"^`?%d`?" % version, hello.get("version", "")):
        fail(f"the Hello's version is {version} in the code, '{hello.get('version')}' in the page")
    flags = {v for v in enum(header, "HelloFlags", where)}
    doc_flags = {int(n) for n in re.findall(r"(?:^|; )(\d+) = ", hello.get("flags", ""))}
    for v in sorted(flags ^ doc_flags):
        fail(f"Hello flag {v} is {'not documented' if v in flags else 'documented but not in the code'}")

    reasons = {v for v in enum(header, "RejectReason", where) if v != 0}
    m = re.search(r"Reject reasons:(.*?)\n\n", doc, re.S)
    doc_reasons = ({int(n) for n in re.findall(r"(?:^|, )(\d+) ", " ".join(m.group(1).split()))}
                   if m else set())
    for v in sorted(reasons ^ doc_reasons):
        fail(f"reject reason {v} is "
             f"{'not documented' if v in reasons else 'documented but not in the code'}")

    batch = constant(header, "kBatchMagic", where)
    if f"0x{batch:08x}" not in doc.lower():
        fail(f"the batch magic 0x{batch:08x} is not in the page")
    records = {v: upper_snake(e) for v, e in enum(header, "RecordType", where).items()}
    rows = table(section(doc, "Data: batches"))
    compare("record type", records,
            {int(bare(r[0])): bare(r[1]) for r in rows if len(r) >= 3 and bare(r[0]).isdigit()})
    by_name = {bare(r[1]): r[2] for r in rows if len(r) >= 3}

    actions = {v: e[1:].lower() for v, e in enum(header, "IdleClose", where).items()}
    m = re.search(r"`u8 action` \(([^)]*)\)", by_name.get("IDLE_CLOSE", ""))
    doc_actions = {int(n): w for n, w in re.findall(r"(\d+) (\w+)", m.group(1))} if m else {}
    compare("IDLE_CLOSE action", actions, doc_actions)

    errc = enum(read(root, "common/status.h"), "Errc", "status.h")
    by_code = {n: v for v, n in errc.items()}
    body = re.search(r"bool isConfirmOutcome\(.*?\n\}", read(root, "daemon/peer/protocol.cc"), re.S)
    if not body:
        die("no isConfirmOutcome in daemon/peer/protocol.cc")
    outcomes = {by_code[n]: n for n in re.findall(r"case Errc::(\w+):", body.group(0))}
    m = re.search(r"had outcome `errc` \((.*)\)", by_name.get("CONFIRM", ""))
    doc_outcomes = {int(n) for n in re.findall(r"(?:^|; )(\d+):", m.group(1))} if m else set()
    for v in sorted(outcomes.keys() ^ doc_outcomes):
        fail(f"CONFIRM outcome {v} ({errc.get(v)}) is "
             f"{'not documented' if v in outcomes else 'documented but not in the code'}")


def main():
    parser = argparse.ArgumentParser(description="Check docs/protocol.md against the codecs.")
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    root = os.path.abspath(args.source_dir)
    doc = read(root, "docs/protocol.md")
    check_local(root, doc)
    check_peer(root, doc)
    for p in problems:
        print(p)
    if problems:
        print(f"check_protocol: {len(problems)} mismatch(es)", file=sys.stderr)
        return 1
    print("check_protocol: docs/protocol.md agrees with the codecs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
