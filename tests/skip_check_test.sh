#!/bin/sh
# skip_check_test.sh - skip_check.sh keeps a script's skip (77 after a "skipped"
# line) and every other status, and turns a bare 77 into 1.
here=$(cd "$(dirname "$0")" && pwd)
fails=0
expect() { # WANT SHELL-COMMAND
	"$here/skip_check.sh" sh -c "$2" >/dev/null 2>&1
	got=$?
	if [ "$got" != "$1" ]; then
		echo "skip_check_test: '$2' gave $got, want $1"
		fails=1
	fi
}
expect 77 'echo "x.sh: skipped: no tool"; exit 77'
expect 1 'echo "chipctl: permission denied" >&2; exit 77'
expect 1 'exit 77'
expect 0 'echo ok'
expect 3 'exit 3'
expect 0 'echo "x.sh: one step skipped"; exit 0'
[ "$fails" = 0 ] && echo "skip_check_test: 6 cases passed"
exit "$fails"
