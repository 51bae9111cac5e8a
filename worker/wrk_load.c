/* wrk_load.c - the loader thread (L): fills the device memory of admitted requests
 * (weights, the prompt's KV cache: seconds for the largest), so that M, which must
 * answer heartbeats and assigns within milliseconds, never does it.
 *
 * M admits a request (validated, within the per-request limits, its id and KV
 * blocks reserved: wl_req_reserve), answers the assign and hands the request to L.
 * L fills it (wl_req_fill, no lock held) and moves it to the admission queue for O.
 * A request whose fill failed goes there too, marked failed (s_fail: no_capacity when
 * memory ran out, device_error when the device failed), and one cancelled, whose
 * reader left or whose deadline passed while it waited goes unfilled: O ends both at
 * its next round (the latter timeout) as it ends any request before its first step
 * (wrk_req_end_error: the id is free before the end is visible). L never touches a
 * bank, a ring, or a request it does not hold (state LOADING).
 */
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* L's wait for work is woken by every submit and stop; this bound only re-checks O's
 * exit (which nobody signals to L) and a lost wake. */
#define LOAD_IDLE_WAIT_NS (100u * 1000u * 1000u)
#define LOAD_NS_PER_S	  1000000000ull

int wrk_load_init(struct wrk *w)
{
	pthread_condattr_t ca;
	int err;

	w->load_q = calloc(w->cfg.queue_cap, sizeof(*w->load_q));
	if (!w->load_q)
		return -ENOMEM;
	err = -pthread_condattr_init(&ca);
	if (err)
		return err;
	err = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!err)
		err = -pthread_cond_init(&w->load_cond, &ca);
	pthread_condattr_destroy(&ca);
	w->load_cond_init = err == 0;
	return err;
}

void wrk_load_fini(struct wrk *w)
{
	if (w->load_cond_init)
		pthread_cond_destroy(&w->load_cond);
	w->load_cond_init = false;
	free(w->load_q);
	w->load_q = NULL;
}

static void load_one(struct wrk *w, struct wrk_req *rq);

void wrk_load_submit(struct wrk *w, struct wrk_req *rq)
{
	/* a test's load hook stands for a slow fill: that is L's, never M's */
	bool inline_fill = rq->small_fill && !w->cfg.l_fault;

	pthread_mutex_lock(&w->lock);
	rq->state = WRK_RQ_LOADING;
	w->nloading++;
	/* nothing ahead of it at L (nloading counted only this one): filled here, it
	 * reaches O in admission order */
	inline_fill = inline_fill && w->nloading == 1;
	if (!inline_fill) {
		w->load_q[(w->load_head + w->load_len) % w->cfg.queue_cap] = rq;
		w->load_len++;
		pthread_cond_signal(&w->load_cond);
	}
	pthread_mutex_unlock(&w->lock);
	if (inline_fill)
		load_one(w, rq);
}

void wrk_load_kick(struct wrk *w)
{
	pthread_mutex_lock(&w->lock);
	if (w->load_cond_init)
		pthread_cond_broadcast(&w->load_cond);
	pthread_mutex_unlock(&w->lock);
}

bool wrk_load_pending(struct wrk *w)
{
	bool l_gone = atomic_load_explicit(&w->l_done, memory_order_seq_cst) != 0;
	bool pending;

	/* the admission queue too: L may have queued one after O last took the queue.
	 * What L left when it exited is M's (wrk_end_leftovers), not O's. */
	pthread_mutex_lock(&w->lock);
	pending = w->q_len > 0 || (w->nloading > 0 && !l_gone);
	pthread_mutex_unlock(&w->lock);
	return pending;
}

/* No new work will come (a shutdown began), or nobody would run it (O is gone). */
static bool winding_down(struct wrk *w)
{
	return atomic_load_explicit(&w->stop, memory_order_seq_cst) ||
	       atomic_load_explicit(&w->sync.o_err, memory_order_seq_cst) ||
	       atomic_load_explicit(&w->sync.o_done, memory_order_seq_cst);
}

/* L leaves what it holds to M (wrk_end_leftovers, after the join): O failed or
 * exited, or the shutdown's grace is over. */
static bool must_leave(struct wrk *w)
{
	return atomic_load_explicit(&w->sync.o_err, memory_order_seq_cst) ||
	       atomic_load_explicit(&w->sync.o_done, memory_order_seq_cst) ||
	       (atomic_load_explicit(&w->stop, memory_order_seq_cst) &&
		shm_now_ns() >= atomic_load_explicit(&w->grace_end_ns, memory_order_relaxed));
}

/* Nobody wants @rq any more: cancelled (a cancel call, an abandoned assign), its
 * reader closed the ring, or its deadline passed while it waited (no step of it will
 * be built: O ends it timeout, and a fill for it would only hold up the requests
 * behind it). */
static bool unwanted(struct wrk_req *rq)
{
	return atomic_load_explicit(&rq->cancel, memory_order_acquire) ||
	       wrk_req_ring_unwanted(rq) || (rq->deadline_ns && shm_now_ns() >= rq->deadline_ns);
}

/* The next request to fill, or NULL when L should exit. */
static struct wrk_req *next_load(struct wrk *w)
{
	struct wrk_req *rq = NULL;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct timespec ts;
		uint64_t at;

		if (must_leave(w) || (!w->load_len && winding_down(w)))
			break;
		if (w->load_len) {
			rq = w->load_q[w->load_head];
			w->load_head = (w->load_head + 1) % w->cfg.queue_cap;
			w->load_len--;
			break;
		}
		at = shm_deadline_in(LOAD_IDLE_WAIT_NS);
		ts.tv_sec = (time_t)(at / LOAD_NS_PER_S);
		ts.tv_nsec = (long)(at % LOAD_NS_PER_S);
		(void)pthread_cond_timedwait(&w->load_cond, &w->lock, &ts);
	}
	pthread_mutex_unlock(&w->lock);
	return rq;
}

/* Fills @rq and queues it for O. A request that cannot run is queued too, for O to end
 * (wrk_req_end_error, as for any request that failed before its first step: O is the
 * one writer of ERROR records and of the failed and cancelled counters): one whose
 * fill failed carries its code in s_fail; one cancelled, whose reader left or whose
 * deadline passed, or taken once S gave the device up, is not filled at all. */
static void load_one(struct wrk *w, struct wrk_req *rq)
{
	char msg[WL_MSG_MAX] = "";
	bool lost = false;
	int rc;

	if (!unwanted(rq)) {
		if (w->cfg.l_fault && w->cfg.l_fault(w->cfg.fault_arg, rq->id, 0)) {
			rc = -ENOMEM; /* injected: as if memory had run out */
			snprintf(msg, sizeof(msg), "injected load fault");
		} else if (atomic_load_explicit(&w->sync.s_err, memory_order_seq_cst)) {
			/* S gave the device up: nobody runs it here, and a fill on a lost
			 * device would fail it device_error; O ends it unfilled, worker_lost
			 * (retryable), as every request S never started */
			rc = 0;
		} else {
			pthread_mutex_lock(&w->lock);
			w->fill_since_ns = shm_now_ns();
			w->fill_id = rq->id;
			pthread_mutex_unlock(&w->lock);
			rc = wl_req_fill(rq->wl, msg, sizeof(msg));
		}
		if (rc) {
			fprintf(stderr, "chipd worker %u: request %llu: cannot load: %s\n",
				w->cfg.chip, (unsigned long long)rq->id, msg);
			/* out of host or device memory is a shortage; anything else the device
			 * said is its failure. Relaxed: the queue's lock publishes it to O. */
			atomic_store_explicit(
			    &rq->s_fail, rc == -ENOMEM ? CHIPD_E_NO_CAPACITY : CHIPD_E_DEVICE_ERROR,
			    memory_order_relaxed);
			/* the device is lost (a fault outside any step, which S would not see
			 * while it has nothing to run): the chip leaves the router's choice
			 * before this end is visible, and S gives the device up */
			lost = dev_lost(w->dev);
			if (lost)
				wrk_mark_unhealthy(w);
		}
	}
	pthread_mutex_lock(&w->lock);
	w->fill_since_ns = 0;
	w->nloading--;
	/* room guaranteed: admission counted this request in nloading */
	w->queue[(w->q_head + w->q_len) % w->cfg.queue_cap] = rq;
	w->q_len++;
	rq->state = WRK_RQ_QUEUED;
	/* queue_depth's writers (L here, M when it queues a request itself, O when it
	 * takes the queue) all hold the lock: the last store is the current length */
	ctr_set(w->ctr, wrk_ctr_index(PROTO_WRK_queue_depth), w->q_len);
	pthread_mutex_unlock(&w->lock);
	wrk_kick_o(w);
	if (lost) /* its wait for an epoch watches the device's loss */
		shm_wake_all(&w->sync.s_wake);
}

void *wrk_load_main(void *arg)
{
	struct wrk *w = arg;
	struct wrk_req *rq;

	while ((rq = next_load(w)))
		load_one(w, rq);
	atomic_store_explicit(&w->l_done, 1, memory_order_seq_cst);
	wrk_kick_o(w); /* O may be waiting for what L held (wrk_load_pending) */
	return NULL;
}
