/* wl.c - parameters, arenas, steps, KV pools and the request life cycle, driving the
 * loaded callables' hooks (the callables: wl_load.c; their device API: wl_host.c). */
#include "cl_util.h"
#include "wl_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters ---- */

void wl_params_init(struct wl_params *p)
{
	memset(p, 0, sizeof(*p));
}

void wl_params_set_input(struct wl_params *p, const void *data, uint32_t len)
{
	p->input = len ? data : NULL;
	p->input_len = data ? len : 0;
}

void wl_params_set_output(struct wl_params *p, uint32_t cap)
{
	p->output_cap = cap;
}

static struct wl_param *param_find(const struct wl_params *p, const char *key)
{
	for (unsigned i = 0; i < p->n; i++)
		if (strcmp(p->v[i].key, key) == 0)
			return (struct wl_param *)&p->v[i];
	return NULL;
}

int wl_params_set(struct wl_params *p, const char *key, int64_t value)
{
	size_t len = strlen(key);
	struct wl_param *v;

	if (len == 0 || len >= WL_KEY_MAX)
		return -EINVAL;
	v = param_find(p, key);
	if (!v) {
		if (p->n == WL_PARAMS_MAX)
			return -ENOSPC;
		v = &p->v[p->n++];
		memcpy(v->key, key, len + 1);
	}
	v->value = value;
	return 0;
}

bool wl_params_get(const struct wl_params *p, const char *key, int64_t *out)
{
	const struct wl_param *v = param_find(p, key);

	if (v)
		*out = v->value;
	return v != NULL;
}

int wl_params_parse(struct wl_params *p, const char *text, char *msg, size_t cap)
{
	char item[WL_KEY_MAX + 32], *eq, *end;
	const char *s = text, *comma;
	long long v;
	size_t len;
	int err;

	while (*s) {
		comma = strchr(s, ',');
		len = comma ? (size_t)(comma - s) : strlen(s);
		if (len == 0 || len >= sizeof(item)) {
			snprintf(msg, cap, "params: bad item at '%.20s'", s);
			return -EINVAL;
		}
		memcpy(item, s, len);
		item[len] = '\0';
		eq = strchr(item, '=');
		if (!eq || eq == item) {
			snprintf(msg, cap, "params: '%s' is not key=value", item);
			return -EINVAL;
		}
		*eq = '\0';
		errno = 0;
		v = strtoll(eq + 1, &end, 10);
		if (errno || end == eq + 1 || *end) {
			snprintf(msg, cap, "params: %s: '%s' is not an integer", item, eq + 1);
			return -EINVAL;
		}
		err = wl_params_set(p, item, v);
		if (err) {
			snprintf(msg, cap, "params: cannot set '%s': %s", item,
				 err == -ENOSPC ? "too many parameters" : "bad key");
			return -EINVAL;
		}
		s += len + (comma ? 1 : 0);
	}
	return 0;
}

/* ---- arenas and steps ---- */

void wl_arena_init(struct wl_arena *a, void *base, size_t cap)
{
	a->base = (uintptr_t)base;
	a->cap = cap;
	a->used = 0;
}

void *wl_arena_alloc(struct wl_arena *a, size_t size, size_t align)
{
	uintptr_t at = (a->base + a->used + align - 1) & ~(uintptr_t)(align - 1);
	size_t off = at - a->base;

	if (off > a->cap || size > a->cap - off)
		return NULL;
	a->used = off + size;
	return (void *)at;
}

void wl_arena_reset(struct wl_arena *a)
{
	a->used = 0;
}

int wl_step_init(struct wl_step *st, struct wl_arena *host, struct wl_arena *dev,
		 uint32_t max_tasks)
{
	st->tasks =
	    wl_arena_alloc(host, (size_t)max_tasks * sizeof(*st->tasks), _Alignof(struct wl_task));
	st->n = 0;
	st->cap = st->tasks ? max_tasks : 0;
	st->host = host;
	st->dev = dev;
	st->building = 0;
	st->token = NULL;
	st->token_len = 0;
	st->why[0] = '\0';
	return st->tasks ? 0 : -ENOBUFS;
}

static struct wl_task *task_add(struct wl_step *st, uint32_t lane, int dep)
{
	struct wl_task *t;

	if (st->n == st->cap)
		return NULL;
	t = &st->tasks[st->n];
	memset(t, 0, sizeof(*t));
	t->lane = lane;
	if (dep >= 0) {
		t->deps[0] = (uint32_t)dep;
		t->ndeps = 1;
	}
	return t;
}

int wl_add_launch_args(struct wl_step *st, uint32_t lane, enum dev_kernel kernel,
		       const void *args, size_t size, int dep)
{
	struct wl_task *t;

	if (st->n == st->cap)
		return -ENOBUFS;
	/* only what the task's kind and ndeps say is read: no memset of the whole task */
	t = &st->tasks[st->n];
	t->kind = WL_TASK_LAUNCH;
	t->lane = lane;
	t->ndeps = dep >= 0 ? 1 : 0;
	t->deps[0] = dep >= 0 ? (uint32_t)dep : 0;
	t->u.call.kernel = kernel;
	memcpy(&t->u.call.u, args, size);
	return (int)st->n++;
}

int wl_add_copy(struct wl_step *st, uint32_t lane, void *dst, const void *src, size_t n,
		enum dev_copy_kind kind, int dep)
{
	struct wl_task *t = task_add(st, lane, dep);

	if (!t)
		return -ENOBUFS;
	t->kind = WL_TASK_COPY;
	t->u.copy.dst = dst;
	t->u.copy.src = src;
	t->u.copy.n = n;
	t->u.copy.kind = kind;
	return (int)st->n++;
}

int wl_add_func(struct wl_step *st, uint32_t lane, const struct dev_func *fn,
		const struct dev_dims *dims, const void *args, uint32_t size, int dep)
{
	struct wl_task *t;
	void *copy;

	if (st->n == st->cap)
		return -ENOBUFS;
	copy = wl_arena_alloc(st->host, size, _Alignof(max_align_t));
	if (!copy)
		return -ENOBUFS;
	memcpy(copy, args, size);
	t = task_add(st, lane, dep);
	t->kind = WL_TASK_FUNC;
	t->u.func.fn = fn;
	t->u.func.dims = *dims;
	t->u.func.args = copy;
	t->u.func.size = size;
	return (int)st->n++;
}

/* ---- KV pools ---- */

struct wl_kvpool {
	struct dev *dev;
	float *base;
	uint32_t nblocks, block_floats, nfree;
	/* per block, the tag of the request holding it (wl_kvpool_reserve), 0 while it
	 * is free: a release gives back only what its request holds */
	uint64_t *holder;
	int32_t free[]; /* a stack; its order is scattered at creation */
};

uint64_t wl_kvpool_bytes(uint32_t nblocks, uint32_t block_floats)
{
	/* at most (2^32 - 1)^2: no overflow in 64 bits; the bound is checked before the
	 * x 4, which could overflow */
	uint64_t floats = (uint64_t)nblocks * block_floats;

	if (floats == 0 || floats > WL_KVPOOL_BYTES_MAX / sizeof(float) ||
	    floats * sizeof(float) > SIZE_MAX)
		return 0;
	return floats * sizeof(float);
}

int wl_kvpool_create(struct wl_kvpool **out, struct dev *d, uint32_t nblocks, uint32_t block_floats)
{
	struct wl_kvpool *kp;
	uint64_t bytes;
	int err;

	*out = NULL;
	if (nblocks == 0 || nblocks > INT32_MAX || block_floats == 0)
		return -EINVAL;
	/* before anything is allocated: a size past the bound (or one that wrapped, as
	 * 2147418113 blocks of 2147549185 floats did, to 4 bytes) is no pool to make */
	bytes = wl_kvpool_bytes(nblocks, block_floats);
	if (bytes == 0)
		return -EOVERFLOW;
	kp = calloc(1, sizeof(*kp) + (size_t)nblocks * sizeof(kp->free[0]));
	if (!kp)
		return -ENOMEM;
	kp->holder = calloc(nblocks, sizeof(kp->holder[0]));
	if (!kp->holder) {
		free(kp);
		return -ENOMEM;
	}
	err = dev_alloc(d, (size_t)bytes, (void **)&kp->base);
	if (err) {
		free(kp->holder);
		free(kp);
		return err;
	}
	kp->dev = d;
	kp->nblocks = kp->nfree = nblocks;
	kp->block_floats = block_floats;
	for (uint32_t i = 0; i < nblocks; i++)
		kp->free[i] = (int32_t)i;
	/* a fixed shuffle: reproducible, and no request gets neighbouring blocks */
	for (uint32_t i = nblocks - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(cl_mix(i) % (i + 1));
		int32_t t = kp->free[i];

		kp->free[i] = kp->free[j];
		kp->free[j] = t;
	}
	*out = kp;
	return 0;
}

void wl_kvpool_destroy(struct wl_kvpool *kp)
{
	if (!kp)
		return;
	dev_free(kp->dev, kp->base);
	free(kp->holder);
	free(kp);
}

uint32_t wl_kvpool_free_blocks(const struct wl_kvpool *kp)
{
	return kp->nfree;
}

int wl_kvpool_reserve(struct wl_kvpool *kp, uint32_t n, int32_t *ids, uint64_t holder)
{
	if (n > kp->nfree)
		return -ENOSPC;
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = kp->free[--kp->nfree];
		kp->holder[ids[i]] = holder;
	}
	return 0;
}

void wl_kvpool_release(struct wl_kvpool *kp, uint32_t n, const int32_t *ids, uint64_t holder)
{
	/* the ids come from a callable: one outside the pool, free already (given twice)
	 * or another request's would overrun the free stack or hand a block out twice */
	for (uint32_t i = n; i-- > 0;) {
		int32_t id = ids[i];

		if (id < 0 || (uint32_t)id >= kp->nblocks || kp->holder[id] != holder)
			continue;
		kp->holder[id] = 0;
		kp->free[kp->nfree++] = id;
	}
}

bool wl_kvpool_idle(const struct wl_kvpool *kp)
{
	return kp->nfree == kp->nblocks;
}

float *wl_kvpool_base(const struct wl_kvpool *kp)
{
	return kp->base;
}

uint32_t wl_kvpool_blocks(const struct wl_kvpool *kp)
{
	return kp->nblocks;
}

uint32_t wl_kvpool_block_floats(const struct wl_kvpool *kp)
{
	return kp->block_floats;
}

/* ---- workloads and requests ---- */

int wl_param_table(const char *workload, const struct wl_param_info **out)
{
	const struct wl_callable *wc = wl_find(workload);

	if (!wc)
		return -ENOENT;
	*out = wc->info;
	return (int)wc->cl->nparams;
}

const char *wl_summary(const char *workload)
{
	const struct wl_callable *wc = wl_find(workload);

	return wc ? wc->cl->doc : NULL;
}

int wl_describe(const char *workload, char *buf, size_t cap)
{
	const struct wl_param_info *t;
	int nt = wl_param_table(workload, &t);
	size_t used = 0;
	int n;

	if (nt < 0)
		return nt;
	buf[0] = '\0';
	for (int i = 0; i < nt && used < cap; i++) {
		const struct wl_param_info *s = &t[i];

		n = snprintf(buf + used, cap - used, "%s%s=%" PRId64 " [%" PRId64 "..%" PRId64 "]",
			     i ? ", " : "", s->key, s->def, s->lo, s->hi);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return 0;
}

/* Runs before a callable's hook that may explain a failure in @msg: the buffer is
 * handed to it empty, so a hook that writes nothing leaves nothing stale. */
static void hook_msg_clear(char *msg, size_t cap)
{
	if (cap)
		msg[0] = '\0';
}

/* After that hook returned @err: its message ended within @cap (a hook may fill the
 * buffer to its last byte), and one naming the hook where it failed and said nothing.
 * Returns @err. */
static int hook_msg_end(const struct chipd_callable *ops, const char *hook, int err, char *msg,
			size_t cap)
{
	if (!cap)
		return err;
	msg[cap - 1] = '\0';
	if (err && !msg[0])
		snprintf(msg, cap, "%s: its %s hook failed (%d) and said no more", ops->name, hook,
			 err);
	return err;
}

/* Fills @cfg from @p and @wc's defaults; checks keys, ranges, then consistency. */
static int configure(const struct wl_callable *wc, const struct wl_params *p, int64_t *cfg,
		     char *msg, size_t cap)
{
	const struct chipd_callable *ops = wc->cl;
	unsigned i, j;

	for (i = 0; i < p->n; i++) {
		for (j = 0; j < ops->nparams; j++)
			if (strcmp(p->v[i].key, ops->params[j].key) == 0)
				break;
		if (j == ops->nparams) {
			snprintf(msg, cap, "%s: unknown parameter '%s'", ops->name, p->v[i].key);
			return -EINVAL;
		}
	}
	for (j = 0; j < ops->nparams; j++) {
		const struct chipd_cl_param *s = &ops->params[j];

		if (!wl_params_get(p, s->key, &cfg[j]))
			cfg[j] = s->def;
		if (cfg[j] < s->lo || cfg[j] > s->hi) {
			snprintf(msg, cap, "%s: %s %" PRId64 " outside [%" PRId64 ", %" PRId64 "]",
				 ops->name, s->key, cfg[j], s->lo, s->hi);
			return -EINVAL;
		}
	}
	if (p->input_len > ops->input_max) {
		if (ops->input_max == 0)
			snprintf(msg, cap, "%s: takes no input (input_max 0), got %" PRIu32 " bytes",
				 ops->name, p->input_len);
		else
			snprintf(msg, cap, "%s: input of %" PRIu32 " bytes is over its input_max %" PRIu32,
				 ops->name, p->input_len, ops->input_max);
		return -EINVAL;
	}
	if (p->output_cap && (!ops->output_max || !ops->output)) {
		snprintf(msg, cap, "%s: writes no output (output_max %" PRIu32 "%s)", ops->name,
			 ops->output_max, ops->output ? "" : ", no output hook");
		return -EINVAL;
	}
	if (!ops->check)
		return 0;
	hook_msg_clear(msg, cap);
	return hook_msg_end(ops, "check", ops->check(cfg, msg, cap), msg, cap);
}

static int find_and_configure(const char *workload, const struct wl_params *p,
			      const struct wl_callable **wc, int64_t *cfg, char *msg, size_t cap)
{
	*wc = workload ? wl_find(workload) : NULL;
	if (!*wc) {
		snprintf(msg, cap, "workload: unknown workload '%s'", workload ? workload : "");
		return -EINVAL;
	}
	return configure(*wc, p, cfg, msg, cap);
}

int wl_validate(const char *workload, const struct wl_params *p, char *msg, size_t cap)
{
	const struct wl_callable *wc;
	int64_t cfg[WL_PARAMS_MAX];

	return find_and_configure(workload, p, &wc, cfg, msg, cap);
}

/* The callable's declared cost of @cfg, in wl.h's terms. */
static void cost_of(const struct wl_callable *wc, const int64_t *cfg, uint32_t input_len,
		    struct wl_cost *out)
{
	struct chipd_cl_cost c = {0};
	uint64_t own = sizeof(struct wl_req) + (uint64_t)input_len; /* its record, its input */

	wc->cl->cost(cfg, &c);
	*out = (struct wl_cost){.host_bytes = c.host_bytes,
				.dev_bytes = c.dev_bytes,
				.kv_blocks = c.kv_blocks,
				.kv_block_floats = c.kv_block_floats,
				.steps = wc->cl->steps(cfg)};
	/* saturated: a declaration near 2^64 wrapped round would pass every limit */
	out->host_bytes = c.host_bytes > UINT64_MAX - own ? UINT64_MAX : c.host_bytes + own;
}

int wl_cost(const char *workload, const struct wl_params *p, struct wl_cost *out, char *msg,
	    size_t cap)
{
	const struct wl_callable *wc;
	int64_t cfg[WL_PARAMS_MAX];
	int err = find_and_configure(workload, p, &wc, cfg, msg, cap);

	if (err)
		return err;
	cost_of(wc, cfg, p->input_len, out);
	return 0;
}

/* The requests' tags in the KV pools (wl_req.kv_tag): a count, unique per process. */
static _Atomic uint64_t kv_tags;

int wl_req_reserve(struct wl_req **out, const struct wl_env *env, const char *workload,
		   const struct wl_params *p, char *msg, size_t cap)
{
	struct wl_req *r;
	const struct wl_callable *wc;
	int64_t cfg[WL_PARAMS_MAX];
	int err;

	*out = NULL;
	err = find_and_configure(workload, p, &wc, cfg, msg, cap);
	if (err)
		return err;
	if (wc->nkernels && !wl_kernels_func(wc, env->dev, 0)) {
		snprintf(msg, cap, "%s: its kernels are not loaded on this device", wc->name);
		return -ENODEV;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(msg, cap, "%s: no host memory for the request", wc->cl->name);
		return -ENOMEM;
	}
	r->host_now = r->host_peak = sizeof(*r) + p->input_len;
	r->wc = wc;
	r->dev = env->dev;
	r->kv = env->kv;
	r->kv_tag = atomic_fetch_add_explicit(&kv_tags, 1, memory_order_relaxed) + 1;
	memcpy(r->cfg, cfg, sizeof(cfg));
	r->pub = (struct chipd_cl_req){
	    .host = &wl_host, .cfg = r->cfg, .steps = wc->cl->steps(cfg), .chipd = r};
	if (p->input_len) { /* the callable's copy: nobody else writes it */
		r->input = malloc(p->input_len);
		if (!r->input) {
			free(r);
			snprintf(msg, cap, "%s: no host memory for %" PRIu32 " input bytes",
				 wc->cl->name, p->input_len);
			return -ENOMEM;
		}
		memcpy(r->input, p->input, p->input_len);
		r->pub.input = r->input;
		r->pub.input_len = p->input_len;
	}
	r->out_cap = p->output_cap < wc->cl->output_max ? p->output_cap : wc->cl->output_max;
	hook_msg_clear(msg, cap);
	err = hook_msg_end(wc->cl, "reserve", wc->cl->reserve(&r->pub, msg, cap), msg, cap);
	if (err) {
		free(r->input);
		free(r);
		return err;
	}
	/* an unload refuses while this is nonzero (wl_unload) */
	atomic_fetch_add_explicit(&((struct wl_callable *)wc)->users, 1, memory_order_acq_rel);
	*out = r;
	return 0;
}

int wl_req_fill(struct wl_req *r, char *msg, size_t cap)
{
	int err;

	if (r->filled)
		return 0;
	hook_msg_clear(msg, cap);
	err = hook_msg_end(r->wc->cl, "fill", r->wc->cl->fill(&r->pub, msg, cap), msg, cap);
	r->filled = err == 0;
	return err;
}

int wl_req_create(struct wl_req **out, const struct wl_env *env, const char *workload,
		  const struct wl_params *p, char *msg, size_t cap)
{
	int err = wl_req_reserve(out, env, workload, p, msg, cap);

	if (err)
		return err;
	err = wl_req_fill(*out, msg, cap);
	if (err) {
		wl_req_destroy(*out);
		*out = NULL;
	}
	return err;
}

void wl_req_usage(const struct wl_req *r, struct wl_cost *out)
{
	cost_of(r->wc, r->cfg, r->pub.input_len, out);
	out->host_bytes = r->host_peak;
	out->dev_bytes = r->dev_bytes;
}

void wl_req_destroy(struct wl_req *r)
{
	if (!r)
		return;
	r->wc->cl->release(&r->pub);
	/* a private pool is the request's alone: what its release did not give back goes
	 * with it (the shared pool's blocks stay taken: callables.md, release) */
	if (r->own_kv)
		wl_kvpool_destroy(r->kv);
	atomic_fetch_sub_explicit(&((struct wl_callable *)r->wc)->users, 1, memory_order_acq_rel);
	free(r->input);
	free(r);
}

uint32_t wl_req_steps(const struct wl_req *r)
{
	return r->pub.steps;
}

bool wl_req_loaded_at_start(const struct wl_req *r)
{
	return r->wc->at_start;
}

const char *wl_req_workload(const struct wl_req *r)
{
	return r->wc->name;
}

uint32_t wl_req_built(const struct wl_req *r)
{
	return atomic_load_explicit(&((struct wl_req *)r)->built, memory_order_acquire);
}

int wl_req_build(struct wl_req *r, struct wl_step *st, uint32_t lane, struct wl_out *out)
{
	uint32_t n = st->n;
	size_t host_used = st->host->used, dev_used = st->dev->used;
	void *tok;
	int err;

	uint32_t built = atomic_load_explicit(&r->built, memory_order_relaxed);

	if (!r->filled)
		return -EPROTO;
	if (built == r->pub.steps)
		return -ENODATA;
	/* the token, then the payload the build writes right after it (zeroed: a
	 * callable that writes fewer bytes leaves nothing of an earlier step there) */
	size_t tok_size = sizeof(int32_t) + r->wc->cl->payload_bytes;

	tok = wl_arena_alloc(st->host, tok_size, sizeof(int32_t));
	if (tok)
		memset(tok, 0, tok_size);
	st->building = lane + 1;
	st->token = tok;
	st->token_len = tok_size;
	st->why[0] = '\0';
	err = tok ? r->wc->cl->build(&r->pub, (struct chipd_cl_step *)st, lane, built, tok)
		  : -ENOBUFS;
	st->building = 0;
	st->token = NULL;
	if (err) {
		st->n = n;
		st->host->used = host_used;
		st->dev->used = dev_used;
		return err;
	}
	out->token = tok;
	out->payload = (const uint8_t *)tok + sizeof(int32_t);
	out->payload_len = r->wc->cl->payload_bytes;
	out->step = built;
	atomic_store_explicit(&r->built, built + 1, memory_order_release);
	return 0;
}

int wl_req_token(struct wl_req *r, const struct wl_out *out, uint64_t *token)
{
	if (out->step != r->read || out->step >= wl_req_built(r))
		return -EPROTO;
	*token = (uint64_t)(uint32_t)*out->token;
	r->read++;
	return 0;
}

int wl_req_output(struct wl_req *r, void *dst, uint32_t *len, char *msg, size_t cap)
{
	const struct chipd_callable *cl = r->wc->cl;
	uint32_t n = 0;
	void *buf;
	int err;

	*len = 0;
	if (!r->out_cap)
		return 0;
	buf = malloc(r->out_cap); /* the hook's private memory, never the client's */
	if (!buf) {
		snprintf(msg, cap, "%s: no host memory for %" PRIu32 " output bytes", cl->name,
			 r->out_cap);
		return -ENOMEM;
	}
	msg[0] = '\0';
	err = cl->output(&r->pub, buf, r->out_cap, &n, msg, cap);
	if (err == 0 && n > r->out_cap) {
		snprintf(msg, cap, "%s: output hook wrote %" PRIu32 " bytes, at most %" PRIu32,
			 cl->name, n, r->out_cap);
		err = -EPROTO;
	} else if (err && !msg[0]) {
		snprintf(msg, cap, "%s: output hook failed (%d)", cl->name, err);
	}
	if (err == 0) {
		memcpy(dst, buf, n);
		*len = n;
	}
	free(buf);
	return err;
}

int wl_ref_tokens(const char *workload, const struct wl_params *p, uint64_t *tokens, uint32_t n,
		  char *msg, size_t cap)
{
	const struct wl_callable *wc;
	int64_t cfg[WL_PARAMS_MAX];
	int err = find_and_configure(workload, p, &wc, cfg, msg, cap);

	if (err)
		return err;
	if (n > wc->cl->steps(cfg)) {
		snprintf(msg, cap, "%s: %u reference tokens asked, the request makes %u",
			 wc->cl->name, n, wc->cl->steps(cfg));
		return -EINVAL;
	}
	if (!wc->cl->ref) {
		snprintf(msg, cap, "%s: the callable has no CPU reference", wc->cl->name);
		return -ENOTSUP;
	}
	return wc->cl->ref(cfg, tokens, n);
}
