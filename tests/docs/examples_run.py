"""examples_run.py - one run of the examples, for examples.py: the scratch directory
and the environment every example gets, a chipd per block (started, stopped, checked
gone), and the shell and python blocks run against it with the RULES applied."""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from examples_blocks import Block, Failure, command_lines
from examples_rules import EXPECT, RULES, Expect

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
BLOCK_TIMEOUT_S = 60.0
POLL_S = 0.05
FILE_TIMEOUT_S = 10.0  # how long an example's file may take to appear

# The chipctl of the examples: the build's, with what each --json call printed kept in
# $CHIPD_EX_JSON for the check.
CHIPCTL_WRAPPER = """#!/bin/sh
for a in "$@"; do
\tif [ "$a" = --json ]; then
\t\tout=$(mktemp "$CHIPD_EX_JSON/json.XXXXXX") || exit 1
\t\tprintf '%s\\n' "$*" >"$out.args"
\t\t"$CHIPD_EX_CHIPCTL" "$@" >"$out"
\t\trc=$?
\t\tcat "$out"
\t\texit $rc
\tfi
done
exec "$CHIPD_EX_CHIPCTL" "$@"
"""


def die_with_parent() -> None:
    """In the child before exec: chipd never outlives the test."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Run:
    """One run of the examples: the scratch directory, the environment every example
    gets, and the chipd instances of the blocks."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.root = Path(a.root).resolve()
        self.build = Path(a.build).resolve()
        self.chipd = str(Path(a.chipd).resolve())
        self.chipctl = str(Path(a.chipctl).resolve())
        self.lib = str(Path(a.lib).resolve())
        self.raw_call = str(Path(a.raw_call).resolve())
        self.tmp = Path(tempfile.mkdtemp(prefix="chipd-examples."))
        self.seq = 0
        (self.tmp / "run").mkdir(mode=0o700)  # chipd refuses a runtime dir open to others
        (self.tmp / "bin").mkdir()
        for d in ("textfile", "dir", "usr/local/bin", "usr/local/share/man"):
            (self.tmp / d).mkdir(parents=True)
        wrapper = self.tmp / "bin" / "chipctl"
        wrapper.write_text(CHIPCTL_WRAPPER)
        wrapper.chmod(0o755)
        (self.tmp / "bin" / "chipd").symlink_to(self.chipd)
        # What the caller's environment sets for chipd, Slurm, systemd, the GPUs or
        # Check (CK_VERBOSITY=silent hides the report an example's output is checked
        # on) does not reach the examples.
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("CHIPD_", "SLURM_", "CK_")) and
                k not in ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                          "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
        base.update(
            PATH=f"{self.tmp / 'bin'}:{Path(self.chipd).parent}:{os.environ.get('PATH', '')}",
            CHIPD_RUNTIME_DIR=str(self.tmp / "run"),
            CHIPD_EX_TMP=str(self.tmp),
            CHIPD_EX_BUILD=str(self.build),
            CHIPD_EX_BIN=str(Path(self.chipd).parent),
            CHIPD_EX_CHIPCTL=self.chipctl,
            CHIPD_LIB=self.lib,
            PYTHONPATH=str(self.root / "proto" / "python"),
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.env = base

    def instance(self) -> str:
        self.seq += 1
        return f"docs{os.getpid()}-{self.seq}"

    def region(self, inst: str) -> Path:
        return Path(f"/dev/shm/chipd.{os.geteuid()}.{inst}")

    def start_chipd(self, inst: str, log: Path) -> subprocess.Popen:
        r, w = os.pipe()
        cmd = [self.chipd, "--foreground", "--instance", inst, "--notify-fd", str(w),
               "--log-level", "warn", "--chips", "2", "--grace-ms", "5000"]
        with open(log, "ab") as lf:
            try:
                p = subprocess.Popen(cmd, pass_fds=(w,), preexec_fn=die_with_parent,
                                     env=self.env, stdout=lf, stderr=lf)
            finally:
                os.close(w)
        try:
            ready, _, _ = select.select([r], [], [], READY_TIMEOUT_S)
            line = os.read(r, 1) if ready else b""
        finally:
            os.close(r)
        if line != b"\n":
            p.kill()
            p.wait(timeout=STOP_TIMEOUT_S)
            raise Failure(f"chipd {inst} not ready within {READY_TIMEOUT_S} s\n{tail(log)}")
        return p

    def stop_chipd(self, inst: str, proc: subprocess.Popen | None, log: Path) -> None:
        """Stops the block's chipd (ours, or one the block started) and checks that it
        stopped cleanly: exit 0 for ours, the region gone for both."""
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise Failure(f"chipd {inst} did not stop within {STOP_TIMEOUT_S} s\n{tail(log)}")
            if rc != 0:
                raise Failure(f"chipd {inst} exited {rc}\n{tail(log)}")
        elif self.region(inst).exists():
            subprocess.run([self.chipctl, "--instance", inst, "stop"], env=self.env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=STOP_TIMEOUT_S)
        end = time.monotonic() + STOP_TIMEOUT_S
        while self.region(inst).exists():
            if time.monotonic() > end:
                self.kill_detached(inst)
                raise Failure(f"chipd {inst}: node region left behind after the stop")
            time.sleep(POLL_S)

    def kill_detached(self, inst: str) -> None:
        """Kills a detached chipd that did not stop (found through its pid file), so that
        a failed block leaves nothing running."""
        pidfile = self.tmp / "run" / f"chipd.{os.geteuid()}.{inst}.pid"
        try:
            os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass

    # -- shell --

    def plan_shell(self, block: Block) -> tuple[list[tuple[int, str, str]], list[str]]:
        plan, notes = [], []
        for lineno, cmd in command_lines(block):
            rule = next((r for r in RULES if r.elsewhere and r.covers(block.path)
                         and re.search(r.match, cmd)), None)
            if rule:
                rule.used += 1
                for f, text in rule.elsewhere:
                    p = self.root / f
                    if not p.is_file() or text not in p.read_text():
                        raise Failure(f"{block.path}:{lineno}: RULES point to {f} for "
                                      f"`{cmd}`, but {f} does not hold '{text}'")
                by = ", ".join(sorted({f for f, _ in rule.elsewhere}))
                notes.append(f"line {lineno} run by {by}")
                continue
            run = cmd
            for r in RULES:
                if r.sub and r.covers(block.path) and re.search(r.match, cmd):
                    r.used += 1
                    run, n = re.subn(r.sub[0], r.sub[1], run)
                    if n == 0:
                        raise Failure(f"{block.path}:{lineno}: RULES entry '{r.match}' "
                                      f"matched but its substitution changed nothing")
            plan.append((lineno, cmd, run))
        return plan, notes

    def run_shell(self, block: Block, inst: str, work: Path) -> list[str]:
        plan, notes = self.plan_shell(block)
        if not plan:
            return notes
        own = any(starts_chipd(run) for _, _, run in plan)
        need = not own and any(re.search(r"\bchipctl\b", run) for _, _, run in plan)
        checks = [r.check_file for r in RULES if r.check_file and r.used and
                  any(re.search(r.match, cmd) and r.covers(block.path)
                      for _, cmd, _ in plan)]
        # A file left by an earlier block (the same scratch path) must not stand in
        # for this one's.
        for c in checks:
            self.scratch_path(c).unlink(missing_ok=True)
        expects = block_expects(block)
        script = ["cd \"$CHIPD_EX_ROOT\""]
        for lineno, cmd, run in plan:
            script.append(run)
            msg = shlex.quote(f"{block.path}:{lineno}: `{cmd}`" +
                              (f" (run as `{run}`)" if run != cmd else "") + ": exit status")
            script.append(f"__rc=$?; if [ $__rc -ne 0 ]; then printf '%s %s\\n' {msg} $__rc >&2; "
                          f"exit 1; fi")
        (work / "block.sh").write_text("\n".join(script) + "\n")
        (work / "json").mkdir()
        env = dict(self.env, CHIPD_INSTANCE=inst, CHIPD_EX_ROOT=str(self.root),
                   CHIPD_EX_JSON=str(work / "json"))
        log = work / "chipd.log"
        proc = self.start_chipd(inst, log) if need else None
        try:
            out = self.run_script(["bash", str(work / "block.sh")], env, work, checks)
            check_json(work / "json", block)
        finally:
            self.stop_chipd(inst, proc, log)
        notes.append(f"{len(plan)} command line(s) run" + (", chipd started by the example"
                                                            if own else ""))
        return notes + check_expects(expects, out, work)

    def scratch_path(self, path: str) -> Path:
        """@path of RULES with $CHIPD_EX_TMP made this run's scratch directory."""
        return Path(path.replace("$CHIPD_EX_TMP", str(self.tmp)))

    def run_script(self, cmd: list[str], env: dict, work: Path, checks: list[str],
                   cwd: Path | None = None) -> str:
        out, err = work / "stdout", work / "stderr"
        with open(out, "wb") as o, open(err, "wb") as e:
            p = subprocess.Popen(cmd, cwd=cwd or self.root, env=env, stdout=o, stderr=e,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = None
        try:
            if rc is None:
                raise Failure(f"still running after {BLOCK_TIMEOUT_S} s\n{output(work)}")
            if rc != 0:
                raise Failure(f"exit status {rc}\n{output(work)}")
            for c in checks:
                path = self.scratch_path(c)
                end = time.monotonic() + FILE_TIMEOUT_S
                while not path.exists() and time.monotonic() < end:
                    time.sleep(POLL_S)
                if not path.exists():
                    raise Failure(f"the example should have written {c}: it is not there\n"
                                  f"{output(work)}")
        finally:
            end_group(p.pid)
        return out.read_text(errors="replace")

    # -- python --

    def run_python(self, block: Block, inst: str, work: Path) -> list[str]:
        expects = block_expects(block)
        (work / "example.py").write_text("\n".join(block.body) + "\n")
        log = work / "chipd.log"
        proc = self.start_chipd(inst, log)
        try:
            out = self.run_script([sys.executable, str(work / "example.py")],
                                  dict(self.env, CHIPD_INSTANCE=inst), work, [], cwd=work)
        finally:
            self.stop_chipd(inst, proc, log)
        return ["ran"] + check_expects(expects, out, work)


def block_expects(block: Block) -> list[Expect]:
    """The EXPECT entries of @block (its document, its tag), each counted as used."""
    expects = [ex for ex in EXPECT if ex.covers(block.path, block.tag)]
    for ex in expects:
        ex.used += 1
    return expects


def check_expects(expects: list[Expect], out: str, work: Path) -> list[str]:
    """Fails unless every line pattern of @expects matches a line of @out, the block's
    standard output; returns a note per entry."""
    notes = []
    for ex in expects:
        for pat in ex.lines:
            if not any(re.search(pat, ln) for ln in out.splitlines()):
                raise Failure(f"no output line matches {pat!r} ({ex.why})\n{output(work)}")
        notes.append(f"output checked: {ex.why}")
    return notes


def starts_chipd(cmd: str) -> bool:
    """Whether the command line runs chipd other than to print and exit."""
    try:
        words = shlex.split(cmd, comments=True)
    except ValueError:
        words = cmd.split()
    simple: list[list[str]] = [[]]
    for w in words:
        if w in ("&&", "||", ";", "|", "&"):
            simple.append([])
        else:
            simple[-1].append(w)
    for c in simple:
        while c and re.match(r"^\w+=", c[0]):
            c = c[1:]
        if c and os.path.basename(os.path.expandvars(c[0])) == "chipd" and not (
                {"--print-config", "--help", "-h", "--version", "-V"} & set(c)):
            return True
    return False


def check_json(d: Path, block: Block) -> None:
    for out in sorted(d.glob("json.??????")):
        args = (d / (out.name + ".args")).read_text().strip()
        text = out.read_text()
        if not text.strip():
            raise Failure(f"{block.where()}: `chipctl {args}` printed nothing on stdout")
        try:
            json.loads(text)
            continue
        except json.JSONDecodeError:
            pass
        for n, ln in enumerate(text.splitlines(), 1):
            try:
                json.loads(ln)
            except json.JSONDecodeError as e:
                raise Failure(f"{block.where()}: `chipctl {args}` line {n} is not JSON ({e}): "
                              f"{ln!r}") from None


def end_group(pgid: int) -> None:
    """Ends what the block left running in its process group (background jobs)."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(POLL_S)


def tail(p: Path, n: int = 30) -> str:
    try:
        lines = p.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    return "\n".join(f"  | {ln}" for ln in lines[-n:])


def output(work: Path) -> str:
    parts = []
    for name in ("stdout", "stderr", "chipd.log"):
        t = tail(work / name)
        if t:
            parts.append(f"  {name}:\n{t}")
    return "\n".join(parts)
