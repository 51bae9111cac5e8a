#!/usr/bin/env python3
"""counters.py [ROOT] - checks docs/protocol.md §8.1's counter tables against the
counters the code defines (proto/node.h: PROTO_SUP_COUNTERS, PROTO_WRK_COUNTERS).

The supervisor's table is the first Markdown table after the line "The supervisor
block:", the workers' the first after the paragraph that begins "Each worker block".
A table is its header line, its separator line and the `|` lines right after them:
a line that is not a row ends it, so a row after a paragraph is no longer part of
the table as a reader (and a Markdown renderer) sees it. Each row names one or more
counters in its first column (backquoted, `err_<code>` standing for every err_*
counter) and the kind in its second.

It fails (exit 1), naming each problem, when a counter of the code has no row in
its block's table, a row names a counter the code does not have, or a row's kind is
not the code's.
"""

from __future__ import annotations

import os
import re
import sys


def code_counters(root: str) -> dict[str, dict[str, str]]:
    text = open(os.path.join(root, "proto", "node.h"), encoding="utf-8").read()
    blocks = {}
    for block, macro in (("supervisor", "PROTO_SUP_COUNTERS"), ("worker", "PROTO_WRK_COUNTERS")):
        m = re.search(r"#define " + macro + r"\(X\)(.*?)\n\n", text, re.S)
        if not m:
            sys.exit("counters.py: no %s in proto/node.h" % macro)
        blocks[block] = {
            name: ("gauge" if kind == "CTR_GAUGE" else "counter")
            for name, kind in re.findall(r"X\((\w+), (CTR_\w+)\)", m.group(1))
        }
    return blocks


def table_after(lines: list[str], start: int) -> list[str]:
    """The rows of the first table at or after line @start."""
    i = start
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    rows = []
    for line in lines[i + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def doc_counters(root: str) -> dict[str, dict[str, str]]:
    lines = open(os.path.join(root, "docs", "protocol.md"), encoding="utf-8").read().splitlines()
    starts = {}
    for i, line in enumerate(lines):
        if line.startswith("The supervisor block:") and "supervisor" not in starts:
            starts["supervisor"] = i
        if line.startswith("Each worker block") and "worker" not in starts:
            starts["worker"] = i
    blocks = {}
    for block in ("supervisor", "worker"):
        if block not in starts:
            sys.exit("counters.py: docs/protocol.md has no %s counter table" % block)
        blocks[block] = {}
        for row in table_after(lines, starts[block]):
            cells = [c.strip() for c in row.strip("|").split("|")]
            for name in re.findall(r"`([^`]+)`", cells[0]):
                blocks[block][name] = cells[1] if len(cells) > 1 else ""
    return blocks


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    code, doc = code_counters(root), doc_counters(root)
    problems = []
    for block in ("supervisor", "worker"):
        for name, kind in code[block].items():
            key = "err_<code>" if block == "supervisor" and name.startswith("err_") else name
            if key not in doc[block]:
                problems.append("%s counter %s: no row in its table" % (block, name))
            elif doc[block][key] != kind:
                problems.append(
                    "%s counter %s: the table says %s, the code %s"
                    % (block, name, doc[block][key], kind)
                )
        for key in doc[block]:
            if key != "err_<code>" and key not in code[block]:
                problems.append("%s table: %s is no counter of the code" % (block, key))
    for p in problems:
        print("counters.py: docs/protocol.md 8.1: " + p)
    if problems:
        return 1
    print(
        "counters.py: %d supervisor and %d worker counters, each in its table"
        % (len(code["supervisor"]), len(code["worker"]))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
