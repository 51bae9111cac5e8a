// markov_kernels.hip - markov_step for GPUs, one source for both vendors:
//   AMD     hipcc --genco --offload-arch=gfx90a markov_kernels.hip -o markov_kernels.hsaco
//   NVIDIA  nvcc -x cu -cubin -arch=sm_90 -I<chipd's includedir> markov_kernels.hip
//           -o markov_kernels.cubin (the hip* names through chipd_hip_cuda.h)
// chipd loads the file for its device (hipModuleLoad / cuModuleLoad) and launches the
// kernel by name with its one argument, struct markov_step_args, passed by value.
#ifdef __CUDACC__
#include <chipd_hip_cuda.h>
#else
#include <hip/hip_runtime.h>
#endif

#include "markov_kernels.h"

// One block of MARKOV_BLOCK threads: each takes a strided share of the row, then a
// tree reduction keeps the larger value, and of equal values the smaller index.
extern "C" __global__ void markov_step(struct markov_step_args a)
{
	__shared__ float val[MARKOV_BLOCK];
	__shared__ uint32_t idx[MARKOV_BLOCK];
	const float *row = a.table + (uint64_t)*a.tok * a.vocab;
	uint32_t t = threadIdx.x, best = t < a.vocab ? t : 0;

	for (uint32_t j = t + MARKOV_BLOCK; j < a.vocab; j += MARKOV_BLOCK)
		if (row[j] > row[best])
			best = j;
	val[t] = row[best];
	idx[t] = best;
	__syncthreads();
	for (uint32_t s = MARKOV_BLOCK / 2; s > 0; s /= 2) {
		if (t < s && (val[t + s] > val[t] || (val[t + s] == val[t] && idx[t + s] < idx[t]))) {
			val[t] = val[t + s];
			idx[t] = idx[t + s];
		}
		__syncthreads();
	}
	if (t == 0)
		*a.tok = (int32_t)idx[0];
}
