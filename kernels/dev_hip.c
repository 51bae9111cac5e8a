/* dev_hip.c - the HIP backend: the HIP runtime on AMD, the CUDA runtime on NVIDIA
 * (CHIPD_HIP_CUDA, through hip/chipd_hip_cuda.h). Streams and events are the
 * runtime's.
 *
 * Errors, as device.h promises them:
 *  - per stream and sticky: each stream owns a device word its kernels leave a code
 *    in when they reject their data (first code wins); every kernel on the stream
 *    returns at once while the word is set, so later work on a failed stream is
 *    skipped. A sync reads the word and keeps the first error in the stream.
 *  - per event: a record copies the stream's word into the event's own word on the
 *    stream, so an event reports the error of its stream at that point, even after
 *    the stream is gone.
 *  - device lost: the runtime's sticky faults (illegal address, launch failure,
 *    uncorrectable ECC, a device assert, a launch timeout) mark the device lost.
 *  - the current device: the runtime's is per thread; every call that needs it
 *    selects the device first (cached per thread), whatever the caller did.
 */
#ifdef CHIPD_HIP_CUDA
#include "hip/chipd_hip_cuda.h"
#else
#include <hip/hip_runtime_api.h>
#endif

#include "dev_impl.h"
#include "hip/kernels_hip.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hip_stream;

struct hip_dev {
	pthread_mutex_t lock;
	struct hip_stream *streams; /* for dev_sync, under lock */
};

struct hip_stream {
	struct dev_stream base;
	struct hip_stream *next; /* in hip_dev.streams */
	hipStream_t s;
	int *kerr; /* device memory: the kernels' error word of this stream */
	/* the first error a sync found; the stream's user thread only */
	int err;
	char msg[DEV_ERRMSG_MAX];
};

struct hip_event {
	struct dev_event base;
	hipEvent_t e;
	int *kerr;     /* device memory: the recording stream's word at the record */
	bool recorded; /* kerr is written (before the event) by every record */
	int known;     /* the recording stream had failed already (host side) */
	char msg[DEV_ERRMSG_MAX];
};

/* The device the runtime takes as current on this thread, as far as this backend set
 * it (-1: not yet). */
static _Thread_local int hip_current = -1;

/* Whether @e leaves the device unusable for the rest of the process. */
static bool sticky(hipError_t e)
{
	return e == hipErrorIllegalAddress || e == hipErrorLaunchFailure ||
	       e == hipErrorECCNotCorrectable || e == hipErrorAssert ||
	       e == hipErrorLaunchTimeOut;
}

static int hip_fail(struct dev *d, hipError_t e, const char *what)
{
	int err = e == hipErrorNoDevice || e == hipErrorInsufficientDriver ? -ENODEV : -EIO;

	if (sticky(e))
		return dev_mark_lost(d, "hip: %s: %s", what, hipGetErrorString(e));
	return dev_fail(d, err, "hip: %s: %s", what, hipGetErrorString(e));
}

#define HIP_TRY(d, call)                                                                           \
	do {                                                                                       \
		hipError_t e_ = (call);                                                            \
		if (e_ != hipSuccess)                                                              \
			return hip_fail((d), e_, #call);                                           \
	} while (0)

static int hip_select(struct dev *d)
{
	if (hip_current == d->info.index)
		return 0;
	HIP_TRY(d, hipSetDevice(d->info.index));
	hip_current = d->info.index;
	return 0;
}

static const char *kerr_text(int code)
{
	return code == CHIPD_KERR_BLOCK	  ? "block table entry outside the pool"
	       : code == CHIPD_KERR_TOKEN ? "token outside the vocabulary"
					  : "unknown code";
}

/* After @hs's work completed: its error, reading its word once it has none yet. */
static int stream_error(struct hip_stream *hs)
{
	struct dev *d = hs->base.dev;
	int code = 0;

	if (!hs->err) {
		HIP_TRY(d, hipMemcpy(&code, hs->kerr, sizeof(code), hipMemcpyDeviceToHost));
		if (!code)
			return 0;
		hs->err = -EINVAL;
		snprintf(hs->msg, sizeof(hs->msg), "hip: a kernel rejected its input: %s",
			 kerr_text(code));
	}
	return dev_fail(d, hs->err, "%s", hs->msg);
}

static int hip_open(struct dev *d, char *msg, size_t cap)
{
	struct hip_dev *hd;
	hipDeviceProp_t prop;
	size_t free_b, total;
	int n = 0;
	hipError_t e = hipGetDeviceCount(&n);
	const char *what = "hipSetDevice";

	if (e != hipSuccess || n <= d->info.index) {
		if (msg)
			snprintf(msg, cap, "hip: no device %d (%s)", d->info.index,
				 e != hipSuccess ? hipGetErrorString(e) : "fewer devices");
		return e == hipSuccess || e == hipErrorNoDevice || e == hipErrorInsufficientDriver
			   ? -ENODEV
			   : -EIO;
	}
	e = hipSetDevice(d->info.index);
	if (e == hipSuccess) {
		what = "hipGetDeviceProperties";
		e = hipGetDeviceProperties(&prop, d->info.index);
	}
	if (e == hipSuccess) {
		what = "hipMemGetInfo";
		e = hipMemGetInfo(&free_b, &total);
	}
	if (e != hipSuccess) {
		if (msg)
			snprintf(msg, cap, "hip: cannot set up device %d: %s: %s", d->info.index,
				 what, hipGetErrorString(e));
		return -EIO;
	}
	hip_current = d->info.index;
	hd = calloc(1, sizeof(*hd));
	if (!hd)
		return -ENOMEM;
	pthread_mutex_init(&hd->lock, NULL);
	d->priv = hd;
	snprintf(d->info.name, sizeof(d->info.name), "%.63s", prop.name);
	d->info.mem_total = total;
	return 0;
}

static void hip_close(struct dev *d)
{
	struct hip_dev *hd = d->priv;

	pthread_mutex_destroy(&hd->lock);
	free(hd);
}

static int hip_alloc(struct dev *d, size_t size, void **out)
{
	hipError_t e;
	int err = hip_select(d);

	if (err)
		return err;
	e = hipMalloc(out, size);
	if (e != hipSuccess) {
		*out = NULL;
		if (sticky(e))
			return hip_fail(d, e, "hipMalloc");
		return dev_fail(d, -ENOMEM, "hip: cannot allocate %zu bytes: %s", size,
				hipGetErrorString(e));
	}
	return 0;
}

static int hip_free(struct dev *d, void *p)
{
	HIP_TRY(d, hipFree(p));
	return 0;
}

static int hip_host_alloc(struct dev *d, size_t size, void **out)
{
	hipError_t e;
	int err = hip_select(d);

	if (err)
		return err;
	e = hipHostMalloc(out, size, hipHostMallocDefault);
	if (e != hipSuccess) {
		*out = NULL;
		return dev_fail(d, -ENOMEM, "hip: cannot pin %zu bytes of host memory: %s", size,
				hipGetErrorString(e));
	}
	return 0;
}

static void hip_host_free(struct dev *d, void *p)
{
	(void)d;
	(void)hipHostFree(p);
}

static int hip_copy(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
		    enum dev_copy_kind kind)
{
	static const enum hipMemcpyKind kinds[] = {
	    [DEV_H2D] = hipMemcpyHostToDevice,
	    [DEV_D2H] = hipMemcpyDeviceToHost,
	    [DEV_D2D] = hipMemcpyDeviceToDevice,
	};
	int err = hip_select(d);

	if (err)
		return err;
	if (s) {
		/* a failed stream skips later work, copies as launches (hip_launch; the
		 * sim does the same): its syncs report the error */
		if (((struct hip_stream *)s)->err)
			return 0;
		HIP_TRY(d, hipMemcpyAsync(dst, src, n, kinds[kind], ((struct hip_stream *)s)->s));
		return 0;
	}
	/* hipMemcpy from pageable memory may return once the bytes are staged, before
	 * they reach the device, and the streams are non-blocking: they do not wait
	 * for the null stream. The device-wide syncs on both sides order the copy
	 * after all queued work and before any work queued after this call. */
	HIP_TRY(d, hipDeviceSynchronize());
	HIP_TRY(d, hipMemcpy(dst, src, n, kinds[kind]));
	HIP_TRY(d, hipDeviceSynchronize());
	return 0;
}

static int hip_stream_create(struct dev *d, struct dev_stream **out)
{
	struct hip_dev *hd = d->priv;
	struct hip_stream *hs;
	hipError_t e;
	int err = hip_select(d);

	*out = NULL;
	if (err)
		return err;
	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return dev_fail(d, -ENOMEM, "hip: out of memory for a stream");
	hs->base.dev = d;
	e = hipStreamCreateWithFlags(&hs->s, hipStreamNonBlocking);
	if (e != hipSuccess) {
		free(hs);
		return hip_fail(d, e, "hipStreamCreateWithFlags");
	}
	e = hipMalloc((void **)&hs->kerr, sizeof(int));
	if (e == hipSuccess)
		e = hipMemsetAsync(hs->kerr, 0, sizeof(int), hs->s); /* before any kernel */
	if (e != hipSuccess) {
		if (hs->kerr)
			(void)hipFree(hs->kerr);
		(void)hipStreamDestroy(hs->s);
		free(hs);
		return hip_fail(d, e, "the stream's error word");
	}
	pthread_mutex_lock(&hd->lock);
	hs->next = hd->streams;
	hd->streams = hs;
	pthread_mutex_unlock(&hd->lock);
	*out = &hs->base;
	return 0;
}

static void hip_stream_destroy(struct dev_stream *s)
{
	struct hip_dev *hd = s->dev->priv;
	struct hip_stream *hs = (struct hip_stream *)s, **pp;

	pthread_mutex_lock(&hd->lock);
	for (pp = &hd->streams; *pp; pp = &(*pp)->next) {
		if (*pp == hs) {
			*pp = hs->next;
			break;
		}
	}
	pthread_mutex_unlock(&hd->lock);
	(void)hipStreamSynchronize(hs->s);
	(void)hipStreamDestroy(hs->s);
	(void)hipFree(hs->kerr);
	free(hs);
}

static int hip_stream_sync(struct dev_stream *s)
{
	HIP_TRY(s->dev, hipStreamSynchronize(((struct hip_stream *)s)->s));
	return stream_error((struct hip_stream *)s);
}

static int hip_event_create(struct dev *d, struct dev_event **out)
{
	struct hip_event *he;
	hipError_t e;
	int err = hip_select(d);

	*out = NULL;
	if (err)
		return err;
	he = calloc(1, sizeof(*he));
	if (!he)
		return dev_fail(d, -ENOMEM, "hip: out of memory for an event");
	he->base.dev = d;
	e = hipEventCreateWithFlags(&he->e, hipEventDisableTiming);
	if (e != hipSuccess) {
		free(he);
		return hip_fail(d, e, "hipEventCreateWithFlags");
	}
	e = hipMalloc((void **)&he->kerr, sizeof(int));
	if (e != hipSuccess) {
		(void)hipEventDestroy(he->e);
		free(he);
		return hip_fail(d, e, "the event's error word");
	}
	*out = &he->base;
	return 0;
}

static void hip_event_destroy(struct dev_event *e)
{
	struct hip_event *he = (struct hip_event *)e;

	(void)hipEventDestroy(he->e);
	(void)hipFree(he->kerr);
	free(he);
}

static int hip_event_record(struct dev_event *e, struct dev_stream *s)
{
	struct hip_event *he = (struct hip_event *)e;
	struct hip_stream *hs = (struct hip_stream *)s;
	int err = hip_select(e->dev);

	if (err)
		return err;
	he->recorded = true;
	he->known = hs->err;
	if (hs->err)
		memcpy(he->msg, hs->msg, sizeof(he->msg));
	HIP_TRY(e->dev, hipMemcpyAsync(he->kerr, hs->kerr, sizeof(int), hipMemcpyDeviceToDevice,
				       hs->s));
	HIP_TRY(e->dev, hipEventRecord(he->e, hs->s));
	return 0;
}

static int hip_stream_wait(struct dev_stream *s, struct dev_event *e)
{
	int err = hip_select(s->dev);

	if (err)
		return err;
	HIP_TRY(s->dev,
		hipStreamWaitEvent(((struct hip_stream *)s)->s, ((struct hip_event *)e)->e, 0));
	return 0;
}

/* After @he's record completed: the recording stream's error at that point. */
static int event_error(struct hip_event *he)
{
	struct dev *d = he->base.dev;
	int code = 0;

	if (he->known)
		return dev_fail(d, he->known, "%s", he->msg);
	if (!he->recorded)
		return 0; /* never recorded: complete, and its word never written */
	HIP_TRY(d, hipMemcpy(&code, he->kerr, sizeof(code), hipMemcpyDeviceToHost));
	if (!code)
		return 0;
	return dev_fail(d, -EINVAL, "hip: a kernel rejected its input: %s", kerr_text(code));
}

static int hip_event_query(struct dev_event *e)
{
	hipError_t r = hipEventQuery(((struct hip_event *)e)->e);

	if (r == hipErrorNotReady)
		return -EBUSY;
	if (r != hipSuccess)
		return hip_fail(e->dev, r, "hipEventQuery");
	return event_error((struct hip_event *)e);
}

static int hip_event_sync(struct dev_event *e)
{
	HIP_TRY(e->dev, hipEventSynchronize(((struct hip_event *)e)->e));
	return event_error((struct hip_event *)e);
}

static int hip_launch(struct dev_stream *s, const struct dev_kcall *c)
{
	struct hip_stream *hs = (struct hip_stream *)s;
	int e = hip_select(s->dev);

	if (e)
		return e;
	if (hs->err)
		return 0; /* a failed stream skips later work; its syncs report the error */
	e = chipd_hip_launch(c, hs->s, hs->kerr);
	if (e != (int)hipSuccess) {
		if (sticky((hipError_t)e))
			return hip_fail(s->dev, (hipError_t)e, dev_kernel_name(c->kernel));
		return dev_fail(s->dev, -EIO, "hip: launch of %s: %s", dev_kernel_name(c->kernel),
				hipGetErrorString((hipError_t)e));
	}
	return 0;
}

static int hip_sync(struct dev *d)
{
	struct hip_dev *hd = d->priv;
	int err, first = 0;

	HIP_TRY(d, hipDeviceSynchronize());
	pthread_mutex_lock(&hd->lock);
	for (struct hip_stream *hs = hd->streams; hs; hs = hs->next) {
		err = stream_error(hs);
		if (err && !first)
			first = err;
	}
	pthread_mutex_unlock(&hd->lock);
	return first;
}

/* Modules: hipModuleLoad on the device made current by dev_module_load. */
static int hip_module_load(struct dev_module *m, const char *path)
{
	hipModule_t mod;
	hipError_t e = hipModuleLoad(&mod, path);

	if (e != hipSuccess)
		return dev_fail(m->dev, e == hipErrorFileNotFound ? -ENOENT : -EINVAL,
				"hip: cannot load %s: %s", path, hipGetErrorString(e));
	m->priv = mod;
	return 0;
}

static void hip_module_unload(struct dev_module *m)
{
	if (hip_select(m->dev) == 0)
		(void)hipModuleUnload((hipModule_t)m->priv);
}

static int hip_module_func(struct dev_module *m, struct dev_func *f, const char *name)
{
	hipFunction_t fn;
	hipError_t e = hipModuleGetFunction(&fn, (hipModule_t)m->priv, name);

	if (e != hipSuccess)
		return dev_fail(m->dev, -ENOENT, "hip: no function \"%s\" in the module: %s", name,
				hipGetErrorString(e));
	f->priv = fn;
	return 0;
}

/* The arguments go as one buffer (HIP_LAUNCH_PARAM_BUFFER_POINTER), copied by the
 * runtime at the launch. */
static int hip_launch_func(struct dev_stream *s, const struct dev_func *f,
			   const struct dev_dims *dims, const void *args, size_t size)
{
	struct hip_stream *hs = (struct hip_stream *)s;
	void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, (void *)args,
			 HIP_LAUNCH_PARAM_BUFFER_SIZE, &size, HIP_LAUNCH_PARAM_END};
	hipError_t e;
	int err = hip_select(s->dev);

	if (err)
		return err;
	if (hs->err)
		return 0; /* a failed stream skips later work; its syncs report the error */
	e = hipModuleLaunchKernel((hipFunction_t)f->priv, dims->grid[0], dims->grid[1],
				  dims->grid[2], dims->block[0], dims->block[1], dims->block[2],
				  dims->shared_bytes, hs->s, NULL, extra);
	if (e != hipSuccess)
		return hip_fail(s->dev, e, "hipModuleLaunchKernel");
	return 0;
}

const struct dev_backend dev_hip_backend = {
    .open = hip_open,
    .select = hip_select,
    .host_alloc = hip_host_alloc,
    .host_free = hip_host_free,
    .close = hip_close,
    .alloc = hip_alloc,
    .free = hip_free,
    .copy = hip_copy,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = hip_stream_sync,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .stream_wait = hip_stream_wait,
    .event_query = hip_event_query,
    .event_sync = hip_event_sync,
    .launch = hip_launch,
    .sync = hip_sync,
    .module_load = hip_module_load,
    .module_unload = hip_module_unload,
    .module_func = hip_module_func,
    .launch_func = hip_launch_func,
};
