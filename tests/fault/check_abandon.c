/* check_abandon.c - abandoned work and a supervisor loop that never waits: a real
 * chipd (sim chips) where a worker is stuck, clients die or give up, and readers break
 * their rings.
 *
 * - many dead clients of a stuck worker: the event loop still restarts another chip's
 *   worker and heartbeats it (it closes the dead clients' rings instead of calling the
 *   stuck worker once per request);
 * - a submit whose client gave up after the router took it: the request is cancelled,
 *   its ring comes back and its id is free again; a forward that timed out leaves the
 *   worker alone;
 * - rings broken by their reader (a terminal claimed with no record, an index out of
 *   range): taken back within a bounded time, so a stop does not wait the whole grace.
 *
 * Bounds are liveness bounds, far above what a loaded machine needs, and far below
 * what the failures they catch take (the grace, or N x the forward bound). */
#include "fault.h"
#include "ring.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Submits a long synthetic stream (@device_us per step) with @id (0: chipd picks) on
 * @chip (-1: any) through @c, waiting @timeout_ms. Returns chipd_submit's result. */
static int submit_long(chipd_conn *c, uint64_t id, int chip, uint32_t timeout_ms, uint64_t *out,
		       chipd_stream **s, struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", 1u << 20}, {"device_us", 1000}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 2, .id = id, .chip = chip};

	return chipd_submit(c, &req, timeout_ms, out, s, err);
}

/* ---- a stuck worker and many dead clients ---- */

#define DEAD_CLIENTS 12

struct dead_client {
	const char *instance;
	int ready_fd, go_fd;   /* writes a byte once it read a token; leaves at go's EOF */
	int go_wfd, ready_rfd; /* the parent's ends, closed in the child */
};

/* A client that submits a long stream to chip 0, reads a token, says so, and _exits
 * when told, with its stream open. */
static int dead_client_main(void *arg)
{
	struct dead_client *a = arg;
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;
	char b = 1;

	/* only the parent may hold go's write end, or its close is no EOF */
	close(a->go_wfd);
	close(a->ready_rfd);
	if (chipd_connect(a->instance, &c, &err) ||
	    submit_long(c, 0, 0, CD_CALL_MS, &id, &s, &err) ||
	    chipd_stream_next(s, &tok, CD_CALL_MS, &err) || write(a->ready_fd, &b, 1) != 1)
		return 1;
	(void)!read(a->go_fd, &b, 1); /* EOF: the parent closed it */
	_exit(0);
}

/* Waits up to @ms for chip @chip's heartbeat time in the directory to pass @after. */
static bool heartbeat_after(struct proto_node *n, uint32_t chip, uint64_t after, unsigned ms)
{
	uint64_t end = ft_now_ms() + ms;

	do {
		if (atomic_load_explicit(&n->dir[chip].heartbeat_ns, memory_order_relaxed) > after)
			return true;
		usleep(10000);
	} while (ft_now_ms() < end);
	return false;
}

/* Chip 0's worker SIGSTOPped with DEAD_CLIENTS streams whose clients then exit: the
 * loop closes their rings (no call to the stuck worker), so chip 1 keeps its
 * heartbeats, and a SIGKILL of chip 1's worker is seen and the chip restarted. Once
 * chip 0 resumes, it cancels every closed stream and the rings come back. */
START_TEST(stuck_worker_and_dead_clients_stall_nothing)
{
	const char *const args[] = {"--chips", "2", "--heartbeat-ms", "100", "--stuck-ms",
				    "120000",  NULL};
	struct ft_ledger l = {0};
	struct dead_client a;
	struct proto_node n;
	struct ft_stats st;
	pid_t kids[DEAD_CLIENTS], w0, w1[2];
	int ready[2], go[2];
	uint64_t hb;
	struct cd d;

	ft_start(&d, args);
	ft_node_attach(&d, &n);
	w0 = cd_worker_pid(&d, 0);
	w1[0] = cd_worker_pid(&d, 1);
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	a = (struct dead_client){.instance = d.instance,
				 .ready_fd = ready[1],
				 .go_fd = go[0],
				 .go_wfd = go[1],
				 .ready_rfd = ready[0]};
	for (int i = 0; i < DEAD_CLIENTS; i++)
		kids[i] = tu_fork(dead_client_main, &a);
	close(go[0]);
	close(ready[1]);
	for (int i = 0; i < DEAD_CLIENTS; i++) {
		char b;

		ck_assert_msg(read(ready[0], &b, 1) == 1, "client %d did not start its stream", i);
	}
	close(ready[0]);
	tu_sigstop(w0);
	close(go[1]); /* every client exits with its stream open */
	for (int i = 0; i < DEAD_CLIENTS; i++)
		ck_assert_int_eq(tu_wait(kids[i], 5000), 0);

	/* the loop has seen the dead clients (a tick or two) */
	usleep(1000 * 1000);
	hb = atomic_load_explicit(&n.dir[1].heartbeat_ns, memory_order_relaxed);
	ck_assert_msg(heartbeat_after(&n, 1, hb, 5000),
		      "chip 1 got no heartbeat for 5 s while chip 0 is stuck");
	ck_assert_int_eq(kill(w1[0], SIGKILL), 0);
	ck_assert_msg(cd_wait_chip(&d, 1, CHIPD_CHIP_READY, w1[0], 8000),
		      "chip 1 not restarted within 8 s while chip 0 is stuck");
	w1[1] = cd_worker_pid(&d, 1);
	{
		struct chipd_error err;

		ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, &err), 0);
	}

	/* chip 0 resumes: it cancels each closed stream at its next round */
	ck_assert_int_eq(kill(w0, SIGCONT), 0);
	ft_quiesce(&d, &st, 20000);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_cancelled], DEAD_CLIENTS);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0); /* never killed for it */
	proto_node_detach(&n);
	ft_check_accounting(&d, &l, 0);
	{
		pid_t all[3] = {w0, w1[0], w1[1]};

		ft_stop_clean(&d, all, 3);
	}
}
END_TEST

/* ---- a submit nobody receives ---- */

#define GAVE_UP_ID 424242u

/* Resubmits GAVE_UP_ID (a short stream) once the abandoned one is gone, and reads it to
 * its end: the id is free again. */
static void resubmit_same_id(struct cd *d, struct ft_ledger *l)
{
	struct chipd_param p[] = {{"tokens", 5}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 1, .id = GAVE_UP_ID, .chip = -1};
	struct chipd_error err;
	chipd_stream *s;
	uint64_t id;
	int rc = chipd_submit(d->conn, &req, CD_CALL_MS, &id, &s, &err);

	ck_assert_msg(rc == 0, "resubmit of id %u: %d %s (%s)", GAVE_UP_ID, rc,
		      chipd_code_name(err.code), err.message);
	l->submitted++;
	ck_assert_int_eq(ft_drain(s, l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
}

/* Submits GAVE_UP_ID with a short timeout while chip 0's worker is stopped, so the
 * router holds the call; resumes the worker after @stop_ms. Returns the worker's pid. */
static pid_t give_up_on_submit(struct cd *d, unsigned stop_ms)
{
	struct ft_stats before, after;
	struct chipd_error err;
	chipd_stream *s = NULL;
	pid_t w = cd_worker_pid(d, 0);
	uint64_t id, t0;
	int rc;

	ft_stats(d, &before);
	tu_sigstop(w);
	t0 = ft_now_ms();
	rc = submit_long(d->conn, GAVE_UP_ID, -1, 300, &id, &s, &err);
	ck_assert_msg(rc == -ETIMEDOUT, "submit to a stopped worker: %d (%s)", rc, err.message);
	ft_stats(d, &after);
	/* the router took it (it forwards to the stopped worker): the client gave up on a
	 * request the server side holds */
	ck_assert_uint_gt(after.sup[PROTO_SUP_requests], before.sup[PROTO_SUP_requests]);
	while (ft_now_ms() < t0 + stop_ms)
		usleep(10000);
	ck_assert_msg(kill(w, SIGCONT) == 0, "worker pid %d is gone: killed for a slow assign",
		      (int)w);
	return w;
}

/* The worker answers the assign after the client gave up: the answer is discarded,
 * the request (admitted) is cancelled and counted in err_cancelled, its ring and its
 * id come back. */
START_TEST(submit_answer_discarded_cancels_the_request)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct ft_ledger l = {.complete = true};
	struct ft_stats st;
	struct cd d;
	pid_t w;

	ft_start(&d, args);
	w = give_up_on_submit(&d, 600); /* well inside the router's 2 s forward bound */
	ft_quiesce(&d, &st, 15000);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_admitted], 1);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_cancelled], 1);
	/* the given-up submit, in the ledger as chipd counts it: a request whose stream
	 * ended cancelled (err_cancelled 1: its end counted once, though its client never
	 * saw the stream) */
	l.submitted++;
	l.ended[CHIPD_E_CANCELLED]++;
	resubmit_same_id(&d, &l);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, &w, 1);
}
END_TEST

/* The worker answers nothing within the router's forward bound: the call is given up,
 * the worker is not killed for it (its heartbeat judges it, and a stop shorter than
 * --stuck-ms is no fault), and the request it never saw leaves nothing held. */
START_TEST(forward_timeout_gives_up_the_call_not_the_worker)
{
	const char *const args[] = {"--chips", "1", "--stuck-ms", "8000", NULL};
	/* not complete: the router refused the given-up submit worker_lost ("did not
	 * answer"), counted in err_worker_lost, which its client never saw */
	struct ft_ledger l = {0};
	struct ft_stats st;
	struct cd d;
	pid_t w;

	ft_start(&d, args);
	w = give_up_on_submit(&d, 3000); /* past the 2 s forward bound, not --stuck-ms */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, 0, 5000));
	ck_assert_int_eq(cd_worker_pid(&d, 0), w);
	/* the sweep takes the ring back after the stuck bound (nothing produced) */
	ft_quiesce(&d, &st, 40000);
	ck_assert_uint_eq(st.sup[PROTO_SUP_worker_deaths], 0);
	ck_assert_uint_eq(st.sup[PROTO_SUP_err_worker_lost], 1);
	resubmit_same_id(&d, &l);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, &w, 1);
}
END_TEST

/* ---- rings broken by their reader ---- */

/* The ring of @n that carries request @id. */
static void ring_of_request(struct proto_node *n, uint64_t id, struct ring *r)
{
	for (uint32_t i = 0; i < n->desc->nrings; i++) {
		ck_assert_int_eq(proto_node_ring(n, i, r), 0);
		if (atomic_load_explicit(&r->hdr->request_id, memory_order_relaxed) == id)
			return;
	}
	ck_abort_msg("no ring carries request %llu", (unsigned long long)id);
}

/* One stream's reader claims the terminal without a record, another moves its tail
 * past head: no producer can end either stream. A stop with a 60 s grace must not
 * wait for them: the supervisor takes both rings back within a bounded time. */
START_TEST(broken_rings_do_not_hold_the_stop)
{
	const char *const args[] = {"--chips", "1", "--grace-ms", "60000", NULL};
	struct chipd_token tok;
	struct chipd_error err;
	chipd_stream *s[2];
	struct proto_node n;
	struct ft_stats st;
	struct ring r;
	uint64_t id[2], head;
	struct cd d;
	pid_t w;
	int rc;

	ft_start(&d, args);
	w = cd_worker_pid(&d, 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(submit_long(d.conn, 0, -1, CD_CALL_MS, &id[i], &s[i], &err), 0);
		ck_assert_int_eq(chipd_stream_next(s[i], &tok, CD_CALL_MS, &err), 0);
	}
	ft_node_attach(&d, &n);
	ring_of_request(&n, id[0], &r);
	/* the terminal claim is in the read-only node region (layout 3): only root can
	 * fake it; otherwise this stream's reader breaks its tail as well */
	if (cd_node_make_writable(&n)) {
		atomic_store_explicit(&r.hdr->terminal, 1, memory_order_release);
	} else {
		head = atomic_load_explicit(&r.hdr->head, memory_order_acquire);
		atomic_store_explicit(&r.cons->tail, head + 9, memory_order_release);
	}
	ring_of_request(&n, id[1], &r);
	head = atomic_load_explicit(&r.hdr->head, memory_order_acquire);
	atomic_store_explicit(&r.cons->tail, head + 7, memory_order_release);
	proto_node_detach(&n);
	/* the worker's push into the ring with a claimed terminal fails, and so does the
	 * terminal record of the request it fails: counted, not dropped (the other ring's
	 * pushes may still land, through the producer's cached tail) */
	for (uint64_t end = ft_now_ms() + 10000;; usleep(10000)) {
		ft_stats(&d, &st);
		if (st.chip[0][PROTO_WRK_terminal_push_failed] >= 1 || ft_now_ms() > end)
			break;
	}
	ck_assert_uint_ge(st.chip[0][PROTO_WRK_terminal_push_failed], 1);
	for (int i = 0; i < 2; i++)
		chipd_stream_close(s[i], 0);
	rc = cd_stop(&d, SIGTERM, 30000);
	ck_assert_msg(rc == 0, "chipd exit status %d (-1: still draining after 30 s)", rc);
	ck_assert(!cd_region_exists(&d));
	ck_assert(ft_pid_gone(w));
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"stuck_worker_and_dead_clients_stall_nothing",
	     stuck_worker_and_dead_clients_stall_nothing},
	    {"submit_answer_discarded_cancels_the_request",
	     submit_answer_discarded_cancels_the_request},
	    {"forward_timeout_gives_up_the_call_not_the_worker",
	     forward_timeout_gives_up_the_call_not_the_worker},
	    {"broken_rings_do_not_hold_the_stop", broken_rings_do_not_hold_the_stop},
	};
	Suite *s = suite_create("abandon");
	int rc;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);

		/* each tcase's own bounds sum to well under this on a loaded machine, and
		 * the failures they catch (a whole 60 s grace) to more */
		tcase_set_timeout(tc, 180);
		tcase_add_test(tc, cases[i].test);
		suite_add_tcase(s, tc);
	}
	ft_set_owner();
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
