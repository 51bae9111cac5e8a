#!/usr/bin/env bash
# run.sh SECONDS [BUILD_DIR] [TARGET] - builds a libFuzzer target with clang
# (-fsanitize=fuzzer,address,undefined) if needed, then fuzzes it for SECONDS on the
# committed seed corpus (tests/fuzz/corpus/TARGET), growing a scratch copy of it in
# BUILD_DIR (default build/fuzz). TARGET: decode (the message decoder, the default),
# region (node-region attach) or selftest (crashes at once: run_check.sh). Exit 0: no
# finding; 1: a finding (the crashing input is saved in BUILD_DIR and named in the
# output); 77: clang or its fuzzer runtime (Debian: clang, libclang-rt-14-dev) is
# missing, and nothing else.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:?usage: run.sh SECONDS [BUILD_DIR] [decode|region|selftest]}
out=${2:-$root/build/fuzz}
target=${3:-decode}
mkdir -p "$out"
out=$(cd "$out" && pwd) # the fuzzer runs from there: a relative BUILD_DIR would miss it

cc=""
for c in clang clang-16 clang-15 clang-14; do
	if command -v "$c" >/dev/null; then
		cc=$c
		break
	fi
done
if [ -z "$cc" ]; then
	echo "fuzz: skipped: clang not found (Debian: apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
if ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n){(void)d;(void)n;return 0;}' |
	"$cc" -x c -fsanitize=fuzzer -o "$out/probe" - 2>/dev/null; then
	echo "fuzz: skipped: $cc has no libFuzzer runtime (Debian: apt-get install libclang-rt-14-dev)"
	exit 77
fi

bin=$out/fuzz_$target
case $target in
decode)
	srcs=("$here/fuzz_decode.c" "$root/proto/mpread.c" "$root/proto/codec.c"
		"$root/proto/msg_init.c" "$root/proto/schema.c" "$root/proto/errors.c")
	max_len=8192
	;;
region)
	# all of libchipd and shm/: attach, counters, rings, mailbox
	srcs=("$here/fuzz_region.c" "$root"/proto/{mpread,codec,msg_init,schema,errors,dispatch,xchg,node,hello,client,client_data,client_stream}.c
		"$root"/shm/{proc,wait,region,mbox,mbox_reap,ring,ctr,fdpass}.c)
	max_len=8192 # node: header, descriptor, directory, counters; then the exchange region
	;;
selftest)
	# aborts on an input that begins "crash" (its seed): run_check.sh expects exit 1
	srcs=("$here/fuzz_selftest.c")
	max_len=64
	;;
*)
	echo "fuzz: unknown target $target (decode, region, selftest)" >&2
	exit 2
	;;
esac
stale=0
[ -x "$bin" ] || stale=1
for s in "${srcs[@]}" "$root"/proto/*.h "$root"/proto/include/*.h "$root"/shm/*.h; do
	[ "$s" -nt "$bin" ] && stale=1
done
if [ "$stale" = 1 ]; then
	echo "fuzz: building $bin with $cc"
	# shellcheck disable=SC2046 # pkg-config prints several words on purpose
	"$cc" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -I"$root/proto/include" -I"$root/proto" -I"$root/shm" \
		$(pkg-config --cflags msgpack) "${srcs[@]}" $(pkg-config --libs msgpack) -lpthread -lrt \
		-o "$bin"
fi

corpus=$out/corpus-$target
[ "$target" = decode ] && corpus=$out/corpus # where earlier runs grew it
mkdir -p "$corpus"
cp -n "$here/corpus/$target"/* "$corpus"/ 2>/dev/null || true
echo "fuzz: $target: running $secs s on $(find "$corpus" -type f | wc -l) inputs"
cd "$out"
# -rss_limit_mb and -malloc_limit_mb make an unbounded allocation a finding. A finding
# exits 1: libFuzzer's own status for one is 77, which ctest reads as "skipped".
status=0
stamp=$(mktemp "$out/.run.XXXXXX") # what this run found is newer than this
"$bin" -max_total_time="$secs" -max_len="$max_len" -rss_limit_mb=512 -malloc_limit_mb=64 \
	-timeout=5 -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 "$corpus" 2>&1 |
	tail -25 || status=${PIPESTATUS[0]}
# A timeout is a wall-clock alarm: on a loaded machine a stall of the whole process
# (other tests, other VMs) can outlast it. A timeout input is run again alone, under
# the same limit: a hang hangs again and stays a finding; one that completes was the
# machine, and is kept as stall-* for a look, not failed on.
found=$(find . -maxdepth 1 -newer "$stamp" \( -name 'crash-*' -o -name 'leak-*' -o \
	-name 'timeout-*' -o -name 'oom-*' \) -printf '%f\n')
rm -f "$stamp"
if [ "$status" -ne 0 ] && [ -n "$found" ] && [ -z "$(printf '%s\n' "$found" | grep -v '^timeout-')" ]; then
	again=0
	for f in $found; do
		"$bin" -timeout=5 -timeout_exitcode=1 -rss_limit_mb=512 -malloc_limit_mb=64 "$f" \
			>/dev/null 2>&1 || again=1
	done
	if [ "$again" = 0 ]; then
		for f in $found; do mv "$f" "stall-${f#timeout-}"; done
		echo "fuzz: $found: completed within -timeout when run again alone: a stall of" \
			"the machine, not a hang (kept in $out as stall-*)"
		status=0 cut=" (cut short by the stall)"
	fi
fi
if [ "$status" -ne 0 ]; then
	echo "fuzz: FINDING (exit $status); reproducer in $out (crash-*, leak-*, timeout-*, oom-*)"
	exit 1
fi
echo "fuzz: no finding in $secs s${cut:-}"
