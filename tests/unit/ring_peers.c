/* ring_peers.c - the two sides of a token ring in different processes or threads: a
 * consumer asleep in the futex woken by another process's push, a producer that dies,
 * the take-over of its ring, and long streams without loss (check_ring). */
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

static bool consumer_asleep(void *arg)
{
	struct ring *r = arg;

	return atomic_load_explicit(&r->cons->wake.sleepers, memory_order_seq_cst) != 0;
}

/* Child producer: waits for the consumer to sleep in the futex, then pushes. */
static int push_when_consumer_sleeps(void *arg)
{
	struct ring *r = arg;
	struct ring_rec rec = rec_of(0, 0);

	if (!tu_eventually(consumer_asleep, r, PEER_TIMEOUT_MS))
		return 1;
	return ring_push(r, &rec) == 0 ? 0 : 2;
}

START_TEST(pop_wakes_on_push_from_other_process)
{
	struct fixture f;
	struct ring_rec out;

	fixture_init(&f, 4);
	ring_set_spin(&f.r, 0); /* straight to the futex */
	pid_t child = tu_fork(push_when_consumer_sleeps, &f.r);
	ring_reset(&f.r, REQ_ID, child, getpid());
	uint64_t deadline = shm_deadline_in(10000ull * MS);

	ck_assert_int_eq(ring_pop(&f.r, &out, deadline), 0);
	ck_assert_uint_lt(shm_now_ns(), deadline);
	ck_assert_uint_eq(out.seq, 0);
	ck_assert_uint_eq(out.value, token_of(0));
	/* The push saw the sleeper and woke it through the shared futex. */
	ck_assert_uint_ge(atomic_load(&f.r.cons->wake.seq), 1);
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	fixture_fini(&f);
}
END_TEST

/* Shared between a test and its producer child: the child waits for go. */
struct gate {
	_Atomic uint32_t go;
};

static struct gate *gate_new(void)
{
	return tu_shared(sizeof(struct gate));
}

static void gate_open(struct gate *g)
{
	atomic_store(&g->go, 1);
	shm_futex_wake(&g->go, 1);
}

static bool gate_wait(struct gate *g)
{
	uint64_t deadline = shm_deadline_in((uint64_t)PEER_TIMEOUT_MS * MS);

	while (atomic_load(&g->go) == 0)
		if (shm_futex_wait(&g->go, 0, deadline) == -ETIMEDOUT)
			return false;
	return true;
}

struct producer_job {
	struct ring *r;
	struct gate *gate;
	uint32_t records;
	bool claim_terminal; /* then die as if killed between claim and publish */
};

/* Child: pushes @records tokens once the test has registered it, then dies
 * without ending the stream. */
static int produce_and_die(void *arg)
{
	struct producer_job *job = arg;

	if (!gate_wait(job->gate))
		return 1;
	for (uint32_t i = 0; i < job->records; i++) {
		struct ring_rec rec = rec_of(i, 0);

		if (ring_push(job->r, &rec) != 0)
			return 2;
	}
	if (job->claim_terminal) {
		/* What ring_push does first for a terminal record. */
		atomic_store(&job->r->hdr->terminal, 1);
		raise(SIGKILL);
	}
	return 0;
}

/* Forks a producer that pushes @records and dies; returns it alive, registered. */
static pid_t start_doomed_producer(struct fixture *f, struct producer_job *job, uint32_t records,
				   bool claim_terminal)
{
	job->r = &f->r;
	job->gate = gate_new();
	job->records = records;
	job->claim_terminal = claim_terminal;

	pid_t child = tu_fork(produce_and_die, job);
	ring_reset(&f->r, REQ_ID, child, getpid());
	ck_assert_uint_eq(atomic_load(&f->r.hdr->producer_pid), (uint32_t)child);
	return child;
}

START_TEST(pop_reports_dead_producer)
{
	struct fixture f;
	struct producer_job job;
	struct ring_rec out;

	fixture_init(&f, 8);
	pid_t child = start_doomed_producer(&f, &job, 3, false);
	gate_open(job.gate);
	/* What it published before dying is still delivered, then the death. */
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert_int_eq(ring_pop(&f.r, &out, shm_deadline_in(10000ull * MS)), 0);
		ck_assert_uint_eq(out.seq, i);
	}
	uint64_t deadline = shm_deadline_in(10000ull * MS);
	ck_assert_int_eq(ring_pop(&f.r, &out, deadline), -EOWNERDEAD);
	ck_assert_uint_lt(shm_now_ns(), deadline - 5000ull * MS);
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	ck_assert_int_eq(ring_pop(&f.r, &out, deadline), -EOWNERDEAD); /* reaped: still dead */
	tu_unmap(job.gate, sizeof(*job.gate));
	fixture_fini(&f);
}
END_TEST

/* Child supervisor: takes the dead producer's ring over and ends the stream. */
static int take_over_and_fail_stream(void *arg)
{
	struct ring *r = arg;
	struct ring_rec rec = rec_of(99, RING_F_ERROR | RING_F_CODE(CODE_WORKER_LOST));

	if (ring_take_over(r) != 0)
		return 1;
	if (atomic_load(&r->hdr->producer_pid) != (uint32_t)getpid())
		return 2;
	return ring_push(r, &rec) == 0 ? 0 : 3;
}

/* The dead producer's consumer (this process) gets its stream ended by a
 * supervisor (a child). */
static void check_take_over(bool claim_terminal)
{
	struct fixture f;
	struct producer_job job;
	struct ring_rec out;

	fixture_init(&f, 8);
	pid_t child = start_doomed_producer(&f, &job, 2, claim_terminal);
	/* Alive: nobody may take its ring. */
	ck_assert_int_eq(ring_take_over(&f.r), -EBUSY);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->producer_pid), (uint32_t)child);
	gate_open(job.gate);
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), claim_terminal ? 128 + SIGKILL : 0);

	pid_t sup = tu_fork(take_over_and_fail_stream, &f.r);
	ck_assert_int_eq(tu_wait(sup, PEER_TIMEOUT_MS), 0);
	/* The consumer sees the dead producer's records, then the supervisor's error. */
	for (uint32_t i = 0; i < 2; i++) {
		ck_assert_int_eq(ring_pop(&f.r, &out, shm_deadline_in(5000ull * MS)), 0);
		ck_assert_uint_eq(out.seq, i);
	}
	ck_assert_int_eq(ring_pop(&f.r, &out, shm_deadline_in(5000ull * MS)), 0);
	ck_assert_uint_eq(out.seq, 99);
	ck_assert(out.flags & RING_F_ERROR);
	ck_assert_uint_eq(RING_CODE_OF(out.flags), CODE_WORKER_LOST);
	ck_assert_int_eq(ring_pop(&f.r, &out, shm_deadline_in(5000ull * MS)), -ENODATA);
	tu_unmap(job.gate, sizeof(*job.gate));
	fixture_fini(&f);
}

START_TEST(take_over_only_after_producer_death)
{
	check_take_over(false);
}
END_TEST

START_TEST(take_over_releases_unpublished_terminal_claim)
{
	check_take_over(true);
}
END_TEST

START_TEST(take_over_own_ring)
{
	struct fixture f;

	fixture_init(&f, 4);
	ck_assert_int_eq(ring_take_over(&f.r), 0); /* no producer recorded */
	ck_assert_uint_eq(atomic_load(&f.r.hdr->producer_pid), (uint32_t)getpid());
	ck_assert_uint_eq(atomic_load(&f.r.hdr->producer_start), shm_proc_self_start_time());
	ck_assert_int_eq(ring_take_over(&f.r), 0); /* already ours */
	fixture_fini(&f);
}
END_TEST

/* Pushes @n tokens then FINAL, never blocking inside the ring: a full ring is
 * retried (yielding), as a worker would retry on its next step. Returns 0, or
 * non-zero on an unexpected result or when the consumer stalls for good. */
static int produce_stream(struct ring *r, uint32_t n)
{
	uint64_t give_up = shm_deadline_in((uint64_t)STREAM_TIMEOUT_S * 1000u * MS);
	const struct timespec backoff = {.tv_nsec = 20 * 1000};

	for (uint32_t i = 0; i <= n; i++) {
		struct ring_rec rec = rec_of(i, i == n ? RING_F_FINAL : 0);
		int rc;
		unsigned tries = 0;

		while ((rc = ring_push(r, &rec)) == -EAGAIN) {
			if (++tries % 64 != 0) {
				shm_cpu_relax();
				continue;
			}
			if (shm_now_ns() > give_up)
				return 3;
			/* The reader may share our core (a loaded box): after a few
			 * yields, get off the CPU for a moment so it can drain. */
			if (tries < 64 * 8)
				sched_yield();
			else
				nanosleep(&backoff, NULL);
		}
		if (rc != 0)
			return 2;
	}
	return 0;
}

struct stream_job {
	struct ring *r;
	struct gate *gate;
};

/* Child: streams once the test has registered it as the ring's producer. */
static int stream_child(void *arg)
{
	struct stream_job *job = arg;

	if (!gate_wait(job->gate))
		return 1;
	return produce_stream(job->r, STREAM_RECORDS);
}

/* Reads @n tokens and the FINAL record; every one in order, none lost or repeated. */
static void consume_stream(struct ring *r, uint32_t n)
{
	uint64_t deadline = shm_deadline_in((uint64_t)STREAM_TIMEOUT_S * 1000u * MS);
	struct ring_rec out;

	for (uint32_t i = 0; i <= n; i++) {
		int rc = ring_pop(r, &out, deadline);

		if (rc != 0 || out.seq != i || out.value != token_of(i) ||
		    out.request_id != REQ_ID || out.flags != (i == n ? RING_F_FINAL : 0u))
			ck_abort_msg("record %u: rc %d seq %u value %#llx flags %#x", i, rc,
				     out.seq, (unsigned long long)out.value, out.flags);
	}
	ck_assert_int_eq(ring_pop(r, &out, deadline), -ENODATA);
}

START_TEST(two_processes_stream_without_loss)
{
	struct fixture f;

	struct stream_job job;

	fixture_init(&f, STREAM_CAPACITY);
	job.r = &f.r;
	job.gate = gate_new();
	/* Registered as the producer before it starts: if it dies, we hear of it at
	 * once instead of at the deadline. */
	pid_t child = tu_fork(stream_child, &job);
	ring_reset(&f.r, REQ_ID, child, getpid());
	gate_open(job.gate);
	consume_stream(&f.r, STREAM_RECORDS);
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	ck_assert_uint_eq(atomic_load(&f.r.hdr->head), STREAM_RECORDS + 1);
	tu_unmap(job.gate, sizeof(*job.gate));
	fixture_fini(&f);
}
END_TEST

static void *stream_thread(void *arg)
{
	return (void *)(intptr_t)produce_stream(arg, THREAD_STREAM_RECORDS);
}

START_TEST(two_threads_stream_without_loss)
{
	struct fixture f;
	pthread_t t;
	void *res;

	fixture_init(&f, STREAM_CAPACITY);
	ring_reset(&f.r, REQ_ID, getpid(), getpid());
	struct ring producer = f.r; /* each side has its own handle */
	ck_assert_int_eq(pthread_create(&t, NULL, stream_thread, &producer), 0);
	consume_stream(&f.r, THREAD_STREAM_RECORDS);
	ck_assert_int_eq(pthread_join(t, &res), 0);
	ck_assert_ptr_null(res);
	fixture_fini(&f);
}
END_TEST

/* Resets of a ring while its reader polls it, bound to the stream it was given. */
#define RESET_ROUNDS 50000u
#define RESET_SECONDS 8u

struct reset_job {
	struct ring owner;	   /* the owner's handle, also the producer's */
	_Atomic uint32_t gen;	   /* the stream the owner set up last (its generation) */
	_Atomic bool stop;
	uint32_t rounds;
};

/* Owner and producer: each round resets the ring for request REQ_ID + round, hands its
 * generation to the reader, pushes two records and waits until the reader took them;
 * the next reset then comes while the reader polls the emptied ring. */
static void *reset_rounds(void *arg)
{
	struct reset_job *j = arg;
	uint64_t until = shm_now_ns() + RESET_SECONDS * 1000ull * MS;

	for (j->rounds = 0; j->rounds < RESET_ROUNDS && shm_now_ns() < until; j->rounds++) {
		uint32_t gen = ring_reset(&j->owner, REQ_ID + j->rounds, getpid(), getpid());

		atomic_store_explicit(&j->gen, gen, memory_order_release);
		for (uint32_t seq = 0; seq < 2; seq++) {
			struct ring_rec rec = rec_of(seq, 0);

			rec.request_id = REQ_ID + j->rounds;
			if (ring_push(&j->owner, &rec) != 0)
				break;
		}
		while (RING_TAIL_POS(
			   atomic_load_explicit(&j->owner.cons->tail, memory_order_acquire)) < 2 &&
		       shm_now_ns() < until + PEER_TIMEOUT_MS * MS)
			sched_yield();
	}
	atomic_store(&j->stop, true);
	return NULL;
}

/* A reader bound to its stream (ring_set_reader_gen) that polls while the owner resets
 * the ring sees its own records, then nothing or -ESTALE: never a record of another
 * request, never the -EBADMSG of broken indices, whatever point of the reset its
 * look falls on. Before, a look between the reset's head = 0 and its generation bump
 * read the old tail with the new head, and answered -EBADMSG (libchipd: a ring error,
 * code internal) for a stream that was only given to another. */
START_TEST(reader_polling_through_resets_sees_only_its_stream)
{
	struct fixture f;
	struct reset_job job;
	struct ring reader;
	struct ring_rec out;
	uint64_t stale = 0, broken = 0, records = 0;
	pthread_t t;

	fixture_init(&f, 4);
	memset(&job, 0, sizeof(job));
	job.owner = f.r;
	reader = f.r;
	atomic_init(&job.gen, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, reset_rounds, &job), 0);
	while (!atomic_load(&job.stop)) {
		uint32_t gen = atomic_load_explicit(&job.gen, memory_order_acquire);
		int rc;

		if (gen == 0)
			continue;
		ring_set_reader_gen(&reader, gen);
		rc = ring_try_pop(&reader, &out);
		if (rc == 0) {
			/* the first reset makes generation 2, for round 0 */
			ck_assert_uint_eq(out.request_id, REQ_ID + gen - 2);
			records++;
		} else if (rc == -ESTALE) {
			stale++;
		} else if (rc == -EBADMSG) {
			broken++;
		} else {
			ck_assert_int_eq(rc, -EAGAIN);
		}
	}
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(broken == 0,
		      "%llu looks of %u resets found broken indices (%llu stale, %llu records)",
		      (unsigned long long)broken, job.rounds, (unsigned long long)stale,
		      (unsigned long long)records);
	fixture_fini(&f);
}
END_TEST

void ring_add_peer_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"pop_wakes_on_push_from_other_process", pop_wakes_on_push_from_other_process},
	    {"pop_reports_dead_producer", pop_reports_dead_producer},
	    {"take_over_only_after_producer_death", take_over_only_after_producer_death},
	    {"take_over_releases_unpublished_terminal_claim",
	     take_over_releases_unpublished_terminal_claim},
	    {"take_over_own_ring", take_over_own_ring},
	};
	const struct tu_case streams[] = {
	    {"two_processes_stream_without_loss", two_processes_stream_without_loss},
	    {"two_threads_stream_without_loss", two_threads_stream_without_loss},
	    {"reader_polling_through_resets_sees_only_its_stream",
	     reader_polling_through_resets_sees_only_its_stream},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	tu_add_cases_timeout(s, streams, sizeof(streams) / sizeof(streams[0]),
			     STREAM_TIMEOUT_S + 15);
}
