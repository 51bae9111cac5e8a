/* check_device.c - pins the device layer on the sim backend: open and errors, memory
 * and copies, stream order, concurrent streams, events across streams, failures that
 * surface at sync. */
#include "device.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#define MS 1000000ull
/* The long kernel of streams_execute_concurrently: a short kernel on another stream
 * takes microseconds (milliseconds on a loaded machine under a sanitizer), so only a
 * device that queues it behind the long one fails the tcase. How much faster two
 * streams finish than one is measured by `chipbench dispatch` (its concurrent
 * streams row), not here. */
#define LONG_KERNEL_NS (1000 * MS)
#define STRESS_OPS     1000 /* several times the sim queue (256 ops): full rings, refills */

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

/* A spin kernel: @ns of device time, then *out = token. */
static int spin(struct dev_stream *s, int32_t *out, uint64_t ns, int32_t token)
{
	struct dev_kcall c = {DEV_K_SPIN, .u.spin = {out, ns, token}};

	return dev_launch(s, &c);
}

START_TEST(open_reports_backend_and_errors)
{
	struct dev *d;
	struct dev_info info;
	char msg[DEV_ERRMSG_MAX];
	enum dev_kind k;

	d = open_sim();
	dev_get_info(d, &info);
	ck_assert_int_eq(info.kind, DEV_SIM);
	ck_assert_str_eq(info.name, "sim0");
	ck_assert_int_eq(dev_last_error(d, msg, sizeof(msg)), 0);
	close_sim(d);
	ck_assert_int_eq(dev_open(&d, DEV_SIM, -1, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(dev_kind_parse("hip", &k), 0);
	ck_assert_int_eq(k, DEV_HIP);
	ck_assert_int_eq(dev_kind_parse("cuda", &k), -EINVAL);
	if (!dev_kind_built(DEV_HIP)) {
		ck_assert_int_eq(dev_open(&d, DEV_HIP, 0, msg, sizeof(msg)), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(msg, "not in this build"));
	}
}
END_TEST

START_TEST(copies_round_trip)
{
	struct dev *d = open_sim();
	struct dev_stream *s;
	char src[1000], back[1000];
	void *a, *b;

	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (char)(i * 7);
	ck_assert_int_eq(dev_alloc(d, sizeof(src), &a), 0);
	ck_assert_int_eq(dev_alloc(d, sizeof(src), &b), 0);
	ck_assert_uint_eq((uintptr_t)a % 256, 0);
	ck_assert_int_eq(dev_free(d, a), 0);
	ck_assert_int_eq(dev_alloc(d, 0, &a), -EINVAL);
	ck_assert_ptr_null(a);
	ck_assert_int_eq(dev_alloc(d, sizeof(src), &a), 0);
	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	ck_assert_int_eq(dev_copy(d, s, a, src, sizeof(src), DEV_H2D), 0);
	ck_assert_int_eq(dev_copy(d, s, b, a, sizeof(src), DEV_D2D), 0);
	ck_assert_int_eq(dev_copy(d, s, back, b, sizeof(src), DEV_D2H), 0);
	ck_assert_int_eq(dev_stream_sync(s), 0);
	ck_assert_mem_eq(back, src, sizeof(src));
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(dev_copy(d, NULL, back, b, sizeof(src), DEV_D2H), 0);
	ck_assert_mem_eq(back, src, sizeof(src));
	ck_assert_int_eq(dev_copy(d, s, NULL, b, 1, DEV_D2H), -EINVAL);
	dev_stream_destroy(s);
	dev_free(d, a);
	dev_free(d, b);
	close_sim(d);
}
END_TEST

START_TEST(stream_runs_in_order)
{
	struct dev *d = open_sim();
	struct dev_stream *s;
	int32_t *tok, got[STRESS_OPS];

	ck_assert_int_eq(dev_alloc(d, sizeof(*tok), (void **)&tok), 0);
	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	/* more ops than the queue holds: the host waits for room, order holds */
	for (int i = 0; i < STRESS_OPS; i++) {
		ck_assert_int_eq(spin(s, tok, 0, i), 0);
		ck_assert_int_eq(dev_copy(d, s, &got[i], tok, sizeof(*tok), DEV_D2H), 0);
	}
	ck_assert_int_eq(dev_stream_sync(s), 0);
	for (int i = 0; i < STRESS_OPS; i++)
		ck_assert_int_eq(got[i], i);
	dev_stream_destroy(s);
	dev_free(d, tok);
	close_sim(d);
}
END_TEST

/* A short kernel on one stream ends while a long one launched before it on another
 * stream still runs: each stream runs as its own queue, not behind the others. */
START_TEST(streams_execute_concurrently)
{
	struct dev *d = open_sim();
	struct dev_stream *s[2];
	struct dev_event *long_done;
	int32_t *tok, got[2] = {0, 0};

	ck_assert_int_eq(dev_alloc(d, 2 * sizeof(*tok), (void **)&tok), 0);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(dev_stream_create(d, &s[i]), 0);
	ck_assert_int_eq(dev_event_create(d, &long_done), 0);
	ck_assert_int_eq(spin(s[0], &tok[0], LONG_KERNEL_NS, 10), 0);
	ck_assert_int_eq(dev_event_record(long_done, s[0]), 0);
	ck_assert_int_eq(spin(s[1], &tok[1], 0, 11), 0);
	ck_assert_int_eq(dev_stream_sync(s[1]), 0);
	ck_assert_msg(dev_event_query(long_done) == -EBUSY,
		      "stream 1 ended only after stream 0's long kernel");
	ck_assert_int_eq(dev_sync(d), 0);
	ck_assert_int_eq(dev_event_query(long_done), 0);
	ck_assert_int_eq(dev_copy(d, NULL, got, tok, sizeof(got), DEV_D2H), 0);
	ck_assert_int_eq(got[0], 10);
	ck_assert_int_eq(got[1], 11);
	dev_event_destroy(long_done);
	for (int i = 0; i < 2; i++)
		dev_stream_destroy(s[i]);
	dev_free(d, tok);
	close_sim(d);
}
END_TEST

START_TEST(event_orders_work_across_streams)
{
	struct dev *d = open_sim();
	struct dev_stream *a, *b;
	struct dev_event *e;
	int32_t *buf, got = 0;

	ck_assert_int_eq(dev_alloc(d, 2 * sizeof(*buf), (void **)&buf), 0);
	ck_assert_int_eq(dev_stream_create(d, &a), 0);
	ck_assert_int_eq(dev_stream_create(d, &b), 0);
	ck_assert_int_eq(dev_event_create(d, &e), 0);
	ck_assert_int_eq(dev_event_query(e), 0); /* never recorded: complete */
	ck_assert_int_eq(spin(b, &buf[0], 100 * MS, 42), 0);
	ck_assert_int_eq(dev_event_record(e, b), 0);
	ck_assert_int_eq(dev_event_query(e), -EBUSY);
	ck_assert_int_eq(dev_stream_wait(a, e), 0);
	ck_assert_int_eq(dev_copy(d, a, &buf[1], &buf[0], sizeof(*buf), DEV_D2D), 0);
	ck_assert_int_eq(dev_copy(d, a, &got, &buf[1], sizeof(got), DEV_D2H), 0);
	ck_assert_int_eq(dev_stream_sync(a), 0);
	ck_assert_int_eq(got, 42);
	ck_assert_int_eq(dev_event_sync(e), 0);
	ck_assert_int_eq(dev_event_query(e), 0);
	dev_event_destroy(e);
	dev_stream_destroy(a);
	dev_stream_destroy(b);
	dev_free(d, buf);
	close_sim(d);
}
END_TEST

/* Four streams pass a counter around a ring through events, many times: the
 * handoffs ThreadSanitizer sees are the only ordering between them. */
START_TEST(event_chain_across_many_streams)
{
	enum { N = 4 };
	struct dev *d = open_sim();
	struct dev_stream *s[N];
	struct dev_event *e[N];
	int32_t *v, got[STRESS_OPS];

	ck_assert_int_eq(dev_alloc(d, sizeof(*v), (void **)&v), 0);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(dev_stream_create(d, &s[i]), 0);
		ck_assert_int_eq(dev_event_create(d, &e[i]), 0);
	}
	for (int i = 0; i < STRESS_OPS; i++) {
		struct dev_stream *cur = s[i % N];

		if (i)
			ck_assert_int_eq(dev_stream_wait(cur, e[(i - 1) % N]), 0);
		ck_assert_int_eq(spin(cur, v, 0, i), 0);
		ck_assert_int_eq(dev_copy(d, cur, &got[i], v, sizeof(*v), DEV_D2H), 0);
		ck_assert_int_eq(dev_event_record(e[i % N], cur), 0);
	}
	ck_assert_int_eq(dev_sync(d), 0);
	for (int i = 0; i < STRESS_OPS; i++)
		ck_assert_int_eq(got[i], i);
	for (int i = 0; i < N; i++) {
		dev_event_destroy(e[i]);
		dev_stream_destroy(s[i]);
	}
	dev_free(d, v);
	close_sim(d);
}
END_TEST

START_TEST(kernel_failure_surfaces_at_sync_and_event)
{
	struct dev *d = open_sim();
	struct dev_stream *s;
	struct dev_event *e;
	float table[4] = {0};
	int32_t tok = 9, *dtok; /* outside a vocabulary of 2 */
	float out[2];
	struct dev_kcall c = {DEV_K_EMBED};
	char msg[DEV_ERRMSG_MAX];

	ck_assert_int_eq(dev_alloc(d, sizeof(tok), (void **)&dtok), 0);
	ck_assert_int_eq(dev_copy(d, NULL, dtok, &tok, sizeof(tok), DEV_H2D), 0);
	ck_assert_int_eq(dev_stream_create(d, &s), 0);
	ck_assert_int_eq(dev_event_create(d, &e), 0);
	c.u.embed = (struct dev_k_embed){table, dtok, out, 2, 2};
	ck_assert_int_eq(dev_launch(s, &c), 0);
	ck_assert_int_eq(dev_event_record(e, s), 0);
	ck_assert_int_eq(dev_event_sync(e), -EINVAL);
	ck_assert_int_eq(dev_stream_sync(s), -EINVAL);
	ck_assert_int_eq(dev_sync(d), -EINVAL);
	ck_assert_int_eq(dev_last_error(d, msg, sizeof(msg)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(msg, "token 9 outside vocab 2"));
	dev_clear_error(d);
	ck_assert_int_eq(dev_last_error(d, NULL, 0), 0);
	dev_event_destroy(e);
	dev_stream_destroy(s);
	ck_assert_int_eq(dev_sync(d), 0); /* the failed stream is gone */
	dev_free(d, dtok);
	close_sim(d);
}
END_TEST

Suite *device_suite(void);
void device_add_model_tcases(Suite *s);
void device_add_module_tcases(Suite *s);

Suite *device_suite(void)
{
	Suite *s = suite_create("device");
	const struct tu_case cases[] = {
	    {"open_reports_backend_and_errors", open_reports_backend_and_errors},
	    {"copies_round_trip", copies_round_trip},
	    {"stream_runs_in_order", stream_runs_in_order},
	    {"streams_execute_concurrently", streams_execute_concurrently},
	    {"event_orders_work_across_streams", event_orders_work_across_streams},
	    {"event_chain_across_many_streams", event_chain_across_many_streams},
	    {"kernel_failure_surfaces_at_sync_and_event",
	     kernel_failure_surfaces_at_sync_and_event},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	device_add_model_tcases(s);
	device_add_module_tcases(s);
	return s;
}

int main(void)
{
	return tu_run(device_suite());
}
