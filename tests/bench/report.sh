#!/usr/bin/env bash
# report.sh - regenerates docs/performance.md from one run of the whole chipbench
# suite on this machine: builds the Release tree, runs every mode with --json (the
# mailbox mode several times, for medians), the kernel error table of
# check_kernels, records the machine, renders the tables into the report's template
# (tests/bench/performance.md.in) and draws the plots with gnuplot (docs/img/*.png).
#
# usage: tests/bench/report.sh [--runs N] [--gpu FILE] [--out FILE] [--img DIR] [--keep DIR]
#                              [--quick]
#   --runs N    runs of the mailbox mode (default 3; the report gives their medians;
#               dispatch takes the median of its own 5 runs)
#   --gpu FILE  a gpu_results.txt from tests/gpu/run.sh to put in the GPU section
#               (default: docs/gpu_results.txt when it exists, else "not measured")
#   --out FILE  where the report goes (default docs/performance.md)
#   --img DIR   where the plots go (default docs/img)
#   --keep DIR  keep the raw JSON and logs of the run there (default: a temp dir,
#               removed at the end)
#   --quick     small sizes everywhere and no optional peers installed: checks the
#               pipeline in a minute (the test command does), numbers worthless
#               (the report says so)
# Installs gnuplot-nox and python3 when missing (Debian). Takes ~3 minutes.
# Measure on a machine that is otherwise idle: every number is read as a ratio
# against a baseline of the same run, but 2 vCPUs shared with a build move them all.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=deploy/lib/packages.sh
. deploy/lib/packages.sh

runs=3 gpu="" out=docs/performance.md img=docs/img keep="" quick=0
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=${2:?--runs N}; shift 2 ;;
	--gpu) gpu=${2:?--gpu FILE}; shift 2 ;;
	--out) out=${2:?--out FILE}; shift 2 ;;
	--img) img=${2:?--img DIR}; shift 2 ;;
	--keep) keep=${2:?--keep DIR}; shift 2 ;;
	--quick) quick=1; shift ;;
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "report.sh: unknown argument '$1' (--help)" >&2; exit 64 ;;
	esac
done
case $runs in '' | *[!0-9]* | 0) echo "report.sh: --runs wants a positive number" >&2; exit 64 ;; esac
[ -z "$gpu" ] && [ -f docs/gpu_results.txt ] && gpu=docs/gpu_results.txt
if [ -n "$gpu" ] && [ ! -r "$gpu" ]; then
	echo "report.sh: cannot read $gpu" >&2
	exit 66
fi

chipd_need_packages "${CHIPD_BUILD_PACKAGES[@]}" gnuplot-nox python3
# the peers: measured where Debian has them, reported as skipped otherwise
if [ "$quick" = 0 ]; then
	chipd_need_packages libiceoryx-binding-c-dev iceoryx ||
		echo "report.sh: iceoryx unavailable; its row will say skipped" >&2
	chipd_need_packages "${CHIPD_BENCH_PACKAGES[@]}" ||
		echo "report.sh: StarPU unavailable; the dispatch peer will say skipped" >&2
fi

bld=build-release
echo "== build ($bld, Release)" >&2
cmake -S . -B "$bld" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bld" -j "$(nproc)" --target chipd chipctl chipbench check_kernels >/dev/null

if [ -n "$keep" ]; then
	mkdir -p "$keep"
	raw=$(cd "$keep" && pwd)
else
	raw=$(mktemp -d /tmp/chipd-report.XXXXXX)
	trap 'rm -rf "$raw"' EXIT
fi
bench=$bld/tests/bench/chipbench

# small sizes for --quick; the defaults of each mode otherwise
if [ "$quick" = 1 ]; then
	a_mailbox=(--iters 20000 --sleep-iters 2000)
	a_dispatch=(--tasks 2000 --step 256 --runs 3)
	a_overlap=(--tokens 20 --device-us 500)
	a_e2e=(--seconds 0.3)
	a_startup=(--runs 1)
	a_idle=(--seconds 2)
	a_hol=(--runs 1 --seconds 0.3)
else
	a_mailbox=() a_dispatch=() a_overlap=() a_e2e=() a_startup=() a_idle=() a_hol=()
fi

# run NAME ARGS...: one mode with --json into $raw/NAME.json, its stderr into the log
run() {
	local name=$1
	shift
	echo "== chipbench $* --json" >&2
	if ! "$bench" "$@" --json >"$raw/$name.json" 2>>"$raw/stderr.log"; then
		echo "report.sh: chipbench $* failed (log: $raw/stderr.log)" >&2
		tail -5 "$raw/stderr.log" >&2
		return 1
	fi
}

{
	echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "dirty=$(git status --porcelain 2>/dev/null | grep -qv '^??' && echo yes || echo no)"
	echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
	echo "ncpu=$(nproc)"
	echo "mem_kib=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)"
	echo "kernel=$(uname -r)"
	echo "os=$(. /etc/os-release && echo "$PRETTY_NAME")"
	echo "cc=$(cc --version | head -1)"
	echo "virt=$(systemd-detect-virt 2>/dev/null || echo unknown)"
	echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "quick=$quick"
	echo "runs=$runs"
	echo "perf_counters=$([ -e /sys/bus/event_source/devices/cpu ] && echo yes || echo no)"
} >"$raw/machine.env"

for i in $(seq 1 "$runs"); do
	run "mailbox.$i" mailbox "${a_mailbox[@]}"
done
run dispatch dispatch "${a_dispatch[@]}" # its own median of 5 runs
run overlap overlap "${a_overlap[@]}"
run e2e e2e "${a_e2e[@]}"
run hol hol "${a_hol[@]}"
run startup startup "${a_startup[@]}"
run idle idle "${a_idle[@]}"
echo "== check_kernels (error table)" >&2
CK_DEFAULT_TIMEOUT=120 "$bld/tests/check_kernels" | grep '^ERRTAB' >"$raw/kernels.txt"
[ -n "$gpu" ] && cp "$gpu" "$raw/gpu_results.txt"
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw/machine.env"

mkdir -p "$img"
python3 tests/bench/report_render.py --raw "$raw" --template tests/bench/performance.md.in \
	--out "$out" --img "$img"
echo "report.sh: wrote $out and $img/perf_*.png${keep:+ (raw results in $keep)}" >&2
