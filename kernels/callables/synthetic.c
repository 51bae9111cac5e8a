/* synthetic.c - the built-in callable "synthetic": a configurable host cost (spent while building, as an
 * orchestrator's work) and device cost (one spin kernel) per step, and tokens that
 * depend only on the seed and the step: the O/S overlap benchmark's workload. */
#include "cl_util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { P_HOST_US, P_DEVICE_US, P_TOKENS, P_SEED, P_FAIL_STEP };

static const struct chipd_cl_param specs[] = {
    [P_HOST_US] = {"host_us", CHIPD_CL_INT64, 0, 0, 1000000,
		   "host cost of a step: microseconds of busy work on the thread that builds it"},
    [P_DEVICE_US] = {"device_us", CHIPD_CL_INT64, 50, 0, 1000000,
		     "device cost of a step: microseconds of one spin kernel (the sim backend "
		     "sleeps)"},
    [P_TOKENS] = {"tokens", CHIPD_CL_INT64, 16, 1, 1 << 20,
		  "steps, one token each (max_tokens may end the request earlier)"},
    [P_SEED] = {"seed", CHIPD_CL_INT64, 1, 0, INT64_MAX, "seed of the tokens, each a function of seed and step"},
    /* for tests and the fault matrix (docs/reliability.md) */
    [P_FAIL_STEP] = {"fail_step", CHIPD_CL_INT64, -1, -1, 1 << 20,
		     "fault injection: step number fail_step (from 0) runs a kernel that "
		     "faults on the device; -1: none"},
};

/* What fail_step's kernel reads: an embedding whose token lies outside its one-row
 * table. Every check before the launch passes (the shapes are good); the kernel
 * rejects the token when it runs, and the device reports that as its stream's error
 * at run time (the sim and the GPU kernels alike): a device error, as a runtime
 * fault is. The token reaches the device by a copy task of that step, on its lane's
 * stream: a synchronous copy in fill would wait for every stream of the device, so
 * another request's long kernel would hold this request's admission. */
struct sy_fault {
	int32_t token; /* SY_BAD_TOKEN, in a vocabulary of 1 */
	float table;   /* [1][1], never read */
	float out;     /* [1], never written */
};

#define SY_BAD_TOKEN 1

struct sy_state {
	int32_t *tok;		/* device */
	struct sy_fault *fault; /* device, only with fail_step >= 0 */
	int32_t bad_token;	/* host: the source of the fault's token */
};

static bool sy_fails(const int64_t *cfg)
{
	return cfg[P_FAIL_STEP] >= 0;
}

static uint32_t sy_steps(const int64_t *cfg)
{
	return (uint32_t)cfg[P_TOKENS];
}

static int32_t sy_token(const int64_t *cfg, uint32_t step)
{
	return (int32_t)(cl_mix((uint64_t)cfg[P_SEED] ^ cl_mix(step)) & 0x7fffffff);
}

static void sy_cost(const int64_t *cfg, struct chipd_cl_cost *out)
{
	out->host_bytes = sizeof(struct sy_state);
	out->dev_bytes = sizeof(int32_t) + (sy_fails(cfg) ? sizeof(struct sy_fault) : 0);
}

static int sy_reserve(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct sy_state *st = r->host->host_alloc(r, sizeof(*st));

	if (!st) {
		snprintf(msg, cap, "synthetic: no host memory for the request");
		return -ENOMEM;
	}
	r->state = st;
	return 0;
}

static int sy_fill(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct sy_state *st = r->state;
	int err = r->host->dev_alloc(r, sizeof(*st->tok), (void **)&st->tok);

	if (!err && sy_fails(r->cfg)) {
		err = r->host->dev_alloc(r, sizeof(*st->fault), (void **)&st->fault);
		st->bad_token = SY_BAD_TOKEN;
	}
	if (err)
		snprintf(msg, cap, "synthetic: cannot reserve device memory (%d)", err);
	return err;
}

static void sy_release(struct chipd_cl_req *r)
{
	struct sy_state *st = r->state;

	if (st->fault)
		r->host->dev_free(r, st->fault);
	if (st->tok)
		r->host->dev_free(r, st->tok);
	r->host->host_free(r, st, sizeof(*st));
}

/* Busy, not asleep: host cost stands for real orchestration work on a core. */
static void burn_us(int64_t us)
{
	struct timespec t0, t;
	int64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		clock_gettime(CLOCK_MONOTONIC, &t);
		ns = (int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec);
	} while (ns < us * 1000);
}

static int sy_build(struct chipd_cl_req *r, struct chipd_cl_step *stp, uint32_t lane, uint32_t step, void *host_tok)
{
	const struct sy_state *st = r->state;
	struct dev_kcall c = {DEV_K_SPIN, .u.spin = {st->tok, (uint64_t)r->cfg[P_DEVICE_US] * 1000u,
						     sy_token(r->cfg, step)}};
	bool fails = r->cfg[P_FAIL_STEP] == (int64_t)step;
	int t = -1;

	if (fails)
		c = (struct dev_kcall){
		    DEV_K_EMBED,
		    .u.embed = {&st->fault->table, &st->fault->token, &st->fault->out, 1, 1}};

	if (r->host->room(stp) < (fails ? 3u : 2u))
		return -ENOBUFS; /* before burning the host cost for nothing */
	burn_us(r->cfg[P_HOST_US]);
	if (fails)
		t = r->host->copy_task(stp, lane, &st->fault->token, &st->bad_token,
				       sizeof(st->bad_token), CHIPD_CL_H2D, -1);
	if (t >= 0 || !fails)
		t = cl_launch(r, stp, lane, &c, t);
	if (t >= 0)
		t = r->host->copy_task(stp, lane, host_tok, st->tok, sizeof(int32_t), CHIPD_CL_D2H, t);
	return t < 0 ? t : 0;
}

static int sy_ref(const int64_t *cfg, uint64_t *tokens, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		tokens[i] = (uint64_t)sy_token(cfg, i);
	return 0;
}

static const struct chipd_callable callable = {
    .abi = CHIPD_CALLABLE_ABI,
    .version = 1,
    .token_bytes = sizeof(int32_t),
    .name = "synthetic",
    .doc = "a configurable host and device cost per step; tokens depend only on the seed and "
	   "the step",
    .params = specs,
    .nparams = sizeof(specs) / sizeof(specs[0]),
    .steps = sy_steps,
    .cost = sy_cost,
    .reserve = sy_reserve,
    .fill = sy_fill,
    .release = sy_release,
    .build = sy_build,
    .ref = sy_ref,
};

CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void)
{
	return &callable;
}
