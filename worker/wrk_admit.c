/* wrk_admit.c - the control mailbox's handlers (assign, cancel, heartbeat, shutdown)
 * and the request table: admission, id reservation, the end of a stream. */
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

/* A live request with @id, under w->lock. */
static struct wrk_req *find_live(struct wrk *w, uint64_t id)
{
	for (uint32_t i = 0; i < w->cfg.max_requests; i++)
		if (w->reqs[i].state != WRK_RQ_FREE && w->reqs[i].id == id)
			return &w->reqs[i];
	return NULL;
}

static void put_slot(struct wrk *w, struct wrk_req *rq)
{
	pthread_mutex_lock(&w->lock);
	rq->state = WRK_RQ_FREE;
	rq->id = 0;
	rq->next_free = w->free_list;
	w->free_list = rq;
	w->live--;
	pthread_mutex_unlock(&w->lock);
}

void wrk_req_free(struct wrk *w, struct wrk_req *rq)
{
	pthread_mutex_lock(&w->kv_lock);
	wl_req_destroy(rq->wl);
	pthread_mutex_unlock(&w->kv_lock);
	rq->wl = NULL;
	put_slot(w, rq);
}

void wrk_req_end_error(struct wrk *w, struct wrk_req *rq, enum chipd_code code)
{
	struct ring_rec rec = {
	    .request_id = rq->id,
	    .seq = atomic_load_explicit(&rq->s_pushed, memory_order_relaxed),
	    .flags = RING_F_ERROR | RING_F_CODE(code),
	};

	struct ring ring = rq->o_ring;

	ctr_add(w->ctr,
		wrk_ctr_index(code == CHIPD_E_CANCELLED ? PROTO_WRK_cancelled : PROTO_WRK_failed),
		1);
	/* the id is free before the end is visible: a client that saw it may reuse it */
	wrk_req_free(w, rq);
	/* a terminal record always has room (ring.h); -EALREADY cannot happen since
	 * only FINAL (never written for this request) or this call end a stream */
	(void)ring_push(&ring, &rec);
}

/* Reserves a slot for @id atomically (under the table lock): duplicate_id for a live
 * id, queue_full when the admission queue or the table is full. */
static int reserve(struct wrk *w, uint64_t id, struct wrk_req **out, struct proto_error *err)
{
	struct wrk_req *rq;
	int code = CHIPD_OK;

	pthread_mutex_lock(&w->lock);
	if (find_live(w, id))
		code = proto_fail(err, CHIPD_E_DUPLICATE_ID, "request %llu is live on this chip",
				  (unsigned long long)id);
	else if (w->q_len >= w->cfg.queue_cap || !w->free_list)
		code = proto_fail(err, CHIPD_E_QUEUE_FULL,
				  "admission queue full (%u queued, %u live)", w->q_len, w->live);
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

	if (req->ring < 0 || req->ring > UINT32_MAX ||
	    proto_node_ring(w->node, (uint32_t)req->ring, &r))
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"ring\": no ring %lld in the node",
				  (long long)req->ring);
	if (atomic_load_explicit(&r.hdr->generation, memory_order_acquire) !=
		(uint32_t)req->ring_gen ||
	    atomic_load_explicit(&r.hdr->request_id, memory_order_acquire) != (uint64_t)req->id)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"ring_gen\": ring %lld is not generation %lld of request %lld",
				  (long long)req->ring, (long long)req->ring_gen,
				  (long long)req->id);
	rq->o_ring = r;
	rq->s_ring = r;
	return CHIPD_OK;
}

static int create_wl(struct wrk *w, const struct proto_msg *req, struct wrk_req *rq,
		     struct proto_error *err)
{
	struct wl_env env = {w->dev, w->kv};
	struct wl_params p;
	char msg[WL_MSG_MAX];
	int rc;

	wl_params_init(&p);
	for (uint32_t i = 0; i < req->nparams; i++)
		if (wl_params_set(&p, req->params[i].key, req->params[i].value))
			return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"params\": bad key \"%s\"",
					  req->params[i].key);
	/* refused before anything is reserved, with the parameter named */
	if (wl_validate(req->wl, &p, msg, sizeof(msg)))
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "%s", msg);
	pthread_mutex_lock(&w->kv_lock);
	rc = wl_req_create(&rq->wl, &env, req->wl, &p, msg, sizeof(msg));
	pthread_mutex_unlock(&w->kv_lock);
	if (rc == -ENOSPC)
		return proto_fail(err, CHIPD_E_NO_CAPACITY, "%s", msg);
	if (rc == -EINVAL)
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "%s", msg);
	if (rc)
		return proto_fail(err, CHIPD_E_DEVICE_ERROR, "%s", msg);
	rq->limit = wl_req_steps(rq->wl);
	if (req->max_tokens > 0 && (uint64_t)req->max_tokens < rq->limit)
		rq->limit = (uint32_t)req->max_tokens;
	return CHIPD_OK;
}

static int run_assign(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct wrk *w = ctx;
	struct wrk_req *rq = NULL;
	int code;

	if (atomic_load_explicit(&w->stop, memory_order_relaxed)) {
		code = proto_fail(err, CHIPD_E_DRAINING, "worker is shutting down");
		goto out;
	}
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
		code = create_wl(w, req, rq, err);
	if (code != CHIPD_OK) {
		put_slot(w, rq);
		goto out;
	}
	pthread_mutex_lock(&w->lock);
	w->queue[(w->q_head + w->q_len) % w->cfg.queue_cap] = rq;
	w->q_len++;
	rq->state = WRK_RQ_QUEUED;
	pthread_mutex_unlock(&w->lock);
	wrk_kick_o(w);
	ans->id = req->id;
out:
	ctr_m(w, code == CHIPD_OK ? PROTO_WRK_admitted : PROTO_WRK_rejected);
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

static int run_heartbeat(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
			 struct proto_error *err)
{
	struct wrk *w = ctx;

	(void)err;
	pthread_mutex_lock(&w->lock);
	ans->queued = w->q_len;
	pthread_mutex_unlock(&w->lock);
	ans->active = atomic_load_explicit(&w->o_active, memory_order_relaxed);
	ans->seq = req->seq;
	return CHIPD_OK;
}

static int run_shutdown(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
			struct proto_error *err)
{
	struct wrk *w = ctx;

	(void)ans;
	(void)err;
	atomic_store_explicit(
	    &w->grace_end_ns,
	    shm_deadline_in(req->grace_ms > 0 ? (uint64_t)req->grace_ms * 1000000u : 0),
	    memory_order_relaxed);
	wrk_stop_and_join(w);
	return CHIPD_OK;
}

static const struct proto_handler handlers[] = {
    {PROTO_OP_ASSIGN, NULL, run_assign},
    {PROTO_OP_CANCEL, NULL, run_cancel},
    {PROTO_OP_HEARTBEAT, NULL, run_heartbeat},
    {PROTO_OP_SHUTDOWN, NULL, run_shutdown},
};

const struct proto_server wrk_server = {"worker", handlers, sizeof(handlers) / sizeof(handlers[0])};
