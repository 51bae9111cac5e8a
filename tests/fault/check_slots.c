/* check_slots.c - one client cannot take the client mailbox from the others
 * (--max-client-slots, docs/protocol.md §9.3): a real chipd (one sim chip) and
 * - a connected client that claims every slot through the raw mailbox API: within a
 *   bounded time another client's ping and submit go through, the hog's slots past its
 *   first 4 are taken back (FREE, next generation: its late post of one fails ESTALE,
 *   each counted in mbox_resets) and its first 4 stay CLAIMED with its pid;
 * - a connected client that posts 8 requests at once: its first 4 slots are served,
 *   the 4 past them answered queue_full, retryable, naming the bound; 4 at once all
 *   served;
 * - 8 libchipd threads of one process pinging under --max-client-slots 2, first while
 *   the process holds its 2 slots claimed by hand (never taken back), then freely:
 *   only successes and queue_full, every thread succeeds on retry, and err_queue_full
 *   counts exactly the refusals the threads saw;
 * - a connected client that posts a ping in every slot and never reads the answers:
 *   another client's ping and submit go through, the 60 past its first 4 (answered
 *   queue_full) are taken back after SUP_UNREAD_SLOT_MS (mbox_resets + 60 exactly,
 *   err_queue_full + 60), its first 4 answers stay readable;
 * - a libchipd call whose slot, past its process's bound, stands TAKEN (forged while
 *   the supervisor was stopped): taken back, the call returns -ECONNRESET, queue_full,
 *   retryable, naming max-client-slots;
 * - a slot a client writes RESET by hand, without raising attention: acknowledged
 *   (FREE, next generation, one mbox_resets).
 */
#include "fault.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* As many tickets as chipd's mailbox has slots (PROTO_NODE_SLOTS). */
#define HOG_MAX 64u
/* The supervisor's tick when the node is idle (SUP_IDLE_TICK_MS): its sweep runs at
 * least this often. */
#define IDLE_TICK_MS 250u

/* Bytes of a ping request, encoded. */
static size_t ping_msg(unsigned char *buf, size_t cap)
{
	struct proto_msg *m = malloc(sizeof(*m));
	size_t len;

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, PROTO_OP_PING);
	len = ft_encode(m, buf, cap);
	free(m);
	return len;
}

/* Reads exactly @len bytes of @fd within @ms; false on end of file or timeout. */
static bool read_all(int fd, void *buf, size_t len, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (poll(&p, 1, ms) != 1)
			return false;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	return true;
}

/* How many slots of @n's mailbox name @pid as their owner, in any state but FREE. */
static uint32_t slots_of(struct proto_node *n, pid_t pid)
{
	uint32_t held = 0;

	for (uint32_t i = 0; i < n->mbox.nslots; i++) {
		uint64_t c = mbox_ctl(&n->mbox, i);

		held += MBOX_CTL_STATE(c) != MBOX_FREE && MBOX_CTL_PID(c) == pid;
	}
	return held;
}

/* ---- a hog that claims every slot ---- */

struct hog {
	struct cd *d;
	int wfd, rfd; /* to the parent, from the parent */
};

struct hog_report {
	uint32_t count;
	struct mbox_ticket t[HOG_MAX];
};

/* What the hog saw after the parent's go: the post of its last ticket (taken back)
 * and a ping in its first (within its bound). */
struct hog_after {
	int stale_post; /* mbox_post of the last ticket */
	int first_post; /* mbox_post of a ping in the first ticket */
	int first_wait; /* its mbox_wait */
	int first_code; /* the answer: 0 ok, else its error code */
};

/* Connects, claims every slot it can and reports its tickets (in slot order, the
 * mailbox being idle: the first are the lowest numbered, those within the bound); on
 * the parent's go, posts its last ticket and a ping in its first, reports, then sleeps
 * until killed. */
static int hog_claim_all(void *arg)
{
	struct hog *h = arg;
	struct proto_node n;
	struct hog_report r = {0};
	struct hog_after a = {0};
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error pe;
	const void *ans;
	uint32_t alen, len;
	char go;

	if (!m)
		return 2;
	ft_node_attach(h->d, &n);
	/* claims in slot order: the first ones are the lowest numbered */
	atomic_store(&n.mbox.claim_cursor, 0);
	while (r.count < HOG_MAX && mbox_claim(&n.mbox, &r.t[r.count]) == 0)
		r.count++;
	if (write(h->wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		return 3;
	if (!read_all(h->rfd, &go, 1, 30000))
		return 4;
	a.stale_post = mbox_post(&n.mbox, r.t[r.count - 1], 0);
	len = (uint32_t)ping_msg(mbox_req_buf(&n.mbox, r.t[0]), mbox_req_cap(&n.mbox));
	a.first_post = mbox_post(&n.mbox, r.t[0], len);
	a.first_wait = a.first_post
			   ? -1
			   : mbox_wait(&n.mbox, r.t[0], shm_deadline_in(5000ull * SHM_NS_PER_MS));
	a.first_code = -1;
	if (a.first_wait == 0 && mbox_response(&n.mbox, r.t[0], &ans, &alen) == 0 &&
	    proto_decode_answer(PROTO_OP_PING, ans, alen, m, &pe) == 0)
		a.first_code = m->ok ? 0 : (int)m->err.code;
	if (write(h->wfd, &a, sizeof(a)) != (ssize_t)sizeof(a))
		return 5;
	free(m);
	for (;;)
		pause();
	return 0;
}

START_TEST(hog_claiming_every_slot_starves_nobody)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "4", NULL};
	struct hog_report r;
	struct hog_after a;
	struct chipd_error err;
	struct proto_node n;
	enum chipd_code code;
	chipd_stream *s;
	struct hog h;
	struct cd d;
	uint64_t resets0, t0, ctl[4];
	int up[2], down[2], rc;
	pid_t pid;
	char go = 1;

	ft_start(&d, args);
	ft_node_attach(&d, &n);
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	h = (struct hog){&d, up[1], down[0]};
	pid = tu_fork(hog_claim_all, &h);
	close(up[1]);
	close(down[0]);
	ck_assert_msg(read_all(up[0], &r, sizeof(r), 10000), "the hog did not report");
	ck_assert_uint_eq(r.count, n.mbox.nslots); /* every slot: nobody else held one */
	/* every other client is refused at first (all slots busy, a local queue_full),
	 * and served once the sweeps took the hog's slots past its bound back */
	for (t0 = ft_now_ms(); (rc = chipd_ping(d.conn, 5000, NULL, &err)) != 0;) {
		ck_assert_msg(err.code == CHIPD_E_QUEUE_FULL && err.retryable, "ping: %d %s", rc,
			      err.message);
		ck_assert_msg(ft_now_ms() - t0 < 3000, "no slot after 3 s: %s", err.message);
		usleep(2000);
	}
	ck_assert_msg(ft_submit(&d, 2, 0, 0, -1, 0, &s, &err) == 0, "submit: %s", err.message);
	ck_assert_uint_eq(cd_drain_stream(s, &code, 5000), 2);
	ck_assert_int_eq(code, CHIPD_OK);
	chipd_stream_close(s, 1000);
	/* all of them at once, each counted once; the first 4 untouched */
	for (t0 = ft_now_ms(); slots_of(&n, pid) != 4;)
		ck_assert_msg(ft_now_ms() - t0 < 2000, "the hog holds %u slots", slots_of(&n, pid));
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0 + r.count - 4);
	for (uint32_t i = 0; i < r.count; i++) {
		uint64_t c = mbox_ctl(&n.mbox, r.t[i].slot);

		if (i < 4)
			ck_assert_msg(c == MBOX_CTL(r.t[i].gen, pid, MBOX_CLAIMED),
				      "slot %u of the hog's first 4 is not its CLAIMED one",
				      r.t[i].slot);
		else
			ck_assert_msg(MBOX_CTL_GEN(c) != r.t[i].gen,
				      "slot %u past the bound still in its generation",
				      r.t[i].slot);
	}
	for (uint32_t i = 0; i < 4; i++)
		ctl[i] = mbox_ctl(&n.mbox, r.t[i].slot);
	/* within the bound, however long: several sweeps later still there */
	tu_sleep_ms(3 * IDLE_TICK_MS);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_uint_eq(mbox_ctl(&n.mbox, r.t[i].slot), ctl[i]);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0 + r.count - 4);
	/* the hog's late post of a slot taken back fails; its first slot is served */
	ck_assert_int_eq(write(down[1], &go, 1), 1);
	ck_assert_msg(read_all(up[0], &a, sizeof(a), 10000), "the hog did not report");
	ck_assert_int_eq(a.stale_post, -ESTALE);
	ck_assert_int_eq(a.first_post, 0);
	ck_assert_int_eq(a.first_wait, 0);
	ck_assert_int_eq(a.first_code, 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), 0);
	tu_kill(pid);
	close(up[0]);
	close(down[1]);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- a hog that posts past its bound ---- */

/* Connects, claims @batch slots, posts a ping in each, then waits for every answer
 * before releasing any: the first 4 (lowest numbered) must be served and the rest
 * answered queue_full naming the bound. Then the same with exactly 4. Returns 0, or
 * the step that failed. */
static int hog_post(void *arg)
{
	struct cd *d = arg;
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_node n;
	struct mbox_ticket t[8];
	struct proto_error pe;
	unsigned char msg[256];
	char want[128];
	uint32_t len = (uint32_t)ping_msg(msg, sizeof(msg));

	if (!m)
		return 2;
	ft_node_attach(d, &n);
	atomic_store(&n.mbox.claim_cursor, 0); /* claims in slot order */
	snprintf(want, sizeof(want),
		 "pid %d holds 8 mailbox slots (the per-client bound max-client-slots=4)",
		 (int)getpid());
	for (uint32_t batch = 8; batch >= 4; batch -= 4) {
		for (uint32_t i = 0; i < batch; i++)
			if (mbox_claim(&n.mbox, &t[i]))
				return 10;
		for (uint32_t i = 1; i < batch; i++)
			if (t[i].slot <= t[i - 1].slot)
				return 11; /* an idle mailbox: claimed in slot order */
		for (uint32_t i = 0; i < batch; i++) {
			memcpy(mbox_req_buf(&n.mbox, t[i]), msg, len);
			if (mbox_post(&n.mbox, t[i], len))
				return 12;
		}
		for (uint32_t i = 0; i < batch; i++) {
			const void *ans;
			uint32_t alen;

			if (mbox_wait(&n.mbox, t[i], shm_deadline_in(5000ull * SHM_NS_PER_MS)))
				return 13;
			if (mbox_response(&n.mbox, t[i], &ans, &alen) ||
			    proto_decode_answer(PROTO_OP_PING, ans, alen, m, &pe))
				return 14;
			if (i < 4 && !m->ok)
				return 20 + (int)i;
			if (i >= 4 && (m->ok || m->err.code != CHIPD_E_QUEUE_FULL ||
				       !m->err.retryable || !strstr(m->err.message, want)))
				return 30 + (int)i;
		}
		for (uint32_t i = 0; i < batch; i++)
			if (mbox_release(&n.mbox, t[i]))
				return 15;
	}
	free(m);
	return 0;
}

START_TEST(posts_past_the_bound_answered_queue_full)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "4", NULL};
	struct cd d;
	uint64_t req0, ans0, resets0;

	ft_start(&d, args);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	req0 = cd_stat(&d, "supervisor", "requests");
	ans0 = cd_stat(&d, "supervisor", "answered");
	ck_assert_int_eq(tu_wait(tu_fork(hog_post, &d), 20000), 0);
	/* 8 + 4 requests, every one answered; the 4 past the bound counted once each */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "requests"), req0 + 12);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "answered"), ans0 + 12);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), 4);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* Slot @i's control word, writable: what a hostile client forges. */
static _Atomic uint64_t *ctl_word(struct proto_node *n, uint32_t i)
{
	return &((struct mbox_slot *)(n->mbox.slots + (size_t)i * n->mbox.stride))->ctl;
}

/* ---- a hoarder that never reads its answers ---- */

struct hoard_after {
	int first_code[4]; /* the first 4 answers: 0 ok, else the error code, -1 unread */
	uint32_t reset;	   /* of the rest, how many waits saw -ECONNRESET */
};

/* Connects, claims every slot (in slot order), posts a ping in each, reports its
 * tickets and reads nothing. On the parent's go: reads the first 4 answers and waits
 * on the rest (each taken back: -ECONNRESET), reports, then sleeps until killed. */
static int hoarder(void *arg)
{
	struct hog *h = arg;
	struct proto_msg *m = malloc(sizeof(*m));
	struct hog_report r = {0};
	struct hoard_after a = {{-1, -1, -1, -1}, 0};
	struct proto_node n;
	struct proto_error pe;
	unsigned char msg[256];
	uint32_t len = (uint32_t)ping_msg(msg, sizeof(msg));
	char go;

	if (!m)
		return 2;
	ft_node_attach(h->d, &n);
	atomic_store(&n.mbox.claim_cursor, 0);
	while (r.count < HOG_MAX && mbox_claim(&n.mbox, &r.t[r.count]) == 0)
		r.count++;
	/* every claim before any post: the router sees 64 held at each take */
	for (uint32_t i = 0; i < r.count; i++) {
		memcpy(mbox_req_buf(&n.mbox, r.t[i]), msg, len);
		if (mbox_post(&n.mbox, r.t[i], len))
			return 3;
	}
	if (write(h->wfd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		return 4;
	if (!read_all(h->rfd, &go, 1, 30000))
		return 5;
	for (uint32_t i = 0; i < r.count; i++) {
		int rc = mbox_wait(&n.mbox, r.t[i], shm_deadline_in(5000ull * SHM_NS_PER_MS));
		const void *ans;
		uint32_t alen;

		if (i >= 4) {
			a.reset += rc == -ECONNRESET;
			continue;
		}
		if (rc == 0 && mbox_response(&n.mbox, r.t[i], &ans, &alen) == 0 &&
		    proto_decode_answer(PROTO_OP_PING, ans, alen, m, &pe) == 0)
			a.first_code[i] = m->ok ? 0 : (int)m->err.code;
	}
	if (write(h->wfd, &a, sizeof(a)) != (ssize_t)sizeof(a))
		return 6;
	free(m);
	for (;;)
		pause();
	return 0;
}

START_TEST(unread_answers_past_the_bound_taken_back)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "4", NULL};
	struct hog_report r;
	struct hoard_after a;
	struct chipd_error err;
	struct proto_node n;
	enum chipd_code code;
	chipd_stream *s;
	struct hog h;
	struct cd d;
	uint64_t resets0, t0;
	int up[2], down[2], rc;
	pid_t pid;
	char go = 1;

	ft_start(&d, args);
	ft_node_attach(&d, &n);
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	h = (struct hog){&d, up[1], down[0]};
	pid = tu_fork(hoarder, &h);
	close(up[1]);
	close(down[0]);
	ck_assert_msg(read_all(up[0], &r, sizeof(r), 10000), "the hoarder did not report");
	ck_assert_uint_eq(r.count, n.mbox.nslots);
	/* served once the answers past the bound, left unread, were taken back */
	for (t0 = ft_now_ms(); (rc = chipd_ping(d.conn, 5000, NULL, &err)) != 0;) {
		ck_assert_msg(err.code == CHIPD_E_QUEUE_FULL && err.retryable, "ping: %d %s", rc,
			      err.message);
		ck_assert_msg(ft_now_ms() - t0 < 5000, "no slot after 5 s: %s", err.message);
		usleep(2000);
	}
	ck_assert_msg(ft_submit(&d, 2, 0, 0, -1, 0, &s, &err) == 0, "submit: %s", err.message);
	ck_assert_uint_eq(cd_drain_stream(s, &code, 5000), 2);
	ck_assert_int_eq(code, CHIPD_OK);
	chipd_stream_close(s, 1000);
	for (t0 = ft_now_ms(); slots_of(&n, pid) != 4;)
		ck_assert_msg(ft_now_ms() - t0 < 3000, "the hoarder holds %u slots",
			      slots_of(&n, pid));
	/* the first 4 served, the 60 past them answered queue_full, then taken back */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), r.count - 4);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0 + r.count - 4);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_uint_eq(mbox_ctl(&n.mbox, r.t[i].slot),
				  MBOX_CTL(r.t[i].gen, pid, MBOX_DONE));
	ck_assert_int_eq(write(down[1], &go, 1), 1);
	ck_assert_msg(read_all(up[0], &a, sizeof(a), 10000), "the hoarder did not report");
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(a.first_code[i], 0);
	ck_assert_uint_eq(a.reset, r.count - 4);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0 + r.count - 4);
	tu_kill(pid);
	close(up[0]);
	close(down[1]);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* What a libchipd call past its process's bound returned. */
struct late_call {
	int rc;
	int code;
	bool retryable;
	char message[CHIPD_MSG_MAX];
};

/* Holds its first 4 slots claimed (within the bound), connects through libchipd and,
 * on the parent's go, pings: the ping lands past the bound. Reports what it got. */
static int late_caller(void *arg)
{
	struct hog *h = arg;
	struct late_call lc = {0};
	struct mbox_ticket t[4];
	struct chipd_error err;
	struct proto_node n;
	chipd_conn *conn;
	char go;

	ft_node_attach(h->d, &n);
	atomic_store(&n.mbox.claim_cursor, 0);
	for (int i = 0; i < 4; i++)
		if (mbox_claim(&n.mbox, &t[i]))
			return 2;
	if (chipd_connect(h->d->instance, &conn, &err))
		return 3;
	if (write(h->wfd, &go, 1) != 1 || !read_all(h->rfd, &go, 1, 30000))
		return 4;
	lc.rc = chipd_ping(conn, 10000, NULL, &err);
	lc.code = (int)err.code;
	lc.retryable = err.retryable;
	snprintf(lc.message, sizeof(lc.message), "%s", err.message);
	if (write(h->wfd, &lc, sizeof(lc)) != (ssize_t)sizeof(lc))
		return 5;
	for (;;)
		pause();
	return 0;
}

START_TEST(libchipd_call_taken_back_reports_queue_full)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "4", NULL};
	struct late_call lc;
	struct proto_node n;
	struct hog h;
	struct cd d;
	uint64_t resets0, t0;
	uint32_t slot = UINT32_MAX;
	int up[2], down[2];
	pid_t pid;
	char go = 1;

	ft_start(&d, args);
	ft_node_attach(&d, &n);
	ck_assert_int_eq(pipe(up), 0);
	ck_assert_int_eq(pipe(down), 0);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	h = (struct hog){&d, up[1], down[0]};
	pid = tu_fork(late_caller, &h);
	close(up[1]);
	close(down[0]);
	ck_assert_msg(read_all(up[0], &go, 1, 10000), "the caller did not get ready");
	/* the router must not take the ping first: stopped, the ping stays POSTED and is
	 * forged TAKEN (as a hostile client could), then left to the supervisor */
	ft_sigstop(d.pid);
	ck_assert_int_eq(write(down[1], &go, 1), 1);
	for (t0 = ft_now_ms(); slot == UINT32_MAX; usleep(1000)) {
		for (uint32_t i = 0; i < n.mbox.nslots && slot == UINT32_MAX; i++) {
			uint64_t c = mbox_ctl(&n.mbox, i);

			if (MBOX_CTL_PID(c) == pid && MBOX_CTL_STATE(c) == MBOX_POSTED &&
			    atomic_compare_exchange_strong(
				ctl_word(&n, i), &c,
				MBOX_CTL(MBOX_CTL_GEN(c), pid, MBOX_TAKEN)))
				slot = i;
		}
		if (slot == UINT32_MAX && ft_now_ms() - t0 > 5000)
			break;
	}
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	ck_assert_msg(slot != UINT32_MAX, "the ping was never posted");
	ck_assert_uint_ge(slot, 4); /* past the process's first 4 */
	ck_assert_msg(read_all(up[0], &lc, sizeof(lc), 10000), "the caller did not report");
	ck_assert_int_eq(lc.rc, -ECONNRESET);
	ck_assert_int_eq(lc.code, CHIPD_E_QUEUE_FULL);
	ck_assert(lc.retryable);
	ck_assert_msg(strstr(lc.message, "max-client-slots"), "%s", lc.message);
	/* the RESET the reaper made, acknowledged once */
	for (t0 = ft_now_ms(); ft_slot_state(&n, slot) != MBOX_FREE;)
		ck_assert_msg(ft_now_ms() - t0 < 3000, "slot %u not FREE", slot);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0 + 1);
	ck_assert_uint_eq(slots_of(&n, pid), 4);
	tu_kill(pid);
	close(up[0]);
	close(down[1]);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

START_TEST(forged_reset_is_acknowledged)
{
	static const char *const args[] = {"--chips", "1", NULL};
	struct mbox_ticket t;
	struct proto_node n;
	struct cd d;
	uint64_t resets0, c;

	ft_start(&d, args);
	ft_node_attach(&d, &n);
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	ck_assert_int_eq(mbox_claim(&n.mbox, &t), 0);
	/* RESET written by hand, no attention raised: only the reaper can see it */
	c = mbox_ctl(&n.mbox, t.slot);
	atomic_store(ctl_word(&n, t.slot), MBOX_CTL(t.gen, MBOX_CTL_PID(c), MBOX_RESET));
	ck_assert_msg(ft_slot_wait(&n, t.slot, MBOX_FREE, t.gen, 3000),
		      "the forged RESET of slot %u stuck", t.slot);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0 + 1);
	ck_assert_int_eq(chipd_ping(d.conn, 5000, NULL, NULL), 0);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

/* ---- a well-behaved client with more threads than its bound ---- */

#define PINGERS	   8
#define PINGS_EACH 50u

struct pinger {
	struct cd *d;
	/* successes, queue_full from the router, all slots busy (libchipd's own) */
	_Atomic uint32_t ok, refused, local;
	char fail[200];
};

/* Pings until PINGS_EACH succeeded; any answer but success or queue_full (retryable)
 * fails the thread; bounded by 30 s. */
static void *pinger_main(void *arg)
{
	struct pinger *p = arg;
	struct chipd_error err;
	uint64_t t0 = ft_now_ms();

	while (p->ok < PINGS_EACH) {
		int rc = chipd_ping(p->d->conn, 5000, NULL, &err);

		if (rc == 0) {
			p->ok++;
			continue;
		}
		if (ft_now_ms() - t0 > 30000) {
			snprintf(p->fail, sizeof(p->fail), "not done after 30 s");
			break;
		}
		if (rc == -EREMOTEIO && err.code == CHIPD_E_QUEUE_FULL && err.retryable &&
		    strstr(err.message, "max-client-slots=2")) {
			p->refused++;
		} else if (rc == -EAGAIN && err.code == CHIPD_E_QUEUE_FULL && err.retryable) {
			p->local++;
		} else {
			snprintf(p->fail, sizeof(p->fail), "ping: %d %s (code %d)", rc, err.message,
				 (int)err.code);
			break;
		}
		usleep(500);
	}
	return NULL;
}

START_TEST(threads_past_the_bound_get_queue_full_then_succeed)
{
	static const char *const args[] = {"--chips", "1", "--max-client-slots", "2", NULL};
	struct pinger p[PINGERS];
	pthread_t th[PINGERS];
	struct mbox_ticket own[2];
	struct proto_node n;
	struct cd d;
	uint64_t resets0, own_ctl[2], t0, refused = 0;

	ft_start(&d, args);
	ft_node_attach(&d, &n); /* the same process as d.conn: one client */
	resets0 = cd_stat(&d, "supervisor", "mbox_resets");
	/* the process's first two slots, held claimed: every ping of its threads lands
	 * past them */
	atomic_store(&n.mbox.claim_cursor, 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(mbox_claim(&n.mbox, &own[i]), 0);
		own_ctl[i] = mbox_ctl(&n.mbox, own[i].slot);
	}
	ck_assert_uint_lt(own[0].slot, own[1].slot);
	ck_assert_uint_eq(own[1].slot, 1); /* an idle mailbox: the lowest two */
	for (int i = 0; i < PINGERS; i++) {
		p[i] = (struct pinger){.d = &d};
		ck_assert_int_eq(pthread_create(&th[i], NULL, pinger_main, &p[i]), 0);
	}
	/* every thread refused while the two are held, and held they stay (within the
	 * bound, never taken back, over several sweeps) */
	for (t0 = ft_now_ms();; usleep(5000)) {
		bool all = true;

		for (int i = 0; i < PINGERS; i++)
			all = all && p[i].refused > 0;
		if (all && ft_now_ms() - t0 >= 3 * IDLE_TICK_MS)
			break;
		if (ft_now_ms() - t0 > 10000)
			break;
	}
	for (int i = 0; i < PINGERS; i++)
		ck_assert_msg(p[i].ok == 0 && p[i].refused > 0,
			      "thread %d: %u ok, %u refused while the process held its bound", i,
			      p[i].ok, p[i].refused);
	for (int i = 0; i < 2; i++) {
		ck_assert_uint_eq(mbox_ctl(&n.mbox, own[i].slot), own_ctl[i]);
		ck_assert_int_eq(mbox_give_up(&n.mbox, own[i]), 0);
	}
	for (int i = 0; i < PINGERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(!p[i].fail[0], "thread %d: %s", i, p[i].fail);
		ck_assert_uint_eq(p[i].ok, PINGS_EACH);
		refused += p[i].refused;
	}
	/* each refusal counted once; nothing taken back (nothing stood claimed past the
	 * bound: the threads post at once) */
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_queue_full"), refused);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "mbox_resets"), resets0);
	proto_node_detach(&n);
	ft_stop_clean(&d, NULL, 0);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"hog_claiming_every_slot_starves_nobody", hog_claiming_every_slot_starves_nobody},
	    {"posts_past_the_bound_answered_queue_full", posts_past_the_bound_answered_queue_full},
	    {"threads_past_the_bound_get_queue_full_then_succeed",
	     threads_past_the_bound_get_queue_full_then_succeed},
	    {"unread_answers_past_the_bound_taken_back", unread_answers_past_the_bound_taken_back},
	    {"libchipd_call_taken_back_reports_queue_full",
	     libchipd_call_taken_back_reports_queue_full},
	    {"forged_reset_is_acknowledged", forged_reset_is_acknowledged},
	};
	Suite *s = suite_create("slots");
	int rc;

	ft_set_owner();
	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 60);
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
