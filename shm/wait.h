/* wait.h - bounded spin-then-sleep waiting on words shared between processes.
 *
 * Every wait in chipd has three ways out: the condition became true, the deadline
 * passed, or the peer it waits for is gone. Waiting spins for a short budget (a
 * cache-line handoff costs ~0.3 us, a futex wake ~50 us on these machines; past its
 * first 2 us a spin yields the CPU between looks, so that on fewer cores than
 * threads the peer it waits for can run), plus an adaptive extra (struct shm_spin),
 * and then sleeps on a shared futex.
 *
 * The sleep protocol (struct shm_wake) lets a waker skip the futex syscall when no
 * one sleeps:
 *   waiter: sleepers = 1 (seq_cst); s = seq; re-check condition (seq_cst loads);
 *           FUTEX_WAIT(&seq, s, until the end of its slice)
 *   waker:  change the condition word (seq_cst store or RMW);
 *           if (sleepers (seq_cst load) != 0 && exchange(sleepers, 0) != 0)
 *                   { seq += 1; FUTEX_WAKE(&seq, all) }
 * Because both sides use seq_cst on the two words, either the waker sees the sleeper
 * or the sleeper sees the new condition (the store-buffer litmus is forbidden).
 * `sleepers` is an announcement, not a count: the waker that takes it wakes every
 * sleeper, and a sleeper that goes on sleeping announces itself again. So a waiter
 * killed while asleep costs one needless wake, not one per later change, and a peer
 * that zeroes the word delays a sliced waiter by at most one slice.
 */
#ifndef CHIPD_SHM_WAIT_H
#define CHIPD_SHM_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Nanoseconds in a millisecond: bounds are configured in ms, clocks read in ns. */
#define SHM_NS_PER_MS 1000000ull

/* A deadline far enough away to mean "until the condition or the peer's death". */
#define SHM_DEADLINE_NEVER UINT64_MAX

/* How long a sleeping waiter sleeps before it re-checks its peer's liveness. */
#define SHM_WAIT_SLICE_NS (20u * 1000u * 1000u)

/* Default spin budget before sleeping: long enough to catch a peer that answers in
 * a few microseconds, short enough that an idle waiter stops burning CPU at once. */
#define SHM_SPIN_NS_DEFAULT (50u * 1000u)

/* A futex word plus a count of sleepers; 8 bytes, both shared. */
struct shm_wake {
	_Atomic uint32_t seq;	   /* futex word: bumped by a waker that saw sleepers */
	_Atomic uint32_t sleepers; /* non-zero: someone may sleep on seq since the last wake */
};
_Static_assert(sizeof(struct shm_wake) == 8, "shm_wake layout");

/* The most an adaptive spin grows to: a few futex wakes' worth (a wake costs ~50 us
 * on these machines), far below any idle period. */
#define SHM_SPIN_ADAPT_MAX_NS (400u * 1000u)

/* An adaptive spin budget, one per waiting thread and purpose (a heuristic: its word
 * is relaxed, and threads sharing one only blur it). A wait that had to sleep but
 * ended within SHM_SPIN_ADAPT_MAX_NS (recent traffic: a longer spin would have caught
 * it) doubles the extra budget, up to that bound; a wait that slept longer (an idle
 * peer) halves it, so an idle node decays to the plain spin within a few waits. The
 * extra part of a spin yields the CPU between looks (sched_yield), so a spinner on a
 * machine with fewer cores than threads lets the peer it waits for run. */
struct shm_spin {
	_Atomic uint64_t extra_ns; /* spun on top of the waiter's spin_ns */
};

/* The budget a wait spins with @a (NULL: @base_ns alone). */
uint64_t shm_spin_budget(const struct shm_spin *a, uint64_t base_ns);
/* Updates @a after a wait that began at @start_ns, slept or not (@slept), and ended
 * at @end_ns. */
void shm_spin_learn(struct shm_spin *a, uint64_t start_ns, uint64_t end_ns, bool slept);

/* Looks at @ready for @spin_ns and then @extra_ns more (not past @deadline_ns): the
 * first 2 us of @spin_ns with a CPU pause between looks, the rest yielding the CPU
 * between them. @spin_ns 0: one look, no spin. Returns true when ready. */
bool shm_spin(bool (*ready)(void *), void *arg, uint64_t spin_ns, uint64_t extra_ns,
	      uint64_t deadline_ns);
/* Looks at @ready for up to @ns (not past @deadline_ns), yielding the CPU between
 * looks. Returns true when ready. */
bool shm_spin_yielding(bool (*ready)(void *), void *arg, uint64_t ns, uint64_t deadline_ns);

/* What a waiter waits for. @ready must read the condition with seq_cst loads.
 * @peer_lost, when set, is called between sleep slices and ends the wait with
 * -EPIPE when it returns true. Without @peer_lost and @slice_ns the waiter sleeps
 * until it is woken or its deadline passes: nothing but a wake can change its
 * condition, and an idle waiter should not wake up for nothing. A waiter whose wake
 * word another process can write sets @slice_ns: it then re-checks its condition and
 * announces itself again every slice, which bounds what a zeroed word can delay. */
struct shm_waiter {
	bool (*ready)(void *arg);
	bool (*peer_lost)(void *arg);
	void *arg;
	uint64_t spin_ns;  /* 0: never spin, sleep at once */
	uint64_t slice_ns; /* sleep slice; 0: SHM_WAIT_SLICE_NS with @peer_lost, else none */
	/* NULL: spin spin_ns; else spin_ns plus its adaptive extra (none when spin_ns is 0) */
	struct shm_spin *adapt;
};

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t shm_now_ns(void);

/* A deadline @ns from now, saturating at SHM_DEADLINE_NEVER. */
uint64_t shm_deadline_in(uint64_t ns);

/* Tells the CPU we are spinning (PAUSE on x86, YIELD on arm64). */
static inline void shm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Sleeps on the shared futex @word while it holds @expected, until woken or the
 * absolute CLOCK_MONOTONIC @deadline_ns. Returns 0 when woken (possibly
 * spuriously), -EAGAIN if *word != expected on entry, -ETIMEDOUT, or -EINTR. */
int shm_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);

/* Wakes up to @n sleepers on the shared futex @word. Returns how many woke, or
 * -errno. */
int shm_futex_wake(_Atomic uint32_t *word, int n);

/* At most this many words in one shm_futex_waitv (the kernel's FUTEX_WAITV_MAX). */
#define SHM_WAITV_MAX 128u

/* One word of shm_futex_waitv: sleep while *word == expected. @private_word: the word
 * is in this process's private memory (FUTEX_PRIVATE_FLAG), else shared. */
struct shm_waitv {
	_Atomic uint32_t *word;
	uint32_t expected;
	bool private_word;
};

/* Sleeps until one of @n (1..SHM_WAITV_MAX) words is woken or does not hold its
 * expected value, or the absolute CLOCK_MONOTONIC @deadline_ns (futex_waitv(2), Linux
 * 5.16). Returns 0 when woken (possibly spuriously), -EAGAIN when a word differed on
 * entry, -ETIMEDOUT, -EINTR, or -ENOSYS (an older kernel: the caller polls instead). */
int shm_futex_waitv(const struct shm_waitv *v, uint32_t n, uint64_t deadline_ns);

/* shm_futex_wait and a wake of every sleeper, for a word in this process's own memory
 * (FUTEX_PRIVATE_FLAG): another thread of the process rings it. */
int shm_futex_wait_private(_Atomic uint32_t *word, uint32_t expected, uint64_t deadline_ns);
int shm_futex_wake_private(_Atomic uint32_t *word);

/* Zeroes a wake word pair (creator only, before the memory is shared). */
void shm_wake_init(struct shm_wake *w);

/* Wakes every sleeper of @w, if there is any. Call it right after the seq_cst
 * change that the sleepers wait for. Cheap (one load, no system call) when no one
 * announced a sleep since the last wake. */
void shm_wake_all(struct shm_wake *w);

/* Waits for @how->ready: spins for @how->spin_ns, then sleeps on @w — in slices of
 * @how->slice_ns (default SHM_WAIT_SLICE_NS), checking @how->peer_lost between them,
 * when there is a @peer_lost or a @slice_ns. A wait that ends without being woken
 * may leave its announcement in @w; the next shm_wake_all clears it. Returns 0 when ready,
 * -ETIMEDOUT at @deadline_ns, -EPIPE when the peer is lost. Never blocks past the
 * deadline by more than scheduling noise. */
int shm_wait(struct shm_wake *w, const struct shm_waiter *how, uint64_t deadline_ns);

/* ---- parking: one thread hands a growing counter to a waiter, within a process ----
 *
 * For hand-offs that happen many times per sleep (a queue's producer and consumer,
 * ops completing while a sync waits): a waker issues at most one wake syscall per
 * sleep, not one per change, and none while no one sleeps.
 *   sleeper: shm_park_prepare (park = 1, seq_cst); re-check the condition (seq_cst);
 *            shm_park_sleep (FUTEX_WAIT while park == 1)
 *   waker:   change the condition (seq_cst store); shm_park_wake
 *            (if park (seq_cst) != 0 && exchange(park, 0) != 0: FUTEX_WAKE all)
 * Both sides use seq_cst on the two words, so either the waker sees park set or the
 * sleeper sees the new condition; a sleeper whose park was cleared before it slept
 * finds park != 1 and returns at once. Process-private (the futex is
 * FUTEX_PRIVATE_FLAG): for cross-process waits use struct shm_wake. */
struct shm_park {
	_Atomic uint32_t word; /* 1: someone may sleep here since the last wake */
};

/* Zeroes @p (before any thread uses it). */
void shm_park_init(struct shm_park *p);

/* Announces a sleep on @p. The caller then re-checks its condition with a seq_cst
 * load and calls shm_park_sleep only if it is still false. */
void shm_park_prepare(struct shm_park *p);

/* Sleeps until shm_park_wake(@p) after the matching shm_park_prepare (returns at
 * once if that wake already happened). May return spuriously: re-check the condition
 * and prepare again. */
void shm_park_sleep(struct shm_park *p);

/* The part of shm_park_wake that runs when someone may sleep on @p. */
void shm_park_wake_sleepers(struct shm_park *p);

/* Wakes every thread asleep on @p, if any. Call it right after the seq_cst change of
 * the condition they wait for. One load when no one sleeps: inline, because a hot
 * producer calls it once per item. */
static inline void shm_park_wake(struct shm_park *p)
{
	if (atomic_load_explicit(&p->word, memory_order_seq_cst) != 0)
		shm_park_wake_sleepers(p);
}

/* ---- the asymmetric variant: the waker changes the condition once per item, the
 * sleeper sleeps rarely (after a spin) ----
 * In the symmetric protocol each change is a seq_cst store, a locked instruction on
 * x86 that also waits for the line the waiter keeps reading: when producer and
 * consumer run on different CPUs that stall is most of an item's cost. Here the
 * sleeper pays instead: shm_park_fence, between shm_park_prepare and its re-check,
 * makes every running thread of the process execute a full barrier
 * (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED), so either the waker's store is
 * visible to the re-check, or the waker's look at park (shm_park_wake) comes after
 * the announcement; the waker's own store and look then need only the compiler's
 * order, which shm_park_publish gives (release store, atomic_signal_fence).
 *   sleeper: shm_park_prepare; shm_park_fence (false: do not sleep, spin on);
 *            re-check (seq_cst); shm_park_sleep
 *   waker:   shm_park_publish(word, value); shm_park_wake
 * shm_park_asym_init chooses the variant once per process, before the first use of
 * either call: where the kernel refuses membarrier, shm_park_publish stores seq_cst and
 * shm_park_fence does nothing (the symmetric protocol). Every sleeper on a word changed
 * with shm_park_publish calls shm_park_fence. */

/* Registers the process for membarrier once (later calls return at once). Call it
 * before any thread uses shm_park_publish or shm_park_fence. */
void shm_park_asym_init(void);

/* Whether the asymmetric variant is on (shm_park_asym_init found membarrier). */
extern _Atomic bool shm_park_asym;

/* The sleeper's fence (see above). Returns false when it could not order: the caller
 * must not sleep. */
bool shm_park_fence(void);

/* The waker's change of the condition: @value into @word. */
static inline void shm_park_publish(_Atomic uint64_t *word, uint64_t value)
{
	if (atomic_load_explicit(&shm_park_asym, memory_order_relaxed)) {
		atomic_store_explicit(word, value, memory_order_release);
		atomic_signal_fence(memory_order_seq_cst); /* before shm_park_wake's look */
	} else {
		atomic_store_explicit(word, value, memory_order_seq_cst);
	}
}

#endif
