/* wrk_admit.c - the control mailbox's handlers (assign, cancel, heartbeat, shutdown,
 * trace) and the request table: admission, id reservation, the end of a stream. */
#include "wrk_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void ctr_m(struct wrk *w, enum proto_wrk_ctr c)
{
	ctr_add(w->ctr, wrk_ctr_index(c), 1);
}

void wrk_kick_o(struct wrk *w)
{
	atomic_fetch_add_explicit(&w->sync.kicks, 1, memory_order_seq_cst);
	shm_wake_all(&w->sync.o_wake);
}

void wrk_mark_unhealthy(struct wrk *w)
{
	if (w->control)
		shm_region_set_state(w->control, SHM_STATE_DRAINING);
}

static bool is_live(enum wrk_req_state st)
{
	return st == WRK_RQ_RESERVED || st == WRK_RQ_LOADING || st == WRK_RQ_QUEUED ||
	       st == WRK_RQ_ACTIVE;
}

/* A live request with @id, under w->lock. An ENDED one's id is free already. */
static struct wrk_req *find_live(struct wrk *w, uint64_t id)
{
	for (uint32_t i = 0; i < w->nreqs; i++)
		if (is_live(w->reqs[i].state) && w->reqs[i].id == id)
			return &w->reqs[i];
	return NULL;
}

/* Returns @rq to the free list; its id too if it was still live. */
static void put_slot(struct wrk *w, struct wrk_req *rq)
{
	pthread_mutex_lock(&w->lock);
	if (is_live(rq->state))
		w->live--;
	rq->state = WRK_RQ_FREE;
	rq->id = 0;
	rq->next_free = w->free_list;
	w->free_list = rq;
	pthread_mutex_unlock(&w->lock);
}

static void release_wl(struct wrk *w, struct wrk_req *rq)
{
	if (!rq->wl)
		return;
	pthread_mutex_lock(&w->kv_lock);
	wl_req_destroy(rq->wl);
	pthread_mutex_unlock(&w->kv_lock);
	rq->wl = NULL;
}

void wrk_req_free(struct wrk *w, struct wrk_req *rq)
{
	release_wl(w, rq);
	put_slot(w, rq);
}

void wrk_req_end_final(struct wrk *w, struct wrk_req *rq)
{
	/* its last step completed and O builds no more (built == limit): nobody uses
	 * the workload request any more. O reads rq->wl (now NULL) only after s_final. */
	release_wl(w, rq);
	pthread_mutex_lock(&w->lock);
	rq->state = WRK_RQ_ENDED;
	w->live--;
	pthread_mutex_unlock(&w->lock);
}

void wrk_req_end_error(struct wrk *w, struct wrk_req *rq, enum chipd_code code)
{
	struct ring_rec rec = {
	    .request_id = rq->id,
	    .seq = atomic_load_explicit(&rq->s_pushed, memory_order_relaxed),
	    .flags = RING_F_ERROR | RING_F_CODE(code),
	};

	struct ring ring = rq->o_ring;
	uint32_t gen = rq->ring_gen;
	uint32_t ended = wrk_ctr_index(code == CHIPD_E_CANCELLED ? PROTO_WRK_cancelled
								 : PROTO_WRK_failed);
	int rc;

	_Atomic uint64_t *pass = &w->node->dir[w->cfg.chip].pass_o;

	/* the id is free before the end is visible: a client that saw it may reuse it */
	wrk_req_free(w, rq);
	/* O's pass section (M's once O is joined) covers the reader's wake below, a write
	 * into the client region's consumer line */
	wrk_pass_enter(pass);
	/* the supervisor took the ring back (and ended our stream there): ended in our
	 * books, nothing written (seq_cst: the Dekker of wrk_pass_enter) */
	if (atomic_load_explicit(&ring.hdr->generation, memory_order_seq_cst) != gen) {
		wrk_pass_leave(pass);
		ctr_add(w->ctr, ended, 1);
		return;
	}
	/* a terminal record always has room (ring.h) and only FINAL (never written for
	 * this request) or this call end a stream: a failure means a peer broke the
	 * ring's indices or flags. Counted right after the record is visible, before the
	 * reader's wake, as S counts a token (protocol.md 8.1). */
	rc = ring_publish(&ring, &rec);
	ctr_add(w->ctr, ended, 1);
	if (!rc)
		ring_wake_reader(&ring);
	wrk_pass_leave(pass);
	if (rc)
		wrk_terminal_push_failed(w, rec.request_id, rc);
}

void wrk_terminal_push_failed(struct wrk *w, uint64_t id, int rc)
{
	ctr_add(w->ctr, wrk_ctr_index(PROTO_WRK_terminal_push_failed), 1);
	if (atomic_exchange_explicit(&w->push_fail_logged, 1, memory_order_relaxed) == 0)
		fprintf(stderr,
			"chipd worker %u: request %llu: cannot write the end of its stream (%s); "
			"counted in terminal_push_failed, not logged again\n",
			w->cfg.chip, (unsigned long long)id, strerror(-rc));
}

/* Reserves a slot for @id atomically (under the table lock): duplicate_id for a live
 * id, queue_full when the admission queue (with the requests L will queue) or the
 * table is full. */
static int reserve(struct wrk *w, uint64_t id, struct wrk_req **out, struct proto_error *err)
{
	struct wrk_req *rq;
	int code = CHIPD_OK;

	pthread_mutex_lock(&w->lock);
	if (find_live(w, id))
		code = proto_fail(err, CHIPD_E_DUPLICATE_ID, "request %llu is live on this chip",
				  (unsigned long long)id);
	else if (w->q_len + w->nloading >= w->cfg.queue_cap || w->live >= w->cfg.max_requests ||
		 !w->free_list /* records O has not returned yet: microseconds */)
		code = proto_fail(err, CHIPD_E_QUEUE_FULL,
				  "admission queue full (%u queued, %u loading, %u live)", w->q_len,
				  w->nloading, w->live);
	if (code == CHIPD_OK) {
		rq = w->free_list;
		w->free_list = rq->next_free;
		w->live++;
		rq->id = id;
		rq->state = WRK_RQ_RESERVED;
		*out = rq;
	}
	pthread_mutex_unlock(&w->lock);
	return code;
}

static int attach_ring(struct wrk *w, const struct proto_msg *req, struct wrk_req *rq,
		       struct proto_error *err)
{
	struct ring r;

	/* the consumer line is in the region of the client holding the ring: the index
	 * comes from the supervisor's assign and is still bounds-checked */
	if (req->ring < 0 || req->ring > UINT32_MAX || req->region < 0 ||
	    req->region > UINT32_MAX ||
	    proto_node_ring_in(w->node, (uint32_t)req->ring, (uint32_t)req->region, &r))
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"ring\": no ring %lld with client region %lld in the node",
				  (long long)req->ring, (long long)req->region);
	if (atomic_load_explicit(&r.hdr->generation, memory_order_acquire) !=
		(uint32_t)req->ring_gen ||
	    atomic_load_explicit(&r.hdr->request_id, memory_order_acquire) != (uint64_t)req->id)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"ring_gen\": ring %lld is not generation %lld of request %lld",
				  (long long)req->ring, (long long)req->ring_gen,
				  (long long)req->id);
	rq->o_ring = r;
	rq->ring_gen = (uint32_t)req->ring_gen;
	rq->s_ring = r;
	return CHIPD_OK;
}

/* @what of @value against the per-request limit @lim (0: none) named @name: the
 * request can never fit on this node, so bad_request. */
static int over_limit(struct proto_error *err, const char *wl, const char *what, uint64_t value,
		      const char *name, uint64_t lim)
{
	return proto_fail(err, CHIPD_E_BAD_REQUEST,
			  "%s: %llu %s exceed the per-request limit %s=%llu", wl,
			  (unsigned long long)value, what, name, (unsigned long long)lim);
}

/* The range [@off, @off + @len) of the assign's client region's data area, by the
 * worker's own geometry, or NULL when it is not inside it. */
static char *data_range(struct wrk *w, const struct proto_msg *req, int64_t off, int64_t len)
{
	if (req->region < 0 || req->region > UINT32_MAX || off < 0 || len <= 0)
		return NULL;
	return proto_node_data_in(w->node, (uint32_t)req->region, (uint64_t)off, (uint64_t)len);
}

/* Admits the workload request without filling it: validates, checks its cost (wl_cost,
 * nothing allocated) against the per-request limits, then reserves its KV blocks and
 * host records (wl_req_reserve: cheap). The fill is L's (wrk_load.c). */
static int admit_wl(struct wrk *w, const struct proto_msg *req, struct wrk_req *rq,
		    struct proto_error *err)
{
	const struct wrk_config *c = &w->cfg;
	struct wl_env env = {w->dev, w->kv};
	struct wl_params p;
	struct wl_cost cost;
	char msg[WL_MSG_MAX];
	uint64_t steps;
	int rc;

	wl_params_init(&p);
	for (uint32_t i = 0; i < req->nparams; i++)
		if (wl_params_set(&p, req->params[i].key, req->params[i].value))
			return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"params\": bad key \"%s\"",
					  req->params[i].key);
	/* the input's bytes stay put until wl_req_reserve copied them: the decoded
	 * message's, or the client's data area, which the client keeps until its submit
	 * returned (after this answer); the lengths are the assign's, never the client's */
	if (req->input_len) {
		const char *src = data_range(w, req, req->input_off, req->input_len);

		if (!src)
			return proto_fail(err, CHIPD_E_BAD_REQUEST,
					  "\"input_off\": %lld + %lld bytes are outside client "
					  "region %lld's data area",
					  (long long)req->input_off, (long long)req->input_len,
					  (long long)req->region);
		wl_params_set_input(&p, src, (uint32_t)req->input_len);
	} else {
		wl_params_set_input(&p, req->input_inline, req->input_inline_len);
	}
	rq->out_dst = NULL;
	if (req->output_cap) {
		rq->out_dst = data_range(w, req, req->output_off, req->output_cap);
		if (!rq->out_dst)
			return proto_fail(err, CHIPD_E_BAD_REQUEST,
					  "\"output_off\": %lld + %lld bytes are outside client "
					  "region %lld's data area",
					  (long long)req->output_off, (long long)req->output_cap,
					  (long long)req->region);
		wl_params_set_output(&p, (uint32_t)req->output_cap);
	}
	/* refused before anything is reserved, with the parameter named */
	if (wl_cost(req->wl, &p, &cost, msg, sizeof(msg)))
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "%s", msg);
	steps = cost.steps;
	/* no step, no token: nothing could ever end its stream (FINAL goes with the last
	 * token), so it would stay live for good */
	if (steps == 0)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "%s: the request makes no step (its callable's steps hook "
				  "answered 0)",
				  req->wl);
	if (req->max_tokens > 0 && (uint64_t)req->max_tokens < steps)
		steps = (uint64_t)req->max_tokens;
	if (c->max_request_steps && steps > c->max_request_steps)
		return over_limit(err, req->wl, "steps", steps, "max-request-steps",
				  c->max_request_steps);
	if (c->max_request_dev_bytes && cost.dev_bytes > c->max_request_dev_bytes)
		return over_limit(err, req->wl, "device bytes", cost.dev_bytes,
				  "max-request-device-bytes", c->max_request_dev_bytes);
	if (c->max_request_host_bytes && cost.host_bytes > c->max_request_host_bytes)
		return over_limit(err, req->wl, "host bytes", cost.host_bytes,
				  "max-request-host-bytes", c->max_request_host_bytes);
	/* the KV cache the declaration needs, whatever reserve would take (kv_take's
	 * words: protocol.md quotes them) */
	if (cost.kv_blocks && cost.kv_block_floats > c->kv_block_floats)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "%s: KV blocks of %u floats exceed the pool's blocks of %u",
				  req->wl, cost.kv_block_floats, c->kv_block_floats);
	if (cost.kv_blocks > c->kv_blocks)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "%s: %llu KV blocks needed, more than the chip's KV cache holds "
				  "(kv-blocks=%u)",
				  req->wl, (unsigned long long)cost.kv_blocks, c->kv_blocks);
	pthread_mutex_lock(&w->kv_lock);
	rc = wl_req_reserve(&rq->wl, &env, req->wl, &p, msg, sizeof(msg));
	pthread_mutex_unlock(&w->kv_lock);
	if (rc == -ENOSPC || rc == -ENOMEM)
		return proto_fail(err, CHIPD_E_NO_CAPACITY, "%s", msg);
	if (rc == -EINVAL)
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "%s", msg);
	if (rc)
		return proto_fail(err, CHIPD_E_DEVICE_ERROR, "%s", msg);
	rq->limit = (uint32_t)steps;
	/* a run-time callable's fill is always L's, whatever its cost: callables.md
	 * promises it runs off the mailbox thread (and it may be slow work) */
	rq->small_fill = cost.dev_bytes <= WRK_SMALL_FILL_DEV_BYTES &&
			 cost.host_bytes <= WRK_SMALL_FILL_HOST_BYTES &&
			 wl_req_loaded_at_start(rq->wl);
	return CHIPD_OK;
}

/* Whether anybody will run a new request: not after a shutdown began, nor once O or
 * S gave up for good (the work would wait for a thread that is gone). The refusal is
 * no_capacity, retryable: the chip is being restarted and another may run it. */
static int admission_open(struct wrk *w, struct proto_error *err)
{
	int32_t o_err = atomic_load_explicit(&w->sync.o_err, memory_order_seq_cst);
	int32_t s_err = atomic_load_explicit(&w->sync.s_err, memory_order_seq_cst);

	if (o_err)
		return proto_fail(err, CHIPD_E_NO_CAPACITY,
				  "chip %u: orchestrator thread failed (%s); not admitting work",
				  w->cfg.chip, strerror(-o_err));
	if (s_err)
		return proto_fail(err, CHIPD_E_NO_CAPACITY,
				  "chip %u: scheduler gave the device up (%s); not admitting work",
				  w->cfg.chip, strerror(-s_err));
	if (atomic_load_explicit(&w->stop, memory_order_relaxed))
		return proto_fail(err, CHIPD_E_DRAINING, "chip %u: worker is shutting down",
				  w->cfg.chip);
	return CHIPD_OK;
}

static int run_assign(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct wrk *w = ctx;
	struct wrk_req *rq = NULL;
	int code;

	code = admission_open(w, err);
	if (code != CHIPD_OK)
		goto out;
	code = reserve(w, (uint64_t)req->id, &rq, err);
	if (code != CHIPD_OK)
		goto out;
	rq->built = 0;
	rq->wl = NULL;
	rq->deadline_ns = req->deadline_ns > 0 ? (uint64_t)req->deadline_ns : 0;
	atomic_store_explicit(&rq->s_done, 0, memory_order_relaxed);
	atomic_store_explicit(&rq->s_pushed, 0, memory_order_relaxed);
	atomic_store_explicit(&rq->s_fail, 0, memory_order_relaxed);
	atomic_store_explicit(&rq->s_final, 0, memory_order_relaxed);
	atomic_store_explicit(&rq->cancel, 0, memory_order_relaxed);
	code = attach_ring(w, req, rq, err);
	if (code == CHIPD_OK)
		code = admit_wl(w, req, rq, err);
	if (code != CHIPD_OK) {
		put_slot(w, rq);
		goto out;
	}
	/* admitted, counted before the request can move on: from here L, O and S may
	 * fill, run and end it (and count its end) at once, and a death of the worker
	 * in between must not lose the admission (admitted = completed + failed +
	 * cancelled + ...). The answer goes now; L fills it and queues it for O (marked
	 * failed, for O to end, if the fill fails) */
	ctr_m(w, PROTO_WRK_admitted);
	wrk_load_submit(w, rq);
	ans->id = req->id;
	w->assigned = rq; /* serve() cancels it if the answer finds the slot reset */
	w->assigned_id = (uint64_t)req->id;
	if (w->cfg.m_assigned)
		(void)w->cfg.m_assigned(w->cfg.fault_arg, (uint64_t)req->id, 0);
	return CHIPD_OK;
out:
	ctr_m(w, PROTO_WRK_rejected);
	return code;
}

static int run_cancel(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct wrk *w = ctx;
	struct wrk_req *rq;
	int code = CHIPD_OK;

	pthread_mutex_lock(&w->lock);
	rq = find_live(w, (uint64_t)req->id);
	if (rq && rq->state != WRK_RQ_RESERVED)
		atomic_store_explicit(&rq->cancel, 1, memory_order_release);
	else
		code = proto_fail(err, CHIPD_E_NOT_FOUND, "request %lld is not live on this chip",
				  (long long)req->id);
	pthread_mutex_unlock(&w->lock);
	if (code == CHIPD_OK) {
		wrk_kick_o(w);
		ans->id = req->id;
	}
	return code;
}

void wrk_req_abandon(struct wrk *w, struct wrk_req *rq, uint64_t id)
{
	bool live;

	pthread_mutex_lock(&w->lock);
	live = is_live(rq->state) && rq->id == id;
	if (live) /* release: as run_cancel */
		atomic_store_explicit(&rq->cancel, 1, memory_order_release);
	pthread_mutex_unlock(&w->lock);
	if (live)
		wrk_kick_o(w);
}

static int run_heartbeat(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
			 struct proto_error *err)
{
	struct wrk *w = ctx;

	uint64_t published, released;

	(void)err;
	pthread_mutex_lock(&w->lock);
	ans->queued = w->q_len;
	if (w->fill_since_ns) {
		uint64_t ms = (shm_now_ns() - w->fill_since_ns) / SHM_NS_PER_MS;

		ans->fill_ms = ms ? (int64_t)(ms & INT64_MAX) : 1;
		ans->fill_id = (int64_t)w->fill_id;
	}
	pthread_mutex_unlock(&w->lock);
	ans->active = atomic_load_explicit(&w->o_active, memory_order_relaxed);
	ans->seq = req->seq;
	/* each thread's state: its error word and its progress word; the supervisor
	 * judges progress between two answers while work is pending */
	ans->o_err = atomic_load_explicit(&w->sync.o_err, memory_order_seq_cst);
	ans->s_err = atomic_load_explicit(&w->sync.s_err, memory_order_seq_cst);
	ans->o_rounds =
	    (int64_t)(atomic_load_explicit(&w->sync.o_rounds, memory_order_relaxed) & INT64_MAX);
	ans->s_rounds =
	    (int64_t)(atomic_load_explicit(&w->sync.s_rounds, memory_order_relaxed) & INT64_MAX);
	/* released first: published >= released always holds for what we read */
	released = atomic_load_explicit(&w->sync.released, memory_order_seq_cst);
	published = atomic_load_explicit(&w->sync.published, memory_order_seq_cst);
	ans->epochs = (int64_t)(published > released ? published - released : 0);
	return CHIPD_OK;
}

/* Begins the stop and defers the answer until O and S have exited (wrk_main answers
 * then); the mailbox keeps being served meanwhile. A second shutdown may shorten the
 * grace period, never lengthen it. */
static int run_shutdown(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
			struct proto_error *err)
{
	struct wrk *w = ctx;
	uint64_t end =
	    shm_deadline_in(req->grace_ms > 0 ? (uint64_t)req->grace_ms * SHM_NS_PER_MS : 0);
	uint64_t cur = atomic_load_explicit(&w->grace_end_ns, memory_order_relaxed);

	(void)ans;
	(void)err;
	if (!atomic_load_explicit(&w->stop, memory_order_relaxed) || end < cur)
		/* relaxed: the seq_cst store of stop below publishes it to O */
		atomic_store_explicit(&w->grace_end_ns, end, memory_order_relaxed);
	atomic_store_explicit(&w->stop, 1, memory_order_seq_cst);
	wrk_kick_o(w);
	wrk_load_kick(w);
	if (w->ndeferred == WRK_MAX_DEFERRED)
		return CHIPD_OK; /* the stop is under way: this one is answered now */
	w->deferred[w->ndeferred++] = w->cur;
	return PROTO_DEFERRED;
}

/* A trace error on @path: bad_request for what the caller can fix (the path),
 * internal otherwise. */
static int trace_path_fail(struct proto_error *err, const char *path, int rc)
{
	switch (rc) {
	case -ENOENT:
	case -ENOTDIR:
	case -EACCES:
	case -EPERM:
	case -EROFS:
	case -EISDIR:
	case -ELOOP:
	case -ENAMETOOLONG:
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": %s: %s", path,
				  strerror(-rc));
	default:
		return proto_fail(err, CHIPD_E_INTERNAL, "trace collect to %s: %s", path,
				  strerror(-rc));
	}
}

static int run_trace(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct wrk *w = ctx;
	struct wrk_trace *t = wrk_trace_of(w);
	struct wrk_trace_counts c = {0};
	int rc;

	if (req->chip >= 0 && req->chip != w->cfg.chip)
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"chip\": this worker is chip %u",
				  w->cfg.chip);
	switch (req->act) {
	case PROTO_TRACE_START:
		if (t) {
			wrk_trace_start(t);
			return CHIPD_OK;
		}
		rc = wrk_trace_create(&t, WRK_TRACE_SPANS);
		if (rc)
			return proto_fail(err, CHIPD_E_INTERNAL, "trace buffer: %s", strerror(-rc));
		w->own_trace = true;
		/* release: the ring's memory is whole before O or S can see the pointer */
		atomic_store_explicit(&w->trace, t, memory_order_release);
		return CHIPD_OK;
	case PROTO_TRACE_STOP:
		wrk_trace_stop(t);
		return CHIPD_OK;
	case PROTO_TRACE_COLLECT:
		/* the schema checked both; a worker does not rely on its caller's checks */
		if (!memchr(req->path, 0, sizeof(req->path)))
			return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": too long");
		if (req->path[0] != '/')
			return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": must be absolute");
		rc = wrk_trace_write_fragment(t, req->path, w->cfg.chip, &c);
		if (rc)
			return trace_path_fail(err, req->path, rc);
		memcpy(w->collected, req->path, sizeof(w->collected));
		ans->events = (int64_t)c.events;
		ans->dropped = (int64_t)c.dropped;
		return CHIPD_OK;
	default:
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"act\": %lld is not an action",
				  (long long)req->act);
	}
}

void wrk_end_leftovers(struct wrk *w, enum chipd_code code)
{
	for (uint32_t i = 0; i < w->nreqs; i++) {
		struct wrk_req *rq = &w->reqs[i];

		if (is_live(rq->state)) {
			/* one its client cancelled (a cancel call, its reader gone) ends
			 * cancelled, whatever the others end with */
			bool cancelled = atomic_load_explicit(&rq->cancel, memory_order_acquire) ||
					 wrk_req_ring_unwanted(rq);

			wrk_req_end_error(w, rq, cancelled ? CHIPD_E_CANCELLED : code);
		} else if (rq->state == WRK_RQ_ENDED &&
			   !atomic_load_explicit(&rq->s_final, memory_order_acquire)) {
			/* S freed its id for FINAL and could not push it (s_fail says why):
			 * O would have ended it with that code (retire), so it ends here */
			int32_t fail = atomic_load_explicit(&rq->s_fail, memory_order_relaxed);

			wrk_req_end_error(w, rq,
					  fail ? (enum chipd_code)fail : CHIPD_E_INTERNAL);
		} else if (rq->state == WRK_RQ_ENDED) {
			wrk_req_free(w, rq);
		}
	}
	pthread_mutex_lock(&w->lock);
	w->q_head = 0;
	w->q_len = 0;
	w->load_head = 0; /* what L left (it has exited): ended above */
	w->load_len = 0;
	w->nloading = 0;
	ctr_set(w->ctr, wrk_ctr_index(PROTO_WRK_queue_depth), 0);
	pthread_mutex_unlock(&w->lock);
	/* O's gauges as O left them (a failed O wrote them last with its requests
	 * active): every record is back now */
	wrk_o_gauges(w, 0);
}

/* one op a line */
/* clang-format off */
static const struct proto_handler handlers[] = {
    {PROTO_OP_ASSIGN, NULL, run_assign},
    {PROTO_OP_CANCEL, NULL, run_cancel},
    {PROTO_OP_HEARTBEAT, NULL, run_heartbeat},
    {PROTO_OP_SHUTDOWN, NULL, run_shutdown},
    {PROTO_OP_TRACE, NULL, run_trace},
    {PROTO_OP_LOAD, NULL, wrk_run_load},
    {PROTO_OP_UNLOAD, NULL, wrk_run_unload},
};
/* clang-format on */

const struct proto_server wrk_server = {"worker", handlers, sizeof(handlers) / sizeof(handlers[0])};
