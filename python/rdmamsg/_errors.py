"""rdmamsg's errors: the C API's error codes (rdmamsg_errc) and the exceptions that carry
them."""

# rdmamsg_errc, by value.
ERRORS = ["ok", "unknown_node", "unknown_service", "peer_unreachable", "too_large", "timeout",
          "bad_request", "duplicate_service", "busy", "shutting_down", "protocol_error",
          "io_error", "not_connected", "would_block", "permission_denied", "no_subscribers",
          "no_responders"]


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


def _error(code, message):
    if code == 13:
        return WouldBlock(code, message)
    if code == 5:
        return Timeout(code, message)
    return RdmamsgError(code, message)
