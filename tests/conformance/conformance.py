"""The conformance suite: the local protocol's promises (docs/protocol.md),
written once and checked against every client library through a small
driver per language (tests/conformance/README.md).

    conformance.py CASE DRIVER_COMMAND...

runs one case (a method name below without "test_", or "all") with the
driver DRIVER_COMMAND. Each case starts its own two daemons over softrdma
(alpha on 127.0.0.1, beta on 127.0.0.2; paths from $RDMAMSG_DAEMON and
$SOFTRDMA_RUN), drives one or more driver processes, and stops every process
it started. On failure it prints each driver's transcript and each daemon's
log (RDMAMSG_CONFORMANCE_VERBOSE=1: also when it passes); RDMAMSG_ITEST_KEEP=1 keeps
the directories. Python standard library only.
"""
import json
import os
import queue
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

DAEMON = os.environ.get("RDMAMSG_DAEMON", "")
SOFTRDMA_RUN = os.environ.get("SOFTRDMA_RUN", "")
DRIVER = []  # the command that starts a driver (from the command line)
ANSWER_SECONDS = 40  # longest a single driver command may take (its own bounds are 20 s)
KEEP = os.environ.get("RDMAMSG_ITEST_KEEP") == "1"
EXITED = ("io_error", "not_connected")  # what a client names when its daemon vanished

_evidence = []  # (title, path or transcript) printed when a case fails
_dirs = []


def wait_for(predicate, timeout=10.0):
    """Polls `predicate` until it holds or `timeout` passes; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(0.01)  # only yields the CPU: the condition decides


def hexed(data):
    return data.hex() if data else "~"


# --- the daemon's status, over the local protocol itself (no client library here) ---

def _frame(kind, body=b""):
    return struct.pack("<IBBH", len(body), 2, kind, 0) + body


def _read_frame(sock):
    head = _read_exactly(sock, 8)
    length, version, kind, _ = struct.unpack("<IBBH", head)
    if version != 2:
        raise OSError("local protocol version %d" % version)
    return kind, _read_exactly(sock, length)


def _read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("rdmamsgd closed the connection")
        data += chunk
    return data


def daemon_status(path, timeout=1.0):
    """The daemon's status JSON as a dict; None when it does not answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            name = b"conformance-runner"
            s.sendall(_frame(1, bytes([len(name)]) + name) + _frame(10))
            while True:
                kind, body = _read_frame(s)
                if kind == 11:
                    s.sendall(_frame(12))
                    return json.loads(body.decode("utf-8"))
    except (OSError, ValueError):
        return None


# --- daemons ----------------------------------------------------------------------------

class Mesh:
    """alpha on 127.0.0.1 and beta on 127.0.0.2, one port, fast timers."""

    NAMES = ("alpha", "beta")

    def __init__(self, settings=None, node_settings=None):
        self.dir = tempfile.mkdtemp(prefix="rdmamsg-conformance-")
        _dirs.append(self.dir)
        self.settings = {"heartbeat_interval": "200ms", "heartbeat_timeout": "1s",
                         "reconnect_backoff_min": "50ms", "reconnect_backoff_max": "1s",
                         "message_timeout": "10s", "max_message_size": "64KiB"}
        self.settings.update(settings or {})
        self.node_settings = node_settings or {}
        self.procs = {}
        try:
            self._start_mesh()
        except BaseException:
            self.stop_all()
            raise

    def _start_mesh(self):
        for _ in range(5):
            self.port = self._free_port()
            for n in self.NAMES:
                self._start(n)
            if all(wait_for(lambda n=n: self.answers(n) or not self.running(n))
                   for n in self.NAMES) and all(self.running(n) for n in self.NAMES):
                break
            taken = any("cannot bind" in self.log(n) for n in self.NAMES)
            self.stop_all()
            if not taken:
                raise AssertionError("a daemon did not start")
        else:
            raise AssertionError("no free port for the mesh")
        if not wait_for(self.established, 15):
            raise AssertionError("the mesh did not form")

    def socket(self, node):
        return os.path.join(self.dir, node + ".sock")

    def log(self, node):
        try:
            with open(os.path.join(self.dir, node + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @staticmethod
    def _free_port():
        for _ in range(100):
            with socket.socket() as a, socket.socket() as b:
                try:
                    a.bind(("127.0.0.1", 0))
                    port = a.getsockname()[1]
                    b.bind(("127.0.0.2", port))
                    return port
                except OSError:
                    continue
        raise AssertionError("no port free on 127.0.0.1 and 127.0.0.2")

    def _start(self, node):
        settings = dict(self.settings)
        settings.update(self.node_settings.get(node, {}))
        lines = ["peers:"]
        lines += ["  - {name: %s, address: 127.0.0.%d:%d}" % (n, i + 1, self.port)
                  for i, n in enumerate(self.NAMES)]
        lines.append("socket: " + self.socket(node))
        lines += ["%s: %s" % kv for kv in settings.items()]
        config = os.path.join(self.dir, node + ".yaml")
        with open(config, "w") as f:
            f.write("\n".join(lines) + "\n")
        path = os.path.join(self.dir, node + ".log")
        if path not in [p for _, p in _evidence]:
            _evidence.append(("daemon " + node, path))
        with open(path, "a") as log:
            self.procs[node] = subprocess.Popen(
                [SOFTRDMA_RUN, DAEMON, "-c", config, "--node", node],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def running(self, node):
        p = self.procs.get(node)
        return p is not None and p.poll() is None

    def answers(self, node):
        return daemon_status(self.socket(node), 0.5) is not None

    def status(self, node):
        return daemon_status(self.socket(node)) or {}

    def established(self):
        for n in self.NAMES:
            st = daemon_status(self.socket(n), 0.5)
            peers = st.get("peers", []) if st else []
            if len(peers) != len(self.NAMES) - 1 or any(
                    p.get("state") != "established" for p in peers):
                return False
        return True

    def counter(self, node, name):
        return self.status(node).get("counters", {}).get(name, 0)

    def stop(self, node):
        """SIGTERM; its exit code."""
        p = self.procs[node]
        p.send_signal(signal.SIGTERM)
        try:
            return p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError(node + " did not stop on SIGTERM within 10 s")

    def kill9(self, node):
        p = self.procs[node]
        p.kill()
        p.wait(10)

    def stop_all(self):
        """SIGTERM to every daemon still running: their exit codes (0 expected)."""
        running = {n: p for n, p in self.procs.items() if p.poll() is None}
        for p in running.values():
            p.send_signal(signal.SIGTERM)
        codes = {}
        for n, p in running.items():
            try:
                codes[n] = p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[n] = p.wait()
        for p in self.procs.values():
            p.wait()
        self.procs = {}
        return codes


# --- drivers ----------------------------------------------------------------------------

class Driver:
    """One driver process: commands in, answer lines out (read by a thread of
    its own, so that a driver printing many lines never waits for us)."""

    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix="rdmamsg-driver-")
        _dirs.append(self.dir)
        self.transcript = []
        _evidence.append(("driver " + name + " transcript", self.transcript))
        err = os.path.join(self.dir, "stderr")
        _evidence.append(("driver " + name + " stderr", err))
        with open(err, "w") as f:
            self.proc = subprocess.Popen(DRIVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=f)
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def _note(self, text):
        self.transcript.append(text if len(text) <= 160 else text[:160] + "...")

    def write(self, command):
        """Sends a command without waiting for its answer."""
        self._note("> " + command)
        self.proc.stdin.write((command + "\n").encode())
        self.proc.stdin.flush()

    def answer(self, timeout=ANSWER_SECONDS):
        """The next line the driver prints; fails the case after `timeout`."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("driver %s: no answer within %g s" % (self.name, timeout))
        if line is None:
            raise AssertionError("driver %s exited (%s)" % (self.name, self.proc.poll()))
        self._note("< " + line)
        return line

    def no_answer_within(self, seconds):
        """True if the driver prints nothing for `seconds` (a command that must wait)."""
        try:
            line = self.lines.get(timeout=seconds)
        except queue.Empty:
            return True
        self.lines.queue.appendleft(line)
        return False

    def do(self, command, timeout=ANSWER_SECONDS):
        self.write(command)
        return self.answer(timeout)

    def items(self, timeout=ANSWER_SECONDS):
        """Item lines up to the "end" line of a list command: (items, count, reason, text)."""
        items = []
        deadline = time.monotonic() + timeout
        while True:
            line = self.answer(max(0.1, deadline - time.monotonic()))
            if line.startswith("end"):
                parts = line.split(" ", 3)
                return (items, int(parts[1]), parts[2] if len(parts) > 2 else None,
                        parts[3] if len(parts) > 3 else "")
            items.append(line)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(10)
        if self.proc.returncode != 0:
            self._note("exit status %d" % self.proc.returncode)
        return self.proc.returncode


def parse_msg(line):
    """"msg SRCNODE SRCSVC SVC HEX" -> (srcNode, srcService, service, payload)."""
    parts = line.split(" ")
    assert parts[0] == "msg" and len(parts) == 5, line
    unhex = b"" if parts[4] == "~" else bytes.fromhex(parts[4])
    return tuple("" if p == "~" else p for p in parts[1:4]) + (unhex,)


def parse_done(line):
    """"done ID REASON [TEXT]" -> (id, reason, text)."""
    parts = line.split(" ", 3)
    assert parts[0] == "done" and len(parts) >= 3, line
    return int(parts[1]), parts[2], parts[3] if len(parts) > 3 else ""


def parse_ids(text):
    return [] if text == "~" else [int(i) for i in text.split(",")]


def parse_submsg(line):
    """"submsg SUBID SRCNODE SUBJECT REPLYTO HEX" -> (subId, srcNode, subject, replyTo, payload)."""
    parts = line.split(" ")
    assert parts[0] == "submsg" and len(parts) == 6, line
    unhex = b"" if parts[5] == "~" else bytes.fromhex(parts[5])
    return (int(parts[1]), parts[2], parts[3], "" if parts[4] == "~" else parts[4], unhex)


def parse_pubdone(line):
    """"pubdone ID REASON MATCHED TAKEN DROPPED [TEXT]" -> (id, reason, (m, t, d), text)."""
    parts = line.split(" ", 6)
    assert parts[0] == "pubdone" and len(parts) >= 6, line
    return (int(parts[1]), parts[2], (int(parts[3]), int(parts[4]), int(parts[5])),
            parts[6] if len(parts) > 6 else "")


# --- the cases --------------------------------------------------------------------------

class Conformance(unittest.TestCase):
    """Each test is one promise of the local protocol, checked through a driver."""

    def setUp(self):
        self.meshes, self.drivers = [], []

    def tearDown(self):
        problems = []
        for d in self.drivers:
            status = d.close()
            if status != 0:
                problems.append("driver %s exited with %s" % (d.name, status))
        for m in self.meshes:
            for node, code in m.stop_all().items():
                if code != 0:
                    problems.append("rdmamsgd %s exited with %s" % (node, code))
        self.assertEqual(problems, [])

    def mesh(self, settings=None, node_settings=None):
        m = Mesh(settings, node_settings)
        self.meshes.append(m)
        return m

    def driver(self, name="d"):
        d = Driver(name)
        self.drivers.append(d)
        return d

    # -- assertions on answers

    def expect(self, d, command, want):
        got = d.do(command)
        self.assertEqual(got, want, command)
        return got

    def expect_error(self, d, command, reason, *words):
        got = d.do(command)
        parts = got.split(" ", 2)
        self.assertEqual(parts[:2], ["error", reason], "%s -> %s" % (command, got))
        for w in words:
            self.assertIn(w, got, "%s: the explanation does not name %s" % (command, w))
        return got

    def expect_id(self, d, command):
        got = d.do(command)
        self.assertTrue(got.startswith("id "), "%s -> %s" % (command, got))
        return int(got.split()[1])

    def expect_sent(self, d, command, count):
        parts = d.do(command).split(" ", 3)
        self.assertEqual(parts[0], "sent", command)
        self.assertEqual(int(parts[1]), count, "%s: %s" % (command, " ".join(parts)))
        ids = parse_ids(parts[2])
        self.assertEqual(len(ids), count)
        return ids

    def expect_connect(self, d, client, mesh, node, max_size=65536):
        self.expect(d, "%s connect %s" % (client, mesh.socket(node)),
                    "ok %s %d" % (node, max_size))

    def take(self, d, client, count, idle_ms=5000):
        """`count` messages taken by `client` (the list must end there)."""
        d.write("%s take %d %d" % (client, count, idle_ms))
        items, n, reason, text = d.items()
        self.assertEqual((n, reason), (count, None),
                         "took %d of %d: %s %s" % (n, count, reason, text))
        return [parse_msg(i) for i in items]

    def sub(self, d, client, pattern, group="~", policy="drop", limit=0):
        got = d.do("%s sub %s %s %s %d" % (client, pattern, group, policy, limit))
        self.assertTrue(got.startswith("sub "), "%s sub %s -> %s" % (client, pattern, got))
        return int(got.split()[1])

    def take_subject(self, d, client, count, idle_ms=5000):
        """`count` subject messages taken by `client`."""
        d.write("%s take %d %d" % (client, count, idle_ms))
        items, n, reason, text = d.items()
        self.assertEqual((n, reason), (count, None),
                         "took %d of %d: %s %s" % (n, count, reason, text))
        return [parse_submsg(i) for i in items]

    def pubdone(self, d, client, timeout_ms=10000):
        got = d.do("%s completion %d" % (client, timeout_ms), timeout_ms / 1000 + ANSWER_SECONDS)
        return parse_pubdone(got)

    def wait_interest(self, mesh, node, patterns):
        """Until `node` knows `patterns` of its peer's interest."""
        def known():
            st = mesh.status(node).get("subjects", {})
            return sum(i.get("patterns", 0) for i in st.get("interest", [])) == patterns
        self.assertTrue(wait_for(known), "%s never learned %d patterns" % (node, patterns))

    def completions(self, d, client, count, timeout_ms=20000):
        d.write("%s completions %d %d" % (client, count, timeout_ms))
        items, n, reason, text = d.items()
        self.assertEqual((n, reason), (count, None),
                         "%d of %d completions: %s %s" % (n, count, reason, text))
        done = [parse_done(i) for i in items]
        ids = [c[0] for c in done]
        self.assertEqual(len(ids), len(set(ids)), "a message completed twice: %s" % ids)
        return {c[0]: c for c in done}

    def sticky_error(self, d, client, reason):
        """After the connection is gone, every call names the same reason."""
        self.expect_error(d, client + " send beta inbox 00", reason)
        self.expect_error(d, client + " trysend beta inbox 00", reason)
        self.expect_error(d, client + " recv 100", reason)
        self.expect_error(d, client + " completion 100", reason)
        self.expect_error(d, client + " register more", reason)
        self.expect_error(d, client + " flush", reason)

    # -- framing and names

    def test_handshake_names_and_registration(self):
        """WELCOME's node and size; io_error naming a missing socket;
        bad_request for invalid names (nothing sent, the client goes on);
        duplicate_service; a service is free again once its owner closed."""
        m = self.mesh()
        d = self.driver()
        self.expect_connect(d, "a", m, "alpha")
        self.expect_connect(d, "b", m, "beta")
        self.expect_error(d, "x connect " + os.path.join(m.dir, "nothing.sock"), "io_error",
                          "nothing.sock")
        for node, service in [("~", "inbox"), ("beta", "~"), ("beta", "bad!name"),
                              ("be/ta", "inbox"), ("beta", "s" * 64), ("n" * 64, "inbox")]:
            for verb in ("send", "trysend"):
                self.expect_error(d, "a %s %s %s 78" % (verb, node, service), "bad_request")
        for service in ("~", "bad!name", "s" * 64):
            self.expect_error(d, "b register " + service, "bad_request")
        self.expect(d, "a inflight", "inflight 0")
        self.expect(d, "b register " + "s" * 63, "ok")
        self.expect(d, "b register svc", "ok")
        self.expect_error(d, "b register svc", "duplicate_service", "svc")
        self.expect_connect(d, "c", m, "beta")
        self.expect_error(d, "c register svc", "duplicate_service", "svc")
        self.expect(d, "c register other", "ok")  # a refused request closes nothing
        self.expect(d, "a register svc", "ok")  # services are per node
        # The first id is 1, and the refused sends used none.
        self.assertEqual(self.expect_id(d, "a send beta svc 78"), 1)
        self.expect(d, "a flush", "ok")  # sends are written in batches, or by flush
        self.assertEqual(parse_msg(d.do("b recv 5000")), ("alpha", "svc", "svc", b"x"))
        self.assertEqual(parse_done(d.do("a completion 10000")), (1, "ok", ""))
        self.expect(d, "b close", "ok")
        self.assertTrue(wait_for(lambda: d.do("c register svc") == "ok"),
                        "svc was not released when its owner closed")

    def test_framing(self):
        """Payloads of every size up to the maximum and any bytes, and names
        of 1 and 63 characters, arrive exactly, with their source; too_large
        is refused by the client itself, which uses no id for it."""
        m = self.mesh()
        d = self.driver()
        long_name = "L" * 63
        self.expect_connect(d, "l", m, "beta")
        self.expect(d, "l register " + long_name, "ok")
        self.expect_connect(d, "k", m, "alpha")
        self.expect(d, "k register local", "ok")
        self.expect_connect(d, "s", m, "alpha")
        self.expect(d, "s register s", "ok")
        self.expect_connect(d, "n", m, "alpha")  # registers nothing: sends from ""
        rnd = random.Random(23)
        payloads = [b"", b"\x00", b"\n", b"\r\n", b"~", b" x y ", bytes(range(256)),
                    rnd.randbytes(1000), rnd.randbytes(65535), rnd.randbytes(65536)]
        ids = [self.expect_id(d, "s send beta %s %s" % (long_name, hexed(p))) for p in payloads]
        self.assertEqual(ids, list(range(1, len(payloads) + 1)))
        self.expect_error(d, "s send beta %s %s" % (long_name, hexed(bytes(65537))),
                          "too_large", "65537")
        self.expect_error(d, "s trysend beta %s %s" % (long_name, hexed(bytes(65537))),
                          "too_large", "65537")
        self.assertEqual(self.expect_id(d, "s send alpha local " + hexed(payloads[-1])),
                         len(payloads) + 1)
        self.assertEqual(self.expect_id(d, "n send beta %s 6869" % long_name), 1)
        self.expect(d, "s flush", "ok")
        self.expect(d, "n flush", "ok")
        got = self.take(d, "l", len(payloads) + 1)
        from_s = [g for g in got if g[1] == "s"]
        self.assertEqual([g[3] for g in from_s], payloads)  # in order, byte for byte
        self.assertTrue(all(g[:3] == ("alpha", "s", long_name) for g in from_s))
        self.assertIn(("alpha", "", long_name, b"hi"), got)
        self.assertEqual(parse_msg(d.do("k recv 5000")), ("alpha", "s", "local", payloads[-1]))
        done = self.completions(d, "s", len(payloads) + 1)
        self.assertEqual(sorted(done), list(range(1, len(payloads) + 2)))
        self.assertTrue(all(c[1] == "ok" for c in done.values()), done)
        self.assertEqual(parse_done(d.do("n completion 10000")), (1, "ok", ""))
        self.expect(d, "s inflight", "inflight 0")
        self.expect(d, "l recv 0", "timeout")

    # -- completions

    def test_completion_per_message(self):
        """Every message gets exactly one completion, with its id: ok, or the
        reason naming what is at fault; nothing more comes."""
        m = self.mesh()
        d = self.driver()
        self.expect_connect(d, "l", m, "beta")
        self.expect(d, "l register inbox", "ok")
        self.expect_connect(d, "s", m, "alpha")
        self.expect(d, "s register out", "ok")
        self.assertEqual(self.expect_sent(d, "s sendn beta inbox 60 m", 60), list(range(1, 61)))
        self.expect_sent(d, "s sendn beta nobody 10 x", 10)
        self.expect_sent(d, "s sendn gamma x 10 y", 10)
        self.expect_sent(d, "s sendn alpha nobody 5 z", 5)
        self.expect(d, "s flush", "ok")
        got = self.take(d, "l", 60)
        self.assertEqual([g[3] for g in got], [b"m%d" % i for i in range(60)])
        done = self.completions(d, "s", 85)
        self.assertEqual(sorted(done), list(range(1, 86)))
        for i, (_, reason, text) in done.items():
            if i <= 60:
                self.assertEqual(reason, "ok", done[i])
            elif i <= 70:
                self.assertEqual(reason, "unknown_service", done[i])
                self.assertIn("nobody", text)
                self.assertIn("beta", text)
            elif i <= 80:
                self.assertEqual(reason, "unknown_node", done[i])
                self.assertIn("gamma", text)
            else:
                self.assertEqual(reason, "unknown_service", done[i])
                self.assertIn("nobody", text)
                self.assertIn("alpha", text)
        self.expect(d, "s completion 300", "timeout")
        self.expect(d, "s inflight", "inflight 0")

    def test_confirmed_only_once_taken(self):
        """A message is confirmed once the receiving application took it
        (local protocol v2, CONSUMED), not when its library read it; messages
        read but not taken when the listener goes away fail back."""
        m = self.mesh()
        d = self.driver()
        self.expect_connect(d, "l", m, "beta")
        self.expect(d, "l register inbox", "ok")
        self.expect_connect(d, "s", m, "alpha")
        base = m.counter("beta", "remote_deliveries")
        self.assertEqual(self.expect_id(d, "s send beta inbox 6f6e65"), 1)
        self.expect(d, "s flush", "ok")
        self.assertTrue(wait_for(lambda: m.counter("beta", "remote_deliveries") >= base + 1))
        self.expect(d, "l io", "ok")  # the listener's library has read it: not taken yet
        self.expect(d, "s completion 500", "timeout")
        self.assertEqual(parse_msg(d.do("l recv 5000"))[3], b"one")
        self.assertEqual(parse_done(d.do("s completion 10000")), (1, "ok", ""))
        # Three messages read at once; the application takes the first and closes.
        self.assertEqual(self.expect_sent(d, "s sendn beta inbox 3 t", 3), [2, 3, 4])
        self.expect(d, "s flush", "ok")
        self.assertTrue(wait_for(lambda: m.counter("beta", "remote_deliveries") >= base + 4))
        self.assertEqual(parse_msg(d.do("l recv 5000"))[3], b"t0")
        self.expect(d, "l close", "ok")
        done = self.completions(d, "s", 3)
        self.assertEqual(done[2], (2, "ok", ""), "a message the application took was not "
                         "confirmed when its client closed")
        for i in (3, 4):
            self.assertEqual(done[i][1], "unknown_service", done[i])
            self.assertIn("inbox", done[i][2])

    def test_limits_and_timeout(self):
        """too_large from the receiving daemon (its limit is lower than the
        sender's), exactly the maximum accepted; timeout for a message nobody
        takes, which is still delivered when its listener reads."""
        m = self.mesh({"message_timeout": "1s"},
                      {"alpha": {"max_message_size": "128KiB"}})
        d = self.driver()
        self.expect_connect(d, "s", m, "alpha", 131072)
        self.expect_connect(d, "l", m, "beta")
        self.expect(d, "l register inbox", "ok")
        self.expect_connect(d, "k", m, "alpha", 131072)
        self.expect(d, "k register local", "ok")
        self.expect_error(d, "s send beta inbox " + hexed(bytes(131073)), "too_large", "131073")
        big = random.Random(5).randbytes(100000)
        self.assertEqual(self.expect_id(d, "s send beta inbox " + hexed(big)), 1)
        c = parse_done(d.do("s completion 10000"))
        self.assertEqual(c[:2], (1, "too_large"), c)
        self.assertEqual(self.expect_id(d, "s send alpha local " + hexed(bytes(131072))), 2)
        self.expect(d, "s flush", "ok")
        self.assertEqual(parse_msg(d.do("k recv 5000")), ("alpha", "", "local", bytes(131072)))
        self.assertEqual(parse_done(d.do("s completion 10000")), (2, "ok", ""))
        self.expect(d, "l recv 0", "timeout")
        # Nobody takes it: timeout after message_timeout, and it is still there to take.
        self.assertEqual(self.expect_id(d, "s send beta inbox 6869"), 3)
        self.expect(d, "s flush", "ok")
        c = parse_done(d.do("s completion 15000"))
        self.assertEqual(c[:2], (3, "timeout"), c)
        self.assertIn("beta", c[2])
        self.assertEqual(parse_msg(d.do("l recv 5000")), ("alpha", "", "inbox", b"hi"))
        self.expect(d, "s inflight", "inflight 0")

    # -- order

    def test_ordering_per_destination(self):
        """Messages from one client to one destination arrive in order, also
        interleaved with other destinations and other senders, remote and local."""
        m = self.mesh()
        d = self.driver()
        self.expect_connect(d, "l", m, "beta")
        self.expect(d, "l register inbox", "ok")
        self.expect(d, "l register other", "ok")
        senders = {"s1": "alpha", "s2": "alpha", "s3": "beta"}
        for s, node in senders.items():
            self.expect_connect(d, s, m, node)
            self.expect(d, "%s register %s" % (s, s), "ok")
        plan = [("s1", "inbox", "a-", 100), ("s2", "inbox", "b-", 100),
                ("s1", "other", "o-", 50), ("s3", "inbox", "c-", 100),
                ("s1", "inbox", "d-", 100), ("s2", "inbox", "e-", 100)]
        expected = {}
        for s, service, prefix, n in plan:
            self.expect_sent(d, "%s sendn beta %s %d %s" % (s, service, n, prefix), n)
            expected.setdefault((senders[s], s, service), []).extend(
                (prefix + str(i)).encode() for i in range(n))
        for s in senders:
            self.expect(d, s + " flush", "ok")
        got = self.take(d, "l", 550)
        streams = {}
        for g in got:
            streams.setdefault(g[:3], []).append(g[3])
        self.assertEqual(streams, expected)
        for s, n in (("s1", 250), ("s2", 200), ("s3", 100)):
            done = self.completions(d, s, n)
            self.assertEqual(sorted(done), list(range(1, n + 1)))
            self.assertTrue(all(c[1] == "ok" for c in done.values()))

    # -- backpressure

    BACKPRESSURE = {"flow_window": "64KiB", "send_queue_limit": "64KiB"}
    CHUNK = 16 * 1024

    def fill(self, d, client, service):
        """trySend to `service` until it would block: the accepted ids."""
        got = d.do("%s fill beta %s %s 4000" % (client, service, hexed(b"h" * self.CHUNK)))
        parts = got.split(" ")
        self.assertEqual(parts[0], "blocked", "a destination nobody reads was never held: " + got)
        ids = parse_ids(parts[2])
        self.assertEqual(len(ids), int(parts[1]))
        self.assertGreater(len(ids), 0)
        return ids

    def test_would_block_per_destination(self):
        """A destination whose listener does not read is held: trySend to it
        would block and queues nothing (no id used), while another service of
        the same node flows; once the listener reads, it takes messages again
        and every message accepted is delivered and confirmed."""
        m = self.mesh(self.BACKPRESSURE)
        d = self.driver()
        self.expect_connect(d, "slow", m, "beta")
        self.expect(d, "slow register slow", "ok")
        self.expect_connect(d, "fast", m, "beta")
        self.expect(d, "fast register fast", "ok")
        self.expect_connect(d, "s", m, "alpha")
        chunk = hexed(b"h" * self.CHUNK)
        ids = self.fill(d, "s", "slow")
        k = len(ids)
        self.assertEqual(ids, list(range(1, k + 1)))
        # A client faster than its daemon may fill its own buffer before the
        # HOLD arrives: once that is written, the HOLD is what blocks.
        self.expect(d, "s flush", "ok")
        self.expect(d, "s trysend beta slow " + chunk, "would_block")
        self.expect(d, "s inflight", "inflight %d" % k)
        for i in range(20):
            self.assertEqual(self.expect_id(d, "s trysend beta fast " + hexed(b"f%d" % i)),
                             k + 1 + i)
        self.expect(d, "s flush", "ok")
        self.assertEqual([g[3] for g in self.take(d, "fast", 20)],
                         [b"f%d" % i for i in range(20)])
        done = self.completions(d, "s", 20)
        self.assertEqual(sorted(done), list(range(k + 1, k + 21)))
        self.assertTrue(all(c[1] == "ok" for c in done.values()), done)
        self.expect(d, "s trysend beta slow " + chunk, "would_block")
        self.assertEqual(len(self.take(d, "slow", k)), k)

        def resumed():
            got = d.do("s trysend beta slow " + chunk)
            if got == "would_block":
                self.expect(d, "s io", "ok")
                return False
            self.assertEqual(got, "id %d" % (k + 21))
            return True
        self.assertTrue(wait_for(resumed), "never resumed after the listener read")
        self.expect(d, "s flush", "ok")
        self.assertEqual(len(self.take(d, "slow", 1)), 1)
        done = self.completions(d, "s", k + 1)
        self.assertEqual(sorted(done), list(range(1, k + 1)) + [k + 21])
        self.assertTrue(all(c[1] == "ok" for c in done.values()), done)
        self.expect(d, "s inflight", "inflight 0")

    def test_send_waits_for_resume(self):
        """send() to a held destination waits until the daemon resumes it,
        which it does once the listener reads."""
        m = self.mesh(self.BACKPRESSURE)
        ds, dl = self.driver("sender"), self.driver("listener")
        self.expect_connect(dl, "l", m, "beta")
        self.expect(dl, "l register slow", "ok")
        self.expect_connect(ds, "s", m, "alpha")
        k = len(self.fill(ds, "s", "slow"))
        self.expect(ds, "s flush", "ok")  # the fill may end on a full buffer, not the HOLD
        ds.write("s send beta slow " + hexed(b"last"))
        self.assertTrue(ds.no_answer_within(0.5), "send() to a held destination returned")
        self.assertEqual(len(self.take(dl, "l", k)), k)
        self.assertEqual(ds.answer(), "id %d" % (k + 1))
        self.expect(ds, "s flush", "ok")
        self.assertEqual(parse_msg(dl.do("l recv 10000"))[3], b"last")
        done = self.completions(ds, "s", k + 1)
        self.assertTrue(all(c[1] == "ok" for c in done.values()), done)

    # -- daemons going away

    def test_daemon_stops(self):
        """A stopped peer: peer_unreachable naming it. The client's own daemon
        stopping (SIGTERM): every call then names shutting_down."""
        m = self.mesh()
        d = self.driver()
        self.expect_connect(d, "s", m, "alpha")
        self.expect(d, "s register out", "ok")
        self.assertEqual(m.stop("beta"), 0)
        self.assertEqual(self.expect_id(d, "s send beta svc 6869"), 1)
        c = parse_done(d.do("s completion 20000"))
        self.assertEqual(c[:2], (1, "peer_unreachable"), c)
        self.assertIn("beta", c[2])
        self.assertEqual(self.expect_id(d, "s send beta svc 6869"), 2)
        self.assertEqual(m.stop("alpha"), 0)
        # Message 2 reached the daemon before it stopped (through shared
        # memory it goes at once) and failed there, or it never left the
        # client: its completion first, or none; then the daemon's reason.
        got = d.do("s completion 10000")
        if got.startswith("done "):
            self.assertEqual(parse_done(got)[:2], (2, "peer_unreachable"), got)
            got = d.do("s completion 10000")
        self.assertEqual(got.split(" ", 2)[:2], ["error", "shutting_down"], got)
        self.assertIn("alpha", got)
        self.sticky_error(d, "s", "shutting_down")

    def test_daemon_killed_mid_stream(self):
        """The client's daemon killed (SIGKILL) while it streams: completions
        that came before are handed out, then every call names the same
        reason (io_error or not_connected); nothing hangs; every message
        confirmed was taken."""
        m = self.mesh()
        ds, dl = self.driver("sender"), self.driver("listener")
        self.expect_connect(dl, "l", m, "beta")
        self.expect(dl, "l register inbox", "ok")
        dl.write("l take 100000 3000")
        self.expect_connect(ds, "s", m, "alpha")
        self.expect_sent(ds, "s sendn beta inbox 300 k", 300)
        first = self.completions(ds, "s", 20)
        m.kill9("alpha")
        parts = ds.do("s sendn beta inbox 300 q").split(" ", 4)
        sent = parse_ids(parts[2])
        reason = parts[3] if len(parts) > 3 else None
        if reason is None:
            got = ds.do("s flush")
            self.assertTrue(got.startswith("error "), "flush after the daemon died: " + got)
            reason = got.split(" ")[1]
        self.assertIn(reason, EXITED)
        ds.write("s completions 1000 10000")
        items, _, end_reason, _ = ds.items()
        self.assertEqual(end_reason, reason)
        rest = [parse_done(i) for i in items]
        self.sticky_error(ds, "s", reason)
        answered = {c[0]: c for c in rest}
        answered.update(first)
        self.assertEqual(len(answered), len(first) + len(rest), "a message completed twice")
        self.assertTrue(set(answered) <= set(range(1, 301 + len(sent))))
        items, _, _, _ = dl.items()
        taken = {parse_msg(i)[3] for i in items}
        for i, c in answered.items():
            self.assertEqual(c[1], "ok", c)  # its daemon vanished before any failure came
            self.assertIn(b"k%d" % (i - 1), taken, "message %d confirmed, never taken" % i)

    def test_peer_killed_mid_stream(self):
        """The receiving daemon killed (SIGKILL) mid-stream: every message is
        answered exactly once, ok (and then it was taken) or
        peer_unreachable naming the peer."""
        m = self.mesh()
        ds, dl = self.driver("sender"), self.driver("listener")
        self.expect_connect(dl, "l", m, "beta")
        self.expect(dl, "l register inbox", "ok")
        dl.write("l take 100000 5000")
        self.expect_connect(ds, "s", m, "alpha")
        self.expect_sent(ds, "s sendn beta inbox 300 k", 300)
        done = self.completions(ds, "s", 20)
        m.kill9("beta")
        self.expect_sent(ds, "s sendn beta inbox 300 q", 300)
        rest = self.completions(ds, "s", 580, 30000)
        self.assertFalse(set(done) & set(rest), "a message completed twice")
        done.update(rest)
        self.assertEqual(sorted(done), list(range(1, 601)))
        items, _, reason, _ = dl.items()
        self.assertIn(reason, EXITED)
        taken = {parse_msg(i)[3] for i in items}
        ok = 0
        for i, c in done.items():
            payload = b"k%d" % (i - 1) if i <= 300 else b"q%d" % (i - 301)
            if c[1] == "ok":
                ok += 1
                self.assertIn(payload, taken, "message %d confirmed, never taken" % i)
            else:
                self.assertEqual(c[1], "peer_unreachable", c)
                self.assertIn("beta", c[2])
        self.assertGreaterEqual(ok, 20)
        self.assertLess(ok, 600)
        self.expect(ds, "s inflight", "inflight 0")

    # -- subjects ----------------------------------------------------------------------

    def test_subjects_publish_subscribe(self):
        m = self.mesh()
        d = self.driver()
        for c, node in (("p", "alpha"), ("r", "beta"), ("l", "alpha")):
            self.expect_connect(d, c, m, node)
        remote = self.sub(d, "r", "orders.*.eu")
        local = self.sub(d, "l", "orders.>")
        self.expect_error(d, "r sub orders..eu ~ drop 0", "bad_request")
        self.wait_interest(m, "alpha", 1)
        ids = [self.expect_id(d, "p pub orders.x.eu %s" % hexed(b"order %d" % i))
               for i in range(5)]
        self.expect_error(d, "p pub orders.* %s" % hexed(b"x"), "bad_request")
        self.expect(d, "p flush", "ok")  # publishes are written in batches, as sends
        got_r = self.take_subject(d, "r", 5)
        got_l = self.take_subject(d, "l", 5)
        for i, msg in enumerate(got_r):
            self.assertEqual(msg, (remote, "alpha", "orders.x.eu", "", b"order %d" % i))
        for i, msg in enumerate(got_l):
            self.assertEqual(msg, (local, "alpha", "orders.x.eu", "", b"order %d" % i))
        done = {}
        for _ in ids:
            c = self.pubdone(d, "p")
            done[c[0]] = c
        self.assertEqual(sorted(done), ids)
        for c in done.values():
            self.assertEqual(c[1:3], ("ok", (2, 2, 0)), c)
        nobody = self.expect_id(d, "p pub invoices.x %s" % hexed(b"?"))  # nothing matches
        c = self.pubdone(d, "p")
        self.assertEqual(c[:3], (nobody, "no_subscribers", (0, 0, 0)), c)
        self.expect(d, "r unsub %d" % remote, "ok")
        self.wait_interest(m, "alpha", 0)
        after = self.expect_id(d, "p pub orders.x.eu %s" % hexed(b"late"))
        self.expect(d, "p flush", "ok")
        self.take_subject(d, "l", 1)
        c = self.pubdone(d, "p")
        self.assertEqual(c[:3], (after, "ok", (1, 1, 0)), "the remote one unsubscribed")

    def test_subjects_queue_group(self):
        m = self.mesh()
        d = self.driver()
        for c, node in (("p", "alpha"), ("w1", "beta"), ("w2", "beta")):
            self.expect_connect(d, c, m, node)
        self.sub(d, "w1", "jobs.*", "workers")
        self.sub(d, "w2", "jobs.*", "workers")
        self.wait_interest(m, "alpha", 1)
        ids = [self.expect_id(d, "p pub jobs.x %s" % hexed(b"job %d" % i)) for i in range(20)]
        self.expect(d, "p flush", "ok")
        seen = []
        for c in ("w1", "w2"):
            d.write("%s take 20 1000" % c)
            items, _, _, _ = d.items()
            seen += [parse_submsg(i)[4] for i in items]
        self.assertEqual(sorted(seen), sorted(b"job %d" % i for i in range(20)),
                         "every job taken exactly once by the group")
        for _ in ids:
            c = self.pubdone(d, "p")
            self.assertEqual(c[1:3], ("ok", (1, 1, 0)), c)

    def test_subjects_request_reply(self):
        m = self.mesh()
        dq, ds = self.driver("requester"), self.driver("responder")
        self.expect_connect(dq, "q", m, "alpha")
        self.expect_connect(ds, "s", m, "beta")
        self.expect_error(dq, "q request nobody.here %s 5000" % hexed(b"?"), "no_responders")
        self.sub(ds, "s", "svc.echo")
        self.wait_interest(m, "alpha", 1)
        dq.write("q request svc.echo %s 5000" % hexed(b"ping"))  # waits for its reply
        req = self.take_subject(ds, "s", 1)[0]
        self.assertEqual(req[2], "svc.echo")
        self.assertNotEqual(req[3], "", "a request carries its reply token")
        self.assertEqual(req[4], b"ping")
        rid = self.expect_id(ds, "s reply %s" % hexed(b"pong"))
        self.expect(ds, "s flush", "ok")  # replies are written in batches, as sends
        self.assertEqual(dq.answer(), "reply beta %s" % hexed(b"pong"))
        done = parse_done(ds.do("s completion 5000"))
        self.assertEqual(done[:2], (rid, "ok"), "the responder is confirmed once taken")
        got = dq.do("q request svc.echo %s 300" % hexed(b"slow"), 5)
        self.assertEqual(got.split(" ")[:2], ["error", "timeout"], got)
        self.take_subject(ds, "s", 1)
        late = self.expect_id(ds, "s reply %s" % hexed(b"too late"))
        done = parse_done(ds.do("s completion 5000"))
        self.assertEqual(done[:2], (late, "unknown_service"), "a late reply is refused")

    def test_subjects_slow_consumer(self):
        m = self.mesh()
        d = self.driver()
        for c, node in (("p", "alpha"), ("slow", "beta"), ("fast", "beta")):
            self.expect_connect(d, c, m, node)
        self.sub(d, "slow", "feed", "~", "drop", 2)
        self.sub(d, "fast", "feed")
        self.wait_interest(m, "alpha", 1)
        ids = [self.expect_id(d, "p pub feed %s" % hexed(b"tick %d" % i)) for i in range(10)]
        self.expect(d, "p flush", "ok")
        fast = self.take_subject(d, "fast", 10)
        self.assertEqual([f[4] for f in fast], [b"tick %d" % i for i in range(10)])
        done = {}
        for _ in range(8):
            c = self.pubdone(d, "p")
            done[c[0]] = c
        for i in ids[2:]:
            self.assertEqual(done[i][1:3], ("ok", (2, 1, 1)), "dropped for the slow one alone")
        self.take_subject(d, "slow", 2)
        for _ in range(2):
            c = self.pubdone(d, "p")
            self.assertEqual(c[1:3], ("ok", (2, 2, 0)), c)
            self.assertIn(c[0], ids[:2])


def print_evidence():
    for title, what in _evidence:
        print("---- %s" % title, file=sys.stderr)
        if isinstance(what, list):
            text = "\n".join(what)
        else:
            try:
                with open(what, errors="replace") as f:
                    text = f.read()
            except OSError:
                text = "(none)"
        if len(text) > 20000:
            text = "...\n" + text[-20000:]
        print(text, file=sys.stderr)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    case = argv[1]
    DRIVER.extend(argv[2:])
    loader = unittest.TestLoader()
    if case == "all":
        suite = loader.loadTestsFromTestCase(Conformance)
    else:
        suite = unittest.TestSuite([Conformance("test_" + case)])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful() or os.environ.get("RDMAMSG_CONFORMANCE_VERBOSE") == "1":
        print_evidence()
    for d in _dirs:
        if KEEP:
            print("kept " + d, file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
