/* chipd_cancel.c - cancels through a real chipd at the moments where the request is
 * between owners: while its submit is still being forwarded to its worker, while a
 * dead worker's request is being re-queued, and after a cancel answered ok whose
 * worker died before it ended the stream. Also the end of a re-queue given up, and
 * the id of a request ended but not read to its end. Part of check_chipd. */
#include "chipd_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define TCASE_TIMEOUT_S 60

static const char *const two_chips[] = {"--chips", "2", NULL};

/* Submits a synthetic request of 3 tokens, each step a second long, pinned to @chip:
 * time for a worker to die, or a cancel to come, before its first token. */
static chipd_stream *submit_slow_on(struct cd *d, int32_t chip, uint64_t *id)
{
	struct chipd_param p[] = {{"tokens", 3}, {"device_us", 1000000}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 2, .chip = chip};
	struct chipd_error err;
	chipd_stream *s = NULL;

	ck_assert_int_eq(chipd_submit(d->conn, &req, CD_CALL_MS, id, &s, &err), 0);
	return s;
}

/* @s ends cancelled (not FINAL, not worker_lost), once, and the counters say so; then
 * it is closed. */
static void assert_ended_cancelled(struct cd *d, chipd_stream *s)
{
	enum chipd_code code;

	ck_assert_uint_eq(cd_drain_stream(s, &code, CD_CALL_MS), 0);
	ck_assert_msg(code == CHIPD_E_CANCELLED, "the cancelled stream ended %s",
		      code == CHIPD_OK ? "FINAL" : chipd_code_name(code));
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_uint_eq(cd_stat_reaches(d, "supervisor", "err_cancelled", 1, 2000), 1);
	ck_assert_uint_eq(cd_stat(d, "supervisor", "err_worker_lost"), 0);
}

/* A cancel while a dead worker's unstarted request is being moved: its re-queue's
 * assign is posted to chip 1, whose worker is held stopped meanwhile (well inside
 * SUP_FORWARD_MS). The request is live and its client's: the cancel is answered ok
 * and the stream ends cancelled, without a token, as a cancel anywhere else ends it;
 * it never runs to FINAL on chip 1 once that worker goes on. */
START_TEST(cancel_during_requeue_ends_cancelled)
{
	struct chipd_error err;
	chipd_stream *s;
	uint64_t id;
	struct cd d;
	pid_t w0, w1;
	int rc;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	/* admitted on chip 0; its first token is a second away when the worker dies */
	s = submit_slow_on(&d, 0, &id);
	tu_sigstop(w1);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	usleep(300 * 1000); /* the death is seen and the re-queue posted to chip 1 */
	rc = chipd_cancel(d.conn, id, CD_CALL_MS, &err);
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	ck_assert_msg(rc == 0, "cancel during the re-queue: %d (%s: %s)", rc,
		      chipd_code_name(err.code), err.message);
	assert_ended_cancelled(&d, s);
	ck_assert_uint_eq(cd_stat(&d, "chip1", "completed"), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A cancel answered ok whose worker dies before it ended the request: its first step
 * still runs (a second long), so the orchestrator waits for it before it writes the
 * end. The request has no token yet, but its client cancelled it: it is not re-queued
 * to run again elsewhere, its stream ends cancelled. */
START_TEST(cancelled_request_is_not_requeued)
{
	struct chipd_error err;
	chipd_stream *s;
	uint64_t id;
	struct cd d;
	pid_t w0;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	s = submit_slow_on(&d, 0, &id);
	usleep(100 * 1000); /* its first step runs on chip 0 */
	ck_assert_int_eq(chipd_cancel(d.conn, id, CD_CALL_MS, &err), 0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	assert_ended_cancelled(&d, s);
	ck_assert_uint_eq(cd_stat(&d, "chip1", "admitted"), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A cancel sent the moment its worker was SIGKILLed, before the supervisor saw the
 * death: the call to the dead worker fails, but the request is its client's and
 * live, and the death path ends it cancelled (never re-queued) since the cancel came.
 * So the cancel is answered ok, as it is once the death was seen (a re-queue's
 * cancel), not worker_lost for a stream that then ends cancelled. */
START_TEST(cancel_racing_its_workers_death)
{
	struct chipd_error err;
	chipd_stream *s;
	uint64_t id;
	struct cd d;
	pid_t w0;
	int rc;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	s = submit_slow_on(&d, 0, &id);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	rc = chipd_cancel(d.conn, id, CD_CALL_MS, &err);
	ck_assert_msg(rc == 0, "cancel racing the death: %d (%s: %s)", rc,
		      chipd_code_name(err.code), err.message);
	assert_ended_cancelled(&d, s);
	ck_assert_uint_eq(cd_stat(&d, "chip1", "admitted"), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A re-queue given up (its assign posted to chip 1, whose worker is held stopped past
 * SUP_FORWARD_MS): the supervisor closes the ring's reader and ends the stream
 * worker_lost. Its client lives and has not read that end yet when another submit
 * comes: the ring must stay the stream's until its reader took the end (or went), so
 * the client still reads worker_lost, not a ring given to another stream. */
START_TEST(requeue_given_up_end_reaches_its_reader)
{
	enum chipd_code code;
	chipd_stream *s, *other;
	uint64_t id;
	struct cd d;
	pid_t w0, w1;
	uint32_t n;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	s = submit_slow_on(&d, 0, &id);
	tu_sigstop(w1);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	/* the re-queue given up, SUP_FORWARD_MS (2 s) after its post: its end counted
	 * (waited for, not slept: a late event loop restarts the re-queue's 2 s), then a
	 * few ticks for a sweep after it */
	ck_assert_uint_eq(cd_stat_reaches(&d, "supervisor", "err_worker_lost", 1, 20000), 1);
	usleep(700 * 1000);
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	other = cd_submit(&d, 2, 1000);
	cd_expect_stream(other, 2, CHIPD_OK, CD_CALL_MS);
	n = cd_drain_stream(s, &code, CD_CALL_MS);
	ck_assert_msg(code == CHIPD_E_WORKER_LOST, "the stream ended %s after %u tokens",
		      code == CHIPD_OK ? "FINAL" : chipd_code_name(code), n);
	ck_assert_uint_eq(n, 0);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A submit of the slow request above on chip 0 with the client's own id, made by a
 * thread while the test does something else. */
struct submit_call {
	struct cd *d;
	uint64_t id;
	chipd_stream *s;
	struct chipd_error err;
	int rc;
};

static void *submit_thread(void *arg)
{
	struct submit_call *c = arg;
	struct chipd_param p[] = {{"tokens", 3}, {"device_us", 1000000}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 2, .id = c->id, .chip = 0};
	uint64_t got = 0;

	c->rc = chipd_submit(c->d->conn, &req, CD_CALL_MS, &got, &c->s, &c->err);
	if (c->rc == 0 && got != c->id)
		c->rc = -EPROTO;
	return NULL;
}

/* A cancel by the client's own id while the submit is still being forwarded: the
 * router admitted it (the id is the caller's) and posted its assign to chip 0, whose
 * worker is held stopped, so no answer has come yet. The request is live: the cancel
 * is answered ok, and once the worker admitted it the stream ends cancelled; it never
 * runs to FINAL. */
START_TEST(cancel_while_submit_is_forwarded)
{
	struct submit_call call = {.id = 4242};
	struct chipd_error err;
	pthread_t th;
	struct cd d;
	uint64_t taken;
	pid_t w0;
	int rc;

	cd_start(&d, two_chips, NULL);
	call.d = &d;
	w0 = cd_worker_pid(&d, 0);
	tu_sigstop(w0);
	taken = cd_stat(&d, "supervisor", "requests");
	ck_assert_int_eq(pthread_create(&th, NULL, submit_thread, &call), 0);
	/* the router took the submit: it admits it and posts its assign to chip 0 before
	 * it takes the cancel */
	ck_assert_uint_ge(cd_stat_reaches(&d, "supervisor", "requests", taken + 1, 5000),
			  taken + 1);
	rc = chipd_cancel(d.conn, call.id, CD_CALL_MS, &err);
	ck_assert_int_eq(kill(w0, SIGCONT), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(rc == 0, "cancel while the submit is forwarded: %d (%s: %s)", rc,
		      chipd_code_name(err.code), err.message);
	ck_assert_msg(call.rc == 0, "the submit: %d (%s)", call.rc, call.err.message);
	assert_ended_cancelled(&d, call.s);
	ck_assert_uint_eq(cd_stat(&d, "chip0", "completed"), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* An id whose request ended while its reader has not read the end: docs/protocol.md
 * 8.3 "duplicate_id: a request already has this id: one not ended, or one ended whose
 * end its reader has not read (nor closed its stream)", while a cancel of it is
 * not_found ("no live request"). The refusal says which (before, "request 78 is
 * live", which the cancel just denied); once the end is read, the id is free at
 * once. */
START_TEST(ended_unread_id_is_taken_not_live)
{
	const struct chipd_param one = {"tokens", 1};
	struct chipd_request req = {
	    .workload = "synthetic", .params = &one, .nparams = 1, .id = 78, .chip = 0};
	struct chipd_error err;
	chipd_stream *s = NULL, *again = NULL;
	uint64_t id;
	struct cd d;

	cd_start(&d, two_chips, NULL);
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), 0);
	/* ended: its FINAL is in the ring (counted right after it is visible) */
	ck_assert_uint_eq(cd_stat_reaches(&d, "chip0", "completed", 1, 10000), 1);
	ck_assert_int_eq(chipd_cancel(d.conn, 78, CD_CALL_MS, &err), -EREMOTEIO);
	ck_assert_msg(err.code == CHIPD_E_NOT_FOUND, "cancel of the ended 78: %s", err.message);
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &again, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_DUPLICATE_ID);
	ck_assert_msg(strstr(err.message, "ended") && strstr(err.message, "has not read its end"),
		      "%s", err.message);
	cd_expect_stream(s, 1, CHIPD_OK, 10000); /* reads the end, closes the stream */
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &again, &err), 0);
	cd_expect_stream(again, 1, CHIPD_OK, 10000);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Cancels of one request made one after the other by another client (its own
 * connection) while the test does something else. */
struct cancel_calls {
	struct cd *d;
	uint64_t id;
	int n;
	int lost; /* of them, answered worker_lost naming chip 1 */
	int rc;	  /* the last one's result, with err */
	struct chipd_error err;
	atomic_bool done;
};

static void *cancel_thread(void *arg)
{
	struct cancel_calls *c = arg;
	chipd_conn *conn = NULL;

	c->rc = chipd_connect(c->d->instance, &conn, &c->err);
	for (int i = 0; conn && i < c->n; i++) {
		c->rc = chipd_cancel(conn, c->id, CD_CALL_MS, &c->err);
		if (c->rc == -EREMOTEIO && c->err.code == CHIPD_E_WORKER_LOST && c->err.chip == 1)
			c->lost++;
	}
	chipd_close(conn);
	atomic_store_explicit(&c->done, true, memory_order_release);
	return NULL;
}

/* Cancels of a request whose worker is stopped (SIGSTOP: alive, and --stuck-ms keeps
 * the heartbeat from killing it) are each answered worker_lost "chip 1 did not answer"
 * once the forward bound passed, and meanwhile the router serves everyone else: the
 * test's own pings are answered and a submit to chip 0 runs to its end. Before, the
 * router waited out each cancel's bound in the call, serving nobody for 2 s a cancel.
 * Once the worker goes on, the cancel is answered ok and the stream ends cancelled. */
START_TEST(cancel_to_stopped_chip_keeps_the_router_serving)
{
	static const char *const args[] = {"--chips",	    "2",     "--stuck-ms", "60000",
					   "--progress-ms", "60000", NULL};
	struct cancel_calls calls = {.n = 3};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	unsigned pings = 0;
	pthread_t th;
	struct cd d;
	pid_t w1;

	cd_start(&d, args, NULL);
	calls.d = &d;
	w1 = cd_worker_pid(&d, 1);
	s = submit_slow_on(&d, 1, &calls.id);
	tu_sigstop(w1);
	ck_assert_int_eq(pthread_create(&th, NULL, cancel_thread, &calls), 0);
	while (!atomic_load_explicit(&calls.done, memory_order_acquire)) {
		ck_assert_msg(chipd_ping(d.conn, CD_CALL_MS, NULL, &err) == 0, "%s", err.message);
		if (++pings == 20)
			cd_expect_stream(cd_submit(&d, 1, 1000), 1, CHIPD_OK, CD_CALL_MS);
		usleep(10000);
	}
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(calls.lost == calls.n, "%d of %d cancels answered worker_lost (last: %s)",
		      calls.lost, calls.n, calls.err.message);
	/* 3 x 2 s of cancels: hundreds of pings; a router held in each one answers a
	 * few, between them */
	ck_assert_msg(pings >= 40, "%u pings answered: the router waited for chip 1", pings);
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	ck_assert_msg(chipd_cancel(d.conn, calls.id, CD_CALL_MS, &err) == 0, "%s", err.message);
	/* its first step, stopped part way, may end before the cancel is read */
	(void)cd_drain_stream(s, &code, CD_CALL_MS);
	ck_assert_msg(code == CHIPD_E_CANCELLED, "the cancelled stream ended %s",
		      code == CHIPD_OK ? "FINAL" : chipd_code_name(code));
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

void cd_add_cancel_cases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"cancel_while_forwarded", cancel_while_submit_is_forwarded},
	    {"cancel_during_requeue", cancel_during_requeue_ends_cancelled},
	    {"cancelled_not_requeued", cancelled_request_is_not_requeued},
	    {"cancel_racing_death", cancel_racing_its_workers_death},
	    {"requeue_given_up_end", requeue_given_up_end_reaches_its_reader},
	    {"ended_unread_id_taken", ended_unread_id_is_taken_not_live},
	    {"cancel_to_stopped_chip", cancel_to_stopped_chip_keeps_the_router_serving},
	};

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), TCASE_TIMEOUT_S);
}
