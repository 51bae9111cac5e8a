/* xchg.h - a client region (exchange region): everything one client of the node may
 * write.
 *
 * The node region (node.h) is read-only to clients (mode 0400, mapped PROT_READ). What
 * a client writes lives apart, in a memfd of its own: the supervisor creates a pool of
 * them at start (one per connection the node allows, before it forks its workers, so
 * every worker inherits every mapping), sizes and seals each (F_SEAL_SHRINK |
 * F_SEAL_GROW | F_SEAL_SEAL: nobody can shrink it, so no mapping of it can fault with
 * SIGBUS), and hands one to each connection with its hello answer (SCM_RIGHTS,
 * docs/protocol.md §9). No other client ever gets it: a stray write of one client
 * reaches its own requests only. When the connection ends the region is scrubbed
 * (proto_xchg_scrub) before another connection gets it. Its layout
 * (docs/protocol.md §8.7):
 *
 *   0            the 64-byte header below
 *   mbox_offset  the client's own mailbox (shm/mbox.h): header, attention bitmap,
 *                --max-client-slots slots
 *   cons_offset  nrings consumer lines (struct ring_cons), cons_stride bytes apart:
 *                line i belongs to the node region's ring i while this client holds
 *                that ring (a line of a ring it does not hold is read by nobody)
 *   data_offset  the data area (page aligned, data_size bytes; none when 0): the
 *                input bytes its submits name (input_off, input_len) and the output
 *                the workers write (output_off, output_cap); every range is checked
 *                against the supervisor's own data_size
 *
 * Everything in it is untrusted input to everyone: the supervisor and workers never
 * read a size or offset from it (they use their own geometry), and a client reads
 * the header once, checks it against the node descriptor and keeps a private copy.
 */
#ifndef CHIPD_PROTO_XCHG_H
#define CHIPD_PROTO_XCHG_H

#include "region.h"
#include "ring.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_XCHG_MAGIC   0x4843584450494843ull /* "CHIPDXCH" in little-endian bytes */
#define PROTO_XCHG_VERSION 3u
#define PROTO_XCHG_HDR	   64u
/* The seals every exchange region carries (fcntl F_GET_SEALS); a client refuses a
 * memfd that lacks any of them. */
#define PROTO_XCHG_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* The header at offset 0, written once by the supervisor before it is shared. */
struct proto_xchg_hdr {
	uint64_t magic;	     /* PROTO_XCHG_MAGIC */
	uint32_t version;    /* PROTO_XCHG_VERSION */
	uint32_t hdr_size;   /* PROTO_XCHG_HDR */
	uint64_t total_size; /* == the memfd's size */
	uint32_t mbox_offset, mbox_size;
	uint32_t cons_offset, cons_stride;
	uint32_t nrings;
	uint32_t data_offset, data_size; /* the data area; 0 and 0: none */
	uint8_t reserved[12];
};
_Static_assert(sizeof(struct proto_xchg_hdr) == PROTO_XCHG_HDR, "exchange header is one line");
_Static_assert(offsetof(struct proto_xchg_hdr, total_size) == 16, "xchg.total_size");
_Static_assert(offsetof(struct proto_xchg_hdr, mbox_offset) == 24, "xchg.mbox_offset");
_Static_assert(offsetof(struct proto_xchg_hdr, cons_offset) == 32, "xchg.cons_offset");
_Static_assert(offsetof(struct proto_xchg_hdr, nrings) == 40, "xchg.nrings");
_Static_assert(offsetof(struct proto_xchg_hdr, data_offset) == 44, "xchg.data_offset");

/* The exchange region's shape: a process's own copy (the supervisor's from the
 * layout, a client's from the node descriptor, checked against the header). */
struct proto_xchg_geom {
	uint64_t total_size;
	uint32_t mbox_offset, mbox_size;
	uint32_t cons_offset, cons_stride;
	uint32_t nrings;
	uint32_t data_offset, data_size;
};

/* The largest data area a client region may have (chipd --client-data-kib). */
#define PROTO_XCHG_DATA_MAX (512u * 1024u * 1024u)

/* One process's mapping of the exchange region. */
struct proto_xchg {
	int fd;	    /* the memfd, -1 when none */
	char *base; /* read-write mapping, NULL when none */
	size_t size;
};

/* Lays out an exchange region for a mailbox of @mbox_bytes (64-aligned, see
 * mbox_size), @nrings consumer lines and a data area of @data_bytes (0: none) into
 * @g. Returns 0 or -EINVAL (empty parts, a data area over PROTO_XCHG_DATA_MAX, or
 * beyond SHM_REGION_MAX_SIZE). */
int proto_xchg_layout(uint64_t mbox_bytes, uint32_t nrings, uint64_t data_bytes,
		      struct proto_xchg_geom *g);

/* Creates the sealed memfd of shape @g, maps it read-write into @x and writes its
 * header (the parts stay zero: the caller lays them out). Returns 0 or -errno with
 * @diag (may be NULL) saying why. */
int proto_xchg_create(struct proto_xchg *x, const struct proto_xchg_geom *g,
		      struct shm_diag *diag);

/* Takes @fd (an exchange memfd received from the supervisor; closed on error) and
 * checks it before and after mapping it read-write into @x: it carries
 * PROTO_XCHG_SEALS (-EPERM otherwise: it could shrink under us), its size is
 * @want->total_size (-EMSGSIZE), and its header says magic (-EBADMSG), version
 * (-EPROTONOSUPPORT) and exactly the shape @want (-EMSGSIZE). On error nothing stays
 * mapped and @diag says which check failed. */
int proto_xchg_open(struct proto_xchg *x, int fd, const struct proto_xchg_geom *want,
		    struct shm_diag *diag);

/* Scrubs the region @x of shape @g for its next client: every byte zero again (the
 * pages are given back, FALLOC_FL_PUNCH_HOLE, or zeroed where that fails), then the
 * header written anew. Its creator only, while no client and no worker uses it.
 * Returns 0 or -errno. */
int proto_xchg_scrub(struct proto_xchg *x, const struct proto_xchg_geom *g);

/* Unmaps @x and closes its fd. Safe on a zeroed or closed struct (fd 0 is not
 * closed: a zeroed struct never owned one; use fd -1 for "none" otherwise). */
void proto_xchg_close(struct proto_xchg *x);

/* Consumer line @idx (< @g->nrings, the caller checks) of the mapped region @x. */
static inline struct ring_cons *proto_xchg_cons(const struct proto_xchg *x,
						const struct proto_xchg_geom *g, uint32_t idx)
{
	return (struct ring_cons *)(void *)(x->base + g->cons_offset +
					    (uint64_t)idx * g->cons_stride);
}

/* The data area of the mapped region @x (NULL when @g has none). */
static inline char *proto_xchg_data(const struct proto_xchg *x, const struct proto_xchg_geom *g)
{
	return g->data_size ? x->base + g->data_offset : NULL;
}

/* Whether [@off, @off + @len) lies inside a data area of @size bytes (@len > 0). */
static inline bool proto_xchg_range_ok(uint64_t size, uint64_t off, uint64_t len)
{
	return len > 0 && off <= size && len <= size - off;
}

#endif
