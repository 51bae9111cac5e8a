/* register_fixture.h - what the suites of callables registered while the node runs
 * (check_register, check_unregister) share: a private directory of the tests'
 * callables, registering one of them, and submits of the tests' "tiny". */
#ifndef REGISTER_FIXTURE_H
#define REGISTER_FIXTURE_H

#include "chipd_fixture.h"

#include <stdint.h>

#define BOUND_MS 20000u /* a restart, a drain: generous on a loaded machine */

/* The test's directory of callables (rf_setup). */
extern char rf_dir[128];

/* A private directory with the tests' callables copied in (mode 0755); removed by
 * rf_teardown. */
void rf_setup(void);
void rf_teardown(void);
/* The path of callable @variant ("tc_good") in rf_dir; four calls' results live at once. */
const char *rf_cl(const char *variant);
/* Registers @path as @name (NULL: its table's, "tiny"); on success asserts the name
 * and version 3. Returns chipd_register's result. */
int rf_reg(struct cd *d, const char *path, const char *name, struct chipd_error *err);
uint64_t rf_now_ns(void);
/* Submits @name (tokens, seed, step_us) to @chip; returns the stream or NULL with @err. */
chipd_stream *rf_submit(struct cd *d, const char *name, int32_t chip, int64_t tokens,
			int64_t seed, int64_t step_us, struct chipd_error *err);

#endif
