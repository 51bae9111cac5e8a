#!/usr/bin/env bash
# run.sh OUTDIR - the GPU checks for a machine with an NVIDIA GPU, in one call:
# builds the NVIDIA variant (the HIP kernel sources through nvcc), runs gpu_check
# (every kernel against its CPU reference, token ids against the sim backend on the
# workload table) and gpu_bench (paged-attention decode bandwidth against a
# device-to-device copy in the same run), and writes OUTDIR/gpu_results.txt plus the
# logs. Finishes in well under 8 minutes (each stage has its own timeout).
#
# The build is `cmake -DCHIPD_CUDA=ON` when the project's other build dependencies
# (pkg-config, libbsd, liburing, msgpack, check) are there; a GPU image often lacks
# them, so it falls back to compiling the kernels library and the two programs
# directly with the same sources and flags. Environment: CHIPD_CUDA_ARCH (sm_90),
# CUDA_HOME (/usr/local/cuda), CHIPD_GPU_INDEX (0), CHIPD_GPU_DIRECT=1 (skip CMake).
set -uo pipefail
out=${1:?usage: tests/gpu/run.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.." || exit 1
arch=${CHIPD_CUDA_ARCH:-sm_90}
cuda=${CUDA_HOME:-/usr/local/cuda}
nvcc=$(command -v nvcc || echo "$cuda/bin/nvcc")
index=${CHIPD_GPU_INDEX:-0}
bld=$(mktemp -d /tmp/chipd-gpu.XXXXXX)
res=$out/gpu_results.txt
log=$out/build.log

{
	echo "# chipd GPU results, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/# gpu: /'
	"$nvcc" --version | tail -1 | sed 's/^/# nvcc: /'
	echo "# arch: $arch"
} >"$res"

build_cmake() {
	timeout 120 cmake -S . -B "$bld/cmake" -DCHIPD_CUDA=ON -DCHIPD_CUDA_ARCH="$arch" \
		-DCHIPD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release &&
		timeout 240 cmake --build "$bld/cmake" -j "$(nproc)" --target gpu_check gpu_bench &&
		ln -sf "$bld/cmake/tests/gpu_check" "$bld/gpu_check" &&
		ln -sf "$bld/cmake/tests/gpu_bench" "$bld/gpu_bench"
}

# The same as kernels/CMakeLists.txt and tests/kernels.cmake, without CMake's
# dependency checks.
build_direct() {
	local cflags=(-std=c11 -O2 -D_GNU_SOURCE -DCHIPD_HAVE_HIP -DCHIPD_HIP_CUDA -Wall -Wextra
		-Wno-missing-field-initializers -Ikernels -Ishm -Itests/unit -I"$cuda/include")
	local srcs=(kernels/dev.c kernels/dev_sim.c kernels/sim_kernels.c kernels/kcheck.c
		kernels/ref.c kernels/wl.c kernels/wl_exec.c kernels/wl_paged_attention.c
		kernels/wl_gemm.c kernels/wl_synthetic.c kernels/dev_hip.c shm/wait.c
		tests/unit/kernel_cases.c)
	local objs=() s o
	timeout 240 "$nvcc" -x cu -arch="$arch" -O3 -std=c++17 -Xcompiler=-fPIC -DCHIPD_HIP_CUDA \
		-Ikernels -c kernels/hip/kernels.hip -o "$bld/kernels_hip.o" || return 1
	for s in "${srcs[@]}"; do
		o=$bld/$(basename "$s" .c).o
		cc "${cflags[@]}" -c "$s" -o "$o" || return 1
		objs+=("$o")
	done
	for p in gpu_check gpu_bench; do
		cc "${cflags[@]}" "tests/gpu/$p.c" "${objs[@]}" "$bld/kernels_hip.o" -o "$bld/$p" \
			-L"$cuda/lib64" -L"$cuda/lib" -lcudart -lstdc++ -lpthread -lm \
			-Wl,-rpath,"$cuda/lib64" || return 1
	done
}

start=$SECONDS
if [ -z "${CHIPD_GPU_DIRECT:-}" ] && build_cmake >"$log" 2>&1; then
	echo "# build: cmake -DCHIPD_CUDA=ON ($((SECONDS - start)) s)" >>"$res"
elif build_direct >>"$log" 2>&1; then
	echo "# build: direct nvcc + cc, cmake configure failed (see build.log) ($((SECONDS - start)) s)" >>"$res"
else
	echo "# build: FAILED (see build.log)" >>"$res"
	tail -40 "$log" >>"$res"
	exit 1
fi

rc=0
echo "## gpu_check" >>"$res"
timeout 180 "$bld/gpu_check" "$index" >>"$res" 2>&1 || rc=$?
echo "## gpu_bench" >>"$res"
timeout 180 "$bld/gpu_bench" "$index" >>"$res" 2>&1 || { r=$?; [ $rc -eq 0 ] && rc=$r; }
echo "# run.sh: exit $rc after $((SECONDS - start)) s" >>"$res"
cat "$res"
rm -rf "$bld"
exit $rc
