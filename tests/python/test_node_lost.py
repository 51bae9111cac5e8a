"""node_lost: when the node's supervisor dies (its workers die with it), a reader of
an open stream gets NodeLost (retryable) within a couple of seconds, whatever timeout
it waits with, instead of CallTimeout at its deadline."""

from __future__ import annotations

import os
import time

import pytest

import chipd
from conftest import CALL_TIMEOUT_S, STOP_TIMEOUT_S, Node

#: How soon after the kill the stream must end (the protocol's bound is ~20 ms).
LOST_WITHIN_S = 3.0


def test_dead_node_ends_stream_with_node_lost(tmp_path):
    binary = os.environ.get("CHIPD_BIN")
    if not binary:
        pytest.skip("CHIPD_BIN (the chipd supervisor) is not set")
    n = Node(binary, ["--chips", "1"], tmp_path, "node_lost")
    try:
        with n.connect() as conn:
            stream = conn.submit("synthetic", tokens=100000, device_us=1000)
            assert stream.next(timeout=CALL_TIMEOUT_S) is not None
            n.proc.kill()
            n.proc.wait(timeout=STOP_TIMEOUT_S)
            t0 = time.monotonic()
            with pytest.raises(chipd.NodeLost) as ei:
                stream.wait(timeout=60)
            assert time.monotonic() - t0 < LOST_WITHIN_S
            e = ei.value
            assert e.code == "node_lost" and e.retryable and e.request == stream.id
            stream.close(timeout=0)
    finally:
        if n.proc.poll() is None:
            n.proc.kill()
            n.proc.wait(timeout=STOP_TIMEOUT_S)
        # a killed supervisor leaves its region (and pid file) behind, as a crash does
        n.region.unlink(missing_ok=True)
        (tmp_path / f"{n.instance}.pid").unlink(missing_ok=True)
