"""conn.register() and conn.unregister() against a real chipd: the built-in gemm.so
registered once more under another name runs on both chips and is listed with them;
unregister refuses while one of its requests runs, cancels it with "cancel", and an
unknown name is NotFound; a registered callable's counts start at 0 and go with it."""

from __future__ import annotations

import os

import pytest

import chipd
from conftest import CALL_TIMEOUT_S


def _gemm_so() -> str:
    bindir = os.path.dirname(os.path.abspath(os.environ["CHIPD_BIN"]))
    return os.path.join(os.path.dirname(bindir), "callables", "gemm.so")


def test_register_run_unregister(conn):
    name, version = conn.register(_gemm_so(), name="gemm_py", timeout=CALL_TIMEOUT_S)
    assert (name, version) == ("gemm_py", 1)
    listed = {w.name: w for w in conn.workloads(timeout=CALL_TIMEOUT_S)}
    assert listed["gemm_py"].chips == [0, 1] and listed["gemm_py"].active == 0
    for chip in (0, 1):
        with conn.submit("gemm_py", chip=chip, m=16, tokens=2, timeout=CALL_TIMEOUT_S) as s:
            tokens = s.wait(timeout=CALL_TIMEOUT_S)
            assert len(tokens) == 2 and tokens[-1].final
    # one in flight: refused by default, cancelled with "cancel"
    s = conn.submit("gemm_py", m=256, k=256, chain=8, tokens=65536, timeout=CALL_TIMEOUT_S)
    with pytest.raises(chipd.BadRequest) as ei:
        conn.unregister("gemm_py", timeout=CALL_TIMEOUT_S)
    assert "in flight" in ei.value.message
    conn.unregister("gemm_py", mode="cancel", timeout=20)
    with pytest.raises(chipd.Cancelled):
        s.wait(timeout=20)
    s.close()
    assert "gemm_py" not in {w.name for w in conn.workloads(timeout=CALL_TIMEOUT_S)}
    with pytest.raises(chipd.NotFound):
        conn.unregister("gemm_py", timeout=CALL_TIMEOUT_S)
    with pytest.raises(ValueError):
        conn.unregister("gemm", mode="later")


def _counts(conn, name):
    w = next(w for w in conn.workloads(timeout=CALL_TIMEOUT_S) if w.name == name)
    return (w.requests, w.completed, w.failed, w.cancelled, w.tokens)


def test_counts_start_at_registration(conn):
    """A registered callable's counts (docs/callables.md, "Counters": requests,
    completed, failed, cancelled, tokens) start at 0, count each request once by how it
    ended, and go with its unregistration: the name registered again starts at 0."""
    conn.register(_gemm_so(), name="gemm_counted", timeout=CALL_TIMEOUT_S)
    assert _counts(conn, "gemm_counted") == (0, 0, 0, 0, 0)
    with conn.submit("gemm_counted", m=16, tokens=3, timeout=CALL_TIMEOUT_S) as s:
        assert len(s.wait(timeout=CALL_TIMEOUT_S)) == 3
    s = conn.submit("gemm_counted", m=256, k=256, chain=8, tokens=65536, timeout=CALL_TIMEOUT_S)
    read = 0
    while read < 2:
        read += s.next(timeout=CALL_TIMEOUT_S) is not None
    assert s.cancel(timeout=CALL_TIMEOUT_S)
    with pytest.raises(chipd.Cancelled):  # the tokens on their way, then the end
        while s.next(timeout=20) is not None:
            read += 1
    s.close()
    assert _counts(conn, "gemm_counted") == (2, 1, 0, 1, 3 + read)
    with pytest.raises(chipd.BadRequest):
        conn.submit("gemm_counted", m=0, timeout=CALL_TIMEOUT_S)
    assert _counts(conn, "gemm_counted")[0] == 2
    conn.unregister("gemm_counted", timeout=CALL_TIMEOUT_S)
    conn.register(_gemm_so(), name="gemm_counted", timeout=CALL_TIMEOUT_S)
    assert _counts(conn, "gemm_counted") == (0, 0, 0, 0, 0)
    conn.unregister("gemm_counted", timeout=CALL_TIMEOUT_S)
