/* sup_router.c - the router thread: serves the node region's client mailbox. Every
 * request goes through proto_dispatch (decode, validate, run, answer); submit and
 * cancel are forwarded to a worker and answered when it replied (bounded by
 * SUP_FORWARD_MS: a worker's mailbox thread answers at once, one that does not is
 * stuck and is killed). */
#include "sup.h"
#include "sup_log.h"

#include "proc.h"
#include "proto.h"
#include "ring.h"
#include "wait.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MS_NS 1000000ull
/* How long the router waits for a request before checking whether to leave (a stop
 * interrupts the wait, so this only bounds a lost wake; an idle chipd should not wake
 * for nothing). */
#define ROUTER_SLICE_NS (1000ull * MS_NS)

static enum chipd_code fail_count(struct sup *s, enum chipd_code code)
{
	sup_count_err(s, code);
	return code;
}

static int ping_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		    struct proto_error *err)
{
	struct sup *s = ctx;

	(void)req, (void)err;
	ans->pid = s->pid;
	ans->state = atomic_load_explicit(&s->sup_state, memory_order_acquire);
	ans->uptime_ms = (int64_t)((shm_now_ns() - s->started_ns) / MS_NS);
	return CHIPD_OK;
}

/* The worker a submit goes to, or an error. Under sup.lock. */
static struct sup_worker *choose(struct sup *s, int64_t chip, struct proto_error *err)
{
	struct sup_worker *best = NULL;

	if (chip >= 0) {
		if ((uint64_t)chip >= s->cfg.chips) {
			proto_fail(err, CHIPD_E_BAD_REQUEST, "\"chip\": %lld, this node has %u",
				   (long long)chip, s->cfg.chips);
			return NULL;
		}
		best = &s->workers[chip];
		if (best->state != CHIPD_CHIP_READY) {
			proto_fail(err, CHIPD_E_NO_CAPACITY, "chip %lld is %s", (long long)chip,
				   chipd_chip_state_name(best->state));
			err->chip = chip;
			return NULL;
		}
		return best;
	}
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];

		if (w->state == CHIPD_CHIP_READY && (!best || w->load < best->load))
			best = w;
	}
	if (!best)
		proto_fail(err, CHIPD_E_NO_CAPACITY, "no chip is ready");
	return best;
}

/* Reserves the id and a ring for @req on a chosen worker. Under sup.lock. */
static struct sup_req *admit(struct sup *s, const struct proto_msg *req, struct proto_error *err,
			     struct sup_worker **wout)
{
	uint64_t id = (uint64_t)req->id;
	struct sup_worker *w;
	struct sup_req *e;
	struct ring r;

	if (id && sup_table_find(s, id)) {
		proto_fail(err, CHIPD_E_DUPLICATE_ID, "request %llu is live",
			   (unsigned long long)id);
		err->request = (int64_t)id;
		return NULL;
	}
	if (sup_table_live(s) >= s->cfg.max_pending) {
		proto_fail(err, CHIPD_E_QUEUE_FULL, "%u requests in flight (the node's bound)",
			   s->cfg.max_pending);
		return NULL;
	}
	w = choose(s, req->chip, err);
	if (!w)
		return NULL;
	e = sup_table_alloc(s);
	if (!e) {
		proto_fail(err, CHIPD_E_QUEUE_FULL, "all %u token rings are in use", s->nreqs);
		return NULL;
	}
	while (!id) { /* ours come from the top half, clients' ids are usually small */
		id = (++s->next_id) | (1ull << 62);
		if (sup_table_find(s, id))
			id = 0;
	}
	*e = (struct sup_req){
	    .used = true,
	    .forwarding = true,
	    .id = id,
	    .chip = w->chip,
	    .producer = w->pid,
	    .client = s->router_client,
	    .client_start = shm_proc_start_time(s->router_client),
	    .submitted_ns = shm_now_ns(),
	    .nparams = req->nparams,
	    .max_tokens = req->max_tokens,
	    .deadline_ns =
		req->deadline_ms ? (int64_t)(shm_now_ns() + (uint64_t)req->deadline_ms * MS_NS) : 0,
	};
	memcpy(e->wl, req->wl, sizeof(e->wl));
	for (uint32_t i = 0; i < req->nparams; i++) {
		memcpy(e->keys[i], req->params[i].key, CHIPD_KEY_MAX);
		e->params[i].key = e->keys[i];
		e->params[i].value = req->params[i].value;
	}
	(void)proto_node_ring(&s->node, sup_table_index(s, e), &r);
	e->ring_gen = ring_reset(&r, id, w->pid, e->client);
	w->load++;
	*wout = w;
	return e;
}

/* The worker did not answer a forward: it is stuck or dead. */
static void forward_failed(struct sup_worker *w, pid_t pid, int rc)
{
	if (rc != -EPIPE && pid > 0 && w->pid == pid) {
		SUP_WARN((int)w->chip, 0, "worker pid %d did not answer (%s): killing it", (int)pid,
			 strerror(-rc));
		kill(-pid, SIGKILL);
	}
}

static int submit_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct sup *s = ctx;
	struct proto_msg *fwd = malloc(sizeof(*fwd)), *wans = malloc(sizeof(*wans));
	struct sup_worker *w = NULL;
	struct sup_req *e;
	enum chipd_code code = CHIPD_OK;
	pid_t pid = 0;
	int rc;

	if (!fwd || !wans) {
		free(fwd);
		free(wans);
		return fail_count(s, proto_fail(err, CHIPD_E_INTERNAL, "out of memory"));
	}
	if (atomic_load_explicit(&s->sup_state, memory_order_acquire) != CHIPD_SUP_READY) {
		free(fwd);
		free(wans);
		return fail_count(
		    s, proto_fail(err, CHIPD_E_DRAINING, "chipd is draining: no new work"));
	}
	pthread_mutex_lock(&s->lock);
	e = admit(s, req, err, &w);
	if (e) {
		sup_table_assign(s, e, fwd);
		pid = e->producer;
	}
	pthread_mutex_unlock(&s->lock);
	if (!e) {
		free(fwd);
		free(wans);
		return fail_count(s, (enum chipd_code)err->code);
	}
	rc = sup_worker_call(s, w, fwd, wans, SUP_FORWARD_MS);
	pthread_mutex_lock(&s->lock);
	e->forwarding = false;
	if (rc) {
		/* the worker may have admitted it: the stream ends through the death path;
		 * nobody will read it, so it is reclaimed as soon as it ended */
		e->client = 0;
		if (w->pid != pid)
			sup_table_end(s, e, CHIPD_E_WORKER_LOST);
		forward_failed(w, pid, rc);
		code = proto_fail(err, CHIPD_E_WORKER_LOST, "chip %u did not take the request (%s)",
				  w->chip, strerror(-rc));
		err->chip = w->chip;
	} else if (!wans->ok) {
		*err = wans->err; /* its refusal, as it said it */
		err->chip = w->chip;
		code = (enum chipd_code)err->code;
		sup_table_release(s, e);
	} else {
		if (w->pid != pid) /* it died after answering; the death path skipped us */
			sup_table_end(s, e, CHIPD_E_WORKER_LOST);
		ans->id = (int64_t)e->id;
		ans->chip = w->chip;
		ans->ring = sup_table_index(s, e);
		ans->ring_gen = e->ring_gen;
	}
	pthread_mutex_unlock(&s->lock);
	if (code == CHIPD_OK)
		SUP_DEBUG((int)w->chip, (uint64_t)ans->id, "admitted on ring %lld",
			  (long long)ans->ring);
	free(fwd);
	free(wans);
	return code == CHIPD_OK ? CHIPD_OK : fail_count(s, code);
}

static int cancel_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct sup *s = ctx;
	struct proto_msg *fwd = malloc(sizeof(*fwd)), *wans = malloc(sizeof(*wans));
	struct sup_worker *w = NULL;
	struct sup_req *e;
	enum chipd_code code = CHIPD_OK;
	int rc;

	if (!fwd || !wans) {
		free(fwd);
		free(wans);
		return fail_count(s, proto_fail(err, CHIPD_E_INTERNAL, "out of memory"));
	}
	pthread_mutex_lock(&s->lock);
	e = sup_table_find(s, (uint64_t)req->id);
	if (e && !e->ended && !e->forwarding)
		w = &s->workers[e->chip];
	pthread_mutex_unlock(&s->lock);
	if (!w) {
		code =
		    proto_fail(err, CHIPD_E_NOT_FOUND, "no live request %lld", (long long)req->id);
		err->request = req->id;
	} else {
		proto_msg_init(fwd, PROTO_OP_CANCEL);
		fwd->id = req->id;
		rc = sup_worker_call(s, w, fwd, wans, SUP_FORWARD_MS);
		if (rc) {
			code = proto_fail(err, CHIPD_E_WORKER_LOST, "chip %u did not answer (%s)",
					  w->chip, strerror(-rc));
			err->chip = w->chip;
		} else if (!wans->ok) {
			*err = wans->err;
			code = (enum chipd_code)err->code;
		} else {
			ans->id = req->id;
		}
	}
	free(fwd);
	free(wans);
	return code == CHIPD_OK ? CHIPD_OK : fail_count(s, code);
}

static int status_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct sup *s = ctx;

	(void)req, (void)err;
	ping_run(ctx, req, ans, err);
	ans->nchips = s->cfg.chips;
	pthread_mutex_lock(&s->lock);
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		struct sup_worker *w = &s->workers[i];
		struct ctr_block *b = &s->node.wrk_ctr[i];

		ans->chips[i] = (struct proto_chip){
		    .chip = i,
		    .state = w->state,
		    .pid = w->pid,
		    .gpu = w->gpu,
		    .restarts = w->restarts,
		    .queued = (int64_t)ctr_get(b, PROTO_WRK_queue_depth),
		    .active = (int64_t)ctr_get(b, PROTO_WRK_active),
		};
	}
	pthread_mutex_unlock(&s->lock);
	return CHIPD_OK;
}

/* Appends every counter of @b as "block.name". */
static void stats_block(const struct ctr_block *b, const char *block, struct proto_msg *ans)
{
	for (uint32_t i = 0; i < b->count && ans->nstats < PROTO_MAX_STATS; i++) {
		struct proto_stat *st = &ans->stats[ans->nstats];
		int n = snprintf(st->key, sizeof(st->key), "%s.%s", block, ctr_name(b, i));

		if (n < 0 || (size_t)n >= sizeof(st->key))
			continue; /* cannot happen with chipd's names; never send a cut one */
		st->value = ctr_get(b, i);
		ans->nstats++;
	}
}

static int stats_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct sup *s = ctx;
	char block[16];

	if (req->chip >= (int64_t)s->cfg.chips)
		return fail_count(s, proto_fail(err, CHIPD_E_BAD_REQUEST,
						"\"chip\": %lld, this node has %u",
						(long long)req->chip, s->cfg.chips));
	if (req->chip < 0)
		stats_block(&s->node.sup_ctr, "supervisor", ans);
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		if (req->chip >= 0 && (uint32_t)req->chip != i)
			continue;
		snprintf(block, sizeof(block), "chip%u", i);
		stats_block(&s->node.wrk_ctr[i], block, ans);
	}
	return CHIPD_OK;
}

/* drain and stop both refuse new work, give in-flight work the request's grace (or
 * the configured one), end the workers and exit (DESIGN.md, "Processes"). */
static int drain_common(struct sup *s, const struct proto_msg *req, bool stop)
{
	sup_ask_stop(s, req->grace_ms > 0 ? (uint32_t)req->grace_ms : s->cfg.grace_ms);
	SUP_INFO(-1, 0, "%s requested by pid %d", stop ? "stop" : "drain", (int)s->router_client);
	return CHIPD_OK;
}

static int drain_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	(void)ans, (void)err;
	return drain_common(ctx, req, false);
}

static int stop_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		    struct proto_error *err)
{
	(void)ans, (void)err;
	return drain_common(ctx, req, true);
}

static int trace_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct sup *s = ctx;
	uint64_t events = 0, dropped = 0;
	int code = sup_trace(s, (int)req->act, req->path, &events, &dropped, err);

	if (code != CHIPD_OK)
		return fail_count(s, (enum chipd_code)code);
	ans->events = (int64_t)events;
	ans->dropped = (int64_t)dropped;
	return CHIPD_OK;
}

static const struct proto_handler router_handlers[] = {
    {PROTO_OP_PING, NULL, ping_run},	 {PROTO_OP_SUBMIT, NULL, submit_run},
    {PROTO_OP_CANCEL, NULL, cancel_run}, {PROTO_OP_STATUS, NULL, status_run},
    {PROTO_OP_STATS, NULL, stats_run},	 {PROTO_OP_DRAIN, NULL, drain_run},
    {PROTO_OP_STOP, NULL, stop_run},	 {PROTO_OP_TRACE, NULL, trace_run},
};

static const struct proto_server router_server = {
    .role = "supervisor",
    .handlers = router_handlers,
    .nhandlers = sizeof(router_handlers) / sizeof(router_handlers[0]),
};

static void *router_main(void *arg)
{
	struct sup *s = arg;
	struct mbox *mb = &s->node.mbox;

	while (!atomic_load_explicit(&s->router_quit, memory_order_acquire)) {
		struct mbox_event ev;
		size_t len;
		int rc = mbox_server_next(mb, &ev, shm_now_ns() + ROUTER_SLICE_NS);

		if (rc)
			continue; /* -ETIMEDOUT or -EINTR: look at router_quit again */
		if (ev.kind == MBOX_EV_RESET) {
			mbox_ack_reset(mb, ev.t);
			sup_count(s, PROTO_SUP_mbox_resets, 1);
			continue;
		}
		sup_count(s, PROTO_SUP_requests, 1);
		s->router_client = ev.client;
		rc = proto_dispatch(&router_server, s, ev.req, ev.len, mbox_resp_buf(mb, ev.t),
				    mbox_resp_cap(mb), &len);
		if (rc != 0)
			continue; /* cannot happen: the response buffer holds an envelope */
		if (mbox_answer(mb, ev.t, (uint32_t)len) == -ECANCELED)
			sup_count(s, PROTO_SUP_mbox_resets, 1);
		else
			sup_count(s, PROTO_SUP_answered, 1);
	}
	return NULL;
}

int sup_router_start(struct sup *s)
{
	int rc = mbox_server_attach(&s->node.mbox);

	if (rc < 0)
		return rc;
	atomic_store_explicit(&s->router_quit, false, memory_order_relaxed);
	rc = -pthread_create(&s->router, NULL, router_main, s);
	if (rc == 0)
		s->router_running = true;
	return rc;
}

void sup_router_stop(struct sup *s)
{
	if (!s->router_running)
		return;
	atomic_store_explicit(&s->router_quit, true, memory_order_release);
	/* wakes it from the doorbell; a request it is handling ends within its bounds
	 * (a forward to a worker gives up after SUP_FORWARD_MS) */
	mbox_server_interrupt(&s->node.mbox);
	pthread_join(s->router, NULL);
	s->router_running = false;
	mbox_server_detach(&s->node.mbox);
}
