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
 * read past its end faults. Any finding becomes a corpus file in
 * tests/fuzz/corpus/region and, for a bug, a test in the suite of its module. */
#include "chipd.h"
#include "node.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned char *tpl, *img;
static size_t tpl_size;
static char inst[48], path[128], name[SHM_NAME_MAX];

static void init(void)
{
	struct proto_node_config cfg = {.nworkers = 2,
					.nrings = 4,
					.ring_capacity = 16,
					.mbox_slots = 4,
					.req_cap = 256,
					.resp_cap = 256};
	struct proto_node n;
	struct shm_diag diag;

	snprintf(inst, sizeof(inst), "fuzz-%d", (int)getpid());
	snprintf(path, sizeof(path), "/dev/shm/chipd.%u.%s", (unsigned)geteuid(), inst);
	if (shm_region_name(name, sizeof(name), (unsigned)geteuid(), inst) ||
	    proto_node_create(&n, name, &cfg, SHM_CREATE_RECLAIM_STALE, &diag)) {
		fprintf(stderr, "fuzz_region: cannot create the template: %s\n", diag.msg);
		abort();
	}
	shm_region_ready(&n.region);
	tpl_size = n.region.size;
	tpl = malloc(tpl_size);
	img = malloc(tpl_size);
	if (!tpl || !img)
		abort();
	memcpy(tpl, n.region.hdr, tpl_size);
	proto_node_detach(&n);
	/* FUZZ_REGION_SEED=FILE writes the template's first 4 KiB (the seed corpus) */
	if (getenv("FUZZ_REGION_SEED")) {
		FILE *f = fopen(getenv("FUZZ_REGION_SEED"), "wb");

		if (!f || fwrite(tpl, 1, tpl_size < 4096 ? tpl_size : 4096, f) == 0)
			abort();
		fclose(f);
	}
	shm_region_unlink(name);
}

static void write_image(const uint8_t *data, size_t size)
{
	size_t n = size < tpl_size ? size : tpl_size;
	int fd;

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
	return 0;
}
