#!/bin/sh
# skip_check.sh COMMAND [ARG...] - runs a test script for ctest (SKIP_RETURN_CODE 77)
# and lets exit status 77 through only as the script's own skip: a line of its output
# says "skipped" (each script prints why in one line, then exits 77). Any other 77 (a
# command under `set -e` that failed with 77: chipctl's "permission", chipd's
# EX_NOPERM, libFuzzer's crash) becomes 1, so a failure never reads as a skip.
# Other exit statuses pass unchanged; the output goes through to ctest.
[ $# -gt 0 ] || {
	echo "usage: skip_check.sh COMMAND [ARG...]" >&2
	exit 2
}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 143' TERM INT
{
	"$@" 2>&1
	echo $? >"$tmp/rc"
} | tee "$tmp/log"
rc=$(cat "$tmp/rc" 2>/dev/null) || rc=1
if [ "$rc" = 77 ]; then
	grep -q skipped "$tmp/log" && exit 77
	echo "skip_check.sh: $1 exited 77 without saying it skipped: a failure, not a skip" >&2
	exit 1
fi
exit "$rc"
