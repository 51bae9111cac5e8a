/* mpread.h - a bounded msgpack pull reader: reads one item at a time from a byte
 * range, never past its end, never allocating. Internal to proto/. */
#ifndef CHIPD_MPREAD_H
#define CHIPD_MPREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mp_kind {
	MP_NIL,
	MP_BOOL,
	MP_INT,	 /* a negative integer: v.i */
	MP_UINT, /* a non-negative integer: v.u */
	MP_FLOAT,
	MP_STR,
	MP_BIN,
	MP_EXT,
	MP_ARRAY,
	MP_MAP,
};

struct mp_item {
	enum mp_kind kind;
	union {
		bool b;
		int64_t i;
		uint64_t u;
	} v;
	const uint8_t *ptr; /* MP_STR, MP_BIN, MP_EXT: the payload */
	uint32_t len;	    /* payload bytes, or the element / pair count of a container */
};

struct mp_reader {
	const uint8_t *p, *end;
};

static inline void mpr_init(struct mp_reader *r, const void *buf, size_t len)
{
	r->p = buf;
	r->end = r->p + len;
}

static inline size_t mpr_left(const struct mp_reader *r)
{
	return (size_t)(r->end - r->p);
}

/* Reads the next item's header and, for strings, binaries, extensions and floats,
 * its payload. A container's elements follow as the next items. Returns 0,
 * -ENODATA when the input ends inside the item (or a container declares more
 * elements than bytes remain), -EBADMSG for the never-used byte 0xc1. */
int mpr_next(struct mp_reader *r, struct mp_item *it);

/* Skips one whole value whose header is @it (already read). A container nested more
 * than @depth levels below it fails with -ELOOP; otherwise as mpr_next. */
int mpr_skip_rest(struct mp_reader *r, const struct mp_item *it, unsigned depth);

#endif
