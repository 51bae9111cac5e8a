/* check_region.c - pins region creation (header layout, mode) and every attach check.
 * Live/stale regions and reclaim are in region_lifecycle.c. */
#include "proc.h"
#include "region_fixture.h"
#include "testutil.h"
#include "wait.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(create_writes_documented_header)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];

	tu_region_name(name, sizeof(name), "hdr");
	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE, 0, &diag), 0);
	ck_assert(r.named);
	ck_assert(r.created);
	ck_assert_str_eq(r.name, name);
	ck_assert_uint_eq(r.size, REGION_SIZE);

	const struct shm_header *h = r.hdr;
	const unsigned char *raw = (const unsigned char *)r.hdr;
	uint64_t u64;
	uint32_t u32;

	ck_assert_uint_eq(atomic_load(&h->magic), SHM_MAGIC);
	ck_assert_mem_eq(raw, "CHIPDSHM", 8); /* offset 0, little-endian */
	memcpy(&u32, raw + 8, 4);
	ck_assert_uint_eq(u32, SHM_LAYOUT_VERSION);
	memcpy(&u32, raw + 12, 4);
	ck_assert_uint_eq(u32, SHM_KIND_TEST);
	memcpy(&u64, raw + 16, 8);
	ck_assert_uint_eq(u64, REGION_SIZE);
	memcpy(&u32, raw + 24, 4);
	ck_assert_uint_eq(u32, geteuid());
	memcpy(&u32, raw + 28, 4);
	ck_assert_uint_eq(u32, (uint32_t)getpid());
	memcpy(&u64, raw + 32, 8);
	ck_assert_uint_ne(u64, 0);
	ck_assert_uint_eq(u64, shm_proc_self_start_time());
	memcpy(&u32, raw + 40, 4);
	ck_assert_uint_eq(u32, 1);
	memcpy(&u32, raw + 44, 4);
	ck_assert_uint_eq(u32, SHM_STATE_CREATING);
	for (size_t i = 48; i < REGION_SIZE; i++)
		ck_assert_msg(raw[i] == 0, "byte %zu is %#x, want 0", i, raw[i]);
	ck_assert_ptr_eq(shm_region_body(&r), raw + SHM_BODY_OFFSET);
	ck_assert_uint_eq(shm_region_body_size(&r), REGION_SIZE - SHM_BODY_OFFSET);
	ck_assert(shm_region_creator_alive(&r));

	shm_region_ready(&r);
	ck_assert_uint_eq(atomic_load(&h->state), SHM_STATE_READY);
	shm_region_detach(&r);
	ck_assert_ptr_null(r.hdr);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

static void check_mode_under_umask(mode_t mask)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];
	mode_t old = umask(mask);

	tu_region_name(name, sizeof(name), "mode");
	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE, 0, &diag), 0);
	umask(old);
	mode_t mode = mode_of(name);
	if (mode != 0600)
		shm_region_unlink(name); /* leave nothing behind in /dev/shm */
	ck_assert_msg(mode == 0600, "umask %03o: mode %04o, want 0600", (unsigned)mask,
		      (unsigned)mode);
	shm_region_ready(&r);
	shm_region_detach(&r);
	/* And a region of that mode attaches. */
	ck_assert_int_eq(shm_region_attach(&r, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}

START_TEST(create_mode_exactly_0600)
{
	check_mode_under_umask(0);    /* permissive: must not add group/other bits */
	check_mode_under_umask(0777); /* restrictive: must still give the owner rw */
}
END_TEST

START_TEST(attach_sees_creator_header_and_body)
{
	struct shm_region r, a;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];

	make_ready(&r, name, sizeof(name), "attach");
	memcpy(shm_region_body(&r), "hello", 6);
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	ck_assert_ptr_ne(a.hdr, r.hdr); /* a second mapping of the same memory */
	ck_assert(a.named);
	ck_assert(!a.created);
	ck_assert_str_eq(a.name, name);
	ck_assert_uint_eq(a.size, REGION_SIZE);
	ck_assert_uint_eq(a.hdr->creator_pid, (uint32_t)getpid());
	ck_assert_str_eq(shm_region_body(&a), "hello");
	memcpy(shm_region_body(&a), "world", 6);
	ck_assert_str_eq(shm_region_body(&r), "world");
	/* Size 0 means "whatever the header says". */
	shm_region_detach(&a);
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, 0, &diag), 0);
	ck_assert_uint_eq(a.size, REGION_SIZE);
	/* DRAINING still attaches: clients may finish what they started. */
	shm_region_detach(&a);
	shm_region_set_state(&r, SHM_STATE_DRAINING);
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	shm_region_detach(&a);
	shm_region_detach(&a); /* twice is harmless */
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
	ck_assert_int_eq(shm_region_unlink(name), -ENOENT);
}
END_TEST

START_TEST(detach_zeroed_region_is_safe)
{
	struct shm_region r;

	memset(&r, 0, sizeof(r));
	shm_region_detach(&r);
	ck_assert_ptr_null(r.hdr);
}
END_TEST

START_TEST(attach_refuses_missing)
{
	char name[SHM_NAME_MAX];

	tu_region_name(name, sizeof(name), "missing");
	expect_attach_fails(name, SHM_KIND_TEST, 0, -ENOENT);
}
END_TEST

START_TEST(attach_refuses_symlink)
{
	struct shm_region r;
	char target[SHM_NAME_MAX], link[SHM_NAME_MAX];
	char tpath[SHM_NAME_MAX + 16], lpath[SHM_NAME_MAX + 16];
	struct shm_diag diag = {0};

	make_ready(&r, target, sizeof(target), "target");
	tu_region_name(link, sizeof(link), "link");
	shm_path(tpath, sizeof(tpath), target);
	shm_path(lpath, sizeof(lpath), link);
	ck_assert_int_eq(symlink(tpath, lpath), 0);

	expect_attach_fails(link, SHM_KIND_TEST, 0, -ELOOP);
	/* Nor does create follow it or replace it, even when asked to reclaim. */
	struct shm_region c;
	int rc = shm_region_create(&c, link, SHM_KIND_TEST, REGION_SIZE, SHM_CREATE_RECLAIM_STALE,
				   &diag);
	ck_assert_msg(rc == -ELOOP, "create over a symlink: %d (%s)", rc, diag.msg);
	ck_assert_str_ne(diag.msg, "");
	struct stat st;
	ck_assert_int_eq(lstat(lpath, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_uint_eq(r.hdr->creator_pid, (uint32_t)getpid());

	ck_assert_int_eq(unlink(lpath), 0);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(target), 0);
}
END_TEST

/* Child: tries to create a region where a FIFO sits; exits with -rc. */
static int create_over_fifo(void *arg)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	int rc =
	    shm_region_create(&r, arg, SHM_KIND_TEST, REGION_SIZE, SHM_CREATE_RECLAIM_STALE, &diag);

	return rc < 0 && diag.msg[0] ? -rc : 255;
}

/* Child: attaches read-only (as every client attaches the node region) where a FIFO
 * sits; exits with -rc. */
static int attach_ro_over_fifo(void *arg)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	int rc = shm_region_attach_ro(&r, arg, SHM_KIND_TEST, 0, &diag);

	return rc < 0 && diag.msg[0] ? -rc : 255;
}

START_TEST(attach_refuses_fifo)
{
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];

	tu_region_name(name, sizeof(name), "fifo");
	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(mkfifo(path, 0600), 0);

	expect_attach_fails(name, SHM_KIND_TEST, 0, -EMEDIUMTYPE);
	/* Create must refuse it too, without blocking in open() on a FIFO that has no
	 * writer: run it in a child so a hang shows up as a failure, not a timeout. */
	pid_t child = tu_fork(create_over_fifo, name);
	int status = tu_wait(child, HANG_TIMEOUT_MS);

	ck_assert_msg(status != -1, "create over a FIFO hung");
	ck_assert_int_eq(status, EMEDIUMTYPE);
	/* A read-only open of a FIFO waits for a writer too: a client's attach (it maps
	 * the node region read-only) must refuse it, not hang in open() unbounded. */
	child = tu_fork(attach_ro_over_fifo, name);
	status = tu_wait(child, HANG_TIMEOUT_MS);
	ck_assert_msg(status != -1, "a read-only attach of a FIFO hung");
	ck_assert_int_eq(status, EMEDIUMTYPE);
	ck_assert_int_eq(unlink(path), 0);
}
END_TEST

START_TEST(attach_refuses_wrong_owner)
{
	struct shm_region r;
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];

	if (geteuid() != 0) {
		fprintf(stderr, "attach_refuses_wrong_owner: skipped, needs root to chown\n");
		return;
	}
	make_ready(&r, name, sizeof(name), "owner");
	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(chown(path, FOREIGN_UID, (gid_t)-1), 0);

	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE, -EPERM);
	/* Create must not reclaim someone else's region either. */
	struct shm_region c;
	struct shm_diag diag = {0};
	ck_assert_int_eq(shm_region_create(&c, name, SHM_KIND_TEST, REGION_SIZE,
					   SHM_CREATE_RECLAIM_STALE, &diag),
			 -EPERM);
	ck_assert_str_ne(diag.msg, "");

	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(attach_refuses_group_other_bits)
{
	static const mode_t bad[] = {0640, 0604, 0610, 0601, 0660, 0666};
	struct shm_region r;
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];

	make_ready(&r, name, sizeof(name), "perm");
	shm_path(path, sizeof(path), name);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(chmod(path, bad[i]), 0);
		expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE, -EACCES);
	}
	ck_assert_int_eq(chmod(path, 0600), 0);
	struct shm_diag diag = {0};
	struct shm_region a;
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	shm_region_detach(&a);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

/* --allow-group: a read-only region opened to a group is 0440 of that group; a
 * read-only attach of its owner's region accepts it, never group write or any bit for
 * others, and never another owner; a read-write attach refuses it. */
START_TEST(share_group_reads_only)
{
	static const mode_t bad[] = {0460, 0444, 0450, 0441, 0640, 0460};
	struct shm_region r, a;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];
	struct stat st;

	tu_region_name(name, sizeof(name), "share");
	ck_assert_msg(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE,
					SHM_CREATE_READONLY, &diag) == 0,
		      "%s", diag.msg);
	shm_region_ready(&r);
	ck_assert_msg(shm_region_share_group(&r, getegid(), &diag) == 0, "%s", diag.msg);
	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0440);
	ck_assert_uint_eq(st.st_gid, getegid());
	ck_assert_msg(shm_region_attach_ro_as(&a, name, SHM_KIND_TEST, REGION_SIZE, geteuid(),
					      &diag) == 0,
		      "%s", diag.msg);
	ck_assert_int_eq(a.hdr->creator_pid, getpid());
	shm_region_detach(&a);
	ck_assert_int_eq(shm_region_attach_ro(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	shm_region_detach(&a);
	/* the read-write attach: refused (by the kernel, or for root by the mode check) */
	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE, -EACCES);
	ck_assert_int_eq(shm_region_attach_ro_as(&a, name, SHM_KIND_TEST, REGION_SIZE,
						 FOREIGN_UID, &diag),
			 -EPERM);
	ck_assert_msg(strstr(diag.msg, "not to uid 12345"), "%s", diag.msg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(chmod(path, bad[i]), 0);
		ck_assert_int_eq(shm_region_attach_ro_as(&a, name, SHM_KIND_TEST, REGION_SIZE,
							 geteuid(), &diag),
				 -EACCES);
	}
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
	/* only a named region this process made can be shared */
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(shm_region_share_group(&a, getegid(), &diag), -EINVAL);
}
END_TEST

static void truncate_region(const char *name, off_t size)
{
	char path[SHM_NAME_MAX + 16];

	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(truncate(path, size), 0);
}

START_TEST(attach_refuses_wrong_size)
{
	struct shm_region r;
	char name[SHM_NAME_MAX];

	make_ready(&r, name, sizeof(name), "size");
	/* The caller expects another size. */
	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE * 2, -EMSGSIZE);
	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE - 1, -EMSGSIZE);
	/* The file grew past what the header says. */
	truncate_region(name, REGION_SIZE * 2);
	expect_attach_fails(name, SHM_KIND_TEST, 0, -EMSGSIZE);
	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE * 2, -EMSGSIZE);
	/* Beyond the bound: refused before anything is mapped (tmpfs keeps it sparse). */
	truncate_region(name, (off_t)SHM_REGION_MAX_SIZE + 4096);
	expect_attach_fails(name, SHM_KIND_TEST, 0, -EMSGSIZE);
	shm_region_detach(&r); /* its mapping is now shorter than the file: drop it first */
	/* Shorter than a header. */
	truncate_region(name, SHM_BODY_OFFSET - 1);
	expect_attach_fails(name, SHM_KIND_TEST, 0, -EMSGSIZE);
	truncate_region(name, 0);
	expect_attach_fails(name, SHM_KIND_TEST, 0, -EMSGSIZE);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

/* A header field that lies, how attach must refuse it. */
struct corrupt_case {
	const char *tag;
	void (*corrupt)(struct shm_header *h);
	enum shm_kind kind; /* what the attacher expects */
	size_t size;	    /* what the attacher expects (0: anything) */
	int err;
};

static void magic_flipped(struct shm_header *h)
{
	atomic_store(&h->magic, SHM_MAGIC ^ 1);
}

static void magic_zero(struct shm_header *h)
{
	atomic_store(&h->magic, 0);
}

static void version_next(struct shm_header *h)
{
	h->layout_version = SHM_LAYOUT_VERSION + 1;
}

static void version_zero(struct shm_header *h)
{
	h->layout_version = 0;
}

static void untouched(struct shm_header *h)
{
	(void)h;
}

static void size_halved(struct shm_header *h)
{
	h->size = REGION_SIZE / 2; /* a header that lies about the file */
}

static void state_stopped(struct shm_header *h)
{
	atomic_store(&h->state, SHM_STATE_STOPPED);
}

static void state_zero(struct shm_header *h)
{
	atomic_store(&h->state, 0);
}

static void state_unknown(struct shm_header *h)
{
	atomic_store(&h->state, 99);
}

static const struct corrupt_case corrupt_cases[] = {
    {"magic", magic_flipped, SHM_KIND_TEST, REGION_SIZE, -EBADMSG},
    {"magic0", magic_zero, SHM_KIND_TEST, REGION_SIZE, -EAGAIN},
    {"version", version_next, SHM_KIND_TEST, REGION_SIZE, -EPROTONOSUPPORT},
    {"version0", version_zero, SHM_KIND_TEST, REGION_SIZE, -EPROTONOSUPPORT},
    {"kind", untouched, SHM_KIND_NODE, REGION_SIZE, -EPROTOTYPE},
    {"kind2", untouched, SHM_KIND_BENCH, REGION_SIZE, -EPROTOTYPE},
    {"hsize", size_halved, SHM_KIND_TEST, 0, -EMSGSIZE},
    {"hsize2", size_halved, SHM_KIND_TEST, REGION_SIZE, -EMSGSIZE},
    {"stopped", state_stopped, SHM_KIND_TEST, REGION_SIZE, -ESHUTDOWN},
    {"state0", state_zero, SHM_KIND_TEST, REGION_SIZE, -EBADMSG},
    {"state99", state_unknown, SHM_KIND_TEST, REGION_SIZE, -EBADMSG},
};

/* One row of corrupt_cases per loop iteration (_i). */
START_TEST(attach_refuses_corrupt_header)
{
	const struct corrupt_case *c = &corrupt_cases[_i];
	struct shm_region r;
	char name[SHM_NAME_MAX];

	make_ready(&r, name, sizeof(name), c->tag);
	c->corrupt(r.hdr);
	expect_attach_fails(name, c->kind, c->size, c->err);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(attach_refuses_creating)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];

	tu_region_name(name, sizeof(name), "creating");
	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE, 0, &diag), 0);
	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE, -EAGAIN);
	shm_region_ready(&r);
	struct shm_region a;
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	shm_region_detach(&a);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

/* Child: creates and readies the region named @arg, then exits without unlinking. */
static Suite *region_suite(void)
{
	Suite *s = suite_create("region");
	const struct tu_case cases[] = {
	    {"create_writes_documented_header", create_writes_documented_header},
	    {"create_mode_exactly_0600", create_mode_exactly_0600},
	    {"attach_sees_creator_header_and_body", attach_sees_creator_header_and_body},
	    {"detach_zeroed_region_is_safe", detach_zeroed_region_is_safe},
	    {"attach_refuses_missing", attach_refuses_missing},
	    {"attach_refuses_symlink", attach_refuses_symlink},
	    {"attach_refuses_fifo", attach_refuses_fifo},
	    {"attach_refuses_wrong_owner", attach_refuses_wrong_owner},
	    {"attach_refuses_group_other_bits", attach_refuses_group_other_bits},
	    {"share_group_reads_only", share_group_reads_only},
	    {"attach_refuses_wrong_size", attach_refuses_wrong_size},
	    {"attach_refuses_creating", attach_refuses_creating},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	region_add_lifecycle_tcases(s);
	TCase *tc = tcase_create("attach_refuses_corrupt_header");
	tcase_add_loop_test(tc, attach_refuses_corrupt_header, 0,
			    (int)(sizeof(corrupt_cases) / sizeof(corrupt_cases[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(region_suite());
}
