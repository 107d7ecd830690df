"""librdmamsg loaded with ctypes: the C API's structures and functions (rdmamsg/rdmamsg.h),
and the conversions between Python's values and theirs."""

import ctypes
import os

from ._paths import LIBRARY_FROM_PACKAGE

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
