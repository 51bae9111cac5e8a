/* ctr.h - named single-writer 64-bit counters and gauges in shared memory.
 *
 * Each value has exactly one writing thread (a worker's O thread, the supervisor's
 * router, ...), which updates it with a relaxed load and store, no locked
 * instruction. Any process reads any value with a relaxed load, without locks: a
 * naturally aligned 64-bit atomic is never torn. The names live in the block, so a
 * reader (chipctl, an exporter) needs no schema.
 *
 * Layout: a 64-byte header, count 64-byte descriptors (name, kind), then count u64
 * values starting on a cache line. docs/protocol.md is normative.
 */
#ifndef CHIPD_SHM_CTR_H
#define CHIPD_SHM_CTR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CTR_MAGIC     0x31525443u /* "CTR1" little-endian */
#define CTR_VERSION   1u
#define CTR_NAME_MAX  56u /* bytes, NUL included */
#define CTR_MAX_COUNT 4096u

enum ctr_kind {
	CTR_COUNTER = 1, /* only ever grows */
	CTR_GAUGE = 2,	 /* goes up and down */
};

struct ctr_hdr {
	uint32_t magic;
	uint32_t version;
	uint32_t count;
	uint32_t desc_offset;	/* from the block start: 64 */
	uint32_t values_offset; /* from the block start, a multiple of 64 */
	uint32_t reserved0;
	uint64_t total_size;
	uint8_t reserved[32];
};
_Static_assert(sizeof(struct ctr_hdr) == 64, "counter header is one line");

struct ctr_slot_desc {
	char name[CTR_NAME_MAX]; /* NUL-terminated, [a-z0-9_] */
	uint32_t kind;
	uint32_t reserved;
};
_Static_assert(sizeof(struct ctr_slot_desc) == 64, "counter descriptor is one line");

/* What a writer declares: a name and a kind. */
struct ctr_desc {
	const char *name;
	enum ctr_kind kind;
};

/* One process's handle on a block. count (and so where the values lie) is this
 * process's own, taken at init or attach: the header is never read again, and every
 * index is checked against count, so a peer that rewrites the header or the names
 * steers no read or write outside the block. */
struct ctr_block {
	struct ctr_hdr *hdr;
	const struct ctr_slot_desc *descs;
	_Atomic uint64_t *values;
	uint32_t count;
};

/* Bytes for @count counters, or 0 if @count is 0 or above CTR_MAX_COUNT. */
size_t ctr_size(uint32_t count);

/* Lays out @count counters named by @descs in @mem (64-byte aligned), all zero.
 * Returns 0, -EINVAL (a name empty, too long, not [a-z0-9_], or repeated; a bad
 * kind; alignment), -EMSGSIZE (does not fit in @avail). */
int ctr_init(struct ctr_block *b, void *mem, size_t avail, const struct ctr_desc *descs,
	     uint32_t count);

/* Attaches to a block laid out by another process; checks magic (-EBADMSG), version
 * (-EPROTONOSUPPORT), shape (-EMSGSIZE) and that every name is NUL-terminated and
 * every kind known (-EBADMSG). */
int ctr_attach(struct ctr_block *b, void *mem, size_t avail);

/* Index of the counter called @name, or -ENOENT. */
int ctr_find(const struct ctr_block *b, const char *name);

/* Copies the name of counter @i into @buf (CTR_NAME_MAX bytes) and returns @buf. The
 * name lies in memory a peer may write, so it is copied once, cut at CTR_NAME_MAX - 1
 * bytes, and every byte outside [a-z0-9_] shows as '?'; "" for @i out of range. */
const char *ctr_name(const struct ctr_block *b, uint32_t i, char *buf);

/* The kind of counter @i; CTR_COUNTER for @i out of range or a kind a peer
 * overwrote with an unknown value. */
enum ctr_kind ctr_kind_of(const struct ctr_block *b, uint32_t i);

/* Single writer only: adds @delta to counter or gauge @i (nothing for @i not below
 * count: a block attached with fewer counters than the writer knows). */
static inline void ctr_add(struct ctr_block *b, uint32_t i, uint64_t delta)
{
	if (i >= b->count)
		return;
	uint64_t v = atomic_load_explicit(&b->values[i], memory_order_relaxed);

	atomic_store_explicit(&b->values[i], v + delta, memory_order_relaxed);
}

/* Single writer only: sets gauge @i (nothing for @i not below count). */
static inline void ctr_set(struct ctr_block *b, uint32_t i, uint64_t v)
{
	if (i >= b->count)
		return;
	atomic_store_explicit(&b->values[i], v, memory_order_relaxed);
}

/* Any process, any thread: the current value of @i (0 for @i not below count). */
static inline uint64_t ctr_get(const struct ctr_block *b, uint32_t i)
{
	if (i >= b->count)
		return 0;
	return atomic_load_explicit(&b->values[i], memory_order_relaxed);
}

/* Copies every value into @out (count entries). */
void ctr_snapshot(const struct ctr_block *b, uint64_t *out);

#endif
