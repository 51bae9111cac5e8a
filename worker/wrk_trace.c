/* wrk_trace.c - per-thread span rings (seqlocked slots, see wrk_trace.h), the Chrome
 * JSON writers (fragment and whole file) and the summary. */
#include "wrk_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* One span's slot: the seqlock word and the span's fields, all atomics. */
struct span_slot {
	_Atomic uint64_t seq; /* 2i+1 while span i is written, 2i+2 once whole */
	_Atomic uint64_t t0_ns, t1_ns;
	_Atomic uint64_t kind_arg; /* kind << 32 | arg */
};

struct span_ring {
	struct span_slot *v;
	_Atomic uint64_t head; /* spans ever written (release by the writer) */
	_Atomic uint64_t base; /* head when the current recording began */
};

struct wrk_trace {
	uint32_t cap;
	_Atomic uint32_t on;
	struct span_ring r[WRK_TR_NTHREADS];
};

/* The spans of one ring copied out whole, oldest first. */
struct snap {
	struct wrk_span *v;
	uint64_t n, lost;
};

static const char *const thread_names[WRK_TR_NTHREADS] = {"M mailbox", "O orchestrator",
							  "S scheduler"};
static const char *const span_names[WRK_SPAN_NKINDS] = {
    [0] = "span", /* never written: the writer takes only valid kinds */
    [WRK_SPAN_MBOX_OP] = "mailbox op",
    [WRK_SPAN_O_BUILD] = "O build",
    [WRK_SPAN_O_WAIT] = "O wait bank",
    [WRK_SPAN_S_WAIT] = "S wait epoch",
    [WRK_SPAN_S_RUN] = "S run",
    [WRK_SPAN_S_PUBLISH] = "token publish",
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
	atomic_init(&t->on, 1);
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

void wrk_trace_start(struct wrk_trace *t)
{
	if (!t || atomic_load_explicit(&t->on, memory_order_relaxed))
		return; /* recording: keep going */
	for (int i = 0; i < WRK_TR_NTHREADS; i++)
		atomic_store_explicit(&t->r[i].base,
				      atomic_load_explicit(&t->r[i].head, memory_order_acquire),
				      memory_order_relaxed);
	atomic_store_explicit(&t->on, 1, memory_order_relaxed);
}

void wrk_trace_stop(struct wrk_trace *t)
{
	if (t)
		atomic_store_explicit(&t->on, 0, memory_order_relaxed);
}

bool wrk_trace_recording(const struct wrk_trace *t)
{
	return t && atomic_load_explicit(&t->on, memory_order_relaxed);
}

void wrk_trace_span(struct wrk_trace *t, enum wrk_trace_thread th, enum wrk_span_kind kind,
		    uint64_t t0_ns, uint64_t t1_ns, uint32_t arg)
{
	struct span_ring *r;
	struct span_slot *s;
	uint64_t h;

	if (!t || !atomic_load_explicit(&t->on, memory_order_relaxed))
		return;
	r = &t->r[th];
	h = atomic_load_explicit(&r->head, memory_order_relaxed); /* ours alone */
	s = &r->v[h % t->cap];
	atomic_store_explicit(&s->seq, 2 * h + 1, memory_order_relaxed);
	/* release stores: a reader whose (acquire) load reads one of them also sees the
	 * odd seq above, on its second read of seq. No fence: TSan does not model them. */
	atomic_store_explicit(&s->t0_ns, t0_ns, memory_order_release);
	atomic_store_explicit(&s->t1_ns, t1_ns, memory_order_release);
	atomic_store_explicit(&s->kind_arg, (uint64_t)kind << 32 | arg, memory_order_release);
	atomic_store_explicit(&s->seq, 2 * h + 2, memory_order_release);
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

/* Reads span @i of ring @r (slot i % cap) into @out; false when the slot no longer
 * (or not yet wholly) holds span i. */
static bool slot_read(const struct wrk_trace *t, const struct span_ring *r, uint64_t i,
		      struct wrk_span *out)
{
	const struct span_slot *s = &r->v[i % t->cap];
	uint64_t s1, s2, ka;

	s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
	if (s1 != 2 * i + 2)
		return false;
	out->t0_ns = atomic_load_explicit(&s->t0_ns, memory_order_acquire);
	out->t1_ns = atomic_load_explicit(&s->t1_ns, memory_order_acquire);
	ka = atomic_load_explicit(&s->kind_arg, memory_order_acquire);
	s2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
	out->kind = (uint32_t)(ka >> 32);
	out->arg = (uint32_t)ka;
	return s2 == s1 && out->kind > 0 && out->kind < WRK_SPAN_NKINDS;
}

/* Copies out the spans of thread @th's current recording. Returns 0 or -ENOMEM. */
static int snap_take(const struct wrk_trace *t, int th, struct snap *sn)
{
	const struct span_ring *r = &t->r[th];
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	uint64_t base = atomic_load_explicit(&r->base, memory_order_relaxed);
	uint64_t first;

	if (base > h)
		base = h;
	first = h - base > t->cap ? h - t->cap : base;
	sn->n = 0;
	sn->v = malloc((h - first ? h - first : 1) * sizeof(*sn->v));
	if (!sn->v)
		return -ENOMEM;
	for (uint64_t i = first; i < h; i++)
		if (slot_read(t, r, i, &sn->v[sn->n]))
			sn->n++;
	sn->lost = (h - base) - sn->n;
	return 0;
}

static void snaps_free(struct snap *sn)
{
	for (int th = 0; th < WRK_TR_NTHREADS; th++) {
		free(sn[th].v);
		sn[th].v = NULL;
	}
}

/* Takes every thread's snapshot (all empty for a NULL trace). */
static int snaps_take(const struct wrk_trace *t, struct snap *sn)
{
	for (int th = 0; th < WRK_TR_NTHREADS; th++)
		sn[th] = (struct snap){0};
	for (int th = 0; t && th < WRK_TR_NTHREADS; th++) {
		if (snap_take(t, th, &sn[th])) {
			snaps_free(sn);
			return -ENOMEM;
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Overlap of O's builds with S's runs: both lists are in time order and each
 * thread's spans are disjoint, so one merge pass finds every intersection. */
static uint64_t overlap(const struct snap *o, const struct snap *s)
{
	uint64_t i = 0, j = 0, sum = 0;

	while (i < o->n && j < s->n) {
		const struct wrk_span *a = &o->v[i], *b = &s->v[j];
		uint64_t lo, hi;

		if (a->kind != WRK_SPAN_O_BUILD) {
			i++;
			continue;
		}
		if (b->kind != WRK_SPAN_S_RUN) {
			j++;
			continue;
		}
		lo = a->t0_ns > b->t0_ns ? a->t0_ns : b->t0_ns;
		hi = a->t1_ns < b->t1_ns ? a->t1_ns : b->t1_ns;
		if (hi > lo)
			sum += hi - lo;
		if (a->t1_ns < b->t1_ns)
			i++;
		else
			j++;
	}
	return sum;
}

/* O's build span of epoch @arg among its @n builds @b (in increasing epoch order: O
 * builds the epochs in turn), or NULL. */
static const struct wrk_span *build_of(const struct wrk_span *const *b, uint64_t n, uint32_t arg)
{
	uint64_t lo = 0, hi = n;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (b[mid]->arg < arg)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && b[lo]->arg == arg ? b[lo] : NULL;
}

/* Latency of each epoch from its build's end to its publish's end. O builds the
 * epochs in increasing order, but S publishes (releases) a bank once every lane in it
 * finished, so out of epoch order behind a slow lane: each publish is paired with its
 * own epoch's build, found by its epoch. */
static int latencies(const struct snap *o, const struct snap *s, struct wrk_trace_summary *sum)
{
	uint64_t nb = 0, n = 0;
	uint64_t *lat = calloc(s->n ? s->n : 1, sizeof(*lat));
	const struct wrk_span **builds = calloc(o->n ? o->n : 1, sizeof(*builds));

	if (!lat || !builds) {
		free(lat);
		free(builds);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < o->n; i++)
		if (o->v[i].kind == WRK_SPAN_O_BUILD)
			builds[nb++] = &o->v[i];
	for (uint64_t j = 0; j < s->n; j++) {
		const struct wrk_span *p = &s->v[j], *b;

		if (p->kind != WRK_SPAN_S_PUBLISH || !(b = build_of(builds, nb, p->arg)))
			continue;
		lat[n++] = p->t1_ns > b->t1_ns ? p->t1_ns - b->t1_ns : 0;
	}
	if (n) {
		qsort(lat, n, sizeof(*lat), cmp_u64);
		sum->latency_p50_ns = lat[(n - 1) / 2];
		sum->latency_p99_ns = lat[(n * 99 + 99) / 100 - 1];
	}
	free(lat);
	free(builds);
	return 0;
}

static uint64_t span_ns(const struct wrk_span *sp)
{
	return sp->t1_ns > sp->t0_ns ? sp->t1_ns - sp->t0_ns : 0;
}

int wrk_trace_summarize(const struct wrk_trace *t, struct wrk_trace_summary *s)
{
	struct snap sn[WRK_TR_NTHREADS];
	int err;

	*s = (struct wrk_trace_summary){0};
	err = snaps_take(t, sn);
	if (err)
		return err;
	for (int th = 0; th < WRK_TR_NTHREADS; th++) {
		s->spans += sn[th].n;
		s->dropped += sn[th].lost;
		for (uint64_t i = 0; i < sn[th].n; i++) {
			const struct wrk_span *sp = &sn[th].v[i];
			uint64_t *acc = sp->kind == WRK_SPAN_O_BUILD  ? &s->o_busy_ns
					: sp->kind == WRK_SPAN_S_RUN  ? &s->s_busy_ns
					: sp->kind == WRK_SPAN_O_WAIT ? &s->o_wait_ns
					: sp->kind == WRK_SPAN_S_WAIT ? &s->s_wait_ns
								      : NULL;

			if (acc)
				*acc += span_ns(sp);
		}
	}
	s->overlap_ns = overlap(&sn[WRK_TR_O], &sn[WRK_TR_S]);
	s->overlap_ratio = s->s_busy_ns ? (double)s->overlap_ns / (double)s->s_busy_ns : 0;
	err = latencies(&sn[WRK_TR_O], &sn[WRK_TR_S], s);
	snaps_free(sn);
	return err;
}

/* Writes the events of @sn to @f (see wrk_trace_write_fragment). */
static void write_events(FILE *f, const struct snap *sn, unsigned chip)
{
	fprintf(f,
		"{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":0,"
		"\"args\":{\"name\":\"chip %u\"}}",
		chip, chip);
	for (int th = 0; th < WRK_TR_NTHREADS; th++)
		fprintf(f,
			",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%d,"
			"\"args\":{\"name\":\"%s\"}}",
			chip, th, thread_names[th]);
	for (int th = 0; th < WRK_TR_NTHREADS; th++) {
		for (uint64_t i = 0; i < sn[th].n; i++) {
			const struct wrk_span *sp = &sn[th].v[i];
			uint64_t dur = span_ns(sp);

			/* microseconds with the nanoseconds as exact decimals */
			fprintf(f,
				",\n{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%d,"
				"\"ts\":%" PRIu64 ".%03u,\"dur\":%" PRIu64 ".%03u,"
				"\"args\":{\"arg\":%u}}",
				span_names[sp->kind], chip, th, sp->t0_ns / 1000,
				(unsigned)(sp->t0_ns % 1000), dur / 1000, (unsigned)(dur % 1000),
				sp->arg);
		}
	}
}

/* Writes @t's events to a new temporary file beside @path, wrapped as a whole file
 * when @whole, and renames it to @path (mode 0600). */
static int write_file(const struct wrk_trace *t, const char *path, unsigned chip, bool whole,
		      struct wrk_trace_counts *c)
{
	struct snap sn[WRK_TR_NTHREADS];
	char tmp[PATH_MAX];
	FILE *f;
	int fd, err;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	err = snaps_take(t, sn);
	if (err)
		return err;
	/* a fresh name, O_EXCL, 0600: nothing planted beforehand is opened or followed */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		goto out_free;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		goto out_unlink;
	}
	if (whole)
		fputs("{\"traceEvents\":[", f);
	write_events(f, sn, chip);
	if (whole)
		fputs("],\"displayTimeUnit\":\"ns\"}\n", f);
	else
		fputc('\n', f);
	if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (!err && c) {
		*c = (struct wrk_trace_counts){0};
		for (int th = 0; th < WRK_TR_NTHREADS; th++) {
			c->events += sn[th].n;
			c->dropped += sn[th].lost;
		}
	}
out_unlink:
	if (err)
		unlink(tmp);
out_free:
	snaps_free(sn);
	return err;
}

int wrk_trace_write_fragment(const struct wrk_trace *t, const char *path, unsigned chip,
			     struct wrk_trace_counts *c)
{
	return write_file(t, path, chip, false, c);
}

int wrk_trace_write_json(const struct wrk_trace *t, const char *path, unsigned chip)
{
	return write_file(t, path, chip, true, NULL);
}
