/* kernel_cases.h - the table of kernel shapes and the runs that compare a device's
 * kernels with the CPU references (ref.h). Shared by check_kernels (sim) and
 * tests/gpu/gpu_check.c (a GPU), so both hold every kernel to the same tolerances. */
#ifndef CHIPD_TESTS_KERNEL_CASES_H
#define CHIPD_TESTS_KERNEL_CASES_H

#include "device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kc_err {
	double max_abs, max_rel, tol; /* errors against the reference; the bound on max_abs */
};

struct kc_attn_shape {
	const char *name;
	uint32_t heads, kv_heads, head_dim, block_size, ctx;
};

struct kc_gemm_shape {
	const char *name;
	uint32_t m, n, k, accumulate;
};

extern const struct kc_attn_shape kc_attn_shapes[];
extern const size_t kc_attn_nshapes;
extern const struct kc_gemm_shape kc_gemm_shapes[];
extern const size_t kc_gemm_nshapes;

/* Attention over a paged cache (blocks scattered through a larger pool when
 * @scattered, in order otherwise) on @d: kv_append of the last position, then QK,
 * softmax, PV, update. Compares with dev_ref_attention over a contiguous cache into
 * *@e; copies the output (heads * head_dim floats) to @out when not NULL. Also checks
 * that kv_append stored the position exactly. Returns 0 or a device error. */
int kc_attention(struct dev *d, const struct kc_attn_shape *s, bool scattered, float *out,
		 struct kc_err *e);

/* gemm on @d against dev_ref_gemm. */
int kc_gemm(struct dev *d, const struct kc_gemm_shape *s, struct kc_err *e);

/* argmax over @n values with planted ties (the first of equal maxima wins) and embed
 * of a row: 0 when both equal their references exactly, -EDOM when not. */
int kc_argmax_embed(struct dev *d, uint32_t n);

/* The workload table: every GPU must produce the sim's tokens on it. */
struct kc_wl_case {
	const char *workload, *params;
};
#define KC_WL_NCASES 6
extern const struct kc_wl_case kc_wl_cases[KC_WL_NCASES];

/* Runs case @c to its end on @d, one step at a time on one stream, into @tokens
 * (room for @cap); *@n = tokens made. Returns 0, or an error with @msg. */
int kc_wl_tokens(struct dev *d, const struct kc_wl_case *c, uint64_t *tokens, uint32_t cap,
		 uint32_t *n, char *msg, size_t msgcap);

/* Prints one row of the error table: "kernel shape max_abs max_rel tol". */
void kc_print(const char *kernel, const char *shape, const struct kc_err *e);

#endif
