#!/bin/bash
# systemd_notify.sh CHIPD CHIPCTL - chipd --foreground as systemd's Type=notify runs
# it: NOTIFY_SOCKET (a path, then an abstract @name) served by a test listener,
# WATCHDOG_USEC and WATCHDOG_PID set. Checks READY=1, WATCHDOG=1 at least every half
# of the watchdog interval (the median gap), STOPPING=1 after SIGTERM, exit status 0 and the region gone.
# Then `systemd-analyze verify` on the units of deploy/systemd and deploy/prometheus,
# where systemd-analyze is installed (that part is skipped otherwise).
set -eu
chipd=$(readlink -f "$1")
chipctl=$(readlink -f "$2")
here=$(cd "$(dirname "$0")" && pwd)
deploy=$(cd "$here/../../deploy" && pwd)
dir=$(mktemp -d)
listener=
pid=
cleanup() {
	[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
	[ -z "$listener" ] || kill "$listener" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "systemd_notify.sh: FAIL: $*" >&2
	for f in "$dir"/*.log "$dir"/*.msgs; do
		[ -e "$f" ] && echo "----- $f" && cat "$f"
	done
	exit 1
}

# listen SOCKET OUT: a datagram listener that appends each message, with the
# milliseconds since it bound, to OUT; it exits after STOPPING=1 or 60 s.
listen() {
	python3 - "$1" "$2" <<'PY' &
import socket, sys, time
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + path[1:] if path.startswith("@") else path)
t0 = time.monotonic()
s.settimeout(1.0)
with open(out, "a", buffering=1) as f:
    f.write("BOUND\n")
    while time.monotonic() - t0 < 60:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            continue
        for line in msg.split("\n"):
            if line:
                f.write("%d %s\n" % ((time.monotonic() - t0) * 1000, line))
        if "STOPPING=1" in msg:
            break
PY
	listener=$!
	for _ in $(seq 100); do
		grep -q BOUND "$2" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "the listener did not bind $1"
}

# run SOCKET NAME: chipd under NOTIFY_SOCKET=SOCKET; the checks above.
run() {
	local sock=$1 name=$2 msgs=$dir/$2.msgs rc n
	local instance="notify-$name-$$"
	: >"$msgs"
	listen "$sock" "$msgs"
	# WATCHDOG_PID is the pid that systemd started: chipd's own, through exec.
	NOTIFY_SOCKET=$sock WATCHDOG_USEC=400000 CHIPD_INSTANCE=$instance \
		bash -c 'WATCHDOG_PID=$$ exec "$0" --foreground --chips 2 --pidfile "$1"' \
		"$chipd" "$dir/$name.pid" 2>"$dir/$name.log" &
	pid=$!
	for _ in $(seq 200); do
		grep -q ' READY=1$' "$msgs" && break
		kill -0 "$pid" 2>/dev/null || fail "$name: chipd exited before READY=1"
		sleep 0.05
	done
	grep -q ' READY=1$' "$msgs" || fail "$name: no READY=1 within 10 s"
	timeout 10 "$chipctl" --instance "$instance" ping >/dev/null ||
		fail "$name: READY=1 came but chipd does not answer"
	# The pings repeat, at least one per half interval (0.2 s here): wait for eight,
	# bounded generously so a loaded machine does not fail it; their median gap
	# must not exceed the half interval (5% for the listener's own delays: a ping
	# sent on the first idle tick after the half was over came 250 ms apart).
	n=0
	for _ in $(seq 1 400); do # bounded: 20 s
		n=$(grep -c ' WATCHDOG=1$' "$msgs" || true)
		[ "$n" -ge 8 ] && break
		sleep 0.05
	done
	[ "$n" -ge 3 ] || fail "$name: only $n WATCHDOG=1 in 20 s (want them repeated)"
	gap=$(awk '/ WATCHDOG=1$/ { if (t != "") print $1 - t; t = $1 }' "$msgs" | sort -n |
		awk '{ g[NR] = $1 } END { print g[int((NR + 1) / 2)] }')
	[ "$gap" -le 210 ] ||
		fail "$name: WATCHDOG=1 every $gap ms (median), over half of WATCHDOG_USEC=400000"
	kill -TERM "$pid"
	for _ in $(seq 300); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && fail "$name: chipd still running 15 s after SIGTERM"
	rc=0
	wait "$pid" || rc=$?
	pid=
	[ "$rc" = 0 ] || fail "$name: chipd exited with status $rc after SIGTERM"
	for _ in $(seq 100); do
		kill -0 "$listener" 2>/dev/null || break
		sleep 0.05
	done
	grep -q ' STOPPING=1$' "$msgs" || fail "$name: no STOPPING=1 after SIGTERM"
	[ ! -e "/dev/shm/chipd.$(id -u).$instance" ] || fail "$name: region left in /dev/shm"
	echo "systemd_notify.sh: $name: READY=1, $n x WATCHDOG=1 (median gap $gap ms), STOPPING=1, exit 0, region gone"
	sed 's/^/  /' "$msgs" | grep -v WATCHDOG
}

run "$dir/notify.sock" path
run "@chipd-notify-test-$$" abstract

if command -v systemd-analyze >/dev/null 2>&1; then
	# verify wants the ExecStart program to exist: point it at the built chipd.
	for unit in systemd/chipd.service systemd/chipd@.service prometheus/chipd-export.service; do
		target=$(basename "$unit")
		[ "$target" != chipd@.service ] || target=chipd@test.service
		sed "s|/usr/local/bin/chipd |$chipd |; s|/usr/local/bin/chipctl |$chipctl |" \
			"$deploy/$unit" >"$dir/$target"
		out=$(cd "$dir" && systemd-analyze verify --man=no "./$target" 2>&1) ||
			fail "systemd-analyze verify $unit: $out"
		[ -z "$out" ] || fail "systemd-analyze verify $unit warns: $out"
		echo "systemd_notify.sh: systemd-analyze verify $unit: ok"
	done
else
	echo "systemd_notify.sh: systemd-analyze not installed: unit files not verified"
fi
echo "systemd_notify.sh: ok"
