"""The Python example of README.md runs as written against a running chipd.

The code is taken from the README itself (the ```python block of the "Python"
section), so the example and the test cannot drift apart; it runs in a fresh
interpreter with $CHIPD_INSTANCE naming the module's chipd, as a user's would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import CALL_TIMEOUT_S

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    """The first ```python block under README.md's "## Python" heading."""
    text = README.read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "README.md: no python block in the Python section"
    return m.group(1)


def test_readme_example_runs(node):
    code = readme_example()
    env = dict(os.environ, CHIPD_INSTANCE=node.instance)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT_S * 3,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "state='ready'" in lines[0]
    assert [ln.split()[0] for ln in lines[1:9]] == [str(i) for i in range(8)]
    assert lines[8].endswith("final")
    assert lines[9].startswith("refused: bad_request")
