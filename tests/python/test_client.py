"""The client against a real chipd with two sim chips: streams, cancel, errors,
status, stats, discovery, threads."""

from __future__ import annotations

import errno
import math
import threading
import time

import pytest

import chipd
from conftest import CALL_TIMEOUT_S

# A request that runs far longer than any test (1000 s), cancelled or closed by it.
LONG = dict(tokens=100000, device_us=10000)


def test_submit_streams_tokens_in_order(conn):
    stream = conn.submit("synthetic", tokens=8, device_us=100, seed=7)
    with stream:
        toks = stream.wait(timeout=CALL_TIMEOUT_S)
    assert [t.seq for t in toks] == list(range(8))
    assert [t.final for t in toks] == [False] * 7 + [True]
    assert all(t.request == stream.id for t in toks)
    assert all(a.timestamp_ns <= b.timestamp_ns for a, b in zip(toks, toks[1:]))
    assert stream.ended
    # tokens depend only on the seed and the step
    again = conn.submit("synthetic", tokens=8, device_us=100, seed=7).wait(timeout=CALL_TIMEOUT_S)
    assert [t.value for t in again] == [t.value for t in toks]


def test_iteration_ends_after_final(conn):
    with conn.submit("synthetic", tokens=5, device_us=100) as stream:
        stream.timeout = CALL_TIMEOUT_S
        seqs = [t.seq for t in stream]
        assert seqs == list(range(5))
        assert stream.next(timeout=CALL_TIMEOUT_S) is None
        assert stream.wait(timeout=CALL_TIMEOUT_S) == []


def test_spinning_reader_reads_every_token(conn):
    # a reader that never sleeps (spin up to the whole wait) gets the same stream
    with conn.submit("synthetic", tokens=6, device_us=200, seed=3) as stream:
        stream.set_spin(int(CALL_TIMEOUT_S * 1e6))
        toks = stream.wait(timeout=CALL_TIMEOUT_S)
    assert [t.seq for t in toks] == list(range(6))
    assert toks[-1].final
    with pytest.raises(ValueError):
        stream.set_spin(-1)


def test_explicit_id_chip_and_max_tokens(conn):
    with conn.submit("synthetic", id=4242, chip=1, max_tokens=3, tokens=3, device_us=100) as s:
        assert s.id == 4242
        assert [t.request for t in s.wait(timeout=CALL_TIMEOUT_S)] == [4242] * 3


def test_params_mapping_takes_any_key(conn):
    # a mapping merged with the keywords: the same request as keywords alone
    with conn.submit("synthetic", params={"tokens": 3, "seed": 7}, device_us=100) as s:
        got = [t.value for t in s.wait(timeout=CALL_TIMEOUT_S)]
    want = conn.submit("synthetic", tokens=3, seed=7, device_us=100).wait(timeout=CALL_TIMEOUT_S)
    assert got == [t.value for t in want]
    # a key named like one of submit's own keywords goes to the callable from there
    with pytest.raises(chipd.BadRequest, match="unknown parameter 'timeout'"):
        conn.submit("synthetic", params={"timeout": 5}, timeout=CALL_TIMEOUT_S)
    with pytest.raises(TypeError, match="'tokens' twice"):
        conn.submit("synthetic", params={"tokens": 3}, tokens=4)


def test_cancel_ends_stream_with_cancelled(conn):
    with conn.submit("synthetic", **LONG) as stream:
        first = stream.next(timeout=CALL_TIMEOUT_S)
        assert first is not None and first.seq == 0
        assert stream.cancel(timeout=CALL_TIMEOUT_S)
        with pytest.raises(chipd.Cancelled) as ei:
            stream.wait(timeout=CALL_TIMEOUT_S)
        e = ei.value
        assert (e.code, e.request, e.retryable) == ("cancelled", stream.id, False)
        assert e.errno == errno.EREMOTEIO and e.chip is not None
        with pytest.raises(chipd.Cancelled):  # the error stays
            stream.next(timeout=CALL_TIMEOUT_S)
        assert not stream.cancel(timeout=CALL_TIMEOUT_S)  # no longer live


def test_close_cancels_a_running_request(conn):
    stream = conn.submit("synthetic", **LONG)
    assert stream.next(timeout=CALL_TIMEOUT_S) is not None
    stream.close(timeout=CALL_TIMEOUT_S)
    with pytest.raises(ValueError):
        stream.next(timeout=CALL_TIMEOUT_S)
    with pytest.raises(chipd.NotFound):
        conn.cancel(stream.id, timeout=CALL_TIMEOUT_S)


def test_timeouts_checked_alike(conn):
    # every call that takes a timeout: a negative one or NaN is a ValueError before
    # anything waits, inf is no limit
    assert conn.ping(timeout=math.inf) > 0
    with conn.submit("synthetic", tokens=1, device_us=100, timeout=math.inf) as stream:
        for bad in (-1, math.nan):
            with pytest.raises(ValueError, match="not a number of seconds"):
                stream.next(timeout=bad)
            with pytest.raises(ValueError, match="not a number of seconds"):
                stream.wait(timeout=bad)
            with pytest.raises(ValueError, match="not a number of seconds"):
                conn.ping(timeout=bad)
        assert len(stream.wait(timeout=math.inf)) == 1


def test_no_token_in_time_is_call_timeout(conn):
    with conn.submit("synthetic", tokens=1, device_us=1000000) as stream:
        t0 = time.monotonic()
        with pytest.raises(chipd.CallTimeout) as ei:
            stream.next(timeout=0.05)
        assert time.monotonic() - t0 < CALL_TIMEOUT_S
        assert ei.value.code is None and ei.value.errno == errno.ETIMEDOUT
        assert not stream.ended  # a timeout does not end the stream


def test_unknown_workload_is_bad_request(conn):
    with pytest.raises(chipd.BadRequest) as ei:
        conn.submit("no_such_workload", timeout=CALL_TIMEOUT_S)
    e = ei.value
    assert e.code == "bad_request" and not e.retryable and e.errno == errno.EREMOTEIO
    assert "no_such_workload" in e.message or "wl" in e.message


def test_unknown_parameter_is_bad_request(conn):
    with pytest.raises(chipd.BadRequest):
        conn.submit("synthetic", no_such_param=1, timeout=CALL_TIMEOUT_S)


def test_malformed_request_refused_before_sending(conn):
    too_many = {f"p{i}": i for i in range(17)}
    with pytest.raises(chipd.BadRequest):
        conn.submit("synthetic", **too_many)
    with pytest.raises(chipd.BadRequest):
        conn.submit("synthetic", id=2**63)
    with pytest.raises(TypeError):
        conn.submit("synthetic", tokens=1.5)
    # None is "none"; 0 and the rest outside protocol.md's ranges are refused as the
    # node refuses them, in its words
    for key, value, rng in [("max_tokens", 0, "1..1048576"), ("deadline_ms", 0, "1..86400000"),
                            ("max_tokens", 1048577, "1..1048576"), ("chip", -1, "0..63"),
                            ("chip", 64, "0..63")]:
        with pytest.raises(chipd.BadRequest, match=f'"{key}": {value} out of range {rng}'):
            conn.submit("synthetic", **{key: value})
    with pytest.raises(chipd.BadRequest, match=r'"wl": length 32 out of range 1\.\.31'):
        conn.submit("w" * 32)


def test_duplicate_id(conn):
    with conn.submit("synthetic", id=777, **LONG) as s:
        with pytest.raises(chipd.DuplicateId) as ei:
            conn.submit("synthetic", id=777, tokens=1, timeout=CALL_TIMEOUT_S)
        assert ei.value.code == "duplicate_id"
        s.cancel(timeout=CALL_TIMEOUT_S)


def test_cancel_unknown_is_not_found(conn):
    with pytest.raises(chipd.NotFound) as ei:
        conn.cancel(2**62, timeout=CALL_TIMEOUT_S)
    assert ei.value.code == "not_found"


def test_status_ping_stats(conn):
    st = conn.status(timeout=CALL_TIMEOUT_S)
    assert st.state == "ready" and st.pid > 0 and st.uptime_ms >= 0
    assert [c.chip for c in st.chips] == [0, 1]
    assert all(c.state == "ready" and c.pid > 0 and c.gpu == -1 for c in st.chips)
    assert conn.ping(timeout=CALL_TIMEOUT_S) == st.pid
    conn.submit("synthetic", tokens=2, device_us=100).wait(timeout=CALL_TIMEOUT_S)
    stats = conn.stats()
    assert stats["supervisor.requests"] >= 1
    assert stats["chip0.tokens"] + stats["chip1.tokens"] >= 2
    assert all(isinstance(v, int) for v in stats.values())


def test_connect_discovers_instance_from_environment(node, monkeypatch):
    monkeypatch.setenv("CHIPD_INSTANCE", node.instance)
    monkeypatch.setenv("SLURM_JOB_ID", "py-not-this-one")
    with chipd.connect() as c:
        assert c.instance == node.instance
        assert c.ping(timeout=CALL_TIMEOUT_S) > 0
    monkeypatch.delenv("CHIPD_INSTANCE")
    monkeypatch.setenv("SLURM_JOB_ID", node.instance)
    with chipd.connect() as c:
        assert c.instance == node.instance


def test_missing_instance_is_no_such_instance():
    with pytest.raises(chipd.NoSuchInstance) as ei:
        chipd.connect("py-no-such-instance")
    e = ei.value
    assert e.code is None and e.errno == errno.ENOENT and isinstance(e, chipd.ChipdError)


def test_closed_connection_refuses_calls(node):
    c = node.connect()
    s = c.submit("synthetic", **LONG)
    c.close()  # closes (and cancels) the open stream first
    c.close()
    with pytest.raises(ValueError):
        c.ping()
    with pytest.raises(ValueError):
        s.next(timeout=CALL_TIMEOUT_S)


def test_eight_threads_share_one_connection(conn):
    errors = []
    counts = [0] * 8

    def work(i):
        try:
            for j in range(5):
                with conn.submit("synthetic", tokens=16, device_us=100, seed=i * 10 + j) as s:
                    toks = s.wait(timeout=CALL_TIMEOUT_S * 3)
                assert [t.seq for t in toks] == list(range(16)) and toks[-1].final
                assert all(t.request == s.id for t in toks)
                counts[i] += len(toks)
                conn.status(timeout=CALL_TIMEOUT_S)
                conn.stats()
        except Exception as e:  # reported below, with the thread
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    assert errors == []
    assert counts == [80] * 8


def test_blocked_reader_does_not_hold_the_gil(conn):
    """ctypes releases the GIL in libchipd calls: while one thread sits in a single
    chipd_stream_next waiting for a token (about 2 s away), another thread's calls
    run and finish. Were the GIL held, the pings would only run after the read."""
    import ctypes

    from chipd import _lib

    with conn.submit("synthetic", tokens=1, host_us=1000000, device_us=1000000) as slow:
        started, result = threading.Event(), []

        def read():
            tok, err = _lib.TokenStruct(), _lib.ChipdErrorStruct()
            started.set()
            result.append(_lib.lib().chipd_stream_next(
                slow._handle, ctypes.byref(tok), int(CALL_TIMEOUT_S * 1000), ctypes.byref(err)))

        reader = threading.Thread(target=read)
        reader.start()
        assert started.wait(timeout=CALL_TIMEOUT_S)
        time.sleep(0.2)  # lets the reader into the call (a GIL holder would keep us out)
        for _ in range(20):
            conn.ping(timeout=CALL_TIMEOUT_S)
        assert reader.is_alive() and not result, "the pings waited for the reader"
        reader.join(timeout=CALL_TIMEOUT_S)
        assert result == [0]
