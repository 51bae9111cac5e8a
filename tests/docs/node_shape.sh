#!/bin/sh
# node_shape.sh NODE_SHAPE PROTOCOL_MD - the default shape docs/protocol.md §8.1 gives
# (slots, buffers, rings, the data area, every offset and total) is the code's: each
# line NODE_SHAPE (tests/docs/node_shape.c) prints must stand in the document, whose
# lines are joined with spaces first (a phrase may wrap anywhere).
set -eu
node_shape=$1
doc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$node_shape" >"$tmp/code"
[ -s "$tmp/code" ] || { echo "node_shape.sh: $node_shape printed nothing" >&2; exit 1; }
tr '\n' ' ' <"$doc" | tr -s ' ' >"$tmp/doc"
fail=0
while IFS= read -r phrase; do
	if ! grep -qF -- "$phrase" "$tmp/doc"; then
		echo "node_shape.sh: $doc lacks: $phrase" >&2
		fail=1
	fi
done <"$tmp/code"
[ "$fail" = 0 ] || echo "node_shape.sh: the lines above are the code's default shape" >&2
exit "$fail"
