"""worker_lost: killing the worker that runs a request ends its stream with WorkerLost
within a couple of seconds, and the supervisor restarts the worker."""

from __future__ import annotations

import os
import signal
import time

import pytest

import chipd
from conftest import CALL_TIMEOUT_S

CHIPD_ARGS = ["--chips", "2"]
#: How soon after the kill the stream must end ("within a couple of seconds").
LOST_WITHIN_S = 3.0


def test_killed_worker_ends_stream_with_worker_lost(conn):
    with conn.submit("synthetic", chip=0, tokens=100000, device_us=10000) as stream:
        assert stream.next(timeout=CALL_TIMEOUT_S) is not None
        pid = conn.status(timeout=CALL_TIMEOUT_S).chips[0].pid
        assert pid > 0
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(chipd.WorkerLost) as ei:
            stream.wait(timeout=LOST_WITHIN_S)
        assert time.monotonic() - t0 < LOST_WITHIN_S
        e = ei.value
        assert e.code == "worker_lost" and e.request == stream.id

    # the supervisor starts a new worker for chip 0
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        chip = conn.status(timeout=CALL_TIMEOUT_S).chips[0]
        if chip.state == "ready" and chip.pid not in (0, pid):
            break
        assert time.monotonic() < deadline, f"chip 0 not restarted: {chip}"
        time.sleep(0.05)
    assert chip.restarts >= 1
    toks = conn.submit("synthetic", chip=0, tokens=2, device_us=100).wait(timeout=CALL_TIMEOUT_S)
    assert [t.seq for t in toks] == [0, 1]
