/* proto.h - chipd's wire format: every message as one struct, a table-driven msgpack
 * codec, the one error envelope, and the op -> handler table.
 *
 * Every message is a msgpack map with short string keys and "v": 1. A request names
 * its op ("op": "submit"); an answer is {"v":1,"ok":true, <the op's answer keys>} or
 * the error envelope {"v":1,"ok":false,"error":{"code","message","retryable",
 * "request"?,"chip"?}}. docs/protocol.md §8 is the normative catalogue.
 *
 * Each op has two schemas (request, answer): per key its msgpack type, whether it is
 * required, its range, and where it lives in struct proto_msg. Decoding and encoding
 * walk those tables, so every op is validated the same way and every error names
 * the offending field. An optional field that is absent holds its default (outside
 * its valid range: 0 for ids and limits, -1 for chips), and the encoder leaves out a
 * field that holds its default; absent and default are one state.
 *
 * Decoding uses a bounded pull reader (no allocation at all: every container count is
 * walked one element at a time, and each element consumes at least one input byte)
 * rather than msgpack-c's object unpacker, which reserves count * 24 bytes for a
 * declared container before reading it (5 input bytes can ask for 8 GiB). Encoding
 * uses msgpack-c's packer, writing straight into the caller's buffer (a mailbox slot)
 * and failing with too_large when it does not fit.
 */
#ifndef CHIPD_PROTO_H
#define CHIPD_PROTO_H

#include "chipd.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION 1
/* A request never needs more than a page: the largest, submit with 16 parameters of
 * 23-byte names and 1024 bytes of inline input, is under 1800 bytes. */
#define PROTO_REQ_MAX 4096u
/* An answer fits in 64 KiB: the largest, stats with 512 counters, is about 40 KiB. */
#define PROTO_RESP_MAX 65536u
/* Input bytes a submit (and its assign) may carry inline, as msgpack bin ("input"). */
#define PROTO_INPUT_INLINE_MAX 1024u
/* A request's input and output bytes in its client's data area (input_len,
 * output_cap): chipd_callable.h's CHIPD_CL_INPUT_MAX and CHIPD_CL_OUTPUT_MAX. */
#define PROTO_INPUT_MAX	 (1u << 20)
#define PROTO_OUTPUT_MAX (1u << 20)
/* Containers nest at most this deep (status answer: map > chips array > chip map). */
#define PROTO_MAX_DEPTH 4
/* The stats answer's pairs: every counter of a node of CHIPD_MAX_CHIPS chips (the
 * supervisor's 25 and 64 blocks of 16; sup_router.c asserts it), with room for more. */
#define PROTO_MAX_STATS 1088
#define PROTO_STAT_KEY	64  /* "block.name", NUL included */
#define PROTO_PATH_MAX	256 /* trace output path, NUL included */
/* The workloads answer: up to CHIPD_MAX_WORKLOADS workloads of up to
 * CHIPD_MAX_PARAMS parameters each, one line of text (CHIPD_DOC_MAX) apiece. At its
 * largest it is about 32 KiB (schema.c proves it fits PROTO_RESP_MAX). */
#define PROTO_MAX_WL_PARAMS (CHIPD_MAX_WORKLOADS * CHIPD_MAX_PARAMS)

enum proto_op {
	PROTO_OP_NONE = 0,
	/* client -> supervisor */
	PROTO_OP_PING,
	PROTO_OP_SUBMIT,
	PROTO_OP_CANCEL, /* also supervisor -> worker */
	PROTO_OP_STATUS,
	PROTO_OP_STATS,
	PROTO_OP_DRAIN,
	PROTO_OP_STOP,
	PROTO_OP_TRACE,
	PROTO_OP_WORKLOADS,
	PROTO_OP_REGISTER,
	PROTO_OP_UNREGISTER,
	/* client -> supervisor, on the handshake socket only (docs/protocol.md §9) */
	PROTO_OP_HELLO,
	/* supervisor -> worker */
	PROTO_OP_ASSIGN,
	PROTO_OP_HEARTBEAT,
	PROTO_OP_SHUTDOWN,
	PROTO_OP_LOAD,
	PROTO_OP_UNLOAD,
	PROTO_NOPS
};

/* unregister's "mode" (docs/protocol.md §8.4) */
enum proto_unreg_mode {
	PROTO_UNREG_NONE = 0,	/* refused while requests of the name are in flight */
	PROTO_UNREG_DRAIN = 1,	/* refuse new ones, unregister once they ended */
	PROTO_UNREG_CANCEL = 2, /* refuse new ones, cancel the live ones, then unregister */
	PROTO_UNREG_RESUME = 3, /* a drain given up: the name takes requests again */
};

enum proto_trace_act {
	PROTO_TRACE_START = 1,
	PROTO_TRACE_STOP = 2,
	PROTO_TRACE_COLLECT = 3,
};

struct proto_param {
	char key[CHIPD_KEY_MAX];
	int64_t value;
};

/* One worker in a status answer. */
struct proto_chip {
	int64_t chip, state, pid, gpu, restarts, queued, active;
};

struct proto_stat {
	char key[PROTO_STAT_KEY];
	uint64_t value;
};

/* One workload in a workloads answer. */
struct proto_wl {
	char wl[CHIPD_NAME_MAX];
	char doc[CHIPD_DOC_MAX];
	int64_t version; /* the callable's own version; 0 when absent */
	/* the chips it is loaded on (bit i: chip i, as a 64-bit two's complement
	 * integer) and its requests in flight; 0 when absent */
	int64_t chips, active;
	/* since it was loaded: its requests admitted, their streams ended final, with
	 * an error other than cancelled, and cancelled, and their tokens; 0 when
	 * absent */
	int64_t requests, completed, failed, cancelled, tokens;
};

/* One parameter of workload @wl in a workloads answer. */
struct proto_wl_param {
	char wl[CHIPD_NAME_MAX];
	char key[CHIPD_KEY_MAX];
	int64_t def, min, max;
	char doc[CHIPD_DOC_MAX];
};

/* The error envelope's "error" map. retryable is derived from code when encoding. */
struct proto_error {
	int64_t code; /* enum chipd_code */
	char message[CHIPD_MSG_MAX];
	bool retryable;
	int64_t request; /* 0: none */
	int64_t chip;	 /* -1: none */
};

/* Every message, requests and answers. Which fields an op uses is in its schemas
 * (docs/protocol.md §8.4); the others stay at their defaults. */
struct proto_msg {
	enum proto_op op;
	bool ok; /* answers: false means the error envelope, in err */
	struct proto_error err;
	/* submit, assign */
	char wl[CHIPD_NAME_MAX];
	uint32_t nparams;
	struct proto_param params[CHIPD_MAX_PARAMS];
	int64_t id, chip, max_tokens, deadline_ms, deadline_ns;
	int64_t ring, ring_gen, client;
	int64_t region; /* assign: the client region holding the ring's consumer line */
	/* submit, assign: input bytes given inline ("input", 0: none) */
	uint32_t input_inline_len;
	uint8_t input_inline[PROTO_INPUT_INLINE_MAX];
	/* submit, assign: ranges of the client's data area (docs/protocol.md §8.7): the
	 * input bytes (input_len 0: none) and where the output goes (output_cap 0:
	 * none); an offset is 0 when absent */
	int64_t input_off, input_len, output_off, output_cap;
	/* hello answers: the client's own bounds (docs/protocol.md §9) */
	int64_t max_pending, max_rings;
	/* drain, stop, shutdown */
	int64_t grace_ms;
	/* trace */
	int64_t act;
	char path[PROTO_PATH_MAX]; /* trace collect; register and load: the callable */
	/* register answer: the callable's version; unregister: enum proto_unreg_mode */
	int64_t version, mode;
	/* workloads: the first workload to list (request), how many follow the ones
	 * listed (answer) */
	int64_t from, more;
	int64_t events, dropped;
	/* ping, status, heartbeat answers */
	int64_t state, pid, uptime_ms, seq, queued, active;
	/* heartbeat answers: each worker thread's state (docs/protocol.md, heartbeat) */
	int64_t o_err, s_err, o_rounds, s_rounds, epochs;
	/* heartbeat answers: the fill the loader is in (0, 0: none) */
	int64_t fill_ms, fill_id;
	uint32_t nchips;
	struct proto_chip chips[CHIPD_MAX_CHIPS];
	/* stats; workloads */
	uint32_t nstats, nwls, nwl_params;
	/* Two answers' lists that never share a message share storage: every request
	 * clears a message, so a bigger one would cost every op. */
	union {
		struct proto_stat stats[PROTO_MAX_STATS];
		struct {
			struct proto_wl wls[CHIPD_MAX_WORKLOADS];
			struct proto_wl_param wl_params[PROTO_MAX_WL_PARAMS];
		};
	};
};

/* ---- error codes and the envelope ---- */

/* Sets @e to @code with a printf-style message (truncated to fit); request and chip
 * cleared. Returns @code, so a handler can `return proto_fail(err, ...)`. */
__attribute__((format(printf, 3, 4))) enum chipd_code
proto_fail(struct proto_error *e, enum chipd_code code, const char *fmt, ...);

/* Parses a stable code name; returns the code or -1. */
int proto_code_parse(const char *name, size_t len);

/* Builds THE error envelope for @e into @buf (@cap bytes): retryable comes from the
 * code, the message is shortened if it would not fit. Returns 0 and *@len, or
 * -EMSGSIZE when even an envelope with an empty message does not fit (about 60 bytes),
 * -EINVAL when @e->code is not an error code. The only function that writes
 * "ok": false. */
int proto_encode_error(const struct proto_error *e, void *buf, size_t cap, size_t *len);

/* ---- messages ---- */

/* The op's wire name ("submit"), or NULL for an unknown op. */
const char *proto_op_name(enum proto_op op);

/* Resets @m to every field's default (ids 0, chips -1, strings empty) and sets its
 * op. The answers' lists (stats, workloads) are cleared only for an op that has
 * them: a message reset for another op must not be turned into one of those. */
void proto_msg_init(struct proto_msg *m, enum proto_op op);

/* Encodes the request @m (m->op) into @buf. The fields are checked against the op's
 * schema first. Returns 0 and *@len, -EINVAL with @err (bad_request naming the
 * field) for a value out of range, -EMSGSIZE with @err (too_large) when @cap is too
 * small. */
int proto_encode_request(const struct proto_msg *m, void *buf, size_t cap, size_t *len,
			 struct proto_error *err);

/* Encodes the successful answer @m to an m->op request ({"v":1,"ok":true,...}). Same
 * returns as proto_encode_request. */
int proto_encode_answer(const struct proto_msg *m, void *buf, size_t cap, size_t *len,
			struct proto_error *err);

/* Decodes one request of @len bytes (at most PROTO_REQ_MAX) into @m. Reads nothing
 * outside [buf, buf + len), allocates nothing. Returns 0, or -EBADMSG with @err
 * holding bad_request, unsupported_version or too_large and a message that names the
 * field. The bytes must not change during the call (copy them out of shared memory
 * first). */
int proto_decode_request(const void *buf, size_t len, struct proto_msg *m, struct proto_error *err);

/* Decodes the answer to an @op request (at most PROTO_RESP_MAX bytes). Returns 0 with
 * m->ok true (the answer's fields) or false (the envelope in m->err), or -EBADMSG
 * with @err describing why the answer itself is malformed. */
int proto_decode_answer(enum proto_op op, const void *buf, size_t len, struct proto_msg *m,
			struct proto_error *err);

/* ---- handlers ---- */

/* What a handler's run step returns besides an error code: the answer will be sent
 * later (a worker answers `shutdown` once its threads are joined, after the grace).
 * proto_dispatch passes it on beside its own -errno returns, so it is neither a
 * chipd_code (those are >= 0) nor a -errno (those are >= -4095, Linux's MAX_ERRNO). */
#define PROTO_DEFERRED (-65536)

/* One op's handler. Every server (the supervisor's router, a worker) is a table of
 * these; proto_dispatch decodes, validates and answers the same way for all. */
struct proto_handler {
	enum proto_op op;
	/* Checks beyond the schema (the server's own limits). Returns CHIPD_OK or an
	 * error code with @err set. May be NULL. */
	enum chipd_code (*validate)(void *ctx, const struct proto_msg *req,
				    struct proto_error *err);
	/* Does the work: fills @ans (initialized for req->op) and returns CHIPD_OK, or
	 * returns an error code with @err set, or PROTO_DEFERRED. */
	int (*run)(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		   struct proto_error *err);
};

struct proto_server {
	const char *role; /* "supervisor", "worker": for the message of an op not served */
	const struct proto_handler *handlers;
	size_t nhandlers;
	/* Called once for every request answered with the error envelope, with its code,
	 * whichever step refused it (length, decoding, an op not served, validate, run,
	 * encoding the answer): the one place a server counts its refusals. May be
	 * NULL. */
	void (*refused)(void *ctx, enum chipd_code code);
};

/* Serves one request of @len bytes: copies it out of shared memory, decodes it,
 * finds its handler, validates, runs, and writes the answer or the error envelope
 * into @out (@cap bytes, normally the mailbox slot's response buffer). @req may be
 * NULL for a request whose @len bytes are not readable (longer than the slot): it is
 * answered too_large unread. Returns 0 with *@out_len set, PROTO_DEFERRED when the
 * handler will answer later (nothing written), or -EMSGSIZE if @cap cannot hold even
 * an error envelope. Calls srv->refused once for each error envelope. Uses about
 * 90 KiB of stack (two messages and the request copy). */
int proto_dispatch(const struct proto_server *srv, void *ctx, const void *req, size_t len,
		   void *out, size_t cap, size_t *out_len);

#endif
