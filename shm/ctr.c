/* ctr.c - named single-writer counters (contract in ctr.h). */
#include "ctr.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#define CTR_LINE 64u

static size_t values_offset(uint32_t count)
{
	return sizeof(struct ctr_hdr) + (size_t)count * sizeof(struct ctr_slot_desc);
}

size_t ctr_size(uint32_t count)
{
	if (count == 0 || count > CTR_MAX_COUNT)
		return 0;
	size_t values = ((size_t)count * sizeof(uint64_t) + CTR_LINE - 1) & ~(size_t)(CTR_LINE - 1);
	return values_offset(count) + values;
}

static bool name_ok(const char *name, size_t cap)
{
	size_t len = strnlen(name, cap);

	if (len == 0 || len >= cap)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

static bool kind_ok(uint32_t kind)
{
	return kind == CTR_COUNTER || kind == CTR_GAUGE;
}

/* Binds @b to the block at @h holding @count values: the count, and every offset, is
 * the caller's (chosen at init, read once and validated at attach), never re-read. */
static void bind(struct ctr_block *b, struct ctr_hdr *h, uint32_t count)
{
	b->hdr = h;
	b->descs = (const struct ctr_slot_desc *)((char *)h + sizeof(*h));
	b->values = (_Atomic uint64_t *)((char *)h + values_offset(count));
	b->count = count;
}

/* One read of a plain header word another process may write at any time. */
static uint32_t peek32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

int ctr_init(struct ctr_block *b, void *mem, size_t avail, const struct ctr_desc *descs,
	     uint32_t count)
{
	size_t need = ctr_size(count);

	memset(b, 0, sizeof(*b));
	if (need == 0 || ((uintptr_t)mem & (CTR_LINE - 1)))
		return -EINVAL;
	if (need > avail)
		return -EMSGSIZE;
	for (uint32_t i = 0; i < count; i++) {
		if (!descs[i].name || !name_ok(descs[i].name, CTR_NAME_MAX) ||
		    !kind_ok(descs[i].kind))
			return -EINVAL;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(descs[i].name, descs[j].name) == 0)
				return -EINVAL;
	}
	memset(mem, 0, need);

	struct ctr_hdr *h = mem;
	h->magic = CTR_MAGIC;
	h->version = CTR_VERSION;
	h->count = count;
	h->desc_offset = sizeof(*h);
	h->values_offset = (uint32_t)values_offset(count);
	h->total_size = need;
	struct ctr_slot_desc *d = (struct ctr_slot_desc *)((char *)h + h->desc_offset);
	for (uint32_t i = 0; i < count; i++) {
		strncpy(d[i].name, descs[i].name, CTR_NAME_MAX - 1);
		d[i].kind = descs[i].kind;
	}
	bind(b, h, count);
	return 0;
}

int ctr_attach(struct ctr_block *b, void *mem, size_t avail)
{
	struct ctr_hdr *h = mem;
	char name[CTR_NAME_MAX];

	memset(b, 0, sizeof(*b));
	if (avail < sizeof(*h) || ((uintptr_t)mem & (CTR_LINE - 1)))
		return -EMSGSIZE;
	if (peek32(&h->magic) != CTR_MAGIC)
		return -EBADMSG;
	if (peek32(&h->version) != CTR_VERSION)
		return -EPROTONOSUPPORT;
	/* read once: the count checked is the count bound */
	uint32_t count = peek32(&h->count);
	size_t need = ctr_size(count);
	if (need == 0 || need > avail ||
	    __atomic_load_n(&h->total_size, __ATOMIC_RELAXED) != need ||
	    peek32(&h->desc_offset) != sizeof(*h) ||
	    peek32(&h->values_offset) != values_offset(count))
		return -EMSGSIZE;
	const struct ctr_slot_desc *d = (const struct ctr_slot_desc *)((char *)h + sizeof(*h));
	for (uint32_t i = 0; i < count; i++) {
		memcpy(name, d[i].name, sizeof(name));
		if (!name_ok(name, CTR_NAME_MAX) || !kind_ok(peek32(&d[i].kind)))
			return -EBADMSG;
	}
	bind(b, h, count);
	return 0;
}

const char *ctr_name(const struct ctr_block *b, uint32_t i, char *buf)
{
	size_t n = 0;

	if (i < b->count) {
		/* one copy of the bytes, then every test on the copy */
		memcpy(buf, b->descs[i].name, CTR_NAME_MAX);
		for (; n < CTR_NAME_MAX - 1 && buf[n]; n++)
			if (!((buf[n] >= 'a' && buf[n] <= 'z') ||
			      (buf[n] >= '0' && buf[n] <= '9') || buf[n] == '_'))
				buf[n] = '?';
	}
	buf[n] = '\0';
	return buf;
}

enum ctr_kind ctr_kind_of(const struct ctr_block *b, uint32_t i)
{
	uint32_t kind = i < b->count ? peek32(&b->descs[i].kind) : 0;

	return kind_ok(kind) ? (enum ctr_kind)kind : CTR_COUNTER;
}

int ctr_find(const struct ctr_block *b, const char *name)
{
	char buf[CTR_NAME_MAX];

	for (uint32_t i = 0; i < b->count; i++)
		if (strcmp(ctr_name(b, i, buf), name) == 0)
			return (int)i;
	return -ENOENT;
}

void ctr_snapshot(const struct ctr_block *b, uint64_t *out)
{
	for (uint32_t i = 0; i < b->count; i++)
		out[i] = ctr_get(b, i);
}
