/* check_ring.c - pins SPSC token rings: order, the terminal record, reset and close,
 * a header a peer rewrote (two processes or threads: ring_peers.c). */
#include "proc.h"
#include "ring_fixture.h"
#include "testutil.h"
#include "wait.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>


START_TEST(push_pop_round_trip)
{
	struct fixture f;
	struct ring_rec out;

	fixture_init(&f, 8);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -EAGAIN);
	for (uint32_t i = 0; i < 3; i++)
		push_ok(&f.r, i, 0);
	for (uint32_t i = 0; i < 3; i++)
		pop_expect(&f.r, i, 0);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -EAGAIN);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->head), 3);
	ck_assert_uint_eq(RING_TAIL_POS(atomic_load(&f.r.cons->tail)), 3);
	fixture_fini(&f);
}
END_TEST

START_TEST(wrap_around_keeps_sequence)
{
	enum { CAP = 8, LAPS = 1000 };
	struct fixture f;
	uint32_t pushed = 0, popped = 0;

	fixture_init(&f, CAP);
	/* Batches of every size the ring allows, so head and tail meet every slot at
	 * every distance. */
	while (pushed < CAP * LAPS) {
		uint32_t batch = 1 + pushed % (CAP - 1);

		for (uint32_t i = 0; i < batch; i++)
			push_ok(&f.r, pushed++, 0);
		for (uint32_t i = 0; i < batch; i++)
			pop_expect(&f.r, popped++, 0);
	}
	ck_assert_uint_eq(atomic_load(&f.r.hdr->head), pushed);
	ck_assert_uint_eq(RING_TAIL_POS(atomic_load(&f.r.cons->tail)), popped);
	push_ok(&f.r, pushed, RING_F_FINAL);
	pop_expect(&f.r, pushed, RING_F_FINAL);
	fixture_fini(&f);
}
END_TEST

START_TEST(full_ring_keeps_room_for_terminal)
{
	enum { CAP = 8 };
	struct fixture f;
	struct ring_rec rec = rec_of(CAP, 0);

	fixture_init(&f, CAP);
	for (uint32_t i = 0; i < CAP - 1; i++)
		push_ok(&f.r, i, 0);
	/* capacity - 1 records: full for anything but the terminal record. */
	ck_assert_int_eq(ring_push(&f.r, &rec), -EAGAIN);
	ck_assert_int_eq(ring_push(&f.r, &rec), -EAGAIN);
	ck_assert_uint_eq(ring_space(&f.r), 0);
	/* Room frees up as the reader stores its tail: once per batch of records (2 on a
	 * ring of 8) while more are published, one CAS for them all. */
	pop_expect(&f.r, 0, 0);
	ck_assert_uint_eq(ring_space(&f.r), 0);
	pop_expect(&f.r, 1, 0);
	ck_assert_uint_eq(ring_space(&f.r), 2);
	push_ok(&f.r, CAP - 1, 0);
	push_ok(&f.r, CAP, 0);
	rec.seq = CAP + 1;
	ck_assert_int_eq(ring_push(&f.r, &rec), -EAGAIN);
	/* The terminal record still fits, filling the last slot. */
	push_ok(&f.r, CAP + 1, RING_F_FINAL);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->head) - RING_TAIL_POS(atomic_load(&f.r.cons->tail)),
			  CAP);
	for (uint32_t i = 2; i <= CAP; i++)
		pop_expect(&f.r, i, 0);
	pop_expect(&f.r, CAP + 1, RING_F_FINAL);
	ck_assert(ring_drained(&f.r));
	fixture_fini(&f);
}
END_TEST

START_TEST(terminal_written_exactly_once)
{
	struct fixture f;
	struct ring_rec out;
	struct ring_rec fin = rec_of(2, RING_F_FINAL);
	struct ring_rec err = rec_of(2, RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));
	struct ring_rec tok = rec_of(2, 0);

	fixture_init(&f, 8);
	push_ok(&f.r, 0, 0);
	pop_expect(&f.r, 0, 0);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -EAGAIN); /* drained, not ended */
	push_ok(&f.r, 1, RING_F_FINAL);
	ck_assert_int_eq(ring_push(&f.r, &fin), -EALREADY);
	ck_assert_int_eq(ring_push(&f.r, &err), -EALREADY);
	ck_assert_int_eq(ring_push(&f.r, &tok), -EALREADY);
	ck_assert_uint_eq(ring_space(&f.r), 0);
	pop_expect(&f.r, 1, RING_F_FINAL);
	/* Ended: no more records, ever, and no waiting for them. */
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -ENODATA);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -ENODATA);
	uint64_t t0 = shm_now_ns();
	ck_assert_int_eq(ring_pop(&f.r, &out, shm_deadline_in(5000ull * MS)), -ENODATA);
	ck_assert_uint_lt(shm_now_ns() - t0, SLACK_NS);
	ck_assert_int_eq(ring_push(&f.r, &tok), -EALREADY);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->head), 2);
	fixture_fini(&f);
}
END_TEST

START_TEST(terminal_pending_is_not_end_of_stream)
{
	struct fixture f;
	struct ring_rec out;

	fixture_init(&f, 4);
	push_ok(&f.r, 0, 0);
	push_ok(&f.r, 1, RING_F_FINAL);
	/* Unread records before the terminal one still come out first. */
	pop_expect(&f.r, 0, 0);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), 0);
	ck_assert_uint_eq(out.flags, RING_F_FINAL);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -ENODATA);
	fixture_fini(&f);
}
END_TEST

START_TEST(error_record_carries_code)
{
	struct fixture f;
	struct ring_rec out;

	fixture_init(&f, 4);
	push_ok(&f.r, 0, RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));
	ck_assert_int_eq(ring_try_pop(&f.r, &out), 0);
	ck_assert(out.flags & RING_F_ERROR);
	ck_assert(!(out.flags & RING_F_FINAL));
	ck_assert_uint_eq(RING_CODE_OF(out.flags), CODE_WORKER_LOST);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -ENODATA);

	/* The code field is 16 bits wide and never spills into the flag bits. */
	ck_assert_uint_eq(RING_CODE_OF(RING_F_ERROR | RING_F_CODE(0xffff)), 0xffff);
	ck_assert_uint_eq(RING_CODE_OF(RING_F_CODE(0x12345)), 0x2345);
	ck_assert_uint_eq(RING_F_CODE(0xffffffffu) & RING_F_TERMINAL, 0);
	fixture_fini(&f);
}
END_TEST

/* The end stays readable for the ring's owner after the reader took it: how the
 * supervisor learns how a stream it did not write ended, and after how many tokens. */
START_TEST(end_flags_say_how_the_stream_ended)
{
	struct fixture f;
	struct ring_rec out, end;

	fixture_init(&f, 4);
	ck_assert_uint_eq(ring_end_flags(&f.r), 0);
	push_ok(&f.r, 0, 0);
	ck_assert_uint_eq(ring_end_flags(&f.r), 0);
	push_ok(&f.r, 1, RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));
	ck_assert_uint_eq(ring_end_flags(&f.r), RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));
	pop_expect(&f.r, 0, 0);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), 0);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -ENODATA);
	ck_assert_uint_eq(ring_end_flags(&f.r), RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));
	ck_assert(ring_end_record(&f.r, &end)); /* its seq: the tokens before it */
	ck_assert_uint_eq(end.seq, 1);
	ring_reset(&f.r, REQ_ID, getpid(), getpid());
	ck_assert_uint_eq(ring_end_flags(&f.r), 0);
	ck_assert(!ring_end_record(&f.r, &end));
	push_ok(&f.r, 0, RING_F_FINAL);
	ck_assert_uint_eq(ring_end_flags(&f.r), RING_F_FINAL);
	ck_assert(ring_finished(&f.r));
	fixture_fini(&f);
}
END_TEST

START_TEST(push_stamps_ts)
{
	struct fixture f;
	struct ring_rec rec = rec_of(0, 0), out;

	fixture_init(&f, 4);
	rec.ts_ns = 42; /* whatever the caller puts there is replaced */
	uint64_t before = shm_now_ns();
	ck_assert_int_eq(ring_push(&f.r, &rec), 0);
	uint64_t after = shm_now_ns();
	ck_assert_int_eq(ring_try_pop(&f.r, &out), 0);
	ck_assert_uint_ge(out.ts_ns, before);
	ck_assert_uint_le(out.ts_ns, after);
	fixture_fini(&f);
}
END_TEST

START_TEST(pop_times_out_at_deadline)
{
	struct fixture f;
	struct ring_rec out;

	fixture_init(&f, 4);
	ring_reset(&f.r, REQ_ID, getpid(), getpid());
	uint64_t deadline = shm_deadline_in(100 * MS);
	ck_assert_int_eq(ring_pop(&f.r, &out, deadline), -ETIMEDOUT);
	uint64_t now = shm_now_ns();
	ck_assert_uint_ge(now, deadline);
	ck_assert_uint_lt(now - deadline, SLACK_NS);
	/* It slept unwoken: its announcement stays until a producer's wake takes it. */
	ck_assert_uint_ne(atomic_load(&f.r.cons->wake.sleepers), 0);
	/* A deadline already past does not wait at all. */
	ck_assert_int_eq(ring_pop(&f.r, &out, 0), -ETIMEDOUT);
	fixture_fini(&f);
}
END_TEST


START_TEST(attach_validates_layout)
{
	struct fixture f;
	struct ring a;

	fixture_init(&f, 8);
	push_ok(&f.r, 0, 0);
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), 0);
	ck_assert_uint_eq(a.capacity, 8);
	pop_expect(&a, 0, 0); /* a second handle on the same ring */

	struct ring_hdr *h = f.mem;
	h->magic ^= 1;
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), -EBADMSG);
	h->magic ^= 1;
	h->version = RING_VERSION + 1;
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), -EPROTONOSUPPORT);
	h->version = 2; /* 32-byte records: refused, not misread */
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), -EPROTONOSUPPORT);
	h->version = RING_VERSION;
	static const uint32_t bad_caps[] = {0, 1, 3, 6, 12, RING_MAX_CAPACITY * 2, UINT32_MAX};
	for (size_t i = 0; i < sizeof(bad_caps) / sizeof(bad_caps[0]); i++) {
		h->capacity = bad_caps[i];
		ck_assert_msg(ring_attach(&a, f.mem, f.size, f.cons) == -EMSGSIZE, "capacity %u accepted",
			      bad_caps[i]);
	}
	h->capacity = 16; /* valid, but larger than the memory */
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), -EMSGSIZE);
	h->capacity = 8;
	h->rec_size = 32;
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), -EMSGSIZE);
	h->rec_size = 128;
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), -EMSGSIZE);
	h->rec_size = sizeof(struct ring_rec);
	/* Memory too short for the records, or for the header. */
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size - 1, f.cons), -EMSGSIZE);
	ck_assert_int_eq(ring_attach(&a, f.mem, sizeof(struct ring_hdr) - 1, f.cons), -EMSGSIZE);
	ck_assert_int_eq(ring_attach(&a, f.mem, 0, f.cons), -EMSGSIZE);
	/* Misaligned. */
	ck_assert_int_eq(ring_attach(&a, (char *)f.mem + 8, f.size - 8, f.cons), -EMSGSIZE);
	ck_assert_int_eq(ring_attach(&a, f.mem, f.size, f.cons), 0);
	fixture_fini(&f);
}
END_TEST

START_TEST(init_validates_capacity_and_memory)
{
	struct ring r;

	ck_assert_uint_eq(ring_size(0), 0);
	ck_assert_uint_eq(ring_size(1), 0);
	ck_assert_uint_eq(ring_size(3), 0);
	ck_assert_uint_eq(ring_size(RING_MAX_CAPACITY * 2), 0);
	ck_assert_uint_eq(ring_size(2), sizeof(struct ring_hdr) + 2 * sizeof(struct ring_rec));
	ck_assert_uint_eq(ring_size(RING_MAX_CAPACITY),
			  sizeof(struct ring_hdr) + RING_MAX_CAPACITY * sizeof(struct ring_rec));

	size_t size = ring_size(8);
	char *mem = tu_shared(2 * size + RING_CONS_SIZE);
	struct ring_cons *cons = (struct ring_cons *)(void *)(mem + 2 * size);
	ck_assert_int_eq(ring_init(&r, mem, size, 3, cons), -EINVAL);
	ck_assert_int_eq(ring_init(&r, mem + 32, size, 8, cons), -EINVAL);
	ck_assert_int_eq(ring_init(&r, mem, size, 8, NULL), -EINVAL);
	ck_assert_int_eq(ring_init(&r, mem, size, 8, (struct ring_cons *)(void *)(mem + 8)), -EINVAL);
	ck_assert_int_eq(ring_init(&r, mem, size - 1, 8, cons), -EMSGSIZE);
	ck_assert_int_eq(ring_init(&r, mem, size, 16, cons), -EMSGSIZE);
	ck_assert_int_eq(ring_init(&r, mem + 64, size, 8, cons), 0);
	ck_assert_uint_eq(r.capacity, 8);
	ck_assert_uint_eq(atomic_load(&r.hdr->generation), 1);
	ck_assert_uint_eq(atomic_load(&r.hdr->terminal), 0);
	tu_unmap(mem, 2 * size + RING_CONS_SIZE);
}
END_TEST

START_TEST(space_counts_non_terminal_room)
{
	enum { CAP = 8 };
	struct fixture f;

	fixture_init(&f, CAP);
	ck_assert_uint_eq(ring_space(&f.r), CAP - 1);
	for (uint32_t i = 0; i < CAP - 1; i++) {
		push_ok(&f.r, i, 0);
		ck_assert_uint_eq(ring_space(&f.r), CAP - 2 - i);
	}
	pop_expect(&f.r, 0, 0);
	pop_expect(&f.r, 1, 0);
	ck_assert_uint_eq(ring_space(&f.r), 2);
	push_ok(&f.r, CAP - 1, RING_F_FINAL);
	ck_assert_uint_eq(ring_space(&f.r), 0);
	fixture_fini(&f);
}
END_TEST

START_TEST(reset_starts_a_new_stream)
{
	struct fixture f;
	struct ring_rec out;

	fixture_init(&f, 4);
	push_ok(&f.r, 0, RING_F_FINAL);
	pop_expect(&f.r, 0, RING_F_FINAL);
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -ENODATA);

	ck_assert_uint_eq(ring_reset(&f.r, REQ_ID + 1, getpid(), getpid()), 2);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->request_id), REQ_ID + 1);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->consumer_pid), (uint32_t)getpid());
	ck_assert_uint_eq(atomic_load(&f.r.hdr->producer_start), shm_proc_self_start_time());
	ck_assert_int_eq(ring_try_pop(&f.r, &out), -EAGAIN);
	ck_assert_uint_eq(ring_space(&f.r), 3);
	push_ok(&f.r, 0, 0);
	push_ok(&f.r, 1, RING_F_FINAL);
	pop_expect(&f.r, 0, 0);
	pop_expect(&f.r, 1, RING_F_FINAL);
	ck_assert_uint_eq(ring_reset(&f.r, REQ_ID, 0, 0), 3);
	fixture_fini(&f);
}
END_TEST

static int close_from_child(void *arg)
{
	struct fixture *f = arg;
	struct ring mine;

	if (ring_attach(&mine, f->mem, f->size, f->cons))
		return 1;
	/* the stream's reader knows its generation (libchipd: the submit answer's) */
	ring_set_reader_gen(&mine, atomic_load(&mine.hdr->generation));
	return ring_close_reader(&mine) == 0 ? 0 : 1;
}

START_TEST(reader_close_is_seen_by_producer)
{
	struct fixture f;

	fixture_init(&f, 8);
	ring_reset(&f.r, REQ_ID, getpid(), getpid());
	ck_assert(!ring_reader_closed(&f.r));
	push_ok(&f.r, 0, 0);
	/* The consumer is another process with its own handle on the shared ring. */
	ck_assert_int_eq(tu_wait(tu_fork(close_from_child, &f), PEER_TIMEOUT_MS), 0);
	ck_assert(ring_reader_closed(&f.r));
	ck_assert_uint_eq(atomic_load(&f.r.cons->closed), atomic_load(&f.r.hdr->generation));
	/* Closing again changes nothing; the stream can still be ended normally. */
	ring_close_stream(&f.r, atomic_load(&f.r.hdr->generation));
	ck_assert(ring_reader_closed(&f.r));
	push_ok(&f.r, 1, RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));
	fixture_fini(&f);
}
END_TEST

START_TEST(reset_reopens_a_closed_ring)
{
	struct fixture f;

	fixture_init(&f, 4);
	ring_close_stream(&f.r, atomic_load(&f.r.hdr->generation));
	ck_assert(ring_reader_closed(&f.r));
	ring_reset(&f.r, REQ_ID + 1, getpid(), getpid());
	ck_assert(!ring_reader_closed(&f.r));
	ck_assert_uint_eq(atomic_load(&f.r.cons->closed), 0);
	fixture_fini(&f);
}
END_TEST

START_TEST(stale_close_does_not_close_the_next_stream)
{
	struct fixture f;
	uint32_t old_gen;

	fixture_init(&f, 4);
	old_gen = atomic_load(&f.r.hdr->generation);
	ring_reset(&f.r, REQ_ID + 1, getpid(), getpid());
	/* A closer that read the generation before the reset stores it after. */
	atomic_store(&f.r.cons->closed, old_gen);
	ck_assert(!ring_reader_closed(&f.r));
	ring_close_stream(&f.r, old_gen);
	ck_assert(!ring_reader_closed(&f.r));
	ring_close_stream(&f.r, old_gen + 1);
	ck_assert(ring_reader_closed(&f.r));
	fixture_fini(&f);
}
END_TEST

/* A reader bound to its stream's generation (ring_set_reader_gen) that closes once the
 * owner reset the ring for the next stream closes nothing: it stores its own stream's
 * generation, not the one it finds. Before, it stored the ring's current generation, so
 * a reader whose check of the generation (chipd_stream_close's) came before the reset
 * and whose close came after closed the next stream, which its producer then ends
 * cancelled. Closed before the reset, the reader's own stream is closed. */
START_TEST(bound_reader_close_after_a_reset_closes_nothing)
{
	struct fixture f;

	fixture_init(&f, 4);
	ring_set_reader_gen(&f.r, atomic_load(&f.r.hdr->generation));
	ring_close_reader(&f.r);
	ck_assert(ring_reader_closed(&f.r));
	ring_reset(&f.r, REQ_ID + 1, getpid(), getpid());
	ring_close_reader(&f.r);
	ck_assert_msg(!ring_reader_closed(&f.r), "a stale reader closed the next stream");
	fixture_fini(&f);
}
END_TEST

/* A reader that maps the ring without binding to its stream's generation (a third
 * party of the client, or a reader that never learnt it) closes nothing: a generation it
 * loads at the close may already be the next stream's. Before, ring_close_reader stored
 * the generation it found for an unbound reader, so such a reader closed whatever stream
 * held the ring, the next one after a reset too, and its producer ended it cancelled. The
 * stream's own bound reader, and the owner with the generation it assigned, still close
 * it; a close of another generation is still ignored. */
START_TEST(unbound_reader_closes_nothing)
{
	struct fixture f;
	struct ring unbound, bound;
	uint32_t gen;

	fixture_init(&f, 4);
	gen = ring_reset(&f.r, REQ_ID, getpid(), getpid());
	ck_assert_int_eq(ring_attach(&unbound, f.mem, f.size, f.cons), 0);
	ck_assert_int_eq(ring_close_reader(&unbound), -EINVAL);
	ck_assert_msg(!ring_reader_closed(&f.r), "an unbound reader closed the stream");
	ck_assert_uint_eq(atomic_load(&f.cons->closed), 0);
	/* after a reset for the next stream, too */
	gen = ring_reset(&f.r, REQ_ID + 1, getpid(), getpid());
	(void)ring_close_reader(&unbound);
	ck_assert_msg(!ring_reader_closed(&f.r), "an unbound reader closed the next stream");

	ck_assert_int_eq(ring_bind(&bound, f.mem, 4, f.cons), 0);
	ring_set_reader_gen(&bound, gen - 1); /* the last stream's reader, late */
	(void)ring_close_reader(&bound);
	ck_assert(!ring_reader_closed(&f.r));
	ring_set_reader_gen(&bound, gen);
	ck_assert_int_eq(ring_close_reader(&bound), 0);
	ck_assert(ring_reader_closed(&f.r));
	ring_reset(&f.r, REQ_ID + 2, getpid(), getpid());
	ring_close_stream(&f.r, gen); /* the owner, for the stream it reset since */
	ck_assert(!ring_reader_closed(&f.r));
	fixture_fini(&f);
}
END_TEST

/* The ring the seam resets under its reader (late_tail_store_lands_in_no_next_stream). */
static struct fixture *seam_ring;
static const struct ring *seam_reader;

/* The owner resets the ring for the next stream, whose producer publishes three
 * tokens, all between the stale reader's last look at the generation and its store. */
static void reset_inside_the_pop(const struct ring *r)
{
	if (r != seam_reader)
		return;
	seam_reader = NULL;
	ring_reset(&seam_ring->r, REQ_ID, getpid(), getpid());
	for (uint32_t seq = 0; seq < 3; seq++)
		push_ok(&seam_ring->r, seq, 0);
}

/* A reader of a stream that checked the generation, was descheduled, and stored its
 * tail after the owner reset the ring for the next stream moved that stream's tail: the
 * next reader lost token 0 (it read seq 1 first), and the producer counted a record
 * free that nobody had read. Now the tail word carries its stream's generation and the
 * reader moves it with a CAS that fails once the generation moved: the late store lands
 * nowhere, the stale pop answers -ESTALE, and the next stream reads 0, 1, 2. */
START_TEST(late_tail_store_lands_in_no_next_stream)
{
	struct fixture f;
	struct ring stale, next;
	struct ring_rec out;

	fixture_init(&f, 8);
	ring_reset(&f.r, REQ_ID, getpid(), getpid());
	ck_assert_int_eq(ring_bind(&stale, f.mem, 8, f.cons), 0);
	ring_set_reader_gen(&stale, atomic_load(&f.r.hdr->generation));
	push_ok(&f.r, 0, 0);
	push_ok(&f.r, 1, RING_F_FINAL);

	seam_ring = &f;
	seam_reader = &stale;
	ring_test_before_tail_store = reset_inside_the_pop;
	int rc = ring_try_pop(&stale, &out);
	ring_test_before_tail_store = NULL;
	ck_assert_msg(seam_reader == NULL, "the seam never ran");
	ck_assert_int_eq(rc, -ESTALE);
	ck_assert_int_eq(ring_try_pop(&stale, &out), -ESTALE);

	ck_assert_int_eq(ring_bind(&next, f.mem, 8, f.cons), 0);
	ring_set_reader_gen(&next, atomic_load(&f.r.hdr->generation));
	ck_assert_uint_eq(ring_space(&f.r), 8 - 3 - 1); /* nothing of the new stream read */
	for (uint32_t seq = 0; seq < 3; seq++)
		pop_expect(&next, seq, 0);
	ck_assert_int_eq(ring_try_pop(&next, &out), -EAGAIN);
	fixture_fini(&f);
}
END_TEST

/* @size bytes (a multiple of 64) that end exactly at an inaccessible page: any access
 * past them faults, in every build. */
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

	munmap((char *)mem + size - (map_len - page), map_len);
}

/* A consumer rewrites the header of a ring its producer bound with the capacity it
 * laid out (ring_bind): magic zeroed, capacity raised, generation changed, indices
 * impossible. Every call stays inside the ring (which ends at an inaccessible page) and
 * the impossible indices are errors, not a full ring. */
START_TEST(rewritten_header_stays_inside_the_ring)
{
	enum { CAP = 8 };
	size_t size = ring_size(CAP), map_len;
	void *mem = guarded_alloc(size, &map_len);
	struct ring owner, prod, other;
	struct ring_rec out;
	struct ring_hdr *h = mem;
	static struct ring_cons line __attribute__((aligned(64)));
	struct ring_cons *c = &line;
	const uint64_t far = 0x7ffffffffffffff3ull;

	ck_assert_int_eq(ring_init(&owner, mem, size, CAP, c), 0);
	ck_assert_int_eq(ring_bind(&prod, mem, CAP, c), 0);
	ck_assert_int_eq(ring_check(&prod), 0);
	ck_assert_int_eq(ring_bind(&other, mem, 3, c), -EINVAL);
	ck_assert_int_eq(ring_bind(&other, (char *)mem + 8, CAP, c), -EINVAL);
	(void)ring_reset(&owner, REQ_ID, getpid(), getpid());

	h->magic = 0;
	h->version = 77;
	h->capacity = RING_MAX_CAPACITY;
	h->rec_size = 4096;
	atomic_store(&h->generation, 0xdeadbeefu);
	ck_assert_int_eq(ring_check(&prod), -EBADMSG);
	ck_assert_int_eq(ring_attach(&other, mem, 1u << 30, c), -EBADMSG);

	/* a tail past head, then more than capacity records in use */
	atomic_store(&h->head, far);
	atomic_store(&c->tail, far + 5);
	struct ring_rec tok = rec_of(0, 0), fin = rec_of(1, RING_F_FINAL);
	ck_assert_int_eq(ring_push(&prod, &tok), -EBADMSG);
	ck_assert_int_eq(ring_push(&prod, &fin), -EBADMSG);
	ck_assert_uint_eq(ring_space(&prod), 0);
	ck_assert_int_eq(ring_try_pop(&owner, &out), -EBADMSG);
	atomic_store(&c->tail, far - 1000);
	ck_assert_int_eq(ring_push(&prod, &tok), -EBADMSG);
	ck_assert_int_eq(ring_try_pop(&owner, &out), -EBADMSG);
	ck_assert(!ring_finished(&prod));
	ck_assert(!ring_drained(&prod));

	/* indices a stream can have, anywhere in 64 bits: records go to head & (CAP - 1) */
	atomic_store(&c->tail, far);
	for (uint32_t i = 0; i < 4 * CAP; i++) {
		struct ring_rec r = rec_of(i, 0);

		ck_assert_int_eq(ring_push(&prod, &r), 0);
		pop_expect(&owner, i, 0);
	}
	ck_assert_int_eq(ring_push(&prod, &fin), 0);
	ck_assert(ring_finished(&prod));
	ck_assert_uint_eq(ring_end_flags(&owner), RING_F_FINAL);
	pop_expect(&owner, 1, RING_F_FINAL);
	ck_assert(ring_drained(&owner));

	/* a claimed terminal with none published, a dead producer: take-over releases it */
	atomic_store(&h->terminal, 1);
	atomic_store(&h->producer_pid, 0x7ffffffeu);
	atomic_store(&h->head, far);
	atomic_store(&c->tail, far);
	ck_assert_int_eq(ring_take_over(&owner), 0);
	ring_close_stream(&owner, atomic_load(&h->generation));
	ck_assert_int_eq(ring_push(&owner, &fin), 0);
	ck_assert(ring_finished(&owner));

	/* the producer's geometry is its own: a raised capacity in the header moves no
	 * record past the ring, whatever head says */
	(void)ring_reset(&owner, REQ_ID, getpid(), getpid());
	h->capacity = RING_MAX_CAPACITY;
	for (uint32_t i = 0; i < CAP; i++) {
		atomic_store(&h->head, (uint64_t)i * 1000003u);
		atomic_store(&c->tail, (uint64_t)i * 1000003u);
		ck_assert_int_eq(ring_push(&prod, &tok), 0);
	}
	guarded_free(mem, size, map_len);
}
END_TEST

/* RING_VERSION 2: the producer part (header and records) and the consumer line live
 * apart. Here the consumer sees the producer part through a read-only mapping of the
 * same memfd (as a client maps the node region) and its line in another mapping (the
 * exchange region): a whole stream, a reader close and a reset work, and the consumer
 * writes nothing of the producer part (its mapping would fault). */
START_TEST(split_producer_part_and_consumer_line)
{
	enum { CAP = 8 };
	size_t size = ring_size(CAP);
	int fd = memfd_create("ring-split", MFD_CLOEXEC);
	struct ring owner, reader;
	struct ring_cons *line;
	struct ring_rec out;
	void *rw, *ro;

	ck_assert_uint_eq(RING_VERSION, 4);
	ck_assert_uint_eq(sizeof(struct ring_rec), 64);
	ck_assert_uint_eq(sizeof(struct ring_hdr), 128);
	ck_assert_uint_eq(RING_CONS_SIZE, 64);
	ck_assert_uint_eq(size, 128 + CAP * sizeof(struct ring_rec));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ro = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(rw != MAP_FAILED && ro != MAP_FAILED);
	line = tu_shared(RING_CONS_SIZE);

	ck_assert_int_eq(ring_init(&owner, rw, size, CAP, line), 0);
	ck_assert_ptr_eq(owner.cons, line);
	(void)ring_reset(&owner, REQ_ID, getpid(), getpid());
	ck_assert_int_eq(ring_attach(&reader, ro, size, line), 0);
	ck_assert_uint_eq(reader.capacity, CAP);
	for (uint32_t i = 0; i < 3 * CAP; i++) { /* laps: the tail moves in the line only */
		push_ok(&owner, i, 0);
		pop_expect(&reader, i, 0);
	}
	ck_assert_uint_eq(atomic_load(&line->tail), RING_TAIL(2, 3 * CAP));
	ck_assert_uint_eq(atomic_load(&owner.hdr->head), 3 * CAP);
	ck_assert_int_eq(ring_close_reader(&reader), -EINVAL); /* bound to no stream */
	ck_assert(!ring_reader_closed(&owner));
	ring_set_reader_gen(&reader, atomic_load(&owner.hdr->generation));
	ck_assert_int_eq(ring_close_reader(&reader), 0);
	ck_assert(ring_reader_closed(&owner));
	ck_assert_uint_eq(atomic_load(&line->closed), atomic_load(&owner.hdr->generation));
	push_ok(&owner, 3 * CAP, RING_F_FINAL);
	pop_expect(&reader, 3 * CAP, RING_F_FINAL);
	ck_assert_int_eq(ring_try_pop(&reader, &out), -ENODATA);
	ck_assert(ring_drained(&owner));
	/* the owner's reset empties the line too, its tail word in the new generation */
	ck_assert_uint_eq(ring_reset(&owner, REQ_ID + 1, getpid(), getpid()), 3);
	ck_assert_uint_eq(atomic_load(&line->tail), RING_TAIL(3, 0));
	ck_assert_uint_eq(atomic_load(&line->closed), 0);
	ck_assert(!ring_reader_closed(&reader));
	ring_set_reader_gen(&reader, 3); /* the reader of the new stream */
	push_ok(&owner, 0, RING_F_FINAL);
	pop_expect(&reader, 0, RING_F_FINAL);
	/* a line that is missing or misaligned is refused */
	ck_assert_int_eq(ring_bind(&reader, ro, CAP, NULL), -EINVAL);
	ck_assert_int_eq(ring_attach(&reader, ro, size, (struct ring_cons *)(void *)((char *)line + 8)),
			 -EMSGSIZE);
	tu_unmap(line, RING_CONS_SIZE);
	munmap(ro, size);
	munmap(rw, size);
	close(fd);
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *s = suite_create("ring");
	const struct tu_case cases[] = {
	    {"push_pop_round_trip", push_pop_round_trip},
	    {"wrap_around_keeps_sequence", wrap_around_keeps_sequence},
	    {"full_ring_keeps_room_for_terminal", full_ring_keeps_room_for_terminal},
	    {"terminal_written_exactly_once", terminal_written_exactly_once},
	    {"terminal_pending_is_not_end_of_stream", terminal_pending_is_not_end_of_stream},
	    {"error_record_carries_code", error_record_carries_code},
	    {"end_flags_say_how_the_stream_ended", end_flags_say_how_the_stream_ended},
	    {"push_stamps_ts", push_stamps_ts},
	    {"pop_times_out_at_deadline", pop_times_out_at_deadline},
	    {"attach_validates_layout", attach_validates_layout},
	    {"init_validates_capacity_and_memory", init_validates_capacity_and_memory},
	    {"space_counts_non_terminal_room", space_counts_non_terminal_room},
	    {"reset_starts_a_new_stream", reset_starts_a_new_stream},
	    {"reader_close_is_seen_by_producer", reader_close_is_seen_by_producer},
	    {"reset_reopens_a_closed_ring", reset_reopens_a_closed_ring},
	    {"stale_close_does_not_close_the_next_stream",
	     stale_close_does_not_close_the_next_stream},
	    {"bound_reader_close_after_a_reset_closes_nothing",
	     bound_reader_close_after_a_reset_closes_nothing},
	    {"unbound_reader_closes_nothing", unbound_reader_closes_nothing},
	    {"late_tail_store_lands_in_no_next_stream", late_tail_store_lands_in_no_next_stream},
	    {"rewritten_header_stays_inside_the_ring", rewritten_header_stays_inside_the_ring},
	    {"split_producer_part_and_consumer_line", split_producer_part_and_consumer_line},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	ring_add_peer_tcases(s);
	return s;
}

int main(void)
{
	return tu_run(ring_suite());
}
