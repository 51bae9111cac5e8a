/* register_fixture.c - see register_fixture.h. */
#include "register_fixture.h"

#include <check.h>
#include <stdio.h>
#include <time.h>

#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif

char rf_dir[128];

void rf_setup(void)
{
	cd_callables_dir(rf_dir, sizeof(rf_dir), "reg", CL_TEST_DIR, "tc_*.so");
}

void rf_teardown(void)
{
	cd_remove_dir(rf_dir);
}

const char *rf_cl(const char *variant)
{
	static char path[4][256];
	static int next;
	char *p = path[next++ % 4];

	snprintf(p, 256, "%s/%s.so", rf_dir, variant);
	return p;
}

int rf_reg(struct cd *d, const char *path, const char *name, struct chipd_error *err)
{
	char got[CHIPD_NAME_MAX];
	uint32_t version = 0;
	int rc = chipd_register(d->conn, path, name, CD_CALL_MS * 2, got, &version, err);

	if (rc == 0) {
		ck_assert_str_eq(got, name ? name : "tiny");
		ck_assert_uint_eq(version, 3);
	}
	return rc;
}

uint64_t rf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

chipd_stream *rf_submit(struct cd *d, const char *name, int32_t chip, int64_t tokens,
			int64_t seed, int64_t step_us, struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"seed", seed}, {"step_us", step_us}};
	chipd_stream *s = NULL;

	return cd_submit_to(d, name, chip, p, 3, &s, err) == 0 ? s : NULL;
}
