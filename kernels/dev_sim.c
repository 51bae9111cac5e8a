/* dev_sim.c - the sim backend: device memory is host memory; each stream is an ordered
 * queue drained by its own thread, so streams run concurrently as on a GPU; events
 * are (generation issued, generation done) pairs.
 *
 * Every hand-off (host -> stream thread, stream thread -> a thread in
 * dev_stream_sync or dev_event_sync, stream -> stream through an event) is a counter
 * that only grows, waited for by spinning first and then sleeping (sim_wait_ge): a
 * cache-line hand-off costs ~0.3 us, a futex or condvar wake ~50 us on the machines
 * we measure on, and most hand-offs come within a few microseconds. The sleep is
 * shm's park protocol (shm/wait.h), its asymmetric variant (sim_wait.h): a waker
 * issues one wake per sleep, not one per op, and none while no one sleeps, and its
 * per-op store is a plain one where the kernel has membarrier. */
#include "dev_impl.h"

#include "chipd_callable.h"
#include "sim_wait.h"
#include "wait.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Ops a stream holds before dev_launch waits for room: a GPU's queue is finite too,
 * and a host that runs far ahead only grows latency. */
#define SIM_QUEUE_CAP 256u
/* A full ring's producer waits until this many slots are free. */
#define SIM_QUEUE_REFILL (SIM_QUEUE_CAP / 4)
/* Alignment of sim allocations: what hipMalloc guarantees, so kernels may assume it. */
#define SIM_ALIGN 256u
/* Keeps the words one side writes off the cache line the other side writes. */
#define SIM_LINE 64u

enum sim_op_kind { SIM_COPY, SIM_KERNEL, SIM_FUNC, SIM_FAULT, SIM_SIGNAL, SIM_WAIT, SIM_STOP };

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
		struct {
			chipd_cl_sim_kernel_fn fn;
			struct chipd_cl_dims dims;
			void *args; /* the launch's private copy, freed when the op ran */
		} func;
		enum dev_sim_fault fault;
	} u;
};

/* A stream: a single-producer (the thread using the stream), single-consumer (the
 * stream thread) ring. ops[head % CAP] runs next; tail - head ops are queued. */
struct sim_stream {
	struct dev_stream base;
	struct sim_stream *next; /* in the device's list, under sim_dev.lock */
	pthread_t thread;
	/* written by the producer: */
	_Alignas(SIM_LINE) _Atomic uint64_t tail; /* ops queued so far (release store) */
	/* ops the stream thread may run (shm_park_publish): tail, or in lazy mode what a
	 * waiter released (raised by release(), from any thread, seq_cst) */
	_Atomic uint64_t avail;
	struct shm_park more; /* the stream thread waits for avail */
	bool lazy;	      /* the device's lazy mode, fixed at creation */
	uint64_t head_seen; /* the producer's last look at head: it reads head (a line the
			     * stream thread writes per op) only when the ring looks full */
	/* written by the stream thread: */
	_Alignas(SIM_LINE) _Atomic uint64_t head; /* ops finished (shm_park_publish) */
	struct shm_park done;			  /* syncs and a full queue wait for head */
	/* its idle wait's adaptive extra (wait.h): a stream fed one op every few hundred
	 * us (a worker's one-token requests on the stream with fewest lanes) keeps
	 * spinning across the gap instead of costing each op a wake; idle ones decay */
	struct shm_spin idle_spin;
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
	/* lazy mode: the stream of the latest record (set by the recording thread,
	 * read by the threads that wait for it, to release that stream) */
	_Atomic(struct sim_stream *) recorder;
	pthread_mutex_t lock; /* signals: err, msg with done, and the wake after it */
	int err;	      /* the recording stream's error at that point */
	char msg[DEV_ERRMSG_MAX];
};

struct sim_dev {
	pthread_mutex_t lock;
	struct sim_stream *streams;
	uint32_t fail_creates; /* stream creations still to refuse (tests), under lock */
	/* a dev_sim_fault for the next kernel, -1 none: an atomic of its own, not under lock,
	 * so that a launch with none pending (every launch but a test's) costs one relaxed
	 * load, not a mutex; the word carries nothing else, so relaxed orders suffice */
	_Atomic int fault;
	bool lazy;	       /* dev_sim_set_lazy; under lock */
	uint32_t nstreams;     /* streams ever created; under lock */
};

/* The calling thread's current device (hipSetDevice's per-thread state): index 0
 * until the thread opens or selects another. */
static _Thread_local int sim_current;

/* -ENXIO unless @d is the calling thread's current device: a GPU runtime fails a
 * launch or copy on another device's stream, and allocates or creates a stream on
 * the wrong device without a word; the sim says so in both cases. */
static int on_current(struct dev *d, const char *what)
{
	if (sim_current == d->info.index)
		return 0;
	return dev_fail(d, -ENXIO,
			"sim: %s on device %d from a thread whose current device is %d "
			"(dev_select first)",
			what, d->info.index, sim_current);
}

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
	shm_park_asym_init(); /* before any stream of any sim device exists */
	pthread_mutex_init(&sd->lock, NULL);
	atomic_init(&sd->fault, -1);
	d->priv = sd;
	sim_current = d->info.index; /* as hip_open's hipSetDevice */
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

static int sim_select(struct dev *d)
{
	sim_current = d->info.index;
	return 0;
}

/* Host memory: aligned, as the pinned memory of a GPU runtime is. */
static int host_alloc(struct dev *d, size_t size, void **out)
{
	size_t rounded = (size + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;

	if (rounded < size)
		return dev_fail(d, -ENOMEM, "sim: allocation of %zu bytes overflows", size);
	*out = aligned_alloc(SIM_ALIGN, rounded);
	if (!*out)
		return dev_fail(d, -ENOMEM, "sim: cannot allocate %zu bytes", size);
	return 0;
}

static void sim_host_free(struct dev *d, void *p)
{
	(void)d;
	free(p);
}

static int sim_alloc(struct dev *d, size_t size, void **out)
{
	int err = on_current(d, "dev_alloc");

	return err ? err : host_alloc(d, size, out);
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

/* Fails @ss with @err and its message (on @ss's thread; the first error stays). */
static void fail_stream(struct sim_stream *ss, int err, const char *msg)
{
	if (atomic_load_explicit(&ss->err, memory_order_relaxed))
		return;
	snprintf(ss->msg, sizeof(ss->msg), "%s", msg);
	atomic_store_explicit(&ss->err, err, memory_order_release);
}

/* Runs a function once per block of its grid: x fastest, then y, then z. */
static void run_func(const struct chipd_cl_dims *dims, chipd_cl_sim_kernel_fn fn,
		     const void *args)
{
	uint32_t b[3];

	for (b[2] = 0; b[2] < dims->grid[2]; b[2]++)
		for (b[1] = 0; b[1] < dims->grid[1]; b[1]++)
			for (b[0] = 0; b[0] < dims->grid[0]; b[0]++)
				fn(args, dims, b);
}

/* Runs one op on the stream's thread; a failed stream, or any stream of a lost
 * device, skips copies and kernels. */
static void run_op(struct sim_stream *ss, struct sim_op *op)
{
	char msg[DEV_ERRMSG_MAX];
	bool failed = atomic_load_explicit(&ss->err, memory_order_relaxed) != 0 ||
		      dev_lost(ss->base.dev);
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
		if (err)
			fail_stream(ss, err, msg);
		break;
	case SIM_FUNC:
		if (!failed)
			run_func(&op->u.func.dims, op->u.func.fn, op->u.func.args);
		free(op->u.func.args);
		break;
	case SIM_FAULT:
		if (failed)
			break;
		if (op->u.fault == DEV_SIM_FAULT_STICKY) {
			fail_stream(ss, DEV_ERR_LOST, "sim: illegal address (injected sticky fault)");
			dev_mark_lost(ss->base.dev, "sim: illegal address (injected sticky fault)");
		} else {
			fail_stream(ss, -EIO, "sim: kernel fault (injected)");
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
			uint64_t t0 = shm_now_ns();
			bool slept = sim_wait_ge(&ss->avail, head + 1, &ss->more,
						 shm_spin_budget(&ss->idle_spin, SIM_IDLE_SPIN_NS));

			shm_spin_learn(&ss->idle_spin, t0, shm_now_ns(), slept);
			tail_seen = atomic_load_explicit(&ss->avail, memory_order_acquire);
		}
		run_op(ss, op);
		stop = op->kind == SIM_STOP; /* read before head frees the slot */
		shm_park_publish(&ss->head, ++head);
		shm_park_wake(&ss->done);
	} while (!stop);
	return NULL;
}

/* Lazy mode: lets @ss's thread run everything queued on it so far. Any thread may
 * call it while the stream lives; avail only grows. */
static void release(struct sim_stream *ss)
{
	uint64_t tail = atomic_load_explicit(&ss->tail, memory_order_acquire);
	uint64_t avail = atomic_load_explicit(&ss->avail, memory_order_relaxed);

	if (!ss->lazy)
		return;
	while (avail < tail) {
		if (atomic_compare_exchange_weak_explicit(&ss->avail, &avail, tail,
							  memory_order_seq_cst,
							  memory_order_relaxed)) {
			shm_park_wake(&ss->more);
			return;
		}
	}
}

/* Queues @op on @ss, waiting for room. Only the thread that uses the stream calls
 * it, so the tail is this thread's own word. */
static int enqueue(struct sim_stream *ss, const struct sim_op *op)
{
	uint64_t tail = atomic_load_explicit(&ss->tail, memory_order_relaxed);

	if (tail - ss->head_seen >= SIM_QUEUE_CAP) {
		release(ss); /* lazy: a full queue runs, as a GPU's does */
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
	atomic_store_explicit(&ss->tail, tail + 1, memory_order_release); /* none sleeps on it */
	if (ss->lazy && op->kind != SIM_STOP)
		return 0; /* runs when someone waits for it */
	shm_park_publish(&ss->avail, tail + 1);
	shm_park_wake(&ss->more);
	return 0;
}

static int sim_stream_sync(struct dev_stream *s)
{
	struct sim_stream *ss = stream_of(s);
	int err;

	release(ss);
	sim_wait_ge(&ss->head, atomic_load_explicit(&ss->tail, memory_order_acquire), &ss->done,
		    SIM_SPIN_NS);
	err = atomic_load_explicit(&ss->err, memory_order_acquire);
	return err ? dev_fail(s->dev, err, "%s", ss->msg) : 0;
}

/* Waits for every stream of @d; returns the first error one reported if @report. */
static int wait_all(struct dev *d, bool report)
{
	struct sim_dev *sd = sim_of(d);
	struct sim_stream *ss;
	int err, first = 0;

	pthread_mutex_lock(&sd->lock);
	for (ss = sd->streams; ss; ss = ss->next) {
		release(ss);
		sim_wait_ge(&ss->head, atomic_load_explicit(&ss->tail, memory_order_acquire),
			    &ss->done, SIM_SPIN_NS);
		err = report ? sim_stream_sync(&ss->base) : 0;
		if (err && !first)
			first = err;
	}
	pthread_mutex_unlock(&sd->lock);
	return first;
}

static int sim_sync(struct dev *d)
{
	return wait_all(d, true);
}

static int sim_copy(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
		    enum dev_copy_kind kind)
{
	struct sim_op op = {.kind = SIM_COPY, .u.copy = {dst, src, n}};
	int err;

	(void)kind;
	if (s) {
		err = on_current(d, "dev_copy");
		return err ? err : enqueue(stream_of(s), &op);
	}
	/* after all queued work; a failed stream is its user's business, not this
	 * copy's (the device's loss is checked by the caller) */
	(void)wait_all(d, false);
	memcpy(dst, src, n);
	return 0;
}

static int sim_stream_create(struct dev *d, struct dev_stream **out)
{
	struct sim_dev *sd = sim_of(d);
	struct sim_stream *ss = aligned_alloc(SIM_LINE, sizeof(*ss));
	bool refuse, lazy;
	int err;

	*out = NULL;
	err = on_current(d, "dev_stream_create");
	if (err) {
		free(ss);
		return err;
	}
	if (!ss)
		return dev_fail(d, -ENOMEM, "sim: out of memory for a stream");
	pthread_mutex_lock(&sd->lock);
	refuse = sd->fail_creates > 0;
	if (refuse)
		sd->fail_creates--;
	else
		sd->nstreams++;
	lazy = sd->lazy;
	pthread_mutex_unlock(&sd->lock);
	if (refuse) {
		free(ss);
		return dev_fail(d, -EAGAIN, "sim: stream creation refused (injected)");
	}
	memset(ss, 0, sizeof(*ss));
	ss->base.dev = d;
	ss->lazy = lazy;
	atomic_init(&ss->tail, 0);
	atomic_init(&ss->avail, 0);
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
	struct sim_event *ev;
	int err = on_current(d, "dev_event_create");

	*out = NULL;
	if (err)
		return err;
	ev = aligned_alloc(SIM_LINE, sizeof(*ev));
	if (!ev)
		return dev_fail(d, -ENOMEM, "sim: out of memory for an event");
	memset(ev, 0, sizeof(*ev));
	ev->base.dev = d;
	atomic_init(&ev->issued, 0);
	atomic_init(&ev->done, 0);
	atomic_init(&ev->recorder, NULL);
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
	uint64_t gen;
	struct sim_op op = {.kind = SIM_SIGNAL};
	int err = on_current(e->dev, "dev_event_record");

	if (err)
		return err;
	gen = atomic_fetch_add_explicit(&ev->issued, 1, memory_order_relaxed) + 1;
	op.u.ev.ev = ev;
	op.u.ev.gen = gen;
	atomic_store_explicit(&ev->recorder, stream_of(s), memory_order_relaxed);
	return enqueue(stream_of(s), &op);
}

/* Lazy mode: lets the stream of @ev's latest record run up to it. The caller orders
 * its wait after that record, so the stream still lives. */
static void release_recorder(struct sim_event *ev)
{
	struct sim_stream *ss = atomic_load_explicit(&ev->recorder, memory_order_relaxed);

	if (ss && atomic_load_explicit(&ev->done, memory_order_acquire) <
		      atomic_load_explicit(&ev->issued, memory_order_relaxed))
		release(ss);
}

static int sim_stream_wait(struct dev_stream *s, struct dev_event *e)
{
	struct sim_event *ev = event_of(e);
	struct sim_op op = {.kind = SIM_WAIT, .u.ev = {ev, 0}};

	op.u.ev.gen = atomic_load_explicit(&ev->issued, memory_order_relaxed);
	if (op.u.ev.gen == 0)
		return 0; /* never recorded: complete */
	release_recorder(ev);
	return enqueue(stream_of(s), &op);
}

/* Waits for (@block) or checks the latest record of @e. */
static int event_wait(struct dev_event *e, bool block)
{
	struct sim_event *ev = event_of(e);
	uint64_t target = atomic_load_explicit(&ev->issued, memory_order_relaxed);
	char msg[DEV_ERRMSG_MAX];
	int err;

	release_recorder(ev);
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

/* Turns @op into the injected fault, if one is pending on @sd (dev_sim_inject_fault). */
static void take_fault(struct sim_dev *sd, struct sim_op *op)
{
	int f;

	if (atomic_load_explicit(&sd->fault, memory_order_relaxed) < 0)
		return;
	f = atomic_exchange_explicit(&sd->fault, -1, memory_order_relaxed);
	if (f >= 0) { /* one launch takes it, whichever thread wins the exchange */
		op->kind = SIM_FAULT;
		op->u.fault = (enum dev_sim_fault)f;
	}
}

static int sim_launch(struct dev_stream *s, const struct dev_kcall *c)
{
	struct sim_op op = {.kind = SIM_KERNEL, .u.call = *c};
	int err = on_current(s->dev, "dev_launch");

	if (err)
		return err;
	take_fault(sim_of(s->dev), &op);
	return enqueue(stream_of(s), &op);
}

/* Modules: a shared object, its functions its symbols. */
static int sim_module_load(struct dev_module *m, const char *path)
{
	m->priv = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!m->priv)
		return dev_fail(m->dev, access(path, F_OK) == 0 ? -EINVAL : -ENOENT,
				"sim: %s", dlerror()); /* "PATH: why" */
	return 0;
}

static void sim_module_unload(struct dev_module *m)
{
	dlclose(m->priv);
}

static int sim_module_func(struct dev_module *m, struct dev_func *f, const char *name)
{
	f->priv = dlsym(m->priv, name);
	if (!f->priv)
		return dev_fail(m->dev, -ENOENT, "sim: no function \"%s\" in the module", name);
	return 0;
}

static int sim_launch_func(struct dev_stream *s, const struct dev_func *f,
			   const struct dev_dims *dims, const void *args, size_t size)
{
	struct sim_op op = {.kind = SIM_FUNC};
	int err = on_current(s->dev, "dev_launch_func");

	if (err)
		return err;
	*(void **)&op.u.func.fn = f->priv;
	memcpy(op.u.func.dims.grid, dims->grid, sizeof(dims->grid));
	memcpy(op.u.func.dims.block, dims->block, sizeof(dims->block));
	op.u.func.dims.shared_bytes = dims->shared_bytes;
	take_fault(sim_of(s->dev), &op);
	if (op.kind == SIM_FUNC) {
		op.u.func.args = malloc(size);
		if (!op.u.func.args)
			return dev_fail(s->dev, -ENOMEM, "sim: out of memory for %zu bytes of "
					"arguments", size);
		memcpy(op.u.func.args, args, size);
	}
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

int dev_sim_inject_fault(struct dev *d, enum dev_sim_fault f)
{
	struct sim_dev *sd;

	if (d->be != &dev_sim_backend)
		return -ENOTSUP;
	if (f != DEV_SIM_FAULT_KERNEL && f != DEV_SIM_FAULT_STICKY)
		return -EINVAL;
	sd = sim_of(d);
	atomic_store_explicit(&sd->fault, (int)f, memory_order_relaxed);
	return 0;
}

int dev_sim_set_lazy(struct dev *d, bool lazy)
{
	struct sim_dev *sd;
	int err = 0;

	if (d->be != &dev_sim_backend)
		return -ENOTSUP;
	sd = sim_of(d);
	pthread_mutex_lock(&sd->lock);
	if (sd->nstreams)
		err = -EBUSY;
	else
		sd->lazy = lazy;
	pthread_mutex_unlock(&sd->lock);
	return err;
}

const struct dev_backend dev_sim_backend = {
    .open = sim_open,
    .select = sim_select,
    .host_alloc = host_alloc,
    .host_free = sim_host_free,
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
    .module_load = sim_module_load,
    .module_unload = sim_module_unload,
    .module_func = sim_module_func,
    .launch_func = sim_launch_func,
};
