/* mbox.h - the multi-slot shared-memory mailbox with acknowledged reset.
 *
 * One server (the supervisor's router, or a worker) and any number of client
 * processes share N slots. Each slot carries one request and its answer through
 *
 *   FREE -claim-> CLAIMED -post-> POSTED -take-> TAKEN -answer-> DONE -release-> FREE(gen+1)
 *   POSTED -client gives up-> FREE(gen+1)                 (the server never saw it)
 *   TAKEN  -client gives up-> RESET -server acks-> FREE(gen+1)   (acknowledged reset)
 *   any    -owner dead (reaper) / server dead-> FREE(gen+1)
 *
 * State, owner pid and generation share one 64-bit control word, changed only by
 * compare-and-swap, so a claim records its owner atomically and every late write of
 * an old owner or an old server fails its CAS on the generation (ABA-safe). A slot is
 * never poisoned: every timeout path leads back to FREE through a transition that
 * the other side acknowledges or that a dead peer cannot contest.
 *
 * Sleeping uses a separate 32-bit futex word per slot and one doorbell per mailbox
 * (see wait.h); docs/protocol.md has the byte layout and every ordering.
 *
 * Thread safety: client calls may run on any number of threads and processes, each
 * on its own tickets. Server calls (mbox_server_*, mbox_answer*, mbox_ack_reset) belong
 * to the one server process; mbox_server_next to one thread of it at a time.
 * mbox_reap may be called by anyone.
 */
#ifndef CHIPD_SHM_MBOX_H
#define CHIPD_SHM_MBOX_H

#include "wait.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MBOX_MAGIC     0x3158424du /* "MBX1" little-endian */
#define MBOX_VERSION   1u
#define MBOX_MAX_SLOTS 4096u
#define MBOX_MAX_BUF   (1u << 20) /* per-slot request or response buffer */
#define MBOX_LINE      64u

enum mbox_state {
	MBOX_FREE = 0,
	MBOX_CLAIMED = 1,
	MBOX_POSTED = 2,
	MBOX_TAKEN = 3,
	MBOX_DONE = 4,
	MBOX_RESET = 5,
};

/* Control word: bits 0-7 state, 8-31 owner pid (0 when FREE), 32-63 generation. */
#define MBOX_CTL(gen, pid, state)                                                                  \
	(((uint64_t)(gen) << 32) | (((uint64_t)(pid)&0xffffffu) << 8) | (uint64_t)(state))
#define MBOX_CTL_STATE(c) ((enum mbox_state)((c)&0xffu))
#define MBOX_CTL_PID(c)	  ((pid_t)(((c) >> 8) & 0xffffffu))
#define MBOX_CTL_GEN(c)	  ((uint32_t)((c) >> 32))

/* The mailbox header: two cache lines, then the attention bitmap, then the slots. */
struct mbox_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t nslots;
	uint32_t req_cap;
	uint32_t resp_cap;
	uint32_t slot_stride;
	uint32_t slots_offset;
	uint32_t bitmap_words;
	_Atomic uint32_t server_pid;   /* 0: no server attached */
	_Atomic uint32_t server_epoch; /* bumped by every mbox_server_attach */
	_Atomic uint64_t server_start; /* server's start time, see proc.h */
	uint64_t total_size;
	uint8_t reserved0[8];
	/* line 1: the doorbell, written by clients on post and reset */
	struct shm_wake doorbell;
	uint8_t reserved1[56];
	/* line 2..: _Atomic uint64_t attention[bitmap_words], padded to a line */
};
_Static_assert(sizeof(struct mbox_hdr) == 128, "mbox header is two cache lines");
_Static_assert(offsetof(struct mbox_hdr, server_pid) == 32, "mbox.server_pid");
_Static_assert(offsetof(struct mbox_hdr, server_start) == 40, "mbox.server_start");
_Static_assert(offsetof(struct mbox_hdr, doorbell) == 64, "mbox.doorbell");

/* One slot's header line; the request buffer follows at +64, the response buffer
 * at +64 + round_up(req_cap, 64). */
struct mbox_slot {
	_Atomic uint64_t ctl;	      /* MBOX_CTL(gen, owner pid, state) */
	struct shm_wake wake;	      /* the client sleeps here for the answer */
	_Atomic uint64_t owner_start; /* owner's start time, valid when owner_gen == gen */
	_Atomic uint32_t owner_gen;
	_Atomic uint32_t req_len;  /* written by the owner before post */
	_Atomic uint32_t resp_len; /* written by the server before answer */
	_Atomic uint32_t status;   /* 0, or an errno the mailbox layer answered with */
	uint8_t reserved[24];
};
_Static_assert(sizeof(struct mbox_slot) == MBOX_LINE, "mbox slot header is one line");
_Static_assert(offsetof(struct mbox_slot, wake) == 8, "slot.wake");
_Static_assert(offsetof(struct mbox_slot, owner_start) == 16, "slot.owner_start");
_Static_assert(offsetof(struct mbox_slot, req_len) == 28, "slot.req_len");
_Static_assert(offsetof(struct mbox_slot, status) == 36, "slot.status");

/* One process's handle on a mailbox. Only spin_ns and the cursors change after
 * attach. The geometry (slot count, buffer sizes, stride, bitmap words) is this
 * process's own copy, taken at init or attach: the header's copy is never read again,
 * so a peer that rewrites it steers no index or length. */
struct mbox {
	struct mbox_hdr *hdr;
	_Atomic uint64_t *attention;
	char *slots;
	uint32_t nslots, req_cap, resp_cap, stride;
	uint32_t words;		       /* attention bitmap words */
	uint64_t spin_ns;	       /* spin budget before sleeping */
	/* this process's adaptive spin on top of spin_ns (wait.h): the server's wait for
	 * work, and the clients' waits for answers */
	struct shm_spin server_spin, client_spin;
	_Atomic uint32_t claim_cursor; /* where the next claim starts looking */
	uint32_t scan_cursor;	       /* server: where the next scan starts */
	/* server: attention bits taken from the shared bitmap, not yet examined */
	uint64_t pending[MBOX_MAX_SLOTS / 64];
	/* this process only: set by mbox_server_interrupt, read by mbox_server_next */
	_Atomic bool interrupted;
	/* server only: requests longer than the buffer are reported, not refused here
	 * (mbox_server_take_oversize) */
	bool take_oversize;
	/* the server as this process knows it, or 0 to go by the header's server_pid and
	 * server_start: a client's from the kernel (mbox_client_set_server), the
	 * server's itself (mbox_server_attach) */
	pid_t server_pid;
	uint64_t server_start;
};

/* A client's hold on one slot in one generation. */
struct mbox_ticket {
	uint32_t slot;
	uint32_t gen;
};

enum mbox_event_kind {
	MBOX_EV_REQUEST = 1, /* a posted request, now TAKEN by the server */
	MBOX_EV_RESET = 2,   /* a client gave up on a slot the server holds: ack it */
};

struct mbox_event {
	enum mbox_event_kind kind;
	struct mbox_ticket t;
	/* MBOX_EV_REQUEST: the request bytes, valid until answered; NULL when len exceeds
	 * the buffer (only with mbox_server_take_oversize): there is nothing to read */
	const void *req;
	uint32_t len; /* the posted req_len */
	pid_t client;
};

/* Bytes a mailbox of this shape occupies, or 0 if the shape is out of range
 * (1..MBOX_MAX_SLOTS slots, buffers 1..MBOX_MAX_BUF bytes). */
size_t mbox_size(uint32_t nslots, uint32_t req_cap, uint32_t resp_cap);

/* Lays out a mailbox in @mem (64-byte aligned, @avail bytes, zeroed or not) and
 * attaches @mb to it. Creator only, before the memory is shared. Returns 0, -EINVAL
 * for a bad shape or alignment, -EMSGSIZE if it does not fit in @avail. */
int mbox_init(struct mbox *mb, void *mem, size_t avail, uint32_t nslots, uint32_t req_cap,
	      uint32_t resp_cap);

/* Attaches @mb to a mailbox laid out by another process, trusting nothing in it:
 * -EBADMSG bad magic, -EPROTONOSUPPORT other version, -EMSGSIZE a shape that does not
 * fit in @avail or disagrees with itself. */
int mbox_attach(struct mbox *mb, void *mem, size_t avail);

/* Sets how long waits spin before sleeping (0: sleep at once). */
void mbox_set_spin(struct mbox *mb, uint64_t spin_ns);

/* ---- client side ---- */

/* Claims a FREE slot for the calling process. Reaps dead owners once if none is
 * free. Returns 0, or -EAGAIN when every slot is busy. Never blocks. */
/* Client: takes the server's identity from a trusted source (the handshake socket's
 * SO_PEERCRED) instead of the header, which every client can write: the client's
 * waits then judge the server alive by @pid and its start time alone. @pid 0 goes
 * back to the header. */
void mbox_client_set_server(struct mbox *mb, pid_t pid);

/* Whether the server this client knows (mbox_client_set_server, else the header's) is
 * alive: after -ECONNRESET, a live server took the slot back itself (chipd's bound on
 * slots per client) rather than a new one recovering it. */
bool mbox_server_alive(const struct mbox *mb);

int mbox_claim(struct mbox *mb, struct mbox_ticket *t);

/* The request buffer of a claimed slot (mbox_req_cap bytes). */
void *mbox_req_buf(struct mbox *mb, struct mbox_ticket t);

/* Posts @len request bytes already written to the request buffer. Returns 0,
 * -EMSGSIZE if @len exceeds the buffer, -ESTALE if the slot is no longer this
 * ticket's CLAIMED slot. */
int mbox_post(struct mbox *mb, struct mbox_ticket t, uint32_t len);

/* Waits until the answer is there or @deadline_ns (CLOCK_MONOTONIC). Returns 0 when
 * DONE, -ETIMEDOUT (call mbox_give_up), -EPIPE when the server died or left (call
 * mbox_give_up), -ECONNRESET when the slot was taken back (a restarted server
 * recovered it; nothing left to do). */
int mbox_wait(struct mbox *mb, struct mbox_ticket t, uint64_t deadline_ns);

/* Whether mbox_wait(@t) would return at once: the slot left POSTED/TAKEN of @t's
 * generation (seq_cst loads). For a caller that waits on many slots and other words. */
bool mbox_answered(const struct mbox *mb, struct mbox_ticket t);

/* Announces a sleep on @t's slot (sleepers = 1, seq_cst) and returns its seq word and
 * value, for shm_futex_waitv beside other words; re-check mbox_answered after it. */
uint32_t mbox_client_announce(struct mbox *mb, struct mbox_ticket t, _Atomic uint32_t **word);

/* The answer of a DONE slot: sets *buf and *len. Returns 0, -ESTALE if the slot is
 * not this ticket's DONE slot, -EPROTO if the server wrote an impossible length, or
 * -errno the mailbox layer answered with instead of the server (-EMSGSIZE: the
 * request length was out of bounds). Call mbox_release afterwards in every case. */
int mbox_response(struct mbox *mb, struct mbox_ticket t, const void **buf, uint32_t *len);

/* Returns a DONE slot to FREE (generation + 1). Returns 0 or -ESTALE. */
int mbox_release(struct mbox *mb, struct mbox_ticket t);

/* Gives up on a request at any point. Returns 0 when the slot is FREE again, 1 when it
 * is RESET and waits for the server's acknowledgement (the client may walk away), or
 * -ESTALE when the ticket no longer holds the slot. */
int mbox_give_up(struct mbox *mb, struct mbox_ticket t);

/* One whole round trip: claim, copy @req in, post, wait, copy the answer into @resp
 * (at most @resp_cap bytes, *resp_len set to the answer's length), release. On any
 * failure the slot is given up; an answer that lands while the call gives up after
 * its deadline is the call's (the server saw its answer taken). Returns 0, -EAGAIN
 * (no free slot), -EMSGSIZE, -ENOBUFS (answer larger than @resp_cap), or what
 * mbox_wait/mbox_response return. */
int mbox_call(struct mbox *mb, const void *req, uint32_t len, void *resp, uint32_t resp_cap,
	      uint32_t *resp_len, uint64_t deadline_ns);

/* ---- server side ---- */

/* Makes the calling process the mailbox's server. Slots a previous (dead) server left
 * TAKEN or RESET are recovered (FREE, generation + 1; their clients see
 * -ECONNRESET). Returns how many were recovered, or -EBUSY if another live process
 * is the server. */
int mbox_server_attach(struct mbox *mb);

/* Stops being the server: clients waiting on taken slots see -EPIPE. */
void mbox_server_detach(struct mbox *mb);

/* Waits for the next event until @deadline_ns: a posted request (now TAKEN, answer
 * it) or a reset of a slot the server holds (acknowledge it). Spins, then sleeps on
 * the doorbell. A request whose length exceeds the buffer is answered by the mailbox
 * layer itself (status EMSGSIZE) and not reported, unless the server asked for such
 * requests (mbox_server_take_oversize). Returns 0, -ETIMEDOUT, or -EINTR once
 * mbox_server_interrupt was called. */
int mbox_server_next(struct mbox *mb, struct mbox_event *ev, uint64_t deadline_ns);

/* ---- one server, many mailboxes (chipd's router: one mailbox per client region) ----
 * The server polls each mailbox (mbox_server_poll), spins on mbox_server_ready, and to
 * sleep announces itself on each mailbox's doorbell (mbox_server_announce), checks
 * mbox_server_ready once more and sleeps on every doorbell's seq word at once
 * (shm_futex_waitv). A client wakes it through its own mailbox's doorbell, as with
 * mbox_server_next: nothing shared between two mailboxes. */

/* Takes the next event of @mb without waiting, as one round of mbox_server_next.
 * Returns true with @ev filled, false when nothing is flagged. */
bool mbox_server_poll(struct mbox *mb, struct mbox_event *ev);

/* Whether any attention bit of @mb's slots is set (seq_cst loads). */
bool mbox_server_ready(const struct mbox *mb);

/* Announces a sleep on @mb's doorbell (sleepers = 1, seq_cst) and returns its seq word
 * (seq_cst load): the value to sleep on, unless mbox_server_ready says otherwise. */
uint32_t mbox_server_announce(struct mbox *mb, _Atomic uint32_t **word);

/* From now on mbox_server_next reports a request whose req_len exceeds the request
 * buffer as an MBOX_EV_REQUEST with req NULL and len the posted length (status 0),
 * instead of answering it with status EMSGSIZE: the server answers it in its own
 * format (the router's too_large envelope) and counts it like any other. Call before
 * the thread that calls mbox_server_next starts; this process only. */
void mbox_server_take_oversize(struct mbox *mb);

/* Makes mbox_server_next return -EINTR at once, and from then on, in the thread that
 * waits in it (another thread of the server process calls this to stop it). Local to
 * this process: nothing in the shared layout changes. */
void mbox_server_interrupt(struct mbox *mb);

/* The response buffer of a taken slot (mbox_resp_cap bytes). */
void *mbox_resp_buf(struct mbox *mb, struct mbox_ticket t);

/* Answers a TAKEN slot with @len bytes already in its response buffer. Returns 0,
 * -EMSGSIZE if @len is too large, -ECANCELED if the client gave up meanwhile (the
 * reset is acknowledged here, the answer discarded), -ESTALE if the slot has moved
 * on to another generation. */
int mbox_answer(struct mbox *mb, struct mbox_ticket t, uint32_t len);

/* Copies @len bytes to the response buffer and answers; same returns. */
int mbox_answer_copy(struct mbox *mb, struct mbox_ticket t, const void *resp, uint32_t len);

/* Acknowledges a RESET slot: FREE, generation + 1. Returns 0 or -ESTALE. */
int mbox_ack_reset(struct mbox *mb, struct mbox_ticket t);

/* Frees slots whose owner died (CLAIMED, POSTED, DONE), turns TAKEN slots of dead
 * owners into RESET for the server to acknowledge, frees TAKEN and RESET slots when
 * the server is gone, and re-raises attention for POSTED and RESET slots (a lost
 * doorbell, or a RESET a client wrote without raising it). Returns how many
 * slots it freed: a slot it turned RESET is freed, and counted, by the server's
 * acknowledgement, so that each reset is counted once. */
int mbox_reap(struct mbox *mb);

/* Whether the owner of slot @slot, whose control word is @ctl and whose owner start
 * time is @start (0 when unknown), is to be treated as alive. */
typedef bool (*mbox_owner_fn)(void *ctx, uint32_t slot, uint64_t ctl, uint64_t start);

/* mbox_reap with the owner's liveness decided by @alive (NULL: the pid and start time
 * check of mbox_reap): a server that knows its clients another way (chipd's handshake
 * connections) reclaims the slots of owners it does not know. Same return. */
int mbox_reap_by(struct mbox *mb, mbox_owner_fn alive, void *ctx);

/* Inspection, for tests, chipctl and the counters. */
uint64_t mbox_ctl(const struct mbox *mb, uint32_t slot);

static inline uint32_t mbox_req_cap(const struct mbox *mb)
{
	return mb->req_cap;
}

static inline uint32_t mbox_resp_cap(const struct mbox *mb)
{
	return mb->resp_cap;
}

#endif
