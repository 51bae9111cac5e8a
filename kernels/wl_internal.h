/* wl_internal.h - what wl.c, wl_host.c and wl_load.c share (private to kernels/). */
#ifndef CHIPD_KERNELS_WL_INTERNAL_H
#define CHIPD_KERNELS_WL_INTERNAL_H

#include "chipd_callable.h"
#include "wl.h"

#include <stdatomic.h>

_Static_assert(WL_PARAMS_MAX == CHIPD_CL_PARAMS_MAX && WL_KEY_MAX == CHIPD_CL_NAME_MAX &&
		   WL_NAME_MAX == CHIPD_CL_NAME_MAX &&
		   WL_DOC_MAX == CHIPD_CL_DOC_MAX,
	       "a callable's table fits the workload interface's limits");

/* A file name of a callable's kernels: shorter than this, without '/'. */
#define WL_KFILE_MAX 256

/* A loaded callable: its table (checked once at load, wl_load.c) and the parameter
 * rows wl_param_table shows. */
struct wl_callable {
	const struct chipd_callable *cl;
	void *dl;		       /* dlopen handle */
	char name[CHIPD_CL_NAME_MAX];  /* its workload name: the table's, or the one given */
	_Atomic uint32_t users;	       /* requests reserved and not destroyed (wl.c) */
	char path[WL_PATH_MAX];
	struct wl_file_id file; /* the file at @path when it was loaded */
	struct wl_param_info info[CHIPD_CL_PARAMS_MAX];
	/* its own kernels, copied from the table once checked (wl_load.c) */
	uint32_t nkernels;
	char knames[CHIPD_CL_KERNELS_MAX][CHIPD_CL_NAME_MAX];
	uint32_t kargs[CHIPD_CL_KERNELS_MAX]; /* args_size of each */
	char kfile[3][WL_KFILE_MAX];	      /* sim, amd, nvidia: "" when none */
	/* loaded by wl_load_dir (chipd's start, --callables), not registered at run time
	 * (wl_load_file): the one kind whose tiny fills a worker may run on its mailbox
	 * thread (docs/callables.md, fill) */
	bool at_start;
};

/* Owned by root or by us, not writable by group or others: the file @path (a regular
 * file, not followed if a link) or the directory. 0, or -ENOENT / -EPERM with
 * "@kind @path: why" in @msg (wl_load.c). */
int wl_path_ok(const char *kind, const char *path, bool dir, char *msg, size_t cap);

/* The function of kernel @index of @wc on @d, or NULL when its kernels are not loaded
 * there (wl_kern.c). */
const struct dev_func *wl_kernels_func(const struct wl_callable *wc, struct dev *d,
				       uint32_t index);
/* Frees every kernel binding of @wc (unloading the modules), when it is unloaded. */
void wl_kernels_free(struct wl_callable *wc);

/* The loaded callable named @name, or NULL. Loads the default directory first when
 * nothing was loaded yet (wl_load.c). */
const struct wl_callable *wl_find(const char *name);

struct wl_req {
	struct chipd_cl_req pub; /* what the callable sees; pub.chipd points here */
	const struct wl_callable *wc;
	struct dev *dev;
	struct wl_kvpool *kv;
	bool own_kv; /* a private pool: gone once its blocks are back, or with the request */
	uint64_t kv_tag; /* its blocks' holder in the pool: unique, nonzero */
	int64_t cfg[WL_PARAMS_MAX];
	void *input; /* the private copy of the request's input (pub.input), or NULL */
	uint32_t out_cap; /* its output's bound: min(output_max, output_cap); 0: none */
	/* Steps built so far: written by the one thread that builds (release), read by
	 * the thread that reads tokens (acquire), which may be another one. */
	_Atomic uint32_t built;
	uint32_t read; /* tokens read; the token reader's own */
	bool filled;
	/* What the request holds (wl_req_usage), kept by the host functions; used by the
	 * one thread that reserves, fills or releases at a time. */
	uint64_t host_now, host_peak, dev_bytes;
};

/* The device API given to every callable (wl_host.c). */
extern const struct chipd_cl_host wl_host;

/* Appends a task to @st on @lane depending on task @dep (or none if @dep < 0).
 * Returns its index, or -ENOBUFS. */
int wl_add_copy(struct wl_step *st, uint32_t lane, void *dst, const void *src, size_t n,
		enum dev_copy_kind kind, int dep);
/* A launch of @kernel, its arguments (@size bytes, checked by the caller against
 * dev_kcall_args_size) copied straight into the task. */
int wl_add_launch_args(struct wl_step *st, uint32_t lane, enum dev_kernel kernel,
		       const void *args, size_t size, int dep);

/* A launch of a callable's own kernel @fn with @dims, its @size bytes of arguments
 * copied into @st's host arena. Returns its index, or -ENOBUFS. */
int wl_add_func(struct wl_step *st, uint32_t lane, const struct dev_func *fn,
		const struct dev_dims *dims, const void *args, uint32_t size, int dep);

/* Takes @n blocks from @kp into @ids for the request tagged @holder (nonzero; -ENOSPC,
 * nothing taken, if fewer are free), and gives back those of @n @ids that @holder
 * holds (any other id is left as it is: a callable's mistake). */
int wl_kvpool_reserve(struct wl_kvpool *kp, uint32_t n, int32_t *ids, uint64_t holder);
void wl_kvpool_release(struct wl_kvpool *kp, uint32_t n, const int32_t *ids, uint64_t holder);
/* Whether every block of @kp is free. */
bool wl_kvpool_idle(const struct wl_kvpool *kp);
float *wl_kvpool_base(const struct wl_kvpool *kp);
uint32_t wl_kvpool_blocks(const struct wl_kvpool *kp);
uint32_t wl_kvpool_block_floats(const struct wl_kvpool *kp);

#endif
