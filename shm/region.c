/* region.c - named and anonymous shared regions with a validated header. */
#include "region.h"

#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REGION_MODE	     0600
#define REGION_MODE_READONLY 0400 /* SHM_CREATE_READONLY: only its creator writes */
#define REGION_MODE_SHARED   0440 /* shm_region_share_group: and its group reads */
/* An existing region without a readable creator (crashed between shm_open and
 * writing the header) is treated as abandoned once it is this old. */
#define ABANDONED_AFTER_S 2

int shm_diag_fail(struct shm_diag *diag, int err, const char *fmt, ...)
{
	if (diag) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
		va_end(ap);
	}
	return err;
}

static int check_name(const char *name, struct shm_diag *diag)
{
	size_t len = name ? strnlen(name, SHM_NAME_MAX) : 0;

	if (len < 2 || len >= SHM_NAME_MAX || name[0] != '/' || strchr(name + 1, '/'))
		return shm_diag_fail(diag, -EINVAL,
				     "bad region name '%s': want '/name', under %u bytes",
				     name ? name : "(null)", SHM_NAME_MAX);
	return 0;
}

static int check_size(const char *name, size_t size, struct shm_diag *diag)
{
	if (size < SHM_BODY_OFFSET || size > SHM_REGION_MAX_SIZE)
		return shm_diag_fail(diag, -EINVAL, "%s: size %zu outside [%u, %llu]", name, size,
				     SHM_BODY_OFFSET, SHM_REGION_MAX_SIZE);
	return 0;
}

/* Writes every header field except magic and state, which publish it. */
static void fill_header(struct shm_header *h, enum shm_kind kind, size_t size)
{
	/* The creator's identity goes first: a crash later still leaves a header
	 * that says whose it was, so the region can be reclaimed. */
	h->creator_pid = (uint32_t)getpid();
	h->creator_start = shm_proc_self_start_time();
	h->creator_uid = (uint32_t)geteuid();
	h->layout_version = SHM_LAYOUT_VERSION;
	h->kind = (uint32_t)kind;
	h->size = size;
	atomic_store_explicit(&h->generation, 1, memory_order_relaxed);
	atomic_store_explicit(&h->state, SHM_STATE_CREATING, memory_order_relaxed);
	atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
}

/* Decides what an existing object named @name is. Returns 1 if it is a stale chipd
 * region (creator dead, or abandoned before its header was written), 0 never,
 * -EEXIST if its creator is alive, or another -errno with @diag filled. */
static int inspect_existing(const char *name, struct shm_diag *diag)
{
	struct shm_header h;
	struct stat st;
	int fd, rc;

	/* O_NONBLOCK: a FIFO planted under the name would otherwise block this
	 * read-only open until a writer appears; we want to fstat it and refuse. */
	fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
	if (fd < 0) {
		if (errno == ENOENT)
			return 1; /* gone meanwhile: just retry the create */
		return shm_diag_fail(diag, -errno, "%s exists and cannot be opened: %s", name,
				     strerror(errno));
	}
	if (fstat(fd, &st) != 0) {
		rc = shm_diag_fail(diag, -errno, "%s: fstat: %s", name, strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = shm_diag_fail(diag, -EMEDIUMTYPE, "%s exists and is not a regular file", name);
		goto out_close;
	}
	if (st.st_uid != geteuid()) {
		rc = shm_diag_fail(diag, -EPERM, "%s exists and belongs to uid %u, not %u", name,
				   (unsigned)st.st_uid, (unsigned)geteuid());
		goto out_close;
	}
	memset(&h, 0, sizeof(h));
	if (st.st_size > 0 && pread(fd, &h, sizeof(h), 0) < 0) {
		rc = shm_diag_fail(diag, -errno, "%s: read header: %s", name, strerror(errno));
		goto out_close;
	}
	uint64_t magic = atomic_load_explicit(&h.magic, memory_order_relaxed);
	if (magic != 0 && magic != SHM_MAGIC) {
		rc = shm_diag_fail(diag, -EBADMSG,
				   "%s exists and is not a chipd region (magic %#llx)", name,
				   (unsigned long long)magic);
		goto out_close;
	}
	if (h.creator_pid != 0) {
		if (shm_proc_alive((pid_t)h.creator_pid, h.creator_start))
			rc = shm_diag_fail(diag, -EEXIST, "%s is in use by live pid %u", name,
					   h.creator_pid);
		else
			rc = 1;
		goto out_close;
	}
	/* No creator recorded: being created right now, or abandoned. */
	if (time(NULL) - st.st_ctime >= ABANDONED_AFTER_S)
		rc = 1;
	else
		rc = shm_diag_fail(diag, -EEXIST, "%s is being created by another process", name);
out_close:
	close(fd);
	return rc;
}

int shm_region_create(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
		      unsigned flags, struct shm_diag *diag)
{
	mode_t mode = (flags & SHM_CREATE_READONLY) ? REGION_MODE_READONLY : REGION_MODE;
	int fd, rc;

	memset(r, 0, sizeof(*r));
	rc = check_name(name, diag);
	if (rc)
		return rc;
	rc = check_size(name, size, diag);
	if (rc)
		return rc;

	/* Two tries: the second after reclaiming a stale region. */
	for (int attempt = 0;; attempt++) {
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0)
			break;
		if (errno != EEXIST)
			return shm_diag_fail(diag, -errno, "%s: shm_open: %s", name,
					     strerror(errno));
		rc = inspect_existing(name, diag);
		if (rc < 0)
			return rc;
		if (!(flags & SHM_CREATE_RECLAIM_STALE))
			return shm_diag_fail(
			    diag, -EEXIST,
			    "%s exists (stale: its creator is dead); reclaim it or "
			    "remove /dev/shm%s",
			    name, name);
		if (attempt > 0)
			return shm_diag_fail(diag, -EEXIST, "%s: still exists after reclaiming it",
					     name);
		if (shm_unlink(name) != 0 && errno != ENOENT)
			return shm_diag_fail(diag, -errno, "%s: unlink stale region: %s", name,
					     strerror(errno));
	}

	/* The umask may have cleared bits we asked for, never added any; set the mode
	 * explicitly so it is exactly 0600 (0400). The creating open keeps its write
	 * access whatever the mode says: later opens are checked against the mode. */
	if (fchmod(fd, mode) != 0 || ftruncate(fd, (off_t)size) != 0) {
		rc = shm_diag_fail(diag, -errno, "%s: fchmod/ftruncate: %s", name, strerror(errno));
		goto err_unlink;
	}
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = shm_diag_fail(diag, -errno, "%s: mmap %zu bytes: %s", name, size,
				   strerror(errno));
		goto err_unlink;
	}
	close(fd);

	r->hdr = base;
	r->size = size;
	r->named = true;
	r->created = true;
	snprintf(r->name, sizeof(r->name), "%s", name);
	fill_header(r->hdr, kind, size);
	return 0;

err_unlink:
	close(fd);
	shm_unlink(name);
	return rc;
}

int shm_region_create_anon(struct shm_region *r, enum shm_kind kind, size_t size)
{
	memset(r, 0, sizeof(*r));
	if (size < SHM_BODY_OFFSET || size > SHM_REGION_MAX_SIZE)
		return -EINVAL;
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	r->hdr = base;
	r->size = size;
	r->created = true;
	fill_header(r->hdr, kind, size);
	return 0;
}

void shm_region_ready(struct shm_region *r)
{
	shm_region_set_state(r, SHM_STATE_READY);
}

void shm_region_set_state(struct shm_region *r, enum shm_state state)
{
	atomic_store_explicit(&r->hdr->state, (uint32_t)state, memory_order_release);
}

uint32_t shm_region_bump_generation(struct shm_region *r)
{
	return atomic_fetch_add_explicit(&r->hdr->generation, 1, memory_order_seq_cst) + 1;
}

bool shm_region_creator_alive(const struct shm_region *r)
{
	return shm_proc_alive((pid_t)r->hdr->creator_pid, r->hdr->creator_start);
}

/* Explains an open() failure of a region that @owner should own; EACCES on a region of
 * another user is an owner mismatch (the kernel refuses before we can fstat), or, on
 * the right owner's region, a caller outside the group it is shared with. */
static int open_failed(const char *name, uid_t owner, struct shm_diag *diag)
{
	int err = errno;
	char path[SHM_NAME_MAX + 16];
	struct stat st;

	if (err == ENOENT)
		return shm_diag_fail(diag, -ENOENT, "%s does not exist (is chipd running?)", name);
	if (err == ELOOP)
		return shm_diag_fail(diag, -ELOOP, "%s is a symbolic link; refusing to follow it",
				     name);
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	if (err == EACCES && lstat(path, &st) == 0 && st.st_uid != owner)
		return shm_diag_fail(diag, -EPERM, "%s belongs to uid %u, not to uid %u", name,
				     (unsigned)st.st_uid, (unsigned)owner);
	if (err == EACCES && lstat(path, &st) == 0 && owner != geteuid())
		return shm_diag_fail(
		    diag, -EACCES,
		    (st.st_mode & 0040)
			? "%s (mode %04o, gid %u): uid %u is not in its group (chipd --allow-group)"
			: "%s (mode %04o, gid %u): private to its owner: uid %u may not use it (no "
			  "chipd --allow-group)",
		    name, (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid, (unsigned)geteuid());
	/* A read-write open of a region its creator made read-only (SHM_CREATE_READONLY):
	 * a client built for an older layout, which mapped the node region writable. */
	if (err == EACCES && lstat(path, &st) == 0 && !(st.st_mode & 0200))
		return shm_diag_fail(
		    diag, -EACCES,
		    "%s is read-only (mode %04o): the node uses a newer layout that clients "
		    "map read-only; use the libchipd and chipctl of the running chipd",
		    name, (unsigned)(st.st_mode & 07777));
	return shm_diag_fail(diag, -err, "%s: shm_open: %s", name, strerror(err));
}

/* Checks the object behind @fd before anything of it is mapped: a regular file of
 * @owner with no permission bit for others; read by its group only when @group_read
 * (a read-only attach) and the file is exactly 0440, as shm_region_share_group makes
 * it (read-only to its owner as well), never written by the group. */
static int check_file(int fd, const char *name, uid_t owner, bool group_read, struct stat *st,
		      struct shm_diag *diag)
{
	mode_t foreign;

	if (fstat(fd, st) != 0)
		return shm_diag_fail(diag, -errno, "%s: fstat: %s", name, strerror(errno));
	foreign = group_read && (st->st_mode & 07777) == REGION_MODE_SHARED ? 037 : 077;
	if (!S_ISREG(st->st_mode))
		return shm_diag_fail(diag, -EMEDIUMTYPE, "%s is not a regular file", name);
	if (st->st_uid != owner)
		return shm_diag_fail(diag, -EPERM, "%s belongs to uid %u, not to uid %u", name,
				     (unsigned)st->st_uid, (unsigned)owner);
	if (st->st_mode & foreign)
		return shm_diag_fail(diag, -EACCES, "%s has mode %04o: group/other access, want %s",
				     name, (unsigned)(st->st_mode & 07777),
				     group_read ? "0400, 0600 or 0440" : "0600");
	if (st->st_size < (off_t)SHM_BODY_OFFSET || (uint64_t)st->st_size > SHM_REGION_MAX_SIZE)
		return shm_diag_fail(diag, -EMSGSIZE, "%s: file size %lld outside [%u, %llu]", name,
				     (long long)st->st_size, SHM_BODY_OFFSET, SHM_REGION_MAX_SIZE);
	return 0;
}

/* Checks the mapped header against what the caller expects. */
static int check_header(const struct shm_header *h, const char *name, enum shm_kind kind,
			size_t file_size, size_t want_size, struct shm_diag *diag)
{
	uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);

	if (magic == 0)
		return shm_diag_fail(diag, -EAGAIN, "%s is not initialized yet", name);
	if (magic != SHM_MAGIC)
		return shm_diag_fail(diag, -EBADMSG, "%s: bad magic %#llx, not a chipd region",
				     name, (unsigned long long)magic);
	if (h->layout_version != SHM_LAYOUT_VERSION)
		return shm_diag_fail(
		    diag, -EPROTONOSUPPORT,
		    "%s: layout version %u, this build speaks %u (mixed chipd versions?)", name,
		    h->layout_version, SHM_LAYOUT_VERSION);
	if (h->kind != (uint32_t)kind)
		return shm_diag_fail(diag, -EPROTOTYPE, "%s: region kind %u, expected %u", name,
				     h->kind, (unsigned)kind);
	if (h->size != file_size || (want_size && h->size != want_size))
		return shm_diag_fail(
		    diag, -EMSGSIZE, "%s: header size %llu, file size %zu, expected %zu", name,
		    (unsigned long long)h->size, file_size, want_size ? want_size : file_size);
	uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
	if (state == SHM_STATE_CREATING)
		return shm_diag_fail(diag, -EAGAIN, "%s is still being initialized", name);
	if (state == SHM_STATE_STOPPED)
		return shm_diag_fail(diag, -ESHUTDOWN, "%s: its owner has stopped", name);
	if (state != SHM_STATE_READY && state != SHM_STATE_DRAINING)
		return shm_diag_fail(diag, -EBADMSG, "%s: unknown state %u", name, state);
	if (!shm_proc_alive((pid_t)h->creator_pid, h->creator_start))
		return shm_diag_fail(diag, -ESTALE, "%s is stale: its creator (pid %u) is gone",
				     name, h->creator_pid);
	return 0;
}

/* The attach of shm_region_attach (@writable) and shm_region_attach_ro_as (@owner). */
static int attach(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
		  bool writable, uid_t owner, struct shm_diag *diag)
{
	struct stat st;
	int fd, rc;

	memset(r, 0, sizeof(*r));
	rc = check_name(name, diag);
	if (rc)
		return rc;
	/* O_NONBLOCK: a FIFO planted under the name would block a read-only open (every
	 * client's) until a writer appears, with no bound; check_file refuses it */
	fd = shm_open(name, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
		      0);
	if (fd < 0)
		return open_failed(name, owner, diag);
	rc = check_file(fd, name, owner, !writable, &st, diag);
	if (rc)
		goto out_close;

	size_t file_size = (size_t)st.st_size;
	void *base =
	    mmap(NULL, file_size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = shm_diag_fail(diag, -errno, "%s: mmap: %s", name, strerror(errno));
		goto out_close;
	}
	rc = check_header(base, name, kind, file_size, size, diag);
	if (rc) {
		munmap(base, file_size);
		goto out_close;
	}
	r->hdr = base;
	r->size = file_size;
	r->named = true;
	snprintf(r->name, sizeof(r->name), "%s", name);
out_close:
	close(fd);
	return rc;
}

int shm_region_attach(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
		      struct shm_diag *diag)
{
	return attach(r, name, kind, size, true, geteuid(), diag);
}

int shm_region_attach_ro(struct shm_region *r, const char *name, enum shm_kind kind, size_t size,
			 struct shm_diag *diag)
{
	return attach(r, name, kind, size, false, geteuid(), diag);
}

int shm_region_attach_ro_as(struct shm_region *r, const char *name, enum shm_kind kind,
			    size_t size, uid_t owner, struct shm_diag *diag)
{
	return attach(r, name, kind, size, false, owner, diag);
}

int shm_region_share_group(const struct shm_region *r, gid_t gid, struct shm_diag *diag)
{
	struct stat st;
	int fd, rc = 0;

	if (!r->named || !r->created)
		return shm_diag_fail(diag, -EINVAL, "%s: not a named region of ours", r->name);
	/* O_RDONLY: the mode is 0400 already; fchown and fchmod need ownership, not write
	 * access. The name cannot have moved: /dev/shm is sticky, only we unlink it. */
	fd = shm_open(r->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return shm_diag_fail(diag, -errno, "%s: shm_open: %s", r->name, strerror(errno));
	if (fstat(fd, &st) != 0)
		rc = shm_diag_fail(diag, -errno, "%s: fstat: %s", r->name, strerror(errno));
	else if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (size_t)st.st_size != r->size)
		rc = shm_diag_fail(diag, -EPERM, "%s: no longer the region this process made",
				   r->name);
	else if (fchown(fd, (uid_t)-1, gid) != 0)
		rc = shm_diag_fail(diag, -errno,
				   "%s: cannot give it to group %u: %s (chipd's user must be a "
				   "member of the group)",
				   r->name, (unsigned)gid, strerror(errno));
	else if (fchmod(fd, REGION_MODE_SHARED) != 0)
		rc = shm_diag_fail(diag, -errno, "%s: fchmod %04o: %s", r->name,
				   REGION_MODE_SHARED, strerror(errno));
	close(fd);
	return rc;
}

void shm_region_detach(struct shm_region *r)
{
	if (r->hdr)
		munmap(r->hdr, r->size);
	r->hdr = NULL;
	r->size = 0;
}

int shm_region_unlink(const char *name)
{
	return shm_unlink(name) == 0 ? 0 : -errno;
}

pid_t shm_region_holder(const char *name)
{
	struct shm_header h;
	pid_t pid = 0;
	int fd;

	/* read-only and O_NONBLOCK for the reasons of inspect_existing */
	fd = shm_open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	memset(&h, 0, sizeof(h));
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
	    atomic_load_explicit(&h.magic, memory_order_relaxed) == SHM_MAGIC &&
	    h.creator_pid != 0 && shm_proc_alive((pid_t)h.creator_pid, h.creator_start))
		pid = (pid_t)h.creator_pid;
	close(fd);
	return pid;
}

int shm_region_name(char *out, size_t cap, unsigned uid, const char *instance)
{
	size_t len = instance ? strlen(instance) : 0;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = instance[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		if (!ok)
			return -EINVAL;
	}
	int n = snprintf(out, cap, "/chipd.%u.%s", uid, instance);
	return n < 0 || (size_t)n >= cap || (size_t)n >= SHM_NAME_MAX ? -EINVAL : 0;
}
