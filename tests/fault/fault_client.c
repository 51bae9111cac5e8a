/* fault_client.c - rows of the fault matrix that hit a client: SIGKILL in each
 * mailbox state and while reading a stream, SIGSTOP, and a call's deadline expiring
 * in each mailbox state.
 *
 * How a state is held from outside: CLAIMED and DONE the raw child holds by itself
 * (claim and stop; wait for the answer and do not release). POSTED needs the router
 * not to take the slot: chipd (only the supervisor process; its workers run on) is
 * SIGSTOPped while the child posts. TAKEN needs the router to hold the request: a
 * submit to a SIGSTOPped worker keeps the router in its forward (SUP_FORWARD_MS, 2 s)
 * with the client's slot TAKEN. */
#include "fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const one_chip[] = {"--chips", "1", NULL};

/* The bytes of a ping and of a synthetic submit, encoded by the library. */
static size_t ping_msg(unsigned char *buf, size_t cap)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	size_t len;

	ck_assert_ptr_nonnull(m);
	m->op = PROTO_OP_PING;
	len = ft_encode(m, buf, cap);
	free(m);
	return len;
}

static size_t submit_msg(unsigned char *buf, size_t cap, uint32_t tokens)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	size_t len;

	ck_assert_ptr_nonnull(m);
	m->op = PROTO_OP_SUBMIT;
	strcpy(m->wl, "synthetic");
	m->nparams = 1;
	strcpy(m->params[0].key, "tokens");
	m->params[0].value = tokens;
	m->chip = -1;
	len = ft_encode(m, buf, cap);
	free(m);
	return len;
}

static void ping_ok(struct cd *d)
{
	struct chipd_error err;
	int rc = chipd_ping(d->conn, CD_CALL_MS, NULL, &err);

	ck_assert_msg(rc == 0, "ping after the fault: %d %s", rc, err.message);
}

/* Kills the raw client @r and waits until its slot is FREE in a later generation. */
static void kill_and_expect_free(struct ft_raw *r, struct proto_node *n, unsigned ms)
{
	tu_kill(r->pid);
	ck_assert_msg(ft_slot_wait(n, r->slot, MBOX_FREE, r->gen, ms),
		      "slot %u still in state %d %u ms after its owner died", r->slot,
		      ft_slot_state(n, r->slot), ms);
}

START_TEST(client_killed_while_claimed)
{
	unsigned char msg[256];
	struct ft_ledger l = {0};
	struct proto_node n;
	struct ft_raw r;
	struct cd d;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	ft_raw_start(&r, &d, FT_RAW_CLAIMED, msg, (uint32_t)ping_msg(msg, sizeof(msg)), 5000);
	ck_assert_int_eq(ft_slot_state(r.view, r.slot), MBOX_CLAIMED);
	kill_and_expect_free(&r, r.view, 3000); /* the event loop's tick reaps it */
	ping_ok(&d);
	ft_raw_end(&r);
	proto_node_detach(&n);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

START_TEST(client_killed_while_posted)
{
	unsigned char msg[256];
	struct ft_ledger l = {0};
	struct proto_node n;
	struct ft_raw r;
	struct cd d;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	/* the router cannot take it: stopped by the raw client once it said hello */
	ft_raw_start_sup_stopped(&r, &d, FT_RAW_POSTED, msg, (uint32_t)ping_msg(msg, sizeof(msg)),
				 5000);
	ck_assert_int_eq(ft_slot_state(r.view, r.slot), MBOX_POSTED);
	tu_kill(r.pid);
	ck_assert_int_eq(ft_slot_state(r.view, r.slot), MBOX_POSTED);
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	ck_assert_msg(ft_slot_wait(r.view, r.slot, MBOX_FREE, r.gen, 3000), "slot %u in state %d",
		      r.slot, ft_slot_state(r.view, r.slot));
	ping_ok(&d);
	ft_raw_end(&r);
	proto_node_detach(&n);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A chipd of one chip whose worker is stopped, and a raw child whose submit (in @msg)
 * the router holds TAKEN in its forward to that worker. Returns the worker's pid. */
static pid_t submit_held_taken(struct cd *d, struct proto_node *n, struct ft_raw *r,
			       unsigned char *msg, size_t cap)
{
	pid_t w;

	ft_start(d, one_chip);
	ft_node_attach(d, n);
	w = cd_worker_pid(d, 0);
	tu_sigstop(w);
	ft_raw_start(r, d, FT_RAW_TAKEN, msg, (uint32_t)submit_msg(msg, cap, 5), 5000);
	ck_assert_msg(ft_slot_wait(r->view, r->slot, MBOX_TAKEN, 0, 3000), "router did not take it");
	return w;
}

/* A client that takes its TAKEN slot back by hand (the control word rewritten FREE in the
 * next generation, as a release would, while the router holds the submit in its forward
 * to a stopped worker): the router's answer finds the slot gone and discards it, and the
 * discarded answer is counted like any other (requests - answered <= mbox_resets, protocol.md
 * 8.1), though no reset was ever acknowledged nor the slot reaped. */
START_TEST(client_frees_its_taken_slot_by_hand)
{
	unsigned char msg[256];
	struct ft_ledger l = {0};
	struct proto_node n;
	struct ft_raw r;
	struct cd d;
	uint64_t c;
	pid_t w[2];

	w[0] = submit_held_taken(&d, &n, &r, msg, sizeof(msg));
	c = mbox_ctl(&r.view->mbox, r.slot);
	ck_assert_int_eq(MBOX_CTL_STATE(c), MBOX_TAKEN);
	{
		struct mbox_slot *slot = (struct mbox_slot *)(void *)(r.view->mbox.slots +
								     (size_t)r.slot *
									 r.view->mbox.stride);

		ck_assert(atomic_compare_exchange_strong(
		    &slot->ctl, &c, MBOX_CTL(MBOX_CTL_GEN(c) + 1, 0, MBOX_FREE)));
	}
	/* the forward is given up, the stopped worker killed by the heartbeat and restarted */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w[0], 20000));
	w[1] = cd_worker_pid(&d, 0);
	tu_kill(r.pid);
	ft_raw_end(&r);
	proto_node_detach(&n);
	ping_ok(&d);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, w, 2);
}
END_TEST

/* Raw submit to a stopped worker: the router holds the slot TAKEN in its forward;
 * the client dies; the reaper turns the slot RESET, the router's answer finds RESET
 * and acknowledges it (FREE); the forward is given up (never the worker), the heartbeat
 * kills the stuck worker after --stuck-ms, and the request (admitted by nobody) ends
 * worker_lost with no reader; the chip restarts. */
START_TEST(client_killed_while_taken)
{
	unsigned char msg[256];
	struct ft_ledger l = {0};
	struct ft_stats st;
	struct proto_node n;
	struct ft_raw r;
	struct cd d;
	pid_t w[2];

	w[0] = submit_held_taken(&d, &n, &r, msg, sizeof(msg));
	kill_and_expect_free(&r, r.view, 6000);
	/* the stopped worker misses its heartbeats and is restarted: a fresh-clone CI beside
	 * three ctest -j4 runs once took longer than 10 s */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w[0], 20000));
	w[1] = cd_worker_pid(&d, 0);
	ping_ok(&d);
	ft_stats(&d, &st);
	ck_assert_uint_ge(st.sup[PROTO_SUP_mbox_resets], 1);
	ft_raw_end(&r);
	proto_node_detach(&n);
	{
		chipd_stream *s;
		struct chipd_error err;

		ck_assert_int_eq(ft_submit(&d, 5, 0, 0, -1, 0, &s, &err), 0);
		l.submitted++;
		ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
		chipd_stream_close(s, CD_CALL_MS);
	}
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, w, 2);
}
END_TEST

START_TEST(client_killed_while_done)
{
	unsigned char msg[256];
	struct ft_ledger l = {0};
	struct proto_node n;
	struct ft_raw r;
	struct cd d;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	ft_raw_start(&r, &d, FT_RAW_DONE, msg, (uint32_t)ping_msg(msg, sizeof(msg)), 5000);
	ck_assert_int_eq(ft_slot_state(r.view, r.slot), MBOX_DONE);
	kill_and_expect_free(&r, r.view, 3000);
	ping_ok(&d);
	ft_raw_end(&r);
	proto_node_detach(&n);
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A libchipd client that dies while reading a long stream: its request is cancelled
 * (once), its ring returns to the pool, the server keeps serving. */
static int reading_client(void *arg)
{
	struct cd *d = arg;
	struct chipd_param p[] = {{"tokens", 1 << 20}, {"device_us", 200}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	if (chipd_connect(d->instance, &c, &err) ||
	    chipd_submit(c, &req, CD_CALL_MS, &id, &s, &err))
		return 1;
	for (int i = 0; i < 10; i++)
		if (chipd_stream_next(s, &tok, CD_CALL_MS, &err))
			return 2;
	for (;;)
		chipd_stream_next(s, &tok, CD_CALL_MS, &err); /* reading when killed */
}

START_TEST(client_killed_while_reading)
{
	struct ft_ledger l = {0};
	struct ft_stats st;
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;
	pid_t pid;

	ft_start(&d, one_chip);
	pid = tu_fork(reading_client, &d);
	for (uint64_t end = ft_now_ms() + 5000; ft_now_ms() < end; usleep(5000)) {
		ft_stats(&d, &st);
		if (st.chip[0][PROTO_WRK_tokens] >= 10)
			break;
	}
	ck_assert_uint_ge(st.chip[0][PROTO_WRK_tokens], 10);
	tu_kill(pid);
	ft_quiesce(&d, &st, 5000);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_cancelled], 1);
	ck_assert_uint_eq(st.sup[PROTO_SUP_rings_in_use], 0);
	ck_assert_int_eq(ft_submit(&d, 5, 0, 0, -1, 0, &s, &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
	/* the dead client's request ended (cancelled) on the worker: balance it */
	l.submitted++;
	l.ended[CHIPD_E_CANCELLED]++;
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A stopped client is alive: the design reclaims nothing of it. Its request pauses
 * once its ring is full (RING_AHEAD tokens ahead), the worker keeps serving others; when
 * it resumes it reads the whole stream in order; killed instead, it is reclaimed as
 * any dead client.
 *
 * The row waits for events (a counter reaching a value, the child stopping or
 * exiting), each bounded by progress rather than by a total: every token is a step
 * and a few hand-offs between threads, which a loaded machine slows down by two
 * orders of magnitude, so only a stream that stops moving fails the row. */
#define RING_AHEAD (PROTO_NODE_RING_CAPACITY - 1) /* one record stays for the terminal */
/* Two rings' worth: the stream pauses on a full ring and must resume to end. */
#define SLOW_TOKENS (2 * PROTO_NODE_RING_CAPACITY)
/* No token for this long: the stream is stuck, not slow (a token takes microseconds
 * idle, a few milliseconds on a loaded machine). */
#define STALL_MS 10000u

static int slow_client(void *arg)
{
	struct cd *d = arg;
	struct chipd_param p[] = {{"tokens", SLOW_TOKENS}, {"device_us", 0}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	struct chipd_token tok;
	struct chipd_error err;
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;
	uint32_t n = 0;

	if (chipd_connect(d->instance, &c, &err) ||
	    chipd_submit(c, &req, CD_CALL_MS, &id, &s, &err))
		return 1;
	raise(SIGSTOP); /* the test continues it */
	for (;;) {
		int rc = chipd_stream_next(s, &tok, CD_CALL_MS, &err);

		if (rc)
			return 2;
		if (tok.seq != n++)
			return 3;
		if (tok.final)
			return n == SLOW_TOKENS ? 0 : 4;
	}
}

static pid_t wait_stopped(pid_t pid)
{
	int status;

	ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
	ck_assert(WIFSTOPPED(status));
	return pid;
}

/* Progress of chip 0 (its tokens counter) for a wait bounded by progress: fails the
 * tcase when the counter has not moved for STALL_MS. */
struct progress {
	uint64_t tokens, stall_end;
};

static void progress_check(struct progress *p, const struct ft_stats *st, const char *what)
{
	uint64_t now = ft_now_ms(), tokens = st->chip[0][PROTO_WRK_tokens];

	if (p->stall_end == 0 || tokens != p->tokens) {
		p->tokens = tokens;
		p->stall_end = now + STALL_MS;
	}
	ck_assert_msg(now < p->stall_end,
		      "%s: no token for %u ms: chip 0 tokens %llu completed %llu active %llu, "
		      "rings_in_use %llu",
		      what, STALL_MS, (unsigned long long)tokens,
		      (unsigned long long)st->chip[0][PROTO_WRK_completed],
		      (unsigned long long)st->chip[0][PROTO_WRK_active],
		      (unsigned long long)st->sup[PROTO_SUP_rings_in_use]);
}

/* Waits until chip 0 has pushed at least @tokens tokens and completed @completed
 * requests, and holds one request (active 1: the paused one, once O has retired the
 * others) on one ring (rings_in_use 1: nothing reclaimed; the supervisor samples this
 * gauge on its tick, so it is waited for too). Returns the snapshot in @st. */
static void wait_paused(struct cd *d, struct ft_stats *st, uint64_t tokens, uint64_t completed)
{
	struct progress p = {0};

	for (;;) {
		ft_stats(d, st);
		if (st->chip[0][PROTO_WRK_tokens] >= tokens &&
		    st->chip[0][PROTO_WRK_completed] >= completed &&
		    st->chip[0][PROTO_WRK_active] == 1 && st->sup[PROTO_SUP_rings_in_use] == 1)
			return;
		progress_check(&p, st, "waiting for the paused request");
		usleep(5000);
	}
}

/* Waits for @pid to exit while chip 0 keeps producing; returns its exit status (as
 * tu_wait). */
static int wait_exit_with_progress(struct cd *d, pid_t pid)
{
	struct progress p = {0};
	struct ft_stats st;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		ck_assert_int_ge(r, 0);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		ft_stats(d, &st);
		progress_check(&p, &st, "the resumed client"); /* the child dies with us */
		usleep(5000);
	}
}

START_TEST(client_stopped_pauses_only_itself)
{
	struct ft_ledger l = {0};
	struct ft_stats st;
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;
	pid_t pid;

	ft_start(&d, one_chip);
	pid = wait_stopped(tu_fork(slow_client, &d));
	/* its ring fills up, then its request pauses: no token beyond the ring */
	wait_paused(&d, &st, RING_AHEAD, 0);
	ck_assert_msg(st.chip[0][PROTO_WRK_tokens] == RING_AHEAD,
		      "%llu tokens pushed into a %u-record ring",
		      (unsigned long long)st.chip[0][PROTO_WRK_tokens], PROTO_NODE_RING_CAPACITY);
	/* others proceed meanwhile */
	ck_assert_int_eq(ft_submit(&d, 50, 0, 0, -1, 0, &s, &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_OK);
	chipd_stream_close(s, CD_CALL_MS);
	/* ... and the paused request did not move while the other ran to its end */
	wait_paused(&d, &st, RING_AHEAD + 50, 1);
	ck_assert_msg(st.chip[0][PROTO_WRK_tokens] == RING_AHEAD + 50,
		      "%llu tokens: the stopped client's request advanced past its full ring",
		      (unsigned long long)st.chip[0][PROTO_WRK_tokens]);
	ck_assert_int_eq(kill(pid, SIGCONT), 0);
	/* it reads SLOW_TOKENS in order, then final */
	ck_assert_int_eq(wait_exit_with_progress(&d, pid), 0);
	l.submitted++;
	l.completed++;
	l.tokens += SLOW_TOKENS;
	ft_check_accounting(&d, &l, 0);
	/* stopped again and killed: reclaimed like any dead client */
	pid = wait_stopped(tu_fork(slow_client, &d));
	tu_kill(pid);
	ft_quiesce(&d, &st, 30000);
	ck_assert_uint_eq(st.chip[0][PROTO_WRK_cancelled], 1);
	l.submitted++;
	l.ended[CHIPD_E_CANCELLED]++;
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* A call's deadline expiring in each mailbox state: the slot goes back to FREE
 * (directly, or through RESET and the router's acknowledgement), the call reports
 * -ETIMEDOUT, the next call works. */
START_TEST(call_deadline_in_every_state)
{
	unsigned char msg[256];
	struct ft_ledger l = {0};
	struct proto_node n;
	struct mbox_ticket t;
	struct chipd_error err;
	struct ft_stats st0, st;
	chipd_stream *s;
	uint32_t len;
	pid_t w[2];
	struct cd d;
	int rc;

	ft_start(&d, one_chip);
	ft_node_attach(&d, &n);
	len = (uint32_t)ping_msg(msg, sizeof(msg));
	/* CLAIMED: give up before posting */
	ck_assert_int_eq(mbox_claim(&n.mbox, &t), 0);
	ck_assert_int_eq(mbox_give_up(&n.mbox, t), 0);
	ck_assert(ft_slot_wait(&n, t.slot, MBOX_FREE, t.gen, 0));
	/* POSTED: the router is stopped; libchipd's ping times out and gives up */
	tu_sigstop(d.pid);
	rc = chipd_ping(d.conn, 200, NULL, &err);
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	ck_assert_msg(rc == -ETIMEDOUT, "ping to a stopped router: %d (%s)", rc, strerror(-rc));
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ping_ok(&d);
	/* TAKEN: a submit held in the router's forward to a stopped worker */
	ft_stats(&d, &st0);
	w[0] = cd_worker_pid(&d, 0);
	tu_sigstop(w[0]);
	{
		struct chipd_param p[] = {{"tokens", 5}};
		struct chipd_request req = {
		    .workload = "synthetic", .params = p, .nparams = 1, .chip = -1};
		uint64_t id;

		rc = chipd_submit(d.conn, &req, 300, &id, &s, &err);
	}
	ck_assert_msg(rc == -ETIMEDOUT, "submit to a stopped worker: %d (%s)", rc, strerror(-rc));
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	/* the reset is acknowledged once the router's forward gives up */
	for (uint64_t end = ft_now_ms() + 6000; ft_now_ms() < end; usleep(10000)) {
		ft_stats(&d, &st);
		if (st.sup[PROTO_SUP_mbox_resets] > st0.sup[PROTO_SUP_mbox_resets])
			break;
	}
	ck_assert_uint_gt(st.sup[PROTO_SUP_mbox_resets], st0.sup[PROTO_SUP_mbox_resets]);
	for (uint32_t i = 0; i < n.mbox.nslots; i++)
		ck_assert_msg(ft_slot_wait(&n, i, MBOX_FREE, UINT32_MAX, 3000),
			      "slot %u not FREE: state %d", i, ft_slot_state(&n, i));
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w[0], 10000));
	w[1] = cd_worker_pid(&d, 0);
	ping_ok(&d);
	/* DONE: the answer is there, the caller gives up instead of reading it */
	ck_assert_int_eq(mbox_claim(&n.mbox, &t), 0);
	memcpy(mbox_req_buf(&n.mbox, t), msg, len);
	ck_assert_int_eq(mbox_post(&n.mbox, t, len), 0);
	ck_assert_int_eq(mbox_wait(&n.mbox, t, shm_now_ns() + 5000ull * 1000000u), 0);
	ck_assert_int_eq(mbox_give_up(&n.mbox, t), 0);
	ck_assert(ft_slot_wait(&n, t.slot, MBOX_FREE, t.gen, 0));
	/* every slot is usable: fill them all with calls */
	for (uint32_t i = 0; i < n.mbox.nslots; i++)
		ping_ok(&d);
	proto_node_detach(&n);
	/* a request's own deadline: the stream ends timeout, once */
	ck_assert_int_eq(ft_submit(&d, 1u << 20, 0, 1000, -1, 200, &s, &err), 0);
	l.submitted++;
	ck_assert_int_eq(ft_drain(s, &l, CD_CALL_MS), CHIPD_E_TIMEOUT);
	chipd_stream_close(s, CD_CALL_MS);
	ft_check_accounting(&d, &l, 0);
	/* Each request once. Only the TAKEN submit's answer was discarded (its client
	 * gave up first: one reset, acknowledged by that answer); the router had
	 * refused it worker_lost, and its stream, ended by the stopped worker's death,
	 * is not counted again. The deadline stream ended timeout. The slots given up
	 * CLAIMED, POSTED and DONE were freed by their client: no reset. */
	ft_stats(&d, &st);
	ck_assert_uint_eq(st.sup[PROTO_SUP_requests] - st.sup[PROTO_SUP_answered], 1);
	ck_assert_uint_eq(st.sup[PROTO_SUP_mbox_resets], 1);
	for (int c = 1; c < CHIPD_NCODES; c++)
		ck_assert_msg(st.sup[PROTO_SUP_err_bad_request + c - 1] ==
				  (c == CHIPD_E_WORKER_LOST || c == CHIPD_E_TIMEOUT),
			      "err_%s: %llu", chipd_code_name((enum chipd_code)c),
			      (unsigned long long)st.sup[PROTO_SUP_err_bad_request + c - 1]);
	ft_stop_clean(&d, w, 2);
}
END_TEST

/* A request whose deadline passes while its steps run (1 s each, two built ahead
 * before the deadline of 200 ms): it ends timeout at the end of its running step,
 * with no token; its built step's token, FINAL included, is never published (it
 * completed after 1 and 2 s before). */
START_TEST(deadline_passes_while_steps_run)
{
	struct ft_ledger l = {0};
	chipd_stream *s = NULL;
	struct chipd_error err;
	struct cd d;

	ft_start(&d, one_chip);
	for (uint32_t tokens = 1; tokens <= 2; tokens++) {
		ck_assert_int_eq(ft_submit(&d, tokens, 0, 1000000, -1, 200, &s, &err), 0);
		l.submitted++;
		ck_assert_int_eq(ft_drain(s, &l, 10000), CHIPD_E_TIMEOUT);
		ck_assert_uint_eq(l.completed, 0);
		chipd_stream_close(s, CD_CALL_MS);
	}
	ft_check_accounting(&d, &l, 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

void ft_add_client_cases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"client_killed_while_claimed", client_killed_while_claimed},
	    {"client_killed_while_posted", client_killed_while_posted},
	    {"client_killed_while_taken", client_killed_while_taken},
	    {"client_frees_its_taken_slot_by_hand", client_frees_its_taken_slot_by_hand},
	    {"client_killed_while_done", client_killed_while_done},
	    {"client_killed_while_reading", client_killed_while_reading},
	    {"client_stopped_pauses_only_itself", client_stopped_pauses_only_itself},
	    {"call_deadline_in_every_state", call_deadline_in_every_state},
	    {"deadline_passes_while_steps_run", deadline_passes_while_steps_run},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
