/* worker_fixture.h - a worker run in-process for the check_worker suites: a node
 * region, an anonymous control region with the worker mailbox, wrk_main on a thread,
 * and the client side (assign, cancel, shutdown through the mailbox; rings read
 * directly). */
#ifndef CHIPD_WORKER_FIXTURE_H
#define CHIPD_WORKER_FIXTURE_H

#include "node.h"
#include "proto.h"
#include "wrk.h"

#include <pthread.h>
#include <stdbool.h>

#define WF_CALL_MS 5000u /* bound of every mailbox call */

struct wf {
	char name[64];
	struct proto_node node;
	struct shm_region ctl;
	struct mbox mb; /* the client's handle */
	struct wrk_config cfg;
	pthread_t th;
	int rc;
	bool running;
	uint64_t next_deadline_ns; /* sent with the next assign ("deadline_ns"), then 0 */
};

/* Default worker config with a short spin (tests share 2 cores). */
void wf_config(struct wrk_config *cfg);
/* Creates the regions (rings of @ring_cap records) and starts wrk_main(@cfg). */
void wf_start(struct wf *f, const struct wrk_config *cfg, uint32_t ring_cap);
/* Shuts the worker down (if still running), joins it, asserts it returned 0 and
 * unlinks the node region; the regions stay mapped so counters can still be read
 * (each tcase is its own process). */
void wf_stop(struct wf *f);
/* Sends a shutdown and waits for wrk_main to return; its code. */
int wf_shutdown(struct wf *f);
/* Resets ring @ring for request @id and assigns it: @wl with @params
 * ("k=v,k=v" or NULL), @max_tokens (0: none). Returns CHIPD_OK or the error code;
 * @msg (may be NULL, CHIPD_MSG_MAX bytes) gets the error message. */
int wf_assign(struct wf *f, uint64_t id, uint32_t ring, const char *wl, const char *params,
	      int64_t max_tokens, char *msg);
/* A request that runs about a second (1000 steps of 1 ms): rings of 1024 hold it. */
#define WF_LONG "tokens=1000,device_us=1000"
/* Assigns request @id with WF_LONG on ring @ring (reset first); asserts it is admitted. */
void wf_assign_long(struct wf *f, uint64_t id, uint32_t ring);
/* The same without resetting the ring (several assigns of one id at once). */
int wf_assign_noreset(struct wf *f, uint64_t id, uint32_t ring, const char *wl, const char *params,
		      int64_t max_tokens, char *msg);
/* Resets ring @ring and posts the assign of wf_assign (no max_tokens) without waiting
 * for its answer: *@t is the slot, to wait on or give up. */
void wf_assign_post(struct wf *f, uint64_t id, uint32_t ring, const char *wl, const char *params,
		    struct mbox_ticket *t);
int wf_cancel(struct wf *f, uint64_t id);
/* Sends a heartbeat with @seq; CHIPD_OK with *@queued and *@active (may be NULL), or
 * the error code. Asserts the echoed seq. */
int wf_heartbeat(struct wf *f, int64_t seq, int64_t *queued, int64_t *active);
/* Sends a heartbeat with @seq; asserts it is answered ok with the seq echoed, and
 * leaves the whole answer (threads' error and progress words) in @ans. */
void wf_heartbeat_ans(struct wf *f, int64_t seq, struct proto_msg *ans);
/* Sends trace @act (PROTO_TRACE_*) with @path (NULL: none) and @chip (-1: none).
 * Returns CHIPD_OK with *@events and *@dropped (may be NULL), or the error code;
 * @msg (may be NULL, CHIPD_MSG_MAX bytes) gets the error message. */
int wf_trace(struct wf *f, int act, const char *path, int64_t chip, int64_t *events,
	     int64_t *dropped, char *msg);
/* Posts a shutdown with @grace_ms and returns without waiting for its answer. */
void wf_shutdown_begin(struct wf *f, int64_t grace_ms, struct mbox_ticket *t);
/* Whether the answer to @t has come (without waiting). */
bool wf_shutdown_answered(struct wf *f, struct mbox_ticket t);
/* Waits for the answer to @t (asserts ok), joins wrk_main; its code. */
int wf_shutdown_end(struct wf *f, struct mbox_ticket t);
/* Sends the raw request bytes @req (@len) and decodes the answer as one to @op:
 * the error code (CHIPD_OK for an ok answer); @msg as in wf_trace. */
int wf_call_raw(struct wf *f, enum proto_op op, const void *req, uint32_t len, char *msg);
/* Reads ring @ring into @out until a terminal record, @max records or @ms pass.
 * Returns the number read. */
uint32_t wf_read(struct wf *f, uint32_t ring, struct ring_rec *out, uint32_t max, unsigned ms);
/* Reads ring @ring into @out (@max records) up to its terminal record; asserts there
 * is one and that its flags are @flags. Returns the number read. */
uint32_t wf_read_end(struct wf *f, uint32_t ring, struct ring_rec *out, uint32_t max,
		     uint32_t flags);
/* Worker counter @name. */
uint64_t wf_ctr(struct wf *f, const char *name);
/* Reads ring @ring up to its terminal record and asserts that request's stream ended
 * at step @step with @code: @step tokens without flags, then the ERROR record with
 * seq @step. */
void wf_expect_error_at(struct wf *f, uint32_t ring, uint32_t step, enum chipd_code code);

/* A fault hook (wrk_fault_fn; the gate is the config's fault_arg) that holds the
 * worker thread calling it while the test keeps the gate shut: request @id only (0:
 * every call, O's per-round o_fatal call included, which passes id 0). Sets @entered
 * once that request reaches it; lets go once @open is set, or by itself after WF_GATE_MS so
 * a failed test cannot hang. Returns true (a fault) for request @fail_id only (0:
 * never). */
#define WF_GATE_MS 20000u
struct wf_gate {
	uint64_t id, fail_id;
	_Atomic int entered, open;
};
bool wf_gate_hook(void *arg, uint64_t id, uint32_t step);
/* Whether the gate @arg (a struct wf_gate) was reached; for tu_eventually. */
bool wf_gate_entered(void *arg);
/* A fault hook (the struct wf_fail_at is the config's fault_arg) that fails request
 * @id at step @step only. */
struct wf_fail_at {
	uint64_t id;
	uint32_t step;
};
bool wf_fail_at(void *arg, uint64_t id, uint32_t step);

#endif
