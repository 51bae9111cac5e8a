#!/usr/bin/env bash
# run_check.sh BUILD_DIR - run.sh reports a fuzz target's crash as a finding: runs the
# selftest target (it aborts on its seed) and expects exit 1 with "fuzz: FINDING" and
# the reproducer saved. A finding that came out as 77 would read as "skipped" in ctest
# and hide the crash. Exit 77 only when run.sh itself says clang or its fuzzer runtime
# is missing.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run_check.sh BUILD_DIR}
rm -rf "$out"
log=$("$here/run.sh" 5 "$out" selftest 2>&1)
rc=$?
printf '%s\n' "$log"
if [ "$rc" -eq 77 ] && grep -q '^fuzz: skipped:' <<<"$log"; then
	exit 77
fi
fail() {
	echo "run_check: $*" >&2
	exit 1
}
[ "$rc" -eq 1 ] || fail "run.sh exited $rc on a crashing target (expected 1)"
grep -q '^fuzz: FINDING' <<<"$log" || fail "run.sh did not say FINDING"
compgen -G "$out/crash-*" >/dev/null || fail "no crash-* reproducer in $out"
echo "run_check: a crash is reported as a finding (exit 1)"
