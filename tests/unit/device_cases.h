/* device_cases.h - checks of the device contract that run on any backend: the sim
 * (check_device) and a real GPU (gpu_check). Each returns 0, or a negative errno
 * (-EDOM: a wrong result) with a one-line message in @msg. */
#ifndef CHIPD_DEVICE_CASES_H
#define CHIPD_DEVICE_CASES_H

#include "device.h"

#include <stddef.h>
#include <stdint.h>

#define DC_MSG_MAX 200

/* Queues a spin kernel on @s: @ns of device time, then *@out = @token. */
int dc_spin(struct dev_stream *s, int32_t *out, uint64_t ns, int32_t token);

/* A second thread (and a third that never calls dev_select) runs kernels and copies
 * on streams of its own. */
int dc_threads(struct dev *d, char *msg, size_t cap);
/* Several streams at once, and an event ordering a copy on one after a copy on
 * another. */
int dc_streams(struct dev *d, char *msg, size_t cap);
/* A token outside the vocabulary, a block id outside the pool: the stream fails,
 * stays failed, skips later work; another stream is unaffected. */
int dc_error_paths(struct dev *d, char *msg, size_t cap);
/* argmax with NaN logits answers as the CPU reference. */
int dc_argmax_nan(struct dev *d, char *msg, size_t cap);
/* The module at dc_module_path (the tests' tc_fill for the device's kind: a sim shared
 * object, a GPU code object), loaded, its function launched over a 3-D grid of 2-D
 * blocks with its arguments changed right after the launch: every element of every
 * block written from the launch's copy. */
extern const char *dc_module_path;
int dc_module(struct dev *d, char *msg, size_t cap);

struct dc_case {
	const char *name;
	int (*run)(struct dev *d, char *msg, size_t cap);
};
extern const struct dc_case dc_cases[];
extern const size_t dc_ncases;

#endif
