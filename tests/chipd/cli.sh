#!/bin/sh
# cli.sh CHIPD CHIPCTL - chipctl against a real chipd (two sim chips): status, a
# followed submit, `workloads` (table and JSON), `register`/`callables` (with its
# counts)/`unregister`, a chip the node lacks and a --deadline-ms that passes (both
# exit 1), `stats --prom` through `promtool check metrics` (when promtool is
# installed), `trace` written as Chrome trace JSON (docs/architecture.md, "Trace"),
# `stop --json`, and nothing left in /dev/shm. Every step is bounded by `timeout`.
set -eu
chipd=$1
chipctl=$2
# shellcheck source=tests/chipd/lib.sh
. "$(dirname "$0")/lib.sh"
chipd_test cli.sh

timeout 30 "$chipd" --chips 2 --log-level warn --pidfile "$dir/chipd.pid" ||
	fail "chipd did not start"
pid=$(cat "$dir/chipd.pid")
timeout 10 "$chipctl" status | grep -q ready || fail "status: no ready chip"
timeout 10 "$chipctl" status | grep -q '^0  .* sim ' || fail "status: chip 0 is not sim"
timeout 10 "$chipctl" status --json | grep -q '{"chip":0,"pid":[0-9]*,"gpu":-1,' ||
	fail "status --json: a sim chip's gpu is not -1"

out=$(timeout 60 "$chipctl" submit --follow --json synthetic tokens=5 device_us=100)
[ "$(printf '%s\n' "$out" | grep -c '"seq"')" -ge 5 ] || fail "submit: $out"
printf '%s\n' "$out" | tail -1 | grep -q completed || fail "submit did not complete: $out"

# workloads: a table per workload, and one versioned JSON document
timeout 10 "$chipctl" workloads | grep -q '^synthetic: ' || fail "workloads: no synthetic table"
timeout 10 "$chipctl" workloads --json >"$dir/wl.json" || fail "workloads --json"
python3 - "$dir/wl.json" <<'PY' || fail "workloads --json is not the required document"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["v"] == 1 and doc["ok"] is True, doc
names = [w["name"] for w in doc["workloads"]]
assert {"paged_attention", "gemm", "synthetic"} <= set(names), names
for w in doc["workloads"]:
    assert w["doc"] and w["params"], w
    for p in w["params"]:
        assert set(p) == {"key", "default", "min", "max", "doc"}, p
        assert p["min"] <= p["default"] <= p["max"] and p["doc"], p
print("workloads: %d, %d parameters" % (len(names), sum(len(w["params"]) for w in doc["workloads"])))
PY

# register / unregister: the built-in gemm.so once more under another name
gemm_so=$(cd "$(dirname "$chipd")/../callables" && pwd)/gemm.so
timeout 20 "$chipctl" register --name gemm_cli "$gemm_so" | grep -q '^callable gemm_cli (version 1) registered' ||
	fail "register: no confirmation"
timeout 10 "$chipctl" callables | grep -q '^gemm_cli .* 0-1 ' || fail "callables: gemm_cli not on chips 0-1"
timeout 60 "$chipctl" submit --follow gemm_cli m=16 tokens=2 >/dev/null || fail "submit gemm_cli"
# the counts of each callable: the table's columns, and in JSON those of the streams
# read to their end above (synthetic's 5 tokens, gemm_cli's 2)
timeout 10 "$chipctl" callables | head -1 |
	grep -q ' active  requests  completed  failed  cancelled  tokens  parameters$' ||
	fail "callables: no count columns"
timeout 10 "$chipctl" callables --json >"$dir/cl.json" || fail "callables --json"
python3 - "$dir/cl.json" <<'PY' || fail "callables --json: not the counts of the requests run"
import json, sys
doc = json.load(open(sys.argv[1]))
got = {c["name"]: [c[k] for k in ("requests", "completed", "failed", "cancelled", "tokens")]
       for c in doc["callables"]}
assert got["synthetic"] == [1, 1, 0, 0, 5], got
assert got["gemm_cli"] == [1, 1, 0, 0, 2], got
assert got["gemm"] == [0, 0, 0, 0, 0], got
PY
rc=0
timeout 10 "$chipctl" unregister --drain --cancel gemm_cli 2>/dev/null || rc=$?
[ "$rc" -eq 64 ] || fail "unregister --drain --cancel: exit $rc, not 64"
rc=0
timeout 10 "$chipctl" unregister gemm 2>"$dir/unreg.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'loaded at start' "$dir/unreg.err" ||
	fail "unregister gemm: exit $rc, $(cat "$dir/unreg.err")"
timeout 20 "$chipctl" unregister --json --cancel gemm_cli | grep -q '"ok":true' ||
	fail "unregister --cancel gemm_cli"
timeout 10 "$chipctl" callables | grep -q '^gemm_cli ' && fail "gemm_cli still listed"
# a name is 1..23 characters of [a-z0-9_], in chipctl as in chipd: 24 are refused
# before anything is sent (usage, 64), 23 are registered
rc=0
timeout 10 "$chipctl" register --name abcdefghijklmnopqrstuvwx "$gemm_so" 2>"$dir/name.err" ||
	rc=$?
[ "$rc" -eq 64 ] && grep -q 'the name given is not 1..23 characters of \[a-z0-9_\]' "$dir/name.err" ||
	fail "register --name of 24 characters: exit $rc, $(cat "$dir/name.err")"
timeout 20 "$chipctl" register --name abcdefghijklmnopqrstuvw "$gemm_so" >/dev/null ||
	fail "register --name of 23 characters"
timeout 20 "$chipctl" unregister abcdefghijklmnopqrstuvw >/dev/null ||
	fail "unregister of a name of 23 characters"
echo "register, callables, unregister: ok"

# a chip the node lacks is the request's bad_request (exit 1); a request past its
# --deadline-ms fails with the code timeout, exit 1 (75 is chipctl's own timeouts)
rc=0
timeout 30 "$chipctl" submit --chip 2 synthetic tokens=1 >/dev/null 2>"$dir/chip.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'this node has 2 \[bad_request\]$' "$dir/chip.err" ||
	fail "submit --chip 2: exit $rc, $(cat "$dir/chip.err")"
rc=0
timeout 30 "$chipctl" submit --deadline-ms 50 synthetic tokens=100000 device_us=1000 \
	>/dev/null 2>"$dir/deadline.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q ': timeout \[timeout, retryable\]$' "$dir/deadline.err" ||
	fail "submit --deadline-ms 50: exit $rc, $(cat "$dir/deadline.err")"

if command -v promtool >/dev/null 2>&1; then
	timeout 10 "$chipctl" stats --prom >"$dir/m.prom"
	promtool check metrics <"$dir/m.prom" || fail "promtool rejected stats --prom"
	echo "promtool: $(grep -c '^# TYPE' "$dir/m.prom") metrics ok"
else
	echo "promtool not installed: the --prom check is skipped"
fi

# trace: record while a request runs
timeout 60 "$chipctl" submit synthetic tokens=200 device_us=500 host_us=200 >/dev/null &
sub=$!
timeout 30 "$chipctl" trace --out "$dir/trace.json" --seconds 1 --summary ||
	fail "trace failed"
wait "$sub" || fail "the traced request failed"
python3 - "$dir/trace.json" <<'PY' || fail "trace is not the required JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
assert doc.get("displayTimeUnit") == "ns", "displayTimeUnit"
xs = [e for e in ev if e.get("ph") == "X"]
assert xs, "no X events"
for e in xs:
    for k in ("name", "ts", "dur", "pid", "tid"):
        assert k in e, "X event without %s: %r" % (k, e)
names = [e for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"]
assert names, "no thread_name metadata"
print("trace: %d events, %d spans" % (len(ev), len(xs)))
PY

# without --grace-ms, chipd's configured grace applies: the document says 0
out=$(timeout 10 "$chipctl" stop --json) || fail "stop"
[ "$out" = '{"v":1,"ok":true,"action":"stop","grace_ms":0}' ] || fail "stop --json: $out"
for _ in $(seq 1 100); do
	[ -r "/proc/$pid/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$pid/stat" || break
	sleep 0.1
done
if [ -r "/proc/$pid/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$pid/stat"; then
	fail "chipd pid $pid still running after stop"
fi
[ ! -e "/dev/shm/chipd.$(id -u).$CHIPD_INSTANCE" ] || fail "region left in /dev/shm"
echo "cli.sh: ok"
