/* check_mbox.c - pins the mailbox state machine: every allowed transition, refused
 * forbidden ones, acknowledged reset, out-of-order answers, bounded waits, layout
 * validation. The tcases with real processes are in mbox_peers.c. */
#include "mbox_fixture.h"
#include "proc.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

START_TEST(full_cycle_walks_every_state)
{
	struct fixture fx;
	const void *answer;
	uint32_t len;

	fx_init(&fx, 4, 128, 128);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);

	struct mbox_ticket t;
	ck_assert_int_eq(mbox_claim(&fx.mb, &t), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_CLAIMED);
	ck_assert_int_eq(MBOX_CTL_PID(mbox_ctl(&fx.mb, t.slot)), getpid() & 0xffffff);
	ck_assert_uint_eq(t.gen, 1);

	strcpy(mbox_req_buf(&fx.mb, t), "ping");
	ck_assert_int_eq(mbox_post(&fx.mb, t, 5), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_POSTED);

	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(ev.kind, MBOX_EV_REQUEST);
	ck_assert_uint_eq(ev.t.slot, t.slot);
	ck_assert_uint_eq(ev.t.gen, t.gen);
	ck_assert_uint_eq(ev.len, 5);
	ck_assert_str_eq(ev.req, "ping");
	ck_assert_int_eq(ev.client, getpid());
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_TAKEN);

	ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev.t, "pong", 5), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_DONE);

	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(1000 * MS)), 0);
	ck_assert_int_eq(mbox_response(&fx.mb, t, &answer, &len), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_str_eq(answer, "pong");
	ck_assert_int_eq(mbox_release(&fx.mb, t), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	ck_assert_uint_eq(gen_of(&fx, t.slot), 2);
	ck_assert_int_eq(MBOX_CTL_PID(mbox_ctl(&fx.mb, t.slot)), 0);
	fx_fini(&fx);
}
END_TEST

START_TEST(forbidden_transitions_refused)
{
	struct fixture fx;
	struct mbox_ticket t, bogus = {.slot = 99, .gen = 1};
	const void *answer;
	uint32_t len;

	fx_init(&fx, 2, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);

	/* Nothing works on an unclaimed slot or an out-of-range ticket. */
	struct mbox_ticket unclaimed = {.slot = 0, .gen = 1};
	ck_assert_int_eq(mbox_post(&fx.mb, unclaimed, 1), -ESTALE);
	ck_assert_int_eq(mbox_release(&fx.mb, unclaimed), -ESTALE);
	ck_assert_int_eq(mbox_answer(&fx.mb, unclaimed, 1), -ESTALE);
	ck_assert_int_eq(mbox_ack_reset(&fx.mb, unclaimed), -ESTALE);
	ck_assert_int_eq(mbox_give_up(&fx.mb, unclaimed), -ESTALE);
	ck_assert_int_eq(mbox_post(&fx.mb, bogus, 1), -ESTALE);
	ck_assert_int_eq(mbox_wait(&fx.mb, bogus, 0), -ESTALE);

	ck_assert_int_eq(mbox_claim(&fx.mb, &t), 0);
	ck_assert_int_eq(mbox_post(&fx.mb, t, 65), -EMSGSIZE);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_CLAIMED);
	/* CLAIMED: no answer, no ack, no release, no response. */
	ck_assert_int_eq(mbox_answer(&fx.mb, t, 1), -ESTALE);
	ck_assert_int_eq(mbox_ack_reset(&fx.mb, t), -ESTALE);
	ck_assert_int_eq(mbox_release(&fx.mb, t), -ESTALE);
	ck_assert_int_eq(mbox_response(&fx.mb, t, &answer, &len), -ESTALE);

	ck_assert_int_eq(mbox_post(&fx.mb, t, 1), 0);
	ck_assert_int_eq(mbox_post(&fx.mb, t, 1), -ESTALE);   /* twice */
	ck_assert_int_eq(mbox_answer(&fx.mb, t, 1), -ESTALE); /* not taken yet */
	ck_assert_int_eq(mbox_release(&fx.mb, t), -ESTALE);

	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 65), -EMSGSIZE);
	ck_assert_int_eq(mbox_ack_reset(&fx.mb, ev.t), -ESTALE); /* TAKEN is no RESET */
	ck_assert_int_eq(mbox_release(&fx.mb, t), -ESTALE);
	ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 1), 0);
	ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 1), -ESTALE); /* twice */

	/* A wrong generation is refused even on the right slot. */
	struct mbox_ticket old = {.slot = t.slot, .gen = t.gen + 7};
	ck_assert_int_eq(mbox_release(&fx.mb, old), -ESTALE);
	ck_assert_int_eq(mbox_release(&fx.mb, t), 0);
	ck_assert_int_eq(mbox_release(&fx.mb, t), -ESTALE); /* twice */
	fx_fini(&fx);
}
END_TEST

static int give_up_foreign(void *arg)
{
	struct fixture *fx = arg;
	struct mbox_ticket t = {.slot = 0, .gen = 1};

	/* The child is not the owner: it may not touch the parent's slot. */
	return mbox_give_up(&fx->mb, t) == -ESTALE && mbox_post(&fx->mb, t, 1) == -ESTALE ? 0 : 1;
}

START_TEST(other_process_cannot_use_my_ticket)
{
	struct fixture fx;
	struct mbox_ticket t;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_claim(&fx.mb, &t), 0);
	ck_assert_int_eq(tu_wait(tu_fork(give_up_foreign, &fx), 5000), 0);
	ck_assert_int_eq(state_of(&fx, 0), MBOX_CLAIMED);
	fx_fini(&fx);
}
END_TEST

START_TEST(full_mailbox_claim_fails_fast)
{
	struct fixture fx;
	struct mbox_ticket t[3], extra;

	fx_init(&fx, 3, 64, 64);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(mbox_claim(&fx.mb, &t[i]), 0);
	ck_assert_int_eq(mbox_claim(&fx.mb, &extra), -EAGAIN);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t[1]), 0);
	ck_assert_int_eq(mbox_claim(&fx.mb, &extra), 0);
	ck_assert_uint_eq(extra.slot, t[1].slot);
	ck_assert_uint_eq(extra.gen, t[1].gen + 1);
	fx_fini(&fx);
}
END_TEST

START_TEST(give_up_posted_frees_without_server)
{
	struct fixture fx;
	struct mbox_event ev;

	fx_init(&fx, 2, 64, 64);
	struct mbox_ticket t = post_text(&fx, "x");
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(20 * MS)), -ETIMEDOUT);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	ck_assert_uint_eq(gen_of(&fx, t.slot), t.gen + 1);

	/* A server arriving late finds nothing to take. */
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	ck_assert_int_eq(mbox_server_next(&fx.mb, &ev, shm_deadline_in(20 * MS)), -ETIMEDOUT);
	fx_fini(&fx);
}
END_TEST

START_TEST(give_up_taken_is_acknowledged_reset)
{
	struct fixture fx;
	const void *answer;
	uint32_t len;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	struct mbox_ticket t = post_text(&fx, "slow");
	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(ev.kind, MBOX_EV_REQUEST);

	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(20 * MS)), -ETIMEDOUT);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 1);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_RESET);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 1); /* idempotent */

	/* The server is told, acknowledges, the slot is reusable. */
	struct mbox_event reset = next_event(&fx);
	ck_assert_int_eq(reset.kind, MBOX_EV_RESET);
	ck_assert_uint_eq(reset.t.slot, t.slot);
	ck_assert_uint_eq(reset.t.gen, t.gen);
	ck_assert_int_eq(mbox_ack_reset(&fx.mb, reset.t), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	ck_assert_uint_eq(gen_of(&fx, t.slot), t.gen + 1);

	/* The late answer of the old generation is discarded... */
	struct mbox_ticket t2 = post_text(&fx, "next");
	ck_assert_uint_eq(t2.slot, t.slot);
	ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev.t, "stale", 6), -ESTALE);
	ck_assert_int_eq(state_of(&fx, t2.slot), MBOX_POSTED);
	/* ...and the new request is served normally. */
	struct mbox_event ev2 = next_event(&fx);
	ck_assert_str_eq(ev2.req, "next");
	ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev2.t, "fresh", 6), 0);
	ck_assert_int_eq(mbox_wait(&fx.mb, t2, shm_deadline_in(1000 * MS)), 0);
	ck_assert_int_eq(mbox_response(&fx.mb, t2, &answer, &len), 0);
	ck_assert_str_eq(answer, "fresh");
	ck_assert_int_eq(mbox_release(&fx.mb, t2), 0);
	fx_fini(&fx);
}
END_TEST

START_TEST(answer_after_reset_acknowledges_it)
{
	struct fixture fx;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	struct mbox_ticket t = post_text(&fx, "a");
	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 1);
	/* The server answers without having looked at the reset: discarded, acked. */
	ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev.t, "b", 2), -ECANCELED);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	ck_assert_uint_eq(gen_of(&fx, t.slot), t.gen + 1);
	ck_assert_int_eq(mbox_ack_reset(&fx.mb, ev.t), -ESTALE);
	fx_fini(&fx);
}
END_TEST

START_TEST(give_up_after_done_drops_answer)
{
	struct fixture fx;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	struct mbox_ticket t = post_text(&fx, "a");
	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev.t, "b", 2), 0);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	fx_fini(&fx);
}
END_TEST

START_TEST(out_of_order_completion)
{
	struct fixture fx;
	struct mbox_ticket t[3];
	struct mbox_event ev[3];
	const char *req[3] = {"r0", "r1", "r2"};

	fx_init(&fx, 8, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	for (int i = 0; i < 3; i++)
		t[i] = post_text(&fx, req[i]);
	for (int i = 0; i < 3; i++)
		ev[i] = next_event(&fx);
	/* Answer in reverse order, each with its own request's text upper-cased. */
	for (int i = 2; i >= 0; i--) {
		char buf[8];
		strcpy(buf, ev[i].req);
		buf[0] = 'R';
		ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev[i].t, buf, 3), 0);
	}
	for (int i = 0; i < 3; i++) {
		const void *answer;
		uint32_t len;
		char want[8];

		ck_assert_int_eq(mbox_wait(&fx.mb, t[i], shm_deadline_in(1000 * MS)), 0);
		ck_assert_int_eq(mbox_response(&fx.mb, t[i], &answer, &len), 0);
		snprintf(want, sizeof(want), "R%s", req[i] + 1);
		ck_assert_str_eq(answer, want);
		ck_assert_int_eq(mbox_release(&fx.mb, t[i]), 0);
	}
	fx_fini(&fx);
}
END_TEST

/* Claims slot 0 and posts it as a client that bypasses mbox_post would: a length of
 * @len bytes, beyond the request buffer, and the attention bit. */
static struct mbox_ticket post_oversized(struct fixture *fx, uint32_t len)
{
	struct mbox_slot *s = (struct mbox_slot *)fx->mb.slots;
	struct mbox_ticket t;

	ck_assert_int_eq(mbox_claim(&fx->mb, &t), 0);
	atomic_store(&s->req_len, len);
	atomic_store(&s->ctl, MBOX_CTL(t.gen, getpid(), MBOX_POSTED));
	atomic_fetch_or(&fx->mb.attention[0], 1);
	return t;
}

START_TEST(oversized_request_answered_by_mailbox)
{
	struct fixture fx;
	struct mbox_ticket t;
	struct mbox_event ev;
	const void *answer;
	uint32_t len;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	t = post_oversized(&fx, 4096);
	ck_assert_int_eq(mbox_server_next(&fx.mb, &ev, shm_deadline_in(50 * MS)), -ETIMEDOUT);
	ck_assert_int_eq(state_of(&fx, 0), MBOX_DONE);
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(100 * MS)), 0);
	ck_assert_int_eq(mbox_response(&fx.mb, t, &answer, &len), -EMSGSIZE);
	ck_assert_int_eq(mbox_release(&fx.mb, t), 0);
	fx_fini(&fx);
}
END_TEST

/* A server that asked for them (mbox_server_take_oversize) gets such a request as an
 * event without bytes, status 0, and answers it itself like any other. */
START_TEST(oversized_request_reported_when_server_takes_them)
{
	struct fixture fx;
	struct mbox_ticket t;
	struct mbox_event ev;
	const void *answer;
	uint32_t len;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	mbox_server_take_oversize(&fx.mb);
	t = post_oversized(&fx, 65);
	ev = next_event(&fx);
	ck_assert_int_eq(ev.kind, MBOX_EV_REQUEST);
	ck_assert_ptr_null(ev.req);
	ck_assert_uint_eq(ev.len, 65);
	ck_assert_int_eq(state_of(&fx, 0), MBOX_TAKEN);
	ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev.t, "too big", 8), 0);
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(100 * MS)), 0);
	ck_assert_int_eq(mbox_response(&fx.mb, t, &answer, &len), 0);
	ck_assert_str_eq(answer, "too big");
	ck_assert_int_eq(mbox_release(&fx.mb, t), 0);
	/* a request within the buffer still carries its bytes */
	t = post_text(&fx, "fits");
	ev = next_event(&fx);
	ck_assert_ptr_nonnull(ev.req);
	ck_assert_str_eq(ev.req, "fits");
	fx_fini(&fx);
}
END_TEST

START_TEST(deadlines_bound_every_wait)
{
	struct fixture fx;
	struct mbox_event ev;

	fx_init(&fx, 1, 64, 64);
	struct mbox_ticket t = post_text(&fx, "nobody");
	uint64_t start = shm_now_ns();
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(30 * MS)), -ETIMEDOUT);
	uint64_t took = shm_now_ns() - start;
	ck_assert_uint_ge(took, 30 * MS);
	ck_assert_uint_lt(took, 2000 * MS);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 0);

	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	start = shm_now_ns();
	ck_assert_int_eq(mbox_server_next(&fx.mb, &ev, shm_deadline_in(30 * MS)), -ETIMEDOUT);
	ck_assert_uint_lt(shm_now_ns() - start, 2000 * MS);
	fx_fini(&fx);
}
END_TEST

START_TEST(stale_ticket_never_writes_new_owners_slot)
{
	struct fixture fx;
	struct mbox_ticket old, cur;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_claim(&fx.mb, &old), 0);
	ck_assert_int_eq(mbox_give_up(&fx.mb, old), 0);
	ck_assert_int_eq(mbox_claim(&fx.mb, &cur), 0);
	ck_assert_uint_eq(cur.slot, old.slot);
	struct mbox_slot *s = (struct mbox_slot *)fx.mb.slots;
	atomic_store(&s->req_len, 5);
	ck_assert_int_eq(mbox_post(&fx.mb, old, 17), -ESTALE);
	ck_assert_uint_eq(atomic_load(&s->req_len), 5);
	ck_assert_int_eq(state_of(&fx, 0), MBOX_CLAIMED);
	fx_fini(&fx);
}
END_TEST

START_TEST(corrupt_status_is_a_protocol_error)
{
	struct fixture fx;
	const void *answer;
	uint32_t len;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	struct mbox_ticket t = post_text(&fx, "x");
	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 0), 0);
	struct mbox_slot *s = (struct mbox_slot *)fx.mb.slots;
	atomic_store(&s->status, 0x80000000u); /* a server that writes garbage */
	ck_assert_int_eq(mbox_response(&fx.mb, t, &answer, &len), -EPROTO);
	atomic_store(&s->resp_len, 65);
	atomic_store(&s->status, 0);
	ck_assert_int_eq(mbox_response(&fx.mb, t, &answer, &len), -EPROTO);
	ck_assert_int_eq(mbox_release(&fx.mb, t), 0);
	fx_fini(&fx);
}
END_TEST

START_TEST(attach_validates_layout)
{
	struct fixture fx;
	struct mbox other;

	fx_init(&fx, 4, 64, 64);
	ck_assert_int_eq(mbox_attach(&other, fx.mem, fx.size), 0);
	ck_assert_uint_eq(other.nslots, 4);
	ck_assert_int_eq(mbox_attach(&other, fx.mem, fx.size - 1), -EMSGSIZE);
	fx.mb.hdr->slot_stride += 64;
	ck_assert_int_eq(mbox_attach(&other, fx.mem, fx.size), -EMSGSIZE);
	fx.mb.hdr->slot_stride -= 64;
	fx.mb.hdr->nslots = MBOX_MAX_SLOTS + 1;
	ck_assert_int_eq(mbox_attach(&other, fx.mem, fx.size), -EMSGSIZE);
	fx.mb.hdr->nslots = 4;
	fx.mb.hdr->version = 2;
	ck_assert_int_eq(mbox_attach(&other, fx.mem, fx.size), -EPROTONOSUPPORT);
	fx.mb.hdr->version = MBOX_VERSION;
	fx.mb.hdr->magic ^= 1;
	ck_assert_int_eq(mbox_attach(&other, fx.mem, fx.size), -EBADMSG);
	ck_assert_uint_eq(mbox_size(0, 64, 64), 0);
	ck_assert_uint_eq(mbox_size(1, 0, 64), 0);
	ck_assert_uint_eq(mbox_size(1, 64, MBOX_MAX_BUF + 1), 0);
	ck_assert_int_eq(mbox_init(&other, (char *)fx.mem + 8, fx.size, 1, 64, 64), -EINVAL);
	ck_assert_int_eq(mbox_init(&other, fx.mem, 64, 1, 64, 64), -EMSGSIZE);
	fx_fini(&fx);
}
END_TEST

/* @size bytes (a multiple of 64) that end exactly at an inaccessible page: any read or
 * write past them faults, in every build. Free with guarded_free. */
static void *guarded_alloc(size_t size, size_t *map_len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (size + page - 1) / page * page;
	char *p =
	    mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(mprotect(p + body, page, PROT_NONE), 0);
	*map_len = body + page;
	return p + body - size;
}

static void guarded_free(void *mem, size_t size, size_t map_len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *end = (char *)mem + size;

	munmap(end - (map_len - page), map_len);
}

/* One request through slot-owning client @t and server @srv: posted, taken, answered,
 * read back. */
static void round_trip(struct mbox *srv, struct mbox *cli, const char *text)
{
	struct mbox_ticket t;
	struct mbox_event ev;
	const void *answer;
	uint32_t len;

	ck_assert_int_eq(mbox_claim(cli, &t), 0);
	strcpy(mbox_req_buf(cli, t), text);
	ck_assert_int_eq(mbox_post(cli, t, (uint32_t)strlen(text) + 1), 0);
	ck_assert_int_eq(mbox_server_next(srv, &ev, shm_deadline_in(2000 * MS)), 0);
	ck_assert_int_eq(ev.kind, MBOX_EV_REQUEST);
	ck_assert_uint_lt(ev.t.slot, 3);
	ck_assert_uint_eq(ev.t.slot, t.slot);
	ck_assert_str_eq(ev.req, text);
	ck_assert_int_eq(mbox_answer_copy(srv, ev.t, text, ev.len), 0);
	ck_assert_int_eq(mbox_wait(cli, t, shm_deadline_in(2000 * MS)), 0);
	ck_assert_int_eq(mbox_response(cli, t, &answer, &len), 0);
	ck_assert_str_eq(answer, text);
	ck_assert_int_eq(mbox_release(cli, t), 0);
}

/* A client rewrites the whole mailbox header after attach (bitmap_words huge, nslots,
 * capacities, strides and offsets changed, magic zeroed) and raises attention bits past
 * the last slot: the server keeps serving every slot through its own geometry, and
 * nothing reads past the mailbox (it ends at an inaccessible page). */
START_TEST(server_ignores_rewritten_header)
{
	enum { NSLOTS = 3 };
	size_t size = mbox_size(NSLOTS, 64, 64), map_len;
	void *mem = guarded_alloc(size, &map_len);
	struct mbox srv, cli, other;
	struct mbox_event ev;
	char text[32];

	ck_assert_int_eq(mbox_init(&srv, mem, size, NSLOTS, 64, 64), 0);
	ck_assert_int_eq(mbox_attach(&cli, mem, size), 0);
	ck_assert_int_eq(mbox_server_attach(&srv), 0);
	mbox_set_spin(&srv, 0);

	struct mbox_hdr *h = mem;
	h->bitmap_words = 1000000;
	h->nslots = MBOX_MAX_SLOTS;
	h->req_cap = MBOX_MAX_BUF;
	h->resp_cap = MBOX_MAX_BUF;
	h->slot_stride = 1u << 30;
	h->slots_offset = 1u << 30;
	h->total_size = UINT64_MAX;
	h->magic = 0;
	h->version = 0;
	/* bits 3..63 of the first word name no slot */
	atomic_fetch_or(&srv.attention[0], ~(uint64_t)((1u << NSLOTS) - 1));
	shm_wake_all(&h->doorbell);

	/* no event from the bits past the last slot */
	ck_assert_int_eq(mbox_server_next(&srv, &ev, shm_deadline_in(20 * MS)), -ETIMEDOUT);
	for (int round = 0; round < 3 * NSLOTS; round++) {
		snprintf(text, sizeof(text), "request %d", round);
		round_trip(&srv, &cli, text);
	}
	ck_assert_int_eq(mbox_reap(&srv), 0);
	/* a new attacher refuses what the header says now */
	ck_assert_int_eq(mbox_attach(&other, mem, size), -EBADMSG);
	h->magic = MBOX_MAGIC;
	h->version = MBOX_VERSION;
	ck_assert_int_eq(mbox_attach(&other, mem, size), -EMSGSIZE);
	mbox_server_detach(&srv);
	guarded_free(mem, size, map_len);
}
END_TEST

/* The client of the tcase below: it raises every attention bit of its mailbox each time
 * the server's scan reaches one of two slots (each in a page of its own, the one
 * not-readable until the scan faults on it, which then swaps them), so during every
 * pass over the slots, as a client's thread on another core can. */
static struct mbox *rising_mb;
static char *rising_page[2];
static volatile sig_atomic_t rising_left;

static void raise_in_scan(int sig, siginfo_t *si, void *uc)
{
	long page = sysconf(_SC_PAGESIZE);
	int hit = (char *)si->si_addr >= rising_page[1] &&
		  (char *)si->si_addr < rising_page[1] + page;

	(void)sig, (void)uc;
	mprotect(rising_page[hit], (size_t)page, PROT_READ | PROT_WRITE);
	if (rising_left <= 0)
		return; /* the client stopped: both readable from here on */
	rising_left--;
	mprotect(rising_page[!hit], (size_t)page, PROT_NONE);
	for (uint32_t w = 0; w < rising_mb->words; w++)
		atomic_store_explicit(&rising_mb->attention[w], ~0ull, memory_order_relaxed);
}

/* A client raises every attention bit of its mailbox again and again while no slot is
 * posted (spurious bits, harmless by protocol.md 4.6): one poll still examines a
 * bounded number of slots and returns, long before the client stops (1000 passes), so a
 * server of several mailboxes (chipd's router) goes on to the others. */
START_TEST(poll_bounded_while_client_raises_bits)
{
	enum { NSLOTS = MBOX_MAX_SLOTS, RAISES = 1000 };
	long page = sysconf(_SC_PAGESIZE);
	struct sigaction sa = {0}, old;
	struct fixture fx;
	struct mbox_event ev;
	int left;
	bool got;

	fx_init(&fx, NSLOTS, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	rising_mb = &fx.mb;
	/* the pages of slots 100 and 4000: slots only, far apart */
	for (int k = 0; k < 2; k++) {
		uintptr_t at = (uintptr_t)fx.mb.slots + (k ? 4000u : 100u) * fx.mb.stride;

		rising_page[k] = (char *)(at & ~(uintptr_t)(page - 1));
	}
	ck_assert_ptr_ne(rising_page[0], rising_page[1]);
	rising_left = RAISES;
	sa.sa_sigaction = raise_in_scan;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGSEGV, &sa, &old), 0);
	ck_assert_int_eq(mprotect(rising_page[0], (size_t)page, PROT_NONE), 0);
	for (uint32_t w = 0; w < fx.mb.words; w++)
		atomic_store_explicit(&fx.mb.attention[w], ~0ull, memory_order_relaxed);
	got = mbox_server_poll(&fx.mb, &ev);
	left = rising_left;
	rising_left = 0;
	ck_assert_int_eq(sigaction(SIGSEGV, &old, NULL), 0);
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(mprotect(rising_page[k], (size_t)page, PROT_READ | PROT_WRITE), 0);
	ck_assert(!got);
	ck_assert_msg(left > 0,
		      "the poll returned only once the client stopped raising bits (%d passes)",
		      (int)RAISES);
	fx_fini(&fx);
}
END_TEST

static Suite *mbox_suite(void)
{
	Suite *s = suite_create("mbox");
	TCase *tc = tcase_create("state_machine");

	tcase_add_test(tc, full_cycle_walks_every_state);
	tcase_add_test(tc, forbidden_transitions_refused);
	tcase_add_test(tc, other_process_cannot_use_my_ticket);
	tcase_add_test(tc, full_mailbox_claim_fails_fast);
	tcase_add_test(tc, give_up_posted_frees_without_server);
	tcase_add_test(tc, give_up_taken_is_acknowledged_reset);
	tcase_add_test(tc, answer_after_reset_acknowledges_it);
	tcase_add_test(tc, give_up_after_done_drops_answer);
	tcase_add_test(tc, out_of_order_completion);
	tcase_add_test(tc, oversized_request_answered_by_mailbox);
	tcase_add_test(tc, oversized_request_reported_when_server_takes_them);
	tcase_add_test(tc, deadlines_bound_every_wait);
	tcase_add_test(tc, stale_ticket_never_writes_new_owners_slot);
	tcase_add_test(tc, corrupt_status_is_a_protocol_error);
	tcase_add_test(tc, attach_validates_layout);
	tcase_add_test(tc, server_ignores_rewritten_header);
	tcase_add_test(tc, poll_bounded_while_client_raises_bits);
	suite_add_tcase(s, tc);

	mbox_add_peer_tcases(s);
	return s;
}

int main(void)
{
	return tu_run(mbox_suite());
}
