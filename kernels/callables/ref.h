/* ref.h - CPU references of the kernels: the same math computed the direct way, in
 * double precision, over contiguous tensors. Tests and the GPU checks compare every
 * kernel against these with stated tolerances. Layouts as in chipd_kcall.h. */
#ifndef CHIPD_KERNELS_REF_H
#define CHIPD_KERNELS_REF_H

#include <stdbool.h>
#include <stdint.h>

/* c[m][n] = a[m][k] . b[k][n] (+ c when @accumulate), accumulated in double. */
void dev_ref_gemm(const float *a, const float *b, float *c, uint32_t m, uint32_t n, uint32_t k,
		  bool accumulate);

/* Decode attention of @heads query rows q[heads][head_dim] against a contiguous cache
 * k, v [ctx][kv_heads][head_dim]: out[h] = softmax(scale * q[h] . k) . v, with query
 * head h reading kv head h / (heads / kv_heads). */
void dev_ref_attention(const float *q, const float *k, const float *v, uint32_t ctx, uint32_t heads,
		       uint32_t kv_heads, uint32_t head_dim, float scale, float *out);

/* The first index of the largest value of in[0..n) that is not NaN (NaN never wins);
 * 0 if every value is NaN. */
uint32_t dev_ref_argmax(const float *in, uint32_t n);

#endif
