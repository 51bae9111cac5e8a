/* paged_attention.c - the built-in callable "paged_attention": multi-layer decode over a paged KV cache.
 *
 * The model: hidden size E = heads * head_dim. A step embeds the previous token (read
 * on the device), then per layer projects q, k, v (one gemm against [E][F] with
 * F = (heads + 2 kv_heads) head_dim), appends k and v at the step's position through
 * the block tables, attends over every cached position (QK, softmax prepare, PV,
 * online-softmax update) and adds the output projection to the hidden state. The
 * token is the argmax of the final hidden state projected onto the vocabulary. The
 * prompt's `context` positions are cached by the fill hook with seeded values; each
 * step adds one position. Every weight comes from the seed (cl_rand).
 */
#include "ref.h"
#include "cl_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_LAYERS, P_HEADS, P_KV_HEADS, P_HEAD_DIM, P_BLOCK, P_CONTEXT, P_TOKENS, P_VOCAB, P_SEED };

/* The rules between parameters (pa_check) are stated in the docs of the parameters
 * they constrain, so that the table alone says what a request may ask. */
static const struct chipd_cl_param specs[] = {
    [P_LAYERS] = {"layers", CHIPD_CL_INT64, 2, 1, 64,
		  "decoder layers: each projects q, k, v, appends to the cache, attends over it "
		  "and projects back"},
    [P_HEADS] = {"heads", CHIPD_CL_INT64, 8, 1, DEV_MAX_HEADS,
		 "query heads; a multiple of kv_heads, and heads * head_dim at most 8192"},
    [P_KV_HEADS] = {"kv_heads", CHIPD_CL_INT64, 2, 1, DEV_MAX_HEADS,
		    "key/value heads, each shared by heads / kv_heads query heads"},
    [P_HEAD_DIM] = {"head_dim", CHIPD_CL_INT64, 64, 1, DEV_MAX_HEAD_DIM,
		    "elements per head; the hidden size is heads * head_dim"},
    [P_BLOCK] = {"block_size", CHIPD_CL_INT64, 16, 1, DEV_ATTN_PART,
		 "positions per KV cache block; a power of two; block_size * kv_heads * "
		 "head_dim floats at most 4096"},
    [P_CONTEXT] = {"context", CHIPD_CL_INT64, 128, 0, DEV_MAX_CTX - 1,
		   "prompt positions cached (seeded) before the first step; context + tokens "
		   "at most 1048576"},
    [P_TOKENS] = {"tokens", CHIPD_CL_INT64, 16, 1, 65536,
		  "steps, one token each (max_tokens may end the request earlier)"},
    [P_VOCAB] = {"vocab", CHIPD_CL_INT64, 256, 2, 65536,
		 "vocabulary size: a step's token is the argmax of this many logits"},
    [P_SEED] = {"seed", CHIPD_CL_INT64, 1, 0, INT64_MAX, "seed of every weight and of the prompt's cache"},
};

/* cl_rand streams of the tensors; the layer goes in the low bits. */
enum {
	RS_EMB = 1 << 16,
	RS_WQKV = 2 << 16,
	RS_WO = 3 << 16,
	RS_WOUT = 4 << 16,
	RS_K = 5 << 16,
	RS_V = 6 << 16
};

/* Shapes derived from a configuration. */
struct pa_shape {
	uint32_t layers, heads, kvh, dim, bs, ctx0, tokens, vocab;
	uint32_t e, f;	     /* hidden size, qkv width */
	uint32_t nblk;	     /* logical blocks per table, for ctx0 + tokens positions */
	uint32_t blk_floats; /* floats one block of one table needs */
	uint64_t seed;
};

struct pa_state {
	struct pa_shape s;
	float *emb, *wqkv, *wo, *wout; /* device */
	int32_t *tabs;		       /* device [layers][2][nblk] */
	int32_t *tok;		       /* device: the latest token */
	int32_t *ids;		       /* host copy of tabs, for release */
};

static void shape_of(const int64_t *cfg, struct pa_shape *s)
{
	s->layers = (uint32_t)cfg[P_LAYERS];
	s->heads = (uint32_t)cfg[P_HEADS];
	s->kvh = (uint32_t)cfg[P_KV_HEADS];
	s->dim = (uint32_t)cfg[P_HEAD_DIM];
	s->bs = (uint32_t)cfg[P_BLOCK];
	s->ctx0 = (uint32_t)cfg[P_CONTEXT];
	s->tokens = (uint32_t)cfg[P_TOKENS];
	s->vocab = (uint32_t)cfg[P_VOCAB];
	s->seed = (uint64_t)cfg[P_SEED];
	s->e = s->heads * s->dim;
	s->f = (s->heads + 2 * s->kvh) * s->dim;
	s->nblk = (s->ctx0 + s->tokens + s->bs - 1) / s->bs;
	s->blk_floats = s->bs * s->kvh * s->dim;
}

static int pa_check(const int64_t *cfg, char *msg, size_t cap)
{
	struct pa_shape s;

	shape_of(cfg, &s);
	if (s.heads % s.kvh) {
		snprintf(msg, cap, "paged_attention: heads %u is not a multiple of kv_heads %u",
			 s.heads, s.kvh);
		return -EINVAL;
	}
	if (s.bs & (s.bs - 1)) {
		snprintf(msg, cap, "paged_attention: block_size %u is not a power of two", s.bs);
		return -EINVAL;
	}
	if ((uint64_t)s.ctx0 + s.tokens > DEV_MAX_CTX) {
		snprintf(msg, cap, "paged_attention: context + tokens = %llu above %u",
			 (unsigned long long)s.ctx0 + s.tokens, DEV_MAX_CTX);
		return -EINVAL;
	}
	if ((uint64_t)s.heads * s.dim > 8192) {
		snprintf(msg, cap, "paged_attention: heads * head_dim = %llu above 8192",
			 (unsigned long long)s.heads * s.dim);
		return -EINVAL;
	}
	return 0;
}

static uint32_t pa_steps(const int64_t *cfg)
{
	return (uint32_t)cfg[P_TOKENS];
}

/* Weight scale that keeps a product's variance that of its input. */
static float weight_scale(uint32_t fan_in)
{
	return sqrtf(3.0f / (float)fan_in);
}

/* Uploads @layers tensors of @n seeded floats each (stream @rs | layer) into one new
 * device buffer *@dst. */
static int upload_rand(struct chipd_cl_req *r, float **dst, uint32_t layers, size_t n, uint64_t seed,
		       uint64_t rs, float scale)
{
	size_t bytes = (size_t)layers * n * sizeof(float);
	float *h = r->host->host_alloc(r, bytes);
	int err;

	if (!h)
		return -ENOMEM;
	for (uint32_t l = 0; l < layers; l++)
		cl_rand_fill(h + l * n, n, seed, rs | l, 0, scale);
	err = cl_upload(r, (void **)dst, h, bytes);
	r->host->host_free(r, h, bytes);
	return err;
}

/* Value of the prompt cache: K or V (@rs) of layer @l at contiguous index @i. */
static float prompt_kv(const struct pa_shape *s, uint64_t rs, uint32_t l, uint64_t i)
{
	return cl_rand(s->seed, rs | l, i);
}

/* Writes the prompt's positions into the pool blocks of every table. */
static int fill_prompt(struct chipd_cl_req *r, struct pa_state *st)
{
	const struct pa_shape *s = &st->s;
	struct chipd_cl_kv kv;
	uint32_t row = s->kvh * s->dim;
	float *h = r->host->host_alloc(r, (size_t)s->blk_floats * sizeof(*h));
	int err = 0;

	if (!h)
		return -ENOMEM;
	r->host->kv_pool(r, &kv);
	for (uint32_t t = 0; t < 2 * s->layers && !err; t++) {
		uint64_t rs = t % 2 ? RS_V : RS_K;

		for (uint32_t b = 0; b * s->bs < s->ctx0 && !err; b++) {
			uint32_t n = s->ctx0 - b * s->bs < s->bs ? s->ctx0 - b * s->bs : s->bs;
			int32_t id = st->ids[(size_t)t * s->nblk + b];

			for (uint64_t i = 0; i < (uint64_t)n * row; i++)
				h[i] = prompt_kv(s, rs, t / 2, (uint64_t)b * s->bs * row + i);
			err = r->host->copy(r, kv.base + (size_t)id * kv.block_floats, h,
					    (size_t)n * row * sizeof(*h), CHIPD_CL_H2D);
		}
	}
	r->host->host_free(r, h, (size_t)s->blk_floats * sizeof(*h));
	return err;
}

static void pa_free(struct chipd_cl_req *r, struct pa_state *st)
{
	r->host->dev_free(r, st->emb);
	r->host->dev_free(r, st->wqkv);
	r->host->dev_free(r, st->wo);
	r->host->dev_free(r, st->wout);
	r->host->dev_free(r, st->tabs);
	r->host->dev_free(r, st->tok);
	if (st->ids)
		r->host->host_free(r, st->ids, (size_t)2 * st->s.layers * st->s.nblk * sizeof(*st->ids));
	r->host->host_free(r, st, sizeof(*st));
}

/* The block list, then the blocks (from the worker's pool, or a private one). */
static int reserve_blocks(struct chipd_cl_req *r, struct pa_state *st, char *msg, size_t cap)
{
	const struct pa_shape *s = &st->s;
	uint32_t need = 2 * s->layers * s->nblk;

	st->ids = r->host->host_alloc(r, (size_t)need * sizeof(*st->ids));
	if (!st->ids) {
		snprintf(msg, cap, "paged_attention: no host memory for %u KV block ids", need);
		return -ENOMEM;
	}
	return r->host->kv_take(r, need, s->blk_floats, st->ids, msg, cap);
}

static void pa_cost(const int64_t *cfg, struct chipd_cl_cost *out)
{
	struct pa_shape s;
	uint64_t ids, stage, t;

	shape_of(cfg, &s);
	ids = (uint64_t)2 * s.layers * s.nblk * sizeof(int32_t);
	/* the largest staging buffer: one tensor family at a time (pa_fill) */
	stage = (uint64_t)s.blk_floats * sizeof(float);
	t = (uint64_t)s.vocab * s.e * sizeof(float); /* emb, and wout alike */
	stage = t > stage ? t : stage;
	t = (uint64_t)s.layers * s.e * s.f * sizeof(float);
	stage = t > stage ? t : stage;
	t = (uint64_t)s.layers * s.e * s.e * sizeof(float);
	stage = t > stage ? t : stage;
	out->host_bytes = sizeof(struct pa_state) + ids + stage;
	out->dev_bytes = ids /* tabs */ + (uint64_t)2 * s.vocab * s.e * sizeof(float) +
			 (uint64_t)s.layers * s.e * (s.f + s.e) * sizeof(float) + sizeof(int32_t);
	out->kv_blocks = (uint64_t)2 * s.layers * s.nblk;
	out->kv_block_floats = s.blk_floats;
}

static int pa_reserve(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct pa_state *st = r->host->host_alloc(r, sizeof(*st));
	int err;

	if (!st) {
		snprintf(msg, cap, "paged_attention: no host memory for the request");
		return -ENOMEM;
	}
	shape_of(r->cfg, &st->s);
	err = reserve_blocks(r, st, msg, cap);
	if (err) {
		pa_free(r, st);
		return err;
	}
	r->state = st;
	return 0;
}

static int pa_fill(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct pa_state *st = r->state;
	const struct pa_shape *s = &st->s;
	int32_t tok = (int32_t)(s->seed % s->vocab);
	int err;

	err = cl_upload(r, (void **)&st->tabs, st->ids,
			(size_t)2 * s->layers * s->nblk * sizeof(*st->ids));
	if (!err)
		err = fill_prompt(r, st);
	if (!err)
		err = upload_rand(r, &st->emb, 1, (size_t)s->vocab * s->e, s->seed, RS_EMB, 1.0f);
	if (!err)
		err = upload_rand(r, &st->wqkv, s->layers, (size_t)s->e * s->f, s->seed, RS_WQKV,
				  weight_scale(s->e));
	if (!err)
		err = upload_rand(r, &st->wo, s->layers, (size_t)s->e * s->e, s->seed, RS_WO,
				  weight_scale(s->e));
	if (!err)
		err = upload_rand(r, &st->wout, 1, (size_t)s->e * s->vocab, s->seed, RS_WOUT,
				  weight_scale(s->e));
	if (!err)
		err = cl_upload(r, (void **)&st->tok, &tok, sizeof(tok));
	if (err)
		snprintf(msg, cap, "paged_attention: cannot reserve device memory (%d)", err);
	return err;
}

static void pa_release(struct chipd_cl_req *r)
{
	struct pa_state *st = r->state;

	r->host->kv_give(r, 2 * st->s.layers * st->s.nblk, st->ids);
	pa_free(r, st);
}

static struct dev_k_cache cache_of(const struct chipd_cl_kv *kv, const struct pa_state *st,
				   uint32_t l)
{
	struct dev_k_cache c = {
	    .pool = kv->base,
	    .ktab = st->tabs + (size_t)2 * l * st->s.nblk,
	    .vtab = st->tabs + (size_t)(2 * l + 1) * st->s.nblk,
	    .table_len = st->s.nblk,
	    .pool_blocks = kv->blocks,
	    .block_stride = kv->block_floats,
	    .block_size = st->s.bs,
	    .kv_heads = st->s.kvh,
	    .head_dim = st->s.dim,
	};
	return c;
}

#define ADD(call)                                                                                  \
	do {                                                                                       \
		t = cl_launch(r, stp, lane, (call), t);                                           \
		if (t < 0)                                                                         \
			return t;                                                                  \
	} while (0)

static int pa_build(struct chipd_cl_req *r, struct chipd_cl_step *stp, uint32_t lane, uint32_t step, void *host_tok)
{
	const struct pa_state *st = r->state;
	const struct pa_shape *s = &st->s;
	uint32_t pos = s->ctx0 + step, ctx = pos + 1, np = dev_attn_nparts(ctx);
	float *x = cl_scratch(r, stp, s->e), *qkv = cl_scratch(r, stp, s->f);
	float *att = cl_scratch(r, stp, s->e), *logits = cl_scratch(r, stp, s->vocab);
	float *sc = cl_scratch(r, stp, (size_t)s->heads * np * DEV_ATTN_PART);
	float *m = cl_scratch(r, stp, (size_t)s->heads * np),
	      *l = cl_scratch(r, stp, (size_t)s->heads * np);
	float *po = cl_scratch(r, stp, (size_t)s->heads * np * s->dim);
	struct chipd_cl_kv kv;
	struct dev_kcall c;
	int t = -1;

	if (!x || !qkv || !att || !logits || !sc || !m || !l || !po)
		return -ENOBUFS;
	r->host->kv_pool(r, &kv);
	c = (struct dev_kcall){DEV_K_EMBED, .u.embed = {st->emb, st->tok, x, s->vocab, s->e}};
	ADD(&c);
	for (uint32_t layer = 0; layer < s->layers; layer++) {
		struct dev_k_cache cache = cache_of(&kv, st, layer);

		c = (struct dev_kcall){
		    DEV_K_GEMM,
		    .u.gemm = {x, st->wqkv + (size_t)layer * s->e * s->f, qkv, 1, s->f, s->e, 0}};
		ADD(&c);
		c = (struct dev_kcall){DEV_K_KV_APPEND,
				       .u.kv = {cache, qkv + (size_t)s->heads * s->dim,
						qkv + (size_t)(s->heads + s->kvh) * s->dim, pos}};
		ADD(&c);
		c = (struct dev_kcall){DEV_K_ATTN_QK,
				       .u.attn = {cache, qkv, sc, m, l, po, att, s->heads, ctx, np,
						  1.0f / sqrtf((float)s->dim)}};
		ADD(&c);
		c.kernel = DEV_K_ATTN_SOFTMAX;
		ADD(&c);
		c.kernel = DEV_K_ATTN_PV;
		ADD(&c);
		c.kernel = DEV_K_ATTN_UPDATE;
		ADD(&c);
		c = (struct dev_kcall){
		    DEV_K_GEMM,
		    .u.gemm = {att, st->wo + (size_t)layer * s->e * s->e, x, 1, s->e, s->e, 1}};
		ADD(&c);
	}
	c = (struct dev_kcall){DEV_K_GEMM, .u.gemm = {x, st->wout, logits, 1, s->vocab, s->e, 0}};
	ADD(&c);
	c = (struct dev_kcall){DEV_K_ARGMAX, .u.argmax = {logits, st->tok, s->vocab}};
	ADD(&c);
	t = r->host->copy_task(stp, lane, host_tok, st->tok, sizeof(int32_t), CHIPD_CL_D2H, t);
	return t < 0 ? t : 0;
}

/* The reference decode: the same model over contiguous caches, each operation by the
 * double-precision references of ref.c. */
struct pa_ref {
	struct pa_shape s;
	float *emb, *wqkv, *wo, *wout, *k, *v, *x, *qkv, *att, *logits;
};

static void ref_free(struct pa_ref *m)
{
	float **bufs[] = {&m->emb, &m->wqkv, &m->wo,  &m->wout, &m->k,
			  &m->v,   &m->x,    &m->qkv, &m->att,	&m->logits};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(*bufs[i]);
}

static int ref_init(struct pa_ref *m, const int64_t *cfg)
{
	struct pa_shape *s = &m->s;
	size_t cache, row;

	memset(m, 0, sizeof(*m));
	shape_of(cfg, s);
	row = (size_t)s->kvh * s->dim;
	cache = (size_t)(s->ctx0 + s->tokens) * row;
	m->emb = malloc((size_t)s->vocab * s->e * sizeof(float));
	m->wqkv = malloc((size_t)s->layers * s->e * s->f * sizeof(float));
	m->wo = malloc((size_t)s->layers * s->e * s->e * sizeof(float));
	m->wout = malloc((size_t)s->e * s->vocab * sizeof(float));
	m->k = malloc((size_t)s->layers * cache * sizeof(float));
	m->v = malloc((size_t)s->layers * cache * sizeof(float));
	m->x = malloc((size_t)s->e * sizeof(float));
	m->qkv = malloc((size_t)s->f * sizeof(float));
	m->att = malloc((size_t)s->e * sizeof(float));
	m->logits = malloc((size_t)s->vocab * sizeof(float));
	if (!m->emb || !m->wqkv || !m->wo || !m->wout || !m->k || !m->v || !m->x || !m->qkv ||
	    !m->att || !m->logits) {
		ref_free(m);
		return -ENOMEM;
	}
	cl_rand_fill(m->emb, (size_t)s->vocab * s->e, s->seed, RS_EMB, 0, 1.0f);
	for (uint32_t l = 0; l < s->layers; l++) {
		cl_rand_fill(m->wqkv + (size_t)l * s->e * s->f, (size_t)s->e * s->f, s->seed,
			     RS_WQKV | l, 0, weight_scale(s->e));
		cl_rand_fill(m->wo + (size_t)l * s->e * s->e, (size_t)s->e * s->e, s->seed,
			     RS_WO | l, 0, weight_scale(s->e));
		for (size_t i = 0; i < (size_t)s->ctx0 * row; i++) {
			m->k[l * cache + i] = prompt_kv(s, RS_K, l, i);
			m->v[l * cache + i] = prompt_kv(s, RS_V, l, i);
		}
	}
	cl_rand_fill(m->wout, (size_t)s->e * s->vocab, s->seed, RS_WOUT, 0, weight_scale(s->e));
	return 0;
}

static int pa_ref(const int64_t *cfg, uint64_t *tokens, uint32_t n)
{
	struct pa_ref m;
	const struct pa_shape *s = &m.s;
	uint32_t tok;
	int err = ref_init(&m, cfg);

	if (err)
		return err;
	tok = (uint32_t)(s->seed % s->vocab);
	for (uint32_t step = 0; step < n; step++) {
		uint32_t pos = s->ctx0 + step;
		size_t row = (size_t)s->kvh * s->dim, cache = (size_t)(s->ctx0 + s->tokens) * row;

		memcpy(m.x, m.emb + (size_t)tok * s->e, s->e * sizeof(float));
		for (uint32_t l = 0; l < s->layers; l++) {
			float *k = m.k + l * cache, *v = m.v + l * cache;

			dev_ref_gemm(m.x, m.wqkv + (size_t)l * s->e * s->f, m.qkv, 1, s->f, s->e,
				     false);
			memcpy(k + pos * row, m.qkv + s->e, row * sizeof(float));
			memcpy(v + pos * row, m.qkv + s->e + row, row * sizeof(float));
			dev_ref_attention(m.qkv, k, v, pos + 1, s->heads, s->kvh, s->dim,
					  1.0f / sqrtf((float)s->dim), m.att);
			dev_ref_gemm(m.att, m.wo + (size_t)l * s->e * s->e, m.x, 1, s->e, s->e,
				     true);
		}
		dev_ref_gemm(m.x, m.wout, m.logits, 1, s->vocab, s->e, false);
		tok = dev_ref_argmax(m.logits, s->vocab);
		tokens[step] = tok;
	}
	ref_free(&m);
	return 0;
}

static const struct chipd_callable callable = {
    .abi = CHIPD_CALLABLE_ABI,
    .version = 1,
    .token_bytes = sizeof(int32_t),
    .name = "paged_attention",
    .doc = "multi-layer decode over a paged KV cache; the prompt's cache grows by one "
	   "position per step",
    .params = specs,
    .nparams = sizeof(specs) / sizeof(specs[0]),
    .check = pa_check,
    .steps = pa_steps,
    .cost = pa_cost,
    .reserve = pa_reserve,
    .fill = pa_fill,
    .release = pa_release,
    .build = pa_build,
    .ref = pa_ref,
};

CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void)
{
	return &callable;
}
