/* e2e_floor.c - the small-request section's floor: what a request's hand-offs cost on
 * this machine with nothing else to do.
 *
 * A one-token request crosses E2E_PATH_HANDOFFS hand-offs in a row, among
 * E2E_PATH_THREADS threads: client -> router -> worker M -> O -> S -> the sim stream
 * -> S -> the client's ring. Each of those threads waits as chipd's do (shm_spin: a
 * short pause, then yielding the CPU between looks). Here the same number of threads
 * pass one word round a ring, each waiting with shm_spin for its turn and doing no
 * work: the hand-off's p50 times the path's length is what the path costs at best on
 * these CPUs, whatever chipd does between hand-offs. */
#include "e2e.h"

#include "bench.h"
#include "wait.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Laps timed, after E2E_WARM_NS of untimed ones. */
#define FLOOR_LAPS 4000u
/* A waiter's budget before it looks again (it never sleeps: the floor of a spin). */
#define FLOOR_SPIN_NS (50u * 1000u)

struct floor_ring {
	_Alignas(64) _Atomic uint64_t turn; /* hand-offs so far; thread turn % n goes next */
	_Atomic bool stop;		    /* set by thread 0 once it timed its laps */
	unsigned n;
};

struct floor_thread {
	pthread_t th;
	struct floor_ring *ring;
	unsigned me;
	uint64_t *lap_ns; /* thread 0: the start of each timed lap, and the end of the last */
};

static bool my_turn(void *arg)
{
	struct floor_thread *t = arg;

	return atomic_load_explicit(&t->ring->stop, memory_order_acquire) ||
	       atomic_load_explicit(&t->ring->turn, memory_order_acquire) % t->ring->n == t->me;
}

/* Thread 0's part of its turn: times the laps once the warm-up is over. Returns
 * whether it timed them all. */
static bool lap(struct floor_thread *ft, uint64_t warm_end, unsigned *timed)
{
	uint64_t now = bench_chipd_now_ns();

	if (*timed == 0 && now < warm_end)
		return false;
	ft->lap_ns[(*timed)++] = now;
	return *timed == FLOOR_LAPS + 1;
}

static void *floor_thread_main(void *arg)
{
	struct floor_thread *ft = arg;
	struct floor_ring *r = ft->ring;
	uint64_t warm_end = bench_chipd_now_ns() + E2E_WARM_NS;
	unsigned timed = 0;

	for (;;) {
		while (!shm_spin(my_turn, ft, FLOOR_SPIN_NS, 0, SHM_DEADLINE_NEVER))
			;
		if (atomic_load_explicit(&r->stop, memory_order_acquire))
			return NULL;
		if (ft->me == 0 && lap(ft, warm_end, &timed)) {
			atomic_store_explicit(&r->stop, true, memory_order_release);
			return NULL;
		}
		atomic_fetch_add_explicit(&r->turn, 1, memory_order_release);
	}
}

int e2e_floor(struct e2e_small *s)
{
	const unsigned n = E2E_PATH_THREADS;
	struct floor_ring ring = {.n = n};
	struct floor_thread th[E2E_PATH_THREADS] = {0};
	uint64_t *lap_ns = calloc(FLOOR_LAPS + 1, sizeof(*lap_ns));
	uint64_t *per_hop = calloc(FLOOR_LAPS, sizeof(*per_hop));
	unsigned started = 0;
	int rc = 0;

	if (!lap_ns || !per_hop)
		rc = -ENOMEM;
	for (; rc == 0 && started < n; started++) {
		th[started] = (struct floor_thread){.ring = &ring, .me = started, .lap_ns = lap_ns};
		rc = -pthread_create(&th[started].th, NULL, floor_thread_main, &th[started]);
		if (rc)
			break;
	}
	if (rc) /* the started ones leave at once */
		atomic_store_explicit(&ring.stop, true, memory_order_release);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i].th, NULL);
	if (rc == 0) {
		/* lap k: thread 0's turn -> its next turn, n hand-offs */
		for (unsigned k = 0; k < FLOOR_LAPS; k++)
			per_hop[k] = (lap_ns[k + 1] - lap_ns[k]) / n;
		s->handoff_p50 = bench_quantile(per_hop, FLOOR_LAPS, 0.50);
	}
	free(lap_ns);
	free(per_hop);
	return s->floor_rc = rc;
}
