/* synthetic.c - the built-in callable "synthetic": a configurable host cost (spent while building, as an
 * orchestrator's work) and device cost (one spin kernel) per step, and tokens that
 * depend only on the seed and the step: the O/S overlap benchmark's workload. */
#include "cl_util.h"

#include <errno.h>
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
		     "fault injection: step number fail_step (from 0) launches a kernel the "
		     "device layer refuses; -1: none"},
};

/* A spin longer than the device layer accepts (kcheck: at most an hour). */
#define SY_BAD_SPIN_NS (3601ull * 1000000000ull)

struct sy_state {
	int32_t *tok; /* device */
};

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
	(void)cfg;
	out->host_bytes = sizeof(struct sy_state);
	out->dev_bytes = sizeof(int32_t);
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

	if (err)
		snprintf(msg, cap, "synthetic: cannot reserve device memory (%d)", err);
	return err;
}

static void sy_release(struct chipd_cl_req *r)
{
	struct sy_state *st = r->state;

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
	int t;

	if (r->cfg[P_FAIL_STEP] == (int64_t)step)
		c.u.spin.ns = SY_BAD_SPIN_NS;

	if (r->host->room(stp) < 2)
		return -ENOBUFS; /* before burning the host cost for nothing */
	burn_us(r->cfg[P_HOST_US]);
	t = cl_launch(r, stp, lane, &c, -1);
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
