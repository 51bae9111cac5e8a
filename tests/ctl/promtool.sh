#!/bin/sh
# promtool.sh SAMPLE_PROGRAM - `promtool check metrics` on chipctl's Prometheus text
# for every counter name chipd defines. Skipped (77) without promtool (Debian package
# `prometheus`).
set -eu
sample=$1
if ! command -v promtool >/dev/null 2>&1; then
	echo "promtool not installed (apt-get install prometheus): skipped"
	exit 77
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$sample" >"$out"
# promtool prints lint problems and exits 1 on any of them, or on a parse error.
promtool check metrics <"$out"
echo "promtool: $(grep -c '^# TYPE' "$out") metrics, $(grep -vc '^#' "$out") samples: ok"
