/* cl_util.c - helpers of the built-in callables (see cl_util.h). */
#include "cl_util.h"

uint64_t cl_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

float cl_rand(uint64_t seed, uint64_t stream, uint64_t i)
{
	uint64_t h = cl_mix(cl_mix(seed ^ cl_mix(stream)) + i);

	/* 24 random bits: exactly representable, so every path gets the same float */
	return (float)((int32_t)(h >> 40) - (1 << 23)) / (float)(1u << 23);
}

void cl_rand_fill(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t first, float scale)
{
	for (size_t j = 0; j < n; j++)
		dst[j] = scale * cl_rand(seed, stream, first + j);
}

int cl_upload(struct chipd_cl_req *r, void **dst, const void *src, size_t n)
{
	int err = r->host->dev_alloc(r, n, dst);

	if (err)
		return err;
	err = r->host->copy(r, *dst, src, n, CHIPD_CL_H2D);
	if (err) {
		r->host->dev_free(r, *dst);
		*dst = NULL;
	}
	return err;
}

int cl_launch(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
	      const struct dev_kcall *c, int dep)
{
	return r->host->launch(st, lane, (int)c->kernel, &c->u, dev_kcall_args_size(c->kernel), dep);
}

float *cl_scratch(struct chipd_cl_req *r, struct chipd_cl_step *st, size_t n)
{
	return r->host->scratch(st, n * sizeof(float));
}
