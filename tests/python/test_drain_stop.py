"""drain and stop through the client: a draining node refuses new work with Draining,
and stop() makes the supervisor exit 0 (the fixture's SIGTERM then finds it gone)."""

from __future__ import annotations

import pytest

import chipd
from conftest import CALL_TIMEOUT_S, STOP_TIMEOUT_S

CHIPD_ARGS = ["--chips", "1"]


def test_drain_refuses_new_work_then_stop_exits(node, conn):
    conn.drain(grace=1.0, timeout=CALL_TIMEOUT_S)
    with pytest.raises(chipd.Draining) as ei:
        conn.submit("synthetic", tokens=1, timeout=CALL_TIMEOUT_S)
    assert ei.value.code == "draining"
    assert conn.status(timeout=CALL_TIMEOUT_S).state == "draining"
    conn.stop(grace=1.0, timeout=CALL_TIMEOUT_S)
    assert node.proc.wait(timeout=STOP_TIMEOUT_S) == 0
    assert not node.region.exists()
