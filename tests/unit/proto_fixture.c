/* proto_fixture.c - see proto_fixture.h. */
#include "proto_fixture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void raw_init(struct raw *r)
{
	msgpack_sbuffer_init(&r->sb);
	msgpack_packer_init(&r->pk, &r->sb, msgpack_sbuffer_write);
}

void raw_free(struct raw *r)
{
	msgpack_sbuffer_destroy(&r->sb);
}

void raw_str(struct raw *r, const char *s)
{
	msgpack_pack_str(&r->pk, strlen(s));
	msgpack_pack_str_body(&r->pk, s, strlen(s));
}

void raw_request(struct raw *r, const char *op, uint32_t npairs)
{
	raw_init(r);
	msgpack_pack_map(&r->pk, npairs);
	raw_str(r, "v");
	msgpack_pack_int(&r->pk, 1);
	raw_str(r, "op");
	raw_str(r, op);
}

void expect_bad_request(const void *buf, size_t len, enum chipd_code code, const char *needle)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(proto_decode_request(buf, len, m, &err), -EBADMSG);
	ck_assert_msg(err.code == code, "code %s, want %s: %s",
		      chipd_code_name((enum chipd_code)err.code), chipd_code_name(code),
		      err.message);
	ck_assert_msg(strstr(err.message, needle), "message \"%s\" lacks \"%s\"", err.message,
		      needle);
	free(m);
}

void expect_bad_raw(struct raw *r, enum chipd_code code, const char *needle)
{
	expect_bad_request(r->sb.data, r->sb.size, code, needle);
	raw_free(r);
}

void expect_bad_answer(enum proto_op op, struct raw *r, const char *needle)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(proto_decode_answer(op, r->sb.data, r->sb.size, m, &err), -EBADMSG);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(err.message, needle), "message \"%s\" lacks \"%s\"", err.message,
		      needle);
	raw_free(r);
	free(m);
}

/* The largest workloads answer: every list full, every string as long as allowed,
 * every int at an extreme (9 bytes on the wire); each workload has the same keys, as
 * real ones share "tokens" and "seed". */
void proto_fill_workloads(struct proto_msg *m)
{
	char doc[CHIPD_DOC_MAX];

	memset(doc, 'd', sizeof(doc) - 1);
	doc[sizeof(doc) - 1] = 0;
	m->nwls = CHIPD_MAX_WORKLOADS;
	for (int w = 0; w < CHIPD_MAX_WORKLOADS; w++) {
		snprintf(m->wls[w].wl, CHIPD_NAME_MAX, "workload_with_a_long_name_%05d", w);
		memcpy(m->wls[w].doc, doc, sizeof(doc));
		m->wls[w].version = 4294967295ll;
		m->wls[w].chips = w % 2 ? INT64_MIN : -1; /* chip 63 loaded: the sign bit */
		m->wls[w].active = 4294967295ll;
		/* counts of 2^63 - 1 and just below: 9 bytes each, and each its own */
		m->wls[w].requests = INT64_MAX - w;
		m->wls[w].completed = INT64_MAX - 1 - w;
		m->wls[w].failed = INT64_MAX - 2 - w;
		m->wls[w].cancelled = INT64_MAX - 3 - w;
		m->wls[w].tokens = INT64_MAX - 4 - w;
	}
	m->nwl_params = PROTO_MAX_WL_PARAMS;
	for (int i = 0; i < PROTO_MAX_WL_PARAMS; i++) {
		struct proto_wl_param *p = &m->wl_params[i];

		memcpy(p->wl, m->wls[i % CHIPD_MAX_WORKLOADS].wl, CHIPD_NAME_MAX);
		snprintf(p->key, CHIPD_KEY_MAX, "param_with_long_nam%04d", i / CHIPD_MAX_WORKLOADS);
		p->def = i % 2 ? INT64_MIN : INT64_MAX;
		p->min = INT64_MIN;
		p->max = INT64_MAX;
		memcpy(p->doc, doc, sizeof(doc));
	}
}

struct proto_msg *new_msg(enum proto_op op)
{
	/* zeroed: proto_msg_init leaves the lists of an op without lists as they were,
	 * and the round trips compare whole messages */
	struct proto_msg *m = calloc(1, sizeof(*m));

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, op);
	return m;
}

void fill_params(struct proto_msg *m)
{
	static const struct proto_param p[] = {
	    {"layers", 4}, {"neg", -5}, {"big", INT64_MAX}, {"small", INT64_MIN}};

	memcpy(m->params, p, sizeof(p));
	m->nparams = 4;
}

/* The longest inline input, every byte value in it. */
static void fill_input(struct proto_msg *m)
{
	for (uint32_t i = 0; i < PROTO_INPUT_INLINE_MAX; i++)
		m->input_inline[i] = (uint8_t)(i * 7u);
	m->input_inline_len = PROTO_INPUT_INLINE_MAX;
}

/* Every field of @op's request set to a value other than its default. */
void fill_request(struct proto_msg *m)
{
	switch (m->op) {
	case PROTO_OP_SUBMIT:
		strcpy(m->wl, "paged_attention");
		fill_params(m);
		m->id = 42;
		m->chip = 3;
		m->max_tokens = 128;
		m->deadline_ms = 1500;
		fill_input(m);
		m->output_off = 4294967295ll;
		m->output_cap = 1 << 20;
		break;
	case PROTO_OP_CANCEL:
		m->id = INT64_MAX;
		break;
	case PROTO_OP_STATS:
		m->chip = 0;
		break;
	case PROTO_OP_DRAIN:
	case PROTO_OP_STOP:
	case PROTO_OP_SHUTDOWN:
		m->grace_ms = 2500;
		break;
	case PROTO_OP_TRACE:
		m->act = PROTO_TRACE_COLLECT;
		m->chip = 63;
		strcpy(m->path, "/tmp/chipd trace.json");
		break;
	case PROTO_OP_ASSIGN:
		m->id = 7;
		strcpy(m->wl, "gemm");
		fill_params(m);
		m->max_tokens = 1;
		m->deadline_ns = 123456789;
		m->ring = 4095;
		m->ring_gen = 4294967295ll;
		m->client = 4194304;
		m->input_off = 0;
		m->input_len = 1 << 20;
		m->output_off = 4096;
		m->output_cap = 1;
		break;
	case PROTO_OP_HEARTBEAT:
		m->seq = 99;
		break;
	case PROTO_OP_REGISTER:
	case PROTO_OP_LOAD:
		strcpy(m->path, "/opt/callables/tiny.so");
		strcpy(m->wl, "tiny_renamed");
		break;
	case PROTO_OP_UNREGISTER:
		strcpy(m->wl, "tiny");
		m->mode = PROTO_UNREG_CANCEL;
		break;
	case PROTO_OP_UNLOAD:
		strcpy(m->wl, "tiny");
		break;
	case PROTO_OP_WORKLOADS:
		m->from = 8;
		break;
	default:
		break;
	}
}
