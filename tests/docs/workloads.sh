#!/bin/sh
# workloads.sh WL_TABLE ROOT - the workload parameters documented in
# docs/protocol.md §8.6 are exactly the code's: the headings and table lines of that
# section must equal what WL_TABLE (tests/docs/wl_table.c) prints from the
# validator's own tables, in order. docs/architecture.md keeps no copy: it holds no
# row of a workload's parameter table and points to §8.6 instead.
set -eu
wl_table=$1
root=$2
section='### 8.6 Workloads and their parameters'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "workloads.sh: $*" >&2
	exit 1
}

"$wl_table" >"$tmp/code.md"
grep -E '^(#### |\|)' "$tmp/code.md" >"$tmp/code"
[ -s "$tmp/code" ] || fail "$wl_table printed no table"

grep -qxF "$section" "$root/docs/protocol.md" || fail "docs/protocol.md has no '$section'"
# The section runs to the next heading of level 2 or 3.
awk -v h="$section" '$0 == h { on = 1; next } on && /^(## |### )/ { on = 0 } on' \
	"$root/docs/protocol.md" | grep -E '^(#### |\|)' >"$tmp/doc" || true
if ! diff -u "$tmp/doc" "$tmp/code" >"$tmp/diff"; then
	cat "$tmp/diff" >&2
	fail "docs/protocol.md §8.6 (-) differs from the code's tables (+); the code's" \
		"version is what $wl_table prints"
fi

# A copy in architecture.md would drift: no parameter row of any workload there.
# shellcheck disable=SC2016 # the backticks are Markdown, not a command
sed -n 's/^#### `\([a-z0-9_]*\)`.*/\1/p' "$tmp/code" >"$tmp/names"
while read -r name; do
	if grep -nE "^\| *\`?$name\`? *\|" "$root/docs/architecture.md" >&2; then
		fail "docs/architecture.md lists $name's parameters: point to protocol.md §8.6"
	fi
done <"$tmp/names"
grep -q 'protocol.md.*§8\.6' "$root/docs/architecture.md" ||
	fail "docs/architecture.md does not point to protocol.md §8.6"
echo "workloads.sh: $(grep -c '^| `' "$tmp/code") parameters of $(wc -l <"$tmp/names")" \
	"workloads documented as in the code"
