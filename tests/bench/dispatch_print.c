/* dispatch_print.c - `chipbench dispatch`'s table and JSON document (dispatch.h). */
#include "dispatch.h"

#include "bench.h"

#include <stdio.h>
#include <string.h>

static const char *const ds_kind[DS_KINDS] = {"independent", "chain"};

/* chipd's throughput over the peer's for @k, or 0 when either side failed. */
static double ds_ratio(const struct ds_series *chipd, const struct ds_peer *peer, int k)
{
	if (peer->skipped || chipd[k].err || peer->s[k].err || chipd[k].median <= 0)
		return 0;
	return peer->s[k].median / chipd[k].median;
}

static void ds_row(const char *prefix, int k, const struct ds_series *s)
{
	char name[32];

	snprintf(name, sizeof(name), "%s%s", prefix, ds_kind[k]);
	if (s->err)
		printf("%-18s failed: %s\n", name, strerror(-s->err));
	else
		printf("%-18s %12.1f %14.0f\n", name, s->median, 1e9 / s->median);
}

/* Wall time of all the streams over one alone, or 0 when the row failed. */
static double ds_conc_ratio(const struct ds_conc *c)
{
	return c->err || c->one_ns <= 0 ? 0 : c->all_ns / c->one_ns;
}

void ds_print_table(const struct ds_opts *o, const struct ds_series chipd[DS_KINDS],
		    const struct ds_conc *conc, const struct ds_peer *peer)
{
	printf("dispatch: %u empty tasks per run in steps of %u, %u streams, median of %u "
	       "runs (sim device)\n",
	       o->tasks, o->step, o->streams, o->runs);
	printf("%-18s %12s %14s\n", "tasks", "ns/task", "tasks/s");
	for (int k = 0; k < DS_KINDS; k++)
		ds_row("", k, &chipd[k]);
	if (!o->kernel_us)
		printf("concurrent streams: skipped (--kernel-us 0)\n");
	else if (conc->err)
		printf("concurrent streams: failed: %s\n", strerror(-conc->err));
	else
		printf("concurrent streams: a %u us kernel on each of %u streams %.1f ms, on one "
		       "alone %.1f ms: ratio %.2f (1: at once, %u: one after another)\n",
		       o->kernel_us, o->streams, conc->all_ns / 1e6, conc->one_ns / 1e6,
		       ds_conc_ratio(conc), o->streams);
	if (peer->skipped) {
		printf("starpu: skipped (%s)\n", peer->what);
		return;
	}
	printf("starpu: %s, %u CPU worker%s (conf.ncpus; --starpu-ncpus), no accelerators\n",
	       peer->what, peer->ncpus, peer->ncpus == 1 ? "" : "s");
	for (int k = 0; k < DS_KINDS; k++)
		ds_row("starpu ", k, &peer->s[k]);
	for (int k = 0; k < DS_KINDS; k++)
		if (ds_ratio(chipd, peer, k) > 0)
			printf("ratio chipd/starpu %-12s %8.1fx tasks/s\n", ds_kind[k],
			       ds_ratio(chipd, peer, k));
}

/* The rows of one executor: a JSON array (no trailing newline). */
static void ds_json_rows(const struct ds_series *s)
{
	printf("[");
	for (int k = 0; k < DS_KINDS; k++) {
		printf("%s\n    {\"name\": \"%s\", \"ok\": %s", k ? "," : "", ds_kind[k],
		       s[k].err ? "false" : "true");
		if (s[k].err) {
			printf(", \"error\": ");
			bench_json_string(stdout, strerror(-s[k].err));
		} else {
			printf(", \"ns_per_task\": %.1f, \"tasks_per_s\": %.0f", s[k].median,
			       1e9 / s[k].median);
		}
		printf(", \"runs_ns_per_task\": [");
		for (unsigned i = 0; i < s[k].n; i++)
			printf("%s%.1f", i ? ", " : "", s[k].ns[i]);
		printf("]}");
	}
	printf("\n  ]");
}

void ds_print_json(const struct ds_opts *o, const struct ds_series chipd[DS_KINDS],
		   const struct ds_conc *conc, const struct ds_peer *peer)
{
	printf("{\"mode\": \"dispatch\", \"device\": \"sim\", \"tasks\": %u, \"step\": %u, "
	       "\"streams\": %u, \"runs\": %u, \"statistic\": \"median\", \"rows\": ",
	       o->tasks, o->step, o->streams, o->runs);
	ds_json_rows(chipd);
	printf(",\n  \"concurrent_streams\": {\"kernel_us\": %u, \"ok\": %s", o->kernel_us,
	       o->kernel_us && !conc->err ? "true" : "false");
	if (!o->kernel_us) {
		printf(", \"skipped\": true");
	} else if (conc->err) {
		printf(", \"error\": ");
		bench_json_string(stdout, strerror(-conc->err));
	} else {
		printf(", \"one_stream_ms\": %.3f, \"all_streams_ms\": %.3f, "
		       "\"all_over_one\": ",
		       conc->one_ns / 1e6, conc->all_ns / 1e6);
		bench_json_num(stdout, ds_conc_ratio(conc), 3);
	}
	printf("}");
	printf(",\n  \"peer\": {\"name\": \"starpu\", \"skipped\": %s, ",
	       peer->skipped ? "true" : "false");
	if (peer->skipped) {
		printf("\"why\": ");
		bench_json_string(stdout, peer->what);
		printf("}}\n");
		return;
	}
	printf("\"what\": ");
	bench_json_string(stdout, peer->what);
	printf(", \"cpu_workers\": %u, \"rows\": ", peer->ncpus);
	ds_json_rows(peer->s);
	printf(",\n  \"chipd_over_peer_tasks_per_s\": {");
	for (int k = 0; k < DS_KINDS; k++) {
		printf("%s\"%s\": ", k ? ", " : "", ds_kind[k]);
		bench_json_num(stdout, ds_ratio(chipd, peer, k), 3);
	}
	printf("}}}\n");
}
