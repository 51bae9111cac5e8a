/* check_wait.c - pins the futex calls, spin-then-sleep shm_wait and pid+start liveness. */
#include "proc.h"
#include "testutil.h"
#include "wait.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS (1000u * 1000u)
/* Scheduling noise allowed past a deadline: generous, for 2 loaded cores and TSan. */
#define SLACK_NS (2000ull * MS)
/* How long a helper waits for its peer before it gives up and reports failure. */
#define PEER_TIMEOUT_MS 5000u

/* What the waiter and its waker share; lives in tu_shared memory for process tests. */
struct wait_pair {
	struct shm_wake wake;
	_Atomic uint32_t word;	/* futex word for the raw futex tests */
	_Atomic uint32_t cond;	/* the condition shm_wait waits for */
	_Atomic uint32_t polls; /* how often ready() ran */
	_Atomic uint32_t lost_calls;
	_Atomic uint32_t lost_after; /* peer_lost() says true from this call on (0: never) */
	pid_t peer;		     /* peer_lost() watches this process when non-zero */
	uint64_t peer_start;
};

static bool cond_ready(void *arg)
{
	struct wait_pair *p = arg;

	atomic_fetch_add_explicit(&p->polls, 1, memory_order_relaxed);
	return atomic_load_explicit(&p->cond, memory_order_seq_cst) != 0;
}

static bool cond_lost(void *arg)
{
	struct wait_pair *p = arg;
	uint32_t n = atomic_fetch_add_explicit(&p->lost_calls, 1, memory_order_relaxed) + 1;
	uint32_t after = atomic_load_explicit(&p->lost_after, memory_order_relaxed);

	if (p->peer)
		return !shm_proc_alive(p->peer, p->peer_start);
	return after != 0 && n >= after;
}

static struct wait_pair *pair_new(void)
{
	struct wait_pair *p = tu_shared(sizeof(*p));

	shm_wake_init(&p->wake);
	return p;
}

static bool has_sleeper(void *arg)
{
	struct wait_pair *p = arg;

	return atomic_load_explicit(&p->wake.sleepers, memory_order_seq_cst) != 0;
}

/* Waker: waits until the waiter sleeps on p->wake, then makes the condition true
 * and wakes it. Returns 0, or 1 if the waiter never went to sleep. */
static int wake_when_asleep(void *arg)
{
	struct wait_pair *p = arg;

	if (!tu_eventually(has_sleeper, p, PEER_TIMEOUT_MS))
		return 1;
	atomic_store_explicit(&p->cond, 1, memory_order_seq_cst);
	shm_wake_all(&p->wake);
	return 0;
}

static void *wake_thread(void *arg)
{
	return (void *)(intptr_t)wake_when_asleep(arg);
}

START_TEST(futex_wait_refuses_value_mismatch)
{
	struct wait_pair *p = pair_new();
	uint64_t t0 = shm_now_ns();

	atomic_store(&p->word, 7);
	ck_assert_int_eq(shm_futex_wait(&p->word, 6, shm_deadline_in(5000ull * MS)), -EAGAIN);
	ck_assert_uint_lt(shm_now_ns() - t0, SLACK_NS);
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(futex_wait_times_out_at_deadline)
{
	struct wait_pair *p = pair_new();
	uint64_t t0 = shm_now_ns();
	uint64_t deadline = t0 + 100 * MS;

	ck_assert_int_eq(shm_futex_wait(&p->word, 0, deadline), -ETIMEDOUT);
	uint64_t t1 = shm_now_ns();
	ck_assert_uint_ge(t1, deadline);
	ck_assert_uint_lt(t1 - deadline, SLACK_NS);
	/* A deadline already in the past returns at once. */
	ck_assert_int_eq(shm_futex_wait(&p->word, 0, 1), -ETIMEDOUT);
	tu_unmap(p, sizeof(*p));
}
END_TEST

/* Wakes p->word (without changing it) until a sleeper was really woken. */
static int futex_waker(void *arg)
{
	struct wait_pair *p = arg;
	uint64_t give_up = shm_deadline_in((uint64_t)PEER_TIMEOUT_MS * MS);

	while (shm_now_ns() < give_up) {
		int woke = shm_futex_wake(&p->word, 1);

		if (woke < 0)
			return 2;
		if (woke == 1)
			return 0;
		tu_sleep_ms(1);
	}
	return 1;
}

START_TEST(futex_wake_reaches_other_process)
{
	struct wait_pair *p = pair_new();
	pid_t child = tu_fork(futex_waker, p);
	uint64_t deadline = shm_deadline_in(10000ull * MS);

	/* The word never changes: only a FUTEX_WAKE on the shared (not private) futex
	 * can end this wait before the deadline. */
	ck_assert_int_eq(shm_futex_wait(&p->word, 0, deadline), 0);
	ck_assert_uint_lt(shm_now_ns(), deadline);
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	ck_assert_int_eq(shm_futex_wake(&p->word, 1), 0); /* nobody left to wake */
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(wait_returns_at_once_when_ready)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {.ready = cond_ready, .peer_lost = cond_lost, .arg = p};

	atomic_store(&p->cond, 1);
	ck_assert_int_eq(shm_wait(&p->wake, &how, shm_deadline_in(5000ull * MS)), 0);
	ck_assert_uint_eq(atomic_load(&p->polls), 1);
	ck_assert_uint_eq(atomic_load(&p->lost_calls), 0);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 0);
	/* Ready wins even over a passed deadline. */
	ck_assert_int_eq(shm_wait(&p->wake, &how, 0), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

static bool polled_twice(void *arg)
{
	return atomic_load(&((struct wait_pair *)arg)->polls) >= 2;
}

static void *set_cond_while_spinning(void *arg)
{
	struct wait_pair *p = arg;

	if (!tu_eventually(polled_twice, p, PEER_TIMEOUT_MS))
		return (void *)1;
	atomic_store_explicit(&p->cond, 1, memory_order_seq_cst);
	shm_wake_all(&p->wake);
	return NULL;
}

START_TEST(wait_spin_catches_condition_without_sleeping)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {.ready = cond_ready, .arg = p, .spin_ns = 8000ull * MS};
	pthread_t t;
	void *res;

	ck_assert_int_eq(pthread_create(&t, NULL, set_cond_while_spinning, p), 0);
	ck_assert_int_eq(shm_wait(&p->wake, &how, shm_deadline_in(10000ull * MS)), 0);
	ck_assert_int_eq(pthread_join(t, &res), 0);
	ck_assert_ptr_null(res);
	/* The waiter found the condition while spinning: it never registered as a
	 * sleeper, so the waker had nothing to wake. */
	ck_assert_uint_ge(atomic_load(&p->polls), 3);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(wait_sleeper_woken_by_thread)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {.ready = cond_ready, .peer_lost = cond_lost, .arg = p};
	uint64_t deadline = shm_deadline_in(10000ull * MS);
	pthread_t t;
	void *res;

	ck_assert_int_eq(pthread_create(&t, NULL, wake_thread, p), 0);
	ck_assert_int_eq(shm_wait(&p->wake, &how, deadline), 0);
	ck_assert_uint_lt(shm_now_ns(), deadline);
	ck_assert_int_eq(pthread_join(t, &res), 0);
	ck_assert_ptr_null(res);
	/* The waker saw the sleeper and bumped the futex word. */
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 1);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(wait_sleeper_woken_by_process)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {.ready = cond_ready, .arg = p, .spin_ns = 0};
	uint64_t deadline = shm_deadline_in(10000ull * MS);
	pid_t child = tu_fork(wake_when_asleep, p);

	ck_assert_int_eq(shm_wait(&p->wake, &how, deadline), 0);
	ck_assert_uint_lt(shm_now_ns(), deadline);
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 1);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(wait_ends_with_epipe_when_peer_lost)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {.ready = cond_ready, .peer_lost = cond_lost, .arg = p};
	uint64_t t0 = shm_now_ns();

	/* Lost on the third check: peer_lost is asked between sleep slices. */
	atomic_store(&p->lost_after, 3);
	ck_assert_int_eq(shm_wait(&p->wake, &how, shm_deadline_in(10000ull * MS)), -EPIPE);
	ck_assert_uint_eq(atomic_load(&p->lost_calls), 3);
	/* Two full slices slept before the third check. */
	ck_assert_uint_ge(shm_now_ns() - t0, 2ull * SHM_WAIT_SLICE_NS);
	ck_assert_uint_lt(shm_now_ns() - t0, SLACK_NS);
	/* Nobody woke it: its announcement stays for the next waker to take. */
	ck_assert_uint_ne(atomic_load(&p->wake.sleepers), 0);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

static int exit_soon(void *arg)
{
	(void)arg;
	tu_sleep_ms(50);
	return 0;
}

START_TEST(wait_ends_with_epipe_when_peer_process_exits)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {.ready = cond_ready, .peer_lost = cond_lost, .arg = p};
	uint64_t deadline = shm_deadline_in(10000ull * MS);

	p->peer = tu_fork(exit_soon, NULL);
	p->peer_start = shm_proc_start_time(p->peer);
	ck_assert_uint_ne(p->peer_start, 0);
	/* Not reaped while we wait: a zombie peer counts as lost. */
	ck_assert_int_eq(shm_wait(&p->wake, &how, deadline), -EPIPE);
	ck_assert_uint_lt(shm_now_ns(), deadline - 5000ull * MS);
	ck_assert_int_eq(tu_wait(p->peer, PEER_TIMEOUT_MS), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(wait_times_out_at_deadline)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {
	    .ready = cond_ready, .peer_lost = cond_lost, .arg = p, .spin_ns = SHM_SPIN_NS_DEFAULT};
	uint64_t deadline = shm_deadline_in(150 * MS);

	ck_assert_int_eq(shm_wait(&p->wake, &how, deadline), -ETIMEDOUT);
	uint64_t now = shm_now_ns();
	ck_assert_uint_ge(now, deadline);
	ck_assert_uint_lt(now - deadline, SLACK_NS);
	/* It slept, checking its peer between slices; the announcement it leaves costs
	 * the next waker one wake and the wakers after it none. */
	ck_assert_uint_ge(atomic_load(&p->lost_calls), 2);
	for (int i = 0; i < 10; i++)
		shm_wake_all(&p->wake);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 1);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(wake_all_without_sleepers_keeps_seq)
{
	struct wait_pair *p = pair_new();

	for (int i = 0; i < 10; i++)
		shm_wake_all(&p->wake);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 0);
	/* An announced sleep is taken by the first waker: it bumps once, and the later
	 * calls (no one announced since) make no system call. */
	atomic_store(&p->wake.sleepers, 1);
	shm_wake_all(&p->wake);
	shm_wake_all(&p->wake);
	ck_assert_uint_eq(atomic_load(&p->wake.seq), 1);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

/* Child: sleeps on p->wake for a condition nobody will set, with no peer to watch
 * and no slice, as a waiter that only a wake or its deadline can end. */
static int sleep_unwoken(void *arg)
{
	struct wait_pair *p = arg;
	struct shm_waiter how = {.ready = cond_ready, .arg = p};

	(void)shm_wait(&p->wake, &how, shm_deadline_in(60000ull * MS));
	return 0;
}

/* True when process *arg sleeps (state S) — inside the futex wait, once it has
 * announced itself. */
static bool proc_sleeping(void *arg)
{
	char path[64], buf[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", *(pid_t *)arg);
	f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] == 'S';
}

/* A waiter SIGKILLed while asleep leaves its announcement in the word. Every wake
 * after it must not pay a system call for a sleeper that no longer exists: the first
 * takes the announcement (one seq bump = one FUTEX_WAKE), the rest make none. */
START_TEST(killed_sleeper_costs_one_wake)
{
	struct wait_pair *p = pair_new();
	pid_t child = tu_fork(sleep_unwoken, p);

	ck_assert(tu_eventually(has_sleeper, p, PEER_TIMEOUT_MS));
	ck_assert(tu_eventually(proc_sleeping, &child, PEER_TIMEOUT_MS));
	tu_kill(child);
	ck_assert_uint_ne(atomic_load(&p->wake.sleepers), 0);
	for (int i = 0; i < 100; i++) {
		atomic_store_explicit(&p->cond, (uint32_t)i, memory_order_seq_cst);
		shm_wake_all(&p->wake);
	}
	ck_assert_uint_le(atomic_load(&p->wake.seq), 1);
	ck_assert_uint_eq(atomic_load(&p->wake.sleepers), 0);
	tu_unmap(p, sizeof(*p));
}
END_TEST

#define SCRIBBLE_SLICE_NS (50ull * MS)

struct scribbled {
	struct wait_pair *p;
	int rc;
	uint64_t woke_at;
};

static void *sliced_waiter(void *arg)
{
	struct scribbled *sc = arg;
	struct shm_waiter how = {.ready = cond_ready, .arg = sc->p, .slice_ns = SCRIBBLE_SLICE_NS};

	sc->rc = shm_wait(&sc->p->wake, &how, shm_deadline_in(60000ull * MS));
	sc->woke_at = shm_now_ns();
	return NULL;
}

/* A peer that zeroes `sleepers` hides the sleeper from the waker, which then makes no
 * wake; a waiter with a slice still sees its condition within about one slice (the
 * bound asserted is a generous liveness bound, far below the 60 s deadline). */
START_TEST(zeroed_announcement_delays_one_slice)
{
	struct scribbled sc = {.p = pair_new()};
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, sliced_waiter, &sc), 0);
	ck_assert(tu_eventually(has_sleeper, sc.p, PEER_TIMEOUT_MS));
	atomic_store_explicit(&sc.p->wake.sleepers, 0, memory_order_seq_cst);
	uint64_t t0 = shm_now_ns();
	atomic_store_explicit(&sc.p->cond, 1, memory_order_seq_cst);
	shm_wake_all(&sc.p->wake);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	/* (Not asserted: that seq stayed 0. A slice may end between the zeroing and the
	 * wake, and the waiter's fresh announcement then lets the wake through.) */
	ck_assert_int_eq(sc.rc, 0);
	ck_assert_uint_lt(sc.woke_at - t0, SCRIBBLE_SLICE_NS + SLACK_NS);
	tu_unmap(sc.p, sizeof(*sc.p));
}
END_TEST

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

START_TEST(idle_waiter_does_not_burn_cpu)
{
	struct wait_pair *p = pair_new();
	struct shm_waiter how = {
	    .ready = cond_ready, .peer_lost = cond_lost, .arg = p, .spin_ns = 1 * MS};
	uint64_t cpu0 = thread_cpu_ns();
	uint64_t t0 = shm_now_ns();

	ck_assert_int_eq(shm_wait(&p->wake, &how, t0 + 300 * MS), -ETIMEDOUT);
	uint64_t wall = shm_now_ns() - t0;
	uint64_t cpu = thread_cpu_ns() - cpu0;

	ck_assert_uint_ge(wall, 300 * MS);
	ck_assert_msg(cpu < 50 * MS, "idle waiter used %llu ms CPU in %llu ms",
		      (unsigned long long)(cpu / MS), (unsigned long long)(wall / MS));
	tu_unmap(p, sizeof(*p));
}
END_TEST

START_TEST(deadline_in_saturates)
{
	uint64_t now = shm_now_ns();
	uint64_t d = shm_deadline_in(1000 * MS);

	ck_assert_uint_ge(d, now + 1000 * MS);
	ck_assert_uint_lt(d, now + 1000 * MS + SLACK_NS);
	ck_assert_uint_eq(shm_deadline_in(UINT64_MAX), SHM_DEADLINE_NEVER);
	ck_assert_uint_eq(shm_deadline_in(UINT64_MAX - now / 2), SHM_DEADLINE_NEVER);
}
END_TEST

START_TEST(proc_self_alive)
{
	uint64_t start = shm_proc_self_start_time();

	ck_assert_uint_ne(start, 0);
	ck_assert_uint_eq(start, shm_proc_start_time(getpid()));
	ck_assert(shm_proc_alive(getpid(), start));
	ck_assert(shm_proc_alive(getpid(), 0));
	ck_assert(shm_proc_alive(1, 0)); /* init: exists, even if not ours */
}
END_TEST

/* Child: reports its own start time, as its parent will later check it. */
static int report_start(void *arg)
{
	uint64_t *out = arg;
	uint64_t start = shm_proc_self_start_time();

	*out = start;
	return start == shm_proc_start_time(getpid()) ? 0 : 1;
}

START_TEST(proc_reaped_child_dead)
{
	uint64_t *start = tu_shared(sizeof(*start));

	(void)shm_proc_self_start_time(); /* the child must not inherit this cache */
	pid_t child = tu_fork(report_start, start);

	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	ck_assert_uint_ne(*start, 0);
	ck_assert(!shm_proc_alive(child, *start));
	ck_assert(!shm_proc_alive(child, 0));
	ck_assert_uint_eq(shm_proc_start_time(child), 0);
	tu_unmap(start, sizeof(*start));
}
END_TEST

static int sleep_long(void *arg)
{
	(void)arg;
	tu_sleep_ms(20000);
	return 0;
}

START_TEST(proc_zombie_child_dead)
{
	pid_t child = tu_fork(sleep_long, NULL);
	uint64_t start = shm_proc_start_time(child);
	siginfo_t si = {0};

	ck_assert_uint_ne(start, 0);
	ck_assert(shm_proc_alive(child, start));
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	/* Wait for it to die but leave it unreaped: its pid still exists. */
	ck_assert_int_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
	ck_assert_int_eq(si.si_pid, child);
	ck_assert_int_eq(kill(child, 0), 0);
	ck_assert(!shm_proc_alive(child, start));
	ck_assert(!shm_proc_alive(child, 0));
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 128 + SIGKILL);
}
END_TEST

START_TEST(proc_wrong_start_time_dead)
{
	uint64_t start = shm_proc_self_start_time();

	ck_assert(!shm_proc_alive(getpid(), start + 1));
	ck_assert(!shm_proc_alive(getpid(), start - 1));
}
END_TEST

START_TEST(proc_nonpositive_pid_dead)
{
	ck_assert(!shm_proc_alive(0, 0));
	ck_assert(!shm_proc_alive(-1, 0));
	ck_assert(!shm_proc_alive(-(pid_t)getpid(), 0));
	ck_assert_uint_eq(shm_proc_start_time(0), 0);
	ck_assert_uint_eq(shm_proc_start_time(-1), 0);
}
END_TEST

START_TEST(park_wake_clears_the_announcement_once)
{
	struct shm_park p;

	shm_park_init(&p);
	shm_park_wake(&p); /* no one announced a sleep: nothing to do */
	ck_assert_uint_eq(atomic_load(&p.word), 0);
	shm_park_prepare(&p);
	ck_assert_uint_eq(atomic_load(&p.word), 1);
	shm_park_wake(&p);
	ck_assert_uint_eq(atomic_load(&p.word), 0);
	/* a sleep whose wake already came returns at once instead of hanging */
	shm_park_sleep(&p);
}
END_TEST

#define PARK_ROUNDS 20000

struct park_pair {
	_Atomic uint64_t count;
	struct shm_park park;
	bool asym; /* the asymmetric variant: shm_park_publish, shm_park_fence */
};

static void *park_producer(void *arg)
{
	struct park_pair *pp = arg;

	for (uint64_t i = 1; i <= PARK_ROUNDS; i++) {
		if (pp->asym)
			shm_park_publish(&pp->count, i);
		else
			atomic_store_explicit(&pp->count, i, memory_order_seq_cst);
		shm_park_wake(&pp->park);
		if (i % 64 == 0)
			sched_yield(); /* let the consumer fall asleep now and then */
	}
	return NULL;
}

/* Every value is waited for by parking: a lost wake would hang the tcase (its
 * timeout fails it). */
static void park_handoff(bool asym)
{
	struct park_pair pp = {.asym = asym};
	pthread_t t;

	atomic_init(&pp.count, 0);
	shm_park_init(&pp.park);
	ck_assert_int_eq(pthread_create(&t, NULL, park_producer, &pp), 0);
	for (uint64_t want = 1; want <= PARK_ROUNDS; want++) {
		for (;;) {
			shm_park_prepare(&pp.park);
			/* where membarrier works the fence never refuses (no spinning) */
			if (asym)
				ck_assert(shm_park_fence());
			if (atomic_load_explicit(&pp.count, memory_order_seq_cst) >= want)
				break;
			shm_park_sleep(&pp.park);
		}
	}
	pthread_join(t, NULL);
	ck_assert_uint_eq(atomic_load(&pp.count), PARK_ROUNDS);
}

START_TEST(park_handoff_loses_no_wake)
{
	park_handoff(false);
}
END_TEST

/* The asymmetric variant (release stores, the sleeper's membarrier), in this process
 * and in a child forked after the registration (the sim's workers are forked). On a
 * kernel without membarrier it is the symmetric protocol again, tested the same way. */
START_TEST(park_publish_handoff_loses_no_wake)
{
	pid_t pid;
	int status;

	shm_park_asym_init();
	fprintf(stderr, "park: asymmetric variant %s\n",
		atomic_load(&shm_park_asym) ? "on (membarrier)" : "off (no membarrier)");
	park_handoff(true);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		park_handoff(true);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's hand-off: %#x",
		      status);
}
END_TEST

static Suite *wait_suite(void)
{
	Suite *s = suite_create("wait");
	const struct tu_case cases[] = {
	    {"futex_wait_refuses_value_mismatch", futex_wait_refuses_value_mismatch},
	    {"futex_wait_times_out_at_deadline", futex_wait_times_out_at_deadline},
	    {"futex_wake_reaches_other_process", futex_wake_reaches_other_process},
	    {"wait_returns_at_once_when_ready", wait_returns_at_once_when_ready},
	    {"wait_spin_catches_condition_without_sleeping",
	     wait_spin_catches_condition_without_sleeping},
	    {"wait_sleeper_woken_by_thread", wait_sleeper_woken_by_thread},
	    {"wait_sleeper_woken_by_process", wait_sleeper_woken_by_process},
	    {"wait_ends_with_epipe_when_peer_lost", wait_ends_with_epipe_when_peer_lost},
	    {"wait_ends_with_epipe_when_peer_process_exits",
	     wait_ends_with_epipe_when_peer_process_exits},
	    {"wait_times_out_at_deadline", wait_times_out_at_deadline},
	    {"wake_all_without_sleepers_keeps_seq", wake_all_without_sleepers_keeps_seq},
	    {"killed_sleeper_costs_one_wake", killed_sleeper_costs_one_wake},
	    {"zeroed_announcement_delays_one_slice", zeroed_announcement_delays_one_slice},
	    {"park_wake_clears_the_announcement_once", park_wake_clears_the_announcement_once},
	    {"park_handoff_loses_no_wake", park_handoff_loses_no_wake},
	    {"park_publish_handoff_loses_no_wake", park_publish_handoff_loses_no_wake},
	    {"idle_waiter_does_not_burn_cpu", idle_waiter_does_not_burn_cpu},
	    {"deadline_in_saturates", deadline_in_saturates},
	    {"proc_self_alive", proc_self_alive},
	    {"proc_reaped_child_dead", proc_reaped_child_dead},
	    {"proc_zombie_child_dead", proc_zombie_child_dead},
	    {"proc_wrong_start_time_dead", proc_wrong_start_time_dead},
	    {"proc_nonpositive_pid_dead", proc_nonpositive_pid_dead},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(wait_suite());
}
