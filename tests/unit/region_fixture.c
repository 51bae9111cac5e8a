/* region_fixture.c - shared steps of the check_region suites (region_fixture.h). */
#include "region_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The path of @name under the tmpfs that backs shm_open on Linux. */
void shm_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "/dev/shm%s", name);
}

/* Creates and readies a test region called after @tag; @name receives its name. */
void make_ready(struct shm_region *r, char *name, size_t cap, const char *tag)
{
	struct shm_diag diag = {0};

	tu_region_name(name, cap, tag);
	ck_assert_msg(shm_region_create(r, name, SHM_KIND_TEST, REGION_SIZE, 0, &diag) == 0,
		      "create %s: %s", name, diag.msg);
	shm_region_ready(r);
}

/* Asserts that attaching @name fails with @err and says why. */
void expect_attach_fails(const char *name, enum shm_kind kind, size_t size, int err)
{
	struct shm_region r;
	struct shm_diag diag = {0};

	memset(&r, 0xa5, sizeof(r));
	int rc = shm_region_attach(&r, name, kind, size, &diag);

	ck_assert_msg(rc == err, "attach %s: got %d (%s), want %d", name, rc, diag.msg, err);
	ck_assert_msg(diag.msg[0] != '\0', "attach %s failed with %d but said nothing", name, rc);
	ck_assert_ptr_null(r.hdr); /* nothing stays mapped */
	/* Failing without a diag is fine too. */
	ck_assert_int_eq(shm_region_attach(&r, name, kind, size, NULL), err);
}

mode_t mode_of(const char *name)
{
	char path[SHM_NAME_MAX + 16];
	struct stat st;

	shm_path(path, sizeof(path), name);
	ck_assert_int_eq(lstat(path, &st), 0);
	return st.st_mode & 07777;
}
