/* gpu_bench.c - paged-attention decode bandwidth against a device-to-device copy
 * measured in the same run. Decode attention reads every cached K and V once per
 * step: bytes moved = 2 * ctx * kv_heads * head_dim * 4 (the cache; scores and
 * partials are under 1% at these shapes and are not counted). A copy of the same
 * cache size moves 2x its size (read + write). Usage: gpu_bench [device-index] */
#include "device.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SKIP  77
#define ITERS 50
#define WARM  5

struct shape {
	uint32_t heads, kvh, dim, bs, ctx;
};

/* Llama-like decode shapes: 32 query heads over 8 kv heads of 128, blocks of 16. */
static const struct shape shapes[] = {
    {32, 8, 128, 16, 1024},
    {32, 8, 128, 16, 8192},
    {32, 8, 128, 16, 32768},
    {32, 8, 128, 16, 131072},
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define TRY(call)                                                                                  \
	do {                                                                                       \
		int e_ = (call);                                                                   \
		if (e_) {                                                                          \
			char m_[DEV_ERRMSG_MAX];                                                   \
			dev_last_error(d, m_, sizeof(m_));                                         \
			fprintf(stderr, "gpu_bench: %s: %d %s\n", #call, e_, m_);                  \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void *alloc(struct dev *d, size_t n)
{
	void *p;

	TRY(dev_alloc(d, n, &p));
	return p;
}

/* Seconds per decode-attention step (QK, softmax, PV, update) of @s. */
static double time_attention(struct dev *d, struct dev_stream *st, const struct shape *s)
{
	uint32_t nblk = s->ctx / s->bs, np = dev_attn_nparts(s->ctx);
	size_t row = (size_t)s->kvh * s->dim, hd = (size_t)s->heads * s->dim;
	int32_t *tab = malloc(2 * nblk * sizeof(*tab));
	float *pool = alloc(d, 2 * (size_t)s->ctx * row * sizeof(float));
	int32_t *dtab = alloc(d, 2 * nblk * sizeof(*tab));
	float *q = alloc(d, hd * sizeof(float)), *out = alloc(d, hd * sizeof(float));
	float *sc = alloc(d, (size_t)s->heads * np * DEV_ATTN_PART * sizeof(float));
	float *m = alloc(d, (size_t)s->heads * np * sizeof(float));
	float *l = alloc(d, (size_t)s->heads * np * sizeof(float));
	float *po = alloc(d, (size_t)s->heads * np * s->dim * sizeof(float));
	float *hq = calloc(hd, sizeof(float));
	struct dev_kcall c = {DEV_K_ATTN_QK};
	static const enum dev_kernel ks[] = {DEV_K_ATTN_QK, DEV_K_ATTN_SOFTMAX, DEV_K_ATTN_PV,
					     DEV_K_ATTN_UPDATE};
	double t0 = 0.0;

	/* K blocks on even ids, V blocks on odd ones, in reverse: scattered */
	for (uint32_t i = 0; i < nblk; i++) {
		tab[i] = (int32_t)(2 * (nblk - 1 - i));
		tab[nblk + i] = (int32_t)(2 * i + 1);
	}
	for (size_t i = 0; i < hd; i++)
		hq[i] = 0.01f * (float)(i % 7);
	TRY(dev_copy(d, NULL, dtab, tab, 2 * nblk * sizeof(*tab), DEV_H2D));
	TRY(dev_copy(d, NULL, q, hq, hd * sizeof(float), DEV_H2D));
	c.u.attn = (struct dev_k_attn){{pool, dtab, dtab + nblk, nblk, 2 * nblk,
					(uint32_t)(s->bs * row), s->bs, s->kvh, s->dim},
				       q,
				       sc,
				       m,
				       l,
				       po,
				       out,
				       s->heads,
				       s->ctx,
				       np,
				       1.0f / sqrtf((float)s->dim)};
	for (int it = 0; it < WARM + ITERS; it++) {
		if (it == WARM) {
			TRY(dev_stream_sync(st));
			t0 = now_s();
		}
		for (size_t k = 0; k < 4; k++) {
			c.kernel = ks[k];
			TRY(dev_launch(st, &c));
		}
	}
	TRY(dev_stream_sync(st));
	t0 = (now_s() - t0) / ITERS;
	void *bufs[] = {pool, dtab, q, out, sc, m, l, po};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		dev_free(d, bufs[i]);
	free(tab);
	free(hq);
	return t0;
}

/* Seconds per device-to-device copy of @n bytes. */
static double time_copy(struct dev *d, struct dev_stream *st, size_t n)
{
	void *a = alloc(d, n), *b = alloc(d, n);
	double t0 = 0.0;

	for (int it = 0; it < WARM + ITERS; it++) {
		if (it == WARM) {
			TRY(dev_stream_sync(st));
			t0 = now_s();
		}
		TRY(dev_copy(d, st, b, a, n, DEV_D2D));
	}
	TRY(dev_stream_sync(st));
	t0 = (now_s() - t0) / ITERS;
	dev_free(d, a);
	dev_free(d, b);
	return t0;
}

int main(int argc, char **argv)
{
	int index = argc > 1 ? atoi(argv[1]) : 0, err;
	char msg[DEV_ERRMSG_MAX] = "";
	struct dev_stream *st;
	struct dev_info info;
	struct dev *d;

	err = dev_open(&d, DEV_HIP, index, msg, sizeof(msg));
	if (err) {
		printf("gpu_bench: skipped: %s\n", msg);
		return err == -ENODEV || err == -ENOTSUP ? SKIP : 1;
	}
	dev_get_info(d, &info);
	TRY(dev_stream_create(d, &st));
	printf("device %d: %s; %d timed iterations after %d warm-up\n", index, info.name, ITERS,
	       WARM);
	printf("%-30s %12s %12s %12s %12s %8s\n", "shape", "kv_bytes", "attn_us", "attn_GB/s",
	       "copy_GB/s", "ratio");
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		const struct shape *s = &shapes[i];
		double bytes = 2.0 * s->ctx * s->kvh * s->dim * sizeof(float);
		double ta = time_attention(d, st, s), tc = time_copy(d, st, (size_t)bytes);
		double ga = bytes / ta / 1e9, gc = 2.0 * bytes / tc / 1e9;
		char name[64];

		snprintf(name, sizeof(name), "h%u_kv%u_d%u_bs%u_ctx%u", s->heads, s->kvh, s->dim,
			 s->bs, s->ctx);
		printf("%-30s %12.0f %12.1f %12.1f %12.1f %8.2f\n", name, bytes, ta * 1e6, ga, gc,
		       ga / gc);
	}
	dev_stream_destroy(st);
	dev_close(d);
	return 0;
}
