/* region.h - shared-memory regions: named (shm_open) and anonymous (inherited
 * across fork), each starting with a validated 64-byte header.
 *
 * Byte layout (little-endian, offsets in bytes; docs/protocol.md is normative):
 *   0  u64 magic            SHM_MAGIC, stored last by the creator (release)
 *   8  u32 layout_version   SHM_LAYOUT_VERSION
 *  12  u32 kind             enum shm_kind
 *  16  u64 size             total bytes of the region, header included
 *  24  u32 creator_uid
 *  28  u32 creator_pid
 *  32  u64 creator_start    creator's start time (ticks since boot), see proc.h
 *  40  u32 generation       atomic; bumped when the region is reset for reuse
 *  44  u32 state            atomic; enum shm_state
 *  48  16 bytes reserved, zero
 * The body starts at SHM_BODY_OFFSET.
 */
#ifndef CHIPD_SHM_REGION_H
#define CHIPD_SHM_REGION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHM_MAGIC	   0x4d48534450494843ull /* "CHIPDSHM" in little-endian bytes */
#define SHM_LAYOUT_VERSION 1u
#define SHM_BODY_OFFSET	   64u
#define SHM_NAME_MAX	   64u
/* Attach refuses anything larger: a region is control data and rings, never bulk
 * tensors, and a peer-written size must not make us map without bound. */
#define SHM_REGION_MAX_SIZE (1ull << 30)

enum shm_kind {
	SHM_KIND_NODE = 1,    /* the supervisor's node region: directory, mailbox, rings */
	SHM_KIND_CONTROL = 2, /* one worker's control region (anonymous) */
	SHM_KIND_BENCH = 3,   /* chipbench */
	SHM_KIND_TEST = 0x7e, /* unit tests */
};

enum shm_state {
	SHM_STATE_CREATING = 1, /* header written, body being initialized */
	SHM_STATE_READY = 2,	/* body initialized; attach may use it */
	SHM_STATE_DRAINING = 3, /* owner is stopping: no new work */
	SHM_STATE_STOPPED = 4,	/* owner stopped; about to be unlinked */
};

struct shm_header {
	_Atomic uint64_t magic;
	uint32_t layout_version;
	uint32_t kind;
	uint64_t size;
	uint32_t creator_uid;
	uint32_t creator_pid;
	uint64_t creator_start;
	_Atomic uint32_t generation;
	_Atomic uint32_t state;
	uint8_t reserved[16];
};
_Static_assert(sizeof(struct shm_header) == SHM_BODY_OFFSET, "region header is 64 bytes");
_Static_assert(offsetof(struct shm_header, size) == 16, "header.size offset");
_Static_assert(offsetof(struct shm_header, creator_start) == 32, "header.creator_start");
_Static_assert(offsetof(struct shm_header, generation) == 40, "header.generation");
_Static_assert(offsetof(struct shm_header, state) == 44, "header.state");

/* A mapping of one region in this process. */
struct shm_region {
	struct shm_header *hdr; /* == base of the mapping */
	size_t size;
	bool named;
	bool created; /* this process created it (and should unlink it) */
	char name[SHM_NAME_MAX];
};

/* Why an attach or create failed, for the one log line or CLI message. */
struct shm_diag {
	char msg[224];
};

/* Records why in @diag (when not NULL) and returns @err (a negative errno). */
int shm_diag_fail(struct shm_diag *diag, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Flags for shm_region_create. */
#define SHM_CREATE_RECLAIM_STALE 0x1u /* unlink an existing region whose creator is dead */
/* mode 0400: only the creator's own mapping (and what inherits it across fork) can
 * write; every later open is O_RDONLY (shm_region_attach_ro), for root as well by
 * convention. A read-write open by anyone but root fails EACCES. */
#define SHM_CREATE_READONLY 0x2u

/* Creates the named region @name ("/chipd.<uid>.<instance>") of @size bytes (header
 * included, at least SHM_BODY_OFFSET), mode 0600 (0400 with SHM_CREATE_READONLY), kind @kind, state
 * CREATING, body zeroed. With SHM_CREATE_RECLAIM_STALE an existing region whose creator is dead is
 * unlinked and created anew; a live one is refused. Call shm_region_ready() once the
 * body is initialized.
 * Returns 0, or -EEXIST (live region), -EPERM (existing one owned by someone else),
 * -EBADMSG (existing object is not a chipd region), -EINVAL (bad name or size),
 * or another -errno from the system; @diag (may be NULL) says which and why. */
int shm_region_create(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
		      unsigned flags, struct shm_diag *diag);

/* Creates an anonymous MAP_SHARED region that children inherit across fork; same
 * header, state CREATING. Returns 0 or -errno. */
int shm_region_create_anon(struct shm_region *r, enum shm_kind kind, size_t size);

/* Marks the region READY (release): attachers may now use the body. */
void shm_region_ready(struct shm_region *r);

/* Attaches to the named region @name after validating, in this order: it exists
 * (-ENOENT), is not a symlink (-ELOOP), is a regular file (-EMEDIUMTYPE), is owned by
 * the effective uid (-EPERM), has no group/other permission bits (-EACCES; also a
 * read-write open of a SHM_CREATE_READONLY region by a non-root caller), has a
 * size within [SHM_BODY_OFFSET, SHM_REGION_MAX_SIZE] (-EMSGSIZE), has been initialized
 * (-EAGAIN: magic not yet stored), has the right magic (-EBADMSG), layout version
 * (-EPROTONOSUPPORT), kind (-EPROTOTYPE), a header size equal to the file size and to
 * @size when @size != 0 (-EMSGSIZE), state READY or DRAINING (-EAGAIN while CREATING,
 * -ESHUTDOWN when STOPPED), and a live creator (-ESTALE).
 * On error nothing stays mapped and @diag says which check failed with the values. */
int shm_region_attach(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
		      struct shm_diag *diag);

/* As shm_region_attach, but opens O_RDONLY and maps PROT_READ: for the readers of a
 * region created with SHM_CREATE_READONLY. Any write through the mapping faults
 * (SIGSEGV), and mprotect(PROT_WRITE) of it fails EACCES. */
int shm_region_attach_ro(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
			 struct shm_diag *diag);

/* As shm_region_attach_ro, for a region that @owner (another uid, say the chipd
 * account) made and shared with a group the caller belongs to: the file must belong
 * to @owner, and mode exactly 0440 (read-only to owner and group, as
 * shm_region_share_group makes it) is accepted besides 0400 and 0600; any other group
 * bit and any bit for others are still refused (-EACCES). An open the kernel
 * refuses names the owner and group in @diag. */
int shm_region_attach_ro_as(struct shm_region *r, const char *name, enum shm_kind kind,
			    size_t size, uid_t owner, struct shm_diag *diag);

/* Opens the named region @r this process created (SHM_CREATE_READONLY) to the members
 * of group @gid: group @gid and mode 0440 (fchown, fchmod), so they can map it
 * read-only (shm_region_attach_ro_as) and nobody but the creator's own mapping writes
 * it. The caller must be a member of @gid (or hold CAP_CHOWN). Returns 0 or -errno,
 * with @diag saying why. */
int shm_region_share_group(const struct shm_region *r, gid_t gid, struct shm_diag *diag);

/* Unmaps @r. Does not unlink (see shm_region_unlink). Safe on a zeroed struct. */
void shm_region_detach(struct shm_region *r);

/* Removes the name of a named region. Returns 0 or -errno (-ENOENT if already gone). */
int shm_region_unlink(const char *name);

/* The first byte after the header. */
static inline void *shm_region_body(const struct shm_region *r)
{
	return (char *)r->hdr + SHM_BODY_OFFSET;
}

/* Bytes available after the header. */
static inline size_t shm_region_body_size(const struct shm_region *r)
{
	return r->size - SHM_BODY_OFFSET;
}

/* Bumps the region generation (seq_cst) and returns the new value; used when a
 * region is reset for a new user (a restarted worker). */
uint32_t shm_region_bump_generation(struct shm_region *r);

/* Sets the region state (release). */
void shm_region_set_state(struct shm_region *r, enum shm_state state);

/* True if the region's creator process is still alive. */
bool shm_region_creator_alive(const struct shm_region *r);

/* The live creator of the existing region @name: its pid, or 0 when there is no such
 * region, it is not a chipd region, its creator is dead or not yet recorded. For the
 * message of a create refused with -EEXIST; the answer may be out of date at once. */
pid_t shm_region_holder(const char *name);

/* Builds "/chipd.<uid>.<instance>" into @out. Returns 0, or -EINVAL when @instance is
 * empty, holds a '/' or a character outside [A-Za-z0-9._-], or is too long. */
int shm_region_name(char *out, size_t cap, unsigned uid, const char *instance);

#endif
