#!/bin/sh
# hygiene.sh CHIPD CHIPCTL - what a chipd leaves to the processes and users around it:
#  1. detached, it holds none of its caller's output: `chipd | cat` ends as soon as
#     chipd is ready, and the log goes on in RUNTIME_DIR/chipd.UID.INSTANCE.log (0600);
#  2. a trace is written 0600, with no temporary or part file left behind (a failed
#     one included); one into a missing directory is refused before it records;
#  3. a runtime directory that is not private (open to others, a symbolic link,
#     another user's) is refused: exit 1, a message naming it, no region made; so is
#     a detached log file others can read (its mode named, no pid file left);
#  4. a SIGKILLed spawner ends chipd: exit 70 within a bound, one error line and no
#     restart attempt, every stream ended (worker_lost), every worker gone, the
#     spawner reaped (no zombie), the region unlinked;
#  and its log names a client gone with a live stream (cancelled), never one that read
#  its stream to the end before it exited.
# Every wait is bounded.
set -eu
chipd=$1
chipctl=$2
dir=$(mktemp -d)
uid=$(id -u)
export CHIPD_INSTANCE="hyg-test-$$"
export CHIPD_RUNTIME_DIR="$dir/run"
region="/dev/shm/chipd.$uid.$CHIPD_INSTANCE"
fg=
cleanup() {
	"$chipctl" stop >/dev/null 2>&1 || true
	[ -z "$fg" ] || kill -9 "$fg" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "hygiene.sh: $*" >&2
	[ ! -e "$dir/fg.log" ] || sed 's/^/  chipd: /' "$dir/fg.log" >&2
	exit 1
}
# until_true TENTHS WHAT CMD...: runs CMD every 0.1 s until it succeeds, at most TENTHS
# times; fails the test with WHAT otherwise.
until_true() {
	n=$1 what=$2
	shift 2
	until "$@"; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || fail "$what"
		sleep 0.1
	done
}
mode() { stat -c %a "$1"; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# not_zombie PID: no such process, or one that is not a zombie
not_zombie() { [ ! -e "/proc/$1/stat" ] || ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"; }

# 1. `chipd | cat` ends once chipd is ready; chipd serves on
(
	{
		"$chipd" --chips 1 2>&1
		echo "chipd exit status $?"
	} | cat >"$dir/out"
	echo >"$dir/eof"
) &
until_true 300 "chipd --chips 1 | cat did not end: chipd holds the caller's output" \
	test -e "$dir/eof"
grep -q "chipd exit status 0" "$dir/out" || fail "detached chipd failed: $(cat "$dir/out")"
timeout 10 "$chipctl" ping >/dev/null || fail "chipd is not serving after the pipe ended"
log="$dir/run/chipd.$uid.$CHIPD_INSTANCE.log"
grep -q "the log goes on in $log" "$dir/out" || fail "the caller was not told where the log is"
[ "$(mode "$dir/run")" = 700 ] || fail "runtime directory mode $(mode "$dir/run")"
[ "$(mode "$log")" = 600 ] || fail "log file mode $(mode "$log")"
grep -q "ready: instance $CHIPD_INSTANCE" "$log" || fail "no ready line in $log"
pid=$(cat "$dir/run/chipd.$uid.$CHIPD_INSTANCE.pid")
echo "detached: the pipe ended at ready; log in $log"

# 1b. the log names a client gone with its stream live, and no other: clients that
#     read their streams to the end and exited are not cancelled, one killed mid-stream
#     is (one line)
gone_line="is gone: cancelling"
for i in 1 2 3; do
	timeout 30 "$chipctl" submit --follow synthetic tokens=3 >/dev/null || fail "submit $i"
done
"$chipctl" submit --follow synthetic tokens=1000000 device_us=100 >"$dir/victim.out" 2>&1 &
victim=$!
until_true 300 "the long request streamed no token" grep -q '^@' "$dir/victim.out"
kill -9 "$victim"
until_true 300 "no '$gone_line' line for the client killed mid-stream" grep -q "$gone_line" "$log"
n=$(grep -c "$gone_line" "$log")
[ "$n" = 1 ] || fail "$n '$gone_line' lines, 1 expected (the killed client's): $(grep "$gone_line" "$log")"
echo "log: one '$gone_line' line, for the client killed mid-stream only"

# 2. a trace file is 0600; nothing temporary is left beside it or in the runtime dir
mkdir "$dir/out.d"
timeout 60 "$chipctl" trace --out "$dir/out.d/t.json" --seconds 1 >/dev/null || fail "trace"
[ "$(mode "$dir/out.d/t.json")" = 600 ] || fail "trace file mode $(mode "$dir/out.d/t.json")"
[ "$(ls "$dir/out.d")" = t.json ] || fail "left beside the trace: $(ls "$dir/out.d")"
# a trace into a directory that does not exist is refused before it records: exit 64
# at once, not after its 60 s (the timeout would end it with 124)
rc=0
timeout 30 "$chipctl" trace --out "$dir/missing/t.json" --seconds 60 >/dev/null 2>&1 || rc=$?
[ "$rc" = 64 ] || fail "trace into a missing directory: exit $rc, not 64"
# a collect the supervisor fails (its directory removed while recording) fails, and
# leaves no part behind either
mkdir "$dir/gone.d"
(sleep 0.3 && rmdir "$dir/gone.d") &
! timeout 60 "$chipctl" trace --out "$dir/gone.d/t.json" --seconds 1.5 >/dev/null 2>&1 ||
	fail "trace into a directory removed while recording succeeded"
wait $!
sock="$dir/run/chipd.$uid.$CHIPD_INSTANCE.sock"
[ -S "$sock" ] || fail "no handshake socket $sock"
[ "$(mode "$sock")" = 600 ] || fail "handshake socket mode $(mode "$sock")"
for f in "$dir/run"/* "$dir/run"/.[!.]*; do
	case $f in
	*.log | *.pid | "$sock" | */'*' | */'.[!.]*') ;;
	*) fail "left in the runtime directory: $f" ;;
	esac
done
timeout 30 "$chipctl" stop >/dev/null || fail "stop"
until_true 300 "chipd pid $pid did not exit after stop" gone "$pid"
grep -q "stopped" "$log" || fail "the stop is not in $log"
[ ! -e "$sock" ] || fail "the handshake socket $sock is left after the stop"

# 3. runtime directories that are not private
expect_refused() { # DIR WORDS: chipd refuses DIR with a message holding WORDS
	rc=0
	CHIPD_RUNTIME_DIR=$1 timeout 30 "$chipd" --foreground --chips 1 2>"$dir/err" || rc=$?
	[ "$rc" = 1 ] || fail "runtime dir $1: exit $rc, expected 1 ($(cat "$dir/err"))"
	if ! grep -q "$1" "$dir/err" || ! grep -q "$2" "$dir/err"; then
		fail "runtime dir $1: message lacks '$2': $(cat "$dir/err")"
	fi
	[ ! -e "$region" ] || fail "runtime dir $1: a region was made"
}
mkdir -m 0755 "$dir/open"
expect_refused "$dir/open" "mode 0755"
ln -s "$dir/run" "$dir/link"
expect_refused "$dir/link" "symbolic link"
if [ "$uid" = 0 ]; then
	mkdir -m 0700 "$dir/other"
	chown 65534 "$dir/other"
	expect_refused "$dir/other" "belongs to uid 65534"
fi
echo "runtime directory: open, linked and foreign ones refused"

# 3b. a detached log file others can read, or one that is a directory: refused naming
# what it is, its owner and mode; no pid file or region left
mkdir -m 0700 "$dir/run2"
log2="$dir/run2/chipd.$uid.$CHIPD_INSTANCE.log"
log_refused() { # CASE WHAT-THE-MESSAGE-SAYS
	local rc=0
	CHIPD_RUNTIME_DIR=$dir/run2 timeout 30 "$chipd" --chips 1 2>"$dir/err" || rc=$?
	[ "$rc" = 1 ] || fail "log file $1: exit $rc, expected 1 ($(cat "$dir/err"))"
	grep -q "log file $log2: $2: refusing it" "$dir/err" ||
		fail "log file $1: the message does not say why: $(cat "$dir/err")"
	[ ! -e "$dir/run2/chipd.$uid.$CHIPD_INSTANCE.pid" ] ||
		fail "log file $1: a pid file was left: $(ls -l "$dir/run2")"
	[ ! -e "$region" ] || fail "log file $1: a region was made"
}
: >"$log2"
chmod 0644 "$log2"
log_refused 0644 "a file of uid $uid, mode 0644"
rm "$log2"
mkdir -m 0700 "$log2"
log_refused "a directory" "not a regular file of uid $uid, mode 0700"
echo "log file: one open to others, or a directory, refused, its owner and mode named, no pid file left"

# 4. the spawner SIGKILLed while streams run
"$chipd" --foreground --chips 2 --grace-ms 20000 --notify-fd 3 3>"$dir/ready" 2>"$dir/fg.log" &
fg=$!
until_true 300 "chipd --foreground did not get ready" test -s "$dir/ready"
timeout 120 "$chipctl" submit --follow --json --count 2 synthetic tokens=1000000 device_us=1000 \
	>"$dir/sub.out" 2>&1 &
sub=$!
until_true 300 "the streams did not start" grep -q '"seq"' "$dir/sub.out"
spawner=$(ps -o pid= --ppid "$fg" | tr -d ' ')
[ -n "$spawner" ] || fail "no spawner under pid $fg"
workers=$(ps -o pid= --ppid "$spawner" | tr -d ' ' | tr '\n' ' ')
[ -n "$workers" ] || fail "no worker under the spawner $spawner"
kill -9 "$spawner"
# the bound: the grace is 20 s, so an exit within it shows the drain did not wait
until_true 150 "chipd did not exit within 15 s of its spawner's death" gone "$fg"
rc=0
wait "$fg" || rc=$?
fg=
[ "$rc" = 70 ] || fail "chipd exited $rc after its spawner died, expected 70"
until_true 150 "the client's streams did not end" gone "$sub"
rc=0
wait "$sub" || rc=$?
if [ "$rc" != 1 ] || ! grep -q worker_lost "$dir/sub.out"; then
	fail "client: exit $rc, $(tail -2 "$dir/sub.out")"
fi
# the workers were the spawner's children: init reaps them, maybe a moment later
dead() { gone "$1" || ! not_zombie "$1"; }
for w in $workers; do
	dead "$w" || fail "worker $w outlived chipd"
done
not_zombie "$spawner" || fail "the spawner $spawner is a zombie"
[ "$(grep -c "the spawner (pid $spawner) died" "$dir/fg.log")" = 1 ] ||
	fail "not one error line about the spawner"
! grep -q "cannot start the worker" "$dir/fg.log" || fail "restarts were tried without a spawner"
[ ! -e "$region" ] || fail "region $region left behind"
echo "spawner killed: chipd exited 70, streams ended worker_lost, workers gone"
# sanitized builds: every chipd process reported nothing (detached ones into the log)
if grep -q "Sanitizer\|runtime error:" "$log" "$dir/fg.log"; then
	fail "a sanitizer report: $(grep -h -A3 "Sanitizer\|runtime error:" "$log" "$dir/fg.log")"
fi
