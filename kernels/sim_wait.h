/* sim_wait.h - how the sim backend's threads wait for one another (dev_sim.c): each
 * hand-off is a counter that only grows, changed by shm_park_publish (shm/wait.h: the
 * asymmetric park protocol, a plain store per op where the kernel has membarrier) and
 * waited for by spinning first, then sleeping. */
#ifndef CHIPD_SIM_WAIT_H
#define CHIPD_SIM_WAIT_H

#include "wait.h"

#include <stdbool.h>
#include <stdint.h>

/* How long a waiter spins before it sleeps: the host waiting for a stream, a stream
 * waiting for another stream's event. As shm_wait's default, and for its reason. */
#define SIM_SPIN_NS SHM_SPIN_NS_DEFAULT
/* How long a stream thread whose queue ran empty spins before it sleeps: long enough
 * to bridge the host's gap between two ops for this stream while it fills the other
 * streams (each sleep costs the host a wake syscall and the stream ~50 us), shorter
 * than SIM_SPIN_NS because idle stream threads may outnumber the cores (4 streams on
 * 2 CPUs) and every one that spins takes CPU from the threads with work. */
#define SIM_IDLE_SPIN_NS (20u * 1000u)

/* Waits until *@word >= @target: spins for @spin_ns (pure PAUSE for the first
 * microsecond, then yielding between looks), then sleeps on @p. The words only grow,
 * and every op a stream takes runs to completion, so the wait ends as the work it
 * waits for ends (as a GPU's would; a kernel that never ends hangs it). Returns
 * whether it slept. */
bool sim_wait_ge(_Atomic uint64_t *word, uint64_t target, struct shm_park *p,
		 uint64_t spin_ns);

#endif
