/* region_fixture.h - shared steps of the check_region suites. */
#ifndef CHIPD_REGION_FIXTURE_H
#define CHIPD_REGION_FIXTURE_H

#include "region.h"

#include <check.h>
#include <stddef.h>
#include <sys/types.h>

#define REGION_SIZE	4096u
#define PEER_TIMEOUT_MS 5000u
/* How long a call that must not block may take before we call it hung: well inside
 * Check's default 4 s tcase timeout. */
#define HANG_TIMEOUT_MS 2000u
/* A uid that owns nothing on a test machine. */
#define FOREIGN_UID 12345

/* The path of @name under the tmpfs that backs shm_open on Linux. */
void shm_path(char *out, size_t cap, const char *name);

/* Creates and readies a test region called after @tag; @name receives its name. */
void make_ready(struct shm_region *r, char *name, size_t cap, const char *tag);

/* Asserts that attaching @name fails with @err, says why and maps nothing. */
void expect_attach_fails(const char *name, enum shm_kind kind, size_t size, int err);

/* Permission bits of the object behind @name. */
mode_t mode_of(const char *name);

/* Adds the tcases about live and stale regions, reclaim, fork sharing, names and
 * generations (region_lifecycle.c). */
void region_add_lifecycle_tcases(Suite *s);

#endif
