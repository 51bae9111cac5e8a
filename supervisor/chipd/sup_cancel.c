/* sup_cancel.c - the cancels the router passes on to workers, posted without waiting
 * as a submit's assign is (sup_forward.c): a client's cancel, the cancel a client sent
 * while its submit was in flight (passed on once its worker admitted it), and those of
 * an unregister --cancel. The router serves everyone else meanwhile: a stopped or
 * stuck worker holds up only the cancels sent to it, never other clients' traffic.
 * Each cancel ends exactly once: the worker's answer (ok, or its refusal as it said
 * it), ok when its worker died with it in flight (its death path ends the stream
 * cancelled: cancel_asked), or worker_lost when no answer came within SUP_FORWARD_MS
 * of the post (the chip is then silent, sup_worker_silent), every slot of the worker's
 * mailbox was busy, or the router leaves; a client's is refused queue_full at once when
 * the clients' cancels in flight are as many as the node's client slots (sup_ccl_init).
 * A client's cancel is answered in its slot, which stays TAKEN until then. Router
 * thread only. */
#include "sup.h"
#include "sup_cancel.h"
#include "sup_log.h"

#include "proto.h"
#include "wait.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sup_ccl_init(struct sup *s)
{
	/* a client's cancel holds its slot until it ends, so the clients' live ones number
	 * at most the client slots; but a client that gives a slot up (its call timed out:
	 * RESET) leaves the cancel in flight, to nobody, until its worker answers or
	 * SUP_FORWARD_MS passes, and sends the next one in the slot it got back. The
	 * clients' share is therefore bounded on its own (ccl_client_cap: past it a client's
	 * cancel is refused queue_full, sup_cancel_start), never by waiting, and the
	 * router's own (one per request at most: sup_cancel_pending) keep the rest; the
	 * table grows for the router's own should they ever pass it */
	s->nccl = s->nccl_clients = 0;
	s->ccl_client_cap = s->node.npool * s->node.pool_slots;
	s->ccl_cap = s->nreqs + s->ccl_client_cap;
	if (s->ccl_cap == 0)
		s->ccl_cap = 1;
	s->ccl = calloc(s->ccl_cap, sizeof(*s->ccl));
	return s->ccl ? 0 : -ENOMEM;
}

void sup_ccl_free(struct sup *s)
{
	free(s->ccl);
	s->ccl = NULL;
	s->nccl = s->nccl_clients = s->ccl_cap = s->ccl_client_cap = 0;
}

/* How cancel @c ended, given @rc: 0 with the worker's answer in @m, -EPIPE when its
 * worker died with it in flight, or the error that left it unanswered. Returns the
 * code, with @err filled as sup_call_run fills it. */
static enum chipd_code outcome(struct sup *s, const struct sup_ccl *c, int rc,
			       const struct proto_msg *m, struct proto_error *err)
{
	struct sup_worker *w = &s->workers[c->chip];

	*err = (struct proto_error){0};
	/* a call answered clears the chip's silence; one that found none marks it */
	if (rc == 0 || rc == -ETIMEDOUT)
		atomic_store_explicit(&w->call_silent_ns, rc ? shm_now_ns() : 0,
				      memory_order_relaxed);
	if (rc == 0 && m->ok)
		return CHIPD_OK;
	if (rc == 0) {
		*err = m->err; /* its refusal, as it said it */
	} else if (rc == -EPIPE || rc == -ECONNRESET || rc == -ESTALE) {
		/* its worker died with the cancel in flight (a restarted one took the slot
		 * back): the death path ends the stream cancelled (cancel_asked), never
		 * re-queues it; the cancel took effect */
		SUP_INFO((int)c->chip, c->id,
			 "cancel: its worker died meanwhile; it ends cancelled");
		return CHIPD_OK;
	} else if (rc == -ESHUTDOWN) {
		proto_fail(err, CHIPD_E_WORKER_LOST,
			   "chip %u: chipd stopped with the cancel in flight", c->chip);
	} else {
		proto_fail(err, CHIPD_E_WORKER_LOST, "chip %u did not answer (%s)", c->chip,
			   strerror(-rc));
	}
	err->chip = c->chip;
	if (err->request == 0)
		err->request = (int64_t)c->id;
	return (enum chipd_code)err->code;
}

/* Ends @c with @rc (outcome): a client's is answered in its slot, a refusal counted in
 * err_<code> whether or not it reaches the client, as the router counts any refusal;
 * the router's own is logged when it failed. @m: scratch, holding the answer when @rc
 * is 0. */
static void end(struct sup *s, struct sup_ccl *c, int rc, struct proto_msg *m)
{
	struct proto_error err;
	enum chipd_code code = outcome(s, c, rc, m, &err);

	if (!c->to_client) {
		/* one that ended meanwhile is not_found: nothing to say */
		if (code != CHIPD_OK && code != CHIPD_E_NOT_FOUND)
			SUP_INFO((int)c->chip, c->id, "cancel passed on to chip %u: %s", c->chip,
				 err.message);
		return;
	}
	if (code != CHIPD_OK)
		sup_count_err(s, code);
	if (!c->client_gone) {
		struct mbox *mb = &s->node.pool_mbox[c->region];
		void *out = mbox_resp_buf(mb, c->t);
		size_t len = 0;
		int arc = -EINVAL;

		if (code == CHIPD_OK) {
			proto_msg_init(m, PROTO_OP_CANCEL);
			m->id = (int64_t)c->id;
			arc = proto_encode_answer(m, out, mbox_resp_cap(mb), &len, &err);
		}
		if (arc != 0)
			arc = proto_encode_error(&err, out, mbox_resp_cap(mb), &len);
		if (arc == 0)
			arc = mbox_answer(mb, c->t, (uint32_t)len);
		/* as the router counts its own answers (sup_router.c) */
		if (arc == 0)
			sup_count(s, PROTO_SUP_answered, 1);
		else if (arc == -ECANCELED || arc == -ESTALE)
			sup_count(s, PROTO_SUP_mbox_resets, 1);
	}
}

/* Makes room for one more cancel in the table. Returns 0, or -ENOMEM. */
static int ccl_room(struct sup *s)
{
	struct sup_ccl *grown;
	uint32_t cap;

	if (s->nccl < s->ccl_cap)
		return 0;
	cap = s->ccl_cap > UINT32_MAX / 2 ? UINT32_MAX : s->ccl_cap * 2;
	if (cap == s->ccl_cap)
		return -ENOMEM;
	grown = realloc(s->ccl, (size_t)cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	s->ccl = grown;
	s->ccl_cap = cap;
	return 0;
}

int sup_cancel_start(struct sup *s, struct sup_worker *w, uint64_t id, bool to_client,
		     struct proto_error *err)
{
	struct proto_msg *m = s->fwd_msg;
	struct sup_ccl c = {
	    .id = id,
	    .chip = w->chip,
	    .to_client = to_client,
	    .region = s->router_region,
	    .t = s->router_ticket,
	};
	int rc;

	if (to_client && s->nccl_clients >= s->ccl_client_cap) {
		/* clients gave slots up with that many cancels in flight (to a stopped or
		 * stuck worker, which answers none): refused at once, never waited for */
		proto_fail(err, CHIPD_E_QUEUE_FULL,
			   "%u cancels of clients are in flight, unanswered, as many as the node "
			   "has client slots: retry later",
			   s->nccl_clients);
		err->request = (int64_t)id;
		err->chip = w->chip;
		return CHIPD_E_QUEUE_FULL;
	}
	if (ccl_room(s) != 0) {
		proto_fail(err, CHIPD_E_INTERNAL, "cancel of request %llu: out of memory",
			   (unsigned long long)id);
		err->request = (int64_t)id;
		return CHIPD_E_INTERNAL;
	}
	proto_msg_init(m, PROTO_OP_CANCEL);
	m->id = (int64_t)id;
	pthread_mutex_lock(&s->lock);
	c.pid = w->pid;
	/* a worker that is gone or going has no mailbox server: mbox_post says -EPIPE */
	rc = sup_post_send(w, &c.post, m);
	pthread_mutex_unlock(&s->lock);
	if (rc == 0) {
		s->ccl[s->nccl++] = c;
		if (to_client)
			s->nccl_clients++;
		return PROTO_DEFERRED;
	}
	/* not posted (every slot busy: -EAGAIN, or its worker gone): it ends now, as a
	 * call that waited would have */
	return outcome(s, &c, rc, m, err);
}

/* Takes entry @i out of the table (ended). */
static void ccl_remove(struct sup *s, uint32_t i)
{
	if (s->ccl[i].to_client)
		s->nccl_clients--;
	s->ccl[i] = s->ccl[--s->nccl];
}

/* Whether SUP_FORWARD_MS passed at @now since @since. */
static bool past_bound(uint64_t now, uint64_t since)
{
	return now > since && now - since > (uint64_t)SUP_FORWARD_MS * SHM_NS_PER_MS;
}

bool sup_cancel_pending(const struct sup *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->nccl; i++)
		if (s->ccl[i].id == id)
			return true;
	return false;
}

void sup_ccl_progress(struct sup *s)
{
	uint64_t now = shm_now_ns();

	for (uint32_t i = 0; i < s->nccl;) {
		struct sup_ccl *c = &s->ccl[i];
		struct sup_worker *w = &s->workers[c->chip];
		bool died;
		int rc;

		pthread_mutex_lock(&s->lock);
		died = w->pid != c->pid;
		pthread_mutex_unlock(&s->lock);
		rc = sup_post_poll(w, &c->post, s->fwd_msg);
		if (rc == -EINPROGRESS) {
			if (!died && !past_bound(now, c->post.posted_ns)) {
				i++;
				continue;
			}
			/* its worker died (the death path leaves the stream to the cancel's
			 * mark), or it did not answer in time: given up */
			sup_post_drop(w, &c->post);
			rc = died ? -EPIPE : -ETIMEDOUT;
		}
		end(s, c, rc, s->fwd_msg);
		ccl_remove(s, i);
	}
}

bool sup_ccl_ready(struct sup *s)
{
	for (uint32_t i = 0; i < s->nccl; i++)
		if (mbox_answered(&s->workers[s->ccl[i].chip].mb, s->ccl[i].post.t))
			return true;
	return false;
}

void sup_ccl_client_reset(struct sup *s, uint32_t region, struct mbox_ticket t)
{
	for (uint32_t i = 0; i < s->nccl; i++) {
		struct sup_ccl *c = &s->ccl[i];

		if (c->to_client && c->region == region && c->t.slot == t.slot && c->t.gen == t.gen)
			c->client_gone = true;
	}
}

uint32_t sup_ccl_announce(struct sup *s, struct shm_waitv *w, uint32_t n, uint32_t max, bool *all)
{
	for (uint32_t i = 0; i < s->nccl; i++) {
		struct sup_ccl *c = &s->ccl[i];

		if (n >= max) {
			*all = false;
			break;
		}
		w[n].expected =
		    mbox_client_announce(&s->workers[c->chip].mb, c->post.t, &w[n].word);
		w[n].private_word = false;
		n++;
	}
	return n;
}

void sup_ccl_end_all(struct sup *s)
{
	while (s->nccl) {
		struct sup_ccl *c = &s->ccl[s->nccl - 1];

		sup_post_drop(&s->workers[c->chip], &c->post);
		end(s, c, -ESHUTDOWN, s->fwd_msg);
		ccl_remove(s, s->nccl - 1);
	}
}
