/* client.c - libchipd: the calls of chipd.h over the client mailbox (the token
 * streams are client_stream.c's).
 *
 * A connection is immutable after chipd_connect (the mailbox handle's only mutable
 * field, its claim cursor, is atomic), so any number of threads may call through it.
 * A stream's state is guarded by its own lock. Messages are built in heap memory:
 * a struct proto_msg is about 42 KiB, too much for the stack of an arbitrary caller's
 * thread. */
#include "client_internal.h"
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

/* A request and its answer. */
struct call {
	struct proto_msg req, ans;
};

int client_fail(struct chipd_error *err, int errnum, enum chipd_code code, const char *fmt, ...)
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

uint64_t client_deadline_ms(uint32_t timeout_ms)
{
	return shm_deadline_in((uint64_t)timeout_ms * SHM_NS_PER_MS);
}

uint32_t client_ms_left(uint64_t deadline)
{
	uint64_t now = shm_now_ns(), ms;

	if (now >= deadline)
		return 0;
	ms = (deadline - now + SHM_NS_PER_MS - 1) / SHM_NS_PER_MS;
	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
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

static struct call *call_new(enum proto_op op, struct chipd_error *err)
{
	struct call *k = malloc(sizeof(*k));

	if (!k) {
		client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
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
		return client_fail(err, -ECONNRESET, CHIPD_OK,
				   "%s: the supervisor restarted and dropped it", op);
	return client_fail(
	    err, -ECONNRESET, CHIPD_OK,
	    "%s: the supervisor took the slot back: it no longer serves this connection", op);
}

/* One round trip through a mailbox slot: encode k->req straight into the slot, post,
 * wait until @timeout_ms, decode the answer into k->ans. Every way out after the
 * claim either releases the slot or gives it up (acknowledged reset). Returns 0,
 * -EREMOTEIO for an error envelope, or a local failure; @err says which. */
static int call(chipd_conn *c, struct call *k, uint32_t timeout_ms, struct chipd_error *err)
{
	struct mbox *mb = &c->node.mbox;
	uint64_t deadline = client_deadline_ms(timeout_ms);
	const char *op = proto_op_name(k->req.op);
	struct proto_error pe;
	struct mbox_ticket t;
	const void *resp;
	uint32_t rlen;
	size_t len;
	int rc;

	/* no handshake, no mailbox: the exchange region comes with the hello answer */
	if (c->fd < 0 || !mb->hdr)
		return client_fail(
		    err, -ENOTCONN, CHIPD_OK,
		    "%s: this handle only reads counters (chipd_connect_monitor): it has "
		    "no mailbox before a handshake; use chipd_connect to send requests",
		    op);
	rc = mbox_claim(mb, &t);
	if (rc) /* the connection's own mailbox (docs/protocol.md §8.7): its calls alone */
		return client_fail(
		    err, rc, CHIPD_E_QUEUE_FULL,
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
		client_fail(err, rc, CHIPD_E_INTERNAL, "%s: the mailbox refused the post (%s)", op,
			    strerror(-rc));
	if (rc)
		goto err_give_up;
	rc = mbox_wait(mb, t, deadline);
	if (rc == -ECONNRESET) /* the slot was taken back: nothing to undo */
		return taken_back(mb, op, err);
	/* a wait too short to reach its peer check (timeout 0, a few ms) still says the
	 * supervisor is gone when it is: one liveness look, on the timeout only, so that a
	 * caller that polls learns it as one that waits does (-EPIPE, not a timeout it
	 * would retry for good) */
	if (rc == -ETIMEDOUT && !mbox_server_alive(mb))
		rc = -EPIPE;
	if (rc == -ETIMEDOUT)
		client_fail(err, rc, CHIPD_E_TIMEOUT, "%s: no answer within %" PRIu32 " ms", op,
			    timeout_ms);
	else if (rc)
		client_fail(err, rc, CHIPD_OK, "%s: the supervisor died or left (%s)", op,
			    strerror(-rc));
	if (rc)
		goto err_give_up;
	rc = mbox_response(mb, t, &resp, &rlen);
	if (rc == -ESTALE) /* taken back between the wake and the read */
		return taken_back(mb, op, err);
	/* Decoded in place: each pass of the decoder checks every bound itself, so
	 * bytes changing underneath can only make it fail. */
	if (rc)
		client_fail(err, rc, CHIPD_E_INTERNAL, "%s: the mailbox refused it (%s)", op,
			    strerror(-rc));
	else if (proto_decode_answer(k->req.op, resp, rlen, &k->ans, &pe))
		rc = client_fail(err, -EPROTO, CHIPD_E_INTERNAL, "%s: malformed answer: %s", op,
				 pe.message);
	else if (!k->ans.ok)
		rc = from_proto(err, -EREMOTEIO, &k->ans.err);
	mbox_release(mb, t);
	return rc;
err_give_up:
	mbox_give_up(mb, t);
	return rc;
}

int client_call_msg(chipd_conn *c, const struct proto_msg *req, struct proto_msg *ans,
		    uint32_t timeout_ms, struct chipd_error *err)
{
	struct call *k = call_new(req->op, err);
	int rc;

	if (!k)
		return -ENOMEM;
	k->req = *req;
	rc = call(c, k, timeout_ms, err);
	if (rc == 0)
		*ans = k->ans;
	free(k);
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
		return client_fail(err, -EINVAL, CHIPD_OK, "%s", why);
	/* a valid name can still make the region's name too long, with a long uid */
	if (shm_region_name(region ? region : name, SHM_NAME_MAX, (unsigned)uid, out) < 0)
		return client_fail(err, -EINVAL, CHIPD_OK,
				   "bad instance name \"%s\": too long for uid %u's region name",
				   out, (unsigned)uid);
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
		return client_fail(err, rc, CHIPD_OK, "no chipd instance \"%s\" (no region %s)",
				   c->instance, name);
	case -EPERM:
	case -EACCES:
		/* diag names the region, and the instance with it: the message must leave
		 * room for the explanation's last words within CHIPD_MSG_MAX */
		return client_fail(err, rc, CHIPD_OK, "wrong owner or mode: %s", diag.msg);
	case -EPROTONOSUPPORT:
		return client_fail(err, rc, CHIPD_OK, "instance \"%s\": version mismatch: %s",
				   c->instance, diag.msg);
	case -ESTALE:
	case -ESHUTDOWN:
		return client_fail(err, rc, CHIPD_OK, "instance \"%s\" is not running: %s",
				   c->instance, diag.msg);
	case -EAGAIN:
		return client_fail(err, rc, CHIPD_OK, "instance \"%s\" is still starting: %s",
				   c->instance, diag.msg);
	default:
		return client_fail(err, rc, CHIPD_OK,
				   "instance \"%s\": not a valid node region: %s", c->instance,
				   diag.msg);
	}
}

/* The handshake (docs/protocol.md §9), waiting up to @timeout_ms for the answer: the
 * connection stays open in c->fd. */
static int hello(chipd_conn *c, uint32_t timeout_ms, struct chipd_error *err)
{
	struct proto_hello h;
	char why[CHIPD_MSG_MAX];
	int rc = proto_hello(&c->node, timeout_ms, &h, why, sizeof(why));

	if (rc == -EREMOTEIO)
		return from_proto(err, rc, &h.err);
	if (rc == -ETIMEDOUT)
		return client_fail(err, rc, CHIPD_E_TIMEOUT, "instance \"%s\": %s", c->instance,
				   why);
	if (rc)
		return client_fail(err, rc, CHIPD_OK, "instance \"%s\": handshake: %s", c->instance,
				   why);
	c->fd = h.fd;
	/* the server's liveness from here on: the pid the kernel named, never the
	 * mailbox header's word, which any client can overwrite */
	mbox_client_set_server(&c->node.mbox, h.server_pid);
	return 0;
}

int chipd_connect_timeout(const char *instance, uint32_t timeout_ms, chipd_conn **out,
			  struct chipd_error *err)
{
	chipd_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	c->fd = -1;
	rc = attach(c, instance, err);
	if (rc)
		goto err_free;
	rc = hello(c, timeout_ms, err);
	if (rc)
		goto err_detach;
	if (client_data_init(c)) {
		client_data_fini(c);
		close(c->fd);
		rc = client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
		goto err_detach;
	}
	*out = c;
	return 0;
err_detach:
	proto_node_detach(&c->node);
err_free:
	free(c);
	return rc;
}

int chipd_connect(const char *instance, chipd_conn **out, struct chipd_error *err)
{
	return chipd_connect_timeout(instance, CHIPD_TIMEOUT_MS, out, err);
}

int chipd_connect_monitor(const char *instance, chipd_conn **out, struct chipd_error *err)
{
	chipd_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return client_fail(err, -ENOMEM, CHIPD_E_INTERNAL, "out of memory");
	c->fd = -1;
	rc = attach(c, instance, err);
	if (rc) {
		free(c);
		return rc;
	}
	(void)client_data_init(c); /* no client region: an empty allocator, nothing to fail */
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
	client_data_fini(c);
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

/* Copies @s into @out (@cap bytes) or fails naming @what, in the words of the node's
 * own range check (protocol.md 8.2: '"wl": length 32 out of range 1..31'). */
static int copy_name(char *out, size_t cap, const char *s, const char *what,
		     struct chipd_error *err)
{
	if (!s)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"%s\": missing", what);
	if (strlen(s) >= cap)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"%s\": length %zu out of range 1..%zu", what, strlen(s),
				   cap - 1);
	strcpy(out, s);
	return 0;
}

_Static_assert(CHIPD_INPUT_INLINE_MAX == PROTO_INPUT_INLINE_MAX, "inline input, both sides");

static int build_submit(struct proto_msg *m, const struct chipd_request *req,
			struct chipd_error *err)
{
	if (copy_name(m->wl, sizeof(m->wl), req->workload, "wl", err))
		return -EINVAL;
	if (req->nparams > CHIPD_MAX_PARAMS || (req->nparams && !req->params))
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"params\": at most %d",
				   CHIPD_MAX_PARAMS);
	for (uint32_t i = 0; i < req->nparams; i++) {
		const char *key = req->params[i].key;

		if (!key)
			return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
					   "\"params\": parameter %" PRIu32 " has no key", i);
		if (strlen(key) >= CHIPD_KEY_MAX)
			return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
					   "\"params\": key '%.40s%s' longer than %d bytes", key,
					   strlen(key) > 40 ? "..." : "", CHIPD_KEY_MAX - 1);
		strcpy(m->params[i].key, key);
		m->params[i].value = req->params[i].value;
	}
	m->nparams = req->nparams;
	if (req->id > INT64_MAX)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST, "\"id\": above 2^63-1");
	m->id = (int64_t)req->id;
	m->chip = req->chip < 0 ? -1 : req->chip;
	m->max_tokens = req->max_tokens;
	m->deadline_ms = req->deadline_ms;
	if (req->input_len && !req->input)
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"input\": %" PRIu32 " bytes at NULL", req->input_len);
	return 0;
}

/* Whether a submit that failed with @rc (and @err) left no worker that may still read
 * its input or write its output: nothing was sent, or the refusal came before any
 * worker admitted it. A forward that timed out or a lost worker may not. */
static bool nobody_holds(int rc, const struct chipd_error *err)
{
	if (rc == -EINVAL || rc == -EAGAIN || rc == -ENOMEM || rc == -ENOSPC)
		return true;
	return rc == -EREMOTEIO && err &&
	       (err->code == CHIPD_E_BAD_REQUEST || err->code == CHIPD_E_QUEUE_FULL ||
		err->code == CHIPD_E_NO_CAPACITY || err->code == CHIPD_E_DUPLICATE_ID ||
		err->code == CHIPD_E_DRAINING || err->code == CHIPD_E_TOO_LARGE ||
		err->code == CHIPD_E_UNSUPPORTED_VERSION);
}

int chipd_submit(chipd_conn *c, const struct chipd_request *req, uint32_t timeout_ms, uint64_t *id,
		 chipd_stream **stream, struct chipd_error *err)
{
	uint64_t deadline = client_deadline_ms(timeout_ms);
	struct call *k = call_new(PROTO_OP_SUBMIT, err);
	struct client_range in = {0, 0}, out = {0, 0};
	struct chipd_error local;
	chipd_stream *s = NULL;
	bool admitted = false;
	int rc;

	if (!k)
		return -ENOMEM;
	if (!err)
		err = &local; /* nobody_holds reads the code */
	rc = build_submit(&k->req, req, err);
	if (rc == 0)
		rc = client_data_stage(c, req, &k->req, &in, &out, err);
	/* before the send: once a worker may have admitted it, nothing can fail for
	 * want of memory */
	if (rc == 0 && !(s = client_stream_new(err)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = call(c, k, timeout_ms, err);
	/* the input's range once the worker copied it (it answered) or never will */
	if (rc == 0 || nobody_holds(rc, err))
		client_data_free(c, &in);
	if (rc == 0) {
		admitted = true;
		rc = client_stream_open(c, &k->ans, s, err);
		/* admitted, but the ring named is unusable or not this stream's: nobody
		 * here reads it, so it is cancelled rather than left to run, within what
		 * is left of the call's timeout; its output range stays held (a worker may
		 * write it) until chipd_close */
		if (rc)
			(void)chipd_cancel(c, (uint64_t)k->ans.id, client_ms_left(deadline),
					   NULL);
	}
	if (rc == 0) {
		*id = (uint64_t)k->ans.id;
		s->out = out; /* held until the stream ended */
		*stream = s;
	} else {
		free(s);
		if (!admitted && nobody_holds(rc, err))
			client_data_free(c, &out);
	}
	free(k);
	return rc;
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
			  uint32_t first, struct chipd_error *err)
{
	for (uint32_t w = 0; w < a->nwls && first + w < cap; w++) {
		struct chipd_workload *o = &out[first + w];

		memset(o, 0, sizeof(*o));
		snprintf(o->name, sizeof(o->name), "%s", a->wls[w].wl);
		snprintf(o->doc, sizeof(o->doc), "%s", a->wls[w].doc);
		o->version = (uint32_t)a->wls[w].version;
		o->chips = (uint64_t)a->wls[w].chips;
		o->active = (uint32_t)a->wls[w].active;
		o->requests = (uint64_t)a->wls[w].requests;
		o->completed = (uint64_t)a->wls[w].completed;
		o->failed = (uint64_t)a->wls[w].failed;
		o->cancelled = (uint64_t)a->wls[w].cancelled;
		o->tokens = (uint64_t)a->wls[w].tokens;
		for (uint32_t i = 0; i < a->nwl_params; i++) {
			const struct proto_wl_param *p = &a->wl_params[i];
			struct chipd_wl_param *q = &o->params[o->nparams];

			if (strcmp(p->wl, o->name) != 0)
				continue;
			if (o->nparams == CHIPD_MAX_PARAMS) /* the decoder refuses it; be sure */
				return client_fail(err, -EPROTO, CHIPD_E_INTERNAL,
						   "workloads: %s has more than %d parameters",
						   o->name, CHIPD_MAX_PARAMS);
			snprintf(q->key, sizeof(q->key), "%s", p->key);
			snprintf(q->doc, sizeof(q->doc), "%s", p->doc);
			q->def = p->def;
			q->min = p->min;
			q->max = p->max;
			o->nparams++;
		}
	}
	return 0;
}

/* The list comes in pages (CHIPD_MAX_WORKLOADS each): "from" asks for the next one,
 * "more" says how many follow. A list that changes between two pages may repeat or
 * skip one; a bound on the pages keeps a list that keeps growing from looping, and
 * the call's one deadline bounds them all: each page gets what is left of it. */
int chipd_workloads(chipd_conn *c, uint32_t timeout_ms, struct chipd_workload *out, uint32_t cap,
		    uint32_t *n, struct chipd_error *err)
{
	struct call *k = call_new(PROTO_OP_WORKLOADS, err);
	uint64_t deadline = client_deadline_ms(timeout_ms);
	int rc = 0;

	*n = 0;
	if (!k)
		return -ENOMEM;
	for (uint32_t page = 0; rc == 0 && page < 4096; page++) {
		uint32_t left = page ? client_ms_left(deadline) : timeout_ms;

		if (page && left == 0) {
			rc = client_fail(err, -ETIMEDOUT, CHIPD_E_TIMEOUT,
					 "workloads: %" PRIu32 " listed in %" PRIu32
					 " pages, and the list did not end within %" PRIu32 " ms",
					 *n, page, timeout_ms);
			break;
		}
		proto_msg_init(&k->req, PROTO_OP_WORKLOADS);
		k->req.from = *n;
		rc = call(c, k, left, err);
		if (rc == 0)
			rc = workloads_fill(&k->ans, out, cap, *n, err);
		if (rc)
			break;
		*n += k->ans.nwls;
		if (k->ans.more == 0 || k->ans.nwls == 0)
			break;
	}
	free(k);
	if (rc == 0 && *n > cap)
		return client_fail(err, -ENOBUFS, CHIPD_OK,
				   "%" PRIu32 " workloads, room for %" PRIu32, *n, cap);
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
		return client_fail(err, -ENOBUFS, CHIPD_OK,
				   "%" PRIu32 " counters, room for %" PRIu32, *n, cap);
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
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
				   "\"act\": %d is not a trace action", act);
	if ((act == CHIPD_TRACE_COLLECT) != (path != NULL))
		return client_fail(err, -EINVAL, CHIPD_E_BAD_REQUEST,
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
