#!/bin/sh
# trace_run.sh CHIPD CHIPCTL - chipd --trace FILE records the whole run (chipd(8)):
# a `chipctl trace` in the middle of it writes its own file and leaves the recorders
# running, so FILE, written at stop, holds the steps of a request that ran after it.
# Every step is bounded by `timeout`.
set -eu
chipd=$1
chipctl=$2
export CHIPD_INSTANCE="trace-run-$$"
dir=$(mktemp -d)
cleanup() {
	"$chipctl" stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "trace_run.sh: $*" >&2
	exit 1
}

timeout 30 "$chipd" --chips 1 --log-level warn --pidfile "$dir/chipd.pid" \
	--trace "$dir/whole.json" || fail "chipd --trace did not start"
pid=$(cat "$dir/chipd.pid")
timeout 60 "$chipctl" submit --follow synthetic tokens=5 device_us=100 >/dev/null ||
	fail "the first request"
timeout 30 "$chipctl" trace --out "$dir/window.json" --seconds 0.2 >/dev/null ||
	fail "chipctl trace"
[ -s "$dir/window.json" ] || fail "chipctl trace wrote nothing"
timeout 60 "$chipctl" submit --follow synthetic tokens=30 device_us=100 >/dev/null ||
	fail "the request after chipctl trace"
timeout 10 "$chipctl" stop >/dev/null || fail "stop"
for _ in $(seq 1 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
! kill -0 "$pid" 2>/dev/null || fail "chipd pid $pid still running after stop"
python3 - "$dir/whole.json" <<'PY' || fail "$dir/whole.json lacks the steps after chipctl trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
builds = sum(1 for e in ev if e.get("ph") == "X" and e.get("name") == "O build")
# 5 steps before chipctl trace, 30 after it: the recorders never stopped
assert builds >= 35, "%d O build spans, want >= 35" % builds
print("trace_run.sh: %d events, %d O builds" % (len(ev), builds))
PY
echo "trace_run.sh: ok"
