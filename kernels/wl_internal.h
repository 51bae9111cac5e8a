/* wl_internal.h - what the workloads share with wl.c (private to kernels/). */
#ifndef CHIPD_KERNELS_WL_INTERNAL_H
#define CHIPD_KERNELS_WL_INTERNAL_H

#include "wl.h"

#include <stdatomic.h>

/* A workload's parameters are a table of struct wl_param_info (wl.h): what
 * wl_validate checks and what wl_param_table shows are the same rows. Its
 * configuration is an int64_t array in the order of its specs. */
struct wl_ops {
	const char *name;
	const char *doc; /* one line (< WL_DOC_MAX bytes): what a step computes */
	const struct wl_param_info *specs;
	unsigned nspecs;
	/* Checks between parameters (ranges are already checked). */
	int (*check)(const int64_t *cfg, char *msg, size_t cap);
	uint32_t (*steps)(const int64_t *cfg);
	/* Reserves and fills r->state; undoes its own partial work on error. */
	int (*reserve)(struct wl_req *r, char *msg, size_t cap);
	void (*release)(struct wl_req *r);
	/* Appends step r->built; its last task writes the token to @host_tok. Returns
	 * -ENOBUFS when st is full (wl.c rolls st back). */
	int (*build)(struct wl_req *r, struct wl_step *st, uint32_t lane, int32_t *host_tok);
	int (*ref)(const int64_t *cfg, uint64_t *tokens, uint32_t n);
};

struct wl_req {
	const struct wl_ops *ops;
	struct dev *dev;
	struct wl_kvpool *kv;
	bool own_kv; /* a private pool, destroyed with the request */
	int64_t cfg[WL_PARAMS_MAX];
	uint32_t steps;
	/* Steps built so far: written by the one thread that builds (release), read by
	 * the thread that reads tokens (acquire), which may be another one. */
	_Atomic uint32_t built;
	uint32_t read; /* tokens read; the token reader's own */
	void *state;
};

extern const struct wl_ops wl_paged_attention_ops;
extern const struct wl_ops wl_gemm_ops;
extern const struct wl_ops wl_synthetic_ops;

/* Appends a task to @st on @lane depending on task @dep (or none if @dep < 0).
 * Returns its index, or -ENOBUFS. */
int wl_add_launch(struct wl_step *st, uint32_t lane, const struct dev_kcall *c, int dep);
int wl_add_copy(struct wl_step *st, uint32_t lane, void *dst, const void *src, size_t n,
		enum dev_copy_kind kind, int dep);

/* @n floats of device scratch from @st's device arena, or NULL. */
float *wl_scratch(struct wl_step *st, size_t n);

/* Deterministic inputs: a float in [-1, 1) for (@seed, @stream, @i), and the splitmix64
 * mixer behind it. */
uint64_t wl_mix(uint64_t x);
float wl_rand(uint64_t seed, uint64_t stream, uint64_t i);
/* dst[j] = scale * wl_rand(seed, stream, first + j) for j < n. */
void wl_rand_fill(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t first,
		  float scale);

/* Allocates @n bytes of device memory and copies @src there (synchronously). */
int wl_upload(struct dev *d, void **dst, const void *src, size_t n);

/* Takes @n blocks from @kp into @ids (-ENOSPC, nothing taken, if fewer are free) and
 * gives them back. */
int wl_kvpool_reserve(struct wl_kvpool *kp, uint32_t n, int32_t *ids);
void wl_kvpool_release(struct wl_kvpool *kp, uint32_t n, const int32_t *ids);
float *wl_kvpool_base(const struct wl_kvpool *kp);
uint32_t wl_kvpool_blocks(const struct wl_kvpool *kp);
uint32_t wl_kvpool_block_floats(const struct wl_kvpool *kp);

#endif
