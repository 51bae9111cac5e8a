"""The exceptions of the chipd client: one class per protocol error code, plus the
local failures (no such instance, supervisor not running, call timed out).

Every exception is a ``ChipdError`` carrying what libchipd's ``struct chipd_error``
said: ``code`` (the protocol code's name, None for a local failure), ``retryable``,
``request`` and ``chip`` (None when the failure names none), ``message`` and
``errno`` (the positive errno of the failing libchipd call; 0 when the Python layer
refused a value itself, before calling libchipd: an ``id`` or ``output`` out of range).
"""

from __future__ import annotations

import errno as _errno
from typing import Dict, Optional, Type

from . import _lib


class ChipdError(Exception):
    """A failed libchipd call, local or from the supervisor's error envelope."""

    #: The protocol code this class stands for (None: a local failure).
    CODE: Optional[str] = None

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        retryable: bool = False,
        request: Optional[int] = None,
        chip: Optional[int] = None,
        errno: int = 0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.request = request
        self.chip = chip
        self.errno = errno

    def __str__(self) -> str:
        tag = self.code or (_errno.errorcode.get(self.errno, "") if self.errno else "")
        return f"{tag}: {self.message}" if tag else self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, code={self.code!r}, "
            f"retryable={self.retryable}, request={self.request}, chip={self.chip}, "
            f"errno={self.errno})"
        )


class BadRequest(ChipdError):
    """The request is malformed or names an unknown workload or parameter."""

    CODE = "bad_request"


class UnsupportedVersion(ChipdError):
    """The supervisor does not speak this message version."""

    CODE = "unsupported_version"


class TooLarge(ChipdError):
    """The request exceeds a size limit."""

    CODE = "too_large"


class QueueFull(ChipdError):
    """No room for the request now; retrying later may succeed."""

    CODE = "queue_full"


class NoCapacity(ChipdError):
    """No chip can take the request now."""

    CODE = "no_capacity"


class DuplicateId(ChipdError):
    """A live request already has this id."""

    CODE = "duplicate_id"


class NotFound(ChipdError):
    """No such request (cancel of an unknown id, ...)."""

    CODE = "not_found"


class Cancelled(ChipdError):
    """The request was cancelled."""

    CODE = "cancelled"


class Draining(ChipdError):
    """The supervisor is draining and refuses new work."""

    CODE = "draining"


class WorkerLost(ChipdError):
    """The worker running the request died."""

    CODE = "worker_lost"


class DeviceError(ChipdError):
    """The device failed the request."""

    CODE = "device_error"


class Timeout(ChipdError):
    """The request ran past its deadline (``deadline_ms``)."""

    CODE = "timeout"


class Internal(ChipdError):
    """A bug or an unexpected failure inside chipd."""

    CODE = "internal"


class NodeLost(ChipdError):
    """The node's supervisor is gone; retry once the node is back."""

    CODE = "node_lost"


class NotRunning(ChipdError):
    """The supervisor is not running (it stopped, died, or left the region)."""


class NoSuchInstance(ChipdError):
    """No chipd instance of that name exists on this node."""


class CallTimeout(ChipdError):
    """A call got no answer (or a stream no token) within the caller's timeout."""


#: Protocol code name -> exception class, one-to-one.
BY_CODE: Dict[str, Type[ChipdError]] = {
    cls.CODE: cls
    for cls in (
        BadRequest,
        UnsupportedVersion,
        TooLarge,
        QueueFull,
        NoCapacity,
        DuplicateId,
        NotFound,
        Cancelled,
        Draining,
        WorkerLost,
        DeviceError,
        Timeout,
        Internal,
        NodeLost,
    )
}

#: Local failures by errno, applied when libchipd gave no more specific protocol code.
BY_ERRNO: Dict[int, Type[ChipdError]] = {
    _errno.ENOENT: NoSuchInstance,
    _errno.ESTALE: NotRunning,
    _errno.ESHUTDOWN: NotRunning,
    _errno.EPIPE: NotRunning,
    _errno.ETIMEDOUT: CallTimeout,
}


def from_struct(rc: int, err: "_lib.ChipdErrorStruct") -> ChipdError:
    """The exception for a call that returned @rc (< 0) and filled @err.

    The server's error envelope (-EREMOTEIO) maps by its code. A local failure maps by
    errno (NoSuchInstance, NotRunning, CallTimeout, code None) unless libchipd tied it
    to a more specific code: -EPIPE from a stream that nobody can end any more (the
    supervisor is gone, and no live worker produces it) is NodeLost,
    -EAGAIN with every mailbox slot busy is QueueFull, a malformed request refused
    before sending (-EINVAL) is BadRequest.
    """
    num = -rc
    code_num = err.code if 0 <= err.code < len(_lib.CODE_NAMES) else _lib.CODE_OK
    code = _lib.CODE_NAMES[code_num] if code_num != _lib.CODE_OK else None
    message = err.message.decode("utf-8", "replace") or _errno.errorcode.get(num, str(num))
    kw = dict(
        retryable=bool(err.retryable),
        request=int(err.request) if err.has_request else None,
        chip=int(err.chip) if err.has_chip else None,
        errno=num,
    )
    local = BY_ERRNO.get(num)
    vague = code_num in (_lib.CODE_OK, _lib.CODE_TIMEOUT)  # says no more than the errno
    if num != _errno.EREMOTEIO and local is not None and vague:
        return local(message, code=None, **kw)
    if code is not None:
        return BY_CODE[code](message, code=code, **kw)
    return ChipdError(message, code=None, **kw)
