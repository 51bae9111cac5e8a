/* ring_fixture.c - the ring suites' shared ring and records (ring_fixture.h). */
#include "ring_fixture.h"
#include "testutil.h"

#include <check.h>
#include <string.h>

void fixture_init(struct fixture *f, uint32_t capacity)
{
	f->size = ring_size(capacity);
	ck_assert_uint_ne(f->size, 0);
	f->mem = tu_shared(f->size + RING_CONS_SIZE);
	f->cons = (struct ring_cons *)(void *)((char *)f->mem + f->size);
	ck_assert_int_eq(ring_init(&f->r, f->mem, f->size, capacity, f->cons), 0);
}

void fixture_fini(struct fixture *f)
{
	tu_unmap(f->mem, f->size + RING_CONS_SIZE);
}

/* A token of stream position @seq that a lost or repeated record cannot fake. */
uint64_t token_of(uint32_t seq)
{
	return (uint64_t)seq * 0x9e3779b97f4a7c15ull ^ 0xabcdefull;
}

struct ring_rec rec_of(uint32_t seq, uint32_t flags)
{
	struct ring_rec rec = {
	    .request_id = REQ_ID, .seq = seq, .flags = flags, .value = token_of(seq)};

	/* the v3 fields travel too: a payload of its own per seq, out_len on FINAL */
	rec.payload_len = seq % (RING_PAYLOAD_MAX + 1);
	for (uint32_t i = 0; i < rec.payload_len; i++)
		rec.payload[i] = (uint8_t)(seq * 31u + i);
	rec.out_len = flags & RING_F_FINAL ? seq + 1000u : 0;
	return rec;
}

void push_ok(struct ring *r, uint32_t seq, uint32_t flags)
{
	struct ring_rec rec = rec_of(seq, flags);

	ck_assert_int_eq(ring_push(r, &rec), 0);
}

void pop_expect(struct ring *r, uint32_t seq, uint32_t flags)
{
	struct ring_rec out;

	memset(&out, 0xee, sizeof(out));
	ck_assert_int_eq(ring_try_pop(r, &out), 0);
	ck_assert_uint_eq(out.request_id, REQ_ID);
	ck_assert_uint_eq(out.seq, seq);
	ck_assert_uint_eq(out.flags, flags);
	ck_assert_uint_eq(out.value, token_of(seq));
	struct ring_rec want = rec_of(seq, flags);
	ck_assert_uint_eq(out.out_len, want.out_len);
	ck_assert_uint_eq(out.payload_len, want.payload_len);
	ck_assert_mem_eq(out.payload, want.payload, want.payload_len);
}
