/* kcheck.c - host-side shape check of a kernel call, run before every launch. */
#include "device.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static const char *const kernel_names[DEV_K_COUNT] = {
    [DEV_K_GEMM] = "gemm",
    [DEV_K_EMBED] = "embed",
    [DEV_K_KV_APPEND] = "kv_append",
    [DEV_K_ATTN_QK] = "attn_qk",
    [DEV_K_ATTN_SOFTMAX] = "attn_softmax",
    [DEV_K_ATTN_PV] = "attn_pv",
    [DEV_K_ATTN_UPDATE] = "attn_update",
    [DEV_K_ARGMAX] = "argmax",
    [DEV_K_SPIN] = "spin",
};

const char *dev_kernel_name(enum dev_kernel k)
{
	return (unsigned)k < DEV_K_COUNT ? kernel_names[k] : "?";
}

static int bad(char *msg, size_t cap, enum dev_kernel k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(char *msg, size_t cap, enum dev_kernel k, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (msg && cap) {
		n = snprintf(msg, cap, "%s: ", dev_kernel_name(k));
		if (n >= 0 && (size_t)n < cap) {
			va_start(ap, fmt);
			vsnprintf(msg + n, cap - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

static bool outside(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo || v > hi;
}

/* "@name must be in [lo, hi]" unless it is. */
#define RANGE(k, name, v, lo, hi)                                                                  \
	do {                                                                                       \
		if (outside((v), (lo), (hi)))                                                      \
			return bad(msg, cap, k, "%s %u outside [%u, %u]", name, (unsigned)(v),     \
				   (unsigned)(lo), (unsigned)(hi));                                \
	} while (0)

#define NONNULL(k, name, p)                                                                        \
	do {                                                                                       \
		if (!(p))                                                                          \
			return bad(msg, cap, k, "%s is NULL", name);                               \
	} while (0)

static int check_cache(const struct dev_k_cache *c, enum dev_kernel k, char *msg, size_t cap)
{
	NONNULL(k, "pool", c->pool);
	NONNULL(k, "ktab", c->ktab);
	NONNULL(k, "vtab", c->vtab);
	RANGE(k, "pool_blocks", c->pool_blocks, 1, INT32_MAX);
	RANGE(k, "table_len", c->table_len, 1, DEV_MAX_CTX);
	RANGE(k, "head_dim", c->head_dim, 1, DEV_MAX_HEAD_DIM);
	RANGE(k, "kv_heads", c->kv_heads, 1, DEV_MAX_HEADS);
	RANGE(k, "block_size", c->block_size, 1, DEV_ATTN_PART);
	if (c->block_size & (c->block_size - 1))
		return bad(msg, cap, k, "block_size %u is not a power of two", c->block_size);
	if ((uint64_t)c->block_stride < (uint64_t)c->block_size * c->kv_heads * c->head_dim)
		return bad(msg, cap, k, "block_stride %u below block_size*kv_heads*head_dim",
			   c->block_stride);
	return 0;
}

static int check_attn(const struct dev_k_attn *a, enum dev_kernel k, char *msg, size_t cap)
{
	int err = check_cache(&a->cache, k, msg, cap);

	if (err)
		return err;
	RANGE(k, "heads", a->heads, 1, DEV_MAX_HEADS);
	if (a->heads % a->cache.kv_heads)
		return bad(msg, cap, k, "heads %u not a multiple of kv_heads %u", a->heads,
			   a->cache.kv_heads);
	RANGE(k, "ctx", a->ctx, 1, DEV_MAX_CTX);
	if ((uint64_t)a->cache.table_len * a->cache.block_size < a->ctx)
		return bad(msg, cap, k, "ctx %u beyond table_len %u blocks of %u", a->ctx,
			   a->cache.table_len, a->cache.block_size);
	if (a->nparts != dev_attn_nparts(a->ctx))
		return bad(msg, cap, k, "nparts %u, ctx %u needs %u", a->nparts, a->ctx,
			   dev_attn_nparts(a->ctx));
	if (!(a->scale > 0.0f))
		return bad(msg, cap, k, "scale must be positive");
	NONNULL(k, "q", a->q);
	NONNULL(k, "scores", a->scores);
	NONNULL(k, "m", a->m);
	NONNULL(k, "l", a->l);
	NONNULL(k, "po", a->po);
	if (k == DEV_K_ATTN_UPDATE)
		NONNULL(k, "out", a->out);
	return 0;
}

int dev_kcall_check(const struct dev_kcall *c, char *msg, size_t cap)
{
	enum dev_kernel k = c->kernel;

	switch (k) {
	case DEV_K_GEMM:
		NONNULL(k, "a", c->u.gemm.a);
		NONNULL(k, "b", c->u.gemm.b);
		NONNULL(k, "c", c->u.gemm.c);
		RANGE(k, "m", c->u.gemm.m, 1, DEV_MAX_DIM);
		RANGE(k, "n", c->u.gemm.n, 1, DEV_MAX_DIM);
		RANGE(k, "k", c->u.gemm.k, 1, DEV_MAX_DIM);
		RANGE(k, "accumulate", c->u.gemm.accumulate, 0, 1);
		return 0;
	case DEV_K_EMBED:
		NONNULL(k, "table", c->u.embed.table);
		NONNULL(k, "token", c->u.embed.token);
		NONNULL(k, "out", c->u.embed.out);
		RANGE(k, "vocab", c->u.embed.vocab, 1, INT32_MAX);
		RANGE(k, "dim", c->u.embed.dim, 1, DEV_MAX_DIM);
		return 0;
	case DEV_K_KV_APPEND:
		NONNULL(k, "k", c->u.kv.k);
		NONNULL(k, "v", c->u.kv.v);
		RANGE(k, "pos", c->u.kv.pos, 0, DEV_MAX_CTX - 1);
		if (check_cache(&c->u.kv.cache, k, msg, cap))
			return -EINVAL;
		if (c->u.kv.pos / c->u.kv.cache.block_size >= c->u.kv.cache.table_len)
			return bad(msg, cap, k, "pos %u beyond table_len %u", c->u.kv.pos,
				   c->u.kv.cache.table_len);
		return 0;
	case DEV_K_ATTN_QK:
	case DEV_K_ATTN_SOFTMAX:
	case DEV_K_ATTN_PV:
	case DEV_K_ATTN_UPDATE:
		return check_attn(&c->u.attn, k, msg, cap);
	case DEV_K_ARGMAX:
		NONNULL(k, "in", c->u.argmax.in);
		NONNULL(k, "out", c->u.argmax.out);
		RANGE(k, "n", c->u.argmax.n, 1, INT32_MAX);
		return 0;
	case DEV_K_SPIN:
		NONNULL(k, "out", c->u.spin.out);
		/* an hour: anything longer is a units mistake, not a workload */
		if (c->u.spin.ns > 3600ull * 1000000000ull)
			return bad(msg, cap, k, "ns %llu above an hour",
				   (unsigned long long)c->u.spin.ns);
		return 0;
	case DEV_K_COUNT:
		break;
	}
	return bad(msg, cap, k, "unknown kernel id %d", (int)k);
}
