"""Data in and out of a callable through the Python client (docs/callables.md, "Data in
and out"), with the tests' "echo" callable (tests/callables/data_callable.c)
registered: every token carries its 24 payload bytes as ``Token.payload``, and
``submit(..., input=bytes)`` gives the request its input (inline or through the
data area), and ``submit(..., output=N)`` its output as ``stream.output``."""

from __future__ import annotations

import os
import shutil

import pytest

import chipd
from conftest import CALL_TIMEOUT_S


@pytest.fixture
def echo(conn, tmp_path):
    """Registers echo (copied into a private directory, mode 0755) and unregisters it."""
    src = os.path.join(os.environ["CHIPD_TEST_CALLABLES_DIR"], "dc_echo.so")
    dst = tmp_path / "dc_echo.so"
    shutil.copyfile(src, dst)
    os.chmod(tmp_path, 0o700)
    os.chmod(dst, 0o755)
    name, _ = conn.register(str(dst), name="echo_py", timeout=CALL_TIMEOUT_S)
    yield name
    conn.unregister(name, timeout=CALL_TIMEOUT_S)


def _payload(data: bytes, step: int) -> bytes:
    """echo's payload of @step for input @data."""
    return bytes(((data[(step + i) % len(data)] if data else 0) + step + i) % 256 for i in range(24))


def test_payload(conn, echo):
    with conn.submit(echo, tokens=5, timeout=CALL_TIMEOUT_S) as s:
        tokens = s.wait(timeout=CALL_TIMEOUT_S)
    assert [t.seq for t in tokens] == list(range(5))
    assert [t.value for t in tokens] == list(range(5))
    assert [t.payload for t in tokens] == [_payload(b"", k) for k in range(5)]
    assert all(t.out_len == 0 for t in tokens)
    # a built-in declares no payload
    with conn.submit("synthetic", tokens=2, timeout=CALL_TIMEOUT_S) as s:
        assert [t.payload for t in s.wait(timeout=CALL_TIMEOUT_S)] == [b"", b""]


def test_inline_input(conn, echo):
    data = bytes(range(200))
    with conn.submit(echo, tokens=3, input=data, timeout=CALL_TIMEOUT_S) as s:
        tokens = s.wait(timeout=CALL_TIMEOUT_S)
    assert [t.value for t in tokens] == [sum(data) + k for k in range(3)]
    assert [t.payload for t in tokens] == [_payload(data, k) for k in range(3)]
    # a built-in takes none: refused naming both numbers
    with pytest.raises(chipd.BadRequest) as ei:
        conn.submit("synthetic", tokens=1, input=b"abc", timeout=CALL_TIMEOUT_S)
    assert "takes no input (input_max 0), got 3 bytes" in ei.value.message


def test_data_area_input_and_output(conn, echo):
    """Input over 1024 bytes goes through the data area; the output (the input
    reversed) is ``stream.output`` once the final token was read."""
    data = bytes((i * 7) % 256 for i in range(5000))
    with conn.submit(echo, tokens=2, input=data, output=8192, timeout=CALL_TIMEOUT_S) as s:
        assert s.output is None
        tokens = s.wait(timeout=CALL_TIMEOUT_S)
        assert [t.value for t in tokens] == [sum(data) + k for k in range(2)]
        assert tokens[-1].out_len == len(data)
        assert s.output == data[::-1]
    # no room asked for: no output
    with conn.submit(echo, tokens=1, input=data[:10], timeout=CALL_TIMEOUT_S) as s:
        s.wait(timeout=CALL_TIMEOUT_S)
        assert s.output is None
    # an output larger than its room ends the stream too_large
    with conn.submit(echo, tokens=1, input=data, output=100, timeout=CALL_TIMEOUT_S) as s:
        with pytest.raises(chipd.ChipdError) as ei:
            s.wait(timeout=CALL_TIMEOUT_S)
        assert ei.value.code == "too_large" and s.output is None
    with pytest.raises(chipd.BadRequest):
        conn.submit(echo, input=data, output=(1 << 20) + 1, timeout=CALL_TIMEOUT_S)
