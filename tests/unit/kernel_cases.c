/* kernel_cases.c - kernel runs against the CPU references (see kernel_cases.h). */
#include "kernel_cases.h"
#include "ref.h"
#include "wl.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Edge cases first: one position, one block, a context that is not a multiple of the
 * block size, several partitions, block size 1 and 256, one kv head for many heads,
 * odd head dims. Sizes stay small enough for the sanitizer builds. */
const struct kc_attn_shape kc_attn_shapes[] = {
    {"h1_d1_bs1_ctx1", 1, 1, 1, 1, 1},
    {"h1_d64_bs16_ctx16_oneblock", 1, 1, 64, 16, 16},
    {"h4kv2_d32_bs16_ctx17", 4, 2, 32, 16, 17},
    {"h8kv2_d64_bs16_ctx300", 8, 2, 64, 16, 300},
    {"h2_d128_bs256_ctx513", 2, 2, 128, 256, 513},
    {"h4kv1_d16_bs1_ctx40", 4, 1, 16, 1, 40},
    {"h3_d7_bs8_ctx1000", 3, 3, 7, 8, 1000},
    {"h2kv1_d256_bs32_ctx257", 2, 1, 256, 32, 257},
};
const size_t kc_attn_nshapes = sizeof(kc_attn_shapes) / sizeof(kc_attn_shapes[0]);

const struct kc_gemm_shape kc_gemm_shapes[] = {
    {"1x1x1", 1, 1, 1, 0},	     {"1x1536x512_gemv", 1, 1536, 512, 0},
    {"17x33x65_acc", 17, 33, 65, 1}, {"64x64x64", 64, 64, 64, 0},
    {"5x300x7_acc", 5, 300, 7, 1},
};
const size_t kc_gemm_nshapes = sizeof(kc_gemm_shapes) / sizeof(kc_gemm_shapes[0]);

/* Small shapes: the sanitizer builds run the same table. */
const struct kc_wl_case kc_wl_cases[KC_WL_NCASES] = {
    {"paged_attention", "layers=2,heads=4,kv_heads=2,head_dim=16,block_size=4,context=10,tokens=8"},
    {"paged_attention", "layers=1,heads=1,kv_heads=1,head_dim=8,block_size=1,context=0,tokens=6"},
    /* crosses the 256-position partition boundary while decoding */
    {"paged_attention",
     "layers=2,heads=2,kv_heads=1,head_dim=32,block_size=16,context=250,tokens=10,vocab=512"},
    {"gemm", "m=3,k=17,chain=3,tokens=12"},
    {"gemm", "m=1,k=1,chain=1,tokens=4,seed=9"},
    {"synthetic", "host_us=10,device_us=10,tokens=8,seed=3"},
};

/* Attention outputs are convex combinations of values in [-1, 1): an absolute bound
 * covers float accumulation over up to DEV_ATTN_PART terms plus the partition fold. */
#define ATTN_TOL 2e-5
/* Extra pool blocks around a scattered request, so ids are not 0..n-1. */
#define POOL_SLACK 3u /* odd: K ids (from the last) even, V ids odd */

static uint64_t rng_state(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill(float *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((int32_t)(rng_state(&seed) >> 40) - (1 << 23)) / (float)(1 << 23);
}

static void compare(const float *got, const float *want, size_t n, struct kc_err *e)
{
	e->max_abs = e->max_rel = 0.0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);
		double r = d / fmax(fabs((double)want[i]), 1e-6);

		if (!(d <= e->max_abs)) /* NaN counts as the largest error */
			e->max_abs = isnan(d) ? INFINITY : d;
		if (r > e->max_rel)
			e->max_rel = r;
	}
}

void kc_print(const char *kernel, const char *shape, const struct kc_err *e)
{
	printf("ERRTAB %-12s %-30s max_abs %.3e max_rel %.3e tol %.1e %s\n", kernel, shape,
	       e->max_abs, e->max_rel, e->tol, e->max_abs <= e->tol ? "ok" : "FAIL");
}

/* Device buffers of one attention run. */
struct attn_bufs {
	float *pool, *q, *knew, *vnew, *scores, *m, *l, *po, *out;
	int32_t *ktab, *vtab;
};

static void attn_free(struct dev *d, struct attn_bufs *b)
{
	void *all[] = {b->pool, b->q,  b->knew, b->vnew, b->scores, b->m,
		       b->l,	b->po, b->out,	b->ktab, b->vtab};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		dev_free(d, all[i]);
}

static int alloc_all(struct dev *d, struct attn_bufs *b, const struct kc_attn_shape *s,
		     uint32_t pool_blocks, uint32_t nblk, uint32_t np)
{
	size_t row = (size_t)s->kv_heads * s->head_dim, hd = (size_t)s->heads * s->head_dim;
	struct {
		void **p;
		size_t n;
	} want[] = {
	    {(void **)&b->pool, (size_t)pool_blocks * s->block_size * row * sizeof(float)},
	    {(void **)&b->q, hd * sizeof(float)},
	    {(void **)&b->knew, row * sizeof(float)},
	    {(void **)&b->vnew, row * sizeof(float)},
	    {(void **)&b->scores, (size_t)s->heads * np * DEV_ATTN_PART * sizeof(float)},
	    {(void **)&b->m, (size_t)s->heads * np * sizeof(float)},
	    {(void **)&b->l, (size_t)s->heads * np * sizeof(float)},
	    {(void **)&b->po, (size_t)s->heads * np * s->head_dim * sizeof(float)},
	    {(void **)&b->out, hd * sizeof(float)},
	    {(void **)&b->ktab, nblk * sizeof(int32_t)},
	    {(void **)&b->vtab, nblk * sizeof(int32_t)},
	};
	int err = 0;

	memset(b, 0, sizeof(*b));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]) && !err; i++)
		err = dev_alloc(d, want[i].n, want[i].p);
	return err;
}

/* Writes the contiguous cache @k/@v (all but the last position) into the pool through
 * the tables, and the tables themselves. */
static int upload_cache(struct dev *d, const struct attn_bufs *b, const struct kc_attn_shape *s,
			const float *k, const float *v, const int32_t *kt, const int32_t *vt,
			uint32_t nblk)
{
	size_t row = (size_t)s->kv_heads * s->head_dim, bf = s->block_size * row;
	int err = 0;

	for (uint32_t p = 0; p + 1 < s->ctx && !err; p++) {
		size_t off = (p % s->block_size) * row;

		err = dev_copy(d, NULL, b->pool + kt[p / s->block_size] * bf + off, k + p * row,
			       row * sizeof(float), DEV_H2D);
		if (!err)
			err = dev_copy(d, NULL, b->pool + vt[p / s->block_size] * bf + off,
				       v + p * row, row * sizeof(float), DEV_H2D);
	}
	if (!err)
		err = dev_copy(d, NULL, b->ktab, kt, nblk * sizeof(int32_t), DEV_H2D);
	if (!err)
		err = dev_copy(d, NULL, b->vtab, vt, nblk * sizeof(int32_t), DEV_H2D);
	return err;
}

static int launch_attention(struct dev *d, const struct attn_bufs *b, const struct kc_attn_shape *s,
			    uint32_t pool_blocks, uint32_t nblk)
{
	struct dev_k_cache cache = {
	    b->pool,	   b->ktab,	b->vtab,
	    nblk,	   pool_blocks, s->block_size * s->kv_heads * s->head_dim,
	    s->block_size, s->kv_heads, s->head_dim};
	struct dev_kcall c = {DEV_K_KV_APPEND, .u.kv = {cache, b->knew, b->vnew, s->ctx - 1}};
	static const enum dev_kernel attn[] = {DEV_K_ATTN_QK, DEV_K_ATTN_SOFTMAX, DEV_K_ATTN_PV,
					       DEV_K_ATTN_UPDATE};
	struct dev_stream *st;
	int err = dev_stream_create(d, &st);

	if (err)
		return err;
	err = dev_launch(st, &c);
	c.u.attn = (struct dev_k_attn){cache,
				       b->q,
				       b->scores,
				       b->m,
				       b->l,
				       b->po,
				       b->out,
				       s->heads,
				       s->ctx,
				       dev_attn_nparts(s->ctx),
				       1.0f / sqrtf((float)s->head_dim)};
	for (size_t i = 0; i < 4 && !err; i++) {
		c.kernel = attn[i];
		err = dev_launch(st, &c);
	}
	if (!err)
		err = dev_stream_sync(st);
	dev_stream_destroy(st);
	return err;
}

int kc_attention(struct dev *d, const struct kc_attn_shape *s, bool scattered, float *out,
		 struct kc_err *e)
{
	uint32_t nblk = (s->ctx + s->block_size - 1) / s->block_size;
	uint32_t pool_blocks = 2 * nblk + (scattered ? POOL_SLACK : 0);
	size_t row = (size_t)s->kv_heads * s->head_dim, hd = (size_t)s->heads * s->head_dim;
	float *k = malloc((size_t)s->ctx * row * sizeof(float));
	float *v = malloc((size_t)s->ctx * row * sizeof(float));
	float *q = malloc(hd * sizeof(float)), *want = malloc(hd * sizeof(float));
	float *got = malloc(hd * sizeof(float)), *back = malloc(row * sizeof(float));
	int32_t *kt = malloc(nblk * sizeof(int32_t)), *vt = malloc(nblk * sizeof(int32_t));
	struct attn_bufs b;
	uint32_t last = s->ctx - 1;
	int err = -ENOMEM;

	if (!k || !v || !q || !want || !got || !back || !kt || !vt)
		goto out_free;
	fill(k, (size_t)s->ctx * row, 1);
	fill(v, (size_t)s->ctx * row, 2);
	fill(q, hd, 3);
	/* scattered: K blocks walk the pool backwards on even ids from its end, V blocks
	 * forwards on odd ids; in order: K then V, each contiguous */
	for (uint32_t i = 0; i < nblk; i++) {
		kt[i] = (int32_t)(scattered ? pool_blocks - 1 - 2 * i : i);
		vt[i] = (int32_t)(scattered ? 2 * i + 1 : nblk + i);
	}
	err = alloc_all(d, &b, s, pool_blocks, nblk, dev_attn_nparts(s->ctx));
	if (!err)
		err = upload_cache(d, &b, s, k, v, kt, vt, nblk);
	if (!err)
		err = dev_copy(d, NULL, b.q, q, hd * sizeof(float), DEV_H2D);
	if (!err)
		err = dev_copy(d, NULL, b.knew, k + last * row, row * sizeof(float), DEV_H2D);
	if (!err)
		err = dev_copy(d, NULL, b.vnew, v + last * row, row * sizeof(float), DEV_H2D);
	if (!err)
		err = launch_attention(d, &b, s, pool_blocks, nblk);
	if (!err)
		err = dev_copy(d, NULL, got, b.out, hd * sizeof(float), DEV_D2H);
	/* the appended position must sit in the pool exactly where the table says */
	if (!err)
		err = dev_copy(d, NULL, back,
			       b.pool + (size_t)vt[last / s->block_size] * s->block_size * row +
				   (last % s->block_size) * row,
			       row * sizeof(float), DEV_D2H);
	if (!err && memcmp(back, v + last * row, row * sizeof(float)))
		err = -EDOM;
	if (!err) {
		dev_ref_attention(q, k, v, s->ctx, s->heads, s->kv_heads, s->head_dim,
				  1.0f / sqrtf((float)s->head_dim), want);
		compare(got, want, hd, e);
		e->tol = ATTN_TOL;
		if (out)
			memcpy(out, got, hd * sizeof(float));
	}
	attn_free(d, &b);
out_free:
	free(k);
	free(v);
	free(q);
	free(want);
	free(got);
	free(back);
	free(kt);
	free(vt);
	return err;
}

int kc_gemm(struct dev *d, const struct kc_gemm_shape *s, struct kc_err *e)
{
	size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
	float *a = malloc(na * sizeof(float)), *bh = malloc(nb * sizeof(float));
	float *want = malloc(nc * sizeof(float)), *got = malloc(nc * sizeof(float));
	void *da = NULL, *db = NULL, *dc = NULL;
	struct dev_stream *st = NULL;
	struct dev_kcall c = {DEV_K_GEMM};
	int err = -ENOMEM;

	if (!a || !bh || !want || !got)
		goto out;
	fill(a, na, 4);
	fill(bh, nb, 5);
	fill(want, nc, 6);
	err = dev_alloc(d, na * sizeof(float), &da);
	if (!err)
		err = dev_alloc(d, nb * sizeof(float), &db);
	if (!err)
		err = dev_alloc(d, nc * sizeof(float), &dc);
	if (!err)
		err = dev_copy(d, NULL, da, a, na * sizeof(float), DEV_H2D);
	if (!err)
		err = dev_copy(d, NULL, db, bh, nb * sizeof(float), DEV_H2D);
	if (!err)
		err = dev_copy(d, NULL, dc, want, nc * sizeof(float), DEV_H2D);
	if (!err)
		err = dev_stream_create(d, &st);
	c.u.gemm = (struct dev_k_gemm){da, db, dc, s->m, s->n, s->k, s->accumulate};
	if (!err)
		err = dev_launch(st, &c);
	if (!err)
		err = dev_stream_sync(st);
	if (!err)
		err = dev_copy(d, NULL, got, dc, nc * sizeof(float), DEV_D2H);
	if (!err) {
		dev_ref_gemm(a, bh, want, s->m, s->n, s->k, s->accumulate);
		compare(got, want, nc, e);
		/* float accumulation of k products of values below 1, plus c */
		e->tol = 2.0 * (s->k + 1) * FLT_EPSILON;
	}
	dev_stream_destroy(st);
	dev_free(d, da);
	dev_free(d, db);
	dev_free(d, dc);
out:
	free(a);
	free(bh);
	free(want);
	free(got);
	return err;
}

int kc_argmax_embed(struct dev *d, uint32_t n)
{
	float *in = malloc(n * sizeof(float)), *row = malloc(n * sizeof(float));
	void *din = NULL, *dout = NULL, *demb = NULL;
	int32_t got = -1, tok = 1;
	struct dev_stream *st = NULL;
	struct dev_kcall c = {DEV_K_ARGMAX};
	int err = -ENOMEM;

	if (!in || !row)
		goto out;
	fill(in, n, 7);
	in[n / 3] = 2.0f; /* two equal maxima: the first must win */
	in[n - 1] = 2.0f;
	err = dev_alloc(d, n * sizeof(float), &din);
	if (!err)
		err = dev_alloc(d, sizeof(int32_t), &dout);
	if (!err)
		err = dev_alloc(d, n * sizeof(float), &demb);
	if (!err)
		err = dev_copy(d, NULL, din, in, n * sizeof(float), DEV_H2D);
	if (!err)
		err = dev_copy(d, NULL, dout, &tok, sizeof(tok), DEV_H2D);
	if (!err)
		err = dev_stream_create(d, &st);
	c.u.argmax = (struct dev_k_argmax){din, dout, n};
	if (!err)
		err = dev_launch(st, &c);
	if (!err)
		err = dev_stream_sync(st);
	if (!err)
		err = dev_copy(d, NULL, &got, dout, sizeof(got), DEV_D2H);
	if (!err && got != (int32_t)dev_ref_argmax(in, n))
		err = -EDOM;
	if (!err && n >= 4) {
		/* the argmax (n / 3) as a token into a table of n / 2 rows of 2 */
		c.kernel = DEV_K_EMBED;
		c.u.embed = (struct dev_k_embed){din, dout, demb, n / 2, 2};
		err = dev_launch(st, &c);
		if (!err)
			err = dev_stream_sync(st);
		if (!err)
			err = dev_copy(d, NULL, row, demb, 2 * sizeof(float), DEV_D2H);
		if (!err && memcmp(row, in + (size_t)(n / 3) * 2, 2 * sizeof(float)))
			err = -EDOM;
	}
	dev_stream_destroy(st);
	dev_free(d, din);
	dev_free(d, dout);
	dev_free(d, demb);
out:
	free(in);
	free(row);
	return err;
}

/* Arena sizes of kc_wl_tokens: ample for the table's shapes. */
#define WL_HOST_ARENA (1u << 20)
#define WL_DEV_ARENA  (8u << 20)
#define WL_MAX_TASKS  512u

int kc_wl_tokens(struct dev *d, const struct kc_wl_case *c, uint64_t *tokens, uint32_t cap,
		 uint32_t *n, char *msg, size_t msgcap)
{
	struct wl_env env = {d, NULL};
	struct wl_params p;
	struct wl_req *r = NULL;
	struct wl_exec *x = NULL;
	struct wl_arena host, dv;
	void *hm = malloc(WL_HOST_ARENA), *dm = NULL;
	int err;

	*n = 0;
	wl_params_init(&p);
	err = hm ? wl_params_parse(&p, c->params, msg, msgcap) : -ENOMEM;
	if (!err)
		err = wl_req_create(&r, &env, c->workload, &p, msg, msgcap);
	if (!err && wl_req_steps(r) > cap)
		err = -ENOSPC;
	if (!err)
		err = wl_exec_create(&x, d, 1);
	if (!err)
		err = dev_alloc(d, WL_DEV_ARENA, &dm);
	for (uint32_t i = 0; !err && i < wl_req_steps(r); i++) {
		struct wl_step st;
		struct wl_out out;

		wl_arena_init(&host, hm, WL_HOST_ARENA);
		wl_arena_init(&dv, dm, WL_DEV_ARENA);
		err = wl_step_init(&st, &host, &dv, WL_MAX_TASKS);
		if (!err)
			err = wl_req_build(r, &st, 0, &out);
		if (!err)
			err = wl_exec_run(x, &st);
		if (!err)
			err = wl_req_token(r, &out, &tokens[i]);
		if (!err)
			*n = i + 1;
	}
	if (err && !msg[0])
		dev_last_error(d, msg, msgcap);
	dev_free(d, dm);
	wl_exec_destroy(x);
	wl_req_destroy(r);
	free(hm);
	return err;
}
