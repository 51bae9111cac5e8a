/* chipd_kcall.h - the kernel catalogue: one argument struct per kernel, shared by the sim
 * kernels (C), the HIP/CUDA launchers (C++), the host-side shape check and callables
 * (installed with chipd_callable.h: a callable launches these kernels by name with
 * these argument structs; part of CHIPD_CALLABLE_ABI).
 *
 * Every tensor is float32, row-major, in device memory of the device the call is
 * launched on. A paged KV cache is a pool of fixed-size blocks: block b starts at
 * pool + b * block_stride floats and holds block_size positions of
 * [kv_heads][head_dim] floats. A block table maps a request's logical block i
 * (positions i*block_size ...) to a pool block; K and V have a table each.
 *
 * Attention is split into partitions of DEV_ATTN_PART positions (flash-decoding):
 * QK, softmax prepare and PV work on (head, partition) pairs in parallel, and the
 * online-softmax update folds the partitions into the output.
 *
 * Supported shapes (dev_kcall_check enforces them; kernels re-check what a bad
 * block table or token could break): head_dim 1..DEV_MAX_HEAD_DIM, heads a multiple
 * of kv_heads, block_size a power of two 1..DEV_ATTN_PART, ctx 1..DEV_MAX_CTX,
 * gemm dimensions 1..DEV_MAX_DIM.
 */
#ifndef CHIPD_KERNELS_KCALL_H
#define CHIPD_KERNELS_KCALL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Positions per attention partition: one GPU thread per position in QK and softmax
 * prepare, so it is also the thread-block size of those kernels. */
#define DEV_ATTN_PART 256u
/* PV and the update run one thread per output element of a head. */
#define DEV_MAX_HEAD_DIM 256u
#define DEV_MAX_HEADS	 256u
/* 1 Mi positions: scores of one head stay far below 2^31 floats. */
#define DEV_MAX_CTX (1u << 20)
#define DEV_MAX_DIM (1u << 16)

enum dev_kernel {
	DEV_K_GEMM,	    /* c = a . b, or c += a . b */
	DEV_K_EMBED,	    /* out = table[*token] */
	DEV_K_KV_APPEND,    /* write one position's K and V into the paged cache */
	DEV_K_ATTN_QK,	    /* scores[h][p] = q[h] . k[p] per partition */
	DEV_K_ATTN_SOFTMAX, /* scale, mask, row max, exp, row sum per partition */
	DEV_K_ATTN_PV,	    /* po[h][part] = probs . v over the partition */
	DEV_K_ATTN_UPDATE,  /* online-softmax fold of the partitions into out */
	DEV_K_ARGMAX,	    /* *out = first index of the largest of in[0..n) */
	DEV_K_SPIN,	    /* busy for ns nanoseconds, then *out = token */
	DEV_K_COUNT
};

struct dev_k_gemm {
	const float *a; /* [m][k] */
	const float *b; /* [k][n] */
	float *c;	/* [m][n] */
	uint32_t m, n, k;
	uint32_t accumulate; /* 1: c += a . b */
};

struct dev_k_embed {
	const float *table;   /* [vocab][dim] */
	const int32_t *token; /* one id, read on the device */
	float *out;	      /* [dim] */
	uint32_t vocab, dim;
};

/* The paged cache and one layer's block tables, shared by the attention kernels. */
struct dev_k_cache {
	float *pool;
	const int32_t *ktab, *vtab; /* [table_len] pool block ids */
	uint32_t table_len;	    /* logical blocks in each table */
	uint32_t pool_blocks;	    /* valid block ids are 0..pool_blocks-1 */
	uint32_t block_stride;	    /* floats from one pool block to the next */
	uint32_t block_size;	    /* positions per block */
	uint32_t kv_heads, head_dim;
};

struct dev_k_kv_append {
	struct dev_k_cache cache;
	const float *k, *v; /* [kv_heads][head_dim] of the new position */
	uint32_t pos;	    /* position written; its block must be in the tables */
};

/* One decode step of attention for one layer: heads query rows against ctx cached
 * positions. Scratch sizes: scores [heads][nparts * DEV_ATTN_PART],
 * m and l [heads][nparts], po [heads][nparts][head_dim]. */
struct dev_k_attn {
	struct dev_k_cache cache;
	const float *q; /* [heads][head_dim] */
	float *scores, *m, *l, *po;
	float *out; /* [heads][head_dim] */
	uint32_t heads, ctx, nparts;
	float scale;
};

struct dev_k_argmax {
	const float *in;
	int32_t *out;
	uint32_t n;
};

struct dev_k_spin {
	int32_t *out;
	uint64_t ns;
	int32_t token;
};

struct dev_kcall {
	enum dev_kernel kernel;
	union {
		struct dev_k_gemm gemm;
		struct dev_k_embed embed;
		struct dev_k_kv_append kv;
		struct dev_k_attn attn;
		struct dev_k_argmax argmax;
		struct dev_k_spin spin;
	} u;
};

/* Partitions needed for @ctx positions. */
static inline uint32_t dev_attn_nparts(uint32_t ctx)
{
	return (ctx + DEV_ATTN_PART - 1) / DEV_ATTN_PART;
}

/* The size of kernel @k's argument struct (the member of dev_kcall.u), 0 for an
 * unknown kernel: what a launch by handle passes as args_size. */
static inline size_t dev_kcall_args_size(enum dev_kernel k)
{
	switch (k) {
	case DEV_K_GEMM:
		return sizeof(struct dev_k_gemm);
	case DEV_K_EMBED:
		return sizeof(struct dev_k_embed);
	case DEV_K_KV_APPEND:
		return sizeof(struct dev_k_kv_append);
	case DEV_K_ATTN_QK:
	case DEV_K_ATTN_SOFTMAX:
	case DEV_K_ATTN_PV:
	case DEV_K_ATTN_UPDATE:
		return sizeof(struct dev_k_attn);
	case DEV_K_ARGMAX:
		return sizeof(struct dev_k_argmax);
	case DEV_K_SPIN:
		return sizeof(struct dev_k_spin);
	default:
		return 0;
	}
}

#ifdef __cplusplus
}
#endif

#endif
