/* wrk_sched.c - the scheduler thread (S): waits for the next epoch, runs its bank's
 * tasks on the device, publishes each request's token and returns the bank. */
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Bound of one wait for an epoch. O's publish and O's exit both wake S (the wait's
 * ready test sees them), so this only bounds a lost wake; long, so an idle worker
 * does not wake for nothing. */
#define SCHED_EPOCH_WAIT_NS (1000u * 1000u * 1000u)

static void ctr_s(struct wrk *w, enum proto_wrk_ctr c, uint64_t d)
{
	ctr_add(w->ctr, wrk_ctr_index(c), d);
}

/* Runs the step of @b: the fault hook first (tests), then the device. */
static int run_step(struct wrk *w, struct wrk_bank *b)
{
	WRK_OWNED(b, WRK_OWNER_S);
	if (w->cfg.fault) {
		for (uint32_t i = 0; i < b->nents; i++)
			if (w->cfg.fault(w->cfg.fault_arg, b->ents[i].rq->id, b->ents[i].step))
				return -EIO;
	}
	if (b->step.n == 0)
		return 0;
	return wl_exec_run(w->exec, &b->step);
}

/* Publishes one request's token of a completed step. FINAL goes with the last
 * token: by now its step and every earlier one have completed. Returns a code to
 * fail the request with, or CHIPD_OK. */
static enum chipd_code publish(struct wrk *w, struct wrk_entry *e)
{
	struct wrk_req *rq = e->rq;
	struct ring_rec rec = {.request_id = rq->id, .seq = e->step};
	bool last = e->step + 1 == rq->limit;
	uint64_t tok;

	/* The token is read where the build said it lands (wl.h, struct wl_out). The
	 * entry's own step is the order check: S is a request's only token reader and
	 * runs its steps in build order, and a request that drops one step (failed,
	 * cancelled) publishes no later one. */
	if (e->out.step != e->step || !e->out.token)
		return CHIPD_E_INTERNAL;
	tok = (uint64_t)(uint32_t)*e->out.token;
	rec.value = tok;
	rec.flags = last ? RING_F_FINAL : 0;
	/* the id is free before FINAL is visible: a client that read it may resubmit */
	if (last)
		wrk_req_end_final(w, rq);
	/* O only builds a step when the ring has room for every token in flight */
	if (ring_push(&rq->s_ring, &rec)) {
		if (last) /* cannot happen (a terminal always fits); the id is gone anyway */
			atomic_store_explicit(&rq->s_final, 1, memory_order_release);
		return CHIPD_E_INTERNAL;
	}
	atomic_store_explicit(&rq->s_pushed, e->step + 1, memory_order_relaxed);
	ctr_s(w, PROTO_WRK_tokens, 1);
	if (last) {
		ctr_s(w, PROTO_WRK_completed, 1);
		atomic_store_explicit(&rq->s_final, 1, memory_order_release);
	}
	return CHIPD_OK;
}

static void finish_bank(struct wrk *w, struct wrk_bank *b, int rc)
{
	if (rc)
		ctr_s(w, PROTO_WRK_device_errors, 1);
	for (uint32_t i = 0; i < b->nents; i++) {
		struct wrk_entry *e = &b->ents[i];
		struct wrk_req *rq = e->rq;
		enum chipd_code code = CHIPD_OK;

		if (atomic_load_explicit(&rq->s_fail, memory_order_relaxed)) {
			/* failed earlier: its later steps are dropped */
		} else if (rc) {
			code = CHIPD_E_DEVICE_ERROR;
		} else if (!atomic_load_explicit(&rq->cancel, memory_order_acquire)) {
			code = publish(w, e);
		}
		if (code != CHIPD_OK)
			atomic_store_explicit(&rq->s_fail, code, memory_order_relaxed);
		/* release: O reads the ring, s_fail and s_final after it sees s_done */
		atomic_store_explicit(&rq->s_done, e->step + 1, memory_order_release);
	}
}

/* S gives up for good: the error word first (O ends every stream it holds once it
 * sees it, M stops admitting), then S touches no request again. */
static void s_fatal(struct wrk *w, int err, uint32_t streak)
{
	fprintf(stderr, "chipd worker %u: scheduler: %u steps in a row failed (%s); device lost\n",
		w->cfg.chip, streak, strerror(-err));
	atomic_store_explicit(&w->sync.s_err, err, memory_order_seq_cst);
	shm_wake_all(&w->sync.o_wake);
}

void *wrk_sched_main(void *arg)
{
	struct wrk *w = arg;
	uint32_t fatal_at =
	    w->cfg.s_fatal_streak ? w->cfg.s_fatal_streak : WRK_S_FATAL_STREAK_DEFAULT;
	uint32_t streak = 0;
	uint64_t e = 1;

	for (;;) {
		struct wrk_bank *b;
		uint64_t t0, t1, tr, o0, o1, busy;
		uint32_t nents;
		int err, rc;

		t0 = shm_now_ns();
		b = wrk_bank_next(w, e, shm_deadline_in(SCHED_EPOCH_WAIT_NS), &err);
		if (!b) {
			if (err == -ETIMEDOUT)
				continue;
			break; /* O is gone and every epoch it published has run */
		}
		t1 = shm_now_ns();
		wrk_trace_span(wrk_trace_of(w), WRK_TR_S, WRK_SPAN_S_WAIT, t0, t1, (uint32_t)e);
		t0 = t1;
		o0 = wrk_o_busy_at(&w->sync, t0);
		rc = run_step(w, b);
		tr = shm_now_ns();
		wrk_trace_span(wrk_trace_of(w), WRK_TR_S, WRK_SPAN_S_RUN, t0, tr, (uint32_t)e);
		finish_bank(w, b, rc);
		t1 = shm_now_ns();
		wrk_trace_span(wrk_trace_of(w), WRK_TR_S, WRK_SPAN_S_PUBLISH, tr, t1, (uint32_t)e);
		o1 = wrk_o_busy_at(&w->sync, t1);
		busy = t1 - t0;
		ctr_s(w, PROTO_WRK_s_busy_ns, busy);
		ctr_s(w, PROTO_WRK_overlap_ns, o1 - o0 < busy ? o1 - o0 : busy);
		nents = b->nents; /* the bank is O's once released */
		wrk_bank_release(w, b);
		e++;
		if (nents)
			streak = rc ? streak + 1 : 0;
		if (streak >= fatal_at) {
			s_fatal(w, rc < 0 ? rc : -EIO, streak);
			break;
		}
	}
	atomic_store_explicit(&w->sync.s_exited, 1, memory_order_seq_cst);
	return NULL;
}
