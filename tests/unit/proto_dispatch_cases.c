/* proto_dispatch_cases.c - the handler table (proto_dispatch): one shape of answer for
 * every request, each refusal reported once through the server's hook, and an invalid
 * answer formatted from a copy of its message (check_proto). */
#include "proto.h"
#include "proto_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct srv_ctx {
	int runs;
	unsigned refused[CHIPD_NCODES]; /* the server's refused hook, by code */
};

static void count_refused(void *ctx, enum chipd_code code)
{
	struct srv_ctx *c = ctx;

	ck_assert(code > CHIPD_OK && code < CHIPD_NCODES);
	c->refused[code]++;
}

static enum chipd_code cancel_validate(void *ctx, const struct proto_msg *req,
				       struct proto_error *err)
{
	(void)ctx;
	if (req->id == 5)
		return proto_fail(err, CHIPD_E_NOT_FOUND, "no request 5");
	return CHIPD_OK;
}

static int cancel_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct srv_ctx *c = ctx;

	(void)err;
	c->runs++;
	if (req->id == 6)
		return PROTO_DEFERRED;
	if (req->id == 7)
		return CHIPD_E_DRAINING;      /* without setting @err */
	ans->id = req->id == 8 ? 0 : req->id; /* 8: an invalid answer */
	return CHIPD_OK;
}

static int ping_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		    struct proto_error *err)
{
	(void)ctx, (void)req, (void)err;
	ans->pid = 1;
	ans->state = CHIPD_SUP_READY;
	return CHIPD_OK;
}

/* An answer of PROTO_MAX_STATS counters: tens of KiB, for a cap it cannot fit. */
static int stats_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	(void)ctx, (void)req, (void)err;
	for (ans->nstats = 0; ans->nstats < PROTO_MAX_STATS; ans->nstats++) {
		snprintf(ans->stats[ans->nstats].key, PROTO_STAT_KEY, "chip0.counter_%u",
			 ans->nstats);
		ans->stats[ans->nstats].value = UINT64_MAX;
	}
	return CHIPD_OK;
}

static const struct proto_handler handlers[] = {
    {PROTO_OP_PING, NULL, ping_run},
    {PROTO_OP_CANCEL, cancel_validate, cancel_run},
    {PROTO_OP_STATS, NULL, stats_run},
};
static const struct proto_server server = {"supervisor", handlers, 3, count_refused};

/* Dispatches a cancel of @id (0: a ping; -1: an assign) and decodes the answer. */
static int dispatch(struct srv_ctx *ctx, int64_t id, struct proto_msg *ans)
{
	unsigned char req[PROTO_REQ_MAX], out[PROTO_RESP_MAX];
	struct proto_msg *m = new_msg(id == 0 ? PROTO_OP_PING : PROTO_OP_CANCEL);
	struct proto_error err;
	size_t len, olen;
	int rc;

	if (id == -1) {
		m->op = PROTO_OP_ASSIGN;
		fill_request(m);
	}
	m->id = id > 0 ? id : m->id;
	ck_assert_int_eq(proto_encode_request(m, req, sizeof(req), &len, &err), 0);
	rc = proto_dispatch(&server, ctx, req, len, out, sizeof(out), &olen);
	if (rc == 0)
		ck_assert_int_eq(proto_decode_answer(m->op, out, olen, ans, &err), 0);
	free(m);
	return rc;
}

START_TEST(dispatch_answers_through_one_shape)
{
	struct srv_ctx ctx = {0};
	struct proto_msg *ans = new_msg(PROTO_OP_NONE);
	unsigned char out[PROTO_RESP_MAX];
	struct proto_error err;
	size_t olen;

	ck_assert_int_eq(dispatch(&ctx, 0, ans), 0);
	ck_assert(ans->ok);
	ck_assert_int_eq(ans->pid, 1);
	ck_assert_int_eq(dispatch(&ctx, 9, ans), 0);
	ck_assert(ans->ok);
	ck_assert_int_eq(ans->id, 9);
	ck_assert_int_eq(ctx.runs, 1);

	/* validate refuses: the run step never happens; the request id is attached. */
	ck_assert_int_eq(dispatch(&ctx, 5, ans), 0);
	ck_assert(!ans->ok);
	ck_assert_int_eq(ans->err.code, CHIPD_E_NOT_FOUND);
	ck_assert_int_eq(ans->err.request, 5);
	ck_assert_int_eq(ctx.runs, 1);

	ck_assert_int_eq(dispatch(&ctx, 6, ans), PROTO_DEFERRED);
	ck_assert_int_eq(dispatch(&ctx, 7, ans), 0);
	ck_assert_int_eq(ans->err.code, CHIPD_E_DRAINING);
	ck_assert_str_eq(ans->err.message, "cancel failed");
	ck_assert_int_eq(dispatch(&ctx, 8, ans), 0);
	ck_assert_int_eq(ans->err.code, CHIPD_E_INTERNAL);
	ck_assert_ptr_nonnull(strstr(ans->err.message, "invalid cancel answer"));

	ck_assert_int_eq(dispatch(&ctx, -1, ans), 0);
	ck_assert_int_eq(ans->err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_ptr_nonnull(strstr(ans->err.message, "not served by the supervisor"));

	/* Malformed and oversized requests get the envelope too. */
	ck_assert_int_eq(proto_dispatch(&server, &ctx, "\x81", 1, out, sizeof(out), &olen), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_PING, out, olen, ans, &err), 0);
	ck_assert_int_eq(ans->err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_int_eq(
	    proto_dispatch(&server, &ctx, out, PROTO_REQ_MAX + 1, out, sizeof(out), &olen), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_PING, out, olen, ans, &err), 0);
	ck_assert_int_eq(ans->err.code, CHIPD_E_TOO_LARGE);
	ck_assert_int_eq(proto_dispatch(&server, &ctx, "\x80", 1, out, 8, &olen), -EMSGSIZE);
	free(ans);
}
END_TEST

/* The refused hook runs once per error envelope, whichever step wrote it, and never
 * for an answer or a deferred one: a server counts its refusals in one place. */
START_TEST(dispatch_reports_each_refusal_once)
{
	static const unsigned char v2[] = {0x82, 0xa1, 'v', 0x02, 0xa2, 'o',
					   'p',	 0xa4, 'p', 'i',  'n',	'g'};
	struct srv_ctx ctx = {0};
	struct proto_msg *ans = new_msg(PROTO_OP_NONE);
	unsigned char req[PROTO_REQ_MAX], *out = malloc(PROTO_RESP_MAX);
	struct proto_error err;
	size_t len, olen;
	unsigned total = 0;

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(dispatch(&ctx, 0, ans), 0); /* answered: no call */
	ck_assert_int_eq(dispatch(&ctx, 9, ans), 0);
	ck_assert_int_eq(dispatch(&ctx, 6, ans), PROTO_DEFERRED);
	for (int c = 0; c < CHIPD_NCODES; c++)
		ck_assert_uint_eq(ctx.refused[c], 0);

	ck_assert_int_eq(dispatch(&ctx, 5, ans), 0); /* validate */
	ck_assert_uint_eq(ctx.refused[CHIPD_E_NOT_FOUND], 1);
	ck_assert_int_eq(dispatch(&ctx, 7, ans), 0); /* run */
	ck_assert_uint_eq(ctx.refused[CHIPD_E_DRAINING], 1);
	ck_assert_int_eq(dispatch(&ctx, 8, ans), 0); /* an invalid answer */
	ck_assert_uint_eq(ctx.refused[CHIPD_E_INTERNAL], 1);
	ck_assert_int_eq(dispatch(&ctx, -1, ans), 0); /* an op not served */
	ck_assert_uint_eq(ctx.refused[CHIPD_E_BAD_REQUEST], 1);
	/* decoding: not a map, then another version */
	ck_assert_int_eq(
	    proto_dispatch(&server, &ctx, "\x92\x01\x02", 3, out, PROTO_RESP_MAX, &olen), 0);
	ck_assert_uint_eq(ctx.refused[CHIPD_E_BAD_REQUEST], 2);
	ck_assert_int_eq(proto_dispatch(&server, &ctx, v2, sizeof(v2), out, PROTO_RESP_MAX, &olen),
			 0);
	ck_assert_uint_eq(ctx.refused[CHIPD_E_UNSUPPORTED_VERSION], 1);
	/* length: above the limit, and longer than the slot (no bytes to read) */
	ck_assert_int_eq(
	    proto_dispatch(&server, &ctx, req, PROTO_REQ_MAX + 1, out, PROTO_RESP_MAX, &olen), 0);
	ck_assert_uint_eq(ctx.refused[CHIPD_E_TOO_LARGE], 1);
	ck_assert_int_eq(proto_dispatch(&server, &ctx, NULL, 5000, out, PROTO_RESP_MAX, &olen), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_PING, out, olen, ans, &err), 0);
	ck_assert_int_eq(ans->err.code, CHIPD_E_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(ans->err.message, "5000 bytes"));
	ck_assert_uint_eq(ctx.refused[CHIPD_E_TOO_LARGE], 2);
	/* encoding: an answer the buffer cannot hold becomes too_large */
	proto_msg_init(ans, PROTO_OP_STATS);
	ck_assert_int_eq(proto_encode_request(ans, req, sizeof(req), &len, &err), 0);
	ck_assert_int_eq(proto_dispatch(&server, &ctx, req, len, out, 1024, &olen), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_STATS, out, olen, ans, &err), 0);
	ck_assert(!ans->ok);
	ck_assert_int_eq(ans->err.code, CHIPD_E_TOO_LARGE);
	ck_assert_uint_eq(ctx.refused[CHIPD_E_TOO_LARGE], 3);
	ck_assert_int_eq(proto_dispatch(&server, &ctx, req, len, out, PROTO_RESP_MAX, &olen), 0);
	for (int c = 0; c < CHIPD_NCODES; c++)
		total += ctx.refused[c];
	ck_assert_uint_eq(total, 9);
	free(out);
	free(ans);
}
END_TEST

/* An answer the encoder refuses becomes internal, its message formatted from the
 * encoder's: exactly "invalid cancel answer: " and that message once, not a buffer
 * formatted into itself. */
START_TEST(dispatch_formats_invalid_answer_from_a_copy)
{
	struct srv_ctx ctx = {0};
	struct proto_msg *ans = new_msg(PROTO_OP_NONE), *bad = new_msg(PROTO_OP_CANCEL);
	unsigned char *out = malloc(PROTO_RESP_MAX);
	char expect[CHIPD_MSG_MAX];
	struct proto_error why;
	size_t olen;

	ck_assert_ptr_nonnull(out);
	/* what cancel_run answers for id 8, encoded alone: the encoder's own message */
	bad->id = 0;
	ck_assert_int_eq(proto_encode_answer(bad, out, PROTO_RESP_MAX, &olen, &why), -EINVAL);
	ck_assert_uint_gt(strlen(why.message), 0);
	snprintf(expect, sizeof(expect), "invalid cancel answer: %s", why.message);
	ck_assert_int_eq(dispatch(&ctx, 8, ans), 0);
	ck_assert(!ans->ok);
	ck_assert_int_eq(ans->err.code, CHIPD_E_INTERNAL);
	ck_assert_str_eq(ans->err.message, expect);
	free(out);
	free(bad);
	free(ans);
}
END_TEST

void proto_add_dispatch_tcases(Suite *s)
{
	TCase *tc = tcase_create("handler_table");

	tcase_add_test(tc, dispatch_answers_through_one_shape);
	tcase_add_test(tc, dispatch_reports_each_refusal_once);
	tcase_add_test(tc, dispatch_formats_invalid_answer_from_a_copy);
	suite_add_tcase(s, tc);
}
