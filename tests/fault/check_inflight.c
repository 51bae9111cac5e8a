/* check_inflight.c - submits in flight at the router: a real chipd (sim chips) whose
 * worker is SIGSTOPped while many clients submit to it, so that every assign is
 * posted and none answered.
 *
 * - many assigns in flight on one worker: the router keeps serving (a ping, a submit
 *   to the other chip) while they wait, and once the worker runs again every one of
 *   them is admitted and its stream ends final;
 * - the worker killed with assigns in flight (docs/reliability.md, row 79): each of
 *   those submits is answered worker_lost, exactly once, well before the forward bound,
 *   and the restarted worker serves;
 * - clients' cancels in flight to a stopped worker, past the client slots (clients
 *   that give their slots up and cancel again): a further one is refused queue_full at
 *   once, the router waiting for no worker (docs/reliability.md, row 210).
 *
 * Bounds are liveness bounds, far above what a loaded machine needs. */
#include "fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* Submits in flight at once: more than a worker's mailbox once held (8 slots). */
#define INFLIGHT 12
/* How long the test waits for the router to take every submit; it must stay well
 * below the forward bound (2 s), after which the router gives a submit up. */
#define TAKEN_MS 1500u

struct submitter {
	struct cd *d;
	int rc;
	struct chipd_error err;
	chipd_stream *s;
	uint64_t done_ms;
};

static void *submit_main(void *arg)
{
	struct submitter *a = arg;

	a->rc = ft_submit(a->d, 3, 0, 0, 0, 0, &a->s, &a->err);
	a->done_ms = ft_now_ms();
	return NULL;
}

/* Starts a chipd of 2 chips (@w: their workers' pids), SIGSTOPs chip 0's worker,
 * starts INFLIGHT submits to chip 0 on threads of @d's connection and waits until the
 * router took them all (its requests counter). */
static void start_in_flight(struct cd *d, pid_t *w, struct submitter *a, pthread_t *t)
{
	/* the stopped worker must not be judged stuck while the test holds it */
	const char *const args[] = {"--chips", "2", "--stuck-ms", "20000", NULL};
	struct ft_stats st;
	uint64_t base, end;

	ft_start(d, args);
	w[0] = cd_worker_pid(d, 0);
	w[1] = cd_worker_pid(d, 1);
	tu_sigstop(w[0]);
	ft_stats(d, &st);
	base = st.sup[PROTO_SUP_requests];
	for (int i = 0; i < INFLIGHT; i++) {
		a[i] = (struct submitter){.d = d};
		ck_assert_int_eq(pthread_create(&t[i], NULL, submit_main, &a[i]), 0);
	}
	for (end = ft_now_ms() + TAKEN_MS;; usleep(1000)) {
		ft_stats(d, &st);
		if (st.sup[PROTO_SUP_requests] >= base + INFLIGHT)
			break;
		ck_assert_msg(ft_now_ms() < end, "the router took %llu of %d submits",
			      (unsigned long long)(st.sup[PROTO_SUP_requests] - base), INFLIGHT);
	}
}

START_TEST(many_assigns_in_flight_on_one_worker)
{
	struct ft_ledger l = {.complete = true};
	struct submitter a[INFLIGHT];
	pthread_t t[INFLIGHT];
	struct chipd_error err;
	chipd_stream *s;
	struct ft_stats st;
	struct cd d;
	pid_t w[2];

	start_in_flight(&d, w, a, t);
	/* the router waits for none of them: it answers a ping and admits a submit to
	 * the other chip, which runs to its end */
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, &err), 0);
	ck_assert_int_eq(ft_submit(&d, 2, 0, 0, 1, 0, &s, &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
	ft_stats(&d, &st);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_admitted], 0); /* still all in flight */
	ck_assert_int_eq(kill(w[0], SIGCONT), 0);
	for (int i = 0; i < INFLIGHT; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_msg(a[i].rc == 0, "submit %d: %d %s", i, a[i].rc, a[i].err.message);
		l.submitted++;
		ck_assert_int_eq(ft_drain(a[i].s, &l, CD_CALL_MS), CHIPD_OK);
		chipd_stream_close(a[i].s, CD_CALL_MS);
	}
	ck_assert_uint_eq(l.completed, INFLIGHT + 1);
	ft_quiesce(&d, &st, 10000);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_admitted], INFLIGHT);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, w, 2);
}
END_TEST

START_TEST(worker_killed_with_assigns_in_flight)
{
	struct ft_ledger l = {.complete = true};
	struct submitter a[INFLIGHT];
	pthread_t t[INFLIGHT];
	struct chipd_error err;
	chipd_stream *s;
	struct ft_stats st;
	struct cd d;
	uint64_t t0;
	pid_t w[3];

	start_in_flight(&d, w, a, t);
	t0 = ft_now_ms();
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	for (int i = 0; i < INFLIGHT; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_msg(a[i].rc == -EREMOTEIO, "submit %d: %d", i, a[i].rc);
		ck_assert_int_eq(a[i].err.code, CHIPD_E_WORKER_LOST);
		ck_assert_int_eq(a[i].err.chip, 0);
		ck_assert_msg(strstr(a[i].err.message, "died with the assign in flight"), "%s",
			      a[i].err.message);
		/* seen through the death, not the forward bound (2 s from the submit) */
		ck_assert_msg(a[i].done_ms - t0 < 1900, "answered %llu ms after the kill",
			      (unsigned long long)(a[i].done_ms - t0));
		l.refused++;
		l.refused_by[CHIPD_E_WORKER_LOST]++;
	}
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w[0], 10000));
	w[2] = cd_worker_pid(&d, 0);
	ck_assert(ft_pid_gone(w[0]));
	ck_assert_int_eq(ft_submit(&d, 2, 0, 0, 0, 0, &s, &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
	ft_quiesce(&d, &st, 10000);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_worker_lost], INFLIGHT);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, w, 3);
}
END_TEST

/* ---- clients' cancels in flight past the client slots ---- */

/* Chips whose requests the flood cancels, each one's worker stopped: their mailboxes
 * (64 slots each) hold more cancels than the node has requests and client slots
 * together, the table of cancels in flight before the fix; one chip more takes the
 * cancel that finds that table full */
#define FLOOD_CHIPS 5
/* The node's connections and each one's slots in that tcase: the test's and the
 * FLOOD_CHIPS flooders' (and one spare), of 2 slots each */
#define FLOOD_CLIENTS "7"
#define FLOOD_SLOTS   "2"

struct flooder {
	const char *instance;
	uint64_t id;
	atomic_bool *stop;
	/* when a flooder last had a cancel refused queue_full (ms, ft_now_ms): the
	 * clients' cancels in flight were at their bound then */
	_Atomic uint64_t *full_ms;
	int rc;	       /* chipd_connect's */
	uint64_t sent; /* cancels that reached the router (not refused by libchipd) */
};

/* Cancels @a->id again and again, each given up after 20 ms: the slot is reset and
 * the next cancel goes out in it, the one before still in flight to the stopped
 * worker (it answers none). Long enough for a loaded router to take most (a cancel
 * given up while still POSTED never reaches it: with 1 ms too few did in 20 s at load
 * 9), short enough that five flooders fill their workers' mailboxes (320 cancels, past
 * the 270 entries of the table before the fix; the 14 client slots now). */
static void *flood_main(void *arg)
{
	struct flooder *a = arg;
	struct chipd_error err;
	chipd_conn *c;

	a->rc = chipd_connect(a->instance, &c, &err);
	if (a->rc)
		return NULL;
	while (!atomic_load_explicit(a->stop, memory_order_relaxed)) {
		/* -EAGAIN: every slot of this connection still being reset: no cancel */
		int rc = chipd_cancel(c, a->id, 20, &err);

		if (rc == -EREMOTEIO && err.code == CHIPD_E_QUEUE_FULL)
			atomic_store_explicit(a->full_ms, ft_now_ms(), memory_order_relaxed);
		if (rc != -EAGAIN)
			a->sent++;
		else
			usleep(100);
	}
	chipd_close(c);
	return NULL;
}

/* Cancels request @id until it is answered ok (the cancels given up before it are
 * ended within 2 s), or not_found (one of those, taken by the worker once it ran,
 * ended it), then reads its stream to its end: cancelled. */
static void cancel_to_the_end(struct cd *d, uint64_t id, chipd_stream *s)
{
	struct chipd_token tok;
	struct chipd_error err;
	uint64_t end;
	int rc;

	for (end = ft_now_ms() + 20000;; usleep(10000)) {
		rc = chipd_cancel(d->conn, id, CD_CALL_MS, &err);
		if (rc == 0 || (rc == -EREMOTEIO && err.code == CHIPD_E_NOT_FOUND))
			break;
		ck_assert_msg(ft_now_ms() < end, "cancel %llu: %d %s", (unsigned long long)id, rc,
			      err.message);
	}
	do
		rc = chipd_stream_next(s, &tok, CD_CALL_MS, &err);
	while (rc == 0 && !tok.final);
	ck_assert_msg(rc == -EREMOTEIO && err.code == CHIPD_E_CANCELLED, "stream end: %d %s", rc,
		      err.message);
	chipd_stream_close(s, CD_CALL_MS);
}

/* Clients that give their slots up with cancels in flight to stopped workers and
 * cancel again: a further cancel, to another stopped worker, is refused queue_full
 * at once, the router waiting for no worker (before, once the table of cancels in
 * flight was full, it was made the waiting way: 2 s of serving nobody, and answered
 * worker_lost); pings are answered meanwhile, and once the workers run each request
 * cancels. */
START_TEST(cancels_past_the_client_slots_refused_not_waited)
{
	const char *const args[] = {"--chips",
				    "6",
				    "--stuck-ms",
				    "60000",
				    "--progress-ms",
				    "60000",
				    "--max-clients",
				    FLOOD_CLIENTS,
				    "--max-client-slots",
				    FLOOD_SLOTS,
				    NULL};
	struct flooder a[FLOOD_CHIPS];
	pthread_t t[FLOOD_CHIPS];
	atomic_bool stop = false;
	_Atomic uint64_t full_ms = 0;
	chipd_stream *s[FLOOD_CHIPS + 1];
	uint64_t id[FLOOD_CHIPS + 1], end, probes = 0, sent = 0;
	pid_t w[FLOOD_CHIPS + 1];
	struct chipd_token tok;
	struct chipd_error err;
	struct ft_stats st;
	struct cd d;
	int rc = 0;

	ft_start(&d, args);
	for (int i = 0; i <= FLOOD_CHIPS; i++) {
		w[i] = cd_worker_pid(&d, (uint32_t)i);
		ck_assert_int_eq(ft_submit(&d, 100000, 0, 20000, i, 0, &s[i], &err), 0);
		id[i] = chipd_stream_id(s[i]);
		ck_assert_int_eq(chipd_stream_next(s[i], &tok, CD_CALL_MS, &err), 0);
	}
	for (int i = 0; i <= FLOOD_CHIPS; i++)
		tu_sigstop(w[i]);
	for (int i = 0; i < FLOOD_CHIPS; i++) {
		a[i] = (struct flooder){
		    .instance = d.instance, .id = id[i], .stop = &stop, .full_ms = &full_ms};
		ck_assert_int_eq(pthread_create(&t[i], NULL, flood_main, &a[i]), 0);
	}
	/* the flood leaves more cancels in flight than the node has client slots within
	 * a few rounds; a cancel that finds them that many is refused at once */
	for (end = ft_now_ms() + 30000; ft_now_ms() < end; probes++) {
		/* sent just after a flooder found the bound reached: the cancels in flight
		 * end 2 s after their posts, so the table empties and refills in waves,
		 * and a probe sent as each of its forerunners ended (2 s after its own post,
		 * with the wave it joined) would meet every wave's refill */
		for (uint64_t wait = ft_now_ms() + 1000;
		     ft_now_ms() < wait &&
		     ft_now_ms() > atomic_load_explicit(&full_ms, memory_order_relaxed) + 2;)
			usleep(200);
		rc = chipd_cancel(d.conn, id[FLOOD_CHIPS], CD_CALL_MS, &err);
		if (rc == -EREMOTEIO && err.code == CHIPD_E_QUEUE_FULL)
			break;
		ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, &err), 0);
	}
	atomic_store_explicit(&stop, true, memory_order_relaxed);
	for (int i = 0; i < FLOOD_CHIPS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_int_eq(a[i].rc, 0);
		sent += a[i].sent;
	}
	ck_assert_msg(rc == -EREMOTEIO && err.code == CHIPD_E_QUEUE_FULL,
		      "no cancel refused queue_full in %llu tries (%llu flooded): last %d code %d "
		      "%s",
		      (unsigned long long)probes, (unsigned long long)sent, rc, (int)err.code,
		      err.message);
	ck_assert(err.retryable);
	ck_assert(err.has_request && err.request == id[FLOOD_CHIPS]);
	ck_assert(err.has_chip && err.chip == FLOOD_CHIPS);
	ck_assert_msg(strstr(err.message, "retry later"), "%s", err.message);
	/* the router serves meanwhile */
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, &err), 0);
	for (int i = 0; i <= FLOOD_CHIPS; i++)
		ck_assert_int_eq(kill(w[i], SIGCONT), 0);
	for (int i = 0; i <= FLOOD_CHIPS; i++)
		cancel_to_the_end(&d, id[i], s[i]);
	ft_quiesce(&d, &st, 20000);
	ck_assert_uint_eq(st.sup[PROTO_SUP_worker_deaths], 0);
	for (int i = 0; i <= FLOOD_CHIPS; i++)
		ck_assert_int_eq(cd_worker_pid(&d, (uint32_t)i), w[i]);
	ft_stop_clean(&d, w, FLOOD_CHIPS + 1);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"many_assigns_in_flight_on_one_worker", many_assigns_in_flight_on_one_worker},
	    {"worker_killed_with_assigns_in_flight", worker_killed_with_assigns_in_flight},
	    {"cancels_past_the_client_slots_refused_not_waited",
	     cancels_past_the_client_slots_refused_not_waited},
	};
	Suite *s = suite_create("inflight");
	int rc;

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 120);
	ft_set_owner();
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
