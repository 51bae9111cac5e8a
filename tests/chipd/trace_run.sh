#!/bin/sh
# trace_run.sh CHIPD CHIPCTL - chipd --trace FILE records the whole run (chipd(8)),
# with two sim chips:
#  1. chip 0: a `chipctl trace` in the middle of the run writes its own file and leaves
#     the recorders running, so FILE holds the steps of a request that ran after it;
#  2. chip 1: its worker killed (SIGKILL) and restarted records from its start, so FILE
#     holds the steps of a request the restarted worker ran.
# FILE is written at the stop. Every step is bounded by `timeout`.
set -eu
chipd=$1
chipctl=$2
# shellcheck source=tests/chipd/lib.sh
. "$(dirname "$0")/lib.sh"
chipd_test trace_run.sh
# chip_field CHIP KEY: that chip's KEY in `chipctl status --json`
chip_field() {
	timeout 10 "$chipctl" status --json | python3 -c '
import json, sys
print(json.load(sys.stdin)["chips"][int(sys.argv[1])][sys.argv[2]])' "$1" "$2"
}

timeout 30 "$chipd" --chips 2 --log-level warn --pidfile "$dir/chipd.pid" \
	--backoff-min-ms 100 --trace "$dir/whole.json" || fail "chipd --trace did not start"
pid=$(cat "$dir/chipd.pid")

# 1. chip 0, around a chipctl trace
timeout 60 "$chipctl" submit --chip 0 --follow synthetic tokens=5 device_us=100 >/dev/null ||
	fail "the first request"
timeout 30 "$chipctl" trace --out "$dir/window.json" --seconds 0.2 >/dev/null ||
	fail "chipctl trace"
[ -s "$dir/window.json" ] || fail "chipctl trace wrote nothing"
timeout 60 "$chipctl" submit --chip 0 --follow synthetic tokens=30 device_us=100 >/dev/null ||
	fail "the request after chipctl trace"

# 2. chip 1, restarted
old=$(chip_field 1 pid)
kill -9 "$old"
i=0
until [ "$(chip_field 1 state)" = ready ] && [ "$(chip_field 1 pid)" != "$old" ]; do
	i=$((i + 1))
	[ $i -le 300 ] || fail "chip 1 was not restarted within 30 s"
	sleep 0.1
done
timeout 60 "$chipctl" submit --chip 1 --follow synthetic tokens=20 device_us=100 >/dev/null ||
	fail "the request on the restarted worker"

timeout 10 "$chipctl" stop >/dev/null || fail "stop"
for _ in $(seq 1 100); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
! kill -0 "$pid" 2>/dev/null || fail "chipd pid $pid still running after stop"
python3 - "$dir/whole.json" <<'PY' || fail "$dir/whole.json lacks steps of the run"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
def builds(chip):
    return sum(1 for e in ev if e.get("ph") == "X" and e.get("name") == "O build"
               and e.get("pid") == chip)
# chip 0: 5 steps before chipctl trace, 30 after it; chip 1: 20 steps after its restart
assert builds(0) >= 35, "chip 0: %d O build spans, want >= 35" % builds(0)
assert builds(1) >= 20, "chip 1: %d O build spans, want >= 20" % builds(1)
print("trace_run.sh: %d events; O builds: chip 0 %d, chip 1 %d" % (len(ev), builds(0), builds(1)))
PY
echo "trace_run.sh: ok"
