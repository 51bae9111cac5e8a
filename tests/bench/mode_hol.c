/* mode_hol.c - `chipbench hol`: head-of-line isolation inside one chip. A real chipd
 * with 1 sim chip; 8 fast clients (threads, each with its own connection) submit
 * synthetic requests of 50 us of device time a step back to back, pinned to chip 0,
 * for a fixed time: once alone, once while a slow request (5 ms a step) runs on the
 * same chip, read by a ninth client. Per run: the fast requests' tokens/s in both
 * phases and their ratio (with the slow one / alone); the report is the median ratio.
 *
 * The baseline is the alone phase of the same run: a worker whose steps wait for all
 * their requests would give the fast ones one step per slow step (~0.01x), one that
 * isolates them keeps them near 1x. */
#include "modes.h"

#include "bench.h"
#include "bench_args.h"
#include "bench_chipd.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOL_MAX_RUNS	 32
#define HOL_MAX_FAST	 64
#define HOL_CALL_MS	 5000u
#define HOL_SLOW_TOKENS	 (1u << 20) /* more than any phase lasts: closed when done */
#define HOL_SLOW_WAIT_MS 5000u	    /* the slow request's first token, bound */
#define HOL_TARGET	 0.8

struct hol_opts {
	const char *chipd;
	unsigned runs, fast, tokens, fast_us, slow_us;
	double seconds; /* per phase */
	bool json;
};

struct hol_run {
	int rc;
	double alone_tps, slow_tps; /* the fast requests' tokens/s: alone, beside the slow */
	double slow_own_tps;	    /* the slow request's own tokens/s meanwhile */
	double ratio;
};

/* One client: fast requests back to back until @end_ns, or (slow) one long request
 * read until @stop. */
struct hol_client {
	pthread_t th;
	const char *instance;
	const struct hol_opts *o;
	bool slow;
	atomic_bool *go, *stop;
	atomic_uint *ready;
	uint64_t end_ns;
	/* delivered before end_ns (fast), or in all (slow; the main thread watches it) */
	_Atomic uint64_t tokens;
	uint64_t t0_ns, t1_ns;
	int rc;
};

/* Submits a synthetic request of @tokens tokens, @device_us a step, to chip 0. */
static int hol_submit(chipd_conn *conn, uint32_t tokens, uint32_t device_us, chipd_stream **s,
		      struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"device_us", device_us}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = 0};
	uint64_t id;

	return chipd_submit(conn, &req, HOL_CALL_MS, &id, s, err);
}

static int hol_fast_request(struct hol_client *c, chipd_conn *conn)
{
	struct chipd_token tok = {0};
	struct chipd_error err;
	chipd_stream *s = NULL;
	int rc = hol_submit(conn, c->o->tokens, c->o->fast_us, &s, &err);

	if (rc == -EAGAIN || (rc == -EREMOTEIO && err.retryable)) {
		usleep(100); /* the node said "later" */
		return 0;
	}
	while (rc == 0 && !tok.final) {
		rc = chipd_stream_next(s, &tok, HOL_CALL_MS, &err);
		if (rc == 0 && bench_chipd_now_ns() < c->end_ns)
			atomic_fetch_add_explicit(&c->tokens, 1, memory_order_relaxed);
	}
	chipd_stream_close(s, HOL_CALL_MS);
	if (rc)
		fprintf(stderr, "chipbench hol: fast request failed: %s (%s)\n", strerror(-rc),
			err.message);
	return rc;
}

static int hol_slow_request(struct hol_client *c, chipd_conn *conn)
{
	struct chipd_token tok = {0};
	struct chipd_error err;
	chipd_stream *s = NULL;
	int rc = hol_submit(conn, HOL_SLOW_TOKENS, c->o->slow_us, &s, &err);

	c->t0_ns = bench_chipd_now_ns();
	while (rc == 0 && !atomic_load_explicit(c->stop, memory_order_acquire)) {
		rc = chipd_stream_next(s, &tok, 100, &err);
		if (rc == 0)
			atomic_fetch_add_explicit(&c->tokens, 1, memory_order_relaxed);
		else if (rc == -ETIMEDOUT)
			rc = 0;
	}
	c->t1_ns = bench_chipd_now_ns();
	chipd_stream_close(s, HOL_CALL_MS); /* cancels it */
	if (rc)
		fprintf(stderr, "chipbench hol: slow request failed: %s (%s)\n", strerror(-rc),
			err.message);
	return rc;
}

static void *hol_client_main(void *arg)
{
	struct hol_client *c = arg;
	struct chipd_error err;
	chipd_conn *conn = NULL;

	c->rc = chipd_connect(c->instance, &conn, &err);
	atomic_fetch_add_explicit(c->ready, 1, memory_order_release);
	if (c->slow) {
		if (!c->rc)
			c->rc = hol_slow_request(c, conn);
		chipd_close(conn);
		return NULL;
	}
	while (!atomic_load_explicit(c->go, memory_order_acquire))
		sched_yield();
	while (c->rc == 0 && bench_chipd_now_ns() < c->end_ns)
		c->rc = hol_fast_request(c, conn);
	chipd_close(conn);
	return NULL;
}

/* Starts the slow client and waits for its first token. */
static int hol_start_slow(const struct hol_opts *o, const struct bench_chipd *d,
			  struct hol_client *sc, atomic_bool *stop, atomic_uint *ready)
{
	uint64_t end;

	*sc = (struct hol_client){
	    .instance = d->instance, .o = o, .slow = true, .stop = stop, .ready = ready};
	if (pthread_create(&sc->th, NULL, hol_client_main, sc))
		return -EAGAIN;
	end = bench_chipd_now_ns() + HOL_SLOW_WAIT_MS * 1000000ull;
	while (atomic_load_explicit(&sc->tokens, memory_order_relaxed) == 0 &&
	       bench_chipd_now_ns() < end)
		usleep(200);
	return 0;
}

/* One phase: the fast clients for o->seconds. Returns their tokens/s, or < 0. */
static double hol_phase(const struct hol_opts *o, const struct bench_chipd *d, int *rc)
{
	struct hol_client *cl = calloc(o->fast, sizeof(*cl));
	atomic_bool go = false;
	atomic_uint ready = 0;
	unsigned started = 0;
	uint64_t t0, tokens = 0;

	if (!cl) {
		*rc = -ENOMEM;
		return -1;
	}
	for (unsigned i = 0; i < o->fast; i++)
		cl[i] = (struct hol_client){
		    .instance = d->instance, .o = o, .go = &go, .ready = &ready};
	for (; started < o->fast; started++)
		if (pthread_create(&cl[started].th, NULL, hol_client_main, &cl[started]))
			break;
	t0 = bench_chipd_clients_ready(&ready, started, HOL_CALL_MS);
	for (unsigned i = 0; i < started; i++)
		cl[i].end_ns = t0 + (uint64_t)(o->seconds * 1e9);
	atomic_store_explicit(&go, true, memory_order_release);
	*rc = started == o->fast ? 0 : -EAGAIN;
	for (unsigned i = 0; i < started; i++) {
		pthread_join(cl[i].th, NULL);
		tokens += atomic_load_explicit(&cl[i].tokens, memory_order_relaxed);
		if (!*rc)
			*rc = cl[i].rc;
	}
	free(cl);
	/* the tokens counted are those delivered before the end */
	return *rc ? -1 : (double)tokens / o->seconds;
}

static void hol_run(const struct hol_opts *o, const struct bench_chipd *d, struct hol_run *r)
{
	struct hol_client sc;
	atomic_bool stop = false;
	atomic_uint ready = 0;
	int rc;

	r->alone_tps = hol_phase(o, d, &r->rc);
	if (r->rc)
		return;
	r->rc = hol_start_slow(o, d, &sc, &stop, &ready);
	if (r->rc)
		return;
	r->slow_tps = hol_phase(o, d, &rc);
	atomic_store_explicit(&stop, true, memory_order_release);
	pthread_join(sc.th, NULL);
	r->rc = rc ? rc : sc.rc;
	if (!r->rc && atomic_load_explicit(&sc.tokens, memory_order_relaxed) == 0)
		r->rc = -ETIMEDOUT; /* the slow request never ran: nothing was measured */
	if (r->rc)
		return;
	r->slow_own_tps = sc.t1_ns > sc.t0_ns
			      ? (double)atomic_load_explicit(&sc.tokens, memory_order_relaxed) *
				    1e9 / (double)(sc.t1_ns - sc.t0_ns)
			      : 0;
	r->ratio = r->alone_tps > 0 ? r->slow_tps / r->alone_tps : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of the runs' @field (offset of a double in struct hol_run) over good runs. */
static double hol_median(const struct hol_run *runs, unsigned n, size_t field)
{
	double v[HOL_MAX_RUNS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (!runs[i].rc)
			v[k++] = *(const double *)((const char *)&runs[i] + field);
	if (!k)
		return 0;
	qsort(v, k, sizeof(v[0]), cmp_double);
	return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static void hol_print(const struct hol_opts *o, const struct hol_run *runs, bool all_ok)
{
	double ratio = hol_median(runs, o->runs, offsetof(struct hol_run, ratio));

	printf("hol: chipd, 1 sim chip; %u fast clients (synthetic tokens=%u device_us=%u, back "
	       "to back) alone, then beside one slow request (device_us=%u); %.1f s per phase\n",
	       o->fast, o->tokens, o->fast_us, o->slow_us, o->seconds);
	printf("%4s %14s %14s %8s %12s\n", "run", "alone tok/s", "w/ slow tok/s", "ratio",
	       "slow tok/s");
	for (unsigned i = 0; i < o->runs; i++) {
		const struct hol_run *r = &runs[i];

		if (r->rc) {
			printf("%4u failed: %s\n", i + 1, strerror(-r->rc));
			continue;
		}
		printf("%4u %14.0f %14.0f %7.2fx %12.1f\n", i + 1, r->alone_tps, r->slow_tps,
		       r->ratio, r->slow_own_tps);
	}
	printf("median ratio (fast tokens/s beside the slow request / alone): %.2fx; target >= "
	       "%.1fx: %s\n",
	       ratio, HOL_TARGET, all_ok && ratio >= HOL_TARGET ? "met" : "missed");
}

static void hol_print_json(const struct hol_opts *o, const struct hol_run *runs, bool all_ok)
{
	double ratio = hol_median(runs, o->runs, offsetof(struct hol_run, ratio));

	printf(
	    "{\"mode\": \"hol\", \"chips\": 1, \"fast\": %u, \"tokens\": %u, \"fast_device_us\": "
	    "%u, \"slow_device_us\": %u, \"seconds\": %.3f, \"baseline\": \"the fast clients "
	    "alone, same run\", \"runs\": [",
	    o->fast, o->tokens, o->fast_us, o->slow_us, o->seconds);
	for (unsigned i = 0; i < o->runs; i++) {
		const struct hol_run *r = &runs[i];

		printf("%s\n    {\"ok\": %s", i ? "," : "", r->rc ? "false" : "true");
		if (!r->rc)
			printf(", \"alone_tps\": %.1f, \"with_slow_tps\": %.1f, \"ratio\": %.4f, "
			       "\"slow_tps\": %.1f",
			       r->alone_tps, r->slow_tps, r->ratio, r->slow_own_tps);
		printf("}");
	}
	printf("\n  ],\n  \"median_alone_tps\": %.1f, \"median_with_slow_tps\": %.1f, "
	       "\"median_ratio\": %.4f, \"target_ratio\": %.2f, \"target_met\": %s}\n",
	       hol_median(runs, o->runs, offsetof(struct hol_run, alone_tps)),
	       hol_median(runs, o->runs, offsetof(struct hol_run, slow_tps)), ratio, HOL_TARGET,
	       all_ok && ratio >= HOL_TARGET ? "true" : "false");
}

static void hol_usage(FILE *f)
{
	fputs("usage: chipbench hol [--chipd PATH] [--runs N] [--seconds S] [--fast N]\n"
	      "                     [--tokens N] [--fast-us N] [--slow-us N] [--json]\n"
	      "  a real chipd with 1 sim chip; --fast clients (default 8), each a thread with\n"
	      "  its own connection, submit synthetic requests (tokens 64, device_us 50) to\n"
	      "  chip 0 back to back for --seconds (default 1), first alone, then beside one\n"
	      "  slow request (device_us 5000) read by another client; --runs (default 5)\n"
	      "  such pairs; reports the fast tokens/s of both phases and the median ratio\n"
	      "  (beside the slow one / alone; target >= 0.8)\n",
	      f);
}

int mode_hol(int argc, char **argv)
{
	struct hol_opts o = {
	    .runs = 5, .fast = 8, .tokens = 64, .fast_us = 50, .slow_us = 5000, .seconds = 1};
	const struct bench_arg args[] = {
	    {"chipd", BENCH_ARG_STRING, &o.chipd},
	    {"runs", BENCH_ARG_UNSIGNED, &o.runs, 1, HOL_MAX_RUNS},
	    {"seconds", BENCH_ARG_DOUBLE, &o.seconds, 0, 3600},
	    {"fast", BENCH_ARG_UNSIGNED, &o.fast, 1, HOL_MAX_FAST},
	    {"tokens", BENCH_ARG_UNSIGNED, &o.tokens, 1, 1u << 20},
	    {"fast-us", BENCH_ARG_UNSIGNED, &o.fast_us, 0, 1000000},
	    {"slow-us", BENCH_ARG_UNSIGNED, &o.slow_us, 0, 1000000},
	    {"json", BENCH_ARG_FLAG, &o.json},
	};
	struct hol_run runs[HOL_MAX_RUNS] = {0};
	struct bench_chipd d;
	bool all_ok = true;
	int rc;

	rc = bench_args_parse(argc, argv, "hol", args, sizeof(args) / sizeof(args[0]), hol_usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (!(o.seconds > 0))
		return bench_args_error("hol", hol_usage, "--seconds: '%g' is not more than 0",
					o.seconds);
	rc = bench_chipd_start(&d, bench_chipd_bin(o.chipd), "hol", 1, NULL);
	if (rc)
		return 1;
	for (unsigned i = 0; i < o.runs; i++) {
		hol_run(&o, &d, &runs[i]);
		if (runs[i].rc)
			all_ok = false;
	}
	rc = bench_chipd_stop(&d, NULL);
	if (rc) {
		fprintf(stderr, "chipbench hol: chipd exited %d\n", rc);
		all_ok = false;
	}
	if (o.json)
		hol_print_json(&o, runs, all_ok);
	else
		hol_print(&o, runs, all_ok);
	return all_ok ? 0 : 1;
}
