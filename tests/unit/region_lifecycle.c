/* region_lifecycle.c - pins live and stale regions: create refuses a live one,
 * reclaims a stale one, attach refuses a dead creator; fork sharing, names,
 * generations. */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int create_and_die(void *arg)
{
	struct shm_region r;
	struct shm_diag diag = {0};

	if (shm_region_create(&r, arg, SHM_KIND_TEST, REGION_SIZE, 0, &diag) != 0)
		return 1;
	memcpy(shm_region_body(&r), "old", 4);
	shm_region_ready(&r);
	return 0;
}

/* Leaves behind a READY region whose creator (a reaped child) is dead. */
static pid_t make_stale(char *name, size_t cap, const char *tag)
{
	tu_region_name(name, cap, tag);
	pid_t child = tu_fork(create_and_die, name);

	ck_assert_int_eq(tu_wait(child, PEER_TIMEOUT_MS), 0);
	return child;
}

START_TEST(attach_refuses_dead_creator)
{
	char name[SHM_NAME_MAX];

	make_stale(name, sizeof(name), "stale");
	expect_attach_fails(name, SHM_KIND_TEST, REGION_SIZE, -ESTALE);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

/* Child: tries to create the region named @arg; exits with -rc (0 on success). */
static int try_create(void *arg)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	int rc =
	    shm_region_create(&r, arg, SHM_KIND_TEST, REGION_SIZE, SHM_CREATE_RECLAIM_STALE, &diag);

	if (rc == 0)
		shm_region_unlink(arg);
	return rc < 0 && diag.msg[0] ? -rc : rc == 0 ? 0 : 255;
}

START_TEST(create_refuses_live_region)
{
	struct shm_region r, c;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];

	make_ready(&r, name, sizeof(name), "live");
	memcpy(shm_region_body(&r), "mine", 5);
	ck_assert_int_eq(shm_region_create(&c, name, SHM_KIND_TEST, REGION_SIZE, 0, &diag),
			 -EEXIST);
	ck_assert_str_ne(diag.msg, "");
	diag.msg[0] = '\0';
	ck_assert_int_eq(shm_region_create(&c, name, SHM_KIND_TEST, REGION_SIZE,
					   SHM_CREATE_RECLAIM_STALE, &diag),
			 -EEXIST);
	ck_assert_str_ne(diag.msg, "");
	/* Another process is refused too, even asking to reclaim. */
	ck_assert_int_eq(tu_wait(tu_fork(try_create, name), PEER_TIMEOUT_MS), EEXIST);
	/* And the live region is untouched. */
	struct shm_region a;
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	ck_assert_str_eq(shm_region_body(&a), "mine");
	ck_assert_uint_eq(a.hdr->creator_pid, (uint32_t)getpid());
	shm_region_detach(&a);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(create_reclaims_stale_region)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];
	pid_t dead = make_stale(name, sizeof(name), "reclaim");

	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE,
					   SHM_CREATE_RECLAIM_STALE, &diag),
			 0);
	ck_assert_uint_eq(r.hdr->creator_pid, (uint32_t)getpid());
	ck_assert_uint_ne(r.hdr->creator_pid, (uint32_t)dead);
	ck_assert_uint_eq(r.hdr->creator_start, shm_proc_self_start_time());
	ck_assert_uint_eq(atomic_load(&r.hdr->state), SHM_STATE_CREATING);
	ck_assert_str_eq(shm_region_body(&r), ""); /* a new region, not the old body */
	ck_assert_int_eq(mode_of(name), 0600);
	shm_region_ready(&r);
	struct shm_region a;
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	shm_region_detach(&a);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(create_refuses_stale_region_without_reclaim)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];
	pid_t dead = make_stale(name, sizeof(name), "noreclaim");

	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE, 0, &diag),
			 -EEXIST);
	ck_assert_ptr_nonnull(strstr(diag.msg, "stale"));
	ck_assert_ptr_null(r.hdr);
	/* Still the dead child's region. */
	char path[SHM_NAME_MAX + 16];
	struct shm_header h;
	shm_path(path, sizeof(path), name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_uint_eq(h.creator_pid, (uint32_t)dead);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(create_refuses_foreign_object)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];
	static const char junk[SHM_BODY_OFFSET] = "not a chipd region, just bytes";

	tu_region_name(name, sizeof(name), "foreign");
	shm_path(path, sizeof(path), name);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE,
					   SHM_CREATE_RECLAIM_STALE, &diag),
			 -EBADMSG);
	ck_assert_str_ne(diag.msg, "");
	expect_attach_fails(name, SHM_KIND_TEST, 0, -EBADMSG);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(create_refuses_region_being_created)
{
	struct shm_region r;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX], path[SHM_NAME_MAX + 16];

	/* Just opened by another creator, header not written yet: not stale (yet). */
	tu_region_name(name, sizeof(name), "fresh");
	shm_path(path, sizeof(path), name);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, REGION_SIZE,
					   SHM_CREATE_RECLAIM_STALE, &diag),
			 -EEXIST);
	ck_assert_str_ne(diag.msg, "");
	expect_attach_fails(name, SHM_KIND_TEST, 0, -EMSGSIZE);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

START_TEST(create_refuses_bad_name_or_size)
{
	static const char *const bad_names[] = {
	    "",
	    "/",
	    "noslash",
	    "/a/b",
	    "//",
	    "/chipd/x",
	    "/0123456789012345678901234567890123456789012345678901234567890123",
	};
	struct shm_region r;
	struct shm_diag diag;

	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		diag.msg[0] = '\0';
		ck_assert_msg(shm_region_create(&r, bad_names[i], SHM_KIND_TEST, REGION_SIZE, 0,
						&diag) == -EINVAL,
			      "create '%s' was not refused", bad_names[i]);
		ck_assert_str_ne(diag.msg, "");
		diag.msg[0] = '\0';
		ck_assert_int_eq(shm_region_attach(&r, bad_names[i], SHM_KIND_TEST, 0, &diag),
				 -EINVAL);
		ck_assert_str_ne(diag.msg, "");
	}
	diag.msg[0] = '\0';
	ck_assert_int_eq(shm_region_create(&r, NULL, SHM_KIND_TEST, REGION_SIZE, 0, &diag),
			 -EINVAL);
	ck_assert_str_ne(diag.msg, "");

	static const size_t bad_sizes[] = {0, 1, SHM_BODY_OFFSET - 1, SHM_REGION_MAX_SIZE + 1,
					   SIZE_MAX};
	char name[SHM_NAME_MAX];
	tu_region_name(name, sizeof(name), "badsize");
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		diag.msg[0] = '\0';
		ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, bad_sizes[i], 0, &diag),
				 -EINVAL);
		ck_assert_str_ne(diag.msg, "");
	}
	/* Nothing was left behind by the refusals. */
	ck_assert_int_eq(shm_region_unlink(name), -ENOENT);
	/* The smallest region, a bare header, is fine. */
	ck_assert_int_eq(shm_region_create(&r, name, SHM_KIND_TEST, SHM_BODY_OFFSET, 0, &diag), 0);
	ck_assert_uint_eq(shm_region_body_size(&r), 0);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);
}
END_TEST

/* Child: checks what the parent put in the anonymous region, then answers. */
static int anon_child(void *arg)
{
	struct shm_region *r = arg;
	char *body = shm_region_body(r);

	if (atomic_load(&r->hdr->state) != SHM_STATE_READY || strcmp(body, "from parent") != 0)
		return 1;
	strcpy(body + 64, "from child");
	return 0;
}

START_TEST(anon_region_shared_across_fork)
{
	struct shm_region r;

	ck_assert_int_eq(shm_region_create_anon(&r, SHM_KIND_CONTROL, 2 * REGION_SIZE), 0);
	ck_assert(!r.named);
	ck_assert(r.created);
	ck_assert_uint_eq(atomic_load(&r.hdr->magic), SHM_MAGIC);
	ck_assert_uint_eq(r.hdr->kind, SHM_KIND_CONTROL);
	ck_assert_uint_eq(r.hdr->size, 2 * REGION_SIZE);
	ck_assert_uint_eq(r.hdr->creator_pid, (uint32_t)getpid());
	ck_assert_uint_eq(atomic_load(&r.hdr->state), SHM_STATE_CREATING);
	strcpy(shm_region_body(&r), "from parent");
	shm_region_ready(&r);

	ck_assert_int_eq(tu_wait(tu_fork(anon_child, &r), PEER_TIMEOUT_MS), 0);
	ck_assert_str_eq((char *)shm_region_body(&r) + 64, "from child");
	shm_region_detach(&r);

	ck_assert_int_eq(shm_region_create_anon(&r, SHM_KIND_CONTROL, SHM_BODY_OFFSET - 1),
			 -EINVAL);
	ck_assert_int_eq(shm_region_create_anon(&r, SHM_KIND_CONTROL, SHM_REGION_MAX_SIZE + 1),
			 -EINVAL);
}
END_TEST

START_TEST(region_name_validates_instance)
{
	static const char *const bad[] = {"",	"a/b",	       "/",    "a b",  "job\n",
					  "x*", "caf\xc3\xa9", "a\\b", "$HOME"};
	char out[SHM_NAME_MAX];

	ck_assert_int_eq(shm_region_name(out, sizeof(out), 1000, "default"), 0);
	ck_assert_str_eq(out, "/chipd.1000.default");
	ck_assert_int_eq(shm_region_name(out, sizeof(out), 0, "12345"), 0);
	ck_assert_str_eq(out, "/chipd.0.12345");
	ck_assert_int_eq(shm_region_name(out, sizeof(out), 7, "Job_1.a-B"), 0);
	ck_assert_str_eq(out, "/chipd.7.Job_1.a-B");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(shm_region_name(out, sizeof(out), 0, bad[i]) == -EINVAL,
			      "instance '%s' was accepted", bad[i]);
	ck_assert_int_eq(shm_region_name(out, sizeof(out), 0, NULL), -EINVAL);

	/* "/chipd.0." is 9 bytes: 54 more make the longest name SHM_NAME_MAX allows. */
	char inst[SHM_NAME_MAX + 8];
	memset(inst, 'x', 54);
	inst[54] = '\0';
	ck_assert_int_eq(shm_region_name(out, sizeof(out), 0, inst), 0);
	ck_assert_uint_eq(strlen(out), SHM_NAME_MAX - 1);
	inst[54] = 'x';
	inst[55] = '\0';
	ck_assert_int_eq(shm_region_name(out, sizeof(out), 0, inst), -EINVAL);
	/* A buffer too small is refused, never silently truncated. */
	ck_assert_int_eq(shm_region_name(out, 10, 1000, "default"), -EINVAL);
	/* What it builds passes the region name check (nothing by that name exists). */
	struct shm_region r;
	struct shm_diag diag = {0};
	ck_assert_int_eq(shm_region_name(out, sizeof(out), 0, "no-such-instance"), 0);
	ck_assert_int_eq(shm_region_attach(&r, out, SHM_KIND_TEST, 0, &diag), -ENOENT);
}
END_TEST

START_TEST(bump_generation_visible_to_attachers)
{
	struct shm_region r, a;
	struct shm_diag diag = {0};
	char name[SHM_NAME_MAX];

	make_ready(&r, name, sizeof(name), "gen");
	ck_assert_int_eq(shm_region_attach(&a, name, SHM_KIND_TEST, REGION_SIZE, &diag), 0);
	ck_assert_uint_eq(atomic_load(&a.hdr->generation), 1);
	ck_assert_uint_eq(shm_region_bump_generation(&r), 2);
	ck_assert_uint_eq(shm_region_bump_generation(&r), 3);
	ck_assert_uint_eq(atomic_load(&a.hdr->generation), 3);
	ck_assert_uint_eq(shm_region_bump_generation(&a), 4);
	ck_assert_uint_eq(atomic_load(&r.hdr->generation), 4);
	shm_region_detach(&a);
	shm_region_detach(&r);
	ck_assert_int_eq(shm_region_unlink(name), 0);

	/* Anonymous regions too (a restarted worker's control region). */
	ck_assert_int_eq(shm_region_create_anon(&r, SHM_KIND_CONTROL, REGION_SIZE), 0);
	ck_assert_uint_eq(shm_region_bump_generation(&r), 2);
	shm_region_detach(&r);
}
END_TEST

void region_add_lifecycle_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"attach_refuses_dead_creator", attach_refuses_dead_creator},
	    {"create_refuses_live_region", create_refuses_live_region},
	    {"create_reclaims_stale_region", create_reclaims_stale_region},
	    {"create_refuses_stale_region_without_reclaim",
	     create_refuses_stale_region_without_reclaim},
	    {"create_refuses_foreign_object", create_refuses_foreign_object},
	    {"create_refuses_region_being_created", create_refuses_region_being_created},
	    {"create_refuses_bad_name_or_size", create_refuses_bad_name_or_size},
	    {"anon_region_shared_across_fork", anon_region_shared_across_fork},
	    {"region_name_validates_instance", region_name_validates_instance},
	    {"bump_generation_visible_to_attachers", bump_generation_visible_to_attachers},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
