/* check_ctr.c - pins single-writer counters: layout, names, attach checks, reads while written. */
#include "ctr.h"
#include "testutil.h"
#include "wait.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MS		(1000u * 1000u)
#define PEER_TIMEOUT_MS 10000u
/* Increments the child makes while the parent reads. */
#define LIVE_INCREMENTS 2000000u

static const struct ctr_desc three[] = {
    {"requests_total", CTR_COUNTER},
    {"queue_depth", CTR_GAUGE},
    {"tokens_out_2", CTR_COUNTER},
};
#define NTHREE (sizeof(three) / sizeof(three[0]))

/* A zeroed, page-aligned (so 64-byte aligned) block of @size bytes, shared across fork. */
static void *block_mem(size_t size)
{
	return tu_shared(size);
}

START_TEST(init_lays_out_named_counters)
{
	struct ctr_block b, a;
	size_t size = ctr_size(NTHREE);
	char *mem = block_mem(size), name[CTR_NAME_MAX];

	ck_assert_int_eq(ctr_init(&b, mem, size, three, NTHREE), 0);
	ck_assert_uint_eq(b.count, NTHREE);
	ck_assert_uint_eq(b.hdr->magic, CTR_MAGIC);
	ck_assert_uint_eq(b.hdr->version, CTR_VERSION);
	ck_assert_uint_eq(b.hdr->desc_offset, 64);
	ck_assert_uint_eq(b.hdr->values_offset, 64 + 64 * NTHREE);
	ck_assert_uint_eq(b.hdr->values_offset % 64, 0);
	ck_assert_uint_eq(b.hdr->total_size, size);
	ck_assert_ptr_eq(b.values, (void *)(mem + b.hdr->values_offset));
	for (uint32_t i = 0; i < NTHREE; i++) {
		ck_assert_str_eq(ctr_name(&b, i, name), three[i].name);
		ck_assert_int_eq(ctr_kind_of(&b, i), three[i].kind);
		ck_assert_int_eq(ctr_find(&b, three[i].name), (int)i);
		ck_assert_uint_eq(ctr_get(&b, i), 0);
	}
	ck_assert_int_eq(ctr_find(&b, "requests"), -ENOENT);
	ck_assert_int_eq(ctr_find(&b, "requests_total_"), -ENOENT);
	ck_assert_int_eq(ctr_find(&b, ""), -ENOENT);

	/* A reader attaches with no schema of its own and sees the writer's values. */
	ctr_add(&b, 0, 5);
	ctr_add(&b, 0, 2);
	ctr_set(&b, 1, 40);
	ctr_add(&b, 1, (uint64_t)-3); /* a gauge goes down too */
	ck_assert_int_eq(ctr_attach(&a, mem, size), 0);
	ck_assert_uint_eq(a.count, NTHREE);
	ck_assert_int_eq(ctr_find(&a, "queue_depth"), 1);
	ck_assert_str_eq(ctr_name(&a, 2, name), "tokens_out_2");
	ck_assert_int_eq(ctr_kind_of(&a, 1), CTR_GAUGE);
	ck_assert_uint_eq(ctr_get(&a, 0), 7);
	ck_assert_uint_eq(ctr_get(&a, 1), 37);
	ck_assert_uint_eq(ctr_get(&a, 2), 0);
	tu_unmap(mem, size);
}
END_TEST

START_TEST(size_bounds)
{
	ck_assert_uint_eq(ctr_size(0), 0);
	ck_assert_uint_eq(ctr_size(CTR_MAX_COUNT + 1), 0);
	ck_assert_uint_eq(ctr_size(1), 64 + 64 + 64);
	ck_assert_uint_eq(ctr_size(8), 64 + 8 * 64 + 64);
	ck_assert_uint_eq(ctr_size(9), 64 + 9 * 64 + 128);
	ck_assert_uint_eq(ctr_size(CTR_MAX_COUNT), 64 + CTR_MAX_COUNT * 64 + CTR_MAX_COUNT * 8);
}
END_TEST

/* Asserts that ctr_init refuses @descs with @err and writes nothing. */
static void expect_init_fails(const struct ctr_desc *descs, uint32_t count, int err)
{
	struct ctr_block b;
	size_t size = ctr_size(CTR_MAX_COUNT);
	unsigned char *mem = block_mem(size);

	memset(mem, 0x5a, size);
	ck_assert_int_eq(ctr_init(&b, mem, size, descs, count), err);
	ck_assert_uint_eq(mem[0], 0x5a); /* no half-written block left behind */
	ck_assert_ptr_null(b.hdr);
	tu_unmap(mem, size);
}

START_TEST(init_refuses_invalid_names)
{
	char longest[CTR_NAME_MAX], too_long[CTR_NAME_MAX + 1], name[CTR_NAME_MAX];

	memset(longest, 'a', CTR_NAME_MAX - 1);
	longest[CTR_NAME_MAX - 1] = '\0';
	memset(too_long, 'a', CTR_NAME_MAX);
	too_long[CTR_NAME_MAX] = '\0';

	static const char *const bad[] = {"",	 "Requests", "requestS", "queue-depth",
					  "a b", "a.b",	     "tokens/s", "caf\xc3\xa9"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ctr_desc d[] = {{"ok_first", CTR_COUNTER}, {bad[i], CTR_COUNTER}};

		expect_init_fails(d, 2, -EINVAL);
	}
	struct ctr_desc d_long[] = {{too_long, CTR_COUNTER}};
	expect_init_fails(d_long, 1, -EINVAL);
	struct ctr_desc d_null[] = {{NULL, CTR_COUNTER}};
	expect_init_fails(d_null, 1, -EINVAL);
	struct ctr_desc d_dup[] = {{"a", CTR_COUNTER}, {"b", CTR_GAUGE}, {"a", CTR_GAUGE}};
	expect_init_fails(d_dup, 3, -EINVAL);
	struct ctr_desc d_kind[] = {{"a", CTR_COUNTER}, {"b", (enum ctr_kind)3}};
	expect_init_fails(d_kind, 2, -EINVAL);
	struct ctr_desc d_kind0[] = {{"a", (enum ctr_kind)0}};
	expect_init_fails(d_kind0, 1, -EINVAL);
	expect_init_fails(three, 0, -EINVAL);

	/* The longest legal name fits, NUL included, and round-trips. */
	struct ctr_block b;
	struct ctr_desc d_ok[] = {{longest, CTR_GAUGE}};
	size_t size = ctr_size(1);
	void *mem = block_mem(size);
	ck_assert_int_eq(ctr_init(&b, mem, size, d_ok, 1), 0);
	ck_assert_str_eq(ctr_name(&b, 0, name), longest);
	ck_assert_int_eq(ctr_find(&b, longest), 0);
	tu_unmap(mem, size);
}
END_TEST

START_TEST(init_refuses_bad_memory)
{
	struct ctr_block b;
	size_t size = ctr_size(NTHREE);
	char *mem = block_mem(2 * size);

	ck_assert_int_eq(ctr_init(&b, mem, size - 1, three, NTHREE), -EMSGSIZE);
	ck_assert_int_eq(ctr_init(&b, mem + 8, size, three, NTHREE), -EINVAL);
	ck_assert_int_eq(ctr_init(&b, mem + 64, size, three, NTHREE), 0);
	tu_unmap(mem, 2 * size);
}
END_TEST

START_TEST(attach_validates_layout)
{
	struct ctr_block b, a;
	size_t size = ctr_size(NTHREE);
	char *mem = block_mem(size);
	struct ctr_hdr *h = (struct ctr_hdr *)mem;

	ck_assert_int_eq(ctr_init(&b, mem, size, three, NTHREE), 0);

	h->magic ^= 1;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EBADMSG);
	h->magic ^= 1;
	h->version = CTR_VERSION + 1;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EPROTONOSUPPORT);
	h->version = CTR_VERSION;

	/* Shape: count, offsets and total size must agree with each other and fit. */
	h->count = 0;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EMSGSIZE);
	h->count = CTR_MAX_COUNT + 1;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EMSGSIZE);
	h->count = NTHREE + 1; /* more counters than the memory holds */
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EMSGSIZE);
	h->count = NTHREE;
	h->values_offset += 64;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EMSGSIZE);
	h->values_offset -= 64;
	h->desc_offset = 128;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EMSGSIZE);
	h->desc_offset = 64;
	h->total_size = size + 64;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EMSGSIZE);
	h->total_size = size;
	ck_assert_int_eq(ctr_attach(&a, mem, size - 1), -EMSGSIZE);
	ck_assert_int_eq(ctr_attach(&a, mem, sizeof(struct ctr_hdr) - 1), -EMSGSIZE);
	ck_assert_int_eq(ctr_attach(&a, mem + 64, size - 64), -EBADMSG); /* not a block */

	/* Descriptors: a name without its NUL, an illegal name, an unknown kind. */
	struct ctr_slot_desc *d = (struct ctr_slot_desc *)(mem + 64);
	memset(d[1].name, 'q', CTR_NAME_MAX);
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EBADMSG);
	strcpy(d[1].name, "Queue_depth");
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EBADMSG);
	d[1].name[0] = '\0';
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EBADMSG);
	strcpy(d[1].name, "queue_depth");
	d[2].kind = 7;
	ck_assert_int_eq(ctr_attach(&a, mem, size), -EBADMSG);
	d[2].kind = CTR_COUNTER;
	ck_assert_int_eq(ctr_attach(&a, mem, size), 0);
	ck_assert_int_eq(ctr_find(&a, "queue_depth"), 1);
	tu_unmap(mem, size);
}
END_TEST

/* Shared by the writer child and the reading parent. */
struct live {
	struct ctr_block b;
	_Atomic uint32_t reader_ready; /* parent is reading */
	_Atomic uint32_t seen_midway;  /* parent saw a value in the second half, not final */
};

static bool reader_ready(void *arg)
{
	return atomic_load(&((struct live *)arg)->reader_ready) != 0;
}

static bool seen_midway(void *arg)
{
	return atomic_load(&((struct live *)arg)->seen_midway) != 0;
}

/* Child: the only writer of counter 0 and gauge 1. Halfway, it holds on until the
 * reader has seen a value in flight, so the reads provably overlap the writes. */
static int writer(void *arg)
{
	struct live *lv = arg;

	if (!tu_eventually(reader_ready, lv, PEER_TIMEOUT_MS))
		return 1;
	for (uint32_t i = 1; i <= LIVE_INCREMENTS; i++) {
		ctr_add(&lv->b, 0, 1);
		ctr_set(&lv->b, 1, i);
		if (i == LIVE_INCREMENTS / 2 && !tu_eventually(seen_midway, lv, PEER_TIMEOUT_MS))
			return 2;
	}
	return 0;
}

START_TEST(reads_never_go_back_while_written)
{
	size_t size = ctr_size(NTHREE);
	void *mem = block_mem(size);
	struct live *lv = tu_shared(sizeof(*lv));

	ck_assert_int_eq(ctr_init(&lv->b, mem, size, three, NTHREE), 0);
	pid_t child = tu_fork(writer, lv);

	/* Our own handle, as a separate process (chipctl) would attach it. */
	struct ctr_block rd;
	ck_assert_int_eq(ctr_attach(&rd, mem, size), 0);
	uint64_t last_c = 0, last_g = 0, reads = 0;
	uint64_t give_up = shm_deadline_in((uint64_t)PEER_TIMEOUT_MS * MS);

	atomic_store(&lv->reader_ready, 1);
	while (last_c < LIVE_INCREMENTS || last_g < LIVE_INCREMENTS) {
		uint64_t c = ctr_get(&rd, 0), g = ctr_get(&rd, 1);

		if (c < last_c || g < last_g)
			ck_abort_msg("read %llu: counter %llu after %llu, gauge %llu after %llu",
				     (unsigned long long)reads, (unsigned long long)c,
				     (unsigned long long)last_c, (unsigned long long)g,
				     (unsigned long long)last_g);
		ck_assert_uint_le(c, LIVE_INCREMENTS);
		ck_assert_uint_le(g, LIVE_INCREMENTS);
		if (c >= LIVE_INCREMENTS / 2 && c < LIVE_INCREMENTS)
			atomic_store(&lv->seen_midway, 1);
		last_c = c;
		last_g = g;
		if (++reads % 4096 == 0)
			ck_assert_msg(shm_now_ns() < give_up, "writer stalled at %llu",
				      (unsigned long long)c);
	}
	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	ck_assert(atomic_load(&lv->seen_midway));
	ck_assert_uint_eq(ctr_get(&rd, 0), LIVE_INCREMENTS);
	ck_assert_uint_eq(ctr_get(&rd, 1), LIVE_INCREMENTS);
	ck_assert_uint_eq(ctr_get(&rd, 2), 0); /* neighbours untouched */
	tu_unmap(lv, sizeof(*lv));
	tu_unmap(mem, size);
}
END_TEST

START_TEST(snapshot_copies_every_value)
{
	struct ctr_block b;
	size_t size = ctr_size(NTHREE);
	void *mem = block_mem(size);
	uint64_t snap[NTHREE + 1];

	ck_assert_int_eq(ctr_init(&b, mem, size, three, NTHREE), 0);
	ctr_add(&b, 0, 11);
	ctr_set(&b, 1, UINT64_MAX);
	ctr_add(&b, 2, 1u << 20);
	snap[NTHREE] = 0xdeadbeef; /* a canary past the end */
	ctr_snapshot(&b, snap);
	ck_assert_uint_eq(snap[0], 11);
	ck_assert_uint_eq(snap[1], UINT64_MAX);
	ck_assert_uint_eq(snap[2], 1u << 20);
	ck_assert_uint_eq(snap[NTHREE], 0xdeadbeef);
	/* A snapshot is a copy: later writes do not show through it. */
	ctr_add(&b, 0, 1);
	ck_assert_uint_eq(snap[0], 11);
	ck_assert_uint_eq(ctr_get(&b, 0), 12);
	tu_unmap(mem, size);
}
END_TEST

/* After attach, a peer overwrites the whole block with 0xff bytes (names with no NUL and
 * outside [a-z0-9_], unknown kinds, count 0xffffffff), the block ending at an
 * inaccessible page: a reader's names are bounded and printable, kinds known, finds and
 * reads stay inside the block, and an index past the count reads 0 and writes nothing. */
START_TEST(reader_survives_any_bytes)
{
	size_t size = ctr_size(NTHREE), page = (size_t)sysconf(_SC_PAGESIZE);
	char *map =
	    mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char name[CTR_NAME_MAX];
	struct ctr_block w, r;

	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mprotect(map + page, page, PROT_NONE), 0);
	char *mem = map + page - size;
	ck_assert_int_eq(ctr_init(&w, mem, size, three, NTHREE), 0);
	ck_assert_int_eq(ctr_attach(&r, mem, size), 0);
	memset(mem, 0xff, size);
	for (uint32_t i = 0; i < NTHREE; i++) {
		ck_assert_uint_eq(strlen(ctr_name(&r, i, name)), CTR_NAME_MAX - 1);
		ck_assert_uint_eq(strspn(name, "?"), CTR_NAME_MAX - 1);
		ck_assert_int_eq(ctr_kind_of(&r, i), CTR_COUNTER);
		ck_assert_uint_eq(ctr_get(&r, i), UINT64_MAX);
	}
	ck_assert_str_eq(ctr_name(&r, NTHREE, name), "");
	ck_assert_str_eq(ctr_name(&r, UINT32_MAX, name), "");
	ck_assert_int_eq(ctr_kind_of(&r, NTHREE), CTR_COUNTER);
	ck_assert_int_eq(ctr_find(&r, "queue_depth"), -ENOENT);
	ck_assert_uint_eq(ctr_get(&r, NTHREE), 0);
	ck_assert_uint_eq(ctr_get(&r, UINT32_MAX), 0);
	ctr_add(&w, UINT32_MAX, 1);
	ctr_set(&w, NTHREE + 100, 1);
	ck_assert_uint_eq(r.count, NTHREE); /* the reader's own count */
	uint64_t snap[NTHREE];
	ctr_snapshot(&r, snap);
	/* names cut short, or with one bad byte, read as such */
	memset(mem + 64, 0, 64);
	memcpy(mem + 64, "queue_depth", 11);
	ck_assert_int_eq(ctr_find(&r, "queue_depth"), 0);
	mem[64 + 3] = '-';
	ck_assert_str_eq(ctr_name(&r, 0, name), "que?e_depth");
	/* a new attacher refuses the block */
	ck_assert_int_ne(ctr_attach(&r, mem, size), 0);
	munmap(map, 2 * page);
}
END_TEST

static Suite *ctr_suite(void)
{
	Suite *s = suite_create("ctr");
	const struct tu_case cases[] = {
	    {"init_lays_out_named_counters", init_lays_out_named_counters},
	    {"size_bounds", size_bounds},
	    {"init_refuses_invalid_names", init_refuses_invalid_names},
	    {"init_refuses_bad_memory", init_refuses_bad_memory},
	    {"attach_validates_layout", attach_validates_layout},
	    {"reads_never_go_back_while_written", reads_never_go_back_while_written},
	    {"snapshot_copies_every_value", snapshot_copies_every_value},
	    {"reader_survives_any_bytes", reader_survives_any_bytes},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(ctr_suite());
}
