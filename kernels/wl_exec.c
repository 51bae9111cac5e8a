/* wl_exec.c - runs a step's tasks on a few streams, dependencies as events. */
#include "wl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

struct wl_exec {
	struct dev *dev;
	/* NULL: a failed stream that could not be replaced (lost); every run first tries
	 * to create it again and runs nothing while it cannot */
	struct dev_stream *streams[WL_EXEC_STREAMS];
	unsigned nstreams;
	struct dev_event **events; /* one per task index, created on first need */
	uint32_t nevents;
	uint8_t *needed; /* task i is waited on from another stream */
	uint8_t *stream; /* the stream task i runs on */
	uint8_t *taken;	 /* a task already continued its dependency's stream */
	uint32_t cap;
};

int wl_exec_create(struct wl_exec **out, struct dev *d, unsigned nstreams)
{
	struct wl_exec *x;
	int err;

	*out = NULL;
	if (nstreams == 0 || nstreams > WL_EXEC_STREAMS)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->dev = d;
	for (; x->nstreams < nstreams; x->nstreams++) {
		err = dev_stream_create(d, &x->streams[x->nstreams]);
		if (err) {
			wl_exec_destroy(x);
			return err;
		}
	}
	*out = x;
	return 0;
}

void wl_exec_destroy(struct wl_exec *x)
{
	if (!x)
		return;
	for (unsigned i = 0; i < x->nstreams; i++)
		dev_stream_destroy(x->streams[i]);
	for (uint32_t i = 0; i < x->nevents; i++)
		dev_event_destroy(x->events[i]);
	free(x->events);
	free(x->needed);
	free(x->stream);
	free(x->taken);
	free(x);
}

/* Makes room for per-task state of @n tasks and events for the first @n. */
static int reserve(struct wl_exec *x, uint32_t n)
{
	if (n > x->cap) {
		struct dev_event **ev = realloc(x->events, n * sizeof(*ev));
		uint8_t *needed;

		if (!ev)
			return -ENOMEM;
		x->events = ev;
		needed = realloc(x->needed, n);
		if (!needed)
			return -ENOMEM;
		x->needed = needed;
		needed = realloc(x->stream, n);
		if (!needed)
			return -ENOMEM;
		x->stream = needed;
		needed = realloc(x->taken, n);
		if (!needed)
			return -ENOMEM;
		x->taken = needed;
		x->cap = n;
	}
	return 0;
}

static int event_for(struct wl_exec *x, uint32_t i)
{
	int err;

	while (x->nevents <= i) {
		err = dev_event_create(x->dev, &x->events[x->nevents]);
		if (err)
			return err;
		x->nevents++;
	}
	return 0;
}

int wl_task_queue(struct dev *d, struct dev_stream *s, const struct wl_task *t)
{
	switch (t->kind) {
	case WL_TASK_LAUNCH:
		return dev_launch(s, &t->u.call);
	case WL_TASK_COPY:
		return dev_copy(d, s, t->u.copy.dst, t->u.copy.src, t->u.copy.n, t->u.copy.kind);
	case WL_TASK_FUNC:
		return dev_launch_func(s, t->u.func.fn, &t->u.func.dims, t->u.func.args,
				       t->u.func.size);
	}
	return -EINVAL;
}

int wl_task_check(const struct wl_task *t, char *msg, size_t cap)
{
	switch (t->kind) {
	case WL_TASK_LAUNCH:
		return dev_kcall_check(&t->u.call, msg, cap);
	case WL_TASK_COPY:
		if (t->u.copy.kind != DEV_H2D && t->u.copy.kind != DEV_D2H &&
		    t->u.copy.kind != DEV_D2D) {
			if (msg && cap)
				snprintf(msg, cap, "copy: bad direction %d", (int)t->u.copy.kind);
			return -EINVAL;
		}
		if (t->u.copy.n && (!t->u.copy.dst || !t->u.copy.src)) {
			if (msg && cap)
				snprintf(msg, cap, "copy: NULL %s", t->u.copy.dst ? "src" : "dst");
			return -EINVAL;
		}
		return 0;
	case WL_TASK_FUNC:
		if (!t->u.func.fn || !t->u.func.args || t->u.func.size == 0 ||
		    t->u.func.size > DEV_FUNC_ARGS_MAX) {
			if (msg && cap)
				snprintf(msg, cap, "function: %s",
					 t->u.func.fn ? "arguments of a bad size" : "no function");
			return -EINVAL;
		}
		return dev_dims_check(&t->u.func.dims, msg, cap);
	}
	if (msg && cap)
		snprintf(msg, cap, "unknown task kind %d", (int)t->kind);
	return -EINVAL;
}

static int submit(struct wl_exec *x, const struct wl_step *st, uint32_t i)
{
	const struct wl_task *t = &st->tasks[i];
	struct dev_stream *s = x->streams[x->stream[i]];
	int err;

	for (uint32_t j = 0; j < t->ndeps; j++) {
		uint32_t dep = t->deps[j];

		if (x->stream[dep] == x->stream[i])
			continue; /* stream order covers it */
		err = dev_stream_wait(s, x->events[dep]);
		if (err)
			return err;
	}
	err = wl_task_queue(x->dev, s, t);
	if (!err && x->needed[i])
		err = dev_event_record(x->events[i], s);
	return err;
}

unsigned wl_exec_nstreams(const struct wl_exec *x)
{
	return x->nstreams;
}

bool wl_exec_stream_ok(const struct wl_exec *x, unsigned s)
{
	return s < x->nstreams && x->streams[s] != NULL;
}

int wl_exec_stream_reset(struct wl_exec *x, unsigned s)
{
	int err;

	if (s >= x->nstreams)
		return -EINVAL;
	dev_stream_destroy(x->streams[s]); /* waits for its work; NULL: already lost */
	x->streams[s] = NULL;
	err = dev_stream_create(x->dev, &x->streams[s]);
	if (err)
		x->streams[s] = NULL; /* lost: runs nothing until a later reset succeeds */
	return err;
}

/* Creates every lost stream again. Returns the first error (that stream stays lost). */
static int restore(struct wl_exec *x)
{
	for (unsigned s = 0; s < x->nstreams; s++) {
		int err;

		if (x->streams[s])
			continue;
		err = wl_exec_stream_reset(x, s);
		if (err)
			return err;
	}
	return 0;
}

int wl_exec_run(struct wl_exec *x, const struct wl_step *st)
{
	int err, first;
	uint32_t i, j;

	/* a stream lost at an earlier run: nothing runs without every stream */
	err = restore(x);
	if (err)
		return err;
	err = reserve(x, st->n);
	if (err)
		return err;
	for (i = 0; i < st->n; i++)
		x->needed[i] = x->taken[i] = 0;
	/* Placement: a task with one dependency continues that task's stream when no
	 * other task did yet (a chain runs on one stream, in stream order, without an
	 * event per hop: a cross-stream hop costs a thread hand-off); every other task
	 * runs on its lane's stream, so independent requests still run side by side. */
	for (i = 0; i < st->n; i++) {
		const struct wl_task *t = &st->tasks[i];

		x->stream[i] = (uint8_t)(t->lane % x->nstreams);
		for (j = 0; j < t->ndeps; j++)
			if (t->deps[j] >= i)
				return -EINVAL; /* a dependency must come first */
		if (t->ndeps == 1 && !x->taken[t->deps[0]]) {
			x->stream[i] = x->stream[t->deps[0]];
			x->taken[t->deps[0]] = 1;
		}
		for (j = 0; j < t->ndeps; j++)
			if (x->stream[t->deps[j]] != x->stream[i])
				x->needed[t->deps[j]] = 1;
	}
	for (i = 0, err = 0; i < st->n && !err; i++)
		if (x->needed[i])
			err = event_for(x, i);
	for (i = 0; i < st->n && !err; i++)
		err = submit(x, st, i);
	first = err;
	for (unsigned s = 0; s < x->nstreams; s++) {
		err = dev_stream_sync(x->streams[s]);
		if (!err)
			continue;
		if (!first)
			first = err;
		/* a failed stream stays failed: the next step gets a fresh one; if none can
		 * be made the slot stays lost and the next run tries again first */
		(void)wl_exec_stream_reset(x, s);
	}
	return first;
}

int wl_exec_launch(struct wl_exec *x, const struct wl_step *st, struct wl_lane *lanes,
		   uint32_t nlanes)
{
	uint32_t i, j;
	int err;

	for (i = 0; i < st->n; i++) {
		const struct wl_task *t = &st->tasks[i];

		if (t->lane >= nlanes)
			return -EINVAL;
		for (j = 0; j < t->ndeps; j++)
			if (t->deps[j] >= i || st->tasks[t->deps[j]].lane != t->lane)
				return -EINVAL; /* earlier, and of the same lane */
	}
	for (uint32_t l = 0; l < nlanes; l++) {
		lanes[l].recorded = false;
		lanes[l].refused = false;
		lanes[l].err = wl_exec_stream_ok(x, lanes[l].stream) ? 0 : -ENODEV;
	}
	/* one lane, one stream, in task order: stream order covers every dependency */
	for (i = 0; i < st->n; i++) {
		const struct wl_task *t = &st->tasks[i];
		struct wl_lane *ln = &lanes[t->lane];
		struct dev_stream *s;

		if (ln->err)
			continue; /* the lane's later tasks are not queued */
		s = x->streams[ln->stream];
		ln->err = wl_task_queue(x->dev, s, t);
		/* the device layer's argument checks come before anything is queued: a
		 * refusal (the builder's fault) is told from a device error by running
		 * them again, on this rare path only */
		if (ln->err == -EINVAL && wl_task_check(t, NULL, 0) != 0)
			ln->refused = true;
	}
	for (uint32_t l = 0; l < nlanes; l++) {
		struct wl_lane *ln = &lanes[l];

		if (ln->err == -ENODEV && !wl_exec_stream_ok(x, ln->stream))
			continue; /* nothing of it was queued */
		err = dev_event_record(ln->done, x->streams[ln->stream]);
		if (err) {
			/* nothing will say when its queued tasks end: wait for them here */
			(void)dev_stream_sync(x->streams[ln->stream]);
			if (!ln->err)
				ln->err = err;
			continue;
		}
		ln->recorded = true;
	}
	return 0;
}
