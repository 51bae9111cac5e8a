/* dispatch.h - `chipbench dispatch` (mode_dispatch.c measures, dispatch_print.c
 * prints): what its measurement and its printing share. */
#ifndef CHIPD_BENCH_DISPATCH_H
#define CHIPD_BENCH_DISPATCH_H

#include <stdbool.h>

#define DS_MAX_RUNS 101u

enum { DS_INDEPENDENT, DS_CHAIN, DS_KINDS };

struct ds_opts {
	unsigned tasks;	       /* per run */
	unsigned step;	       /* tasks per wl_exec_run */
	unsigned runs;	       /* measured runs; the median is printed */
	unsigned streams;      /* 1..WL_EXEC_STREAMS */
	unsigned starpu_ncpus; /* StarPU's CPU workers; 0: the default (ds_starpu_ncpus) */
	unsigned kernel_us;    /* the concurrent streams row's kernel (0: no such row) */
	bool starpu;	       /* measure the StarPU peer when it is built in */
	bool json;
};

/* One variant (independent or chain) of one executor. */
struct ds_series {
	double ns[DS_MAX_RUNS]; /* ns per task of each measured run, in run order */
	unsigned n;		/* runs measured */
	double median;		/* ns per task; valid when err is 0 */
	int err;		/* 0, or the failing run's -errno */
};

/* The concurrent streams row: how long one kernel of kernel_us takes alone on one
 * stream (the baseline), and one such kernel on each of the streams launched
 * together; wall time from the first launch to dev_sync, medians of the runs. Their
 * ratio is 1 when the streams run at once and the number of streams when they run
 * one after another. */
struct ds_conc {
	double one_ns, all_ns;
	int err; /* 0, or the failing run's -errno */
};

/* The peer: StarPU, or why it was not measured. */
struct ds_peer {
	bool skipped;
	char what[160]; /* skipped: the reason; else what ran ("StarPU 1.3.10, policy lws") */
	unsigned ncpus; /* its CPU workers */
	struct ds_series s[DS_KINDS];
};

/* Prints the table (the default output). */
void ds_print_table(const struct ds_opts *o, const struct ds_series chipd[DS_KINDS],
		    const struct ds_conc *conc, const struct ds_peer *peer);

/* Prints one JSON document with every number of the table and each run's. */
void ds_print_json(const struct ds_opts *o, const struct ds_series chipd[DS_KINDS],
		   const struct ds_conc *conc, const struct ds_peer *peer);

#endif
