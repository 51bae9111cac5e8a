/* wl_host.c - the device API a callable gets (struct chipd_cl_host): chipd's arenas,
 * device and KV pools behind the callable ABI, with the request's accounting. */
#include "wl_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct wl_req *req_of(const struct chipd_cl_req *r)
{
	return r->chipd;
}

static struct wl_step *step_of(const struct chipd_cl_step *st)
{
	return (struct wl_step *)st;
}

static int host_kernel(const char *name)
{
	for (int k = 0; k < DEV_K_COUNT; k++)
		if (strcmp(dev_kernel_name((enum dev_kernel)k), name) == 0)
			return k;
	return -ENOENT;
}

static void *host_alloc(struct chipd_cl_req *cr, size_t n)
{
	struct wl_req *r = req_of(cr);
	void *p = calloc(1, n);

	if (p) {
		r->host_now += n;
		if (r->host_now > r->host_peak)
			r->host_peak = r->host_now;
	}
	return p;
}

static void host_free(struct chipd_cl_req *cr, void *p, size_t n)
{
	if (!p)
		return;
	req_of(cr)->host_now -= n;
	free(p);
}

static int host_dev_alloc(struct chipd_cl_req *cr, size_t n, void **out)
{
	struct wl_req *r = req_of(cr);
	int err = dev_alloc(r->dev, n, out);

	if (!err)
		r->dev_bytes += n;
	return err;
}

static void host_dev_free(struct chipd_cl_req *cr, void *p)
{
	(void)dev_free(req_of(cr)->dev, p);
}

/* The ABI's copy directions are the device layer's, value for value. */
_Static_assert((int)CHIPD_CL_H2D == (int)DEV_H2D && (int)CHIPD_CL_D2H == (int)DEV_D2H &&
		   (int)CHIPD_CL_D2D == (int)DEV_D2D,
	       "copy directions");

static bool copy_kind_ok(enum chipd_cl_copy kind)
{
	return kind == CHIPD_CL_H2D || kind == CHIPD_CL_D2H || kind == CHIPD_CL_D2D;
}

static int host_copy(struct chipd_cl_req *cr, void *dst, const void *src, size_t n,
		     enum chipd_cl_copy kind)
{
	if (!copy_kind_ok(kind))
		return -EINVAL;
	return dev_copy(req_of(cr)->dev, NULL, dst, src, n, (enum dev_copy_kind)kind);
}

/* Destroys the request's private pool (every block of it back, or none taken). */
static void drop_own_pool(struct wl_req *r)
{
	wl_kvpool_destroy(r->kv);
	r->kv = NULL;
	r->own_kv = false;
}

static int kv_take(struct chipd_cl_req *cr, uint32_t n, uint32_t block_floats, int32_t *ids,
		   char *msg, size_t cap)
{
	struct wl_req *r = req_of(cr);
	const char *name = r->wc->cl->name;
	bool made = false;
	int err;

	if (!r->kv) {
		err = wl_kvpool_create(&r->kv, r->dev, n, block_floats);
		if (err == -EOVERFLOW) {
			snprintf(msg, cap,
				 "%s: %u KV blocks of %u floats exceed the largest KV pool "
				 "(%llu bytes)",
				 name, n, block_floats, (unsigned long long)WL_KVPOOL_BYTES_MAX);
			return -EINVAL; /* never: no retry makes it fit */
		}
		if (err) {
			snprintf(msg, cap, "%s: cannot allocate %u KV blocks", name, n);
			return err;
		}
		r->own_kv = made = true;
	}
	/* -EINVAL: never (larger blocks, or more than the whole pool: the worker's is the
	 * chip's KV cache, --kv-blocks); -ENOSPC: not now, the retryable no_capacity */
	if (wl_kvpool_block_floats(r->kv) < block_floats) {
		snprintf(msg, cap, "%s: KV blocks of %u floats exceed the pool's blocks of %u",
			 name, block_floats, wl_kvpool_block_floats(r->kv));
		err = -EINVAL;
	} else if (n > wl_kvpool_blocks(r->kv)) {
		snprintf(msg, cap,
			 "%s: %u KV blocks needed, more than the chip's KV cache holds "
			 "(kv-blocks=%u)",
			 name, n, wl_kvpool_blocks(r->kv));
		err = -EINVAL;
	} else if (n > wl_kvpool_free_blocks(r->kv)) {
		snprintf(msg, cap, "%s: %u KV blocks needed, %u free", name, n,
			 wl_kvpool_free_blocks(r->kv));
		err = -ENOSPC;
	} else {
		/* cannot fail: checked above */
		return wl_kvpool_reserve(r->kv, n, ids, r->kv_tag);
	}
	if (made) /* not a pool an earlier take of the request (out of contract) holds */
		drop_own_pool(r);
	return err;
}

/* Gives back those of the @n @ids the request holds: the ids come from the callable,
 * and one it never took, gave back already or that another request holds is left as
 * it is (it would otherwise overrun the pool's free stack or hand a block to two
 * requests). A private pool goes once all its blocks are back. */
static void kv_give(struct chipd_cl_req *cr, uint32_t n, const int32_t *ids)
{
	struct wl_req *r = req_of(cr);

	if (!r->kv || !ids)
		return;
	wl_kvpool_release(r->kv, n, ids, r->kv_tag);
	if (r->own_kv && wl_kvpool_idle(r->kv))
		drop_own_pool(r);
}

static void kv_pool(const struct chipd_cl_req *cr, struct chipd_cl_kv *out)
{
	const struct wl_req *r = req_of(cr);

	if (!r->kv) { /* a private pool not made yet, or gone with its blocks */
		*out = (struct chipd_cl_kv){0};
		return;
	}
	*out = (struct chipd_cl_kv){wl_kvpool_base(r->kv), wl_kvpool_blocks(r->kv),
				    wl_kvpool_block_floats(r->kv)};
}

/* Whether a task on @lane after task @dep (< 0: none; below st->n) keeps to the lane
 * of the request being built: a task on another request's lane, or after another
 * lane's task, would fail the whole step (wl_exec_launch), every request of it, and
 * count toward the scheduler's give-up; refused here, it fails its own build only. */
static bool lane_ok(const struct wl_step *st, uint32_t lane, int dep)
{
	return (!st->building || lane == st->building - 1) &&
	       (dep < 0 || st->tasks[dep].lane == lane);
}

/* A launch whose shape the device layer refuses (dev_kcall_check: a dimension out of
 * range, a NULL pointer) is the callable's bug. Queued, the device layer would refuse
 * it on S, failing the lane as a device error does; refused here, on O, it fails its
 * own build only (internal) and never reaches the device or its health. */
static int host_launch(struct chipd_cl_step *cst, uint32_t lane, int kernel, const void *args,
		       size_t args_size, int dep)
{
	struct wl_step *st = step_of(cst);
	struct dev_kcall call;

	/* no arguments: copying them into the task would crash O, the worker's builder */
	if (!args || kernel < 0 || kernel >= DEV_K_COUNT ||
	    args_size != dev_kcall_args_size((enum dev_kernel)kernel) || dep >= (int)st->n ||
	    !lane_ok(st, lane, dep))
		return -EINVAL;
	call.kernel = (enum dev_kernel)kernel;
	memcpy(&call.u, args, args_size); /* the kernel's member whole: all the check reads */
	if (dev_kcall_check(&call, st->why, sizeof(st->why)) != 0)
		return -EINVAL;
	return wl_add_launch_args(st, lane, (enum dev_kernel)kernel, args, args_size, dep);
}

/* Whether a copy of @n bytes to @dst keeps out of the step's host arena but for the
 * token and payload of the request being built: the arena holds the step's tasks and
 * the other requests' tokens and arguments, and a copy past its token would change
 * another request's token (or task) while the step runs. */
static bool copy_dst_ok(const struct wl_step *st, const void *dst, size_t n)
{
	uintptr_t d = (uintptr_t)dst, lo = st->host->base, hi = lo + st->host->cap;
	uintptr_t tok = (uintptr_t)st->token;

	if (n == 0 || d >= hi || (n <= UINTPTR_MAX - d && d + n <= lo))
		return true; /* nothing of the arena */
	return st->token && d >= tok && n <= st->token_len && d - tok <= st->token_len - n;
}

static int host_copy_task(struct chipd_cl_step *cst, uint32_t lane, void *dst, const void *src,
			  size_t n, enum chipd_cl_copy kind, int dep)
{
	struct wl_step *st = step_of(cst);

	/* a NULL end would only be refused when the step is queued, failing the step's
	 * lane as the device would (dev_copy): refused here, the build fails alone */
	if (!copy_kind_ok(kind) || (n && (!dst || !src)) || !copy_dst_ok(st, dst, n) ||
	    dep >= (int)st->n || !lane_ok(st, lane, dep))
		return -EINVAL;
	return wl_add_copy(st, lane, dst, src, n, (enum dev_copy_kind)kind, dep);
}

/* Device scratch is aligned as dev_alloc's memory is, for coalesced loads. */
#define SCRATCH_ALIGN 256u

static void *host_scratch(struct chipd_cl_step *cst, size_t n)
{
	return wl_arena_alloc(step_of(cst)->dev, n, SCRATCH_ALIGN);
}

static uint32_t host_room(const struct chipd_cl_step *cst)
{
	const struct wl_step *st = step_of(cst);

	return st->cap - st->n;
}

/* The ABI's launch geometry is the device layer's, field for field. */
_Static_assert(sizeof(struct chipd_cl_dims) == sizeof(struct dev_dims) &&
		   offsetof(struct chipd_cl_dims, block) == offsetof(struct dev_dims, block) &&
		   offsetof(struct chipd_cl_dims, shared_bytes) ==
		       offsetof(struct dev_dims, shared_bytes),
	       "launch geometry");

static int host_launch_own(struct chipd_cl_step *cst, struct chipd_cl_req *cr, uint32_t lane,
			   uint32_t index, const struct chipd_cl_dims *cdims, const void *args,
			   int dep)
{
	struct wl_step *st = step_of(cst);
	const struct wl_req *r;
	const struct dev_func *fn;
	struct dev_dims dims;
	char msg[DEV_ERRMSG_MAX];

	if (!cr || !cdims || !args || dep >= (int)st->n || !lane_ok(st, lane, dep))
		return -EINVAL;
	r = req_of(cr);
	if (index >= r->wc->nkernels)
		return -EINVAL;
	memcpy(dims.grid, cdims->grid, sizeof(dims.grid));
	memcpy(dims.block, cdims->block, sizeof(dims.block));
	dims.shared_bytes = cdims->shared_bytes;
	if (dev_dims_check(&dims, msg, sizeof(msg)) != 0)
		return -EINVAL;
	fn = wl_kernels_func(r->wc, r->dev, index);
	if (!fn)
		return -ENODEV; /* not loaded on this device: refused at reserve already */
	return wl_add_func(st, lane, fn, &dims, args, r->wc->kargs[index], dep);
}

const struct chipd_cl_host wl_host = {
    .abi = CHIPD_CALLABLE_ABI,
    .size = sizeof(struct chipd_cl_host),
    .kernel = host_kernel,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .dev_alloc = host_dev_alloc,
    .dev_free = host_dev_free,
    .copy = host_copy,
    .kv_take = kv_take,
    .kv_give = kv_give,
    .kv_pool = kv_pool,
    .launch = host_launch,
    .copy_task = host_copy_task,
    .scratch = host_scratch,
    .room = host_room,
    .launch_own = host_launch_own,
};
