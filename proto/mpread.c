/* mpread.c - the bounded msgpack pull reader (see mpread.h). Every read checks the
 * bytes left first; a container's count is checked against the bytes left (each
 * element takes at least one byte, each pair two), so a short input with a huge
 * declared count fails at once instead of being walked. */
#include "mpread.h"

#include <errno.h>
#include <string.h>

static uint64_t be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Takes @n bytes, or fails when fewer are left. */
static int take(struct mp_reader *r, size_t n, const uint8_t **out)
{
	if (mpr_left(r) < n)
		return -ENODATA;
	*out = r->p;
	r->p += n;
	return 0;
}

/* Reads an @n-byte big-endian length or count. */
static int take_len(struct mp_reader *r, unsigned n, uint32_t *len)
{
	const uint8_t *p;
	int rc = take(r, n, &p);

	if (rc == 0)
		*len = (uint32_t)be(p, n);
	return rc;
}

static int payload(struct mp_reader *r, struct mp_item *it, enum mp_kind kind, uint32_t len)
{
	it->kind = kind;
	it->len = len;
	return take(r, len, &it->ptr);
}

static int container(struct mp_reader *r, struct mp_item *it, enum mp_kind kind, uint32_t n)
{
	uint64_t need = kind == MP_MAP ? 2ull * n : n;

	it->kind = kind;
	it->len = n;
	return need > mpr_left(r) ? -ENODATA : 0;
}

static int integer(struct mp_reader *r, struct mp_item *it, unsigned n, bool is_signed)
{
	const uint8_t *p;
	uint64_t v;
	int rc = take(r, n, &p);

	if (rc)
		return rc;
	v = be(p, n);
	if (is_signed && n < 8 && (v >> (8 * n - 1)))
		v |= ~0ull << (8 * n); /* sign-extend */
	if (is_signed && (int64_t)v < 0) {
		it->kind = MP_INT;
		it->v.i = (int64_t)v;
	} else {
		it->kind = MP_UINT;
		it->v.u = v;
	}
	return 0;
}

int mpr_next(struct mp_reader *r, struct mp_item *it)
{
	const uint8_t *p;
	uint32_t len;
	uint8_t b;
	int rc = take(r, 1, &p);

	if (rc)
		return rc;
	b = *p;
	memset(it, 0, sizeof(*it));
	if (b <= 0x7f) {
		it->kind = MP_UINT;
		it->v.u = b;
		return 0;
	}
	if (b >= 0xe0) {
		it->kind = MP_INT;
		it->v.i = (int8_t)b;
		return 0;
	}
	if ((b & 0xf0) == 0x80)
		return container(r, it, MP_MAP, b & 0x0f);
	if ((b & 0xf0) == 0x90)
		return container(r, it, MP_ARRAY, b & 0x0f);
	if ((b & 0xe0) == 0xa0)
		return payload(r, it, MP_STR, b & 0x1f);
	switch (b) {
	case 0xc0:
		it->kind = MP_NIL;
		return 0;
	case 0xc2:
	case 0xc3:
		it->kind = MP_BOOL;
		it->v.b = b == 0xc3;
		return 0;
	case 0xc4: /* bin 8, 16, 32 */
	case 0xc5:
	case 0xc6:
		rc = take_len(r, 1u << (b - 0xc4), &len);
		return rc ? rc : payload(r, it, MP_BIN, len);
	case 0xc7: /* ext 8, 16, 32: length, type byte, payload */
	case 0xc8:
	case 0xc9:
		rc = take_len(r, 1u << (b - 0xc7), &len);
		if (rc == 0)
			rc = take(r, 1, &p);
		return rc ? rc : payload(r, it, MP_EXT, len);
	case 0xca:
		it->kind = MP_FLOAT;
		return take(r, 4, &it->ptr);
	case 0xcb:
		it->kind = MP_FLOAT;
		return take(r, 8, &it->ptr);
	case 0xcc: /* uint 8, 16, 32, 64 */
	case 0xcd:
	case 0xce:
	case 0xcf:
		return integer(r, it, 1u << (b - 0xcc), false);
	case 0xd0: /* int 8, 16, 32, 64 */
	case 0xd1:
	case 0xd2:
	case 0xd3:
		return integer(r, it, 1u << (b - 0xd0), true);
	case 0xd4: /* fixext 1, 2, 4, 8, 16: type byte, payload */
	case 0xd5:
	case 0xd6:
	case 0xd7:
	case 0xd8:
		rc = take(r, 1, &p);
		return rc ? rc : payload(r, it, MP_EXT, 1u << (b - 0xd4));
	case 0xd9: /* str 8, 16, 32 */
	case 0xda:
	case 0xdb:
		rc = take_len(r, 1u << (b - 0xd9), &len);
		return rc ? rc : payload(r, it, MP_STR, len);
	case 0xdc: /* array 16, 32 */
	case 0xdd:
		rc = take_len(r, b == 0xdc ? 2 : 4, &len);
		return rc ? rc : container(r, it, MP_ARRAY, len);
	case 0xde: /* map 16, 32 */
	case 0xdf:
		rc = take_len(r, b == 0xde ? 2 : 4, &len);
		return rc ? rc : container(r, it, MP_MAP, len);
	default: /* 0xc1: never used */
		return -EBADMSG;
	}
}

int mpr_skip_rest(struct mp_reader *r, const struct mp_item *it, unsigned depth)
{
	uint64_t n;
	struct mp_item child;
	int rc;

	if (it->kind != MP_ARRAY && it->kind != MP_MAP)
		return 0;
	if (depth == 0)
		return -ELOOP;
	n = it->kind == MP_MAP ? 2ull * it->len : it->len;
	/* Bounded by the input: container() checked n against the bytes left, and every
	 * child consumes at least one byte. */
	for (uint64_t i = 0; i < n; i++) {
		rc = mpr_next(r, &child);
		if (rc == 0)
			rc = mpr_skip_rest(r, &child, depth - 1);
		if (rc)
			return rc;
	}
	return 0;
}
