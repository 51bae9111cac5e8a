"""ctypes bindings of libchipd (proto/include/chipd.h): the structs, the prototypes, the loader.

Every ``Structure`` here mirrors its C struct field by field, in the same order and
with the same types, so ctypes computes the same offsets, alignment and size as the
C compiler does on this ABI. ``tests/python/test_layout.py`` compares them with what
a small C program built against chipd.h prints (``tests/python/layout.c``); change
both sides together.

ctypes releases the GIL around every call through a ``CDLL``, so a thread waiting in
libchipd (a call to the supervisor, a token read) never blocks the other Python
threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_uint32,
    c_uint64,
    c_uint8,
    c_void_p,
)
from typing import Dict, List, Optional, Tuple

# Sizes from chipd.h; a mismatch shows up in the layout self-check.
MSG_MAX = 160
NAME_MAX = 32
PAYLOAD_MAX = 24  # CHIPD_PAYLOAD_MAX
INPUT_INLINE_MAX = 1024  # CHIPD_INPUT_INLINE_MAX
INPUT_MAX = 1 << 20  # CHIPD_INPUT_MAX
OUTPUT_MAX = 1 << 20  # CHIPD_OUTPUT_MAX
KEY_MAX = 24
MAX_PARAMS = 16
MAX_CHIPS = 64
INSTANCE_MAX = 48
MAX_WORKLOADS = 8
DOC_MAX = 128

# enum chipd_code, in the header's order (the value is the index).
CODE_NAMES: Tuple[str, ...] = (
    "ok",
    "bad_request",
    "unsupported_version",
    "too_large",
    "queue_full",
    "no_capacity",
    "duplicate_id",
    "not_found",
    "cancelled",
    "draining",
    "worker_lost",
    "device_error",
    "timeout",
    "internal",
    "node_lost",
)
CODE_OK = 0
CODE_TIMEOUT = 12

# enum chipd_trace_act
TRACE_ACTS = {"start": 1, "stop": 2, "collect": 3}

# C enums are int-sized on every ABI chipd builds for; they never hold a negative.
c_enum = c_int


class ChipdErrorStruct(Structure):
    """struct chipd_error."""

    _fields_ = [
        ("errnum", c_int),
        ("code", c_enum),
        ("retryable", c_bool),
        ("has_request", c_bool),
        ("has_chip", c_bool),
        ("request", c_uint64),
        ("chip", c_uint32),
        ("message", c_char * MSG_MAX),
    ]


class ParamStruct(Structure):
    """struct chipd_param."""

    _fields_ = [("key", c_char_p), ("value", c_int64)]


class RequestStruct(Structure):
    """struct chipd_request."""

    _fields_ = [
        ("workload", c_char_p),
        ("params", POINTER(ParamStruct)),
        ("nparams", c_uint32),
        ("id", c_uint64),
        ("chip", c_int32),
        ("max_tokens", c_uint32),
        ("deadline_ms", c_uint32),
        ("input", c_void_p),
        ("input_len", c_uint32),
        ("output_cap", c_uint32),
    ]


class TokenStruct(Structure):
    """struct chipd_token."""

    _fields_ = [
        ("request", c_uint64),
        ("seq", c_uint32),
        ("final", c_bool),
        ("value", c_uint64),
        ("ts_ns", c_uint64),
        ("payload_len", c_uint32),
        ("payload", c_uint8 * PAYLOAD_MAX),
        ("out_len", c_uint32),
    ]


class ChipStatusStruct(Structure):
    """struct chipd_chip_status."""

    _fields_ = [
        ("chip", c_uint32),
        ("state", c_enum),
        ("pid", c_uint32),
        ("gpu", c_int32),
        ("restarts", c_uint32),
        ("queued", c_uint32),
        ("active", c_uint32),
    ]


class StatusStruct(Structure):
    """struct chipd_status."""

    _fields_ = [
        ("state", c_enum),
        ("pid", c_uint32),
        ("uptime_ms", c_uint64),
        ("nchips", c_uint32),
        ("chips", ChipStatusStruct * MAX_CHIPS),
    ]


class StatStruct(Structure):
    """struct chipd_stat."""

    _fields_ = [
        ("block", c_char * 16),
        ("name", c_char * 56),
        ("gauge", c_bool),
        ("value", c_uint64),
    ]


class WlParamStruct(Structure):
    """struct chipd_wl_param (``def`` is a keyword in Python: read it with getattr)."""

    _fields_ = [
        ("key", c_char * KEY_MAX),
        ("def", c_int64),
        ("min", c_int64),
        ("max", c_int64),
        ("doc", c_char * DOC_MAX),
    ]


class WorkloadStruct(Structure):
    """struct chipd_workload."""

    _fields_ = [
        ("name", c_char * NAME_MAX),
        ("doc", c_char * DOC_MAX),
        ("nparams", c_uint32),
        ("params", WlParamStruct * MAX_PARAMS),
        ("version", c_uint32),
        ("chips", c_uint64),
        ("active", c_uint32),
        ("requests", c_uint64),
        ("completed", c_uint64),
        ("failed", c_uint64),
        ("cancelled", c_uint64),
        ("tokens", c_uint64),
    ]


# The C name of each mirrored struct, for the layout self-check.
STRUCTS: Dict[str, type] = {
    "chipd_error": ChipdErrorStruct,
    "chipd_param": ParamStruct,
    "chipd_request": RequestStruct,
    "chipd_token": TokenStruct,
    "chipd_chip_status": ChipStatusStruct,
    "chipd_status": StatusStruct,
    "chipd_stat": StatStruct,
    "chipd_wl_param": WlParamStruct,
    "chipd_workload": WorkloadStruct,
}


def layout() -> Dict[str, Tuple[int, int, Dict[str, int]]]:
    """The ctypes view of every mirrored struct: name -> (size, alignment, {field: offset})."""
    out = {}
    for name, st in STRUCTS.items():
        fields = {f[0]: getattr(st, f[0]).offset for f in st._fields_}
        out[name] = (ctypes.sizeof(st), ctypes.alignment(st), fields)
    return out


_ERR = POINTER(ChipdErrorStruct)
_CONN = c_void_p  # chipd_conn * (opaque)
_STREAM = c_void_p  # chipd_stream * (opaque)

# name -> (restype, argtypes); every function of chipd.h.
_PROTOTYPES = {
    "chipd_code_name": (c_char_p, [c_enum]),
    "chipd_code_retryable": (c_bool, [c_enum]),
    "chipd_connect": (c_int, [c_char_p, POINTER(_CONN), _ERR]),
    "chipd_connect_timeout": (c_int, [c_char_p, c_uint32, POINTER(_CONN), _ERR]),
    "chipd_close": (None, [_CONN]),
    "chipd_instance": (c_char_p, [_CONN]),
    "chipd_ping": (c_int, [_CONN, c_uint32, POINTER(c_uint32), _ERR]),
    "chipd_submit": (
        c_int,
        [_CONN, POINTER(RequestStruct), c_uint32, POINTER(c_uint64), POINTER(_STREAM), _ERR],
    ),
    "chipd_stream_next": (c_int, [_STREAM, POINTER(TokenStruct), c_uint32, _ERR]),
    "chipd_stream_output": (c_int, [_STREAM, c_void_p, c_uint32, POINTER(c_uint32), _ERR]),
    "chipd_stream_id": (c_uint64, [_STREAM]),
    "chipd_stream_set_spin": (None, [_STREAM, c_uint32]),
    "chipd_stream_close": (None, [_STREAM, c_uint32]),
    "chipd_cancel": (c_int, [_CONN, c_uint64, c_uint32, _ERR]),
    "chipd_sup_state_name": (c_char_p, [c_enum]),
    "chipd_chip_state_name": (c_char_p, [c_enum]),
    "chipd_status": (c_int, [_CONN, c_uint32, POINTER(StatusStruct), _ERR]),
    "chipd_stats": (c_int, [_CONN, POINTER(StatStruct), c_uint32, POINTER(c_uint32), _ERR]),
    "chipd_drain": (c_int, [_CONN, c_uint32, c_uint32, _ERR]),
    "chipd_stop": (c_int, [_CONN, c_uint32, c_uint32, _ERR]),
    "chipd_trace": (
        c_int,
        [_CONN, c_int, c_char_p, c_uint32, POINTER(c_uint64), POINTER(c_uint64), _ERR],
    ),
    "chipd_workloads": (
        c_int,
        [_CONN, c_uint32, POINTER(WorkloadStruct), c_uint32, POINTER(c_uint32), _ERR],
    ),
    "chipd_register": (
        c_int,
        [_CONN, c_char_p, c_char_p, c_uint32, c_char_p, POINTER(c_uint32), _ERR],
    ),
    "chipd_unregister": (c_int, [_CONN, c_char_p, c_int, c_uint32, _ERR]),
}

# enum chipd_unregister_mode
UNREGISTER_MODES = {"refuse": 0, "drain": 1, "cancel": 2}

SONAME = "libchipd.so.0"

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def candidates() -> List[str]:
    """Where libchipd is looked for, in order: $CHIPD_LIB, find_library, the soname."""
    out = []
    env = os.environ.get("CHIPD_LIB")
    if env:
        return [env]  # an explicit path is the only candidate: no silent fallback
    found = ctypes.util.find_library("chipd")
    if found and found != SONAME:
        out.append(found)
    out.append(SONAME)
    return out


def lib() -> ctypes.CDLL:
    """The loaded libchipd with every prototype declared; loads it on first use.

    Raises OSError naming every candidate tried when none loads.
    """
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidates():
            try:
                dll = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path}: {e}")
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                fn = getattr(dll, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = dll
            return dll
        raise OSError("libchipd not found (set CHIPD_LIB to its path): " + "; ".join(tried))
