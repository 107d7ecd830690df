#!/usr/bin/python3
"""Sends each line of stdin to NODE/SERVICE and exits 0 once every line was
delivered to a listener: `seq 10 | examples/send.py beta/inbox`."""
import sys

import rdmamsg


def main():
    node, service = sys.argv[1].split("/", 1)
    with rdmamsg.Client(name="send.py") as c:
        sent = 0
        for line in sys.stdin:
            c.send(node, service, line.rstrip("\n"))
            sent += 1
        failed = 0
        for _ in range(sent):
            done = c.wait_completion(timeout=30)
            if done is None:
                print("no answer from rdmamsgd", file=sys.stderr)
                return 1
            if not done.ok:
                failed += 1
                print("message %d: %s: %s" % (done.msg_id, done.name, done.message),
                      file=sys.stderr)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
