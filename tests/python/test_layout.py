"""The ctypes structs of chipd/_lib.py match chipd.h as the C compiler lays it out:
sizes, alignments, field offsets and the constants, as printed by layout.c (built by
CMake; $CHIPD_LAYOUT_BIN)."""

from __future__ import annotations

import ctypes
import os
import subprocess
from typing import Dict, Tuple

import pytest

from chipd import _lib


@pytest.fixture(scope="module")
def c_layout() -> Tuple[Dict[str, str], Dict[str, int]]:
    """layout.c's output as ({"chipd_error": "size 192 align 8", "chipd_error.code":
    "4", ...}, {"MSG_MAX": 160, ...})."""
    binary = os.environ.get("CHIPD_LAYOUT_BIN")
    if not binary:
        pytest.skip("CHIPD_LAYOUT_BIN (tests/python/layout.c, built by CMake) is not set")
    out = subprocess.run([binary], capture_output=True, text=True, check=True, timeout=30).stdout
    layout, const = {}, {}
    for line in out.splitlines():
        key, rest = line.split(" ", 1)
        if key == "const":
            name, value = rest.split()
            const[name] = int(value)
        else:
            layout[key] = rest
    return layout, const


def test_struct_sizes_and_offsets(c_layout):
    layout, _ = c_layout
    py = _lib.layout()
    for name, (size, align, fields) in py.items():
        assert layout[name] == f"size {size} align {align}", name
        for field, offset in fields.items():
            assert layout[f"{name}.{field}"] == str(offset), f"{name}.{field}"
    # no struct or field on one side only
    assert {k for k in layout if "." not in k} == set(py)
    py_fields = {f"{n}.{f}" for n, (_, _, fields) in py.items() for f in fields}
    assert {k for k in layout if "." in k} == py_fields


def test_constants(c_layout):
    _, const = c_layout
    assert const == {
        "MSG_MAX": _lib.MSG_MAX,
        "NAME_MAX": _lib.NAME_MAX,
        "KEY_MAX": _lib.KEY_MAX,
        "MAX_PARAMS": _lib.MAX_PARAMS,
        "MAX_CHIPS": _lib.MAX_CHIPS,
        "MAX_WORKLOADS": _lib.MAX_WORKLOADS,
        "DOC_MAX": _lib.DOC_MAX,
        "PAYLOAD_MAX": _lib.PAYLOAD_MAX,
        "INPUT_INLINE_MAX": _lib.INPUT_INLINE_MAX,
        "INPUT_MAX": _lib.INPUT_MAX,
        "OUTPUT_MAX": _lib.OUTPUT_MAX,
        "NCODES": len(_lib.CODE_NAMES),
        "enum_size": ctypes.sizeof(_lib.c_enum),
    }
