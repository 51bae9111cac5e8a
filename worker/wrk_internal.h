/* wrk_internal.h - the worker's shared state: requests, banks, epoch and error words.
 *
 * Threads: M (the mailbox thread, wrk_main's caller), O, S and L (the loader: fills
 * an admitted request's device memory, off M, then queues it for O; wrk_load.c).
 *
 * Who owns what:
 *   request table (ids, admission queue)   M, L and O, under wrk.lock
 *   load queue, nloading, the fill         M and L, under wrk.lock
 *   in progress (fill_since_ns, fill_id)
 *   a request in state LOADING             L (its wl fill); M only sets its cancel
 *                                          flag
 *   a request after O took it              O; S reads the fields O fixed before
 *                                          publishing the epoch that carries it
 *   wrk_req.s_done, s_pushed, s_final      written by S (s_done release), read by O (acquire)
 *   wrk_req.s_inflight, s_stream           S only (its lanes in flight, their stream)
 *   wrk_req.s_fail                         S (device error), O (build failure), L (a
 *                                          failed fill, before it queues the request);
 *                                          atomics
 *   wrk_req.cancel                         written by M, read by O and S; O also
 *                                          reads the ring's closed word (the reader's
 *                                          cancel, ring_reader_closed) and treats it
 *                                          the same
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
 * Epoch words (struct wrk_sync): O publishes epoch e (1, 2, ...) in a free bank, named
 * in epoch_bank, by storing published = e. S takes epochs in order, launches each
 * request's lane of the step and finishes every lane on its own (token published when
 * that lane's work completed); it releases a bank once every lane in it finished, so
 * banks come back out of order: S stores the bank's owner FREE and counts the release
 * in released. O may build epoch e once released >= e - nbanks (then a bank is FREE)
 * and takes any FREE bank. All these words are seq_cst (the shm_wake protocol needs
 * it, and a bank's contents are published with them). A request has at most
 * WRK_REQ_INFLIGHT steps built and not finished, so a slow one holds at most that
 * many banks and the others keep the rest. o_err / s_err hold a
 * thread's fatal error (-errno), 0 while healthy; every wait watches the peer's word
 * and the stop flag. A thread that gives up for good sets its error word (seq_cst)
 * before it stops touching requests, then marks the control region DRAINING
 * (wrk_mark_unhealthy: the supervisor routes nothing more here and restarts the
 * worker), and M refuses new work (no_capacity) once either word is set:
 *   O fails   O exits at once, holding its requests; S runs what was published and
 *             exits; M, seeing both gone (o_done, s_exited), joins them and ends every
 *             stream left with worker_lost (cancelled where it was cancelled).
 *   S fails   (wrk_config.s_fatal_streak failed steps in a row: the device is gone) S exits;
 *             O ends every stream it holds, with device_error where the request's own
 *             step failed, cancelled where it was cancelled (a cancel call, its
 *             reader gone), worker_lost otherwise, and keeps running until shutdown.
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
	WRK_RQ_RESERVED = 3, /* id reserved, being admitted by M */
	WRK_RQ_LOADING = 5,  /* admitted, held by L until its fill is done */
	WRK_RQ_QUEUED = 1,   /* admitted, in the admission queue */
	WRK_RQ_ACTIVE = 2,   /* taken by O */
	WRK_RQ_ENDED = 4,    /* FINAL written: id released, record still in O's list */
};

/* Shutdown requests whose answers wait for the threads to end (more are answered at
 * once: the stop they ask for is under way). */
#define WRK_MAX_DEFERRED 8u

/* Steps of one request built and not yet finished by S: 2, so O builds a request's
 * next step while S runs one (host work hidden behind device work), and a slow
 * request holds at most 2 banks (head-of-line isolation needs nbanks > 2). */
#define WRK_REQ_INFLIGHT 2u

/* O and S wake each other when one fails or leaves; their waits ask the peer's state
 * this seldom only as a backstop (an idle worker should not wake for nothing). */
#define WRK_PEER_SLICE_NS (1000ull * 1000u * 1000u)

/* A fill this small (device and host bytes, wl_cost) takes microseconds: M does it
 * itself when L is idle (wrk_load_submit) rather than pay a thread hand-over (a futex
 * wake, tens of microseconds) for it. Larger fills are L's, so M answers within
 * microseconds whatever the request. */
#define WRK_SMALL_FILL_DEV_BYTES  4096u
#define WRK_SMALL_FILL_HOST_BYTES (64u * 1024u)

struct wrk_req {
	uint64_t id;
	struct wl_req *wl;
	struct ring o_ring, s_ring; /* one handle per thread: handles cache indices */
	uint32_t ring_gen;	    /* the ring's generation the assign named */
	uint32_t limit;		    /* steps to run: min(workload steps, max_tokens) */
	bool small_fill;	    /* M: its fill is tiny (wrk_load_submit may do it) */
	uint64_t deadline_ns;	    /* absolute CLOCK_MONOTONIC; 0: none */
	/* where S writes the output before FINAL: the range of the client's data area
	 * the assign named, checked by M against the worker's own geometry (NULL: none) */
	char *out_dst;
	enum wrk_req_state state;   /* under wrk.lock */
	/* O only */
	uint32_t built;
	bool ending; /* O stopped building it; ends once S caught up */
	/* S only: lanes of it launched and not yet finished, and the stream they run on
	 * (its next step goes there too while one is in flight: stream order keeps its
	 * steps in order) */
	uint32_t s_inflight;
	unsigned s_stream;
	/* S -> O */
	_Atomic uint32_t s_done;   /* steps S finished (token pushed or dropped) */
	_Atomic uint32_t s_pushed; /* tokens S pushed: the seq of an ERROR record */
	_Atomic int32_t s_fail;	   /* enum chipd_code S failed the request with, or 0 */
	_Atomic uint32_t s_final;  /* 1 once S wrote FINAL */
	_Atomic uint32_t cancel;   /* M -> O: 1 once cancelled */
	struct wrk_req *next_free; /* table free list, under wrk.lock */
};

/* One request's part of a step: lane i of the bank's step is entry i. */
struct wrk_entry {
	struct wrk_req *rq;
	struct wl_out out;
	uint32_t step;
	/* S only */
	struct dev_event *done; /* the lane's completion, recorded after its tasks */
	unsigned stream;	/* the stream the lane runs on */
	int err;		/* the lane's launch error (0: none) */
	bool recorded;		/* done was recorded: the lane ends when it completes */
	bool counted;		/* counted in S's lanes in flight on its stream */
	bool pending;		/* launched, not yet finished */
	bool held_back;		/* failed: finished once its step is judged (err) */
	/* err is the device layer's refusal of a task's arguments (wl_lane's refused):
	 * the request's fault, ended internal, no device error and not in the streak */
	bool refused;
};

struct wrk_bank {
	_Atomic int owner; /* enum wrk_owner: the debug check */
	uint32_t index;
	void *host_mem;
	void *dev_mem;
	struct wl_arena host, dev;
	struct wl_step step;
	struct wrk_entry *ents;
	struct wl_lane *lanes; /* S: entry i's lane, for wl_exec_launch */
	uint32_t nents;
	uint64_t epoch;
	uint32_t npending; /* S: entries whose lane has not finished */
	bool ok, failed;   /* S: a lane completed / failed on the device (the streak) */
};

struct wrk_sync {
	_Atomic uint64_t published; /* last epoch O published */
	_Atomic uint64_t released;  /* epochs S released (not in order: see above) */
	/* The bank epoch e is in, at [e % WRK_MAX_BANKS]: stored by O before it publishes
	 * e (relaxed; the publish orders it), read by S after it saw e published. At most
	 * nbanks epochs are out at once, so a slot is not reused before S read it. */
	_Atomic uint32_t epoch_bank[WRK_MAX_BANKS];
	/* Requests' steps S finished (token pushed or dropped), bumped after each batch of
	 * them: O, which builds a request's next step only when fewer than WRK_REQ_INFLIGHT
	 * are in flight, sleeps until it changes (seq_cst, the shm_wake protocol). */
	_Atomic uint64_t finished;
	_Atomic int32_t o_err, s_err;
	_Atomic uint32_t o_done;   /* O has exited: S drains and exits */
	_Atomic uint32_t s_exited; /* S has exited (M joins once both have) */
	_Atomic uint32_t kicks;	   /* bumped by wrk_kick_o: new work, cancel, stop */
	struct shm_wake o_wake;	   /* O sleeps here: releases, new work, stop */
	struct shm_wake s_wake;	   /* S sleeps here: publishes, O's exit */
	/* O's busy time as a seqlock (odd seq: being updated), so S can measure how much
	 * of its own run O was busy too (overlap_ns). */
	_Atomic uint64_t o_seq, o_busy_acc, o_busy_since;
	/* Progress words for the heartbeat (M alone answers it, so the supervisor judges
	 * O and S by these): O bumps o_rounds at the start of each round (it wakes at
	 * least every ORCH_IDLE_WAIT_NS) and after each request's build, S bumps s_rounds whenever it launched a step or
	 * finished a lane (a lane the device never completes, or S stuck in a call, stops
	 * it while epochs are out). Relaxed: M only reports them and nothing is ordered
	 * by them. */
	_Atomic uint64_t o_rounds, s_rounds;
};

struct wrk {
	struct wrk_config cfg;
	struct proto_node *node;
	struct shm_region *control; /* the control region: its state says "no new work" */
	struct ctr_block *ctr;
	struct mbox mb;
	struct dev *dev;
	struct wl_kvpool *kv;
	struct wl_exec *exec;
	pthread_mutex_t kv_lock; /* the KV pool is used by one thread at a time */
	/* adaptive spins (wait.h): O's wait for something to build, S's for an epoch */
	struct shm_spin o_idle_spin, s_epoch_spin;

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
	_Atomic uint32_t push_fail_logged; /* 1 once a failed terminal push was logged */

	struct wrk_bank banks[WRK_MAX_BANKS];
	uint32_t nbanks;
	struct wrk_sync sync;
	pthread_t o_thread, s_thread;
	bool o_started, s_started, joined;

	/* The loader L (wrk_load.c), under lock: the requests M admitted whose fill has
	 * not begun (a ring of queue_cap), and nloading = those plus the one being
	 * filled. Admission counts nloading + q_len against queue_cap, so L always finds
	 * room in the admission queue. */
	struct wrk_req **load_q;
	uint32_t load_head, load_len, nloading;
	/* the fill in progress, which the heartbeat reports (a fill that never returns
	 * is judged by the supervisor, --fill-ms): when it began (shm_now_ns; 0: none)
	 * and whose */
	uint64_t fill_since_ns, fill_id;
	pthread_cond_t load_cond; /* L sleeps here (under lock): new work, stop */
	bool load_cond_init;
	pthread_t l_thread;
	bool l_started;
	_Atomic uint32_t l_done; /* L has exited (seq_cst, as o_done) */

	/* M only */
	struct mbox_ticket cur;			       /* the slot being served */
	/* The request the assign being served admitted (NULL: none) and its id: an
	 * answer that finds the slot reset means the supervisor gave up on the assign,
	 * and M cancels the request (wrk_req_abandon). */
	struct wrk_req *assigned;
	uint64_t assigned_id;
	/* The callable the load being served loaded ("": none, or loaded already): an
	 * answer that finds the slot reset means the supervisor gave up on the load and
	 * rolled the registration back, so M unloads it again (wrk_load_abandon). */
	char loaded[WL_NAME_MAX];
	/* The fragment the trace collect being served wrote ("": none): an answer that
	 * finds the slot reset means the supervisor gave up on the collect (its forward
	 * bound ran out while this worker wrote), so nobody merges or removes the
	 * fragment but M, which unlinks it. */
	char collected[PROTO_PATH_MAX];
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

/* Whether nobody wants @rq's tokens any more: its reader closed the ring, or the ring
 * is no longer @rq's (the supervisor took it back and reset it for another stream:
 * nothing more may be written to it). A cheap check of two header words, made by O
 * each round and by L before a fill. */
static inline bool wrk_req_ring_unwanted(const struct wrk_req *rq)
{
	return ring_reader_closed(&rq->o_ring) ||
	       atomic_load_explicit(&rq->o_ring.hdr->generation, memory_order_acquire) !=
		   rq->ring_gen;
}

/* ---- banks and epochs (wrk_bank.c) ---- */
int wrk_banks_init(struct wrk *w);
void wrk_banks_destroy(struct wrk *w);
void wrk_bank_check(struct wrk_bank *b, enum wrk_owner who, const char *fn);
/* O: waits until a bank is free for epoch published + 1 (released >= that epoch -
 * nbanks) and takes one. Returns the bank, or NULL with *@err (-EPIPE: S failed or
 * stop; -ETIMEDOUT). */
struct wrk_bank *wrk_bank_acquire(struct wrk *w, uint64_t deadline_ns, int *err);
/* O: hands a built bank to S under the next epoch. */
void wrk_bank_publish(struct wrk *w, struct wrk_bank *b);
/* S: waits for epoch @e. Returns its bank, or NULL with *@err (-EPIPE: O failed or
 * exited with nothing left to run; DEV_ERR_LOST: the device was lost meanwhile;
 * -ETIMEDOUT). */
struct wrk_bank *wrk_bank_next(struct wrk *w, uint64_t e, uint64_t deadline_ns, int *err);
/* S: the bank of epoch @e if it is published, else NULL; does not wait. */
struct wrk_bank *wrk_bank_poll(struct wrk *w, uint64_t e);
/* S: returns the bank to O (in any order: every lane in it finished). */
void wrk_bank_release(struct wrk *w, struct wrk_bank *b);
/* O's busy time so far (seqlock read), and O's own marks. */
uint64_t wrk_o_busy_at(struct wrk_sync *s, uint64_t now);
void wrk_o_busy_begin(struct wrk_sync *s, uint64_t now);
void wrk_o_busy_end(struct wrk_sync *s, uint64_t now);

/* ---- threads ---- */
void *wrk_orch_main(void *arg);
void *wrk_sched_main(void *arg);

/* ---- the loader (wrk_load.c) ---- */
/* M, before the threads start: the load queue and L's wait. -ENOMEM, or pthread's. */
int wrk_load_init(struct wrk *w);
/* M, after the join: frees what wrk_load_init made. */
void wrk_load_fini(struct wrk *w);
/* L: fills each request M hands it, off M, then queues it for O: failed (s_fail
 * no_capacity: memory exhausted; device_error: the device failed) when the fill
 * failed, unfilled when it was cancelled, its reader left or its deadline passed
 * meanwhile; O ends those at once. Exits once a shutdown began and its queue is
 * empty, at once when O failed or exited or the grace is over (what is left is M's:
 * wrk_end_leftovers). */
void *wrk_load_main(void *arg);
/* M: hands @rq (its id reserved, its wl reserved by wl_req_reserve) to L: state
 * LOADING, counted in nloading. A request whose fill is tiny (@rq->small_fill) M
 * fills itself and queues for O when L holds and has queued nothing (the order of
 * admission is kept), sparing the hand-over to L: the fast path of small requests. */
void wrk_load_submit(struct wrk *w, struct wrk_req *rq);
/* Wakes L (a stop). */
void wrk_load_kick(struct wrk *w);
/* O: whether a request L holds (while L runs) or queued is still to be taken: O must
 * not leave at a shutdown before it has taken them. */
bool wrk_load_pending(struct wrk *w);

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
/* M, once O, S and L are joined: ends every stream still live with an ERROR of @code
 * (cancelled for one cancelled: a cancel call, its reader gone), and one whose FINAL
 * S could not push (state ENDED, s_final 0) with its s_fail code as
 * O would, and returns every record. */
void wrk_end_leftovers(struct wrk *w, enum chipd_code code);
/* O at each round, M after the join (the gauges' writers): stores what the worker
 * holds, @nact active requests and the KV blocks in use, in the gauges `active` and
 * `kv_blocks_used` and the heartbeat's active count. */
void wrk_o_gauges(struct wrk *w, uint32_t nact);
/* O (or M after the join, the counter's writers): the terminal record of request @id
 * could not be pushed (@rc from ring_push: a ring a peer corrupted or ended already).
 * Counts terminal_push_failed and logs the first one of the worker; the stream stays
 * unended for the supervisor to reclaim. */
void wrk_terminal_push_failed(struct wrk *w, uint64_t id, int rc);
/* M: the supervisor gave up on the assign that admitted @rq as request @id (its answer
 * found the slot reset, or the slot was reset while the assign was still under way):
 * nobody learns the stream, so the request is cancelled like a cancel call does it
 * (O ends it cancelled, its id and ring are freed). Does nothing when @rq is no longer
 * live with @id (it ended meanwhile). Whoever holds a request not yet queued (being
 * loaded) must check its cancel flag before queueing it. */
void wrk_req_abandon(struct wrk *w, struct wrk_req *rq, uint64_t id);
/* Wakes O (new work, cancel, stop). */
void wrk_kick_o(struct wrk *w);
/* O or S, right after storing its error word: marks the control region DRAINING (no
 * new work), so the supervisor stops routing to this chip before its next heartbeat
 * and restarts the worker. */
void wrk_mark_unhealthy(struct wrk *w);
/* The worker's handler table (assign, cancel, heartbeat, shutdown, trace). */
extern const struct proto_server wrk_server;

/* ---- run-time callables (wrk_register.c) ---- */
/* Loads every LIVE entry of the registry (before the mailbox is served); a callable
 * that does not load any more is logged and left out (its chip bit stays clear). */
void wrk_register_replay(struct wrk *w);
/* Loads the own kernels of every callable loaded at start on the chip's device (at
 * setup); a callable whose kernels fail is unloaded on this chip, the reason on
 * stderr. */
void wrk_kernels_attach_all(struct wrk *w);
/* The supervisor's "load" {path, wl} and "unload" {wl} ops (M thread). */
int wrk_run_load(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		 struct proto_error *err);
int wrk_run_unload(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		   struct proto_error *err);
/* The load just served (w->loaded) was not answered: the supervisor gave up on it
 * and takes the registration back, so the chip does not keep the callable (M). */
void wrk_load_abandon(struct wrk *w);

/* Enters a section that may write into a client region for a request (its output into
 * the data area, its ring's consumer line through the reader's wake): @pass (the
 * thread's pass word in the worker directory, proto/node.h) goes odd. The ring's
 * generation check comes after, in the section, as a seq_cst load. Dekker with the
 * supervisor's take-back (sup_table.c), all four seq_cst, so one total order holds
 * them: it bumps the generation, then reads the pass words; this thread bumps its
 * word, then loads the generation. Either the supervisor sees the word odd (and waits
 * for it to move before it scrubs the region), or this thread sees the new generation
 * and writes nothing. (No fences: ThreadSanitizer does not model them.) */
static inline void wrk_pass_enter(_Atomic uint64_t *pass)
{
	atomic_fetch_add_explicit(pass, 1, memory_order_seq_cst);
}

/* Leaves that section: release, so a supervisor that reads the word moved (acquire)
 * scrubs after every write of the section. */
static inline void wrk_pass_leave(_Atomic uint64_t *pass)
{
	atomic_fetch_add_explicit(pass, 1, memory_order_release);
}

/* At a worker's start, before its O and S exist: a word its predecessor left odd (it
 * died inside a section) goes even again. Relaxed: no thread of this worker writes it
 * yet, and the supervisor waits on no word of a dead worker. */
static inline void wrk_pass_reset(_Atomic uint64_t *pass)
{
	if (atomic_load_explicit(pass, memory_order_relaxed) & 1)
		atomic_fetch_add_explicit(pass, 1, memory_order_relaxed);
}

static inline uint32_t wrk_ctr_index(enum proto_wrk_ctr c)
{
	return (uint32_t)c;
}

#endif
