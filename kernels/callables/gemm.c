/* gemm.c - the built-in callable "gemm": a chain of matrix products per step.
 *
 * State: X [m][k]. A step multiplies X by `chain` weights W_c [k][k] in turn
 * (X <- X . W_c, ping-ponging between two buffers); the token is the argmax over the
 * result, which is the next step's X. Weights are scaled to keep X's magnitude.
 */
#include "ref.h"
#include "cl_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { P_M, P_K, P_CHAIN, P_TOKENS, P_SEED };

static const struct chipd_cl_param specs[] = {
    [P_M] = {"m", CHIPD_CL_INT64, 16, 1, 4096, "rows of the state X [m][k]"},
    [P_K] = {"k", CHIPD_CL_INT64, 64, 1, 4096, "columns of X; every weight W is [k][k]"},
    [P_CHAIN] = {"chain", CHIPD_CL_INT64, 4, 1, 64, "matrix products per step"},
    [P_TOKENS] = {"tokens", CHIPD_CL_INT64, 16, 1, 65536,
		  "steps, one token each (max_tokens may end the request earlier)"},
    [P_SEED] = {"seed", CHIPD_CL_INT64, 1, 0, INT64_MAX, "seed of X and of the weights"},
};

enum { RS_X = 1 << 16, RS_W = 2 << 16 };

struct gm_state {
	uint32_t m, k, chain;
	float *x[2], *w; /* device */
	int32_t *tok;
};

static uint32_t gm_steps(const int64_t *cfg)
{
	return (uint32_t)cfg[P_TOKENS];
}

static float gm_scale(uint32_t k)
{
	return sqrtf(3.0f / (float)k);
}

/* The initial X [m][k] and the weights [chain][k][k], seeded. */
static void gm_inputs(const int64_t *cfg, float *x, float *w)
{
	uint32_t m = (uint32_t)cfg[P_M], k = (uint32_t)cfg[P_K], chain = (uint32_t)cfg[P_CHAIN];
	uint64_t seed = (uint64_t)cfg[P_SEED];

	cl_rand_fill(x, (size_t)m * k, seed, RS_X, 0, 1.0f);
	for (uint32_t c = 0; c < chain; c++)
		cl_rand_fill(w + (size_t)c * k * k, (size_t)k * k, seed, RS_W | c, 0, gm_scale(k));
}

static void gm_cost(const int64_t *cfg, struct chipd_cl_cost *out)
{
	uint64_t m = (uint64_t)cfg[P_M], k = (uint64_t)cfg[P_K], chain = (uint64_t)cfg[P_CHAIN];
	uint64_t x = m * k * sizeof(float), w = chain * k * k * sizeof(float);

	out->host_bytes = sizeof(struct gm_state) + x + w; /* both staged at once */
	out->dev_bytes = 2 * x + w + sizeof(int32_t);
}

static void gm_free(struct chipd_cl_req *r, struct gm_state *st)
{
	r->host->dev_free(r, st->x[0]);
	r->host->dev_free(r, st->x[1]);
	r->host->dev_free(r, st->w);
	r->host->dev_free(r, st->tok);
	r->host->host_free(r, st, sizeof(*st));
}

static int gm_reserve(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct gm_state *st = r->host->host_alloc(r, sizeof(*st));

	if (!st) {
		snprintf(msg, cap, "gemm: no host memory for the request");
		return -ENOMEM;
	}
	st->m = (uint32_t)r->cfg[P_M];
	st->k = (uint32_t)r->cfg[P_K];
	st->chain = (uint32_t)r->cfg[P_CHAIN];
	r->state = st;
	return 0;
}

static int gm_fill(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct gm_state *st = r->state;
	size_t xb = (size_t)st->m * st->k * sizeof(float);
	size_t wb = (size_t)st->chain * st->k * st->k * sizeof(float);
	float *x = r->host->host_alloc(r, xb), *w = r->host->host_alloc(r, wb);
	int32_t zero = 0;
	int err = x && w ? 0 : -ENOMEM;

	if (!err) {
		gm_inputs(r->cfg, x, w);
		err = cl_upload(r, (void **)&st->x[0], x, xb);
	}
	if (!err)
		err = r->host->dev_alloc(r, xb, (void **)&st->x[1]);
	if (!err)
		err = cl_upload(r, (void **)&st->w, w, wb);
	if (!err)
		err = cl_upload(r, (void **)&st->tok, &zero, sizeof(zero));
	r->host->host_free(r, x, xb);
	r->host->host_free(r, w, wb);
	if (err)
		snprintf(msg, cap, "gemm: cannot reserve device memory (%d)", err);
	return err;
}

static void gm_release(struct chipd_cl_req *r)
{
	gm_free(r, r->state);
}

static int gm_build(struct chipd_cl_req *r, struct chipd_cl_step *stp, uint32_t lane, uint32_t step, void *host_tok)
{
	const struct gm_state *st = r->state;
	uint32_t cur = (uint32_t)(((uint64_t)step * st->chain) % 2);
	struct dev_kcall c = {.kernel = DEV_K_GEMM};
	int t = -1;

	for (uint32_t i = 0; i < st->chain; i++, cur ^= 1) {
		c.u.gemm = (struct dev_k_gemm){st->x[cur],
					       st->w + (size_t)i * st->k * st->k,
					       st->x[cur ^ 1],
					       st->m,
					       st->k,
					       st->k,
					       0};
		t = cl_launch(r, stp, lane, &c, t);
		if (t < 0)
			return t;
	}
	c = (struct dev_kcall){DEV_K_ARGMAX, .u.argmax = {st->x[cur], st->tok, st->m * st->k}};
	t = cl_launch(r, stp, lane, &c, t);
	if (t >= 0)
		t = r->host->copy_task(stp, lane, host_tok, st->tok, sizeof(int32_t), CHIPD_CL_D2H, t);
	return t < 0 ? t : 0;
}

static int gm_ref(const int64_t *cfg, uint64_t *tokens, uint32_t n)
{
	uint32_t m = (uint32_t)cfg[P_M], k = (uint32_t)cfg[P_K], chain = (uint32_t)cfg[P_CHAIN];
	float *x = malloc((size_t)m * k * sizeof(float));
	float *w = malloc((size_t)chain * k * k * sizeof(float));
	float *y = malloc((size_t)m * k * sizeof(float)), *t;

	if (!x || !w || !y) {
		free(x);
		free(w);
		free(y);
		return -ENOMEM;
	}
	gm_inputs(cfg, x, w);
	for (uint32_t step = 0; step < n; step++) {
		for (uint32_t i = 0; i < chain; i++) {
			dev_ref_gemm(x, w + (size_t)i * k * k, y, m, k, k, false);
			t = x;
			x = y;
			y = t;
		}
		tokens[step] = dev_ref_argmax(x, m * k);
	}
	free(x);
	free(y);
	free(w);
	return 0;
}

static const struct chipd_callable callable = {
    .abi = CHIPD_CALLABLE_ABI,
    .version = 1,
    .token_bytes = sizeof(int32_t),
    .name = "gemm",
    .doc = "a chain of matrix products per step: X <- X W_1 ... W_chain; the token is the "
	   "argmax of X",
    .params = specs,
    .nparams = sizeof(specs) / sizeof(specs[0]),
    .steps = gm_steps,
    .cost = gm_cost,
    .reserve = gm_reserve,
    .fill = gm_fill,
    .release = gm_release,
    .build = gm_build,
    .ref = gm_ref,
};

CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void)
{
	return &callable;
}
