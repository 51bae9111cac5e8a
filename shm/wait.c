/* wait.c - futex and spin-then-sleep waiting (see wait.h for the protocol). */
#include "wait.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdint.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Reading the clock costs ~20 ns; the spin loop checks it once per this many
 * iterations of the condition. */
#define SPIN_CLOCK_EVERY 16
/* An adaptive extra below this is not worth a yield's system call: none. */
#define SPIN_ADAPT_MIN_NS (2u * 1000u)
/* How long a spin looks without yielding the CPU: a peer on another core answers a
 * spinning hand-over within ~1 us; past this, the peer is more likely waiting for a
 * core, which a yield gives it. (10 us made a one-token request through a 2-vCPU
 * node ~25% slower: every hand-over among its six spinning threads waited for a
 * spinner to burn its pure spin before it yielded; docs/performance.md.) */
#define SPIN_PURE_NS (2u * 1000u)

uint64_t shm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t shm_deadline_in(uint64_t ns)
{
	uint64_t now = shm_now_ns();

	return ns > SHM_DEADLINE_NEVER - now ? SHM_DEADLINE_NEVER : now + ns;
}

/* FUTEX_WAIT_BITSET (absolute CLOCK_MONOTONIC timeout) on @word, with @op's flags. */
static int futex_wait_op(_Atomic uint32_t *word, int op, uint32_t expected, uint64_t deadline_ns)
{
	struct timespec ts, *tsp = NULL;

	if (deadline_ns != SHM_DEADLINE_NEVER) {
		ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
		ts.tv_nsec = (long)(deadline_ns % 1000000000u);
		tsp = &ts;
	}
	if (syscall(SYS_futex, (uint32_t *)word, op, expected, tsp, NULL, FUTEX_BITSET_MATCH_ANY) ==
	    0)
		return 0;
	return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

int shm_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
	/* no FUTEX_PRIVATE_FLAG: the word lives in memory shared between processes */
	return futex_wait_op(word, FUTEX_WAIT_BITSET, expected, deadline_ns);
}

int shm_futex_wait_private(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns)
{
	return futex_wait_op(word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, deadline_ns);
}

int shm_futex_wake_private(_Atomic uint32_t *word)
{
	long woke = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);

	return woke < 0 ? -errno : (int)woke;
}

int shm_futex_waitv(const struct shm_waitv *v, uint32_t n, uint64_t deadline_ns)
{
	struct futex_waitv w[SHM_WAITV_MAX];
	struct timespec ts, *tsp = NULL;

	if (n == 0 || n > SHM_WAITV_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		w[i] = (struct futex_waitv){
		    .val = v[i].expected,
		    .uaddr = (uint64_t)(uintptr_t)v[i].word,
		    .flags = FUTEX_32 | (v[i].private_word ? FUTEX_PRIVATE_FLAG : 0),
		};
	if (deadline_ns != SHM_DEADLINE_NEVER) {
		ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
		ts.tv_nsec = (long)(deadline_ns % 1000000000u);
		tsp = &ts;
	}
	/* the timeout is absolute, on the clock named last */
	if (syscall(SYS_futex_waitv, w, n, 0, tsp, CLOCK_MONOTONIC) >= 0)
		return 0;
	return errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

int shm_futex_wake(_Atomic uint32_t *word, int n)
{
	long woke = syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);

	return woke < 0 ? -errno : (int)woke;
}

void shm_wake_init(struct shm_wake *w)
{
	atomic_init(&w->seq, 0);
	atomic_init(&w->sleepers, 0);
}

void shm_wake_all(struct shm_wake *w)
{
	/* The load keeps the common case (no one announced) to one shared read; the
	 * exchange takes the announcement, so of several wakers only one makes the
	 * system call, and an announcement left by a waiter that died asleep costs one
	 * wake, not one per later change. */
	if (atomic_load_explicit(&w->sleepers, memory_order_seq_cst) == 0)
		return;
	if (atomic_exchange_explicit(&w->sleepers, 0, memory_order_seq_cst) == 0)
		return;
	atomic_fetch_add_explicit(&w->seq, 1, memory_order_seq_cst);
	shm_futex_wake(&w->seq, INT_MAX);
}

uint64_t shm_spin_budget(const struct shm_spin *a, uint64_t base_ns)
{
	return a ? base_ns + atomic_load_explicit(&((struct shm_spin *)a)->extra_ns,
						  memory_order_relaxed)
		 : base_ns;
}

void shm_spin_learn(struct shm_spin *a, uint64_t start_ns, uint64_t end_ns, bool slept)
{
	uint64_t x, took = end_ns > start_ns ? end_ns - start_ns : 0;

	if (!a || !slept)
		return; /* caught while spinning: the budget did its job */
	x = atomic_load_explicit(&a->extra_ns, memory_order_relaxed);
	if (took <= SHM_SPIN_ADAPT_MAX_NS)
		x = x * 2 > took ? x * 2 : took; /* grow to cover what it slept for */
	else
		x /= 2; /* an idle peer: spin less next time */
	if (x > SHM_SPIN_ADAPT_MAX_NS)
		x = SHM_SPIN_ADAPT_MAX_NS;
	if (x < SPIN_ADAPT_MIN_NS)
		x = 0;
	atomic_store_explicit(&a->extra_ns, x, memory_order_relaxed);
}

bool shm_spin(bool (*ready)(void *), void *arg, uint64_t spin_ns, uint64_t extra_ns,
	      uint64_t deadline_ns)
{
	if (ready(arg))
		return true;
	if (spin_ns == 0)
		return false;
	/* One round before the first clock read: a peer that answers within it (the
	 * common case of a spinning round trip) costs no clock read, which is ~27 ns on
	 * a kvm-clock guest, a few per cent of a round trip. The budget starts after it. */
	for (int i = 0; i < SPIN_CLOCK_EVERY; i++) {
		shm_cpu_relax();
		if (ready(arg))
			return true;
	}
	uint64_t start = shm_now_ns();
	uint64_t pure = spin_ns < SPIN_PURE_NS ? spin_ns : SPIN_PURE_NS;
	uint64_t stop = deadline_ns;
	if (start < deadline_ns && pure < deadline_ns - start)
		stop = start + pure;
	for (;;) {
		for (int i = 0; i < SPIN_CLOCK_EVERY; i++) {
			shm_cpu_relax();
			if (ready(arg))
				return true;
		}
		if (shm_now_ns() >= stop)
			break;
	}
	/* the rest of the budget, and the adaptive extra, yield between looks */
	return shm_spin_yielding(ready, arg, spin_ns - pure + extra_ns, deadline_ns);
}

/* A waiter's spin: its spin_ns, then its adaptive extra (none when it asked never to
 * spin, spin_ns 0). */
static bool spin(const struct shm_waiter *how, uint64_t deadline_ns)
{
	uint64_t extra = how->spin_ns ? shm_spin_budget(how->adapt, 0) : 0;

	return shm_spin(how->ready, how->arg, how->spin_ns, extra, deadline_ns);
}

bool shm_spin_yielding(bool (*ready)(void *), void *arg, uint64_t ns, uint64_t deadline_ns)
{
	uint64_t now = shm_now_ns(), stop = deadline_ns;

	if (now < deadline_ns && ns < deadline_ns - now)
		stop = now + ns;
	while (now < stop) {
		sched_yield();
		if (ready(arg))
			return true;
		now = shm_now_ns();
	}
	return false;
}

static int wait_sleeping(struct shm_wake *w, const struct shm_waiter *how,
			 uint64_t deadline_ns, bool *slept);

int shm_wait(struct shm_wake *w, const struct shm_waiter *how, uint64_t deadline_ns)
{
	uint64_t start = how->adapt ? shm_now_ns() : 0;
	bool slept = false;
	int rc;

	if (spin(how, deadline_ns))
		return 0;
	rc = wait_sleeping(w, how, deadline_ns, &slept);
	/* a wait that timed out says nothing of the peer's pace, nor one that only looked */
	if (how->adapt && how->spin_ns && rc == 0 && slept)
		shm_spin_learn(how->adapt, start, shm_now_ns(), true);
	return rc;
}

/* shm_wait after its spin: sleeps in slices until ready, the deadline or a lost peer;
 * *@slept says whether it slept at all. */
static int wait_sleeping(struct shm_wake *w, const struct shm_waiter *how, uint64_t deadline_ns,
			 bool *slept)
{
	for (;;) {
		uint64_t now = shm_now_ns();

		if (now >= deadline_ns)
			return how->ready(how->arg) ? 0 : -ETIMEDOUT;
		/* between slices, not before the first: a liveness check reads
		 * /proc/PID/stat (open, read, close), and most waits that sleep are woken
		 * within their first slice, so a check before it would cost every such
		 * wait those system calls; a peer dead already is seen one slice later */
		if (how->peer_lost && *slept && how->peer_lost(how->arg))
			return how->ready(how->arg) ? 0 : -EPIPE;

		/* A sliced waiter announces itself again each slice: an announcement
		 * wiped by someone else (another waker, or a peer that scribbled the
		 * word) then costs at most one slice of lateness. */
		uint64_t slice = how->slice_ns ? how->slice_ns : SHM_WAIT_SLICE_NS;
		bool sliced = how->peer_lost || how->slice_ns;
		uint64_t slice_end =
		    sliced && deadline_ns - now > slice ? now + slice : deadline_ns;
		/* No matching clear: the waker that sees the announcement takes it (and
		 * wakes every sleeper of the word), so a waiter that dies here leaves at
		 * most one needless wake behind. */
		atomic_store_explicit(&w->sleepers, 1, memory_order_seq_cst);
		uint32_t seq = atomic_load_explicit(&w->seq, memory_order_seq_cst);
		if (how->ready(how->arg))
			return 0;
		*slept = true;
		shm_futex_wait(&w->seq, seq, slice_end);
		if (how->ready(how->arg))
			return 0;
	}
}

void shm_park_init(struct shm_park *p)
{
	atomic_init(&p->word, 0);
}

void shm_park_prepare(struct shm_park *p)
{
	atomic_store_explicit(&p->word, 1, memory_order_seq_cst);
}

void shm_park_sleep(struct shm_park *p)
{
	/* returns at once (EAGAIN) when a waker cleared the word meanwhile */
	syscall(SYS_futex, (uint32_t *)&p->word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}

void shm_park_wake_sleepers(struct shm_park *p)
{
	if (atomic_exchange_explicit(&p->word, 0, memory_order_seq_cst) != 0)
		syscall(SYS_futex, (uint32_t *)&p->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL,
			0);
}

_Atomic bool shm_park_asym;

static int membarrier(int cmd)
{
	return (int)syscall(SYS_membarrier, cmd, 0u, 0);
}

static void park_asym_register(void)
{
	if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
		atomic_store_explicit(&shm_park_asym, true, memory_order_relaxed);
}

void shm_park_asym_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, park_asym_register);
}

bool shm_park_fence(void)
{
	if (!atomic_load_explicit(&shm_park_asym, memory_order_relaxed))
		return true; /* the symmetric protocol: the seq_cst stores order it */
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		return true;
	/* a child of a registered process may not be registered itself: register, once
	 * more, and retry; a kernel that still refuses leaves the caller spinning */
	if (errno == EPERM && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
	    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		return true;
	return false;
}
