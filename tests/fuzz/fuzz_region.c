/* fuzz_region.c - libFuzzer target for attaching a node region.
 *
 * A valid node region of a small shape (2 workers, 4 rings of 16 records, 4 mailbox
 * slots of 256 bytes) is laid out once by proto_node_create and kept as a template.
 * Each input overwrites the template's first bytes (the region header, the node
 * descriptor, then the directory, the counter blocks and the mailbox header, as far
 * as the input reaches), the image is written to /dev/shm/chipd.<uid>.fuzz-<pid>
 * (mode 0600, our own: the owner and mode checks pass, the content is what is
 * fuzzed) and attached the way a monitor does: chipd_connect_monitor (proto_node_attach),
 * chipd_stats (every counter block), then through proto_node_attach directly every
 * directory record, every ring (proto_node_ring, one pop each) and every mailbox
 * slot (mbox_ctl, mbox_reap). "Never crash, never read out of bounds" is watched by
 * ASan (heap) and by the mapping itself: the file is a whole number of pages, so a
 * read past its end faults.
 *
 * A client region (node layout 4: what a client may write) is fuzzed with the
 * input's bytes past the first 4096: they overwrite the template's exchange region
 * (its header, the mailbox header, the attention bitmap, the slots), which goes into a
 * fresh memfd, sealed as the supervisor seals it, opened the way libchipd opens the one
 * its hello brings (proto_xchg_open against the template's geometry), and then used:
 * the mailbox attached (mbox_attach), every slot read and reaped, every ring's
 * consumer line popped through a ring bound to the template's producer part.
 * Any finding becomes a corpus file in tests/fuzz/corpus/region and, for a bug, a
 * test in the suite of its module. */
#include "chipd.h"
#include "node.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned char *tpl, *img, *xtpl;
static size_t tpl_size;
static struct proto_node_geom geom; /* the template's, exchange region included */

/* Input bytes before this go to the node region, the rest to the exchange region. */
#define NODE_BYTES 4096u
static char inst[48], path[128], name[SHM_NAME_MAX];

static void init(void)
{
	struct proto_node_config cfg = {.nworkers = 2,
					.nrings = 4,
					.ring_capacity = 16,
					.mbox_slots = 4,
					.req_cap = 256,
					.resp_cap = 256,
					.nclients = 1};
	struct proto_node n;
	struct shm_diag diag;

	snprintf(inst, sizeof(inst), "fuzz-%d", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm/chipd.%u.%s", (unsigned)geteuid(), inst);
	if (shm_region_name(name, sizeof(name), (unsigned)geteuid(), inst) ||
	    proto_node_create(&n, name, &cfg, SHM_CREATE_RECLAIM_STALE, &diag)) {
		fprintf(stderr, "fuzz_region: cannot create the template: %s\n", diag.msg);
		abort();
	}
	if (proto_node_client_open(&n, 0))
		abort();
	shm_region_ready(&n.region);
	tpl_size = n.region.size;
	tpl = aligned_alloc(4096, tpl_size); /* ring_bind wants its rings 64-aligned */
	img = malloc(tpl_size);
	if (!tpl || !img)
		abort();
	memcpy(tpl, n.region.hdr, tpl_size);
	geom = n.geom;
	xtpl = malloc(geom.xchg.total_size);
	if (!xtpl)
		abort();
	memcpy(xtpl, n.pool[0].base, geom.xchg.total_size); /* a client region, as handed out */
	proto_node_detach(&n);
	/* FUZZ_REGION_SEED=FILE writes the template's first 4 KiB (the seed corpus) */
	if (getenv("FUZZ_REGION_SEED")) {
		FILE *f = fopen(getenv("FUZZ_REGION_SEED"), "wb");

		if (!f || fwrite(tpl, 1, tpl_size < NODE_BYTES ? tpl_size : NODE_BYTES, f) == 0)
			abort();
		/* and the exchange region's first 4 KiB after it (FUZZ_REGION_SEED_XCHG) */
		if (getenv("FUZZ_REGION_SEED_XCHG") &&
		    fwrite(xtpl, 1, geom.xchg.total_size < 4096 ? geom.xchg.total_size : 4096,
			   f) == 0)
			abort();
		fclose(f);
	}
	shm_region_unlink(name);
}

static void write_image(const uint8_t *data, size_t size)
{
	size_t n = size < tpl_size ? size : tpl_size;
	int fd;

	if (n > NODE_BYTES)
		n = NODE_BYTES;
	memcpy(img, tpl, tpl_size);
	memcpy(img, data, n);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
	if (fd < 0)
		abort();
	if (fchmod(fd, 0600) || write(fd, img, tpl_size) != (ssize_t)tpl_size)
		abort();
	close(fd);
}

static void use_node(void)
{
	struct proto_node n;
	struct shm_diag diag;
	volatile uint64_t sink = 0;

	if (proto_node_attach(&n, name, &diag))
		return;
	for (uint32_t i = 0; i < n.desc->nworkers; i++)
		sink += atomic_load(&n.dir[i].state) + atomic_load(&n.dir[i].pid);
	for (uint32_t i = 0; i < n.desc->nrings + 1; i++) {
		struct ring r;
		struct ring_rec rec;

		if (proto_node_ring(&n, i, &r) == 0)
			sink += (uint64_t)ring_try_pop(&r, &rec);
	}
	for (uint32_t i = 0; i < n.mbox.nslots; i++)
		sink += mbox_ctl(&n.mbox, i);
	sink += (uint64_t)mbox_reap(&n.mbox);
	(void)sink;
	proto_node_detach(&n);
}

/* The exchange region the input's bytes past NODE_BYTES make, used as a client does. */
static void use_xchg(const uint8_t *data, size_t size)
{
	size_t total = geom.xchg.total_size, n;
	struct proto_xchg x;
	struct shm_diag diag;
	struct mbox mb;
	volatile uint64_t sink = 0;
	int fd;

	if (size <= NODE_BYTES)
		return;
	n = size - NODE_BYTES < total ? size - NODE_BYTES : total;
	fd = memfd_create("fuzz-xchg", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (fd < 0 || write(fd, xtpl, total) != (ssize_t)total || pwrite(fd, data + NODE_BYTES, n, 0) != (ssize_t)n ||
	    fcntl(fd, F_ADD_SEALS, PROTO_XCHG_SEALS))
		abort();
	if (proto_xchg_open(&x, fd, &geom.xchg, &diag)) {
		if (getenv("FUZZ_REGION_DEBUG"))
			fprintf(stderr, "fuzz_region: exchange: %s\n", diag.msg);
		return;
	}
	if (mbox_attach(&mb, x.base + geom.xchg.mbox_offset, geom.xchg.mbox_size) == 0) {
		for (uint32_t i = 0; i < mb.nslots; i++)
			sink += mbox_ctl(&mb, i);
		sink += (uint64_t)mbox_reap(&mb);
	}
	for (uint32_t i = 0; i < geom.nrings; i++) {
		struct ring r;
		struct ring_rec rec;

		/* the producer part: the template's, in private memory */
		if (ring_bind(&r, tpl + geom.rings_offset + (uint64_t)i * geom.ring_stride,
			      geom.ring_capacity, proto_xchg_cons(&x, &geom.xchg, i)) == 0)
			sink += (uint64_t)ring_try_pop(&r, &rec) + ring_space(&r) +
				ring_reader_closed(&r);
	}
	(void)sink;
	proto_xchg_close(&x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct chipd_stat stats[512];
	struct chipd_error err = {0};
	chipd_conn *c = NULL;
	uint32_t n;

	if (!tpl)
		init();
	write_image(data, size);
	/* a monitor's attach: the handshake needs a live supervisor, the counters not */
	if (chipd_connect_monitor(inst, &c, &err) == 0) {
		(void)chipd_stats(c, stats, 512, &n, &err);
		chipd_close(c);
	} else if (getenv("FUZZ_REGION_DEBUG")) {
		fprintf(stderr, "fuzz_region: connect: %s\n", err.message);
	}
	use_node();
	unlink(path);
	use_xchg(data, size);
	return 0;
}
