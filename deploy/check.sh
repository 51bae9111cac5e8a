#!/usr/bin/env bash
# check.sh - sets up and runs chipd's whole test suite on Debian 12: installs what is
# missing, builds, runs ctest, then the same suite under ASan+UBSan and under TSan,
# each in its own build directory. Exit status 0 only if all three pass.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=deploy/lib/packages.sh
. deploy/lib/packages.sh

chipd_need_packages "${CHIPD_BUILD_PACKAGES[@]}" "${CHIPD_TEST_PACKAGES[@]}"

jobs=$(nproc)
# Warnings are errors here (CHIPD_WERROR), not in a packager's build.
# run_suite DIR LAUNCHER CTEST-JOBS CMAKE-ARGS...: configure, build, run ctest under
# LAUNCHER with CTEST-JOBS tests at a time, then name the tests it skipped (77: something they need is missing here). A skipped
# fuzz test fails the run: this script installs clang and its fuzzer runtime, so a
# skip there can only hide a finding.
run_suite() {
	local dir=$1 launcher=$2 ctest_jobs=$3 skipped
	shift 3
	echo "== chipd tests: $dir $*"
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHIPD_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j "$jobs" >/dev/null
	(cd "$dir" && $launcher ctest --output-on-failure -j "$ctest_jobs" --timeout 900) | tee "$dir/ctest.out"
	skipped=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$dir/ctest.out")
	echo "== $dir: skipped: $(paste -sd ' ' <<<"${skipped:-none}")"
	if grep -q '^fuzz_' <<<"$skipped"; then
		echo "== $dir: a fuzz test was skipped although clang is installed" >&2
		return 1
	fi
}

# The plain suite runs as many tests at a time as there are CPUs (every test passes
# at -j4 on 2 CPUs), and so does the ASan+UBSan suite (about 2x slower: as loaded as
# the plain suite at -j4); the TSan suite one at a time, as its 5-15x slowdown on top
# of a parallel run would stretch the supervisor's own bounds (start-up, the
# heartbeat) past what its tests allow.
run_suite build "" "$jobs"
# The quick start builds with -O3, whose warnings differ: compile it too, warnings as
# errors.
echo "== chipd release build (compile only)"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCHIPD_WERROR=ON >/dev/null
cmake --build build-release -j "$jobs" >/dev/null
# The README's main job, as the README runs it (its benchmark is the report's below).
echo "== quick start (deploy/quickstart.sh)"
CHIPD_QUICK_NO_BENCH=1 deploy/quickstart.sh
# The performance report's pipeline (every chipbench mode with --json, the renderer,
# gnuplot), small sizes, into a scratch directory: the committed report stays.
echo "== performance report pipeline (tests/bench/report.sh --quick)"
report_tmp=$(mktemp -d)
tests/bench/report.sh --quick --out "$report_tmp/performance.md" --img "$report_tmp/img"
grep -q '^## Targets' "$report_tmp/performance.md"
ls "$report_tmp"/img/perf_mailbox.png "$report_tmp"/img/perf_overlap.png \
	"$report_tmp"/img/perf_e2e.png >/dev/null
rm -rf "$report_tmp"
ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1" \
	run_suite build-asan "" "$jobs" -DCHIPD_SANITIZE=address,undefined
# TSan's shadow layout breaks under wide address-space randomization
# (vm.mmap_rnd_bits above 28 on newer kernels): run its tests without ASLR.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	run_suite build-tsan "setarch $(uname -m) -R" 1 -DCHIPD_SANITIZE=thread
# The GPU variants of the kernels (hipcc for AMD, nvcc for NVIDIA): compiled, and
# their suites run (the GPU checks skip without a GPU), so the kernels never rot.
deploy/check_gpu_build.sh
