/* check_proto.c - the wire format: every message survives a round trip, absent
 * optional fields are their defaults, the encoder refuses what the decoder would,
 * the one error envelope, and the node geometry kept private. Malformed input is in
 * proto_malformed.c, the handler table in proto_dispatch_cases.c. */
#include "node.h"
#include "proto_fixture.h"
#include "region.h"
#include "ring.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every field of @op's answer set; lists filled to their maximum. */
static void fill_answer(struct proto_msg *m)
{
	m->ok = true;
	switch (m->op) {
	case PROTO_OP_PING:
		m->pid = 1234;
		m->state = CHIPD_SUP_DRAINING;
		m->uptime_ms = 0;
		break;
	case PROTO_OP_SUBMIT:
		m->id = 1;
		m->chip = 0;
		m->ring = 17;
		m->ring_gen = 0;
		break;
	case PROTO_OP_CANCEL:
	case PROTO_OP_ASSIGN:
		m->id = 9;
		break;
	case PROTO_OP_STATUS:
		m->state = CHIPD_SUP_READY;
		m->pid = 1;
		m->uptime_ms = INT64_MAX;
		m->nchips = CHIPD_MAX_CHIPS;
		for (int i = 0; i < CHIPD_MAX_CHIPS; i++)
			m->chips[i] = (struct proto_chip){
			    i, i % 7, 4194304 - i, i - 1, 4294967295ll, i, 2 * i};
		break;
	case PROTO_OP_STATS:
		m->nstats = PROTO_MAX_STATS;
		for (int i = 0; i < PROTO_MAX_STATS; i++) {
			snprintf(m->stats[i].key, PROTO_STAT_KEY,
				 "chip%d.counter_with_a_long_name_%d", i % 64, i);
			m->stats[i].value = i ? (uint64_t)i * 1000003u : UINT64_MAX;
		}
		break;
	case PROTO_OP_TRACE:
		m->events = 1ll << 40;
		m->dropped = 3;
		break;
	case PROTO_OP_HEARTBEAT:
		m->seq = 5;
		m->queued = 2;
		m->active = 4294967295ll;
		break;
	case PROTO_OP_WORKLOADS:
		proto_fill_workloads(m);
		m->more = 4294967295ll;
		break;
	case PROTO_OP_REGISTER:
		strcpy(m->wl, "tiny");
		m->version = 4294967295ll;
		break;
	case PROTO_OP_UNREGISTER:
		m->active = 3;
		break;
	case PROTO_OP_HELLO:
		m->client = INT64_MAX;
		m->pid = 4194304;
		m->max_pending = 1;
		m->max_rings = 4096;
		break;
	default:
		break;
	}
}

/* msgpack-c's own unpacker agrees that @buf is one map whose first pair is "v": 1. */
static void msgpack_c_agrees(const void *buf, size_t len)
{
	msgpack_unpacked u;
	size_t off = 0;

	msgpack_unpacked_init(&u);
	ck_assert_int_eq(msgpack_unpack_next(&u, buf, len, &off), MSGPACK_UNPACK_SUCCESS);
	ck_assert_uint_eq(off, len);
	ck_assert_int_eq(u.data.type, MSGPACK_OBJECT_MAP);
	ck_assert_uint_ge(u.data.via.map.size, 2);
	ck_assert_int_eq(u.data.via.map.ptr[0].key.type, MSGPACK_OBJECT_STR);
	ck_assert_int_eq(u.data.via.map.ptr[0].key.via.str.ptr[0], 'v');
	ck_assert_uint_eq(u.data.via.map.ptr[0].val.via.u64, 1);
	msgpack_unpacked_destroy(&u);
}

START_TEST(every_request_round_trips)
{
	static unsigned char buf[PROTO_REQ_MAX];
	struct proto_msg *m = new_msg((enum proto_op)_i), *d = new_msg(PROTO_OP_NONE);
	struct proto_error err;
	size_t len;

	fill_request(m);
	ck_assert_msg(proto_encode_request(m, buf, sizeof(buf), &len, &err) == 0, "%s",
		      err.message);
	msgpack_c_agrees(buf, len);
	ck_assert_msg(proto_decode_request(buf, len, d, &err) == 0, "%s", err.message);
	ck_assert_int_eq(d->op, _i);
	ck_assert_msg(memcmp(m, d, sizeof(*m)) == 0, "%s request differs after a round trip",
		      proto_op_name(m->op));
	free(m);
	free(d);
}
END_TEST

START_TEST(every_answer_round_trips)
{
	static unsigned char buf[PROTO_RESP_MAX];
	struct proto_msg *m = new_msg((enum proto_op)_i), *d = new_msg(PROTO_OP_NONE);
	struct proto_error err;
	size_t len;

	fill_answer(m);
	ck_assert_msg(proto_encode_answer(m, buf, sizeof(buf), &len, &err) == 0, "%s", err.message);
	msgpack_c_agrees(buf, len);
	ck_assert_msg(proto_decode_answer(m->op, buf, len, d, &err) == 0, "%s", err.message);
	ck_assert(d->ok);
	ck_assert_msg(memcmp(m, d, sizeof(*m)) == 0, "%s answer differs after a round trip",
		      proto_op_name(m->op));
	free(m);
	free(d);
}
END_TEST

START_TEST(absent_optional_fields_are_defaults)
{
	unsigned char buf[256];
	struct proto_msg *m = new_msg(PROTO_OP_SUBMIT), *d = new_msg(PROTO_OP_NONE);
	struct proto_error err;
	size_t len;

	strcpy(m->wl, "synthetic");
	ck_assert_int_eq(proto_encode_request(m, buf, sizeof(buf), &len, &err), 0);
	/* {"v":1,"op":"submit","wl":"synthetic"}: nothing else on the wire. */
	ck_assert_uint_eq(len, 1 + 2 + 1 + 3 + 7 + 3 + 10);
	ck_assert_int_eq(proto_decode_request(buf, len, d, &err), 0);
	ck_assert_int_eq(d->chip, -1);
	ck_assert_int_eq(d->id, 0);
	ck_assert_int_eq(d->max_tokens, 0);
	ck_assert_int_eq(d->deadline_ms, 0);
	ck_assert_uint_eq(d->nparams, 0);
	ck_assert_int_eq(d->err.chip, -1);
	free(m);
	free(d);
}
END_TEST

/* A message whose memory held anything: proto_msg_init clears the answers' lists
 * only for the ops that have them, so a stats or workloads message, made or decoded,
 * is the same as one in zeroed memory; a submit leaves them alone. */
START_TEST(lists_are_cleared_for_their_ops)
{
	static unsigned char buf[PROTO_RESP_MAX];
	struct proto_msg *clean = new_msg(PROTO_OP_NONE), *dirty = malloc(sizeof(*dirty));
	struct proto_msg *m = new_msg(PROTO_OP_WORKLOADS);
	const enum proto_op list_ops[] = {PROTO_OP_STATS, PROTO_OP_WORKLOADS};
	struct proto_error err;
	size_t len;

	ck_assert_ptr_nonnull(dirty);
	for (size_t i = 0; i < sizeof(list_ops) / sizeof(list_ops[0]); i++) {
		memset(dirty, 0xa5, sizeof(*dirty));
		proto_msg_init(dirty, list_ops[i]);
		proto_msg_init(clean, list_ops[i]);
		ck_assert(memcmp(clean, dirty, sizeof(*clean)) == 0);
	}
	memset(dirty, 0xa5, sizeof(*dirty));
	proto_msg_init(dirty, PROTO_OP_SUBMIT);
	ck_assert_uint_eq(dirty->stats[PROTO_MAX_STATS - 1].value, 0xa5a5a5a5a5a5a5a5ull);
	/* decoded answers and requests of those ops */
	fill_answer(m);
	ck_assert_int_eq(proto_encode_answer(m, buf, sizeof(buf), &len, &err), 0);
	memset(dirty, 0xa5, sizeof(*dirty));
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_WORKLOADS, buf, len, dirty, &err), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_WORKLOADS, buf, len, clean, &err), 0);
	ck_assert(memcmp(clean, dirty, sizeof(*clean)) == 0);
	proto_msg_init(m, PROTO_OP_STATS);
	m->chip = 1;
	ck_assert_int_eq(proto_encode_request(m, buf, sizeof(buf), &len, &err), 0);
	memset(dirty, 0xa5, sizeof(*dirty));
	ck_assert_int_eq(proto_decode_request(buf, len, dirty, &err), 0);
	ck_assert_int_eq(proto_decode_request(buf, len, clean, &err), 0);
	ck_assert(memcmp(clean, dirty, sizeof(*clean)) == 0);
	free(clean);
	free(dirty);
	free(m);
}
END_TEST

START_TEST(largest_answers_fit_the_response_slot)
{
	static unsigned char buf[PROTO_RESP_MAX];
	struct proto_msg *m = new_msg(PROTO_OP_STATS);
	struct proto_error err;
	size_t len;

	fill_answer(m);
	ck_assert_int_eq(proto_encode_answer(m, buf, sizeof(buf), &len, &err), 0);
	ck_assert_uint_lt(len, PROTO_RESP_MAX);
	/* the workloads answer at its largest: every name, key and doc at its limit */
	proto_msg_init(m, PROTO_OP_WORKLOADS);
	fill_answer(m);
	ck_assert_uint_eq(strlen(m->wls[0].wl), CHIPD_NAME_MAX - 1);
	ck_assert_uint_eq(strlen(m->wl_params[PROTO_MAX_WL_PARAMS - 1].key), CHIPD_KEY_MAX - 1);
	ck_assert_msg(proto_encode_answer(m, buf, sizeof(buf), &len, &err) == 0, "%s", err.message);
	ck_assert_uint_lt(len, PROTO_RESP_MAX);
	proto_msg_init(m, PROTO_OP_SUBMIT);
	strcpy(m->wl, "abcdefghijklmnopqrstuvwxyz01234");
	for (int i = 0; i < CHIPD_MAX_PARAMS; i++) {
		snprintf(m->params[i].key, CHIPD_KEY_MAX, "param_with_long_name_%02d", i);
		m->params[i].value = INT64_MIN;
	}
	m->nparams = CHIPD_MAX_PARAMS;
	m->id = m->max_tokens = 1;
	ck_assert_int_eq(proto_encode_request(m, buf, PROTO_REQ_MAX, &len, &err), 0);
	ck_assert_uint_lt(len, 1024);
	free(m);
}
END_TEST

/* Asserts that encoding @m fails with bad_request naming @field. */
static void expect_encode_refused(struct proto_msg *m, bool answer, const char *field)
{
	unsigned char buf[PROTO_RESP_MAX];
	struct proto_error err;
	size_t len;
	int rc = answer ? proto_encode_answer(m, buf, sizeof(buf), &len, &err)
			: proto_encode_request(m, buf, sizeof(buf), &len, &err);

	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, field), "\"%s\" lacks %s", err.message, field);
}

START_TEST(encoder_refuses_what_decoder_would)
{
	struct proto_msg *m = new_msg(PROTO_OP_SUBMIT);

	strcpy(m->wl, "Bad Name");
	expect_encode_refused(m, false, "\"wl\": byte 0x42");
	strcpy(m->wl, "ok");
	m->chip = CHIPD_MAX_CHIPS;
	expect_encode_refused(m, false, "\"chip\": 64 out of range 0..63");
	m->chip = -1;
	fill_params(m);
	strcpy(m->params[1].key, "layers");
	expect_encode_refused(m, false, "duplicate key \"layers\"");
	proto_msg_init(m, PROTO_OP_CANCEL);
	expect_encode_refused(m, false, "\"id\": 0 out of range");
	proto_msg_init(m, PROTO_OP_STATUS);
	fill_answer(m);
	m->chips[3].state = 9;
	expect_encode_refused(m, true, "\"chips[3].state\"");
	proto_msg_init(m, PROTO_OP_TRACE);
	m->act = PROTO_TRACE_START;
	strcpy(m->path, "/x");
	expect_encode_refused(m, false, "\"path\": only allowed with");
	m->op = PROTO_NOPS;
	expect_encode_refused(m, false, "\"op\"");
	free(m);
}
END_TEST

START_TEST(encoder_reports_too_large_at_every_short_cap)
{
	unsigned char buf[PROTO_REQ_MAX];
	struct proto_msg *m = new_msg(PROTO_OP_SUBMIT);
	struct proto_error err;
	size_t len, full;

	fill_request(m);
	ck_assert_int_eq(proto_encode_request(m, buf, sizeof(buf), &full, &err), 0);
	for (size_t cap = 0; cap < full; cap++) {
		ck_assert_int_eq(proto_encode_request(m, buf, cap, &len, &err), -EMSGSIZE);
		ck_assert_int_eq(err.code, CHIPD_E_TOO_LARGE);
	}
	ck_assert_int_eq(proto_encode_request(m, buf, full, &len, &err), 0);
	ck_assert_uint_eq(len, full);
	free(m);
}
END_TEST

/* A parameter row of a raw workloads answer. */
struct raw_wlp {
	const char *wl, *key;
	int64_t def, min, max;
};

/* Asserts that a workloads answer listing @wls (NULL-ended) and @n rows of @ps is
 * refused by the decoder (built with msgpack-c) and by the encoder, both naming
 * @needle. */
static void expect_workloads_refused(const char *const *wls, const struct raw_wlp *ps, uint32_t n,
				     const char *needle)
{
	struct proto_msg *m = new_msg(PROTO_OP_WORKLOADS);
	uint32_t nw = 0;
	struct raw r;

	while (wls[nw])
		nw++;
	raw_init(&r);
	msgpack_pack_map(&r.pk, 4);
	raw_str(&r, "v");
	msgpack_pack_int(&r.pk, 1);
	raw_str(&r, "ok");
	msgpack_pack_true(&r.pk);
	raw_str(&r, "workloads");
	msgpack_pack_array(&r.pk, nw);
	for (uint32_t i = 0; i < nw; i++) {
		msgpack_pack_map(&r.pk, 2);
		raw_str(&r, "wl");
		raw_str(&r, wls[i]);
		raw_str(&r, "doc");
		raw_str(&r, "");
		snprintf(m->wls[i].wl, CHIPD_NAME_MAX, "%s", wls[i]);
	}
	m->nwls = nw;
	raw_str(&r, "parameters");
	msgpack_pack_array(&r.pk, n);
	for (uint32_t i = 0; i < n; i++) {
		msgpack_pack_map(&r.pk, 6);
		raw_str(&r, "wl");
		raw_str(&r, ps[i].wl);
		raw_str(&r, "key");
		raw_str(&r, ps[i].key);
		raw_str(&r, "default");
		msgpack_pack_int64(&r.pk, ps[i].def);
		raw_str(&r, "min");
		msgpack_pack_int64(&r.pk, ps[i].min);
		raw_str(&r, "max");
		msgpack_pack_int64(&r.pk, ps[i].max);
		raw_str(&r, "doc");
		raw_str(&r, "");
		snprintf(m->wl_params[i].wl, CHIPD_NAME_MAX, "%s", ps[i].wl);
		snprintf(m->wl_params[i].key, CHIPD_KEY_MAX, "%s", ps[i].key);
		m->wl_params[i].def = ps[i].def;
		m->wl_params[i].min = ps[i].min;
		m->wl_params[i].max = ps[i].max;
	}
	m->nwl_params = n;
	m->ok = true;
	expect_bad_answer(PROTO_OP_WORKLOADS, &r, needle);
	expect_encode_refused(m, true, needle);
	free(m);
}

/* The workloads answer's rules between its rows: what chipd_workloads relies on to
 * group the flat parameter list under its workloads. */
START_TEST(workloads_answer_rules_hold_both_ways)
{
	static const char *const ab[] = {"a", "b", NULL}, *const aa[] = {"a", "a", NULL};
	const struct raw_wlp ok = {"a", "k", 1, 0, 2};
	struct raw_wlp many[CHIPD_MAX_PARAMS + 1], ps[2] = {ok, ok};
	char keys[CHIPD_MAX_PARAMS + 1][8];

	expect_workloads_refused(aa, NULL, 0, "\"workloads\": \"a\" listed twice");
	ps[0].wl = "c";
	expect_workloads_refused(ab, ps, 1, "\"parameters[0]\": workload \"c\" is not listed");
	expect_workloads_refused(ab, ps, 2, "workload \"c\" is not listed");
	ps[0] = ok;
	expect_workloads_refused(ab, ps, 2, "a.k listed twice");
	ps[1].wl = "b";
	ps[1].def = 3;
	expect_workloads_refused(ab, ps, 2, "b.k: default 3 outside 0..2");
	ps[1].def = 1;
	ps[1].min = 2;
	expect_workloads_refused(ab, ps, 2, "b.k: default 1 outside 2..2");
	for (int i = 0; i <= CHIPD_MAX_PARAMS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%d", i);
		many[i] = (struct raw_wlp){"b", keys[i], 0, 0, 0};
	}
	expect_workloads_refused(ab, many, CHIPD_MAX_PARAMS + 1, "b has more than 16");
}
END_TEST

START_TEST(code_names_and_retryability_are_stable)
{
	static const char *const names[CHIPD_NCODES] = {
	    "ok",	    "bad_request", "unsupported_version",
	    "too_large",    "queue_full",  "no_capacity",
	    "duplicate_id", "not_found",   "cancelled",
	    "draining",	    "worker_lost", "device_error",
	    "timeout",	    "internal",	   "node_lost"};

	for (int c = 0; c < CHIPD_NCODES; c++) {
		bool retry = c == CHIPD_E_QUEUE_FULL || c == CHIPD_E_NO_CAPACITY ||
			     c == CHIPD_E_WORKER_LOST || c == CHIPD_E_TIMEOUT ||
			     c == CHIPD_E_NODE_LOST;

		ck_assert_str_eq(chipd_code_name((enum chipd_code)c), names[c]);
		ck_assert_int_eq(chipd_code_retryable((enum chipd_code)c), retry);
		ck_assert_int_eq(proto_code_parse(names[c], strlen(names[c])), c);
	}
	ck_assert_str_eq(chipd_code_name(CHIPD_NCODES), "unknown");
	ck_assert_int_eq(proto_code_parse("nope", 4), -1);
	ck_assert_str_eq(chipd_sup_state_name(CHIPD_SUP_READY), "ready");
	ck_assert_str_eq(chipd_sup_state_name(0), "unknown");
	ck_assert_str_eq(chipd_chip_state_name(CHIPD_CHIP_BACKOFF), "backoff");
	ck_assert_str_eq(chipd_chip_state_name(99), "unknown");
}
END_TEST

START_TEST(error_envelope_round_trips_every_code)
{
	unsigned char buf[512];
	struct proto_msg *d = new_msg(PROTO_OP_NONE);
	struct proto_error e, err;
	size_t len;

	for (int c = 1; c < CHIPD_NCODES; c++) {
		proto_fail(&e, (enum chipd_code)c, "request %d: it went \"wrong\"\n", c);
		e.retryable = !chipd_code_retryable((enum chipd_code)c); /* ignored */
		e.request = c == 3 ? 0 : 1000 + c;
		e.chip = c == 4 ? -1 : c;
		ck_assert_int_eq(proto_encode_error(&e, buf, sizeof(buf), &len), 0);
		msgpack_c_agrees(buf, len);
		ck_assert_int_eq(proto_decode_answer(PROTO_OP_SUBMIT, buf, len, d, &err), 0);
		ck_assert(!d->ok);
		ck_assert_int_eq(d->err.code, c);
		ck_assert_int_eq(d->err.retryable, chipd_code_retryable((enum chipd_code)c));
		ck_assert_int_eq(d->err.request, e.request);
		ck_assert_int_eq(d->err.chip, e.chip);
		/* Control characters never reach the wire. */
		ck_assert_ptr_nonnull(strstr(d->err.message, "\"wrong\"?"));
	}
	e.code = CHIPD_OK;
	ck_assert_int_eq(proto_encode_error(&e, buf, sizeof(buf), &len), -EINVAL);
	free(d);
}
END_TEST

START_TEST(error_envelope_shortens_message_to_fit)
{
	unsigned char buf[PROTO_REQ_MAX];
	struct proto_msg *d = new_msg(PROTO_OP_NONE);
	struct proto_error e, err;
	size_t len, cap;

	proto_fail(&e, CHIPD_E_INTERNAL, "%0159d", 7);
	ck_assert_uint_eq(strlen(e.message), CHIPD_MSG_MAX - 1);
	for (cap = 200; cap > 0; cap--) {
		int rc = proto_encode_error(&e, buf, cap, &len);

		if (rc == -EMSGSIZE)
			break;
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_le(len, cap);
		ck_assert_int_eq(proto_decode_answer(PROTO_OP_PING, buf, len, d, &err), 0);
		ck_assert_int_eq(d->err.code, CHIPD_E_INTERNAL);
		ck_assert_uint_le(strlen(d->err.message), CHIPD_MSG_MAX - 1);
	}
	/* Only a buffer too small for an envelope with an empty message is refused. */
	ck_assert_uint_lt(cap, 64);
	free(d);
}
END_TEST

/* ---- the node region's geometry ---- */

#define GEOM_RINGS 8u
#define GEOM_CAP   16u

static void geom_region(struct proto_node *n, char *name, size_t cap)
{
	static _Atomic unsigned seq;
	struct proto_node_config cfg;
	struct shm_diag diag = {""};
	char instance[CHIPD_INSTANCE_MAX];

	snprintf(instance, sizeof(instance), "chipd-geom-%d-%u", (int)getpid(),
		 atomic_fetch_add(&seq, 1));
	ck_assert_int_eq(shm_region_name(name, cap, (unsigned)geteuid(), instance), 0);
	proto_node_config_default(&cfg, 2);
	cfg.nrings = GEOM_RINGS;
	cfg.ring_capacity = GEOM_CAP;
	cfg.mbox_slots = 4;
	ck_assert_msg(proto_node_create(n, name, &cfg, SHM_CREATE_RECLAIM_STALE, &diag) == 0, "%s",
		      diag.msg);
	/* the owner reads rings as the client of its first client region */
	ck_assert_msg(proto_node_attach_own(n, 0, &diag) == 0, "%s", diag.msg);
	shm_region_ready(&n->region);
}

/* After attach, a client rewrites the shared descriptor (nrings 0, rings elsewhere,
 * strides and capacity raised, workers 64): every handle keeps finding ring i where
 * it was laid out, with the capacity laid out; an index past the rings and a ring whose
 * header identity was overwritten are errors that leave no half-bound ring. */
START_TEST(node_ring_keeps_the_geometry_it_validated)
{
	struct proto_node owner, client;
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX];
	struct ring r, bound;

	geom_region(&owner, name, sizeof(name));
	ck_assert_msg(proto_node_attach(&client, name, &diag) == 0, "%s", diag.msg);
	memset(&r, 0x5a, sizeof(r));
	ck_assert_int_eq(proto_node_ring(&client, 0, &r), -ENOTCONN); /* no hello yet */
	ck_assert_ptr_null(r.hdr);
	/* what the hello answer brings: the exchange region's memfd */
	ck_assert_msg(proto_node_attach_xchg(&client, dup(owner.pool[0].fd), &diag) == 0, "%s",
		      diag.msg);
	ck_assert_uint_eq(client.geom.nrings, GEOM_RINGS);
	ck_assert_uint_eq(client.geom.nworkers, 2);

	struct proto_node_desc *d = owner.desc;
	uint32_t rings_offset = d->rings_offset, stride = d->ring_stride;
	char *rings = (char *)owner.region.hdr + rings_offset;

	d->nrings = 0;
	d->rings_offset = 0;
	d->ring_stride = 1u << 30;
	d->ring_capacity = RING_MAX_CAPACITY;
	d->nworkers = 64;
	d->dir_offset = 0;
	d->wrk_ctr_offset = 0;
	d->magic = 0;
	struct proto_node *both[] = {&owner, &client};
	for (int k = 0; k < 2; k++) {
		for (uint32_t i = 0; i < GEOM_RINGS; i++) {
			memset(&r, 0x5a, sizeof(r));
			ck_assert_int_eq(proto_node_ring(both[k], i, &r), 0);
			ck_assert_ptr_eq(r.hdr, (char *)both[k]->region.hdr + rings_offset +
						    (size_t)i * stride);
			ck_assert_uint_eq(r.capacity, GEOM_CAP);
		}
		memset(&r, 0x5a, sizeof(r));
		ck_assert_int_eq(proto_node_ring(both[k], GEOM_RINGS, &r), -ERANGE);
		ck_assert_ptr_null(r.hdr);
		ck_assert_int_eq(proto_node_ring(both[k], UINT32_MAX, &r), -ERANGE);
		ck_assert_ptr_null(r.hdr);
		ck_assert_uint_eq(both[k]->geom.nworkers, 2);
	}

	/* a client zeroes its ring's magic, another raises its ring's capacity */
	struct ring_hdr *h3 = (struct ring_hdr *)(void *)(rings + 3 * (size_t)stride);
	struct ring_hdr *h2 = (struct ring_hdr *)(void *)(rings + 2 * (size_t)stride);
	h3->magic = 0;
	h2->capacity = RING_MAX_CAPACITY;
	memset(&r, 0x5a, sizeof(r));
	ck_assert_int_eq(proto_node_ring(&client, 3, &r), -EBADMSG);
	ck_assert_ptr_null(r.hdr);
	ck_assert_int_eq(proto_node_ring(&client, 2, &r), -EMSGSIZE);
	ck_assert_ptr_null(r.hdr);
	/* the owner binds with what it laid out, and writes stay in the ring */
	ck_assert_int_eq(proto_node_ring_bind(&owner, 2, &bound), 0);
	ck_assert_ptr_eq(bound.hdr, h2);
	ck_assert_uint_eq(bound.capacity, GEOM_CAP);
	struct ring_rec rec = {.request_id = 1};
	for (uint32_t i = 0; i < 4 * GEOM_CAP; i++) {
		atomic_store(&h2->head, (uint64_t)i * 7919u);
		atomic_store(&bound.cons->tail, (uint64_t)i * 7919u);
		ck_assert_int_eq(ring_push(&bound, &rec), 0);
	}
	ck_assert_uint_eq(h3->rec_size, sizeof(struct ring_rec)); /* the next ring intact */
	ck_assert_uint_eq(h3->capacity, GEOM_CAP);
	ck_assert_int_eq(proto_node_ring_bind(&owner, GEOM_RINGS, &bound), -ERANGE);
	ck_assert_ptr_null(bound.hdr);

	/* what a new attacher sees now is refused */
	struct proto_node again;
	ck_assert_int_eq(proto_node_attach(&again, name, &diag), -EBADMSG);
	proto_node_detach(&client);
	shm_region_unlink(name);
	proto_node_detach(&owner);
}
END_TEST

/* The exchange region's memfd is whatever descriptor the hello's recvmsg installed: in a
 * process with standard input closed it may be 0, and the detach (chipd_close) closes
 * it like any other. (Check runs each test in a child: its fd 0 is its own.) */
START_TEST(node_detach_closes_an_exchange_region_at_fd_0)
{
	struct proto_node owner, client;
	struct shm_diag diag = {""};
	char name[SHM_NAME_MAX];

	geom_region(&owner, name, sizeof(name));
	ck_assert_msg(proto_node_attach(&client, name, &diag) == 0, "%s", diag.msg);
	close(STDIN_FILENO);
	ck_assert_int_eq(fcntl(owner.pool[0].fd, F_DUPFD_CLOEXEC, 0), STDIN_FILENO);
	ck_assert_msg(proto_node_attach_xchg(&client, STDIN_FILENO, &diag) == 0, "%s", diag.msg);
	ck_assert_int_eq(client.xchg.fd, STDIN_FILENO);
	proto_node_detach(&client);
	errno = 0;
	ck_assert_msg(fcntl(STDIN_FILENO, F_GETFD) == -1 && errno == EBADF,
		      "fd 0, the exchange region's memfd, is still open after the detach");
	shm_region_unlink(name);
	proto_node_detach(&owner);
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("round_trip");

	tcase_add_loop_test(tc, every_request_round_trips, 1, PROTO_NOPS);
	tcase_add_loop_test(tc, every_answer_round_trips, 1, PROTO_NOPS);
	tcase_add_test(tc, absent_optional_fields_are_defaults);
	tcase_add_test(tc, lists_are_cleared_for_their_ops);
	tcase_add_test(tc, largest_answers_fit_the_response_slot);
	suite_add_tcase(s, tc);
	tc = tcase_create("workloads_answer");
	tcase_add_test(tc, workloads_answer_rules_hold_both_ways);
	suite_add_tcase(s, tc);
	tc = tcase_create("encoder");
	tcase_add_test(tc, encoder_refuses_what_decoder_would);
	tcase_add_test(tc, encoder_reports_too_large_at_every_short_cap);
	suite_add_tcase(s, tc);
	tc = tcase_create("error_envelope");
	tcase_add_test(tc, code_names_and_retryability_are_stable);
	tcase_add_test(tc, error_envelope_round_trips_every_code);
	tcase_add_test(tc, error_envelope_shortens_message_to_fit);
	suite_add_tcase(s, tc);
	proto_add_dispatch_tcases(s);
	tc = tcase_create("node_geometry");
	tcase_add_test(tc, node_ring_keeps_the_geometry_it_validated);
	tcase_add_test(tc, node_detach_closes_an_exchange_region_at_fd_0);
	suite_add_tcase(s, tc);
	proto_add_bad_tcases(s);
	return s;
}

int main(void)
{
	return tu_run(proto_suite());
}
