"""The package installs offline with pip and Debian's setuptools, without compiling
anything: `pip install --no-build-isolation --no-index` of a copy of proto/python
(a copy, because setuptools writes build/ and *.egg-info beside the sources) into a
target folder, then imported from there by a fresh interpreter."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CALL_TIMEOUT_S

SOURCE = Path(__file__).resolve().parents[2] / "proto" / "python"
PIP_TIMEOUT_S = 120


def test_pip_installs_offline(tmp_path):
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip("pip is not installed (Debian: python3-pip)")
    src = tmp_path / "src"
    junk = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(SOURCE, src, ignore=junk)
    site = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
         "--no-deps", "--no-cache-dir", "--target", str(site), str(src)],
        capture_output=True, text=True, env=env, timeout=PIP_TIMEOUT_S,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(p.name for p in (site / "chipd").glob("*.py")) == [
        "__init__.py", "_lib.py", "client.py", "errors.py"]
    assert not list(site.rglob("*.so")), "the package must stay pure Python"
    env["PYTHONPATH"] = str(site)
    code = "import chipd; print(chipd.__file__); chipd._lib.lib()"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=CALL_TIMEOUT_S)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(str(site))
