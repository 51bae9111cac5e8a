"""conn.workloads() against a real chipd: every built-in workload with its parameters,
each a valid request as listed, a value outside a listed range refused, and the counts
of each workload."""

from __future__ import annotations

import pytest

import chipd
from conftest import CALL_TIMEOUT_S

CHIPD_ARGS = ["--chips", "1"]


def test_lists_every_workload_with_its_parameters(conn):
    wls = conn.workloads(timeout=CALL_TIMEOUT_S)
    by_name = {w.name: w for w in wls}
    assert len(by_name) == len(wls), "a workload listed twice"
    assert {"paged_attention", "gemm", "synthetic"} <= set(by_name)
    for w in wls:
        assert isinstance(w, chipd.Workload) and w.doc and w.params, w
        keys = [p.key for p in w.params]
        assert len(set(keys)) == len(keys), f"{w.name}: a parameter listed twice"
        for p in w.params:
            assert isinstance(p, chipd.WorkloadParam)
            assert p.min <= p.default <= p.max and p.doc, p
    synthetic = {p.key: p for p in by_name["synthetic"].params}
    assert synthetic["tokens"].default == 16 and synthetic["tokens"].min == 1
    assert synthetic["fail_step"].default == -1


def test_listed_defaults_are_accepted_and_ranges_enforced(conn):
    for w in conn.workloads(timeout=CALL_TIMEOUT_S):
        params = {p.key: p.default for p in w.params}
        with conn.submit(w.name, max_tokens=1, timeout=CALL_TIMEOUT_S, **params) as s:
            tokens = s.wait(timeout=CALL_TIMEOUT_S)
            assert len(tokens) == 1 and tokens[-1].final, (w.name, tokens)
    gemm = {p.key: p for p in next(w for w in conn.workloads() if w.name == "gemm").params}
    with pytest.raises(chipd.BadRequest) as ei:
        conn.submit("gemm", chain=gemm["chain"].max + 1, timeout=CALL_TIMEOUT_S)
    assert "chain" in ei.value.message and "outside" in ei.value.message


def test_counts_each_request_once(conn):
    """Each workload's counts (docs/callables.md, "Counters"): a request admitted
    counts once in ``requests`` and once by how its stream ended, with its tokens; a
    submit refused counts nowhere."""

    def counts():
        w = next(w for w in conn.workloads(timeout=CALL_TIMEOUT_S) if w.name == "synthetic")
        return (w.requests, w.completed, w.failed, w.cancelled, w.tokens)

    before = counts()
    with conn.submit("synthetic", tokens=4, device_us=0, timeout=CALL_TIMEOUT_S) as s:
        assert len(s.wait(timeout=CALL_TIMEOUT_S)) == 4
    broken = {"tokens": 5, "device_us": 0, "fail_step": 3}
    with conn.submit("synthetic", timeout=CALL_TIMEOUT_S, **broken) as s:
        with pytest.raises(chipd.DeviceError):  # after 3 tokens
            s.wait(timeout=CALL_TIMEOUT_S)
    with pytest.raises(chipd.BadRequest):
        conn.submit("synthetic", tokens=0, timeout=CALL_TIMEOUT_S)
    assert tuple(a - b for a, b in zip(counts(), before)) == (2, 1, 1, 0, 4 + 3)
