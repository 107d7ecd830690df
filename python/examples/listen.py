#!/usr/bin/python3
"""Registers SERVICE and prints every message received, with its sender:
`examples/listen.py inbox`. Stops on Ctrl-C."""
import sys

import rdmamsg


def main():
    with rdmamsg.Client(name="listen.py") as c:
        c.register(sys.argv[1])
        try:
            while True:
                m = c.receive(timeout=1.0)
                if m is not None:
                    print("%s/%s: %s" % (m.src_node, m.src_service,
                                         m.payload.decode("utf-8", "replace")), flush=True)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
