/* sup_health.c - a worker's health as the supervisor judges it: a heartbeat every
 * --heartbeat-ms through the worker's mailbox (posted, polled on later ticks: the
 * event loop never waits), a worker that leaves one unanswered for --stuck-ms killed,
 * and the answer judged (docs/protocol.md, "Health"): an error word set or a progress
 * word standing still for --progress-ms with work pending marks the chip degraded
 * and kills its worker, whose death then takes the usual path (sup_workers.c). Event
 * loop thread only. */
#include "sup.h"
#include "sup_files.h"
#include "sup_log.h"

#include "proc.h"
#include "proto.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sup_worker_health_reset(struct sup_worker *w, uint64_t now)
{
	w->hb_last_ok_ns = now;
	w->hb_sent_ns = 0; /* the stuck clock starts with the first heartbeat */
	w->hb_next_ns = now;
	w->o_rounds = w->s_rounds = -1; /* no answer yet */
	w->o_still_ns = w->s_still_ns = now;
}

void sup_worker_hb_drop(struct sup_worker *w)
{
	if (w->hb_pending)
		mbox_give_up(&w->mb, w->hb_ticket);
	w->hb_pending = false;
	w->hb_sent_ns = 0;
}

static void hb_send(struct sup_worker *w, uint64_t now)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;
	size_t len;

	w->hb_next_ns = now;
	/* a heartbeat that cannot be posted (every slot busy) is awaited all the same: a
	 * worker whose M holds every slot is stuck */
	if (!w->hb_sent_ns)
		w->hb_sent_ns = now;
	if (!m || mbox_claim(&w->mb, &w->hb_ticket) != 0) {
		free(m);
		return; /* every slot busy: try again next tick */
	}
	proto_msg_init(m, PROTO_OP_HEARTBEAT);
	m->seq = (int64_t)++w->hb_seq;
	if (proto_encode_request(m, mbox_req_buf(&w->mb, w->hb_ticket), PROTO_REQ_MAX, &len,
				 &err) != 0 ||
	    mbox_post(&w->mb, w->hb_ticket, (uint32_t)len) != 0) {
		mbox_give_up(&w->mb, w->hb_ticket);
		free(m);
		return;
	}
	w->hb_pending = true;
	free(m);
}

/* What a heartbeat answer says of the worker's threads (docs/protocol.md, heartbeat). */
struct hb_health {
	int64_t o_err, s_err;	    /* the threads' error words: -errno once one gave up */
	int64_t o_rounds, s_rounds; /* their progress words */
	bool o_work, s_work;	    /* work pending for O (queued, active, epochs out), for S
				     * (epochs published, not released) */
	int64_t fill_ms, fill_id;   /* the loader's fill in progress (0, 0: none) */
	uint64_t at;		    /* when the heartbeat was sent: the answer is later */
};

/* Checks a pending heartbeat without waiting: true when it was answered, with what
 * it said in @h. */
static bool hb_poll(struct sup *s, struct sup_worker *w, uint64_t now, struct hb_health *h)
{
	struct proto_msg *m;
	struct proto_error err;
	const void *buf;
	uint32_t len;
	bool ok = false;
	int rc = mbox_wait(&w->mb, w->hb_ticket, now);

	if (rc == -ETIMEDOUT)
		return false;
	if (rc != 0) { /* the worker left or reset: its death arrives through its pidfd */
		sup_worker_hb_drop(w);
		return false;
	}
	m = malloc(sizeof(*m));
	if (m && mbox_response(&w->mb, w->hb_ticket, &buf, &len) == 0 &&
	    proto_decode_answer(PROTO_OP_HEARTBEAT, buf, len, m, &err) == 0 && m->ok &&
	    m->seq == (int64_t)w->hb_seq) {
		ok = true;
		*h = (struct hb_health){
		    .o_err = m->o_err,
		    .s_err = m->s_err,
		    .o_rounds = m->o_rounds,
		    .s_rounds = m->s_rounds,
		    .o_work = m->queued > 0 || m->active > 0 || m->epochs > 0,
		    .s_work = m->epochs > 0,
		    .fill_ms = m->fill_ms,
		    .fill_id = m->fill_id,
		    .at = w->hb_sent_ns,
		};
	}
	mbox_release(&w->mb, w->hb_ticket);
	w->hb_pending = false;
	w->hb_sent_ns = 0;
	free(m);
	if (ok) {
		w->hb_last_ok_ns = now;
		atomic_store_explicit(&s->node.dir[w->chip].heartbeat_ns, now,
				      memory_order_relaxed);
	}
	return ok;
}

/* Marks @w DEGRADED (the router sends it nothing more) and kills it: its death
 * takes the usual path (streams re-queued or ended worker_lost, restart after the
 * backoff, the crash limit). */
static void degrade(struct sup *s, struct sup_worker *w, const char *why)
{
	pthread_mutex_lock(&s->lock);
	sup_worker_set_state(s, w, CHIPD_CHIP_DEGRADED);
	pthread_mutex_unlock(&s->lock);
	sup_count(s, PROTO_SUP_worker_degraded, 1);
	SUP_WARN((int)w->chip, 0, "degraded: %s: killing pid %d", why, (int)w->pid);
	(void)sup_pidfd_signal(w->pidfd, SIGKILL); /* the spawner kills its group */
}

/* Whether a progress word stands still past the bound: @still_ns is when it was
 * last seen moving or with no work pending; both times are heartbeats' send times,
 * so a supervisor that was slow to read the answers does not stretch them. */
static bool stalled(int64_t *seen, uint64_t *still_ns, int64_t val, bool work, uint64_t at,
		    uint64_t bound_ns)
{
	if (*seen != val || !work) {
		*seen = val;
		*still_ns = at;
		return false;
	}
	return at > *still_ns && at - *still_ns > bound_ns;
}

/* Marks the stream whose fill held @w's loader past --fill-ms (@id, its worker's
 * answer: checked against the table), so that the death which follows ends it
 * timeout rather than move it to another chip's loader. */
static void fill_held(struct sup *s, struct sup_worker *w, uint64_t id)
{
	struct sup_req *e;

	if (w->stopping)
		return; /* not degraded: its streams end as the stop ends them */
	pthread_mutex_lock(&s->lock);
	e = sup_table_find(s, id);
	if (e && e->chip == w->chip && !e->ended)
		e->fill_held = true;
	pthread_mutex_unlock(&s->lock);
}

/* Judges a heartbeat answer: the reason @w is degraded, or NULL while healthy. */
static const char *hb_judge(struct sup *s, struct sup_worker *w, const struct hb_health *h,
			    char *buf, size_t cap)
{
	uint64_t bound = (uint64_t)s->cfg.progress_ms * SHM_NS_PER_MS;

	if (h->s_err) {
		snprintf(buf, cap, "its scheduler gave the device up (%s)",
			 strerror((int)-h->s_err));
		return buf;
	}
	if (h->o_err) {
		snprintf(buf, cap, "its orchestrator failed (%s)", strerror((int)-h->o_err));
		return buf;
	}
	if (stalled(&w->s_rounds, &w->s_still_ns, h->s_rounds, h->s_work, h->at, bound)) {
		snprintf(buf, cap, "its scheduler made no progress for %u ms with a step pending",
			 s->cfg.progress_ms);
		return buf;
	}
	if (stalled(&w->o_rounds, &w->o_still_ns, h->o_rounds, h->o_work, h->at, bound)) {
		snprintf(buf, cap, "its orchestrator made no progress for %u ms with work pending",
			 s->cfg.progress_ms);
		return buf;
	}
	if (h->fill_ms > (int64_t)s->cfg.fill_ms) {
		fill_held(s, w, (uint64_t)h->fill_id);
		snprintf(buf, cap, "its loader has been in the fill of request %lld for %lld ms "
			 "(--fill-ms %u)", (long long)h->fill_id, (long long)h->fill_ms,
			 s->cfg.fill_ms);
		return buf;
	}
	return NULL;
}

/* A trace op (start or stop) came while @w's worker was being started, after its
 * start was asked with the other flag: the router sends trace ops to READY chips only,
 * so the worker gets it now, posted without waiting (the answer only ends the post). */
static void trace_catch_up(struct sup_worker *w, bool tracing)
{
	struct proto_msg *m = malloc(sizeof(*m));
	int rc = -ENOMEM;

	sup_post_drop(w, &w->trace_post); /* one of an earlier incarnation */
	if (m) {
		proto_msg_init(m, PROTO_OP_TRACE);
		m->act = tracing ? PROTO_TRACE_START : PROTO_TRACE_STOP;
		rc = sup_post_send(w, &w->trace_post, m);
		free(m);
	}
	if (rc)
		SUP_WARN((int)w->chip, 0, "trace %s, missed while it started: %s",
			 tracing ? "start" : "stop", strerror(-rc));
	else
		SUP_DEBUG((int)w->chip, 0, "trace %s, missed while it started: sent",
			  tracing ? "start" : "stop");
}

/* Ends @w's catch-up trace op once answered, its worker gone, or SUP_FORWARD_MS
 * passed since its post. */
static void trace_poll(struct sup_worker *w, uint64_t now)
{
	int rc = sup_post_poll(w, &w->trace_post, NULL);

	if (rc == -EINPROGRESS && now > w->trace_post.posted_ns &&
	    now - w->trace_post.posted_ns > (uint64_t)SUP_FORWARD_MS * SHM_NS_PER_MS) {
		SUP_WARN((int)w->chip, 0, "trace op, missed while it started: no answer in %u ms",
			 SUP_FORWARD_MS);
		sup_post_drop(w, &w->trace_post);
	}
}

void sup_worker_heartbeat(struct sup *s, struct sup_worker *w, uint64_t now, bool resumed)
{
	struct hb_health h;
	char why[160];
	const char *bad;

	trace_poll(w, now);
	if (w->hb_pending && hb_poll(s, w, now, &h)) {
		if (w->state == CHIPD_CHIP_STARTING) {
			bool catch_up;

			/* under the lock the router's trace op reads the state with: it sends
			 * the op itself from here on, or this worker gets it below */
			pthread_mutex_lock(&s->lock);
			sup_worker_set_state(s, w, CHIPD_CHIP_READY);
			catch_up = w->tracing != w->spawn_trace;
			w->spawn_trace = w->tracing;
			pthread_mutex_unlock(&s->lock);
			SUP_INFO((int)w->chip, 0, "worker ready, pid %d", (int)w->pid);
			if (catch_up)
				trace_catch_up(w, w->spawn_trace);
		}
		bad = hb_judge(s, w, &h, why, sizeof(why));
		if (bad && !w->stopping) {
			degrade(s, w, bad);
			return;
		}
	}
	/* It said it refuses new work (its scheduler or orchestrator gave up) before
	 * its next heartbeat could say why. */
	if (w->state == CHIPD_CHIP_READY && !w->stopping &&
	    atomic_load_explicit(&w->ctl.hdr->state, memory_order_acquire) != SHM_STATE_READY) {
		degrade(s, w, "it refuses new work (its scheduler or orchestrator gave up)");
		return;
	}
	if (resumed) {
		/* The supervisor itself was stalled: what its clocks say of the worker is
		 * stale. Ask afresh; the deadlines start now. */
		sup_worker_hb_drop(w);
		w->o_still_ns = w->s_still_ns = now;
	}
	if (!w->hb_pending &&
	    (w->state == CHIPD_CHIP_STARTING || resumed ||
	     now >= w->hb_next_ns + (uint64_t)s->cfg.heartbeat_ms * SHM_NS_PER_MS))
		hb_send(w, now);
	/* measured from when the heartbeat awaited was really sent */
	if (w->hb_sent_ns && now - w->hb_sent_ns > (uint64_t)s->cfg.stuck_ms * SHM_NS_PER_MS &&
	    !w->stopping) {
		SUP_WARN((int)w->chip, 0, "no heartbeat for %u ms: killing pid %d", s->cfg.stuck_ms,
			 (int)w->pid);
		(void)sup_pidfd_signal(w->pidfd, SIGKILL); /* the spawner kills its group */
		/* its death comes through the pidfd; no heartbeat is awaited meanwhile */
		sup_worker_hb_drop(w);
	}
}
