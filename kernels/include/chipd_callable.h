/* chipd_callable.h - the callable ABI: a workload chipd loads from a shared library.
 *
 * A callable is a shared library exporting one function, CHIPD_CALLABLE_ENTRY
 * ("chipd_callable_v2"), that returns a pointer to a constant struct chipd_callable:
 * its ABI version, name, parameters and hooks. chipd loads it with
 * dlopen(RTLD_NOW | RTLD_LOCAL), calls init once, then drives each request through
 * the hooks, which mirror a chip worker's request life cycle:
 *
 *   check    the parameters, with no device (ranges are checked by chipd first)
 *   steps    how many steps (= tokens) a request makes
 *   cost     what a request holds at its peak, declared up front so that admission
 *            can refuse it before anything is reserved
 *   reserve  the cheap half: host records, KV blocks (host->kv_take)
 *   fill     the costly half: device memory and its contents (may run on a thread
 *            of its own while other requests use the KV pool)
 *   build    append step @step's tasks (launches, copies, with dependencies) to a
 *            step under construction, allocating scratch from the step's arenas;
 *            its last task writes the step's token where @token points
 *   release  free everything reserve and fill made, filled or not
 *   ref      optional: the tokens of the first n steps computed on the CPU
 *
 * The callable sees nothing of chipd but this header and chipd_kcall.h (the built-in
 * kernels' argument structs): every device action goes through the function table
 * struct chipd_cl_host, so one callable runs on the sim device and on GPUs alike.
 * Hooks return 0 or a negative errno and, where they take one, put a one-line message
 * in @msg (cap bytes). A request is used by one thread at a time, except that the
 * thread reading tokens may differ from the one building (chipd orders them).
 *
 * Compatibility: CHIPD_CALLABLE_ABI changes whenever a struct here or in
 * chipd_kcall.h changes layout or meaning; chipd refuses a callable of another
 * version. Fields marked reserved must be zero (NULL).
 */
#ifndef CHIPD_CALLABLE_H
#define CHIPD_CALLABLE_H

#include "chipd_kcall.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHIPD_CALLABLE_ABI 2
/* The symbol chipd looks up, and its type. A library exporting only an older entry
 * ("chipd_callable_v1") is refused as built for an older ABI. */
#define CHIPD_CALLABLE_ENTRY "chipd_callable_v2"

/* Limits a callable's table must keep (a longer name, key or doc is refused). */
#define CHIPD_CL_NAME_MAX   24 /* name and parameter keys, NUL included: [a-z0-9_] */
#define CHIPD_CL_PARAMS_MAX 16
#define CHIPD_CL_DOC_MAX    128 /* one line of printable ASCII, NUL included */
#define CHIPD_CL_KERNELS_MAX 32	     /* a callable's own kernels */
#define CHIPD_CL_KARGS_MAX   4096    /* bytes of one own kernel's argument struct */
#define CHIPD_CL_PAYLOAD_MAX 24	     /* bytes a token record carries beside the token */
#define CHIPD_CL_INPUT_MAX   (1u << 20) /* bytes of input one request may carry */
#define CHIPD_CL_OUTPUT_MAX  (1u << 20) /* bytes of a request's output blob */

enum chipd_cl_param_type {
	CHIPD_CL_INT64 = 0, /* the only type */
};

/* One parameter: a request's value is @def when absent, else within [lo, hi]. */
struct chipd_cl_param {
	const char *key;
	uint32_t type; /* enum chipd_cl_param_type */
	int64_t def, lo, hi;
	const char *doc; /* its meaning, and any rule tying it to another parameter */
};

/* What a request holds at its peak, known from its parameters alone. */
struct chipd_cl_cost {
	uint64_t host_bytes;	  /* host memory of its records and staging buffers */
	uint64_t dev_bytes;	  /* device memory, the KV blocks aside */
	uint64_t kv_blocks;	  /* KV blocks it takes (host->kv_take) ... */
	uint32_t kv_block_floats; /* ... each of at least this many floats */
};

/* Opaque to the callable: a step under construction (chipd's). */
struct chipd_cl_step;

/* The KV pool a request's blocks come from: block b starts at base + b * block_floats
 * floats (device memory); valid ids are 0..blocks-1. */
struct chipd_cl_kv {
	float *base;
	uint32_t blocks, block_floats;
};

struct chipd_cl_host;

/* One request. chipd owns it; the callable reads cfg and keeps its state in @state. */
struct chipd_cl_req {
	const struct chipd_cl_host *host;
	const int64_t *cfg; /* the parameters, in the order of the callable's table */
	uint32_t steps;	    /* steps (= tokens) in all (the steps hook's answer) */
	uint32_t input_len; /* bytes at @input: 0..the table's input_max */
	const void *input;  /* the request's input bytes: chipd's private copy, host
			     * memory, unchanged from reserve to release (NULL when none) */
	void *state;	    /* the callable's, set by reserve */
	void *chipd;	    /* chipd's; the callable leaves it alone */
};

/* One of the callable's own kernels (see struct chipd_callable, kernels). */
struct chipd_cl_kernel {
	const char *name;   /* [a-z0-9_], shorter than CHIPD_CL_NAME_MAX: its symbol in
			     * the kernel files (extern "C" in HIP/CUDA source) */
	uint32_t args_size; /* 1..CHIPD_CL_KARGS_MAX: its one parameter, a struct passed
			     * by value, as the launch passes it */
};

/* The launch geometry of an own kernel: blocks in the grid, threads in a block,
 * dynamic shared memory in bytes. */
struct chipd_cl_dims {
	uint32_t grid[3], block[3];
	uint32_t shared_bytes;
};

/* An own kernel's sim form, exported by the callable's kernels_sim library under the
 * kernel's name: chipd calls it once per block of the grid, in order, on the sim
 * stream the launch was issued on; it runs the block's threads itself. */
typedef void (*chipd_cl_sim_kernel_fn)(const void *args, const struct chipd_cl_dims *dims,
				       const uint32_t block[3]);

/* Directions of copies. */
enum chipd_cl_copy { CHIPD_CL_H2D = 0, CHIPD_CL_D2H = 1, CHIPD_CL_D2D = 2 };

/* The device API chipd gives a callable. Every function returns 0 or a negative
 * errno unless it says otherwise. */
struct chipd_cl_host {
	uint32_t abi;  /* CHIPD_CALLABLE_ABI */
	uint32_t size; /* sizeof(struct chipd_cl_host) of chipd's build */

	/* A kernel's handle by name ("gemm", "embed", ...: chipd_kcall.h's catalogue,
	 * the names of enum dev_kernel without DEV_K_, lower case), or -ENOENT. */
	int (*kernel)(const char *name);

	/* Host memory counted as the request's (zeroed; NULL when there is none). */
	void *(*host_alloc)(struct chipd_cl_req *r, size_t n);
	void (*host_free)(struct chipd_cl_req *r, void *p, size_t n); /* NULL: no-op */
	/* Device memory counted as the request's (256-byte aligned), and its release
	 * after the request's work completed (NULL: no-op). */
	int (*dev_alloc)(struct chipd_cl_req *r, size_t n, void **out);
	void (*dev_free)(struct chipd_cl_req *r, void *p);
	/* A synchronous copy (reserve, fill: not inside a step). */
	int (*copy)(struct chipd_cl_req *r, void *dst, const void *src, size_t n,
		    enum chipd_cl_copy kind);

	/* Takes @n KV blocks of at least @block_floats floats for @r into @ids: from the
	 * worker's shared pool, or a private pool made for the request. -ENOSPC (too few
	 * free), -EINVAL (the pool's blocks are smaller, or a private pool of that size
	 * would be over the largest, 2^40 bytes), -ENOMEM; message in @msg.
	 * Nothing is held after an error. Once per request. */
	int (*kv_take)(struct chipd_cl_req *r, uint32_t n, uint32_t block_floats, int32_t *ids,
		       char *msg, size_t cap);
	/* Gives back the @n blocks of kv_take (in release). An id the request does not
	 * hold (never taken, given back already, another request's) is left as it is. */
	void (*kv_give)(struct chipd_cl_req *r, uint32_t n, const int32_t *ids);
	/* The pool the request's blocks come from (after kv_take; zeroes while the
	 * request has no pool: a private one not made yet, or gone). */
	void (*kv_pool)(const struct chipd_cl_req *r, struct chipd_cl_kv *out);

	/* Building a step. A task runs after the task @dep of the same step (its index
	 * as returned by launch or copy), or after none when @dep < 0. -ENOBUFS when the
	 * step is full: build returns it, and chipd rolls the step back and retries the
	 * request in a later step. */
	int (*launch)(struct chipd_cl_step *st, uint32_t lane, int kernel, const void *args,
		      size_t args_size, int dep);
	int (*copy_task)(struct chipd_cl_step *st, uint32_t lane, void *dst, const void *src,
			 size_t n, enum chipd_cl_copy kind, int dep);
	/* @n bytes of device scratch for this step (256-byte aligned), or NULL. */
	void *(*scratch)(struct chipd_cl_step *st, size_t n);
	/* Tasks the step still has room for. */
	uint32_t (*room)(const struct chipd_cl_step *st);

	/* Launches the callable's own kernel @index (in its table's kernels) for request
	 * @r with @dims; @args holds the kernel's args_size bytes. -EINVAL for an index,
	 * or dims (a zero, or more than the device allows), out of range; -ENOBUFS as
	 * launch. */
	int (*launch_own)(struct chipd_cl_step *st, struct chipd_cl_req *r, uint32_t lane,
			  uint32_t index, const struct chipd_cl_dims *dims, const void *args,
			  int dep);
};

struct chipd_callable {
	uint32_t abi;	  /* CHIPD_CALLABLE_ABI */
	uint32_t version; /* the callable's own version, shown by chipd */
	const char *name; /* [a-z0-9_], shorter than CHIPD_CL_NAME_MAX */
	const char *doc;  /* one line: what a step computes */
	const struct chipd_cl_param *params;
	uint32_t nparams; /* at most CHIPD_CL_PARAMS_MAX */
	uint32_t token_bytes; /* 4: a step's token is an int32_t */

	/* Data in and out (0: none). A request's input bytes (at most input_max) reach
	 * the hooks as r->input; a step writes payload_bytes right after its token, and
	 * its token record carries them; the output hook writes at most output_max
	 * bytes of output once the last token was read. */
	uint32_t payload_bytes; /* 0..CHIPD_CL_PAYLOAD_MAX */
	uint32_t input_max;	/* 0..CHIPD_CL_INPUT_MAX */
	uint32_t output_max;	/* 0..CHIPD_CL_OUTPUT_MAX */

	/* Its own kernels (NULL and 0: none), launched with host->launch_own. Their code
	 * lies in files beside the callable's library (file names without '/'): for the
	 * sim device a shared object exporting each kernel as a chipd_cl_sim_kernel_fn,
	 * for AMD GPUs a code object (hipcc --genco), for NVIDIA GPUs a cubin or fatbin.
	 * The worker loads the one its device needs on every chip; a file or a kernel
	 * missing there refuses the callable, naming it. NULL: no code for that device,
	 * and the callable is refused on it. */
	const struct chipd_cl_kernel *kernels;
	uint32_t nkernels; /* 0..CHIPD_CL_KERNELS_MAX */
	const char *kernels_sim, *kernels_amd, *kernels_nvidia;
	uint64_t reserved[4];

	/* Once per process that loads the library, with no device open: for --callables
	 * in chipd's supervisor before it forks the workers (which inherit what init set
	 * up); for a registered callable in the supervisor, then in each worker's load.
	 * A failure refuses the callable with its message. NULL: nothing to do. */
	int (*init)(const struct chipd_cl_host *host, char *msg, size_t cap);
	/* Checks between parameters (ranges are checked already); NULL: none. */
	int (*check)(const int64_t *cfg, char *msg, size_t cap);
	uint32_t (*steps)(const int64_t *cfg);
	void (*cost)(const int64_t *cfg, struct chipd_cl_cost *out);
	int (*reserve)(struct chipd_cl_req *r, char *msg, size_t cap);
	int (*fill)(struct chipd_cl_req *r, char *msg, size_t cap);
	/* Appends step @step (0, 1, ... in order); its last task writes the token to
	 * @token (token_bytes of host memory in the step's arena). */
	int (*build)(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		     uint32_t step, void *token);
	void (*release)(struct chipd_cl_req *r);
	int (*ref)(const int64_t *cfg, uint64_t *tokens, uint32_t n);
	/* Once the last step's token was read: writes the request's output blob, at most
	 * @cap bytes (the smaller of output_max and what the client made room for), to
	 * @buf and its length to *@len. Host memory only: device results reach host
	 * memory through a copy task of a step. NULL (or output_max 0): no output. */
	int (*output)(struct chipd_cl_req *r, void *buf, uint32_t cap, uint32_t *len, char *msg,
		      size_t msgcap);
};

typedef const struct chipd_callable *(*chipd_callable_entry_fn)(void);

/* What a callable defines (visible even when built with -fvisibility=hidden). */
#define CHIPD_CALLABLE_EXPORT __attribute__((visibility("default")))

/* The entry a callable defines: its table, the same pointer on every call. */
CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void);

#ifdef __cplusplus
}
#endif

#endif
