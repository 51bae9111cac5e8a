#!/bin/sh
# compare_check.sh BUILD - runs compare.sh --quick for one round with BUILD on both
# sides (the example of docs/performance.md's before/after section, small) and checks
# that it prints the table with a mailbox and an e2e row and refuses bad arguments.
# Exit status 0, 1 on a failed check, 77 (skipped) without python3.
command -v python3 >/dev/null 2>&1 || { echo "compare_check: skipped: no python3"; exit 77; }
here=$(dirname "$0")
out=$(bash "$here/compare.sh" --quick --rounds 1 "$1" "$1") || { echo "compare.sh failed"; exit 1; }
printf '%s\n' "$out"
# shellcheck disable=SC2016 # backquotes are literal text of the table
for row in '| `mbox_spin` p50 | lower |' '| e2e, 1 client: req/s | higher |' \
	'| metric | better | before | after | after / before | paired |'; do
	printf '%s\n' "$out" | grep -qF "$row" || { echo "compare_check: no row '$row'"; exit 1; }
done
bash "$here/compare.sh" --rounds 0 "$1" "$1" 2>/dev/null; [ $? -eq 64 ] || { echo "--rounds 0 not refused"; exit 1; }
bash "$here/compare.sh" "$1" /nonexistent 2>/dev/null; [ $? -eq 64 ] || { echo "missing build not refused"; exit 1; }
exit 0
