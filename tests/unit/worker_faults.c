/* worker_faults.c - the worker under trouble: a reader that never reads, an
 * injected device error, an injected orchestrator error, shutdown with streams in
 * flight (and the mailbox served during its grace period), the same id submitted from
 * many threads at once, O or S failing for good, a request nobody wants any more by the
 * time O has a bank for its step. */
#include "testutil.h"
#include "worker_fixture.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_MS 5000u

void wrk_add_fault_tcases(Suite *s);

START_TEST(stalled_reader_does_not_stop_another_request)
{
	struct wrk_config cfg;
	struct ring_rec rec[64];
	struct wf f;
	uint32_t n;

	wf_config(&cfg);
	wf_start(&f, &cfg, 8);
	/* ring 0 is never read: request 1 fills it and pauses */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=100,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=50,device_us=100", 0, NULL),
			 CHIPD_OK);
	n = 0;
	while (n < 50) {
		uint32_t got = wf_read(&f, 1, rec, 1, READ_MS);

		ck_assert_uint_eq(got, 1);
		ck_assert_uint_eq(rec[0].seq, n);
		n++;
		if (rec[0].flags & RING_F_TERMINAL)
			break;
	}
	ck_assert_uint_eq(n, 50);
	ck_assert_uint_eq(rec[0].flags, RING_F_FINAL);
	/* shutdown still ends the paused stream: its terminal record was held back */
	ck_assert_int_eq(wf_shutdown(&f), 0);
	n = wf_read(&f, 0, rec, 64, READ_MS);
	ck_assert_uint_eq(n, 8); /* 7 tokens (one record kept for the end) + ERROR */
	for (uint32_t i = 0; i + 1 < n; i++)
		ck_assert_uint_eq(rec[i].seq, i);
	ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	wf_stop(&f);
}
END_TEST

START_TEST(device_error_ends_request_and_worker_keeps_serving)
{
	struct wrk_config cfg;
	struct wf_fail_at fail = {.id = 7, .step = 3};
	struct ring_rec rec[32];
	struct wf f;

	wf_config(&cfg);
	cfg.fault = wf_fail_at;
	cfg.fault_arg = &fail;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 7, 0, "synthetic", "tokens=10,device_us=100", 0, NULL),
			 CHIPD_OK);
	wf_expect_error_at(&f, 0, 3, CHIPD_E_DEVICE_ERROR);
	ck_assert_int_eq(wf_assign(&f, 8, 1, "synthetic", "tokens=5,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 32, RING_F_FINAL), 5);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_ge(wf_ctr(&f, "device_errors"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
}
END_TEST

START_TEST(o_error_ends_request_and_worker_keeps_serving)
{
	struct wrk_config cfg;
	struct wf_fail_at fail = {.id = 7, .step = 3};
	struct ring_rec rec[32];
	struct wf f;
	uint64_t t0, t1;
	uint32_t n;

	struct tu_capture log;
	char *said;

	wf_config(&cfg);
	cfg.o_fault = wf_fail_at;
	cfg.fault_arg = &fail;
	tu_stderr_begin(&log);
	wf_start(&f, &cfg, 64);
	/* 8 shares the steps of 7 and must not be hurt by 7's failure */
	ck_assert_int_eq(wf_assign(&f, 7, 0, "synthetic", "tokens=10,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 8, 1, "synthetic", "tokens=10,device_us=100", 0, NULL),
			 CHIPD_OK);
	t0 = shm_now_ns();
	n = wf_read(&f, 0, rec, 32, READ_MS);
	t1 = shm_now_ns();
	/* steps 0..2 were built; S may drop the token of one still in flight */
	ck_assert_uint_ge(n, 3);
	ck_assert_uint_le(n, 4);
	for (uint32_t i = 0; i + 1 < n; i++) {
		ck_assert_uint_eq(rec[i].seq, i);
		ck_assert_uint_eq(rec[i].flags, 0);
	}
	ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_INTERNAL));
	ck_assert_uint_eq(rec[n - 1].seq, n - 1);
	/* one log line, naming the request, its callable and the error */
	said = tu_stderr_end(&log);
	ck_assert_msg(strstr(said, "request 7: synthetic: build failed: Input/output error\n"),
		      "%s", said);
	ck_assert_msg(!strstr(strstr(said, "build failed") + 1, "build failed"), "%s", said);
	free(said);
	ck_assert_uint_lt(t1 - t0, 2000ull * 1000u * 1000u); /* promptly, not at a timeout */
	ck_assert_uint_eq(wf_read(&f, 0, rec, 1, 10), 0);    /* nothing after it */
	ck_assert_uint_eq(wf_read(&f, 1, rec, 32, READ_MS), 10);
	ck_assert_uint_eq(rec[9].flags, RING_F_FINAL);
	/* and a later request still completes */
	ck_assert_int_eq(wf_assign(&f, 9, 2, "synthetic", "tokens=5,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 2, rec, 32, READ_MS), 5);
	ck_assert_uint_eq(rec[4].flags, RING_F_FINAL);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "device_errors"), 0);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 2);
}
END_TEST

START_TEST(shutdown_ends_every_stream_exactly_once)
{
	enum { NREQ = 6 };
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	for (uint32_t i = 0; i < NREQ; i++)
		ck_assert_int_eq(
		    wf_assign(&f, 100 + i, i, "synthetic", "tokens=1000,device_us=500", 0, NULL),
		    CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 2, READ_MS), 2);
	ck_assert_int_eq(wf_shutdown(&f), 0); /* both threads joined */
	for (uint32_t i = 0; i < NREQ; i++) {
		uint32_t n = wf_read(&f, i, rec, 1024, READ_MS), terminals = 0;

		ck_assert_uint_gt(n, 0);
		for (uint32_t k = 0; k < n; k++)
			terminals += (rec[k].flags & RING_F_TERMINAL) != 0;
		ck_assert_uint_eq(terminals, 1);
		ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
		ck_assert_uint_eq(wf_read(&f, i, rec, 1, 10), 0); /* nothing after it */
	}
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), NREQ);
	ck_assert_uint_eq(wf_ctr(&f, "active"), 0);
}
END_TEST

START_TEST(request_that_never_fits_a_bank_fails_alone)
{
	struct wrk_config cfg;
	struct ring_rec rec[8];
	struct wf f;

	struct tu_capture log;
	char *said;

	wf_config(&cfg);
	cfg.bank_tasks = 1; /* a synthetic step needs 2 tasks */
	tu_stderr_begin(&log);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 5, 0, "synthetic", "tokens=3", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 8, READ_MS), 1);
	ck_assert_uint_eq(rec[0].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_INTERNAL));
	said = tu_stderr_end(&log);
	ck_assert_msg(strstr(said, "request 5: synthetic: build failed: No buffer space available "
				   "(alone in an empty step)\n"),
		      "%s", said);
	free(said);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
}
END_TEST

START_TEST(deadline_ends_stream_with_timeout)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct wf f;
	uint32_t n;

	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	f.next_deadline_ns = shm_deadline_in(30u * 1000u * 1000u);
	ck_assert_int_eq(wf_assign(&f, 9, 0, "synthetic", "tokens=1000,device_us=1000", 0, NULL),
			 CHIPD_OK);
	n = wf_read(&f, 0, rec, 1024, READ_MS);
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_lt(n, 1000);
	ck_assert_uint_eq(rec[n - 1].flags, RING_F_ERROR | RING_F_CODE(CHIPD_E_TIMEOUT));
	ck_assert_uint_eq(rec[n - 1].seq, n - 1);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
}
END_TEST

static bool cancelled_once(void *arg)
{
	return wf_ctr(arg, "cancelled") == 1;
}

/* Hooks for the tcases of a request O picked that nobody wants by the time it has a
 * bank: S is held in the launch of request @gate.id's step (its hook), and O's build
 * hook counts the builds of request @late begun past @deadline_ns (0: none) or once
 * the test set @closed (it closed the request's ring, or the worker's shutdown
 * grace is over). */
struct late_build {
	struct wf_gate gate;
	uint64_t late, deadline_ns;
	_Atomic int closed, late_builds;
};

static bool hold_launch_of(void *arg, uint64_t id, uint32_t step)
{
	return wf_gate_hook(&((struct late_build *)arg)->gate, id, step);
}

static bool count_late_build(void *arg, uint64_t id, uint32_t step)
{
	struct late_build *l = arg;

	(void)step;
	if (id == l->late &&
	    ((l->deadline_ns && shm_now_ns() >= l->deadline_ns) || atomic_load(&l->closed)))
		atomic_fetch_add(&l->late_builds, 1);
	return false;
}

/* A worker of one bank (no_overlap) with the hooks of @l, running request 1 on ring 0,
 * its step held in S's launch: the bank stays S's until the test opens @l->gate. */
static void start_holding_the_bank(struct wf *f, struct late_build *l)
{
	struct wrk_config cfg;

	wf_config(&cfg);
	cfg.no_overlap = true;
	cfg.fault = hold_launch_of;
	cfg.o_fault = count_late_build;
	cfg.fault_arg = l;
	wf_start(f, &cfg, 64);
	ck_assert_int_eq(wf_assign(f, 1, 0, "synthetic", "tokens=1,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &l->gate, READ_MS));
}

/* protocol.md: no step is built after a request's deadline. O picks the requests that
 * may advance, then waits for a free bank: a deadline that passes during that wait
 * (here S holds the one bank, held in the launch of request 1's step) must still
 * keep the request out of the step; its step would run for nothing, its token never
 * published. */
START_TEST(deadline_passed_during_the_bank_wait_builds_nothing)
{
	struct late_build l = {.gate = {.id = 1}, .late = 2};
	struct ring_rec rec[8];
	struct wf f;

	start_holding_the_bank(&f, &l);
	/* request 2 is picked at once and waits for the bank past its deadline */
	l.deadline_ns = shm_deadline_in(30ull * SHM_NS_PER_MS);
	f.next_deadline_ns = l.deadline_ns;
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=4,device_us=10", 0, NULL),
			 CHIPD_OK);
	while (shm_now_ns() < l.deadline_ns + 10ull * SHM_NS_PER_MS)
		usleep(2000);
	atomic_store(&l.gate.open, 1);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 1);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_TIMEOUT)),
			  1);
	ck_assert_uint_eq(rec[0].seq, 0);
	ck_assert_msg(atomic_load(&l.late_builds) == 0,
		      "request 2 was built %d times after its deadline",
		      atomic_load(&l.late_builds));
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "steps"), 1);
}
END_TEST

/* As above for a request whose reader closed its ring (5.6: how a client that leaves
 * its stream cancels it) while O waited for the bank: no step of it is built, and it
 * ends cancelled. */
START_TEST(ring_closed_during_the_bank_wait_builds_nothing)
{
	struct late_build l = {.gate = {.id = 1}, .late = 2};
	struct ring_rec rec[8];
	struct ring r;
	struct wf f;

	start_holding_the_bank(&f, &l);
	/* request 2 is picked at once and waits for the bank; its reader leaves */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=4,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(proto_node_ring(&f.node, 1, &r), 0);
	/* a reader closes its own stream's generation (protocol.md 5.6) */
	ring_set_reader_gen(&r, atomic_load(&r.hdr->generation));
	ck_assert_int_eq(ring_close_reader(&r), 0);
	atomic_store(&l.closed, 1);
	atomic_store(&l.gate.open, 1);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 1);
	ck_assert(tu_eventually(cancelled_once, &f, READ_MS));
	ck_assert_msg(atomic_load(&l.late_builds) == 0,
		      "request 2 was built %d times after its reader closed the ring",
		      atomic_load(&l.late_builds));
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "tokens"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "steps"), 1);
}
END_TEST

static bool refuses_draining(void *arg)
{
	return wf_assign(arg, 3, 2, "synthetic", "tokens=1,device_us=10", 0, NULL) ==
	       CHIPD_E_DRAINING;
}

/* As above for a shutdown whose grace (0 here) ended while O waited for the bank:
 * architecture.md, every stream still running after the grace ends cancelled, so no
 * new step is built for one. Request 1's step, built before the shutdown, still runs
 * to FINAL (a step running is not interrupted); request 2 ends cancelled. */
START_TEST(shutdown_grace_over_during_the_bank_wait_builds_nothing)
{
	struct late_build l = {.gate = {.id = 1}, .late = 2};
	struct ring_rec rec[8];
	struct mbox_ticket t;
	struct wf f;

	start_holding_the_bank(&f, &l);
	/* request 2 is picked at once and waits for the bank; the grace ends */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=1,device_us=10", 0, NULL),
			 CHIPD_OK);
	wf_shutdown_begin(&f, 0, &t);
	ck_assert(tu_eventually(refuses_draining, &f, READ_MS)); /* M took the shutdown */
	atomic_store(&l.closed, 1);
	atomic_store(&l.gate.open, 1);
	ck_assert_int_eq(wf_shutdown_end(&f, t), 0);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 1);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED)),
			  1);
	ck_assert_msg(atomic_load(&l.late_builds) == 0,
		      "request 2 was built %d times after the shutdown's grace",
		      atomic_load(&l.late_builds));
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "steps"), 1);
}
END_TEST

struct racer {
	struct wf *f;
	pthread_barrier_t *bar;
	int code;
};

static void *race_assign(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->bar);
	r->code =
	    wf_assign_noreset(r->f, 77, 0, "synthetic", "tokens=1000,device_us=1000", 0, NULL);
	return NULL;
}

START_TEST(concurrent_assigns_of_one_id_admit_exactly_one)
{
	enum { NRACE = 6 };
	struct wrk_config cfg;
	struct racer r[NRACE];
	pthread_t th[NRACE];
	pthread_barrier_t bar;
	struct ring ring;
	struct wf f;
	int ok = 0, dup = 0;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(proto_node_ring(&f.node, 0, &ring), 0);
	ring_reset(&ring, 77, getpid(), getpid());
	pthread_barrier_init(&bar, NULL, NRACE);
	for (int i = 0; i < NRACE; i++) {
		r[i] = (struct racer){&f, &bar, -1};
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_assign, &r[i]), 0);
	}
	for (int i = 0; i < NRACE; i++) {
		pthread_join(th[i], NULL);
		ok += r[i].code == CHIPD_OK;
		dup += r[i].code == CHIPD_E_DUPLICATE_ID;
	}
	pthread_barrier_destroy(&bar);
	ck_assert_int_eq(ok, 1);
	ck_assert_int_eq(dup, NRACE - 1);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 1);
}
END_TEST

/* While a shutdown waits out its grace period, the mailbox still answers: heartbeat
 * with the counts, assign with draining, cancel, trace; the shutdown's own answer
 * comes once the threads have exited. */
START_TEST(shutdown_grace_keeps_mailbox_serving)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct mbox_ticket t;
	int64_t active = -1;
	uint64_t t0;
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	wf_assign_long(&f, 1, 0);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 2, READ_MS), 2);
	wf_shutdown_begin(&f, 60000, &t);
	t0 = shm_now_ns();
	ck_assert_int_eq(wf_heartbeat(&f, 5, NULL, &active), CHIPD_OK);
	ck_assert_int_eq(active, 1);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=2", 0, NULL), CHIPD_E_DRAINING);
	ck_assert_int_eq(wf_trace(&f, PROTO_TRACE_START, NULL, -1, NULL, NULL, NULL), CHIPD_OK);
	ck_assert_uint_lt(shm_now_ns() - t0, 1000ull * 1000u * 1000u); /* not after the grace */
	ck_assert(!wf_shutdown_answered(&f, t));		       /* the request still runs */
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_OK);
	ck_assert_int_eq(wf_shutdown_end(&f, t), 0);
	wf_read_end(&f, 0, rec, 1024, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	wf_stop(&f);
}
END_TEST

/* A grace period that runs out ends what is left cancelled, and the shutdown's
 * answer comes then. */
START_TEST(shutdown_grace_expires_then_answers)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct mbox_ticket t;
	uint64_t t0;
	struct wf f;

	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	wf_assign_long(&f, 1, 0);
	t0 = shm_now_ns();
	wf_shutdown_begin(&f, 200, &t);
	ck_assert_int_eq(wf_shutdown_end(&f, t), 0);
	ck_assert_uint_ge(shm_now_ns() - t0, 200ull * 1000u * 1000u);
	ck_assert_uint_lt(
	    wf_read_end(&f, 0, rec, 1024, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED)), 1000);
	wf_stop(&f);
}
END_TEST

/* A step whose only request's build failed holds nothing: the bank is published all
 * the same (the epoch sequence has no holes), but no step was built, and `steps`
 * counts the steps O built (protocol.md 8.1): 2 here, steps 0 and 1. */
START_TEST(failed_build_is_not_counted_as_a_step)
{
	struct wrk_config cfg;
	struct wf_fail_at fail = {.id = 7, .step = 2};
	struct ring_rec rec[8];
	struct tu_capture log;
	struct wf f;

	wf_config(&cfg);
	cfg.o_fault = wf_fail_at;
	cfg.fault_arg = &fail;
	tu_stderr_begin(&log);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 7, 0, "synthetic", "tokens=4,device_us=100", 0, NULL),
			 CHIPD_OK);
	wf_read_end(&f, 0, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_INTERNAL));
	wf_stop(&f);
	free(tu_stderr_end(&log));
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "steps"), 2);
}
END_TEST

struct trip {
	_Atomic int armed;
};

static bool trip_hook(void *arg, uint64_t id, uint32_t step)
{
	(void)id;
	(void)step;
	return atomic_load(&((struct trip *)arg)->armed) != 0;
}

/* O failing for good: its streams end worker_lost (retryable: the supervisor restarts
 * the worker) without a shutdown, the control region says DRAINING (no new work, so
 * the supervisor routes nothing here), new assigns are refused with no_capacity
 * naming the orchestrator, heartbeats carry o_err, the mailbox keeps answering and a
 * shutdown still returns 0. */
START_TEST(o_fatal_ends_streams_and_refuses_assigns)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct trip trip = {0};
	char msg[CHIPD_MSG_MAX];
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct wf f;
	uint32_t n;

	ck_assert_ptr_nonnull(ans);
	wf_config(&cfg);
	cfg.o_fatal = trip_hook;
	cfg.fault_arg = &trip;
	wf_start(&f, &cfg, 1024);
	wf_assign_long(&f, 1, 0);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 2, READ_MS), 2);
	atomic_store(&trip.armed, 1);
	n = wf_read_end(&f, 0, rec + 2, 1000, RING_F_ERROR | RING_F_CODE(CHIPD_E_WORKER_LOST)) + 2;
	ck_assert_uint_lt(n, 1000);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(rec[i].seq, i);
	ck_assert_uint_eq(atomic_load(&f.ctl.hdr->state), SHM_STATE_DRAINING);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=2", 0, msg), CHIPD_E_NO_CAPACITY);
	ck_assert_msg(strstr(msg, "orchestrator"), "message: %s", msg);
	wf_heartbeat_ans(&f, 9, ans);
	ck_assert_int_eq(ans->o_err, -EIO);
	ck_assert_int_eq(ans->s_err, 0);
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_E_NOT_FOUND);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	free(ans);
}
END_TEST

/* As when S gives up (check_worker's cancelled_request_ends_cancelled_when_s_gives_up),
 * a request whose cancel was answered ok and that O had not ended yet when it failed
 * for good ends cancelled, not worker_lost (retryable, for a request its client gave
 * up). */
START_TEST(cancelled_request_ends_cancelled_when_o_gives_up)
{
	struct wrk_config cfg;
	struct ring_rec rec[8];
	struct trip trip = {0};
	struct wf f;
	uint32_t n;

	wf_config(&cfg);
	cfg.o_fatal = trip_hook;
	cfg.fault_arg = &trip;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=3,device_us=300000", 0, NULL),
			 CHIPD_OK);
	/* O fails at its next round, the one the cancel wakes it for */
	atomic_store(&trip.armed, 1);
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_OK);
	n = wf_read(&f, 0, rec, 8, READ_MS);
	ck_assert_uint_gt(n, 0);
	ck_assert_msg(rec[n - 1].flags == (RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED)),
		      "the cancelled request ended with flags %#x (code %u), not cancelled",
		      (unsigned)rec[n - 1].flags, (unsigned)(rec[n - 1].flags >> 16));
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 0);
}
END_TEST

static bool holds_kv_blocks(void *arg)
{
	struct wf *f = arg;

	return wf_ctr(f, "active") == 1 && wf_ctr(f, "kv_blocks_used") > 0;
}

/* O failing for good with a request that holds KV blocks (paused on its full ring):
 * once M ended the stream worker_lost, the gauges O wrote say what the worker holds,
 * nothing (protocol.md 8.1), and so does the heartbeat's active. */
START_TEST(o_fatal_leaves_no_stale_gauges)
{
	struct wrk_config cfg;
	static struct ring_rec rec[128];
	struct trip trip = {0};
	const char *half = "layers=1,heads=2,kv_heads=1,head_dim=8,block_size=16,context=144,"
			   "tokens=1000";
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct wf f;

	ck_assert_ptr_nonnull(ans);
	wf_config(&cfg);
	cfg.o_fatal = trip_hook;
	cfg.fault_arg = &trip;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "paged_attention", half, 0, NULL), CHIPD_OK);
	ck_assert(tu_eventually(holds_kv_blocks, &f, READ_MS));
	atomic_store(&trip.armed, 1);
	wf_read_end(&f, 0, rec, 128, RING_F_ERROR | RING_F_CODE(CHIPD_E_WORKER_LOST));
	wf_heartbeat_ans(&f, 5, ans); /* after M's end of the leftovers */
	ck_assert_int_eq(ans->o_err, -EIO);
	ck_assert_int_eq(ans->active, 0);
	ck_assert_uint_eq(wf_ctr(&f, "active"), 0);
	ck_assert_uint_eq(wf_ctr(&f, "kv_blocks_used"), 0);
	wf_stop(&f);
	free(ans);
}
END_TEST

static bool always_fail(void *arg, uint64_t id, uint32_t step)
{
	(void)arg;
	(void)id;
	(void)step;
	return true;
}

/* S giving the device up after failed steps in a row: every stream ends
 * device_error (each failed its own steps), then the control region says DRAINING,
 * assigns are refused with no_capacity (retryable) naming the scheduler, and
 * heartbeats carry s_err. */
START_TEST(s_fatal_after_failed_steps_refuses_assigns)
{
	struct wrk_config cfg;
	struct ring_rec rec[8];
	char msg[CHIPD_MSG_MAX];
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct wf f;
	int code = CHIPD_OK, tries = 0;

	ck_assert_ptr_nonnull(ans);
	wf_config(&cfg);
	cfg.fault = always_fail;
	cfg.s_fatal_streak = 3;
	wf_start(&f, &cfg, 64);
	/* a request fails at most 2 steps (2 banks; O builds no more once it sees the
	 * failure), so S gives up during the second one at the earliest; it may do so
	 * after the end of a later one is visible: admitted ones still end, device_error,
	 * or worker_lost for one admitted as S left, whose step never ran */
	for (; tries < 20; tries++) {
		code = wf_assign(&f, 10 + (uint64_t)tries, 0, "synthetic", "tokens=5", 0, msg);
		if (code != CHIPD_OK)
			break;
		ck_assert_uint_eq(wf_read(&f, 0, rec, 8, READ_MS), 1);
		ck_assert_msg(rec[0].flags == (RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR)) ||
				  rec[0].flags == (RING_F_ERROR | RING_F_CODE(CHIPD_E_WORKER_LOST)),
			      "flags %#x", (unsigned)rec[0].flags);
	}
	ck_assert_int_ge(tries, 2);
	ck_assert_int_eq(code, CHIPD_E_NO_CAPACITY);
	ck_assert_msg(strstr(msg, "scheduler"), "message: %s", msg);
	ck_assert_uint_eq(atomic_load(&f.ctl.hdr->state), SHM_STATE_DRAINING);
	wf_heartbeat_ans(&f, 3, ans);
	ck_assert_int_eq(ans->s_err, -EIO);
	ck_assert_int_eq(ans->o_err, 0);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), (uint64_t)tries);
	free(ans);
}
END_TEST

/* Whether worker counter @name of @f reached @min, within @ms. */
static bool ctr_reaches(struct wf *f, const char *name, uint64_t min, unsigned ms)
{
	for (unsigned t = 0; t < ms; t++) {
		if (wf_ctr(f, name) >= min)
			return true;
		usleep(1000);
	}
	return false;
}

/* S gives up (its streak) while a failed lane waits in an older step beside a lane
 * still running: that request failed its own step and ends device_error, as every
 * request whose lane failed does, not worker_lost (retryable: its resubmission would
 * fail the same way on the next chip). The request still running ends worker_lost. */
START_TEST(s_fatal_ends_a_failed_lane_of_an_unfinished_step_device_error)
{
	struct wrk_config cfg;
	struct wf_gate gate = {0}; /* O held at its first round: both in its first step */
	int64_t queued = 0;
	struct wf f;

	wf_config(&cfg);
	cfg.o_fatal = wf_gate_hook; /* holds O only; never fails it (fail_id 0) */
	cfg.fault_arg = &gate;
	cfg.s_fatal_streak = 1;
	wf_start(&f, &cfg, 64);
	ck_assert(tu_eventually(wf_gate_entered, &gate, READ_MS));
	/* request 1's steps take a second each; request 2's first kernel faults */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=3,device_us=1000000", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=3,fail_step=0", 0, NULL),
			 CHIPD_OK);
	for (int64_t seq = 1; queued != 2 && seq < READ_MS; seq++) {
		ck_assert_int_eq(wf_heartbeat(&f, seq, &queued, NULL), CHIPD_OK);
		if (queued != 2)
			usleep(1000);
	}
	ck_assert_int_eq(queued, 2);
	atomic_store(&gate.open, 1);
	/* both steps of 1 and 2 built (2's failed lane waits for 1's in the first);
	 * request 3 then fails its first step alone: S gives up */
	ck_assert(ctr_reaches(&f, "steps", 2, READ_MS));
	ck_assert_int_eq(wf_assign(&f, 3, 2, "synthetic", "tokens=3,fail_step=0", 0, NULL),
			 CHIPD_OK);
	wf_expect_error_at(&f, 2, 0, CHIPD_E_DEVICE_ERROR);
	wf_expect_error_at(&f, 1, 0, CHIPD_E_DEVICE_ERROR);
	wf_expect_error_at(&f, 0, 0, CHIPD_E_WORKER_LOST);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "device_errors"), 2);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 3);
}
END_TEST

void wrk_add_fault_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"stalled_reader_does_not_stop_another_request",
	     stalled_reader_does_not_stop_another_request},
	    {"device_error_ends_request_and_worker_keeps_serving",
	     device_error_ends_request_and_worker_keeps_serving},
	    {"o_error_ends_request_and_worker_keeps_serving",
	     o_error_ends_request_and_worker_keeps_serving},
	    {"shutdown_ends_every_stream_exactly_once", shutdown_ends_every_stream_exactly_once},
	    {"request_that_never_fits_a_bank_fails_alone",
	     request_that_never_fits_a_bank_fails_alone},
	    {"deadline_ends_stream_with_timeout", deadline_ends_stream_with_timeout},
	    {"deadline_passed_during_the_bank_wait_builds_nothing",
	     deadline_passed_during_the_bank_wait_builds_nothing},
	    {"ring_closed_during_the_bank_wait_builds_nothing",
	     ring_closed_during_the_bank_wait_builds_nothing},
	    {"shutdown_grace_over_during_the_bank_wait_builds_nothing",
	     shutdown_grace_over_during_the_bank_wait_builds_nothing},
	    {"concurrent_assigns_of_one_id_admit_exactly_one",
	     concurrent_assigns_of_one_id_admit_exactly_one},
	    {"shutdown_grace_keeps_mailbox_serving", shutdown_grace_keeps_mailbox_serving},
	    {"shutdown_grace_expires_then_answers", shutdown_grace_expires_then_answers},
	    {"o_fatal_ends_streams_and_refuses_assigns", o_fatal_ends_streams_and_refuses_assigns},
	    {"cancelled_request_ends_cancelled_when_o_gives_up",
	     cancelled_request_ends_cancelled_when_o_gives_up},
	    {"failed_build_is_not_counted_as_a_step", failed_build_is_not_counted_as_a_step},
	    {"o_fatal_leaves_no_stale_gauges", o_fatal_leaves_no_stale_gauges},
	    {"s_fatal_after_failed_steps_refuses_assigns",
	     s_fatal_after_failed_steps_refuses_assigns},
	    {"s_fatal_ends_a_failed_lane_of_an_unfinished_step_device_error",
	     s_fatal_ends_a_failed_lane_of_an_unfinished_step_device_error},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
