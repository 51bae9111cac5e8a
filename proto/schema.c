/* schema.c - every message of the protocol, as tables (docs/protocol.md §8.4 is the
 * same catalogue in prose). Changing a row here changes the wire contract: update
 * the document and the round-trip tests with it. */
#include "schema.h"

#include <stddef.h>
#include <string.h>

#define MSG(f)	     offsetof(struct proto_msg, f)
#define CHIP(f)	     offsetof(struct proto_chip, f)
#define WLR(f)	     offsetof(struct proto_wl, f)
#define WLP(f)	     offsetof(struct proto_wl_param, f)
#define ERR(f)	     offsetof(struct proto_error, f)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define ID_MAX	   INT64_MAX
#define U32_MAX	   4294967295ll
#define PID_MAX	   4194304ll /* Linux PID_MAX_LIMIT */
#define CHIP_MAX   (CHIPD_MAX_CHIPS - 1)
#define GPU_MAX	   1023	      /* device ordinals */
#define TOKENS_MAX 1048576ll  /* 2^20 tokens per request */
#define DAY_MS	   86400000ll /* request deadlines up to a day */
#define HOUR_MS	   3600000ll  /* grace periods up to an hour */
#define RING_MAX   4095	      /* ring indices: node regions hold at most 4096 rings */
#define REGION_MAX 4095	      /* client regions: a node keeps at most 4096 */

/* Field constructors: key, required, range, default, storage. */
#define F_INT(k, req, lo, hi, d, o)                                                                \
	{                                                                                          \
		.key = k, .type = FT_INT, .required = req, .min = lo, .max = hi, .def = d,         \
		.off = o                                                                           \
	}
#define F_BOOL(k, o)                                                                               \
	{                                                                                          \
		.key = k, .type = FT_BOOL, .required = true, .off = o                              \
	}
#define F_STR(k, req, cs, lo, hi, o)                                                               \
	{                                                                                          \
		.key = k, .type = FT_STR, .required = req, .charset = cs, .min = lo, .max = hi,    \
		.off = o                                                                           \
	}
#define F_ENUM(k, req, tbl, lo, hi, d, o)                                                          \
	{                                                                                          \
		.key = k, .type = FT_ENUM, .required = req, .names = tbl, .min = lo, .max = hi,    \
		.def = d, .off = o                                                                 \
	}
#define F_LIST(k, t, req, hi, o, c, s)                                                             \
	{                                                                                          \
		.key = k, .type = t, .required = req, .min = 0, .max = hi, .off = o,               \
		.count_off = c, .sub = s                                                           \
	}

#define SCHEMA(name, what_, chk)                                                                   \
	static const struct schema name = {                                                        \
	    .what = what_, .fields = name##_f, .nfields = ARRAY_LEN(name##_f), .check = chk}
#define EMPTY_SCHEMA(name, what_)                                                                  \
	static const struct schema name = {.what = what_, .fields = NULL, .nfields = 0}

const char *const proto_sup_state_names[] = {"", "starting", "ready", "draining", "stopped", NULL};
const char *const proto_chip_state_names[] = {
    "empty", "starting", "ready", "draining", "backoff", "failed", "stopped", "degraded", NULL};
static const char *const trace_acts[] = {"", "start", "stop", "collect", NULL};
static const char *const unreg_modes[] = {"none", "drain", "cancel", "resume", NULL};

const char *const proto_code_names[CHIPD_NCODES + 1] = {
    "ok",	  "bad_request", "unsupported_version", "too_large",
    "queue_full", "no_capacity", "duplicate_id",	"not_found",
    "cancelled",  "draining",	 "worker_lost",		"device_error",
    "timeout",	  "internal",	 "node_lost",		NULL,
};

/* Fields several ops share, with the same meaning and range everywhere. */
#define ID_REQ	  F_INT("id", true, 1, ID_MAX, 0, MSG(id))
#define ID_OPT	  F_INT("id", false, 1, ID_MAX, 0, MSG(id))
#define CHIP_OPT  F_INT("chip", false, 0, CHIP_MAX, -1, MSG(chip))
#define GRACE_OPT F_INT("grace_ms", false, 1, HOUR_MS, 0, MSG(grace_ms))
#define WL_REQ	  F_STR("wl", true, CS_IDENT, 1, CHIPD_NAME_MAX - 1, MSG(wl))
#define PARAMS_OPT                                                                                 \
	F_LIST("params", FT_PARAMS, false, CHIPD_MAX_PARAMS, MSG(params), MSG(nparams), NULL)
#define TOKENS_OPT   F_INT("max_tokens", false, 1, TOKENS_MAX, 0, MSG(max_tokens))
#define RING_REQ     F_INT("ring", true, 0, RING_MAX, 0, MSG(ring))
#define RGEN_REQ     F_INT("ring_gen", true, 0, U32_MAX, 0, MSG(ring_gen))
#define UPTIME_REQ   F_INT("uptime_ms", true, 0, INT64_MAX, 0, MSG(uptime_ms))
#define COUNT_REQ(k) F_INT(#k, true, 0, U32_MAX, 0, MSG(k))
/* input bytes given inline: msgpack bin of 1..PROTO_INPUT_INLINE_MAX bytes */
#define INPUT_OPT                                                                                  \
	{                                                                                          \
		.key = "input", .type = FT_BIN, .min = 1, .max = PROTO_INPUT_INLINE_MAX,           \
		.off = MSG(input_inline), .count_off = MSG(input_inline_len)                       \
	}

EMPTY_SCHEMA(no_fields_req, "request");
EMPTY_SCHEMA(no_fields_ans, "answer");

static const struct field ping_ans_f[] = {
    F_INT("pid", true, 1, PID_MAX, 0, MSG(pid)),
    F_ENUM("state", true, proto_sup_state_names, 1, 4, 0, MSG(state)),
    UPTIME_REQ,
};
SCHEMA(ping_ans, "ping answer", NULL);

/* The data-area ranges of a submit and its assign; their offsets are checked against
 * the data area by the supervisor (and again by the worker), not here. */
#define DATA_OPT                                                                                   \
	F_INT("input_off", false, 0, U32_MAX, 0, MSG(input_off)),                                  \
	    F_INT("input_len", false, 1, PROTO_INPUT_MAX, 0, MSG(input_len)),                      \
	    F_INT("output_off", false, 0, U32_MAX, 0, MSG(output_off)),                            \
	    F_INT("output_cap", false, 1, PROTO_OUTPUT_MAX, 0, MSG(output_cap))

/* An offset (default 0) means nothing without its length: input_off goes with
 * input_len, output_off with output_cap; input comes inline or from the data area,
 * not both. */
static enum chipd_code data_check(const void *obj, struct proto_error *err)
{
	const struct proto_msg *m = obj;

	if (m->input_off && !m->input_len)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"input_len\": required with \"input_off\"");
	if (m->output_off && !m->output_cap)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"output_cap\": required with \"output_off\"");
	if (m->input_len && m->input_inline_len)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"input\": not with \"input_off\" (input comes one way)");
	return CHIPD_OK;
}

static const struct field submit_req_f[] = {
    WL_REQ,   PARAMS_OPT, ID_OPT,
    CHIP_OPT, TOKENS_OPT, F_INT("deadline_ms", false, 1, DAY_MS, 0, MSG(deadline_ms)),
    INPUT_OPT, DATA_OPT,
};
SCHEMA(submit_req, "submit request", data_check);

static const struct field submit_ans_f[] = {
    ID_REQ,
    F_INT("chip", true, 0, CHIP_MAX, -1, MSG(chip)),
    RING_REQ,
    RGEN_REQ,
};
SCHEMA(submit_ans, "submit answer", NULL);

static const struct field id_only_f[] = {ID_REQ};
static const struct schema cancel_req = {"cancel request", id_only_f, 1, 0, NULL};
static const struct schema id_ans = {"answer", id_only_f, 1, 0, NULL};

static const struct field chip_rec_f[] = {
    F_INT("chip", true, 0, CHIP_MAX, 0, CHIP(chip)),
    F_ENUM("state", true, proto_chip_state_names, 0, 7, 0, CHIP(state)),
    F_INT("pid", true, 0, PID_MAX, 0, CHIP(pid)),
    F_INT("gpu", true, -1, GPU_MAX, 0, CHIP(gpu)),
    F_INT("restarts", true, 0, U32_MAX, 0, CHIP(restarts)),
    F_INT("queued", true, 0, U32_MAX, 0, CHIP(queued)),
    F_INT("active", true, 0, U32_MAX, 0, CHIP(active)),
};
static const struct schema chip_rec = {"chip", chip_rec_f, ARRAY_LEN(chip_rec_f),
				       sizeof(struct proto_chip), NULL};

static const struct field status_ans_f[] = {
    F_ENUM("state", true, proto_sup_state_names, 1, 4, 0, MSG(state)),
    F_INT("pid", true, 1, PID_MAX, 0, MSG(pid)),
    UPTIME_REQ,
    F_LIST("chips", FT_RECS, true, CHIPD_MAX_CHIPS, MSG(chips), MSG(nchips), &chip_rec),
};
SCHEMA(status_ans, "status answer", NULL);

static const struct field stats_req_f[] = {CHIP_OPT};
SCHEMA(stats_req, "stats request", NULL);

static const struct field stats_ans_f[] = {
    F_LIST("ctr", FT_STATS, true, PROTO_MAX_STATS, MSG(stats), MSG(nstats), NULL),
};
SCHEMA(stats_ans, "stats answer", NULL);

static const struct field grace_f[] = {GRACE_OPT};
static const struct schema grace_req = {"request", grace_f, 1, 0, NULL};

/* "path" goes with "collect" and only with it, and must be absolute. */
static enum chipd_code trace_check(const void *obj, struct proto_error *err)
{
	const struct proto_msg *m = obj;
	bool collect = m->act == PROTO_TRACE_COLLECT;

	if (collect && m->path[0] != '/')
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  m->path[0] ? "\"path\": must be absolute"
					     : "\"path\": required with \"act\": \"collect\"");
	if (!collect && m->path[0])
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"path\": only allowed with \"act\": \"collect\"");
	return CHIPD_OK;
}

static const struct field trace_req_f[] = {
    F_ENUM("act", true, trace_acts, 1, 3, 0, MSG(act)),
    CHIP_OPT,
    F_STR("path", false, CS_ANY, 1, PROTO_PATH_MAX - 1, MSG(path)),
};
SCHEMA(trace_req, "trace request", trace_check);

static const struct field trace_ans_f[] = {
    F_INT("events", false, 0, INT64_MAX, 0, MSG(events)),
    F_INT("dropped", false, 0, INT64_MAX, 0, MSG(dropped)),
};
SCHEMA(trace_ans, "trace answer", NULL);

static const struct field wl_rec_f[] = {
    F_STR("wl", true, CS_IDENT, 1, CHIPD_NAME_MAX - 1, WLR(wl)),
    F_STR("doc", true, CS_ANY, 0, CHIPD_DOC_MAX - 1, WLR(doc)),
    F_INT("version", false, 0, UINT32_MAX, 0, WLR(version)),
    F_INT("chips", false, INT64_MIN, INT64_MAX, 0, WLR(chips)),
    F_INT("active", false, 0, U32_MAX, 0, WLR(active)),
    F_INT("requests", false, 0, INT64_MAX, 0, WLR(requests)),
    F_INT("completed", false, 0, INT64_MAX, 0, WLR(completed)),
    F_INT("failed", false, 0, INT64_MAX, 0, WLR(failed)),
    F_INT("cancelled", false, 0, INT64_MAX, 0, WLR(cancelled)),
    F_INT("tokens", false, 0, INT64_MAX, 0, WLR(tokens)),
};
static const struct schema wl_rec = {"workload", wl_rec_f, ARRAY_LEN(wl_rec_f),
				     sizeof(struct proto_wl), NULL};

/* A parameter's default is one of its values. */
static enum chipd_code wl_param_check(const void *obj, struct proto_error *err)
{
	const struct proto_wl_param *p = obj;

	if (p->min > p->max || p->def < p->min || p->def > p->max)
		return proto_fail(err, CHIPD_E_BAD_REQUEST,
				  "\"parameters\": %s.%s: default %lld outside %lld..%lld", p->wl,
				  p->key, (long long)p->def, (long long)p->min, (long long)p->max);
	return CHIPD_OK;
}

static const struct field wl_param_rec_f[] = {
    F_STR("wl", true, CS_IDENT, 1, CHIPD_NAME_MAX - 1, WLP(wl)),
    F_STR("key", true, CS_IDENT, 1, CHIPD_KEY_MAX - 1, WLP(key)),
    F_INT("default", true, INT64_MIN, INT64_MAX, 0, WLP(def)),
    F_INT("min", true, INT64_MIN, INT64_MAX, 0, WLP(min)),
    F_INT("max", true, INT64_MIN, INT64_MAX, 0, WLP(max)),
    F_STR("doc", true, CS_ANY, 0, CHIPD_DOC_MAX - 1, WLP(doc)),
};
static const struct schema wl_param_rec = {"parameter", wl_param_rec_f, ARRAY_LEN(wl_param_rec_f),
					   sizeof(struct proto_wl_param), wl_param_check};

/* Workloads are listed once; a parameter belongs to a listed workload, is listed
 * once for it, and no workload has more than a submit can set. */
static enum chipd_code workloads_check(const void *obj, struct proto_error *err)
{
	const struct proto_msg *m = obj;

	for (uint32_t i = 0; i < m->nwls; i++)
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(m->wls[i].wl, m->wls[j].wl) == 0)
				return proto_fail(err, CHIPD_E_BAD_REQUEST,
						  "\"workloads\": \"%s\" listed twice",
						  m->wls[i].wl);
	for (uint32_t w = 0; w < m->nwls; w++) {
		uint32_t n = 0;

		for (uint32_t i = 0; i < m->nwl_params; i++) {
			const struct proto_wl_param *p = &m->wl_params[i];

			if (strcmp(p->wl, m->wls[w].wl) != 0)
				continue;
			if (++n > CHIPD_MAX_PARAMS)
				return proto_fail(err, CHIPD_E_BAD_REQUEST,
						  "\"parameters\": %s has more than %d", p->wl,
						  CHIPD_MAX_PARAMS);
			for (uint32_t j = 0; j < i; j++)
				if (strcmp(m->wl_params[j].wl, p->wl) == 0 &&
				    strcmp(m->wl_params[j].key, p->key) == 0)
					return proto_fail(err, CHIPD_E_BAD_REQUEST,
							  "\"parameters\": %s.%s listed twice",
							  p->wl, p->key);
		}
	}
	for (uint32_t i = 0; i < m->nwl_params; i++) {
		uint32_t w = 0;

		while (w < m->nwls && strcmp(m->wls[w].wl, m->wl_params[i].wl) != 0)
			w++;
		if (w == m->nwls)
			return proto_fail(err, CHIPD_E_BAD_REQUEST,
					  "\"parameters[%u]\": workload \"%s\" is not listed",
					  (unsigned)i, m->wl_params[i].wl);
	}
	return CHIPD_OK;
}

static const struct field workloads_req_f[] = {
    F_INT("from", false, 1, U32_MAX, 0, MSG(from)),
};
SCHEMA(workloads_req, "workloads request", NULL);

static const struct field workloads_ans_f[] = {
    F_LIST("workloads", FT_RECS, true, CHIPD_MAX_WORKLOADS, MSG(wls), MSG(nwls), &wl_rec),
    F_LIST("parameters", FT_RECS, true, PROTO_MAX_WL_PARAMS, MSG(wl_params), MSG(nwl_params),
	   &wl_param_rec),
    F_INT("more", false, 1, U32_MAX, 0, MSG(more)),
};
SCHEMA(workloads_ans, "workloads answer", workloads_check);

/* The largest workloads answer in msgpack bytes: per record a map header, then per
 * field its key (with its header) and its value (a string with its header, str8 for
 * a doc; an int at most 9 bytes: keys of up to 7 bytes, then the counts' of up to 9);
 * the top map's keys and array headers in the slack of 64. About 32 KiB. */
#define WL_REC_MAX                                                                                 \
	(1 + (3 + 1 + CHIPD_NAME_MAX - 1) + (4 + 2 + CHIPD_DOC_MAX - 1) + 3 * (8 + 9) +            \
	 5 * (10 + 9))
#define WLP_REC_MAX                                                                                \
	(1 + (3 + 1 + CHIPD_NAME_MAX - 1) + (4 + 1 + CHIPD_KEY_MAX - 1) + (8 + 9) + (4 + 9) +      \
	 (4 + 9) + (4 + 2 + CHIPD_DOC_MAX - 1))
_Static_assert(64 + CHIPD_MAX_WORKLOADS * WL_REC_MAX + PROTO_MAX_WL_PARAMS * WLP_REC_MAX <=
		   PROTO_RESP_MAX,
	       "the largest workloads answer fits a response slot");
_Static_assert(sizeof(((struct proto_msg *)0)->wls) + sizeof(((struct proto_msg *)0)->wl_params) <=
		   sizeof(((struct proto_msg *)0)->stats),
	       "the workloads lists fit in the stats storage they share");

/* A callable's path is absolute. */
static enum chipd_code path_check(const void *obj, struct proto_error *err)
{
	const struct proto_msg *m = obj;

	if (m->path[0] != '/')
		return proto_fail(err, CHIPD_E_BAD_REQUEST, "\"path\": must be absolute");
	return CHIPD_OK;
}

#define PATH_REQ F_STR("path", true, CS_ANY, 1, PROTO_PATH_MAX - 1, MSG(path))
#define WL_OPT	 F_STR("wl", false, CS_IDENT, 1, CHIPD_NAME_MAX - 1, MSG(wl))

static const struct field register_req_f[] = {PATH_REQ, WL_OPT};
SCHEMA(register_req, "register request", path_check);

static const struct field register_ans_f[] = {
    WL_REQ,
    F_INT("version", false, 0, UINT32_MAX, 0, MSG(version)),
};
SCHEMA(register_ans, "register answer", NULL);

static const struct field unregister_req_f[] = {
    WL_REQ,
    F_ENUM("mode", false, unreg_modes, 0, 3, 0, MSG(mode)),
};
SCHEMA(unregister_req, "unregister request", NULL);

static const struct field unregister_ans_f[] = {
    F_INT("active", false, 1, U32_MAX, 0, MSG(active)),
};
SCHEMA(unregister_ans, "unregister answer", NULL);

static const struct field load_req_f[] = {PATH_REQ, WL_REQ};
SCHEMA(load_req, "load request", path_check);

static const struct field wl_only_f[] = {WL_REQ};
SCHEMA(wl_only, "unload request", NULL);

/* The handshake's answer: who the supervisor says the client is, and the client's
 * bounds (docs/protocol.md §9). */
static const struct field hello_ans_f[] = {
    F_INT("client", true, 1, ID_MAX, 0, MSG(client)),
    F_INT("pid", true, 1, PID_MAX, 0, MSG(pid)),
    F_INT("max_pending", true, 1, RING_MAX + 1, 0, MSG(max_pending)),
    F_INT("max_rings", true, 1, RING_MAX + 1, 0, MSG(max_rings)),
};
SCHEMA(hello_ans, "hello answer", NULL);

static const struct field assign_req_f[] = {
    ID_REQ,
    WL_REQ,
    PARAMS_OPT,
    TOKENS_OPT,
    F_INT("deadline_ns", false, 1, INT64_MAX, 0, MSG(deadline_ns)),
    RING_REQ,
    RGEN_REQ,
    F_INT("client", true, 1, PID_MAX, 0, MSG(client)),
    F_INT("region", true, 0, REGION_MAX, 0, MSG(region)),
    INPUT_OPT,
    DATA_OPT,
};
SCHEMA(assign_req, "assign request", data_check);

static const struct field heartbeat_req_f[] = {
    F_INT("seq", true, 0, INT64_MAX, 0, MSG(seq)),
};
SCHEMA(heartbeat_req, "heartbeat request", NULL);

static const struct field heartbeat_ans_f[] = {
    F_INT("seq", true, 0, INT64_MAX, 0, MSG(seq)),
    COUNT_REQ(queued),
    COUNT_REQ(active),
    F_INT("o_err", true, -4095, 0, 0, MSG(o_err)),
    F_INT("s_err", true, -4095, 0, 0, MSG(s_err)),
    F_INT("o_rounds", true, 0, INT64_MAX, 0, MSG(o_rounds)),
    F_INT("s_rounds", true, 0, INT64_MAX, 0, MSG(s_rounds)),
    COUNT_REQ(epochs),
    /* the loader's fill in progress, if any: for how long, and whose */
    F_INT("fill_ms", false, 1, INT64_MAX, 0, MSG(fill_ms)),
    F_INT("fill_id", false, 1, ID_MAX, 0, MSG(fill_id)),
};
SCHEMA(heartbeat_ans, "heartbeat answer", NULL);

const struct op_desc proto_op_table[PROTO_NOPS] = {
    [PROTO_OP_NONE] = {NULL, NULL, NULL},
    [PROTO_OP_PING] = {"ping", &no_fields_req, &ping_ans},
    [PROTO_OP_SUBMIT] = {"submit", &submit_req, &submit_ans},
    [PROTO_OP_CANCEL] = {"cancel", &cancel_req, &id_ans},
    [PROTO_OP_STATUS] = {"status", &no_fields_req, &status_ans},
    [PROTO_OP_STATS] = {"stats", &stats_req, &stats_ans},
    [PROTO_OP_DRAIN] = {"drain", &grace_req, &no_fields_ans},
    [PROTO_OP_STOP] = {"stop", &grace_req, &no_fields_ans},
    [PROTO_OP_TRACE] = {"trace", &trace_req, &trace_ans},
    [PROTO_OP_WORKLOADS] = {"workloads", &workloads_req, &workloads_ans},
    [PROTO_OP_REGISTER] = {"register", &register_req, &register_ans},
    [PROTO_OP_UNREGISTER] = {"unregister", &unregister_req, &unregister_ans},
    [PROTO_OP_HELLO] = {"hello", &no_fields_req, &hello_ans},
    [PROTO_OP_ASSIGN] = {"assign", &assign_req, &id_ans},
    [PROTO_OP_HEARTBEAT] = {"heartbeat", &heartbeat_req, &heartbeat_ans},
    [PROTO_OP_SHUTDOWN] = {"shutdown", &grace_req, &no_fields_ans},
    [PROTO_OP_LOAD] = {"load", &load_req, &no_fields_ans},
    [PROTO_OP_UNLOAD] = {"unload", &wl_only, &no_fields_ans},
};

static const struct field error_f[] = {
    F_ENUM("code", true, proto_code_names, 1, CHIPD_NCODES - 1, 0, ERR(code)),
    F_STR("message", true, CS_ANY, 0, CHIPD_MSG_MAX - 1, ERR(message)),
    F_BOOL("retryable", ERR(retryable)),
    F_INT("request", false, 1, ID_MAX, 0, ERR(request)),
    F_INT("chip", false, 0, CHIP_MAX, -1, ERR(chip)),
};
const struct schema proto_error_schema = {"error", error_f, ARRAY_LEN(error_f), 0, NULL};

static const struct field envelope_f[] = {
    {.key = "error", .type = FT_MAP, .required = true, .off = MSG(err), .sub = &proto_error_schema},
};
const struct schema proto_envelope_schema = {"error envelope", envelope_f, 1, 0, NULL};
