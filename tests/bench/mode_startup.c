/* mode_startup.c - `chipbench startup`: how long a node takes to come up, go down,
 * and come back from a dead worker.
 *
 * Start: fork+exec of chipd --foreground --notify-fd until its readiness newline,
 * with 1, 2 and 8 sim chips (median of --runs fresh starts each); stop: SIGTERM until
 * it exited. Recovery: a fresh 2-chip chipd, chip 0's worker (its pid from
 * chipd_status) SIGKILLed; measured until the supervisor shows the chip no longer
 * READY with that pid (detected), until it is READY with a new pid, and until a
 * synthetic request pinned to chip 0 completes. The baseline is the 1-chip start of
 * the same run. */
#include "modes.h"

#include "bench.h"
#include "bench_args.h"
#include "bench_chipd.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SU_MAX_ROWS   8
#define SU_MAX_RUNS   100
#define SU_RESTART_MS 15000u /* bound on a worker's restart (the first backoff is 100 ms) */
#define SU_SERVE_MS   15000u /* bound on the first request served after it */

struct su_opts {
	const char *chipd;
	unsigned chips[SU_MAX_ROWS];
	unsigned nrows;
	unsigned runs;
	bool json;
};

/* One line of the result: a median over runs of one quantity, in ns. */
struct su_line {
	char what[64];
	unsigned chips, ok;
	double p50, min, max;
};

/* Fills @l from @v (n ok samples). */
static void su_line_fill(struct su_line *l, uint64_t *v, unsigned n)
{
	l->ok = n;
	l->p50 = bench_quantile(v, n, 0.5);
	l->min = n ? (double)v[0] : 0; /* sorted by bench_quantile */
	l->max = n ? (double)v[n - 1] : 0;
}

/* Starts and stops @chips chips @runs times; fills the start and stop lines. */
static void su_start_stop(const struct su_opts *o, unsigned chips, struct su_line *start,
			  struct su_line *stop)
{
	uint64_t up[SU_MAX_RUNS], down[SU_MAX_RUNS];
	unsigned nup = 0, ndown = 0;

	for (unsigned i = 0; i < o->runs; i++) {
		struct bench_chipd d;
		char tag[32];
		uint64_t ns;

		snprintf(tag, sizeof(tag), "start%u-%u", chips, i);
		if (bench_chipd_start(&d, bench_chipd_bin(o->chipd), tag, chips, NULL))
			continue;
		up[nup++] = d.ready_ns;
		if (bench_chipd_stop(&d, &ns) == 0)
			down[ndown++] = ns;
	}
	snprintf(start->what, sizeof(start->what), "start, %u chip%s", chips, chips > 1 ? "s" : "");
	snprintf(stop->what, sizeof(stop->what), "stop, %u chip%s", chips, chips > 1 ? "s" : "");
	start->chips = stop->chips = chips;
	su_line_fill(start, up, nup);
	su_line_fill(stop, down, ndown);
}

/* One recovery on a fresh 2-chip chipd. Returns 0 with the three times, or -errno. */
static int su_recover_once(const struct su_opts *o, unsigned run, uint64_t *detect, uint64_t *ready,
			   uint64_t *serve)
{
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct chipd_error err;
	struct bench_chipd d;
	uint64_t t0, left = 0, end;
	pid_t old, fresh;
	char tag[32];
	int rc;

	if (!st)
		return -ENOMEM;
	snprintf(tag, sizeof(tag), "kill-%u", run);
	rc = bench_chipd_start(&d, bench_chipd_bin(o->chipd), tag, 2, NULL);
	if (rc)
		goto out;
	rc = chipd_status(d.conn, BENCH_CHIPD_CALL_MS, st, &err);
	if (rc || st->nchips < 1 || st->chips[0].pid == 0) {
		fprintf(stderr, "chipbench startup: no worker pid for chip 0: %s\n",
			rc ? err.message : "none in the status");
		rc = rc ? rc : -ESRCH;
		goto out_stop;
	}
	old = (pid_t)st->chips[0].pid;
	t0 = bench_chipd_now_ns();
	if (kill(old, SIGKILL)) {
		rc = -errno;
		goto out_stop;
	}
	fresh = bench_chipd_wait_chip(&d, 0, old, SU_RESTART_MS, &left);
	*ready = bench_chipd_now_ns() - t0;
	if (!fresh) {
		fprintf(stderr, "chipbench startup: chip 0 not READY again within %u ms\n",
			SU_RESTART_MS);
		rc = -ETIMEDOUT;
		goto out_stop;
	}
	*detect = left ? left - t0 : *ready;
	/* READY in the directory may precede the worker taking work: retry until served */
	end = bench_chipd_now_ns() + SU_SERVE_MS * 1000000ull;
	for (;;) {
		rc = bench_chipd_synthetic(d.conn, 0, 1, 0, 0, BENCH_CHIPD_CALL_MS);
		if (rc == 0 || bench_chipd_now_ns() >= end)
			break;
		usleep(1000);
	}
	*serve = bench_chipd_now_ns() - t0;
	if (rc)
		fprintf(stderr, "chipbench startup: no request served on chip 0: %s\n",
			strerror(-rc));
out_stop:
	if (bench_chipd_stop(&d, NULL) && !rc)
		rc = -EPROTO;
out:
	free(st);
	return rc;
}

static void su_recover(const struct su_opts *o, struct su_line l[3])
{
	uint64_t v[3][SU_MAX_RUNS];
	unsigned n = 0;

	for (unsigned i = 0; i < o->runs; i++)
		if (su_recover_once(o, i, &v[0][n], &v[1][n], &v[2][n]) == 0)
			n++;
	snprintf(l[0].what, sizeof(l[0].what), "worker killed -> detected");
	snprintf(l[1].what, sizeof(l[1].what), "worker killed -> READY, new pid");
	snprintf(l[2].what, sizeof(l[2].what), "worker killed -> request served");
	for (int k = 0; k < 3; k++) {
		l[k].chips = 2;
		su_line_fill(&l[k], v[k], n);
	}
}

static void su_print(const struct su_opts *o, const struct su_line *l, unsigned n, double base)
{
	if (o->json) {
		printf("{\"mode\": \"startup\", \"runs\": %u, \"baseline\": \"start, 1 chip\", "
		       "\"rows\": [",
		       o->runs);
		for (unsigned i = 0; i < n; i++)
			printf("%s\n    {\"what\": \"%s\", \"chips\": %u, \"ok\": %u, "
			       "\"p50_ns\": %.0f, \"min_ns\": %.0f, \"max_ns\": %.0f, "
			       "\"ratio\": %.3f}",
			       i ? "," : "", l[i].what, l[i].chips, l[i].ok, l[i].p50, l[i].min,
			       l[i].max, base > 0 ? l[i].p50 / base : 0);
		printf("\n  ]}\n");
		return;
	}
	printf("startup: chipd, sim chips, median of %u runs; ratio against the 1-chip start\n",
	       o->runs);
	printf("%-34s %4s %11s %11s %11s %8s\n", "what", "ok", "median", "min", "max", "ratio");
	for (unsigned i = 0; i < n; i++) {
		if (!l[i].ok) {
			printf("%-34s %4u failed\n", l[i].what, l[i].ok);
			continue;
		}
		printf("%-34s %4u %9.2fms %9.2fms %9.2fms %7.2fx\n", l[i].what, l[i].ok,
		       l[i].p50 / 1e6, l[i].min / 1e6, l[i].max / 1e6,
		       base > 0 ? l[i].p50 / base : 0);
	}
}

static void su_usage(FILE *f)
{
	fputs("usage: chipbench startup [--chipd PATH] [--chips N,N,...] [--runs N] [--json]\n"
	      "  exec -> ready (notify fd) and SIGTERM -> exit with each chip count (default\n"
	      "  1,2,8), then a killed worker -> detected / READY again / serving (2 chips);\n"
	      "  medians of --runs (default 5) fresh chipds; ratios against the first start\n",
	      f);
}

int mode_startup(int argc, char **argv)
{
	struct su_opts o = {.chips = {1, 2, 8}, .nrows = 3, .runs = 5};
	const struct bench_arg args[] = {
	    {"chipd", BENCH_ARG_STRING, &o.chipd},
	    {"chips", BENCH_ARG_LIST, &(struct bench_arg_list){o.chips, SU_MAX_ROWS, &o.nrows}, 1,
	     CHIPD_MAX_CHIPS},
	    {"runs", BENCH_ARG_UNSIGNED, &o.runs, 1, SU_MAX_RUNS},
	    {"json", BENCH_ARG_FLAG, &o.json},
	};
	struct su_line lines[2 * SU_MAX_ROWS + 3];
	unsigned n = 0, fails = 0;
	int rc =
	    bench_args_parse(argc, argv, "startup", args, sizeof(args) / sizeof(args[0]), su_usage);

	if (rc)
		return rc == 1 ? 0 : rc;
	memset(lines, 0, sizeof(lines));
	for (unsigned i = 0; i < o.nrows; i++, n += 2)
		su_start_stop(&o, o.chips[i], &lines[n], &lines[n + 1]);
	su_recover(&o, &lines[n]);
	n += 3;
	for (unsigned i = 0; i < n; i++)
		fails += lines[i].ok < o.runs;
	su_print(&o, lines, n, lines[0].p50);
	return fails ? 1 : 0;
}
