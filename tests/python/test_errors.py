"""Error mapping: one exception class per protocol code, the local failures, and the
code names and retryability agreeing with libchipd's own tables. No chipd needed."""

from __future__ import annotations

import errno

import pytest

import chipd
from chipd import _lib
from chipd.errors import BY_CODE, from_struct


def _err(rc: int, code: int, **kw) -> _lib.ChipdErrorStruct:
    e = _lib.ChipdErrorStruct(errnum=rc, code=code, message=kw.pop("message", b"boom"))
    for k, v in kw.items():
        setattr(e, k, v)
    return e


def test_code_names_match_libchipd():
    lib = _lib.lib()
    for num, name in enumerate(_lib.CODE_NAMES):
        assert lib.chipd_code_name(num).decode() == name
    assert lib.chipd_code_name(len(_lib.CODE_NAMES)).decode() == "unknown"


def test_one_class_per_code():
    assert sorted(BY_CODE) == sorted(_lib.CODE_NAMES[1:])
    assert len(set(BY_CODE.values())) == len(BY_CODE)
    for name, cls in BY_CODE.items():
        assert issubclass(cls, chipd.ChipdError) and cls.CODE == name
        assert getattr(chipd, cls.__name__) is cls


@pytest.mark.parametrize("num", range(1, len(_lib.CODE_NAMES)))
def test_server_error_maps_by_code(num):
    lib = _lib.lib()
    retryable = lib.chipd_code_retryable(num)
    e = from_struct(
        -errno.EREMOTEIO,
        _err(-errno.EREMOTEIO, num, retryable=retryable, has_request=True, request=9,
             has_chip=True, chip=1),
    )
    name = _lib.CODE_NAMES[num]
    assert type(e) is BY_CODE[name]
    assert (e.code, e.retryable, e.request, e.chip) == (name, retryable, 9, 1)
    assert e.errno == errno.EREMOTEIO
    assert e.message == "boom" and name in str(e)


def test_retryable_codes():
    lib = _lib.lib()
    retryable = {n for i, n in enumerate(_lib.CODE_NAMES) if i and lib.chipd_code_retryable(i)}
    assert "queue_full" in retryable and "bad_request" not in retryable
    assert "node_lost" in retryable


@pytest.mark.parametrize(
    "num,code,cls",
    [
        (errno.ENOENT, 0, chipd.NoSuchInstance),
        (errno.ESTALE, 0, chipd.NotRunning),
        (errno.ESHUTDOWN, 0, chipd.NotRunning),
        (errno.EPIPE, 0, chipd.NotRunning),
        (errno.ETIMEDOUT, _lib.CODE_TIMEOUT, chipd.CallTimeout),
    ],
)
def test_local_failures(num, code, cls):
    e = from_struct(-num, _err(-num, code))
    assert type(e) is cls and e.code is None and e.errno == num
    assert e.request is None and e.chip is None


def test_local_failures_libchipd_ties_to_a_code():
    codes = {n: i for i, n in enumerate(_lib.CODE_NAMES)}
    # a stream nobody can end: the supervisor is gone, no live worker produces it
    e = from_struct(-errno.EPIPE, _err(-errno.EPIPE, codes["node_lost"], retryable=True))
    assert type(e) is chipd.NodeLost and e.retryable and e.code == "node_lost"
    # every mailbox slot busy
    e = from_struct(-errno.EAGAIN, _err(-errno.EAGAIN, codes["queue_full"], retryable=True))
    assert type(e) is chipd.QueueFull and e.retryable
    # a malformed request refused before sending
    e = from_struct(-errno.EINVAL, _err(-errno.EINVAL, codes["bad_request"]))
    assert type(e) is chipd.BadRequest
    # no code at all: the base class
    e = from_struct(-errno.EACCES, _err(-errno.EACCES, 0))
    assert type(e) is chipd.ChipdError and e.code is None and e.errno == errno.EACCES


def test_library_lookup_order(monkeypatch):
    monkeypatch.setenv("CHIPD_LIB", "/nonexistent/libchipd.so.0")
    assert _lib.candidates() == ["/nonexistent/libchipd.so.0"]
    monkeypatch.delenv("CHIPD_LIB")
    assert _lib.candidates()[-1] == _lib.SONAME
