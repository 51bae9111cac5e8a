/* sim_kernels.c - the sim backend's kernels: the GPU algorithms (partitioned
 * attention with an online-softmax fold, float accumulation) written in plain C.
 * They are not the references (ref.c): those compute the same math the direct way,
 * in double, over a contiguous cache. */
#include "dev_impl.h"
#include "ref.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

static void gemm(const struct dev_k_gemm *g)
{
	for (uint32_t i = 0; i < g->m; i++) {
		for (uint32_t j = 0; j < g->n; j++) {
			float acc = 0.0f;

			for (uint32_t t = 0; t < g->k; t++)
				acc += g->a[(size_t)i * g->k + t] * g->b[(size_t)t * g->n + j];
			if (g->accumulate)
				acc += g->c[(size_t)i * g->n + j];
			g->c[(size_t)i * g->n + j] = acc;
		}
	}
}

static int embed(const struct dev_k_embed *e, char *msg, size_t cap)
{
	int32_t tok = *e->token;

	if (tok < 0 || (uint32_t)tok >= e->vocab) {
		snprintf(msg, cap, "embed: token %d outside vocab %u", (int)tok, e->vocab);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < e->dim; i++)
		e->out[i] = e->table[(size_t)tok * e->dim + i];
	return 0;
}

/* The address of position @pos, kv head @kvh in the cache through table @tab, or NULL
 * (with a message) if the table points outside the pool. */
static float *slot(const struct dev_k_cache *c, const int32_t *tab, uint32_t pos, uint32_t kvh,
		   char *msg, size_t cap)
{
	uint32_t b = pos / c->block_size;
	int32_t id = b < c->table_len ? tab[b] : -1;

	if (id < 0 || (uint32_t)id >= c->pool_blocks) {
		snprintf(msg, cap, "kv: logical block %u maps to %d outside the pool of %u", b,
			 (int)id, c->pool_blocks);
		return NULL;
	}
	return c->pool + (size_t)id * c->block_stride +
	       ((size_t)(pos % c->block_size) * c->kv_heads + kvh) * c->head_dim;
}

static int kv_append(const struct dev_k_kv_append *a, char *msg, size_t cap)
{
	const struct dev_k_cache *c = &a->cache;

	for (uint32_t h = 0; h < c->kv_heads; h++) {
		float *k = slot(c, c->ktab, a->pos, h, msg, cap);
		float *v = slot(c, c->vtab, a->pos, h, msg, cap);

		if (!k || !v)
			return -EINVAL;
		for (uint32_t d = 0; d < c->head_dim; d++) {
			k[d] = a->k[h * c->head_dim + d];
			v[d] = a->v[h * c->head_dim + d];
		}
	}
	return 0;
}

/* Scratch row of head @h, partition @part. */
static float *row(const struct dev_k_attn *a, float *base, uint32_t h, uint32_t part,
		  uint32_t width)
{
	return base + ((size_t)h * a->nparts + part) * width;
}

static int attn_qk(const struct dev_k_attn *a, char *msg, size_t cap)
{
	const struct dev_k_cache *c = &a->cache;
	uint32_t group = a->heads / c->kv_heads;

	for (uint32_t h = 0; h < a->heads; h++) {
		const float *q = a->q + (size_t)h * c->head_dim;

		for (uint32_t part = 0; part < a->nparts; part++) {
			float *s = row(a, a->scores, h, part, DEV_ATTN_PART);

			for (uint32_t t = 0; t < DEV_ATTN_PART; t++) {
				uint32_t p = part * DEV_ATTN_PART + t;
				const float *k;
				float acc = 0.0f;

				if (p >= a->ctx) {
					s[t] = 0.0f;
					continue;
				}
				k = slot(c, c->ktab, p, h / group, msg, cap);
				if (!k)
					return -EINVAL;
				for (uint32_t d = 0; d < c->head_dim; d++)
					acc += q[d] * k[d];
				s[t] = acc;
			}
		}
	}
	return 0;
}

static void attn_softmax(const struct dev_k_attn *a)
{
	for (uint32_t h = 0; h < a->heads; h++) {
		for (uint32_t part = 0; part < a->nparts; part++) {
			float *s = row(a, a->scores, h, part, DEV_ATTN_PART);
			uint32_t valid = a->ctx - part * DEV_ATTN_PART;
			float mx = -INFINITY, sum = 0.0f;

			if (valid > DEV_ATTN_PART)
				valid = DEV_ATTN_PART;
			for (uint32_t t = 0; t < valid; t++) {
				s[t] *= a->scale;
				mx = fmaxf(mx, s[t]);
			}
			for (uint32_t t = 0; t < DEV_ATTN_PART; t++) {
				s[t] = t < valid ? expf(s[t] - mx) : 0.0f;
				sum += s[t];
			}
			*row(a, a->m, h, part, 1) = mx;
			*row(a, a->l, h, part, 1) = sum;
		}
	}
}

static int attn_pv(const struct dev_k_attn *a, char *msg, size_t cap)
{
	const struct dev_k_cache *c = &a->cache;
	uint32_t group = a->heads / c->kv_heads;

	for (uint32_t h = 0; h < a->heads; h++) {
		for (uint32_t part = 0; part < a->nparts; part++) {
			const float *pr = row(a, a->scores, h, part, DEV_ATTN_PART);
			float *o = row(a, a->po, h, part, c->head_dim);

			for (uint32_t d = 0; d < c->head_dim; d++)
				o[d] = 0.0f;
			for (uint32_t t = 0; t < DEV_ATTN_PART; t++) {
				uint32_t p = part * DEV_ATTN_PART + t;
				const float *v;

				if (p >= a->ctx)
					break;
				v = slot(c, c->vtab, p, h / group, msg, cap);
				if (!v)
					return -EINVAL;
				for (uint32_t d = 0; d < c->head_dim; d++)
					o[d] += pr[t] * v[d];
			}
		}
	}
	return 0;
}

static void attn_update(const struct dev_k_attn *a)
{
	uint32_t dim = a->cache.head_dim;

	for (uint32_t h = 0; h < a->heads; h++) {
		float *out = a->out + (size_t)h * dim;
		float mx = -INFINITY, sum = 0.0f;

		for (uint32_t d = 0; d < dim; d++)
			out[d] = 0.0f;
		for (uint32_t part = 0; part < a->nparts; part++) {
			float mc = *row(a, a->m, h, part, 1);
			float mn = fmaxf(mx, mc);
			float old = expf(mx - mn), cur = expf(mc - mn);
			const float *o = row(a, a->po, h, part, dim);

			sum = sum * old + *row(a, a->l, h, part, 1) * cur;
			for (uint32_t d = 0; d < dim; d++)
				out[d] = out[d] * old + o[d] * cur;
			mx = mn;
		}
		for (uint32_t d = 0; d < dim; d++)
			out[d] /= sum;
	}
}

/* dev_ref_argmax's answer: NaN never wins (the GPU kernel answers the same). */
static void argmax(const struct dev_k_argmax *a)
{
	*a->out = (int32_t)dev_ref_argmax(a->in, a->n);
}

/* Device time is not host CPU time: the sim sleeps through it, leaving the cores to
 * the host threads whose overlap with it is what a synthetic workload measures. */
static void spin(const struct dev_k_spin *s)
{
	struct timespec t;

	if (s->ns == 0) { /* an empty task: even an expired sleep costs ~100 us here */
		*s->out = s->token;
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)(s->ns / 1000000000u);
	t.tv_nsec += (long)(s->ns % 1000000000u);
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
		;
	*s->out = s->token;
}

int dev_sim_run(const struct dev_kcall *c, char *msg, size_t cap)
{
	switch (c->kernel) {
	case DEV_K_GEMM:
		gemm(&c->u.gemm);
		return 0;
	case DEV_K_EMBED:
		return embed(&c->u.embed, msg, cap);
	case DEV_K_KV_APPEND:
		return kv_append(&c->u.kv, msg, cap);
	case DEV_K_ATTN_QK:
		return attn_qk(&c->u.attn, msg, cap);
	case DEV_K_ATTN_SOFTMAX:
		attn_softmax(&c->u.attn);
		return 0;
	case DEV_K_ATTN_PV:
		return attn_pv(&c->u.attn, msg, cap);
	case DEV_K_ATTN_UPDATE:
		attn_update(&c->u.attn);
		return 0;
	case DEV_K_ARGMAX:
		argmax(&c->u.argmax);
		return 0;
	case DEV_K_SPIN:
		spin(&c->u.spin);
		return 0;
	case DEV_K_COUNT:
		break;
	}
	snprintf(msg, cap, "sim: unknown kernel %d", (int)c->kernel);
	return -EINVAL;
}
