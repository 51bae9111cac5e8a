/* sup_router.c - the router thread: serves the node region's client mailbox. Every
 * request goes through proto_dispatch (decode, validate, run, answer). A submit is
 * forwarded to its worker without waiting and answered when the worker replied
 * (sup_forward.c), so many are in flight at once, and so is a cancel (sup_cancel.c);
 * trace waits for its worker's answer (bounded by SUP_FORWARD_MS: a call not answered
 * by then is given up; the worker's health is the heartbeat's to judge). */
#include "sup.h"
#include "sup_cancel.h"
#include "sup_log.h"
#include "sup_register.h"

#include "proc.h"
#include "proto.h"
#include "ring.h"
#include "wait.h"
#include "wl.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long the router sleeps at most before it looks again (a stop or a region that
 * changed rings its bell at once). It also bounds a lost wake: a client can write its
 * own doorbell's wake words, and one that zeroes them hides the router's announcement
 * from its own next post, so each wait announces itself afresh. Short enough that a
 * scribbled word delays that client's request by at most this, long enough that an
 * idle chipd wakes only a few times a second. */
#define ROUTER_SLICE_NS (100ull * SHM_NS_PER_MS)
/* The same while submits are in flight: a worker's death (its pid changed) and the
 * forwards' SUP_FORWARD_MS bound are looked at this often; an answer wakes it at once. */
#define ROUTER_FWD_SLICE_NS (20ull * SHM_NS_PER_MS)

/* Every request answered with the error envelope, from any step of proto_dispatch
 * (docs/protocol.md §8.1: err_<code> counts each request once, by how it ended). */
static void router_refused(void *ctx, enum chipd_code code)
{
	sup_count_err(ctx, code);
}

static int ping_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		    struct proto_error *err)
{
	struct sup *s = ctx;

	(void)req, (void)err;
	ans->pid = s->pid;
	ans->state = atomic_load_explicit(&s->sup_state, memory_order_acquire);
	ans->uptime_ms = (int64_t)((shm_now_ns() - s->started_ns) / SHM_NS_PER_MS);
	return CHIPD_OK;
}

/* The worker a submit goes to, or an error. Under sup.lock. */
static struct sup_worker *choose(struct sup *s, int64_t chip, const char *wl,
				 struct proto_error *err)
{
	struct sup_worker *best = NULL;
	uint64_t has = sup_register_chips(s, wl);

	if (chip >= 0) {
		if ((uint64_t)chip >= s->cfg.chips) {
			proto_fail(err, CHIPD_E_BAD_REQUEST, "\"chip\": %lld, this node has %u",
				   (long long)chip, s->cfg.chips);
			return NULL;
		}
		best = &s->workers[chip];
		if (!sup_worker_routable(best)) {
			/* READY but refusing new work: degraded, as the next tick will say */
			proto_fail(err, CHIPD_E_NO_CAPACITY, "chip %lld is %s", (long long)chip,
				   chipd_chip_state_name(best->state == CHIPD_CHIP_READY
							     ? CHIPD_CHIP_DEGRADED
							     : best->state));
			err->chip = chip;
			return NULL;
		}
		return best;
	}
	best = sup_worker_pick(s, ~has);
	/* a registered callable no ready chip has (its replays failed): a ready chip
	 * refuses it, naming the workload */
	if (!best)
		best = sup_worker_pick(s, 0);
	if (!best)
		proto_fail(err, CHIPD_E_NO_CAPACITY, "no chip is ready");
	return best;
}

/* Whether the range @off + @len of field @what lies in a data area of @size bytes
 * (@len 0: no range, fine). */
static bool range_ok(uint32_t size, const char *what, int64_t off, int64_t len,
		     struct proto_error *err)
{
	if (!len)
		return true;
	if (size == 0)
		proto_fail(err, CHIPD_E_BAD_REQUEST,
			   "\"%s\": the node has no data area (chipd --client-data-kib 0)", what);
	else if (!proto_xchg_range_ok(size, (uint64_t)off, (uint64_t)len))
		proto_fail(err, CHIPD_E_BAD_REQUEST,
			   "\"%s\": %" PRId64 " + %" PRId64
			   " bytes lie outside the data area of %" PRIu32 " bytes",
			   what, off, len, size);
	else
		return true;
	return false;
}

/* Whether @req's data-area ranges lie in a client region's data area, by the
 * supervisor's own geometry (nothing read from the client's memory). */
static bool data_ranges_ok(const struct sup *s, const struct proto_msg *req,
			   struct proto_error *err)
{
	uint32_t size = s->node.geom.xchg.data_size;

	return range_ok(size, "input_off", req->input_off, req->input_len, err) &&
	       range_ok(size, "output_off", req->output_off, req->output_cap, err);
}

/* Reserves the id and a ring for @req on a chosen worker. Under sup.lock. */
static struct sup_req *admit(struct sup *s, const struct proto_msg *req, struct proto_error *err,
			     struct sup_worker **wout)
{
	uint64_t id = (uint64_t)req->id;
	struct sup_worker *w;
	struct sup_req *e;

	uint32_t pending, rings;

	if (!data_ranges_ok(s, req, err))
		return NULL;
	if (id && (e = sup_table_find(s, id))) {
		/* an ended one keeps its id (and ring) until its reader read the end, closed
		 * the stream or is gone: a cancel of it is not_found all the same */
		if (e->ended)
			proto_fail(err, CHIPD_E_DUPLICATE_ID,
				   "request %llu ended, but its reader has not read its end (nor "
				   "closed its stream): the id is taken until then",
				   (unsigned long long)id);
		else
			proto_fail(err, CHIPD_E_DUPLICATE_ID, "request %llu is live",
				   (unsigned long long)id);
		err->request = (int64_t)id;
		return NULL;
	}
	/* one client cannot take what the node has for every client */
	sup_table_client_usage(s, s->router_client, &pending, &rings);
	if (pending >= s->cfg.max_client_pending) {
		proto_fail(err, CHIPD_E_QUEUE_FULL,
			   "pid %d has %u requests in flight (the per-client bound "
			   "max-client-pending=%u)",
			   (int)s->router_client, pending, s->cfg.max_client_pending);
		return NULL;
	}
	if (rings >= s->cfg.max_client_rings) {
		proto_fail(err, CHIPD_E_QUEUE_FULL,
			   "pid %d holds %u token rings (the per-client bound max-client-rings=%u)",
			   (int)s->router_client, rings, s->cfg.max_client_rings);
		return NULL;
	}
	if (sup_table_live(s) >= s->cfg.max_pending) {
		proto_fail(err, CHIPD_E_QUEUE_FULL,
			   "%u requests in flight (the node's bound max-pending=%u)",
			   s->cfg.max_pending, s->cfg.max_pending);
		return NULL;
	}
	if (sup_register_refuses(s, req->wl, err) != CHIPD_OK)
		return NULL;
	w = choose(s, req->chip, req->wl, err);
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
	    .region = s->router_region,
	    .submitted_ns = shm_now_ns(),
	    .nparams = req->nparams,
	    .max_tokens = req->max_tokens,
	    .deadline_ns = req->deadline_ms ? (int64_t)(shm_now_ns() +
							(uint64_t)req->deadline_ms * SHM_NS_PER_MS)
					    : 0,
	};
	memcpy(e->wl, req->wl, sizeof(e->wl));
	e->input_len = req->input_inline_len; /* 0..PROTO_INPUT_INLINE_MAX: decoded */
	memcpy(e->input, req->input_inline, e->input_len);
	e->data_in_off = req->input_off; /* checked above: inside the data area */
	e->data_in_len = req->input_len;
	e->data_out_off = req->output_off;
	e->data_out_cap = req->output_cap;
	for (uint32_t i = 0; i < req->nparams; i++) {
		memcpy(e->keys[i], req->params[i].key, CHIPD_KEY_MAX);
		e->params[i].key = e->keys[i];
		e->params[i].value = req->params[i].value;
	}
	e->ring_gen = sup_table_reset(s, e, id, w->pid, e->client);
	w->load++;
	w->unended++; /* until the next count (sup_table_live) */
	*wout = w;
	return e;
}

/* Admits a submit and forwards it to the chosen worker without waiting: the answer
 * goes to the client's slot once the worker answered (sup_forward.c). */
static int submit_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct sup *s = ctx;
	struct sup_worker *w = NULL;
	struct sup_req *e;

	(void)ans;
	if (atomic_load_explicit(&s->sup_state, memory_order_acquire) != CHIPD_SUP_READY)
		return proto_fail(err, CHIPD_E_DRAINING, "chipd is draining: no new work");
	pthread_mutex_lock(&s->lock);
	e = admit(s, req, err, &w);
	pthread_mutex_unlock(&s->lock);
	if (!e)
		return (int)err->code;
	sup_fwd_start(s, e, w, s->router_region, s->router_ticket, req->chip >= 0);
	return PROTO_DEFERRED;
}

static int cancel_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct sup *s = ctx;
	struct sup_worker *w = NULL;
	struct sup_req *e;
	int rc;

	pthread_mutex_lock(&s->lock);
	e = sup_table_find(s, (uint64_t)req->id);
	/* another user's request is not found, as if it were not there (--allow-group) */
	if (e && !sup_admit_cancel(s, e->client))
		e = NULL;
	if (e && !e->ended && e->requeue) {
		/* being moved off a dead worker: the supervisor holds its stream and ends
		 * it, unless the worker it was posted to admitted it already */
		w = sup_workers_requeue_cancel(s, e, s->fwd_msg);
		if (!w) {
			pthread_mutex_unlock(&s->lock);
			ans->id = req->id;
			return CHIPD_OK;
		}
	} else if (e && !e->ended && e->forwarding) {
		/* its submit's answer has not come yet: the forward passes the cancel on
		 * once its worker admitted it (sup_forward.c), or it ends refused */
		e->cancel_asked = true;
		pthread_mutex_unlock(&s->lock);
		ans->id = req->id;
		return CHIPD_OK;
	} else if (e && !e->ended) {
		w = &s->workers[e->chip];
		/* before the call: a worker that dies before it ended the stream leaves it
		 * to its death path, which must not re-queue what its client cancelled */
		e->cancel_asked = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (!w) {
		rc = proto_fail(err, CHIPD_E_NOT_FOUND, "no live request %lld", (long long)req->id);
		err->request = req->id;
		return rc;
	}
	/* posted without waiting: answered once its worker answered (or died, or its
	 * bound passed), so a stopped worker holds up nobody else (sup_cancel.c) */
	rc = sup_cancel_start(s, w, (uint64_t)req->id, true, err);
	if (rc == CHIPD_OK)
		ans->id = req->id;
	return rc;
}

/* Gauge @i of worker block @b as status reports it (0..UINT32_MAX): the block lies in
 * memory a client can write, so any value is possible and a larger one is clamped,
 * never refused (docs/protocol.md 8.4). */
static int64_t gauge_u32(const struct ctr_block *b, uint32_t i)
{
	uint64_t v = ctr_get(b, i);

	return v > UINT32_MAX ? (int64_t)UINT32_MAX : (int64_t)v;
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
		    /* READY but refusing new work: degraded already, as choose() treats it */
		    .state = w->state == CHIPD_CHIP_READY && !sup_worker_routable(w)
				 ? CHIPD_CHIP_DEGRADED
				 : w->state,
		    .pid = w->pid,
		    .gpu = w->gpu,
		    .restarts = w->restarts,
		    .queued = gauge_u32(b, PROTO_WRK_queue_depth),
		    .active = gauge_u32(b, PROTO_WRK_active),
		};
	}
	pthread_mutex_unlock(&s->lock);
	return CHIPD_OK;
}

_Static_assert(PROTO_NSUP_CTRS + CHIPD_MAX_CHIPS * PROTO_NWRK_CTRS <= PROTO_MAX_STATS,
	       "the stats answer holds every counter of the largest node");

/* Appends every counter of @b as "block.name". */
static void stats_block(const struct ctr_block *b, const char *block, struct proto_msg *ans)
{
	for (uint32_t i = 0; i < b->count && ans->nstats < PROTO_MAX_STATS; i++) {
		struct proto_stat *st = &ans->stats[ans->nstats];
		char name[CTR_NAME_MAX];
		int n = snprintf(st->key, sizeof(st->key), "%s.%s", block, ctr_name(b, i, name));

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
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"chip\": %lld, this node has %u",
				  (long long)req->chip, s->cfg.chips);
	/* the supervisor's block always; with a chip, that worker's block only */
	stats_block(&s->node.sup_ctr, "supervisor", ans);
	for (uint32_t i = 0; i < s->cfg.chips; i++) {
		if (req->chip >= 0 && (uint32_t)req->chip != i)
			continue;
		snprintf(block, sizeof(block), "chip%u", i);
		stats_block(&s->node.wrk_ctr[i], block, ans);
	}
	return CHIPD_OK;
}

_Static_assert(WL_PARAMS_MAX <= CHIPD_MAX_PARAMS &&
		   WL_KEY_MAX <= CHIPD_KEY_MAX && WL_DOC_MAX <= CHIPD_DOC_MAX,
	       "every workload table fits the workloads answer");

/* Copies @src into @dst (@cap bytes); false when it does not fit (never send a cut
 * one). */
static bool copy_text(char *dst, size_t cap, const char *src)
{
	size_t len = src ? strlen(src) : 0;

	if (!src || len >= cap)
		return false;
	memcpy(dst, src, len + 1);
	return true;
}

/* The workloads and their parameters: the validator's own tables (wl.h), so the
 * answer says exactly what a worker accepts; each callable's own version, the chips
 * it is loaded on and its requests in flight. In pages: from "from", as many as fit,
 * and "more" says how many follow. */
static int workloads_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
			 struct proto_error *err)
{
	const char *const *names = wl_names();
	uint32_t total = 0;

	while (names[total])
		total++;
	for (const char *const *name = names + (req->from < total ? req->from : total);
	     *name && ans->nwls < CHIPD_MAX_WORKLOADS; name++) {
		const struct wl_param_info *t;
		int n = wl_param_table(*name, &t);
		struct proto_wl *w = &ans->wls[ans->nwls];
		const char *path;
		uint32_t version = 0;
		bool ok = n >= 0 && ans->nwls < CHIPD_MAX_WORKLOADS &&
			  ans->nwl_params + (uint32_t)n <= PROTO_MAX_WL_PARAMS &&
			  copy_text(w->wl, sizeof(w->wl), *name) &&
			  copy_text(w->doc, sizeof(w->doc), wl_summary(*name));

		for (int i = 0; ok && i < n; i++) {
			struct proto_wl_param *p = &ans->wl_params[ans->nwl_params++];

			*p = (struct proto_wl_param){
			    .def = t[i].def, .min = t[i].lo, .max = t[i].hi};
			ok = copy_text(p->wl, sizeof(p->wl), *name) &&
			     copy_text(p->key, sizeof(p->key), t[i].key) &&
			     copy_text(p->doc, sizeof(p->doc), t[i].doc);
		}
		if (!ok)
			return proto_fail(err, CHIPD_E_INTERNAL,
					  "workload %s: its table does not fit the answer", *name);
		if (wl_callable_info(*name, &version, &path) == 0)
			w->version = version;
		sup_register_wl_info(ctx, *name, w);
		ans->nwls++;
	}
	ans->more = total - (uint32_t)(req->from < total ? req->from : total) - ans->nwls;
	return CHIPD_OK;
}

/* drain and stop both refuse new work, give in-flight work the request's grace (or
 * the configured one), end the workers and exit (docs/architecture.md, "Stop"). */
static int drain_common(struct sup *s, const struct proto_msg *req, bool stop)
{
	sup_ask_stop(s, req->grace_ms > 0 ? (uint32_t)req->grace_ms : s->cfg.grace_ms);
	SUP_INFO(-1, 0, "%s requested by pid %d", stop ? "stop" : "drain", (int)s->router_client);
	return CHIPD_OK;
}

static int drain_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	int code = sup_admit_node_op(ctx, "drain", err);

	(void)ans;
	return code != CHIPD_OK ? code : drain_common(ctx, req, false);
}

static int stop_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		    struct proto_error *err)
{
	int code = sup_admit_node_op(ctx, "stop", err);

	(void)ans;
	return code != CHIPD_OK ? code : drain_common(ctx, req, true);
}

static int trace_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct sup *s = ctx;
	uint64_t events = 0, dropped = 0;
	int code = sup_admit_node_op(s, "trace", err);

	/* chipd --trace records the whole run: a client's stop would end it early (and
	 * its start finds the recorders running already, which changes nothing) */
	if (code == CHIPD_OK && req->act == PROTO_TRACE_STOP && s->cfg.trace[0])
		return CHIPD_OK;
	if (code == CHIPD_OK)
		code = sup_trace(s, (int)req->act, req->chip, req->path, &events, &dropped, err);

	if (code != CHIPD_OK)
		return code;
	ans->events = (int64_t)events;
	ans->dropped = (int64_t)dropped;
	return CHIPD_OK;
}

static const struct proto_handler router_handlers[] = {
    {PROTO_OP_PING, NULL, ping_run},	       {PROTO_OP_SUBMIT, NULL, submit_run},
    {PROTO_OP_CANCEL, NULL, cancel_run},       {PROTO_OP_STATUS, NULL, status_run},
    {PROTO_OP_STATS, NULL, stats_run},	       {PROTO_OP_DRAIN, NULL, drain_run},
    {PROTO_OP_STOP, NULL, stop_run},	       {PROTO_OP_TRACE, NULL, trace_run},
    {PROTO_OP_WORKLOADS, NULL, workloads_run}, {PROTO_OP_REGISTER, NULL, sup_register_run},
    {PROTO_OP_UNREGISTER, NULL, sup_unregister_run},
};

static const struct proto_server router_server = {
    .role = "supervisor",
    .handlers = router_handlers,
    .nhandlers = sizeof(router_handlers) / sizeof(router_handlers[0]),
    .refused = router_refused,
};

/* ---- registers and unregisters put off (sup_router_defer) ---- */

/* How many the router keeps at once; more wait for the lock as before. */
#define ROUTER_DEFER_MAX 8u

/* A register or unregister put off while a worker's start held the registry's lock:
 * its bytes as they were when it was served, and the slot to answer. */
struct sup_defer {
	uint32_t region;
	pid_t owner;
	struct mbox_ticket t;
	uint32_t len;
	unsigned char req[PROTO_REQ_MAX];
};

bool sup_router_defer(struct sup *s)
{
	struct sup_defer *d;

	if (s->router_rerun)
		return true; /* one run again: it keeps its place */
	if (!s->defer || s->ndefer == ROUTER_DEFER_MAX || !s->router_req ||
	    s->router_req_len > sizeof(d->req))
		return false;
	d = &s->defer[s->ndefer++];
	d->region = s->router_region;
	d->owner = s->router_client;
	d->t = s->router_ticket;
	d->len = s->router_req_len;
	memcpy(d->req, s->router_req, d->len);
	return true;
}

static const struct proto_handler defer_handlers[] = {
    {PROTO_OP_REGISTER, NULL, sup_register_run},
    {PROTO_OP_UNREGISTER, NULL, sup_unregister_run},
};

/* Only what can be put off is run again: a slot rewritten meanwhile is decoded afresh
 * and anything else in it refused. */
static const struct proto_server defer_server = {
    .role = "supervisor",
    .handlers = defer_handlers,
    .nhandlers = sizeof(defer_handlers) / sizeof(defer_handlers[0]),
    .refused = router_refused,
};

/* Answers @d's slot with the @len bytes in its response buffer (@rc: the dispatch's,
 * 0 when they are there), counted as the router's answers are. */
static void defer_answer(struct sup *s, struct sup_defer *d, int rc, size_t len)
{
	struct mbox *mb = &s->node.pool_mbox[d->region];

	if (rc == 0)
		rc = mbox_answer(mb, d->t, (uint32_t)len);
	if (rc == 0)
		sup_count(s, PROTO_SUP_answered, 1);
	else if (rc == -ECANCELED || rc == -ESTALE)
		sup_count(s, PROTO_SUP_mbox_resets, 1);
}

/* Runs the ops put off again, in their order, while the registry's lock is free. */
static void defer_run(struct sup *s)
{
	while (s->ndefer) {
		struct sup_defer *d = &s->defer[0];
		struct mbox *mb = &s->node.pool_mbox[d->region];
		size_t len = 0;
		int rc;

		if (pthread_mutex_trylock(&s->reg.lock) != 0)
			return; /* a worker's start still holds it */
		pthread_mutex_unlock(&s->reg.lock);
		s->router_client = d->owner;
		s->router_region = d->region;
		s->router_ticket = d->t;
		s->router_req = NULL;
		s->router_rerun = true;
		rc = proto_dispatch(&defer_server, s, d->req, d->len, mbox_resp_buf(mb, d->t),
				    mbox_resp_cap(mb), &len);
		s->router_rerun = false;
		if (rc == PROTO_DEFERRED)
			return; /* a start took the lock again meanwhile */
		defer_answer(s, d, rc, len);
		memmove(&s->defer[0], &s->defer[1], --s->ndefer * sizeof(*s->defer));
	}
}

/* The client of region @region gave slot @t up: an op put off in it is dropped (its
 * reset was acknowledged and counted). */
static void defer_client_reset(struct sup *s, uint32_t region, struct mbox_ticket t)
{
	for (uint32_t i = 0; i < s->ndefer;) {
		struct sup_defer *d = &s->defer[i];

		if (d->region == region && d->t.slot == t.slot && d->t.gen == t.gen) {
			sup_register_probe_drop(s, region, t, false);
			memmove(d, d + 1, (--s->ndefer - i) * sizeof(*d));
		} else {
			i++;
		}
	}
}

/* The router leaves: each op put off is refused draining, never run. */
static void defer_end_all(struct sup *s)
{
	for (uint32_t i = 0; i < s->ndefer; i++) {
		struct sup_defer *d = &s->defer[i];
		struct mbox *mb = &s->node.pool_mbox[d->region];
		struct proto_error e;
		size_t len = 0;
		int rc;

		proto_fail(&e, CHIPD_E_DRAINING, "chipd stopped before the registry was free");
		e.chip = -1;
		sup_count_err(s, CHIPD_E_DRAINING);
		rc = proto_encode_error(&e, mbox_resp_buf(mb, d->t), mbox_resp_cap(mb), &len);
		defer_answer(s, d, rc, len);
	}
	s->ndefer = 0;
	sup_register_probe_drop(s, 0, (struct mbox_ticket){0}, true);
}

/* The answer to a request from a slot whose owner pid is not the client of the region
 * it came through: a forked child using its parent's handle, a pid written by hand, or
 * a client whose connection ended meanwhile. Not served; the tick reclaims the slot
 * (sup_conn_tick). */
static int unconnected(struct sup *s, pid_t pid, void *out, size_t cap, size_t *len)
{
	struct proto_error e;

	proto_fail(&e, CHIPD_E_BAD_REQUEST,
		   "pid %d has no connection: connect through the socket first "
		   "(docs/protocol.md §9)",
		   (int)pid);
	e.chip = -1;
	sup_count_err(s, CHIPD_E_BAD_REQUEST);
	return proto_encode_error(&e, out, cap, len);
}

static void *router_main(void *arg)
{
	struct sup *s = arg;

	while (!atomic_load_explicit(&s->router_quit, memory_order_acquire)) {
		struct mbox_event ev;
		struct mbox *mb;
		uint32_t k;
		pid_t owner;
		size_t len;
		int rc;

		sup_register_tick(s); /* quarantines due */
		/* answers of forwarded submits and cancels first: their clients wait */
		sup_fwd_progress(s);
		sup_ccl_progress(s);
		defer_run(s); /* registers and unregisters put off, once the lock is free */
		rc = sup_region_next(s, &ev, &k, &owner,
				     shm_now_ns() + (s->nfwd || s->nccl || s->ndefer
							 ? ROUTER_FWD_SLICE_NS
							 : ROUTER_SLICE_NS));
		if (rc)
			continue; /* -EAGAIN (an answer came), -ETIMEDOUT or -EINTR */
		mb = &s->node.pool_mbox[k];
		if (ev.kind == MBOX_EV_RESET) {
			/* a submit or cancel in flight in that slot is answered to nobody */
			sup_fwd_client_reset(s, k, ev.t);
			sup_ccl_client_reset(s, k, ev.t);
			defer_client_reset(s, k, ev.t);
			mbox_ack_reset(mb, ev.t);
			sup_count(s, PROTO_SUP_mbox_resets, 1);
			continue;
		}
		sup_count(s, PROTO_SUP_requests, 1);
		/* who sent it is the region's client, as the handshake said; a slot naming
		 * another pid is not its request */
		s->router_client = owner;
		s->router_region = k;
		s->router_ticket = ev.t;
		s->router_req = ev.req;
		s->router_req_len = ev.len;
		if (ev.client != (owner & 0xffffff) || !sup_region_still(s, k, owner))
			rc = unconnected(s, ev.client, mbox_resp_buf(mb, ev.t), mbox_resp_cap(mb),
					 &len);
		else
			rc = proto_dispatch(&router_server, s, ev.req, ev.len,
					    mbox_resp_buf(mb, ev.t), mbox_resp_cap(mb), &len);
		if (rc != 0)
			continue; /* deferred (a submit in flight), or cannot happen: the
				   * response buffer holds an envelope */
		/* answered: the answer reached a client still waiting for it; otherwise the
		 * client gave up first, or is gone, its reset is acknowledged here and the
		 * answer is discarded (requests - answered). A slot its client took from
		 * the router by hand (-ESTALE: its control word rewritten) discards the
		 * answer too, and counts as a reset, or requests - answered would exceed
		 * mbox_resets */
		rc = mbox_answer(mb, ev.t, (uint32_t)len);
		if (rc == 0)
			sup_count(s, PROTO_SUP_answered, 1);
		else if (rc == -ECANCELED || rc == -ESTALE)
			sup_count(s, PROTO_SUP_mbox_resets, 1);
	}
	sup_fwd_end_all(s);
	sup_ccl_end_all(s);
	defer_end_all(s);
	return NULL;
}

int sup_router_start(struct sup *s)
{
	int rc;

	/* each region's mailbox is attached when it is handed out (sup_region_take),
	 * answering a request longer than the slot too_large, counted like any other
	 * refusal, not refused by the mailbox layer unseen */
	atomic_store_explicit(&s->router_quit, false, memory_order_relaxed);
	rc = sup_fwd_init(s);
	if (rc == 0)
		rc = sup_ccl_init(s);
	s->ndefer = 0;
	s->defer = calloc(ROUTER_DEFER_MAX, sizeof(*s->defer)); /* none: ops wait instead */
	if (rc == 0)
		rc = -pthread_create(&s->router, NULL, router_main, s);
	if (rc == 0) {
		s->router_running = true;
	} else {
		sup_ccl_free(s);
		sup_fwd_free(s);
		free(s->defer);
		s->defer = NULL;
	}
	return rc;
}

void sup_router_stop(struct sup *s)
{
	if (!s->router_running)
		return;
	atomic_store_explicit(&s->router_quit, true, memory_order_seq_cst);
	/* wakes it from its wait; a request it is handling ends within its bounds (a
	 * forward to a worker gives up after SUP_FORWARD_MS) */
	sup_router_wake(s);
	pthread_join(s->router, NULL);
	s->router_running = false;
	sup_ccl_free(s);
	sup_fwd_free(s);
	free(s->defer);
	s->defer = NULL;
	for (uint32_t k = 0; k < s->node.npool; k++)
		if (s->node.pool_mbox[k].hdr) /* ever handed out */
			mbox_server_detach(&s->node.pool_mbox[k]);
}
