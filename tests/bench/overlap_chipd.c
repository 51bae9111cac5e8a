/* overlap_chipd.c - `chipbench overlap` through the whole node: a real chipd (1 sim
 * chip, started by bench_chipd) runs the synthetic request a client submits through
 * libchipd; tokens/s from chipd_submit to the last token read, and the worker's O||S
 * share from its counters (chipd_stats) across the request. */
#include "overlap.h"

#include "bench_chipd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads chip 0's S busy and O||S overlap counters (ns) from @c's node region.
 * Returns 0 or -errno. */
static int ov_chipd_ctrs(chipd_conn *c, uint64_t *busy, uint64_t *overlap)
{
	struct chipd_stat *st = NULL;
	struct chipd_error err;
	uint32_t n = 0;
	int rc;

	*busy = *overlap = 0;
	(void)chipd_stats(c, NULL, 0, &n, &err); /* how many there are */
	st = calloc(n ? n : 1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	rc = chipd_stats(c, st, n, &n, &err);
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		if (strcmp(st[i].block, "chip0") != 0)
			continue;
		if (strcmp(st[i].name, "s_busy_ns") == 0)
			*busy = st[i].value;
		else if (strcmp(st[i].name, "overlap_ns") == 0)
			*overlap = st[i].value;
	}
	free(st);
	return rc;
}

/* One request of @o->tokens tokens at @host_us per step: its tokens/s (<= 0:
 * failed) and the O||S share of S while it ran in *@pct. */
static double ov_chipd_run(const struct ov_opts *o, struct bench_chipd *d, unsigned host_us,
			   double *pct)
{
	uint64_t busy0, ov0, busy1, ov1, t0, t1;
	int rc = ov_chipd_ctrs(d->conn, &busy0, &ov0);

	t0 = bench_chipd_now_ns();
	if (rc == 0)
		rc = bench_chipd_synthetic(d->conn, 0, o->tokens, host_us, o->device_us,
					   BENCH_CHIPD_CALL_MS);
	t1 = bench_chipd_now_ns();
	if (rc == 0)
		rc = ov_chipd_ctrs(d->conn, &busy1, &ov1);
	if (rc) {
		fprintf(stderr, "chipbench overlap: via chipd at host_us %u: %s\n", host_us,
			strerror(-rc));
		return -1;
	}
	*pct = busy1 > busy0 ? 100.0 * (double)(ov1 - ov0) / (double)(busy1 - busy0) : 0;
	return (double)o->tokens * 1e9 / (double)(t1 - t0);
}

int ov_chipd_measure(const struct ov_opts *o, struct ov_row rows[OV_COSTS])
{
	static const char *const no_overlap[] = {"--no-overlap", NULL};
	static const char *const overlap[] = {"--banks", "2", NULL}; /* as in the worker rows */
	int fails = 0;

	for (int off = 0; off < 2; off++) {
		struct bench_chipd d;
		int rc = bench_chipd_start(&d, bench_chipd_bin(o->chipd),
					   off ? "overlap-off" : "overlap-on", 1,
					   off ? no_overlap : overlap);

		/* an unmeasured request first: the worker's first step pays for its
		 * allocations */
		if (rc == 0) {
			rc = bench_chipd_synthetic(d.conn, 0, 1, 0, o->device_us,
						   BENCH_CHIPD_CALL_MS);
			if (rc)
				fprintf(stderr, "chipbench overlap: via chipd: first request: %s\n",
					strerror(-rc));
		}
		for (int i = 0; i < OV_COSTS; i++) {
			struct ov_row *r = &rows[i];
			double *tps = off ? &r->tps_off : &r->tps_on;
			double *pct = off ? &r->pct_off : &r->pct_on;

			*tps = rc ? -1 : ov_chipd_run(o, &d, r->host_us, pct);
			fails += *tps <= 0;
		}
		if (bench_chipd_stop(&d, NULL))
			fails++;
	}
	return fails;
}
