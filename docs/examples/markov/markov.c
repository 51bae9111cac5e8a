/* markov.c - an example chipd callable, built out of tree against an installed chipd
 * (pkg-config chipd-callable): a greedy walk on a seeded transition table, computed by
 * a kernel of its own.
 *
 * A request makes `tokens` steps over a vocabulary of `vocab` tokens. The table T
 * ([vocab][vocab] floats, generated from `seed`) goes to the device once (fill); the
 * walk starts at token seed % vocab, and step i, on the device:
 *
 *   t     = argmax(T[t])    markov_step, the callable's own kernel (host->launch_own),
 *                           on the token the previous step left in device memory
 *   token = t               a copy to the step's token (host memory)
 *
 * so no step waits for the host: the next step may be built while this one runs.
 * The kernel's code lies beside markov.so, one file per device kind (the table's
 * kernels_sim, kernels_amd, kernels_nvidia): markov_kernels_sim.so (markov_kernels_sim.c)
 * for the sim device, markov_kernels.hsaco and markov_kernels.cubin
 * (markov_kernels.hip) for AMD and NVIDIA GPUs. markov_walk() is the same walk on the
 * CPU: the ref hook, and markov-ref's answer.
 */
#include "markov.h"
#include "markov_kernels.h"

#include <chipd_callable.h>

#include <errno.h>
#include <stdio.h>

enum { P_VOCAB, P_TOKENS, P_SEED };

static const struct chipd_cl_param params[] = {
    [P_VOCAB] = {"vocab", CHIPD_CL_INT64, 64, 2, MARKOV_VOCAB_MAX, "tokens 0..vocab-1"},
    [P_TOKENS] = {"tokens", CHIPD_CL_INT64, 8, 1, 1024, "steps, one token each"},
    [P_SEED] = {"seed", CHIPD_CL_INT64, 1, 0, INT32_MAX,
		"the table's seed; the walk starts at seed % vocab"},
};

/* Its own kernels: index 0 is markov_step (host->launch_own's index). */
static const struct chipd_cl_kernel kernels[] = {
    {"markov_step", sizeof(struct markov_step_args)},
};

/* One request's state (host memory counted as the request's). */
struct walk {
	float *table; /* device: [vocab][vocab] */
	int32_t *tok; /* device: the current token */
	uint32_t vocab;
};

float markov_weight(uint32_t seed, uint32_t from, uint32_t to)
{
	/* splitmix64 of (seed, from, to): deterministic, the same on every machine */
	uint64_t z = ((uint64_t)seed << 40 ^ (uint64_t)from << 20 ^ to) + 0x9e3779b97f4a7c15ull;

	z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ z >> 27) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (float)(z >> 40) / (float)(1u << 24); /* [0, 1), exact in a float */
}

void markov_walk(uint32_t vocab, uint32_t seed, uint32_t n, int32_t *out)
{
	uint32_t t = seed % vocab;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t best = 0;
		float top = markov_weight(seed, t, 0);

		for (uint32_t j = 1; j < vocab; j++) {
			float w = markov_weight(seed, t, j);

			if (w > top) { /* the first of equal maxima, as markov_step */
				top = w;
				best = j;
			}
		}
		t = best;
		out[i] = (int32_t)t;
	}
}

static uint32_t walk_steps(const int64_t *cfg)
{
	return (uint32_t)cfg[P_TOKENS];
}

static void walk_cost(const int64_t *cfg, struct chipd_cl_cost *out)
{
	uint64_t v = (uint64_t)cfg[P_VOCAB];

	/* the host buffer fill generates the table in, then the device's copies */
	out->host_bytes = sizeof(struct walk) + v * v * sizeof(float);
	out->dev_bytes = v * v * sizeof(float) + sizeof(int32_t);
}

static int walk_reserve(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct walk *w = r->host->host_alloc(r, sizeof(*w));

	if (!w) {
		snprintf(msg, cap, "markov: no host memory for the request");
		return -ENOMEM;
	}
	w->vocab = (uint32_t)r->cfg[P_VOCAB];
	r->state = w;
	return 0;
}

static int walk_fill(struct chipd_cl_req *r, char *msg, size_t cap)
{
	struct walk *w = r->state;
	uint32_t v = w->vocab, seed = (uint32_t)r->cfg[P_SEED];
	size_t bytes = (size_t)v * v * sizeof(float);
	int32_t start = (int32_t)(seed % v);
	float *t;
	int err;

	if ((err = r->host->dev_alloc(r, bytes, (void **)&w->table)) ||
	    (err = r->host->dev_alloc(r, sizeof(int32_t), (void **)&w->tok))) {
		snprintf(msg, cap, "markov: no device memory for a %u x %u table", v, v);
		return err;
	}
	t = r->host->host_alloc(r, bytes);
	if (!t) {
		snprintf(msg, cap, "markov: no host memory for a %u x %u table", v, v);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < v; i++)
		for (uint32_t j = 0; j < v; j++)
			t[(size_t)i * v + j] = markov_weight(seed, i, j);
	err = r->host->copy(r, w->table, t, bytes, CHIPD_CL_H2D);
	if (!err)
		err = r->host->copy(r, w->tok, &start, sizeof(start), CHIPD_CL_H2D);
	r->host->host_free(r, t, bytes);
	if (err)
		snprintf(msg, cap, "markov: the table's upload failed (%d)", err);
	return err;
}

static int walk_build(struct chipd_cl_req *r, struct chipd_cl_step *st, uint32_t lane,
		      uint32_t step, void *token)
{
	static const struct chipd_cl_dims dims = {{1, 1, 1}, {MARKOV_BLOCK, 1, 1}, 0};
	const struct walk *w = r->state;
	struct markov_step_args a = {w->table, w->tok, w->vocab, 0};
	int task;

	(void)step;
	task = r->host->launch_own(st, r, lane, 0, &dims, &a, -1);
	if (task >= 0)
		task = r->host->copy_task(st, lane, token, w->tok, sizeof(int32_t), CHIPD_CL_D2H,
					  task);
	return task < 0 ? task : 0;
}

static void walk_release(struct chipd_cl_req *r)
{
	struct walk *w = r->state;

	if (!w)
		return;
	r->host->dev_free(r, w->table); /* NULL when fill did not get that far */
	r->host->dev_free(r, w->tok);
	r->host->host_free(r, w, sizeof(*w));
}

static int walk_ref(const int64_t *cfg, uint64_t *tokens, uint32_t n)
{
	int32_t t[1024];

	if (n > sizeof(t) / sizeof(t[0]))
		return -EINVAL;
	markov_walk((uint32_t)cfg[P_VOCAB], (uint32_t)cfg[P_SEED], n, t);
	for (uint32_t i = 0; i < n; i++)
		tokens[i] = (uint64_t)t[i];
	return 0;
}

static const struct chipd_callable table = {
    .abi = CHIPD_CALLABLE_ABI,
    .version = 1,
    .name = "markov",
    .doc = "a greedy walk on a seeded transition table: its own argmax kernel per step",
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .token_bytes = sizeof(int32_t),
    .kernels = kernels,
    .nkernels = sizeof(kernels) / sizeof(kernels[0]),
    .kernels_sim = "markov_kernels_sim.so",
    .kernels_amd = "markov_kernels.hsaco",
    .kernels_nvidia = "markov_kernels.cubin",
    .steps = walk_steps,
    .cost = walk_cost,
    .reserve = walk_reserve,
    .fill = walk_fill,
    .build = walk_build,
    .release = walk_release,
    .ref = walk_ref,
};

CHIPD_CALLABLE_EXPORT const struct chipd_callable *chipd_callable_v2(void)
{
	return &table;
}
