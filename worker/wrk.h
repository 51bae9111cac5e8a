/* wrk.h - the chip worker: admission, the orchestrator (O) and scheduler (S)
 * threads, arena banks and epochs, token publishing (docs/architecture.md, "worker/").
 *
 * wrk_main serves the worker's control mailbox (assign, cancel, heartbeat, shutdown,
 * trace) on the calling thread and runs two threads beside it:
 *
 *   O  takes admitted requests and cancels, picks the requests that may advance (not
 *      cancelled, room in their token ring for every token in flight), builds one
 *      step for all of them together into a free arena bank and publishes the bank
 *      with the next epoch number;
 *   S  takes that epoch, launches each request's lane of the step on a stream (a
 *      request with nothing in flight gets the least busy one), publishes each
 *      request's token into its ring (FINAL with the last one) as soon as its own
 *      lane completed, and releases the bank once all its lanes did. A slow request
 *      delays only itself: O builds the next steps of the others meanwhile (each
 *      request has at most 2 steps out, so it holds at most 2 banks), and a device
 *      error fails only the request whose lane it hit.
 *
 * While S runs step N, O builds step N+1 in another bank: host work hides behind
 * device work. With no_overlap there is one bank, so O waits for S (the baseline).
 *
 * The worker writes its counters into its block of the node region
 * (PROTO_WRK_COUNTERS) and its tokens into the rings named by each assign.
 */
#ifndef CHIPD_WORKER_WRK_H
#define CHIPD_WORKER_WRK_H

#include "device.h"
#include "node.h"
#include "region.h"
#include "wl.h"
#include "wrk_trace.h"

#include <stdbool.h>
#include <stdint.h>

#define WRK_MAX_BANKS 8
/* Failed steps in a row after which S takes the device for lost and gives up: one
 * bad request fails one step; a device that fails every step is gone. */
#define WRK_S_FATAL_STREAK_DEFAULT 8u
/* Spans per thread of a trace the worker creates itself (trace start): about a
 * second of a busy worker, 3 MiB. */
#define WRK_TRACE_SPANS (1u << 15)

/* Fault injection for tests. fault: called by S when it launches a step, once per
 * request in the step: a nonzero return makes that request's lane fail as a device
 * error would (the request ends with device_error; the rest of the step runs).
 * o_fault: called by O before it builds a request's part of a step: a nonzero return
 * makes that build fail as a host error would (the request ends with internal; the
 * rest of the step runs). o_fatal: called by O at the start of each round (request id
 * 0, step = the round's number): a nonzero return makes O fail for good, as a host
 * error it cannot survive would. All get fault_arg. */
typedef bool (*wrk_fault_fn)(void *arg, uint64_t request_id, uint32_t step);

/* One callable of the supervisor's run-time registry (docs/callables.md,
 * "Registration"), in memory the supervisor shares with every worker it forks: a
 * worker loads every LIVE entry when it starts, before it serves its mailbox (so
 * before it is READY), and the supervisor's load and unload ops keep a running one in
 * step. */
enum wrk_reg_state { WRK_REG_FREE = 0, WRK_REG_PENDING = 1, WRK_REG_LIVE = 2 };
#define WRK_REG_NAME_MAX 32
#define WRK_REG_PATH_MAX 256
struct wrk_reg_entry {
	/* enum wrk_reg_state: the supervisor stores it (release) after name and path,
	 * a starting worker loads it (acquire) */
	_Atomic uint32_t state;
	/* odd while the supervisor rewrites name and path (a seqlock): a worker copies
	 * them between two equal even reads, else it skips the entry (the supervisor
	 * sends a running worker the load or unload itself) */
	_Atomic uint32_t seq;
	/* bit i: chip i has it loaded; each worker sets and clears its own bit, the
	 * supervisor clears a dead worker's (relaxed: it orders nothing) */
	_Atomic uint64_t loaded;
	char name[WRK_REG_NAME_MAX];
	char path[WRK_REG_PATH_MAX];
	/* the file the supervisor loaded from path (under seq, as name and path): a
	 * worker loads that file or nothing, never one put at path since */
	struct wl_file_id file;
};

struct wrk_config {
	uint32_t chip;		  /* index of this worker's counter block in the node */
	enum dev_kind dev_kind;	  /* DEV_SIM for tests and the benchmark */
	int dev_index;		  /* device ordinal */
	uint32_t nbanks;	  /* 1..WRK_MAX_BANKS (2: overlap; 3+: a slow request
				     leaves banks to the others); 1 with no_overlap */
	bool no_overlap;	  /* baseline: one bank, O waits for S */
	uint32_t queue_cap;	  /* admitted but not yet taken by O: beyond, queue_full */
	uint32_t max_requests;	  /* live requests (queued + active) */
	uint32_t max_batch;	  /* requests in one step */
	uint32_t bank_tasks;	  /* task descriptors per bank */
	size_t bank_host_bytes;	  /* host arena per bank */
	size_t bank_dev_bytes;	  /* device arena per bank */
	uint32_t kv_blocks;	  /* the worker's shared KV block pool */
	uint32_t kv_block_floats; /* floats per KV block */
	uint64_t spin_ns;	  /* spin budget of every wait before sleeping */
	uint32_t s_fatal_streak;  /* failed steps in a row after which S takes the
				     device for lost (0: WRK_S_FATAL_STREAK_DEFAULT) */
	/* What one request may cost (wl_cost), else the assign is refused with
	 * bad_request naming the limit: host bytes at its peak, device bytes besides its
	 * KV blocks (the pool bounds those), steps after max_tokens. 0: no limit. */
	uint64_t max_request_host_bytes;
	uint64_t max_request_dev_bytes;
	uint64_t max_request_steps;
	/* the supervisor's registry (registry_len entries), NULL: none */
	struct wrk_reg_entry *registry;
	uint32_t registry_len;
	wrk_fault_fn fault;	  /* S side; NULL in production */
	wrk_fault_fn o_fault;	  /* O side; NULL in production */
	wrk_fault_fn o_fatal;	  /* O side, fatal; NULL in production */
	/* M side: called (request id, step 0) once an assign admitted its request, before
	 * M answers it; tests hold M there. Its return is ignored. NULL in production. */
	wrk_fault_fn m_assigned;
	/* L side: called (request id, step 0) before L fills an admitted request; a
	 * nonzero return makes the fill fail as exhausted memory would (the stream ends
	 * no_capacity). Tests may block in it to hold a load. NULL in production. */
	wrk_fault_fn l_fault;
	/* Called on wrk_main's thread once the device is open, before any other thread
	 * uses it: tests keep it to inject device faults (dev_sim_inject_fault). NULL in
	 * production. Gets fault_arg. */
	void (*dev_opened)(void *arg, struct dev *d);
	void *fault_arg;
	/* Recording from the start, owned by the caller (free it after wrk_main returned);
	 * NULL: none until a trace start over the mailbox, which makes one of
	 * WRK_TRACE_SPANS spans per thread (the worker's own). See wrk_trace.h. */
	struct wrk_trace *trace;
};

/* Per-request limits of wrk_config_default: chipd's defaults (chipd(8)). */
#define WRK_MAX_REQUEST_HOST_BYTES_DEFAULT (256ull << 20)
#define WRK_MAX_REQUEST_DEV_BYTES_DEFAULT  (1ull << 30)
#define WRK_MAX_REQUEST_STEPS_DEFAULT	   (1ull << 20)

/* Fills @cfg with the defaults: sim device 0, 8 banks, queue 64, 256 live requests,
 * 64 per step, 1024 tasks and 1 MiB host + 1 MiB device per bank, 4096 KV blocks of
 * 4096 floats (a block of one table for 2 KV heads of 128 floats and 16 positions),
 * the shm/ default spin, the default per-request limits above. */
void wrk_config_default(struct wrk_config *cfg);

/* Runs a worker until a shutdown request. @control is the worker's control region:
 * its body holds the worker mailbox (laid out by the creator with mbox_init); the
 * worker becomes its server. @node is the node region (rings and counters). Opens the
 * device, starts O and S, serves the mailbox on the calling thread.
 *
 * The mailbox ops (docs/protocol.md §8, docs/architecture.md "worker/"):
 *   assign     admits a request (refused with draining once a shutdown began,
 *              no_capacity, retryable, once O failed or S gave the device up)
 *   cancel     ends a live request cancelled at its next step
 *   heartbeat  echoes seq; queued (admission queue) and active (O's requests)
 *   shutdown   stops admission; O ends what is left after grace_ms; the answer comes
 *              once O, S and L have exited, and meanwhile the mailbox keeps
 *              answering (heartbeat, cancel, trace; assign gets draining)
 *   trace      start / stop recording spans; collect writes this worker's Chrome
 *              trace fragment (wrk_trace_write_fragment) to the absolute "path" and
 *              answers events and dropped
 * Every stream ends exactly once (FINAL or ERROR), also after a thread failed; after
 * a shutdown O, S and L are joined and everything is released. Returns 0 after a
 * shutdown, -EINVAL for a bad configuration (-EOVERFLOW, said on stderr, for a KV
 * pool past WL_KVPOOL_BYTES_MAX: kv_blocks x kv_block_floats x 4), -EBUSY when
 * another server holds the mailbox, or -errno when the device, the pool or the
 * threads cannot be set up. */
int wrk_main(const struct wrk_config *cfg, struct shm_region *control, struct proto_node *node);

#endif
