/* dev_impl.h - what the device layer's backends share (private to kernels/). */
#ifndef CHIPD_KERNELS_DEV_IMPL_H
#define CHIPD_KERNELS_DEV_IMPL_H

#include "device.h"

#include <pthread.h>
#include <stdatomic.h>

/* One backend: the operations behind device.h, arguments already checked. */
struct dev_backend {
	int (*open)(struct dev *d, char *msg, size_t cap);
	int (*select)(struct dev *d);
	int (*host_alloc)(struct dev *d, size_t size, void **out);
	void (*host_free)(struct dev *d, void *p);
	void (*close)(struct dev *d);
	int (*alloc)(struct dev *d, size_t size, void **out);
	int (*free)(struct dev *d, void *p);
	int (*copy)(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
		    enum dev_copy_kind kind);
	int (*stream_create)(struct dev *d, struct dev_stream **out);
	void (*stream_destroy)(struct dev_stream *s);
	int (*stream_sync)(struct dev_stream *s);
	int (*event_create)(struct dev *d, struct dev_event **out);
	void (*event_destroy)(struct dev_event *e);
	int (*event_record)(struct dev_event *e, struct dev_stream *s);
	int (*stream_wait)(struct dev_stream *s, struct dev_event *e);
	int (*event_query)(struct dev_event *e);
	int (*event_sync)(struct dev_event *e);
	int (*launch)(struct dev_stream *s, const struct dev_kcall *c);
	int (*sync)(struct dev *d);
	/* modules: load fills m->priv; func fills f->priv */
	int (*module_load)(struct dev_module *m, const char *path);
	void (*module_unload)(struct dev_module *m);
	int (*module_func)(struct dev_module *m, struct dev_func *f, const char *name);
	int (*launch_func)(struct dev_stream *s, const struct dev_func *f,
			   const struct dev_dims *dims, const void *args, size_t size);
};

struct dev {
	const struct dev_backend *be;
	struct dev_info info;
	void *priv; /* the backend's per-device state */
	atomic_size_t live;
	/* set once (seq_cst) after the message below was written under err_lock: a
	 * sticky fault; every later call fails */
	atomic_bool lost;
	pthread_mutex_t err_lock;
	int err;
	char errmsg[DEV_ERRMSG_MAX];
	char lostmsg[DEV_ERRMSG_MAX]; /* what lost the device; under err_lock */
};

/* The first member of every backend's stream and event. */
struct dev_stream {
	struct dev *dev;
};

struct dev_event {
	struct dev *dev;
};

/* A loaded module and the functions resolved from it (freed with it). */
struct dev_module {
	struct dev *dev;
	void *priv; /* the backend's handle */
	struct dev_func *funcs;
};

struct dev_func {
	struct dev_module *mod;
	struct dev_func *next; /* in mod->funcs */
	void *priv;	       /* the backend's handle */
};

/* Records @err (negative errno) and a printf-style message as @d's last error and
 * returns @err, so a backend can write `return dev_fail(d, -EIO, "...")`. */
int dev_fail(struct dev *d, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Marks @d lost (first cause wins) with a printf-style message, which also becomes
 * the last error. Returns DEV_ERR_LOST. */
int dev_mark_lost(struct dev *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

extern const struct dev_backend dev_sim_backend;
#if defined(CHIPD_HAVE_HIP)
extern const struct dev_backend dev_hip_backend;
#endif

/* Runs one kernel on the CPU (the sim backend's kernels). Returns 0, or -EINVAL with
 * a message in @msg when the call's device-side data is invalid (a block id outside
 * the pool, a token outside the vocabulary). */
int dev_sim_run(const struct dev_kcall *c, char *msg, size_t cap);

#endif
