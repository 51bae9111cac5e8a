/* ring_fixture.h - what the ring suites share (check_ring.c, ring_peers.c): a ring in
 * shared memory that children inherit, and records whose token a lost or repeated
 * one cannot fake. */
#ifndef CHIPD_RING_FIXTURE_H
#define CHIPD_RING_FIXTURE_H

#include "ring.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#define MS		(1000u * 1000u)
#define SLACK_NS	(2000ull * MS)
#define PEER_TIMEOUT_MS 5000u
#define REQ_ID		0x1122334455667788ull
/* An error code as a worker would send it (the proto enum's numbers are not ours). */
#define CODE_WORKER_LOST 9u

/* The two-process stream: enough laps of a small ring to shake out index bugs. */
#define STREAM_RECORDS	1000000u
#define STREAM_CAPACITY 64u
/* Normally under a second; ~11 s seen under TSan with both processes pinned to one
 * loaded core. The tcase timeout sits above this so a stall fails with a message. */
#define STREAM_TIMEOUT_S 45
/* The threaded stream gives ThreadSanitizer a view of both sides. */
#define THREAD_STREAM_RECORDS 200000u

/* A ring in memory that children inherit (the handle is copied across fork). */
struct fixture {
	struct ring r;
	void *mem;   /* the producer part */
	size_t size; /* its bytes */
	struct ring_cons *cons; /* the consumer line, right after it in the same mapping */
};

void fixture_init(struct fixture *f, uint32_t capacity);
void fixture_fini(struct fixture *f);
/* A token of stream position @seq that a lost or repeated record cannot fake. */
uint64_t token_of(uint32_t seq);
struct ring_rec rec_of(uint32_t seq, uint32_t flags);
/* Pushes the record of @seq; asserts it went in. */
void push_ok(struct ring *r, uint32_t seq, uint32_t flags);
/* Pops one record; asserts it is the record of @seq with @flags. */
void pop_expect(struct ring *r, uint32_t seq, uint32_t flags);

/* Adds the tcases of two sides of a ring in different processes or threads: waking,
 * a dead producer, take-over, long streams (ring_peers.c). */
void ring_add_peer_tcases(Suite *s);

#endif
