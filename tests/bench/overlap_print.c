/* overlap_print.c - `chipbench overlap`'s table and JSON document (overlap.h). */
#include "overlap.h"

#include "bench.h"

#include <stdio.h>

static double ov_ratio(const struct ov_row *r)
{
	return r->tps_on > 0 && r->tps_off > 0 ? r->tps_on / r->tps_off : 0;
}

static void ov_table_rows(const struct ov_row *rows, const char *via)
{
	for (int i = 0; i < OV_COSTS; i++) {
		const struct ov_row *r = &rows[i];
		char name[24];

		snprintf(name, sizeof(name), "%.1f%s", r->cost, via);
		if (ov_ratio(r) > 0)
			printf("%-16s %14.0f %16.0f %8.2f %11.0f%%\n", name, r->tps_on, r->tps_off,
			       ov_ratio(r), r->pct_on);
		else
			printf("%-16s failed (chipbench's stderr says why)\n", name);
	}
}

void ov_print_table(const struct ov_opts *o, const struct ov_report *r)
{
	const struct wrk_trace_summary *t = &r->trace;

	printf("overlap: %u requests x %u tokens, device %u us per step (requests on "
	       "separate streams); a worker in chipbench (wrk_main on a thread)\n",
	       o->requests, o->tokens, o->device_us);
	printf("%-16s %14s %14s %8s %12s\n", "host/dev", "overlap tok/s", "no-overlap tok/s",
	       "ratio", "O||S of S");
	ov_table_rows(r->worker, "");
	if (r->chipd_skipped) {
		printf("via chipd: skipped (%s)\n", r->chipd_why);
	} else {
		printf("via chipd: a real chipd (1 sim chip) started plain and --no-overlap; one "
		       "request of %u tokens,\n  host cost x %u us per step, submit -> last "
		       "token\n",
		       o->tokens, o->device_us);
		ov_table_rows(r->chipd, " via chipd");
	}
	if (r->traced)
		printf("trace %s: %llu spans (%llu dropped), overlap %.2f, build end -> tokens "
		       "p50 %.0f us p99 %.0f us\n",
		       o->trace, (unsigned long long)t->spans, (unsigned long long)t->dropped,
		       t->overlap_ratio, t->latency_p50_ns / 1e3, t->latency_p99_ns / 1e3);
}

/* @rows as a JSON array (no trailing newline). */
static void ov_json_rows(const struct ov_row *rows)
{
	printf("[");
	for (int i = 0; i < OV_COSTS; i++) {
		const struct ov_row *r = &rows[i];

		printf("%s\n    {\"host_device_ratio\": %.2f, \"host_us\": %u, \"ok\": %s, "
		       "\"overlap_tps\": ",
		       i ? "," : "", r->cost, r->host_us, ov_ratio(r) > 0 ? "true" : "false");
		bench_json_num(stdout, r->tps_on, 1);
		printf(", \"no_overlap_tps\": ");
		bench_json_num(stdout, r->tps_off, 1);
		printf(", \"ratio\": ");
		bench_json_num(stdout, ov_ratio(r), 3);
		printf(
		    ", \"overlap_s_overlapped_pct\": %.1f, \"no_overlap_s_overlapped_pct\": %.1f}",
		    r->tps_on > 0 ? r->pct_on : 0, r->tps_off > 0 ? r->pct_off : 0);
	}
	printf("\n  ]");
}

void ov_print_json(const struct ov_opts *o, const struct ov_report *r)
{
	const struct wrk_trace_summary *t = &r->trace;

	printf("{\"mode\": \"overlap\", \"device\": \"sim\", \"requests\": %u, \"tokens\": %u, "
	       "\"device_us\": %u, \"streams\": \"one per request\", \"rows\": ",
	       o->requests, o->tokens, o->device_us);
	ov_json_rows(r->worker);
	printf(",\n  \"chipd\": {\"skipped\": %s, ", r->chipd_skipped ? "true" : "false");
	if (r->chipd_skipped) {
		printf("\"why\": ");
		bench_json_string(stdout, r->chipd_why);
	} else {
		printf("\"chips\": 1, \"requests\": 1, \"tokens\": %u, \"device_us\": %u, "
		       "\"timed\": \"submit to last token\", \"rows\": ",
		       o->tokens, o->device_us);
		ov_json_rows(r->chipd);
	}
	printf("}");
	if (r->traced) {
		printf(",\n  \"trace\": {\"path\": ");
		bench_json_string(stdout, o->trace);
		printf(", \"spans\": %llu, \"dropped\": %llu, \"overlap_ratio\": %.3f, "
		       "\"latency_p50_ns\": %llu, \"latency_p99_ns\": %llu}",
		       (unsigned long long)t->spans, (unsigned long long)t->dropped,
		       t->overlap_ratio, (unsigned long long)t->latency_p50_ns,
		       (unsigned long long)t->latency_p99_ns);
	}
	printf("}\n");
}
