#!/bin/sh
# json_check.sh CMD [ARG...] - runs CMD and checks that its stdout is one valid JSON
# document (the chipbench --json smoke tests). Exit status: CMD's when it failed, 1
# when its output is not JSON, 77 (skipped) when there is no python3 to check it.
if ! command -v python3 >/dev/null 2>&1; then
	echo "json_check: skipped: no python3 to check the JSON with"
	exit 77
fi
out=$("$@") || exit $?
if ! printf '%s\n' "$out" | python3 -m json.tool >/dev/null; then
	echo "json_check: $1 printed no valid JSON:"
	printf '%s\n' "$out"
	exit 1
fi
