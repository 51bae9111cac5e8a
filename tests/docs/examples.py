#!/usr/bin/env python3
"""examples.py - every example of the docs and man pages, executed against a real chipd.

    examples.py --root SRC --build BUILD --chipd CHIPD --chipctl CHIPCTL \\
                --lib LIBCHIPD --raw-call DOCS_RAW_CALL [--list] [--only SUBSTRING]

The examples are read from the documents when the test runs, never copied here, so
what the documents say is what runs: every *.md file of the tree (found then, so that
a folder's README is checked as soon as it exists; build trees and .git left out) and
the man pages docs/chipctl.1 and docs/chipd.8. CTest runs it as `docs_examples`
(tests/docs.cmake).

The modules beside it (standard library only): examples_blocks.py finds the documents
and their blocks, examples_rules.py holds the tables (RULES, EXPECT, PLACEHOLDERS),
examples_run.py runs shell and python blocks against a chipd, examples_proto.py checks
protocol messages.

The rule: every code block is an example, or is marked as not one.

  Markdown, by the fence's tag:
    sh, console  shell commands, run with bash from the repository root, one command
                 per line (`\\` continues a line; a line ending in &&, || or | goes on
                 with the next; `console` runs only the lines that start with "$ ")
    python       run with python3 (PYTHONPATH=proto/python, CHIPD_LIB = the build's
                 libchipd)
    json         protocol messages (docs/protocol.md §8): JSON values, a request (it
                 has "op") optionally followed by its answer (it has "ok")
    msgpack      the same, each message as hex bytes followed by a line "= JSON"
    text         not an example: a layout, pseudo-code, a schema, a diagram
  Any other tag, or none, fails the test.
  man pages (roff): a .EX/.EE or .nf/.fi block in the EXAMPLES section is shell
    commands, run like `sh` after un-escaping (\\- is -, font escapes go, a \\fI...\\fP
    placeholder takes a value from PLACEHOLDERS); a block elsewhere must be preceded by
    a comment line `.\\" not an example: WHY`, or the test fails.

What "run" checks: a shell command exits 0 (each command line on its own; a chipctl
call with --json must print JSON: one document, or one per line); a python block exits
0; a block prints what EXPECT lists for its document and tag; a protocol request, sent
to chipd byte for byte through a raw mailbox call (docs_raw_call), is answered as its
documented answer says: the same "ok", the same error code for an error, the same
keys for a success, with the request's values where the request has the key (ring
numbers and generations depend on the node's history); a request with no answer after
it must be answered ok. The hex of a msgpack message must decode to exactly its JSON:
same keys in the same order, same types, same values, no bytes left over.

Each block gets a fresh instance (CHIPD_INSTANCE, pid files in a scratch directory):
a block that starts chipd itself (a `chipd` command other than --print-config, --help
or --version) gets none running; any other block that calls chipctl or holds
protocol messages or Python gets a chipd started for it (--foreground --notify-fd,
sim chips). Afterwards the block's background jobs are ended and its chipd stopped;
the node region must be gone. PATH starts with a directory holding `chipctl` (the
build's, through a wrapper that keeps each --json output for the check) and `chipd`
(the build's), then the build's bin/.

What cannot run here as written (root, systemd, Slurm, a GPU, apt-get, minutes of
work) is in RULES, each entry with its reason: a substitution applied to the command
line, or a pointer to what runs the line instead (the file and a text it must contain,
checked, so that the pointer cannot go stale); a file the line must write is
removed before the block runs, so that an earlier block's cannot stand in for it. A
rule that matches no line fails the test: the documents changed, and the table must
follow.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

# The modules beside this script are imported from the source tree: no bytecode
# written there.
sys.dont_write_bytecode = True

from examples_blocks import Failure, all_blocks  # noqa: E402
from examples_proto import run_messages  # noqa: E402
from examples_rules import EXPECT, RULES  # noqa: E402
from examples_run import Run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--chipd", required=True)
    ap.add_argument("--chipctl", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--raw-call", required=True)
    ap.add_argument("--list", action="store_true", help="print the blocks, run nothing")
    ap.add_argument("--only", help="run only the blocks whose file:line contains this")
    a = ap.parse_args()

    root = Path(a.root).resolve()
    errors: list[str] = []
    blocks = all_blocks(root, Path(a.build), errors)
    if a.list:
        for b in blocks:
            print(f"{b.where()}: {b.tag}")
        for e in errors:
            print(f"error: {e}")
        return 1 if errors else 0
    run = Run(a)
    failed = 0
    t0 = time.monotonic()
    try:
        for b in blocks:
            if a.only and a.only not in b.where():
                continue
            if b.tag == "text":
                continue
            work = run.tmp / f"block{run.seq + 1}"
            work.mkdir()
            inst = run.instance()
            try:
                if b.tag in ("sh", "console", "roff"):
                    notes = run.run_shell(b, inst, work)
                elif b.tag == "python":
                    notes = run.run_python(b, inst, work)
                else:
                    notes = run_messages(run, b, inst, work)
                print(f"ok    {b.where()} {b.tag}: {'; '.join(notes)}", flush=True)
            except Failure as e:
                failed += 1
                print(f"FAIL  {b.where()} {b.tag}: {e}", flush=True)
        if not a.only:
            for r in RULES:
                if not r.used:
                    errors.append(f"RULES entry for {r.files} /{r.match}/ matched no command "
                                  f"line: the documents changed; update or remove it")
            for ex in EXPECT:
                if not ex.used:
                    errors.append(f"EXPECT entry for {ex.files} ({ex.tag}) matched no block")
    finally:
        shutil.rmtree(run.tmp, ignore_errors=True)
    for e in errors:
        print(f"FAIL  {e}")
    n = sum(1 for b in blocks if b.tag != "text")
    print(f"examples: {n} blocks run, {sum(1 for b in blocks if b.tag == 'text')} marked "
          f"not examples, {failed} failed, {len(errors)} other errors "
          f"({time.monotonic() - t0:.1f} s)")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
