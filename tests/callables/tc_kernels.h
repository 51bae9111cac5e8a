/* tc_kernels.h - the arguments of the tests' own kernels (tc_kernels_sim.c), shared by
 * the kernel file, the callable that launches them (test_callable.c, TC_OWN) and the
 * device layer's tests (tests/unit/device_module.c). */
#ifndef CHIPD_TESTS_TC_KERNELS_H
#define CHIPD_TESTS_TC_KERNELS_H

#include <stdint.h>

/* tc_fill: thread t of block b (both linear, x fastest) writes out[b * threads + t] =
 * base + b * threads + t. */
struct tc_fill_args {
	int32_t *out;
	int32_t base;
	int32_t pad;
};

#endif
