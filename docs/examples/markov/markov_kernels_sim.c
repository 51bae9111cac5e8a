/* markov_kernels_sim.c - markov_step for chipd's sim device: a shared object exporting
 * the kernel under its name as a chipd_cl_sim_kernel_fn. chipd calls it once per block
 * of the launch's grid (here one block), on the stream it was launched on; the
 * function runs its block's threads itself: here the whole row in one loop, which
 * gives what the GPU kernel's threads give together. */
#include "markov_kernels.h"

#include <chipd_callable.h>

CHIPD_CALLABLE_EXPORT void markov_step(const void *args, const struct chipd_cl_dims *dims,
				       const uint32_t block[3]);

void markov_step(const void *args, const struct chipd_cl_dims *dims, const uint32_t block[3])
{
	const struct markov_step_args *a = args;
	const float *row = a->table + (uint64_t)*a->tok * a->vocab;
	uint32_t best = 0;

	(void)dims;
	(void)block;
	for (uint32_t j = 1; j < a->vocab; j++)
		if (row[j] > row[best]) /* the first of equal maxima */
			best = j;
	*a->tok = (int32_t)best;
}
