/* sup_post.c - calls to a worker that the event loop posts on one tick and completes
 * on a later one (contract in sup.h): the loop never waits for a worker, so a stuck
 * one delays nothing else (deaths, signals, heartbeats of the other chips). */
#include "sup.h"

#include "proto.h"
#include "wait.h"

#include <errno.h>

int sup_post_send(struct sup_worker *w, struct sup_post *p, const struct proto_msg *m)
{
	struct proto_error err;
	size_t len;
	int rc;

	if (p->pending)
		return -EBUSY;
	rc = mbox_claim(&w->mb, &p->t);
	if (rc)
		return rc; /* every slot busy: the caller tries again on a later tick */
	rc = proto_encode_request(m, mbox_req_buf(&w->mb, p->t), mbox_req_cap(&w->mb), &len, &err);
	if (rc == 0)
		rc = mbox_post(&w->mb, p->t, (uint32_t)len);
	if (rc) {
		mbox_give_up(&w->mb, p->t);
		return rc;
	}
	p->op = m->op;
	p->posted_ns = shm_now_ns();
	p->pending = true;
	return 0;
}

int sup_post_poll(struct sup_worker *w, struct sup_post *p, struct proto_msg *ans)
{
	struct proto_error err;
	const void *buf;
	uint32_t len;
	int rc;

	if (!p->pending)
		return -ENOENT;
	/* a deadline already passed: look, never wait */
	rc = mbox_wait(&w->mb, p->t, shm_now_ns());
	if (rc == -ETIMEDOUT)
		return -EINPROGRESS;
	if (rc) {
		/* -EPIPE: the worker died or left; -ECONNRESET / -ESTALE: a restarted
		 * worker took the slot back (nothing to give up then) */
		if (rc == -EPIPE)
			mbox_give_up(&w->mb, p->t);
		p->pending = false;
		return rc;
	}
	rc = mbox_response(&w->mb, p->t, &buf, &len);
	if (rc == 0 && ans && proto_decode_answer(p->op, buf, len, ans, &err) != 0)
		rc = -EPROTO;
	mbox_release(&w->mb, p->t);
	p->pending = false;
	return rc;
}

void sup_post_drop(struct sup_worker *w, struct sup_post *p)
{
	if (p->pending)
		mbox_give_up(&w->mb, p->t);
	p->pending = false;
}
