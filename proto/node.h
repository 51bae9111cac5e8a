/* node.h - the node region "/chipd.<uid>.<instance>": what the supervisor creates and
 * every client attaches to, read-only (since layout 3: mode 0400, mapped PROT_READ; only
 * the supervisor and the workers it forks write it). What a client writes lives in a
 * client region of its own (layout 4, xchg.h), a sealed memfd each client gets with
 * its hello answer.
 *
 * After the 64-byte region header (shm/region.h) the body holds, each part at a
 * 64-aligned offset recorded in the node descriptor (offsets from the region start):
 *
 *   64   node descriptor (256 bytes): magic, version, the offset and size of each part,
 *        the path of the handshake socket (docs/protocol.md §9)
 *        worker directory: nworkers records of 64 bytes (chip, state, pid, gpu, ...)
 *        supervisor counters (shm/ctr.h block)
 *        worker counters: nworkers blocks, one every wrk_ctr_stride bytes
 *        token rings (shm/ring.h): nrings producer parts (header and records), one
 *        every ring_stride bytes; their consumer lines are in the exchange region
 * The descriptor also gives the exchange region's shape: its size, where its client
 * mailbox (mbox_offset, mbox_size) and its consumer lines (cons_offset, cons_stride)
 * lie in it.
 *
 * Attach trusts nothing: every offset and size is bound-checked against the region
 * before use, and the parts must not overlap. docs/protocol.md §8.1 is normative.
 *
 * Single writer: the supervisor writes the descriptor before READY and the directory
 * afterwards (atomics; readers see each field, not a snapshot of a record).
 */
#ifndef CHIPD_PROTO_NODE_H
#define CHIPD_PROTO_NODE_H

#include "chipd.h"
#include "ctr.h"
#include "mbox.h"
#include "region.h"
#include "ring.h"
#include "xchg.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_NODE_MAGIC       0x45444f4e44504843ull /* "CHPDNODE" in little-endian bytes */
#define PROTO_NODE_VERSION     6u
#define PROTO_NODE_DESC_OFFSET SHM_BODY_OFFSET
#define PROTO_NODE_MAX_RINGS   4096u
/* The handshake socket's path in the descriptor, NUL included: sun_path's size. */
#define PROTO_NODE_SOCK_MAX 108u

/* A client's mailbox, in its own region: at most 64 slots (64 requests of one client in
 * flight at once, one per thread of a busy client); a request is at most PROTO_REQ_MAX
 * (4 KiB), an answer at most PROTO_RESP_MAX (64 KiB, the stats answer). The default is
 * 16 slots (chipd --max-client-slots), about 1.1 MiB of address space per region, of
 * which a client touches only the pages of the slots it uses. */
#define PROTO_NODE_SLOTS	 64u
#define PROTO_NODE_CLIENT_SLOTS	 16u
/* Client regions the node keeps (chipd --max-clients): one per connection. */
#define PROTO_NODE_CLIENTS	 128u
#define PROTO_NODE_MAX_CLIENTS	 4096u
/* 256 streams at once, 1024 tokens of buffer each (64 KiB): a reader can fall 1023
 * tokens behind before its request pauses. About 16 MiB (docs/protocol.md 8.1). */
/* Each client region's data area by default (chipd --client-data-kib 1024). */
#define PROTO_NODE_DATA_BYTES (1024u * 1024u)
#define PROTO_NODE_RINGS	 256u
#define PROTO_NODE_RING_CAPACITY 1024u

struct proto_node_config {
	uint32_t nworkers;	/* 1..CHIPD_MAX_CHIPS */
	uint32_t nrings;	/* 1..PROTO_NODE_MAX_RINGS */
	uint32_t ring_capacity; /* a power of two, see ring.h */
	uint32_t mbox_slots, req_cap, resp_cap; /* each client region's mailbox */
	uint32_t nclients;			/* client regions: 1..PROTO_NODE_MAX_CLIENTS */
	uint64_t data_bytes; /* each client region's data area: 0..PROTO_XCHG_DATA_MAX */
};

/* The descriptor at region offset 64. Written once by the creator before READY. */
struct proto_node_desc {
	uint64_t magic;	       /* PROTO_NODE_MAGIC */
	uint32_t version;      /* PROTO_NODE_VERSION */
	uint32_t desc_size;    /* sizeof(struct proto_node_desc) */
	uint32_t wire_version; /* PROTO_VERSION of the messages in the mailbox */
	uint32_t nworkers;
	uint32_t dir_offset; /* worker directory */
	uint32_t dir_stride; /* sizeof(struct proto_node_worker) */
	uint32_t sup_ctr_offset, sup_ctr_size;
	uint32_t wrk_ctr_offset, wrk_ctr_stride;
	uint32_t mbox_offset, mbox_size; /* the client mailbox, in the exchange region */
	uint32_t rings_offset, ring_stride;
	uint32_t nrings, ring_capacity;
	uint64_t total_size;	     /* == the region's size */
	_Atomic uint64_t started_ns; /* CLOCK_MONOTONIC when the supervisor became ready */
	uint64_t xchg_size;	     /* a client region's size (its memfd's) */
	uint32_t cons_offset;	     /* ring consumer lines, in the exchange region */
	uint32_t cons_stride;	     /* RING_CONS_SIZE */
	uint32_t data_offset;	     /* the data area, in the exchange region (page aligned) */
	uint32_t data_size;	     /* its bytes; 0 and 0: none */
	uint8_t reserved0[16];
	/* the handshake socket (SOCK_SEQPACKET, docs/protocol.md §9): an absolute path,
	 * NUL-terminated; written by the supervisor before READY */
	char sock_path[PROTO_NODE_SOCK_MAX];
	uint8_t reserved1[20];
};
_Static_assert(sizeof(struct proto_node_desc) == 256, "node descriptor is four lines");
_Static_assert(offsetof(struct proto_node_desc, dir_offset) == 24, "desc.dir_offset");
_Static_assert(offsetof(struct proto_node_desc, mbox_offset) == 48, "desc.mbox_offset");
_Static_assert(offsetof(struct proto_node_desc, nrings) == 64, "desc.nrings");
_Static_assert(offsetof(struct proto_node_desc, total_size) == 72, "desc.total_size");
_Static_assert(offsetof(struct proto_node_desc, started_ns) == 80, "desc.started_ns");
_Static_assert(offsetof(struct proto_node_desc, xchg_size) == 88, "desc.xchg_size");
_Static_assert(offsetof(struct proto_node_desc, cons_offset) == 96, "desc.cons_offset");
_Static_assert(offsetof(struct proto_node_desc, data_offset) == 104, "desc.data_offset");
_Static_assert(offsetof(struct proto_node_desc, sock_path) == 128, "desc.sock_path");

/* One worker's record in the directory; written by the supervisor, but for the pass
 * words, which its worker writes. */
struct proto_node_worker {
	uint32_t chip;		       /* its index, fixed */
	_Atomic uint32_t state;	       /* enum chipd_chip_state; release store */
	_Atomic uint32_t pid;	       /* 0 while none runs */
	int32_t gpu;		       /* device ordinal, -1 for the sim backend; fixed */
	_Atomic uint32_t restarts;     /* times the worker was restarted */
	_Atomic uint32_t incarnation;  /* +1 on each start */
	_Atomic uint64_t pid_start;    /* the worker's start time (shm/proc.h) */
	_Atomic uint64_t heartbeat_ns; /* CLOCK_MONOTONIC of its last heartbeat answer */
	_Atomic uint64_t started_ns;   /* CLOCK_MONOTONIC of its last start */
	/* The worker's pass words (O's, M's once O is joined; and S's): +1 (seq_cst) as
	 * the thread enters a section that may write into a client region for a request
	 * (its data area, its ring's consumer line), +1 (release) as it leaves, so odd
	 * means inside. The supervisor scrubs a region for another client only once every
	 * pass word it saw odd after taking a ring back moved, or that worker died
	 * (docs/protocol.md 8.7, the grace before a scrub). */
	_Atomic uint64_t pass_o;
	_Atomic uint64_t pass_s;
};
_Static_assert(sizeof(struct proto_node_worker) == 64, "worker record is one line");
_Static_assert(offsetof(struct proto_node_worker, pid_start) == 24, "worker.pid_start");
_Static_assert(offsetof(struct proto_node_worker, started_ns) == 40, "worker.started_ns");
_Static_assert(offsetof(struct proto_node_worker, pass_o) == 48, "worker.pass_o");
_Static_assert(offsetof(struct proto_node_worker, pass_s) == 56, "worker.pass_s");

/* The counters of the supervisor block (X(name, kind)); err_<code> counts the
 * requests that ended with each error code, each once: refused with it, or their
 * stream ended with it (docs/protocol.md §8.1 defines every counter). */
#define PROTO_SUP_COUNTERS(X)                                                                      \
	X(requests, CTR_COUNTER)                                                                   \
	X(answered, CTR_COUNTER)                                                                   \
	X(err_bad_request, CTR_COUNTER)                                                            \
	X(err_unsupported_version, CTR_COUNTER)                                                    \
	X(err_too_large, CTR_COUNTER)                                                              \
	X(err_queue_full, CTR_COUNTER)                                                             \
	X(err_no_capacity, CTR_COUNTER)                                                            \
	X(err_duplicate_id, CTR_COUNTER)                                                           \
	X(err_not_found, CTR_COUNTER)                                                              \
	X(err_cancelled, CTR_COUNTER)                                                              \
	X(err_draining, CTR_COUNTER)                                                               \
	X(err_worker_lost, CTR_COUNTER)                                                            \
	X(err_device_error, CTR_COUNTER)                                                           \
	X(err_timeout, CTR_COUNTER)                                                                \
	X(err_internal, CTR_COUNTER)                                                               \
	X(err_node_lost, CTR_COUNTER)                                                              \
	X(mbox_resets, CTR_COUNTER)                                                                \
	X(worker_starts, CTR_COUNTER)                                                              \
	X(worker_deaths, CTR_COUNTER)                                                              \
	X(worker_degraded, CTR_COUNTER)                                                            \
	X(queue_depth, CTR_GAUGE)                                                                  \
	X(rings_in_use, CTR_GAUGE)                                                                 \
	X(clients, CTR_GAUGE)                                                                      \
	X(clients_refused, CTR_COUNTER)                                                            \
	X(callables_quarantined, CTR_COUNTER)

/* The counters of each worker block. */
#define PROTO_WRK_COUNTERS(X)                                                                      \
	X(admitted, CTR_COUNTER)                                                                   \
	X(rejected, CTR_COUNTER)                                                                   \
	X(completed, CTR_COUNTER)                                                                  \
	X(failed, CTR_COUNTER)                                                                     \
	X(cancelled, CTR_COUNTER)                                                                  \
	X(tokens, CTR_COUNTER)                                                                     \
	X(steps, CTR_COUNTER)                                                                      \
	X(o_busy_ns, CTR_COUNTER)                                                                  \
	X(s_busy_ns, CTR_COUNTER)                                                                  \
	X(overlap_ns, CTR_COUNTER)                                                                 \
	X(device_errors, CTR_COUNTER)                                                              \
	X(terminal_push_failed, CTR_COUNTER)                                                       \
	X(mbox_resets, CTR_COUNTER)                                                                \
	X(queue_depth, CTR_GAUGE)                                                                  \
	X(active, CTR_GAUGE)                                                                       \
	X(kv_blocks_used, CTR_GAUGE)

#define PROTO_CTR_ENUM_SUP(name, kind) PROTO_SUP_##name,
#define PROTO_CTR_ENUM_WRK(name, kind) PROTO_WRK_##name,
enum proto_sup_ctr { PROTO_SUP_COUNTERS(PROTO_CTR_ENUM_SUP) PROTO_NSUP_CTRS };
enum proto_wrk_ctr { PROTO_WRK_COUNTERS(PROTO_CTR_ENUM_WRK) PROTO_NWRK_CTRS };

/* The node's geometry: this process's own copy of the descriptor's shape, taken once
 * at create or attach (validated there, docs/protocol.md 8.1). Every part is found
 * through it; the shared descriptor is never read again for a count, offset, size or
 * stride, so a client that rewrites the descriptor steers nothing. */
struct proto_node_geom {
	uint32_t nworkers;
	uint32_t dir_offset, dir_stride;
	uint32_t sup_ctr_offset, sup_ctr_size;
	uint32_t wrk_ctr_offset, wrk_ctr_stride;
	uint32_t rings_offset, ring_stride;
	uint32_t nrings, ring_capacity;
	uint64_t total_size;
	struct proto_xchg_geom xchg; /* a client region's shape (all alike) */
};

/* One process's mapping of a node region. */
struct proto_node {
	struct shm_region region;
	struct proto_node_desc *desc; /* shared: started_ns only; geometry is in geom */
	struct proto_node_geom geom;
	struct proto_node_worker *dir; /* geom.nworkers records */
	struct ctr_block sup_ctr;
	struct ctr_block wrk_ctr[CHIPD_MAX_CHIPS];
	/* a client: its own client region, once its hello brought the memfd
	 * (proto_hello), xchg.base NULL before; the creator has none of its own */
	struct proto_xchg xchg;
	bool xchg_borrowed; /* xchg is the pool's own mapping (proto_node_attach_own) */
	struct mbox mbox; /* in the client region: unattached (hdr NULL) until then */
	/* the creator: every client region (mapped before its workers fork, so they
	 * inherit them all), and its handle on each region's mailbox; NULL in a client */
	struct proto_xchg *pool;
	struct mbox *pool_mbox; /* laid out when handed out (proto_node_client_open) */
	uint32_t npool, pool_books; /* regions made; entries of pool and pool_mbox */
	uint32_t pool_slots, pool_req_cap, pool_resp_cap; /* each region's mailbox shape */
};

/* The default shape for @nworkers chips (the PROTO_NODE_* constants). */
void proto_node_config_default(struct proto_node_config *cfg, uint32_t nworkers);

/* Computes the layout of @cfg into @desc (offsets, sizes, total). Returns 0, or
 * -EINVAL for a shape out of range, -EMSGSIZE when the region would exceed
 * SHM_REGION_MAX_SIZE. */
int proto_node_layout(const struct proto_node_config *cfg, struct proto_node_desc *desc);

/* Creates the node region @name with the shape @cfg (flags as shm_region_create;
 * SHM_CREATE_READONLY is always added) and its cfg->nclients client regions, and lays
 * out every part: directory records (state EMPTY, gpu -1), counters (zero), each client
 * region's mailbox, the rings (producer parts here; consumer lines in the region of the
 * client holding the ring). The region stays CREATING: fill in the directory, then
 * call shm_region_ready(&n->region). Returns 0 or -errno, with @diag (may be NULL)
 * saying why. */
int proto_node_create(struct proto_node *n, const char *name, const struct proto_node_config *cfg,
		      unsigned flags, struct shm_diag *diag);

/* Attaches the node region @name read-only: shm_region_attach_ro (kind NODE) and then
 * the node descriptor, checked field by field: -EBADMSG bad magic, -EPROTONOSUPPORT
 * another node layout or wire version, -EMSGSIZE a part out of bounds, misaligned or
 * overlapping another (the exchange region's shape included), or what the attach of
 * the counters returns. The mailbox and the rings' consumer lines are not there yet:
 * proto_hello brings the exchange region (proto_node_attach_xchg). On error nothing
 * stays mapped and @diag says which check failed. */
int proto_node_attach(struct proto_node *n, const char *name, struct shm_diag *diag);

/* As proto_node_attach, for the node region of a chipd that runs as uid @owner (its
 * own account, serving a group: chipd --allow-group): shm_region_attach_ro_as. */
int proto_node_attach_as(struct proto_node *n, const char *name, uid_t owner,
			 struct shm_diag *diag);

/* Maps the exchange region @fd (taken: kept in n->xchg, or closed on error) into the
 * attached node @n after proto_xchg_open's checks against n->geom.xchg, and attaches
 * the client mailbox in it. Returns 0, -EALREADY when @n already has one (@fd closed),
 * or what proto_xchg_open and mbox_attach return, with @diag saying why. */
int proto_node_attach_xchg(struct proto_node *n, int fd, struct shm_diag *diag);

/* The creator as a client of its own node (tests, benchmarks): lays out client region
 * @region's mailbox (proto_node_client_open), checks the region as a client checks the
 * memfd its hello brings (proto_xchg_open, on a duplicate descriptor), and makes it its
 * own (n->xchg, n->mbox) through the pool's mapping: one address for the memory in the
 * process. Returns 0, -ERANGE, -EALREADY, or what proto_xchg_open and mbox_attach
 * return. */
int proto_node_attach_own(struct proto_node *n, uint32_t region, struct shm_diag *diag);

/* Unmaps @n and its exchange region (does not unlink). Safe on a zeroed struct. */
void proto_node_detach(struct proto_node *n);

/* Copies the handshake socket's path of @n into @out (PROTO_NODE_SOCK_MAX bytes).
 * Returns 0, or -EBADMSG when the descriptor holds none that is valid (empty, not
 * NUL-terminated within PROTO_NODE_SOCK_MAX bytes, or not absolute). */
int proto_node_sock_path(const struct proto_node *n, char *out);

/* Attaches @r to ring @idx of the node, found and bound through the node's private
 * geometry (n->geom: its offset, stride and capacity; its consumer line in the
 * exchange region), and checks that the ring's header still says so (ring_check).
 * Returns 0, -ERANGE for an index not below geom.nrings, -ENOTCONN when @n has no
 * exchange region yet (no hello), or -EBADMSG, -EPROTONOSUPPORT, -EMSGSIZE when a peer overwrote the
 * header's identity. On error @r is zeroed (hdr NULL): check the return before any
 * ring call. Every ring call on an attached @r stays inside the ring's records
 * whatever a peer writes into its header later (ring.h). */
int proto_node_ring(struct proto_node *n, uint32_t idx, struct ring *r);

/* Binds @r to ring @idx with the node's private geometry, reading nothing of the
 * ring's header: for the region's creator, which laid the ring out and rewrites its
 * identity itself. Returns 0, -ERANGE or -ENOTCONN (@r zeroed). */
int proto_node_ring_bind(struct proto_node *n, uint32_t idx, struct ring *r);

/* The creator's (and its workers') proto_node_ring_bind and proto_node_ring for a ring
 * whose consumer line lies in client region @region of the pool (the region of the
 * client holding the ring, as the supervisor's assign names it): -ERANGE for a ring or
 * region index out of range, -ENOTCONN without a pool. */
int proto_node_ring_bind_in(struct proto_node *n, uint32_t idx, uint32_t region, struct ring *r);
int proto_node_ring_in(struct proto_node *n, uint32_t idx, uint32_t region, struct ring *r);

/* The creator's (and its workers') view of @len bytes at @off of client region
 * @region's data area (a submit's input or output range), by its own geometry: the
 * address, or NULL for a region out of range, no pool, no data area, or a range
 * outside it (@len 0 included). */
char *proto_node_data_in(struct proto_node *n, uint32_t region, uint64_t off, uint64_t len);

/* Scrubs client region @region of the pool for its next client (proto_xchg_scrub:
 * every byte zero, the header written anew). The creator only, while nobody uses the
 * region. Returns 0 or -errno. */
int proto_node_client_scrub(struct proto_node *n, uint32_t region);

/* Lays out the mailbox of client region @region (every slot FREE, generation 1) and
 * binds n->pool_mbox[region] to it, before the region is handed out: a region's
 * mailbox pages are touched only once a client gets it. The creator only, while nobody
 * uses the region. Returns 0 or -errno. */
int proto_node_client_open(struct proto_node *n, uint32_t region);

/* Checks @name against the instance naming rule: 1..CHIPD_INSTANCE_MAX-1 characters of
 * [A-Za-z0-9._-] (the characters shm_region_name accepts). Returns 0, or -EINVAL with
 * @why (@cap bytes; may be NULL) saying what is wrong, e.g. "48 characters, at most
 * 47" or "character '/' is not one of [A-Za-z0-9._-]". */
int proto_node_instance_check(const char *name, char *why, size_t cap);

/* The instance name to use: @instance when not NULL (an explicit "" is an error), else
 * $CHIPD_INSTANCE, else $SLURM_JOB_ID (a variable set to "" counts as unset), else
 * "default" (docs/operations.md). Checks it (proto_node_instance_check) and copies it
 * into @out (@cap bytes, CHIPD_INSTANCE_MAX fits every valid name). Returns 0, or
 * -EINVAL with @why (@whycap bytes; may be NULL) naming the name, the variable it came
 * from and what is wrong with it. */
int proto_node_instance(const char *instance, char *out, size_t cap, char *why, size_t whycap);

/* The uid of the chipd a client uses: $CHIPD_USER, a user name or a numeric uid (a
 * chipd that runs as its own account and serves a group, chipd --allow-group), else
 * the caller's effective uid (unset or ""). It names the node region
 * ("/chipd.<uid>.<instance>"), whose owner must be that uid. Returns 0, or -EINVAL
 * with @why (@whycap bytes) saying what is wrong (an unknown user). */
int proto_node_owner(uid_t *out, char *why, size_t whycap);

#endif
