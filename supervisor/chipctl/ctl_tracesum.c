/* ctl_tracesum.c - `chipctl trace --summary`: overlap and token latency computed
 * from the Chrome trace JSON that the supervisor wrote (a pure function of the text).
 *
 * What is computed (chipctl(1) says the same):
 * - The spans: "X" events named "O build" (on a thread whose thread_name has the word
 *   "O"), "S run" and "token publish" (on a thread named with the word "S"). A thread
 *   without a thread_name record is taken by its spans' names alone.
 * - Per pid (one pid per chip): overlap = the time inside both an O build and an S run
 *   span; overlap ratio = sum of overlaps / sum of S run time, over all pids.
 * - Token delivery latency of an epoch: the end of its "token publish" span minus the
 *   end of its "O build" span (paired by pid and args.arg, the epoch); p50 and p99
 *   over every epoch that has both.
 *
 * The reader is a small bounded JSON parser: it never reads past @len, nests at most
 * MAX_DEPTH deep, and keeps only the events it needs. */
#include "ctl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32
#define STR_MAX	  128 /* longer names are cut: only short ones are compared */

enum kind { K_NONE = 0, K_BUILD, K_RUN, K_PUBLISH };
enum role { R_ANY = 0, R_O, R_S };

struct span {
	int64_t pid, tid, arg;
	enum kind kind;
	uint64_t t0, t1; /* ns */
};

struct thread {
	int64_t pid, tid;
	enum role role;
};

struct reader {
	const char *start, *p, *end;
	char *why;
	size_t cap;
	/* what was kept */
	struct span *spans;
	size_t nspans, spans_cap;
	struct thread *threads;
	size_t nthreads, threads_cap;
};

/* One event being read: the fields we use. */
struct event {
	char name[STR_MAX], ph[8], thread[STR_MAX];
	int64_t pid, tid, arg;
	double ts, dur;
	bool has_arg;
};

__attribute__((format(printf, 2, 3))) static int bad(struct reader *r, const char *fmt, ...)
{
	va_list ap;

	if (r->why && r->why[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(r->why, r->cap, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

static void ws(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

/* Expects @c (after white space). */
static bool eat(struct reader *r, char c)
{
	ws(r);
	if (r->p < r->end && *r->p == c) {
		r->p++;
		return true;
	}
	return false;
}

/* Whether the 4 bytes at @p are hex digits (the caller checked they are there). */
static bool hex4(const char *p)
{
	for (int i = 0; i < 4; i++)
		if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
			return false;
	return true;
}

/* Reads a string into @out (@cap bytes, cut to fit; NULL: skip it). Escapes are
 * decoded (JSON's only: \" \\ \/ \b \f \n \r \t \uXXXX); \u escapes become '?'. */
static int string(struct reader *r, char *out, size_t cap)
{
	size_t n = 0;

	if (!eat(r, '"'))
		return bad(r, "expected a string at byte %td", r->p - r->start);
	while (r->p < r->end && *r->p != '"') {
		char c = *r->p++;

		if (c == '\\') {
			if (r->p >= r->end)
				break;
			c = *r->p++;
			if (c == 'u') {
				if (r->end - r->p < 4 || !hex4(r->p))
					return bad(r, "bad \\u escape at byte %td",
						   r->p - 2 - r->start);
				c = '?';
				r->p += 4;
			} else if (c == 'n' || c == 't' || c == 'r' || c == 'b' || c == 'f') {
				c = ' ';
			} else if (c != '"' && c != '\\' && c != '/') {
				return bad(r, "bad escape at byte %td", r->p - 2 - r->start);
			}
		}
		if (out && n + 1 < cap)
			out[n++] = c;
	}
	if (out)
		out[n] = '\0';
	if (r->p >= r->end)
		return bad(r, "unterminated string");
	r->p++;
	return 0;
}

static int number(struct reader *r, double *out)
{
	char buf[64];
	size_t n = 0;
	char *endp;

	ws(r);
	while (r->p + n < r->end && n + 1 < sizeof(buf) && r->p[n] &&
	       strchr("+-0123456789.eE", r->p[n]))
		buf[n] = r->p[n], n++;
	buf[n] = '\0';
	*out = strtod(buf, &endp);
	if (n == 0 || *endp || !isfinite(*out))
		return bad(r, "expected a value at byte %td", r->p - r->start);
	r->p += n;
	return 0;
}

static int value(struct reader *r, int depth);

/* Reads an object, calling @key for each key (the reader is at its value; @key
 * reads it). */
static int object(struct reader *r, int depth, int (*key)(struct reader *, const char *, void *),
		  void *ctx)
{
	char k[STR_MAX];
	int rc;

	if (depth > MAX_DEPTH)
		return bad(r, "nested deeper than %d", MAX_DEPTH);
	if (!eat(r, '{'))
		return bad(r, "expected an object");
	if (eat(r, '}'))
		return 0;
	do {
		rc = string(r, k, sizeof(k));
		if (rc == 0 && !eat(r, ':'))
			rc = bad(r, "expected ':' after \"%s\"", k);
		if (rc == 0)
			rc = key ? key(r, k, ctx) : value(r, depth + 1);
		if (rc)
			return rc;
	} while (eat(r, ','));
	return eat(r, '}') ? 0 : bad(r, "expected ',' or '}'");
}

static int array(struct reader *r, int depth, int (*elem)(struct reader *, int, void *), void *ctx)
{
	int rc;

	if (depth > MAX_DEPTH)
		return bad(r, "nested deeper than %d", MAX_DEPTH);
	if (!eat(r, '['))
		return bad(r, "expected an array");
	if (eat(r, ']'))
		return 0;
	do {
		rc = elem ? elem(r, depth + 1, ctx) : value(r, depth + 1);
		if (rc)
			return rc;
	} while (eat(r, ','));
	return eat(r, ']') ? 0 : bad(r, "expected ',' or ']'");
}

/* Skips any value. */
static int value(struct reader *r, int depth)
{
	double d;

	ws(r);
	if (r->p >= r->end)
		return bad(r, "truncated");
	switch (*r->p) {
	case '{':
		return object(r, depth, NULL, NULL);
	case '[':
		return array(r, depth, NULL, NULL);
	case '"':
		return string(r, NULL, 0);
	}
	for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++)
		if ((size_t)(r->end - r->p) >= strlen(*w) && memcmp(r->p, *w, strlen(*w)) == 0) {
			r->p += strlen(*w);
			return 0;
		}
	return number(r, &d);
}

static int int_of(struct reader *r, int64_t *out)
{
	double d;
	int rc = number(r, &d);

	if (rc == 0 && (d < -9.2e18 || d > 9.2e18))
		return bad(r, "integer out of range");
	*out = rc ? 0 : (int64_t)d;
	return rc;
}

static int args_key(struct reader *r, const char *k, void *ctx)
{
	struct event *e = ctx;

	if (strcmp(k, "name") == 0) {
		ws(r);
		if (r->p < r->end && *r->p == '"')
			return string(r, e->thread, sizeof(e->thread));
	} else if (strcmp(k, "arg") == 0) {
		e->has_arg = true;
		return int_of(r, &e->arg);
	}
	return value(r, MAX_DEPTH / 2);
}

static int event_key(struct reader *r, const char *k, void *ctx)
{
	struct event *e = ctx;

	if (strcmp(k, "name") == 0)
		return string(r, e->name, sizeof(e->name));
	if (strcmp(k, "ph") == 0)
		return string(r, e->ph, sizeof(e->ph));
	if (strcmp(k, "pid") == 0)
		return int_of(r, &e->pid);
	if (strcmp(k, "tid") == 0)
		return int_of(r, &e->tid);
	if (strcmp(k, "ts") == 0)
		return number(r, &e->ts);
	if (strcmp(k, "dur") == 0)
		return number(r, &e->dur);
	if (strcmp(k, "args") == 0)
		return object(r, MAX_DEPTH / 2, args_key, e);
	return value(r, MAX_DEPTH / 2);
}

/* Grows *@v (of *@cap elements of @size bytes) to hold one more than @n. */
static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*v, (*cap ? *cap * 2 : 256) * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = *cap ? *cap * 2 : 256;
	return 0;
}

/* Whether @s has @word as a whole space-separated word. */
static bool has_word(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = strstr(s, word); p; p = strstr(p + 1, word))
		if ((p == s || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

static int keep(struct reader *r, const struct event *e)
{
	enum kind k = strcmp(e->name, "O build") == 0	      ? K_BUILD
		      : strcmp(e->name, "S run") == 0	      ? K_RUN
		      : strcmp(e->name, "token publish") == 0 ? K_PUBLISH
							      : K_NONE;

	if (strcmp(e->ph, "M") == 0 && strcmp(e->name, "thread_name") == 0) {
		if (grow((void **)&r->threads, &r->threads_cap, r->nthreads, sizeof(*r->threads)))
			return -ENOMEM;
		r->threads[r->nthreads++] = (struct thread){e->pid, e->tid,
							    has_word(e->thread, "O")   ? R_O
							    : has_word(e->thread, "S") ? R_S
										       : R_ANY};
		return 0;
	}
	if (strcmp(e->ph, "X") != 0 || k == K_NONE || e->ts < 0 || e->dur < 0)
		return 0;
	if (grow((void **)&r->spans, &r->spans_cap, r->nspans, sizeof(*r->spans)))
		return -ENOMEM;
	r->spans[r->nspans++] = (struct span){
	    .pid = e->pid,
	    .tid = e->tid,
	    .arg = e->has_arg ? e->arg : -1,
	    .kind = k,
	    .t0 = (uint64_t)llround(e->ts * 1e3),
	    .t1 = (uint64_t)llround((e->ts + e->dur) * 1e3),
	};
	return 0;
}

static int event(struct reader *r, int depth, void *ctx)
{
	struct event e = {.pid = 0};
	int rc;

	(void)ctx;
	ws(r);
	if (r->p < r->end && *r->p != '{')
		return value(r, depth); /* not an event: nothing to keep */
	rc = object(r, depth, event_key, &e);
	return rc ? rc : keep(r, &e);
}

static int top_key(struct reader *r, const char *k, void *ctx)
{
	if (strcmp(k, "traceEvents") == 0) {
		*(bool *)ctx = true;
		return array(r, 1, event, NULL);
	}
	return value(r, 1);
}

/* ---- the summary ---- */

static enum role role_of(const struct reader *r, int64_t pid, int64_t tid)
{
	for (size_t i = 0; i < r->nthreads; i++)
		if (r->threads[i].pid == pid && r->threads[i].tid == tid)
			return r->threads[i].role;
	return R_ANY;
}

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Build spans by (pid, arg), for pairing with publishes. */
static int cmp_build(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->arg < y->arg ? -1 : x->arg > y->arg;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The overlap of the O builds @o[0..no) with the S runs @s[0..ns), each in time
 * order: one merge pass. */
static uint64_t overlap(const struct span *o, size_t no, const struct span *s, size_t ns)
{
	size_t i = 0, j = 0;
	uint64_t sum = 0;

	while (i < no && j < ns) {
		uint64_t lo = o[i].t0 > s[j].t0 ? o[i].t0 : s[j].t0;
		uint64_t hi = o[i].t1 < s[j].t1 ? o[i].t1 : s[j].t1;

		if (hi > lo)
			sum += hi - lo;
		if (o[i].t1 < s[j].t1)
			i++;
		else
			j++;
	}
	return sum;
}

/* Fills @out from the spans kept in @r (sorted here). */
static int summarize(struct reader *r, struct ctl_trace_summary *out)
{
	struct span *sp = r->spans, *builds;
	uint64_t *lat;
	size_t n = 0, nb = 0, nl = 0;

	/* Drop spans on a thread of the other role. */
	for (size_t i = 0; i < r->nspans; i++) {
		enum role want = sp[i].kind == K_BUILD ? R_O : R_S;
		enum role got = role_of(r, sp[i].pid, sp[i].tid);

		if (got == R_ANY || got == want)
			sp[n++] = sp[i];
	}
	if (n == 0) /* sp may be NULL, which qsort does not take even for 0 */
		return 0;
	qsort(sp, n, sizeof(*sp), cmp_span);
	builds = calloc(n ? n : 1, sizeof(*builds));
	lat = calloc(n ? n : 1, sizeof(*lat));
	if (!builds || !lat) {
		free(builds);
		free(lat);
		return -ENOMEM;
	}
	out->spans = n;
	for (size_t i = 0; i < n;) {
		size_t b0 = i, r0, p0;

		while (i < n && sp[i].pid == sp[b0].pid && sp[i].kind == K_BUILD)
			i++;
		r0 = i;
		while (i < n && sp[i].pid == sp[b0].pid && sp[i].kind == K_RUN)
			i++;
		p0 = i;
		while (i < n && sp[i].pid == sp[b0].pid && sp[i].kind == K_PUBLISH)
			i++;
		out->pids++;
		for (size_t k = b0; k < r0; k++)
			out->o_busy_ns += sp[k].t1 - sp[k].t0;
		for (size_t k = r0; k < p0; k++)
			out->s_busy_ns += sp[k].t1 - sp[k].t0;
		out->overlap_ns += overlap(sp + b0, r0 - b0, sp + r0, p0 - r0);
		for (size_t k = b0; k < r0; k++)
			if (sp[k].arg >= 0)
				builds[nb++] = sp[k];
	}
	qsort(builds, nb, sizeof(*builds), cmp_build);
	for (size_t i = 0; i < n; i++) {
		const struct span *b;

		if (sp[i].kind != K_PUBLISH || sp[i].arg < 0)
			continue;
		b = bsearch(&sp[i], builds, nb, sizeof(*builds), cmp_build);
		if (b)
			lat[nl++] = sp[i].t1 > b->t1 ? sp[i].t1 - b->t1 : 0;
	}
	qsort(lat, nl, sizeof(*lat), cmp_u64);
	out->latencies = nl;
	if (nl) {
		out->latency_p50_ns = lat[(nl - 1) / 2];
		out->latency_p99_ns = lat[(nl * 99 + 99) / 100 - 1];
	}
	out->overlap_ratio = out->s_busy_ns ? (double)out->overlap_ns / (double)out->s_busy_ns : 0;
	free(builds);
	free(lat);
	return 0;
}

int ctl_trace_summarize(const char *json, size_t len, struct ctl_trace_summary *out, char *why,
			size_t cap)
{
	struct reader r = {.start = json, .p = json, .end = json + len, .why = why, .cap = cap};
	bool found = false;
	int rc;

	memset(out, 0, sizeof(*out));
	if (why && cap)
		why[0] = '\0';
	ws(&r);
	/* Chrome accepts both {"traceEvents":[...]} and a bare array of events. */
	if (r.p < r.end && *r.p == '[') {
		found = true;
		rc = array(&r, 1, event, NULL);
	} else {
		rc = object(&r, 0, top_key, &found);
	}
	ws(&r);
	if (rc == 0 && r.p != r.end)
		rc = bad(&r, "trailing bytes after the document");
	if (rc == 0 && !found)
		rc = bad(&r, "no \"traceEvents\" array");
	if (rc == 0)
		rc = summarize(&r, out);
	free(r.spans);
	free(r.threads);
	return rc;
}
