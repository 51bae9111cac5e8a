/* node.c - the node region: layout, creation, validated attach (see node.h). */
#include "node.h"
#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ALIGN64(x) (((x) + 63u) & ~(uint64_t)63u)
#define PAGE	   4096u

#define PROTO_CTR_DESC(name, kind) {#name, kind},
static const struct ctr_desc sup_ctrs[] = {PROTO_SUP_COUNTERS(PROTO_CTR_DESC)};
static const struct ctr_desc wrk_ctrs[] = {PROTO_WRK_COUNTERS(PROTO_CTR_DESC)};

void proto_node_config_default(struct proto_node_config *cfg, uint32_t nworkers)
{
	cfg->nworkers = nworkers;
	cfg->nrings = PROTO_NODE_RINGS;
	cfg->ring_capacity = PROTO_NODE_RING_CAPACITY;
	cfg->mbox_slots = PROTO_NODE_CLIENT_SLOTS;
	cfg->req_cap = PROTO_REQ_MAX;
	cfg->resp_cap = PROTO_RESP_MAX;
	cfg->nclients = PROTO_NODE_CLIENTS;
	cfg->data_bytes = PROTO_NODE_DATA_BYTES;
}

int proto_node_layout(const struct proto_node_config *cfg, struct proto_node_desc *d)
{
	size_t sup = ctr_size(PROTO_NSUP_CTRS), wrk = ctr_size(PROTO_NWRK_CTRS);
	size_t mb = mbox_size(cfg->mbox_slots, cfg->req_cap, cfg->resp_cap);
	size_t ring = ring_size(cfg->ring_capacity);
	struct proto_xchg_geom x;
	uint64_t off;

	if (cfg->nworkers < 1 || cfg->nworkers > CHIPD_MAX_CHIPS || cfg->nrings < 1 ||
	    cfg->nrings > PROTO_NODE_MAX_RINGS || !mb || !ring || !sup || !wrk ||
	    cfg->nclients < 1 || cfg->nclients > PROTO_NODE_MAX_CLIENTS)
		return -EINVAL;
	memset(d, 0, sizeof(*d));
	d->magic = PROTO_NODE_MAGIC;
	d->version = PROTO_NODE_VERSION;
	d->desc_size = sizeof(*d);
	d->wire_version = PROTO_VERSION;
	d->nworkers = cfg->nworkers;
	d->nrings = cfg->nrings;
	d->ring_capacity = cfg->ring_capacity;
	off = PROTO_NODE_DESC_OFFSET + sizeof(*d);
	d->dir_offset = (uint32_t)off;
	d->dir_stride = sizeof(struct proto_node_worker);
	off += (uint64_t)cfg->nworkers * d->dir_stride;
	d->sup_ctr_offset = (uint32_t)off;
	d->sup_ctr_size = (uint32_t)ALIGN64(sup);
	off += d->sup_ctr_size;
	d->wrk_ctr_offset = (uint32_t)off;
	d->wrk_ctr_stride = (uint32_t)ALIGN64(wrk);
	off += (uint64_t)cfg->nworkers * d->wrk_ctr_stride;
	/* Rings start on a page: the producer lines of the first ring do not share a
	 * page with the counters. */
	d->rings_offset = (uint32_t)(off = (off + PAGE - 1) / PAGE * PAGE);
	d->ring_stride = (uint32_t)ALIGN64(ring);
	off += (uint64_t)cfg->nrings * d->ring_stride;
	d->total_size = (off + PAGE - 1) / PAGE * PAGE;
	if (d->total_size > SHM_REGION_MAX_SIZE ||
	    proto_xchg_layout(ALIGN64(mb), cfg->nrings, cfg->data_bytes, &x))
		return -EMSGSIZE;
	d->xchg_size = x.total_size;
	d->mbox_offset = x.mbox_offset;
	d->mbox_size = x.mbox_size;
	d->cons_offset = x.cons_offset;
	d->cons_stride = x.cons_stride;
	d->data_offset = x.data_offset;
	d->data_size = x.data_size;
	return 0;
}

static char *at(const struct proto_node *n, uint64_t off)
{
	return (char *)n->region.hdr + off;
}

/* Points @n's handles at the parts of its (validated or fresh) geometry. */
static void map_parts(struct proto_node *n)
{
	n->dir = (struct proto_node_worker *)(void *)at(n, n->geom.dir_offset);
}

/* One read of a plain descriptor word another process may write at any time. */
#define PEEK(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* Copies the shape of descriptor @d into @g, each field read once. */
static void geom_of(const struct proto_node_desc *d, struct proto_node_geom *g)
{
	g->nworkers = PEEK(d->nworkers);
	g->dir_offset = PEEK(d->dir_offset);
	g->dir_stride = PEEK(d->dir_stride);
	g->sup_ctr_offset = PEEK(d->sup_ctr_offset);
	g->sup_ctr_size = PEEK(d->sup_ctr_size);
	g->wrk_ctr_offset = PEEK(d->wrk_ctr_offset);
	g->wrk_ctr_stride = PEEK(d->wrk_ctr_stride);
	g->rings_offset = PEEK(d->rings_offset);
	g->ring_stride = PEEK(d->ring_stride);
	g->nrings = PEEK(d->nrings);
	g->ring_capacity = PEEK(d->ring_capacity);
	g->total_size = PEEK(d->total_size);
	g->xchg.total_size = PEEK(d->xchg_size);
	g->xchg.mbox_offset = PEEK(d->mbox_offset);
	g->xchg.mbox_size = PEEK(d->mbox_size);
	g->xchg.cons_offset = PEEK(d->cons_offset);
	g->xchg.cons_stride = PEEK(d->cons_stride);
	g->xchg.nrings = g->nrings;
	g->xchg.data_offset = PEEK(d->data_offset);
	g->xchg.data_size = PEEK(d->data_size);
}

static char *xat(const struct proto_node *n, uint64_t off)
{
	return n->xchg.base + off;
}

/* @len bytes of zeroed private memory, or NULL. */
static void *books(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Maps the creator's pool of @cfg->nclients client regions (their mailboxes are laid
 * out when handed out: proto_node_client_open). Returns 0 or -errno with @diag. */
static int create_pool(struct proto_node *n, const struct proto_node_config *cfg,
		       struct shm_diag *diag)
{
	const struct proto_xchg_geom *g = &n->geom.xchg;
	int rc = 0;

	/* mapped like the regions themselves (and inherited with them across fork), so
	 * that a node handle owns mappings only: one kept to the end of a process is no
	 * leak */
	n->pool_books = cfg->nclients;
	n->pool = books(cfg->nclients * sizeof(*n->pool));
	n->pool_mbox = books(cfg->nclients * sizeof(*n->pool_mbox));
	if (!n->pool || !n->pool_mbox)
		return shm_diag_fail(diag, -ENOMEM, "client regions: out of memory");
	for (uint32_t i = 0; i < cfg->nclients; i++)
		n->pool[i].fd = -1;
	n->pool_slots = cfg->mbox_slots;
	n->pool_req_cap = cfg->req_cap;
	n->pool_resp_cap = cfg->resp_cap;
	for (uint32_t i = 0; rc == 0 && i < cfg->nclients; i++) {
		rc = proto_xchg_create(&n->pool[i], g, diag);
		if (rc == 0)
			n->npool = i + 1;
	}
	return rc;
}

static void free_pool(struct proto_node *n)
{
	for (uint32_t i = 0; n->pool && i < n->npool; i++)
		proto_xchg_close(&n->pool[i]);
	if (n->pool)
		munmap(n->pool, n->pool_books * sizeof(*n->pool));
	if (n->pool_mbox)
		munmap(n->pool_mbox, n->pool_books * sizeof(*n->pool_mbox));
	n->pool_books = 0;
	n->pool = NULL;
	n->pool_mbox = NULL;
	n->npool = 0;
}

int proto_node_client_scrub(struct proto_node *n, uint32_t region)
{
	if (region >= n->npool)
		return -ERANGE;
	return proto_xchg_scrub(&n->pool[region], &n->geom.xchg);
}

int proto_node_client_open(struct proto_node *n, uint32_t region)
{
	const struct proto_xchg_geom *g = &n->geom.xchg;

	if (region >= n->npool)
		return -ERANGE;
	/* the shape is the creator's own copy, never a header's */
	return mbox_init(&n->pool_mbox[region], n->pool[region].base + g->mbox_offset,
			 g->mbox_size, n->pool_slots, n->pool_req_cap, n->pool_resp_cap);
}

int proto_node_create(struct proto_node *n, const char *name, const struct proto_node_config *cfg,
		      unsigned flags, struct shm_diag *diag)
{
	struct proto_node_desc d;
	int rc = proto_node_layout(cfg, &d);

	memset(n, 0, sizeof(*n));
	n->xchg.fd = -1;
	if (rc)
		return shm_diag_fail(diag, rc, "node region %s: shape out of range", name);
	rc = shm_region_create(&n->region, name, SHM_KIND_NODE, d.total_size,
			       flags | SHM_CREATE_READONLY, diag);
	if (rc)
		return rc;
	n->desc = (struct proto_node_desc *)shm_region_body(&n->region);
	memcpy(n->desc, &d, sizeof(d));
	geom_of(&d, &n->geom);
	map_parts(n);
	rc = create_pool(n, cfg, diag);
	if (rc)
		goto err_unlink;
	for (uint32_t i = 0; i < d.nworkers; i++) {
		n->dir[i].chip = i;
		n->dir[i].gpu = -1;
	}
	rc = ctr_init(&n->sup_ctr, at(n, d.sup_ctr_offset), d.sup_ctr_size, sup_ctrs,
		      PROTO_NSUP_CTRS);
	for (uint32_t i = 0; rc == 0 && i < d.nworkers; i++)
		rc = ctr_init(&n->wrk_ctr[i],
			      at(n, d.wrk_ctr_offset + (uint64_t)i * d.wrk_ctr_stride),
			      d.wrk_ctr_stride, wrk_ctrs, PROTO_NWRK_CTRS);
	/* a ring's consumer line is wherever its holder's region puts it: the first
	 * region's stands in until the ring's first reset names its client's */
	for (uint32_t i = 0; rc == 0 && i < d.nrings; i++) {
		struct ring r;

		rc = ring_init(&r, at(n, d.rings_offset + (uint64_t)i * d.ring_stride),
			       d.ring_stride, d.ring_capacity,
			       proto_xchg_cons(&n->pool[0], &n->geom.xchg, i));
	}
	if (rc) {
		shm_diag_fail(diag, rc, "node region %s: laying out its parts failed (%d)", name,
			      rc);
		goto err_unlink;
	}
	return 0;
err_unlink:
	shm_region_unlink(name);
	free_pool(n);
	shm_region_detach(&n->region);
	return rc;
}

/* Checks that the part [@off, @off + @size) is aligned, lies after @*end (the end of
 * the previous part) and inside the region; advances @*end. */
static int check_part(const struct proto_node *n, const char *what, uint64_t off, uint64_t size,
		      uint64_t limit, uint64_t *end, struct shm_diag *diag)
{
	if (off % 64 || off < *end || size == 0 || size > limit || off > limit - size)
		return shm_diag_fail(diag, -EMSGSIZE,
				     "node region %s: %s at %" PRIu64 "+%" PRIu64
				     ": misaligned, overlaps "
				     "or out of its region (%" PRIu64 " bytes)",
				     n->region.name, what, off, size, limit);
	*end = off + size;
	return 0;
}

static int validate(struct proto_node *n, struct shm_diag *diag)
{
	const struct proto_node_desc *sd = n->desc;
	struct proto_node_geom *d = &n->geom;
	const struct proto_xchg_geom *x = &d->xchg;
	const uint64_t lim = n->region.size;
	const char *name = n->region.name;
	uint64_t end = PROTO_NODE_DESC_OFFSET + sizeof(*sd), magic;
	uint32_t version, wire, desc_size;
	size_t ring;
	int rc;

	if (n->region.size < end)
		return shm_diag_fail(diag, -EMSGSIZE,
				     "node region %s: %zu bytes cannot hold a descriptor", name,
				     n->region.size);
	/* Every field is read once, into locals and n->geom: what is checked below is
	 * what is used afterwards, whatever a client writes into the descriptor. */
	magic = PEEK(sd->magic);
	version = PEEK(sd->version);
	wire = PEEK(sd->wire_version);
	desc_size = PEEK(sd->desc_size);
	geom_of(sd, d);
	ring = ring_size(d->ring_capacity);
	if (magic != PROTO_NODE_MAGIC)
		return shm_diag_fail(diag, -EBADMSG,
				     "node region %s: bad descriptor magic %#" PRIx64, name, magic);
	if (version != PROTO_NODE_VERSION || wire != PROTO_VERSION)
		return shm_diag_fail(
		    diag, -EPROTONOSUPPORT,
		    "node layout %" PRIu32 ", wire version %" PRIu32
		    " (this libchipd: %u, %d): use the libchipd and chipctl of the running "
		    "chipd (region %s)",
		    version, wire, PROTO_NODE_VERSION, PROTO_VERSION, name);
	if (desc_size != sizeof(*sd) || d->total_size != n->region.size || d->nworkers < 1 ||
	    d->nworkers > CHIPD_MAX_CHIPS || d->nrings < 1 || d->nrings > PROTO_NODE_MAX_RINGS ||
	    d->dir_stride != sizeof(struct proto_node_worker) || !ring || d->ring_stride < ring ||
	    d->ring_stride % 64)
		return shm_diag_fail(
		    diag, -EMSGSIZE,
		    "node region %s: descriptor shape out of range (workers %" PRIu32
		    ", rings %" PRIu32 " x %" PRIu32 ", total %" PRIu64 ")",
		    name, d->nworkers, d->nrings, d->ring_capacity, d->total_size);
	if ((rc = check_part(n, "worker directory", d->dir_offset,
			     (uint64_t)d->nworkers * d->dir_stride, lim, &end, diag)) ||
	    (rc = check_part(n, "supervisor counters", d->sup_ctr_offset, d->sup_ctr_size, lim,
			     &end, diag)) ||
	    (rc = check_part(n, "worker counters", d->wrk_ctr_offset,
			     (uint64_t)d->nworkers * d->wrk_ctr_stride, lim, &end, diag)) ||
	    (rc = check_part(n, "token rings", d->rings_offset,
			     (uint64_t)d->nrings * d->ring_stride, lim, &end, diag)))
		return rc;
	/* the exchange region's parts, against its size as the descriptor gives it (the
	 * memfd is checked against the same size when it comes, proto_xchg_open) */
	end = PROTO_XCHG_HDR;
	if (x->total_size > SHM_REGION_MAX_SIZE || x->cons_stride != RING_CONS_SIZE)
		return shm_diag_fail(diag, -EMSGSIZE,
				     "node region %s: exchange region shape out of range (%" PRIu64
				     " bytes, consumer lines %" PRIu32 " apart)",
				     name, x->total_size, x->cons_stride);
	if ((rc = check_part(n, "client mailbox (xchg)", x->mbox_offset, x->mbox_size,
			     x->total_size, &end, diag)) ||
	    (rc = check_part(n, "ring consumer lines (xchg)", x->cons_offset,
			     (uint64_t)x->nrings * x->cons_stride, x->total_size, &end, diag)))
		return rc;
	if (x->data_size > PROTO_XCHG_DATA_MAX || (x->data_size == 0) != (x->data_offset == 0) ||
	    x->data_offset % PAGE)
		return shm_diag_fail(diag, -EMSGSIZE,
				     "node region %s: data area out of range (offset %" PRIu32
				     ", %" PRIu32 " bytes)",
				     name, x->data_offset, x->data_size);
	if (x->data_size && (rc = check_part(n, "data area (xchg)", x->data_offset, x->data_size,
					     x->total_size, &end, diag)))
		return rc;
	map_parts(n);
	rc = ctr_attach(&n->sup_ctr, at(n, d->sup_ctr_offset), d->sup_ctr_size);
	for (uint32_t i = 0; rc == 0 && i < d->nworkers; i++)
		rc = ctr_attach(&n->wrk_ctr[i],
				at(n, d->wrk_ctr_offset + (uint64_t)i * d->wrk_ctr_stride),
				d->wrk_ctr_stride);
	if (rc)
		return shm_diag_fail(diag, rc, "node region %s: a counter block is invalid (%d)",
				     name, rc);
	return 0;
}

int proto_node_attach(struct proto_node *n, const char *name, struct shm_diag *diag)
{
	return proto_node_attach_as(n, name, geteuid(), diag);
}

int proto_node_attach_as(struct proto_node *n, const char *name, uid_t owner,
			 struct shm_diag *diag)
{
	int rc;

	memset(n, 0, sizeof(*n));
	n->xchg.fd = -1;
	rc = shm_region_attach_ro_as(&n->region, name, SHM_KIND_NODE, 0, owner, diag);
	if (rc)
		return rc;
	n->desc = (struct proto_node_desc *)shm_region_body(&n->region);
	rc = validate(n, diag);
	if (rc)
		goto err_detach;
	return 0;
err_detach:
	shm_region_detach(&n->region);
	memset(n, 0, sizeof(*n));
	n->xchg.fd = -1;
	return rc;
}

int proto_node_attach_xchg(struct proto_node *n, int fd, struct shm_diag *diag)
{
	const struct proto_xchg_geom *g = &n->geom.xchg;
	int rc;

	if (n->xchg.base) {
		close(fd);
		return shm_diag_fail(diag, -EALREADY,
				     "node region %s: the exchange region is mapped already",
				     n->region.name);
	}
	rc = proto_xchg_open(&n->xchg, fd, g, diag);
	if (rc)
		return rc;
	rc = mbox_attach(&n->mbox, xat(n, g->mbox_offset), g->mbox_size);
	if (rc) {
		proto_xchg_close(&n->xchg);
		memset(&n->mbox, 0, sizeof(n->mbox));
		return shm_diag_fail(diag, rc, "node region %s: the client mailbox is invalid (%d)",
				     n->region.name, rc);
	}
	return 0;
}

int proto_node_attach_own(struct proto_node *n, uint32_t region, struct shm_diag *diag)
{
	int fd;

	if (region >= n->npool)
		return shm_diag_fail(diag, -ERANGE, "client region %u: the node has %u", region,
				     n->npool);
	struct proto_xchg probe;
	int rc;

	if (proto_node_client_open(n, region) != 0)
		return shm_diag_fail(diag, -EINVAL, "client region %u: its mailbox", region);
	if (n->xchg.base)
		return shm_diag_fail(diag, -EALREADY, "node region %s: a client region is mapped",
				     n->region.name);
	fd = fcntl(n->pool[region].fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return shm_diag_fail(diag, -errno, "client region %u: dup: %s", region,
				     strerror(errno));
	/* checked as a client checks the memfd its hello brings, then used through the
	 * pool's own mapping: one address for the memory in this process, whose threads
	 * (a test's worker and reader) then order their accesses as the kernel does */
	rc = proto_xchg_open(&probe, fd, &n->geom.xchg, diag);
	if (rc)
		return rc;
	proto_xchg_close(&probe);
	n->xchg = (struct proto_xchg){
	    .fd = -1, .base = n->pool[region].base, .size = n->pool[region].size};
	n->xchg_borrowed = true;
	rc = mbox_attach(&n->mbox, xat(n, n->geom.xchg.mbox_offset), n->geom.xchg.mbox_size);
	if (rc)
		return shm_diag_fail(diag, rc, "client region %u: its mailbox is invalid (%d)",
				     region, rc);
	return 0;
}

void proto_node_detach(struct proto_node *n)
{
	if (n->xchg_borrowed) /* the pool's mapping (proto_node_attach_own) */
		n->xchg = (struct proto_xchg){.fd = -1};
	proto_xchg_close(&n->xchg);
	free_pool(n);
	shm_region_detach(&n->region);
	memset(n, 0, sizeof(*n));
	n->xchg.fd = -1;
}

/* Binds @r to ring @idx with its consumer line in client region @x (NULL or unmapped:
 * -ENOTCONN). */
static int bind_ring(struct proto_node *n, uint32_t idx, const struct proto_xchg *x,
		     struct ring *r)
{
	const struct proto_node_geom *g = &n->geom;

	memset(r, 0, sizeof(*r));
	if (idx >= g->nrings)
		return -ERANGE;
	if (!x || !x->base)
		return -ENOTCONN;
	/* validated at create or attach: the ring lies inside the region, 64-aligned,
	 * and ring_stride holds ring_size(ring_capacity); its consumer line inside the
	 * client region, whose size was checked against the same geometry */
	return ring_bind(r, at(n, g->rings_offset + (uint64_t)idx * g->ring_stride),
			 g->ring_capacity, proto_xchg_cons(x, &g->xchg, idx));
}

int proto_node_ring_bind(struct proto_node *n, uint32_t idx, struct ring *r)
{
	return bind_ring(n, idx, &n->xchg, r);
}

int proto_node_ring_bind_in(struct proto_node *n, uint32_t idx, uint32_t region, struct ring *r)
{
	if (region >= n->npool) {
		memset(r, 0, sizeof(*r));
		return n->pool ? -ERANGE : -ENOTCONN;
	}
	return bind_ring(n, idx, &n->pool[region], r);
}

char *proto_node_data_in(struct proto_node *n, uint32_t region, uint64_t off, uint64_t len)
{
	const struct proto_xchg_geom *g = &n->geom.xchg;

	if (region >= n->npool || !n->pool || !proto_xchg_range_ok(g->data_size, off, len))
		return NULL;
	return proto_xchg_data(&n->pool[region], g) + off;
}

/* A bound ring whose header still says what the geometry does, or @r zeroed. */
static int checked(int rc, struct ring *r)
{
	if (rc == 0)
		rc = ring_check(r);
	if (rc)
		memset(r, 0, sizeof(*r));
	return rc;
}

int proto_node_ring_in(struct proto_node *n, uint32_t idx, uint32_t region, struct ring *r)
{
	return checked(proto_node_ring_bind_in(n, idx, region, r), r);
}

int proto_node_sock_path(const struct proto_node *n, char *out)
{
	const char *p = n->desc->sock_path;
	size_t len = strnlen(p, PROTO_NODE_SOCK_MAX);

	/* the bytes are copied first: the descriptor is shared memory */
	memcpy(out, p, PROTO_NODE_SOCK_MAX);
	out[PROTO_NODE_SOCK_MAX - 1] = '\0';
	if (len == 0 || len >= PROTO_NODE_SOCK_MAX || strlen(out) != len || out[0] != '/')
		return -EBADMSG;
	return 0;
}

int proto_node_ring(struct proto_node *n, uint32_t idx, struct ring *r)
{
	return checked(proto_node_ring_bind(n, idx, r), r);
}

int proto_node_instance_check(const char *name, char *why, size_t cap)
{
	size_t len = strlen(name);
	char tmp[8];

	if (!why || !cap) { /* the rule is the same without a message */
		why = tmp;
		cap = sizeof(tmp);
	}
	if (len == 0) {
		snprintf(why, cap, "empty (use 1..%d of [A-Za-z0-9._-])", CHIPD_INSTANCE_MAX - 1);
		return -EINVAL;
	}
	if (len >= CHIPD_INSTANCE_MAX) {
		snprintf(why, cap, "%zu characters, at most %d", len, CHIPD_INSTANCE_MAX - 1);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-')
			continue;
		if (c >= 0x20 && c < 0x7f)
			snprintf(why, cap, "character '%c' is not one of [A-Za-z0-9._-]", c);
		else
			snprintf(why, cap, "byte 0x%02x is not one of [A-Za-z0-9._-]", c);
		return -EINVAL;
	}
	return 0;
}

int proto_node_instance(const char *instance, char *out, size_t cap, char *why, size_t whycap)
{
	static const char *const vars[] = {"CHIPD_INSTANCE", "SLURM_JOB_ID"};
	const char *v = instance, *from = NULL;
	char reason[96] = "";

	/* An explicit name is taken as it is ("" is an error); a variable set to ""
	 * counts as unset, as every CHIPD_* variable does for chipd. */
	for (size_t i = 0; !v && i < sizeof(vars) / sizeof(vars[0]); i++) {
		v = getenv(vars[i]);
		from = vars[i];
		if (v && !*v)
			v = NULL;
	}
	if (!v) {
		v = "default";
		from = NULL;
	}
	if (proto_node_instance_check(v, reason, sizeof(reason)) < 0 || strlen(v) >= cap) {
		if (why && whycap)
			snprintf(why, whycap, "bad instance name \"%.*s\"%s%s: %s",
				 CHIPD_INSTANCE_MAX + 8, v, from ? " from " : "", from ? from : "",
				 strlen(v) >= cap && !reason[0] ? "too long" : reason);
		return -EINVAL;
	}
	memcpy(out, v, strlen(v) + 1);
	return 0;
}

int proto_node_owner(uid_t *out, char *why, size_t whycap)
{
	const char *v = getenv("CHIPD_USER");
	struct passwd pw, *found = NULL;
	char buf[1024];
	unsigned long long u;
	char *end;

	*out = geteuid();
	if (!v || !*v) /* unset or "" (as every CHIPD_* variable): our own chipd */
		return 0;
	if (v[0] >= '0' && v[0] <= '9') {
		errno = 0;
		u = strtoull(v, &end, 10);
		if (*end || errno || u >= (uid_t)-1) {
			snprintf(why, whycap, "CHIPD_USER=%.64s: not a user name nor a uid", v);
			return -EINVAL;
		}
		*out = (uid_t)u;
		return 0;
	}
	if (getpwnam_r(v, &pw, buf, sizeof(buf), &found) != 0 || !found) {
		snprintf(why, whycap, "CHIPD_USER=%.64s: no such user", v);
		return -EINVAL;
	}
	*out = found->pw_uid;
	return 0;
}
