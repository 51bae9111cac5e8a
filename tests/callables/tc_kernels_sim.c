/* tc_kernels_sim.c - the sim form of the tests' own kernels (tc_kernels.h): a shared
 * object exporting each kernel under its name as a chipd_cl_sim_kernel_fn, called by
 * chipd once per block; each runs its block's threads in a loop. */
#include "chipd_callable.h"
#include "tc_kernels.h"

CHIPD_CALLABLE_EXPORT void tc_fill(const void *args, const struct chipd_cl_dims *dims,
				   const uint32_t block[3]);

void tc_fill(const void *args, const struct chipd_cl_dims *dims, const uint32_t block[3])
{
	const struct tc_fill_args *a = args;
	uint32_t threads = dims->block[0] * dims->block[1] * dims->block[2];
	uint32_t b = (block[2] * dims->grid[1] + block[1]) * dims->grid[0] + block[0];

	for (uint32_t t = 0; t < threads; t++)
		a->out[b * threads + t] = a->base + (int32_t)(b * threads + t);
}
