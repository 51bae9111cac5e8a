// tc_kernels.hip - the GPU form of the tests' own kernel tc_fill (tests/callables/
// tc_kernels.h; the sim form is tests/callables/tc_kernels_sim.c): a code object that
// gpu_check's module case (tests/unit/device_cases.c, dc_module) loads and launches.
// Built with hipcc --genco for AMD, with nvcc -cubin through chipd_hip_cuda.h for
// NVIDIA (tests/kernels.cmake, and tests/gpu/run.sh without CMake).
#ifdef __CUDACC__
#include "hip/chipd_hip_cuda.h"
#else
#include <hip/hip_runtime.h>
#endif

#include "tc_kernels.h"

// Thread t of block b (both linear, x fastest) writes out[b * threads + t].
extern "C" __global__ void tc_fill(struct tc_fill_args a)
{
	uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
	uint32_t b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
	uint32_t t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;

	a.out[b * threads + t] = a.base + (int32_t)(b * threads + t);
}
