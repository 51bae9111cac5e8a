/* mode_e2e.c - `chipbench e2e`: a real chipd (2 sim chips) under 1, 4, 16, 64
 * concurrent clients. Each client is a thread of this process with its own libchipd
 * connection; it submits synthetic requests back to back (submit, read every token,
 * close) for a fixed time. Per row: requests/s, tokens/s, token delivery latency
 * (the worker's ts_ns vs CLOCK_MONOTONIC when the client has the token) and
 * admission latency (the chipd_submit call) p50/p99.
 *
 * The baseline is the 1-client row of the same run: there is no other server to put
 * in front of the same client loop, so the ratios say how the node scales with
 * concurrency, not how it compares with something else. */
#include "modes.h"

#include "bench.h"
#include "bench_args.h"
#include "bench_chipd.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define E2E_MAX_ROWS	8
#define E2E_MAX_CLIENTS 256
#define E2E_CALL_MS	5000u
#define E2E_BACKOFF_US	100	/* a refused submit (queue full) waits this before the next */
#define E2E_TARGET_NS	10000.0 /* token delivery p50 with a spinning reader */

struct e2e_opts {
	const char *chipd;
	unsigned clients[E2E_MAX_ROWS];
	unsigned nrows;
	double seconds; /* per row */
	unsigned tokens, device_us;
	unsigned dl_tokens, dl_device_us; /* the delivery rows' requests */
	bool delivery;			  /* run the delivery rows */
	bool json;
};

/* A growable array of ns samples. */
struct e2e_samples {
	uint64_t *v;
	size_t n, cap;
};

struct e2e_row {
	/* the load: clients submitting requests of @req_tokens tokens, @device_us per
	 * step, read with a spin of @spin_us (0: the library's default) */
	unsigned clients, req_tokens, device_us, spin_us;
	int rc;
	uint64_t requests, tokens, refused;
	double elapsed_s;
	double rps, tps;
	double tok_p50, tok_p99, adm_p50, adm_p99; /* ns */
};

struct e2e_client {
	pthread_t th;
	const char *instance;
	const struct e2e_opts *o;
	const struct e2e_row *row; /* its load */
	atomic_bool *go;
	atomic_uint *ready; /* clients connected (or failed to) */
	uint64_t end_ns;
	/* results */
	uint64_t requests, tokens, refused;
	int rc; /* 0, or the first failure's -errno */
	struct e2e_samples tok_lat, adm_lat;
};

static int e2e_push(struct e2e_samples *s, uint64_t x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	return 0;
}

/* One client: requests back to back until the row's end. */
static void *e2e_client(void *arg)
{
	struct e2e_client *c = arg;
	struct chipd_param p[] = {{"tokens", c->row->req_tokens}, {"device_us", c->row->device_us}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	struct chipd_error err;
	chipd_conn *conn = NULL;

	c->rc = chipd_connect(c->instance, &conn, &err);
	atomic_fetch_add_explicit(c->ready, 1, memory_order_release);
	while (!atomic_load_explicit(c->go, memory_order_acquire))
		sched_yield();
	while (c->rc == 0 && bench_chipd_now_ns() < c->end_ns) {
		struct chipd_token tok = {0};
		chipd_stream *s = NULL;
		uint64_t id, t0 = bench_chipd_now_ns();
		int rc = chipd_submit(conn, &req, E2E_CALL_MS, &id, &s, &err);

		if (rc == -EAGAIN || (rc == -EREMOTEIO && err.retryable)) {
			c->refused++; /* the node said "later": that is its admission control */
			usleep(E2E_BACKOFF_US);
			continue;
		}
		if (rc == 0)
			rc = e2e_push(&c->adm_lat, bench_chipd_now_ns() - t0);
		if (rc == 0 && c->row->spin_us)
			chipd_stream_set_spin(s, c->row->spin_us);
		while (rc == 0 && !tok.final) {
			rc = chipd_stream_next(s, &tok, E2E_CALL_MS, &err);
			if (rc == 0) {
				uint64_t now = bench_chipd_now_ns();

				c->tokens++;
				rc = e2e_push(&c->tok_lat, now > tok.ts_ns ? now - tok.ts_ns : 0);
			}
		}
		chipd_stream_close(s, E2E_CALL_MS);
		if (rc) {
			fprintf(stderr, "chipbench e2e: request failed: %s (%s)\n", strerror(-rc),
				err.message);
			c->rc = rc;
			break;
		}
		c->requests++;
	}
	chipd_close(conn);
	return NULL;
}

/* Merges the clients' samples of one kind and returns p50 and p99. */
static int e2e_merge(struct e2e_client *cl, unsigned n, bool tok, double *p50, double *p99)
{
	size_t total = 0, at = 0;
	uint64_t *all;

	for (unsigned i = 0; i < n; i++)
		total += tok ? cl[i].tok_lat.n : cl[i].adm_lat.n;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		const struct e2e_samples *s = tok ? &cl[i].tok_lat : &cl[i].adm_lat;

		memcpy(all + at, s->v, s->n * sizeof(*all));
		at += s->n;
	}
	*p50 = bench_quantile(all, total, 0.50);
	*p99 = bench_quantile(all, total, 0.99);
	free(all);
	return 0;
}

/* Runs one row with @r->clients clients. Returns 0 or -errno (@r->rc). */
static int e2e_row(const struct e2e_opts *o, const struct bench_chipd *d, struct e2e_row *r)
{
	struct e2e_client *cl = calloc(r->clients, sizeof(*cl));
	atomic_bool go = false;
	atomic_uint ready = 0;
	unsigned started = 0;
	uint64_t t0, t1;

	if (!cl)
		return r->rc = -ENOMEM;
	for (unsigned i = 0; i < r->clients; i++)
		cl[i] = (struct e2e_client){
		    .instance = d->instance, .o = o, .row = r, .go = &go, .ready = &ready};
	for (; started < r->clients; started++)
		if (pthread_create(&cl[started].th, NULL, e2e_client, &cl[started]))
			break;
	/* the clients connect first (bounded); the clock starts when all may go (the
	 * end is published to them by the release of go) */
	t0 = bench_chipd_clients_ready(&ready, started, E2E_CALL_MS);
	for (unsigned i = 0; i < started; i++)
		cl[i].end_ns = t0 + (uint64_t)(o->seconds * 1e9);
	atomic_store_explicit(&go, true, memory_order_release);
	for (unsigned i = 0; i < started; i++)
		pthread_join(cl[i].th, NULL);
	t1 = bench_chipd_now_ns();

	r->rc = started == r->clients ? 0 : -EAGAIN;
	for (unsigned i = 0; i < started; i++) {
		r->requests += cl[i].requests;
		r->tokens += cl[i].tokens;
		r->refused += cl[i].refused;
		if (!r->rc)
			r->rc = cl[i].rc;
	}
	r->elapsed_s = (double)(t1 - t0) / 1e9;
	r->rps = (double)r->requests / r->elapsed_s;
	r->tps = (double)r->tokens / r->elapsed_s;
	if (!r->rc)
		r->rc = e2e_merge(cl, started, true, &r->tok_p50, &r->tok_p99);
	if (!r->rc)
		r->rc = e2e_merge(cl, started, false, &r->adm_p50, &r->adm_p99);
	for (unsigned i = 0; i < started; i++) {
		free(cl[i].tok_lat.v);
		free(cl[i].adm_lat.v);
	}
	free(cl);
	return r->rc;
}

static double e2e_ratio(double x, double base)
{
	return base > 0 ? x / base : 0;
}

/* The target: token delivery p50 <= 10 us with a spinning reader. */
static bool e2e_delivery_met(const struct e2e_row *dl)
{
	return !dl[1].rc && dl[1].tok_p50 <= E2E_TARGET_NS;
}

static void e2e_print_table(const struct e2e_opts *o, const struct e2e_row *rows, unsigned n,
			    const struct e2e_row *dl)
{
	const struct e2e_row *b = &rows[0];

	printf("e2e: chipd, 2 sim chips; synthetic tokens=%u device_us=%u; %.1f s per row; each "
	       "client a thread with its own connection\n",
	       o->tokens, o->device_us, o->seconds);
	printf("%7s %10s %11s %9s %9s %9s %9s %8s  %s\n", "clients", "req/s", "tok/s", "tok p50",
	       "tok p99", "adm p50", "adm p99", "refused",
	       "ratios vs the 1st row: req/s, tok p50, adm p50");
	for (unsigned i = 0; i < n; i++) {
		const struct e2e_row *r = &rows[i];

		if (r->rc) {
			printf("%7u failed: %s\n", r->clients, strerror(-r->rc));
			continue;
		}
		printf("%7u %10.0f %11.0f %7.1fus %7.1fus %7.1fus %7.1fus %8llu  %.2fx %.2fx "
		       "%.2fx\n",
		       r->clients, r->rps, r->tps, r->tok_p50 / 1e3, r->tok_p99 / 1e3,
		       r->adm_p50 / 1e3, r->adm_p99 / 1e3, (unsigned long long)r->refused,
		       e2e_ratio(r->rps, b->rps), e2e_ratio(r->tok_p50, b->tok_p50),
		       e2e_ratio(r->adm_p50, b->adm_p50));
	}
	printf("baseline: the %u-client row of this run (no other server runs the same client "
	       "loop); ratios show scaling with concurrency\n",
	       b->clients);
	if (!o->delivery)
		return;
	printf("\ntoken delivery (worker publish -> client has it): 1 client, synthetic "
	       "tokens=%u device_us=%u\n%-34s %9s %9s %8s\n",
	       o->dl_tokens, o->dl_device_us, "reader", "tok p50", "tok p99", "tokens");
	for (unsigned i = 0; i < 2; i++) {
		const char *what = i ? "spins (never sleeps)" : "spins 50 us, then sleeps";

		if (dl[i].rc)
			printf("%-34s failed: %s\n", what, strerror(-dl[i].rc));
		else
			printf("%-34s %7.1fus %7.1fus %8llu\n", what, dl[i].tok_p50 / 1e3,
			       dl[i].tok_p99 / 1e3, (unsigned long long)dl[i].tokens);
	}
	printf("spinning / sleeping p50: %.3fx; target p50 <= %.0f us with a spinning reader: "
	       "%s\n",
	       e2e_ratio(dl[1].tok_p50, dl[0].tok_p50), E2E_TARGET_NS / 1e3,
	       e2e_delivery_met(dl) ? "met" : "missed");
}

/* One row as a JSON object; ratios against @b. */
static void e2e_print_row_json(const struct e2e_row *r, const struct e2e_row *b)
{
	printf("{\"clients\": %u, \"spin_us\": %u, \"ok\": %s", r->clients, r->spin_us,
	       r->rc ? "false" : "true");
	if (!r->rc)
		printf(", \"requests\": %llu, \"tokens\": %llu, \"refused\": %llu, "
		       "\"rps\": %.1f, \"tps\": %.1f, \"token_p50_ns\": %.0f, "
		       "\"token_p99_ns\": %.0f, \"admit_p50_ns\": %.0f, "
		       "\"admit_p99_ns\": %.0f, \"rps_ratio\": %.3f, "
		       "\"token_p50_ratio\": %.3f, \"admit_p50_ratio\": %.3f",
		       (unsigned long long)r->requests, (unsigned long long)r->tokens,
		       (unsigned long long)r->refused, r->rps, r->tps, r->tok_p50, r->tok_p99,
		       r->adm_p50, r->adm_p99, e2e_ratio(r->rps, b->rps),
		       e2e_ratio(r->tok_p50, b->tok_p50), e2e_ratio(r->adm_p50, b->adm_p50));
	printf("}");
}

static void e2e_print_json(const struct e2e_opts *o, const struct e2e_row *rows, unsigned n,
			   const struct e2e_row *dl)
{
	printf("{\"mode\": \"e2e\", \"chips\": 2, \"tokens\": %u, \"device_us\": %u, "
	       "\"seconds\": %.3f, \"connection\": \"one per client thread\", "
	       "\"baseline\": \"first row\", \"rows\": [",
	       o->tokens, o->device_us, o->seconds);
	for (unsigned i = 0; i < n; i++) {
		const struct e2e_row *r = &rows[i];

		printf("%s\n    ", i ? "," : "");
		e2e_print_row_json(r, &rows[0]);
	}
	printf("\n  ]");
	if (o->delivery) {
		printf(",\n  \"delivery\": {\"clients\": 1, \"tokens\": %u, \"device_us\": %u, "
		       "\"sleeping\": ",
		       o->dl_tokens, o->dl_device_us);
		e2e_print_row_json(&dl[0], &dl[0]);
		printf(",\n    \"spinning\": ");
		e2e_print_row_json(&dl[1], &dl[0]);
		printf(",\n    \"target_p50_ns\": %.0f, \"target_met\": %s}", E2E_TARGET_NS,
		       e2e_delivery_met(dl) ? "true" : "false");
	}
	printf("}\n");
}

static void e2e_usage(FILE *f)
{
	fputs("usage: chipbench e2e [--chipd PATH] [--clients N,N,...] [--seconds S]\n"
	      "                     [--tokens N] [--device-us N] [--delivery-tokens N]\n"
	      "                     [--delivery-device-us N] [--no-delivery] [--json]\n"
	      "  a real chipd with 2 sim chips; each client a thread with its own connection\n"
	      "  submitting synthetic requests back to back; defaults: clients 1,4,16,64,\n"
	      "  2 s per row, tokens 16, device_us 0; ratios against the first row.\n"
	      "  Then token delivery with one client (tokens 64, device_us 200: spaced tokens),\n"
	      "  its reader spinning 50 us before sleeping (the default) against one that\n"
	      "  never sleeps\n",
	      f);
}

int mode_e2e(int argc, char **argv)
{
	struct e2e_opts o = {.clients = {1, 4, 16, 64},
			     .nrows = 4,
			     .seconds = 2,
			     .tokens = 16,
			     .dl_tokens = 64,
			     .dl_device_us = 200,
			     .delivery = true};
	const struct bench_arg args[] = {
	    {"chipd", BENCH_ARG_STRING, &o.chipd},
	    {"clients", BENCH_ARG_LIST, &(struct bench_arg_list){o.clients, E2E_MAX_ROWS, &o.nrows},
	     1, E2E_MAX_CLIENTS},
	    {"seconds", BENCH_ARG_DOUBLE, &o.seconds, 0, 3600},
	    {"tokens", BENCH_ARG_UNSIGNED, &o.tokens, 1, UINT_MAX},
	    {"device-us", BENCH_ARG_UNSIGNED, &o.device_us, 0, UINT_MAX},
	    {"delivery-tokens", BENCH_ARG_UNSIGNED, &o.dl_tokens, 1, UINT_MAX},
	    {"delivery-device-us", BENCH_ARG_UNSIGNED, &o.dl_device_us, 0, UINT_MAX},
	    {"no-delivery", BENCH_ARG_CLEAR, &o.delivery},
	    {"json", BENCH_ARG_FLAG, &o.json},
	};
	struct e2e_row rows[E2E_MAX_ROWS] = {0}, dl[2] = {0};
	struct bench_chipd d;
	int fails = 0, rc;

	rc = bench_args_parse(argc, argv, "e2e", args, sizeof(args) / sizeof(args[0]), e2e_usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	/* the table's range takes 0; a row needs some time */
	if (!(o.seconds > 0))
		return bench_args_error("e2e", e2e_usage, "--seconds: '%g' is not more than 0",
					o.seconds);
	/* default router limits (max-pending 256, queue 64 per chip) exceed 64 clients */
	rc = bench_chipd_start(&d, bench_chipd_bin(o.chipd), "e2e", 2, NULL);
	if (rc)
		return 1;
	for (unsigned i = 0; i < o.nrows; i++) {
		rows[i] = (struct e2e_row){
		    .clients = o.clients[i], .req_tokens = o.tokens, .device_us = o.device_us};
		if (e2e_row(&o, &d, &rows[i]))
			fails++;
	}
	for (unsigned i = 0; o.delivery && i < 2; i++) {
		/* the spinning reader spins for its whole call timeout */
		dl[i] = (struct e2e_row){.clients = 1,
					 .req_tokens = o.dl_tokens,
					 .device_us = o.dl_device_us,
					 .spin_us = i ? E2E_CALL_MS * 1000u : 0};
		if (e2e_row(&o, &d, &dl[i]))
			fails++;
	}
	rc = bench_chipd_stop(&d, NULL);
	if (rc) {
		fprintf(stderr, "chipbench e2e: chipd exited %d\n", rc);
		fails++;
	}
	if (o.json)
		e2e_print_json(&o, rows, o.nrows, dl);
	else
		e2e_print_table(&o, rows, o.nrows, dl);
	return fails ? 1 : 0;
}
