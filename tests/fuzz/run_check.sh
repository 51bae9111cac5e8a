#!/usr/bin/env bash
# run_check.sh BUILD_DIR - run.sh reports a fuzz target's crash as a finding: runs the
# selftest target (it aborts on its seed) and expects exit 1 with "fuzz: FINDING" and
# the reproducer saved. A finding that came out as 77 would read as "skipped" in ctest
# and hide the crash. run.sh's 77 is passed on: ctest runs this under skip_check.sh,
# which keeps it a skip only where run.sh said why (clang or its runtime missing).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_check.sh BUILD_DIR}
rm -rf "$out"
log=$("$here/run.sh" 5 "$out" selftest 2>&1)
rc=$?
printf '%s\n' "$log"
[ "$rc" -ne 77 ] || exit 77
fail() {
	echo "run_check: $*" >&2
	exit 1
}
[ "$rc" -eq 1 ] || fail "run.sh exited $rc on a crashing target (expected 1)"
grep -q '^fuzz: FINDING' <<<"$log" || fail "run.sh did not say FINDING"
compgen -G "$out/crash-*" >/dev/null || fail "no crash-* reproducer in $out"
echo "run_check: a crash is reported as a finding (exit 1)"
