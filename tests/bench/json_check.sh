#!/bin/sh
# json_check.sh [--expect PYEXPR] CMD [ARG...] - runs CMD and checks that its stdout is
# one valid JSON document (the chipbench --json smoke tests) and, with --expect, that
# the Python expression PYEXPR is true of it (the document is `d`). Exit status: CMD's
# when it failed, 1 when its output is not JSON or PYEXPR is false, 77 (skipped) when
# there is no python3 to check it.
expect=""
if [ "$1" = --expect ]; then
	expect=$2
	shift 2
fi
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
if [ -n "$expect" ] && ! printf '%s\n' "$out" |
	python3 -c 'import json, sys; d = json.load(sys.stdin); sys.exit(0 if eval(sys.argv[1]) else 1)' \
		"$expect"; then
	echo "json_check: $1: not true of its output: $expect"
	printf '%s\n' "$out"
	exit 1
fi
