#!/usr/bin/env bash
# compare.sh - before/after ratios of chipbench modes (mailbox, e2e, overlap, dispatch)
# for two builds of chipd, measured in the same run: each round runs every mode of
# --modes with OLD, then with NEW, so both sides see the same machine load.
# Prints one table (tests/bench/compare.py): the median of each metric over the
# rounds on each side, their ratio, and the "paired" ratio (the median of the
# per-round ratios: the two runs of a round ran one after the other).
#
# usage: tests/bench/compare.sh [--modes LIST] [--rounds N] [--quick] [--keep DIR]
#                               [--idle-wait S] [--idle-busy P] OLD_BUILD NEW_BUILD
#   OLD_BUILD, NEW_BUILD  build directories holding tests/bench/chipbench and
#               bin/chipd (targets chipbench and chipd; a Release build for numbers)
#   --modes LIST  comma list of mailbox, e2e, overlap, dispatch, run in the order given
#               each round (default mailbox,e2e); each mode runs with its default
#               options, except mailbox --no-iceoryx and dispatch --no-starpu (the
#               peers are no part of either build)
#   --rounds N  rounds (default 7)
#   --quick     tiny sizes: checks the pipeline in seconds, numbers worthless
#   --keep DIR  keep each run's JSON there (default: a temp dir, removed at the end)
#   --idle-wait S  before each run, wait at most S seconds (default 0: not at all) for
#               a second in which the CPUs were under --idle-busy percent busy (50)
#
# Example, the commit before a change against the working tree:
#   git worktree add /tmp/old 5229c2f
#   for t in /tmp/old .; do cmake -S $t -B $t/build-release -DCMAKE_BUILD_TYPE=Release \
#       && cmake --build $t/build-release -j --target chipbench chipd; done
#   tests/bench/compare.sh --modes overlap,dispatch,e2e --rounds 7 \
#       /tmp/old/build-release build-release
# Measure on an otherwise idle machine; read medians and paired ratios, not single runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

builds=() modes=mailbox,e2e rounds=7 quick=0 keep="" idle_wait=0 idle_busy=50
while [ $# -gt 0 ]; do
	case $1 in
	--modes) modes=${2:?--modes LIST}; shift 2 ;;
	--rounds) rounds=${2:?--rounds N}; shift 2 ;;
	--quick) quick=1; shift ;;
	--keep) keep=${2:?--keep DIR}; shift 2 ;;
	--idle-wait) idle_wait=${2:?--idle-wait S}; shift 2 ;;
	--idle-busy) idle_busy=${2:?--idle-busy PERCENT}; shift 2 ;;
	-h | --help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "compare.sh: unknown option '$1' (--help)" >&2; exit 64 ;;
	*) builds+=("$1"); shift ;; # options may follow the builds too
	esac
done
set -- "${builds[@]}"
if [ $# -ne 2 ]; then
	echo "compare.sh: need OLD_BUILD and NEW_BUILD (--help)" >&2
	exit 64
fi
case $rounds in '' | *[!0-9]* | 0)
	echo "compare.sh: --rounds $rounds: not a positive number" >&2; exit 64 ;;
esac
IFS=, read -ra mode_list <<<"$modes"
[ ${#mode_list[@]} -gt 0 ] || { echo "compare.sh: --modes: empty" >&2; exit 64; }
for m in "${mode_list[@]}"; do
	case $m in mailbox | e2e | overlap | dispatch) ;;
	*) echo "compare.sh: --modes: '$m' is not mailbox, e2e, overlap or dispatch" >&2; exit 64 ;;
	esac
done
case $idle_wait$idle_busy in *[!0-9]*)
	echo "compare.sh: --idle-wait and --idle-busy take whole numbers" >&2; exit 64 ;;
esac
for b in "$1" "$2"; do
	for f in tests/bench/chipbench bin/chipd; do
		if [ ! -x "$b/$f" ]; then
			echo "compare.sh: $b/$f: missing (build targets chipbench and chipd there)" >&2
			exit 64
		fi
	done
done
old=$(cd "$1" && pwd) new=$(cd "$2" && pwd)

if [ -n "$keep" ]; then
	mkdir -p "$keep"
	raw=$keep
else
	raw=$(mktemp -d)
	trap 'rm -rf "$raw"' EXIT
fi

# mode_args MODE: chipbench MODE's options into the array args (--quick: tiny sizes)
mode_args() {
	case $1 in
	mailbox) args=(--no-iceoryx) q=(--iters 2000 --sleep-iters 200) ;;
	e2e) args=() q=(--clients "1,4" --seconds 0.2 --delivery-tokens 8) ;;
	overlap) args=() q=(--tokens 20 --device-us 500) ;;
	dispatch) args=(--no-starpu) q=(--tasks 2000 --step 256 --runs 3 --kernel-us 0) ;;
	esac
	if [ "$quick" = 1 ]; then args+=("${q[@]}"); fi
}

# busy_percent: how busy the CPUs were over the next second, from /proc/stat
busy_percent() {
	local a b
	read -ra a < <(head -1 /proc/stat)
	sleep 1
	read -ra b < <(head -1 /proc/stat)
	local total=0 idle=$((b[4] + b[5] - a[4] - a[5])) i
	for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
	[ "$total" -gt 0 ] || { echo 0; return; }
	echo $(((total - idle) * 100 / total))
}

# wait_idle: at most --idle-wait seconds for a second under --idle-busy percent busy
wait_idle() {
	local deadline=$((SECONDS + idle_wait))
	while [ "$SECONDS" -lt "$deadline" ]; do
		[ "$(busy_percent)" -lt "$idle_busy" ] && return
	done
	return 0 # never idle enough: run anyway (the loop's last test failed: set -e)
}

# one SIDE BUILD MODE ROUND ARGS...: one run into $raw/MODE.SIDE.ROUND.json
one() {
	local side=$1 build=$2 mode=$3 round=$4
	shift 4
	local chipd=(--chipd "$build/bin/chipd")
	[ "$mode" != dispatch ] || chipd=() # dispatch starts no chipd
	wait_idle
	echo "== round $round: $side chipbench $mode $*" >&2
	if ! "$build/tests/bench/chipbench" "$mode" "$@" "${chipd[@]}" --json \
		>"$raw/$mode.$side.$round.json" 2>>"$raw/stderr.log"; then
		echo "compare.sh: $build/tests/bench/chipbench $mode failed (log: $raw/stderr.log)" >&2
		tail -5 "$raw/stderr.log" >&2
		exit 1
	fi
}

echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq 1 "$rounds"); do
	for m in "${mode_list[@]}"; do
		mode_args "$m"
		one old "$old" "$m" "$r" "${args[@]}"
		one new "$new" "$m" "$r" "${args[@]}"
	done
done
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 "$here/compare.py" "$raw" "$rounds" "$modes"
