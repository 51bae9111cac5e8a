/* client.c - libchipd: the calls of chipd.h over the node region's client mailbox
 * and token rings.
 *
 * A connection is immutable after chipd_connect (the mailbox handle's only mutable
 * field, its claim cursor, is atomic), so any number of threads may call through it.
 * A stream's state is guarded by its own lock. Messages are built in heap memory:
 * a struct proto_msg is about 41 KiB, too much for the stack of an arbitrary caller's
 * thread. */
#include "hello.h"
#include "node.h"
#include "proc.h"
#include "proto.h"
#include "wait.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* While a dead worker's ring waits for the supervisor to end it, poll this often. */
#define ORPHAN_POLL_NS SHM_NS_PER_MS
/* A stream with no producer named yet waits in slices this long, and looks between
 * them whether the supervisor, who would name one, is alive (shm_wait's sleep slice,
 * so a dead supervisor is noticed as soon as a dead producer is). */
#define UNNAMED_SLICE_NS (20 * SHM_NS_PER_MS)

struct chipd_conn {
	struct proto_node node;
	char instance[CHIPD_INSTANCE_MAX];
	/* the handshake's connection (docs/protocol.md §9), open until chipd_close; -1
	 * for a handle of chipd_connect_monitor, which sends no request */
	int fd;
};

struct chipd_stream {
	chipd_conn *conn;
	pthread_mutex_t lock;
	struct ring ring;
	uint64_t id;
	uint32_t gen, chip;
	bool ended;	     /* the terminal record was read */
	uint64_t checked_ns; /* when a short wait last checked who can end the stream */
};

/* A request and its answer. */
struct call {
	struct proto_msg req, ans;
};

__attribute__((format(printf, 4, 5))) static int fail(struct chipd_error *err, int errnum,
						      enum chipd_code code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return errnum;
	memset(err, 0, sizeof(*err));
	err->errnum = errnum;
	err->code = code;
	err->retryable = chipd_code_retryable(code) || errnum == -EAGAIN || errnum == -ECONNRESET;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return errnum;
}

/* A protocol error (the server's envelope, or our own encoder's) as a chipd_error. */
static int from_proto(struct chipd_error *err, int errnum, const struct proto_error *pe)
{
	if (!err)
		return errnum;
	memset(err, 0, sizeof(*err));
	err->errnum = errnum;
	err->code = (enum chipd_code)pe->code;
	err->retryable = pe->retryable;
	err->has_request = pe->request > 0;
	err->request = (uint64_t)(pe->request > 0 ? pe->request : 0);
	err->has_chip = pe->chip >= 0;
	err->chip = (uint32_t)(pe->chip >= 0 ? pe->chip : 0);
	snprintf(err->message, sizeof(err->message), "%s", pe->message);
	return errnum;
}

static uint64_t deadline_ms(uint32_t timeout_ms)
{
	return shm_deadline_in((uint64_t)timeout_ms * SHM_NS_PER_MS);
}

static struct call *call_new(enum proto_op op, struct chipd_error *err)
{
	struct call *k = malloc(sizeof(*k));

	if (!k) {
		fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
		return NULL;
	}
	proto_msg_init(&k->req, op);
	return k;
}

/* A call whose slot moved on to a new generation under it: a restarted supervisor
 * recovered it, or the live one took it back because it no longer serves this
 * connection (it ended: docs/protocol.md §9.3). Both are -ECONNRESET, retryable. */
static int taken_back(const struct mbox *mb, const char *op, struct chipd_error *err)
{
	if (!mbox_server_alive(mb))
		return fail(err, -ECONNRESET, CHIPD_OK, "%s: the supervisor restarted and dropped it",
			    op);
	return fail(err, -ECONNRESET, CHIPD_OK,
		    "%s: the supervisor took the slot back: it no longer serves this connection",
		    op);
}

/* One round trip through a mailbox slot: encode k->req straight into the slot, post,
 * wait until @timeout_ms, decode the answer into k->ans. Every way out after the
 * claim either releases the slot or gives it up (acknowledged reset). Returns 0,
 * -EREMOTEIO for an error envelope, or a local failure; @err says which. */
static int call(chipd_conn *c, struct call *k, uint32_t timeout_ms, struct chipd_error *err)
{
	struct mbox *mb = &c->node.mbox;
	uint64_t deadline = deadline_ms(timeout_ms);
	const char *op = proto_op_name(k->req.op);
	struct proto_error pe;
	struct mbox_ticket t;
	const void *resp;
	uint32_t rlen;
	size_t len;
	int rc;

	/* no handshake, no mailbox: the exchange region comes with the hello answer */
	if (c->fd < 0 || !mb->hdr)
		return fail(err, -ENOTCONN, CHIPD_OK,
			    "%s: this handle only reads counters (chipd_connect_monitor): it has "
			    "no mailbox before a handshake; use chipd_connect to send requests",
			    op);
	rc = mbox_claim(mb, &t);
	if (rc) /* the connection's own mailbox (docs/protocol.md §8.7): its calls alone */
		return fail(err, rc, CHIPD_E_QUEUE_FULL,
			    "%s: all %" PRIu32 " mailbox slots of this connection are busy (the "
			    "per-client bound max-client-slots=%" PRIu32 "): retry once a call "
			    "returns",
			    op, mb->nslots, mb->nslots);
	rc = proto_encode_request(&k->req, mbox_req_buf(mb, t), mbox_req_cap(mb), &len, &pe);
	if (rc)
		rc = from_proto(err, rc, &pe);
	else if ((rc = mbox_post(mb, t, (uint32_t)len)) == -ESTALE)
		/* the claim was taken back before the post: nothing to undo */
		return taken_back(mb, op, err);
	else if (rc)
		fail(err, rc, CHIPD_E_INTERNAL, "%s: the mailbox refused the post (%s)", op,
		     strerror(-rc));
	if (rc)
		goto err_give_up;
	rc = mbox_wait(mb, t, deadline);
	if (rc == -ECONNRESET) /* the slot was taken back: nothing to undo */
		return taken_back(mb, op, err);
	if (rc == -ETIMEDOUT)
		fail(err, rc, CHIPD_E_TIMEOUT, "%s: no answer within %" PRIu32 " ms", op,
		     timeout_ms);
	else if (rc)
		fail(err, rc, CHIPD_OK, "%s: the supervisor died or left (%s)", op, strerror(-rc));
	if (rc)
		goto err_give_up;
	rc = mbox_response(mb, t, &resp, &rlen);
	if (rc == -ESTALE) /* taken back between the wake and the read */
		return taken_back(mb, op, err);
	/* Decoded in place: each pass of the decoder checks every bound itself, so
	 * bytes changing underneath can only make it fail. */
	if (rc)
		fail(err, rc, CHIPD_E_INTERNAL, "%s: the mailbox refused it (%s)", op,
		     strerror(-rc));
	else if (proto_decode_answer(k->req.op, resp, rlen, &k->ans, &pe))
		rc = fail(err, -EPROTO, CHIPD_E_INTERNAL, "%s: malformed answer: %s", op,
			  pe.message);
	else if (!k->ans.ok)
		rc = from_proto(err, -EREMOTEIO, &k->ans.err);
	mbox_release(mb, t);
	return rc;
err_give_up:
	mbox_give_up(mb, t);
	return rc;
}

/* Runs a call whose answer carries nothing the caller needs. */
static int simple_call(chipd_conn *c, struct call *k, uint32_t timeout_ms, struct chipd_error *err)
{
	int rc = call(c, k, timeout_ms, err);

	free(k);
	return rc;
}

/* Resolves @instance into @out (CHIPD_INSTANCE_MAX bytes) and, when @region is not
 * NULL, the node region's name and its owner's uid into @owner ($CHIPD_USER, else
 * ours); -EINVAL with @err saying what is wrong. */
static int resolve(const char *instance, char *out, char *region, uid_t *owner,
		   struct chipd_error *err)
{
	char why[CHIPD_MSG_MAX], name[SHM_NAME_MAX];
	uid_t uid;

	if (proto_node_instance(instance, out, CHIPD_INSTANCE_MAX, why, sizeof(why)) < 0 ||
	    proto_node_owner(&uid, why, sizeof(why)) < 0)
		return fail(err, -EINVAL, CHIPD_OK, "%s", why);
	/* a valid name can still make the region's name too long, with a long uid */
	if (shm_region_name(region ? region : name, SHM_NAME_MAX, (unsigned)uid, out) < 0)
		return fail(err, -EINVAL, CHIPD_OK,
			    "bad instance name \"%s\": too long for uid %u's region name", out,
			    (unsigned)uid);
	if (owner)
		*owner = uid;
	return 0;
}

int chipd_resolve_instance(const char *instance, char *out, struct chipd_error *err)
{
	return resolve(instance, out, NULL, NULL, err);
}

/* Attaches @c to the node region of @instance (resolved into c->instance). */
static int attach(chipd_conn *c, const char *instance, struct chipd_error *err)
{
	char name[SHM_NAME_MAX];
	struct shm_diag diag = {""};
	uid_t owner = (uid_t)-1; /* set by resolve on success */
	int rc;

	rc = resolve(instance, c->instance, name, &owner, err);
	if (rc)
		return rc;
	rc = proto_node_attach_as(&c->node, name, owner, &diag);
	switch (rc) {
	case 0:
		return 0;
	case -ENOENT:
		return fail(err, rc, CHIPD_OK, "no chipd instance \"%s\" (no region %s)",
			    c->instance, name);
	case -EPERM:
	case -EACCES:
		return fail(err, rc, CHIPD_OK, "instance \"%s\": wrong owner or mode: %s",
			    c->instance, diag.msg);
	case -EPROTONOSUPPORT:
		return fail(err, rc, CHIPD_OK, "instance \"%s\": version mismatch: %s",
			    c->instance, diag.msg);
	case -ESTALE:
	case -ESHUTDOWN:
		return fail(err, rc, CHIPD_OK, "instance \"%s\" is not running: %s", c->instance,
			    diag.msg);
	case -EAGAIN:
		return fail(err, rc, CHIPD_OK, "instance \"%s\" is still starting: %s",
			    c->instance, diag.msg);
	default:
		return fail(err, rc, CHIPD_OK, "instance \"%s\": not a valid node region: %s",
			    c->instance, diag.msg);
	}
}

/* The handshake (docs/protocol.md §9): the connection stays open in c->fd. */
static int hello(chipd_conn *c, struct chipd_error *err)
{
	struct proto_hello h;
	char why[CHIPD_MSG_MAX];
	int rc = proto_hello(&c->node, CHIPD_TIMEOUT_MS, &h, why, sizeof(why));

	if (rc == -EREMOTEIO)
		return from_proto(err, rc, &h.err);
	if (rc == -ETIMEDOUT)
		return fail(err, rc, CHIPD_E_TIMEOUT, "instance \"%s\": %s", c->instance, why);
	if (rc)
		return fail(err, rc, CHIPD_OK, "instance \"%s\": handshake: %s", c->instance,
			    why);
	c->fd = h.fd;
	/* the server's liveness from here on: the pid the kernel named, never the
	 * mailbox header's word, which any client can overwrite */
	mbox_client_set_server(&c->node.mbox, h.server_pid);
	return 0;
}

int chipd_connect(const char *instance, chipd_conn **out, struct chipd_error *err)
{
	chipd_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	c->fd = -1;
	rc = attach(c, instance, err);
	if (rc)
		goto err_free;
	rc = hello(c, err);
	if (rc)
		goto err_detach;
	*out = c;
	return 0;
err_detach:
	proto_node_detach(&c->node);
err_free:
	free(c);
	return rc;
}

int chipd_connect_monitor(const char *instance, chipd_conn **out, struct chipd_error *err)
{
	chipd_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	c->fd = -1;
	rc = attach(c, instance, err);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void chipd_close(chipd_conn *c)
{
	if (!c)
		return;
	/* the client region unmapped first: once the supervisor sees the hang-up and
	 * scrubs the region for another client, this process holds no mapping of it */
	proto_node_detach(&c->node);
	if (c->fd >= 0)
		close(c->fd); /* the supervisor reclaims what this process still held */
	free(c);
}

const char *chipd_instance(const chipd_conn *c)
{
	return c->instance;
}

int chipd_ping(chipd_conn *c, uint32_t timeout_ms, uint32_t *pid, struct chipd_error *err)
{
	struct call *k = call_new(PROTO_OP_PING, err);
	int rc;

	if (!k)
		return -ENOMEM;
	rc = call(c, k, timeout_ms, err);
	if (rc == 0 && pid)
		*pid = (uint32_t)k->ans.pid;
	free(k);
	return rc;
}

/* Copies @s into @out (@cap bytes) or fails naming @what. */
static int copy_name(char *out, size_t cap, const char *s, const char *what,
		     struct chipd_error *err)
{
	if (!s || strlen(s) >= cap)
		return fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"%s\": missing or longer than %zu",
			    what, cap - 1);
	strcpy(out, s);
	return 0;
}

static int build_submit(struct proto_msg *m, const struct chipd_request *req,
			struct chipd_error *err)
{
	if (copy_name(m->wl, sizeof(m->wl), req->workload, "wl", err))
		return -EINVAL;
	if (req->nparams > CHIPD_MAX_PARAMS || (req->nparams && !req->params))
		return fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"params\": at most %d",
			    CHIPD_MAX_PARAMS);
	for (uint32_t i = 0; i < req->nparams; i++) {
		if (copy_name(m->params[i].key, CHIPD_KEY_MAX, req->params[i].key, "params", err))
			return -EINVAL;
		m->params[i].value = req->params[i].value;
	}
	m->nparams = req->nparams;
	if (req->id > INT64_MAX)
		return fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"id\": above 2^63-1");
	m->id = (int64_t)req->id;
	m->chip = req->chip < 0 ? -1 : req->chip;
	m->max_tokens = req->max_tokens;
	m->deadline_ms = req->deadline_ms;
	return 0;
}

static int stream_open(chipd_conn *c, const struct proto_msg *ans, chipd_stream **out,
		       struct chipd_error *err)
{
	chipd_stream *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	s->conn = c;
	s->id = (uint64_t)ans->id;
	s->gen = (uint32_t)ans->ring_gen;
	s->chip = (uint32_t)ans->chip;
	rc = proto_node_ring(&c->node, (uint32_t)ans->ring, &s->ring);
	if (rc) {
		fail(err, rc, CHIPD_E_INTERNAL,
		     "request %" PRIu64 ": ring %" PRId64 " unusable (%d)", s->id, ans->ring, rc);
		goto err_free;
	}
	if (atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) != s->gen ||
	    atomic_load_explicit(&s->ring.hdr->request_id, memory_order_relaxed) != s->id) {
		rc = fail(err, -EPROTO, CHIPD_E_INTERNAL,
			  "request %" PRIu64 ": ring %" PRId64 " belongs to another stream", s->id,
			  ans->ring);
		goto err_free;
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
err_free:
	free(s);
	return rc;
}

int chipd_submit(chipd_conn *c, const struct chipd_request *req, uint32_t timeout_ms, uint64_t *id,
		 chipd_stream **stream, struct chipd_error *err)
{
	struct call *k = call_new(PROTO_OP_SUBMIT, err);
	int rc;

	if (!k)
		return -ENOMEM;
	rc = build_submit(&k->req, req, err);
	if (rc == 0)
		rc = call(c, k, timeout_ms, err);
	if (rc == 0)
		rc = stream_open(c, &k->ans, stream, err);
	if (rc == 0)
		*id = (uint64_t)k->ans.id;
	free(k);
	return rc;
}

uint64_t chipd_stream_id(const chipd_stream *s)
{
	return s->id;
}

void chipd_stream_set_spin(chipd_stream *s, uint32_t spin_us)
{
	pthread_mutex_lock(&s->lock);
	ring_set_spin(&s->ring, (uint64_t)spin_us * 1000u);
	pthread_mutex_unlock(&s->lock);
}

/* The record that ended a stream with an error, as the error envelope would say it. */
static int stream_error(chipd_stream *s, uint32_t flags, struct chipd_error *err)
{
	uint32_t code = RING_CODE_OF(flags);

	if (code == CHIPD_OK || code >= CHIPD_NCODES)
		code = CHIPD_E_INTERNAL;
	fail(err, -EREMOTEIO, (enum chipd_code)code, "request %" PRIu64 " on chip %" PRIu32 ": %s",
	     s->id, s->chip, chipd_code_name((enum chipd_code)code));
	if (err) {
		err->has_request = err->has_chip = true;
		err->request = s->id;
		err->chip = s->chip;
	}
	return -EREMOTEIO;
}

static bool supervisor_alive(const chipd_stream *s)
{
	return shm_region_creator_alive(&s->conn->node.region);
}

/* ring_pop, except that while the ring names no producer (protocol.md 5.4: only the
 * supervisor names one) the supervisor's death ends the wait: -EPIPE. */
static int pop_named(chipd_stream *s, struct ring_rec *rec, uint64_t deadline)
{
	for (;;) {
		uint64_t until = deadline, now;
		int rc;

		if (atomic_load_explicit(&s->ring.hdr->producer_pid, memory_order_acquire) == 0) {
			now = shm_now_ns();
			if (now < deadline && deadline - now > UNNAMED_SLICE_NS)
				until = now + UNNAMED_SLICE_NS;
		}
		rc = ring_pop(&s->ring, rec, until);
		if (rc != -ETIMEDOUT || until == deadline)
			return rc;
		if (!supervisor_alive(s))
			return -EPIPE;
	}
}

/* Whether nobody can end @s's stream any more: its producer is unnamed or dead, and
 * the supervisor, who would end or move it, is dead too. */
static bool node_lost(const chipd_stream *s)
{
	const struct ring_hdr *h = s->ring.hdr;
	pid_t pid = (pid_t)atomic_load_explicit(&h->producer_pid, memory_order_acquire);

	if (pid != 0 &&
	    shm_proc_alive(pid, atomic_load_explicit(&h->producer_start, memory_order_relaxed)))
		return false;
	return !supervisor_alive(s);
}

/* The next record. Returns what ring_pop does, except -EPIPE when the supervisor is
 * gone and no live producer is left (nobody will ever end the stream), and
 * -EOWNERDEAD when the producer died and the supervisor has not yet ended or moved
 * the stream at @deadline (it will: the stream goes on). */
static int stream_pop(chipd_stream *s, struct ring_rec *rec, uint64_t deadline)
{
	int rc = pop_named(s, rec, deadline);
	bool orphaned = false;

	/* A wait too short to reach shm_wait's peer check (a poll with timeout 0, as a
	 * reader of many streams makes) still notices a lost node within one slice: it
	 * looks at most once a slice, so polling costs no /proc read per call. */
	if (rc == -ETIMEDOUT) {
		uint64_t now = shm_now_ns();

		if (now - s->checked_ns >= UNNAMED_SLICE_NS) {
			s->checked_ns = now;
			if (node_lost(s))
				return -EPIPE;
		}
	}

	/* The producing worker died: the supervisor takes the ring over and ends the
	 * stream (worker_lost) or moves the request to another chip; wait for what
	 * follows until the deadline — unless the supervisor is gone too, when nobody
	 * ever will. A deadline that passes first ends this wait, not the stream. */
	while (rc == -EOWNERDEAD || (orphaned && rc == -ETIMEDOUT)) {
		struct timespec ts = {0, ORPHAN_POLL_NS};

		orphaned = true;
		if (!supervisor_alive(s))
			return -EPIPE;
		if (shm_now_ns() >= deadline)
			return -EOWNERDEAD;
		nanosleep(&ts, NULL);
		rc = pop_named(s, rec, deadline);
	}
	return rc;
}

int chipd_stream_next(chipd_stream *s, struct chipd_token *tok, uint32_t timeout_ms,
		      struct chipd_error *err)
{
	uint64_t deadline = deadline_ms(timeout_ms);
	struct ring_rec rec;
	int rc;

	pthread_mutex_lock(&s->lock);
	if (atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) != s->gen) {
		rc = fail(err, -ESTALE, CHIPD_E_INTERNAL,
			  "request %" PRIu64 ": its ring was given to another stream", s->id);
		goto out_unlock;
	}
	rc = s->ended ? -ENODATA : stream_pop(s, &rec, deadline);
	if (rc == -ENODATA) {
		s->ended = true;
		fail(err, rc, CHIPD_OK, "request %" PRIu64 ": the stream has ended", s->id);
	} else if (rc == -ETIMEDOUT) {
		fail(err, rc, CHIPD_E_TIMEOUT,
		     "request %" PRIu64 ": no token within %" PRIu32 " ms", s->id, timeout_ms);
	} else if (rc == -EOWNERDEAD) {
		/* Not an end: the supervisor ends the stream or moves the request to
		 * another chip, whose tokens then follow on this same stream. */
		rc = fail(err, -ETIMEDOUT, CHIPD_E_TIMEOUT,
			  "request %" PRIu64 ": its worker died; nothing came within %" PRIu32
			  " ms while the supervisor ends the stream or moves the request",
			  s->id, timeout_ms);
	} else if (rc == -EPIPE) {
		fail(err, rc, CHIPD_E_NODE_LOST,
		     "request %" PRIu64 ": the supervisor is gone (pid %" PRIu32
		     ") and no live worker produces the stream: nobody will end it",
		     s->id, s->conn->node.region.hdr->creator_pid);
	} else if (rc) {
		fail(err, rc, CHIPD_E_INTERNAL, "request %" PRIu64 ": ring error (%d)", s->id, rc);
	} else if (rec.flags & RING_F_ERROR) {
		s->ended = true;
		rc = stream_error(s, rec.flags, err);
	} else {
		tok->request = rec.request_id;
		tok->seq = rec.seq;
		tok->final = rec.flags & RING_F_FINAL;
		tok->value = rec.value;
		tok->ts_ns = rec.ts_ns;
		s->ended = tok->final;
	}
	if (rc == -EPIPE && err) { /* the request is lost: say which */
		err->has_request = err->has_chip = true;
		err->request = s->id;
		err->chip = s->chip;
	}
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Whether @s's stream has ended or its ring went to another stream (which it does
 * only after the end): read-only, for a reader that closed the ring. */
static bool stream_over(const chipd_stream *s)
{
	return atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) != s->gen ||
	       ring_finished(&s->ring);
}

void chipd_stream_close(chipd_stream *s, uint32_t timeout_ms)
{
	uint64_t deadline = deadline_ms(timeout_ms);

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	/* The ring's closed word first: it reaches the worker whatever the cancel call
	 * below makes of @timeout_ms (0 included, or a mailbox with no free slot), and
	 * the worker ends the stream at its next round. Only while the ring is still
	 * this stream's: the generation check keeps a close off a ring that was given
	 * to another stream (ring_close_reader itself ignores a reset that races it).
	 * From here on nothing reads the ring: the supervisor gives a closed ring to
	 * another stream as soon as the stream ended, read or not. */
	if (!s->ended &&
	    atomic_load_explicit(&s->ring.hdr->generation, memory_order_acquire) == s->gen) {
		ring_close_reader(&s->ring);
		/* best effort, sooner than the worker's own look when it gets through */
		chipd_cancel(s->conn, s->id, timeout_ms, NULL);
		/* what is left of @timeout_ms waits for the end, so a caller that gave
		 * time may resubmit the id once this returns */
		while (!stream_over(s) && shm_now_ns() < deadline) {
			struct timespec ts = {0, ORPHAN_POLL_NS};

			nanosleep(&ts, NULL);
		}
	}
	pthread_mutex_unlock(&s->lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

int chipd_cancel(chipd_conn *c, uint64_t id, uint32_t timeout_ms, struct chipd_error *err)
{
	struct call *k = call_new(PROTO_OP_CANCEL, err);

	if (!k)
		return -ENOMEM;
	k->req.id = id > INT64_MAX ? -1 : (int64_t)id;
	return simple_call(c, k, timeout_ms, err);
}

int chipd_status(chipd_conn *c, uint32_t timeout_ms, struct chipd_status *out,
		 struct chipd_error *err)
{
	struct call *k = call_new(PROTO_OP_STATUS, err);
	int rc;

	if (!k)
		return -ENOMEM;
	rc = call(c, k, timeout_ms, err);
	if (rc == 0) {
		memset(out, 0, sizeof(*out));
		out->state = (enum chipd_sup_state)k->ans.state;
		out->pid = (uint32_t)k->ans.pid;
		out->uptime_ms = (uint64_t)k->ans.uptime_ms;
		out->nchips = k->ans.nchips;
		for (uint32_t i = 0; i < k->ans.nchips; i++) {
			const struct proto_chip *p = &k->ans.chips[i];

			out->chips[i] = (struct chipd_chip_status){
			    .chip = (uint32_t)p->chip,
			    .state = (enum chipd_chip_state)p->state,
			    .pid = (uint32_t)p->pid,
			    .gpu = (int32_t)p->gpu,
			    .restarts = (uint32_t)p->restarts,
			    .queued = (uint32_t)p->queued,
			    .active = (uint32_t)p->active,
			};
		}
	}
	free(k);
	return rc;
}

/* Groups the answer's flat parameter list under its workloads. */
static int workloads_fill(const struct proto_msg *a, struct chipd_workload *out, uint32_t cap,
			  uint32_t *n, struct chipd_error *err)
{
	*n = a->nwls;
	for (uint32_t w = 0; w < a->nwls && w < cap; w++) {
		struct chipd_workload *o = &out[w];

		memset(o, 0, sizeof(*o));
		snprintf(o->name, sizeof(o->name), "%s", a->wls[w].wl);
		snprintf(o->doc, sizeof(o->doc), "%s", a->wls[w].doc);
		o->version = (uint32_t)a->wls[w].version;
		for (uint32_t i = 0; i < a->nwl_params; i++) {
			const struct proto_wl_param *p = &a->wl_params[i];
			struct chipd_wl_param *q = &o->params[o->nparams];

			if (strcmp(p->wl, o->name) != 0)
				continue;
			if (o->nparams == CHIPD_MAX_PARAMS) /* the decoder refuses it; be sure */
				return fail(err, -EPROTO, CHIPD_E_INTERNAL,
					    "workloads: %s has more than %d parameters", o->name,
					    CHIPD_MAX_PARAMS);
			snprintf(q->key, sizeof(q->key), "%s", p->key);
			snprintf(q->doc, sizeof(q->doc), "%s", p->doc);
			q->def = p->def;
			q->min = p->min;
			q->max = p->max;
			o->nparams++;
		}
	}
	if (*n > cap)
		return fail(err, -ENOBUFS, CHIPD_OK, "%" PRIu32 " workloads, room for %" PRIu32, *n,
			    cap);
	return 0;
}

int chipd_workloads(chipd_conn *c, uint32_t timeout_ms, struct chipd_workload *out, uint32_t cap,
		    uint32_t *n, struct chipd_error *err)
{
	struct call *k = call_new(PROTO_OP_WORKLOADS, err);
	int rc;

	*n = 0;
	if (!k)
		return -ENOMEM;
	rc = call(c, k, timeout_ms, err);
	if (rc == 0)
		rc = workloads_fill(&k->ans, out, cap, n, err);
	free(k);
	return rc;
}

/* Appends the counters of block @b named @block to @out; counts past @cap too. */
static void stats_block(const struct ctr_block *b, const char *block, struct chipd_stat *out,
			uint32_t cap, uint32_t *n)
{
	for (uint32_t i = 0; i < b->count; i++, (*n)++) {
		if (*n >= cap)
			continue;
		char name[CTR_NAME_MAX];

		snprintf(out[*n].block, sizeof(out[*n].block), "%s", block);
		snprintf(out[*n].name, sizeof(out[*n].name), "%s", ctr_name(b, i, name));
		out[*n].gauge = ctr_kind_of(b, i) == CTR_GAUGE;
		out[*n].value = ctr_get(b, i);
	}
}

int chipd_stats(chipd_conn *c, struct chipd_stat *out, uint32_t cap, uint32_t *n,
		struct chipd_error *err)
{
	char block[16];

	*n = 0;
	stats_block(&c->node.sup_ctr, "supervisor", out, cap, n);
	for (uint32_t w = 0; w < c->node.geom.nworkers; w++) {
		snprintf(block, sizeof(block), "chip%" PRIu32, w);
		stats_block(&c->node.wrk_ctr[w], block, out, cap, n);
	}
	if (*n > cap)
		return fail(err, -ENOBUFS, CHIPD_OK, "%" PRIu32 " counters, room for %" PRIu32, *n,
			    cap);
	return 0;
}

static int grace_call(chipd_conn *c, enum proto_op op, uint32_t grace_ms, uint32_t timeout_ms,
		      struct chipd_error *err)
{
	struct call *k = call_new(op, err);

	if (!k)
		return -ENOMEM;
	k->req.grace_ms = grace_ms;
	return simple_call(c, k, timeout_ms, err);
}

int chipd_drain(chipd_conn *c, uint32_t grace_ms, uint32_t timeout_ms, struct chipd_error *err)
{
	return grace_call(c, PROTO_OP_DRAIN, grace_ms, timeout_ms, err);
}

int chipd_stop(chipd_conn *c, uint32_t grace_ms, uint32_t timeout_ms, struct chipd_error *err)
{
	return grace_call(c, PROTO_OP_STOP, grace_ms, timeout_ms, err);
}

_Static_assert((int)CHIPD_TRACE_START == (int)PROTO_TRACE_START &&
		   (int)CHIPD_TRACE_STOP == (int)PROTO_TRACE_STOP &&
		   (int)CHIPD_TRACE_COLLECT == (int)PROTO_TRACE_COLLECT,
	       "chipd_trace_act is proto_trace_act");

int chipd_trace(chipd_conn *c, int act, const char *path, uint32_t timeout_ms, uint64_t *events,
		uint64_t *dropped, struct chipd_error *err)
{
	struct call *k;
	int rc;

	if (act < CHIPD_TRACE_START || act > CHIPD_TRACE_COLLECT)
		return fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"act\": %d is not a trace action",
			    act);
	if ((act == CHIPD_TRACE_COLLECT) != (path != NULL))
		return fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
			    "\"path\": required with collect, refused otherwise");
	k = call_new(PROTO_OP_TRACE, err);
	if (!k)
		return -ENOMEM;
	k->req.act = act;
	rc = path ? copy_name(k->req.path, sizeof(k->req.path), path, "path", err) : 0;
	if (rc == 0)
		rc = call(c, k, timeout_ms, err);
	if (rc == 0 && events)
		*events = (uint64_t)k->ans.events;
	if (rc == 0 && dropped)
		*dropped = (uint64_t)k->ans.dropped;
	free(k);
	return rc;
}
