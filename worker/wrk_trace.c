/* wrk_trace.c - per-thread span rings, the Chrome JSON writer and the summary. */
#include "wrk_trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct span_ring {
	struct wrk_span *v;
	_Atomic uint64_t head; /* spans ever written; the writer's only shared word */
};

struct wrk_trace {
	uint32_t cap;
	struct span_ring r[WRK_TR_NTHREADS];
};

static const char *const thread_names[WRK_TR_NTHREADS] = {"M mailbox", "O orchestrator",
							  "S scheduler"};
static const char *const span_names[] = {
    [WRK_SPAN_MBOX_OP] = "mailbox op", [WRK_SPAN_O_BUILD] = "O build",
    [WRK_SPAN_O_WAIT] = "O wait bank", [WRK_SPAN_S_WAIT] = "S wait epoch",
    [WRK_SPAN_S_RUN] = "S run",	       [WRK_SPAN_S_PUBLISH] = "token publish",
};

int wrk_trace_create(struct wrk_trace **out, uint32_t per_thread)
{
	struct wrk_trace *t;

	if (per_thread < 16)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cap = per_thread;
	for (int i = 0; i < WRK_TR_NTHREADS; i++) {
		t->r[i].v = calloc(per_thread, sizeof(*t->r[i].v));
		if (!t->r[i].v) {
			wrk_trace_destroy(t);
			return -ENOMEM;
		}
	}
	*out = t;
	return 0;
}

void wrk_trace_destroy(struct wrk_trace *t)
{
	if (!t)
		return;
	for (int i = 0; i < WRK_TR_NTHREADS; i++)
		free(t->r[i].v);
	free(t);
}

void wrk_trace_span(struct wrk_trace *t, enum wrk_trace_thread th, enum wrk_span_kind kind,
		    uint64_t t0_ns, uint64_t t1_ns, uint32_t arg)
{
	struct span_ring *r;
	uint64_t h;

	if (!t)
		return;
	r = &t->r[th];
	h = atomic_load_explicit(&r->head, memory_order_relaxed);
	r->v[h % t->cap] = (struct wrk_span){t0_ns, t1_ns, (uint32_t)kind, arg};
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

/* The spans of thread @th still held, oldest first: *first and *n. */
static void held(const struct wrk_trace *t, int th, uint64_t *first, uint64_t *n)
{
	uint64_t h = atomic_load_explicit(&t->r[th].head, memory_order_acquire);

	*n = h < t->cap ? h : t->cap;
	*first = h - *n;
}

static const struct wrk_span *span_at(const struct wrk_trace *t, int th, uint64_t i)
{
	return &t->r[th].v[i % t->cap];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Overlap of O's builds with S's runs: both lists are in time order and each
 * thread's spans are disjoint, so one merge pass finds every intersection. */
static uint64_t overlap(const struct wrk_trace *t)
{
	uint64_t of, on, sf, sn, i = 0, j = 0, sum = 0;

	held(t, WRK_TR_O, &of, &on);
	held(t, WRK_TR_S, &sf, &sn);
	while (i < on && j < sn) {
		const struct wrk_span *o = span_at(t, WRK_TR_O, of + i);
		const struct wrk_span *s = span_at(t, WRK_TR_S, sf + j);
		uint64_t lo, hi;

		if (o->kind != WRK_SPAN_O_BUILD) {
			i++;
			continue;
		}
		if (s->kind != WRK_SPAN_S_RUN) {
			j++;
			continue;
		}
		lo = o->t0_ns > s->t0_ns ? o->t0_ns : s->t0_ns;
		hi = o->t1_ns < s->t1_ns ? o->t1_ns : s->t1_ns;
		if (hi > lo)
			sum += hi - lo;
		if (o->t1_ns < s->t1_ns)
			i++;
		else
			j++;
	}
	return sum;
}

/* Latency of each epoch from its build's end to its publish's end. O builds and S
 * publishes epochs in increasing order, so one pass pairs them. */
static int latencies(const struct wrk_trace *t, struct wrk_trace_summary *s)
{
	uint64_t of, on, sf, sn, i = 0, n = 0;
	uint64_t *lat;

	held(t, WRK_TR_O, &of, &on);
	held(t, WRK_TR_S, &sf, &sn);
	lat = calloc(sn ? sn : 1, sizeof(*lat));
	if (!lat)
		return -ENOMEM;
	for (uint64_t j = 0; j < sn; j++) {
		const struct wrk_span *p = span_at(t, WRK_TR_S, sf + j);
		const struct wrk_span *o = NULL;

		if (p->kind != WRK_SPAN_S_PUBLISH)
			continue;
		for (; i < on; i++) {
			o = span_at(t, WRK_TR_O, of + i);
			if (o->kind == WRK_SPAN_O_BUILD && o->arg >= p->arg)
				break;
		}
		if (i == on)
			break;
		if (o->arg == p->arg)
			lat[n++] = p->t1_ns > o->t1_ns ? p->t1_ns - o->t1_ns : 0;
	}
	if (n) {
		qsort(lat, n, sizeof(*lat), cmp_u64);
		s->latency_p50_ns = lat[(n - 1) / 2];
		s->latency_p99_ns = lat[(n * 99 + 99) / 100 - 1];
	}
	free(lat);
	return 0;
}

int wrk_trace_summarize(const struct wrk_trace *t, struct wrk_trace_summary *s)
{
	*s = (struct wrk_trace_summary){0};
	for (int th = 0; th < WRK_TR_NTHREADS; th++) {
		uint64_t first, n, h = atomic_load_explicit(&t->r[th].head, memory_order_acquire);

		held(t, th, &first, &n);
		s->spans += n;
		s->dropped += h - n;
		for (uint64_t i = first; i < first + n; i++) {
			const struct wrk_span *sp = span_at(t, th, i);

			if (sp->kind == WRK_SPAN_O_BUILD)
				s->o_busy_ns += sp->t1_ns - sp->t0_ns;
			else if (sp->kind == WRK_SPAN_S_RUN)
				s->s_busy_ns += sp->t1_ns - sp->t0_ns;
		}
	}
	s->overlap_ns = overlap(t);
	s->overlap_ratio = s->s_busy_ns ? (double)s->overlap_ns / (double)s->s_busy_ns : 0;
	return latencies(t, s);
}

int wrk_trace_write_json(const struct wrk_trace *t, const char *path, unsigned chip)
{
	FILE *f = fopen(path, "we");
	const char *sep = "";
	int err = 0;

	if (!f)
		return -errno;
	fputs("{\"traceEvents\":[", f);
	for (int th = 0; th < WRK_TR_NTHREADS; th++) {
		uint64_t first, n;

		fprintf(f,
			"%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,"
			"\"args\":{\"name\":\"chip %u %s\"}}",
			sep, chip, th, chip, thread_names[th]);
		sep = ",\n";
		held(t, th, &first, &n);
		for (uint64_t i = first; i < first + n; i++) {
			const struct wrk_span *sp = span_at(t, th, i);

			fprintf(f,
				",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%d,"
				"\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"arg\":%u}}",
				span_names[sp->kind], chip, th, (double)sp->t0_ns / 1e3,
				(double)(sp->t1_ns - sp->t0_ns) / 1e3, sp->arg);
		}
	}
	fputs("],\"displayTimeUnit\":\"ns\"}\n", f);
	if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}
