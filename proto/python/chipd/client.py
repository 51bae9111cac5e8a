"""Connections and streams: the Python face of libchipd's calls.

Threads: a ``Connection`` may be used by several threads at once, as libchipd allows.
A ``Stream`` may be shared too, but its tokens are read by one thread at a time
(libchipd serializes calls on one stream); two threads iterating one stream each get
some of its tokens. ctypes releases the GIL around every libchipd call, so a thread
waiting for an answer or a token does not hold up the others.

Lifetime: ``close()`` (or leaving the ``with`` block) closes a stream — cancelling
its request if it has not ended — and a connection, after closing the streams it
still has open. A close waits for calls in flight on the same object (each bounded
by its timeout) so that no call ever runs on freed memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import math
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, TypeVar

from . import _lib
from .errors import BadRequest, CallTimeout, ChipdError, NotFound, from_struct

#: How long one libchipd wait lasts at most; longer waits are made of such slices so
#: that signals (KeyboardInterrupt) and a close from another thread are noticed.
WAIT_SLICE_S = 0.5
#: What a call waits for the supervisor unless told otherwise (CHIPD_TIMEOUT_MS).
DEFAULT_TIMEOUT_S = 5.0

_U32_MAX = 2**32 - 1
# the ranges of a submit's max_tokens and deadline_ms (protocol.md 8.4)
_MAX_TOKENS_MAX, _DEADLINE_MS_MAX = 1 << 20, 86_400_000
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

_C = TypeVar("_C", bound="_Closable")


def _seconds(seconds: Optional[float]) -> Optional[float]:
    """@seconds as a timeout: None (no limit) or a number of seconds, 0 or more (inf:
    no limit either); ValueError for a negative one or NaN, TypeError for a non-number,
    the same for every call that takes a timeout."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"timeout: expected seconds, got {type(seconds).__name__}")
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout {seconds}: not a number of seconds, 0 or more")
    return None if math.isinf(seconds) else seconds


def _ms(seconds: Optional[float]) -> int:
    """@seconds as a libchipd timeout in milliseconds (rounded up, clamped to u32)."""
    seconds = _seconds(seconds)
    if seconds is None:
        return _U32_MAX
    return min(_U32_MAX, math.ceil(seconds * 1000))


def _check_range(name: str, value: int, lo: int, hi: int) -> int:
    """@value when it is an int within lo..hi; else TypeError, or BadRequest as libchipd
    itself reports an out-of-range field before sending anything."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise BadRequest(f'"{name}": {value} out of range {lo}..{hi}', code="bad_request")
    return value


def _opt_u32(name: str, value: Optional[int], hi: int) -> int:
    """An optional field of a request, 1..@hi (protocol.md 8.4), None for none (sent as
    0, which the field's range leaves out: an explicit 0 is refused as the node
    refuses it)."""
    return 0 if value is None else _check_range(name, value, 1, hi)


def _grace_ms(grace: Optional[float]) -> int:
    """A drain or stop grace in milliseconds: 0 (the supervisor's default) for None."""
    return 0 if grace is None else _ms(grace)


@dataclass(frozen=True)
class Token:
    """One token of a stream: request id, sequence number (0, 1, ...), value, whether
    it is the last one of a completed request, CLOCK_MONOTONIC when published, the
    callable's payload bytes beside the token (its payload_bytes, at most 24; b""
    when it has none) and, on the final token, the bytes of output the request
    wrote (0 when it asked for none)."""

    request: int
    seq: int
    value: int
    final: bool
    timestamp_ns: int
    payload: bytes = b""
    out_len: int = 0


@dataclass(frozen=True)
class ChipStatus:
    """One worker as the status answer describes it; ``gpu`` is -1 for a sim chip."""

    chip: int
    state: str
    pid: int
    gpu: int
    restarts: int
    queued: int
    active: int


@dataclass(frozen=True)
class Status:
    """The supervisor's state ("ready", "draining", ...), pid, uptime and workers."""

    state: str
    pid: int
    uptime_ms: int
    chips: List[ChipStatus]


@dataclass(frozen=True)
class WorkloadParam:
    """One parameter a workload takes: its name (a keyword of ``submit``), the value
    it has when left out, the inclusive range a request's value must be in, and a
    one-line meaning."""

    key: str
    default: int
    min: int
    max: int
    doc: str


@dataclass(frozen=True)
class Workload:
    """A workload the supervisor runs: its name, what a step computes, its
    parameters in the workload's order, and its callable's own version (0: not
    said; docs/callables.md). The counts are the supervisor's since the callable
    was loaded (chipd's start, or its registration; docs/callables.md, "Counters"):
    its requests a worker admitted, of those the streams that ended final
    (``completed``), with an error other than cancelled (``failed``) or cancelled,
    and the tokens of the ended streams."""

    name: str
    doc: str
    params: List[WorkloadParam]
    version: int = 0
    chips: List[int] = field(default_factory=list)  # the chips it is loaded on
    active: int = 0  # its requests in flight
    requests: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    tokens: int = 0


class _Guard:
    """Counts the calls in flight on a libchipd handle so that close() frees it only
    once none is running, and refuses new calls after close()."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._cv = threading.Condition()
        self._busy = 0
        self.closed = False

    @contextlib.contextmanager
    def use(self) -> Iterator[None]:
        """Holds the handle open for the duration of one call; ValueError once closed."""
        with self._cv:
            if self.closed:
                raise ValueError(f"{self._what} is closed")
            self._busy += 1
        try:
            yield
        finally:
            with self._cv:
                self._busy -= 1
                if self._busy == 0:
                    self._cv.notify_all()

    def close(self) -> bool:
        """Marks the handle closed and waits for the calls in flight. Returns whether
        this call closed it (False: it was closed already)."""
        with self._cv:
            if self.closed:
                return False
            self.closed = True
            self._cv.wait_for(lambda: self._busy == 0)
            return True


class _Closable:
    """A context manager that closes on exit, and closes what was left open when
    garbage collected (a stream's ring or a connection's mapping is not leaked)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _call(fn, *args) -> None:
    """Calls libchipd's @fn with @args and a fresh error struct appended; raises the
    mapped ChipdError when it returns a negative errno."""
    err = _lib.ChipdErrorStruct()
    rc = fn(*args, ctypes.byref(err))
    if rc < 0:
        raise from_struct(rc, err)


class Stream(_Closable):
    """The tokens of one submitted request, in order.

    Iterating yields ``Token``s up to the final one, or raises the error the request
    ended with (``Cancelled``, ``WorkerLost``, ...). ``timeout`` bounds the wait for
    each token while iterating (seconds; None: no limit; ``CallTimeout`` when it
    passes). Once the stream has ended with an error, reading it again raises that
    error again.
    """

    def __init__(
        self,
        conn: "Connection",
        handle: int,
        request_id: int,
        timeout: Optional[float],
        output_cap: int = 0,
    ):
        self._conn = conn
        self._output_cap = output_cap
        self._output: Optional[bytes] = None
        self._handle = ctypes.c_void_p(handle)
        self._guard = _Guard(f"stream {request_id}")
        self._error: Optional[ChipdError] = None
        self._ended = False
        self.id = request_id
        self.timeout = timeout

    def __repr__(self) -> str:
        state = "closed" if self._guard.closed else "ended" if self._ended else "open"
        return f"<chipd.Stream id={self.id} {state}>"

    @property
    def output(self) -> Optional[bytes]:
        """The request's output once its final token was read (``submit(...,
        output=N)``; at most N bytes); None before, after an error, and for a request
        that asked for none."""
        return self._output

    @property
    def ended(self) -> bool:
        """Whether the last token or the stream's error has been read."""
        return self._ended

    def set_spin(self, microseconds: int) -> None:
        """How long each wait for a token spins before it sleeps (default 50 us). A
        reader that can spare a CPU and wants each token the moment it is published
        spins longer (a sleeping reader pays a futex wake, tens of microseconds)."""
        if not 0 <= microseconds <= 0xFFFFFFFF:
            raise ValueError("spin: 0 to 2**32-1 microseconds")
        with self._guard.use():
            _lib.lib().chipd_stream_set_spin(self._handle, microseconds)

    def __iter__(self) -> Iterator[Token]:
        return self

    def __next__(self) -> Token:
        tok = self.next(self.timeout)
        if tok is None:
            raise StopIteration
        return tok

    def next(self, timeout: Optional[float] = None) -> Optional[Token]:
        """The next token, waiting up to @timeout seconds (None: no limit); None once
        the stream has ended and everything was read. Raises the stream's error,
        ``CallTimeout`` when no token came in time."""
        timeout = _seconds(timeout)
        if self._error is not None:
            raise self._error
        deadline = None if timeout is None else time.monotonic() + timeout
        tok = _lib.TokenStruct()
        while True:
            left = WAIT_SLICE_S if deadline is None else max(0.0, deadline - time.monotonic())
            err = _lib.ChipdErrorStruct()
            with self._guard.use():
                rc = _lib.lib().chipd_stream_next(
                    self._handle, ctypes.byref(tok), _ms(min(left, WAIT_SLICE_S)), ctypes.byref(err)
                )
            if rc == 0:
                self._ended = bool(tok.final)
                if tok.final and self._output_cap:
                    self._output = self._read_output(tok.out_len)
                n = min(tok.payload_len, _lib.PAYLOAD_MAX)
                return Token(
                    tok.request,
                    tok.seq,
                    tok.value,
                    bool(tok.final),
                    tok.ts_ns,
                    bytes(tok.payload[:n]),
                    tok.out_len,
                )
            if rc == -errno.ENODATA:
                self._ended = True
                return None
            exc = from_struct(rc, err)
            if isinstance(exc, CallTimeout) and (deadline is None or time.monotonic() < deadline):
                continue  # one slice passed, the caller's time has not
            if not isinstance(exc, CallTimeout):
                self._ended = True
                self._error = exc
            elif timeout is not None:
                exc.message = f"request {self.id}: no token within {timeout:g} s"
            raise exc

    def _read_output(self, size: int) -> bytes:
        """The output the final record announced (@size bytes), copied out."""
        buf = ctypes.create_string_buffer(max(1, size))
        got = ctypes.c_uint32()
        with self._guard.use():
            _call(
                _lib.lib().chipd_stream_output,
                self._handle,
                ctypes.cast(buf, ctypes.c_void_p),
                max(1, size),
                ctypes.byref(got),
            )
        return buf.raw[: got.value]

    def wait(self, timeout: Optional[float] = None) -> List[Token]:
        """Reads the stream to its end within @timeout seconds (None: no limit) and
        returns the tokens read (those not read before). Raises the stream's error,
        or ``CallTimeout`` when it has not ended in time."""
        timeout = _seconds(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        out: List[Token] = []
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                tok = self.next(left)
            except CallTimeout as e:
                e.message = f"request {self.id}: not ended within {timeout:g} s"
                raise
            if tok is None:
                return out
            out.append(tok)

    def cancel(self, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
        """Asks the supervisor to cancel this request; the stream then ends with
        ``Cancelled``. Returns False when the request was no longer live (it ended)."""
        try:
            self._conn.cancel(self.id, timeout=timeout)
        except NotFound:
            return False
        return True

    def close(self, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Closes the stream. If its end has not been read, the request is cancelled
        whatever @timeout is (0 included): the ring is marked closed at once and the
        worker ends the request at its next round; a cancel call is also made, best
        effort, and what is left of @timeout (seconds) waits for the end, after which
        the id may be submitted again. Nothing reads the stream afterwards; the
        supervisor reuses its ring once the request ended. Closing twice is allowed."""
        if not self._guard.close():
            return
        self._conn._forget(self)
        try:
            with self._conn._guard.use():  # the stream's memory hangs off the connection
                _lib.lib().chipd_stream_close(self._handle, _ms(timeout))
        except ValueError:
            pass  # the connection went first (garbage cycles only): nothing left to free


class Connection(_Closable):
    """A connection to one chipd instance (its node region). Usable from several
    threads at once; see the module's documentation."""

    def __init__(self, handle: int) -> None:
        self._handle = ctypes.c_void_p(handle)
        self._guard = _Guard("connection")
        self._streams: "weakref.WeakSet[Stream]" = weakref.WeakSet()
        self._streams_lock = threading.Lock()
        self.instance: str = _lib.lib().chipd_instance(self._handle).decode()

    def __repr__(self) -> str:
        state = "closed" if self._guard.closed else "open"
        return f"<chipd.Connection instance={self.instance!r} {state}>"

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._guard.closed

    def ping(self, timeout: float = DEFAULT_TIMEOUT_S) -> int:
        """Asks the supervisor to answer; returns its pid."""
        pid = ctypes.c_uint32()
        with self._guard.use():
            _call(_lib.lib().chipd_ping, self._handle, _ms(timeout), ctypes.byref(pid))
        return pid.value

    def submit(
        self,
        workload: str,
        *,
        id: Optional[int] = None,
        chip: Optional[int] = None,
        max_tokens: Optional[int] = None,
        deadline_ms: Optional[int] = None,
        input: Optional[bytes] = None,
        output: int = 0,
        timeout: float = DEFAULT_TIMEOUT_S,
        params: Optional[Mapping[str, int]] = None,
        **kw_params: int,
    ) -> Stream:
        """Submits a request for @workload with integer parameters (at most 16) and
        returns the stream of its tokens. The parameters are @params (a mapping, for
        any key: one named like a keyword of this call, ``timeout`` or ``input``, can
        only be given there) and the further keywords, merged (a key in both raises
        ``TypeError``).

        @id: the request id (1..2^63-1, unique while live; None: the supervisor picks);
        @chip: the chip to run on (0..63; None: any); @max_tokens (1..1048576; None:
        the workload's default); @deadline_ms: the request fails with ``Timeout`` after
        this many milliseconds, 1..86400000 (None: no deadline); other values, 0
        included, raise ``BadRequest`` before anything is sent; @input: the request's input bytes (None or b"": none; at most
        the callable's input_max and 1 MiB: more than 1024 go through the connection's
        data area); @output: room for the request's output in bytes (0: none; at most
        1 MiB), read as ``stream.output`` once the stream ended; @timeout: seconds to
        wait for the supervisor's answer. The stream's per-token ``timeout`` starts as
        None (no limit).
        """
        both = set(params or ()) & set(kw_params)
        if both:
            key = sorted(both)[0]
            raise TypeError(f"submit() got parameter {key!r} twice: in params and as a keyword")
        params = {**(params or {}), **kw_params}
        keys = [k.encode() for k in params]  # kept alive for the call
        arr = (_lib.ParamStruct * max(1, len(params)))()
        if len(params) > _lib.MAX_PARAMS:
            raise BadRequest(f'"params": at most {_lib.MAX_PARAMS}', code="bad_request")
        for i, (key, (name, value)) in enumerate(zip(keys, params.items())):
            arr[i].key = key
            arr[i].value = _check_range(f"params.{name}", value, _I64_MIN, _I64_MAX)
        req = _lib.RequestStruct(
            workload=workload.encode(),
            params=arr,
            nparams=len(params),
            id=0 if id is None else _check_range("id", id, 1, _I64_MAX),
            chip=-1 if chip is None else _check_range("chip", chip, 0, _lib.MAX_CHIPS - 1),
            max_tokens=_opt_u32("max_tokens", max_tokens, _MAX_TOKENS_MAX),
            deadline_ms=_opt_u32("deadline_ms", deadline_ms, _DEADLINE_MS_MAX),
        )
        data = b"" if input is None else bytes(input)
        if len(data) > _lib.INPUT_MAX:
            raise BadRequest(f'"input": {len(data)} bytes, at most {_lib.INPUT_MAX}', code="bad_request")
        buf = ctypes.create_string_buffer(data, len(data)) if data else None  # kept alive
        req.input = ctypes.cast(buf, ctypes.c_void_p) if buf is not None else None
        req.input_len = len(data)
        req.output_cap = _check_range("output", output, 0, _lib.OUTPUT_MAX)
        rid = ctypes.c_uint64()
        handle = ctypes.c_void_p()
        with self._guard.use():
            _call(
                _lib.lib().chipd_submit,
                self._handle,
                ctypes.byref(req),
                _ms(timeout),
                ctypes.byref(rid),
                ctypes.byref(handle),
            )
            stream = Stream(self, handle.value, rid.value, None, req.output_cap)
            with self._streams_lock:
                self._streams.add(stream)
        return stream

    def cancel(self, id: int, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Cancels request @id (its stream ends with ``Cancelled``); ``NotFound`` when
        no such request is live."""
        with self._guard.use():
            rid = _check_range("id", id, 1, _I64_MAX)
            _call(_lib.lib().chipd_cancel, self._handle, rid, _ms(timeout))

    def status(self, timeout: float = DEFAULT_TIMEOUT_S) -> Status:
        """The supervisor's state and every worker's."""
        st = _lib.StatusStruct()
        lib = _lib.lib()
        with self._guard.use():
            _call(lib.chipd_status, self._handle, _ms(timeout), ctypes.byref(st))
        chips = [
            ChipStatus(
                chip=c.chip,
                state=lib.chipd_chip_state_name(c.state).decode(),
                pid=c.pid,
                gpu=c.gpu,
                restarts=c.restarts,
                queued=c.queued,
                active=c.active,
            )
            for c in st.chips[: min(st.nchips, _lib.MAX_CHIPS)]
        ]
        return Status(lib.chipd_sup_state_name(st.state).decode(), st.pid, st.uptime_ms, chips)

    def stats(self) -> Dict[str, int]:
        """Every counter and gauge of the node, read from shared memory without a round
        trip: {"supervisor.requests": n, "chip0.tokens": n, ...}."""
        cap = 256
        while True:
            out = (_lib.StatStruct * cap)()
            n = ctypes.c_uint32()
            err = _lib.ChipdErrorStruct()
            with self._guard.use():
                rc = _lib.lib().chipd_stats(
                    self._handle, out, cap, ctypes.byref(n), ctypes.byref(err)
                )
            if rc == -errno.ENOBUFS and n.value > cap:
                cap = n.value  # counters appeared since: read again with room for all
                continue
            if rc < 0:
                raise from_struct(rc, err)
            return {f"{s.block.decode()}.{s.name.decode()}": s.value for s in out[: n.value]}

    def drain(self, grace: Optional[float] = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Asks the supervisor to refuse new work, finish what it has within @grace
        seconds (None: its default; a request still running then ends cancelled), and
        then end its workers and exit, as stop() does (they differ in chipd's log
        line only). Later calls raise NotRunning once it is gone."""
        with self._guard.use():
            _call(_lib.lib().chipd_drain, self._handle, _grace_ms(grace), _ms(timeout))

    def stop(self, grace: Optional[float] = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Asks the supervisor to stop: drain (within @grace seconds; None: its
        default), end the workers, exit."""
        with self._guard.use():
            _call(_lib.lib().chipd_stop, self._handle, _grace_ms(grace), _ms(timeout))

    def trace(
        self, action: str, path: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> Tuple[int, int]:
        """Controls the workers' span recorders: @action "start", "stop" or "collect"
        (which needs @path, an absolute path where the supervisor writes Chrome trace
        JSON). Returns (spans written, spans dropped), zeros when the answer has none."""
        if action not in _lib.TRACE_ACTS:
            raise ValueError(f"trace action {action!r}: expected one of {sorted(_lib.TRACE_ACTS)}")
        events, dropped = ctypes.c_uint64(), ctypes.c_uint64()
        with self._guard.use():
            _call(
                _lib.lib().chipd_trace,
                self._handle,
                _lib.TRACE_ACTS[action],
                None if path is None else path.encode(),
                _ms(timeout),
                ctypes.byref(events),
                ctypes.byref(dropped),
            )
        return events.value, dropped.value

    def register(
        self, path: str, name: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> Tuple[str, int]:
        """Registers the callable at @path (absolute, a file of the node) on every chip
        under @name (None: its table's), all or nothing (docs/callables.md,
        "Registration"). Returns (its name, its version)."""
        out = ctypes.create_string_buffer(_lib.NAME_MAX)
        version = ctypes.c_uint32()
        with self._guard.use():
            _call(
                _lib.lib().chipd_register,
                self._handle,
                path.encode(),
                None if name is None else name.encode(),
                _ms(timeout),
                out,
                ctypes.byref(version),
            )
        return out.value.decode(), version.value

    def unregister(
        self, name: str, mode: str = "refuse", timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        """Unregisters the callable registered as @name from every chip. @mode: "refuse"
        (BadRequest while requests of it are in flight), "drain" (refuse new ones, wait
        for these) or "cancel" (cancel these, then unregister); CallTimeout when they did
        not end within @timeout seconds (it then stays registered), or when a chip did
        not unload it in time (it takes no new requests, and goes once unloaded: ask
        again, or close the connection). Returns within @timeout and the 2 s that giving
        a drain up may take past it."""
        if mode not in _lib.UNREGISTER_MODES:
            raise ValueError(
                f"unregister mode {mode!r}: expected one of {sorted(_lib.UNREGISTER_MODES)}"
            )
        with self._guard.use():
            _call(
                _lib.lib().chipd_unregister,
                self._handle,
                name.encode(),
                _lib.UNREGISTER_MODES[mode],
                _ms(timeout),
            )

    def workloads(self, timeout: float = DEFAULT_TIMEOUT_S) -> List[Workload]:
        """The workloads the supervisor runs and the parameters each takes (the table
        its workers check a submit against), in the supervisor's order."""
        cap = _lib.MAX_WORKLOADS
        while True:
            out = (_lib.WorkloadStruct * cap)()
            n = ctypes.c_uint32()
            err = _lib.ChipdErrorStruct()
            with self._guard.use():
                rc = _lib.lib().chipd_workloads(
                    self._handle, _ms(timeout), out, cap, ctypes.byref(n), ctypes.byref(err)
                )
            if rc == -errno.ENOBUFS and n.value > cap:
                cap = n.value  # the list grew past the room given: once more, with room
                continue
            if rc < 0:
                raise from_struct(rc, err)
            break
        return [
            Workload(
                w.name.decode(),
                w.doc.decode(),
                [
                    WorkloadParam(p.key.decode(), getattr(p, "def"), p.min, p.max, p.doc.decode())
                    for p in w.params[: min(w.nparams, _lib.MAX_PARAMS)]
                ],
                w.version,
                [c for c in range(64) if w.chips >> c & 1],
                w.active,
                w.requests,
                w.completed,
                w.failed,
                w.cancelled,
                w.tokens,
            )
            for w in out[: n.value]
        ]

    def _forget(self, stream: Stream) -> None:
        with self._streams_lock:
            self._streams.discard(stream)

    def close(self) -> None:
        """Closes the streams still open, then the connection. Closing twice is allowed."""
        with self._streams_lock:
            streams = list(self._streams)
        for s in streams:
            s.close()
        if self._guard.close():
            _lib.lib().chipd_close(self._handle)


def connect(instance: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT_S) -> Connection:
    """Connects to chipd @instance (None: $CHIPD_INSTANCE, then $SLURM_JOB_ID, then
    "default", as chipd and chipctl choose it), served by the user $CHIPD_USER names
    (unset: this process's own; chipd --allow-group), waiting up to @timeout seconds for
    the supervisor to answer the handshake (``CallTimeout`` after that). Raises
    ``NoSuchInstance`` when it does not exist, ``NotRunning`` when its supervisor is not
    running, ``ChipdError`` otherwise; OSError when libchipd cannot be loaded. A connection belongs to the
    process that made it (docs/protocol.md §9): a forked child, multiprocessing's
    included, calls connect() itself; its parent's connection is refused there with
    ``bad_request``."""
    handle = ctypes.c_void_p()
    name = None if instance is None else instance.encode()
    _call(_lib.lib().chipd_connect_timeout, name, _ms(timeout), ctypes.byref(handle))
    return Connection(handle.value)
