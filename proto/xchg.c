/* xchg.c - the exchange region: layout, sealed creation, checked open (see xchg.h). */
#include "xchg.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096u

int proto_xchg_layout(uint64_t mbox_bytes, uint32_t nrings, uint64_t data_bytes,
		      struct proto_xchg_geom *g)
{
	uint64_t off;

	memset(g, 0, sizeof(*g));
	if (mbox_bytes == 0 || mbox_bytes % 64 || mbox_bytes > SHM_REGION_MAX_SIZE || nrings == 0 ||
	    data_bytes > PROTO_XCHG_DATA_MAX)
		return -EINVAL;
	g->mbox_offset = PROTO_XCHG_HDR;
	g->mbox_size = (uint32_t)mbox_bytes;
	/* the consumer lines start on a page of their own, away from the slots */
	off = (PROTO_XCHG_HDR + mbox_bytes + PAGE - 1) / PAGE * PAGE;
	g->cons_offset = (uint32_t)off;
	g->cons_stride = RING_CONS_SIZE;
	g->nrings = nrings;
	off += (uint64_t)nrings * RING_CONS_SIZE;
	if (data_bytes) { /* on pages of its own */
		off = (off + PAGE - 1) / PAGE * PAGE;
		if (off > UINT32_MAX)
			return -EINVAL;
		g->data_offset = (uint32_t)off;
		g->data_size = (uint32_t)data_bytes;
		off += data_bytes;
	}
	g->total_size = (off + PAGE - 1) / PAGE * PAGE;
	return g->total_size > SHM_REGION_MAX_SIZE ? -EINVAL : 0;
}

/* Writes the header of @x, shape @g, magic last. */
static void write_header(struct proto_xchg *x, const struct proto_xchg_geom *g)
{
	struct proto_xchg_hdr *h = (struct proto_xchg_hdr *)(void *)x->base;

	h->version = PROTO_XCHG_VERSION;
	h->hdr_size = PROTO_XCHG_HDR;
	h->total_size = g->total_size;
	h->mbox_offset = g->mbox_offset;
	h->mbox_size = g->mbox_size;
	h->cons_offset = g->cons_offset;
	h->cons_stride = g->cons_stride;
	h->nrings = g->nrings;
	h->data_offset = g->data_offset;
	h->data_size = g->data_size;
	/* the magic last: nobody sees the region before the hello answer anyway */
	__atomic_store_n(&h->magic, PROTO_XCHG_MAGIC, __ATOMIC_RELEASE);
}

int proto_xchg_scrub(struct proto_xchg *x, const struct proto_xchg_geom *g)
{
	/* the pages go back to the kernel and read as zero: a scrub costs what the last
	 * client touched, not the region's size */
	if (fallocate(x->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
		      (off_t)g->total_size) != 0) {
		if (errno != EOPNOTSUPP && errno != ENOSYS)
			return -errno;
		memset(x->base, 0, g->total_size);
	}
	write_header(x, g);
	return 0;
}

int proto_xchg_create(struct proto_xchg *x, const struct proto_xchg_geom *g, struct shm_diag *diag)
{
	int rc;

	memset(x, 0, sizeof(*x));
	x->fd = memfd_create("chipd-client", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (x->fd < 0)
		return shm_diag_fail(diag, -errno, "exchange region: memfd_create: %s",
				     strerror(errno));
	if (ftruncate(x->fd, (off_t)g->total_size) != 0 ||
	    fcntl(x->fd, F_ADD_SEALS, PROTO_XCHG_SEALS) != 0) {
		rc = shm_diag_fail(diag, -errno, "exchange region: size and seal: %s",
				   strerror(errno));
		goto err_close;
	}
	x->base = mmap(NULL, g->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	if (x->base == MAP_FAILED) {
		x->base = NULL;
		rc = shm_diag_fail(diag, -errno, "exchange region: mmap: %s", strerror(errno));
		goto err_close;
	}
	x->size = g->total_size;
	write_header(x, g);
	return 0;
err_close:
	close(x->fd);
	x->fd = -1;
	return rc;
}

/* One read of a header word any client may write at any time. */
#define PEEK(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

static int check_header(const struct proto_xchg_hdr *h, const struct proto_xchg_geom *want,
			struct shm_diag *diag)
{
	uint64_t magic = PEEK(h->magic), total = PEEK(h->total_size);
	uint32_t version = PEEK(h->version);

	if (magic != PROTO_XCHG_MAGIC)
		return shm_diag_fail(diag, -EBADMSG, "exchange region: bad magic %#" PRIx64, magic);
	if (version != PROTO_XCHG_VERSION)
		return shm_diag_fail(diag, -EPROTONOSUPPORT,
				     "exchange region version %" PRIu32
				     " (this libchipd: %u): use the "
				     "libchipd and chipctl of the running chipd",
				     version, PROTO_XCHG_VERSION);
	if (PEEK(h->hdr_size) != PROTO_XCHG_HDR || total != want->total_size ||
	    PEEK(h->mbox_offset) != want->mbox_offset || PEEK(h->mbox_size) != want->mbox_size ||
	    PEEK(h->cons_offset) != want->cons_offset ||
	    PEEK(h->cons_stride) != want->cons_stride || PEEK(h->nrings) != want->nrings ||
	    PEEK(h->data_offset) != want->data_offset || PEEK(h->data_size) != want->data_size)
		return shm_diag_fail(diag, -EMSGSIZE,
				     "exchange region: its header's shape differs from the node "
				     "descriptor's (total %" PRIu64 ", want %" PRIu64 ")",
				     total, want->total_size);
	return 0;
}

int proto_xchg_open(struct proto_xchg *x, int fd, const struct proto_xchg_geom *want,
		    struct shm_diag *diag)
{
	struct stat st;
	void *base;
	int seals, rc;

	memset(x, 0, sizeof(*x));
	x->fd = -1;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0) {
		rc = shm_diag_fail(diag, -errno,
				   "exchange region: F_GET_SEALS: %s (not a sealed memfd)",
				   strerror(errno));
		goto err_close;
	}
	if ((seals & PROTO_XCHG_SEALS) != PROTO_XCHG_SEALS) {
		rc = shm_diag_fail(
		    diag, -EPERM,
		    "exchange region: seals %#x lack %#x (shrink, grow, seal): it could "
		    "shrink under its users; refusing it",
		    (unsigned)seals, (unsigned)PROTO_XCHG_SEALS);
		goto err_close;
	}
	if (fstat(fd, &st) != 0) {
		rc = shm_diag_fail(diag, -errno, "exchange region: fstat: %s", strerror(errno));
		goto err_close;
	}
	if ((uint64_t)st.st_size != want->total_size) {
		rc = shm_diag_fail(diag, -EMSGSIZE,
				   "exchange region: %lld bytes, the node descriptor says %" PRIu64,
				   (long long)st.st_size, want->total_size);
		goto err_close;
	}
	base = mmap(NULL, want->total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = shm_diag_fail(diag, -errno, "exchange region: mmap: %s", strerror(errno));
		goto err_close;
	}
	rc = check_header(base, want, diag);
	if (rc) {
		munmap(base, want->total_size);
		goto err_close;
	}
	x->fd = fd;
	x->base = base;
	x->size = want->total_size;
	return 0;
err_close:
	close(fd);
	return rc;
}

void proto_xchg_close(struct proto_xchg *x)
{
	if (x->base)
		munmap(x->base, x->size);
	if (x->fd >= 0) /* 0 too: a process without standard input gets its memfd there */
		close(x->fd);
	x->base = NULL;
	x->size = 0;
	x->fd = -1;
}
