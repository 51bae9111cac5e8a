/* device.h - the device layer: one GPU (or its CPU stand-in) behind one API.
 *
 * Backends:
 *  DEV_SIM  the CPU: device memory is host memory, every stream is an ordered queue
 *           run by its own thread (so several streams execute concurrently), kernels
 *           are the C versions in sim_kernels.c. The embedded default.
 *  DEV_HIP  the HIP runtime (libamdhip64), or the CUDA runtime in the NVIDIA build
 *           (CHIPD_CUDA): same code through hip/chipd_hip_cuda.h. Without a GPU,
 *           dev_open answers -ENODEV.
 *
 * Actions return 0 or -errno and never set errno. A failing call also stores its code
 * and a one-line message as the device's last error (dev_last_error). Errors that
 * happen later on a stream (a kernel that rejects its block table, a runtime fault)
 * surface at the next dev_stream_sync, dev_event_sync, dev_event_query or dev_sync.
 *
 * Threads: one device may be used from several threads; a stream or event by one
 * thread at a time (as with HIP streams). As with the HIP and CUDA runtimes, each
 * thread has a current device: dev_open makes the opened device current on the
 * calling thread, every other thread calls dev_select before it allocates, creates a
 * stream or event, launches, records or copies on a stream of the device (a thread
 * that never selected one is on device index 0). The sim backend refuses such a call
 * from a thread whose current device is another index (-ENXIO) where a GPU runtime
 * would fail it or silently use the wrong device; syncs, queries, frees and destroys
 * may come from any thread.
 *
 * Device lost: a fault that leaves the device unusable (an illegal address, a
 * launch failure, an uncorrectable ECC error on a GPU; an injected sticky fault on
 * the sim) marks the device lost. From then on every call fails with DEV_ERR_LOST
 * and the device's last error names the fault: the only way on is dev_close (the
 * worker ends its requests with device_error and exits to be restarted).
 */
#ifndef CHIPD_KERNELS_DEVICE_H
#define CHIPD_KERNELS_DEVICE_H

#include "chipd_kcall.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dev_kind { DEV_SIM = 0, DEV_HIP = 1 };

enum dev_copy_kind { DEV_H2D, DEV_D2H, DEV_D2D };

#define DEV_ERRMSG_MAX 160

/* What every call on a lost device returns. */
#define DEV_ERR_LOST (-ENOTRECOVERABLE)

struct dev;
struct dev_stream;
struct dev_event;

struct dev_info {
	enum dev_kind kind;
	int index;
	char name[64];
	size_t mem_total; /* bytes; 0 = unbounded (sim) */
};

/* The kind's name ("sim", "hip"); dev_kind_parse is the inverse (-EINVAL if unknown). */
const char *dev_kind_name(enum dev_kind kind);
int dev_kind_parse(const char *name, enum dev_kind *out);

/* Whether this build has the backend at all (DEV_HIP needs CHIPD_HIP or CHIPD_CUDA). */
bool dev_kind_built(enum dev_kind kind);

/* Opens device @index of @kind into *@out. The sim backend has any number of devices.
 * Returns -ENOTSUP for a backend this build lacks, -ENODEV when there is no such
 * device (no GPU, no driver), -ENOMEM. On error *@out is NULL and, since there is no
 * device to hold it, the message goes to @msg (may be NULL). */
int dev_open(struct dev **out, enum dev_kind kind, int index, char *msg, size_t cap);

/* Waits for all work, then frees the device. Streams, events and allocations must
 * have been released before (dev_live counts those that were not). NULL is a no-op. */
void dev_close(struct dev *d);

/* Makes @d the calling thread's current device (hipSetDevice). 0, DEV_ERR_LOST, or
 * the runtime's error. */
int dev_select(struct dev *d);

/* Whether @d is lost (see above). */
bool dev_lost(struct dev *d);

/* Fills @info. Never fails for an open device. */
void dev_get_info(const struct dev *d, struct dev_info *info);

/* The last error's code (0 if none since open or dev_clear_error) and its message,
 * copied into @msg (may be NULL). */
int dev_last_error(struct dev *d, char *msg, size_t cap);
void dev_clear_error(struct dev *d);

/* Allocates @size bytes (> 0) of device memory aligned to 256 bytes into *@out.
 * -EINVAL for size 0, -ENOMEM when the device has no room. */
int dev_alloc(struct dev *d, size_t size, void **out);

/* Frees memory from dev_alloc, after the work that uses it has completed.
 * NULL is a no-op. Returns 0 or the runtime's error. */
int dev_free(struct dev *d, void *p);

/* Allocates @size bytes (> 0) of host memory the device copies from and to without
 * staging (hipHostMalloc: pinned; plain aligned memory on the sim) into *@out,
 * aligned to 256 bytes. Asynchronous copies into pageable memory block the issuing
 * thread on a GPU; into this memory they do not. */
int dev_host_alloc(struct dev *d, size_t size, void **out);
/* Frees memory from dev_host_alloc, after the copies that use it completed. NULL is
 * a no-op. */
void dev_host_free(struct dev *d, void *p);

/* Live allocations, streams and events: what dev_close would leak. */
size_t dev_live(const struct dev *d);

/* Copies @n bytes in direction @kind, ordered on stream @s: host memory must stay
 * valid (and a D2H target unread) until the stream reaches the copy: only a sync of
 * the stream or of an event recorded after it says the copy is done. With @s NULL
 * the copy is synchronous: it waits for all streams of @d first (a failed stream's
 * error stays that stream's: it does not fail the copy), then copies, and the
 * copied bytes are in place (for every stream) when it returns. */
int dev_copy(struct dev *d, struct dev_stream *s, void *dst, const void *src, size_t n,
	     enum dev_copy_kind kind);

/* Streams: ordered queues of copies, launches and event operations. A NULL stream
 * (one that could not be created) is refused with -EINVAL by dev_stream_sync,
 * dev_launch, dev_event_record and dev_stream_wait, never dereferenced. */
int dev_stream_create(struct dev *d, struct dev_stream **out);
/* Waits for the stream's work, then frees it. NULL is a no-op. */
void dev_stream_destroy(struct dev_stream *s);
/* Waits until all work queued on @s has run; returns its first error, if any. A
 * stream that failed stays failed (later work on it is skipped, every sync reports
 * the first error): destroy it and create another. */
int dev_stream_sync(struct dev_stream *s);

/* Events mark a point in a stream. */
int dev_event_create(struct dev *d, struct dev_event **out);
void dev_event_destroy(struct dev_event *e);
/* Marks the current end of @s; the event completes when @s reaches it. Recording
 * again moves the mark (waits and queries concern the latest record). */
int dev_event_record(struct dev_event *e, struct dev_stream *s);
/* Makes work queued on @s after this call wait until @e's latest record completed.
 * A never-recorded event is complete. */
int dev_stream_wait(struct dev_stream *s, struct dev_event *e);
/* 0 if @e's latest record completed, -EBUSY if not yet; a stream error otherwise, and
 * DEV_ERR_LOST on a lost device even while the recorded work is still running. */
int dev_event_query(struct dev_event *e);
/* Waits for @e's latest record; returns the recording stream's error, if any. */
int dev_event_sync(struct dev_event *e);

/* Checks @c (dev_kcall_check: -EINVAL with the message as last error) and queues it
 * on @s. */
int dev_launch(struct dev_stream *s, const struct dev_kcall *c);

/* Waits for every stream of @d; returns the first error any of them reported. */
int dev_sync(struct dev *d);

/* ---- code objects loaded at run time (a callable's own kernels) ----
 *
 * A module is one file of kernels for @d's kind: for the sim a shared object
 * (dlopen RTLD_NOW | RTLD_LOCAL) exporting each kernel under its name as a
 * chipd_cl_sim_kernel_fn (chipd_callable.h), which a launch calls once per block of
 * the grid (x fastest, then y, then z), in order, on the stream's thread; for HIP a
 * code object (hipModuleLoad), for CUDA a cubin or fatbin (cuModuleLoad, the driver
 * API's entry points reached through the runtime). */
struct dev_module;
struct dev_func;

/* The launch geometry of a function: blocks in the grid, threads in a block, dynamic
 * shared memory in bytes (the layout of struct chipd_cl_dims). */
struct dev_dims {
	uint32_t grid[3], block[3];
	uint32_t shared_bytes;
};

/* The most a launch may ask for (the CUDA and HIP limits every supported GPU has). */
#define DEV_GRID_X_MAX	 0x7fffffffu
#define DEV_GRID_YZ_MAX	 65535u
#define DEV_BLOCK_XY_MAX 1024u
#define DEV_BLOCK_Z_MAX	 64u
#define DEV_BLOCK_MAX	 1024u /* threads in a block */
#define DEV_SHARED_MAX	 (48u * 1024u)

/* 0, or -EINVAL with a message naming the dimension in @msg: a zero, or more than
 * the limits above. */
int dev_dims_check(const struct dev_dims *dims, char *msg, size_t cap);

/* Loads the module at @path on @d (made current on the calling thread first) into
 * *@out. -ENOENT (no such file), -EINVAL (not a module of @d's kind), -ENOMEM, or the
 * runtime's error; the message, naming @path, is the last error. */
int dev_module_load(struct dev *d, const char *path, struct dev_module **out);
/* Unloads @m once the work launched from it completed (the caller waits for it).
 * NULL is a no-op. */
void dev_module_unload(struct dev_module *m);
/* The function @name of @m into *@out (valid until the module is unloaded): -ENOENT
 * when @m has none, the message naming it as the last error. */
int dev_module_func(struct dev_module *m, const char *name, struct dev_func **out);

/* Checks @dims (dev_dims_check) and queues @f on @s with @dims; its one parameter is
 * the @size bytes at @args (1..DEV_FUNC_ARGS_MAX), copied here: the caller may reuse
 * @args when this returns. @f must come from a module of @s's device. */
#define DEV_FUNC_ARGS_MAX 4096u
int dev_launch_func(struct dev_stream *s, const struct dev_func *f, const struct dev_dims *dims,
		    const void *args, size_t size);

/* Fault injection for tests (sim backend): the next @n dev_stream_create calls on
 * @d fail with -EAGAIN, as a runtime out of stream resources does. -ENOTSUP on any
 * other backend. */
int dev_sim_fail_stream_creates(struct dev *d, uint32_t n);

enum dev_sim_fault {
	DEV_SIM_FAULT_KERNEL, /* the kernel fails its stream (-EIO); the device lives on */
	DEV_SIM_FAULT_STICKY, /* the kernel faults as an illegal address does: lost */
};
/* Fault injection for tests (sim backend): the next kernel launched on @d (from any
 * thread, on any stream; a catalogue kernel or a module's function) faults with @f
 * when it runs. -ENOTSUP on other backends. */
int dev_sim_inject_fault(struct dev *d, enum dev_sim_fault f);

/* Test mode (sim backend, set before the first stream is created): a stream runs
 * the work queued on it only when someone waits for it (dev_stream_sync, dev_sync,
 * an event sync or query, another stream's dev_stream_wait, stream destruction) or
 * its queue is full, never on its own. A copy's target read before such a wait holds
 * the old bytes every time, so a missing wait shows in a test. -ENOTSUP on other
 * backends, -EBUSY once streams exist. */
int dev_sim_set_lazy(struct dev *d, bool lazy);

/* Checks @c's kernel id, pointers and shapes against the supported ranges of chipd_kcall.h.
 * Returns 0, or -EINVAL with a message naming the offending field in @msg. Touches
 * no device memory (block table contents are checked inside the kernels). */
int dev_kcall_check(const struct dev_kcall *c, char *msg, size_t cap);

/* The kernel's name, "?" for an unknown id. */
const char *dev_kernel_name(enum dev_kernel k);

#endif
