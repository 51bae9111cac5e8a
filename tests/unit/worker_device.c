/* worker_device.c - the worker and its device as a GPU runtime has them: a worker on
 * device 1 (every thread of it must select the device), a device lost to a sticky
 * fault mid-stream, a cancelled request when the scheduler gives the device up, the
 * default KV pool against a realistic decode shape, and a device whose streams run
 * only when waited for. */
#include "device.h"
#include "testutil.h"
#include "wl.h"
#include "worker_fixture.h"

#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_MS 5000u

/* S's hook for cancelled_request_ends_cancelled_when_s_gives_up: notes the launch of
 * request @running's lanes and fails every lane of request @bad. */
struct cancel_then_fail {
	uint64_t running, bad;
	_Atomic int launched;
};

static bool note_and_fail(void *arg, uint64_t id, uint32_t step)
{
	struct cancel_then_fail *c = arg;

	(void)step;
	if (id == c->running)
		atomic_store(&c->launched, 1);
	return id == c->bad;
}

static bool running_launched(void *arg)
{
	return atomic_load(&((struct cancel_then_fail *)arg)->launched) != 0;
}

/* A request its client cancelled (the cancel answered ok) while its lanes still ran,
 * when S then gives the device up (its streak: here one failed step, another
 * request's): the request did nothing wrong and nobody wants it, so it ends cancelled,
 * as the supervisor ends one whose worker died with the cancel in flight
 * (protocol.md, cancel), not worker_lost: a retryable code for a request the client
 * gave up. */
START_TEST(cancelled_request_ends_cancelled_when_s_gives_up)
{
	struct cancel_then_fail c = {.running = 1, .bad = 2};
	struct wrk_config cfg;
	struct ring_rec rec[8];
	struct wf f;

	wf_config(&cfg);
	cfg.fault = note_and_fail;
	cfg.fault_arg = &c;
	cfg.s_fatal_streak = 1;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=3,device_us=300000", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(running_launched, &c, READ_MS));
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_OK);
	/* request 2's step fails alone: S gives up while request 1's lanes run */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=1", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(
	    wf_read_end(&f, 1, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR)), 1);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 8, READ_MS), 1);
	ck_assert_msg(rec[0].flags == (RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED)),
		      "the cancelled request ended with flags %#x (code %u), not cancelled",
		      (unsigned)rec[0].flags, (unsigned)(rec[0].flags >> 16));
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
}
END_TEST

void wrk_add_device_tcases(Suite *s);

/* The sim device 1 refuses work from threads whose current device is 0 (CUDA fails
 * such launches): the worker's threads each select their device. */
START_TEST(worker_on_device_1_serves)
{
	struct wrk_config cfg;
	struct ring_rec rec[32];
	struct wf f;

	wf_config(&cfg);
	cfg.dev_index = 1;
	wf_start(&f, &cfg, 64);
	for (uint64_t id = 1; id <= 3; id++)
		ck_assert_int_eq(wf_assign(&f, id, (uint32_t)id - 1, "synthetic",
					   "tokens=5,device_us=100", 0, NULL),
				 CHIPD_OK);
	for (uint32_t ring = 0; ring < 3; ring++)
		ck_assert_uint_eq(wf_read_end(&f, ring, rec, 32, RING_F_FINAL), 5);
	/* weights and a KV cache: uploads (L), launches and events (S), on device 1 */
	ck_assert_int_eq(wf_assign(&f, 4, 3, "paged_attention", "tokens=3,context=20", 0, NULL),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 3, rec, 32, RING_F_FINAL), 3);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "device_errors"), 0);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 4);
}
END_TEST

static void keep_dev(void *arg, struct dev *d)
{
	*(struct dev **)arg = d;
}

/* A sticky fault (an illegal address) mid-stream: the request ends device_error at
 * once (not after a streak of failed steps), S gives the device up, the worker says
 * so in its heartbeat (s_err = DEV_ERR_LOST) and refuses assigns until the supervisor
 * replaces it. */
START_TEST(device_lost_ends_request_and_worker_gives_up)
{
	struct wrk_config cfg;
	struct ring_rec rec[1024];
	struct proto_msg *ans = malloc(sizeof(*ans));
	char msg[CHIPD_MSG_MAX];
	struct dev *d = NULL;
	struct wf f;
	uint32_t n;

	ck_assert_ptr_nonnull(ans);
	wf_config(&cfg);
	cfg.s_fatal_streak = 1000; /* only the loss itself may end it */
	cfg.dev_opened = keep_dev;
	cfg.fault_arg = &d;
	wf_start(&f, &cfg, 1024);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", WF_LONG, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 2, READ_MS), 2);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_STICKY), 0);
	n = wf_read(&f, 0, rec, 1024, 2 * READ_MS);
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_lt(n, 900); /* ended well before its 1000 steps */
	ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR));
	ck_assert(dev_lost(d));
	/* S writes the request's end as its lane finishes, then gives the device up
	 * (s_err): a heartbeat between the two still says 0, so ask until it says so */
	wf_heartbeat_ans(&f, 1, ans);
	for (int64_t seq = 2; ans->s_err == 0 && seq <= READ_MS / 10; seq++) {
		usleep(10000);
		wf_heartbeat_ans(&f, seq, ans);
	}
	ck_assert_int_eq(ans->s_err, DEV_ERR_LOST);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=2", 0, msg),
			 CHIPD_E_NO_CAPACITY);
	ck_assert_msg(strstr(msg, "scheduler"), "message: %s", msg);
	wf_stop(&f);
	ck_assert_uint_ge(wf_ctr(&f, "device_errors"), 1);
	free(ans);
}
END_TEST

/* The default KV block (kv_block_floats) holds one table's 16 positions of 2 KV heads
 * of 128 floats: the decode shape of the docs and benchmarks runs with defaults. */
START_TEST(default_kv_block_fits_decode_shape)
{
	struct wrk_config cfg;
	struct ring_rec rec[32];
	char msg[CHIPD_MSG_MAX] = "";
	struct wf f;

	wf_config(&cfg); /* the default kv_block_floats */
	ck_assert_uint_ge(cfg.kv_block_floats, 2u * 128u * 16u);
	wf_start(&f, &cfg, 64);
	ck_assert_msg(wf_assign(&f, 1, 0, "paged_attention",
				"layers=1,heads=8,kv_heads=2,head_dim=128,block_size=16,"
				"context=40,tokens=2",
				0, msg) == CHIPD_OK,
		      "assign: %s", msg);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 32, RING_F_FINAL), 2);
	wf_stop(&f);
}
END_TEST

static void lazy_dev(void *arg, struct dev *d)
{
	(void)arg;
	ck_assert_int_eq(dev_sim_set_lazy(d, true), 0);
}

/* A lazy sim device (a stream runs only once someone waits for it): a token read
 * before its event completed, or an upload not ordered before its kernels, would
 * give a wrong token or hang; every token is the reference's. */
START_TEST(lazy_device_gives_reference_tokens)
{
	static const struct {
		const char *wl, *params;
	} reqs[] = {
	    {"paged_attention", "tokens=4,context=20"},
	    {"gemm", "tokens=4"},
	    {"synthetic", "tokens=6,device_us=50"},
	};
	struct wrk_config cfg;
	struct ring_rec rec[32];
	struct wf f;

	wf_config(&cfg);
	cfg.dev_opened = lazy_dev;
	wf_start(&f, &cfg, 64);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(wf_assign(&f, i + 1, i, reqs[i].wl, reqs[i].params, 0, NULL),
				 CHIPD_OK);
	for (uint32_t i = 0; i < 3; i++) {
		uint64_t want[32];
		char msg[WL_MSG_MAX] = "";
		struct wl_params p;
		uint32_t n = wf_read_end(&f, i, rec, 32, RING_F_FINAL);

		wl_params_init(&p);
		ck_assert_int_eq(wl_params_parse(&p, reqs[i].params, msg, sizeof(msg)), 0);
		ck_assert_msg(wl_ref_tokens(reqs[i].wl, &p, want, n, msg, sizeof(msg)) == 0, "%s",
			      msg);
		for (uint32_t k = 0; k < n; k++)
			ck_assert_msg(rec[k].value == want[k], "%s token %u: %llu, want %llu",
				      reqs[i].wl, k, (unsigned long long)rec[k].value,
				      (unsigned long long)want[k]);
	}
	wf_stop(&f);
}
END_TEST

/* A device lost while another request's long kernel still runs: the request whose
 * kernel faulted ends device_error, and the chip is DRAINING before that end is
 * visible (the router must not send its client's resubmission back to a lost
 * device), though S drains the other request's kernel (a second) before it gives
 * the device up. */
START_TEST(device_lost_drains_the_chip_before_the_end_is_visible)
{
	struct wrk_config cfg;
	struct ring_rec rec[1024];
	struct dev *d = NULL;
	struct wf f;
	uint32_t state, n;

	wf_config(&cfg);
	cfg.s_fatal_streak = 1000; /* only the loss itself may end it */
	cfg.dev_opened = keep_dev;
	cfg.fault_arg = &d;
	wf_start(&f, &cfg, 1024);
	/* request 1: two steps of a second each in flight (it gets no third before the
	 * first ended); request 2: short steps, the only kernels launched meanwhile */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=3,device_us=1000000", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", WF_LONG, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 1, rec, 2, READ_MS), 2);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_STICKY), 0);
	n = wf_read(&f, 1, rec, 1024, 2 * READ_MS);
	/* read at once: the end is visible, request 1's kernel may still run */
	state = atomic_load(&f.ctl.hdr->state);
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR));
	ck_assert_msg(state == SHM_STATE_DRAINING, "state %u when request 2's end was read", state);
	ck_assert(dev_lost(d));
	wf_stop(&f);
}
END_TEST

/* Loses @d as a fault outside the worker's steps would (an uncorrectable ECC error
 * a GPU runtime reports at any call): a kernel on a stream of the test's own takes
 * an injected sticky fault. */
static void lose_device(struct dev *d)
{
	struct dev_stream *st = NULL;
	struct dev_kcall c = {DEV_K_SPIN, .u.spin = {NULL, 0, 1}};

	ck_assert_int_eq(dev_select(d), 0);
	ck_assert_int_eq(dev_alloc(d, sizeof(int32_t), (void **)&c.u.spin.out), 0);
	ck_assert_int_eq(dev_stream_create(d, &st), 0);
	ck_assert_int_eq(dev_sim_inject_fault(d, DEV_SIM_FAULT_STICKY), 0);
	ck_assert_int_eq(dev_launch(st, &c), 0);
	ck_assert_int_eq(dev_stream_sync(st), DEV_ERR_LOST);
	dev_stream_destroy(st);
	(void)dev_free(d, c.u.spin.out);
}

/* Whether the worker @arg (a struct wf) has an epoch published and not released. */
static bool first_epoch_out(void *arg)
{
	struct proto_msg *ans = malloc(sizeof(*ans));
	bool out;

	ck_assert_ptr_nonnull(ans);
	wf_heartbeat_ans(arg, 1, ans);
	out = ans->epochs > 0;
	free(ans);
	return out;
}

/* A device lost while no step runs: S gives the device up within its idle wait's
 * second (s_err, DRAINING) and the worker refuses new work, rather than staying READY
 * and failing every request that comes at its fill; a request admitted before that
 * meets the loss at its fill and ends device_error, the chip DRAINING before that end
 * is visible. */
START_TEST(device_lost_between_steps_gives_the_device_up)
{
	struct wrk_config cfg;
	struct ring_rec rec[8];
	struct proto_msg *ans = malloc(sizeof(*ans));
	char msg[CHIPD_MSG_MAX];
	struct dev *d = NULL;
	struct wf f;
	uint32_t state;
	int code;

	ck_assert_ptr_nonnull(ans);
	wf_config(&cfg);
	cfg.dev_opened = keep_dev;
	cfg.fault_arg = &d;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	ck_assert_ptr_nonnull(d);
	lose_device(d);
	/* S may find the loss first (its idle wait looks at least once a second): then
	 * the assign is refused already */
	code = wf_assign(&f, 2, 1, "synthetic", "tokens=2", 0, msg);
	if (code == CHIPD_OK) {
		ck_assert_uint_eq(wf_read(&f, 1, rec, 8, READ_MS), 1);
		state = atomic_load(&f.ctl.hdr->state);
		ck_assert_uint_eq(rec[0].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR));
		ck_assert_msg(state == SHM_STATE_DRAINING, "state %u when request 2's end was read",
			      state);
	} else {
		ck_assert_int_eq(code, CHIPD_E_NO_CAPACITY);
	}
	wf_heartbeat_ans(&f, 1, ans);
	for (int64_t seq = 2; ans->s_err == 0 && seq <= READ_MS / 10; seq++) {
		usleep(10000);
		wf_heartbeat_ans(&f, seq, ans);
	}
	ck_assert_int_eq(ans->s_err, DEV_ERR_LOST);
	ck_assert_int_eq(wf_assign(&f, 3, 2, "synthetic", "tokens=2", 0, msg), CHIPD_E_NO_CAPACITY);
	ck_assert_msg(strstr(msg, "scheduler"), "message: %s", msg);
	wf_stop(&f);
	free(ans);
}
END_TEST

/* A device lost while a request's kernel still runs (the loss comes from elsewhere:
 * a kernel on the test's own stream): S gives the device up, drains that kernel, and
 * the request, whose lane the lost device failed, ends device_error, as on a GPU,
 * where every query of a lost device fails at once. Before, the sim's lane was still
 * running when S gave up and its request ended worker_lost: a request whose own
 * kernel faulted ended so too when S saw the loss between its kernel and its event. */
START_TEST(device_lost_fails_the_lanes_in_flight)
{
	struct wrk_config cfg;
	struct dev *d = NULL;
	struct wf f;

	wf_config(&cfg);
	cfg.s_fatal_streak = 1000; /* only the loss itself may end it */
	cfg.dev_opened = keep_dev;
	cfg.fault_arg = &d;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=3,device_us=1000000", 0, NULL),
			 CHIPD_OK);
	/* its first step is on the device: the heartbeat counts the epoch out */
	ck_assert(tu_eventually(first_epoch_out, &f, READ_MS));
	ck_assert_ptr_nonnull(d);
	lose_device(d);
	wf_expect_error_at(&f, 0, 0, CHIPD_E_DEVICE_ERROR);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "device_errors"), 1);
}
END_TEST

/* A gate for L and the device it keeps (both through the config's fault_arg). */
struct gate_dev {
	struct wf_gate gate; /* first: wf_gate_hook's argument is the config's fault_arg */
	struct dev *d;
};

static void keep_gate_dev(void *arg, struct dev *d)
{
	((struct gate_dev *)arg)->d = d;
}

/* Requests admitted but not yet filled when S gave a lost device up: nobody will run
 * them here, and nothing of them ran, so they end worker_lost (retryable: another chip
 * may run them), as every request S had not started; L does not fill them on the lost
 * device (which failed the fills: device_error, for good). */
START_TEST(requests_waiting_for_l_when_the_device_is_lost_end_worker_lost)
{
	struct wrk_config cfg;
	struct gate_dev g = {.gate = {.id = 1}};
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct wf f;

	ck_assert_ptr_nonnull(ans);
	wf_config(&cfg);
	cfg.l_fault = wf_gate_hook; /* L holds request 1 before its fill */
	cfg.dev_opened = keep_gate_dev;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &g.gate, READ_MS));
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert_ptr_nonnull(g.d);
	lose_device(g.d);
	wf_heartbeat_ans(&f, 1, ans);
	for (int64_t seq = 2; ans->s_err == 0 && seq <= READ_MS / 10; seq++) {
		usleep(10000);
		wf_heartbeat_ans(&f, seq, ans);
	}
	ck_assert_int_eq(ans->s_err, DEV_ERR_LOST);
	atomic_store(&g.gate.open, 1);
	wf_expect_error_at(&f, 0, 0, CHIPD_E_WORKER_LOST);
	wf_expect_error_at(&f, 1, 0, CHIPD_E_WORKER_LOST);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "device_errors"), 0);
	free(ans);
}
END_TEST

void wrk_add_device_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"worker_on_device_1_serves", worker_on_device_1_serves},
	    {"device_lost_ends_request_and_worker_gives_up",
	     device_lost_ends_request_and_worker_gives_up},
	    {"device_lost_drains_the_chip_before_the_end_is_visible",
	     device_lost_drains_the_chip_before_the_end_is_visible},
	    {"device_lost_between_steps_gives_the_device_up",
	     device_lost_between_steps_gives_the_device_up},
	    {"device_lost_fails_the_lanes_in_flight", device_lost_fails_the_lanes_in_flight},
	    {"requests_waiting_for_l_when_the_device_is_lost_end_worker_lost",
	     requests_waiting_for_l_when_the_device_is_lost_end_worker_lost},
	    {"cancelled_request_ends_cancelled_when_s_gives_up",
	     cancelled_request_ends_cancelled_when_s_gives_up},
	    {"default_kv_block_fits_decode_shape", default_kv_block_fits_decode_shape},
	    {"lazy_device_gives_reference_tokens", lazy_device_gives_reference_tokens},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
