/* cl_util.h - helpers the built-in callables share (linked into each of them and into
 * chipd_kernels; nothing here calls chipd: the device goes through the request's
 * struct chipd_cl_host, as in any callable). */
#ifndef CHIPD_KERNELS_CL_UTIL_H
#define CHIPD_KERNELS_CL_UTIL_H

#include "chipd_callable.h"

#include <stddef.h>
#include <stdint.h>

/* Deterministic inputs: a float in [-1, 1) for (@seed, @stream, @i), and the splitmix64
 * mixer behind it. */
uint64_t cl_mix(uint64_t x);
float cl_rand(uint64_t seed, uint64_t stream, uint64_t i);
/* dst[j] = scale * cl_rand(seed, stream, first + j) for j < n. */
void cl_rand_fill(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
		  float scale);

/* Allocates @n bytes of device memory for @r and copies @src there (synchronously);
 * nothing held after an error. */
int cl_upload(struct chipd_cl_req *r, void **dst, const void *src, size_t n);

/* Appends launch @c to @st (its kernel's handle is its enum dev_kernel value, ABI 1)
 * after task @dep (none if < 0): the task's index, or a negative errno. */
int cl_launch(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
	      const struct dev_kcall *c, int dep);

/* @n floats of the step's device scratch, or NULL. */
float *cl_scratch(struct chipd_cl_req *r, struct chipd_cl_step *st, size_t n);

#endif
