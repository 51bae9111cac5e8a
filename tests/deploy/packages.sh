#!/bin/bash
# packages.sh BUILDDIR - chipd's Debian packages as an operator uses them (root; 77 =
# skipped). Builds them with deploy/package.sh (a Release tree in BUILDDIR), checks
# their Depends (the Debian runtime libraries chipd links: libbsd0, liburing2), runs
# lintian on them (no errors), installs them with dpkg -i (twice: the second is the
# upgrade path), checks the account and the units (installed, not enabled, ExecStart
# /usr/bin/chipd), runs the quick start's main job with /usr/bin/chipd and
# /usr/bin/chipctl as the chipd account (its own instance and runtime directory),
# README's Python example against python3-chipd, a C program built against
# libchipd-dev with pkg-config, the callable example (docs/examples/markov) built
# against chipd-callable.pc and run by /usr/bin/chipd --callables beside the built-in
# callables (the tokens must be the CPU walk's); then dpkg -r and dpkg -P, and checks
# that no file the packages listed is left, nor the chipd account's region, and that
# the account stays (docs/operations.md).
set -eu
[ $# -eq 1 ] || {
	echo "usage: packages.sh BUILDDIR" >&2
	exit 64
}
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
packages=(chipd libchipd0 libchipd-dev python3-chipd)
if [ "$(id -u)" -ne 0 ]; then
	echo "packages.sh: skipped: dpkg -i needs root"
	exit 77
fi
command -v dpkg >/dev/null || {
	echo "packages.sh: skipped: not a Debian machine (no dpkg)"
	exit 77
}
# One run at a time on the machine (two build trees' ctest runs included): it installs
# and removes the packages system-wide.
exec 9>/run/lock/chipd-deploy-packages.lock
flock -w 900 9 || {
	echo "packages.sh: FAIL: another run holds /run/lock/chipd-deploy-packages.lock" >&2
	exit 1
}
for p in "${packages[@]}"; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		echo "packages.sh: skipped: $p is installed here, and this test would remove it"
		exit 77
	fi
done
# shellcheck source=deploy/lib/packages.sh
. "$root/deploy/lib/packages.sh"
chipd_need_packages dpkg-dev lintian

tmp=$(mktemp -d)
chmod 755 "$tmp" # the chipd account reads the programs in it
instance="pkgtest-$$"
installed=
cleanup() {
	local rc=$?
	if [ -n "$installed" ]; then
		if [ -x /usr/bin/chipctl ]; then
			as_chipd /usr/bin/chipctl stop >/dev/null 2>&1 || true
		fi
		dpkg -P "${packages[@]}" >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM INT # ctest's timeout: clean up too
fail() {
	echo "packages.sh: FAIL: $*" >&2
	for f in "$tmp"/run/*.log "$tmp"/*.out; do
		[ -e "$f" ] && echo "----- $f" && cat "$f"
	done
	exit 1
}
# as_chipd CMD...: CMD as the chipd account, with a clean environment (PYTHONPATH and
# CHIPD_LIB unset: the installed module and library), this test's instance and
# runtime directory.
as_chipd() {
	runuser -u chipd -- env -i PATH=/usr/bin:/bin LANG=C.UTF-8 \
		CHIPD_INSTANCE="$instance" CHIPD_RUNTIME_DIR="$tmp/run" "$@"
}

echo "== deploy/package.sh"
"$root/deploy/package.sh" "$tmp/debs" "$build" >"$tmp/package.out" 2>&1 ||
	fail "deploy/package.sh failed"
debs=()
for p in "${packages[@]}"; do
	deb=$(ls "$tmp"/debs/"${p}"_*.deb 2>/dev/null) || fail "no package $p"
	debs+=("$deb")
done
for deb in "${debs[@]}"; do
	echo "-- dpkg -c $(basename "$deb")"
	dpkg -c "$deb" | awk '{print $1, $6, $7, $8}'
done

# depends DEB PATTERN...: each PATTERN (an extended regex) matches an entry of DEB's
# Depends field, which dpkg-shlibdeps fills from what its ELF files link.
depends() {
	local deb=$1 field
	shift
	field=$(dpkg-deb -f "$deb" Depends)
	echo "-- $(basename "$deb") Depends: $field"
	for want in "$@"; do
		tr ',' '\n' <<<"$field" | sed 's/^ *//' | grep -Eqx "$want" ||
			fail "$(basename "$deb"): no dependency $want in: $field"
	done
}
depends "${debs[0]}" adduser 'libbsd0 \(>= [0-9.]+\)' 'liburing2 \(>= [0-9.]+\)' \
	'libc6 \(>= [0-9.]+\)'
depends "${debs[1]}" 'libc6 \(>= [0-9.]+\)'
depends "${debs[2]}" 'libchipd0 \(= [^)]+\)' libmsgpack-dev
depends "${debs[3]}" 'python3:any' 'libchipd0 \(>= [^)]+\)'

echo "== lintian"
lintian --fail-on error "${debs[@]}" >"$tmp/lintian.out" 2>&1 || fail "lintian reports errors"
grep -v '^running with root privileges' "$tmp/lintian.out" || true

echo "== dpkg -i"
installed=1
if ! dpkg -i "${debs[@]}" >"$tmp/dpkg.out" 2>&1; then
	grep -q 'dependency problems' "$tmp/dpkg.out" || fail "dpkg -i failed"
	DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq >>"$tmp/dpkg.out" 2>&1 ||
		fail "apt-get -f install failed"
fi
# Again: the upgrade path (prerm upgrade, postinst configure with the account there).
dpkg -i "${debs[@]}" >>"$tmp/dpkg.out" 2>&1 || fail "dpkg -i over the installed packages failed"
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" | grep -q 'install ok installed' || fail "$p not installed"
	dpkg -L "$p" >"$tmp/$p.list"
done

getent passwd chipd >/dev/null || fail "no chipd account"
getent group chipd >/dev/null || fail "no chipd group"
[ "$(id -gn chipd)" = chipd ] || fail "chipd's group is $(id -gn chipd)"
uid=$(id -u chipd)
[ "$uid" -lt 1000 ] || fail "chipd is not a system account (uid $uid)"
grep -q '^ExecStart=/usr/bin/chipd --foreground$' /lib/systemd/system/chipd.service ||
	fail "chipd.service does not run /usr/bin/chipd"
grep -q '^ExecStart=/usr/bin/chipd --foreground --instance %i$' /lib/systemd/system/chipd@.service ||
	fail "chipd@.service does not run /usr/bin/chipd"
if ls /etc/systemd/system/*.wants/chipd*.service >/dev/null 2>&1; then
	fail "a chipd unit is enabled: $(ls /etc/systemd/system/*.wants/chipd*.service)"
fi
if [ -d /run/systemd/system ] && systemctl --quiet is-active chipd.service; then
	fail "chipd.service was started"
fi
if command -v systemd-analyze >/dev/null; then
	for unit in chipd.service chipd@.service chipd-export.service; do
		out=$(systemd-analyze verify --man=no "/lib/systemd/system/$unit" 2>&1) ||
			fail "systemd-analyze verify $unit: $out"
	done
fi
ldconfig -p | grep -q 'libchipd\.so\.0 ' || fail "libchipd.so.0 is not in ld.so's cache"
for f in /usr/share/man/man8/chipd.8.gz /usr/share/man/man1/chipctl.1.gz \
	/usr/share/bash-completion/completions/chipctl /usr/share/chipd/slurm/chipd.sbatch \
	/usr/share/chipd/prometheus/chipd.rules.yml /usr/share/doc/chipd/copyright; do
	[ -f "$f" ] || fail "$f missing"
done

echo "== the quick start's main job with /usr/bin/chipd, as chipd, instance $instance"
mkdir -m 700 "$tmp/run"
chown chipd:chipd "$tmp/run"
as_chipd /usr/bin/chipd --chips 2 --log-level warn || fail "chipd did not start"
pid=$(as_chipd /usr/bin/chipctl ping --json | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
[ -n "$pid" ] || fail "chipctl ping gave no pid"
as_chipd /usr/bin/chipctl status || fail "chipctl status"
as_chipd /usr/bin/chipctl submit --follow --count 4 paged_attention layers=2 heads=8 \
	kv_heads=2 head_dim=64 context=128 tokens=12 >"$tmp/submit.out" ||
	fail "chipctl submit --follow"
[ "$(grep -c '^request @[0-9]*: completed, 12 tokens' "$tmp/submit.out")" -eq 4 ] ||
	fail "not 4 requests completed with 12 tokens"
as_chipd /usr/bin/chipctl stats >"$tmp/stats.out" || fail "chipctl stats"
grep -q 'completed' "$tmp/stats.out" || fail "chipctl stats has no completed counter"

echo "== README's Python example against python3-chipd"
# shellcheck disable=SC2016 # backquotes, not an expansion
sed -n '/^```python$/,/^```$/{/^```/d;p}' "$root/README.md" >"$tmp/example.py"
[ -s "$tmp/example.py" ] || fail "no python example in README.md"
module=$(as_chipd python3 -c 'import chipd; print(chipd.__file__)') || fail "import chipd"
[ "$module" = /usr/lib/python3/dist-packages/chipd/__init__.py ] || fail "chipd from $module"
as_chipd python3 "$tmp/example.py" >"$tmp/python.out" 2>&1 || fail "the Python example failed"
for re in "state='ready'" '^[0-9]+ [0-9]+ final$' '^refused: bad_request '; do
	grep -Eq "$re" "$tmp/python.out" || fail "the Python example printed no line matching $re"
done

echo "== a C program built against libchipd-dev (pkg-config --cflags --libs chipd)"
cat >"$tmp/status.c" <<'EOF'
#include <chipd.h>
#include <stdio.h>

int main(void)
{
	struct chipd_error err = {0};
	chipd_conn *c;
	if (chipd_connect(NULL, &c, &err) != 0) {
		fprintf(stderr, "connect: %s\n", err.message);
		return 1;
	}
	static struct chipd_status st;
	int rc = chipd_status(c, 5000, &st, &err);
	if (rc == 0)
		printf("%s %u chips\n", chipd_sup_state_name(st.state), st.nchips);
	chipd_close(c);
	return rc == 0 ? 0 : 1;
}
EOF
# shellcheck disable=SC2046 # pkg-config's words
cc -std=c11 -Wall -Werror -o "$tmp/status" "$tmp/status.c" $(pkg-config --cflags --libs chipd) ||
	fail "the C program did not build"
ldd "$tmp/status" | grep -q '/libchipd\.so\.0 ' || fail "the C program does not use libchipd.so.0"
out=$(as_chipd "$tmp/status") || fail "the C program failed"
[ "$out" = "ready 2 chips" ] || fail "the C program printed: $out"

echo "== a callable built against libchipd-dev (pkg-config --cflags chipd-callable)"
callables=$(pkg-config --variable=callablesdir chipd-callable) ||
	fail "pkg-config knows no chipd-callable"
for cl in gemm paged_attention synthetic; do
	[ -f "$callables/$cl.so" ] || fail "no built-in callable $callables/$cl.so"
done
# The out-of-tree example (docs/examples/markov), built with make and pkg-config alone.
cp -r "$root/docs/examples/markov" "$tmp/markov"
make -s -C "$tmp/markov" clean # a stale in-tree build
make -C "$tmp/markov" >"$tmp/markov.out" 2>&1 || fail "the callable example did not build"

# stop_chipd PID: chipctl stop, then PID gone (or a zombie nobody reaps: chipd
# detached) within 20 s, and its node region with it.
running() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"; }
stop_chipd() {
	as_chipd /usr/bin/chipctl stop || fail "chipctl stop"
	for _ in $(seq 1 200); do
		running "$1" || break
		sleep 0.1
	done
	running "$1" && fail "chipd (pid $1) did not stop"
	[ ! -e "/dev/shm/chipd.$uid.$instance" ] || fail "region left behind"
}
echo "== chipctl stop"
stop_chipd "$pid"

echo "== /usr/bin/chipd --callables: the example beside the built-ins"
mkdir -m 0755 "$tmp/callables"
install -m 0755 "$tmp/markov/markov.so" "$tmp/markov/markov_kernels_sim.so" "$callables"/*.so \
	"$tmp/callables/"
as_chipd /usr/bin/chipd --chips 1 --log-level warn --callables "$tmp/callables" ||
	fail "chipd --callables did not start"
pid=$(as_chipd /usr/bin/chipctl ping --json | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
as_chipd /usr/bin/chipctl submit --follow markov vocab=64 tokens=12 seed=7 >"$tmp/markov-run.out" ||
	fail "the example's request failed"
got=$(awk 'NF == 3 && $1 ~ /^@/ { print $3 }' "$tmp/markov-run.out")
want=$("$tmp/markov/markov-ref" 64 12 7)
[ "$got" = "$want" ] || fail "markov streamed $(echo $got), the CPU walk is $(echo $want)"
stop_chipd "$pid"

echo "== dpkg -r, dpkg -P"
# The byte-code postinst made, for the check below (the prerm removes it).
ls /usr/lib/python3/dist-packages/chipd/__pycache__/*.pyc >/dev/null 2>&1 ||
	fail "python3-chipd's modules were not byte-compiled"
dpkg -r "${packages[@]}" >>"$tmp/dpkg.out" 2>&1 || fail "dpkg -r failed"
dpkg -P "${packages[@]}" >>"$tmp/dpkg.out" 2>&1 || fail "dpkg -P failed"
installed=
for p in "${packages[@]}"; do
	! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'installed' ||
		fail "$p still installed"
done
# Every file is gone; a directory may stay when another package owns it or it holds
# what is not ours (/usr/bin).
left=0
while read -r path; do
	[ -e "$path" ] || [ -L "$path" ] || continue
	if [ -d "$path" ]; then # /lib too: a link to usr/lib on Debian 12
		dpkg -S "$path" >/dev/null 2>&1 && continue
		[ -n "$(ls -A "$path")" ] && continue
	fi
	echo "packages.sh: left after purge: $path" >&2
	left=1
done < <(cat "$tmp"/*.list | sort -u)
[ "$left" -eq 0 ] || fail "files left after dpkg -P"
[ ! -e /usr/lib/python3/dist-packages/chipd ] || fail "dist-packages/chipd left"
ls /dev/shm/chipd."$uid".* >/dev/null 2>&1 && fail "a region of chipd's left"
getent passwd chipd >/dev/null || fail "the chipd account was removed (documented: it stays)"
echo "packages.sh: ok"
