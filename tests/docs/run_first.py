#!/usr/bin/env python3
"""Run one of the first programs (examples/first/) against real daemons.

Usage: run_first.py --rdmamsgd PATH --softrdma-run PATH -- COMMAND...

Starts two daemons over softrdma (alpha on 127.0.0.1, beta on 127.0.0.2:
tests/conformance/conformance.py's Mesh), runs COMMAND with RDMAMSG_SOCKET
set to alpha's socket (bounded by a timeout), stops the daemons, and checks
that the program exited 0 and printed what docs/client-api.md says it
prints: the message received, its confirmation, and the failure it handles.

Exit status: 0 when the program did all of it, 1 otherwise (with its
output and the daemons' logs), 2 when the daemons cannot be started. Run by
ctest as examples.first.LANGUAGE.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance"))
import conformance  # noqa: E402  (Mesh: two daemons over softrdma, bounded waits)

EXPECTED = [r'^received "hello" from alpha$', r"^message \d+ confirmed$",
            r"^not delivered, as expected: unknown_service"]
TIMEOUT = 60


def main():
    parser = argparse.ArgumentParser(description="Run a first program against two daemons.")
    parser.add_argument("--rdmamsgd", required=True)
    parser.add_argument("--softrdma-run", required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND")
    conformance.DAEMON, conformance.SOFTRDMA_RUN = args.rdmamsgd, args.softrdma_run
    try:
        mesh = conformance.Mesh()
    except AssertionError as e:
        print(f"run_first: {e}", file=sys.stderr)
        return 2
    try:
        env = dict(os.environ, RDMAMSG_SOCKET=mesh.socket("alpha"))
        try:
            p = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               env=env, timeout=TIMEOUT)
            code, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            code, out, err = "timeout", e.stdout or "", e.stderr or ""
            out = out.decode() if isinstance(out, bytes) else out
            err = err.decode() if isinstance(err, bytes) else err
        lines = out.splitlines()
        missing = [e for e in EXPECTED if not any(re.search(e, l) for l in lines)]
        ok = code == 0 and not missing
        if not ok:
            print(f"run_first: {' '.join(command)} exited {code}")
            for e in missing:
                print(f"run_first: no line matching {e}")
            print("--- stdout\n" + out + "--- stderr\n" + err)
            for n in mesh.NAMES:
                print(f"--- daemon {n}\n{mesh.log(n)}")
    finally:
        mesh.stop_all()
        shutil.rmtree(mesh.dir, ignore_errors=True)
    if ok:
        print(f"run_first: {os.path.basename(command[-1])}: " + " / ".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
