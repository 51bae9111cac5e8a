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

static void bind(struct ctr_block *b, struct ctr_hdr *h)
{
	b->hdr = h;
	b->descs = (const struct ctr_slot_desc *)((char *)h + h->desc_offset);
	b->values = (_Atomic uint64_t *)((char *)h + h->values_offset);
	b->count = h->count;
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
	bind(b, h);
	return 0;
}

int ctr_attach(struct ctr_block *b, void *mem, size_t avail)
{
	struct ctr_hdr *h = mem;

	memset(b, 0, sizeof(*b));
	if (avail < sizeof(*h) || ((uintptr_t)mem & (CTR_LINE - 1)))
		return -EMSGSIZE;
	if (h->magic != CTR_MAGIC)
		return -EBADMSG;
	if (h->version != CTR_VERSION)
		return -EPROTONOSUPPORT;
	size_t need = ctr_size(h->count);
	if (need == 0 || need > avail || h->total_size != need || h->desc_offset != sizeof(*h) ||
	    h->values_offset != values_offset(h->count))
		return -EMSGSIZE;
	const struct ctr_slot_desc *d = (const struct ctr_slot_desc *)((char *)h + sizeof(*h));
	for (uint32_t i = 0; i < h->count; i++)
		if (!name_ok(d[i].name, CTR_NAME_MAX) || !kind_ok(d[i].kind))
			return -EBADMSG;
	bind(b, h);
	return 0;
}

int ctr_find(const struct ctr_block *b, const char *name)
{
	for (uint32_t i = 0; i < b->count; i++)
		if (strcmp(b->descs[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

void ctr_snapshot(const struct ctr_block *b, uint64_t *out)
{
	for (uint32_t i = 0; i < b->count; i++)
		out[i] = ctr_get(b, i);
}
