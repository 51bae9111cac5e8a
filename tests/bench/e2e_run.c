/* e2e_run.c - `chipbench e2e`'s measurement: client threads, each with its own
 * libchipd connection, submitting synthetic requests back to back for a row's time,
 * and chipd_ping timed on the same node. */
#include "e2e.h"

#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define E2E_BACKOFF_US 100 /* a refused submit (queue full) waits this before the next */

/* The latencies a client samples. */
enum e2e_lat { E2E_LAT_TOKEN, E2E_LAT_ADMIT, E2E_LAT_REQUEST, E2E_LAT_KINDS };

/* A growable array of ns samples. */
struct e2e_samples {
	uint64_t *v;
	size_t n, cap;
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
	int rc;				       /* 0, or the first failure's -errno */
	struct e2e_samples lat[E2E_LAT_KINDS]; /* by enum e2e_lat */
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
	struct chipd_error err = {0};
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
			rc = e2e_push(&c->lat[E2E_LAT_ADMIT], bench_chipd_now_ns() - t0);
		if (rc == 0 && c->row->spin_us)
			chipd_stream_set_spin(s, c->row->spin_us);
		while (rc == 0 && !tok.final) {
			rc = chipd_stream_next(s, &tok, E2E_CALL_MS, &err);
			if (rc == 0) {
				uint64_t now = bench_chipd_now_ns();

				c->tokens++;
				rc = e2e_push(&c->lat[E2E_LAT_TOKEN],
					      now > tok.ts_ns ? now - tok.ts_ns : 0);
				if (rc == 0 && tok.final)
					rc = e2e_push(&c->lat[E2E_LAT_REQUEST], now - t0);
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
static int e2e_merge(struct e2e_client *cl, unsigned n, enum e2e_lat k, double *p50, double *p99)
{
	size_t total = 0, at = 0;
	uint64_t *all;

	for (unsigned i = 0; i < n; i++)
		total += cl[i].lat[k].n;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		const struct e2e_samples *s = &cl[i].lat[k];

		if (s->n) /* a client that finished nothing has no array */
			memcpy(all + at, s->v, s->n * sizeof(*all));
		at += s->n;
	}
	*p50 = bench_quantile(all, total, 0.50);
	*p99 = bench_quantile(all, total, 0.99);
	free(all);
	return 0;
}

int e2e_row(const struct e2e_opts *o, const struct bench_chipd *d, struct e2e_row *r)
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
		r->rc = e2e_merge(cl, started, E2E_LAT_TOKEN, &r->tok_p50, &r->tok_p99);
	if (!r->rc)
		r->rc = e2e_merge(cl, started, E2E_LAT_ADMIT, &r->adm_p50, &r->adm_p99);
	if (!r->rc)
		r->rc = e2e_merge(cl, started, E2E_LAT_REQUEST, &r->req_p50, &r->req_p99);
	for (unsigned i = 0; i < started; i++)
		for (unsigned k = 0; k < E2E_LAT_KINDS; k++)
			free(cl[i].lat[k].v);
	free(cl);
	return r->rc;
}

static int by_rps(const void *a, const void *b)
{
	const struct e2e_row *x = a, *y = b;

	return (x->rps > y->rps) - (x->rps < y->rps);
}

int e2e_row_median(const struct e2e_opts *o, const struct bench_chipd *d, struct e2e_row *r,
		   unsigned repeats)
{
	struct e2e_row *w = calloc(repeats ? repeats : 1, sizeof(*w));

	if (!w)
		return r->rc = -ENOMEM;
	for (unsigned i = 0; i < repeats; i++) {
		w[i] = *r;
		if (e2e_row(o, d, &w[i])) {
			*r = w[i];
			free(w);
			return r->rc;
		}
	}
	qsort(w, repeats, sizeof(*w), by_rps);
	*r = w[(repeats - 1) / 2];
	r->repeats = repeats;
	r->rps_min = w[0].rps;
	r->rps_max = w[repeats - 1].rps;
	free(w);
	return 0;
}

int e2e_ping(const struct bench_chipd *d, struct e2e_small *s)
{
	uint64_t *v = malloc(E2E_PING_ITERS * sizeof(*v));
	struct chipd_error err = {0};
	int rc = 0;

	if (!v)
		return s->ping_rc = -ENOMEM;
	/* unmeasured until the scheduler has placed both threads: a client and a router
	 * that start on one CPU take ~20 us a round trip (each hand-off a yield) until
	 * the load balancer moves one, some tens of ms later */
	for (uint64_t warm_end = bench_chipd_now_ns() + E2E_WARM_NS;
	     rc == 0 && bench_chipd_now_ns() < warm_end;)
		rc = chipd_ping(d->conn, E2E_CALL_MS, NULL, &err);
	for (unsigned i = 0; rc == 0 && i < E2E_PING_ITERS; i++) {
		uint64_t t0 = bench_chipd_now_ns();

		rc = chipd_ping(d->conn, E2E_CALL_MS, NULL, &err);
		if (rc == 0)
			v[i] = bench_chipd_now_ns() - t0;
	}
	if (rc)
		fprintf(stderr, "chipbench e2e: chipd_ping failed: %s (%s)\n", strerror(-rc),
			err.message);
	else {
		s->ping_p50 = bench_quantile(v, E2E_PING_ITERS, 0.50);
		s->ping_p99 = bench_quantile(v, E2E_PING_ITERS, 0.99);
	}
	free(v);
	return s->ping_rc = rc;
}

double e2e_ratio(double x, double base)
{
	return base > 0 ? x / base : 0;
}

/* The target: token delivery p50 <= 10 us with a spinning reader. */
bool e2e_delivery_met(const struct e2e_row *dl)
{
	return !dl[1].rc && dl[1].tok_p50 <= E2E_TARGET_NS;
}

bool e2e_small_latency_met(const struct e2e_small *s)
{
	for (unsigned i = 0; i < s->nrows; i++)
		if (s->rows[i].clients == 1)
			return !s->ping_rc && !s->rows[i].rc &&
			       s->rows[i].req_p50 <= E2E_SMALL_TARGET_PINGS * s->ping_p50;
	return false;
}

bool e2e_small_rps_met(const struct e2e_small *s)
{
	for (unsigned i = 0; i < s->nrows; i++)
		if (s->rows[i].clients == E2E_SMALL_TARGET_AT)
			return !s->rows[i].rc && s->rows[i].rps >= E2E_SMALL_TARGET_RPS;
	return false;
}
