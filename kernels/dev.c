/* dev.c - the device layer's front: argument checks, last error, backend dispatch. */
#include "dev_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct dev_backend *backend_of(enum dev_kind kind)
{
	switch (kind) {
	case DEV_SIM:
		return &dev_sim_backend;
	case DEV_HIP:
#if defined(CHIPD_HAVE_HIP)
		return &dev_hip_backend;
#else
		return NULL;
#endif
	}
	return NULL;
}

const char *dev_kind_name(enum dev_kind kind)
{
	return kind == DEV_SIM ? "sim" : kind == DEV_HIP ? "hip" : "?";
}

int dev_kind_parse(const char *name, enum dev_kind *out)
{
	if (name && strcmp(name, "sim") == 0)
		*out = DEV_SIM;
	else if (name && strcmp(name, "hip") == 0)
		*out = DEV_HIP;
	else
		return -EINVAL;
	return 0;
}

bool dev_kind_built(enum dev_kind kind)
{
	return backend_of(kind) != NULL;
}

int dev_fail(struct dev *d, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&d->err_lock);
	d->err = err;
	va_start(ap, fmt);
	vsnprintf(d->errmsg, sizeof(d->errmsg), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&d->err_lock);
	return err;
}

/* The message of the fault that lost @d, kept apart from the last error (which
 * later calls overwrite with their own failure). */
static char *lost_msg(struct dev *d)
{
	return d->lostmsg;
}

int dev_mark_lost(struct dev *d, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&d->err_lock);
	if (!atomic_load_explicit(&d->lost, memory_order_relaxed)) {
		va_start(ap, fmt);
		vsnprintf(d->lostmsg, sizeof(d->lostmsg), fmt, ap);
		va_end(ap);
		atomic_store_explicit(&d->lost, true, memory_order_seq_cst);
	}
	d->err = DEV_ERR_LOST;
	snprintf(d->errmsg, sizeof(d->errmsg), "%s", lost_msg(d));
	pthread_mutex_unlock(&d->err_lock);
	return DEV_ERR_LOST;
}

bool dev_lost(struct dev *d)
{
	return atomic_load_explicit(&d->lost, memory_order_seq_cst);
}

/* DEV_ERR_LOST with the fault's message as the last error. */
static int fail_lost(struct dev *d, const char *what)
{
	pthread_mutex_lock(&d->err_lock);
	d->err = DEV_ERR_LOST;
	snprintf(d->errmsg, sizeof(d->errmsg), "%s: device lost: %.100s", what, lost_msg(d));
	pthread_mutex_unlock(&d->err_lock);
	return DEV_ERR_LOST;
}

#define RETURN_IF_LOST(d, what)                                                                    \
	do {                                                                                       \
		if (dev_lost(d))                                                                   \
			return fail_lost((d), (what));                                             \
	} while (0)

int dev_open(struct dev **out, enum dev_kind kind, int index, char *msg, size_t cap)
{
	const struct dev_backend *be = backend_of(kind);
	struct dev *d;
	int err;

	*out = NULL;
	if (!be) {
		if (msg)
			snprintf(msg, cap, "dev: backend %s is not in this build",
				 dev_kind_name(kind));
		return -ENOTSUP;
	}
	if (index < 0) {
		if (msg)
			snprintf(msg, cap, "dev: device index %d is negative", index);
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->be = be;
	d->info.kind = kind;
	d->info.index = index;
	atomic_init(&d->live, 0);
	atomic_init(&d->lost, false);
	pthread_mutex_init(&d->err_lock, NULL);
	err = be->open(d, msg, cap);
	if (err) {
		pthread_mutex_destroy(&d->err_lock);
		free(d);
		return err;
	}
	*out = d;
	return 0;
}

void dev_close(struct dev *d)
{
	if (!d)
		return;
	d->be->sync(d);
	d->be->close(d);
	pthread_mutex_destroy(&d->err_lock);
	free(d);
}

void dev_get_info(const struct dev *d, struct dev_info *info)
{
	*info = d->info;
}

int dev_last_error(struct dev *d, char *msg, size_t cap)
{
	int err;

	pthread_mutex_lock(&d->err_lock);
	err = d->err;
	if (msg && cap)
		snprintf(msg, cap, "%s", d->errmsg);
	pthread_mutex_unlock(&d->err_lock);
	return err;
}

void dev_clear_error(struct dev *d)
{
	pthread_mutex_lock(&d->err_lock);
	d->err = 0;
	d->errmsg[0] = '\0';
	pthread_mutex_unlock(&d->err_lock);
}

size_t dev_live(const struct dev *d)
{
	return atomic_load_explicit(&d->live, memory_order_relaxed);
}

static void live_add(struct dev *d, int delta)
{
	atomic_fetch_add_explicit(&d->live, (size_t)delta, memory_order_relaxed);
}

int dev_select(struct dev *d)
{
	RETURN_IF_LOST(d, "dev_select");
	return d->be->select(d);
}

int dev_alloc(struct dev *d, size_t size, void **out)
{
	int err;

	*out = NULL;
	RETURN_IF_LOST(d, "dev_alloc");
	if (size == 0)
		return dev_fail(d, -EINVAL, "dev_alloc: size 0");
	err = d->be->alloc(d, size, out);
	if (!err)
		live_add(d, 1);
	return err;
}

int dev_host_alloc(struct dev *d, size_t size, void **out)
{
	int err;

	*out = NULL;
	RETURN_IF_LOST(d, "dev_host_alloc");
	if (size == 0)
		return dev_fail(d, -EINVAL, "dev_host_alloc: size 0");
	err = d->be->host_alloc(d, size, out);
	if (!err)
		live_add(d, 1);
	return err;
}

void dev_host_free(struct dev *d, void *p)
{
	if (!p)
		return;
	live_add(d, -1);
	d->be->host_free(d, p);
}

int dev_free(struct dev *d, void *p)
{
	if (!p)
		return 0;
	live_add(d, -1);
	return d->be->free(d, p);
}

int dev_copy(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
	     enum dev_copy_kind kind)
{
	RETURN_IF_LOST(d, "dev_copy");
	if (s && s->dev != d)
		return dev_fail(d, -EINVAL, "dev_copy: stream of another device");
	if (kind != DEV_H2D && kind != DEV_D2H && kind != DEV_D2D)
		return dev_fail(d, -EINVAL, "dev_copy: bad direction %d", (int)kind);
	if (n == 0)
		return 0;
	if (!dst || !src)
		return dev_fail(d, -EINVAL, "dev_copy: NULL %s", dst ? "src" : "dst");
	return d->be->copy(d, s, dst, src, n, kind);
}

int dev_stream_create(struct dev *d, struct dev_stream **out)
{
	int err;

	*out = NULL;
	RETURN_IF_LOST(d, "dev_stream_create");
	err = d->be->stream_create(d, out);

	if (!err)
		live_add(d, 1);
	return err;
}

void dev_stream_destroy(struct dev_stream *s)
{
	if (!s)
		return;
	live_add(s->dev, -1);
	s->dev->be->stream_destroy(s);
}

/* A sync still waits for the backend (the sim's stream threads may still hold the
 * caller's memory), then answers DEV_ERR_LOST if the device was lost meanwhile. */
int dev_stream_sync(struct dev_stream *s)
{
	int err;

	if (!s)
		return -EINVAL; /* a stream that could not be made: no device to blame */
	err = s->dev->be->stream_sync(s);

	RETURN_IF_LOST(s->dev, "dev_stream_sync");
	return err;
}

int dev_event_create(struct dev *d, struct dev_event **out)
{
	int err;

	*out = NULL;
	RETURN_IF_LOST(d, "dev_event_create");
	err = d->be->event_create(d, out);

	if (!err)
		live_add(d, 1);
	return err;
}

void dev_event_destroy(struct dev_event *e)
{
	if (!e)
		return;
	live_add(e->dev, -1);
	e->dev->be->event_destroy(e);
}

int dev_event_record(struct dev_event *e, struct dev_stream *s)
{
	if (!s)
		return dev_fail(e->dev, -EINVAL, "dev_event_record: no stream");
	RETURN_IF_LOST(e->dev, "dev_event_record");
	if (s->dev != e->dev)
		return dev_fail(e->dev, -EINVAL, "dev_event_record: stream of another device");
	return e->dev->be->event_record(e, s);
}

int dev_stream_wait(struct dev_stream *s, struct dev_event *e)
{
	if (!s)
		return -EINVAL;
	RETURN_IF_LOST(s->dev, "dev_stream_wait");
	if (s->dev != e->dev)
		return dev_fail(s->dev, -EINVAL, "dev_stream_wait: event of another device");
	return s->dev->be->stream_wait(s, e);
}

int dev_event_query(struct dev_event *e)
{
	/* a lost device answers the loss even for work still running on it, as a GPU
	 * runtime's query answers its sticky error: never "not ready" for good */
	int err;

	RETURN_IF_LOST(e->dev, "dev_event_query");
	err = e->dev->be->event_query(e);
	if (err != -EBUSY)
		RETURN_IF_LOST(e->dev, "dev_event_query");
	return err;
}

int dev_event_sync(struct dev_event *e)
{
	int err = e->dev->be->event_sync(e);

	RETURN_IF_LOST(e->dev, "dev_event_sync");
	return err;
}

int dev_launch(struct dev_stream *s, const struct dev_kcall *c)
{
	char msg[DEV_ERRMSG_MAX];
	int err;

	if (!s)
		return -EINVAL;
	RETURN_IF_LOST(s->dev, "dev_launch");
	err = dev_kcall_check(c, msg, sizeof(msg));
	if (err)
		return dev_fail(s->dev, err, "%s", msg);
	return s->dev->be->launch(s, c);
}

int dev_sync(struct dev *d)
{
	int err = d->be->sync(d);

	RETURN_IF_LOST(d, "dev_sync");
	return err;
}

int dev_dims_check(const struct dev_dims *dims, char *msg, size_t cap)
{
	static const char axis[3] = {'x', 'y', 'z'};
	const uint32_t grid_max[3] = {DEV_GRID_X_MAX, DEV_GRID_YZ_MAX, DEV_GRID_YZ_MAX};
	const uint32_t block_max[3] = {DEV_BLOCK_XY_MAX, DEV_BLOCK_XY_MAX, DEV_BLOCK_Z_MAX};
	uint64_t threads = 1;

	for (int i = 0; i < 3; i++) {
		if (dims->grid[i] == 0 || dims->grid[i] > grid_max[i]) {
			snprintf(msg, cap, "grid %c %u is outside 1..%u", axis[i], dims->grid[i],
				 grid_max[i]);
			return -EINVAL;
		}
		if (dims->block[i] == 0 || dims->block[i] > block_max[i]) {
			snprintf(msg, cap, "block %c %u is outside 1..%u", axis[i], dims->block[i],
				 block_max[i]);
			return -EINVAL;
		}
		threads *= dims->block[i];
	}
	if (threads > DEV_BLOCK_MAX) {
		snprintf(msg, cap, "a block of %llu threads exceeds %u", (unsigned long long)threads,
			 DEV_BLOCK_MAX);
		return -EINVAL;
	}
	if (dims->shared_bytes > DEV_SHARED_MAX) {
		snprintf(msg, cap, "%u bytes of shared memory exceed %u", dims->shared_bytes,
			 DEV_SHARED_MAX);
		return -EINVAL;
	}
	return 0;
}

int dev_module_load(struct dev *d, const char *path, struct dev_module **out)
{
	struct dev_module *m;
	int err;

	*out = NULL;
	RETURN_IF_LOST(d, "dev_module_load");
	if (!path || !path[0])
		return dev_fail(d, -EINVAL, "dev_module_load: no path");
	err = d->be->select(d);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return dev_fail(d, -ENOMEM, "dev_module_load: out of memory");
	m->dev = d;
	err = d->be->module_load(m, path);
	if (err) {
		free(m);
		return err;
	}
	live_add(d, 1);
	*out = m;
	return 0;
}

void dev_module_unload(struct dev_module *m)
{
	struct dev_func *f, *next;

	if (!m)
		return;
	m->dev->be->module_unload(m);
	for (f = m->funcs; f; f = next) {
		next = f->next;
		free(f);
	}
	live_add(m->dev, -1);
	free(m);
}

int dev_module_func(struct dev_module *m, const char *name, struct dev_func **out)
{
	struct dev *d = m->dev;
	struct dev_func *f;
	int err;

	*out = NULL;
	RETURN_IF_LOST(d, "dev_module_func");
	if (!name || !name[0])
		return dev_fail(d, -EINVAL, "dev_module_func: no name");
	f = calloc(1, sizeof(*f));
	if (!f)
		return dev_fail(d, -ENOMEM, "dev_module_func: out of memory");
	f->mod = m;
	err = d->be->module_func(m, f, name);
	if (err) {
		free(f);
		return err;
	}
	f->next = m->funcs;
	m->funcs = f;
	*out = f;
	return 0;
}

int dev_launch_func(struct dev_stream *s, const struct dev_func *f, const struct dev_dims *dims,
		    const void *args, size_t size)
{
	char msg[DEV_ERRMSG_MAX];
	int err;

	if (!s)
		return -EINVAL;
	RETURN_IF_LOST(s->dev, "dev_launch_func");
	if (!f || f->mod->dev != s->dev)
		return dev_fail(s->dev, -EINVAL, "dev_launch_func: %s",
				f ? "a function of another device" : "no function");
	if (!args || size == 0 || size > DEV_FUNC_ARGS_MAX)
		return dev_fail(s->dev, -EINVAL, "dev_launch_func: arguments of %zu bytes (1..%u)",
				args ? size : 0, DEV_FUNC_ARGS_MAX);
	err = dev_dims_check(dims, msg, sizeof(msg));
	if (err)
		return dev_fail(s->dev, err, "dev_launch_func: %s", msg);
	return s->dev->be->launch_func(s, f, dims, args, size);
}
