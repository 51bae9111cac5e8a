/* wl.h - workloads: what a request computes, step by step, on a device.
 *
 * A worker drives a request through this interface (docs/architecture.md, "worker/"):
 *
 *   wl_validate       the request's parameters, before anything is reserved
 *   wl_cost           validate, then what the request will hold (host and device
 *                     bytes, KV blocks, steps), from the parameters alone
 *   wl_req_create     validate, then reserve: weights, the KV blocks of the whole
 *                     request (from a shared wl_kvpool, or a private one); in two
 *                     halves for a caller that fills off its own thread:
 *                     wl_req_reserve (cheap: the KV blocks) and wl_req_fill (the
 *                     device memory and its contents)
 *   wl_req_build      append the request's next step to a step under construction:
 *                     tasks (launches, copies) with dependencies, written into the
 *                     caller's arenas (host: descriptors; device: scratch)
 *   (the step runs)   wl_exec_run, or the worker's own scheduler
 *   wl_req_token      the step's token, read from where the build said it lands
 *
 * Steps of one request run in build order, each after the previous one completed;
 * a request may be built for step i+1 before step i's token was read, since each
 * step reads the previous token on the device.
 *
 * The workloads are callables (chipd_callable.h, docs/callables.md): shared libraries
 * loaded once per process (wl_load_dir, before any thread uses them), whose hooks this
 * interface drives. Built in, and loaded the same way from the built-ins' directory:
 * "paged_attention" (multi-layer decode over a paged KV cache), "gemm" (a chain of
 * matrix products per step), "synthetic" (configurable host and device cost per step).
 * Each workload's parameters are one table (wl_param_table, from the callable's): the
 * validator checks against it, the supervisor's "workloads" op answers it, and
 * docs/protocol.md §8.6 documents the built-ins' (a test compares the two).
 */
#ifndef CHIPD_KERNELS_WL_H
#define CHIPD_KERNELS_WL_H

#include "device.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- parameters: string keys, integer values ---- */

#define WL_PARAMS_MAX 16
#define WL_KEY_MAX    24 /* including the terminating NUL */
#define WL_NAME_MAX   24 /* a workload's name, NUL included */
#define WL_MSG_MAX    160

struct wl_param {
	char key[WL_KEY_MAX];
	int64_t value;
};

struct wl_params {
	unsigned n;
	struct wl_param v[WL_PARAMS_MAX];
	/* the request's input bytes (NULL, 0: none), wl_params_set_input */
	const void *input;
	uint32_t input_len;
	uint32_t output_cap; /* room the client made for the output (0: none) */
};

/* Empties @p. */
void wl_params_init(struct wl_params *p);

/* Gives the request @len input bytes at @data (NULL, 0: none). The bytes must stay
 * put until wl_req_reserve returned, which keeps a copy of its own for the request's
 * life; the validation refuses more than the callable's input_max. */
void wl_params_set_input(struct wl_params *p, const void *data, uint32_t len);

/* Asks for the request's output, at most @cap bytes (0: none): the validation
 * refuses it for a callable that writes none (output_max 0 or no output hook). */
void wl_params_set_output(struct wl_params *p, uint32_t cap);

/* Sets @key to @value, replacing an earlier value. -EINVAL for an empty key or one
 * of WL_KEY_MAX bytes or more, -ENOSPC when WL_PARAMS_MAX keys are set. */
int wl_params_set(struct wl_params *p, const char *key, int64_t value);

/* Looks @key up; true and *@out set if present. */
bool wl_params_get(const struct wl_params *p, const char *key, int64_t *out);

/* Adds "key=value[,key=value...]" (decimal values) to @p. -EINVAL with a message
 * naming the bad item; @p may then hold the items before it. */
int wl_params_parse(struct wl_params *p, const char *text, char *msg, size_t cap);

/* ---- arenas: bump allocators the caller owns and resets ---- */

struct wl_arena {
	uintptr_t base;
	size_t cap, used;
};

/* An arena over [@base, @base + @cap): host memory, or device memory from dev_alloc
 * (only addresses are computed; the arena never touches the bytes). */
void wl_arena_init(struct wl_arena *a, void *base, size_t cap);

/* @size bytes aligned to @align (a power of two), or NULL when they do not fit. */
void *wl_arena_alloc(struct wl_arena *a, size_t size, size_t align);

/* Forgets every allocation. */
void wl_arena_reset(struct wl_arena *a);

/* ---- steps: tasks with dependencies ---- */

enum wl_task_kind { WL_TASK_LAUNCH, WL_TASK_COPY, WL_TASK_FUNC };

#define WL_TASK_DEPS 4

struct wl_task {
	enum wl_task_kind kind;
	uint32_t lane;		     /* stream hint: the tasks of one request share a lane */
	uint32_t ndeps;		     /* 0..WL_TASK_DEPS */
	uint32_t deps[WL_TASK_DEPS]; /* indices of earlier tasks of the same step */
	union {
		struct dev_kcall call;
		struct {
			void *dst;
			const void *src;
			size_t n;
			enum dev_copy_kind kind;
		} copy;
		struct { /* a callable's own kernel (dev_launch_func) */
			const struct dev_func *fn;
			struct dev_dims dims;
			const void *args; /* size bytes in the step's host arena */
			uint32_t size;
		} func;
	} u;
};

/* Queues task @t on stream @s of @d: a launch, a copy or a function. */
int wl_task_queue(struct dev *d, struct dev_stream *s, const struct wl_task *t);

/* The arguments checks the device layer makes before it queues @t (dev_kcall_check,
 * dev_copy's, dev_launch_func's), with no device: 0, or -EINVAL with a message naming
 * the field in @msg (may be NULL). A task it refuses is its builder's fault, never
 * the device's. */
int wl_task_check(const struct wl_task *t, char *msg, size_t cap);

/* One step under construction: a task array in @host plus the two arenas that the
 * builds allocate from. */
struct wl_step {
	struct wl_task *tasks;
	uint32_t n, cap;
	struct wl_arena *host, *dev;
	/* the lane + 1 of the request whose build appends now (wl_req_build), whose
	 * tasks the host calls keep to that lane; 0: none */
	uint32_t building;
	/* that request's token and payload in @host: the one place of the host arena a
	 * copy task of its build may write */
	const void *token;
	size_t token_len;
	/* why the host refused a launch of the build under way (the device layer's
	 * check, e.g. "spin: ns 3601000000000 above an hour"); empty: none. For the
	 * worker's log line of a failed build. */
	char why[WL_MSG_MAX];
};

/* Starts an empty step with room for @max_tasks tasks taken from @host. @dev is the
 * device arena for scratch. -ENOBUFS when @host cannot hold the task array. */
int wl_step_init(struct wl_step *st, struct wl_arena *host, struct wl_arena *dev,
		 uint32_t max_tasks);

/* ---- KV block pools ---- */

struct wl_kvpool;

/* The largest KV pool, in bytes of device memory: 1 TiB, more than any device holds
 * (chipd's own largest, --kv-blocks at its bound, is 16 GiB). */
#define WL_KVPOOL_BYTES_MAX (UINT64_C(1) << 40)

/* The device bytes of a pool of @nblocks blocks of @block_floats floats
 * (@nblocks x @block_floats x 4, computed without overflow), or 0 when either is 0 or
 * the size is over WL_KVPOOL_BYTES_MAX (or what a size_t holds). */
uint64_t wl_kvpool_bytes(uint32_t nblocks, uint32_t block_floats);
/* A pool of @nblocks blocks of @block_floats floats each in device memory of @d.
 * Blocks are handed out in a scattered order so that no request's cache is
 * contiguous by accident. The pool is used by one thread at a time. -EINVAL for 0
 * blocks, 0 floats or more than INT32_MAX blocks; -EOVERFLOW, nothing allocated, for
 * a size wl_kvpool_bytes refuses. */
int wl_kvpool_create(struct wl_kvpool **out, struct dev *d, uint32_t nblocks,
		     uint32_t block_floats);
/* Frees the pool; all blocks must have been released. NULL is a no-op. */
void wl_kvpool_destroy(struct wl_kvpool *kp);
/* Free blocks now. */
uint32_t wl_kvpool_free_blocks(const struct wl_kvpool *kp);

/* ---- requests ---- */

struct wl_env {
	struct dev *dev;
	struct wl_kvpool *kv; /* NULL: the request reserves a private pool */
};

/* Where a built step leaves its token and, right after it, its payload (host memory
 * in the step's host arena): payload_len bytes, the callable's payload_bytes. */
struct wl_out {
	const int32_t *token;
	const uint8_t *payload;
	uint32_t payload_len;
	uint32_t step;
};

struct wl_req;

/* ---- callables: where the workloads come from (wl_load.c) ---- */

/* At most this many workloads are loaded unless wl_set_limit says otherwise (chipd
 * --max-callables). */
#define WL_WORKLOADS_DEFAULT 64
#define WL_PATH_MAX	     4096

/* Loads every "*.so" of @dir, in name order, all or nothing: the directory and each
 * file must be owned by root or by this process's effective user and not writable by
 * group or others, each file regular (not a link); each is dlopen'ed RTLD_NOW |
 * RTLD_LOCAL, its entry chipd_callable_v2 called and its table checked (ABI version,
 * names, parameters, hooks), then its init hook run. Errors, with a message naming the
 * file: -ENOENT (no such directory, or no callable in it), -EPERM (owner or mode),
 * -EINVAL (not loadable, no entry, a bad table, an ABI mismatch, init failed: its
 * message), -EEXIST (a name already loaded), -ENOSPC (more than the limit,
 * wl_set_limit). */
int wl_load_dir(const char *dir, char *msg, size_t cap);

/* Loads the one callable at the absolute @path under @name (NULL: the name its table
 * gives), with wl_load_dir's checks and errors, its directory's included (-EINVAL also
 * for a relative path or a bad @name). Thread-safe: requests of other workloads go on meanwhile. */
int wl_load_file(const char *path, const char *name, char *msg, size_t cap);

/* Which file a callable was loaded from: the same path may name another file later
 * (replaced: another inode) or the same file rewritten (its size or mtime). */
struct wl_file_id {
	uint64_t dev, ino, size;
	int64_t mtime_ns;
};

/* wl_load_file, and the loaded file's identity in *@got (NULL: not wanted); with @want
 * (NULL: any file) the file at @path must still be that one, else -ESTALE ("the file
 * is not the one registered ..."): a registered callable's chips load what the
 * supervisor loaded, or nothing. A file that changed between the checks and the load
 * is refused -ESTALE too. */
int wl_load_file_as(const char *path, const char *name, const struct wl_file_id *want,
		    struct wl_file_id *got, char *msg, size_t cap);

/* Unloads workload @name (dlclose): -ENOENT when none is loaded, -EBUSY while a
 * request of it is reserved and not destroyed; message in @msg. Thread-safe. */
int wl_unload(const char *name, char *msg, size_t cap);

/* Sets the most workloads that may be loaded (default WL_WORKLOADS_DEFAULT); -EINVAL
 * for 0 or fewer than are loaded. */
int wl_set_limit(unsigned n);

/* Workloads loaded now. */
unsigned wl_count(void);

/* The built-ins' directory: ${libdir}/chipd/callables relative to the running
 * executable when it is installed, else the build tree's. */
void wl_default_dir(char *buf, size_t cap);

/* A callable's own kernels on a device (wl_kern.c): a worker loads them on its device
 * for every callable that has some, once the callable is loaded (at start, at a
 * registration, at a replay), and unloads them before it unloads the callable or
 * closes the device. wl_kernels_attach loads the file the table names for @d's kind
 * from the callable's directory (owner and mode checked as the callable's) and
 * resolves every kernel: -ENOENT (no file for this device kind, no such file, a kernel
 * missing), -EPERM (owner or mode), -EINVAL (not loadable), with a message naming the
 * file and the kernel. 0 at once for a callable without kernels or one attached
 * already. Thread-safe. */
int wl_kernels_attach(const char *workload, struct dev *d, char *msg, size_t cap);
/* Unloads @workload's kernels from @d (its work must have completed); no-op if none. */
void wl_kernels_detach(const char *workload, struct dev *d);
/* Unloads every callable's kernels from @d (before dev_close). */
void wl_kernels_detach_all(struct dev *d);
/* What a node of @kind's devices can check of every loaded callable's kernels before
 * any device is open (chipd at start): the file for @kind named, present and safe;
 * for the sim, also loaded (on a sim device of its own, closed again) with every
 * kernel found. wl_kernels_attach's errors and messages, for the first refusal. */
int wl_kernels_check(enum dev_kind kind, char *msg, size_t cap);

/* Whether any callable was loaded (wl_load_dir, or the built-ins on first use). */
bool wl_loaded(void);

/* A loaded workload's own version and the file it came from; -ENOENT if unknown. */
int wl_callable_info(const char *workload, uint32_t *version, const char **path);

/* Names of the loaded workloads in load order, NULL-terminated: valid until the next
 * load or unload (use it on the thread that loads and unloads). When nothing was
 * loaded, this and every function below that takes a workload's name first load the
 * default directory (wl_default_dir), once; a failure is printed on stderr and leaves
 * no workloads. */
const char *const *wl_names(void);
/* A parameter's or a workload's one-line description, NUL included. */
#define WL_DOC_MAX 128

/* One parameter of a workload, as wl_validate checks it. @doc is one line of
 * printable ASCII, shorter than WL_DOC_MAX bytes: the parameter's meaning, and any
 * rule that ties it to another parameter. */
struct wl_param_info {
	const char *key;     /* 1..WL_KEY_MAX-1 characters of [a-z0-9_] */
	int64_t def, lo, hi; /* default (when absent) and the inclusive range */
	const char *doc;
};

/* The parameter table of @workload: *@out points at it (static storage, in the
 * workload's own order, which is also the order of its configuration) and its
 * number of entries is returned. -ENOENT if there is no such workload (*@out
 * untouched). */
int wl_param_table(const char *workload, const struct wl_param_info **out);

/* One line (printable ASCII, < WL_DOC_MAX bytes) saying what a step of @workload
 * computes, or NULL if there is no such workload. */
const char *wl_summary(const char *workload);

/* Writes "key=default [lo..hi], ..." for @workload into @buf (from wl_param_table;
 * cut short when @cap is too small). -ENOENT if unknown. */
int wl_describe(const char *workload, char *buf, size_t cap);

/* Checks @p for @workload without touching a device: unknown workload or key, a value
 * out of range or inconsistent with another. -EINVAL with a message that names the
 * parameter ("paged_attention: heads 6 is not a multiple of kv_heads 4"). */
int wl_validate(const char *workload, const struct wl_params *p, char *msg, size_t cap);

/* What a request costs, known from its parameters alone. Each bound is exact for the
 * built-in workloads (a test compares it with what wl_req_create reserves). */
struct wl_cost {
	/* host memory the request holds at its peak: its records and the staging
	 * buffers its fill uses for a while (wl_req_fill) */
	uint64_t host_bytes;
	/* device memory it allocates, besides the blocks of a shared KV pool */
	uint64_t dev_bytes;
	/* KV blocks it takes, each of at least kv_block_floats floats (0 and 0: none).
	 * From a shared pool they cost the pool's blocks; a private pool (wl_env.kv NULL)
	 * adds kv_blocks * kv_block_floats * sizeof(float) device bytes and
	 * kv_blocks * sizeof(int32_t) host bytes, plus the pool's own record. */
	uint64_t kv_blocks;
	uint32_t kv_block_floats;
	uint64_t steps; /* steps (= tokens) it makes in all */
};

/* Validates @p for @workload as wl_validate does (-EINVAL, message in @msg), then
 * fills *@out with the request's cost. Allocates nothing, touches no device; a few
 * microseconds for any parameters. */
int wl_cost(const char *workload, const struct wl_params *p, struct wl_cost *out, char *msg,
	    size_t cap);

/* Validates, then reserves what the request needs for its whole life (weights, its
 * prompt's KV cache filled, KV blocks for every token): wl_req_reserve, then
 * wl_req_fill. -EINVAL (bad parameters), -ENOSPC (the KV pool cannot hold it),
 * -ENOMEM, or a device error; message in @msg. */
int wl_req_create(struct wl_req **out, const struct wl_env *env, const char *workload,
		  const struct wl_params *p, char *msg, size_t cap);

/* The cheap half of wl_req_create: validates, makes the request's host records and
 * takes its KV blocks from the pool (or makes its private pool), and nothing else; time
 * linear in the blocks taken. The caller serialises it with every other user of the
 * pool. Errors as wl_req_create's, nothing held after one. The request cannot be
 * built before wl_req_fill succeeded. */
int wl_req_reserve(struct wl_req **out, const struct wl_env *env, const char *workload,
		   const struct wl_params *p, char *msg, size_t cap);

/* The costly half: allocates the request's device memory and fills it (weights, the
 * prompt's cache in its KV blocks): seconds for the largest requests. Touches no
 * pool bookkeeping, so it may run on a thread of its own while others use the pool.
 * -ENOMEM or a device error with a message in @msg; the request then still holds
 * what it had (wl_req_destroy releases it all). Once per request. */
int wl_req_fill(struct wl_req *r, char *msg, size_t cap);

/* What @r holds: host bytes at their peak so far, device bytes, KV blocks and steps,
 * in the terms of struct wl_cost. */
void wl_req_usage(const struct wl_req *r, struct wl_cost *out);

/* Releases everything the request holds (filled or only reserved). Its work must have
 * completed; the caller serialises it with the other users of the KV pool. NULL:
 * no-op. */
void wl_req_destroy(struct wl_req *r);

/* Steps (= tokens) the request makes in all, and how many were built so far. */
uint32_t wl_req_steps(const struct wl_req *r);
uint32_t wl_req_built(const struct wl_req *r);

/* The name of the workload @r is a request of (the name it was loaded under). */
const char *wl_req_workload(const struct wl_req *r);

/* Whether @r's callable was loaded at start (wl_load_dir), not registered at run time
 * (wl_load_file): a worker runs only such a callable's tiny fills on its mailbox
 * thread, every other fill on its loader (docs/callables.md, fill). */
bool wl_req_loaded_at_start(const struct wl_req *r);

/* Appends the request's next step to @st on lane @lane; *@out says where its token
 * will be. -ENOBUFS when @st's task array or an arena is full (nothing is appended
 * and the request does not advance), -ENODATA when every step was built. */
int wl_req_build(struct wl_req *r, struct wl_step *st, uint32_t lane, struct wl_out *out);

/* After the step of @out completed: its token. Steps' tokens must be read in order
 * (-EPROTO otherwise). One thread may build while another reads tokens. */
int wl_req_token(struct wl_req *r, const struct wl_out *out, uint64_t *token);

/* Once the request's last token was read: runs the callable's output hook into
 * private memory, at most min(output_max, the output_cap asked for) bytes, and copies
 * what it wrote to @dst; *@len says how much (0 without an output asked for). Returns
 * 0, the hook's error (-EMSGSIZE: the output does not fit), -EPROTO when the hook
 * says it wrote more than it may, or -ENOMEM; message in @msg. */
int wl_req_output(struct wl_req *r, void *dst, uint32_t *len, char *msg, size_t cap);

/* CPU reference of a whole request: the tokens of its first @n steps, computed
 * directly (double precision, contiguous cache, no device). -EINVAL as wl_validate. */
int wl_ref_tokens(const char *workload, const struct wl_params *p, uint64_t *tokens, uint32_t n,
		  char *msg, size_t cap);

/* ---- a simple step executor (tests, benchmarks; a worker may use its own) ---- */

struct wl_exec;

/* Up to WL_EXEC_STREAMS streams on @d. */
#define WL_EXEC_STREAMS 16
int wl_exec_create(struct wl_exec **out, struct dev *d, unsigned nstreams);
void wl_exec_destroy(struct wl_exec *x);

/* Runs @st's tasks: task i on stream lane % nstreams — or, when it has exactly one
 * dependency that no earlier task continued, on that dependency's stream (a chain
 * stays on one stream) — after its dependencies (events across streams), then waits
 * for all of them. Returns the first error. A stream that failed is replaced after
 * the run; one that cannot be replaced (the device refuses a new stream) is lost, and
 * every later run first tries to create it again and returns that error, running
 * nothing, while it cannot. */
int wl_exec_run(struct wl_exec *x, const struct wl_step *st);

/* ---- lanes without waiting (the worker's scheduler) ----
 *
 * A step's lanes are launched at once and each is waited for on its own: a lane's
 * tasks all run on the one stream its caller chose, in task order, and an event
 * recorded after them says when they completed (and with which stream error), so a
 * slow lane holds up only the lanes the caller put on its stream. */

struct wl_lane {
	unsigned stream;	/* in: the stream the lane runs on (< wl_exec_nstreams) */
	struct dev_event *done; /* in: recorded on that stream after the lane's tasks */
	int err;		/* out: 0, or the first error queueing the lane's tasks */
	bool recorded;		/* out: @done was recorded (wait for it before reuse) */
	/* out: err is the device layer's refusal of a task's arguments (wl_task_check),
	 * before anything of that task was queued: the lane's own fault, not the
	 * device's */
	bool refused;
};

/* The streams @x was created with. */
unsigned wl_exec_nstreams(const struct wl_exec *x);

/* Whether stream @s exists (not lost: see wl_exec_stream_reset). */
bool wl_exec_stream_ok(const struct wl_exec *x, unsigned s);

/* Waits for stream @s's work, destroys it and creates a fresh one (a failed stream
 * stays failed). On an error the stream is lost (runs nothing) until a later reset
 * succeeds. */
int wl_exec_stream_reset(struct wl_exec *x, unsigned s);

/* Queues @st's tasks without waiting: those of lane l (task lanes must be below
 * @nlanes) on stream lanes[l].stream in task order, then records lanes[l].done there.
 * A task may depend only on earlier tasks of its own lane (stream order covers it);
 * -EINVAL otherwise, before anything is queued. Otherwise returns 0 and each lane
 * says what became of it: err -ENODEV for a lost stream (nothing queued, not
 * recorded); after a task that could not be queued (err set) the lane's later tasks
 * are not queued, but @done is still recorded so the caller can wait for those that
 * were (when @done cannot be recorded, this call waits for the lane's stream before it
 * returns: a lane not recorded has nothing in flight). A lane whose @done is recorded
 * ends when dev_event_query(done) stops answering -EBUSY: 0, or the stream's error. */
int wl_exec_launch(struct wl_exec *x, const struct wl_step *st, struct wl_lane *lanes,
		   uint32_t nlanes);

#endif
