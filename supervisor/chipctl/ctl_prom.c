/* ctl_prom.c - the counters in the Prometheus text exposition format 0.0.4
 * (docs/operations.md, "Monitor"): a pure function of the counters, shared by `stats --prom`
 * and `export --textfile`.
 *
 * Names: chipd_supervisor_<name> for the supervisor block, chipd_worker_<name> with
 * a chip="N" label for worker blocks ("chipN"), chipd_<block>_<name> for a block
 * this version does not know. err_<code> counters are one metric with a code label
 * (a dimension, not a name); *_ns counters are exported in seconds, the base unit;
 * counters end in _total. */
#include "ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define METRIC_MAX 128
#define LABELS_MAX 96
#define NS_PER_S   1000000000ull

struct sample {
	char metric[METRIC_MAX];
	char labels[LABELS_MAX]; /* `chip="0",code="x"` or empty */
	const char *name;	 /* the counter's own name, for HELP */
	bool worker, gauge, seconds;
	uint64_t value;
};

/* HELP texts of the counters this version knows (docs/protocol.md §8.1, whose
 * definitions they shorten). A name both blocks use with different meanings has an
 * entry per block (scope 'S' supervisor, 'W' worker); scope 0 serves both. */
static const struct {
	const char *name;
	char scope;
	const char *help;
} helps[] = {
    {"requests", 0, "Requests the router took from the client mailbox."},
    {"answered", 0,
     "Requests whose answer reached a client still waiting; requests - answered were "
     "discarded because the client gave up first."},
    {"mbox_resets", 'S',
     "Client mailbox slots reset for a client that gave up (a discarded answer included), "
     "is gone, or whose owner pid is not its client region's client."},
    {"mbox_resets", 'W',
     "Control mailbox resets the worker acknowledged: the supervisor gave up on a call."},
    {"worker_starts", 0, "Worker processes started."},
    {"worker_deaths", 0,
     "Worker processes that ended while chipd was serving, without being asked to (one "
     "killed for missed heartbeats or as degraded included; not a drain's or stop's)."},
    {"worker_degraded", 0,
     "Chips marked degraded (scheduler or orchestrator gave up or stopped progressing), "
     "each then killed and restarted."},
    {"queue_depth", 'S',
     "Requests in flight: admitted streams whose end the supervisor has not seen yet."},
    {"queue_depth", 'W', "Admitted requests waiting in the admission queue."},
    {"rings_in_use", 0,
     "Token rings held: streams in flight, and ended ones whose reader has neither read "
     "the end nor closed the stream."},
    {"clients", 0, "Client connections of the handshake socket whose hello was answered."},
    {"clients_refused", 0,
     "Handshake connections refused: a peer neither of chipd's uid nor of its "
     "--allow-group group, one past --max-clients, or a hello that finds no client "
     "region free."},
    {"callables_quarantined", 0,
     "Registered callables quarantined (unregistered on every chip) after they were in "
     "flight on --callable-crash-limit worker deaths."},
    {"admitted", 0, "Assigns the worker admitted."},
    {"rejected", 0, "Assigns the worker refused."},
    {"completed", 0, "Streams that completed (FINAL)."},
    {"failed", 0, "Streams the worker ended with an error other than cancelled."},
    {"cancelled", 0, "Streams the worker ended with cancelled."},
    {"tokens", 0, "Tokens published (FINAL included; an ERROR record carries none)."},
    {"steps", 0, "Steps the orchestrator built."},
    {"o_busy_ns", 0, "Time the orchestrator thread spent building steps."},
    {"s_busy_ns", 0, "Time the scheduler thread spent running steps."},
    {"overlap_ns", 0, "Time building and running overlapped."},
    {"device_errors", 0,
     "Requests' steps the device layer failed: once per request whose lane failed."},
    {"terminal_push_failed", 0,
     "Stream ends the worker could not write into the ring (a broken ring: the supervisor "
     "takes it back)."},
    {"active", 0, "Requests the orchestrator runs (taken from the queue, not yet ended)."},
    {"kv_blocks_used", 0, "KV cache blocks in use."},
};

/* Counter names whose words Prometheus would misread ("s" is its abbreviation of
 * seconds: promtool refuses chipd_worker_s_busy_seconds_total). */
static const struct {
	const char *name, *metric;
} renames[] = {
    {"o_busy_ns", "orchestrator_busy_seconds"},
    {"s_busy_ns", "scheduler_busy_seconds"},
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Appends @s to @out (@cap bytes) with every character outside [a-zA-Z0-9_] as '_'. */
static void append_name(char *out, size_t cap, const char *s)
{
	size_t n = strlen(out);

	for (; *s && n + 1 < cap; s++, n++) {
		char c = *s;

		out[n] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
				 (c >= '0' && c <= '9') || c == '_'
			     ? c
			     : '_';
	}
	out[n] = '\0';
}

/* Appends `key="value"` (value escaped) to @out (@cap bytes), comma-separated. */
static void append_label(char *out, size_t cap, const char *key, const char *value)
{
	size_t n = strlen(out);

	n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s=\"", n ? "," : "", key);
	for (; *value && n + 3 < cap; value++) {
		if (*value == '\\' || *value == '"')
			out[n++] = '\\';
		if (*value == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
		} else {
			out[n++] = *value;
		}
	}
	if (n + 1 < cap)
		out[n++] = '"';
	out[n < cap ? n : cap - 1] = '\0';
}

static void make_sample(struct sample *s, const struct chipd_stat *st)
{
	const char *name = st->name;
	char base[METRIC_MAX] = "";

	memset(s, 0, sizeof(*s));
	s->name = name;
	s->gauge = st->gauge;
	s->value = st->value;
	if (strcmp(st->block, "supervisor") == 0) {
		strcpy(s->metric, "chipd_supervisor_");
	} else if (strncmp(st->block, "chip", 4) == 0 && st->block[4] >= '0' &&
		   st->block[4] <= '9' &&
		   strspn(st->block + 4, "0123456789") == strlen(st->block + 4)) {
		strcpy(s->metric, "chipd_worker_");
		s->worker = true;
		append_label(s->labels, sizeof(s->labels), "chip", st->block + 4);
	} else {
		strcpy(s->metric, "chipd_");
		append_name(s->metric, sizeof(s->metric), st->block);
		append_name(s->metric, sizeof(s->metric), "_");
	}
	for (size_t i = 0; i < sizeof(renames) / sizeof(renames[0]); i++)
		if (strcmp(name, renames[i].name) == 0) {
			append_name(base, sizeof(base), renames[i].metric);
			s->seconds = true;
		}
	if (base[0]) {
		/* renamed */
	} else if (strncmp(name, "err_", 4) == 0 && name[4]) {
		append_label(s->labels, sizeof(s->labels), "code", name + 4);
		append_name(base, sizeof(base), "errors");
	} else if (ends_with(name, "_ns")) {
		snprintf(base, sizeof(base), "%.*s_seconds", (int)(strlen(name) - 3), name);
		s->seconds = true;
	} else {
		append_name(base, sizeof(base), name);
	}
	append_name(s->metric, sizeof(s->metric), base);
	if (!s->gauge && !ends_with(s->metric, "_total"))
		append_name(s->metric, sizeof(s->metric), "_total");
}

/* Writes the HELP text of @s, escaped (backslash, newline) as the format asks. */
static void write_help(FILE *f, const struct sample *s)
{
	const char *help = NULL;
	char buf[160];

	if (strncmp(s->name, "err_", 4) == 0) {
		help = "Requests that ended with this error code: refused with it, or their "
		       "stream ended with it. Each request once.";
	} else {
		for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++)
			if (strcmp(helps[i].name, s->name) == 0 &&
			    (!helps[i].scope || helps[i].scope == (s->worker ? 'W' : 'S')))
				help = helps[i].help;
	}
	if (!help) {
		snprintf(buf, sizeof(buf), "chipd %s %s.", s->gauge ? "gauge" : "counter", s->name);
		help = buf;
	}
	fprintf(f, "# HELP %s ", s->metric);
	for (; *help; help++)
		if (*help == '\\')
			fputs("\\\\", f);
		else if (*help == '\n')
			fputs("\\n", f);
		else
			fputc(*help, f);
	if (s->worker)
		fputs(" Per chip.", f);
	fputc('\n', f);
}

static void write_sample(FILE *f, const struct sample *s)
{
	fputs(s->metric, f);
	if (s->labels[0])
		fprintf(f, "{%s}", s->labels);
	if (s->seconds)
		fprintf(f, " %llu.%09llu\n", (unsigned long long)(s->value / NS_PER_S),
			(unsigned long long)(s->value % NS_PER_S));
	else
		fprintf(f, " %llu\n", (unsigned long long)s->value);
}

int ctl_prom_write(FILE *f, const struct chipd_stat *st, uint32_t n, bool up)
{
	struct sample *v;
	bool *done;

	fputs("# HELP chipd_up Whether chipctl could read the instance's counters.\n"
	      "# TYPE chipd_up gauge\n",
	      f);
	fprintf(f, "chipd_up %d\n", up ? 1 : 0);
	if (!up || n == 0)
		return 0;
	v = calloc(n, sizeof(*v));
	done = calloc(n, sizeof(*done));
	if (!v || !done) {
		free(v);
		free(done);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		make_sample(&v[i], &st[i]);
	/* Every metric once, in the order it first appears, with all its samples. */
	for (uint32_t i = 0; i < n; i++) {
		if (done[i])
			continue;
		write_help(f, &v[i]);
		fprintf(f, "# TYPE %s %s\n", v[i].metric, v[i].gauge ? "gauge" : "counter");
		for (uint32_t j = i; j < n; j++)
			if (!done[j] && strcmp(v[j].metric, v[i].metric) == 0) {
				write_sample(f, &v[j]);
				done[j] = true;
			}
	}
	free(v);
	free(done);
	return 0;
}
