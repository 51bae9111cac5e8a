/* dev_sim.c - the sim backend: device memory is host memory; each stream is an ordered
 * queue drained by its own thread, so streams run concurrently as on a GPU; events
 * are (generation issued, generation done) pairs under a mutex. */
#include "dev_impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ops a stream holds before dev_launch waits for room: a GPU's queue is finite too,
 * and a host that runs far ahead only grows latency. */
#define SIM_QUEUE_CAP 256u
/* Alignment of sim allocations: what hipMalloc guarantees, so kernels may assume it. */
#define SIM_ALIGN 256u

enum sim_op_kind { SIM_COPY, SIM_KERNEL, SIM_SIGNAL, SIM_WAIT };

struct sim_event;

struct sim_op {
	enum sim_op_kind kind;
	union {
		struct dev_kcall call;
		struct {
			void *dst;
			const void *src;
			size_t n;
		} copy;
		struct {
			struct sim_event *ev;
			uint64_t gen;
		} ev;
	} u;
};

struct sim_stream {
	struct dev_stream base;
	struct sim_stream *next; /* in the device's list, under sim_dev.lock */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t more; /* an op was queued, or stop */
	pthread_cond_t done; /* an op finished */
	uint64_t head, tail; /* ops[head % CAP] runs next; tail - head are queued */
	bool stop;
	int err; /* the first error; later ops are skipped */
	char msg[DEV_ERRMSG_MAX];
	struct sim_op ops[SIM_QUEUE_CAP];
};

struct sim_event {
	struct dev_event base;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint64_t issued; /* records made */
	uint64_t done;	 /* the latest record a stream reached */
	int err;	 /* the recording stream's error at that point */
	char msg[DEV_ERRMSG_MAX];
};

struct sim_dev {
	pthread_mutex_t lock;
	struct sim_stream *streams;
};

static struct sim_dev *sim_of(struct dev *d)
{
	return d->priv;
}

static struct sim_stream *stream_of(struct dev_stream *s)
{
	return (struct sim_stream *)s;
}

static struct sim_event *event_of(struct dev_event *e)
{
	return (struct sim_event *)e;
}

static int sim_open(struct dev *d, char *msg, size_t cap)
{
	struct sim_dev *sd = calloc(1, sizeof(*sd));

	if (!sd) {
		if (msg)
			snprintf(msg, cap, "sim: out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&sd->lock, NULL);
	d->priv = sd;
	snprintf(d->info.name, sizeof(d->info.name), "sim%d", d->info.index);
	d->info.mem_total = 0;
	return 0;
}

static void sim_close(struct dev *d)
{
	struct sim_dev *sd = sim_of(d);

	pthread_mutex_destroy(&sd->lock);
	free(sd);
}

static int sim_alloc(struct dev *d, size_t size, void **out)
{
	size_t rounded = (size + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;

	if (rounded < size)
		return dev_fail(d, -ENOMEM, "sim: allocation of %zu bytes overflows", size);
	*out = aligned_alloc(SIM_ALIGN, rounded);
	if (!*out)
		return dev_fail(d, -ENOMEM, "sim: cannot allocate %zu bytes", size);
	return 0;
}

static int sim_free(struct dev *d, void *p)
{
	(void)d;
	free(p);
	return 0;
}

/* Runs one op on the stream's thread; @failed: the stream already failed. */
static void run_op(struct sim_stream *ss, struct sim_op *op, bool failed, int *err, char *msg,
		   size_t cap)
{
	struct sim_event *ev;

	switch (op->kind) {
	case SIM_COPY:
		if (!failed)
			memcpy(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
		break;
	case SIM_KERNEL:
		if (!failed)
			*err = dev_sim_run(&op->u.call, msg, cap);
		break;
	case SIM_SIGNAL: /* runs even on a failed stream: waiters must not hang */
		ev = op->u.ev.ev;
		pthread_mutex_lock(&ev->lock);
		if (op->u.ev.gen > ev->done) {
			ev->done = op->u.ev.gen;
			pthread_mutex_lock(&ss->lock);
			ev->err = ss->err;
			memcpy(ev->msg, ss->msg, sizeof(ev->msg));
			pthread_mutex_unlock(&ss->lock);
		}
		pthread_cond_broadcast(&ev->cv);
		pthread_mutex_unlock(&ev->lock);
		break;
	case SIM_WAIT:
		ev = op->u.ev.ev;
		pthread_mutex_lock(&ev->lock);
		while (ev->done < op->u.ev.gen)
			pthread_cond_wait(&ev->cv, &ev->lock);
		pthread_mutex_unlock(&ev->lock);
		break;
	}
}

static void *stream_main(void *arg)
{
	struct sim_stream *ss = arg;
	char msg[DEV_ERRMSG_MAX];
	struct sim_op op;
	bool failed;
	int err;

	pthread_mutex_lock(&ss->lock);
	for (;;) {
		while (ss->head == ss->tail && !ss->stop)
			pthread_cond_wait(&ss->more, &ss->lock);
		if (ss->head == ss->tail)
			break;
		op = ss->ops[ss->head % SIM_QUEUE_CAP];
		failed = ss->err != 0;
		pthread_mutex_unlock(&ss->lock);

		err = 0;
		msg[0] = '\0';
		run_op(ss, &op, failed, &err, msg, sizeof(msg));

		pthread_mutex_lock(&ss->lock);
		if (err && !ss->err) {
			ss->err = err;
			snprintf(ss->msg, sizeof(ss->msg), "%s", msg);
		}
		ss->head++;
		pthread_cond_broadcast(&ss->done);
	}
	pthread_mutex_unlock(&ss->lock);
	return NULL;
}

static int enqueue(struct sim_stream *ss, const struct sim_op *op)
{
	pthread_mutex_lock(&ss->lock);
	while (ss->tail - ss->head == SIM_QUEUE_CAP)
		pthread_cond_wait(&ss->done, &ss->lock);
	ss->ops[ss->tail % SIM_QUEUE_CAP] = *op;
	ss->tail++;
	pthread_cond_signal(&ss->more);
	pthread_mutex_unlock(&ss->lock);
	return 0;
}

static int sim_stream_sync(struct dev_stream *s)
{
	struct sim_stream *ss = stream_of(s);
	char msg[DEV_ERRMSG_MAX];
	int err;

	pthread_mutex_lock(&ss->lock);
	while (ss->head != ss->tail)
		pthread_cond_wait(&ss->done, &ss->lock);
	err = ss->err;
	memcpy(msg, ss->msg, sizeof(msg));
	pthread_mutex_unlock(&ss->lock);
	return err ? dev_fail(s->dev, err, "%s", msg) : 0;
}

static int sim_sync(struct dev *d)
{
	struct sim_dev *sd = sim_of(d);
	struct sim_stream *ss;
	int err, first = 0;

	pthread_mutex_lock(&sd->lock);
	for (ss = sd->streams; ss; ss = ss->next) {
		err = sim_stream_sync(&ss->base);
		if (err && !first)
			first = err;
	}
	pthread_mutex_unlock(&sd->lock);
	return first;
}

static int sim_copy(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
		    enum dev_copy_kind kind)
{
	struct sim_op op = {.kind = SIM_COPY, .u.copy = {dst, src, n}};
	int err;

	(void)kind;
	if (s)
		return enqueue(stream_of(s), &op);
	err = sim_sync(d);
	if (err)
		return err;
	memcpy(dst, src, n);
	return 0;
}

static int sim_stream_create(struct dev *d, struct dev_stream **out)
{
	struct sim_dev *sd = sim_of(d);
	struct sim_stream *ss = calloc(1, sizeof(*ss));
	int err;

	*out = NULL;
	if (!ss)
		return dev_fail(d, -ENOMEM, "sim: out of memory for a stream");
	ss->base.dev = d;
	pthread_mutex_init(&ss->lock, NULL);
	pthread_cond_init(&ss->more, NULL);
	pthread_cond_init(&ss->done, NULL);
	err = pthread_create(&ss->thread, NULL, stream_main, ss);
	if (err) {
		pthread_cond_destroy(&ss->done);
		pthread_cond_destroy(&ss->more);
		pthread_mutex_destroy(&ss->lock);
		free(ss);
		return dev_fail(d, -err, "sim: cannot start a stream thread: %s", strerror(err));
	}
	pthread_mutex_lock(&sd->lock);
	ss->next = sd->streams;
	sd->streams = ss;
	pthread_mutex_unlock(&sd->lock);
	*out = &ss->base;
	return 0;
}

static void sim_stream_destroy(struct dev_stream *s)
{
	struct sim_dev *sd = sim_of(s->dev);
	struct sim_stream *ss = stream_of(s), **pp;

	pthread_mutex_lock(&sd->lock);
	for (pp = &sd->streams; *pp; pp = &(*pp)->next) {
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	}
	pthread_mutex_unlock(&sd->lock);

	pthread_mutex_lock(&ss->lock);
	ss->stop = true; /* the thread drains what is queued, then leaves */
	pthread_cond_signal(&ss->more);
	pthread_mutex_unlock(&ss->lock);
	pthread_join(ss->thread, NULL);
	pthread_cond_destroy(&ss->done);
	pthread_cond_destroy(&ss->more);
	pthread_mutex_destroy(&ss->lock);
	free(ss);
}

static int sim_event_create(struct dev *d, struct dev_event **out)
{
	struct sim_event *ev = calloc(1, sizeof(*ev));

	*out = NULL;
	if (!ev)
		return dev_fail(d, -ENOMEM, "sim: out of memory for an event");
	ev->base.dev = d;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->cv, NULL);
	*out = &ev->base;
	return 0;
}

static void sim_event_destroy(struct dev_event *e)
{
	struct sim_event *ev = event_of(e);

	pthread_cond_destroy(&ev->cv);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

static int sim_event_record(struct dev_event *e, struct dev_stream *s)
{
	struct sim_event *ev = event_of(e);
	struct sim_op op = {.kind = SIM_SIGNAL, .u.ev = {ev, 0}};

	pthread_mutex_lock(&ev->lock);
	op.u.ev.gen = ++ev->issued;
	pthread_mutex_unlock(&ev->lock);
	return enqueue(stream_of(s), &op);
}

static int sim_stream_wait(struct dev_stream *s, struct dev_event *e)
{
	struct sim_event *ev = event_of(e);
	struct sim_op op = {.kind = SIM_WAIT, .u.ev = {ev, 0}};

	pthread_mutex_lock(&ev->lock);
	op.u.ev.gen = ev->issued;
	pthread_mutex_unlock(&ev->lock);
	if (op.u.ev.gen == 0)
		return 0; /* never recorded: complete */
	return enqueue(stream_of(s), &op);
}

/* Waits for (@block) or checks the latest record of @e. */
static int event_wait(struct dev_event *e, bool block)
{
	struct sim_event *ev = event_of(e);
	char msg[DEV_ERRMSG_MAX];
	uint64_t target;
	int err;

	pthread_mutex_lock(&ev->lock);
	target = ev->issued;
	while (block && ev->done < target)
		pthread_cond_wait(&ev->cv, &ev->lock);
	if (ev->done < target) {
		pthread_mutex_unlock(&ev->lock);
		return -EBUSY;
	}
	err = ev->err;
	memcpy(msg, ev->msg, sizeof(msg));
	pthread_mutex_unlock(&ev->lock);
	return err ? dev_fail(e->dev, err, "%s", msg) : 0;
}

static int sim_event_query(struct dev_event *e)
{
	return event_wait(e, false);
}

static int sim_event_sync(struct dev_event *e)
{
	return event_wait(e, true);
}

static int sim_launch(struct dev_stream *s, const struct dev_kcall *c)
{
	struct sim_op op = {.kind = SIM_KERNEL, .u.call = *c};

	return enqueue(stream_of(s), &op);
}

const struct dev_backend dev_sim_backend = {
    .open = sim_open,
    .close = sim_close,
    .alloc = sim_alloc,
    .free = sim_free,
    .copy = sim_copy,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .stream_sync = sim_stream_sync,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .stream_wait = sim_stream_wait,
    .event_query = sim_event_query,
    .event_sync = sim_event_sync,
    .launch = sim_launch,
    .sync = sim_sync,
};
