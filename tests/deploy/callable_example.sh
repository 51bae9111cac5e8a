#!/bin/bash
# callable_example.sh BUILDDIR [--build-tree] - the out-of-tree callable example
# (docs/examples/markov) as a user builds and runs it: BUILDDIR installed under a
# scratch prefix (`cmake --install`), the example copied out of the source tree and
# built with only that prefix's pkg-config file (chipd-callable.pc) - or, with
# --build-tree, against BUILDDIR itself, not installed (PKG_CONFIG_PATH=BUILDDIR/kernels:
# chipd-callable-uninstalled.pc, the source tree's headers), run by BUILDDIR's chipd
# and chipctl with BUILDDIR's built-ins: the callable and its own sim
# kernel file (markov_kernels_sim.so: every step runs its kernel), loaded with the
# built-ins by the installed chipd (`--callables DIR`, two sim chips), then requests on
# each chip whose tokens must equal the CPU walk (`markov-ref`), beside a built-in's
# request; then the example registered again, from another file, while the node runs
# (`chipctl register`), its tokens checked on both chips, and unregistered.
set -eu
[ $# -eq 1 ] || { [ $# -eq 2 ] && [ "$2" = --build-tree ]; } || {
	echo "usage: callable_example.sh BUILDDIR [--build-tree]" >&2
	exit 64
}
build=$(cd "$1" && pwd)
tree=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
for tool in make cc pkg-config; do
	command -v "$tool" >/dev/null || {
		echo "callable_example.sh: skipped: no $tool"
		exit 77
	}
done
dir=$(mktemp -d)
prefix=$dir/prefix
bin=
export CHIPD_INSTANCE="cl-example-$$" CHIPD_RUNTIME_DIR="$dir/run"
cleanup() {
	local rc=$?
	# a chipd still running after a failure; one the script stopped may be gone
	# already (exit 69), which must not fail a passed run (set -e holds in the trap)
	if [ -x "$bin/chipctl" ]; then
		timeout 10 "$bin/chipctl" stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM INT
fail() {
	echo "callable_example.sh: FAIL: $*" >&2
	for f in "$dir"/*.out; do
		[ -e "$f" ] && echo "----- $f" && cat "$f"
	done
	exit 1
}

if [ -n "$tree" ]; then
	bin=$build/bin
	export PKG_CONFIG_PATH="$build/kernels"
	headers=$root/kernels/include # the source tree's, through the -uninstalled file
else
	bin=$prefix/bin
	echo "== cmake --install $build --prefix (scratch)"
	cmake --install "$build" --prefix "$prefix" >"$dir/install.out" || fail "cmake --install"
	export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
	headers=$prefix/
fi
chipctl=$bin/chipctl

echo "== the example, out of the tree, against $PKG_CONFIG_PATH's chipd-callable only"
cp -r "$root/docs/examples/markov" "$dir/markov"
make -s -C "$dir/markov" clean # a stale in-tree build
make -C "$dir/markov" >"$dir/make.out" 2>&1 || fail "make"
grep -q -- "-I$headers" "$dir/make.out" || fail "the build did not use $headers"

echo "== chipd --callables (the example and the built-ins)"
mkdir -m 0755 "$dir/callables"
install -m 0755 "$dir/markov/markov.so" "$dir/markov/markov_kernels_sim.so" \
	"$(pkg-config --variable=callablesdir chipd-callable)"/*.so "$dir/callables/"
timeout 30 "$bin/chipd" --chips 2 --log-level warn --callables "$dir/callables" \
	>"$dir/chipd.out" 2>&1 || fail "chipd did not start"
timeout 10 "$chipctl" callables --json >"$dir/callables.out" || fail "chipctl callables"
for cl in markov gemm synthetic paged_attention; do
	grep -q "\"$cl\"" "$dir/callables.out" || fail "callable $cl not loaded"
done

# tokens VOCAB N SEED CHIP: the request's token values, one per line, in order.
tokens() {
	timeout 60 "$chipctl" submit --chip "$4" --follow markov vocab="$1" tokens="$2" \
		seed="$3" >"$dir/submit.out" || fail "submit markov $* failed"
	awk 'NF == 3 && $1 ~ /^@/ { print $3 }' "$dir/submit.out"
}
for chip in 0 1; do
	for args in "1024 16 3" "2 5 0" "64 40 12345"; do
		# shellcheck disable=SC2086 # the arguments' words
		got=$(tokens $args $chip)
		# shellcheck disable=SC2086
		want=$("$dir/markov/markov-ref" $args)
		[ "$got" = "$want" ] || fail "chip $chip, markov $args: got $(echo $got), want $(echo $want)"
	done
done
timeout 60 "$chipctl" submit gemm m=16 chain=2 >"$dir/gemm.out" || fail "a built-in's request"
# a request outside the example's table is refused by chipd, with the table's range
if timeout 10 "$chipctl" submit markov vocab=1 >"$dir/refused.out" 2>&1; then
	fail "vocab=1 was accepted"
fi
grep -q "vocab 1 outside \[2, 1024\]" "$dir/refused.out" || fail "no range message"

echo "== chipctl register while the node runs, then unregister"
mkdir -m 0755 "$dir/live"
# another file: loaded afresh, its kernel file beside it
install -m 0755 "$dir/markov/markov.so" "$dir/markov/markov_kernels_sim.so" "$dir/live/"
timeout 30 "$chipctl" register --name markov_live "$dir/live/markov.so" >"$dir/register.out" ||
	fail "chipctl register"
grep -q "^callable markov_live (version 1) registered from $dir/live/markov.so" \
	"$dir/register.out" || fail "register's answer"
timeout 10 "$chipctl" callables --json >"$dir/callables.out" || fail "chipctl callables"
grep -q '"markov_live"' "$dir/callables.out" || fail "markov_live not listed"
for chip in 0 1; do
	got=$(timeout 60 "$chipctl" submit --chip "$chip" --follow markov_live vocab=1024 \
		tokens=40 seed=3 | awk 'NF == 3 && $1 ~ /^@/ { print $3 }') ||
		fail "submit markov_live"
	want=$("$dir/markov/markov-ref" 1024 40 3)
	[ "$got" = "$want" ] || fail "chip $chip, markov_live: got $(echo $got), want $(echo $want)"
done
timeout 30 "$chipctl" unregister markov_live >"$dir/unregister.out" || fail "chipctl unregister"
if timeout 10 "$chipctl" submit markov_live vocab=2 >"$dir/gone.out" 2>&1; then
	fail "markov_live still takes requests after unregister"
fi
grep -q "markov_live" "$dir/gone.out" || fail "the refusal does not name markov_live"
timeout 10 "$chipctl" callables --json >"$dir/callables.out" || fail "chipctl callables"
if grep -q '"markov_live"' "$dir/callables.out"; then
	fail "markov_live still listed after unregister"
fi
# the one loaded at start still serves
[ "$(tokens 2 5 0 1)" = "$("$dir/markov/markov-ref" 2 5 0)" ] || fail "markov after unregister"

timeout 10 "$chipctl" stop >/dev/null || fail "chipctl stop"
echo "callable_example.sh: markov built out of tree against ${tree:+the build tree }$PKG_CONFIG_PATH, tokens equal the CPU walk on both chips, loaded at start and registered at run time: ok"
