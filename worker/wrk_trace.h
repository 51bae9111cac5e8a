/* wrk_trace.h - spans recorded by the worker's threads, written as Chrome/Perfetto
 * trace JSON, and summarized (overlap of O and S, step-to-token latency).
 *
 * The caller creates a trace and passes it in wrk_config.trace; each worker thread
 * (M, O, S) writes only its own ring of spans (single writer, no locks; the oldest
 * spans are overwritten and counted as dropped when a ring is full). Read a trace
 * only after wrk_main returned (its threads are joined).
 */
#ifndef CHIPD_WORKER_WRK_TRACE_H
#define CHIPD_WORKER_WRK_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum wrk_trace_thread { WRK_TR_M = 0, WRK_TR_O = 1, WRK_TR_S = 2, WRK_TR_NTHREADS = 3 };

enum wrk_span_kind {
	WRK_SPAN_MBOX_OP = 1, /* M: one mailbox request served; arg = op */
	WRK_SPAN_O_BUILD,     /* O: a step built; arg = epoch */
	WRK_SPAN_O_WAIT,      /* O: waiting for a free bank; arg = epoch */
	WRK_SPAN_S_WAIT,      /* S: waiting for an epoch; arg = epoch */
	WRK_SPAN_S_RUN,	      /* S: a step on the device; arg = epoch */
	WRK_SPAN_S_PUBLISH,   /* S: a step's tokens into the rings; arg = epoch */
};

struct wrk_span {
	uint64_t t0_ns, t1_ns; /* CLOCK_MONOTONIC */
	uint32_t kind;	       /* enum wrk_span_kind */
	uint32_t arg;
};

struct wrk_trace;

struct wrk_trace_summary {
	uint64_t spans, dropped;
	uint64_t o_busy_ns, s_busy_ns; /* sums of O_BUILD and S_RUN spans */
	uint64_t overlap_ns;	       /* time inside both an O_BUILD and an S_RUN span */
	double overlap_ratio;	       /* overlap_ns / s_busy_ns (0 when S never ran) */
	/* from the end of an epoch's build to the end of its token publish */
	uint64_t latency_p50_ns, latency_p99_ns;
};

/* A trace with room for @per_thread spans per thread (at least 16). Returns 0,
 * -EINVAL or -ENOMEM. */
int wrk_trace_create(struct wrk_trace **out, uint32_t per_thread);
/* Frees @t; NULL is a no-op. */
void wrk_trace_destroy(struct wrk_trace *t);
/* Records one span of thread @th. @t may be NULL (tracing off): nothing happens. */
void wrk_trace_span(struct wrk_trace *t, enum wrk_trace_thread th, enum wrk_span_kind kind,
		    uint64_t t0_ns, uint64_t t1_ns, uint32_t arg);
/* Computes the summary of the spans held. Returns 0 or -ENOMEM. */
int wrk_trace_summarize(const struct wrk_trace *t, struct wrk_trace_summary *s);
/* Writes the spans as Chrome/Perfetto JSON (OPS.md: "X" events, ts and dur in
 * microseconds, one tid per thread with its name) to @path. Returns 0 or -errno. */
int wrk_trace_write_json(const struct wrk_trace *t, const char *path, unsigned chip);

#endif
