/* sim_wait.c - the sim backend's waits (sim_wait.h). */
#include "sim_wait.h"

#include <sched.h>

/* Pure PAUSE spinning lasts this long; after it a spinner yields the CPU between
 * checks, so that the thread it waits for can run when the threads outnumber the
 * cores. */
#define SIM_PAUSE_NS (1u * 1000u)
/* Reading the clock costs ~25 ns; the spin loop reads it once per this many checks. */
#define SIM_SPIN_CLOCK_EVERY 16

/* Spins on *@word >= @target for @spin_ns: pure PAUSE first, then yielding between
 * checks. Returns true when reached. */
static bool spin_ge(_Atomic uint64_t *word, uint64_t target, uint64_t spin_ns)
{
	uint64_t start = shm_now_ns(), now;

	for (;;) {
		for (int i = 0; i < SIM_SPIN_CLOCK_EVERY; i++) {
			shm_cpu_relax();
			if (atomic_load_explicit(word, memory_order_acquire) >= target)
				return true;
		}
		now = shm_now_ns();
		if (now - start >= spin_ns)
			return false;
		if (now - start >= SIM_PAUSE_NS)
			sched_yield();
	}
}

/* See sim_wait.h. */
bool sim_wait_ge(_Atomic uint64_t *word, uint64_t target, struct shm_park *p, uint64_t spin_ns)
{
	if (atomic_load_explicit(word, memory_order_acquire) >= target)
		return false;
	if (spin_ge(word, target, spin_ns))
		return false;
	for (bool slept = false;; slept = true) {
		bool fenced;

		shm_park_prepare(p);
		fenced = shm_park_fence(); /* the words are changed by shm_park_publish */
		if (atomic_load_explicit(word, memory_order_seq_cst) >= target)
			return slept;
		if (fenced)
			shm_park_sleep(p);
		else
			sched_yield(); /* a sleep it cannot order: look again */
		if (atomic_load_explicit(word, memory_order_acquire) >= target)
			return true;
	}
}
