/* test_callable.c - callables for tests/unit/check_callables.c, built from this one
 * source once per variant (TEST_CALLABLE, tests/kernels.cmake): a good one that uses
 * only the ABI, and broken ones, one fault each, that chipd must refuse by name.
 *
 *   TC_GOOD      "tiny": tokens steps of one spin kernel, token = seed * 7 + step
 *   TC_ABI       declares ABI version 99
 *   TC_NO_ENTRY  exports no chipd_callable_v2
 *   TC_INIT      its init fails ("broken on purpose")
 *   TC_TABLE     its name is not [a-z0-9_]
 *   TC_DUP       calls itself "gemm", a built-in's name
 *   TC_REFUSE    its init fails on the Nth init of the node ($TC_REFUSE_AT), counted
 *                in the file $TC_COUNT_FILE across processes (a registration's probe's
 *                is the first, the supervisor's the second, then chip 0's, chip 1's,
 *                ...): one chip refuses a registration
 *   TC_KILL      likewise, but that init kills its process (SIGKILL): a worker that
 *                dies during a registration
 *   (every one)  with $TC_SLOW_INIT_AT, that init (counted as above) sleeps 3.5 s: a
 *                chip whose load outlasts the supervisor's forward bound (2 s)
 *   TC_OWN       "tiny_own": the same tokens from its own kernel, tc_fill, in the file
 *                tc_kernels_sim.so beside it (launch_own, 2 blocks of 2 threads); with
 *                seed 500 it first probes launch_own with a bad index and bad dims and
 *                adds 1000 to each token per probe refused -EINVAL. $TC_OWN_FAULT
 *                breaks its table: missing_kernel, missing_file, args_size, dup,
 *                no_sim, slash (see own_table)
 *   TC_V1        exports only chipd_callable_v1, as a library built for ABI 1
 *   TC_DATA      exports its table itself as chipd_callable_v2 (a data symbol where
 *                the entry function belongs)
 *   TC_EXIT      its constructor calls exit(3): a library that ends the process that
 *                loads it
 *   TC_SEGV      its init raises SIGSEGV: one that crashes the process that loads it
 *   TC_HANG      its init sleeps 30 s: one that holds the process that loads it
 *
 * Every variant's requests crash their worker (SIGKILL in build) when seed is 999:
 * a callable that keeps killing its workers (the quarantine). With seed 997 its steps
 * hook answers 0: a request that makes no step (no token) at all. With seed 996 its
 * fill first sleeps ten times step_us: a fill that holds the worker's loader (its cost
 * declares more device bytes than a fill the mailbox thread would do itself); with
 * seed 995 likewise, its cost as small as any other's. With seed 994 its build puts
 * its task on the next lane, another request's (the host refuses it: the build fails).
 * With seed 992 its reserve takes 2 KV blocks of 1 float, which its release gives back;
 * with seed 993 likewise, and then its release gives back every block of the pool
 * (its own a second time, and other requests'), -1 and the pool's size: KV ids it does
 * not hold. With seed 991 its cost declares UINT64_MAX - 64 host bytes: more than any
 * per-request limit, and near enough to the top that chipd's own additions overflow.
 * With seed 990 its build first probes launch with no arguments and copy_task with a
 * NULL source and a NULL destination, and adds 1000 to each token per probe refused
 * -EINVAL that left the step as it was. With seed 989 its step copies 8 bytes into
 * its 4-byte token (its device memory holds 4 ints: the last 3 are 0x7eadbeef); with
 * seed 988 its build writes its token on the host and adds no task. With seed 987 its
 * reserve fails -EINVAL and writes no message; with seed 986 it fails -EINVAL after
 * filling the message buffer to its last byte, with no terminating NUL. With seed 985
 * its launch asks for a spin of more than an hour, a shape the device layer's check
 * refuses (dev_kcall_check), and its build returns what launch answered. With seed 984
 * its cost declares 2^63 - 1 KV blocks, with seed 983 one block of 2^32 - 1 floats:
 * more than any chip's KV cache holds; neither takes any.
 */
#include "chipd_callable.h"
#include "tc_kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* macros, not an enum: the preprocessor compares them */
#define TC_GOOD	    0
#define TC_ABI	    1
#define TC_NO_ENTRY 2
#define TC_INIT	    3
#define TC_TABLE    4
#define TC_DUP	    5
#define TC_REFUSE   6
#define TC_KILL	    7
#define TC_OWN	    8
#define TC_V1	    9
#define TC_DATA	    10
#define TC_EXIT	    11
#define TC_SEGV	    12
#define TC_HANG	    13

#ifndef TEST_CALLABLE
#error "TEST_CALLABLE names the variant"
#endif

enum { P_TOKENS, P_SEED, P_STEP_US };

static const struct chipd_cl_param params[] = {
    [P_TOKENS] = {"tokens", CHIPD_CL_INT64, 4, 1, 64, "steps, one token each"},
    [P_SEED] = {"seed", CHIPD_CL_INT64, 1, 0, 1000,
		"tokens are seed * 7 + step; 999 kills the worker; 998 is refused "
		"no_capacity by a worker holding no other request of it"},
    [P_STEP_US] = {"step_us", CHIPD_CL_INT64, 0, 0, 1000000, "device time of each step"},
};

/* This init's number on the node, counted in $TC_COUNT_FILE (0 without one). */
static long init_number(void)
{
	const char *file = getenv("TC_COUNT_FILE");
	off_t end;
	long n = 0;
	int fd;

	if (!file)
		return 0;
	fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	/* an appending write moves this descriptor's offset to the end of its own byte,
	 * atomically with the write; the file's size (fstat) may already count another
	 * process's init that appended in between: two chips loading at once both read 3 */
	if (write(fd, "x", 1) == 1 && (end = lseek(fd, 0, SEEK_CUR)) > 0)
		n = (long)end;
	close(fd);
	return n;
}

/* Whether init number @n is the one the environment variable @var names. */
static int init_is(long n, const char *var)
{
	const char *at = getenv(var);

	return n > 0 && at && n == atol(at);
}

static int spin = -1; /* the spin kernel's handle, found at init */

/* Device ints of a request: TC_OWN's kernel writes 2 blocks of 2 threads. */
#define TOK_INTS (TEST_CALLABLE == TC_OWN ? 4 : 1)

struct tiny {
	int32_t *tok; /* device */
	int32_t kv[2]; /* its KV blocks (seeds 992, 993) */
	uint32_t kv_pool_blocks; /* the blocks of the pool they came from */
};

/* Whether the request takes KV blocks (seed 992: and gives them back as it should). */
static int takes_kv(const int64_t *cfg)
{
	return cfg[P_SEED] == 992 || cfg[P_SEED] == 993;
}

#if TEST_CALLABLE == TC_EXIT
__attribute__((constructor)) static void tc_exit_at_load(void)
{
	exit(3);
}
#endif

static int tiny_init(const struct chipd_cl_host *host, char *msg, size_t cap)
{
	long n;

	if (TEST_CALLABLE == TC_SEGV)
		raise(SIGSEGV);
	if (TEST_CALLABLE == TC_HANG) {
		struct timespec left = {30, 0};

		while (nanosleep(&left, &left) != 0 && errno == EINTR)
			;
	}

	if (TEST_CALLABLE == TC_INIT) {
		snprintf(msg, cap, "broken on purpose");
		return -EIO;
	}
	n = init_number();
	if (init_is(n, "TC_SLOW_INIT_AT")) { /* a load slower than chipd waits for */
		struct timespec ts = {3, 500000000L};

		nanosleep(&ts, NULL);
	}
	if ((TEST_CALLABLE == TC_REFUSE || TEST_CALLABLE == TC_KILL) && init_is(n, "TC_REFUSE_AT")) {
		if (TEST_CALLABLE == TC_KILL)
			raise(SIGKILL);
		snprintf(msg, cap, "refused on purpose");
		return -EIO;
	}
	spin = host->kernel("spin");
	if (spin < 0 || host->kernel("no_such_kernel") != -ENOENT) {
		snprintf(msg, cap, "no spin kernel");
		return -ENOENT;
	}
	return 0;
}

static uint32_t tiny_steps(const int64_t *cfg)
{
	if (cfg[P_SEED] == 997)
		return 0; /* a callable that makes no step of a request */
	return (uint32_t)cfg[P_TOKENS];
}

static void tiny_cost(const int64_t *cfg, struct chipd_cl_cost *out)
{
	out->host_bytes = sizeof(struct tiny);
	/* an upper bound for seed 996: its slow fill is the loader's, not M's */
	out->dev_bytes = cfg[P_SEED] == 996 ? 64 * 1024 : TOK_INTS * sizeof(int32_t);
	if (cfg[P_SEED] == 991) /* a cost computed in 64 bits that came out huge */
		out->host_bytes = UINT64_MAX - 64;
	if (takes_kv(cfg)) {
		out->kv_blocks = 2;
		out->kv_block_floats = 1;
	}
	if (cfg[P_SEED] == 984) /* declared, never taken: more than any KV cache */
		*out = (struct chipd_cl_cost){out->host_bytes, out->dev_bytes, UINT64_MAX / 2, 1};
	if (cfg[P_SEED] == 983) /* 1 block, larger than any chip's */
		*out = (struct chipd_cl_cost){out->host_bytes, out->dev_bytes, 1, UINT32_MAX};
}

/* This worker's requests of the callable between reserve and release (reserve runs
 * on the worker's mailbox thread, release on another: relaxed, a count only). */
static _Atomic int live_requests;

static int tiny_reserve(struct chipd_cl_req *r, char *msg, size_t cap)
{
	if (r->cfg[P_SEED] == 987)
		return -EINVAL; /* and says nothing */
	if (r->cfg[P_SEED] == 986) {
		memset(msg, 'y', cap); /* no room left for the NUL */
		return -EINVAL;
	}
	if (r->cfg[P_SEED] == 998 && atomic_load_explicit(&live_requests, memory_order_relaxed) == 0) {
		snprintf(msg, cap, "tiny: seed 998 is refused on an idle chip");
		return -ENOSPC;
	}
	struct tiny *t = r->host->host_alloc(r, sizeof(struct tiny));

	if (!t) {
		snprintf(msg, cap, "tiny: no host memory");
		return -ENOMEM;
	}
	if (takes_kv(r->cfg)) {
		struct chipd_cl_kv pool;
		int err = r->host->kv_take(r, 2, 1, t->kv, msg, cap);

		if (err) {
			r->host->host_free(r, t, sizeof(*t));
			return err;
		}
		r->host->kv_pool(r, &pool);
		t->kv_pool_blocks = pool.blocks;
	}
	r->state = t;
	atomic_fetch_add_explicit(&live_requests, 1, memory_order_relaxed);
	return 0;
}

static int tiny_fill(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct tiny *t = r->state;

	/* a fill that holds the loader (a hung device copy, or a slow file read) */
	if (r->cfg[P_SEED] == 996 || r->cfg[P_SEED] == 995) {
		int64_t us = 10 * r->cfg[P_STEP_US];
		struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

		nanosleep(&ts, NULL);
	}
	int err = r->host->dev_alloc(r, TOK_INTS * sizeof(int32_t), (void **)&t->tok);

	if (err)
		snprintf(msg, cap, "tiny: no device memory");
	if (!err && r->cfg[P_SEED] == 989) { /* what its token's copy carries past the token */
		static const int32_t tail[4] = {0, 0x7eadbeef, 0x7eadbeef, 0x7eadbeef};

		r->host->dev_free(r, t->tok);
		err = r->host->dev_alloc(r, sizeof(tail), (void **)&t->tok);
		if (!err)
			err = r->host->copy(r, t->tok, tail, sizeof(tail), CHIPD_CL_H2D);
		if (err)
			snprintf(msg, cap, "tiny: no device memory");
	}
	return err;
}

/* Seed 993's release, after its own blocks went back: every id of its pool (its own
 * again, other requests'), then -1 and the pool's size, none of them its own now. */
static void give_what_it_does_not_hold(struct chipd_cl_req *r, const struct tiny *t)
{
	uint32_t n = t->kv_pool_blocks + 2;
	int32_t *ids = malloc(n * sizeof(*ids));

	if (!ids)
		return;
	for (uint32_t i = 0; i < t->kv_pool_blocks; i++)
		ids[i] = (int32_t)i;
	ids[n - 2] = -1;
	ids[n - 1] = (int32_t)t->kv_pool_blocks;
	r->host->kv_give(r, n, ids);
	free(ids);
}

static void tiny_release(struct chipd_cl_req *r)
{
	struct tiny *t = r->state;

	if (takes_kv(r->cfg)) {
		r->host->kv_give(r, 2, t->kv);
		if (r->cfg[P_SEED] == 993)
			give_what_it_does_not_hold(r, t);
	}
	r->host->dev_free(r, t->tok);
	r->host->host_free(r, t, sizeof(*t));
	atomic_fetch_sub_explicit(&live_requests, 1, memory_order_relaxed);
}

/* TC_OWN: launch_own's refusals, counted (each must be -EINVAL, adding no task). */
static int own_probes(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		      const struct tc_fill_args *a)
{
	static const struct chipd_cl_dims bad[] = {
	    {{0, 1, 1}, {1, 1, 1}, 0},		{{1, 1, 1}, {1, 1, 0}, 0},
	    {{0x80000000u, 1, 1}, {1, 1, 1}, 0}, {{1, 65536, 1}, {1, 1, 1}, 0},
	    {{1, 1, 65536}, {1, 1, 1}, 0},	{{1, 1, 1}, {1025, 1, 1}, 0},
	    {{1, 1, 1}, {1, 1, 65}, 0},		{{1, 1, 1}, {64, 32, 1}, 0},
	    {{1, 1, 1}, {1, 1, 1}, 48 * 1024 + 1},
	};
	static const struct chipd_cl_dims good = {{1, 1, 1}, {1, 1, 1}, 0};
	uint32_t room = r->host->room(st);
	int n = r->host->launch_own(st, r, lane, 1, &good, a, -1) == -EINVAL; /* index */

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		n += r->host->launch_own(st, r, lane, 0, &bad[i], a, -1) == -EINVAL;
	return r->host->room(st) == room ? n : 0;
}

/* TC_OWN: a step is tc_fill over 2 blocks of 2 threads, its token the last element. */
static int own_build(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		     uint32_t step, void *token)
{
	const struct tiny *t = r->state;
	static const struct chipd_cl_dims dims = {{2, 1, 1}, {2, 1, 1}, 0};
	struct tc_fill_args a = {t->tok, (int32_t)(r->cfg[P_SEED] * 7 + step) - 3, 0};
	int task;

	if (r->cfg[P_SEED] == 500)
		a.base += 1000 * own_probes(r, st, lane, &a);
	task = r->host->launch_own(st, r, lane, 0, &dims, &a, -1);
	if (task >= 0)
		task = r->host->copy_task(st, lane, token, t->tok + 3, sizeof(int32_t),
					  CHIPD_CL_D2H, task);
	return task < 0 ? task : 0;
}

/* Seed 990: launch and copy_task given NULL where memory belongs, counted (each must be
 * -EINVAL, adding no task). */
static int null_probes(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		       void *token)
{
	const struct tiny *t = r->state;
	uint32_t room = r->host->room(st);
	int n = r->host->launch(st, lane, spin, NULL, sizeof(struct dev_k_spin), -1) == -EINVAL;

	n += r->host->copy_task(st, lane, token, NULL, sizeof(int32_t), CHIPD_CL_D2H, -1) ==
	     -EINVAL;
	n += r->host->copy_task(st, lane, NULL, t->tok, sizeof(int32_t), CHIPD_CL_D2H, -1) ==
	     -EINVAL;
	return r->host->room(st) == room ? n : 0;
}

static int tiny_build(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		      uint32_t step, void *token)
{
	const struct tiny *t = r->state;
	struct dev_k_spin a = {t->tok, (uint64_t)r->cfg[P_STEP_US] * 1000u,
			       (int32_t)(r->cfg[P_SEED] * 7 + step)};
	int task;

	if (r->cfg[P_SEED] == 999)
		raise(SIGKILL); /* a callable that kills its worker */
	if (TEST_CALLABLE == TC_OWN)
		return own_build(r, st, lane, step, token);
	if (r->cfg[P_SEED] == 994) /* another request's lane: refused, this one fails */
		return r->host->launch(st, lane + 1, spin, &a, sizeof(a), -1) < 0 ? -EINVAL : 0;
	if (r->cfg[P_SEED] == 990)
		a.token += 1000 * null_probes(r, st, lane, token);
	if (r->cfg[P_SEED] == 985) /* a shape the device layer refuses: a callable's bug */
		a.ns = 3601ull * 1000000000ull;
	if (r->cfg[P_SEED] == 988) { /* the token written on the host, no task */
		*(int32_t *)token = a.token;
		return 0;
	}
	task = r->host->launch(st, lane, spin, &a, sizeof(a), -1);

	/* seed 989: 8 bytes into a token of 4 (the next 4 are not its own) */
	if (task >= 0)
		task = r->host->copy_task(st, lane, token, t->tok,
					  (r->cfg[P_SEED] == 989 ? 2 : 1) * sizeof(int32_t),
					  CHIPD_CL_D2H, task);
	return task < 0 ? task : 0;
}

static int tiny_ref(const int64_t *cfg, uint64_t *tokens, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		tokens[i] = (uint64_t)(cfg[P_SEED] * 7 + i);
	return 0;
}

static const struct chipd_cl_kernel own_kernels[] = {
    {"tc_fill", sizeof(struct tc_fill_args)},
    {"tc_nope", 8},
};

#if TEST_CALLABLE == TC_DATA
/* the table under the entry's name, as an author who took the entry for the table
 * would export it (the header's prototype keeps the C name for the function) */
#define callable tc_table_as_entry
CHIPD_CALLABLE_EXPORT extern const struct chipd_callable callable __asm__(CHIPD_CALLABLE_ENTRY);
const struct chipd_callable callable = {
#else
static const struct chipd_callable callable = {
#endif
    .abi = TEST_CALLABLE == TC_ABI ? 99 : CHIPD_CALLABLE_ABI,
    .version = 3,
    .name = TEST_CALLABLE == TC_TABLE ? "Tiny!"
	    : TEST_CALLABLE == TC_DUP ? "gemm"
	    : TEST_CALLABLE == TC_OWN ? "tiny_own"
				      : "tiny",
    .kernels = TEST_CALLABLE == TC_OWN ? own_kernels : NULL,
    .nkernels = TEST_CALLABLE == TC_OWN ? 1 : 0,
    .kernels_sim = TEST_CALLABLE == TC_OWN ? "tc_kernels_sim.so" : NULL,
    .doc = "a spin kernel per step; tokens are seed * 7 + step",
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .token_bytes = sizeof(int32_t),
    .init = tiny_init,
    .steps = tiny_steps,
    .cost = tiny_cost,
    .reserve = tiny_reserve,
    .fill = tiny_fill,
    .build = tiny_build,
    .release = tiny_release,
    .ref = tiny_ref,
};

/* TC_OWN: the table, broken as $TC_OWN_FAULT says (read at each load). */
static const struct chipd_callable *own_table(void)
{
	static struct chipd_callable t;
	static struct chipd_cl_kernel k[2];
	const char *f = getenv("TC_OWN_FAULT");

	t = callable;
	memcpy(k, own_kernels, sizeof(k));
	t.kernels = k;
	if (!f)
		return &t;
	if (strcmp(f, "missing_kernel") == 0)
		t.nkernels = 2; /* tc_nope is not in the file */
	else if (strcmp(f, "missing_file") == 0)
		t.kernels_sim = "tc_absent_sim.so";
	else if (strcmp(f, "args_size") == 0)
		k[0].args_size = 0;
	else if (strcmp(f, "dup") == 0)
		k[1].name = k[0].name, t.nkernels = 2;
	else if (strcmp(f, "no_sim") == 0)
		t.kernels_sim = NULL, t.kernels_amd = "tc_kernels.hsaco";
	else if (strcmp(f, "slash") == 0)
		t.kernels_sim = "../tc_kernels_sim.so";
	return &t;
}

#if TEST_CALLABLE == TC_NO_ENTRY
/* the table under another name: found by nobody */
CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v0(void);
CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v0(void)
#elif TEST_CALLABLE == TC_V1
/* the entry of ABI 1 alone, as a library built against the older header exports */
CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v1(void);
CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v1(void)
#elif TEST_CALLABLE == TC_DATA
/* the function, hidden: the table took its name */
const struct chipd_callable *tc_entry_hidden(void);
const struct chipd_callable *tc_entry_hidden(void)
#else
CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void)
#endif
{
	return TEST_CALLABLE == TC_OWN ? own_table() : &callable;
}
