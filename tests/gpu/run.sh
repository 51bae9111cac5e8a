#!/usr/bin/env bash
# run.sh [--build-only] OUTDIR - the GPU checks for a machine with an NVIDIA GPU, in one
# call: builds the NVIDIA variant (the HIP kernel sources through nvcc), runs gpu_check
# (the device contract on the GPU, every kernel against its CPU reference, token ids
# against the sim backend on the workload table) and gpu_bench (paged-attention decode
# bandwidth against a device-to-device copy in the same run), and writes
# OUTDIR/gpu_results.txt plus OUTDIR/build.log. Finishes in well under 8 minutes (each
# stage has its own timeout). Exit status: gpu_check's if not 0, else gpu_bench's (77:
# skipped, no GPU); 1 if the build failed; 2 for a wrong usage. With --build-only it
# stops after the build: exit 0 if gpu_check and gpu_bench were built
# (deploy/check_gpu_build.sh runs it so, without a GPU).
# run.sh --sources - prints what the direct build compiles, one "TARGET PATH" a line,
# read from the CMake files (the gpu_run_sources test compares it with CMake's targets).
#
# The build is `cmake -DCHIPD_CUDA=ON` when the project's other build dependencies
# (pkg-config, libbsd, liburing, msgpack, check) are there; a GPU image often lacks
# them, so it falls back to building what CMake builds for the two programs directly
# with nvcc and cc: chipd_shm, chipd_cl_support, the built-in callables (shared objects
# in the build directory, which gpu_check's workload cases load at run time) and
# chipd_kernels, with CMake's flags. The direct build reads its source lists from
# shm/CMakeLists.txt, kernels/CMakeLists.txt and tests/kernels.cmake, so a renamed or
# added source needs no edit here. Environment: CHIPD_CUDA_ARCH (sm_90), CUDA_HOME
# (/usr/local/cuda), CHIPD_GPU_INDEX (0), CHIPD_GPU_DIRECT=1 (skip CMake),
# CHIPD_GPU_BUILD_DIR (build there and keep it; default: a scratch directory, removed).
set -uo pipefail
usage="usage: tests/gpu/run.sh [--build-only] OUTDIR, or tests/gpu/run.sh --sources"
mode=run
case ${1:-} in
--build-only) mode=build && shift ;;
--sources) mode=sources && shift ;;
-*) echo "$usage" >&2 && exit 2 ;;
esac
if [ "$mode" = sources ]; then
	[ $# -eq 0 ] || { echo "$usage" >&2 && exit 2; }
else
	[ $# -eq 1 ] || { echo "$usage" >&2 && exit 2; }
	out=$1
	mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1
	if [ -n "${CHIPD_GPU_BUILD_DIR:-}" ]; then
		mkdir -p "$CHIPD_GPU_BUILD_DIR" && bld=$(cd "$CHIPD_GPU_BUILD_DIR" && pwd) || exit 1
	else
		bld=$(mktemp -d /tmp/chipd-gpu.XXXXXX) || exit 1
		trap 'rm -rf "$bld"' EXIT
	fi
fi
cd "$(dirname "$0")/../.." || exit 1

# cmake_args FILE COMMAND NAME: the arguments after NAME of each COMMAND(NAME ...) in
# FILE, one a line (comments dropped; none if there is no such call).
cmake_args() {
	awk -v cmd="$2" -v name="$3" '
		{ sub(/#.*/, ""); gsub(/[()]/, " & "); text = text " " $0 }
		END {
			n = split(text, w, /[ \t]+/)
			for (i = 1; i + 2 <= n; i++)
				if (w[i] == cmd && w[i + 1] == "(" && w[i + 2] == name)
					for (j = i + 3; j <= n && w[j] != ")"; j++)
						print w[j]
		}' "$1"
}

# cmake_sources FILE COMMAND NAME: the source files among those arguments (keywords
# and variables, such as the HIP object ${CHIPD_HIP_OBJ}, left out).
cmake_sources() {
	cmake_args "$@" | grep -Ev '^(STATIC|SHARED|MODULE|OBJECT|PUBLIC|PRIVATE|INTERFACE)$|^\$\{'
}

# sources: what the direct build compiles, one "TARGET PATH" a line, in the order of
# the CMake files: CMake's target names, chipd_kernels_gpu for what the GPU variants add
# to chipd_kernels, nvcc for the HIP source, nvcc_module for the tests' code object. Fails, saying what it could not read, when
# a list is missing or names a file that does not exist.
sources() {
	local k=kernels/CMakeLists.txt t=tests/kernels.cmake s f cl

	s=$(
		cmake_sources shm/CMakeLists.txt add_library chipd_shm | sed 's|^|chipd_shm shm/|'
		cmake_sources "$k" add_library chipd_cl_support | sed 's|^|chipd_cl_support kernels/|'
		for cl in $(cmake_args "$k" set CHIPD_BUILTIN_CALLABLES); do
			# shellcheck disable=SC2016 # the CMake loop variable, literally
			cmake_sources "$k" add_library 'callable_${cl}' |
				sed "s|\${cl}|$cl|g; s|^|callable_$cl kernels/|"
		done
		cmake_sources "$k" add_library chipd_kernels | sed 's|^|chipd_kernels kernels/|'
		cmake_sources "$k" target_sources chipd_kernels | sed 's|^|chipd_kernels_gpu kernels/|'
		# shellcheck disable=SC2016 # the CMake variable, literally
		cmake_args "$k" set CHIPD_HIP_SRC | sed -n 's|^\${CMAKE_CURRENT_SOURCE_DIR}/|nvcc kernels/|p'
		# shellcheck disable=SC2016 # the CMake variable, literally
		cmake_args "$t" set CHIPD_TC_HIP_SRC |
			sed -n 's|^\${CMAKE_CURRENT_SOURCE_DIR}/|nvcc_module tests/|p'
		cmake_sources "$t" add_executable gpu_check | sed 's|^|gpu_check tests/|'
		cmake_sources "$t" add_executable gpu_bench | sed 's|^|gpu_bench tests/|'
	)
	for f in 'chipd_shm ' 'chipd_cl_support ' callable_ 'chipd_kernels ' chipd_kernels_gpu \
		'nvcc ' nvcc_module gpu_check gpu_bench; do
		grep -q "^$f" <<<"$s" || {
			echo "run.sh: no sources of ${f% } found in the CMake files" >&2
			return 1
		}
	done
	while read -r _ f; do
		[ -f "$f" ] || {
			echo "run.sh: $f, read from the CMake files, does not exist" >&2
			return 1
		}
	done <<<"$s"
	echo "$s"
}

if [ "$mode" = sources ]; then
	sources
	exit
fi

arch=${CHIPD_CUDA_ARCH:-sm_90}
cuda=${CUDA_HOME:-/usr/local/cuda}
# the toolkit's own nvcc first, as CMake finds it: its headers and libraries are $cuda's
nvcc=$cuda/bin/nvcc
[ -x "$nvcc" ] || nvcc=$(command -v nvcc) || nvcc=$cuda/bin/nvcc
index=${CHIPD_GPU_INDEX:-0}
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

# v CMD...: runs CMD, shown first (build.log is all there is to read on the GPU machine).
v() {
	echo "+ $*"
	"$@"
}

# What CMake builds for gpu_check and gpu_bench with -DCHIPD_CUDA=ON in a Release build
# (the flags, include directories and link lines of CMakeLists.txt, shm/CMakeLists.txt,
# kernels/CMakeLists.txt and tests/kernels.cmake), without its dependency checks, in
# $bld/direct. The callables go to $bld/direct/callables, where the loader looks
# (CHIPD_CALLABLES_BUILD_DIR; there is no ../lib/chipd/callables beside the programs),
# not writable by group or others, as the loader requires.
build_direct() {
	local d=$bld/direct srcs target src o f tc=$bld/direct/tests/tc_kernels.cubin
	local base=(-std=c11 -O3 -DNDEBUG -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes
		-Wmissing-prototypes -Wno-missing-field-initializers)
	local hip=(-DCHIPD_HAVE_HIP -DCHIPD_HIP_CUDA)
	local inc=(-Ikernels -Ikernels/include -Ishm -Ikernels/callables)
	# wl_load.c's directories (harmless to the other sources, which do not use them)
	local loader=(-DCHIPD_CALLABLES_REL='"../lib/chipd/callables"'
		-DCHIPD_CALLABLES_BUILD_DIR="\"$d/callables\"")
	declare -A objs=()

	srcs=$(sources) || return 1
	rm -rf "$d" && mkdir -p "$d/obj" "$d/callables" "$d/tests" || return 1
	while read -r target src; do
		o=$d/obj/$(tr / _ <<<"${src%.*}").o
		case $target in
		nvcc_module) # the tests' code object, loaded by gpu_check's module case
			v timeout 120 "$nvcc" -x cu -cubin -arch="$arch" -O3 -DCHIPD_HIP_CUDA -Ikernels \
				-Itests/callables -o "$tc" "$src" || return 1
			continue
			;;
		nvcc)
			v timeout 240 "$nvcc" -x cu -arch="$arch" -O3 -std=c++17 -Xcompiler=-fPIC \
				-DCHIPD_HIP_CUDA -Ikernels -Ikernels/include -c "$src" -o "$o" || return 1
			objs[chipd_kernels]+=" $o"
			continue
			;;
		chipd_shm) f=("${base[@]}" -fPIC -Ishm) ;;
		chipd_cl_support | callable_*)
			f=("${base[@]}" -fPIC -fvisibility=hidden -Ikernels/include -Ikernels/callables)
			;;
		chipd_kernels | chipd_kernels_gpu)
			f=("${base[@]}" -fPIC "${hip[@]}" "${inc[@]}" -I"$cuda/include" "${loader[@]}")
			target=chipd_kernels
			;;
		gpu_check)
			f=("${base[@]}" "${hip[@]}" -Itests/unit -Itests/callables "${inc[@]}"
				-DTC_KERNELS_GPU="\"$tc\"")
			;;
		gpu_bench) f=("${base[@]}" "${hip[@]}" "${inc[@]}") ;;
		*) echo "run.sh: no flags for target $target" && return 1 ;;
		esac
		v cc "${f[@]}" -c "$src" -o "$o" || return 1
		objs[$target]+=" $o"
	done <<<"$srcs"
	for target in chipd_shm chipd_cl_support chipd_kernels; do
		# shellcheck disable=SC2086 # one word per object
		v ar rcs "$d/lib$target.a" ${objs[$target]} || return 1
	done
	for target in "${!objs[@]}"; do
		[ "${target#callable_}" != "$target" ] || continue
		# shellcheck disable=SC2086 # one word per object
		v cc -shared -Wl,-z,defs -o "$d/callables/${target#callable_}.so" ${objs[$target]} \
			"$d/libchipd_cl_support.a" -lm || return 1
	done
	v chmod go-w "$d/callables" "$d"/callables/*.so || return 1
	for target in gpu_check gpu_bench; do
		# shellcheck disable=SC2086 # one word per object
		v cc -pthread ${objs[$target]} -o "$d/tests/$target" \
			"$d/libchipd_kernels.a" "$d/libchipd_shm.a" -lrt "$d/libchipd_cl_support.a" \
			-lm -ldl -L"$cuda/lib64" -L"$cuda/lib" -lcudart -lstdc++ \
			-Wl,-rpath,"$cuda/lib64" -Wl,-rpath,"$cuda/lib" || return 1
		ln -sf "$d/tests/$target" "$bld/$target" || return 1
	done
}

start=$SECONDS
built=0
if [ -n "${CHIPD_GPU_DIRECT:-}" ]; then
	how="direct nvcc + cc, CHIPD_GPU_DIRECT set"
	build_direct >"$log" 2>&1 && built=1
elif build_cmake >"$log" 2>&1; then
	how="cmake -DCHIPD_CUDA=ON"
	built=1
else
	how="direct nvcc + cc, cmake failed (see build.log)"
	build_direct >>"$log" 2>&1 && built=1
fi
if [ $built = 0 ]; then
	echo "# build: FAILED (see build.log)" >>"$res"
	tail -40 "$log" >>"$res"
	cat "$res"
	exit 1
fi
echo "# build: $how ($((SECONDS - start)) s)" >>"$res"
if [ "$mode" = build ]; then
	echo "# run.sh: --build-only, gpu_check and gpu_bench built after $((SECONDS - start)) s" >>"$res"
	cat "$res"
	exit 0
fi

rc=0
echo "## gpu_check" >>"$res"
timeout 180 "$bld/gpu_check" "$index" >>"$res" 2>&1 || rc=$?
echo "## gpu_bench" >>"$res"
timeout 180 "$bld/gpu_bench" "$index" >>"$res" 2>&1 || { r=$?; [ $rc -eq 0 ] && rc=$r; }
echo "# run.sh: exit $rc after $((SECONDS - start)) s" >>"$res"
cat "$res"
exit $rc
