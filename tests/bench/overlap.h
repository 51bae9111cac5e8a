/* overlap.h - `chipbench overlap`: what its in-process runs (mode_overlap.c), its
 * runs through a real chipd (overlap_chipd.c) and its printing (overlap_print.c)
 * share. */
#ifndef CHIPD_BENCH_OVERLAP_H
#define CHIPD_BENCH_OVERLAP_H

#include "wrk.h"

#include <stdbool.h>

/* The host/device cost ratios measured (mode_overlap.c: 0.5x, 1x and 2x). */
#define OV_COSTS 3

struct ov_opts {
	unsigned requests; /* in flight together, one step each per batch (in process) */
	unsigned tokens;   /* per request */
	unsigned device_us;
	const char *trace; /* write the 1x overlapped run's trace here (NULL: none) */
	const char *chipd; /* the chipd binary; NULL: the one built with chipbench */
	bool no_chipd;	   /* skip the rows through a real chipd */
	bool json;
};

/* One host/device cost ratio, measured with overlap and with --no-overlap. */
struct ov_row {
	double cost;		/* host cost / device cost per step */
	unsigned host_us;	/* the synthetic request's host_us (per request per step) */
	double tps_on, tps_off; /* tokens/s; <= 0: that run failed */
	double pct_on, pct_off; /* O||S overlap as % of S busy */
};

/* Everything one `chipbench overlap` measured. */
struct ov_report {
	struct ov_row worker[OV_COSTS]; /* wrk_main on a thread of chipbench */
	struct ov_row chipd[OV_COSTS];	/* a real chipd, one request */
	bool chipd_skipped;
	char chipd_why[160]; /* when skipped: why */
	bool traced;	     /* o->trace was written; trace is its summary */
	struct wrk_trace_summary trace;
};

/* Measures @rows (cost and host_us set by the caller) through a real chipd with 1
 * chip, started once plain and once with --no-overlap: one synthetic request each
 * (submit to last token). Returns how many runs failed. */
int ov_chipd_measure(const struct ov_opts *o, struct ov_row rows[OV_COSTS]);

/* Prints @r as the table (the default output). */
void ov_print_table(const struct ov_opts *o, const struct ov_report *r);

/* Prints @r as one JSON document. */
void ov_print_json(const struct ov_opts *o, const struct ov_report *r);

#endif
