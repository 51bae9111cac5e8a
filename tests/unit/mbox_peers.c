/* mbox_peers.c - pins the mailbox with real processes and threads: dead clients
 * and servers recovered, futex sleeping across processes, an idle server that stops
 * spinning, and streams with nothing lost or duplicated. */
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
#include <time.h>
#include <unistd.h>

/* ---- processes that die ---- */

struct child_ctx {
	struct fixture *fx;
	enum mbox_state stop_in; /* the state the child leaves its slot in */
	_Atomic int *ready;
};

static int client_then_hang(void *arg)
{
	struct child_ctx *c = arg;
	struct mbox_ticket t;

	if (mbox_claim(&c->fx->mb, &t))
		return 1;
	if (c->stop_in != MBOX_CLAIMED && mbox_post(&c->fx->mb, t, 1))
		return 2;
	atomic_store(c->ready, 1);
	for (;;)
		pause();
}

static bool is_ready(void *arg)
{
	return atomic_load((_Atomic int *)arg) != 0;
}

static bool pid_gone(void *arg)
{
	return !shm_proc_alive(*(pid_t *)arg, 0);
}

/* Starts a client that leaves slot 0 in @st, then kills it. */
static pid_t dead_client(struct fixture *fx, enum mbox_state st, _Atomic int *ready)
{
	struct child_ctx c = {.fx = fx, .stop_in = st, .ready = ready};

	atomic_store(ready, 0);
	pid_t pid = tu_fork(client_then_hang, &c);
	ck_assert(tu_eventually(is_ready, ready, 5000));
	return pid;
}

START_TEST(dead_client_reaped_in_claimed_posted_done)
{
	struct fixture fx;
	_Atomic int *ready = tu_shared(4096);
	enum mbox_state states[] = {MBOX_CLAIMED, MBOX_POSTED, MBOX_DONE};

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	for (int i = 0; i < 3; i++) {
		pid_t pid = dead_client(&fx, states[i], ready);
		if (states[i] == MBOX_DONE) {
			struct mbox_event ev = next_event(&fx);
			ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 0), 0);
		}
		ck_assert_int_eq(state_of(&fx, 0), states[i]);
		uint32_t gen = gen_of(&fx, 0);
		ck_assert_int_eq(mbox_reap(&fx.mb), 0); /* alive: untouched */
		ck_assert_int_eq(state_of(&fx, 0), states[i]);
		/* Not reaped by waitpid yet: a zombie counts as dead too. */
		kill(pid, SIGKILL);
		ck_assert(tu_eventually(pid_gone, &pid, 5000));
		ck_assert_int_eq(mbox_reap(&fx.mb), 1);
		ck_assert_int_eq(state_of(&fx, 0), MBOX_FREE);
		ck_assert_uint_eq(gen_of(&fx, 0), gen + 1);
		tu_kill(pid);
	}
	fx_fini(&fx);
	tu_unmap(ready, 4096);
}
END_TEST

START_TEST(dead_client_taken_becomes_reset_for_server)
{
	struct fixture fx;
	_Atomic int *ready = tu_shared(4096);

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	pid_t pid = dead_client(&fx, MBOX_POSTED, ready);
	struct mbox_event ev = next_event(&fx);
	tu_kill(pid);
	/* not freed yet: the server's acknowledgement frees (and counts) it */
	ck_assert_int_eq(mbox_reap(&fx.mb), 0);
	ck_assert_int_eq(state_of(&fx, 0), MBOX_RESET);
	struct mbox_event reset = next_event(&fx);
	ck_assert_int_eq(reset.kind, MBOX_EV_RESET);
	ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 0), -ECANCELED);
	ck_assert_int_eq(state_of(&fx, 0), MBOX_FREE);
	fx_fini(&fx);
	tu_unmap(ready, 4096);
}
END_TEST

static int server_takes_then_hangs(void *arg)
{
	struct child_ctx *c = arg;
	struct mbox_event ev;

	if (mbox_server_attach(&c->fx->mb) < 0)
		return 1;
	atomic_store(c->ready, 1);
	if (mbox_server_next(&c->fx->mb, &ev, shm_deadline_in(5000 * MS)))
		return 2;
	atomic_store(c->ready, 2);
	for (;;)
		pause();
}

static bool taken(void *arg)
{
	return atomic_load((_Atomic int *)arg) == 2;
}

START_TEST(server_killed_while_taken_slot_recovered)
{
	struct fixture fx;
	_Atomic int *ready = tu_shared(4096);
	struct child_ctx c = {.fx = &fx, .ready = ready};

	fx_init(&fx, 2, 64, 64);
	pid_t server = tu_fork(server_takes_then_hangs, &c);
	ck_assert(tu_eventually(is_ready, ready, 5000));
	struct mbox_ticket t = post_text(&fx, "doomed");
	ck_assert(tu_eventually(taken, ready, 5000));
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_TAKEN);

	kill(server, SIGKILL);
	uint64_t start = shm_now_ns();
	/* The client notices within a sleep slice, long before its deadline. */
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(10000 * MS)), -EPIPE);
	ck_assert_uint_lt(shm_now_ns() - start, 2000 * MS);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 0);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	tu_kill(server);

	/* The slot is reusable with a new server. */
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	struct mbox_ticket t2 = post_text(&fx, "again");
	struct mbox_event ev = next_event(&fx);
	ck_assert_int_eq(mbox_answer(&fx.mb, ev.t, 0), 0);
	ck_assert_int_eq(mbox_wait(&fx.mb, t2, shm_deadline_in(1000 * MS)), 0);
	ck_assert_int_eq(mbox_release(&fx.mb, t2), 0);
	fx_fini(&fx);
	tu_unmap(ready, 4096);
}
END_TEST

START_TEST(restarted_server_recovers_taken_slots)
{
	struct fixture fx;
	_Atomic int *ready = tu_shared(4096);
	struct child_ctx c = {.fx = &fx, .ready = ready};

	fx_init(&fx, 2, 64, 64);
	pid_t server = tu_fork(server_takes_then_hangs, &c);
	ck_assert(tu_eventually(is_ready, ready, 5000));
	struct mbox_ticket t = post_text(&fx, "lost");
	ck_assert(tu_eventually(taken, ready, 5000));
	ck_assert_int_eq(mbox_server_attach(&fx.mb), -EBUSY); /* the old one lives */
	tu_kill(server);
	uint32_t epoch = atomic_load(&fx.mb.hdr->server_epoch);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 1);
	ck_assert_uint_eq(atomic_load(&fx.mb.hdr->server_epoch), epoch + 1);
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(1000 * MS)), -ECONNRESET);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), -ESTALE);
	ck_assert_int_eq(state_of(&fx, t.slot), MBOX_FREE);
	fx_fini(&fx);
	tu_unmap(ready, 4096);
}
END_TEST

START_TEST(server_detach_wakes_waiting_client)
{
	struct fixture fx;

	fx_init(&fx, 1, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	struct mbox_ticket t = post_text(&fx, "x");
	next_event(&fx);
	mbox_server_detach(&fx.mb);
	ck_assert_int_eq(mbox_wait(&fx.mb, t, shm_deadline_in(5000 * MS)), -EPIPE);
	ck_assert_int_eq(mbox_give_up(&fx.mb, t), 0);
	fx_fini(&fx);
}
END_TEST

/* ---- sleeping, idling ---- */

static int echo_server(void *arg)
{
	struct child_ctx *c = arg;
	struct mbox_event ev;

	mbox_set_spin(&c->fx->mb, 0);
	if (mbox_server_attach(&c->fx->mb) < 0)
		return 1;
	atomic_store(c->ready, 1);
	for (;;) {
		int rc = mbox_server_next(&c->fx->mb, &ev, shm_deadline_in(5000 * MS));
		if (rc == -ETIMEDOUT)
			return 0;
		if (rc)
			return 2;
		if (ev.kind == MBOX_EV_RESET) {
			mbox_ack_reset(&c->fx->mb, ev.t);
			continue;
		}
		if (ev.len == 4 && memcmp(ev.req, "quit", 4) == 0) {
			mbox_answer(&c->fx->mb, ev.t, 0);
			return 0;
		}
		mbox_answer_copy(&c->fx->mb, ev.t, ev.req, ev.len);
	}
}

START_TEST(futex_sleep_path_across_processes)
{
	struct fixture fx;
	_Atomic int *ready = tu_shared(4096);
	struct child_ctx c = {.fx = &fx, .ready = ready};
	char out[64];
	uint32_t n;

	fx_init(&fx, 4, 64, 64);
	mbox_set_spin(&fx.mb, 0); /* never spin: every wait sleeps on the futex */
	pid_t server = tu_fork(echo_server, &c);
	ck_assert(tu_eventually(is_ready, ready, 5000));
	for (int i = 0; i < 2000; i++) {
		char msg[16];
		int len = snprintf(msg, sizeof(msg), "m%d", i);
		ck_assert_int_eq(mbox_call(&fx.mb, msg, (uint32_t)len, out, sizeof(out), &n,
					   shm_deadline_in(5000 * MS)),
				 0);
		ck_assert_uint_eq(n, (uint32_t)len);
		ck_assert(memcmp(out, msg, n) == 0);
	}
	ck_assert_int_eq(
	    mbox_call(&fx.mb, "quit", 4, out, sizeof(out), &n, shm_deadline_in(5000 * MS)), 0);
	ck_assert_int_eq(tu_wait(server, 5000), 0);
	fx_fini(&fx);
	tu_unmap(ready, 4096);
}
END_TEST

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

START_TEST(idle_server_stops_spinning)
{
	struct fixture fx;
	struct mbox_event ev;

	fx_init(&fx, 8, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	uint64_t cpu0 = thread_cpu_ns(), wall0 = shm_now_ns();
	ck_assert_int_eq(mbox_server_next(&fx.mb, &ev, shm_deadline_in(400 * MS)), -ETIMEDOUT);
	uint64_t cpu = thread_cpu_ns() - cpu0, wall = shm_now_ns() - wall0;
	ck_assert_uint_ge(wall, 400 * MS);
	/* The spin budget is 50 us; the rest of the 400 ms is asleep. Sanitizers and a
	 * loaded machine inflate CPU time, hence the generous bound. */
	ck_assert_msg(cpu < 60 * MS, "idle server used %llu ns of CPU in %llu ns",
		      (unsigned long long)cpu, (unsigned long long)wall);
	fx_fini(&fx);
}
END_TEST

struct interrupt_ctx {
	struct fixture *fx;
	int rc;
	uint64_t waited_ns;
};

static void *interrupted_server(void *arg)
{
	struct interrupt_ctx *c = arg;
	struct mbox_event ev;
	uint64_t t0 = shm_now_ns();

	c->rc = mbox_server_next(&c->fx->mb, &ev, shm_deadline_in(10000 * MS));
	c->waited_ns = shm_now_ns() - t0;
	return NULL;
}

/* A server thread asleep on the doorbell with a 10 s deadline leaves at once when
 * another thread interrupts it (a supervisor stopping its router), and stays out. */
START_TEST(interrupt_ends_a_sleeping_server_wait)
{
	struct fixture fx;
	struct interrupt_ctx c = {.fx = &fx};
	struct mbox_event ev;
	pthread_t th;

	fx_init(&fx, 8, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, interrupted_server, &c), 0);
	usleep(50 * 1000); /* past its spin: asleep in FUTEX_WAIT */
	mbox_server_interrupt(&fx.mb);
	pthread_join(th, NULL);
	ck_assert_int_eq(c.rc, -EINTR);
	ck_assert_msg(c.waited_ns < 5000 * MS, "interrupted wait took %llu ns",
		      (unsigned long long)c.waited_ns);
	ck_assert_int_eq(mbox_server_next(&fx.mb, &ev, shm_deadline_in(10000 * MS)), -EINTR);
	fx_fini(&fx);
}
END_TEST

/* ---- the multi-process stream ---- */

#define STREAM_CLIENTS	2
#define STREAM_SLOTS	64
#define STREAM_MESSAGES 100000u

struct stream_msg {
	uint32_t client;
	uint32_t seq;
};

struct stream_ctx {
	struct fixture *fx;
	uint32_t client;
	_Atomic uint8_t *seen; /* [client][seq] times served, in shared memory */
};

/* Keeps up to STREAM_SLOTS requests in flight and checks every answer. */
static int stream_client(void *arg)
{
	struct stream_ctx *c = arg;
	struct mbox *mb = &c->fx->mb;
	struct mbox_ticket inflight[STREAM_SLOTS];
	uint32_t seq_of[STREAM_SLOTS];
	uint32_t next = 0, done = 0, n = 0;

	while (done < STREAM_MESSAGES) {
		while (next < STREAM_MESSAGES && n < STREAM_SLOTS / STREAM_CLIENTS) {
			struct mbox_ticket t;
			if (mbox_claim(mb, &t))
				break;
			struct stream_msg m = {.client = c->client, .seq = next};
			memcpy(mbox_req_buf(mb, t), &m, sizeof(m));
			if (mbox_post(mb, t, sizeof(m)))
				return 10;
			inflight[n] = t;
			seq_of[n++] = next++;
		}
		if (n == 0)
			return 11;
		/* Complete the oldest; the others may finish in any order meanwhile. */
		const void *answer;
		uint32_t len;
		struct stream_msg back;
		if (mbox_wait(mb, inflight[0], shm_deadline_in(10000ull * MS)))
			return 12;
		if (mbox_response(mb, inflight[0], &answer, &len) || len != sizeof(back))
			return 13;
		memcpy(&back, answer, sizeof(back));
		if (back.client != c->client || back.seq != seq_of[0] + 1)
			return 14;
		if (mbox_release(mb, inflight[0]))
			return 15;
		memmove(inflight, inflight + 1, (n - 1) * sizeof(inflight[0]));
		memmove(seq_of, seq_of + 1, (n - 1) * sizeof(seq_of[0]));
		n--;
		done++;
	}
	return 0;
}

START_TEST(two_processes_stream_without_loss_or_duplicate)
{
	struct fixture fx;
	size_t seen_size = STREAM_CLIENTS * STREAM_MESSAGES;
	_Atomic uint8_t *seen = tu_shared(seen_size);
	struct stream_ctx ctx[STREAM_CLIENTS];
	pid_t pids[STREAM_CLIENTS];
	uint32_t served = 0;

	fx_init(&fx, STREAM_SLOTS, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	for (uint32_t i = 0; i < STREAM_CLIENTS; i++) {
		ctx[i] = (struct stream_ctx){.fx = &fx, .client = i, .seen = seen};
		pids[i] = tu_fork(stream_client, &ctx[i]);
	}
	while (served < STREAM_CLIENTS * STREAM_MESSAGES) {
		struct mbox_event ev;
		struct stream_msg m;

		ck_assert_int_eq(mbox_server_next(&fx.mb, &ev, shm_deadline_in(10000ull * MS)), 0);
		ck_assert_int_eq(ev.kind, MBOX_EV_REQUEST);
		ck_assert_uint_eq(ev.len, sizeof(m));
		memcpy(&m, ev.req, sizeof(m));
		ck_assert_uint_lt(m.client, STREAM_CLIENTS);
		ck_assert_uint_lt(m.seq, STREAM_MESSAGES);
		ck_assert_uint_eq(atomic_fetch_add(&seen[m.client * STREAM_MESSAGES + m.seq], 1),
				  0);
		m.seq++;
		ck_assert_int_eq(mbox_answer_copy(&fx.mb, ev.t, &m, sizeof(m)), 0);
		served++;
	}
	for (uint32_t i = 0; i < STREAM_CLIENTS; i++)
		ck_assert_int_eq(tu_wait(pids[i], 20000), 0);
	for (size_t i = 0; i < seen_size; i++)
		ck_assert_uint_eq(atomic_load(&seen[i]), 1);
	for (uint32_t i = 0; i < STREAM_SLOTS; i++)
		ck_assert_int_eq(state_of(&fx, i), MBOX_FREE);
	fx_fini(&fx);
	tu_unmap(seen, seen_size);
}
END_TEST

/* The same stream with client threads in one process, so ThreadSanitizer sees every
 * buffer handoff between client and server threads. */
#define THREAD_CLIENTS 2

struct thread_client {
	struct stream_ctx ctx;
	pthread_t tid;
	int rc;
	unsigned messages;
};

static void *thread_client_main(void *arg)
{
	struct thread_client *tc = arg;

	tc->rc = stream_client(&tc->ctx);
	return NULL;
}

struct thread_server {
	struct fixture *fx;
	_Atomic uint8_t *seen;
	uint32_t expect;
	int rc;
};

static void *thread_server_main(void *arg)
{
	struct thread_server *ts = arg;

	for (uint32_t served = 0; served < ts->expect; served++) {
		struct mbox_event ev;
		struct stream_msg m;

		if (mbox_server_next(&ts->fx->mb, &ev, shm_deadline_in(10000ull * MS)) ||
		    ev.kind != MBOX_EV_REQUEST || ev.len != sizeof(m)) {
			ts->rc = 1;
			return NULL;
		}
		memcpy(&m, ev.req, sizeof(m));
		if (m.client >= THREAD_CLIENTS || m.seq >= STREAM_MESSAGES ||
		    atomic_fetch_add(&ts->seen[m.client * STREAM_MESSAGES + m.seq], 1) != 0) {
			ts->rc = 2;
			return NULL;
		}
		m.seq++;
		if (mbox_answer_copy(&ts->fx->mb, ev.t, &m, sizeof(m))) {
			ts->rc = 3;
			return NULL;
		}
	}
	return NULL;
}

START_TEST(threads_stream_without_loss_or_duplicate)
{
	struct fixture fx;
	size_t seen_size = THREAD_CLIENTS * STREAM_MESSAGES;
	_Atomic uint8_t *seen = tu_shared(seen_size);
	struct thread_client tc[THREAD_CLIENTS];
	struct thread_server ts = {
	    .fx = &fx, .seen = seen, .expect = THREAD_CLIENTS * STREAM_MESSAGES};
	pthread_t server;

	fx_init(&fx, STREAM_SLOTS, 64, 64);
	ck_assert_int_eq(mbox_server_attach(&fx.mb), 0);
	ck_assert_int_eq(pthread_create(&server, NULL, thread_server_main, &ts), 0);
	for (uint32_t i = 0; i < THREAD_CLIENTS; i++) {
		tc[i] = (struct thread_client){.ctx = {.fx = &fx, .client = i, .seen = seen}};
		ck_assert_int_eq(pthread_create(&tc[i].tid, NULL, thread_client_main, &tc[i]), 0);
	}
	for (uint32_t i = 0; i < THREAD_CLIENTS; i++) {
		pthread_join(tc[i].tid, NULL);
		ck_assert_int_eq(tc[i].rc, 0);
	}
	pthread_join(server, NULL);
	ck_assert_int_eq(ts.rc, 0);
	for (size_t i = 0; i < seen_size; i++)
		ck_assert_uint_eq(atomic_load(&seen[i]), 1);
	fx_fini(&fx);
	tu_unmap(seen, seen_size);
}
END_TEST

void mbox_add_peer_tcases(Suite *s)
{
	TCase *tc;

	tc = tcase_create("dead_peers");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, dead_client_reaped_in_claimed_posted_done);
	tcase_add_test(tc, dead_client_taken_becomes_reset_for_server);
	tcase_add_test(tc, server_killed_while_taken_slot_recovered);
	tcase_add_test(tc, restarted_server_recovers_taken_slots);
	tcase_add_test(tc, server_detach_wakes_waiting_client);
	suite_add_tcase(s, tc);

	tc = tcase_create("sleeping");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, futex_sleep_path_across_processes);
	tcase_add_test(tc, idle_server_stops_spinning);
	tcase_add_test(tc, interrupt_ends_a_sleeping_server_wait);
	suite_add_tcase(s, tc);

	tc = tcase_create("stream");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, two_processes_stream_without_loss_or_duplicate);
	tcase_add_test(tc, threads_stream_without_loss_or_duplicate);
	suite_add_tcase(s, tc);
}
