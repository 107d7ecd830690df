"""Memory of the client's lent to the application: a message written where it is sent
from (SendClaim) and a message read in place (MessageView)."""

import ctypes
import sys

from ._errors import RdmamsgError
from ._native import _text

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
