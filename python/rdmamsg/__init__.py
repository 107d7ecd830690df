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
import os
import sys
import weakref
from collections import namedtuple

from ._paths import LIBRARY_FROM_PACKAGE

__all__ = ["Client", "Message", "MessageView", "Completion", "RdmamsgError", "WouldBlock",
           "Timeout", "ERRORS", "IDLE_STRATEGIES", "SLOW_CONSUMER_POLICIES"]

# rdmamsg_errc, by value.
ERRORS = ["ok", "unknown_node", "unknown_service", "peer_unreachable", "too_large", "timeout",
          "bad_request", "duplicate_service", "busy", "shutting_down", "protocol_error",
          "io_error", "not_connected", "would_block", "permission_denied", "no_subscribers",
          "no_responders"]

# rdmamsg_slow_consumer, by value: what a subscription's daemon does once
# its pending limit of messages are delivered and not taken.
SLOW_CONSUMER_POLICIES = ["drop", "block"]


class RdmamsgError(Exception):
    """A failed call: .code (rdmamsg_errc), .name ("unknown_service"), .message."""

    def __init__(self, code, message):
        self.code = code
        self.name = ERRORS[code] if 0 <= code < len(ERRORS) else "invalid_errc"
        self.message = message
        super().__init__("%s: %s" % (self.name, message) if message else self.name)


class WouldBlock(RdmamsgError):
    """try_send: the socket is full; nothing was queued."""


class Timeout(RdmamsgError):
    """Nothing happened within the time given."""


# A message sent to a service names it (`service`); a message published to a
# subject names the subject and the subscription (and carries `reply_to`
# when it is a request: answer with Client.reply); a reply names its request.
Message = namedtuple("Message", "src_node src_service service payload subject reply_to "
                     "subscription request_id", defaults=("", "", 0, 0))


def _end_borrowed(obj, name, finished):
    """Ends a MessageView's or SendClaim's hold on the client's memory: makes
    its payload unusable and returns the client; BufferError while a
    memoryview made from the payload is alive."""
    if obj._client is None:
        raise RdmamsgError(6, f"the {name} is {finished} already")
    obj.payload.release()
    # Each memoryview made from the payload keeps a reference to the array.
    if obj._array is not None and sys.getrefcount(obj._array) > 2:
        raise BufferError(f"a memoryview made from this {name}'s payload is still alive")
    client, obj._client, obj._array = obj._client, None, None
    return client


class SendClaim:
    """A message written where it is sent from (Client.claim, or
    Client.claim_publish for a publish): `payload` is a
    writable memoryview of the message's bytes, over shared memory (16 KiB
    and more) a block of the payload area that the daemon sends from.

    commit() queues it and returns its id, as send() would; abort() gives it
    back unsent. Either releases the memoryview (using it raises
    ValueError), and raises BufferError while a memoryview made from
    `payload` is alive. `with client.claim(...) as c:` commits at the end of
    the block, or aborts when it raises. A client holds one claim at a time.
    """

    __slots__ = ("payload", "_client", "_array", "__weakref__")

    def __init__(self, client, address, size):
        self._client = client
        if size:
            self._array = (ctypes.c_ubyte * size).from_address(address)
            self.payload = memoryview(self._array).cast("B")
        else:
            self._array = None
            self.payload = memoryview(bytearray())

    @property
    def done(self):
        return self._client is None

    def commit(self):
        """Queues the message; returns its id."""
        return self._end()._commit_claim()

    def abort(self):
        self._end()._abort_claim()

    def _end(self):
        return _end_borrowed(self, "SendClaim", "committed or aborted")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if self._client is None:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def __del__(self):
        # A claim dropped unfinished is given back, so that its client can
        # claim again (its block is not kept from the payload area).
        if getattr(self, "_client", None) is not None:
            try:
                self.abort()
            except (RdmamsgError, BufferError):
                pass

    def __repr__(self):
        state = "done" if self._client is None else f"{len(self.payload)} bytes"
        return f"SendClaim({state})"


class MessageView:
    """A message read in place (Client.receive_view): `payload` is a read-only
    memoryview of the client's own buffer, not a copy of it.

    It is valid until release() — or the end of a `with` block —, which is
    when the message counts as taken and its sender is confirmed; the
    memoryview is released then (using it raises ValueError). A client holds
    one view at a time: receive() and receive_view() raise until it is
    released. Slices or other memoryviews made from `payload` must be gone
    by then: release() raises BufferError while one is alive (and
    Client.close() too), so that nothing reads memory the library reuses.
    bytes(v.payload) makes a copy that outlives the view.
    """

    __slots__ = ("src_node", "src_service", "service", "payload", "subject", "reply_to",
                 "subscription", "request_id", "_client", "_array")

    def __init__(self, client, msg):
        self._client = client
        self.src_node = _text(msg.src_node)
        self.src_service = _text(msg.src_service)
        self.service = _text(msg.service)
        self.subject = _text(msg.subject)
        self.reply_to = _text(msg.reply_to)
        self.subscription = msg.subscription
        self.request_id = msg.request_id
        if msg.size:
            self._array = (ctypes.c_ubyte * msg.size).from_address(msg.payload)
            base = memoryview(self._array)
            self.payload = base.toreadonly()
            base.release()
        else:
            self._array = None
            self.payload = memoryview(b"")

    @property
    def released(self):
        return self._client is None

    def release(self):
        """Ends the view: the message is taken. RdmamsgError (bad_request)
        when it was released already; BufferError while a memoryview made
        from `payload` is alive (the view stays held)."""
        client = self._end()
        client._release_view(self)

    def _end(self):
        return _end_borrowed(self, "MessageView", "released")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._client is not None:
            self.release()

    def __repr__(self):
        state = "released" if self._client is None else f"{len(self.payload)} bytes"
        return f"MessageView({self.src_node}/{self.src_service} -> {self.service}, {state})"


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


class _Message(ctypes.Structure):
    _fields_ = [("src_node", ctypes.c_char_p), ("src_service", ctypes.c_char_p),
                ("service", ctypes.c_char_p), ("payload", ctypes.c_void_p),
                ("size", ctypes.c_size_t), ("subject", ctypes.c_char_p),
                ("reply_to", ctypes.c_char_p), ("subscription", ctypes.c_uint64),
                ("request_id", ctypes.c_uint64)]


class _Completion(ctypes.Structure):
    _fields_ = [("msg_id", ctypes.c_uint64), ("code", ctypes.c_int),
                ("message", ctypes.c_char_p), ("matched", ctypes.c_uint32),
                ("taken", ctypes.c_uint32), ("dropped", ctypes.c_uint32)]


class _Counters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "socket_reads", "socket_writes", "polls", "doorbell_rings", "doorbell_reads",
        "syscalls")]


def _load():
    candidates = []
    if os.environ.get("RDMAMSG_LIBRARY"):
        candidates.append(os.environ["RDMAMSG_LIBRARY"])
    if LIBRARY_FROM_PACKAGE:
        candidates.append(os.path.normpath(os.path.join(os.path.dirname(__file__),
                                                        LIBRARY_FROM_PACKAGE)))
    candidates.append("librdmamsg.so.0")
    errors = []
    for path in candidates:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
    raise ImportError("cannot load librdmamsg: " + "; ".join(errors))


_lib = _load()
_client_p = ctypes.c_void_p
_u64p = ctypes.POINTER(ctypes.c_uint64)
for _name, _res, _args in [
        ("rdmamsg_connect", ctypes.c_int,
         [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_client_p)]),
        ("rdmamsg_close", None, [_client_p]),
        ("rdmamsg_last_error", ctypes.c_char_p, [_client_p]),
        ("rdmamsg_node_name", ctypes.c_char_p, [_client_p]),
        ("rdmamsg_max_message_size", ctypes.c_uint32, [_client_p]),
        ("rdmamsg_register", ctypes.c_int, [_client_p, ctypes.c_char_p, ctypes.c_int]),
        ("rdmamsg_unregister", ctypes.c_int, [_client_p, ctypes.c_char_p]),
        ("rdmamsg_send", ctypes.c_int, [_client_p, ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.c_char_p, ctypes.c_size_t, _u64p]),
        ("rdmamsg_try_send", ctypes.c_int, [_client_p, ctypes.c_char_p, ctypes.c_char_p,
                                            ctypes.c_char_p, ctypes.c_size_t, _u64p]),
        ("rdmamsg_claim", ctypes.c_int, [_client_p, ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
        ("rdmamsg_claim_publish", ctypes.c_int, [_client_p, ctypes.c_char_p, ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_void_p)]),
        ("rdmamsg_commit", ctypes.c_int, [_client_p, _u64p]),
        ("rdmamsg_abort", ctypes.c_int, [_client_p]),
        ("rdmamsg_flush", ctypes.c_int, [_client_p, ctypes.c_int]),
        ("rdmamsg_receive", ctypes.c_int, [_client_p, ctypes.POINTER(_Message), ctypes.c_int]),
        ("rdmamsg_try_receive", ctypes.c_int, [_client_p, ctypes.POINTER(_Message)]),
        ("rdmamsg_receive_view", ctypes.c_int,
         [_client_p, ctypes.POINTER(_Message), ctypes.c_int]),
        ("rdmamsg_try_receive_view", ctypes.c_int, [_client_p, ctypes.POINTER(_Message)]),
        ("rdmamsg_release_view", ctypes.c_int, [_client_p]),
        ("rdmamsg_wait_completion", ctypes.c_int,
         [_client_p, ctypes.POINTER(_Completion), ctypes.c_int]),
        ("rdmamsg_poll_completion", ctypes.c_int, [_client_p, ctypes.POINTER(_Completion)]),
        ("rdmamsg_in_flight", ctypes.c_size_t, [_client_p]),
        ("rdmamsg_get_counters", None, [_client_p, ctypes.POINTER(_Counters)]),
        ("rdmamsg_status", ctypes.c_int,
         [_client_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]),
        ("rdmamsg_free", None, [ctypes.c_void_p]),
        ("rdmamsg_fd", ctypes.c_int, [_client_p]),
        ("rdmamsg_wants_write", ctypes.c_int, [_client_p]),
        ("rdmamsg_process_io", ctypes.c_int, [_client_p]),
        ("rdmamsg_prepare_to_poll", ctypes.c_int, [_client_p]),
        ("rdmamsg_subscribe", ctypes.c_int,
         [_client_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32,
          ctypes.c_int, _u64p]),
        ("rdmamsg_unsubscribe", ctypes.c_int, [_client_p, ctypes.c_uint64]),
        ("rdmamsg_publish", ctypes.c_int,
         [_client_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, _u64p]),
        ("rdmamsg_request", ctypes.c_int,
         [_client_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, _u64p]),
        ("rdmamsg_request_wait", ctypes.c_int,
         [_client_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
          ctypes.POINTER(_Message), ctypes.c_int]),
        ("rdmamsg_reply", ctypes.c_int,
         [_client_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, _u64p]),
        ("rdmamsg_set_idle_strategy", ctypes.c_int, [_client_p, ctypes.c_int]),
        ("rdmamsg_get_idle_strategy", ctypes.c_int, [_client_p])]:
    _f = getattr(_lib, _name)
    _f.restype = _res
    _f.argtypes = _args


# rdmamsg_idle_strategy, by value.
IDLE_STRATEGIES = ["sleep", "adaptive", "busy"]


def _ms(seconds):
    """Seconds to the C API's milliseconds: None waits without limit (-1)."""
    if seconds is None:
        return -1
    return min(max(0, int(seconds * 1000)), 2**31 - 1)


def _request_ms(seconds):
    """A request's timeout in milliseconds, rounded up (0 and less are refused)."""
    return min(max(0, -int(-seconds * 1000 // 1)), 2**31 - 1)


def _text(b):
    return b.decode("utf-8", "replace") if b is not None else ""


def _bytes(data):
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


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


def _error(code, message):
    if code == 13:
        return WouldBlock(code, message)
    if code == 5:
        return Timeout(code, message)
    return RdmamsgError(code, message)
