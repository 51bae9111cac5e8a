#!/bin/sh
# compare_check.sh BUILD - runs compare.sh --quick for one round with BUILD on both
# sides (the example of docs/performance.md's before/after section, small), once with
# the default modes and once with --modes overlap,dispatch, and checks that each prints
# the table with a row of every mode and that bad arguments are refused.
# Exit status 0, 1 on a failed check, 77 (skipped) without python3.
command -v python3 >/dev/null 2>&1 || { echo "compare_check: skipped: no python3"; exit 77; }
here=$(dirname "$0")

# table ARGS ROW...: compare.sh --quick --rounds 1 ARGS (split on blanks) prints every ROW
table() {
	# shellcheck disable=SC2086 # ARGS: options and their values
	out=$(bash "$here/compare.sh" --quick --rounds 1 $1 "$build" "$build") ||
		{ echo "compare.sh $1 failed"; exit 1; }
	printf '%s\n' "$out"
	shift
	for row in '| metric | better | before | after | after / before | paired |' "$@"; do
		printf '%s\n' "$out" | grep -qF "$row" || { echo "compare_check: no row '$row'"; exit 1; }
	done
}

build=$1
# shellcheck disable=SC2016 # backquotes are literal text of the table
table "" '| `mbox_spin` p50 | lower |' '| e2e, 1 client: req/s | higher |'
table "--modes overlap,dispatch" '| overlap in the worker, 1×: ratio | higher |' \
	'| overlap through chipd, 1×: overlap tok/s | higher |' '| dispatch, chain: ns/task | lower |'
for bad in "--rounds 0" "--modes overlap,bogus" "--modes ,"; do
	# shellcheck disable=SC2086 # two words: the option and its value
	bash "$here/compare.sh" $bad "$build" "$build" 2>/dev/null
	[ $? -eq 64 ] || { echo "compare_check: '$bad' not refused"; exit 1; }
done
bash "$here/compare.sh" "$build" /nonexistent 2>/dev/null; [ $? -eq 64 ] || { echo "missing build not refused"; exit 1; }
exit 0
