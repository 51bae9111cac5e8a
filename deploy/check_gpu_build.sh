#!/usr/bin/env bash
# check_gpu_build.sh - builds the GPU variants of the kernels wherever their compilers
# can be had, so that the HIP sources never rot on machines without a GPU:
#   build-hip   CHIPD_HIP=ON for gfx90a and gfx908, hipcc (installs Debian's hipcc and libamdhip64-dev when
#               missing: about 66 MB to download, 353 MB installed)
#   build-cuda  CHIPD_CUDA=ON, nvcc (when nvcc is on the PATH or in /usr/local/cuda)
# In each, it builds the kernels library, the kernel suites and the GPU programs, then
# runs them through ctest: the sim suites pass, gpu_check passes on a GPU and is
# skipped (77) without one. In each it also builds the example callable's own GPU
# kernels (docs/examples/markov: make hsaco with hipcc, make cubin with nvcc) as a
# user does, against the variant's libchipd-dev files installed in a scratch prefix. Where nvcc is, it also builds gpu_check and gpu_bench as
# tests/gpu/run.sh does on a GPU machine without the other build dependencies
# (CHIPD_GPU_DIRECT=1 tests/gpu/run.sh --build-only). Exit status 0 only if every
# variant it tried passed.
# Set CHIPD_SKIP_HIP=1 or CHIPD_SKIP_CUDA=1 to leave a variant out.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=deploy/lib/packages.sh
. deploy/lib/packages.sh

jobs=$(nproc)
targets=(chipd_kernels check_device check_kernels check_workloads gpu_check gpu_bench libchipd
	libchipd_static)
tests='^(check_device|check_kernels|check_workloads|gpu_check|gpu_run_sources)$'

# variant DIR CMAKE-ARGS...: configure, build the kernel targets, run their tests.
variant() {
	local dir=$1
	shift
	echo "== chipd GPU build: $dir $*"
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHIPD_BENCH=OFF -DCHIPD_WERROR=ON \
		"$@" >/dev/null
	cmake --build "$dir" -j "$jobs" --target "${targets[@]}" >/dev/null
	(cd "$dir" && ctest --output-on-failure -R "$tests")
}

# example DIR TARGET MAKE-ARGS...: docs/examples/markov's `make TARGET` out of the
# tree, against DIR's libchipd-dev component installed under a scratch prefix.
example() {
	local dir=$1 target=$2 tmp pc rc=0
	shift 2
	echo "== chipd GPU build: docs/examples/markov, make $target ($dir's install)"
	tmp=$(mktemp -d)
	cmake --install "$dir" --component libchipd_dev --prefix "$tmp/prefix" >/dev/null &&
		pc=$(dirname "$(find "$tmp/prefix" -name chipd-callable.pc)") &&
		cp -r docs/examples/markov "$tmp/markov" &&
		PKG_CONFIG_PATH=$pc make -C "$tmp/markov" "$target" "$@" || rc=1
	rm -rf "$tmp"
	return $rc
}

if [ -z "${CHIPD_SKIP_HIP:-}" ]; then
	chipd_need_packages hipcc libamdhip64-dev
	# two targets in one object: the list path, on what Debian 12's hipcc compiles
	variant build-hip -DCHIPD_HIP=ON "-DCHIPD_HIP_ARCHS=gfx90a;gfx908"
	example build-hip hsaco HIP_ARCH=gfx90a
fi
if [ -z "${CHIPD_SKIP_CUDA:-}" ]; then
	# the toolkit's own nvcc first: a wrapper elsewhere on the PATH hides where it lives
	nvcc=/usr/local/cuda/bin/nvcc
	[ -x "$nvcc" ] || nvcc=$(command -v nvcc || true)
	cuda_h=
	for d in "$(dirname "${nvcc:-/nonexistent/bin}")/../include" /usr/local/cuda/include; do
		[ -e "$d/cuda_runtime_api.h" ] && cuda_h=$d
	done
	if [ -n "$nvcc" ] && [ -z "$cuda_h" ]; then
		echo "== chipd GPU build: $nvcc has no cuda_runtime_api.h beside it, CUDA variant not built"
	elif [ -n "$nvcc" ]; then
		variant build-cuda -DCHIPD_CUDA=ON -DCHIPD_NVCC="$nvcc"
		example build-cuda cubin NVCC="$nvcc"
		# run.sh's own build, without CMake, as a GPU image without the other build
		# dependencies gets it: it prints its gpu_results.txt (the build's tail if it failed)
		echo "== chipd GPU build: tests/gpu/run.sh --build-only, direct nvcc + cc"
		direct_out=$(mktemp -d)
		CHIPD_GPU_DIRECT=1 CUDA_HOME="$(dirname "$cuda_h")" tests/gpu/run.sh --build-only \
			"$direct_out" || { rm -rf "$direct_out" && exit 1; }
		rm -rf "$direct_out"
	else
		echo "== chipd GPU build: no nvcc, CUDA variant not built"
	fi
fi
