#!/usr/bin/env bash
# memcheck.sh CHIPD CHIPCTL [CHECK_LOAD] - valgrind memcheck over a short integration
# run: a chipd (one sim chip) serves chipctl's calls and, with CHECK_LOAD, a small
# load run, each client under memcheck; then chipctl stops it. Fails on any memcheck
# error or definite leak in any checked process, or if chipd does not exit 0.
# Exit 77 when valgrind is missing.
set -euo pipefail
chipd=${1:?usage: memcheck.sh CHIPD CHIPCTL}
ctl=${2:?usage: memcheck.sh CHIPD CHIPCTL}
command -v valgrind >/dev/null || {
	echo "memcheck: skipped: valgrind not found"
	exit 77
}
inst=vg$$
log=$(mktemp -d /tmp/chipd-memcheck.XXXXXX)
trap 'kill -9 "$pid" 2>/dev/null || true; rm -f /dev/shm/chipd.$(id -u).$inst' EXIT
# The supervisor cannot run under valgrind 3.19: it does not know pidfd_open (syscall
# 434), which chipd's event loop needs ("start-up failed: Function not implemented").
# So chipd runs natively and memcheck watches the client side: chipctl (libchipd:
# connect, calls, streams, stats) and the load test's client threads (check_load,
# small: FT_LOAD_CLIENTS=4 x FT_LOAD_REQUESTS=20; its chipd child runs natively,
# --trace-children=no).
"$chipd" --foreground --instance "$inst" --chips 1 --pidfile "$log/pid" 2>"$log/chipd.err" &
pid=$!
for _ in $(seq 1 100); do
	"$ctl" --instance "$inst" ping >/dev/null 2>&1 && break
	sleep 0.1
done
status=0
vg() {
	valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1 \
		--trace-children=no --log-file="$log/vg.%p" "$@" || {
		echo "memcheck: exit $?: $*"
		status=1
	}
}
vg "$ctl" --instance "$inst" ping >/dev/null
vg "$ctl" --instance "$inst" --timeout-ms 30000 submit synthetic tokens=20 --follow >/dev/null
vg "$ctl" --instance "$inst" --timeout-ms 30000 submit synthetic tokens=5 --count 8 --follow >/dev/null
vg "$ctl" --instance "$inst" status >/dev/null
vg "$ctl" --instance "$inst" stats --json >/dev/null
vg "$ctl" --instance "$inst" stats --prom >/dev/null
if [ -n "${3:-}" ]; then
	FT_LOAD_CLIENTS=4 FT_LOAD_REQUESTS=20 CK_DEFAULT_TIMEOUT=300 vg "$3" >"$log/load.out" 2>&1
fi
vg "$ctl" --instance "$inst" stop >/dev/null
rc=0
wait "$pid" || rc=$?
# --quiet: a process's log is empty unless memcheck found something (Check forks a
# child per tcase: every process has its own log), so read every log.
for f in "$log"/vg.*; do
	if [ -s "$f" ]; then
		echo "== $f"
		cat "$f"
		status=1
	fi
done
[ "$rc" -eq 0 ] || status=1
if [ "$status" -eq 0 ]; then
	# clean: nothing to read, so nothing is left behind in /tmp
	echo "memcheck: chipd exit $rc, $(ls "$log"/vg.* | wc -l) processes checked, no errors"
	rm -rf "$log"
else
	echo "memcheck: chipd exit $rc, $(ls "$log"/vg.* | wc -l) processes checked, logs kept in $log"
fi
exit $status
