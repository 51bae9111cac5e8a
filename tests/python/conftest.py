"""Fixtures of the Python client's tests: a real chipd with sim chips per test module.

Each module gets its own instance (``CHIPD_ARGS`` in the module adds flags), started
with ``--foreground --notify-fd`` so that the fixture waits for readiness on a pipe,
and stopped with SIGTERM at teardown, which must exit 0 and leave no node region.
Needs $CHIPD_BIN (the supervisor) and libchipd ($CHIPD_LIB); CTest sets both.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import select
import signal
import subprocess
from pathlib import Path
from typing import Iterator, List

import pytest

import chipd

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
#: Every call and every wait of the tests uses a timeout this long at most.
CALL_TIMEOUT_S = 10.0

_seq = itertools.count(1)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the child before exec: chipd never outlives the test run."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Node:
    """A chipd supervisor started for a test module."""

    def __init__(self, binary: str, args: List[str], rundir: Path, tag: str) -> None:
        self.instance = f"py{os.getpid()}-{next(_seq)}-{tag}"[:47]
        self.region = Path(f"/dev/shm/chipd.{os.getuid()}.{self.instance}")
        r, w = os.pipe()
        cmd = [
            binary,
            "--foreground",
            "--instance",
            self.instance,
            "--pidfile",
            str(rundir / f"{self.instance}.pid"),
            "--notify-fd",
            str(w),
            "--log-level",
            "warn",
            *args,
        ]
        try:
            self.proc = subprocess.Popen(cmd, pass_fds=(w,), preexec_fn=_die_with_parent)
        finally:
            os.close(w)
        try:
            ready, _, _ = select.select([r], [], [], READY_TIMEOUT_S)
            line = os.read(r, 1) if ready else b""
        finally:
            os.close(r)
        if line != b"\n":
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
            pytest.fail(f"chipd {self.instance} not ready within {READY_TIMEOUT_S} s: {cmd}")

    def connect(self) -> chipd.Connection:
        """A new connection to this instance."""
        return chipd.connect(self.instance)

    def stop(self) -> int:
        """SIGTERM, then the exit status (killed and failed after STOP_TIMEOUT_S)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
            pytest.fail(f"chipd {self.instance} did not stop within {STOP_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    """A running chipd for this module: ``--chips 2`` unless the module's CHIPD_ARGS says."""
    binary = os.environ.get("CHIPD_BIN")
    if not binary:
        pytest.skip("CHIPD_BIN (the chipd supervisor) is not set")
    args = getattr(request.module, "CHIPD_ARGS", ["--chips", "2"])
    tag = request.module.__name__.rsplit(".", 1)[-1].replace("test_", "")
    n = Node(binary, list(args), tmp_path_factory.mktemp("chipd"), tag)
    yield n
    rc = n.stop()
    assert rc == 0, f"chipd {n.instance} exited {rc} on SIGTERM"
    assert not n.region.exists(), f"{n.region} left behind"


@pytest.fixture
def conn(node: Node) -> Iterator[chipd.Connection]:
    """A connection to the module's chipd, closed after the test."""
    with node.connect() as c:
        yield c
