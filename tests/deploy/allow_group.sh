#!/bin/bash
# allow_group.sh CHIPD CHIPCTL [LIBCHIPD PYTHONPATH] - chipd --allow-group with real uids (root; 77 =
# skipped). Makes a group and three accounts, chipdt-PID-{s,m,o}: s runs chipd (and is
# in the group, to give its files to it), m is a member, o is not. Then:
#  1. chipd as s with --allow-group: runtime directory 0750, socket 0660, node region
#     0440, all of the group; pid file and log 0600 of s; a second chipd for the
#     instance with another group exits 73 and leaves the directory's group alone;
#  2. as m (CHIPD_USER=s): ping, a submit that streams its tokens, stats (no
#     handshake), the node-wide operations (stop) refused naming why, a cancel of s's
#     request not_found (it stays live), of its own request done; with LIBCHIPD, the
#     Python client's ping, submit and stats too;
#  3. as m: no read-write open of the node region, no file made in the runtime
#     directory, none of its files read;
#  4. as o: refused (the region says it is not in the group); as root, which the
#     kernel lets through, the handshake is refused with the error envelope naming
#     the group, and counted in clients_refused;
#  5. s stops it; without --allow-group the node stays s's own (0400, 0700, 0600) and
#     m is refused.
# The accounts and the group are removed on every exit. Every wait is bounded.
set -eu
[ $# -eq 2 ] || [ $# -eq 4 ] || {
	echo "usage: allow_group.sh CHIPD CHIPCTL [LIBCHIPD PYTHONPATH]" >&2
	exit 64
}
chipd=$1
chipctl=$2
lib=${3:-}
pypath=${4:-}
if [ "$(id -u)" -ne 0 ]; then
	echo "allow_group.sh: skipped: making users and groups needs root"
	exit 77
fi
for t in groupadd useradd userdel groupdel setpriv; do
	command -v "$t" >/dev/null || {
		echo "allow_group.sh: skipped: no $t"
		exit 77
	}
done
grp="chipdt-$$"
srv="$grp-s"
mem="$grp-m"
oth="$grp-o"
tmp=$(mktemp -d)
chmod 755 "$tmp"
rundir="$tmp/run"
made=
cleanup() {
	local rc=$?
	if id "$srv" >/dev/null 2>&1; then
		as "$srv" "$chipctl" stop >/dev/null 2>&1 || true
		# bounded: the stop's grace, then whatever is left of the account's processes
		for _ in $(seq 100); do pgrep -u "$srv" >/dev/null || break; sleep 0.1; done
		pkill -KILL -u "$srv" 2>/dev/null || true
	fi
	for u in $made; do userdel "$u" >/dev/null 2>&1 || true; done
	groupdel "$grp" >/dev/null 2>&1 || true
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
fail() {
	echo "allow_group.sh: FAIL: $*" >&2
	[ ! -e "$rundir" ] || ls -la "$rundir" >&2
	exit 1
}
# the sanitizers' settings (halt_on_error) reach the programs run as the accounts
san=()
for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
	[ -z "${!v:-}" ] || san+=("$v=${!v}")
done
# as USER CMD...: CMD as USER (its own groups from the group database), with the test's
# instance and a clean environment
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups --reset-env \
		env ${san[@]+"${san[@]}"} CHIPD_INSTANCE="agt-$$" "$@"
}
# guest USER CMD...: chipctl's CMD as USER against s's chipd
guest() {
	local u=$1
	shift
	as "$u" env CHIPD_USER="$srv" timeout 60 "$chipctl" "$@"
}
until_true() {
	local n=$1 what=$2
	shift 2
	until "$@"; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || fail "$what"
		sleep 0.1
	done
}
stat_of() { stat -c "%a %U %G" "$1"; }

groupadd "$grp"
made="$srv"
useradd -M -N -g nogroup -s /usr/sbin/nologin "$srv"
made="$made $mem"
useradd -M -N -g nogroup -s /usr/sbin/nologin "$mem"
for u in "$srv" "$mem"; do usermod -aG "$grp" "$u"; done
made="$made $oth"
useradd -M -N -g nogroup -s /usr/sbin/nologin "$oth"
# the programs must be reachable by the accounts (a private build tree is not)
as "$oth" test -x "$chipd" -a -x "$chipctl" || {
	echo "allow_group.sh: skipped: $chipd or $chipctl is not reachable by other users"
	exit 77
}
suid=$(id -u "$srv")
inst="agt-$$"
region="/dev/shm/chipd.$suid.$inst"

# 1. chipd as s, serving the group, in a runtime directory made for it as systemd's
# RuntimeDirectory= would (s's own, 0700)
install -d -o "$srv" -m 0700 "$rundir"
as "$srv" env CHIPD_RUNTIME_DIR="$rundir" "$chipd" --chips 1 --allow-group "$grp" ||
	fail "chipd --allow-group did not start"
[ "$(stat_of "$rundir")" = "750 $srv $grp" ] || fail "runtime dir: $(stat_of "$rundir")"
sock="$rundir/chipd.$suid.$inst.sock"
[ "$(stat_of "$sock")" = "660 $srv $grp" ] || fail "socket: $(stat_of "$sock")"
[ "$(stat_of "$region")" = "440 $srv $grp" ] || fail "node region: $(stat_of "$region")"
for f in "$rundir/chipd.$suid.$inst.pid" "$rundir/chipd.$suid.$inst.log"; do
	[ "$(stat -c %a "$f")" = 600 ] || fail "$f: mode $(stat -c %a "$f")"
done
echo "1. the node is open to group $grp: dir 0750, socket 0660, region 0440; files 0600"
# a second chipd for the instance, serving another group of s's (its primary,
# nogroup), is refused (73) and leaves the runtime directory to the running one's group
rc=0
as "$srv" env CHIPD_RUNTIME_DIR="$rundir" "$chipd" --chips 1 --allow-group nogroup \
	>"$tmp/second.out" 2>&1 || rc=$?
[ "$rc" = 73 ] || fail "a second chipd: exit $rc, not 73: $(cat "$tmp/second.out")"
[ "$(stat_of "$rundir")" = "750 $srv $grp" ] ||
	fail "a refused second chipd changed the runtime dir: $(stat_of "$rundir")"
echo "1b. a second chipd for group nogroup: exit 73, the directory still $grp's"

# 2. the member uses it
guest "$mem" ping >/dev/null || fail "member: ping"
out=$(guest "$mem" submit --follow --json synthetic tokens=5 device_us=100) ||
	fail "member: submit: $out"
[ "$(printf '%s\n' "$out" | grep -c '"seq"')" -ge 5 ] || fail "member: tokens: $out"
printf '%s\n' "$out" | tail -1 | grep -q completed || fail "member: not completed: $out"
guest "$mem" stats | grep -q "requests" || fail "member: stats"
if err=$(guest "$mem" stop 2>&1); then
	fail "member: stop was allowed"
fi
case $err in
*"permission denied: stop is for uid $suid"*) ;;
*) fail "member: stop refused without the reason: $err" ;;
esac
guest "$mem" ping >/dev/null || fail "the node stopped at a member's stop"
echo "2. member $mem: ping, submit (5 tokens), stats; stop refused: $err"
# a cancel reaches the requests of one's own uid only: s's request is not_found for
# the member (and still live: s cancels it), the member's own is cancelled
live() { # live N: N requests in flight (the gauge is written at each sweep)
	[ "$(as "$srv" timeout 60 "$chipctl" stats | awk '$1 == "queue_depth" {print $2; exit}')" = "$1" ]
}
long="synthetic tokens=100000 device_us=1000"
# shellcheck disable=SC2086 # the workload's words
as "$srv" timeout 120 "$chipctl" submit --id 777 $long >"$tmp/s.out" 2>&1 &
until_true 300 "s's request did not start" live 1
if err=$(guest "$mem" cancel 777 2>&1); then
	fail "member cancelled s's request"
fi
case $err in
*"no live request 777"*"[not_found]"*) ;;
*) fail "member: cancel of s's request: $err" ;;
esac
as "$srv" timeout 60 "$chipctl" cancel 777 >/dev/null || fail "s could not cancel its request"
wait $! || true
grep -q cancelled "$tmp/s.out" || fail "s's request did not end cancelled: $(cat "$tmp/s.out")"
until_true 300 "s's request is still counted" live 0
# shellcheck disable=SC2086
guest "$mem" submit --id 778 $long >"$tmp/m.out" 2>&1 &
until_true 300 "the member's request did not start" live 1
guest "$mem" cancel 778 >/dev/null || fail "member could not cancel its own request"
wait $! || true
grep -q cancelled "$tmp/m.out" || fail "member's request did not end cancelled: $(cat "$tmp/m.out")"
echo "   cancel: s's request not_found for the member ($err); its own cancelled"
if [ -n "$lib" ]; then
	out=$(as "$mem" env CHIPD_USER="$srv" CHIPD_LIB="$lib" PYTHONPATH="$pypath" \
		timeout 60 python3 -c '
import chipd
c = chipd.connect()
c.ping()
toks = c.submit("synthetic", tokens=3, device_us=100).wait()
print(len(toks), c.stats()["supervisor.requests"] > 0)
c.close()' 2>&1) || fail "member: python client: $out"
	[ "$out" = "3 True" ] || fail "member: python client printed: $out"
	echo "   the Python client as the member: ping, 3 tokens, stats"
fi

# 3. the member writes nothing of the node's
if as "$mem" sh -c ": 1<>'$region'" 2>/dev/null; then
	fail "member opened the node region read-write"
fi
if as "$mem" sh -c ": >'$rundir/planted'" 2>/dev/null; then
	fail "member made a file in the runtime directory"
fi
if as "$mem" cat "$rundir/chipd.$suid.$inst.log" >/dev/null 2>&1; then
	fail "member read chipd's log"
fi
echo "3. member: no read-write open of the region, nothing made or read in $rundir"

# 4. the others are refused
rc=0
err=$(guest "$oth" ping 2>&1) || rc=$?
[ "$rc" -eq 77 ] || fail "non-member: ping exit status $rc (want 77, permission): $err"
case $err in
*"is not in its group (chipd --allow-group)"*) ;;
*) fail "non-member: refused without the reason: $err" ;;
esac
echo "4. non-member $oth refused: $err"
if err=$(env CHIPD_INSTANCE="$inst" CHIPD_USER="$srv" timeout 60 "$chipctl" ping 2>&1); then
	fail "root (not in the group) was let through the handshake"
fi
case $err in
*"permission denied: uid 0 is not a member of group $grp"*"[bad_request]"*) ;;
*) fail "root: refused without the envelope naming the group: $err" ;;
esac
# counted before the envelope was sent
[ "$(as "$srv" timeout 60 "$chipctl" stats | awk '$1 == "clients_refused" {print $2}')" = 1 ] ||
	fail "clients_refused: $(as "$srv" timeout 60 "$chipctl" stats | grep refused)"
echo "   root (not in the group): handshake refused: $err"

# 5. stopped by s; without --allow-group the node is s's alone
as "$srv" timeout 60 "$chipctl" stop >/dev/null || fail "s: stop"
until_true 300 "chipd did not stop" test ! -e "$region"
rm -rf "$rundir"
install -d -o "$srv" -m 0700 "$rundir"
as "$srv" env CHIPD_RUNTIME_DIR="$rundir" "$chipd" --chips 1 || fail "chipd did not start"
[ "$(stat -c %a "$rundir")" = 700 ] || fail "runtime dir: $(stat_of "$rundir")"
[ "$(stat -c %a "$sock")" = 600 ] || fail "socket: $(stat_of "$sock")"
[ "$(stat -c %a "$region")" = 400 ] || fail "region: $(stat_of "$region")"
if err=$(guest "$mem" ping 2>&1); then
	fail "member used a chipd without --allow-group"
fi
case $err in
*"private to its owner: uid $(id -u "$mem") may not use it (no chipd --allow-group)"*) ;;
*) fail "member: refused without the reason: $err" ;;
esac
as "$srv" timeout 60 "$chipctl" stop >/dev/null || fail "s: stop"
until_true 300 "chipd did not stop" test ! -e "$region"
echo "5. without --allow-group: 0700, 0600, 0400; member refused: $err"
