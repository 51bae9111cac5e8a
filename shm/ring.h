/* ring.h - single-producer single-consumer token rings in shared memory.
 *
 * A worker (producer) publishes a request's tokens; a client (consumer) reads them.
 * The producer never blocks: a full ring answers -EAGAIN and the worker pauses only
 * that request. The consumer waits spin-then-futex with a deadline. Exactly one
 * terminal record (FINAL, or ERROR with a code) ends a stream; one record of space is
 * held back for it, so a slow reader can never keep a stream from ending.
 *
 * If the producer dies, whoever supervises it may take the ring over
 * (ring_take_over) and write the terminal record itself.
 *
 * Layout (RING_VERSION 4): the producer part, a 128-byte header (two cache lines:
 * identity, producer index) followed by capacity 64-byte records, and apart from it
 * the consumer's line (struct ring_cons: tail word, futex, reader-closed word). The
 * tail word carries the generation of the stream it counts for (RING_TAIL), and the
 * consumer moves it with a CAS that fails once a reset gave it to another stream.
 * The two may live in different regions: the chipd node keeps the producer part in
 * the node region, which clients map read-only, and the consumer lines in the
 * exchange region clients may write (docs/protocol.md §5, normative).
 */
#ifndef CHIPD_SHM_RING_H
#define CHIPD_SHM_RING_H

#include "wait.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RING_MAGIC	  0x31474e52u /* "RNG1" little-endian */
#define RING_VERSION	  4u
#define RING_MIN_CAPACITY 2u
#define RING_MAX_CAPACITY 65536u

#define RING_PAYLOAD_MAX  24u /* bytes of a record's payload (CHIPD_CL_PAYLOAD_MAX) */

#define RING_F_FINAL	    0x1u /* the last token of a completed request */
#define RING_F_ERROR	    0x2u /* the stream ended with an error; code in bits 16-31 */
#define RING_F_TERMINAL	    (RING_F_FINAL | RING_F_ERROR)
#define RING_F_CODE(code)   (((uint32_t)(code)&0xffffu) << 16)
#define RING_CODE_OF(flags) ((flags) >> 16)

struct ring_rec {
	uint64_t request_id;
	uint32_t seq;	/* 0, 1, 2, ... per request */
	uint32_t flags; /* RING_F_* | RING_F_CODE(code) */
	uint64_t value; /* the token */
	uint64_t ts_ns; /* CLOCK_MONOTONIC when published (set by ring_push) */
	uint32_t out_len;     /* FINAL: the output bytes written; else 0 */
	uint32_t payload_len; /* bytes of payload in use: 0..RING_PAYLOAD_MAX */
	uint8_t payload[RING_PAYLOAD_MAX]; /* the callable's bytes beside the token */
};
_Static_assert(sizeof(struct ring_rec) == 64, "ring record is 64 bytes");
_Static_assert(offsetof(struct ring_rec, out_len) == 32, "ring_rec.out_len");
_Static_assert(offsetof(struct ring_rec, payload) == 40, "ring_rec.payload");

struct ring_hdr {
	/* line 0: identity, written by whoever (re)assigns the ring */
	uint32_t magic;
	uint32_t version;
	uint32_t capacity;	     /* records, a power of two */
	uint32_t rec_size;	     /* sizeof(struct ring_rec) */
	_Atomic uint32_t generation; /* bumped by ring_reset */
	_Atomic uint32_t terminal;   /* 0, then 1 once a terminal record is claimed */
	_Atomic uint32_t producer_pid;
	_Atomic uint32_t consumer_pid;
	_Atomic uint64_t producer_start;
	_Atomic uint64_t request_id;
	uint8_t reserved0[16];
	/* line 1: written by the producer only */
	_Atomic uint64_t head; /* records published so far */
	uint8_t reserved1[56];
};
_Static_assert(sizeof(struct ring_hdr) == 128, "ring header is two lines");
_Static_assert(offsetof(struct ring_hdr, producer_start) == 32, "ring.producer_start");
_Static_assert(offsetof(struct ring_hdr, head) == 64, "ring.head");

/* The consumer's tail word: the generation of the stream it counts for in the high 32
 * bits, the records of that stream consumed so far (mod 2^32) in the low 32. A reset
 * stores RING_TAIL(new generation, 0); the consumer moves only a word of its own
 * generation (CAS), so a store it makes late, after a reset, fails instead of moving
 * the next stream's tail. Producer and owner read the position alone, as untrusted
 * input, and compare it with head mod 2^32 (a ring holds at most 65536 records). */
#define RING_TAIL(gen, pos) (((uint64_t)(gen) << 32) | (uint32_t)(pos))
#define RING_TAIL_GEN(word) ((uint32_t)((word) >> 32))
#define RING_TAIL_POS(word) ((uint32_t)(word))

/* The consumer's line: written by the consumer (and by the ring's owner on reset). */
struct ring_cons {
	_Atomic uint64_t tail; /* RING_TAIL(generation, records consumed so far) */
	struct shm_wake wake;  /* the consumer sleeps here */
	_Atomic uint32_t closed; /* 0, or the generation whose reader closed (ring_close_reader) */
	uint8_t reserved[44];
};
_Static_assert(sizeof(struct ring_cons) == 64, "ring consumer line is one line");
_Static_assert(offsetof(struct ring_cons, wake) == 8, "ring_cons.wake");
_Static_assert(offsetof(struct ring_cons, closed) == 16, "ring_cons.closed");

#define RING_CONS_SIZE sizeof(struct ring_cons)

/* One process's handle on a ring. The capacity and mask are this process's own,
 * taken at init, bind or attach: every record index is masked with them, so whatever a
 * peer writes into the header (capacity, head, tail, magic) no call reads or writes
 * outside the ring's records. */
struct ring {
	struct ring_hdr *hdr;	/* producer part: identity, head, then the records */
	struct ring_cons *cons; /* consumer line, anywhere (64-byte aligned) */
	struct ring_rec *recs;
	uint32_t capacity;
	uint32_t mask; /* capacity - 1 */
	uint64_t spin_ns;
	struct shm_spin *adapt; /* consumer: its waits' adaptive spin (wait.h), or NULL */
	uint32_t reader_gen;	/* consumer: the generation of its stream, 0: any */
	/* consumer: the tail word as it last stored or found it, and the records it took
	 * (mod 2^32; ahead of the word's position by those it has not stored yet) */
	uint64_t read_word;
	uint32_t read_pos;
	uint32_t cached_tail; /* producer: last tail position seen, saves a shared read */
};

/* Bytes for the producer part (header and records) of a ring of @capacity records, or
 * 0 if @capacity is not a power of two in [RING_MIN_CAPACITY, RING_MAX_CAPACITY]. The
 * consumer line (RING_CONS_SIZE bytes) is extra, wherever the caller puts it. */
size_t ring_size(uint32_t capacity);

/* Lays out an empty ring: its producer part in @mem (64-byte aligned), its consumer
 * line at @cons (64-byte aligned). Creator only. Returns 0, -EINVAL (capacity or
 * alignment), -EMSGSIZE (does not fit in @avail). */
int ring_init(struct ring *r, void *mem, size_t avail, uint32_t capacity, struct ring_cons *cons);

/* Attaches to a ring laid out by another process, validating magic (-EBADMSG),
 * version (-EPROTONOSUPPORT) and shape (-EMSGSIZE); the capacity is read from the
 * header once. For a ring whose geometry the caller knows (it laid it out, or holds a
 * validated private copy of the layout), ring_bind and ring_check instead. */
int ring_attach(struct ring *r, void *mem, size_t avail, struct ring_cons *cons);

/* Binds @r to the ring at @mem (64-byte aligned, ring_size(@capacity) bytes the caller
 * knows to be there) and its consumer line @cons with @capacity records, reading nothing of the header's identity:
 * the ring's owner and its producer bind with the geometry that was laid out. Returns
 * 0 or -EINVAL (capacity or alignment). */
int ring_bind(struct ring *r, void *mem, uint32_t capacity, struct ring_cons *cons);

/* Whether the header's identity still says what @r was bound with: 0, -EBADMSG (magic),
 * -EPROTONOSUPPORT (version), -EMSGSIZE (capacity or record size). A hint for the
 * caller; no ring call depends on it being 0. */
int ring_check(const struct ring *r);

/* Empties the ring for a new stream and records its parties; bumps the generation.
 * Only while neither party uses it (the allocator's job). Returns the generation. */
uint32_t ring_reset(struct ring *r, uint64_t request_id, pid_t producer, pid_t consumer);
/* ring_reset with the producer's start time known (shm_proc_start_time(@producer),
 * as its spawner recorded it): no /proc read on the submit path. */
uint32_t ring_reset_started(struct ring *r, uint64_t request_id, pid_t producer,
			    uint64_t producer_start, pid_t consumer);

/* Sets how long ring_pop spins before sleeping. */
void ring_set_spin(struct ring *r, uint64_t spin_ns);
/* Consumer: gives its waits an adaptive spin on top of spin_ns (wait.h; NULL: none). */
void ring_set_adapt(struct ring *r, struct shm_spin *adapt);
/* Consumer: binds its pops to the stream of generation @gen (0: any, the default). Once
 * the ring's generation is another (the owner reset it and may have given it to another
 * stream), ring_try_pop and ring_pop answer -ESTALE and take nothing: a record read
 * while the generation moved is never returned. */
void ring_set_reader_gen(struct ring *r, uint32_t gen);

/* Publishes one record, stamping ts_ns. Non-terminal records need two free records
 * (one stays reserved for the terminal). Returns 0, -EAGAIN when full, -EALREADY when
 * the stream already has its terminal record (nothing more may follow), -EBADMSG when
 * a peer broke the indices (the consumer's tail is past head, or more than capacity
 * records ahead of it). Never blocks. */
int ring_push(struct ring *r, const struct ring_rec *rec);

/* ring_push without waking the reader: the producer counts what it published first
 * (a worker's tokens, completed, cancelled, failed), so that a producer killed after
 * the record is visible has counted it in all but a few instructions, not across the
 * wake's system call; then ring_wake_reader. Same returns as ring_push. */
int ring_publish(struct ring *r, const struct ring_rec *rec);

/* Wakes the reader of @r after ring_publish. */
void ring_wake_reader(struct ring *r);

/* Records a non-terminal push could publish now. */
uint32_t ring_space(struct ring *r);

/* Takes the next record without waiting. Returns 0, -EAGAIN when empty, -ENODATA
 * after the terminal record has been consumed, -EBADMSG when a peer broke the indices,
 * -ESTALE when the ring left the reader's generation (ring_set_reader_gen) or the tail
 * word was rewritten under the reader (a reset between its look and its store: the
 * record is dropped, and the word is left as the reset wrote it).
 * The tail is stored (one CAS) for a batch of records: when the record taken is the
 * last one published, once the stream's terminal is claimed, and at least every 16
 * records (every capacity / 4 on smaller rings); so a reader waits, and the owner sees
 * a finished stream drained, only with its tail stored. */
int ring_try_pop(struct ring *r, struct ring_rec *out);

/* Consumer: stores the tail for every record taken so far (ring_try_pop may hold the
 * store back for a batch), for a reader that puts its handle down while records it
 * took are still unstored and another handle may read on. Returns 0, or -ESTALE when
 * the tail word was rewritten under the reader (nothing stored). */
int ring_store_tail(struct ring *r);

/* Waits for the next record until @deadline_ns. Returns 0, -ENODATA (stream already
 * ended), -ETIMEDOUT, -EOWNERDEAD when the producer died without ending the stream (its
 * supervisor is expected to take over and end it), or what ring_try_pop does (-EBADMSG,
 * -ESTALE: a generation change ends the wait at its next look). */
int ring_pop(struct ring *r, struct ring_rec *out, uint64_t deadline_ns);

/* Makes the caller the producer of a ring whose producer died. A terminal record the
 * dead producer claimed but never published is released, so the caller can always
 * end the stream. Returns 0, or -EBUSY while the recorded producer is alive. */
int ring_take_over(struct ring *r);

/* Whether the stream's terminal record has been published (nothing more will come). */
bool ring_finished(const struct ring *r);

/* The flags of the stream's terminal record once it is published: RING_F_FINAL (the
 * stream completed) or RING_F_ERROR | RING_F_CODE(code); 0 while the stream has not
 * ended. Nothing writes a finished ring until its owner resets it, so the record
 * stays readable after the consumer took it. */
uint32_t ring_end_flags(const struct ring *r);

/* The stream's terminal record itself, as ring_end_flags finds it: true with a copy
 * in *@out once it is published (its seq is the number of tokens before it), false
 * while the stream has not ended (*@out untouched). */
bool ring_end_record(const struct ring *r, struct ring_rec *out);

/* Whether the stream ended and its consumer read everything, terminal included: the
 * ring may be given to another stream. */
bool ring_drained(const struct ring *r);

/* Says that nobody will read the stream of the reader's generation (ring_set_reader_gen)
 * any more: the producer stops the stream (ends it cancelled) at its next look
 * (ring_reader_closed), while the ring is still that stream's. Records that generation,
 * never the one it finds, so a close that races with a reset never closes the next
 * stream. A reader bound to no generation closes nothing (-EINVAL): whatever generation
 * it would load may be the next stream's. Returns 0; idempotent; never blocks. */
int ring_close_reader(struct ring *r);

/* The ring's owner closes the stream of generation @gen (the one it assigned) in place
 * of its consumer (ring_close_reader): nothing once the ring moved to another. */
void ring_close_stream(struct ring *r, uint32_t gen);

/* Whether the reader of the ring's current stream closed it (ring_close_reader). Once
 * true, the reader's every earlier tail store is visible (acquire), and it stores no
 * more. Two plain loads on x86: cheap enough to poll once per scheduling round. */
bool ring_reader_closed(const struct ring *r);

/* Names @producer (alive, its start time read now) as the ring's producer, for a
 * stream moved from a dead producer to a new one before it produced anything. Only
 * the caller of ring_take_over (the current producer) may hand a ring over. Returns
 * 0, -EPERM when the caller is not the producer, -ESRCH when @producer is gone. */
int ring_hand_over(struct ring *r, pid_t producer);

#ifdef CHIPD_RING_TEST_SEAM
/* Test builds only (check_ring): when set, called by a consumer's pop after its last
 * look at the generation and before its tail store, so a test can reset the ring
 * inside that window as an owner racing a descheduled reader would. */
extern void (*ring_test_before_tail_store)(const struct ring *r);
#endif

#endif
