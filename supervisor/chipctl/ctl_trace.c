/* ctl_trace.c - `chipctl trace`: start the workers' span recorders, wait, have the
 * supervisor write Chrome trace JSON to a file, stop; optionally summarize the file
 * (ctl_tracesum.c). */
#include "ctl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The wire's limit on the path (docs/protocol.md §8.4), NUL included. */
#define TRACE_PATH_MAX 256
/* Collecting makes every worker write its spans: give it at least this long. */
#define COLLECT_MIN_MS 30000u
/* A trace file larger than this is not read back for --summary. */
#define SUMMARY_MAX_BYTES (1ull << 30)

struct trace {
	const char *out;
	double seconds;
	bool summary;
};

enum { OPT_OUT = 1, OPT_SECONDS, OPT_SUMMARY };

static int trace_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	struct trace *t = ctx;

	if (opt == OPT_OUT)
		t->out = arg;
	else if (opt == OPT_SUMMARY)
		t->summary = true;
	else if (ctl_parse_seconds(arg, &t->seconds))
		return ctl_usage(g, "--seconds: '%s' is not a number of seconds", arg);
	return 0;
}

/* @path made absolute into @abs (@cap bytes): the supervisor, not we, opens it. */
static int absolute(const char *path, char *abs, size_t cap)
{
	char cwd[PATH_MAX];
	int n;

	if (path[0] == '/')
		n = snprintf(abs, cap, "%s", path);
	else if (getcwd(cwd, sizeof(cwd)))
		n = snprintf(abs, cap, "%s/%s", cwd, path);
	else
		return -errno;
	return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

/* Whether the directory of the absolute @path is missing as this process sees it (a
 * component absent, or not a directory): the supervisor could not write there either,
 * so nothing is recorded for it. One this process may not look into is the
 * supervisor's to judge. */
static bool dir_missing(const char *path)
{
	char dir[TRACE_PATH_MAX];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		return false;
	slash[slash == dir] = '\0'; /* "/f": the root */
	if (stat(dir, &st) == 0)
		return !S_ISDIR(st.st_mode);
	return errno == ENOENT || errno == ENOTDIR;
}

/* Reads @path whole into a fresh buffer. Returns 0 or -errno. */
static int slurp(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t cap = 0, n = 0;
	int rc = 0;

	if (!f)
		return -errno;
	for (;;) {
		if (n == cap) {
			char *p =
			    cap >= SUMMARY_MAX_BYTES ? NULL : realloc(buf, cap ? cap * 2 : 65536);

			if (!p) {
				rc = cap >= SUMMARY_MAX_BYTES ? -EFBIG : -ENOMEM;
				break;
			}
			buf = p;
			cap = cap ? cap * 2 : 65536;
		}
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
	}
	if (rc == 0 && ferror(f))
		rc = -EIO;
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

static void print_summary(const struct ctl *g, const struct ctl_trace_summary *s)
{
	if (g->json) {
		printf(",\"summary\":{\"pids\":%u,\"spans\":%llu,\"o_busy_ns\":%llu,"
		       "\"s_busy_ns\":%llu,\"overlap_ns\":%llu,\"overlap_ratio\":%.4f,"
		       "\"latencies\":%llu,\"latency_p50_ns\":%llu,\"latency_p99_ns\":%llu}",
		       (unsigned)s->pids, (unsigned long long)s->spans,
		       (unsigned long long)s->o_busy_ns, (unsigned long long)s->s_busy_ns,
		       (unsigned long long)s->overlap_ns, s->overlap_ratio,
		       (unsigned long long)s->latencies, (unsigned long long)s->latency_p50_ns,
		       (unsigned long long)s->latency_p99_ns);
		return;
	}
	printf("chips traced: %u, spans used: %llu\n", (unsigned)s->pids,
	       (unsigned long long)s->spans);
	printf("overlap ratio: %.3f (O build overlapping S run %.3f ms / S run %.3f ms; "
	       "O build %.3f ms)\n",
	       s->overlap_ratio, (double)s->overlap_ns / 1e6, (double)s->s_busy_ns / 1e6,
	       (double)s->o_busy_ns / 1e6);
	if (s->latencies)
		printf("token delivery latency (O build end to token publish end): p50 %.3f ms, "
		       "p99 %.3f ms over %llu steps\n",
		       (double)s->latency_p50_ns / 1e6, (double)s->latency_p99_ns / 1e6,
		       (unsigned long long)s->latencies);
	else
		printf("token delivery latency: no step with both a build and a publish\n");
}

/* Reads @path back and prints its summary. Returns the exit status. */
static int summarize_file(const struct ctl *g, const char *path)
{
	struct ctl_trace_summary s;
	char why[160];
	char *buf = NULL;
	size_t len = 0;
	int rc = slurp(path, &buf, &len);

	if (rc) {
		snprintf(why, sizeof(why), "cannot read it back: %s", strerror(-rc));
	} else {
		rc = ctl_trace_summarize(buf, len, &s, why, sizeof(why));
		if (rc && rc != -EBADMSG)
			snprintf(why, sizeof(why), "%s", strerror(-rc));
		free(buf);
	}
	if (rc) {
		fprintf(stderr, "chipctl trace: %s: %s\n", path, why);
		if (g->json)
			fputs(",\"summary\":null", stdout);
		return CTL_EXIT_FAILED;
	}
	print_summary(g, &s);
	return CTL_EXIT_OK;
}

static const char trace_usage[] =
    "Usage: chipctl trace --out FILE [--seconds S] [--summary] [--json]\n"
    "Records the workers' spans for S seconds (Ctrl-C ends early), then the supervisor\n"
    "writes them to FILE as Chrome/Perfetto trace JSON (it writes the file: FILE must\n"
    "be writable by the supervisor's user; a relative FILE is taken from here).\n"
    "  --out FILE        where the trace goes (required)\n"
    "  --seconds S       how long to record (default 1)\n"
    "  --summary         read FILE back and print the overlap ratio (O build inside S\n"
    "                    run, over S run time) and token delivery latency (p50, p99 of\n"
    "                    token publish end minus O build end, per step)\n"
    "  --json            {\"v\":1,\"ok\":true,\"path\":...,\"events\":N,\"dropped\":N,\n"
    "                    \"summary\":{...}}\n" CTL_HELP_COMMON;

int ctl_cmd_trace(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {{"out", required_argument, NULL, OPT_OUT},
					    {"seconds", required_argument, NULL, OPT_SECONDS},
					    {"summary", no_argument, NULL, OPT_SUMMARY},
					    {NULL, 0, NULL, 0}};
	struct trace t = {.seconds = 1};
	const struct ctl_args a = {
	    .usage = trace_usage, .own = own, .opt = trace_opt, .ctx = &t, .json = true};
	uint32_t collect_ms = g->timeout_ms > COLLECT_MIN_MS ? g->timeout_ms : COLLECT_MIN_MS;
	uint64_t events = 0, dropped = 0;
	char path[TRACE_PATH_MAX];
	struct chipd_error err;
	chipd_conn *c;
	int rc = ctl_args(g, argc, argv, &a), rc2;

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	if (!t.out)
		return ctl_usage(g, "--out FILE is required");
	if (absolute(t.out, path, sizeof(path)))
		return ctl_usage(g, "--out: '%s' is longer than %d bytes as an absolute path",
				 t.out, TRACE_PATH_MAX - 1);
	if (dir_missing(path))
		return ctl_usage(g, "--out: the directory of '%s' does not exist", path);
	rc = ctl_connect(g, &c);
	if (rc)
		return rc;
	rc = chipd_trace(c, CHIPD_TRACE_START, NULL, g->timeout_ms, NULL, NULL, &err);
	if (rc) {
		rc = ctl_report(g, "trace start", rc, &err, false);
		goto out_close;
	}
	ctl_catch_signals();
	if (!g->json)
		fprintf(stderr, "chipctl trace: recording for %.1f s\n", t.seconds);
	ctl_sleep(t.seconds);
	rc = chipd_trace(c, CHIPD_TRACE_COLLECT, path, collect_ms, &events, &dropped, &err);
	if (rc)
		rc = ctl_report(g, "trace collect", rc, &err, false);
	/* Stop even when collecting failed: the recorders must not run on. */
	rc2 = chipd_trace(c, CHIPD_TRACE_STOP, NULL, g->timeout_ms, NULL, NULL, &err);
	if (rc2 && !rc)
		rc = ctl_report(g, "trace stop", rc2, &err, false);
	if (rc)
		goto out_close;
	if (g->json) {
		printf("{\"v\":%d,\"ok\":true,\"path\":", CTL_JSON_VERSION);
		ctl_json_str(stdout, path);
		printf(",\"events\":%llu,\"dropped\":%llu", (unsigned long long)events,
		       (unsigned long long)dropped);
	} else {
		printf("trace: %llu events (%llu dropped) written to %s\n",
		       (unsigned long long)events, (unsigned long long)dropped, path);
	}
	if (t.summary)
		rc = summarize_file(g, path);
	if (g->json)
		fputs("}\n", stdout);
out_close:
	chipd_close(c);
	return rc;
}
