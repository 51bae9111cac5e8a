/* dev_hip.c - the HIP backend: the HIP runtime on AMD, the CUDA runtime on NVIDIA
 * (CHIPD_HIP_CUDA, through hip/chipd_hip_cuda.h). Streams and events are the
 * runtime's; kernels that find bad device data leave a code in a per-device error
 * word, which every synchronization reads and clears. */
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

struct hip_dev {
	int *kerr; /* device memory: the kernels' error word */
};

struct hip_stream {
	struct dev_stream base;
	hipStream_t s;
};

struct hip_event {
	struct dev_event base;
	hipEvent_t e;
};

static int hip_fail(struct dev *d, hipError_t e, const char *what)
{
	int err = e == hipErrorNoDevice || e == hipErrorInsufficientDriver ? -ENODEV : -EIO;

	return dev_fail(d, err, "hip: %s: %s", what, hipGetErrorString(e));
}

#define HIP_TRY(d, call)                                                                           \
	do {                                                                                       \
		hipError_t e_ = (call);                                                            \
		if (e_ != hipSuccess)                                                              \
			return hip_fail((d), e_, #call);                                           \
	} while (0)

static int select_dev(struct dev *d)
{
	HIP_TRY(d, hipSetDevice(d->info.index));
	return 0;
}

/* Reads and clears the kernels' error word. */
static int check_kernels(struct dev *d)
{
	struct hip_dev *hd = d->priv;
	int code = 0, zero = 0;

	HIP_TRY(d, hipMemcpy(&code, hd->kerr, sizeof(code), hipMemcpyDeviceToHost));
	if (!code)
		return 0;
	HIP_TRY(d, hipMemcpy(hd->kerr, &zero, sizeof(zero), hipMemcpyHostToDevice));
	return dev_fail(d, -EINVAL, "hip: a kernel rejected its input: %s",
			code == CHIPD_KERR_BLOCK   ? "block table entry outside the pool"
			: code == CHIPD_KERR_TOKEN ? "token outside the vocabulary"
						   : "unknown code");
}

static int hip_open(struct dev *d, char *msg, size_t cap)
{
	struct hip_dev *hd;
	hipDeviceProp_t prop;
	size_t free_b, total;
	int n = 0, zero = 0;
	hipError_t e = hipGetDeviceCount(&n);

	if (e != hipSuccess || n <= d->info.index) {
		if (msg)
			snprintf(msg, cap, "hip: no device %d (%s)", d->info.index,
				 e != hipSuccess ? hipGetErrorString(e) : "fewer devices");
		return e == hipSuccess || e == hipErrorNoDevice || e == hipErrorInsufficientDriver
			   ? -ENODEV
			   : -EIO;
	}
	hd = calloc(1, sizeof(*hd));
	if (!hd)
		return -ENOMEM;
	d->priv = hd;
	if (hipSetDevice(d->info.index) != hipSuccess ||
	    hipGetDeviceProperties(&prop, d->info.index) != hipSuccess ||
	    hipMemGetInfo(&free_b, &total) != hipSuccess ||
	    hipMalloc((void **)&hd->kerr, sizeof(int)) != hipSuccess ||
	    hipMemcpy(hd->kerr, &zero, sizeof(zero), hipMemcpyHostToDevice) != hipSuccess) {
		if (msg)
			snprintf(msg, cap, "hip: cannot set up device %d: %s", d->info.index,
				 hipGetErrorString(hipGetLastError()));
		free(hd);
		return -EIO;
	}
	snprintf(d->info.name, sizeof(d->info.name), "%.63s", prop.name);
	d->info.mem_total = total;
	return 0;
}

static void hip_close(struct dev *d)
{
	struct hip_dev *hd = d->priv;

	hipFree(hd->kerr);
	free(hd);
}

static int hip_alloc(struct dev *d, size_t size, void **out)
{
	hipError_t e;

	if (select_dev(d))
		return -EIO;
	e = hipMalloc(out, size);
	if (e != hipSuccess) {
		*out = NULL;
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

static int hip_copy(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
		    enum dev_copy_kind kind)
{
	static const enum hipMemcpyKind kinds[] = {
	    [DEV_H2D] = hipMemcpyHostToDevice,
	    [DEV_D2H] = hipMemcpyDeviceToHost,
	    [DEV_D2D] = hipMemcpyDeviceToDevice,
	};

	if (s) {
		HIP_TRY(d, hipMemcpyAsync(dst, src, n, kinds[kind], ((struct hip_stream *)s)->s));
		return 0;
	}
	HIP_TRY(d, hipDeviceSynchronize());
	HIP_TRY(d, hipMemcpy(dst, src, n, kinds[kind]));
	return 0;
}

static int hip_stream_create(struct dev *d, struct dev_stream **out)
{
	struct hip_stream *hs = calloc(1, sizeof(*hs));
	hipError_t e;

	*out = NULL;
	if (!hs)
		return dev_fail(d, -ENOMEM, "hip: out of memory for a stream");
	hs->base.dev = d;
	e = hipStreamCreateWithFlags(&hs->s, hipStreamNonBlocking);
	if (e != hipSuccess) {
		free(hs);
		return hip_fail(d, e, "hipStreamCreateWithFlags");
	}
	*out = &hs->base;
	return 0;
}

static void hip_stream_destroy(struct dev_stream *s)
{
	struct hip_stream *hs = (struct hip_stream *)s;

	hipStreamSynchronize(hs->s);
	hipStreamDestroy(hs->s);
	free(hs);
}

static int hip_stream_sync(struct dev_stream *s)
{
	HIP_TRY(s->dev, hipStreamSynchronize(((struct hip_stream *)s)->s));
	return check_kernels(s->dev);
}

static int hip_event_create(struct dev *d, struct dev_event **out)
{
	struct hip_event *he = calloc(1, sizeof(*he));
	hipError_t e;

	*out = NULL;
	if (!he)
		return dev_fail(d, -ENOMEM, "hip: out of memory for an event");
	he->base.dev = d;
	e = hipEventCreateWithFlags(&he->e, hipEventDisableTiming);
	if (e != hipSuccess) {
		free(he);
		return hip_fail(d, e, "hipEventCreateWithFlags");
	}
	*out = &he->base;
	return 0;
}

static void hip_event_destroy(struct dev_event *e)
{
	struct hip_event *he = (struct hip_event *)e;

	hipEventDestroy(he->e);
	free(he);
}

static int hip_event_record(struct dev_event *e, struct dev_stream *s)
{
	HIP_TRY(e->dev, hipEventRecord(((struct hip_event *)e)->e, ((struct hip_stream *)s)->s));
	return 0;
}

static int hip_stream_wait(struct dev_stream *s, struct dev_event *e)
{
	HIP_TRY(s->dev,
		hipStreamWaitEvent(((struct hip_stream *)s)->s, ((struct hip_event *)e)->e, 0));
	return 0;
}

static int hip_event_query(struct dev_event *e)
{
	hipError_t r = hipEventQuery(((struct hip_event *)e)->e);

	if (r == hipErrorNotReady)
		return -EBUSY;
	if (r != hipSuccess)
		return hip_fail(e->dev, r, "hipEventQuery");
	return check_kernels(e->dev);
}

static int hip_event_sync(struct dev_event *e)
{
	HIP_TRY(e->dev, hipEventSynchronize(((struct hip_event *)e)->e));
	return check_kernels(e->dev);
}

static int hip_launch(struct dev_stream *s, const struct dev_kcall *c)
{
	struct hip_dev *hd = s->dev->priv;
	int e = chipd_hip_launch(c, ((struct hip_stream *)s)->s, hd->kerr);

	if (e != (int)hipSuccess)
		return dev_fail(s->dev, -EIO, "hip: launch of %s: %s", dev_kernel_name(c->kernel),
				hipGetErrorString((hipError_t)e));
	return 0;
}

static int hip_sync(struct dev *d)
{
	HIP_TRY(d, hipDeviceSynchronize());
	return check_kernels(d);
}

const struct dev_backend dev_hip_backend = {
    .open = hip_open,
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
};
