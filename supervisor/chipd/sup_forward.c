/* sup_forward.c - the router's submits in flight. A submit admitted by the router
 * (id, bounds, chip and ring reserved under sup.lock) is forwarded to its worker as
 * an assign posted without waiting; the client's slot stays TAKEN and is answered
 * when the worker's answer comes, so the router serves other requests, and posts
 * other assigns, meanwhile. Each forward ends exactly once: answered (admitted or
 * refused as the worker said), queue_full when every slot of its worker's mailbox
 * stayed busy for SUP_FORWARD_MS (it was never posted), or worker_lost when its worker
 * died, did not answer within SUP_FORWARD_MS of the post, or the router leaves. A
 * forward whose answer reaches nobody (its client gave the slot up) that the worker
 * admitted is abandoned: its ring's reader is closed, so the worker cancels it at its
 * next round. A cancel that came while it was in flight is answered ok (the request is
 * live) and passed on once the worker admitted it (sup_cancel_start). Router thread only;
 * the table entries under sup.lock. */
#include "sup.h"
#include "sup_cancel.h"
#include "sup_clstat.h"
#include "sup_log.h"
#include "sup_register.h"

#include "proto.h"
#include "wait.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sup_fwd_init(struct sup *s)
{
	s->nfwd = 0;
	s->fwd_cap = s->nreqs;
	s->fwd = calloc(s->fwd_cap ? s->fwd_cap : 1, sizeof(*s->fwd));
	s->fwd_msg = malloc(sizeof(*s->fwd_msg));
	if (!s->fwd || !s->fwd_msg) {
		sup_fwd_free(s);
		return -ENOMEM;
	}
	return 0;
}

void sup_fwd_free(struct sup *s)
{
	free(s->fwd);
	free(s->fwd_msg);
	s->fwd = NULL;
	s->fwd_msg = NULL;
	s->nfwd = s->fwd_cap = 0;
}

/* Nobody will learn of @e's request (its submit's answer reaches no client): its
 * stream has no reader and no canceller. Closing the reader makes a worker that
 * admitted it cancel it at its next round; client 0 lets the sweep reclaim the ring and
 * the id once it ended, or take them back when no worker holds it (sup_table_sweep).
 * Under sup.lock. */
static void abandon(struct sup *s, struct sup_req *e)
{
	e->client = 0;
	sup_table_close_reader(s, e);
}

/* How @e ends when the worker it was forwarded to died and the router has no answer
 * to the assign, as the death path ends the streams it finds (sup_worker_orphan):
 * the one whose fill held the loader past --fill-ms (its worker was killed for it,
 * sup_health.c) ends timeout, for it would hold the next chip's loader the same way;
 * the others worker_lost. Under sup.lock. */
static enum chipd_code died_code(const struct sup_req *e)
{
	return e->fill_held ? CHIPD_E_TIMEOUT : CHIPD_E_WORKER_LOST;
}

/* The assign of @f reached no answer (@rc: the mailbox's error, or -ETIMEDOUT after
 * SUP_FORWARD_MS): the call is given up, never the worker (a slow mailbox thread is
 * the heartbeat's to judge). The worker may still admit the request (it took the
 * assign), so the request is abandoned; one whose worker died meanwhile ends here, as
 * the death path leaves entries being forwarded alone. Under sup.lock. */
static void forward_failed(struct sup *s, struct sup_fwd *f, struct sup_req *e, int rc)
{
	struct sup_worker *w = &s->workers[f->chip];

	SUP_WARN((int)f->chip, e->id, "worker pid %d did not answer the assign (%s): given up",
		 (int)f->pid, strerror(-rc));
	abandon(s, e);
	e->answered_error = true; /* complete answers the refusal, counted there */
	if (w->pid != f->pid)
		sup_table_end(s, e, died_code(e));
}

/* Whether chipd drains or stops: a dead worker's streams are not moved then. */
static bool draining(const struct sup *s)
{
	return atomic_load_explicit(&s->sup_state, memory_order_acquire) >= CHIPD_SUP_DRAINING;
}

/* Posts @f's assign; -EAGAIN when every slot of the worker's mailbox is busy. */
static int post(struct sup *s, struct sup_fwd *f, struct sup_req *e)
{
	sup_table_assign(s, e, s->fwd_msg);
	return sup_post_send(&s->workers[f->chip], &f->post, s->fwd_msg);
}

void sup_fwd_start(struct sup *s, struct sup_req *e, struct sup_worker *w, uint32_t region,
		   struct mbox_ticket t, bool pinned)
{
	/* every forward holds an entry, so the table never fills before the entries */
	struct sup_fwd *f = &s->fwd[s->nfwd++];

	*f = (struct sup_fwd){
	    .entry = sup_table_index(s, e),
	    .ring_gen = e->ring_gen,
	    .region = region,
	    .t = t,
	    .chip = w->chip,
	    .pid = e->producer,
	    .pinned = pinned,
	    .since_ns = shm_now_ns(),
	};
	pthread_mutex_lock(&s->lock);
	(void)post(s, f, e); /* a failure is retried, and bounded, by sup_fwd_progress */
	pthread_mutex_unlock(&s->lock);
}

/* Writes @f's answer (@code, with @ans or @err) into its client's slot and answers
 * it; a refusal is counted in err_<code> whether or not it reaches the client. A
 * submit admitted whose answer reaches nobody is abandoned. */
static void answer_client(struct sup *s, struct sup_fwd *f, enum chipd_code code,
			  const struct proto_msg *ans, struct proto_error *err)
{
	struct mbox *mb = &s->node.pool_mbox[f->region];
	size_t len = 0;
	int rc = -ECANCELED;

	if (code != CHIPD_OK)
		sup_count_err(s, code);
	if (!f->client_gone) {
		void *out = mbox_resp_buf(mb, f->t);

		rc = code == CHIPD_OK ? proto_encode_answer(ans, out, mbox_resp_cap(mb), &len, err)
				      : -EINVAL;
		if (code != CHIPD_OK || rc != 0)
			rc = proto_encode_error(err, out, mbox_resp_cap(mb), &len);
		if (rc == 0)
			rc = mbox_answer(mb, f->t, (uint32_t)len);
		if (rc == 0)
			sup_count(s, PROTO_SUP_answered, 1);
		else if (rc == -ECANCELED || rc == -ESTALE) /* as the router's (sup_router.c) */
			sup_count(s, PROTO_SUP_mbox_resets, 1);
	}
	if (rc == 0 || code != CHIPD_OK)
		return;
	/* the client gave up after the router took the submit: nobody learns the stream.
	 * Only the router allocates entries: it is this one unless it ended and was
	 * reclaimed meanwhile, which the generation tells. */
	pthread_mutex_lock(&s->lock);
	struct sup_req *e = &s->reqs[f->entry];

	if (e->used && e->ring_gen == f->ring_gen) {
		SUP_INFO((int)e->chip, e->id, "its client gave up on the submit: cancelling it");
		abandon(s, e);
	}
	pthread_mutex_unlock(&s->lock);
}

/* @f's chip refused it no_capacity: a submit that did not name its chip goes to the
 * other routable chip with the fewest unended requests (sup_worker_pick) that has its
 * callable and has not refused it (its ring reset again, naming that worker its
 * producer: the client has not seen it yet), so a node with room somewhere does not
 * refuse it. Returns false when no chip is left: the refusal is answered. Under
 * sup.lock. */
static bool offer_elsewhere(struct sup *s, struct sup_fwd *f, struct sup_req *e)
{
	struct sup_worker *to;

	f->tried |= 1ull << f->chip;
	if (f->pinned || sup_register_refuses(s, e->wl, &(struct proto_error){0}) != CHIPD_OK)
		return false;
	/* nor the chips without its callable (a replay of it failed there) */
	to = sup_worker_pick(s, f->tried | ~sup_register_chips(s, e->wl));
	if (!to)
		return false;
	sup_worker_move(s, e, to);
	e->producer = to->pid;
	e->ring_gen = sup_table_reset(s, e, e->id, to->pid, e->client);
	e->forwarding = true;
	SUP_DEBUG((int)f->chip, e->id, "no capacity on chip %u: offered to chip %u", f->chip,
		  to->chip);
	f->chip = to->chip;
	f->pid = to->pid;
	f->ring_gen = e->ring_gen;
	f->post = (struct sup_post){0};
	f->since_ns = shm_now_ns();
	(void)post(s, f, e); /* a failure is retried, and bounded, by sup_fwd_progress */
	return true;
}

/* Ends @f, or moves it on to another chip (offer_elsewhere): @rc is the poll's result
 * (0: the worker's answer is in fwd_msg). Returns false when it goes on. */
static bool complete(struct sup *s, struct sup_fwd *f, int rc)
{
	struct proto_msg *m = s->fwd_msg;
	struct proto_error err = {0};
	enum chipd_code code;
	struct sup_worker *w = &s->workers[f->chip];
	uint64_t cancel_id = 0; /* passed on after the answer: admitted ids are ≥ 1 */

	pthread_mutex_lock(&s->lock);
	struct sup_req *e = &s->reqs[f->entry];

	e->forwarding = false;
	if (rc == -EAGAIN) {
		/* never posted (every slot busy for the bound): no worker has it, so it is
		 * refused as a full queue is (docs/protocol.md 8.3), retryable */
		code = proto_fail(&err, CHIPD_E_QUEUE_FULL,
				  "all %u mailbox slots of chip %u busy for %u ms: retry later",
				  SUP_WRK_SLOTS, f->chip, SUP_FORWARD_MS);
		err.chip = f->chip;
		sup_table_release(s, e);
	} else if (rc) {
		forward_failed(s, f, e, rc);
		if (rc == -EPIPE && e->fill_held)
			code = proto_fail(&err, CHIPD_E_TIMEOUT,
					  "chip %u: its worker was killed with this request's fill "
					  "holding its loader past --fill-ms",
					  f->chip);
		else if (rc == -EPIPE)
			code = proto_fail(&err, CHIPD_E_WORKER_LOST,
					  "chip %u: its worker died with the assign in flight",
					  f->chip);
		else if (rc == -ESHUTDOWN)
			code = proto_fail(&err, CHIPD_E_WORKER_LOST,
					  "chip %u: chipd stopped with the assign in flight", f->chip);
		else
			code = proto_fail(&err, CHIPD_E_WORKER_LOST, "chip %u did not answer (%s)",
					  f->chip, strerror(-rc));
		err.chip = f->chip;
	} else if (!m->ok && m->err.code == CHIPD_E_NO_CAPACITY && offer_elsewhere(s, f, e)) {
		pthread_mutex_unlock(&s->lock);
		return false;
	} else if (!m->ok) {
		err = m->err; /* its refusal, as it said it */
		err.chip = f->chip;
		code = (enum chipd_code)err.code;
		sup_table_release(s, e);
	} else {
		/* a request of its callable from here on (answered ok below, or abandoned
		 * when nobody takes the answer), before its end can be counted */
		sup_clstat_admitted(s, e);
		/* it died after answering; the death path skipped us: the stream ends or
		 * moves as that path decides (one with no token out is re-queued) */
		if (w->pid != f->pid)
			sup_worker_orphan(s, w, e, !w->stopping && !draining(s));
		else if (e->cancel_asked)
			cancel_id = e->id;
		code = CHIPD_OK;
		proto_msg_init(m, PROTO_OP_SUBMIT);
		m->id = (int64_t)e->id;
		m->chip = f->chip;
		m->ring = sup_table_index(s, e);
		m->ring_gen = e->ring_gen;
		SUP_DEBUG((int)f->chip, e->id, "admitted on ring %lld", (long long)m->ring);
	}
	if (code != CHIPD_OK && err.request == 0)
		err.request = (int64_t)e->id;
	pthread_mutex_unlock(&s->lock);
	answer_client(s, f, code, m, &err);
	/* the cancel its client sent while @f was in flight (answered ok then: the
	 * request was live), passed on now that its worker admitted the request */
	if (cancel_id) {
		int crc = sup_cancel_start(s, w, cancel_id, false, &err);

		if (crc != CHIPD_OK && crc != PROTO_DEFERRED)
			SUP_INFO((int)f->chip, cancel_id, "its client's cancel, passed on: %s",
				 err.message);
	}
	return true;
}

/* Whether @f has something for sup_fwd_progress: its answer, or no post yet. */
static bool fwd_ready(struct sup *s, const struct sup_fwd *f)
{
	return !f->post.pending || mbox_answered(&s->workers[f->chip].mb, f->post.t);
}

bool sup_fwd_ready(struct sup *s)
{
	for (uint32_t i = 0; i < s->nfwd; i++)
		if (s->fwd[i].post.pending && fwd_ready(s, &s->fwd[i]))
			return true;
	return false;
}

/* Whether SUP_FORWARD_MS passed at @now since @since. */
static bool past_bound(uint64_t now, uint64_t since)
{
	return now > since && now - since > (uint64_t)SUP_FORWARD_MS * SHM_NS_PER_MS;
}

/* One look at @f. Returns true when it ended. */
static bool step(struct sup *s, struct sup_fwd *f, uint64_t now)
{
	struct sup_worker *w = &s->workers[f->chip];
	bool died, late;
	int rc;

	pthread_mutex_lock(&s->lock);
	died = w->pid != f->pid;
	/* every slot was busy: try again, also once the bound passed (the router may not
	 * have looked meanwhile, and the answers it reads free slots) */
	if (!f->post.pending && !died)
		(void)post(s, f, &s->reqs[f->entry]);
	pthread_mutex_unlock(&s->lock);
	/* the worker's bound runs from the post: a forward that waited for a slot has the
	 * same time to be answered; one that found none within the bound ends queue_full */
	late = past_bound(now, f->post.pending ? f->post.posted_ns : f->since_ns);
	rc = f->post.pending ? sup_post_poll(w, &f->post, s->fwd_msg) : -EINPROGRESS;
	if (rc == -EINPROGRESS && !died && !late)
		return false;
	if (rc == -EINPROGRESS && !died && !f->post.pending)
		return false; /* still no slot: unposted_tick, once the others were read */
	/* the worker it was posted to died with it in flight (its death path leaves
	 * entries being forwarded to us; a restarted one takes the slot back), or it did
	 * not answer in time */
	if (rc == -EINPROGRESS)
		sup_post_drop(w, &f->post);
	return complete(s, f, rc == 0 ? 0 : died ? -EPIPE : rc == -EINPROGRESS ? -ETIMEDOUT : rc);
}

/* Whether some forward found every slot of its worker busy and waits to be posted. */
static bool any_unposted(const struct sup *s)
{
	for (uint32_t i = 0; i < s->nfwd; i++)
		if (!s->fwd[i].post.pending)
			return true;
	return false;
}

/* The forwards still unposted once the answers that came were read (sup_fwd_progress),
 * past their bound: posted now if a slot is free, else refused queue_full (every slot
 * stayed busy: -EAGAIN) or, when the post failed otherwise, given up worker_lost. */
static void unposted_tick(struct sup *s)
{
	uint64_t now = shm_now_ns();

	for (uint32_t i = 0; i < s->nfwd;) {
		struct sup_fwd *f = &s->fwd[i];
		int rc = 0;

		if (!f->post.pending && past_bound(now, f->since_ns)) {
			pthread_mutex_lock(&s->lock);
			if (s->workers[f->chip].pid == f->pid)
				rc = post(s, f, &s->reqs[f->entry]);
			pthread_mutex_unlock(&s->lock);
		}
		if (rc && complete(s, f, rc == -EAGAIN ? -EAGAIN : -ETIMEDOUT))
			s->fwd[i] = s->fwd[--s->nfwd];
		else
			i++;
	}
}

void sup_fwd_progress(struct sup *s)
{
	for (int pass = 0; pass < 2 && s->nfwd; pass++) {
		uint64_t now = shm_now_ns();
		uint32_t ended = 0;

		for (uint32_t i = 0; i < s->nfwd;) {
			if (step(s, &s->fwd[i], now)) {
				s->fwd[i] = s->fwd[--s->nfwd];
				ended++;
			} else {
				i++;
			}
		}
		/* an ended forward freed a worker slot: those that found every slot busy are
		 * posted now, not at the next look */
		if (!ended || !any_unposted(s))
			break;
	}
	if (any_unposted(s))
		unposted_tick(s);
}

void sup_fwd_client_reset(struct sup *s, uint32_t region, struct mbox_ticket t)
{
	for (uint32_t i = 0; i < s->nfwd; i++) {
		struct sup_fwd *f = &s->fwd[i];

		if (f->region == region && f->t.slot == t.slot && f->t.gen == t.gen)
			f->client_gone = true;
	}
}

uint32_t sup_fwd_announce(struct sup *s, struct shm_waitv *w, uint32_t n, uint32_t max,
			  bool *all)
{
	for (uint32_t i = 0; i < s->nfwd; i++) {
		struct sup_fwd *f = &s->fwd[i];

		if (!f->post.pending) {
			*all = false; /* to be posted: the router looks again soon */
			continue;
		}
		if (n >= max) {
			*all = false;
			break;
		}
		w[n].expected = mbox_client_announce(&s->workers[f->chip].mb, f->post.t, &w[n].word);
		w[n].private_word = false;
		n++;
	}
	return n;
}

void sup_fwd_end_all(struct sup *s)
{
	while (s->nfwd) {
		struct sup_fwd *f = &s->fwd[--s->nfwd];

		sup_post_drop(&s->workers[f->chip], &f->post);
		complete(s, f, -ESHUTDOWN);
	}
}
