/* ref.c - CPU references of the kernels (see ref.h). */
#include "ref.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

void dev_ref_gemm(const float *a, const float *b, float *c, uint32_t m, uint32_t n, uint32_t k,
		  bool accumulate)
{
	for (uint32_t i = 0; i < m; i++) {
		for (uint32_t j = 0; j < n; j++) {
			double acc = accumulate ? c[(size_t)i * n + j] : 0.0;

			for (uint32_t t = 0; t < k; t++)
				acc += (double)a[(size_t)i * k + t] * b[(size_t)t * n + j];
			c[(size_t)i * n + j] = (float)acc;
		}
	}
}

void dev_ref_attention(const float *q, const float *k, const float *v, uint32_t ctx, uint32_t heads,
		       uint32_t kv_heads, uint32_t head_dim, float scale, float *out)
{
	double *p = malloc((size_t)ctx * sizeof(*p));
	uint32_t group = heads / kv_heads;

	if (!p)
		abort(); /* a reference that cannot run must not pass */
	for (uint32_t h = 0; h < heads; h++) {
		const float *qh = q + (size_t)h * head_dim;
		size_t kvh = h / group;
		double mx = -INFINITY, sum = 0.0;

		for (uint32_t pos = 0; pos < ctx; pos++) {
			const float *kp = k + ((size_t)pos * kv_heads + kvh) * head_dim;
			double s = 0.0;

			for (uint32_t d = 0; d < head_dim; d++)
				s += (double)qh[d] * kp[d];
			p[pos] = s * scale;
			mx = fmax(mx, p[pos]);
		}
		for (uint32_t pos = 0; pos < ctx; pos++) {
			p[pos] = exp(p[pos] - mx);
			sum += p[pos];
		}
		for (uint32_t d = 0; d < head_dim; d++) {
			double acc = 0.0;

			for (uint32_t pos = 0; pos < ctx; pos++)
				acc += p[pos] * v[((size_t)pos * kv_heads + kvh) * head_dim + d];
			out[(size_t)h * head_dim + d] = (float)(acc / sum);
		}
	}
	free(p);
}

uint32_t dev_ref_argmax(const float *in, uint32_t n)
{
	uint32_t best = n; /* none yet */

	for (uint32_t i = 0; i < n; i++)
		if (!isnan(in[i]) && (best == n || in[i] > in[best]))
			best = i;
	return best < n ? best : 0;
}
