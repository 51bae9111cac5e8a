#!/usr/bin/env bash
# quickstart.sh - sets up and runs chipd's main job on a fresh Debian 12 machine:
# installs what is missing, builds (Release), starts a supervisor with two sim chips,
# streams the tokens of several paged-attention decode requests, prints the counters,
# and stops chipd cleanly (exit status 0 only if every request completed and chipd
# stopped cleanly). Then runs the mailbox benchmark (chipd's mailbox against raw
# shared memory, a futex, a unix socket, pipes and iceoryx); CHIPD_QUICK_NO_BENCH=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=deploy/lib/packages.sh
. deploy/lib/packages.sh

chipd_need_packages "${CHIPD_BUILD_PACKAGES[@]}"
# The benchmarks' optional peers, only when the benchmark runs (the test command runs
# the quick start without it and does not download them).
if [ -z "${CHIPD_QUICK_NO_BENCH:-}" ]; then
	# Optional peer of the benchmark: iceoryx and its RouDi daemon.
	chipd_need_packages libiceoryx-binding-c-dev iceoryx ||
		echo "chipd: iceoryx unavailable; its row will say skipped" >&2
	# Optional peer of `chipbench dispatch`: StarPU.
	chipd_need_packages "${CHIPD_BENCH_PACKAGES[@]}" ||
		echo "chipd: StarPU unavailable; chipbench dispatch will say its peer was skipped" >&2
fi

cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc)" --target chipd chipctl chipbench >/dev/null
bin=build-release/bin
export CHIPD_INSTANCE="quickstart-$$"

echo "== chipd --chips 2 (sim), instance $CHIPD_INSTANCE"
# Without --foreground chipd detaches and returns once it is ready.
"$bin/chipd" --chips 2 --log-level warn
trap '"$bin/chipctl" stop >/dev/null 2>&1 || true' EXIT
"$bin/chipctl" status

echo "== 4 paged_attention decode requests (2 layers, 8 heads, context 128), tokens as they stream"
"$bin/chipctl" submit --follow --count 4 paged_attention layers=2 heads=8 kv_heads=2 \
	head_dim=64 context=128 tokens=12

echo "== chipctl stats"
"$bin/chipctl" stats

echo "== chipctl stop"
pid=$("$bin/chipctl" ping --json | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
"$bin/chipctl" stop
trap - EXIT
# gone, or a zombie nobody reaps (chipd detached from this shell)
running() { [ -r "/proc/$1/stat" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat"; }
for _ in $(seq 1 200); do # bounded: 20 s
	running "$pid" || break
	sleep 0.1
done
if running "$pid"; then
	echo "chipd: pid $pid did not stop" >&2
	exit 1
fi
if ls "/dev/shm/chipd.$(id -u).$CHIPD_INSTANCE" >/dev/null 2>&1; then
	echo "chipd: region left behind" >&2
	exit 1
fi
echo "chipd stopped cleanly"

if [ -z "${CHIPD_QUICK_NO_BENCH:-}" ]; then
	echo "== chipbench mailbox"
	exec build-release/tests/bench/chipbench mailbox "$@"
fi
