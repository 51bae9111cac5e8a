/* e2e_print.c - `chipbench e2e`'s output: the rows' table (ratios against the first
 * row), token delivery, the small-request section, or all of it as one JSON object. */
#include "e2e.h"

#include <stdio.h>
#include <string.h>

static void e2e_print_delivery(const struct e2e_opts *o, const struct e2e_row *dl);
static void e2e_print_small(const struct e2e_small *s);
static void e2e_print_small_json(const struct e2e_small *s);

void e2e_print_table(const struct e2e_opts *o, const struct e2e_row *rows, unsigned n,
		     const struct e2e_row *dl, const struct e2e_small *small)
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
	if (o->delivery)
		e2e_print_delivery(o, dl);
	if (o->small)
		e2e_print_small(small);
}

static void e2e_print_delivery(const struct e2e_opts *o, const struct e2e_row *dl)
{
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

/* One row as a JSON object; ratios against @b, and its request p50 against @ping_p50
 * when that is not 0. */
static void e2e_print_row_json(const struct e2e_row *r, const struct e2e_row *b, double ping_p50)
{
	printf("{\"clients\": %u, \"spin_us\": %u, \"ok\": %s", r->clients, r->spin_us,
	       r->rc ? "false" : "true");
	if (!r->rc)
		printf(", \"requests\": %llu, \"tokens\": %llu, \"refused\": %llu, "
		       "\"rps\": %.1f, \"tps\": %.1f, \"token_p50_ns\": %.0f, "
		       "\"token_p99_ns\": %.0f, \"admit_p50_ns\": %.0f, "
		       "\"admit_p99_ns\": %.0f, \"request_p50_ns\": %.0f, "
		       "\"request_p99_ns\": %.0f, \"rps_ratio\": %.3f, "
		       "\"token_p50_ratio\": %.3f, \"admit_p50_ratio\": %.3f",
		       (unsigned long long)r->requests, (unsigned long long)r->tokens,
		       (unsigned long long)r->refused, r->rps, r->tps, r->tok_p50, r->tok_p99,
		       r->adm_p50, r->adm_p99, r->req_p50, r->req_p99, e2e_ratio(r->rps, b->rps),
		       e2e_ratio(r->tok_p50, b->tok_p50), e2e_ratio(r->adm_p50, b->adm_p50));
	if (!r->rc && ping_p50 > 0)
		printf(", \"request_p50_per_ping_p50\": %.3f", e2e_ratio(r->req_p50, ping_p50));
	if (!r->rc && r->repeats)
		printf(", \"repeats\": %u, \"rps_min\": %.1f, \"rps_max\": %.1f", r->repeats,
		       r->rps_min, r->rps_max);
	printf("}");
}

void e2e_print_json(const struct e2e_opts *o, const struct e2e_row *rows, unsigned n,
		    const struct e2e_row *dl, const struct e2e_small *small)
{
	printf("{\"mode\": \"e2e\", \"chips\": 2, \"tokens\": %u, \"device_us\": %u, "
	       "\"seconds\": %.3f, \"connection\": \"one per client thread\", "
	       "\"baseline\": \"first row\", \"rows\": [",
	       o->tokens, o->device_us, o->seconds);
	for (unsigned i = 0; i < n; i++) {
		const struct e2e_row *r = &rows[i];

		printf("%s\n    ", i ? "," : "");
		e2e_print_row_json(r, &rows[0], 0);
	}
	printf("\n  ]");
	if (o->delivery) {
		printf(",\n  \"delivery\": {\"clients\": 1, \"tokens\": %u, \"device_us\": %u, "
		       "\"sleeping\": ",
		       o->dl_tokens, o->dl_device_us);
		e2e_print_row_json(&dl[0], &dl[0], 0);
		printf(",\n    \"spinning\": ");
		e2e_print_row_json(&dl[1], &dl[0], 0);
		printf(",\n    \"target_p50_ns\": %.0f, \"target_met\": %s}", E2E_TARGET_NS,
		       e2e_delivery_met(dl) ? "true" : "false");
	}
	if (o->small)
		e2e_print_small_json(small);
	printf("}\n");
}

/* The path's floor: E2E_PATH_HANDOFFS hand-offs at the p50 of one, in pings. */
static void e2e_print_floor(const struct e2e_small *s)
{
	double floor = s->handoff_p50 * E2E_PATH_HANDOFFS;

	if (s->floor_rc) {
		printf("floor: failed: %s\n", strerror(-s->floor_rc));
		return;
	}
	printf("floor: %u threads passing a word, waiting as chipd's do: p50 %.1fus per "
	       "hand-off; a request's path is %u of them: %.1fus",
	       E2E_PATH_THREADS, s->handoff_p50 / 1e3, E2E_PATH_HANDOFFS, floor / 1e3);
	if (!s->ping_rc)
		printf(" = %.1fx ping p50", e2e_ratio(floor, s->ping_p50));
	printf("\n");
}

static void e2e_print_small(const struct e2e_small *s)
{
	printf("\nsmall requests: synthetic tokens=1 device_us=0 (no work), submit -> final "
	       "token; chipd_ping on the same node: ");
	if (s->ping_rc)
		printf("failed: %s\n", strerror(-s->ping_rc));
	else
		printf("p50 %.1fus p99 %.1fus\n", s->ping_p50 / 1e3, s->ping_p99 / 1e3);
	e2e_print_floor(s);
	if (s->nrows && !s->rows[0].rc)
		printf("each row: the median of %u windows by req/s\n", s->rows[0].repeats);
	printf("%7s %10s %17s %9s %9s %8s  %s\n", "clients", "req/s", "req/s range", "req p50",
	       "req p99", "refused", "req p50 / ping p50");
	for (unsigned i = 0; i < s->nrows; i++) {
		const struct e2e_row *r = &s->rows[i];

		if (r->rc) {
			printf("%7u failed: %s\n", r->clients, strerror(-r->rc));
			continue;
		}
		printf("%7u %10.0f %8.0f-%-8.0f %7.1fus %7.1fus %8llu  %.1fx\n", r->clients, r->rps,
		       r->rps_min, r->rps_max, r->req_p50 / 1e3, r->req_p99 / 1e3,
		       (unsigned long long)r->refused, e2e_ratio(r->req_p50, s->ping_p50));
	}
	printf("targets: 1 client req p50 <= %.0f x ping p50: %s; >= %.0f req/s at %u clients: "
	       "%s\n",
	       E2E_SMALL_TARGET_PINGS, e2e_small_latency_met(s) ? "met" : "missed",
	       E2E_SMALL_TARGET_RPS, E2E_SMALL_TARGET_AT, e2e_small_rps_met(s) ? "met" : "missed");
}

static void e2e_print_small_json(const struct e2e_small *s)
{
	printf(",\n  \"small\": {\"tokens\": 1, \"device_us\": 0, \"ping_ok\": %s",
	       s->ping_rc ? "false" : "true");
	if (!s->ping_rc)
		printf(", \"ping_p50_ns\": %.0f, \"ping_p99_ns\": %.0f", s->ping_p50, s->ping_p99);
	printf(", \"floor_ok\": %s", s->floor_rc ? "false" : "true");
	if (!s->floor_rc)
		printf(", \"floor_threads\": %u, \"floor_handoffs\": %u, \"handoff_p50_ns\": "
		       "%.0f, \"floor_ns\": %.0f",
		       E2E_PATH_THREADS, E2E_PATH_HANDOFFS, s->handoff_p50,
		       s->handoff_p50 * E2E_PATH_HANDOFFS);
	printf(", \"rows\": [");
	for (unsigned i = 0; i < s->nrows; i++) {
		const struct e2e_row *r = &s->rows[i];

		printf("%s\n    ", i ? "," : "");
		e2e_print_row_json(r, &s->rows[0], s->ping_rc ? 0 : s->ping_p50);
	}
	printf("],\n    \"target_pings\": %.0f, \"target_rps\": %.0f, \"target_rps_clients\": %u, "
	       "\"latency_target_met\": %s, \"rps_target_met\": %s}",
	       E2E_SMALL_TARGET_PINGS, E2E_SMALL_TARGET_RPS, E2E_SMALL_TARGET_AT,
	       e2e_small_latency_met(s) ? "true" : "false",
	       e2e_small_rps_met(s) ? "true" : "false");
}
