#!/usr/bin/env bash
# sources.sh EXPECTED sim|gpu - the sources tests/gpu/run.sh's direct build reads from
# the CMake files (run.sh --sources) against those of CMake's targets (EXPECTED, one
# "TARGET PATH" a line, written by tests/kernels.cmake), as sets: a difference is
# printed and fails. "sim" (a build without a GPU variant) leaves out what only the GPU
# variants build: chipd_kernels' GPU sources, gpu_check and gpu_bench.
set -euo pipefail
usage="usage: sources.sh EXPECTED sim|gpu"
[ $# -eq 2 ] || { echo "$usage" >&2 && exit 2; }
case $2 in
gpu) keep='s/^chipd_kernels_gpu /chipd_kernels /' ;;
sim) keep='/^\(chipd_kernels_gpu\|gpu_check\|gpu_bench\) /d' ;;
*) echo "$usage" >&2 && exit 2 ;;
esac

want=$(sort "$1")
got=$(bash "$(dirname "$0")/run.sh" --sources | sed "$keep" | sort)
if [ "$want" != "$got" ]; then
	echo "gpu_run_sources: run.sh --sources differs from CMake's targets ($2 build):"
	diff <(echo "$want") <(echo "$got") | sed -n 's/^< /  CMake only:  /p; s/^> /  run.sh only: /p'
	exit 1
fi
echo "gpu_run_sources: run.sh reads what CMake's targets build ($(wc -l <<<"$want") sources, $2 build)"
