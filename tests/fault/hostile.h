/* hostile.h - helpers of the hostile-client suites (check_hostile, check_hostile_fuzz):
 * good clients that stream synthetic requests in processes of their own and keep a
 * ledger of what they saw, the node's liveness (the same supervisor and worker
 * processes), a fresh client's checked round trip, and the parts of the node region
 * and of the exchange region by offset.
 *
 * The hostile writes themselves are the suites' own. Since node layout 3 a client can
 * write only the exchange region (the mailbox and the rings' consumer lines); the node
 * region is read-only to it. The suites still write the node region too, as root
 * through a read-write remapping (cd_node_make_writable): defence in depth against a
 * writer no client can be; those parts are skipped when not root. */
#ifndef CHIPD_HOSTILE_H
#define CHIPD_HOSTILE_H

#include "fault.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HS_TOKENS   16u	  /* tokens of a good client's request */
#define HS_CALL_MS  5000u /* a good client's submit timeout */
#define HS_STEP_MS  1000u /* a good client's wait for one token */
#define HS_SLACK_MS 3000u /* a call returning later than its timeout + this is a hang */
/* A good client's stream that has not ended after this is a hang: far above the
 * longest a broken ring waits to be taken back (protocol.md 5.7: the longer of
 * --stuck-ms and --progress-ms, 5 s by default, plus a tick). */
#define HS_STREAM_MS 30000u

/* The processes of a node: the supervisor and each chip's worker. */
struct hs_node {
	pid_t sup;
	pid_t worker[FT_MAX_CHIPS];
	uint32_t nchips;
};

/* What one good client saw, by outcome. Written by the client's process in shared
 * memory; read by the test after the client stopped (completed also while it runs). */
struct hs_ledger {
	uint64_t submits;		/* submit calls */
	uint64_t refused[CHIPD_NCODES]; /* answered with the error envelope, by code */
	uint64_t call_errors;		/* failed without an answer (-ETIMEDOUT, -EPIPE, ...) */
	uint64_t opened;		/* streams the submits opened */
	_Atomic uint64_t completed;	/* streams that ended FINAL with every right token */
	uint64_t ended[CHIPD_NCODES];	/* streams that ended with an ERROR record, by code */
	uint64_t lost;			/* streams that ended with a local error (-ESTALE, ...) */
	uint64_t garbled;		/* streams given up at a wrong token (value, seq, id) */
	uint64_t late;			/* calls that returned past their timeout + HS_SLACK_MS */
	uint64_t unended;		/* streams not ended within HS_STREAM_MS (closed) */
	uint64_t after_end;		/* reads after an end giving a token or a new end */
	char first[320];		/* the first outcome other than a completion */
};

/* A good client: a process of its own with its own connection, submitting synthetic
 * requests of HS_TOKENS tokens with a new seed each, reading each stream to its end and
 * checking every token against the workload's reference (docs/protocol.md 8.6). */
struct hs_client {
	pid_t pid;
	struct hs_shared *sh;
};

/* Starts good client @index on @d: its requests go to chip @chip, or alternate between
 * chips 0 and 1 when @chip is -1. Returns once it is connected. */
void hs_client_start(struct hs_client *c, struct cd *d, int chip, uint32_t index);

/* Waits up to @ms until @c completed @n more streams than when called, checking that
 * the processes of @node (may be NULL) live meanwhile; fails the tcase (naming @why)
 * otherwise. */
void hs_client_progress(struct hs_client *c, const struct hs_node *node, uint64_t n, unsigned ms,
			const char *why);

/* Tells @c to stop after its current stream and reaps it: it must exit 0 within
 * HS_STREAM_MS + margin (a crash of the client fails the tcase with its signal).
 * Returns its ledger (valid until hs_client_free). */
const struct hs_ledger *hs_client_stop(struct hs_client *c);
void hs_client_free(struct hs_client *c);

/* Every call of @l returned in time, and every stream it opened ended exactly once:
 * opened = completed + ended + lost + garbled, nothing read after an end, nothing
 * left unended. @what names the client in the message. */
void hs_ledger_check_bounded(const struct hs_ledger *l, const char *what);
/* hs_ledger_check_bounded, and every request was accepted and completed with the right
 * tokens. */
void hs_ledger_check_clean(const struct hs_ledger *l, const char *what);
/* One line of @l's counts on standard error, after @what. */
void hs_ledger_print(const struct hs_ledger *l, const char *what);

/* Records @d's supervisor and the workers of its @nchips chips (from a status
 * answer). */
void hs_node_record(struct cd *d, struct hs_node *n, uint32_t nchips);

/* chipd has not exited (else the tcase fails naming its exit status or signal, and
 * reaps it) and every worker of @n is alive; @n may be NULL (nothing to check). */
void hs_node_alive(const struct hs_node *n, const char *why);

/* The node of @n still runs the same processes: hs_node_alive, every worker has the
 * pid a status answer gives, and ping answers. With @counters, also worker_deaths 0 and
 * worker_starts = nchips (a block a hostile client overwrote cannot say). @why names
 * what just happened. */
void hs_node_check(struct cd *d, const struct hs_node *n, bool counters, const char *why);

/* Runs one synthetic request (seed @seed + chip) on each of @nchips chips through
 * @conn and checks every token and FINAL; @who names the caller in a failure. */
void hs_serve(chipd_conn *conn, uint32_t nchips, uint64_t seed, const char *who);

/* A new client: connects to @d, hs_serve on each of @nchips chips, closes. */
void hs_fresh_client(struct cd *d, uint32_t nchips);

/* Reads @s to its end, each read bounded by @ms and the whole by @total_ms, checking
 * each token against the synthetic reference of @seed. Returns 0 after FINAL with all
 * @tokens, the error code (> 0) of an ERROR end, or the negative errno of another
 * end (-ESTALE, ...); fails the tcase on a wrong token or when it does not end. */
int hs_read_stream(chipd_stream *s, uint32_t tokens, uint64_t seed, unsigned ms, unsigned total_ms);

/* Submits a synthetic request of @tokens tokens (@device_us per step, seed @seed, id
 * @id, 0: chipd's choice) to chip @chip through @conn with @timeout_ms. Returns
 * chipd_submit's result. */
int hs_submit(chipd_conn *conn, uint32_t tokens, uint32_t device_us, uint64_t seed, uint64_t id,
	      int chip, uint32_t timeout_ms, chipd_stream **s, struct chipd_error *err);

/* ---- the node region as a client maps it ---- */

/* A client's view of @d's node region (read-only, base) and exchange region (read-write,
 * xbase), and copies of the node descriptor and the exchange geometry taken when it
 * attached: the test finds the parts through the copies, whatever it writes. */
struct hs_view {
	struct proto_node n;
	struct proto_node_desc desc;
	struct proto_xchg_geom xg;
	char *base;
	char *xbase;
	bool node_writable; /* the node region was remapped read-write (root only) */
};

/* As a client does: the node region read-only, the exchange region from the hello. */
void hs_view_attach_client(struct cd *d, struct hs_view *v);
/* A view of the mappings of @n, a client's attach (libchipd's own connection, say);
 * its owner keeps them: no hs_view_detach. */
void hs_view_of(struct hs_view *v, const struct proto_node *n);
/* hs_view_attach_client, then the node region remapped read-write when root
 * (v->node_writable says whether). */
void hs_view_attach(struct cd *d, struct hs_view *v);
void hs_view_detach(struct hs_view *v);

/* Ring @i's header in @v (through the descriptor copy). */
struct ring_hdr *hs_view_ring(struct hs_view *v, uint32_t i);

/* The index of the ring that carries request @id, waiting up to @ms for the supervisor
 * to assign it; fails the tcase otherwise. */
uint32_t hs_view_ring_of(struct hs_view *v, uint64_t id, unsigned ms);

/* Stores @v into the u32 / u64 at @p as a client would (a relaxed atomic store: the
 * field is atomic for its legitimate writers). */
void hs_put32(void *p, uint32_t v);
void hs_put64(void *p, uint64_t v);

#endif
