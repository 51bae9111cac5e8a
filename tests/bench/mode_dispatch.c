/* mode_dispatch.c - `chipbench dispatch`: what one task costs to dispatch. Empty
 * tasks (DEV_K_SPIN of 0 ns: the kernel only stores a token) run through the step
 * executor S uses (wl_exec_run on the sim device), in steps of --step tasks:
 *
 *   independent  no dependencies, lanes round robin over the streams
 *   chain        every task depends on the one before it, on the next stream (one
 *                event per task)
 *
 * Prints ns/task and tasks/s, the median of --runs runs. StarPU's empty-task
 * throughput is to be the baseline where libstarpu-dev is installed; the StarPU side
 * is not written yet (no machine here has the package), so the line says why it is
 * skipped. */
#include "modes.h"

#include "device.h"
#include "wait.h"
#include "wl.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DS_MAX_RUNS 101u

struct ds_opts {
	unsigned tasks;	  /* per run */
	unsigned step;	  /* tasks per wl_exec_run */
	unsigned runs;	  /* measured runs; the median is printed */
	unsigned streams; /* 1..WL_EXEC_STREAMS */
};

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
static double ds_run(struct ds_ctx *c, const struct ds_opts *o, bool chain)
{
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

static void ds_usage(FILE *f)
{
	fputs("usage: chipbench dispatch [--tasks N] [--step N] [--runs N] [--streams N]\n"
	      "  empty tasks through the step executor on the sim device, independent and\n"
	      "  in dependency chains; ns/task and tasks/s, median of --runs runs\n",
	      f);
}

int mode_dispatch(int argc, char **argv)
{
	static const struct option lopts[] = {
	    {"tasks", required_argument, NULL, 'n'}, {"step", required_argument, NULL, 's'},
	    {"runs", required_argument, NULL, 'r'},  {"streams", required_argument, NULL, 'S'},
	    {"help", no_argument, NULL, 'h'},	     {NULL, 0, NULL, 0},
	};
	static const char *const kind[] = {"independent", "chain"};
	struct ds_opts o = {20000, 1024, 5, 4};
	double ns[DS_MAX_RUNS];
	struct ds_ctx c;
	int ch, fails = 0;

	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			o.tasks = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 's':
			o.step = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			o.runs = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			o.streams = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'h':
			ds_usage(stdout);
			return 0;
		default:
			ds_usage(stderr);
			return 64;
		}
	}
	if (o.tasks < 1 || o.step < 1 || o.step > (1u << 20) || o.runs < 1 ||
	    o.runs > DS_MAX_RUNS || o.streams < 1 || o.streams > WL_EXEC_STREAMS) {
		ds_usage(stderr);
		return 64;
	}
	if (ds_open(&c, &o)) {
		ds_close(&c);
		return 1;
	}
	printf("dispatch: %u empty tasks per run in steps of %u, %u streams, median of %u "
	       "runs (sim device)\n",
	       o.tasks, o.step, o.streams, o.runs);
	printf("%-12s %12s %14s\n", "tasks", "ns/task", "tasks/s");
	for (int k = 0; k < 2; k++) {
		double med;
		unsigned i;

		(void)ds_run(&c, &o, k == 1); /* warm-up: events, stream threads */
		for (i = 0; i < o.runs; i++) {
			ns[i] = ds_run(&c, &o, k == 1);
			if (ns[i] < 0)
				break;
		}
		if (i < o.runs) {
			fails++;
			continue;
		}
		qsort(ns, o.runs, sizeof(ns[0]), ds_cmp);
		med = ns[o.runs / 2];
		printf("%-12s %12.1f %14.0f\n", kind[k], med, med > 0 ? 1e9 / med : 0.0);
	}
#ifdef CHIPD_BENCH_STARPU_FOUND
	printf("starpu: skipped (libstarpu-dev found, but its measurement is not written yet)\n");
#else
	printf("starpu: skipped (libstarpu-dev not installed)\n");
#endif
	ds_close(&c);
	return fails ? 1 : 0;
}
