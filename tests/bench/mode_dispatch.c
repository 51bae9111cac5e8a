/* mode_dispatch.c - `chipbench dispatch`: what one task costs to dispatch. Empty
 * tasks (DEV_K_SPIN of 0 ns: the kernel only stores a token) run through the step
 * executor S uses (wl_exec_run on the sim device), in steps of --step tasks:
 *
 *   independent  no dependencies, lanes round robin over the streams
 *   chain        every task depends on the one before it, its lane the next one
 *                (the executor keeps a chain on its first task's stream: stream
 *                order instead of an event per hop)
 *
 * Prints ns/task and tasks/s, the median of --runs runs. A row on the device itself
 * follows: one spin kernel of --kernel-us on one stream, against one such kernel on
 * each of the streams at once (the ratio of the wall times: 1 when the streams run
 * concurrently, the number of streams when they run one after another). The
 * dispatch baseline is StarPU
 * (peer_starpu.c, where the build found libstarpu-dev): the same number of empty
 * tasks in the same steps, measured with the same runs and median in this process,
 * and the ratio of the throughputs. Without StarPU the line says why it is skipped.
 * Everything is measured first, then printed (dispatch_print.c): a table, or with
 * --json one JSON document with each run's ns/task too. */
#include "modes.h"

#include "bench_args.h"
#include "dispatch.h"

#include "device.h"
#ifdef CHIPD_HAVE_STARPU
#include "peer_starpu.h"
#endif
#include "wait.h"
#include "wl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One run of a variant: ns per task, or a negative errno. */
typedef double (*ds_run_fn)(void *ctx, const struct ds_opts *o, bool chain);

struct ds_ctx {
	struct dev *dev;
	struct wl_exec *exec;
	int32_t *out; /* device memory: one token slot per task of a step */
	void *host_mem;
	struct wl_arena host, dev_arena;
	struct wl_step st;
};

static int ds_open(struct ds_ctx *c, const struct ds_opts *o)
{
	size_t host_bytes = (size_t)o->step * sizeof(struct wl_task) + 4096;
	char msg[160];
	int err;

	memset(c, 0, sizeof(*c));
	err = dev_open(&c->dev, DEV_SIM, 0, msg, sizeof(msg));
	if (err) {
		fprintf(stderr, "chipbench dispatch: sim device: %s\n", msg);
		return err;
	}
	err = wl_exec_create(&c->exec, c->dev, o->streams);
	if (!err)
		err = dev_alloc(c->dev, (size_t)o->step * sizeof(int32_t), (void **)&c->out);
	if (!err) {
		c->host_mem = malloc(host_bytes);
		if (!c->host_mem)
			err = -ENOMEM;
	}
	if (err) {
		fprintf(stderr, "chipbench dispatch: setup failed: %s\n", strerror(-err));
		return err;
	}
	wl_arena_init(&c->host, c->host_mem, host_bytes);
	wl_arena_init(&c->dev_arena, NULL, 0);
	return 0;
}

static void ds_close(struct ds_ctx *c)
{
	free(c->host_mem);
	if (c->out)
		(void)dev_free(c->dev, c->out);
	if (c->exec)
		wl_exec_destroy(c->exec);
	if (c->dev)
		dev_close(c->dev);
}

/* Fills the step with @n empty tasks; @chain: each depends on the one before it. */
static int ds_fill(struct ds_ctx *c, uint32_t n, bool chain, unsigned streams)
{
	int err;

	wl_arena_reset(&c->host);
	err = wl_step_init(&c->st, &c->host, &c->dev_arena, n);
	if (err)
		return err;
	for (uint32_t i = 0; i < n; i++) {
		struct wl_task *t = &c->st.tasks[i];

		memset(t, 0, sizeof(*t));
		t->kind = WL_TASK_LAUNCH;
		t->lane = i % streams;
		if (chain && i > 0) {
			t->ndeps = 1;
			t->deps[0] = i - 1;
		}
		t->u.call.kernel = DEV_K_SPIN;
		t->u.call.u.spin = (struct dev_k_spin){.out = &c->out[i], .ns = 0, .token = 1};
	}
	c->st.n = n;
	return 0;
}

/* One run: @o->tasks tasks in steps of @o->step. ns per task, or a negative errno. */
static double ds_run(void *ctx, const struct ds_opts *o, bool chain)
{
	struct ds_ctx *c = ctx;
	uint64_t t0, t1;
	uint32_t left = o->tasks, filled = 0;
	int err = 0;

	t0 = shm_now_ns();
	while (left && !err) {
		uint32_t n = left < o->step ? left : o->step;

		/* the step is built once per size: building is O's cost, not dispatch */
		if (n != filled) {
			uint64_t b0 = shm_now_ns();

			err = ds_fill(c, n, chain, o->streams);
			t0 += shm_now_ns() - b0;
			filled = n;
		}
		if (!err)
			err = wl_exec_run(c->exec, &c->st);
		left -= n;
	}
	t1 = shm_now_ns();
	if (err) {
		fprintf(stderr, "chipbench dispatch: run failed: %s\n", strerror(-err));
		return err;
	}
	return (double)(t1 - t0) / o->tasks;
}

static int ds_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A warm-up run, then @o->runs measured ones into @s (each run and the median).
 * Returns 0 or the failing run's negative errno (also in s->err). The same scheme
 * for chipd and its peer. */
static int ds_measure(ds_run_fn run, void *ctx, const struct ds_opts *o, bool chain,
		      struct ds_series *s)
{
	double sorted[DS_MAX_RUNS], ns = run(ctx, o, chain); /* warm-up: events, threads */

	memset(s, 0, sizeof(*s));
	if (ns < 0)
		return s->err = (int)ns;
	for (; s->n < o->runs; s->n++) {
		ns = run(ctx, o, chain);
		if (ns < 0)
			return s->err = (int)ns;
		s->ns[s->n] = ns;
	}
	memcpy(sorted, s->ns, s->n * sizeof(sorted[0]));
	qsort(sorted, s->n, sizeof(sorted[0]), ds_cmp);
	s->median = sorted[s->n / 2];
	return 0;
}

/* One run of the concurrent streams row: a spin kernel of @o->kernel_us on each of
 * the first @n streams of @s, launched together, then dev_sync. Wall ns, or a
 * negative errno. */
static double ds_conc_run(struct dev *d, struct dev_stream **s, int32_t *out, unsigned n,
			  const struct ds_opts *o)
{
	uint64_t t0 = shm_now_ns();
	int err = 0;

	for (unsigned i = 0; i < n && !err; i++) {
		struct dev_kcall k = {DEV_K_SPIN,
				      .u.spin = {&out[i], (uint64_t)o->kernel_us * 1000u, 1}};

		err = dev_launch(s[i], &k);
	}
	if (!err)
		err = dev_sync(d);
	if (err) {
		fprintf(stderr, "chipbench dispatch: concurrent streams: %s\n", strerror(-err));
		return err;
	}
	return (double)(shm_now_ns() - t0);
}

/* The concurrent streams row (dispatch.h, struct ds_conc) on @c's device, with
 * streams of its own: a warm-up of each variant, then @o->runs runs of each,
 * alternating, and their medians. */
static void ds_concurrency(struct ds_ctx *c, const struct ds_opts *o, struct ds_conc *r)
{
	double one[DS_MAX_RUNS], all[DS_MAX_RUNS];
	struct dev_stream *s[WL_EXEC_STREAMS] = {NULL};
	int32_t *out = NULL;
	unsigned n = 0;
	int err;

	memset(r, 0, sizeof(*r));
	err = dev_alloc(c->dev, o->streams * sizeof(*out), (void **)&out);
	for (; !err && n < o->streams; n++)
		err = dev_stream_create(c->dev, &s[n]);
	if (err) {
		fprintf(stderr, "chipbench dispatch: concurrent streams: setup failed: %s\n",
			strerror(-err));
		r->err = err;
		goto out;
	}
	for (unsigned i = 0; i <= o->runs; i++) {
		double a = ds_conc_run(c->dev, s, out, 1, o);
		double b = a < 0 ? a : ds_conc_run(c->dev, s, out, n, o);

		if (b < 0) {
			r->err = (int)b;
			goto out;
		}
		if (i > 0) { /* run 0 warms the stream threads up */
			one[i - 1] = a;
			all[i - 1] = b;
		}
	}
	qsort(one, o->runs, sizeof(one[0]), ds_cmp);
	qsort(all, o->runs, sizeof(all[0]), ds_cmp);
	r->one_ns = one[o->runs / 2];
	r->all_ns = all[o->runs / 2];
out:
	for (unsigned i = 0; i < n; i++)
		if (s[i])
			dev_stream_destroy(s[i]);
	if (out)
		(void)dev_free(c->dev, out);
}

#ifdef CHIPD_HAVE_STARPU
/* StarPU's CPU workers unless told: one core fewer than the machine has, since the
 * submitting thread needs one too (and StarPU's idle workers poll), at least one,
 * and no more than chipd's streams. */
static unsigned ds_starpu_ncpus(const struct ds_opts *o)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = online > 1 ? (unsigned)online - 1 : 1;

	if (o->starpu_ncpus)
		return o->starpu_ncpus;
	return n < o->streams ? n : o->streams;
}

static double ds_starpu_run(void *ctx, const struct ds_opts *o, bool chain)
{
	return peer_starpu_run(ctx, o->tasks, chain);
}

/* Measures StarPU into @peer (or says in it why not). */
static void ds_starpu(const struct ds_opts *o, struct ds_peer *peer)
{
	struct peer_starpu *p;

	peer->ncpus = ds_starpu_ncpus(o);
	if (peer_starpu_open(&p, peer->ncpus, o->step, peer->what, sizeof(peer->what))) {
		peer->skipped = true;
		return;
	}
	peer_starpu_describe(p, peer->what, sizeof(peer->what));
	for (int k = 0; k < DS_KINDS; k++)
		ds_measure(ds_starpu_run, p, o, k == DS_CHAIN, &peer->s[k]);
	peer_starpu_close(p);
}
#else
static void ds_starpu(const struct ds_opts *o, struct ds_peer *peer)
{
	(void)o;
	peer->skipped = true;
	snprintf(peer->what, sizeof(peer->what),
		 "chipbench was built without StarPU: pkg-config found no starpu-1.3; Debian "
		 "package libstarpu-dev");
}
#endif

static void ds_usage(FILE *f)
{
	fputs("usage: chipbench dispatch [--tasks N] [--step N] [--runs N] [--streams N]\n"
	      "                          [--kernel-us N] [--starpu-ncpus N] [--no-starpu]\n"
	      "                          [--json]\n"
	      "  empty tasks through the step executor on the sim device, independent and\n"
	      "  in dependency chains; ns/task and tasks/s, median of --runs runs; one\n"
	      "  kernel of --kernel-us (default 20000; 0: no such row) on each of the\n"
	      "  streams at once against one alone, and the ratio of the wall times; the\n"
	      "  same tasks through StarPU (when built in) and the ratio of the throughputs;\n"
	      "  --json: one JSON document on stdout (each run too) instead of the table\n",
	      f);
}

int mode_dispatch(int argc, char **argv)
{
	struct ds_opts o = {.tasks = 20000,
			    .step = 1024,
			    .runs = 5,
			    .streams = 4,
			    .kernel_us = 20000,
			    .starpu = true};
	const struct bench_arg args[] = {
	    {"tasks", BENCH_ARG_UNSIGNED, &o.tasks, 1, UINT_MAX},
	    {"step", BENCH_ARG_UNSIGNED, &o.step, 1, 1u << 20},
	    {"runs", BENCH_ARG_UNSIGNED, &o.runs, 1, DS_MAX_RUNS},
	    {"streams", BENCH_ARG_UNSIGNED, &o.streams, 1, WL_EXEC_STREAMS},
	    {"kernel-us", BENCH_ARG_UNSIGNED, &o.kernel_us, 0, 10u * 1000 * 1000},
	    {"starpu-ncpus", BENCH_ARG_UNSIGNED, &o.starpu_ncpus, 0, 1024},
	    {"no-starpu", BENCH_ARG_CLEAR, &o.starpu},
	    {"json", BENCH_ARG_FLAG, &o.json},
	};
	struct ds_series chipd[DS_KINDS];
	struct ds_conc conc = {0};
	struct ds_peer peer = {0};
	struct ds_ctx c;
	int fails = 0, rc;

	rc = bench_args_parse(argc, argv, "dispatch", args, sizeof(args) / sizeof(args[0]),
			      ds_usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (ds_open(&c, &o)) {
		ds_close(&c);
		return 1;
	}
	for (int k = 0; k < DS_KINDS; k++)
		if (ds_measure(ds_run, &c, &o, k == DS_CHAIN, &chipd[k]))
			fails++;
	if (o.kernel_us) {
		ds_concurrency(&c, &o, &conc);
		fails += conc.err != 0;
	}
	/* chipd's stream threads are gone before StarPU's workers start */
	ds_close(&c);
	if (o.starpu) {
		ds_starpu(&o, &peer);
	} else {
		peer.skipped = true;
		snprintf(peer.what, sizeof(peer.what), "--no-starpu");
	}
	if (o.json)
		ds_print_json(&o, chipd, &conc, &peer);
	else
		ds_print_table(&o, chipd, &conc, &peer);
	return fails ? 1 : 0;
}
