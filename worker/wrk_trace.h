/* wrk_trace.h - spans recorded by the worker's threads, written as Chrome/Perfetto
 * trace JSON (a whole file, or a fragment for the supervisor to merge), and
 * summarized (overlap of O and S, step-to-token latency).
 *
 * A trace comes from the caller (wrk_config.trace: recording from the start) or from
 * the worker itself at the mailbox's `trace` `start`. Each worker thread (M, O, S)
 * writes only its own ring of spans: single writer, no locks, never blocks; when a
 * ring is full the oldest span is overwritten and counted as dropped.
 *
 * Reading while the threads write. M reads every ring while O and S keep writing
 * (`trace` `collect`); any thread may read after wrk_main returned. Every word a
 * reader and a writer share is a C11 atomic:
 *
 *   trace.on    relaxed on both sides: a span racing with start/stop may land or not.
 *   ring.head   spans ever written by the ring's thread. The writer stores head + 1
 *               with release after the span is whole; the reader loads it with acquire.
 *   slot.seq    a seqlock per slot: 2i+1 while span i is being written into the slot,
 *               2i+2 once it is whole. Writer: seq = 2i+1 (relaxed), the fields
 *               (release), seq = 2i+2 (release). Reader: seq (acquire), the fields
 *               (acquire), seq again (relaxed); the span is taken only when both reads
 *               are 2i+2. A field load that reads a later lap's value synchronizes
 *               with its release store, so the second seq read sees that lap's odd
 *               seq (or later): a span is never torn, and never one of another lap.
 *               (No fences: the release/acquire pairs say the same, and TSan checks
 *               them.)
 *   slot fields atomics, guarded by the seqlock as above.
 *   ring.base   where the current recording began (spans before it are forgotten):
 *               written by wrk_trace_start, read by the readers; relaxed, as start and
 *               collect both run on M (or after wrk_main returned).
 *
 * The reader never waits for a writer: the only slot a writer can be filling below
 * the head the reader saw is one being overwritten, i.e. the oldest span, lost
 * either way; it is skipped and counted as dropped.
 */
#ifndef CHIPD_WORKER_WRK_TRACE_H
#define CHIPD_WORKER_WRK_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wrk_trace_thread { WRK_TR_M = 0, WRK_TR_O = 1, WRK_TR_S = 2, WRK_TR_NTHREADS = 3 };

enum wrk_span_kind {
	WRK_SPAN_MBOX_OP = 1, /* M: one mailbox request served; arg 0 */
	WRK_SPAN_O_BUILD,     /* O: a step built; arg = epoch */
	WRK_SPAN_O_WAIT,      /* O: waiting for a free bank; arg = epoch */
	WRK_SPAN_S_WAIT,      /* S: waiting for an epoch; arg = epoch */
	WRK_SPAN_S_RUN,	      /* S: steps on the device, from a launch with none in flight
			       * until none is; arg = its first epoch */
	WRK_SPAN_S_PUBLISH,   /* S: the pass that finished a step's last lane; arg = epoch */
	WRK_SPAN_NKINDS
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
	uint64_t o_wait_ns, s_wait_ns; /* sums of O_WAIT (S is behind), S_WAIT (O is) */
	uint64_t overlap_ns;	       /* time inside both an O_BUILD and an S_RUN span */
	double overlap_ratio;	       /* overlap_ns / s_busy_ns (0 when S never ran) */
	/* from the end of an epoch's build to the end of its token publish */
	uint64_t latency_p50_ns, latency_p99_ns;
};

/* What a written trace held: span events written, spans lost since the recording
 * began (overwritten in a full ring, or overwritten while being read). */
struct wrk_trace_counts {
	uint64_t events, dropped;
};

/* A trace with room for @per_thread spans per thread (at least 16), recording.
 * Returns 0, -EINVAL or -ENOMEM. */
int wrk_trace_create(struct wrk_trace **out, uint32_t per_thread);
/* Frees @t; NULL is a no-op. No thread may still record into it. */
void wrk_trace_destroy(struct wrk_trace *t);

/* Starts recording (NULL: no-op). A trace that is recording keeps going (its spans stay); one that
 * was stopped forgets the spans it held and records anew. */
void wrk_trace_start(struct wrk_trace *t);
/* Stops recording; the spans held stay readable. NULL: no-op. */
void wrk_trace_stop(struct wrk_trace *t);
/* Whether @t records now (false for NULL). */
bool wrk_trace_recording(const struct wrk_trace *t);

/* Records one span of thread @th (only that thread may call this for @th). @t may be
 * NULL (tracing off), and a stopped trace records nothing. Never blocks. */
void wrk_trace_span(struct wrk_trace *t, enum wrk_trace_thread th, enum wrk_span_kind kind,
		    uint64_t t0_ns, uint64_t t1_ns, uint32_t arg);

/* Computes the summary of the spans held (safe while the threads record). Returns 0
 * or -ENOMEM. */
int wrk_trace_summarize(const struct wrk_trace *t, struct wrk_trace_summary *s);

/* Writes the Chrome trace events of @t (safe while the threads record) as a FRAGMENT:
 * JSON objects separated by ",\n", without the enclosing {"traceEvents":[ ... ]}, so
 * that fragments of several chips joined with "," inside one such array make a whole
 * trace. Events: "M" process_name "chip <chip>" and thread_name "M mailbox",
 * "O orchestrator", "S scheduler" (pid = @chip, tid = 0, 1, 2), then one "X" event
 * per span (ts and dur in microseconds from CLOCK_MONOTONIC, args.arg). @t may be
 * NULL: the metadata events only. The file appears at @path atomically (written
 * under a new random name "@path.XXXXXX", mode 0600, then renamed). @c (may be NULL)
 * gets the counts. Returns 0, -ENAMETOOLONG (@path + ".XXXXXX" does not fit PATH_MAX),
 * -ENOMEM, or the -errno of the file operation that failed. */
int wrk_trace_write_fragment(const struct wrk_trace *t, const char *path, unsigned chip,
			     struct wrk_trace_counts *c);

/* The same events as a whole Chrome/Perfetto file (docs/architecture.md, "Trace"):
 * {"traceEvents":[<fragment>],"displayTimeUnit":"ns"}, written atomically the same
 * way. Returns as wrk_trace_write_fragment. */
int wrk_trace_write_json(const struct wrk_trace *t, const char *path, unsigned chip);

#endif
