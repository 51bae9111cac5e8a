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
	/* The cost of a configuration (wl_cost): host bytes of its records and staging
	 * (the struct wl_req aside), device bytes, KV blocks. */
	void (*cost)(const int64_t *cfg, struct wl_cost *out);
	/* Makes r->state and takes the KV blocks, cheaply (wl_req_reserve); undoes its
	 * own partial work on error. */
	int (*reserve)(struct wl_req *r, char *msg, size_t cap);
	/* Allocates and fills the device memory (wl_req_fill); on error what it got so far
	 * stays in r->state for release. */
	int (*fill)(struct wl_req *r, char *msg, size_t cap);
	/* Releases everything in r->state, filled or not. */
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
	bool filled;
	void *state;
	/* What the request holds (wl_req_usage), kept by the helpers below; used by the
	 * one thread that reserves, fills or releases at a time. */
	uint64_t host_now, host_peak, dev_bytes;
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

/* @n zeroed bytes of host memory counted as @r's (NULL: -ENOMEM), and their release
 * (@p may be NULL; @n as allocated). */
void *wl_host_alloc(struct wl_req *r, size_t n);
void wl_host_free(struct wl_req *r, void *p, size_t n);

/* @n bytes of device memory counted as @r's. */
int wl_dev_alloc(struct wl_req *r, size_t n, void **out);

/* Allocates @n bytes of device memory for @r and copies @src there (synchronously). */
int wl_upload(struct wl_req *r, void **dst, const void *src, size_t n);

/* Takes @n blocks from @kp into @ids (-ENOSPC, nothing taken, if fewer are free) and
 * gives them back. */
int wl_kvpool_reserve(struct wl_kvpool *kp, uint32_t n, int32_t *ids);
void wl_kvpool_release(struct wl_kvpool *kp, uint32_t n, const int32_t *ids);
float *wl_kvpool_base(const struct wl_kvpool *kp);
uint32_t wl_kvpool_blocks(const struct wl_kvpool *kp);
uint32_t wl_kvpool_block_floats(const struct wl_kvpool *kp);

#endif
