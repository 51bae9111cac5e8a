/* bench.h - what every chipbench mode shares: timing samples, percentiles, CPU
 * pinning, the result row and its printing (table or JSON). */
#ifndef CHIPD_BENCH_H
#define CHIPD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One measured transport or variant. */
struct bench_result {
	char name[48];	/* short id, e.g. "mbox_spin" */
	char label[96]; /* human description */
	bool skipped;
	char why[160];	  /* when skipped: the reason, one line */
	unsigned samples; /* round trips measured */
	double p50_ns;	  /* round-trip latency percentiles */
	double p99_ns;
	double rps; /* requests (round trips) per second */
};

/* Options shared by the modes. */
struct bench_opts {
	unsigned iters;	 /* measured round trips per variant */
	unsigned warmup; /* unmeasured round trips first */
	int cpu_client;	 /* -1: do not pin */
	int cpu_server;
	bool json;
};

/* Sorts @v (n entries) and returns the @q quantile (0..1), nearest rank. */
double bench_quantile(uint64_t *v, size_t n, double q);

/* Fills p50/p99 from @samples (ns, n entries; sorted in place) and rps from the total
 * elapsed ns. */
void bench_fill(struct bench_result *r, uint64_t *samples, size_t n, uint64_t elapsed_ns);

/* Pins the calling thread to @cpu (ignored when < 0 or not available). */
void bench_pin(int cpu);

/* Marks @r skipped with a printf-style reason. */
void bench_skip(struct bench_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forks a child pinned to @cpu that runs @fn(@arg) and exits with its return value;
 * it dies with the parent. Returns the pid or -errno. */
int bench_fork(int (*fn)(void *), void *arg, int cpu);

/* Waits up to @timeout_ms for child @pid; kills it if it overstays. Returns its exit
 * status, or -ETIMEDOUT. */
int bench_reap(int pid, unsigned timeout_ms);

/* A request/answer transport measured by bench_pingpong. The server runs in a child
 * process pinned to opts->cpu_server; the client in the caller, pinned to
 * opts->cpu_client. */
struct bench_pingpong {
	const char *name, *label;
	void *ctx;				  /* shared memory, inherited by the child */
	int (*server)(void *ctx);		  /* child: serve until told to stop; 0 = ok */
	int (*round_trip)(void *ctx, uint64_t i); /* client: one 64-byte request and answer */
	int (*stop)(void *ctx);			  /* client: make the server return */
	unsigned iters, warmup;			  /* 0: take them from the options */
};

/* Runs @warmup untimed, then @iters timed calls of @round_trip(@ctx, i), i counting
 * on from the warm-up; @samples (@iters entries) receives each call's ns, *@elapsed_ns
 * the timed calls' total. Stops at the first failure. Returns 0 or its -errno. */
int bench_loop(int (*round_trip)(void *ctx, uint64_t i), void *ctx, unsigned warmup, unsigned iters,
	       uint64_t *samples, uint64_t *elapsed_ns);

/* Forks the server, runs warmup + iters round trips timing each, stops and reaps the
 * server, and fills @out. Returns 0, or -errno with @out marked skipped and why. */
int bench_pingpong(const struct bench_opts *opts, const struct bench_pingpong *pp,
		   struct bench_result *out);

/* Sets name and label of @r. */
void bench_name(struct bench_result *r, const char *name, const char *label);

/* Prints @n results as an aligned table under @title. */
void bench_print_table(FILE *f, const char *title, const struct bench_result *res, size_t n);

/* Prints @s as a JSON string (quoted, escaped). */
void bench_json_string(FILE *f, const char *s);

/* Prints @v with @decimals decimals, or null when it is not positive (n/a: what it
 * measures, or one side of a ratio, was skipped or failed). */
void bench_json_num(FILE *f, double v, int decimals);

/* Prints @n results as a JSON array (no trailing newline). */
void bench_print_json(FILE *f, const struct bench_result *res, size_t n);

#endif
