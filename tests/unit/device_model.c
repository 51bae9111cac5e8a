/* device_model.c - the sim device models what a GPU runtime enforces: a current device
 * per thread, errors that stay with their stream, a device lost for good after a
 * sticky fault, copies that land only when their stream is waited for (lazy mode);
 * and the cases gpu_check runs on a GPU. Several devices, several threads. */
#include "device.h"
#include "device_cases.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

void device_add_model_tcases(Suite *s);

#define WAIT_MS 20000u /* bound of every polling loop below */

static struct dev *open_index(int index)
{
	struct dev *d;

	ck_assert_int_eq(dev_open(&d, DEV_SIM, index, NULL, 0), 0);
	return d;
}

/* What a thread that never selected a device may do with a stream of device 1. */
struct foreign {
	struct dev *d;
	struct dev_stream *s; /* created by the main thread on device 1 */
	struct dev_event *e;
	int32_t *out;
	bool select;	  /* select d first */
	int create, launch, copy, record, alloc, sync; /* results */
};

static void *foreign_thread(void *arg)
{
	struct foreign *f = arg;
	struct dev_stream *mine = NULL;
	void *p = NULL;
	int32_t v = 5;

	if (f->select)
		ck_assert_int_eq(dev_select(f->d), 0);
	f->create = dev_stream_create(f->d, &mine);
	f->launch = dc_spin(f->s, f->out, 0, 7);
	f->copy = dev_copy(f->d, f->s, f->out, &v, sizeof(v), DEV_H2D);
	f->record = dev_event_record(f->e, f->s);
	f->alloc = dev_alloc(f->d, 64, &p);
	f->sync = dev_stream_sync(f->s); /* allowed from any thread */
	dev_stream_destroy(mine);
	dev_free(f->d, p);
	return NULL;
}

/* A thread's current device is index 0 until it selects another: work on device 1's
 * streams from a thread that did not select it fails (-ENXIO) as on CUDA; after
 * dev_select it runs. dev_open selects the opened device on the opening thread. */
START_TEST(current_device_is_per_thread)
{
	struct dev *d0 = open_index(0), *d1 = open_index(1); /* this thread: device 1 */
	struct foreign f = {.d = d1};
	struct dev_stream *s0;
	char msg[DEV_ERRMSG_MAX];
	pthread_t th;

	ck_assert_int_eq(dev_stream_create(d1, &f.s), 0);
	ck_assert_int_eq(dev_event_create(d1, &f.e), 0);
	ck_assert_int_eq(dev_alloc(d1, sizeof(int32_t), (void **)&f.out), 0);
	/* device 0 from this thread, which now has device 1 current */
	ck_assert_int_eq(dev_stream_create(d0, &s0), -ENXIO);
	ck_assert_int_eq(dev_last_error(d0, msg, sizeof(msg)), -ENXIO);
	ck_assert_msg(strstr(msg, "current device is 1"), "message: %s", msg);
	ck_assert_int_eq(dev_select(d0), 0);
	ck_assert_int_eq(dev_stream_create(d0, &s0), 0);
	ck_assert_int_eq(dev_select(d1), 0);

	ck_assert_int_eq(pthread_create(&th, NULL, foreign_thread, &f), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(f.create, -ENXIO);
	ck_assert_int_eq(f.launch, -ENXIO);
	ck_assert_int_eq(f.copy, -ENXIO);
	ck_assert_int_eq(f.record, -ENXIO);
	ck_assert_int_eq(f.alloc, -ENXIO);
	ck_assert_int_eq(f.sync, 0); /* nothing was queued, nothing failed */

	f.select = true;
	ck_assert_int_eq(pthread_create(&th, NULL, foreign_thread, &f), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(f.create, 0);
	ck_assert_int_eq(f.launch, 0);
	ck_assert_int_eq(f.copy, 0);
	ck_assert_int_eq(f.record, 0);
	ck_assert_int_eq(f.alloc, 0);
	ck_assert_int_eq(f.sync, 0);
	ck_assert_int_eq(*f.out, 5); /* the copy ran after the spin, in stream order */

	dev_free(d1, f.out);
	dev_event_destroy(f.e);
	dev_stream_destroy(f.s);
	dev_stream_destroy(s0);
	ck_assert_uint_eq(dev_live(d0) + dev_live(d1), 0);
	dev_close(d0);
	dev_close(d1);
}
END_TEST

/* One thread per stream, two devices: an embed with a token outside the vocabulary
 * fails its stream only. */
struct lane {
	struct dev *d;
	bool bad;
	int first, later, again, event;
	int32_t later_out;
};

static void *lane_thread(void *arg)
{
	struct lane *l = arg;
	struct dev_stream *s;
	struct dev_event *e;
	float table[4] = {1, 2, 3, 4}, out[2];
	int32_t tok = l->bad ? 9 : 1, *dtok;
	struct dev_kcall c = {DEV_K_EMBED};

	ck_assert_int_eq(dev_select(l->d), 0);
	ck_assert_int_eq(dev_alloc(l->d, sizeof(tok), (void **)&dtok), 0);
	ck_assert_int_eq(dev_copy(l->d, NULL, dtok, &tok, sizeof(tok), DEV_H2D), 0);
	ck_assert_int_eq(dev_stream_create(l->d, &s), 0);
	ck_assert_int_eq(dev_event_create(l->d, &e), 0);
	c.u.embed = (struct dev_k_embed){table, dtok, out, 2, 2};
	ck_assert_int_eq(dev_launch(s, &c), 0);
	l->first = dev_stream_sync(s);
	/* later work on the stream: skipped if it failed, and its error stays */
	l->later_out = -1;
	ck_assert_int_eq(dc_spin(s, &l->later_out, 0, 42), 0);
	ck_assert_int_eq(dev_event_record(e, s), 0);
	l->event = dev_event_sync(e);
	l->later = dev_stream_sync(s);
	l->again = dev_stream_sync(s);
	dev_event_destroy(e);
	dev_stream_destroy(s);
	dev_free(l->d, dtok);
	return NULL;
}

START_TEST(stream_errors_are_sticky_and_per_stream)
{
	struct dev *d[2] = {open_index(0), open_index(1)};
	struct lane l[4];
	pthread_t th[4];

	for (int i = 0; i < 4; i++) {
		l[i] = (struct lane){.d = d[i % 2], .bad = i < 2};
		ck_assert_int_eq(pthread_create(&th[i], NULL, lane_thread, &l[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		if (l[i].bad) {
			ck_assert_int_eq(l[i].first, -EINVAL);
			ck_assert_int_eq(l[i].later, -EINVAL);
			ck_assert_int_eq(l[i].again, -EINVAL);
			ck_assert_int_eq(l[i].event, -EINVAL);
			ck_assert_int_eq(l[i].later_out, -1); /* skipped */
		} else {
			ck_assert_int_eq(l[i].first, 0);
			ck_assert_int_eq(l[i].later, 0);
			ck_assert_int_eq(l[i].event, 0);
			ck_assert_int_eq(l[i].later_out, 42);
		}
	}
	for (int i = 0; i < 2; i++) {
		ck_assert_uint_eq(dev_live(d[i]), 0);
		dev_close(d[i]);
	}
}
END_TEST

/* An injected kernel fault fails its stream only; a sticky one (an illegal address)
 * loses the device: every later call fails with DEV_ERR_LOST, on every stream and
 * from every thread, until dev_close. */
START_TEST(sticky_fault_loses_the_device)
{
	struct dev *d = open_index(0), *other = open_index(1);
	struct dev_stream *a, *b, *c = NULL, *o, *slow;
	struct dev_event *e = NULL, *long_done;
	int32_t out = 0, long_out = 0, host = 3;
	void *p = NULL;
	char msg[DEV_ERRMSG_MAX];

	ck_assert_int_eq(dev_select(d), 0);
	ck_assert_int_eq(dev_stream_create(d, &a), 0);
	ck_assert_int_eq(dev_stream_create(d, &b), 0);
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_KERNEL), 0);
	ck_assert_int_eq(dc_spin(a, &out, 0, 1), 0);
	ck_assert_int_eq(dev_stream_sync(a), -EIO);
	ck_assert_int_eq(dc_spin(b, &out, 0, 2), 0);
	ck_assert_int_eq(dev_stream_sync(b), 0);
	ck_assert_int_eq(out, 2);
	ck_assert(!dev_lost(d));

	/* a long kernel on a third stream, its event still pending when the device is lost: a query
	 * answers the loss at once, as a GPU runtime's does, not "not ready yet" */
	ck_assert_int_eq(dev_event_create(d, &long_done), 0);
	ck_assert_int_eq(dev_stream_create(d, &slow), 0);
	ck_assert_int_eq(dc_spin(slow, &long_out, 1500000000u, 9), 0);
	ck_assert_int_eq(dev_event_record(long_done, slow), 0);
	tu_sleep_ms(100); /* it is running (a query before the loss says so) */
	ck_assert_int_eq(dev_event_query(long_done), -EBUSY);
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_STICKY), 0);
	ck_assert_int_eq(dc_spin(b, &out, 0, 3), 0);
	ck_assert_int_eq(dev_stream_sync(b), DEV_ERR_LOST);
	ck_assert(dev_lost(d));
	ck_assert_int_eq(dev_event_query(long_done), DEV_ERR_LOST);
	ck_assert_int_eq(out, 2); /* the faulting kernel wrote nothing */
	ck_assert_int_eq(dev_last_error(d, msg, sizeof(msg)), DEV_ERR_LOST);
	ck_assert_msg(strstr(msg, "illegal address"), "message: %s", msg);
	ck_assert_int_eq(dev_stream_sync(a), DEV_ERR_LOST);
	ck_assert_int_eq(dev_sync(d), DEV_ERR_LOST);
	ck_assert_int_eq(dev_stream_create(d, &c), DEV_ERR_LOST);
	ck_assert_ptr_null(c);
	/* the stream that could not be made is refused, never dereferenced */
	ck_assert_int_eq(dev_stream_sync(c), -EINVAL);
	ck_assert_int_eq(dc_spin(c, &out, 0, 4), -EINVAL);
	ck_assert_int_eq(dev_event_create(d, &e), DEV_ERR_LOST);
	ck_assert_int_eq(dev_alloc(d, 64, &p), DEV_ERR_LOST);
	ck_assert_int_eq(dc_spin(a, &out, 0, 4), DEV_ERR_LOST);
	ck_assert_int_eq(dev_copy(d, NULL, &out, &host, sizeof(host), DEV_H2D), DEV_ERR_LOST);
	ck_assert_int_eq(dev_select(d), DEV_ERR_LOST);
	ck_assert_int_eq(dev_last_error(d, msg, sizeof(msg)), DEV_ERR_LOST);
	ck_assert_msg(strstr(msg, "dev_select: device lost: sim: illegal address"), "message: %s",
		      msg);
	ck_assert_int_eq(out, 2);

	/* another device lives on */
	ck_assert_int_eq(dev_select(other), 0);
	ck_assert_int_eq(dev_stream_create(other, &o), 0);
	ck_assert_int_eq(dc_spin(o, &out, 0, 5), 0);
	ck_assert_int_eq(dev_stream_sync(o), 0);
	ck_assert_int_eq(out, 5);
	dev_stream_destroy(o);

	dev_event_destroy(long_done);
	dev_stream_destroy(slow);
	dev_stream_destroy(a);
	dev_stream_destroy(b);
	ck_assert_uint_eq(dev_live(d), 0);
	dev_close(d);
	dev_close(other);
}
END_TEST

struct ev_poll {
	struct dev_event *e;
	int res;
};

static bool event_done(void *arg)
{
	struct ev_poll *p = arg;

	p->res = dev_event_query(p->e);
	return p->res != -EBUSY;
}

/* Lazy mode: a stream's copy has not landed until the stream is waited for. Reading
 * the target early sees the old bytes every time; a sync, an event sync or query, a
 * wait of another stream or a synchronous copy brings it in. */
START_TEST(lazy_copies_land_only_when_waited_for)
{
	struct dev *d = open_index(0);
	struct dev_stream *a, *b;
	struct dev_event *e;
	int32_t src = 11, *dbuf, *dbuf2, host = 0, host2 = 0;
	struct ev_poll poll;

	ck_assert_int_eq(dev_sim_set_lazy(d, true), 0);
	ck_assert_int_eq(dev_alloc(d, sizeof(int32_t), (void **)&dbuf), 0);
	ck_assert_int_eq(dev_alloc(d, sizeof(int32_t), (void **)&dbuf2), 0);
	ck_assert_int_eq(dev_stream_create(d, &a), 0);
	ck_assert_int_eq(dev_sim_set_lazy(d, false), -EBUSY);
	ck_assert_int_eq(dev_stream_create(d, &b), 0);
	ck_assert_int_eq(dev_event_create(d, &e), 0);

	/* stream copy, read before the sync: old bytes; after: new */
	ck_assert_int_eq(dev_copy(d, a, dbuf, &src, sizeof(src), DEV_H2D), 0);
	ck_assert_int_eq(dev_copy(d, a, &host, dbuf, sizeof(host), DEV_D2H), 0);
	tu_sleep_ms(20); /* an eager stream would have run both copies by now */
	ck_assert_int_eq(host, 0);
	ck_assert_int_eq(dev_stream_sync(a), 0);
	ck_assert_int_eq(host, 11);

	/* an event query lets the recording stream run */
	src = 12;
	ck_assert_int_eq(dev_copy(d, a, &host, &src, sizeof(src), DEV_D2H), 0);
	ck_assert_int_eq(dev_event_record(e, a), 0);
	tu_sleep_ms(20);
	ck_assert_int_eq(host, 11);
	poll = (struct ev_poll){e, -EBUSY};
	ck_assert(tu_eventually(event_done, &poll, WAIT_MS));
	ck_assert_int_eq(poll.res, 0);
	ck_assert_int_eq(host, 12);

	/* another stream's wait runs the recording stream up to the record */
	src = 13;
	ck_assert_int_eq(dev_copy(d, a, dbuf, &src, sizeof(src), DEV_H2D), 0);
	ck_assert_int_eq(dev_event_record(e, a), 0);
	ck_assert_int_eq(dev_stream_wait(b, e), 0);
	ck_assert_int_eq(dev_copy(d, b, &host2, dbuf, sizeof(host2), DEV_D2H), 0);
	ck_assert_int_eq(dev_stream_sync(b), 0);
	ck_assert_int_eq(host2, 13);

	/* a synchronous copy waits for every stream first */
	src = 14;
	ck_assert_int_eq(dev_copy(d, a, dbuf2, &src, sizeof(src), DEV_H2D), 0);
	ck_assert_int_eq(dev_copy(d, NULL, &host2, dbuf2, sizeof(host2), DEV_D2H), 0);
	ck_assert_int_eq(host2, 14);

	dev_event_destroy(e);
	dev_stream_destroy(a);
	dev_stream_destroy(b);
	dev_free(d, dbuf);
	dev_free(d, dbuf2);
	ck_assert_uint_eq(dev_live(d), 0);
	dev_close(d);
}
END_TEST

/* The backend-independent cases gpu_check runs on a GPU (threads, streams, error
 * paths, argmax with NaN, a module's function), here on sim devices 0 and 1. */
START_TEST(contract_cases_on_two_devices)
{
	dc_module_path = TC_KERNELS_SIM;
	for (int index = 0; index < 2; index++) {
		struct dev *d = open_index(index);

		for (size_t i = 0; i < dc_ncases; i++) {
			char msg[DC_MSG_MAX] = "";
			int err = dc_cases[i].run(d, msg, sizeof(msg));

			ck_assert_msg(err == 0, "sim%d %s: %d: %s", index, dc_cases[i].name, err,
				      msg);
		}
		ck_assert_uint_eq(dev_live(d), 0);
		dev_close(d);
	}
}
END_TEST

void device_add_model_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"current_device_is_per_thread", current_device_is_per_thread},
	    {"stream_errors_are_sticky_and_per_stream", stream_errors_are_sticky_and_per_stream},
	    {"sticky_fault_loses_the_device", sticky_fault_loses_the_device},
	    {"lazy_copies_land_only_when_waited_for", lazy_copies_land_only_when_waited_for},
	    {"contract_cases_on_two_devices", contract_cases_on_two_devices},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
