#!/usr/bin/env python3
"""Check that docs/operations.md lists exactly the metric families rdmamsgd exports.

Usage: check_metrics.py --rdmamsgd PATH --rdmamsg PATH --softrdma-run PATH --source-dir DIR

Starts two daemons over softrdma (alpha on 127.0.0.1 with metrics_listen on
a free port, beta on 127.0.0.2; tests/conformance/conformance.py's Mesh),
moves one message from alpha to a listener on beta with the rdmamsg tool
(so that alpha has a peer, a flow and a device), scrapes alpha's
GET /metrics and compares the families of its "# TYPE" lines with the
table "What it exports" of docs/operations.md: every family is listed and
every listed family exists (names without the rdmamsg_ prefix; a {a,b}
in a name stands for each of its words), and a counter is written with its
_total suffix, an info with _info, anything else without. Every process
started is stopped (SIGTERM, then SIGKILL after a bounded wait); every wait
is bounded.

Exit status: 0 when they agree, 1 with one line per mismatch, 2 when the
daemons cannot be started or scraped. Run by ctest as docs.metrics.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
import conformance  # noqa: E402  (Mesh: two daemons over softrdma, bounded waits)

PAGE = "docs/operations.md"
PREFIX = "rdmamsg_"
SUFFIX = {"counter": "_total", "info": "_info"}  # the sample's suffix, by family type


def die(text):
    print(f"check_metrics: {text}", file=sys.stderr)
    sys.exit(2)


def expand(name):
    """peer_messages_{sent,received}_total -> [peer_messages_sent_total, ...]."""
    m = re.search(r"\{([^}]*)\}", name)
    if not m:
        return [name]
    return [n for w in m.group(1).split(",")
            for n in expand(name[:m.start()] + w.strip() + name[m.end():])]


def documented(doc):
    """{family as written: line number} from the table after 'What it exports'."""
    start = doc.find("What it exports")
    if start < 0:
        die(f"{PAGE} has no 'What it exports'")
    result, in_table = {}, False
    line_no = doc.count("\n", 0, start) + 1
    for line in doc[start:].splitlines():
        if line.startswith("|"):
            in_table = True
            first = line.strip().strip("|").split("|")[0]
            for token in re.findall(r"`([^`]+)`", first):
                for name in expand(token):
                    result[name] = line_no
        elif in_table:
            break
        line_no += 1
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(args):
    conformance.DAEMON, conformance.SOFTRDMA_RUN = args.rdmamsgd, args.softrdma_run
    port = free_port()
    mesh = conformance.Mesh(node_settings={"alpha": {"metrics_listen": f"127.0.0.1:{port}"}})
    listener = None
    try:
        listener = subprocess.Popen([args.rdmamsg, "--socket", mesh.socket("beta"), "listen",
                                     "docs", "--count", "1"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not conformance.wait_for(lambda: "docs" in mesh.status("beta").get("services", [])):
            die("the listener did not register on beta")
        sent = subprocess.run([args.rdmamsg, "--socket", mesh.socket("alpha"), "send",
                               "beta/docs", "hello"], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=30)
        if sent.returncode != 0:
            die(f"rdmamsg send failed ({sent.returncode}): {sent.stderr.strip()}")
        listener.wait(30)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.read().decode("utf-8")
    finally:
        if listener is not None and listener.poll() is None:
            listener.kill()
            listener.wait()
        mesh.stop_all()
        shutil.rmtree(mesh.dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description="Check docs/operations.md against /metrics.")
    for option in ("--rdmamsgd", "--rdmamsg", "--softrdma-run", "--source-dir"):
        parser.add_argument(option, required=True)
    args = parser.parse_args()
    with open(os.path.join(args.source_dir, PAGE), encoding="utf-8") as f:
        doc = documented(f.read())

    text = scrape(args)
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    if not families:
        die("GET /metrics has no '# TYPE' line")
    exported = {}
    for name, kind in families.items():
        if not name.startswith(PREFIX):
            continue
        short = name[len(PREFIX):]
        exported[short + SUFFIX.get(kind, "")] = kind

    def stem(name):
        for suffix in SUFFIX.values():
            if name.endswith(suffix):
                return name[:-len(suffix)]
        return name

    problems = []
    doc_stems = {stem(n): n for n in doc}
    exported_stems = {stem(n) for n in exported}
    for name in sorted(exported.keys() - doc.keys()):
        written = doc_stems.get(stem(name))
        if written:
            problems.append(f"{PAGE}:{doc[written]}: {written} is a {exported[name]}: "
                            f"write {name}")
        else:
            problems.append(f"{PAGE}: the family {name} ({exported[name]}) is not listed")
    for name in sorted(doc.keys() - exported.keys()):
        if stem(name) not in exported_stems:
            problems.append(f"{PAGE}:{doc[name]}: {name} is listed, but /metrics has no such "
                            "family")
    for p in problems:
        print(p)
    if problems:
        print(f"check_metrics: {len(problems)} mismatch(es)", file=sys.stderr)
        return 1
    print(f"check_metrics: {PAGE} lists the {len(exported)} families of /metrics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
