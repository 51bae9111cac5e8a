"""queue_full: a node that takes one live request at a time refuses a second one with
a retryable QueueFull, and takes it again once the first has ended."""

from __future__ import annotations

import time

import pytest

import chipd
from conftest import CALL_TIMEOUT_S

CHIPD_ARGS = ["--chips", "1", "--max-pending", "1"]


def test_second_request_is_queue_full_and_retryable(conn):
    with conn.submit("synthetic", tokens=100000, device_us=10000) as held:
        assert held.next(timeout=CALL_TIMEOUT_S) is not None
        with pytest.raises(chipd.QueueFull) as ei:
            conn.submit("synthetic", tokens=1, timeout=CALL_TIMEOUT_S)
        e = ei.value
        assert e.code == "queue_full" and e.retryable and isinstance(e, chipd.ChipdError)
        held.cancel(timeout=CALL_TIMEOUT_S)
        with pytest.raises(chipd.Cancelled):
            held.wait(timeout=CALL_TIMEOUT_S)
    # the retry succeeds once the held request is gone (the slot frees asynchronously)
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        try:
            toks = conn.submit("synthetic", tokens=2, device_us=100).wait(timeout=CALL_TIMEOUT_S)
            break
        except chipd.QueueFull:
            assert time.monotonic() < deadline, "still queue_full after the held request ended"
            time.sleep(0.02)
    assert [t.seq for t in toks] == [0, 1]
