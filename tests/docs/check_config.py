#!/usr/bin/env python3
"""Check docs/configuration.md against the configuration loader.

Usage: check_config.py --rdmamsgd PATH --softrdma-run PATH --source-dir DIR

- Keys: every key rdmamsgd allows (the "(allowed: ...)" list of its
  unknown-key message, as tests/man/check_man.py reads it) has a row in one
  of the page's tables (a first column `key`), and every row names an
  allowed key; every per-peer key is named in the page.
- Defaults: each row's "default" cell equals what the loader fills in. The
  defaults are read from a daemon started on a minimal file (node, listen on
  127.0.0.1 and a free port, no peers, its socket in a temporary directory)
  under softrdma-run: its first log line lists every setting
  ("configuration: key=value ..."). The daemon is stopped at once (SIGTERM,
  SIGKILL after a bounded wait). The socket's default, which that file must
  set, is kDefaultSocketPath in config/config.h. "unset" and "none" in the
  page mean no value ("-" in the log); "N × `key`" is N times key's value;
  keys without a default ("required", the node's own entry) are skipped.

Exit status: 0 when everything agrees, 1 with one line per mismatch, 2 when
a program cannot be run. Run by ctest as docs.configuration.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "man"))
import check_man  # noqa: E402  (allowed_keys: the keys rdmamsgd accepts)

PAGE = "docs/configuration.md"
NO_DEFAULT = ("required", "entry")
UNSET = {"unset", "none"}
WAIT_SECONDS = 20


def die(text):
    print(f"check_config: {text}", file=sys.stderr)
    sys.exit(2)


def rows(doc):
    """{key: (line number, default cell)} of every table whose first column is `key`."""
    result, header = {}, None
    for i, line in enumerate(doc.splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells) or header[0] != "key":
            continue
        m = re.fullmatch(r"`([a-z_]+)`", cells[0])
        if not m:
            continue
        default = cells[header.index("default")] if "default" in header else None
        result.setdefault(m.group(1), []).append((i, default))
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loader_settings(rdmamsgd, softrdma_run, tmp):
    """Every setting of a minimal file, from the daemon's "configuration:" log line."""
    path = os.path.join(tmp, "minimal.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"node: alpha\nlisten: 127.0.0.1:{free_port()}\npeers: []\n"
                f"socket: {os.path.join(tmp, 'alpha.sock')}\n")
    log_path = os.path.join(tmp, "alpha.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([softrdma_run, rdmamsgd, "-c", path], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log)
    line = None
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while line is None and time.monotonic() < deadline and proc.poll() is None:
            with open(log_path, errors="replace") as f:
                line = next((l for l in f if "configuration: " in l), None)
            if line is None:
                time.sleep(0.02)  # yields the CPU; the log line decides
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if line is None:
        with open(log_path, errors="replace") as f:
            die(f"the daemon logged no 'configuration:' line within {WAIT_SECONDS} s:\n{f.read()}")
    text = line.split("configuration: ", 1)[1].strip()
    return dict(re.findall(r"([a-z_]+)=(.*?)(?= [a-z_]+=|$)", text))


def expected(cell, settings):
    """The value the page's default cell stands for, in the log's notation; None: no default."""
    text = cell.replace("`", "").replace('"', "").strip()
    if any(w in text.lower() for w in NO_DEFAULT):
        return None
    if text.lower() in UNSET:
        return "-"
    m = re.fullmatch(r"(\d+)\s*[×x]\s*([a-z_]+)", text)
    if m and m.group(2) in settings and settings[m.group(2)].isdigit():
        return str(int(m.group(1)) * int(settings[m.group(2)]))
    return text


def main():
    parser = argparse.ArgumentParser(description="Check docs/configuration.md against the loader.")
    parser.add_argument("--rdmamsgd", required=True)
    parser.add_argument("--softrdma-run", required=True)
    parser.add_argument("--source-dir", required=True)
    args = parser.parse_args()
    root = os.path.abspath(args.source_dir)
    with open(os.path.join(root, PAGE), encoding="utf-8") as f:
        doc = f.read()
    with open(os.path.join(root, "config", "config.h"), encoding="utf-8") as f:
        m = re.search(r'kDefaultSocketPath\b[^=]*=\s*"([^"]+)"', f.read())
    if not m:
        die("no kDefaultSocketPath in config/config.h")
    default_socket = m.group(1)

    with tempfile.TemporaryDirectory(prefix="check_config.") as tmp:
        top, peer = check_man.allowed_keys(args.rdmamsgd, tmp)
        settings = loader_settings(args.rdmamsgd, args.softrdma_run, tmp)
    settings["socket"] = default_socket

    problems = []
    documented = rows(doc)
    for key in top:
        if key not in documented:
            problems.append(f"{PAGE}: key '{key}' (allowed by rdmamsgd) has no row")
    for key, found in documented.items():
        if key not in top:
            problems.append(f"{PAGE}:{found[0][0]}: a row documents '{key}', which rdmamsgd "
                            "does not allow")
            continue
        if len(found) > 1:
            problems.append(f"{PAGE}:{found[1][0]}: key '{key}' has two rows")
        line, cell = found[0]
        if cell is None:
            problems.append(f"{PAGE}:{line}: the row of '{key}' has no default column")
            continue
        want = expected(cell, settings)
        if want is None:
            continue
        if key not in settings:
            problems.append(f"{PAGE}:{line}: the daemon does not log a setting '{key}'")
        elif want != settings[key]:
            problems.append(f"{PAGE}:{line}: '{key}' defaults to {settings[key]} (the loader), "
                            f"the page says {cell}")
    plain = doc.replace("`", "")
    for key in peer:
        if not re.search(r"\b" + re.escape(key) + r"\b", plain):
            problems.append(f"{PAGE}: the per-peer key '{key}' is not named")

    for p in problems:
        print(p)
    if problems:
        print(f"check_config: {len(problems)} mismatch(es)", file=sys.stderr)
        return 1
    print(f"check_config: {PAGE} documents the {len(top)} keys and their defaults "
          f"({len(peer)} per-peer keys)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
