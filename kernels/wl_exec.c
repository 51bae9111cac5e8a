/* wl_exec.c - runs a step's tasks on a few streams, dependencies as events. */
#include "wl.h"

#include <errno.h>
#include <stdlib.h>

struct wl_exec {
	struct dev *dev;
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
	if (t->kind == WL_TASK_LAUNCH)
		err = dev_launch(s, &t->u.call);
	else
		err =
		    dev_copy(x->dev, s, t->u.copy.dst, t->u.copy.src, t->u.copy.n, t->u.copy.kind);
	if (!err && x->needed[i])
		err = dev_event_record(x->events[i], s);
	return err;
}

int wl_exec_run(struct wl_exec *x, const struct wl_step *st)
{
	int err, first;
	uint32_t i, j;

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
		/* a failed stream stays failed: the next step gets a fresh one */
		dev_stream_destroy(x->streams[s]);
		err = dev_stream_create(x->dev, &x->streams[s]);
		if (err)
			return err; /* @x is unusable now; the caller destroys it */
	}
	return first;
}
