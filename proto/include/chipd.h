/* chipd.h - libchipd, the client library of chipd: connect to a node's supervisor,
 * submit work, read its tokens as they are produced, cancel, ask for status,
 * counters and the workloads it runs.
 *
 * A connection maps the node region "/chipd.<uid>.<instance>" that the supervisor
 * created; requests travel through the region's client mailbox as msgpack
 * (docs/protocol.md §8 is the wire contract), tokens come back through a token ring
 * of the same region.
 *
 * Conventions:
 * - Every call returns 0 or a negative errno. When @err is not NULL a failing call
 *   fills it: the errno again, the protocol error code when there is one (the
 *   server's error envelope, or the code a local failure maps to), whether retrying
 *   may succeed, and a one-line message.
 * - A server's error envelope is returned as -EREMOTEIO with @err filled from it.
 * - Every call that waits for the supervisor has a timeout in milliseconds (0: do not
 *   wait beyond a brief spin). A round trip through the supervisor needs more than
 *   that spin (its router sleeps when idle), so a call given 0 usually ends
 *   -ETIMEDOUT (-EPIPE when the supervisor is gone, whatever the timeout); 0 is for
 *   chipd_stream_next (a poll) and chipd_stream_close (no wait). A call that gives
 *   up resets its mailbox slot through the acknowledged-reset path, so the slot is
 *   never lost.
 * - A connection may be used by several threads at once. A stream is read by one
 *   thread at a time (calls on one stream are serialized by a lock).
 */
#ifndef CHIPD_H
#define CHIPD_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The protocol's error codes: a closed set with stable numbers (they also travel in
 * token ring records) and stable names (chipd_code_name). */
enum chipd_code {
	CHIPD_OK = 0,
	CHIPD_E_BAD_REQUEST = 1,
	CHIPD_E_UNSUPPORTED_VERSION = 2,
	CHIPD_E_TOO_LARGE = 3,
	CHIPD_E_QUEUE_FULL = 4,
	CHIPD_E_NO_CAPACITY = 5,
	CHIPD_E_DUPLICATE_ID = 6,
	CHIPD_E_NOT_FOUND = 7,
	CHIPD_E_CANCELLED = 8,
	CHIPD_E_DRAINING = 9,
	CHIPD_E_WORKER_LOST = 10,
	CHIPD_E_DEVICE_ERROR = 11,
	CHIPD_E_TIMEOUT = 12,
	CHIPD_E_INTERNAL = 13,
	/* the node's supervisor is gone and nobody will end the stream: libchipd
	 * reports it for a stream (never sent by chipd; a call to a gone supervisor
	 * fails -EPIPE without a code); retry once the node is back */
	CHIPD_E_NODE_LOST = 14,
};
#define CHIPD_NCODES 15

#define CHIPD_MSG_MAX	   160 /* bytes of an error message, NUL included */
#define CHIPD_NAME_MAX	   32  /* workload names, NUL included */
/* a callable's name (chipd_register, chipd_unregister), NUL included: chipd loads
 * callables named by 1..23 characters of [a-z0-9_] (docs/callables.md) */
#define CHIPD_CALLABLE_NAME_MAX 24
#define CHIPD_KEY_MAX	   24  /* parameter names, NUL included */
#define CHIPD_MAX_PARAMS   16
#define CHIPD_MAX_CHIPS	   64
#define CHIPD_TIMEOUT_MS   5000u /* a reasonable default for calls */
#define CHIPD_INSTANCE_MAX 48
#define CHIPD_PAYLOAD_MAX  24 /* bytes of a token's payload (a callable's payload_bytes) */
#define CHIPD_INPUT_INLINE_MAX 1024 /* input bytes a submit carries inline */
#define CHIPD_INPUT_MAX	       (1u << 20) /* input bytes of a request */
#define CHIPD_OUTPUT_MAX       (1u << 20) /* output bytes of a request */

/* The page size of the workloads answer: a supervisor lists at most this many per
 * answer, and chipd_workloads asks for the next page until it has them all (a node
 * may hold up to chipd --max-callables). */
#define CHIPD_MAX_WORKLOADS 8	/* workloads in one answer */
#define CHIPD_DOC_MAX	    128 /* a one-line description, NUL included */

/* A failure, local or from the server's error envelope. */
struct chipd_error {
	int errnum;	      /* the negative errno the call returned */
	enum chipd_code code; /* CHIPD_OK when the failure has no protocol code */
	bool retryable;
	bool has_request, has_chip;
	uint64_t request;
	uint32_t chip;
	char message[CHIPD_MSG_MAX];
};

/* The stable name of @code ("bad_request", ...), or "unknown". */
const char *chipd_code_name(enum chipd_code code);

/* Whether a request that failed with @code may succeed if sent again unchanged. */
bool chipd_code_retryable(enum chipd_code code);

typedef struct chipd_conn chipd_conn;
typedef struct chipd_stream chipd_stream;

/* Attaches to the node region of @instance (NULL: $CHIPD_INSTANCE, then
 * $SLURM_JOB_ID, then "default", as chipd_resolve_instance), validates it and says
 * hello on the node's handshake socket (docs/protocol.md §9): the supervisor learns
 * this process's identity from the kernel, and the connection (close-on-exec) stays
 * open until chipd_close. The supervisor answers requests only from a process with
 * such a connection, and reclaims everything the process holds (mailbox slots,
 * requests, rings) when its last connection closes or it exits. A forked child does
 * not share the parent's connection: it must call chipd_connect itself before any
 * request (a handle inherited across fork is refused by the supervisor). Returns 0
 * and *@out, or -ENOENT no such instance, -EPERM / -EACCES the region belongs to
 * another user or is readable by others (-EACCES also: the socket's server is not the
 * region's creator, an impostor), -EPROTONOSUPPORT a layout version this library does
 * not speak (the message says which release to use), -ESTALE / -ESHUTDOWN the
 * supervisor is not running, -EAGAIN it is still starting, -EBADMSG / -EMSGSIZE /
 * -EPROTOTYPE not a valid node region (-EMEDIUMTYPE: not even a regular file, e.g. a
 * FIFO left under its name), -EREMOTEIO the supervisor refused the hello
 * (@err's code: queue_full when it serves --max-clients connections already),
 * -ETIMEDOUT no answer within CHIPD_TIMEOUT_MS, -EINVAL a bad instance name (or an
 * unknown $CHIPD_USER), -ENOMEM, or the -errno of the socket calls.
 * The node is the one of the caller's own uid, or of the user $CHIPD_USER names (a
 * user name or a uid: a chipd that runs as its own account and lets a group in with
 * --allow-group; -EACCES when the caller is not in that group). */
int chipd_connect(const char *instance, chipd_conn **out, struct chipd_error *err);

/* chipd_connect, waiting up to @timeout_ms (not CHIPD_TIMEOUT_MS) for the handshake
 * (the connection, then the answer to the hello): -ETIMEDOUT (code timeout, retryable)
 * when it did not come in time, e.g. from a stopped or hung supervisor, also one whose
 * socket's backlog is full. Otherwise the same returns as chipd_connect. */
int chipd_connect_timeout(const char *instance, uint32_t timeout_ms, chipd_conn **out,
			  struct chipd_error *err);

/* Attaches like chipd_connect without the handshake: for monitoring, the handle reads
 * counters (chipd_stats) and nothing else; every call that sends a request fails with
 * -ENOTCONN. Same returns as chipd_connect, less those of the handshake. */
int chipd_connect_monitor(const char *instance, chipd_conn **out, struct chipd_error *err);

/* The instance chipd_connect(@instance) would attach to, without attaching:
 * @instance when not NULL, else $CHIPD_INSTANCE, else $SLURM_JOB_ID (a variable set
 * to "" counts as unset), else "default". Returns 0 with the name in @out
 * (CHIPD_INSTANCE_MAX bytes), or -EINVAL when the name is not 1..47 characters of
 * [A-Za-z0-9._-] (an explicit "" included): @err's message names it, the variable it
 * came from and what is wrong; also -EINVAL when $CHIPD_USER names no user. For a CLI
 * that checks its options before acting. */
int chipd_resolve_instance(const char *instance, char *out, struct chipd_error *err);

/* Unmaps the region and frees @c. Streams of @c must be closed first. NULL is
 * allowed. */
void chipd_close(chipd_conn *c);

/* The instance name @c is attached to. */
const char *chipd_instance(const chipd_conn *c);

/* Asks the supervisor to answer; *@pid (may be NULL) receives its pid. */
int chipd_ping(chipd_conn *c, uint32_t timeout_ms, uint32_t *pid, struct chipd_error *err);

struct chipd_param {
	const char *key; /* 1..23 characters of [a-z0-9_] */
	int64_t value;
};

struct chipd_request {
	const char *workload; /* 1..31 characters of [a-z0-9_] */
	const struct chipd_param *params;
	uint32_t nparams; /* 0..CHIPD_MAX_PARAMS */
	/* 0: the supervisor chooses; else 1..2^63-1, unique while held: from the submit
	 * until its end was read or its stream closed (duplicate_id meanwhile) */
	uint64_t id;
	int32_t chip;	      /* -1 (any negative value): any chip */
	uint32_t max_tokens;  /* 0: the workload's default */
	uint32_t deadline_ms; /* 0: none; else the request fails with timeout after this */
	/* The request's input bytes (NULL and 0: none), at most the callable's input_max
	 * and CHIPD_INPUT_MAX (docs/callables.md, "Data in and out"): up to
	 * CHIPD_INPUT_INLINE_MAX bytes go inside the submit, longer input is copied into
	 * the connection's data area (chipd --client-data-kib); chipd_submit is done with
	 * them when it returns. */
	const void *input;
	uint32_t input_len;
	/* Room for the request's output, 0..CHIPD_OUTPUT_MAX bytes (0: none): a range of
	 * the data area, held until the stream is closed (chipd_stream_close) after its
	 * end was read or seen by the close; chipd_stream_output reads it. */
	uint32_t output_cap;
};

/* Submits @req. Returns 0 with the request id in *@id and an open stream in
 * *@stream (close it with chipd_stream_close), or a failure: -EREMOTEIO with the
 * server's error, -EAGAIN every mailbox slot busy (queue_full), -ETIMEDOUT, -EPIPE
 * the supervisor died, -ECONNRESET the slot was taken back (no code, retryable: the
 * supervisor restarted and dropped it, or no longer serves this connection),
 * -EINVAL (bad_request, nothing was sent) a malformed @req, or input or output that
 * needs the data area on a node without one (chipd --client-data-kib 0), or that can
 * never fit it (this request's input and output together exceed it), -ENOSPC
 * (no_capacity, retryable) no free range of the data area for its input or output
 * now (this process's other requests hold it; the message says how much each part
 * holds), -EPROTO (internal) the answer named a ring that is not this stream's, or
 * another -errno a ring this process cannot attach: the request was admitted, and is
 * cancelled (best effort, within what is left of @timeout_ms: the call returns within
 * it, whatever the supervisor does). All memory the call needs is taken
 * before the submit is sent. The data area's ranges of a submit whose fate is unknown
 * (-ETIMEDOUT, -EPIPE, -ECONNRESET, a forward given up) stay held until chipd_close,
 * as do the output range of a submit admitted but not opened and that of a stream
 * closed before its end was seen: a worker may still use them. */
int chipd_submit(chipd_conn *c, const struct chipd_request *req, uint32_t timeout_ms, uint64_t *id,
		 chipd_stream **stream, struct chipd_error *err);

struct chipd_token {
	uint64_t request;
	uint32_t seq; /* 0, 1, 2, ... */
	bool final;   /* the last token of a completed request */
	uint64_t value;
	uint64_t ts_ns; /* CLOCK_MONOTONIC when the worker published it */
	/* The callable's bytes beside the token: payload_len (its payload_bytes,
	 * 0..CHIPD_PAYLOAD_MAX) of payload. */
	uint32_t payload_len;
	uint8_t payload[CHIPD_PAYLOAD_MAX];
	/* With final: the bytes of output the request wrote (0 when it asked for none). */
	uint32_t out_len;
};

/* The next token of @s, in order, waiting up to @timeout_ms. Returns 0 with *@tok
 * (tok->final marks the last one), -EREMOTEIO when the stream ended with an error
 * (@err holds its code and the request; returned once), -ENODATA once the stream has
 * ended and everything was read (its final token or its error), -ETIMEDOUT (code
 * timeout) when nothing came within @timeout_ms
 * — also while a dead worker's stream waits for the supervisor to end it or move it
 * to another chip; the stream goes on, and the next call continues it —, -EPIPE (code
 * node_lost) when the request is lost: the supervisor is gone and no live worker
 * produces the stream, so nobody ever will (noticed within about 20 ms, also by a
 * reader that polls with @timeout_ms 0); -EBADMSG (code internal) for a record no
 * worker writes (a payload_len over CHIPD_PAYLOAD_MAX, or a final out_len over the
 * output_cap asked for): nothing more is read, and a record that was no end leaves the
 * request to chipd_stream_close, which stops it; -ESTALE when the ring was given to another
 * stream (the supervisor took it back, docs/protocol.md 5.7; also during a wait: no
 * record of another stream is ever returned as this one's token). */
int chipd_stream_next(chipd_stream *s, struct chipd_token *tok, uint32_t timeout_ms,
		      struct chipd_error *err);

/* The output of @s's request, once its final token was read: copies it into @buf
 * (@cap bytes) and its length into *@len. Returns 0, -ENODATA when the request asked
 * for no output (output_cap 0) or its stream ended with an error (it has none), -EAGAIN
 * while neither the final token nor the error has been read, -ENOSPC when @cap is too
 * small (*@len says how much is needed). */
int chipd_stream_output(chipd_stream *s, void *buf, uint32_t cap, uint32_t *len,
			struct chipd_error *err);

/* The request id of @s. */
uint64_t chipd_stream_id(const chipd_stream *s);

/* How long chipd_stream_next spins (checking the ring without a system call) before
 * it sleeps on the ring's futex; default 50 us. A reader that wants each token the
 * moment it is published, and can spare a CPU for it, sets this up to its timeout
 * (a futex wake costs tens of microseconds; a spinning reader sees a token within a
 * cache-line transfer). 0 sleeps at once. */
void chipd_stream_set_spin(chipd_stream *s, uint32_t spin_us);

/* Closes @s and frees it; NULL is allowed. If the end of the stream has not been
 * read, the ring is marked closed at once, whatever @timeout_ms is (0 included): a
 * request still running is then ended cancelled by its worker at the worker's next
 * scheduling round after the steps it has in flight, even when no call to the
 * supervisor gets through; a cancel call is also made, best effort, within
 * @timeout_ms. Nothing reads the ring after that: the supervisor gives it to another
 * stream once the request has ended. What is left of @timeout_ms waits for that end,
 * so after a close given the time, the request's id may be submitted again at once.
 * A stream of a lost node (the supervisor gone and no live worker producing it, as
 * chipd_stream_next's -EPIPE says) closes at once: nobody would answer the cancel or
 * end the stream. */
void chipd_stream_close(chipd_stream *s, uint32_t timeout_ms);

/* Cancels request @id. Returns 0 (the stream will end with "cancelled"),
 * -EREMOTEIO (not_found, ...), or the call's failures. */
int chipd_cancel(chipd_conn *c, uint64_t id, uint32_t timeout_ms, struct chipd_error *err);

/* Supervisor and worker states, as in the node region and the status answer. */
enum chipd_sup_state {
	CHIPD_SUP_STARTING = 1,
	CHIPD_SUP_READY = 2,
	CHIPD_SUP_DRAINING = 3,
	CHIPD_SUP_STOPPED = 4,
};
enum chipd_chip_state {
	CHIPD_CHIP_EMPTY = 0,
	CHIPD_CHIP_STARTING = 1,
	CHIPD_CHIP_READY = 2,
	CHIPD_CHIP_DRAINING = 3,
	CHIPD_CHIP_BACKOFF = 4, /* died; waiting to be restarted */
	CHIPD_CHIP_FAILED = 5,	/* died too often; not restarted */
	CHIPD_CHIP_STOPPED = 6,
	/* its scheduler or orchestrator gave up or stopped progressing: routed no work,
	 * being killed and restarted like a worker that died */
	CHIPD_CHIP_DEGRADED = 7,
};
const char *chipd_sup_state_name(enum chipd_sup_state s);
const char *chipd_chip_state_name(enum chipd_chip_state s);

struct chipd_chip_status {
	uint32_t chip;
	enum chipd_chip_state state;
	uint32_t pid;
	int32_t gpu; /* -1: simulated */
	uint32_t restarts;
	uint32_t queued; /* admitted, waiting in the worker's queue (its queue_depth) */
	uint32_t active; /* being run by the worker (its active) */
};

struct chipd_status {
	enum chipd_sup_state state;
	uint32_t pid;
	uint64_t uptime_ms;
	uint32_t nchips;
	struct chipd_chip_status chips[CHIPD_MAX_CHIPS];
};

/* Asks the supervisor for its state and every worker's. */
int chipd_status(chipd_conn *c, uint32_t timeout_ms, struct chipd_status *out,
		 struct chipd_error *err);

struct chipd_stat {
	char block[16]; /* "supervisor", "chip0", ... */
	char name[56];
	bool gauge; /* false: a counter (only grows) */
	uint64_t value;
};

/* Reads every counter of the node region directly from shared memory (no round trip,
 * no lock: it works even while the supervisor is busy); docs/protocol.md §8.1 says
 * what each one counts. Fills up to @cap entries of @out and sets *@n to how many
 * exist. Returns 0, or -ENOBUFS when @cap was too small (the first @cap are filled).
 * Every counter block was validated when @c connected (chipd_connect: -EBADMSG for a
 * corrupt one); each read copies a name once and cuts it, and an unknown kind reads as a
 * counter, so a block a peer overwrote since gives odd entries, never an error. */
int chipd_stats(chipd_conn *c, struct chipd_stat *out, uint32_t cap, uint32_t *n,
		struct chipd_error *err);

/* Asks the supervisor to refuse new work, finish what it has (within @grace_ms; 0:
 * its --grace-ms; a request still running then ends cancelled), and then stop: end
 * its workers and exit, as chipd_stop does (a drain is a stop that says so: chipd(8)).
 * Returns once the supervisor took the request; later calls on @c fail -EPIPE once
 * it is gone. */
int chipd_drain(chipd_conn *c, uint32_t grace_ms, uint32_t timeout_ms, struct chipd_error *err);

/* Asks the supervisor to stop (drain, then end the workers and exit). */
int chipd_stop(chipd_conn *c, uint32_t grace_ms, uint32_t timeout_ms, struct chipd_error *err);

/* What chipd_trace asks the supervisor to do with the workers' span recorders. */
enum chipd_trace_act {
	CHIPD_TRACE_START = 1,	 /* clear and start recording */
	CHIPD_TRACE_STOP = 2,	 /* stop recording (what was recorded stays) */
	CHIPD_TRACE_COLLECT = 3, /* write what was recorded to @path */
};

/* Sends a trace action @act (enum chipd_trace_act). @path is required with
 * CHIPD_TRACE_COLLECT and must be NULL otherwise: an absolute path of at most 255
 * bytes where the supervisor writes Chrome trace JSON (it writes it, so it must be
 * able to). *@events and *@dropped (each may be NULL) receive the spans written and
 * the spans lost to full rings, 0 when the answer has none. Returns 0, -EINVAL a bad
 * @act or @path (nothing was sent), -EREMOTEIO with the server's error, or the
 * call's failures. */
int chipd_trace(chipd_conn *c, int act, const char *path, uint32_t timeout_ms, uint64_t *events,
		uint64_t *dropped, struct chipd_error *err);

/* One parameter a workload takes: what a submit's params may set. */
struct chipd_wl_param {
	char key[CHIPD_KEY_MAX];
	int64_t def;		 /* its value when the request does not set it */
	int64_t min, max;	 /* the inclusive range a request's value must be in */
	char doc[CHIPD_DOC_MAX]; /* one line: its meaning, and rules tying it to others */
};

/* A workload the supervisor runs, and its parameters in the workload's order. */
struct chipd_workload {
	char name[CHIPD_NAME_MAX];
	char doc[CHIPD_DOC_MAX]; /* one line: what a step computes */
	uint32_t nparams;	 /* 0..CHIPD_MAX_PARAMS */
	struct chipd_wl_param params[CHIPD_MAX_PARAMS];
	/* the callable's own version (docs/callables.md); 0 when the supervisor did not
	 * say */
	uint32_t version;
	uint64_t chips;	 /* bit i: loaded on chip i (0 when the supervisor did not say) */
	uint32_t active; /* its requests in flight */
	/* Counted by the supervisor since the callable was loaded (chipd's start, or
	 * its registration; docs/callables.md, "Counters"): its requests a worker
	 * admitted; of those, the streams that ended final, with an error other than
	 * cancelled, and cancelled; and the tokens of the ended streams. 0 when the
	 * supervisor did not say. */
	uint64_t requests, completed, failed, cancelled, tokens;
};

/* Asks the supervisor which workloads it runs and what parameters each takes (the
 * table its validator checks a submit against). Fills up to @cap entries of @out, in
 * the supervisor's order, and sets *@n to how many it has (the answer comes in pages
 * of at most CHIPD_MAX_WORKLOADS; an entry is about 3 KiB; @timeout_ms bounds them
 * all, -ETIMEDOUT when the list did not end in time). Returns 0, -ENOBUFS when @cap was
 * too small (the first @cap are filled), -EPROTO for a malformed answer (among the
 * rest: a parameter of a workload it did not list, or more than CHIPD_MAX_PARAMS for
 * one workload), -EREMOTEIO with the server's error, or the call's failures. */
int chipd_workloads(chipd_conn *c, uint32_t timeout_ms, struct chipd_workload *out, uint32_t cap,
		    uint32_t *n, struct chipd_error *err);

/* Registers the callable at @path (absolute, at most 255 bytes; a file of the
 * supervisor's machine, owned by root or chipd's user and not writable by group or
 * others, in a directory that is neither) on every chip, under @name (NULL: the name its table gives), all or
 * nothing: when a chip refuses it, the chips that loaded it unload it again and the
 * error is that chip's (err->chip set). *@name_out (CHIPD_NAME_MAX bytes, may be NULL)
 * receives the name and *@version (may be NULL) its version. Returns 0, -EINVAL for a
 * bad @path or @name (nothing was sent), -EREMOTEIO with the server's error
 * (bad_request: the file or its table refused, or the name taken; no_capacity: the
 * registry is full; worker_lost: a chip died or did not answer), or the call's
 * failures. docs/callables.md, "Registration". */
int chipd_register(chipd_conn *c, const char *path, const char *name, uint32_t timeout_ms,
		   char *name_out, uint32_t *version, struct chipd_error *err);

/* What chipd_unregister does with the requests of the name still in flight. */
enum chipd_unregister_mode {
	CHIPD_UNREGISTER_REFUSE = 0, /* refuse (bad_request naming them) */
	CHIPD_UNREGISTER_DRAIN = 1,  /* refuse new ones, wait for these to end */
	CHIPD_UNREGISTER_CANCEL = 2, /* refuse new ones, cancel these, wait for the end */
};

/* Unregisters the callable registered (chipd_register) as @name from every chip. With
 * DRAIN or CANCEL it waits up to @timeout_ms for the name's requests to end; when
 * they did not, the name takes requests again and the error is timeout, naming how
 * many are left. Returns 0, -EINVAL for a bad @name or @mode, -EREMOTEIO with the
 * server's error (not_found: no such registered callable; bad_request: requests in
 * flight with CHIPD_UNREGISTER_REFUSE, or a callable loaded at start), -ETIMEDOUT
 * (code timeout, retryable) when the requests did not end within @timeout_ms (this
 * library's own wait: the message says how many are left), also in any mode when a
 * chip whose worker lives did not unload it in time (the name then takes no new
 * requests, and goes once unloaded: call again, or close the connection, and chipd
 * finishes it), or the call's failures. Every ask shares the one @timeout_ms; giving a
 * drain up (the name takes requests again) may take up to 2 s more (the supervisor's
 * forward bound, a router held by a chip that does not answer): the call returns within
 * @timeout_ms + 2 s whatever the supervisor does. When even that got no answer (a
 * stopped supervisor), the message says so: the name may still refuse new requests
 * until a later call gives the drain up or completes it. */
int chipd_unregister(chipd_conn *c, const char *name, int mode, uint32_t timeout_ms,
		     struct chipd_error *err);

#ifdef __cplusplus
}
#endif

#endif
