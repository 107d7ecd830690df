"""rdmamsg: send and receive messages through the local rdmamsgd.

A thin binding of librdmamsg's C API (rdmamsg/rdmamsg.h) with ctypes:

    import rdmamsg
    with rdmamsg.Client() as c:                  # $RDMAMSG_SOCKET or the default socket
        c.register("inbox")
        msg_id = c.send("beta", "inbox", b"hello")
        done = c.wait_completion(timeout=30)      # done.ok once delivered
        m = c.receive(timeout=1.0)                # a Message, or None
        if m:
            print(m.payload, "from", m.src_node, m.src_service)
        v = c.receive_view(timeout=1.0)           # no copy: v.payload is a memoryview
        if v:
            with v:                               # taken (sender confirmed) at its end
                handle(v.payload)

Subjects: publish/subscribe, request/reply and queue groups:

        sub = c.subscribe("prices.>")             # "*" one token, ">" the rest
        c.publish("prices.eu.x", b"42")           # Completion: matched, taken, dropped
        m = c.receive(timeout=1.0)                # m.subject, m.subscription
        reply = c.request_wait("quote.x", b"?", timeout=2.0)   # a Message
        c.reply(request_message, b"answer")       # a request has m.reply_to

Timeouts are in seconds; None waits without limit.

Client(idle_strategy="busy") makes the blocking calls spin on the
shared-memory rings until their deadline instead of sleeping ("adaptive":
spin for a bounded time first; "sleep", the default: sleep at once); see
docs/client-api.md, "Idle strategies". $RDMAMSG_IDLE sets it for a process.

For an event loop (selectors, asyncio's add_reader): watch c.fileno() for
reading (and writing while c.wants_write), call c.process_io(), then drain
c.try_receive() and c.poll_completion(); c.try_send() never waits and raises
WouldBlock when the daemon is not reading.

The library is found through $RDMAMSG_LIBRARY, then next to this package's
installation prefix, then the dynamic linker's search path.
"""

import ctypes
import json
import weakref
from collections import namedtuple

from ._borrowed import MessageView, SendClaim
from ._errors import ERRORS, RdmamsgError, Timeout, WouldBlock, _error
from ._native import (_Completion, _Counters, _Message, _bytes, _client_p, _lib, _ms,
                      _request_ms, _text)

__all__ = ["Client", "Message", "MessageView", "Completion", "RdmamsgError", "WouldBlock",
           "Timeout", "ERRORS", "IDLE_STRATEGIES", "SLOW_CONSUMER_POLICIES"]

# rdmamsg_slow_consumer, by value: what a subscription's daemon does once
# its pending limit of messages are delivered and not taken.
SLOW_CONSUMER_POLICIES = ["drop", "block"]


# A message sent to a service names it (`service`); a message published to a
# subject names the subject and the subscription (and carries `reply_to`
# when it is a request: answer with Client.reply); a reply names its request.
Message = namedtuple("Message", "src_node src_service service payload subject reply_to "
                     "subscription request_id", defaults=("", "", 0, 0))


class Completion(namedtuple("Completion", "msg_id code message matched taken dropped",
                            defaults=(0, 0, 0))):
    """The outcome of one sent message. A publish's names how many
    subscriptions it matched, how many took it and how many dropped it."""

    @property
    def ok(self):
        return self.code == 0

    @property
    def name(self):
        return ERRORS[self.code] if 0 <= self.code < len(ERRORS) else "invalid_errc"


# rdmamsg_idle_strategy, by value.
IDLE_STRATEGIES = ["sleep", "adaptive", "busy"]


class Client:
    """A connection to the local rdmamsgd. Not thread-safe."""

    def __init__(self, socket=None, name="python", timeout=5.0, idle_strategy=None):
        self._c = None
        if idle_strategy is not None and idle_strategy not in IDLE_STRATEGIES:
            raise ValueError("idle_strategy %r is not one of %s" % (idle_strategy,
                                                                    ", ".join(IDLE_STRATEGIES)))
        handle = _client_p()
        rc = _lib.rdmamsg_connect(socket.encode() if socket else None, name.encode(),
                                  _ms(timeout), ctypes.byref(handle))
        if rc != 0:
            raise _error(rc, _text(_lib.rdmamsg_last_error(None)))
        self._c = handle
        self._msg = _Message()
        self._done = _Completion()
        self._view = None
        self._claim = None  # a weak reference to the SendClaim held, if any
        if idle_strategy is not None:
            self.idle_strategy = idle_strategy

    @property
    def idle_strategy(self):
        """How the blocking calls wait: "sleep", "adaptive" or "busy"."""
        return IDLE_STRATEGIES[_lib.rdmamsg_get_idle_strategy(self._handle())]

    @idle_strategy.setter
    def idle_strategy(self, name):
        if name not in IDLE_STRATEGIES:
            raise ValueError("idle_strategy %r is not one of %s" % (name,
                                                                    ", ".join(IDLE_STRATEGIES)))
        self._check(_lib.rdmamsg_set_idle_strategy(self._handle(), IDLE_STRATEGIES.index(name)))

    # -- lifetime
    def close(self):
        """Closes the connection. A view still held ends without being taken
        (its message fails back to its sender, as in C and C++), and a claim
        still held ends unsent; BufferError, and the client stays open, while
        a memoryview made from either's payload is alive."""
        if getattr(self, "_c", None):
            if self._view is not None:
                self._view._end()
                self._view = None
            claim = self._claim() if self._claim is not None else None
            if claim is not None and not claim.done:
                claim._end()
            self._claim = None
            _lib.rdmamsg_close(self._c)
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _check(self, rc):
        if rc != 0:
            raise _error(rc, _text(_lib.rdmamsg_last_error(self._handle())))

    def _handle(self):
        if not self._c:
            raise RdmamsgError(12, "the client is closed")
        return self._c

    # -- what the daemon said at connect
    @property
    def node(self):
        return _text(_lib.rdmamsg_node_name(self._handle()))

    @property
    def max_message_size(self):
        return _lib.rdmamsg_max_message_size(self._handle())

    # -- services
    def register(self, service, timeout=5.0):
        self._check(_lib.rdmamsg_register(self._handle(), service.encode(), _ms(timeout)))

    def unregister(self, service):
        self._check(_lib.rdmamsg_unregister(self._handle(), service.encode()))

    # -- sending
    def send(self, node, service, payload):
        """Queues a message; returns its id. Waits only for the socket, and
        only when several MiB are unwritten."""
        return self._send(_lib.rdmamsg_send, node, service, payload)

    def try_send(self, node, service, payload):
        """Queues a message without ever waiting; raises WouldBlock (nothing
        queued) when the socket is full."""
        return self._send(_lib.rdmamsg_try_send, node, service, payload)

    def _send(self, fn, node, service, payload):
        data = _bytes(payload)
        msg_id = ctypes.c_uint64()
        self._check(fn(self._handle(), node.encode(), service.encode(), data, len(data),
                       ctypes.byref(msg_id)))
        return msg_id.value

    def claim(self, node, service, size):
        """A SendClaim of `size` bytes to node/service: write the message into
        its payload, then commit() it (or abort() it). No copy of the
        payload on this host when it lies in the shared payload area."""
        at = ctypes.c_void_p()
        self._check(_lib.rdmamsg_claim(self._handle(), node.encode(), service.encode(), size,
                                       ctypes.byref(at)))
        return self._held_claim(at.value, size)

    def claim_publish(self, subject, size):
        """A SendClaim of `size` bytes for a publish to `subject`: its
        commit() publishes it, as publish() would."""
        at = ctypes.c_void_p()
        self._check(_lib.rdmamsg_claim_publish(self._handle(), subject.encode(), size,
                                               ctypes.byref(at)))
        return self._held_claim(at.value, size)

    def _held_claim(self, address, size):
        claim = SendClaim(self, address, size)
        self._claim = weakref.ref(claim)  # close() ends it before the memory goes
        return claim

    def _commit_claim(self):
        msg_id = ctypes.c_uint64()
        self._check(_lib.rdmamsg_commit(self._handle(), ctypes.byref(msg_id)))
        return msg_id.value

    def _abort_claim(self):
        self._check(_lib.rdmamsg_abort(self._handle()))

    def flush(self, timeout=30.0):
        self._check(_lib.rdmamsg_flush(self._handle(), _ms(timeout)))

    def wait_completion(self, timeout=30.0):
        """The next completion, or None if none came within `timeout`
        seconds (None: wait without limit)."""
        rc = _lib.rdmamsg_wait_completion(self._handle(), ctypes.byref(self._done), _ms(timeout))
        if rc == 5:
            return None
        self._check(rc)
        return self._completion()

    def poll_completion(self):
        if not _lib.rdmamsg_poll_completion(self._handle(), ctypes.byref(self._done)):
            return None
        return self._completion()

    def _completion(self):
        d = self._done
        return Completion(d.msg_id, d.code, _text(d.message), d.matched, d.taken, d.dropped)

    @property
    def in_flight(self):
        return _lib.rdmamsg_in_flight(self._handle())

    @property
    def counters(self):
        """The system calls the library has made for this client since it
        connected, by call: a dict of socket_reads, socket_writes, polls,
        doorbell_rings, doorbell_reads and syscalls (all of them)."""
        c = _Counters()
        _lib.rdmamsg_get_counters(self._handle(), ctypes.byref(c))
        return {name: getattr(c, name) for name, _ in _Counters._fields_}

    # -- receiving
    def receive(self, timeout=None):
        """The next message, waiting up to `timeout` seconds (None: without
        limit, 0: not at all); None if none came in time."""
        rc = _lib.rdmamsg_receive(self._handle(), ctypes.byref(self._msg), _ms(timeout))
        if rc == 5:
            return None
        self._check(rc)
        return self._message()

    def try_receive(self):
        if not _lib.rdmamsg_try_receive(self._handle(), ctypes.byref(self._msg)):
            return None
        return self._message()

    def receive_view(self, timeout=None):
        """The next message without copying its payload: a MessageView whose
        payload is a memoryview of the client's buffer, valid until
        view.release() or the end of a `with view:` block; None if none came
        in time. The message counts as taken
        — its sender is confirmed — at the release, not before."""
        rc = _lib.rdmamsg_receive_view(self._handle(), ctypes.byref(self._msg), _ms(timeout))
        if rc == 5:
            return None
        self._check(rc)
        self._view = MessageView(self, self._msg)
        return self._view

    def try_receive_view(self):
        if not _lib.rdmamsg_try_receive_view(self._handle(), ctypes.byref(self._msg)):
            return None
        self._view = MessageView(self, self._msg)
        return self._view

    def _release_view(self, view):
        self._view = None
        self._check(_lib.rdmamsg_release_view(self._handle()))

    def _message(self):
        m = self._msg
        return Message(_text(m.src_node), _text(m.src_service), _text(m.service),
                       ctypes.string_at(m.payload, m.size) if m.size else b"",
                       _text(m.subject), _text(m.reply_to), m.subscription, m.request_id)

    # -- subjects
    def subscribe(self, pattern, group=None, policy="drop", pending_limit=0, timeout=5.0):
        """Subscribes to `pattern` ("*" matches one token, ">" the rest);
        returns the subscription's id, which its messages carry. `group`
        makes it a member of a queue group (each message to one member);
        `policy` is "drop" (a slow subscriber loses messages, counted, and
        stalls nobody) or "block" (lossless: its publishers are held)."""
        if policy not in SLOW_CONSUMER_POLICIES:
            raise RdmamsgError(6, "policy %r is neither 'drop' nor 'block'" % (policy,))
        sub_id = ctypes.c_uint64()
        self._check(_lib.rdmamsg_subscribe(self._handle(), pattern.encode(),
                                           group.encode() if group else None,
                                           SLOW_CONSUMER_POLICIES.index(policy), pending_limit,
                                           _ms(timeout), ctypes.byref(sub_id)))
        return sub_id.value

    def unsubscribe(self, sub_id):
        self._check(_lib.rdmamsg_unsubscribe(self._handle(), sub_id))

    def publish(self, subject, payload):
        """Queues a publish; returns its id. Its Completion comes once every
        matching subscription took or dropped it (no_subscribers: none)."""
        data = _bytes(payload)
        msg_id = ctypes.c_uint64()
        self._check(_lib.rdmamsg_publish(self._handle(), subject.encode(), data, len(data),
                                         ctypes.byref(msg_id)))
        return msg_id.value

    def request(self, subject, payload, timeout=5.0):
        """Queues a request; returns its id. Its reply comes from receive()
        (a Message whose request_id is the id); a Completion says why none
        came (no_responders, timeout, ...)."""
        data = _bytes(payload)
        msg_id = ctypes.c_uint64()
        self._check(_lib.rdmamsg_request(self._handle(), subject.encode(), data, len(data),
                                         _request_ms(timeout), ctypes.byref(msg_id)))
        return msg_id.value

    def request_wait(self, subject, payload, timeout=5.0):
        """Sends a request and returns its reply (a Message); raises
        RdmamsgError (no_responders at once when nothing subscribes) or
        Timeout. Messages received before the reply stay queued."""
        data = _bytes(payload)
        self._check(_lib.rdmamsg_request_wait(self._handle(), subject.encode(), data, len(data),
                                              ctypes.byref(self._msg), _request_ms(timeout)))
        return self._message()

    def reply(self, request, payload):
        """Queues the reply to `request` (a Message or MessageView with a
        reply_to, or the token itself); returns its id."""
        token = request if isinstance(request, str) else request.reply_to
        data = _bytes(payload)
        msg_id = ctypes.c_uint64()
        self._check(_lib.rdmamsg_reply(self._handle(), token.encode(), data, len(data),
                                       ctypes.byref(msg_id)))
        return msg_id.value

    # -- status
    def status(self, timeout=5.0):
        """The daemon's status (what `rdmamsg status --json` prints), as a dict."""
        out = ctypes.c_void_p()
        self._check(_lib.rdmamsg_status(self._handle(), ctypes.byref(out), _ms(timeout)))
        try:
            return json.loads(ctypes.string_at(out.value).decode("utf-8"))
        finally:
            _lib.rdmamsg_free(out)

    # -- event loops
    def fileno(self):
        return _lib.rdmamsg_fd(self._handle())

    @property
    def wants_write(self):
        return bool(_lib.rdmamsg_wants_write(self._handle()))

    def process_io(self):
        self._check(_lib.rdmamsg_process_io(self._handle()))

    def prepare_to_poll(self):
        """Before sleeping on fileno() with the adaptive or busy strategy: False when
        something came meanwhile (call process_io() and drain instead)."""
        return bool(_lib.rdmamsg_prepare_to_poll(self._handle()))
