"""The conformance driver for the Python binding (rdmamsg, ctypes over the
C API): reads commands on stdin, one per line, and answers each on stdout as
tests/conformance/README.md describes."""
import os
import sys
import time

import rdmamsg

FILL_SECONDS = 20
FLUSH_SECONDS = 10

clients = {}
# Per client: the ids it published (their completions print as pubdone),
# and the reply token of the last request it received (what `reply` answers).
published = {}
last_request = {}


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def arg(s):
    return "" if s == "~" else s


def field(s):
    return s if s else "~"


def one_line(s):
    return s.replace("\n", " ").replace("\r", " ")


def payload(hexed):
    return b"" if hexed == "~" else bytes.fromhex(hexed)


def reason(e):
    return (e.name + " " + one_line(e.message)).rstrip()


def hexed(data):
    return data.hex() if data else "~"


def msg(name, m):
    if m.reply_to:
        last_request[name] = m.reply_to
    if m.subscription:
        return "submsg %d %s %s %s %s" % (m.subscription, field(m.src_node), field(m.subject),
                                          field(m.reply_to), hexed(m.payload))
    return "msg %s %s %s %s" % (field(m.src_node), field(m.src_service), field(m.service),
                                hexed(m.payload))


def done(name, d):
    if d.msg_id in published.get(name, set()):
        published[name].discard(d.msg_id)
        return ("pubdone %d %s %d %d %d %s" % (d.msg_id, d.name, d.matched, d.taken, d.dropped,
                                               one_line(d.message))).rstrip()
    return ("done %d %s %s" % (d.msg_id, d.name, one_line(d.message))).rstrip()


def ids(v):
    return "%d %s" % (len(v), ",".join(str(i) for i in v) if v else "~")


def run(name, verb, a):
    if verb == "connect":
        try:
            c = rdmamsg.Client(a[0], name="conformance-" + name, timeout=5.0)
        except rdmamsg.RdmamsgError as e:
            return say("error " + reason(e))
        clients[name] = c
        published[name] = set()
        last_request.pop(name, None)
        return say("ok %s %d" % (c.node, c.max_message_size))
    c = clients[name]
    if verb == "register":
        c.register(arg(a[0]))
        return say("ok")
    if verb == "unregister":
        c.unregister(arg(a[0]))
        return say("ok")
    if verb == "send":
        return say("id %d" % c.send(arg(a[0]), arg(a[1]), payload(a[2])))
    if verb == "trysend":
        try:
            return say("id %d" % c.try_send(arg(a[0]), arg(a[1]), payload(a[2])))
        except rdmamsg.WouldBlock:
            return say("would_block")
    if verb == "sendn":
        sent = []
        try:
            for i in range(int(a[2])):
                sent.append(c.send(arg(a[0]), arg(a[1]), arg(a[3]) + str(i)))
        except rdmamsg.RdmamsgError as e:
            return say("sent %s %s" % (ids(sent), reason(e)))
        return say("sent " + ids(sent))
    if verb == "fill":
        data, accepted = payload(a[2]), []
        deadline = time.monotonic() + FILL_SECONDS
        while len(accepted) < int(a[3]) and time.monotonic() < deadline:
            try:
                accepted.append(c.try_send(arg(a[0]), arg(a[1]), data))
            except rdmamsg.WouldBlock:
                return say("blocked " + ids(accepted))
            c.process_io()
        return say("unblocked " + ids(accepted))
    if verb == "flush":
        c.flush(FLUSH_SECONDS)
        return say("ok")
    if verb == "recv":
        m = receive(c, int(a[0]) / 1000)
        return say("timeout" if m is None else msg(name, m))
    if verb == "take":
        n = 0
        try:
            while n < int(a[0]):
                m = receive(c, int(a[1]) / 1000)
                if m is None:
                    break
                say(msg(name, m))
                n += 1
        except rdmamsg.RdmamsgError as e:
            return say("end %d %s" % (n, reason(e)))
        return say("end %d" % n)
    if verb == "completion":
        d = c.wait_completion(int(a[0]) / 1000)
        return say("timeout" if d is None else done(name, d))
    if verb == "completions":
        n = 0
        deadline = time.monotonic() + int(a[1]) / 1000
        try:
            while n < int(a[0]):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                d = c.wait_completion(left)
                if d is None:
                    break
                say(done(name, d))
                n += 1
        except rdmamsg.RdmamsgError as e:
            return say("end %d %s" % (n, reason(e)))
        return say("end %d" % n)
    if verb == "sub":
        return say("sub %d" % c.subscribe(arg(a[0]), group=arg(a[1]) or None, policy=a[2],
                                          pending_limit=int(a[3])))
    if verb == "unsub":
        c.unsubscribe(int(a[0]))
        return say("ok")
    if verb == "pub":
        msg_id = c.publish(arg(a[0]), payload(a[1]))
        published[name].add(msg_id)
        return say("id %d" % msg_id)
    if verb == "request":
        r = c.request_wait(arg(a[0]), payload(a[1]), timeout=int(a[2]) / 1000)
        return say("reply %s %s" % (field(r.src_node), hexed(r.payload)))
    if verb == "reply":
        if name not in last_request:
            return say("error driver no message received to reply to")
        return say("id %d" % c.reply(last_request[name], payload(a[0])))
    if verb == "inflight":
        return say("inflight %d" % c.in_flight)
    if verb == "io":
        c.process_io()
        return say("ok")
    if verb == "close":
        clients.pop(name).close()
        return say("ok")
    say("error driver unknown command " + verb)


# RDMAMSG_DRIVER_VIEWS=1: messages are received as views (receive_view),
# each released once its payload was read.
USE_VIEWS = os.environ.get("RDMAMSG_DRIVER_VIEWS") == "1"


def receive(c, timeout):
    if not USE_VIEWS:
        return c.receive(timeout)
    v = c.receive_view(timeout)
    if v is None:
        return None
    with v:
        return rdmamsg.Message(v.src_node, v.src_service, v.service, bytes(v.payload), v.subject,
                               v.reply_to, v.subscription, v.request_id)


def main():
    for text in sys.stdin:
        words = text.split()
        if len(words) < 2:
            continue
        try:
            run(words[0], words[1], words[2:])
        except rdmamsg.RdmamsgError as e:
            say("error " + reason(e))
        except (KeyError, IndexError, ValueError) as e:  # a malformed command
            say("error driver %r" % e)
    for c in clients.values():
        c.close()


if __name__ == "__main__":
    main()
