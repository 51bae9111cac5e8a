/* dev_sim.c - the sim backend: device memory is host memory; each stream is an ordered
 * queue drained by its own thread, so streams run concurrently as on a GPU; events
 * are (generation issued, generation done) pairs.
 *
 * Every hand-off (host -> stream thread, stream thread -> a thread in
 * dev_stream_sync or dev_event_sync, stream -> stream through an event) is a counter
 * that only grows, waited for by spinning first and then sleeping (sim_wait_ge): a
 * cache-line hand-off costs ~0.3 us, a futex or condvar wake ~50 us on the machines
 * we measure on, and most hand-offs come within a few microseconds. The sleep is
 * shm's park protocol (shm/wait.h): a waker issues one wake per sleep, not one per
 * op, and none while no one sleeps. */
#include "dev_impl.h"

#include "wait.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ops a stream holds before dev_launch waits for room: a GPU's queue is finite too,
 * and a host that runs far ahead only grows latency. */
#define SIM_QUEUE_CAP 256u
/* A full ring's producer waits until this many slots are free. */
#define SIM_QUEUE_REFILL (SIM_QUEUE_CAP / 4)
/* Alignment of sim allocations: what hipMalloc guarantees, so kernels may assume it. */
#define SIM_ALIGN 256u
/* Keeps the words one side writes off the cache line the other side writes. */
#define SIM_LINE 64u

/* How long a waiter spins before it sleeps: the host waiting for a stream, a stream
 * waiting for another stream's event. As shm_wait's default, and for its reason. */
#define SIM_SPIN_NS SHM_SPIN_NS_DEFAULT
/* How long a stream thread whose queue ran empty spins before it sleeps: long enough
 * to bridge the host's gap between two ops for this stream while it fills the other
 * streams (each sleep costs the host a wake syscall and the stream ~50 us), shorter
 * than SIM_SPIN_NS because idle stream threads may outnumber the cores (4 streams on
 * 2 CPUs) and every one that spins takes CPU from the threads with work. */
#define SIM_IDLE_SPIN_NS (20u * 1000u)
/* Pure PAUSE spinning lasts this long; after it a spinner yields the CPU between
 * checks, so that the thread it waits for can run when the threads outnumber the
 * cores. */
#define SIM_PAUSE_NS (1u * 1000u)
/* Reading the clock costs ~25 ns; the spin loop reads it once per this many checks. */
#define SIM_SPIN_CLOCK_EVERY 16

enum sim_op_kind { SIM_COPY, SIM_KERNEL, SIM_SIGNAL, SIM_WAIT, SIM_STOP };

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

/* A stream: a single-producer (the thread using the stream), single-consumer (the
 * stream thread) ring. ops[head % CAP] runs next; tail - head ops are queued. */
struct sim_stream {
	struct dev_stream base;
	struct sim_stream *next; /* in the device's list, under sim_dev.lock */
	pthread_t thread;
	/* written by the producer: */
	_Alignas(SIM_LINE) _Atomic uint64_t tail; /* ops queued so far (seq_cst store) */
	struct shm_park more;			  /* the stream thread waits for tail */
	uint64_t head_seen; /* the producer's last look at head: it reads head (a line the
			     * stream thread writes per op) only when the ring looks full */
	/* written by the stream thread: */
	_Alignas(SIM_LINE) _Atomic uint64_t head; /* ops finished so far (seq_cst store) */
	struct shm_park done;			  /* syncs and a full queue wait for head */
	/* the first error; set once (release) after msg, so a reader that sees it
	 * (acquire) may read msg, which is never written again */
	_Atomic int err;
	char msg[DEV_ERRMSG_MAX];
	struct sim_op ops[SIM_QUEUE_CAP]; /* slot written before tail, read before head */
};

struct sim_event {
	struct dev_event base;
	_Atomic uint64_t issued; /* records made; by the recording thread */
	/* written by the stream threads that reach a record: */
	_Alignas(SIM_LINE) _Atomic uint64_t done; /* the latest record reached (seq_cst) */
	struct shm_park park;			  /* threads and streams wait for done */
	pthread_mutex_t lock; /* signals: err, msg with done, and the wake after it */
	int err;	      /* the recording stream's error at that point */
	char msg[DEV_ERRMSG_MAX];
};

struct sim_dev {
	pthread_mutex_t lock;
	struct sim_stream *streams;
	uint32_t fail_creates; /* stream creations still to refuse (tests), under lock */
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

/* Spins on *@word >= @target for @spin_ns: pure PAUSE first, then yielding between
 * checks. Returns true when reached. */
static bool sim_spin_ge(_Atomic uint64_t *word, uint64_t target, uint64_t spin_ns)
{
	uint64_t start = shm_now_ns(), now;

	for (;;) {
		for (int i = 0; i < SIM_SPIN_CLOCK_EVERY; i++) {
			shm_cpu_relax();
			if (atomic_load_explicit(word, memory_order_acquire) >= target)
				return true;
		}
		now = shm_now_ns();
		if (now - start >= spin_ns)
			return false;
		if (now - start >= SIM_PAUSE_NS)
			sched_yield();
	}
}

/* Waits until *@word >= @target: spins for @spin_ns, then sleeps on @p. The words
 * only grow, and every op a stream takes runs to completion, so the wait ends as
 * the work it waits for ends (as a GPU's would; a kernel that never ends hangs it). */
static void sim_wait_ge(_Atomic uint64_t *word, uint64_t target, struct shm_park *p,
			uint64_t spin_ns)
{
	if (atomic_load_explicit(word, memory_order_acquire) >= target)
		return;
	if (sim_spin_ge(word, target, spin_ns))
		return;
	for (;;) {
		shm_park_prepare(p);
		if (atomic_load_explicit(word, memory_order_seq_cst) >= target)
			return;
		shm_park_sleep(p);
		if (atomic_load_explicit(word, memory_order_acquire) >= target)
			return;
	}
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

/* Marks @ev's record @gen reached by @ss (on @ss's thread). Runs even on a failed
 * stream, so that waiters do not hang; they get the stream's error. */
static void signal_event(struct sim_stream *ss, struct sim_event *ev, uint64_t gen)
{
	int err;

	pthread_mutex_lock(&ev->lock);
	if (gen > atomic_load_explicit(&ev->done, memory_order_relaxed)) {
		/* only this thread writes ss->err, so relaxed reads its own value */
		err = atomic_load_explicit(&ss->err, memory_order_relaxed);
		ev->err = err;
		if (err)
			memcpy(ev->msg, ss->msg, sizeof(ev->msg));
		atomic_store_explicit(&ev->done, gen, memory_order_seq_cst);
	}
	/* under the lock: event_wait takes it before it returns, so a thread that
	 * synced the event and destroys it cannot free the park word under us */
	shm_park_wake(&ev->park);
	pthread_mutex_unlock(&ev->lock);
}

/* Runs one op on the stream's thread; a failed stream skips copies and kernels. */
static void run_op(struct sim_stream *ss, struct sim_op *op)
{
	char msg[DEV_ERRMSG_MAX];
	bool failed = atomic_load_explicit(&ss->err, memory_order_relaxed) != 0;
	int err;

	switch (op->kind) {
	case SIM_COPY:
		if (!failed)
			memcpy(op->u.copy.dst, op->u.copy.src, op->u.copy.n);
		break;
	case SIM_KERNEL:
		if (failed)
			break;
		msg[0] = '\0';
		err = dev_sim_run(&op->u.call, msg, sizeof(msg));
		if (err) {
			snprintf(ss->msg, sizeof(ss->msg), "%s", msg);
			atomic_store_explicit(&ss->err, err, memory_order_release);
		}
		break;
	case SIM_SIGNAL:
		signal_event(ss, op->u.ev.ev, op->u.ev.gen);
		break;
	case SIM_WAIT:
		sim_wait_ge(&op->u.ev.ev->done, op->u.ev.gen, &op->u.ev.ev->park, SIM_SPIN_NS);
		break;
	case SIM_STOP:
		break;
	}
}

static void *stream_main(void *arg)
{
	struct sim_stream *ss = arg;
	uint64_t head = 0;	/* only this thread writes ss->head */
	uint64_t tail_seen = 0; /* ops known queued: tail is read once per batch, not per op */
	bool stop;

	do {
		struct sim_op *op = &ss->ops[head % SIM_QUEUE_CAP];

		if (head == tail_seen) {
			sim_wait_ge(&ss->tail, head + 1, &ss->more, SIM_IDLE_SPIN_NS);
			tail_seen = atomic_load_explicit(&ss->tail, memory_order_acquire);
		}
		run_op(ss, op);
		stop = op->kind == SIM_STOP; /* read before head frees the slot */
		atomic_store_explicit(&ss->head, ++head, memory_order_seq_cst);
		shm_park_wake(&ss->done);
	} while (!stop);
	return NULL;
}

/* Queues @op on @ss, waiting for room. Only the thread that uses the stream calls
 * it, so the tail is this thread's own word. */
static int enqueue(struct sim_stream *ss, const struct sim_op *op)
{
	uint64_t tail = atomic_load_explicit(&ss->tail, memory_order_relaxed);

	if (tail - ss->head_seen >= SIM_QUEUE_CAP) {
		ss->head_seen = atomic_load_explicit(&ss->head, memory_order_acquire);
		/* Full: wait for a quarter of the ring to drain, not for one slot, or the two
		 * threads trade the head and tail lines once per op (lockstep). Every queued
		 * op completes without this thread (an op waits only for records queued
		 * before it), so waiting for more of them cannot deadlock. */
		if (tail - ss->head_seen >= SIM_QUEUE_CAP)
			sim_wait_ge(&ss->head, tail - SIM_QUEUE_CAP + SIM_QUEUE_REFILL, &ss->done,
				    SIM_SPIN_NS);
		ss->head_seen = atomic_load_explicit(&ss->head, memory_order_acquire);
	}
	ss->ops[tail % SIM_QUEUE_CAP] = *op;
	atomic_store_explicit(&ss->tail, tail + 1, memory_order_seq_cst);
	shm_park_wake(&ss->more);
	return 0;
}

static int sim_stream_sync(struct dev_stream *s)
{
	struct sim_stream *ss = stream_of(s);
	int err;

	sim_wait_ge(&ss->head, atomic_load_explicit(&ss->tail, memory_order_acquire), &ss->done,
		    SIM_SPIN_NS);
	err = atomic_load_explicit(&ss->err, memory_order_acquire);
	return err ? dev_fail(s->dev, err, "%s", ss->msg) : 0;
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
	struct sim_stream *ss = aligned_alloc(SIM_LINE, sizeof(*ss));
	bool refuse;
	int err;

	*out = NULL;
	if (!ss)
		return dev_fail(d, -ENOMEM, "sim: out of memory for a stream");
	pthread_mutex_lock(&sd->lock);
	refuse = sd->fail_creates > 0;
	if (refuse)
		sd->fail_creates--;
	pthread_mutex_unlock(&sd->lock);
	if (refuse) {
		free(ss);
		return dev_fail(d, -EAGAIN, "sim: stream creation refused (injected)");
	}
	memset(ss, 0, sizeof(*ss));
	ss->base.dev = d;
	atomic_init(&ss->tail, 0);
	shm_park_init(&ss->more);
	atomic_init(&ss->head, 0);
	shm_park_init(&ss->done);
	atomic_init(&ss->err, 0);
	err = pthread_create(&ss->thread, NULL, stream_main, ss);
	if (err) {
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
	struct sim_op stop = {.kind = SIM_STOP};

	pthread_mutex_lock(&sd->lock);
	for (pp = &sd->streams; *pp; pp = &(*pp)->next) {
		if (*pp == ss) {
			*pp = ss->next;
			break;
		}
	}
	pthread_mutex_unlock(&sd->lock);

	enqueue(ss, &stop); /* the thread drains what is queued, then leaves */
	pthread_join(ss->thread, NULL);
	free(ss);
}

static int sim_event_create(struct dev *d, struct dev_event **out)
{
	struct sim_event *ev = aligned_alloc(SIM_LINE, sizeof(*ev));

	*out = NULL;
	if (!ev)
		return dev_fail(d, -ENOMEM, "sim: out of memory for an event");
	memset(ev, 0, sizeof(*ev));
	ev->base.dev = d;
	atomic_init(&ev->issued, 0);
	atomic_init(&ev->done, 0);
	shm_park_init(&ev->park);
	pthread_mutex_init(&ev->lock, NULL);
	*out = &ev->base;
	return 0;
}

static void sim_event_destroy(struct dev_event *e)
{
	struct sim_event *ev = event_of(e);

	pthread_mutex_destroy(&ev->lock);
	free(ev);
}

static int sim_event_record(struct dev_event *e, struct dev_stream *s)
{
	struct sim_event *ev = event_of(e);
	/* an event is used by one thread at a time: relaxed, the caller orders it */
	uint64_t gen = atomic_fetch_add_explicit(&ev->issued, 1, memory_order_relaxed) + 1;
	struct sim_op op = {.kind = SIM_SIGNAL, .u.ev = {ev, gen}};

	return enqueue(stream_of(s), &op);
}

static int sim_stream_wait(struct dev_stream *s, struct dev_event *e)
{
	struct sim_event *ev = event_of(e);
	struct sim_op op = {.kind = SIM_WAIT, .u.ev = {ev, 0}};

	op.u.ev.gen = atomic_load_explicit(&ev->issued, memory_order_relaxed);
	if (op.u.ev.gen == 0)
		return 0; /* never recorded: complete */
	return enqueue(stream_of(s), &op);
}

/* Waits for (@block) or checks the latest record of @e. */
static int event_wait(struct dev_event *e, bool block)
{
	struct sim_event *ev = event_of(e);
	uint64_t target = atomic_load_explicit(&ev->issued, memory_order_relaxed);
	char msg[DEV_ERRMSG_MAX];
	int err;

	if (block)
		sim_wait_ge(&ev->done, target, &ev->park, SIM_SPIN_NS);
	else if (atomic_load_explicit(&ev->done, memory_order_acquire) < target)
		return -EBUSY;
	/* Taken even without an error to read: it waits out the signal that made done
	 * reach target (see signal_event). A later record may have moved done on since;
	 * its error is as good as this one's. */
	pthread_mutex_lock(&ev->lock);
	err = ev->err;
	if (err)
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

int dev_sim_fail_stream_creates(struct dev *d, uint32_t n)
{
	struct sim_dev *sd;

	if (d->be != &dev_sim_backend)
		return -ENOTSUP;
	sd = sim_of(d);
	pthread_mutex_lock(&sd->lock);
	sd->fail_creates = n;
	pthread_mutex_unlock(&sd->lock);
	return 0;
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
