"""conn.register() and conn.unregister() against a real chipd: the built-in gemm.so
registered once more under another name runs on both chips and is listed with them;
unregister refuses while one of its requests runs, cancels it with "cancel", and an
unknown name is NotFound."""

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
