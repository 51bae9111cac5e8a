/* wrk_internal.h - the worker's shared state: requests, banks, epoch and error words.
 *
 * Threads: M (the mailbox thread, wrk_main's caller), O and S.
 *
 * Who owns what:
 *   request table (ids, admission queue)   M and O, under wrk.lock
 *   a request after O took it              O; S reads the fields O fixed before
 *                                          publishing the epoch that carries it
 *   wrk_req.s_done, s_pushed, s_final      written by S (s_done release), read by O (acquire)
 *   wrk_req.s_fail                         S (device error), O (build failure); atomics
 *   wrk_req.cancel                         written by M, read by O and S
 *   a bank                                 O or S, moved only by the epoch words
 *   everything, once O and S are joined    M
 *
 * A request's id and its record are released apart. The id (and the request's KV
 * blocks) go back before its terminal record is visible in the ring, by whoever
 * writes that record: O for an ERROR (wrk_req_end_error), S for FINAL
 * (wrk_req_end_final, state ENDED), so a client that read the end may resubmit the
 * id at once. The record itself goes back to the free list only when no thread can
 * still touch it: at once for an ERROR (O wrote it and holds nothing of it), at O's
 * next round for FINAL (O drops it from its list; S is done with it). The table has
 * 2 * max_requests records for this: admission counts live requests (reserved,
 * queued, active) against max_requests, and the records ENDED but not yet returned
 * are ones O held as active, at most max_requests more.
 *
 * Epoch words (struct wrk_sync): O publishes epoch e (1, 2, ...) in bank (e-1) % nbanks
 * by storing published = e; S releases it by storing released = e. O may build epoch
 * e once released >= e - nbanks. All four words are seq_cst (the shm_wake protocol
 * needs it, and a bank's contents are published with them). o_err / s_err hold a
 * thread's fatal error (-errno), 0 while healthy; every wait watches the peer's word
 * and the stop flag. A thread that gives up for good sets its error word (seq_cst)
 * before it stops touching requests, and M refuses new work once either word is set:
 *   O fails   O exits at once, holding its requests; S runs what was published and
 *             exits; M, seeing both gone (o_done, s_exited), joins them and ends every
 *             stream left with internal.
 *   S fails   (wrk_config.s_fatal_streak failed steps in a row: the device is gone) S exits;
 *             O ends every stream it holds with device_error and keeps running until
 *             shutdown.
 */
#ifndef CHIPD_WORKER_WRK_INTERNAL_H
#define CHIPD_WORKER_WRK_INTERNAL_H

#include "wl.h"
#include "proto.h"
#include "wrk.h"

#include <pthread.h>
#include <stdatomic.h>

enum wrk_owner { WRK_OWNER_FREE = 0, WRK_OWNER_O = 1, WRK_OWNER_S = 2 };

/* Aborts when the calling thread touches a bank it does not own: the cheap always-on
 * check (a relaxed load) behind "a bank is never held by two threads". */
#define WRK_OWNED(bank, who) wrk_bank_check((bank), (who), __func__)

enum wrk_req_state {
	WRK_RQ_FREE = 0,
	WRK_RQ_RESERVED = 3, /* id reserved, being created by M */
	WRK_RQ_QUEUED = 1,   /* admitted, in the admission queue */
	WRK_RQ_ACTIVE = 2,   /* taken by O */
	WRK_RQ_ENDED = 4,    /* FINAL written: id released, record still in O's list */
};

/* Shutdown requests whose answers wait for the threads to end (more are answered at
 * once: the stop they ask for is under way). */
#define WRK_MAX_DEFERRED 8u

/* O and S wake each other when one fails or leaves; their waits ask the peer's state
 * this seldom only as a backstop (an idle worker should not wake for nothing). */
#define WRK_PEER_SLICE_NS (1000ull * 1000u * 1000u)

struct wrk_req {
	uint64_t id;
	struct wl_req *wl;
	struct ring o_ring, s_ring; /* one handle per thread: handles cache indices */
	uint32_t limit;		    /* steps to run: min(workload steps, max_tokens) */
	uint64_t deadline_ns;	    /* absolute CLOCK_MONOTONIC; 0: none */
	enum wrk_req_state state;   /* under wrk.lock */
	/* O only */
	uint32_t built;
	bool ending; /* O stopped building it; ends once S caught up */
	/* S -> O */
	_Atomic uint32_t s_done;   /* steps S finished (token pushed or dropped) */
	_Atomic uint32_t s_pushed; /* tokens S pushed: the seq of an ERROR record */
	_Atomic int32_t s_fail;	   /* enum chipd_code S failed the request with, or 0 */
	_Atomic uint32_t s_final;  /* 1 once S wrote FINAL */
	_Atomic uint32_t cancel;   /* M -> O: 1 once cancelled */
	struct wrk_req *next_free; /* table free list, under wrk.lock */
};

/* One request's part of a step. */
struct wrk_entry {
	struct wrk_req *rq;
	struct wl_out out;
	uint32_t step;
};

struct wrk_bank {
	_Atomic int owner; /* enum wrk_owner: the debug check */
	uint32_t index;
	void *host_mem;
	void *dev_mem;
	struct wl_arena host, dev;
	struct wl_step step;
	struct wrk_entry *ents;
	uint32_t nents;
	uint64_t epoch;
};

struct wrk_sync {
	_Atomic uint64_t published; /* last epoch O published */
	_Atomic uint64_t released;  /* last epoch S released */
	_Atomic int32_t o_err, s_err;
	_Atomic uint32_t o_done;   /* O has exited: S drains and exits */
	_Atomic uint32_t s_exited; /* S has exited (M joins once both have) */
	_Atomic uint32_t kicks;	   /* bumped by wrk_kick_o: new work, cancel, stop */
	struct shm_wake o_wake;	   /* O sleeps here: releases, new work, stop */
	struct shm_wake s_wake;	   /* S sleeps here: publishes, O's exit */
	/* O's busy time as a seqlock (odd seq: being updated), so S can measure how much
	 * of its own run O was busy too (overlap_ns). */
	_Atomic uint64_t o_seq, o_busy_acc, o_busy_since;
};

struct wrk {
	struct wrk_config cfg;
	struct proto_node *node;
	struct ctr_block *ctr;
	struct mbox mb;
	struct dev *dev;
	struct wl_kvpool *kv;
	struct wl_exec *exec;
	pthread_mutex_t kv_lock; /* the KV pool is used by one thread at a time */

	/* request table and admission queue, under lock */
	pthread_mutex_t lock;
	struct wrk_req *reqs; /* nreqs = 2 * max_requests records (see above) */
	uint32_t nreqs;
	struct wrk_req *free_list;
	struct wrk_req **queue; /* ring of queue_cap admitted requests */
	uint32_t q_head, q_len;
	uint32_t live; /* reserved, queued or active: at most max_requests */

	_Atomic uint32_t stop;	       /* M -> O, S: shutdown requested */
	_Atomic uint64_t grace_end_ns; /* after it, O ends what is left */
	_Atomic uint32_t o_active;     /* O's active count, for heartbeats */

	struct wrk_bank banks[WRK_MAX_BANKS];
	uint32_t nbanks;
	struct wrk_sync sync;
	pthread_t o_thread, s_thread;
	bool o_started, s_started, joined;

	/* M only */
	struct mbox_ticket cur;			       /* the slot being served */
	struct mbox_ticket deferred[WRK_MAX_DEFERRED]; /* shutdowns answered at the end */
	uint32_t ndeferred;
	/* The trace spans go to: the config's, or one M created at trace start. Stored
	 * once by M (release) before any span can reach it, read by every thread
	 * (acquire); freed by M after the join when own_trace. */
	_Atomic(struct wrk_trace *) trace;
	bool own_trace;
};

/* The trace the calling thread records into (NULL: none). */
static inline struct wrk_trace *wrk_trace_of(struct wrk *w)
{
	return atomic_load_explicit(&w->trace, memory_order_acquire);
}

/* ---- banks and epochs (wrk_bank.c) ---- */
int wrk_banks_init(struct wrk *w);
void wrk_banks_destroy(struct wrk *w);
void wrk_bank_check(struct wrk_bank *b, enum wrk_owner who, const char *fn);
/* O: waits for the bank of epoch published + 1 to be free and takes it. Returns the
 * bank, or NULL with *@err (-EPIPE: S failed or stop; -ETIMEDOUT) . */
struct wrk_bank *wrk_bank_acquire(struct wrk *w, uint64_t deadline_ns, int *err);
/* O: hands a built bank to S under the next epoch. */
void wrk_bank_publish(struct wrk *w, struct wrk_bank *b);
/* S: waits for epoch @e. Returns its bank, or NULL with *@err (-EPIPE: O failed or
 * exited with nothing left to run; -ETIMEDOUT). */
struct wrk_bank *wrk_bank_next(struct wrk *w, uint64_t e, uint64_t deadline_ns, int *err);
/* S: returns the bank to O. */
void wrk_bank_release(struct wrk *w, struct wrk_bank *b);
/* O's busy time so far (seqlock read), and O's own marks. */
uint64_t wrk_o_busy_at(struct wrk_sync *s, uint64_t now);
void wrk_o_busy_begin(struct wrk_sync *s, uint64_t now);
void wrk_o_busy_end(struct wrk_sync *s, uint64_t now);

/* ---- threads ---- */
void *wrk_orch_main(void *arg);
void *wrk_sched_main(void *arg);

/* ---- requests (wrk_admit.c) ---- */
/* O: ends @rq's stream with an ERROR record of @code (nothing in flight), updates
 * the counters and frees it. */
void wrk_req_end_error(struct wrk *w, struct wrk_req *rq, enum chipd_code code);
/* S: releases the id and KV blocks of @rq, whose last token is about to be pushed
 * with FINAL (state ENDED); O returns the record with wrk_req_free. */
void wrk_req_end_final(struct wrk *w, struct wrk_req *rq);
/* O (or M after the join): returns the record of a request whose stream has ended
 * (or that never started), releasing its id and KV blocks if still held. */
void wrk_req_free(struct wrk *w, struct wrk_req *rq);
/* M, once O and S are joined: ends every stream still live with an ERROR of @code
 * and returns every record. */
void wrk_end_leftovers(struct wrk *w, enum chipd_code code);
/* Wakes O (new work, cancel, stop). */
void wrk_kick_o(struct wrk *w);
/* The worker's handler table (assign, cancel, heartbeat, shutdown, trace). */
extern const struct proto_server wrk_server;

static inline uint32_t wrk_ctr_index(enum proto_wrk_ctr c)
{
	return (uint32_t)c;
}

#endif
