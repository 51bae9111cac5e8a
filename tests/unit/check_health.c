/* check_health.c - a chip's health as the supervisor judges it, with a real chipd:
 * a chip whose scheduler gave the device up leaves the router's choice at once and is
 * marked degraded and restarted; a scheduler stuck in a step past --progress-ms does
 * the same, its stream ending retryable; a loader held in one fill past --fill-ms
 * does the same, that stream ending timeout and the others moved (also when the
 * worker dies before the router read the assign's answer, which moves an unstarted
 * request as the death path does), while a fill slower
 * than --progress-ms but within --fill-ms completes; a supervisor that was itself
 * stopped asks its workers afresh instead of killing them; a dead worker's gauges
 * read 0; a callable's task on another request's lane fails that request alone; an
 * assign that waited for a free slot of its worker's mailbox while the router was held
 * up is posted once slots free, not given up. */
#include "chipd_fixture.h"
#include "testutil.h"
#include "wait.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WAIT_MS 15000u /* bound of every poll (a loaded 2-core machine, sanitizers) */
#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif

/* Waits (bounded) until counter @block.@name is @want. */
static bool wait_stat(struct cd *d, const char *block, const char *name, uint64_t want)
{
	uint64_t end = shm_now_ns() + WAIT_MS * SHM_NS_PER_MS;

	while (cd_stat(d, block, name) != want)
		if (shm_now_ns() >= end)
			return false;
		else
			usleep(5000);
	return true;
}

/* Submits a synthetic request with @np parameters @p to chip @chip (-1: any). */
static int submit_on(struct cd *d, int32_t chip, const struct chipd_param *p, uint32_t np,
		     chipd_stream **s, struct chipd_error *err)
{
	return cd_submit_to(d, "synthetic", chip, p, np, s, err);
}

/* A healthy request on chip @chip (-1: any) completes: the chip serves again. */
static void serves(struct cd *d, int32_t chip)
{
	const struct chipd_param ok[] = {{"tokens", 3}, {"device_us", 50}};
	struct chipd_error err;
	chipd_stream *s;

	ck_assert_int_eq(submit_on(d, chip, ok, 2, &s, &err), 0);
	cd_expect_stream(s, 3, CHIPD_OK, CD_CALL_MS);
}

/* Eight requests pinned to chip 0 whose only step the device refuses make chip 0's
 * scheduler give the device up. The chip must leave the router's choice at once
 * (before any heartbeat says so): every one of 20 healthy unpinned submits that
 * follow completes, on chip 1 or on chip 0 once it was restarted. The chip is marked
 * degraded (counted) and restarted with a new pid. */
START_TEST(chip_whose_scheduler_gave_up_takes_no_traffic)
{
	const char *const args[] = {"--chips", "2", NULL};
	/* one step each: a request of more steps would have a later, healthy step that
	 * breaks the run of failed steps */
	struct chipd_param bad[] = {{"tokens", 1}, {"device_us", 50}, {"fail_step", 0}};
	struct chipd_param ok[] = {{"tokens", 3}, {"device_us", 50}};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	struct cd d;
	pid_t w0;

	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(submit_on(&d, 0, bad, 3, &s, &err), 0);
		cd_expect_stream(s, 0, CHIPD_E_DEVICE_ERROR, CD_CALL_MS);
	}
	for (int i = 0; i < 20; i++) {
		int rc = submit_on(&d, -1, ok, 2, &s, &err);

		ck_assert_msg(rc == 0, "healthy submit %d refused: %s (%s)", i,
			      chipd_code_name(err.code), err.message);
		ck_assert_uint_eq(cd_drain_stream(s, &code, CD_CALL_MS), 3);
		ck_assert_msg(code == CHIPD_OK, "healthy submit %d ended %s", i,
			      chipd_code_name(code));
		chipd_stream_close(s, CD_CALL_MS);
	}
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, WAIT_MS));
	ck_assert_uint_ge(cd_stat(&d, "supervisor", "worker_degraded"), 1);
	serves(&d, 0); /* the restarted chip */
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A scheduler stuck in a step (one that takes 1 s on the device) while the bound of
 * progress is 300 ms: the heartbeats still come (M answers them), but S's progress
 * word stands still with an epoch pending, so the chip is marked degraded, killed and
 * restarted; its stream ends worker_lost, retryable (no other chip to move it to). */
START_TEST(stuck_scheduler_degrades_the_chip)
{
	const char *const args[] = {"--chips", "1", "--heartbeat-ms", "50", "--progress-ms",
				    "300",     NULL};
	struct chipd_param slow[] = {{"tokens", 3}, {"device_us", 1000000}};
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;
	pid_t w0;

	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(submit_on(&d, -1, slow, 2, &s, &err), 0);
	cd_expect_stream(s, 0, CHIPD_E_WORKER_LOST, WAIT_MS);
	ck_assert(chipd_code_retryable(CHIPD_E_WORKER_LOST));
	ck_assert_uint_ge(cd_stat(&d, "supervisor", "worker_degraded"), 1);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, WAIT_MS));
	serves(&d, -1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* The supervisor stopped (SIGSTOP) for twice --stuck-ms while its workers stream:
 * on SIGCONT it sees that it did not run, asks its workers afresh and kills none;
 * every stream completes. */
START_TEST(stalled_supervisor_kills_no_worker)
{
	const char *const args[] = {"--chips", "2", "--heartbeat-ms", "100", "--stuck-ms",
				    "1000",    NULL};
	struct chipd_param p[] = {{"tokens", 1500}, {"device_us", 1000}};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s[4];
	uint64_t deaths;
	struct cd d;
	pid_t w0, w1;

	cd_start(&d, args, NULL);
	/* a slow start (sanitizers) may cost a worker or two already: count from here */
	deaths = cd_stat(&d, "supervisor", "worker_deaths");
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(submit_on(&d, -1, p, 2, &s[i], &err), 0);
	tu_sleep_ms(200); /* heartbeats answered, streams running */
	tu_sigstop(d.pid);
	tu_sleep_ms(2000);
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(cd_drain_stream(s[i], &code, WAIT_MS), 1500);
		ck_assert_msg(code == CHIPD_OK, "stream %d ended %s", i, chipd_code_name(code));
		chipd_stream_close(s[i], CD_CALL_MS);
	}
	/* a heartbeat round after the resume, then nothing was killed */
	tu_sleep_ms(500);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0);
	ck_assert_int_eq(cd_worker_pid(&d, 1), w1);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_deaths"), deaths);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A worker that dies holding work leaves no phantom load: once the chip is failed
 * (crash limit 1: never restarted, so no new worker rewrites them), its gauges read
 * 0 in the counters (status, top and Prometheus read those). */
START_TEST(dead_worker_gauges_read_zero)
{
	const char *const args[] = {"--chips", "2", "--crash-limit", "1", NULL};
	const struct chipd_param p[] = {{"tokens", 4000}};
	struct chipd_request req = {
	    .workload = "paged_attention", .params = p, .nparams = 1, .chip = 0};
	struct chipd_status st;
	struct chipd_error err;
	chipd_stream *s;
	uint64_t id, end;
	struct cd d;
	pid_t w0;

	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_msg(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err) == 0, "%s: %s",
		      chipd_code_name(err.code), err.message);
	/* not read: it runs until its ring is full and then holds its blocks */
	end = shm_now_ns() + WAIT_MS * SHM_NS_PER_MS;
	while (cd_stat(&d, "chip0", "active") != 1 || cd_stat(&d, "chip0", "kv_blocks_used") == 0) {
		ck_assert_msg(shm_now_ns() < end, "chip0 never showed its load");
		usleep(5000);
	}
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_FAILED, 0, WAIT_MS));
	ck_assert(wait_stat(&d, "chip0", "active", 0));
	ck_assert_uint_eq(cd_stat(&d, "chip0", "kv_blocks_used"), 0);
	ck_assert_uint_eq(cd_stat(&d, "chip0", "queue_depth"), 0);
	ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, &st, &err), 0);
	ck_assert_uint_eq(st.chips[0].active, 0);
	ck_assert_uint_eq(st.chips[0].queued, 0);
	/* (its reader read nothing, so it was moved to chip 1: closing it cancels it) */
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Starts chipd with @args and registers the tests' tiny (its seed 996 sleeps ten
 * times step_us in its fill, holding the worker's loader); its directory in @dir. */
static void start_with_tiny(struct cd *d, const char *const *args, char *dir, size_t cap)
{
	char path[256];
	struct chipd_error err;

	cd_callables_dir(dir, cap, "health", CL_TEST_DIR, "tc_good.so");
	snprintf(path, sizeof(path), "%s/tc_good.so", dir);
	cd_start(d, args, NULL);
	ck_assert_msg(chipd_register(d->conn, path, NULL, CD_CALL_MS * 2, NULL, NULL, &err) == 0,
		      "%s", err.message);
}

/* A loader held in one fill (10 s) past --fill-ms (1 s) on chip 0: M answers the
 * heartbeats and O has nothing of the request, but the heartbeat says how long the
 * fill has lasted, so the chip is marked degraded, killed and restarted. The held
 * request ends timeout and is not moved (it would hold chip 1's loader too); a request
 * queued behind it at the loader is moved to chip 1 and completes, and chip 1 keeps
 * its worker. Before, the chip stayed ready and both requests unended for the whole
 * fill. */
START_TEST(held_fill_degrades_the_chip)
{
	const char *const args[] = {"--chips", "2", "--heartbeat-ms", "50", "--fill-ms", "1000",
				    NULL};
	const struct chipd_param held[] = {{"seed", 996}, {"step_us", 1000000}, {"tokens", 1}};
	const struct chipd_param next[] = {{"seed", 7}, {"step_us", 1000}, {"tokens", 2}};
	struct chipd_error err;
	chipd_stream *s, *t;
	char dir[128];
	struct cd d;
	pid_t w0, w1;

	start_with_tiny(&d, args, dir, sizeof(dir));
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	ck_assert_msg(cd_submit_to(&d, "tiny", 0, held, 3, &s, &err) == 0, "%s: %s",
		      chipd_code_name(err.code), err.message);
	ck_assert_msg(cd_submit_to(&d, "tiny", 0, next, 3, &t, &err) == 0, "%s: %s",
		      chipd_code_name(err.code), err.message);
	/* well before the fill's 10 s (which would end it with a token) */
	cd_expect_stream(s, 0, CHIPD_E_TIMEOUT, 8000);
	cd_expect_stream(t, 2, CHIPD_OK, WAIT_MS);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_degraded"), 1);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, WAIT_MS));
	ck_assert_int_eq(cd_worker_pid(&d, 1), w1);
	serves(&d, 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	cd_remove_dir(dir);
}
END_TEST

/* A call of the test made from a thread of its own: a submit of @wl with @np
 * parameters @p to chip 0, or the router's holder (@hold): a trace start, which the
 * router sends chip by chip and waits for each answer (its bound, 2 s, for a stopped
 * worker). A cancel no longer holds it: the router posts it and serves on. */
struct held_call {
	struct cd *d;
	bool hold; /* false: the submit */
	const char *wl;
	const struct chipd_param *p;
	uint32_t np;
	chipd_stream *s;
	struct chipd_error err;
	int rc;
};

static void *held_call_main(void *arg)
{
	struct held_call *c = arg;

	if (c->hold)
		c->rc = chipd_trace(c->d->conn, CHIPD_TRACE_START, NULL, CD_CALL_MS, NULL, NULL,
				    &c->err);
	else
		c->rc = cd_submit_to(c->d, c->wl, 0, c->p, c->np, &c->s, &c->err);
	return NULL;
}

/* The router held in a trace start that waits for chip 1 (its worker SIGSTOPped: the
 * call waits its 2 s) while @h->submit's assign to chip 0 is posted and unanswered:
 * chip 0's worker, stopped while the submit was taken, is continued once the router
 * took the trace start (it answers that at once, then the router waits for chip 1),
 * and admits the submit while the router cannot read the answer. */
struct held_router {
	struct held_call submit, hold;
	pthread_t ts, th;
	/* a long request on chip 1: a request moved off chip 0 goes to a chip with fewer
	 * (chip 2), never to stopped chip 1 */
	chipd_stream *busy;
	pid_t w0, w1;
};

static void hold_router_over_a_submit(struct cd *d, struct held_router *h)
{
	static const struct chipd_param busy[] = {{"tokens", 1 << 20}, {"device_us", 1000}};
	const struct chipd_request req = {
	    .workload = "synthetic", .params = busy, .nparams = 2, .chip = 1};
	struct chipd_error err;
	uint64_t taken, id;

	h->w0 = cd_worker_pid(d, 0);
	h->w1 = cd_worker_pid(d, 1);
	ck_assert_int_eq(chipd_submit(d->conn, &req, CD_CALL_MS, &id, &h->busy, &err), 0);
	tu_sigstop(h->w1);
	tu_sigstop(h->w0);
	h->submit.d = h->hold.d = d;
	h->hold.hold = true;
	taken = cd_stat(d, "supervisor", "requests");
	/* the submit's assign is posted to chip 0, whose worker takes it once continued */
	ck_assert_int_eq(pthread_create(&h->ts, NULL, held_call_main, &h->submit), 0);
	ck_assert_uint_ge(cd_stat_reaches(d, "supervisor", "requests", taken + 1, WAIT_MS),
			  taken + 1);
	/* the router takes the trace start and waits for stopped chip 1 */
	ck_assert_int_eq(pthread_create(&h->th, NULL, held_call_main, &h->hold), 0);
	ck_assert_uint_ge(cd_stat_reaches(d, "supervisor", "requests", taken + 2, WAIT_MS),
			  taken + 2);
	ck_assert_int_eq(kill(h->w0, SIGCONT), 0);
}

/* Lets the router go: chip 1 continued, the trace start's call joined, the long
 * request's stream closed. */
static void release_router(struct held_router *h)
{
	ck_assert_int_eq(kill(h->w1, SIGCONT), 0);
	ck_assert_int_eq(pthread_join(h->th, NULL), 0);
	if (h->busy)
		chipd_stream_close(h->busy, CD_CALL_MS);
}

/* The held fill of the test above, admitted by chip 0 while the router is busy with a
 * trace start that waits for chip 1, whose worker is stopped (2 s): the heartbeat
 * sees the fill held past --fill-ms and chip 0's worker is killed before the router
 * read the assign's answer. The request still ends timeout, as when the death path
 * finds it (its fill would hold another chip's loader the same way): its submit is
 * answered timeout, or its stream ends timeout without a token. Before, the forward
 * ended it worker_lost (retryable), which sends it to the next chip's loader. */
START_TEST(held_fill_seen_before_its_answer_ends_timeout)
{
	const char *const args[] = {
	    "--chips",	  "2",	   "--heartbeat-ms", "50",    "--fill-ms", "100",
	    "--stuck-ms", "60000", "--progress-ms",  "60000", NULL};
	const struct chipd_param held[] = {{"seed", 996}, {"step_us", 1000000}, {"tokens", 1}};
	struct held_router h = {.submit = {.wl = "tiny", .p = held, .np = 3}};
	char dir[128];
	struct cd d;

	start_with_tiny(&d, args, dir, sizeof(dir));
	hold_router_over_a_submit(&d, &h);
	ck_assert(wait_stat(&d, "supervisor", "worker_degraded", 1));
	ck_assert_int_eq(pthread_join(h.ts, NULL), 0);
	if (h.submit.rc == 0)
		cd_expect_stream(h.submit.s, 0, CHIPD_E_TIMEOUT, WAIT_MS);
	else
		ck_assert_msg(h.submit.err.code == CHIPD_E_TIMEOUT, "the held submit: %s (%s)",
			      chipd_code_name(h.submit.err.code), h.submit.err.message);
	release_router(&h);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, h.w0, WAIT_MS));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	cd_remove_dir(dir);
}
END_TEST

/* An unstarted request admitted by chip 0 while the router is busy with a trace start
 * that waits for chip 1, whose worker is stopped (2 s), and chip 0's worker killed
 * before the router read the assign's answer: the request has published no token, so
 * it is moved to a ready chip and completes there, as the death path moves every
 * unstarted stream (docs/protocol.md 8.4). Before, the forward ended it worker_lost. */
START_TEST(admitted_unanswered_unstarted_is_requeued)
{
	const char *const args[] = {"--chips",	      "3",     "--stuck-ms",	    "60000",
				    "--progress-ms",  "60000", "--backoff-min-ms", "10000",
				    "--backoff-max-ms", "10000", NULL};
	/* its first token is a second away when chip 0's worker is killed */
	const struct chipd_param slow[] = {{"tokens", 2}, {"device_us", 1000000}};
	struct held_router h = {.submit = {.wl = "synthetic", .p = slow, .np = 2}};
	struct cd d;

	cd_start(&d, args, NULL);
	hold_router_over_a_submit(&d, &h);
	ck_assert_uint_eq(cd_stat_reaches(&d, "chip0", "admitted", 1, WAIT_MS), 1);
	/* M counts the admission before it writes the answer, and nothing a test can read
	 * says the answer is written: once O holds the request (active), a margin for M,
	 * far inside the 1 s to the first token. (A kill before the answer is the case of a
	 * death with the assign in flight: the submit is answered worker_lost.) */
	ck_assert_uint_eq(cd_stat_reaches(&d, "chip0", "active", 1, WAIT_MS), 1);
	usleep(250 * 1000);
	ck_assert_int_eq(kill(h.w0, SIGKILL), 0);
	ck_assert_int_eq(pthread_join(h.ts, NULL), 0);
	ck_assert_msg(h.submit.rc == 0, "the submit: %s (%s)", chipd_code_name(h.submit.err.code),
		      h.submit.err.message);
	cd_expect_stream(h.submit.s, 2, CHIPD_OK, WAIT_MS);
	ck_assert_uint_eq(cd_stat(&d, "chip2", "completed"), 1);
	release_router(&h);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A submit of a thread of its own, on a connection of its own, to chip 0. */
struct queued_submit {
	chipd_conn *c;
	pthread_t th;
	chipd_stream *s;
	struct chipd_error err;
	int rc;
};

static void *queued_submit_main(void *arg)
{
	static const struct chipd_param one[] = {{"tokens", 1}, {"device_us", 0}};
	const struct chipd_request req = {
	    .workload = "synthetic", .params = one, .nparams = 2, .chip = 0};
	struct queued_submit *q = arg;
	uint64_t id;

	q->rc = chipd_submit(q->c, &req, WAIT_MS, &id, &q->s, &q->err);
	return NULL;
}

/* More submits to chip 0 than its worker's mailbox has slots (64, the heartbeat's
 * included), taken by the router while that worker is stopped: the rest wait for a
 * slot. The router is then held past the forward bound (2 s) by a trace start waiting
 * for stopped chip 1, and chip 0 continued meanwhile, so it answers every assign it was posted.
 * Once the router reads those answers, the slots they free take the assigns that
 * waited: every submit is admitted and completes. Before, an assign that waited past
 * the bound was given up without another post, worker_lost ("chip 0 did not answer")
 * though chip 0 never saw it. */
START_TEST(unposted_forward_is_posted_after_a_router_stall)
{
	enum { N = 72 };
	const char *const args[] = {"--chips",	     "2",     "--stuck-ms", "60000",
				    "--progress-ms", "60000", NULL};
	struct held_router h = {.hold = {.hold = true}};
	struct queued_submit *q = calloc(N, sizeof(*q));
	struct chipd_error err;
	uint64_t taken;
	struct cd d;

	ck_assert_ptr_nonnull(q);
	cd_start(&d, args, NULL);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(chipd_connect(d.instance, &q[i].c, &err), 0);
	h.w0 = cd_worker_pid(&d, 0);
	h.w1 = cd_worker_pid(&d, 1);
	tu_sigstop(h.w1);
	tu_sigstop(h.w0);
	taken = cd_stat(&d, "supervisor", "requests");
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(pthread_create(&q[i].th, NULL, queued_submit_main, &q[i]), 0);
	ck_assert_uint_ge(cd_stat_reaches(&d, "supervisor", "requests", taken + N, WAIT_MS),
			  taken + N);
	/* the router takes the trace start and waits for stopped chip 1 */
	h.hold.d = &d;
	ck_assert_int_eq(pthread_create(&h.th, NULL, held_call_main, &h.hold), 0);
	ck_assert_uint_ge(cd_stat_reaches(&d, "supervisor", "requests", taken + N + 1, WAIT_MS),
			  taken + N + 1);
	ck_assert_int_eq(kill(h.w0, SIGCONT), 0);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(pthread_join(q[i].th, NULL), 0);
		ck_assert_msg(q[i].rc == 0, "submit %d: %s (%s)", i, chipd_code_name(q[i].err.code),
			      q[i].err.message);
		cd_expect_stream(q[i].s, 1, CHIPD_OK, WAIT_MS);
		chipd_close(q[i].c);
	}
	release_router(&h);
	free(q);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A callable whose build puts its task on another request's lane (seed 994), ten
 * times in a row on one chip, more than the scheduler's give-up streak (8 failed
 * steps): the host refuses the task, so each such request fails alone, internal (a
 * fault of the host's code, not the device's), and the chip keeps serving with the
 * same worker, degraded never. Before, the task went in, the whole step failed
 * device_error, and the eighth such step made the scheduler give the device up. */
START_TEST(wrong_lane_fails_its_request_alone)
{
	const char *const args[] = {"--chips", "1", NULL};
	const struct chipd_param bad[] = {{"seed", 994}, {"tokens", 2}};
	const struct chipd_param good[] = {{"seed", 3}, {"tokens", 2}};
	struct chipd_error err;
	chipd_stream *s;
	char dir[128];
	struct cd d;
	pid_t w0;

	start_with_tiny(&d, args, dir, sizeof(dir));
	w0 = cd_worker_pid(&d, 0);
	for (int i = 0; i < 10; i++) {
		ck_assert_msg(cd_submit_to(&d, "tiny", 0, bad, 2, &s, &err) == 0, "%d: %s: %s", i,
			      chipd_code_name(err.code), err.message);
		cd_expect_stream(s, 0, CHIPD_E_INTERNAL, WAIT_MS);
	}
	ck_assert_msg(cd_submit_to(&d, "tiny", 0, good, 2, &s, &err) == 0, "%s: %s",
		      chipd_code_name(err.code), err.message);
	cd_expect_stream(s, 2, CHIPD_OK, WAIT_MS);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_degraded"), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	cd_remove_dir(dir);
}
END_TEST

/* A callable whose launch asks for a shape the device layer refuses (tiny, seed 985: a
 * spin of more than an hour), ten times in a row on one chip, more than the
 * scheduler's give-up streak (8 failed steps): the host's launch refuses it, so each
 * such request fails alone, internal (the callable's bug, not the device's), counted
 * in no device error; the chip keeps its worker, degraded never, and another client's
 * request on it completes. Before, the launch went into the step, the device layer
 * refused it on the scheduler's thread as a device error (device_error), and the
 * eighth such step made the scheduler give the device up for every user of the
 * chip. */
START_TEST(bad_kernel_args_fail_their_request_alone)
{
	const char *const args[] = {"--chips", "1", NULL};
	const struct chipd_param bad[] = {{"seed", 985}, {"tokens", 2}};
	const struct chipd_param good[] = {{"seed", 3}, {"tokens", 2}};
	struct chipd_request req = {.workload = "tiny", .params = good, .nparams = 2, .chip = 0};
	struct chipd_error err;
	chipd_conn *other;
	chipd_stream *s;
	char dir[128];
	struct cd d;
	uint64_t id;
	pid_t w0;

	start_with_tiny(&d, args, dir, sizeof(dir));
	w0 = cd_worker_pid(&d, 0);
	for (int i = 0; i < 10; i++) {
		ck_assert_msg(cd_submit_to(&d, "tiny", 0, bad, 2, &s, &err) == 0, "%d: %s: %s", i,
			      chipd_code_name(err.code), err.message);
		cd_expect_stream(s, 0, CHIPD_E_INTERNAL, WAIT_MS);
	}
	ck_assert_int_eq(chipd_connect(d.instance, &other, &err), 0);
	ck_assert_msg(chipd_submit(other, &req, CD_CALL_MS, &id, &s, &err) == 0, "%s: %s",
		      chipd_code_name(err.code), err.message);
	cd_expect_stream(s, 2, CHIPD_OK, WAIT_MS);
	chipd_close(other);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0);
	ck_assert_uint_eq(cd_stat_reaches(&d, "chip0", "failed", 10, WAIT_MS), 10);
	ck_assert_uint_eq(cd_stat_reaches(&d, "chip0", "completed", 1, WAIT_MS), 1);
	ck_assert_uint_eq(cd_stat(&d, "chip0", "device_errors"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_device_error"), 0);
	ck_assert_uint_eq(cd_stat_reaches(&d, "supervisor", "err_internal", 10, WAIT_MS), 10);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_degraded"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_deaths"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_starts"), 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	cd_remove_dir(dir);
}
END_TEST

/* A fill of 2 s, six times --progress-ms, within --fill-ms (the default, 10 min): the
 * chip stays ready and the request completes. A slow fill is no stall of O or S. */
START_TEST(slow_fill_within_fill_ms_completes)
{
	const char *const args[] = {"--chips", "1", "--heartbeat-ms", "50", "--progress-ms", "300",
				    NULL};
	const struct chipd_param slow[] = {{"seed", 996}, {"step_us", 200000}, {"tokens", 2}};
	struct chipd_error err;
	chipd_stream *s;
	char dir[128];
	struct cd d;
	pid_t w0;

	start_with_tiny(&d, args, dir, sizeof(dir));
	w0 = cd_worker_pid(&d, 0);
	ck_assert_msg(cd_submit_to(&d, "tiny", -1, slow, 3, &s, &err) == 0, "%s: %s",
		      chipd_code_name(err.code), err.message);
	cd_expect_stream(s, 2, CHIPD_OK, WAIT_MS);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_degraded"), 0);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	cd_remove_dir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("health");
	const struct tu_case cases[] = {
	    {"scheduler_gave_up", chip_whose_scheduler_gave_up_takes_no_traffic},
	    {"stuck_scheduler", stuck_scheduler_degrades_the_chip},
	    {"held_fill", held_fill_degrades_the_chip},
	    {"held_fill_unanswered", held_fill_seen_before_its_answer_ends_timeout},
	    {"unanswered_requeued", admitted_unanswered_unstarted_is_requeued},
	    {"unposted_forward", unposted_forward_is_posted_after_a_router_stall},
	    {"slow_fill", slow_fill_within_fill_ms_completes},
	    {"wrong_lane", wrong_lane_fails_its_request_alone},
	    {"bad_kernel_args", bad_kernel_args_fail_their_request_alone},
	    {"stalled_supervisor", stalled_supervisor_kills_no_worker},
	    {"dead_worker_gauges", dead_worker_gauges_read_zero},
	};

	/* a real chipd, restarts and seconds-long waits on a loaded machine */
	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 120);
	return tu_run(s);
}
