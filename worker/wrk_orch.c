/* wrk_orch.c - the orchestrator thread (O): takes admitted requests and cancels,
 * retires requests whose streams ended, builds one step for every request that may
 * advance into a free bank and publishes it with the next epoch. */
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long O sleeps when nothing can advance. A request paused on a full ring is
 * woken by nobody (the reader does not ring the producer), so O re-checks ring
 * space this often; any other change (new work, cancel, stop, a released bank, a
 * step S finished) wakes it at once. */
#define ORCH_PAUSED_POLL_NS (500u * 1000u)
/* Idle: every change wakes O, so this only bounds a lost wake; long, so an idle
 * worker does not wake for nothing (idle CPU budget, docs/performance.md). */
#define ORCH_IDLE_WAIT_NS (1000u * 1000u * 1000u)
/* Bound of one wait for a free bank; O re-checks stop and S's error between waits. */
#define ORCH_BANK_WAIT_NS (100u * 1000u * 1000u)

struct orch {
	struct wrk *w;
	struct wrk_req **act; /* requests O took, up to nreqs of them */
	uint32_t nact;
	uint32_t seen_kicks;
	uint64_t seen_released, seen_finished;
	int32_t seen_s_err;
	uint32_t rot; /* where the last step started in the pick list */
};

static void ctr_o(struct wrk *w, enum proto_wrk_ctr c, uint64_t d)
{
	ctr_add(w->ctr, wrk_ctr_index(c), d);
}

static void ctr_o_set(struct wrk *w, enum proto_wrk_ctr c, uint64_t v)
{
	ctr_set(w->ctr, wrk_ctr_index(c), v);
}

/* Moves every admitted request from the admission queue to O's active list. */
static void take_new(struct orch *o)
{
	struct wrk *w = o->w;

	pthread_mutex_lock(&w->lock);
	while (w->q_len) {
		struct wrk_req *rq = w->queue[w->q_head];

		w->q_head = (w->q_head + 1) % w->cfg.queue_cap;
		w->q_len--;
		rq->state = WRK_RQ_ACTIVE;
		o->act[o->nact++] = rq;
	}
	/* under the lock: M sets queue_depth too, when it queues (wrk_admit.c) */
	ctr_o_set(w, PROTO_WRK_queue_depth, 0);
	pthread_mutex_unlock(&w->lock);
}

static void drop(struct orch *o, uint32_t i)
{
	o->act[i] = o->act[--o->nact];
}

/* Ends the requests whose streams can end now: completed (S wrote FINAL and released
 * the id: the record goes back), failed, cancelled (by a cancel call, or by its reader,
 * who closed the ring: nobody reads the stream any more), or every one when @abort_all. A
 * request with a step in S waits, unless S gave up (@s_dead: it will never touch the
 * rings again; a request whose own step failed ends with its code, device_error, a
 * cancelled one cancelled, the others with worker_lost, retryable). */
static void retire(struct orch *o, bool abort_all, bool s_dead)
{
	struct wrk *w = o->w;
	uint64_t now = shm_now_ns();

	for (uint32_t i = 0; i < o->nact;) {
		struct wrk_req *rq = o->act[i];
		uint32_t done = atomic_load_explicit(&rq->s_done, memory_order_acquire);
		int32_t fail = atomic_load_explicit(&rq->s_fail, memory_order_acquire);
		bool cancel = atomic_load_explicit(&rq->cancel, memory_order_acquire) != 0 ||
			      wrk_req_ring_unwanted(rq);

		if (s_dead && !atomic_load_explicit(&rq->s_final, memory_order_acquire)) {
			/* a step of its own failed: its code; one nobody wants any more (a
			 * cancel answered ok, a reader gone) ends cancelled, as everywhere; the
			 * others did nothing wrong and end retryable, to run on a healthy chip */
			wrk_req_end_error(w, rq,
					  fail	   ? (enum chipd_code)fail
					  : cancel ? CHIPD_E_CANCELLED
						   : CHIPD_E_WORKER_LOST);
			drop(o, i);
			continue;
		}
		if (done != rq->built) {
			i++; /* S still owns a step of it */
			continue;
		}
		if (atomic_load_explicit(&rq->s_final, memory_order_acquire)) {
			wrk_req_free(w, rq); /* its id went back before FINAL was pushed */
		} else if (fail) {
			wrk_req_end_error(w, rq, (enum chipd_code)fail);
		} else if (cancel || abort_all) {
			wrk_req_end_error(w, rq, CHIPD_E_CANCELLED);
		} else if (rq->deadline_ns && now >= rq->deadline_ns) {
			wrk_req_end_error(w, rq, CHIPD_E_TIMEOUT);
		} else {
			i++;
			continue;
		}
		drop(o, i);
	}
}

/* May @rq get another step now? At most WRK_REQ_INFLIGHT steps of it are out (S's
 * finishing one wakes O), and the tokens already in flight are counted against the
 * ring's free records, so a push by S can never find the ring full; *@ring_wait is set
 * when only the ring's space holds it back (nobody wakes O for that). */
static bool may_advance(struct wrk_req *rq, uint64_t now, bool *ring_wait)
{
	uint32_t done = atomic_load_explicit(&rq->s_done, memory_order_acquire);

	if (rq->built >= rq->limit || atomic_load_explicit(&rq->s_fail, memory_order_relaxed) ||
	    atomic_load_explicit(&rq->cancel, memory_order_relaxed) ||
	    wrk_req_ring_unwanted(rq) || (rq->deadline_ns && now >= rq->deadline_ns))
		return false;
	if (rq->built - done >= WRK_REQ_INFLIGHT)
		return false;
	/* read s_done before the space: a push in between only makes us pessimistic */
	if (ring_space(&rq->o_ring) > rq->built - done)
		return true;
	*ring_wait = true;
	return false;
}

/* O failed to build @rq's part of a step. Only @rq is affected: a failed build adds
 * nothing to the step (wl.h says so for -ENOBUFS; the injected fault never calls
 * wl_req_build), so the rest of the step is whole and still runs. @rq does not
 * advance (built stays), retire() ends its stream as soon as S has finished what is
 * in flight (S may drop a token still in flight: the ERROR record takes its seq).
 * The code is internal, not device_error: the device never saw this step, the fault
 * is the host's (docs/protocol.md §8.3: device_error is what the device reports).
 * S is never left waiting for it: the bank is published even when the failure left
 * it empty (the epoch sequence has no holes), and a fatal O error goes to o_err. */
static void o_fail(struct wrk_req *rq)
{
	atomic_store_explicit(&rq->s_fail, CHIPD_E_INTERNAL, memory_order_relaxed);
}

/* Builds one step for every request that may advance. Returns how many requests
 * were built, or -errno when no bank could be had. */
static int build_step(struct orch *o, struct wrk_req **pick, uint32_t npick)
{
	struct wrk *w = o->w;
	struct wrk_bank *b;
	uint64_t t0, t1;
	bool grace_over;
	int err;

	t0 = shm_now_ns();
	b = wrk_bank_acquire(w, shm_deadline_in(ORCH_BANK_WAIT_NS), &err);
	t1 = shm_now_ns();
	wrk_trace_span(wrk_trace_of(w), WRK_TR_O, WRK_SPAN_O_WAIT, t0, t1,
		       b ? (uint32_t)b->epoch : 0);
	if (!b)
		return err;
	t0 = t1;
	/* a shutdown's grace that ended during the wait: every stream left ends cancelled
	 * (retire), none gets a new step */
	grace_over = atomic_load_explicit(&w->stop, memory_order_seq_cst) &&
		     t1 >= atomic_load_explicit(&w->grace_end_ns, memory_order_relaxed);
	wrk_o_busy_begin(&w->sync, t0);
	err = wl_step_init(&b->step, &b->host, &b->dev, w->cfg.bank_tasks);
	if (err) {
		/* the step itself cannot be built: every request picked for it is affected */
		for (uint32_t k = 0; k < npick; k++)
			o_fail(pick[k]);
	}
	/* start one further each step, so a full step does not always leave out the
	 * same requests */
	o->rot = npick ? (o->rot + 1) % npick : 0;
	for (uint32_t k = 0; !err && k < npick && b->nents < w->cfg.max_batch; k++) {
		struct wrk_req *rq = pick[(o->rot + k) % npick];
		struct wrk_entry *e = &b->ents[b->nents];
		int rc;

		/* picked before the wait for the bank, which may last a whole step of
		 * another request: S may have failed it, M cancelled it, its reader closed
		 * the ring, its deadline or the shutdown's grace passed meanwhile (no step
		 * is built after either); a step for it would run for nothing */
		if (grace_over || atomic_load_explicit(&rq->s_fail, memory_order_relaxed) ||
		    atomic_load_explicit(&rq->cancel, memory_order_relaxed) ||
		    wrk_req_ring_unwanted(rq) ||
		    (rq->deadline_ns && shm_now_ns() >= rq->deadline_ns))
			continue;

		if (w->cfg.o_fault && w->cfg.o_fault(w->cfg.fault_arg, rq->id, rq->built))
			rc = -EIO; /* injected: as if the build had failed */
		else
			rc = wl_req_build(rq->wl, &b->step, b->nents, &e->out);
		/* progress inside a round: a step of many costly builds is not a stall */
		atomic_fetch_add_explicit(&w->sync.o_rounds, 1, memory_order_relaxed);
		if (rc == -ENOBUFS && b->nents > 0)
			break; /* the step is full: the rest go into the next one */
		if (rc) {
			/* cannot build it (not even alone in an empty bank: it never would):
			 * end it once S has what is in flight. One line per request: a
			 * failed request is never built again. */
			fprintf(stderr,
				"chipd worker %u: request %llu: %s: build failed: %s%s%s%s\n",
				w->cfg.chip, (unsigned long long)rq->id,
				wl_req_workload(rq->wl), strerror(-rc),
				rc == -ENOBUFS ? " (alone in an empty step)" : "",
				b->step.why[0] ? ": a launch refused: " : "", b->step.why);
			o_fail(rq);
			continue;
		}
		e->rq = rq;
		e->step = rq->built++;
		b->nents++;
	}
	t1 = shm_now_ns();
	wrk_o_busy_end(&w->sync, t1);
	ctr_o(w, PROTO_WRK_o_busy_ns, t1 - t0);
	wrk_trace_span(wrk_trace_of(w), WRK_TR_O, WRK_SPAN_O_BUILD, t0, t1, (uint32_t)b->epoch);
	/* a step that holds nothing (every pick cancelled, failed, or its build failed) is
	 * no step built; it is still published: the epoch sequence has no holes */
	if (b->nents)
		ctr_o(w, PROTO_WRK_steps, 1);
	wrk_bank_publish(w, b);
	return (int)b->nents;
}

struct idle_arg {
	struct wrk *w;
	uint32_t kicks;
	uint64_t released, finished;
	int32_t s_err;
};

static bool something_changed(void *arg)
{
	struct idle_arg *a = arg;

	return atomic_load_explicit(&a->w->sync.kicks, memory_order_seq_cst) != a->kicks ||
	       atomic_load_explicit(&a->w->sync.released, memory_order_seq_cst) != a->released ||
	       atomic_load_explicit(&a->w->sync.finished, memory_order_seq_cst) != a->finished ||
	       atomic_load_explicit(&a->w->stop, memory_order_seq_cst) != 0 ||
	       atomic_load_explicit(&a->w->sync.s_err, memory_order_seq_cst) != a->s_err;
}

static void idle_wait(struct orch *o, uint64_t ns)
{
	struct wrk *w = o->w;
	struct idle_arg a = {w, o->seen_kicks, o->seen_released, o->seen_finished, o->seen_s_err};
	struct shm_waiter how = {something_changed, NULL, &a, w->cfg.spin_ns, 0, &w->o_idle_spin};

	(void)shm_wait(&w->sync.o_wake, &how, shm_deadline_in(ns));
}

/* How long O may sleep with nothing to build: every change wakes it, except the end
 * of a shutdown's grace period, which it must not sleep past. */
static uint64_t idle_ns(struct wrk *w, bool stopping, bool abort_all)
{
	uint64_t now, end;

	if (!stopping)
		return ORCH_IDLE_WAIT_NS;
	if (abort_all) /* what is left waits for S: re-check soon */
		return ORCH_PAUSED_POLL_NS;
	now = shm_now_ns();
	end = atomic_load_explicit(&w->grace_end_ns, memory_order_relaxed);
	return end <= now		       ? ORCH_PAUSED_POLL_NS
	       : end - now < ORCH_IDLE_WAIT_NS ? end - now
					       : ORCH_IDLE_WAIT_NS;
}

void wrk_o_gauges(struct wrk *w, uint32_t nact)
{
	uint32_t used;

	pthread_mutex_lock(&w->kv_lock);
	used = w->cfg.kv_blocks - wl_kvpool_free_blocks(w->kv);
	pthread_mutex_unlock(&w->kv_lock);
	ctr_o_set(w, PROTO_WRK_active, nact);
	ctr_o_set(w, PROTO_WRK_kv_blocks_used, used);
	atomic_store_explicit(&w->o_active, nact, memory_order_relaxed);
}

/* O gives up for good: the error word first, so M stops admitting and S stops
 * waiting; O's requests stay as they are (S may still run what was published), and
 * M ends their streams once both threads have exited. */
static void o_fatal(struct wrk *w, int err, const char *why)
{
	fprintf(stderr, "chipd worker %u: orchestrator failed: %s (%s)\n", w->cfg.chip, why,
		strerror(-err));
	atomic_store_explicit(&w->sync.o_err, err, memory_order_seq_cst);
	wrk_mark_unhealthy(w);
	shm_wake_all(&w->sync.s_wake);
}

void *wrk_orch_main(void *arg)
{
	struct orch o = {.w = arg};
	struct wrk *w = o.w;
	struct wrk_req **pick;

	/* as many as there are records: O holds each at most once */
	o.act = calloc(w->nreqs, sizeof(*o.act));
	pick = calloc(w->nreqs, sizeof(*pick));
	if (!o.act || !pick) {
		o_fatal(w, -ENOMEM, "no memory for the request lists");
		goto out;
	}
	for (uint32_t round = 0;; round++) {
		bool stopping = atomic_load_explicit(&w->stop, memory_order_seq_cst) != 0;
		bool abort_all =
		    stopping &&
		    shm_now_ns() >= atomic_load_explicit(&w->grace_end_ns, memory_order_relaxed);
		int32_t s_err = atomic_load_explicit(&w->sync.s_err, memory_order_seq_cst);
		bool s_dead = s_err != 0;
		uint32_t npick = 0;
		bool paused = false;
		uint64_t now;

		atomic_fetch_add_explicit(&w->sync.o_rounds, 1, memory_order_relaxed);
		if (w->cfg.o_fatal && w->cfg.o_fatal(w->cfg.fault_arg, 0, round)) {
			o_fatal(w, -EIO, "injected fatal fault");
			goto out;
		}
		o.seen_s_err = s_err;
		o.seen_kicks = atomic_load_explicit(&w->sync.kicks, memory_order_seq_cst);
		o.seen_released = atomic_load_explicit(&w->sync.released, memory_order_seq_cst);
		o.seen_finished = atomic_load_explicit(&w->sync.finished, memory_order_seq_cst);
		take_new(&o);
		retire(&o, abort_all, s_dead);
		wrk_o_gauges(w, o.nact);
		/* not before L queued what it holds: a request admitted before the stop runs */
		if (stopping && o.nact == 0 && !wrk_load_pending(w))
			break;
		now = shm_now_ns();
		for (uint32_t i = 0; !abort_all && !s_dead && i < o.nact; i++) {
			if (may_advance(o.act[i], now, &paused))
				pick[npick++] = o.act[i];
		}
		if (npick) {
			int rc = build_step(&o, pick, npick);

			if (rc == -EPIPE)
				continue; /* S failed: the next round ends everything */
			if (rc >= 0)
				continue;
		}
		idle_wait(&o, paused ? ORCH_PAUSED_POLL_NS : idle_ns(w, stopping, abort_all));
	}
out:
	free(o.act);
	free(pick);
	atomic_store_explicit(&w->sync.o_done, 1, memory_order_seq_cst);
	shm_wake_all(&w->sync.s_wake);
	return NULL;
}
