/* check_kernels.c - pins the sim kernels to their CPU references on a table of shapes,
 * paged attention over scattered blocks to the same over in-order blocks, and the
 * rejection of invalid shapes before and during a launch. */
#include "device.h"
#include "kernel_cases.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct dev *open_sim(void)
{
	struct dev *d;

	ck_assert_int_eq(dev_open(&d, DEV_SIM, 0, NULL, 0), 0);
	return d;
}

static void close_sim(struct dev *d)
{
	ck_assert_uint_eq(dev_live(d), 0);
	dev_close(d);
}

START_TEST(attention_matches_reference)
{
	struct dev *d = open_sim();

	for (size_t i = 0; i < kc_attn_nshapes; i++) {
		struct kc_err e;

		ck_assert_int_eq(kc_attention(d, &kc_attn_shapes[i], true, NULL, &e), 0);
		kc_print("attention", kc_attn_shapes[i].name, &e);
		ck_assert_msg(e.max_abs <= e.tol, "%s: max abs error %g above %g",
			      kc_attn_shapes[i].name, e.max_abs, e.tol);
	}
	close_sim(d);
}
END_TEST

START_TEST(scattered_blocks_equal_contiguous)
{
	struct dev *d = open_sim();

	for (size_t i = 0; i < kc_attn_nshapes; i++) {
		const struct kc_attn_shape *s = &kc_attn_shapes[i];
		size_t n = (size_t)s->heads * s->head_dim;
		float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
		struct kc_err e;

		ck_assert_int_eq(kc_attention(d, s, true, a, &e), 0);
		ck_assert_int_eq(kc_attention(d, s, false, b, &e), 0);
		/* the same arithmetic in the same order: bit for bit */
		ck_assert_msg(memcmp(a, b, n * sizeof(float)) == 0, "%s differs", s->name);
		free(a);
		free(b);
	}
	close_sim(d);
}
END_TEST

START_TEST(gemm_matches_reference)
{
	struct dev *d = open_sim();

	for (size_t i = 0; i < kc_gemm_nshapes; i++) {
		struct kc_err e;

		ck_assert_int_eq(kc_gemm(d, &kc_gemm_shapes[i], &e), 0);
		kc_print("gemm", kc_gemm_shapes[i].name, &e);
		ck_assert_msg(e.max_abs <= e.tol, "%s: max abs error %g above %g",
			      kc_gemm_shapes[i].name, e.max_abs, e.tol);
	}
	close_sim(d);
}
END_TEST

START_TEST(argmax_takes_first_maximum_embed_copies_row)
{
	struct dev *d = open_sim();
	static const uint32_t sizes[] = {4, 5, 256, 1000, 65536};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		ck_assert_int_eq(kc_argmax_embed(d, sizes[i]), 0);
	close_sim(d);
}
END_TEST

/* Floats of dummy storage for the rejection tests: room for every buffer of
 * attn_call (scores: 2 heads x 1 partition x DEV_ATTN_PART). */
#define DUMMY_FLOATS (2 * DEV_ATTN_PART)

/* A valid attention call: 2 heads over 1 kv head of dim 4, 16 positions in one block. */
static struct dev_kcall attn_call(float *buf, int32_t *tab)
{
	struct dev_kcall c = {DEV_K_ATTN_QK};

	c.u.attn = (struct dev_k_attn){.cache = {buf, tab, tab, 1, 1, 64, 16, 1, 4},
				       .q = buf,
				       .scores = buf,
				       .m = buf,
				       .l = buf,
				       .po = buf,
				       .out = buf,
				       .heads = 2,
				       .ctx = 16,
				       .nparts = 1,
				       .scale = 0.5f};
	return c;
}

static void expect_rejected(struct dev *d, struct dev_stream *st, struct dev_kcall c,
			    const char *want)
{
	char msg[DEV_ERRMSG_MAX];

	ck_assert_int_eq(dev_launch(st, &c), -EINVAL);
	ck_assert_int_eq(dev_last_error(d, msg, sizeof(msg)), -EINVAL);
	ck_assert_msg(strstr(msg, want), "message '%s' does not name '%s'", msg, want);
	dev_clear_error(d);
}

START_TEST(invalid_shapes_rejected_before_launch)
{
	struct dev *d = open_sim();
	struct dev_stream *st;
	float buf[DUMMY_FLOATS] = {0};
	int32_t tab[1] = {0};
	struct dev_kcall ok = attn_call(buf, tab), c;

	ck_assert_int_eq(dev_stream_create(d, &st), 0);
	ck_assert_int_eq(dev_launch(st, &ok), 0);
#define BAD(want, ...)                                                                             \
	do {                                                                                       \
		c = ok;                                                                            \
		__VA_ARGS__;                                                                       \
		expect_rejected(d, st, c, want);                                                   \
	} while (0)
	BAD("head_dim 0", c.u.attn.cache.head_dim = 0);
	BAD("head_dim", c.u.attn.cache.head_dim = DEV_MAX_HEAD_DIM + 1);
	BAD("not a multiple of kv_heads", c.u.attn.cache.kv_heads = 4;
	    c.u.attn.cache.block_stride = 256);
	BAD("power of two", c.u.attn.cache.block_size = 3);
	BAD("block_size", c.u.attn.cache.block_size = 512);
	BAD("block_stride", c.u.attn.cache.block_stride = 8);
	BAD("ctx 0", c.u.attn.ctx = 0);
	BAD("table_len", c.u.attn.ctx = 17);
	BAD("nparts", c.u.attn.nparts = 2);
	BAD("scale", c.u.attn.scale = 0.0f);
	BAD("q is NULL", c.u.attn.q = NULL);
	BAD("out is NULL", c.kernel = DEV_K_ATTN_UPDATE; c.u.attn.out = NULL);
	BAD("unknown kernel", c.kernel = DEV_K_COUNT);
	BAD("m 0", c = (struct dev_kcall){DEV_K_GEMM, .u.gemm = {buf, buf, buf, 0, 1, 1, 0}});
	BAD("accumulate",
	    c = (struct dev_kcall){DEV_K_GEMM, .u.gemm = {buf, buf, buf, 1, 1, 1, 2}});
	BAD("out is NULL", c = (struct dev_kcall){DEV_K_ARGMAX, .u.argmax = {buf, NULL, 4}});
	BAD("pos 16 beyond table_len",
	    c = (struct dev_kcall){DEV_K_KV_APPEND, .u.kv = {ok.u.attn.cache, buf, buf, 16}});
#undef BAD
	/* nothing rejected reached the stream */
	ck_assert_int_eq(dev_stream_sync(st), 0);
	dev_stream_destroy(st);
	close_sim(d);
}
END_TEST

START_TEST(bad_block_table_fails_inside_kernel)
{
	struct dev *d = open_sim();
	struct dev_stream *st;
	float buf[DUMMY_FLOATS] = {0};
	int32_t tab[1] = {5}; /* the pool has one block */
	struct dev_kcall c = attn_call(buf, tab);
	char msg[DEV_ERRMSG_MAX];

	ck_assert_int_eq(dev_stream_create(d, &st), 0);
	ck_assert_int_eq(dev_launch(st, &c), 0); /* the host cannot see the table */
	ck_assert_int_eq(dev_stream_sync(st), -EINVAL);
	ck_assert_int_eq(dev_last_error(d, msg, sizeof(msg)), -EINVAL);
	ck_assert_msg(strstr(msg, "outside the pool"), "message '%s'", msg);
	/* the stream stays failed */
	tab[0] = 0;
	ck_assert_int_eq(dev_launch(st, &c), 0);
	ck_assert_int_eq(dev_stream_sync(st), -EINVAL);
	dev_stream_destroy(st);
	close_sim(d);
}
END_TEST

Suite *kernels_suite(void);

Suite *kernels_suite(void)
{
	Suite *s = suite_create("kernels");
	TCase *tc;

	tc = tcase_create("attention_matches_reference");
	tcase_add_test(tc, attention_matches_reference);
	suite_add_tcase(s, tc);
	tc = tcase_create("scattered_blocks_equal_contiguous");
	tcase_add_test(tc, scattered_blocks_equal_contiguous);
	suite_add_tcase(s, tc);
	tc = tcase_create("gemm_matches_reference");
	tcase_add_test(tc, gemm_matches_reference);
	suite_add_tcase(s, tc);
	tc = tcase_create("argmax_takes_first_maximum_embed_copies_row");
	tcase_add_test(tc, argmax_takes_first_maximum_embed_copies_row);
	suite_add_tcase(s, tc);
	tc = tcase_create("invalid_shapes_rejected_before_launch");
	tcase_add_test(tc, invalid_shapes_rejected_before_launch);
	suite_add_tcase(s, tc);
	tc = tcase_create("bad_block_table_fails_inside_kernel");
	tcase_add_test(tc, bad_block_table_fails_inside_kernel);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(kernels_suite());
}
