/* sup.h - the supervisor chipd: its state, shared by the event loop thread (workers:
 * fork, death, restart, heartbeats, stop) and the router thread (the client mailbox).
 *
 * Threads and what they own:
 *   main / event loop  starts and ends workers, heartbeats, backoff, drain and stop
 *                      (sup_loop.c, sup_workers.c; forks go through the spawner
 *                      process, sup_spawner.c)
 *   router             serves the node region's client mailbox (sup_router.c)
 * Both use the request table (sup_table.c) under sup.lock. Every field another
 * thread reads without the lock is atomic, with its order at the access.
 */
#ifndef CHIPD_SUP_H
#define CHIPD_SUP_H

#include "chipd.h"
#include "mbox.h"
#include "node.h"
#include "proto.h"
#include "region.h"
#include "sup_config.h"
#include "wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

/* Slots of a worker's control mailbox: the router's forwards (many in flight at once:
 * a submit waiting for a free slot waits for another's answer), the event loop's
 * heartbeat, shutdown and re-queues, and spares. Untouched slots cost no memory. */
#define SUP_WRK_SLOTS 64u
/* How long a forward to a worker (assign, cancel, trace) may take: the worker answers
 * from its mailbox thread at once; a worker that does not is stuck or dead. */
#define SUP_FORWARD_MS 2000u
/* How long a ring may stay broken (an index or its identity changed by its reader, or
 * a terminal claimed with no record) before the supervisor takes it back: a producer
 * publishes a claimed terminal within microseconds, and cannot push into a ring whose
 * indices are out of range at all. */
#define SUP_BROKEN_MS 1000u
/* how long a terminal claimed with no terminal record may stand before the ring counts
 * as broken: far above the microseconds a producer spends between the two */
#define SUP_UNSEALED_MS 500u
/* How long an ended stream may sit unread (its reader's tail standing still) before
 * its ring is taken back from a reader that is alive but reads no more. */
#define SUP_UNREAD_MS 60000u
/* The event loop's tick: heartbeats due, restarts due, drain progress, reaping. */
#define SUP_TICK_MS 50u
/* The tick while nothing is going on (no live request, every chip READY, running):
 * heartbeats, the watchdog and dead clients need no finer grain, and an idle node
 * should not wake 20 times a second. */
#define SUP_IDLE_TICK_MS 250u
/* How long a mailbox slot whose owner pid has no connection (forged, or a process that
 * never said hello) may stay in one state before it is reclaimed like a dead client's:
 * long enough for such a process to read the refusal the router answered it with. */
#define SUP_UNCONNECTED_MS 1000u
/* A gap between two ticks longer than this means the supervisor itself did not run:
 * its heartbeats start again instead of counting the gap against the workers. Two
 * idle ticks: a loaded machine delays a tick by less. */
#define SUP_STALL_MS (2u * SUP_IDLE_TICK_MS)

/* A call to a worker that the event loop posts on one tick and completes on a later
 * one (sup_post.c): the loop never waits for a worker. One per caller's purpose (the
 * shutdown of each chip, the re-queue of one request); zeroed means none pending. */
struct sup_post {
	bool pending;
	struct mbox_ticket t;
	enum proto_op op;
	uint64_t posted_ns;
};

struct sup_worker {
	uint32_t chip;
	int32_t gpu; /* device ordinal, -1 for sim */
	struct shm_region ctl;
	struct mbox mb; /* the supervisor is a client of the worker's control mailbox */
	/* CLOCK_MONOTONIC when a call to it (sup_call_run) last found no answer within
	 * SUP_FORWARD_MS while it lived, 0 once one was answered; either thread, relaxed
	 * (sup_worker_silent) */
	_Atomic uint64_t call_silent_ns;
	/* written by the event loop; read by the router under sup.lock */
	pid_t pid; /* 0 while none runs */
	uint64_t pid_start;
	int pidfd;
	enum chipd_chip_state state;
	uint32_t restarts;
	uint32_t load; /* live requests routed to it (table entries) */
	/* its requests not seen ended, as the last sup_table_live counted them, plus
	 * those routed or moved to it since (sup_worker_move): a request that ended
	 * counts no more though its entry waits for the sweep */
	uint32_t unended;
	bool stopping; /* we asked it to end: its exit is not a crash */
	/* a trace op's start reached this chip and no stop since (the router writes it,
	 * the event loop reads it at a start, both under sup.lock): a worker started
	 * meanwhile, a restart included, records from its start */
	bool tracing;
	/* event loop only */
	/* the trace flag its start was asked with (sup_worker_child's @trace): a trace
	 * op that came while it started did not reach it, and it gets the trace op that
	 * tracing says once READY (trace_post: answered, or given up after
	 * SUP_FORWARD_MS, sup_health.c) */
	bool spawn_trace;
	struct sup_post trace_post;
	uint64_t deaths_ns[16]; /* recent deaths, a ring of crash_limit entries */
	uint32_t ndeaths;
	uint32_t backoff_ms;
	uint64_t restart_at_ns; /* BACKOFF: when to start it again */
	uint64_t healthy_since_ns;
	uint64_t hb_last_ok_ns, hb_next_ns;
	/* when the heartbeat now awaited was first tried (claimed and posted, or every
	 * slot busy); 0 while none is awaited: the stuck clock runs from here */
	uint64_t hb_sent_ns;
	bool hb_pending;
	struct mbox_ticket hb_ticket;
	uint64_t hb_seq;
	/* progress of O and S from the heartbeat answers: the last value, and since when
	 * (a heartbeat's send time) it has not moved while work was pending */
	int64_t o_rounds, s_rounds;
	uint64_t o_still_ns, s_still_ns;
};

/* A submit the router forwarded to its worker and has not answered (sup_forward.c,
 * router thread only): the assign is posted without waiting, and the client's slot
 * stays TAKEN until the worker's answer, a failure or SUP_FORWARD_MS ends it. */
struct sup_fwd {
	uint32_t entry;	      /* its request table entry (forwarding while here) */
	uint32_t ring_gen;    /* that entry's generation when admitted */
	uint32_t region;      /* the client region the submit came through */
	struct mbox_ticket t; /* its slot there */
	uint32_t chip;
	pid_t pid;	    /* the worker's pid when admitted: another one means it died */
	bool client_gone;   /* its client reset the slot: the answer reaches nobody */
	bool pinned;	    /* the submit named its chip: a refusal is answered as it is */
	uint64_t tried;	    /* the chips that refused it no_capacity (bit per chip) */
	uint64_t since_ns;  /* admitted: SUP_FORWARD_MS runs from here */
	struct sup_post post; /* pending once posted (every slot busy: posted later) */
};

/* One live stream: a ring of the node region, indexed by its ring number. */
struct sup_req {
	bool used;
	bool forwarding; /* the router is between ring reset and the worker's answer */
	bool ended;	 /* ended by the supervisor or seen finished */
	/* its outcome is in err_<code> (or needs none: FINAL, or answered_error) */
	bool counted;
	/* its submit was answered with an error, counted in err_<code> then (the
	 * forward failed): the stream's own end is not counted again */
	bool answered_error;
	/* a client's cancel was sent to its worker (set before the call, so a death of
	 * the worker before it ended the stream cannot miss it), or came while its submit
	 * was being forwarded (passed on once the worker admitted it, sup_forward.c): a
	 * death path ends the stream cancelled, never re-queues it */
	bool cancel_asked;
	/* its worker's loader was in its fill past --fill-ms (sup_health.c): the death
	 * path that follows ends the stream timeout, never re-queues it (the fill would
	 * hold another chip's loader the same way) */
	bool fill_held;
	/* ended, and read to its end or closed by its reader, as an admission's look at
	 * its client's usage saw it (sup_table_client_usage): counted for nothing there
	 * any more without reading the ring again, and given back by the sweep (or an
	 * allocation) as one read to its end is; a reader's later writes to its own
	 * consumer line bring it back into neither */
	bool reader_done;
	/* the supervisor closed the reader (reader_closed) and a later look found the
	 * consumer line open again: its reader undid the close, so the producer goes on;
	 * broken from then on (reclaimable) */
	bool reader_reopened;
	uint64_t id;
	uint32_t chip;
	pid_t producer; /* the worker pid the ring names */
	uint32_t ring_gen;
	/* the client process (its connection's SO_PEERCRED pid, the owner of the client
	 * region the submit came through; 0 once nobody will read the stream): its
	 * hang-up closes the stream's reader (sup_conn.c) */
	pid_t client;
	/* that client region: the ring's consumer line lies there while the entry is
	 * used, so the region is not scrubbed for another client before it is released */
	uint32_t region;
	uint64_t submitted_ns;
	/* nobody will read it (its client died, gave up on the submit, or the forward
	 * failed): the supervisor closed the ring's reader (ring_close_reader) at
	 * closed_ns, and the worker ends the stream cancelled at its next round */
	bool reader_closed;
	uint64_t closed_ns, closed_head; /* closed_ns: also whenever head moved since */
	/* when the sweep first saw the ring broken (an index or its identity not what
	 * the supervisor wrote, or a terminal claimed with no record): 0 while sound */
	uint64_t broken_ns;
	/* when the sweep first saw the terminal claimed with no terminal record, 0 when
	 * not: a producer between its claim and its record looks like this for a
	 * moment, so it counts as broken only after SUP_UNSEALED_MS */
	uint64_t unsealed_ns;
	/* ended, not drained: the reader's tail when last seen and since when it stood */
	uint64_t seen_tail, tail_since_ns;
	/* its callable's counts (sup_clstat.c): entry stat - 1 of sup.clstats while
	 * that entry's generation is stat_gen; 0 until its worker admitted it */
	uint32_t stat, stat_gen;
	/* what a re-queue on another worker needs */
	char wl[CHIPD_NAME_MAX];
	uint32_t nparams;
	struct chipd_param params[CHIPD_MAX_PARAMS];
	char keys[CHIPD_MAX_PARAMS][CHIPD_KEY_MAX];
	int64_t max_tokens, deadline_ns;
	uint32_t input_len; /* its inline input (0: none), kept for a re-queue */
	uint8_t input[PROTO_INPUT_INLINE_MAX];
	/* its ranges of the client's data area, as the submit gave them and admit
	 * checked them (length 0: none); a request whose input is in the data area is
	 * never re-queued (its bytes may be gone by then) */
	int64_t data_in_off, data_in_len, data_out_off, data_out_cap;
	/* a dead worker's unstarted request, held by the supervisor (ring_take_over) until
	 * another worker admitted it: the event loop posts its assign on one tick and
	 * completes it on a later one (sup_workers.c); forwarding stays set meanwhile, so
	 * nothing else touches the entry. e->chip is the chip whose load counts it: the
	 * dead one until posted, then the one posted to */
	bool requeue;
	uint32_t rq_from;     /* the chip whose worker died */
	uint64_t rq_since_ns; /* when that worker's death was handled */
	pid_t rq_pid;	      /* the worker the assign was posted to */
	uint64_t rq_refused;  /* the chips that refused the move no_capacity (bit per chip) */
	struct sup_post rq_post;
};

/* One connection of the handshake socket (sup_conn.c), under sup.lock. A client is a
 * process: its identity is the connection's SO_PEERCRED pid, and what it holds (mailbox
 * slots, requests, rings) is reclaimed when its last connection closes or its pidfd
 * says it exited. */
struct sup_conn {
	int fd;	   /* -1: the entry is free */
	int pidfd; /* the peer process, opened at accept; -1 none */
	pid_t pid; /* SO_PEERCRED, at connect */
	uid_t uid;
	gid_t gid;
	uint64_t id;	     /* the hello answer's "client" */
	uint32_t gen;	     /* +1 each time the entry is reused: tags of stale polls */
	bool live;	     /* hello answered: its pid may use the mailbox */
	bool closing;	     /* retired: the loop cancels its polls, then releases it */
	uint64_t accepted_ns;
	/* event loop: a poll of the fd / pidfd is wanted (not armed yet) or armed */
	bool want_fd, want_pid, armed_fd, armed_pid;
	/* its client region (sup_region.c), from the hello on; SUP_REGION_NONE before */
	uint32_t region;
};

/* The states of a client region of the pool (sup_region.c), under sup.lock. */
enum sup_region_state {
	SUP_REGION_FREE = 0, /* scrubbed, in the free queue */
	SUP_REGION_LIVE,     /* a live connection's: the router serves its mailbox */
	SUP_REGION_GONE,     /* its connection ended: slots reaped, streams still use it */
	SUP_REGION_SCRUB,    /* nothing uses it: the router scrubs it, then FREE */
};
#define SUP_REGION_NONE UINT32_MAX

/* The grace of one client region before its scrub, for one chip (sup_region.c): the
 * pass words of that chip's worker (proto/node.h) seen odd when a stream of the region
 * was released while that worker lived (0: not waited on; a word seen odd is never
 * 0), and that worker (pid 0: nothing to wait for). */
struct sup_grace {
	pid_t pid;
	uint64_t pid_start;
	uint64_t pass_o, pass_s;
};

/* The router's own view of the live client regions (router thread only): rebuilt from
 * the pool whenever sup.region_epoch moved. */
struct sup_view {
	uint32_t epoch;
	uint32_t n, cursor;
	uint32_t *idx; /* live regions */
	pid_t *pid;    /* their connections' pids */
};

/* A registered callable's books (sup_register.c), under sup.lock. */
struct sup_reg_book {
	bool draining;	  /* unregister or quarantine under way: new requests refused */
	bool quarantined; /* the router unregisters it (sup_register_tick) */
	bool drain_cancel; /* the drainer's mode is cancel */
	uint32_t crashes; /* worker deaths with one of its requests in flight */
	/* the connection (its hello's "client") whose unregister --drain or --cancel is
	 * under way, 0 none: once it is gone, the router carries the drain out itself */
	uint64_t drainer;
	/* the unload posted to each chip and not read yet (router thread, under
	 * reg.lock): read at the next step, given up after SUP_FORWARD_MS */
	struct sup_post unload[CHIPD_MAX_CHIPS];
};

struct wrk_reg_entry;
struct sup_ccl;
struct sup_defer;

struct sup {
	struct sup_config cfg;
	struct sup_sources src;
	char region_name[SHM_NAME_MAX];
	struct proto_node node;
	pid_t pid;
	uint64_t started_ns;
	struct sup_worker workers[CHIPD_MAX_CHIPS];

	pthread_mutex_t lock; /* the table, worker state/pid/load, next_id, clstats */
	struct sup_req *reqs; /* node.desc->nrings entries */
	/* the counts of each callable (sup_clstat.c), cfg.max_callables entries */
	struct sup_clstat *clstats;
	uint32_t clstats_used; /* entries that hold a name */
	/* each entry's ring, bound once when the region was made: its capacity and
	 * record array never come from the header again (the reader can write it) */
	struct ring *rings;
	uint32_t nreqs;
	uint64_t next_id;

	_Atomic int sup_state; /* enum chipd_sup_state; router reads (acquire) */
	/* 0, or SUP_STOP_ASKED | the drain's grace in ms: set once by a drain or stop
	 * request or a signal (sup_ask_stop), read by the event loop */
	_Atomic uint64_t stop_req;
	/* 0, or when the grace of a drain or stop request that came after the first ends,
	 * the earliest such (CLOCK_MONOTONIC ns): it cuts what is left of the drain */
	_Atomic uint64_t stop_cut_ns;
	_Atomic bool router_quit; /* the router thread leaves */
	pthread_t router;
	bool router_running;
	pid_t router_client;   /* router thread only: who sent the request being served */
	uint32_t router_region; /* router thread only: the client region it came through */
	struct mbox_ticket router_ticket; /* router thread only: that request's slot */
	/* router thread only: that request's bytes, in its slot (sup_router_defer copies
	 * them), and whether it is a put-off one run again */
	const void *router_req;
	uint32_t router_req_len;
	bool router_rerun;
	/* router thread only: the registers and unregisters put off while a worker's
	 * start held the registry's lock (sup_router.c), the first ndefer in use */
	struct sup_defer *defer;
	uint32_t ndefer;
	/* router thread only: the submits forwarded to a worker and not answered yet
	 * (sup_forward.c), fwd_cap = nreqs entries, the first nfwd in use */
	struct sup_fwd *fwd;
	uint32_t nfwd, fwd_cap;
	struct proto_msg *fwd_msg; /* router thread only: scratch for an assign or answer */
	/* router thread only: the cancels passed on to workers and not ended yet
	 * (sup_cancel.h), the first nccl of ccl_cap in use; nccl_clients of them clients'
	 * cancels, at most ccl_client_cap (the node's client slots) */
	struct sup_ccl *ccl;
	uint32_t nccl, ccl_cap, nccl_clients, ccl_client_cap;
	/* the handshake socket (sup_conn.c): listening fd, its path, the connections */
	int listen_fd;
	/* a descriptor (/dev/null) held back for the moment chipd runs out of them: closed
	 * to accept one connection and refuse it, then taken again (sup_conn_accept); -1
	 * none */
	int spare_fd;
	/* event loop only: connections are refused for want of descriptors (logged once
	 * then, and once a connection is taken whole again), and how many meanwhile */
	bool accept_starved;
	/* the descriptor limit was found under the spare's number (logged once, until a
	 * connection is taken whole again) */
	bool spare_over_limit;
	uint64_t starved_refused;
	char sock_path[PROTO_NODE_SOCK_MAX];
	struct sup_conn *conns; /* cfg.max_clients entries */
	uint64_t next_client;
	/* the client regions (sup_region.c), node.npool of them, under sup.lock: each
	 * one's state and its live connection's pid, and the free ones in the order they
	 * were freed (a region goes to the client that waited longest behind it) */
	uint8_t *region_state;
	pid_t *region_pid;
	uint32_t *region_free, free_head, free_count;
	/* node.npool * cfg.chips graces, region k's for chip c at k * cfg.chips + c */
	struct sup_grace *region_grace;
	/* +1 (seq_cst) whenever a region goes LIVE, GONE or SCRUB: the router's view is
	 * current while it is unchanged */
	_Atomic uint32_t region_epoch;
	/* a futex word in this process's own memory: +1 and a wake when the router must
	 * look (a region went live or is to be scrubbed, or the router is to quit) */
	_Atomic uint32_t router_bell;
	struct sup_view view; /* router thread only */
	struct shm_spin router_spin; /* router thread only: its wait's adaptive spin */
	/* event loop: what each slot of each region held while its owner pid was not the
	 * region's client (forged, or a forked child), and since when (SUP_UNCONNECTED_MS);
	 * slot i of region k at k * slots + i */
	uint64_t *slot_seen_ctl, *slot_seen_ns;
	int spawn_fd;	   /* the spawner's request socket (sup_spawner.c) */
	/* event loop: the number of the last start asked of the spawner, and whether its
	 * reply is still to come (a start given up on at SPAWN_REPLY_MS) */
	uint32_t spawn_seq;
	bool spawn_unanswered;
	/* event loop: a start asked and not given up on (sup_spawner_reply reads its
	 * reply, until spawn_until_ns), of chip spawn_chip, for worker spawn_worker (NULL
	 * at the start-up: sup_worker_spawn waits for it) */
	bool spawn_awaited;
	uint32_t spawn_chip;
	uint64_t spawn_until_ns;
	struct sup_worker *spawn_worker;
	int loop_wake_fd;  /* an eventfd the event loop polls: a stop asked by another
			    * thread is acted on at once, not at the next (idle) tick */
	pid_t spawner_pid; /* it forks the workers: a single-threaded process */
	int spawner_pidfd; /* its pidfd, polled by the event loop: its death ends chipd */
	/* detached: the log file that stdout and stderr become once chipd is ready (the
	 * spawner's and the workers' at once), so that nothing holds the caller's; -1 */
	int log_fd;
	struct pidfh *pidfh;
	int notify_fd; /* --notify-fd: a newline when ready */
	int daemon_fd; /* detached: the waiting parent's pipe, a newline when ready */
	uint64_t watchdog_next_ns;
	uint64_t workers_tick_ns; /* event loop: the last sup_workers_tick, to see a stall */
	/* the run-time registry (sup_register.c): n entries shared with the workers, and
	 * the supervisor's books of each; lock covers a registration or unregistration */
	struct {
		struct wrk_reg_entry *entries;
		struct sup_reg_book *books;
		uint32_t n;
		uint32_t used; /* entries not FREE: written under sup.lock by the router */
		pthread_mutex_t lock;
		struct sup_probe *probe; /* a register's probe (sup_probe.h): router thread */
		/* quarantines decided (event loop) and not yet carried out (router) */
		_Atomic uint32_t quarantines;
		/* books with a drainer (router thread), and when the router looks next */
		uint32_t drains;
		uint64_t drains_next_ns;
	} reg;
};

/* ---- request table (sup_table.c), all under s->lock ---- */
int sup_table_init(struct sup *s);
void sup_table_free(struct sup *s);
/* The live entry of @id, or NULL (entries whose stream drained are freed first). */
struct sup_req *sup_table_find(struct sup *s, uint64_t id);
/* A free ring for a new stream (reclaiming drained ones), or NULL. */
struct sup_req *sup_table_alloc(struct sup *s);
uint32_t sup_table_index(const struct sup *s, const struct sup_req *e);
/* Frees @e (its ring becomes reusable). */
void sup_table_release(struct sup *s, struct sup_req *e);
/* @e's ring, bound by the supervisor when it made the region: every index it reads
 * is masked with its own capacity, never the header's (the reader may write it). */
struct ring *sup_table_ring(struct sup *s, const struct sup_req *e);
/* Rewrites the identity of @e's ring (the reader may have overwritten it) and resets
 * it for stream @id (ring_reset). Returns the new generation. */
uint32_t sup_table_reset(struct sup *s, struct sup_req *e, uint64_t id, pid_t producer,
			 pid_t consumer);
/* Says, as the reader's stand-in, that nobody will read @e's stream any more
 * (ring_close_reader): a worker holding the request cancels it at its next round,
 * and the sweep reclaims the ring once ended, or takes it back when no worker ends
 * it (sup_table_sweep). Once per entry. */
void sup_table_close_reader(struct sup *s, struct sup_req *e);
/* Reclaims the rings of ended streams nobody reads (drained, reader closed or dead,
 * or unread for SUP_UNREAD_MS), and takes back by force, within a bounded time, those
 * no producer will end (broken by their reader for SUP_BROKEN_MS, or closed and not
 * ended by the worker within the stuck bound); counts the outcome of every stream seen
 * ended (err_<code>) and live ones (not ended) into the gauges. */
uint32_t sup_table_sweep(struct sup *s);
/* Ends @e's stream with @code as the producer's stand-in (its producer is dead or
 * will not write again): takes the ring over and writes the terminal record, unless
 * the stream already ended; counts the outcome either way. */
void sup_table_end(struct sup *s, struct sup_req *e, enum chipd_code code);
/* The assign that hands @e to its worker (e->chip's; the ring and generation of @e). */
void sup_table_assign(struct sup *s, const struct sup_req *e, struct proto_msg *m);
/* Entries not yet ended (and each chip's, in its unended); counts the outcome of
 * every stream seen ended. */
uint32_t sup_table_live(struct sup *s);

/* Counts the entries of client @pid whose ring it holds (*@rings: not ended, or ended
 * and neither read to the end nor closed) and, of those, the ones not ended
 * (*@pending). Reads the rings only; an entry seen ended and read or closed is
 * remembered (reader_done) and not read again. */
void sup_table_client_usage(struct sup *s, pid_t pid, uint32_t *pending, uint32_t *rings);

/* ---- who may use the node (sup_admit.c) ---- */
/* Whether the peer of connection @c (its SO_PEERCRED uid and gid, and the
 * SO_PEERGROUPS of its fd) may use the node: chipd's own uid, or with --allow-group a
 * member of that group. When not, @why (@cap bytes) says why, for the refusal. */
bool sup_admit_peer(const struct sup *s, const struct sup_conn *c, char *why, size_t cap);
/* For the router's @op acting on the whole node (drain, stop, trace): CHIPD_OK when
 * the client being served (router_client) runs as chipd's uid, else bad_request
 * "permission denied" in @err. Router thread; takes sup.lock. */
int sup_admit_node_op(struct sup *s, const char *op, struct proto_error *err);
/* Whether the client being served may cancel a request of client @owner: chipd's own
 * uid may cancel any, another uid those of its own uid. Router thread, under sup.lock. */
bool sup_admit_cancel(const struct sup *s, pid_t owner);

/* ---- handshake socket and clients (sup_conn.c) ---- */
/* Binds and listens on RUNTIME_DIR/chipd.UID.INSTANCE.sock (mode 0600, or 0660 of the
 * --allow-group group; a socket left
 * there by a dead chipd is replaced, anything else refused) and writes its path into
 * the node descriptor. Main thread, before READY. Returns 0 or -errno (logged). */
int sup_conn_listen(struct sup *s);
/* Closes every connection and the socket, and unlinks it. */
void sup_conn_close_all(struct sup *s);
/* Accepts every pending connection (non-blocking): the peer's credentials and a pidfd
 * are taken at once; one over --max-clients is answered queue_full and closed, and so
 * is one chipd has no descriptor for (taken with the spare one). Event loop. Returns
 * true to poll the listening socket again at once, false when accepting failed for
 * want of descriptors and nothing could be refused either: the loop polls it again on
 * its next tick, as a poll that fires while nothing can be accepted would spin. */
bool sup_conn_accept(struct sup *s);
/* Connection @i's fd polled with @revents: the hello (answered, or refused and
 * closed), or the hang-up of a live connection (EOF, POLLHUP, POLLRDHUP, an error, or
 * anything sent after the hello). Event loop. */
void sup_conn_event(struct sup *s, uint32_t i, uint32_t revents);
/* Closes retired connection @i's descriptors once the loop cancelled its polls, and
 * frees the entry. Event loop. */
void sup_conn_release(struct sup *s, uint32_t i);
/* Connection @i's process exited (its pidfd became readable). Event loop. */
void sup_conn_exited(struct sup *s, uint32_t i);
/* Per tick: closes connections whose hello did not come within PROTO_HELLO_WAIT_MS,
 * reclaims the slots of each live client region whose owner pid is not the region's
 * client (at once for a dead pid, after SUP_UNCONNECTED_MS in one state otherwise),
 * and hands the regions of gone clients that nothing uses any more to the router to
 * scrub. Event loop. */
void sup_conn_tick(struct sup *s, uint64_t now);
/* Whether @pid has a live connection. Under sup.lock. */
bool sup_conn_pid_live(const struct sup *s, pid_t pid);
/* The id of @pid's live connection whose client region is @region (a process may hold
 * several), 0 when none. Under sup.lock. */
uint64_t sup_conn_id_of(const struct sup *s, pid_t pid, uint32_t region);
/* Whether the connection of id @id is still live. Under sup.lock. */
bool sup_conn_id_live(const struct sup *s, uint64_t id);
/* Whether @e's reader may still read it: its client region is still its client's
 * (LIVE, with that pid). Under sup.lock. */
bool sup_conn_reader_live(const struct sup *s, const struct sup_req *e);
/* Closes the readers of the streams whose client region is not live any more (their
 * workers cancel them at their next round) and sweeps the table. Under sup.lock. */
void sup_conn_orphans(struct sup *s);

/* ---- client regions (sup_region.c) ---- */
/* Sets up the pool's books: every region FREE, in the free queue. Main thread, before
 * any connection. Returns 0 or -ENOMEM. */
int sup_region_init(struct sup *s);
void sup_region_free(struct sup *s);
/* Takes the free region freed longest ago for the connection of @pid (LIVE), or
 * SUP_REGION_NONE when none is free. Under sup.lock. */
uint32_t sup_region_take(struct sup *s, pid_t pid);
/* Region @k's connection ended: every slot still held is reaped (counted in
 * mbox_resets; a TAKEN one goes RESET for the router), and the region is GONE until
 * nothing uses it. Under sup.lock. */
void sup_region_release(struct sup *s, uint32_t k);
/* A stream of region @k produced by the worker of @chip, pid @pid, is released (its
 * ring taken back, or its end read): that worker may still be inside a section that
 * writes into the region (its output, its reader's wake) that began before. Records
 * the worker's pass words that are odd now, so the region is not scrubbed before they
 * moved or the worker died. The caller bumped the ring's generation already where the
 * worker has not ended the stream. Under sup.lock. */
void sup_region_grace(struct sup *s, uint32_t k, uint32_t chip, pid_t pid);
/* Hands every GONE region no table entry uses any more, and whose grace passed, to the
 * router to scrub. Under sup.lock. */
void sup_region_collect(struct sup *s);
/* Wakes the router (a region changed, or it is to quit). Any thread. */
void sup_router_wake(struct sup *s);
/* Router thread: the next request or reset of any live client region, round robin
 * over the regions, spinning and then sleeping on every live region's doorbell at once
 * (and the router bell), until @deadline_ns. Scrubs the regions handed to it on the
 * way. Returns 0 with @ev and the region's index and client pid, -ETIMEDOUT, or -EINTR
 * once router_quit is set. */
int sup_region_next(struct sup *s, struct mbox_event *ev, uint32_t *region, pid_t *pid,
		    uint64_t deadline_ns);
/* Router thread: whether region @k is still the live region of @pid. */
bool sup_region_still(struct sup *s, uint32_t k, pid_t pid);

/* ---- workers (sup_workers.c) ---- */
/* Creates every worker's control region (before any fork). */
int sup_workers_init(struct sup *s);
void sup_workers_free(struct sup *s);
/* Starts worker @w (forked by the spawner), waiting for the spawner's reply (5 s at
 * most). Returns 0 or -errno. Main thread, at the start-up (the event loop's restarts
 * do not wait: sup_workers_tick, sup_workers_spawn_reply). */
int sup_worker_spawn(struct sup *s, struct sup_worker *w);
/* Ends the restart whose start awaits the spawner's reply, if any, once the reply came
 * (the worker is STARTING) or its 5 s passed (given up: retried after the backoff);
 * else returns at once. Event loop: when the spawner's socket is readable, and per
 * tick. */
void sup_workers_spawn_reply(struct sup *s, uint64_t now);
/* Gives up the start awaiting the spawner's reply, if any: the event loop ends (the
 * spawner's worker, if it forks one, dies with it at its close). Event loop. */
void sup_workers_spawn_abandon(struct sup *s);
/* The worker process's body after fork: set-up, wrk_main, _exit. @parent is the
 * forking process (the spawner); @trace: record spans from the start (a trace op's
 * start is in force for the chip, sup_worker.tracing). */
_Noreturn void sup_worker_child(struct sup *s, struct sup_worker *w, pid_t parent, bool trace);
/* A worker's pidfd became readable: reap it and handle the death. */
void sup_worker_exited(struct sup *s, struct sup_worker *w);
/* Ends or moves @e, a stream of @w's worker that died, as its death path does: one
 * that ended is marked so; one with no token out is taken over for a re-queue when
 * @requeue_unstarted, unless its client cancelled it, its fill held the loader past
 * --fill-ms or its input is in the data area; any other ends (cancelled, timeout or
 * worker_lost). For the death path, and for the router when the worker died after it
 * admitted a submit whose answer the router had not read yet. Under sup.lock. */
void sup_worker_orphan(struct sup *s, struct sup_worker *w, struct sup_req *e,
		       bool requeue_unstarted);
/* Per tick: heartbeats, stuck workers, restarts due, and the re-queues of dead workers'
 * unstarted requests (posted, answers read, given up after SUP_FORWARD_MS). */
void sup_workers_tick(struct sup *s, uint64_t now);
/* Ends every re-queue still pending with cancelled, as the stop's grace ends every
 * stream still open (docs/protocol.md 8.4, drain) (a posted one is given up and its
 * ring's reader closed, so a worker that admitted it cancels it): the stop does not
 * wait for them. Event loop, before the workers are told to shut down. */
void sup_workers_requeue_end_all(struct sup *s);
/* A cancel of @e, a request being re-queued (e->requeue); @m is scratch. When the
 * worker its assign was posted to has admitted it already (it may be producing), the
 * ring goes to that worker now, as the next tick would hand it over, and that worker
 * is returned: the caller cancels the request there like any other (cancel_asked set).
 * Otherwise the assign, if posted, is given up (a worker that took it meanwhile finds
 * its answer's slot reset and cancels its copy), the stream ends cancelled here, and
 * NULL is returned. Under sup.lock (router thread). */
struct sup_worker *sup_workers_requeue_cancel(struct sup *s, struct sup_req *e,
					      struct proto_msg *m);
/* Whether every chip is READY or FAILED (start-up is over). */
bool sup_workers_settled(struct sup *s);

/* ---- health (sup_health.c), event loop thread ---- */
/* A new incarnation of @w: no heartbeat awaited, no progress seen yet. */
void sup_worker_health_reset(struct sup_worker *w, uint64_t now);
/* Gives up the heartbeat @w has pending, if any. */
void sup_worker_hb_drop(struct sup_worker *w);
/* Per tick for a live worker: polls its pending heartbeat and judges the answer
 * (degrades and kills it when unhealthy), sends the next one when due, and kills a
 * worker that left one unanswered for --stuck-ms. @resumed: the supervisor itself did
 * not run for a while (its clocks start again). */
void sup_worker_heartbeat(struct sup *s, struct sup_worker *w, uint64_t now, bool resumed);
/* One round trip to a worker's mailbox: the request to send, the answer, and the
 * buffer both are encoded in. On the heap: a struct proto_msg is about 41 KiB, too
 * much for the router's and the event loop's stacks. */
struct sup_call {
	struct proto_msg req, ans;
	int rc;			  /* the mailbox's result of the last sup_call_run: 0 or -errno */
	char buf[PROTO_RESP_MAX]; /* the encoded request, then the encoded answer */
};

/* A call whose request is an empty @op message; NULL when out of memory. */
struct sup_call *sup_call_new(enum proto_op op);
/* Frees @c; NULL is a no-op. */
void sup_call_free(struct sup_call *c);
/* Sends @c->req to worker @w (router or event loop) and waits up to SUP_FORWARD_MS for
 * the answer in @c->ans. Returns CHIPD_OK when the worker answered ok. Otherwise the
 * code, with @err (may be NULL) filled and err->chip = @w's chip: the worker's own
 * refusal as it said it, or worker_lost ("chip N did not answer (...)") when no
 * answer came; @c->rc then holds the mailbox's -errno (-EPIPE: it died,
 * -ETIMEDOUT: it is stuck). */
enum chipd_code sup_call_run(struct sup *s, struct sup_worker *w, struct sup_call *c,
			     struct proto_error *err);
/* Whether @w's worker is silent: a call to it found no answer within SUP_FORWARD_MS
 * (it lives: stopped, or stuck) and no heartbeat was answered since. What the router
 * retries on its own (sup_register_tick) skips such a chip until it answers again,
 * instead of waiting SUP_FORWARD_MS for it every round. */
bool sup_worker_silent(struct sup *s, struct sup_worker *w);
/* Publishes @w's state in the directory (and @w->state). */
void sup_worker_set_state(struct sup *s, struct sup_worker *w, enum chipd_chip_state st);

/* ---- posted calls (sup_post.c; struct sup_post above) ---- */
/* Posts @m to @w's control mailbox without waiting. Returns 0 (@p pending), -EBUSY when
 * @p is pending already, -EAGAIN when every slot is busy (try again on a later tick),
 * or the encoder's or mbox_post's -errno. Event loop. */
int sup_post_send(struct sup_worker *w, struct sup_post *p, const struct proto_msg *m);
/* Looks at @p's answer without waiting. Returns -EINPROGRESS while none came; else @p
 * is done and the result is 0 with the answer decoded into @ans (NULL: only whether it
 * came), -EPROTO for an answer that does not decode, -EPIPE when the worker died or
 * left, -ECONNRESET/-ESTALE when a restarted worker took the slot back, or -ENOENT when
 * nothing was pending. Event loop. */
int sup_post_poll(struct sup_worker *w, struct sup_post *p, struct proto_msg *ans);
/* Gives @p up (its answer is never read); nothing when none is pending. */
void sup_post_drop(struct sup_worker *w, struct sup_post *p);

/* Whether new work may go to @w: READY, and its worker has not said it refuses new
 * work. A worker whose scheduler or orchestrator gave up marks its control region
 * DRAINING at once; the event loop marks the chip DEGRADED at its next tick, but no
 * submit goes there meanwhile. Under sup.lock (the router, or the event loop). */
static inline bool sup_worker_routable(const struct sup_worker *w)
{
	return w->state == CHIPD_CHIP_READY &&
	       atomic_load_explicit(&w->ctl.hdr->state, memory_order_acquire) == SHM_STATE_READY;
}

/* The routable worker (above) outside @skip (a mask of chips) with the fewest unended
 * requests, ties to the lower chip, or NULL: where a submit that names no chip goes,
 * where one refused no_capacity is offered next, where a dead worker's request is
 * re-queued. Unended, not load: a request that just ended still holds its table
 * entry until the sweep, and counting it would send its client's next request to the
 * other chip each time, whose threads have gone to sleep meanwhile. Under sup.lock. */
struct sup_worker *sup_worker_pick(struct sup *s, uint64_t skip);
/* Moves @e (a request not ended) from its chip to @to: the counts the pickers read
 * (load, unended) follow it at once, so that several requests moved in one pass (a
 * dead worker's re-queues) spread instead of all going to the chip the last count
 * found least busy. Under sup.lock. */
void sup_worker_move(struct sup *s, struct sup_req *e, struct sup_worker *to);

/* ---- start (sup_main.c) ---- */
/* chipd is ready: when detached, stdout and stderr become the log file (nothing of
 * chipd holds the caller's any more), then the waiting parent is told (it exits 0).
 * Nothing when not detached. Event loop. */
void sup_detached_ready(struct sup *s);

/* ---- event loop (sup_loop.c) ---- */
/* Runs until chipd stopped; returns the exit status. */
int sup_loop_run(struct sup *s);

_Static_assert(PROTO_SUP_err_node_lost - PROTO_SUP_err_bad_request ==
		   CHIPD_E_NODE_LOST - CHIPD_E_BAD_REQUEST,
	       "one err_<code> counter per error code, in code order");

/* ---- stop (here, inline) ---- */
#define SUP_STOP_ASKED (1ull << 63)

/* Asks for the stop: refuse new work, give in-flight work @grace_ms, end the workers,
 * exit. The first request starts the drain (one word, so the grace is never torn from
 * the flag); a later one can only shorten it: its grace, from now, when it ends first
 * (stop_cut_ns). Any thread. */
static inline void sup_ask_stop(struct sup *s, uint32_t grace_ms)
{
	uint64_t none = 0;

	/* new work is refused from the moment the request is answered; the event loop,
	 * woken through loop_wake_fd, does the rest */
	if (atomic_compare_exchange_strong_explicit(&s->stop_req, &none, SUP_STOP_ASKED | grace_ms,
						    memory_order_acq_rel, memory_order_relaxed)) {
		uint64_t one = 1;

		atomic_store_explicit(&s->sup_state, CHIPD_SUP_DRAINING, memory_order_release);
		if (s->loop_wake_fd >= 0) /* EAGAIN: a wake is pending anyway */
			(void)!write(s->loop_wake_fd, &one, sizeof(one));
	} else {
		uint64_t end = shm_now_ns() + (uint64_t)grace_ms * SHM_NS_PER_MS;
		uint64_t cur = atomic_load_explicit(&s->stop_cut_ns, memory_order_relaxed);

		while ((!cur || end < cur) &&
		       !atomic_compare_exchange_weak_explicit(&s->stop_cut_ns, &cur, end,
							      memory_order_relaxed,
							      memory_order_relaxed))
			;
	}
}

/* ---- router (sup_router.c) ---- */
int sup_router_start(struct sup *s);
void sup_router_stop(struct sup *s);
/* Puts the register or unregister being served off: it is run again, and answered,
 * once the registry's lock is free (a worker's start holds it until the spawner
 * answered: up to 5 s). Returns false when it cannot be (every place taken): the
 * caller waits for the lock then. Router thread. */
bool sup_router_defer(struct sup *s);

/* ---- submits in flight (sup_forward.c), router thread only ---- */

/* Allocates the in-flight table (one per request table entry) and its scratch.
 * Returns 0 or -ENOMEM. */
int sup_fwd_init(struct sup *s);
void sup_fwd_free(struct sup *s);
/* Forwards the admitted entry @e (forwarding, its assign not posted) to @w for the
 * request in @t of region @region: posts the assign without waiting. The client is
 * answered later by sup_fwd_progress. A submit not @pinned to its chip that the chip
 * refuses no_capacity is offered to the other ready chips first. */
void sup_fwd_start(struct sup *s, struct sup_req *e, struct sup_worker *w, uint32_t region,
		   struct mbox_ticket t, bool pinned);
/* Completes every forward whose answer came, whose worker died or whose bound passed,
 * and posts those that found every worker slot busy. */
void sup_fwd_progress(struct sup *s);
/* Whether sup_fwd_progress has something to complete now (seq_cst loads). */
bool sup_fwd_ready(struct sup *s);
/* The client of region @region gave slot @t up (its reset was acknowledged): the
 * answer of a forward in that slot reaches nobody. */
void sup_fwd_client_reset(struct sup *s, uint32_t region, struct mbox_ticket t);
/* Adds the wake words of posted forwards to @w (from @n, at most @max in all); returns
 * the new count, and sets *@all false when some did not fit. */
uint32_t sup_fwd_announce(struct sup *s, struct shm_waitv *w, uint32_t n, uint32_t max,
			  bool *all);
/* Ends every forward still in flight with worker_lost (the router is leaving). */
void sup_fwd_end_all(struct sup *s);

/* ---- trace (sup_trace.c) ---- */
/* Sends trace @act to chip @chip's worker (-1: every running worker); for COLLECT,
 * merges their fragments into @path. A chip the node does not have is bad_request.
 * Returns CHIPD_OK or an error code with @err set. */
int sup_trace(struct sup *s, int act, int64_t chip, const char *path, uint64_t *events,
	      uint64_t *dropped, struct proto_error *err);
/* Removes chip @chip's trace fragment and its temporaries from the runtime directory:
 * what a worker killed while it wrote them (a collect the supervisor gave up on, then
 * the worker killed as stuck) would leave for good. Event loop, once the worker ended:
 * nothing of it writes there any more. */
void sup_trace_parts_remove(struct sup *s, uint32_t chip);

/* ---- counters (here, inline) ---- */
/* The supervisor block has two writers (router and event loop), so it adds with an
 * atomic read-modify-write rather than ctr_add's single-writer store; relaxed: a
 * counter orders nothing. */
static inline void sup_count(struct sup *s, enum proto_sup_ctr c, uint64_t n)
{
	atomic_fetch_add_explicit(&s->node.sup_ctr.values[c], n, memory_order_relaxed);
}

/* Counts a request that ended with @code (err_<code>): refused with the error
 * envelope (the router's proto_dispatch hook) or its stream ended with an ERROR record
 * (sup_table.c, when the supervisor sees the end). Each request once. */
static inline void sup_count_err(struct sup *s, enum chipd_code code)
{
	if (code > CHIPD_OK && code < CHIPD_NCODES)
		sup_count(s, (enum proto_sup_ctr)(PROTO_SUP_err_bad_request + code - 1), 1);
}

static inline void sup_gauge(struct sup *s, enum proto_sup_ctr c, uint64_t v)
{
	ctr_set(&s->node.sup_ctr, c, v);
}

#endif
