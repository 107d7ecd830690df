"""The Python binding against real daemons: two rdmamsgd processes over
softrdma (paths from the environment CTest sets), each test with its own
configuration, sockets and port."""
import os
import selectors
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import rdmamsg

DAEMON = os.environ["RDMAMSG_DAEMON"]
SOFTRDMA_RUN = os.environ["SOFTRDMA_RUN"]


def free_port():
    for _ in range(100):
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", 0))
                port = a.getsockname()[1]
                b.bind(("127.0.0.2", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


class Mesh(unittest.TestCase):
    """alpha on 127.0.0.1 and beta on 127.0.0.2."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rdmamsg-py-")
        port = free_port()
        self.procs, self.logs = [], []
        for name in ("alpha", "beta"):
            config = os.path.join(self.dir, name + ".yaml")
            with open(config, "w") as f:
                f.write("peers:\n"
                        "  - {name: alpha, address: 127.0.0.1:%d}\n"
                        "  - {name: beta, address: 127.0.0.2:%d}\n"
                        "socket: %s\nheartbeat_interval: 200ms\nheartbeat_timeout: 1s\n"
                        "reconnect_backoff_min: 50ms\n" % (port, port, self.socket(name)))
            log = open(os.path.join(self.dir, name + ".log"), "w")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [SOFTRDMA_RUN, DAEMON, "-c", config, "--node", name], stdout=log, stderr=log))
        self.assertTrue(wait_for(lambda: self.established("alpha") and self.established("beta")),
                        "the mesh did not form")

    def tearDown(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.dir)

    def socket(self, name):
        return os.path.join(self.dir, name + ".sock")

    def established(self, name):
        try:
            with rdmamsg.Client(self.socket(name), timeout=0.5) as c:
                return all(p["state"] == "established" for p in c.status()["peers"])
        except rdmamsg.RdmamsgError:
            return False

    def test_a_message_crosses_the_mesh_and_its_completion_comes_back(self):
        with rdmamsg.Client(self.socket("beta"), name="py-listener") as listener, \
                rdmamsg.Client(self.socket("alpha"), name="py-sender") as sender:
            self.assertEqual(listener.node, "beta")
            listener.register("inbox")
            sender.register("outbox")
            msg_id = sender.send("beta", "inbox", "héllo")
            sender.flush()
            # Confirmed only once the listening application has taken it.
            self.assertIsNone(sender.wait_completion(timeout=0.2))
            m = listener.receive(timeout=10)
            self.assertEqual(m, rdmamsg.Message("alpha", "outbox", "inbox",
                                                "héllo".encode("utf-8")))
            self.assertIsNone(listener.receive(timeout=0))
            done = sender.wait_completion(timeout=10)
            self.assertEqual(done.msg_id, msg_id)
            self.assertTrue(done.ok, done)

    def test_idle_strategies_carry_messages_and_honour_timeouts(self):
        with rdmamsg.Client(self.socket("beta"), idle_strategy="busy") as listener, \
                rdmamsg.Client(self.socket("alpha"), idle_strategy="adaptive") as sender:
            self.assertEqual(listener.idle_strategy, "busy")
            self.assertEqual(sender.idle_strategy, "adaptive")
            listener.register("spin")
            self.assertIsNone(listener.receive(timeout=0.1))  # a busy wait ends at its deadline
            sender.send("beta", "spin", b"fast")
            sender.flush()
            self.assertEqual(listener.receive(timeout=10).payload, b"fast")
            self.assertTrue(sender.wait_completion(timeout=10).ok)
            listener.idle_strategy = "sleep"
            self.assertEqual(listener.idle_strategy, "sleep")
            with self.assertRaises(ValueError):
                listener.idle_strategy = "spin"
        with self.assertRaises(ValueError):
            rdmamsg.Client(self.socket("alpha"), idle_strategy="spin")

    def test_failures_are_named(self):
        with rdmamsg.Client(self.socket("alpha")) as c:
            c.send("beta", "nobody", b"x")
            done = c.wait_completion(timeout=10)
            self.assertEqual(done.name, "unknown_service")
            self.assertFalse(done.ok)
            c.send("gamma", "x", b"x")
            self.assertEqual(c.wait_completion(timeout=10).name, "unknown_node")
            with self.assertRaises(rdmamsg.RdmamsgError) as e:
                c.send("beta", "bad name!", b"x")
            self.assertEqual(e.exception.name, "bad_request")
            with rdmamsg.Client(self.socket("alpha")) as other:
                c.register("taken")
                with self.assertRaises(rdmamsg.RdmamsgError) as e:
                    other.register("taken")
                self.assertEqual(e.exception.name, "duplicate_service")
        with self.assertRaises(rdmamsg.RdmamsgError) as e:
            rdmamsg.Client(os.path.join(self.dir, "nothing.sock"))
        self.assertEqual(e.exception.name, "io_error")
        self.assertIn("nothing.sock", e.exception.message)

    def test_try_send_never_waits_and_everything_sent_arrives(self):
        """A listener that does not read holds the sender back: try_send
        raises WouldBlock instead of waiting. Driven from a selector loop, as
        an application would, every message accepted is delivered."""
        payload = b"p" * 65536
        with rdmamsg.Client(self.socket("beta")) as listener, \
                rdmamsg.Client(self.socket("alpha")) as sender:
            listener.register("slow")
            accepted, blocked = 0, False
            for _ in range(2000):
                try:
                    sender.try_send("beta", "slow", payload)
                    accepted += 1
                except rdmamsg.WouldBlock:
                    blocked = True
                    break
            self.assertTrue(blocked, "try_send never reported WouldBlock")
            self.assertGreater(accepted, 0)

            sel = selectors.DefaultSelector()
            sel.register(sender, selectors.EVENT_READ | selectors.EVENT_WRITE)
            received, ok = 0, 0
            deadline = time.monotonic() + 60
            while (received < accepted or ok < accepted) and time.monotonic() < deadline:
                while listener.try_receive() is not None:
                    received += 1
                listener.process_io()
                events = selectors.EVENT_READ | (
                    selectors.EVENT_WRITE if sender.wants_write else 0)
                sel.modify(sender, events)
                sel.select(timeout=0.01)
                sender.process_io()
                while True:
                    done = sender.poll_completion()
                    if done is None:
                        break
                    self.assertTrue(done.ok, done)
                    ok += 1
            sel.close()
            self.assertEqual(received, accepted)
            self.assertEqual(ok, accepted)
            self.assertEqual(sender.in_flight, 0)

    def test_receive_view_reads_in_place_and_confirms_at_release(self):
        """receive_view() hands out a read-only memoryview of the client's
        buffer (no copy), confirmed to the sender only at its release; a
        released view cannot be read, released twice, or outlived by a slice."""
        payloads = [bytes([i % 251]) * (1 + i * 7919 % 700000) for i in range(40)]
        with rdmamsg.Client(self.socket("beta")) as listener, \
                rdmamsg.Client(self.socket("alpha")) as sender:
            listener.register("inbox")
            first = sender.send("beta", "inbox", payloads[0])
            sender.flush()
            v = listener.receive_view(timeout=10)
            self.assertIsInstance(v.payload, memoryview)
            self.assertTrue(v.payload.readonly)
            self.assertEqual(v.payload, payloads[0])
            self.assertEqual((v.src_node, v.src_service, v.service), ("alpha", "", "inbox"))
            # Held: not confirmed yet, and receiving again is refused.
            self.assertIsNone(sender.wait_completion(timeout=0.3))
            with self.assertRaises(rdmamsg.RdmamsgError) as e:
                listener.receive(timeout=0)
            self.assertEqual(e.exception.name, "bad_request")
            part = v.payload[:10]
            with self.assertRaises(BufferError):
                v.release()  # a slice of the payload is alive
            del part
            v.release()
            with self.assertRaises(ValueError):
                v.payload[0]
            with self.assertRaises(rdmamsg.RdmamsgError):
                v.release()
            done = sender.wait_completion(timeout=10)
            self.assertEqual((done.msg_id, done.ok), (first, True))

            # A few at a time: this thread drives both clients.
            for start in range(1, len(payloads), 3):
                batch = payloads[start:start + 3]
                for p in batch:
                    sender.send("beta", "inbox", p)
                sender.flush()
                for i, p in enumerate(batch, start):
                    v = listener.receive_view(timeout=10)
                    self.assertIsNotNone(v, i)
                    with v:
                        self.assertEqual(v.payload, p, i)
                    self.assertTrue(v.released)
                for _ in batch:
                    self.assertTrue(sender.wait_completion(timeout=10).ok)
            self.assertIsNone(listener.receive_view(timeout=0))

            # close() ends a view still held, not taken: its memoryview is
            # unusable and its message fails back to the sender.
            sender.send("beta", "inbox", b"last")
            sender.flush()
            held = listener.receive_view(timeout=10)
            listener.close()
            self.assertTrue(held.released)
            with self.assertRaises(ValueError):
                bytes(held.payload)
            self.assertFalse(sender.wait_completion(timeout=10).ok)

    def test_publish_claims_reach_a_subscriber_on_another_host(self):
        """claim_publish() hands out a memoryview that commit() publishes:
        the subscriber gets every publish intact, in order, each taken."""
        payloads = [bytes([i % 251]) * (10 + i * 104729 % 400000) for i in range(8)]
        with rdmamsg.Client(self.socket("beta")) as subscriber, \
                rdmamsg.Client(self.socket("alpha")) as publisher:
            subscriber.subscribe("claims.>")

            def interest_arrived():  # beta's subscription reached alpha
                publisher.publish("claims.probe", b"probe")
                publisher.flush()  # publishes are batched as sends are
                got = subscriber.receive(timeout=0.2)
                done = publisher.wait_completion(timeout=10)
                self.assertEqual(done.ok, got is not None)
                return done.ok
            self.assertTrue(wait_for(interest_arrived))
            for p in payloads:
                with publisher.claim_publish("claims.x", len(p)) as c:
                    c.payload[:] = p
            with self.assertRaises(rdmamsg.RdmamsgError) as e:
                publisher.claim_publish("claims.*", 10)  # a pattern is no subject
            self.assertEqual(e.exception.name, "bad_request")
            publisher.flush()
            for i, p in enumerate(payloads):
                m = subscriber.receive(timeout=10)
                self.assertIsNotNone(m, i)
                self.assertEqual(m.subject, "claims.x")
                self.assertEqual(m.payload, p, i)
            done = [publisher.wait_completion(timeout=10) for _ in payloads]
            self.assertTrue(all(d.ok and d.taken == 1 for d in done))

    def test_claims_are_written_in_place_committed_and_aborted(self):
        """claim() hands out a writable memoryview that commit() sends and
        abort() gives back; a finished claim cannot be written or committed
        again, nor outlived by a slice."""
        payloads = [bytes([i % 251]) * (1 + i * 7919 % 700000) for i in range(12)]
        with rdmamsg.Client(self.socket("beta")) as listener, \
                rdmamsg.Client(self.socket("alpha")) as sender:
            listener.register("inbox")
            ids = []
            for i, p in enumerate(payloads):
                c = sender.claim("beta", "inbox", len(p))
                self.assertFalse(c.payload.readonly)
                self.assertEqual(len(c.payload), len(p))
                c.payload[:] = p
                if i % 2:
                    ids.append(c.commit())
                else:
                    with c:  # commits at the end of the block
                        pass
                self.assertTrue(c.done)
                with self.assertRaises(ValueError):
                    c.payload[0] = 1
            with self.assertRaises(rdmamsg.RdmamsgError):
                c.commit()
            with self.assertRaises(RuntimeError):
                with sender.claim("beta", "inbox", 100) as dropped:
                    dropped.payload[:3] = b"bad"
                    raise RuntimeError("the application failed while writing")
            self.assertTrue(dropped.done)
            held = sender.claim("beta", "inbox", 5)
            with self.assertRaises(rdmamsg.RdmamsgError) as e:
                sender.claim("beta", "inbox", 5)  # one at a time
            self.assertEqual(e.exception.name, "bad_request")
            part = held.payload[:2]
            with self.assertRaises(BufferError):
                held.abort()  # a slice of the payload is alive
            del part
            held.abort()
            sender.flush()
            for i, p in enumerate(payloads):
                m = listener.receive(timeout=10)
                self.assertIsNotNone(m, i)
                self.assertEqual(m.payload, p, i)
            before = listener.counters
            self.assertIsNone(listener.receive(timeout=0.3))  # nothing aborted arrived
            # The wait slept: the library counts the poll it made.
            self.assertGreater(listener.counters["polls"], before["polls"])
            self.assertEqual(before["syscalls"],
                             sum(v for k, v in before.items() if k != "syscalls"))
            done = [sender.wait_completion(timeout=10) for _ in payloads]
            self.assertTrue(all(d.ok for d in done))
            self.assertTrue(set(ids) <= {d.msg_id for d in done})

            # A claim dropped unfinished is given back: the client claims again.
            lost = sender.claim("beta", "inbox", 1 << 20)
            lost.payload[:4] = b"lost"
            del lost
            again = sender.claim("beta", "inbox", 1 << 20)
            # close() ends a claim still held: its memoryview is unusable
            # (never memory the closed client freed), and nothing is sent.
            sender.close()
            self.assertTrue(again.done)
            with self.assertRaises(ValueError):
                again.payload[0] = 1
            self.assertIsNone(listener.receive(timeout=0.3))


if __name__ == "__main__":
    unittest.main()
