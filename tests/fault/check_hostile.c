/* check_hostile.c - one stray or hostile write into the node's shared memory does not
 * take the node down. Since node layout 4 a client can write only
 * its own client region (the mailbox header's bitmap_words and server_pid cases); the
 * corruptions of the node region (descriptor, ring header, gauge) are made as root
 * through a read-write remapping, a writer no client can be, and skipped otherwise. Each tcase starts chipd with 2 sim chips and a good client streaming
 * synthetic requests (its own process, its own connection, every token checked against
 * the workload's reference), applies one corruption, and then asserts:
 *
 * - the supervisor and both workers are the same processes (no exit, same pids,
 *   worker_deaths 0) and ping answers;
 * - the good client keeps completing requests, every one with the right tokens;
 * - a new client can connect and is served: at once where the corruption leaves what
 *   an attach validates alone, else after the test restores those bytes (a new
 *   client is refused them, cleanly, as protocol.md 2.3 and 8.1 say);
 * - chipd stops cleanly (exit 0, nothing left behind).
 *
 * The corruptions: the mailbox header's bitmap_words; the node descriptor's nrings,
 * rings_offset and ring_stride; the magic of the client's own ring; a ring's capacity
 * with a descriptor that makes it look as if it fits; a worker gauge above
 * UINT32_MAX; the mailbox header's server_pid; a client's tails moved back after the ends of
 * its streams (the per-client ring bound); a ring broken whenever the supervisor looks while
 * the worker builds (a late token after the take-back); a reader reopened after its client hung
 * up (its region must still come back); a reader's tail moved past head after its stream ended
 * FINAL (the request is counted by its record, not as the broken ring's internal end).
 * docs/reliability.md lists them in the fault matrix. */
#include "client_internal.h"
#include "hostile.h"
#include "ring.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NCHIPS 2

/* chipd with NCHIPS chips and a good client streaming to @chip (-1: both in turn) that
 * completed two requests. */
static void hostile_start(struct cd *d, struct hs_node *node, struct hs_client *c, int chip)
{
	const char *const args[] = {"--chips", "2", NULL};

	ft_start(d, args);
	hs_node_record(d, node, NCHIPS);
	hs_client_start(c, d, chip, 0);
	hs_client_progress(c, node, 2, 10000, "before the corruption");
}

/* After the corruption (@why): the good client completes more requests, the node runs
 * the same processes, and everything the good client did completed. */
static void hostile_survived(struct cd *d, const struct hs_node *node, struct hs_client *c,
			     const char *why)
{
	const struct hs_ledger *l;

	hs_client_progress(c, node, 3, 10000, why);
	hs_node_check(d, node, true, why);
	l = hs_client_stop(c);
	hs_ledger_print(l, why);
	hs_ledger_check_clean(l, why);
	hs_client_free(c);
}

/* A new client is refused the region with @expect (the corruption is in what an
 * attach validates), and nothing else happens. */
static void new_client_refused(struct cd *d, int expect)
{
	struct chipd_error err;
	chipd_conn *conn = NULL;
	int rc = chipd_connect(d->instance, &conn, &err);

	if (rc == 0)
		chipd_close(conn);
	ck_assert_msg(rc == expect, "a new client's connect: %d (%s), expected %d", rc, err.message,
		      expect);
}

/* A new client is served on both chips, and chipd stops cleanly. */
static void hostile_end(struct cd *d, struct hs_view *v, const struct hs_node *node)
{
	hs_fresh_client(d, NCHIPS);
	hs_view_detach(v);
	ft_stop_clean(d, node->worker, NCHIPS);
}

/* The descriptor is what an attach validates first (protocol.md 8.1): a new client is
 * refused it while its ring geometry is rewritten, and needs it back. */
static void ring_geometry_restored(struct cd *d, struct hs_view *v)
{
	struct proto_node_desc *desc = v->n.desc; /* the shared one */

	new_client_refused(d, -EMSGSIZE);
	hs_put32(&desc->nrings, v->desc.nrings);
	hs_put32(&desc->rings_offset, v->desc.rings_offset);
	hs_put32(&desc->ring_stride, v->desc.ring_stride);
}

/* The mailbox header says 1000000 bitmap words (the mailbox has 1) and the doorbell
 * rings: the router scans the words it laid out, never the header's count. */
START_TEST(mailbox_bitmap_words_huge)
{
	struct hs_client c;
	struct hs_node node;
	struct hs_view v;
	struct cd d;
	uint32_t words;

	hostile_start(&d, &node, &c, -1);
	hs_view_attach(&d, &v);
	words = v.n.mbox.hdr->bitmap_words;
	hs_put32(&v.n.mbox.hdr->bitmap_words, 1000000);
	for (int i = 0; i < 20; i++) {
		/* a spurious attention bit (harmless by protocol.md 4.6) makes the router scan */
		atomic_fetch_or_explicit(&v.n.mbox.attention[0], 1, memory_order_seq_cst);
		shm_wake_all(&v.n.mbox.hdr->doorbell);
		tu_sleep_ms(10);
	}
	hostile_survived(&d, &node, &c, "bitmap_words 1000000, doorbell rung");
	/* the mailbox was the hostile client's own (node layout 4): a new client gets a
	 * region of its own and is served at once (hostile_end) */
	hs_put32(&v.n.mbox.hdr->bitmap_words, words);
	hostile_end(&d, &v, &node);
}
END_TEST

/* The descriptor says there are no rings, then that there are 4096 of them far past
 * the region; a client attached before submits each time. Nobody steers a ring
 * index or address by the shared descriptor after attach. */
START_TEST(descriptor_rings_rewritten_then_submit)
{
	struct proto_node_desc *desc;
	struct hs_client c;
	struct hs_node node;
	struct hs_view v;
	struct cd d;

	if (geteuid() != 0) /* a node region write: root only (hostile.h) */
		return;
	hostile_start(&d, &node, &c, -1);
	hs_view_attach(&d, &v);
	desc = v.n.desc; /* the shared one; v.desc is the copy taken at attach */

	hs_put32(&desc->nrings, 0);
	hs_serve(d.conn, NCHIPS, 0x10, "a submit after nrings 0");
	hs_client_progress(&c, &node, 3, 10000, "nrings 0");
	hs_node_check(&d, &node, true, "nrings 0, then a submit");

	hs_put32(&desc->nrings, PROTO_NODE_MAX_RINGS);
	hs_put32(&desc->rings_offset, 0xffffffc0u);
	hs_put32(&desc->ring_stride, 0x7fffffc0u);
	hs_serve(d.conn, NCHIPS, 0x20, "a submit after rings_offset and ring_stride");
	hostile_survived(&d, &node, &c, "nrings, rings_offset and ring_stride rewritten");

	ring_geometry_restored(&d, &v);
	hostile_end(&d, &v, &node);
}
END_TEST

/* Waits up to @ms until ring @r's head reaches @n. */
static bool head_reaches(struct ring_hdr *r, uint64_t n, unsigned ms)
{
	uint64_t end = ft_now_ms() + ms;

	while (atomic_load_explicit(&r->head, memory_order_acquire) < n) {
		if (ft_now_ms() >= end)
			return false;
		usleep(1000);
	}
	return true;
}

/* A client zeroes the magic of the ring of its own live stream; the supervisor looks
 * at that ring on every tick. The stream ends (with an error: 2^20 steps of 1 ms
 * cannot complete), and the supervisor writes the ring's identity back when it takes
 * it back (protocol.md 5.7). */
START_TEST(own_ring_magic_zeroed)
{
	struct chipd_error err;
	struct hs_client c;
	struct hs_node node;
	struct ring_hdr *r;
	struct hs_view v;
	chipd_stream *s;
	struct cd d;
	int rc;

	if (geteuid() != 0) /* a node region write: root only (hostile.h) */
		return;
	hostile_start(&d, &node, &c, -1);
	hs_view_attach(&d, &v);
	rc = hs_submit(d.conn, 1u << 20, 1000, 7, 0, 0, CD_CALL_MS, &s, &err);
	ck_assert_msg(rc == 0, "submit: %d %s", rc, err.message);
	r = hs_view_ring(&v, hs_view_ring_of(&v, chipd_stream_id(s), 1000));
	ck_assert(head_reaches(r, 1, CD_CALL_MS));
	hs_put32(&r->magic, 0);
	tu_sleep_ms(1000); /* 4 ticks when idle, 20 while a request is live */
	hs_node_check(&d, &node, true, "own ring's magic zeroed");

	rc = hs_read_stream(s, 1u << 20, 7, CD_CALL_MS, HS_STREAM_MS);
	ck_assert_msg(rc != 0, "a stream of 2^20 steps of 1 ms completed");
	chipd_stream_close(s, CD_CALL_MS);
	for (uint64_t end = ft_now_ms() + HS_STREAM_MS;; usleep(10000)) {
		if (__atomic_load_n(&r->magic, __ATOMIC_RELAXED) == RING_MAGIC)
			break;
		ck_assert_msg(ft_now_ms() < end, "the ring's magic is still 0 after %u ms",
			      HS_STREAM_MS);
	}
	hostile_survived(&d, &node, &c, "own ring's magic zeroed, supervisor ticking");
	/* a ring is validated when a stream uses it, and the supervisor rewrote this one's
	 * identity: nothing to restore for new clients */
	hostile_end(&d, &v, &node);
}
END_TEST

/* "hostile4": an id no other request of the run has. */
#define STRIDE_ID 0x686f7374696c6534ull

struct bg_submit {
	chipd_conn *conn;
	int rc;
	chipd_stream *s;
	struct chipd_error err;
};

/* Submits STRIDE_ID (2000 tokens, no device time) to chip 0, not to be read. */
static void *bg_submit_main(void *arg)
{
	struct bg_submit *b = arg;

	b->rc = hs_submit(b->conn, 2000, 0, 9, STRIDE_ID, 0, 10000, &b->s, &b->err);
	return NULL;
}

/* Waits until ring @r's head stood still for 200 ms (at most @ms); returns it. */
static uint64_t head_settled(struct ring_hdr *r, unsigned ms)
{
	uint64_t end = ft_now_ms() + ms, head = UINT64_MAX;

	for (;;) {
		uint64_t now = atomic_load_explicit(&r->head, memory_order_acquire);

		if (now == head || ft_now_ms() >= end)
			return now;
		head = now;
		tu_sleep_ms(200);
	}
}

/* A client raises the capacity in its ring's header to twice the real one, and the
 * descriptor's ring_stride (and rings_offset, so that the stride still leads to that
 * ring) so that the larger ring seems to fit, between the supervisor's reset of the
 * ring and the worker's attach of it (the worker is stopped meanwhile). The stream is
 * not read, so a worker that believed the header would write 2047 records, the last
 * 1023 over the next ring. The worker keeps to the capacity it was laid out with: at
 * most that many records, none of them in the next ring. */
START_TEST(ring_capacity_and_stride_raised)
{
	struct bg_submit b = {.conn = NULL};
	struct proto_node_desc *desc;
	struct ring_hdr *r, *next;
	struct hs_client c;
	struct hs_node node;
	unsigned char *before;
	struct hs_view v;
	pthread_t th;
	uint32_t k, stride, cap, next_gen;
	bool next_idle;
	uint64_t head;
	struct cd d;

	if (geteuid() != 0) /* a node region write: root only (hostile.h) */
		return;
	hostile_start(&d, &node, &c, 1);
	hs_view_attach(&d, &v);
	desc = v.n.desc; /* the shared one; v.desc is the copy taken at attach */
	stride = v.desc.ring_stride;
	cap = v.desc.ring_capacity;
	ck_assert_uint_ge(2ull * stride, ring_size(2 * cap));

	tu_sigstop(node.worker[0]);
	b.conn = d.conn;
	ck_assert_int_eq(pthread_create(&th, NULL, bg_submit_main, &b), 0);
	k = hs_view_ring_of(&v, STRIDE_ID, 5000);
	ck_assert_uint_lt(k + 1, v.desc.nrings);
	r = hs_view_ring(&v, k);
	next = hs_view_ring(&v, k + 1);
	before = malloc(stride);
	ck_assert_ptr_nonnull(before);
	/* idle: never used, or its stream ended. The router serves on while chip 0's
	 * worker is stopped, so a good client's live stream may hold ring k + 1, and its
	 * producer writes on. */
	next_idle = atomic_load_explicit(&next->request_id, memory_order_acquire) == 0 ||
		    atomic_load_explicit(&next->terminal, memory_order_acquire) != 0;
	memcpy(before, next, stride);
	next_gen = atomic_load_explicit(&next->generation, memory_order_relaxed);

	hs_put32(&r->capacity, 2 * cap);
	hs_put32(&desc->ring_stride, 2 * stride);
	if ((uint64_t)k * stride <= v.desc.rings_offset) /* ring k at the raised stride */
		hs_put32(&desc->rings_offset, v.desc.rings_offset - k * stride);
	ck_assert_int_eq(kill(node.worker[0], SIGCONT), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	/* the worker may refuse the assign (the ring's identity is not what was laid out)
	 * or run it within the real capacity: either way the call returns */
	ck_assert_msg(b.rc == 0 || b.rc == -EREMOTEIO, "submit: %d (%s)", b.rc, b.err.message);
	head = head_settled(r, 5000);

	ck_assert_msg(head <= cap, "the worker wrote %llu records into a ring of %u, unread",
		      (unsigned long long)head, cap);
	ck_assert_msg(memcmp(next, before, 16) == 0, "ring %u's identity was overwritten", k + 1);
	for (uint32_t off = 0; off + 8 <= stride; off += 8) {
		uint64_t w;

		memcpy(&w, (char *)next + off, sizeof(w));
		ck_assert_msg(w != STRIDE_ID,
			      "request %llx's record at byte %u of ring %u: written past ring %u",
			      STRIDE_ID, off, k + 1, k);
	}
	/* an idle next ring (no stream reset it meanwhile) is byte for byte the same */
	if (next_idle && atomic_load_explicit(&next->generation, memory_order_relaxed) == next_gen)
		ck_assert_msg(memcmp(next, before, stride) == 0, "idle ring %u changed", k + 1);
	free(before);
	if (b.rc == 0)
		chipd_stream_close(b.s, 0);
	hostile_survived(&d, &node, &c, "ring capacity and ring_stride raised");

	ring_geometry_restored(&d, &v);
	hostile_end(&d, &v, &node);
}
END_TEST

/* The worker gauges (queue_depth, active, kv_blocks_used) of both chips, in the
 * client-writable counter blocks, set above UINT32_MAX: status still answers, and is
 * not counted as an internal error. Set again until a status answer was computed
 * while they stood (a worker rewrites a gauge when its load changes). */
START_TEST(worker_gauge_above_uint32_max)
{
	static const char *const gauges[] = {"queue_depth", "active", "kv_blocks_used"};
	static const uint64_t huge[] = {(1ull << 32) + 5, UINT64_MAX, 1ull << 63};
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct chipd_error err;
	struct hs_client c;
	struct hs_node node;
	struct hs_view v;
	bool seen = false;
	struct cd d;
	int qd;

	ck_assert_ptr_nonnull(st);
	if (geteuid() != 0) /* a node region write: root only (hostile.h) */
		return;
	hostile_start(&d, &node, &c, -1);
	hs_view_attach(&d, &v);
	qd = ctr_find(&v.n.wrk_ctr[0], "queue_depth");
	ck_assert_int_ge(qd, 0);
	for (int tries = 0; !seen && tries < 50; tries++) {
		int rc;

		for (uint32_t chip = 0; chip < NCHIPS; chip++)
			for (size_t g = 0; g < sizeof(gauges) / sizeof(gauges[0]); g++) {
				int i = ctr_find(&v.n.wrk_ctr[chip], gauges[g]);

				ck_assert_int_ge(i, 0);
				hs_put64(&v.n.wrk_ctr[chip].values[i], huge[g]);
			}
		rc = chipd_status(d.conn, CD_CALL_MS, st, &err);
		ck_assert_msg(rc == 0, "status with gauges above UINT32_MAX: %d %s (%s)", rc,
			      chipd_code_name(err.code), err.message);
		/* still there after the answer: it was there while it was computed */
		for (uint32_t chip = 0; chip < NCHIPS; chip++)
			seen |= ctr_get(&v.n.wrk_ctr[chip], (uint32_t)qd) == huge[0];
	}
	ck_assert_msg(seen, "a worker rewrote its queue_depth before every status answer");
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_internal"), 0);
	free(st);
	hostile_survived(&d, &node, &c, "worker gauges above UINT32_MAX, then status");
	/* an attach checks no counter value: nothing to restore for new clients */
	hostile_end(&d, &v, &node);
}
END_TEST

static int exit_at_once(void *arg)
{
	(void)arg;
	return 0;
}

/* The mailbox header names another server: pid 1 (alive, not chipd) and then a pid
 * with no process. Connected clients know their server from the handshake socket's
 * credentials, never from this word: every call of the good client is answered. */
START_TEST(mailbox_server_pid_rewritten)
{
	struct hs_client c;
	struct hs_node node;
	struct hs_view v;
	struct cd d;
	uint32_t forged[2] = {1, 0};

	hostile_start(&d, &node, &c, -1);
	forged[1] = (uint32_t)tu_fork(exit_at_once, NULL);
	ck_assert_int_eq(tu_wait((pid_t)forged[1], 5000), 0);
	hs_view_attach(&d, &v);
	for (size_t k = 0; k < sizeof(forged) / sizeof(forged[0]); k++) {
		char why[64];

		hs_put32(&v.n.mbox.hdr->server_pid, forged[k]);
		for (int i = 0; i < 20; i++) {
			struct chipd_error err;
			uint32_t pid = 0;
			int rc = chipd_ping(d.conn, CD_CALL_MS, &pid, &err);

			ck_assert_msg(rc == 0, "ping with server_pid %u: %d (%s)", forged[k], rc,
				      err.message);
			ck_assert_uint_eq(pid, (uint32_t)node.sup);
		}
		snprintf(why, sizeof(why), "server_pid %u", forged[k]);
		hs_client_progress(&c, &node, 3, 10000, why);
	}
	hostile_survived(&d, &node, &c, "mailbox server_pid rewritten");
	hs_put32(&v.n.mbox.hdr->server_pid, (uint32_t)node.sup);
	hostile_end(&d, &v, &node);
}
END_TEST

/* Moves the tail of @s's consumer line to @back records before head, as its client can,
 * while the ring still carries @s's stream (a ring taken back is left alone). */
static void tail_before_head(chipd_stream *s, uint64_t back)
{
	uint64_t head = atomic_load_explicit(&s->ring.hdr->head, memory_order_acquire);

	if (atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) == s->gen)
		hs_put64(&s->ring.cons->tail, head - back);
}

/* A client reads each of its streams to the end and keeps them open, its tail at head
 * while its next submit is admitted (the ring read to its end, not counted in its
 * rings) and one record behind at every other moment (not read to its end, kept by
 * the sweep). --max-client-rings 2 still holds: the client cannot take every ring of
 * the node, and another client is served. */
START_TEST(ring_bound_holds_while_tail_moves_back)
{
	const char *const args[] = {"--chips", "1", "--max-client-rings", "2",
				    "--max-client-pending", "2", NULL};
	enum { TRIES = 2 * PROTO_NODE_RINGS };
	chipd_stream **held = calloc(TRIES, sizeof(*held));
	struct chipd_error err = {0};
	struct hs_node node;
	chipd_conn *good = NULL;
	uint32_t n = 0;
	struct cd d;
	int rc = 0;

	ck_assert_ptr_nonnull(held);
	ft_start(&d, args);
	hs_node_record(&d, &node, 1);
	for (uint32_t k = 0; k < TRIES; k++) {
		chipd_stream *s = NULL;

		if (n)
			tail_before_head(held[n - 1], 0);
		rc = hs_submit(d.conn, 1, 0, k + 1, 0, 0, CD_CALL_MS, &s, &err);
		if (n)
			tail_before_head(held[n - 1], 1);
		if (rc)
			break;
		ck_assert_int_eq(hs_read_stream(s, 1, k + 1, CD_CALL_MS, HS_STREAM_MS), 0);
		tail_before_head(s, 1);
		held[n++] = s;
	}
	fprintf(stderr, "%u streams read to their end; last submit: %d (%s)\n", n, rc,
		rc ? err.message : "");
	rc = chipd_connect(d.instance, &good, &err);
	ck_assert_msg(rc == 0, "another client's connect: %d (%s)", rc, err.message);
	hs_serve(good, 1, 77, "another client, beside one that holds rings");
	chipd_close(good);
	for (uint32_t i = 0; i < n; i++)
		chipd_stream_close(held[i], 0);
	free(held);
	hs_node_check(&d, &node, true, "a client's tails moved back after its ends");
	ft_stop_clean(&d, node.worker, 1);
}
END_TEST

/* The client of late_token_after_take_back: while its ring carries its stream, it keeps
 * `closed` at 0 and its tail broken (past head), except for a millisecond after each
 * new token, when it says it read everything (so the worker sees room and builds the
 * next step). */
struct breaker {
	chipd_stream *s;
	uint64_t end_ms;
	uint32_t taken_gen; /* the generation it saw after the take-back, or 0 */
};

static void *breaker_main(void *arg)
{
	struct breaker *b = arg;
	struct ring_hdr *h = b->s->ring.hdr;
	struct ring_cons *c = b->s->ring.cons;
	uint64_t last = UINT64_MAX, sane_until = 0;

	while (ft_now_ms() < b->end_ms) {
		uint32_t gen = atomic_load_explicit(&h->generation, memory_order_acquire);
		uint64_t head = atomic_load_explicit(&h->head, memory_order_acquire);

		if (gen != b->s->gen) {
			b->taken_gen = gen;
			break;
		}
		if (head != last) {
			last = head;
			sane_until = ft_now_ms() + 1;
		}
		hs_put64(&c->tail, ft_now_ms() <= sane_until ? head : head + 1000);
		hs_put32(&c->closed, 0);
		usleep(20);
	}
	return NULL;
}

/* A client breaks its ring's indices whenever the supervisor looks (and undoes the
 * supervisor's close of its reader), but lets the worker go on building steps of
 * 30 ms. The supervisor takes the ring back after the holder bound (protocol.md 5.7);
 * from then on nothing of the old stream may land in the ring: its head stays 0 until
 * the ring's next stream, which may be another client's. */
START_TEST(late_token_after_take_back)
{
	const char *const args[] = {"--chips", "1", "--stuck-ms", "1000", "--progress-ms",
				    "1000", NULL};
	struct breaker b = {0};
	struct chipd_error err;
	struct hs_node node;
	struct ring_hdr *h;
	pthread_t th;
	uint64_t head;
	struct cd d;
	int rc;

	ft_start(&d, args);
	hs_node_record(&d, &node, 1);
	rc = hs_submit(d.conn, 100000, 30000, 5, 0, 0, CD_CALL_MS, &b.s, &err);
	ck_assert_msg(rc == 0, "submit: %d %s", rc, err.message);
	h = b.s->ring.hdr;
	ck_assert(head_reaches(h, 1, CD_CALL_MS));
	b.end_ms = ft_now_ms() + 20000;
	ck_assert_int_eq(pthread_create(&th, NULL, breaker_main, &b), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(b.taken_gen != 0, "the ring was not taken back within 20 s");
	tu_sleep_ms(300); /* ten steps of the old stream */
	head = atomic_load_explicit(&h->head, memory_order_acquire);
	if (atomic_load_explicit(&h->generation, memory_order_acquire) == b.taken_gen)
		ck_assert_msg(head == 0,
			      "%llu records of the old stream landed in ring taken back "
			      "(generation %u, request %llu)",
			      (unsigned long long)head, b.taken_gen,
			      (unsigned long long)atomic_load_explicit(&h->request_id,
								       memory_order_relaxed));
	chipd_stream_close(b.s, 0);
	hs_node_check(&d, &node, true, "a ring taken back while its worker built steps");
	ft_stop_clean(&d, node.worker, 1);
}
END_TEST

/* A client hangs up (closes its handshake socket) with a long stream running and keeps
 * its region mapped, reopening the reader the supervisor closed for it. Its region is
 * still free again within the bound of protocol.md 8.7 (the longer of --stuck-ms and
 * --progress-ms, here 1 s, and a few ticks), so a new client gets one: the node has
 * only two (--max-clients 2), one of them the test's own connection's. */
START_TEST(region_freed_after_hang_up_with_reopened_reader)
{
	const char *const args[] = {"--chips",	       "1",    "--max-clients", "2",
				    "--stuck-ms",      "1000", "--progress-ms", "1000",
				    NULL};
	struct cd_reopener o = {0};
	struct chipd_error err;
	struct hs_node node;
	chipd_conn *bad = NULL, *late = NULL;
	chipd_stream *s;
	struct cd d;
	int rc;

	ft_start(&d, args);
	hs_node_record(&d, &node, 1);
	rc = chipd_connect(d.instance, &bad, &err);
	ck_assert_msg(rc == 0, "connect: %d (%s)", rc, err.message);
	rc = hs_submit(bad, 100000, 20000, 3, 0, 0, CD_CALL_MS, &s, &err);
	ck_assert_msg(rc == 0, "submit: %d %s", rc, err.message);
	ck_assert(head_reaches(s->ring.hdr, 1, CD_CALL_MS));
	cd_reopener_start(&o, s);
	/* hangs up, its region still mapped */
	ck_assert_int_eq(shutdown(bad->fd, SHUT_RDWR), 0);
	tu_sleep_ms(4000);
	rc = chipd_connect(d.instance, &late, &err);
	cd_reopener_stop(&o);
	ck_assert_msg(rc == 0, "a new client 4 s after the hang-up: %d (%s)", rc, err.message);
	hs_serve(late, 1, 78, "a new client after another hung up");
	chipd_close(late);
	chipd_stream_close(s, 0); /* the hung-up client's own memory (LeakSanitizer) */
	chipd_close(bad);
	hs_node_check(&d, &node, true, "a client hung up and reopened its reader");
	ft_stop_clean(&d, node.worker, 1);
}
END_TEST

/* A stream ends FINAL (the supervisor stopped meanwhile, so no sweep has seen the end),
 * and then its reader moves its tail past head in its own consumer line. The ring is
 * broken from then on and taken back, but the request completed, as its worker wrote
 * and counted: it counts in no err_<code> (protocol.md 8.1: a FINAL record counts in
 * none), not in err_internal as a broken ring's take-back counts a stream it ends. */
START_TEST(ended_stream_broken_after_its_end_counts_no_error)
{
	const char *const args[] = {"--chips", "1", "--stuck-ms", "1000", "--progress-ms",
				    "1000", NULL};
	struct chipd_error err;
	struct hs_node node;
	chipd_stream *s;
	struct ring_hdr *h;
	uint64_t t0, completed0;
	struct cd d;
	int rc;

	ft_start(&d, args);
	hs_node_record(&d, &node, 1);
	completed0 = cd_stat(&d, "chip0", "completed");
	rc = hs_submit(d.conn, 50, 20000, 9, 0, 0, CD_CALL_MS, &s, &err);
	ck_assert_msg(rc == 0, "submit: %d %s", rc, err.message);
	h = s->ring.hdr;
	/* the worker runs on and ends the stream; the supervisor sees nothing of it */
	tu_sigstop(d.pid);
	for (t0 = ft_now_ms(); !(ring_end_flags(&s->ring) & RING_F_FINAL); usleep(1000))
		ck_assert_msg(ft_now_ms() - t0 < 20000, "the stream did not end within 20 s");
	hs_put64(&s->ring.cons->tail, atomic_load_explicit(&h->head, memory_order_acquire) + 1);
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	for (t0 = ft_now_ms();
	     atomic_load_explicit(&h->generation, memory_order_acquire) == s->gen; usleep(2000))
		ck_assert_msg(ft_now_ms() - t0 < 20000, "the ring was not taken back within 20 s");
	ck_assert_uint_eq(cd_stat_reaches(&d, "chip0", "completed", completed0 + 1, 5000),
			  completed0 + 1);
	ck_assert_msg(cd_stat(&d, "supervisor", "err_internal") == 0,
		      "a stream that ended FINAL counted in err_internal (%llu)",
		      (unsigned long long)cd_stat(&d, "supervisor", "err_internal"));
	chipd_stream_close(s, 0);
	hs_node_check(&d, &node, true, "a stream broken after its end");
	ft_stop_clean(&d, node.worker, 1);
}
END_TEST

int main(void)
{
	const struct tu_case cases[] = {
	    {"mailbox_bitmap_words_huge", mailbox_bitmap_words_huge},
	    {"descriptor_rings_rewritten_then_submit", descriptor_rings_rewritten_then_submit},
	    {"own_ring_magic_zeroed", own_ring_magic_zeroed},
	    {"ring_capacity_and_stride_raised", ring_capacity_and_stride_raised},
	    {"worker_gauge_above_uint32_max", worker_gauge_above_uint32_max},
	    {"mailbox_server_pid_rewritten", mailbox_server_pid_rewritten},
	    {"ring_bound_holds_while_tail_moves_back", ring_bound_holds_while_tail_moves_back},
	    {"late_token_after_take_back", late_token_after_take_back},
	    {"region_freed_after_hang_up_with_reopened_reader",
	     region_freed_after_hang_up_with_reopened_reader},
	    {"ended_stream_broken_after_its_end_counts_no_error",
	     ended_stream_broken_after_its_end_counts_no_error},
	};
	Suite *s = suite_create("hostile");
	int rc;

	/* each tcase's bounds sum to well under this on a loaded machine (a sanitizer
	 * build included) */
	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 120);
	ft_set_owner();
	rc = tu_run(s);
	ft_cleanup();
	return rc;
}
