/* dispatch.c - one request through a server's handler table: decode, find the
 * handler, validate, run, answer. Every server answers through here, so no op can
 * answer in a private format and every failure becomes the one error envelope. */
#include "proto.h"

#include <errno.h>
#include <string.h>

static const struct proto_handler *find(const struct proto_server *srv, enum proto_op op)
{
	for (size_t i = 0; i < srv->nhandlers; i++)
		if (srv->handlers[i].op == op)
			return &srv->handlers[i];
	return NULL;
}

int proto_dispatch(const struct proto_server *srv, void *ctx, const void *req, size_t len,
		   void *out, size_t cap, size_t *out_len)
{
	/* The request is copied out of the slot first: the client can still write its
	 * buffer, and the decoder reads the message twice. */
	unsigned char copy[PROTO_REQ_MAX];
	const struct proto_handler *h;
	struct proto_msg rq, ans;
	struct proto_error err;
	int code, rc;

	proto_msg_init(&rq, PROTO_OP_NONE);
	if (!req) { /* longer than the slot: the bytes are not there to read */
		proto_fail(&err, CHIPD_E_TOO_LARGE, "\"message\": %zu bytes, more than the slot holds",
			   len);
		goto envelope;
	}
	if (len > sizeof(copy)) {
		proto_fail(&err, CHIPD_E_TOO_LARGE, "message: %zu bytes, the limit is %u", len,
			   PROTO_REQ_MAX);
		goto envelope;
	}
	memcpy(copy, req, len);
	if (proto_decode_request(copy, len, &rq, &err))
		goto envelope;
	h = find(srv, rq.op);
	if (!h) {
		proto_fail(&err, CHIPD_E_BAD_REQUEST, "\"op\": \"%s\" is not served by the %s",
			   proto_op_name(rq.op), srv->role);
		goto envelope;
	}
	if (h->validate) {
		code = h->validate(ctx, &rq, &err);
		if (code != CHIPD_OK)
			goto failed;
	}
	proto_msg_init(&ans, rq.op);
	code = h->run(ctx, &rq, &ans, &err);
	if (code == PROTO_DEFERRED)
		return PROTO_DEFERRED;
	if (code != CHIPD_OK)
		goto failed;
	rc = proto_encode_answer(&ans, out, cap, out_len, &err);
	if (rc == 0)
		return 0;
	if (rc == -EINVAL) { /* a handler bug, not the client's */
		/* formatted from a copy: proto_fail writes err.message */
		char why[sizeof(err.message)];

		memcpy(why, err.message, sizeof(why));
		why[sizeof(why) - 1] = '\0';
		proto_fail(&err, CHIPD_E_INTERNAL, "invalid %s answer: %s", proto_op_name(rq.op),
			   why);
	}
	goto envelope;
failed:
	if (err.code != code)
		proto_fail(&err, (enum chipd_code)code, "%s failed", proto_op_name(rq.op));
envelope:
	if (err.request == 0 && rq.id > 0)
		err.request = rq.id;
	if (srv->refused)
		srv->refused(ctx, (enum chipd_code)err.code);
	return proto_encode_error(&err, out, cap, out_len);
}
