#!/bin/bash
# prom_rules.sh CHIPD CHIPCTL - deploy/prometheus/chipd.rules.yml: `promtool check
# rules`, its unit tests (`promtool test rules chipd.rules.test.yml`), and every
# chipd_* metric the rules name is one that a real chipd exports (`chipctl stats
# --prom`), so a renamed metric cannot silence an alert. Skipped (77) without
# promtool (Debian package prometheus).
set -eu
chipd=$1
chipctl=$2
here=$(cd "$(dirname "$0")" && pwd)
prom=$(cd "$here/../../deploy/prometheus" && pwd)
if ! command -v promtool >/dev/null 2>&1; then
	echo "prom_rules.sh: promtool not installed (apt-get install prometheus): skipped"
	exit 77
fi
fail() {
	echo "prom_rules.sh: FAIL: $*" >&2
	exit 1
}
promtool check rules "$prom/chipd.rules.yml" || fail "promtool check rules"
(cd "$prom" && promtool test rules chipd.rules.test.yml) || fail "promtool test rules"

export CHIPD_INSTANCE="prom-rules-$$"
dir=$(mktemp -d)
trap '"$chipctl" stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
timeout 30 "$chipd" --chips 2 --log-level warn --pidfile "$dir/chipd.pid" ||
	fail "chipd did not start"
timeout 10 "$chipctl" stats --prom >"$dir/metrics.prom" || fail "chipctl stats --prom"
timeout 10 "$chipctl" stop >/dev/null || fail "chipctl stop"
sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$dir/metrics.prom" | sort -u >"$dir/exported"
grep -v '^ *#' "$prom/chipd.rules.yml" | grep -o 'chipd_[a-z_]*' | sort -u >"$dir/used"
missing=$(comm -23 "$dir/used" "$dir/exported")
[ -z "$missing" ] || fail "the rules use metrics chipd does not export: $missing"
# The error codes the rules match on exist as label values.
for code in queue_full no_capacity; do
	grep -q "^chipd_supervisor_errors_total{code=\"$code\"}" "$dir/metrics.prom" ||
		fail "no chipd_supervisor_errors_total{code=\"$code\"}"
done
echo "prom_rules.sh: $(wc -l <"$dir/used") metrics used by the rules, all exported: ok"
