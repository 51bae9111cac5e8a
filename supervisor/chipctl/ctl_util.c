/* ctl_util.c - what every chipctl subcommand shares: the common options, the
 * mapping of failures to exit statuses, error reports, connecting, JSON strings. */
#include "ctl.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NS_PER_S 1000000000ull
/* A call's timeout must leave the supervisor time to answer; a day is past any use. */
#define CTL_TIMEOUT_MAX_MS 86400000
/* Counters of a node: the supervisor's and every worker's, with room for growth. */
#define CTL_STATS_START 1024u

int ctl_usage(const struct ctl *g, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "chipctl%s%s: ", g->cmd ? " " : "", g->cmd ? g->cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'chipctl%s%s --help'.\n", g->cmd ? " " : "", g->cmd ? g->cmd : "");
	return CTL_EXIT_USAGE;
}

int ctl_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

const char *ctl_id_str(uint64_t id, char buf[CTL_ID_CHARS])
{
	if (id > CTL_ID_TOP && id <= (uint64_t)INT64_MAX)
		snprintf(buf, CTL_ID_CHARS, "@%" PRIu64, id - CTL_ID_TOP);
	else
		snprintf(buf, CTL_ID_CHARS, "%" PRIu64, id);
	return buf;
}

int ctl_parse_id(const char *s, uint64_t *out)
{
	int64_t v;

	if (s[0] == '@') {
		if (ctl_parse_i64(s + 1, 1, (int64_t)(CTL_ID_TOP - 1), &v))
			return -EINVAL;
		*out = CTL_ID_TOP + (uint64_t)v;
		return 0;
	}
	if (ctl_parse_i64(s, 1, INT64_MAX, &v))
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

const char *ctl_ids_in_text(const char *msg, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; msg[i] && o + 1 < cap;) {
		char word[CTL_ID_CHARS], id[CTL_ID_CHARS];
		const char *text = NULL;
		uint64_t v = 0;
		size_t n = 0;

		while (msg[i + n] >= '0' && msg[i + n] <= '9')
			n++;
		if (n == 0 || (i > 0 && isalnum((unsigned char)msg[i - 1])) ||
		    isalnum((unsigned char)msg[i + n])) {
			/* a letter, or a number inside a word: as it is */
			for (n = n ? n : 1; n-- && o + 1 < cap;)
				out[o++] = msg[i++];
			continue;
		}
		if (n < sizeof(word) && msg[i] != '0') {
			memcpy(word, msg + i, n);
			word[n] = '\0';
			if (ctl_parse_id(word, &v) == 0 && v > CTL_ID_TOP)
				text = ctl_id_str(v, id); /* "@N"; any other number stays as it is */
		}
		if (text) {
			size_t len = strlen(text);

			if (o + len >= cap)
				break; /* cut before a half id */
			memcpy(out + o, text, len);
			o += len;
			i += n;
		} else {
			while (n-- && o + 1 < cap)
				out[o++] = msg[i++];
		}
	}
	out[o] = '\0';
	return out;
}

int ctl_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 86400)
		return -EINVAL;
	*out = v;
	return 0;
}

int ctl_opt_timeout(struct ctl *g, const char *arg)
{
	int64_t v;

	if (ctl_parse_i64(arg, 1, CTL_TIMEOUT_MAX_MS, &v))
		return ctl_usage(g, "--timeout-ms: '%s' is not 1..%d", arg, CTL_TIMEOUT_MAX_MS);
	g->timeout_ms = (uint32_t)v;
	return 0;
}

/* Long options a subcommand may add to the common ones. */
#define CTL_OPTS_MAX 24

enum { OPT_INSTANCE = 0x100, OPT_TIMEOUT, OPT_JSON, OPT_HELP };

/* The common options: --json last, so that a subcommand without it can leave it out. */
static const struct option common[] = {
    {"instance", required_argument, NULL, OPT_INSTANCE},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, OPT_HELP},
    {"json", no_argument, NULL, OPT_JSON},
};

/* Handles one common option. Returns 0, CTL_HELP or CTL_EXIT_USAGE. */
static int common_opt(struct ctl *g, int opt, const char *arg, const char *usage)
{
	switch (opt) {
	case OPT_INSTANCE:
		g->instance = arg;
		return 0;
	case OPT_TIMEOUT:
		return ctl_opt_timeout(g, arg);
	case OPT_JSON:
		g->json = true;
		return 0;
	default: /* OPT_HELP */
		fputs(usage, stdout);
		return CTL_HELP;
	}
}

/* A bad instance name (--instance, else $CHIPD_INSTANCE or $SLURM_JOB_ID) is a usage
 * error found before the command does anything, not the failure of its first call
 * (export would write "chipd_up 0" for it forever). */
static int check_instance(const struct ctl *g)
{
	char name[CHIPD_INSTANCE_MAX];
	struct chipd_error err;

	if (chipd_resolve_instance(g->instance, name, &err) == 0)
		return 0;
	return ctl_usage(g, "%s%s", g->instance ? "--instance: " : "", err.message);
}

int ctl_args(struct ctl *g, int argc, char **argv, const struct ctl_args *a)
{
	struct option opts[CTL_OPTS_MAX];
	size_t n = 0, ncommon = sizeof(common) / sizeof(common[0]) - (a->json ? 0 : 1);
	int opt, rc = 0, npos;

	for (const struct option *o = a->own; o && o->name && n + 1 < CTL_OPTS_MAX - ncommon; o++)
		opts[n++] = *o;
	memcpy(&opts[n], common, ncommon * sizeof(common[0]));
	n += ncommon;
	memset(&opts[n], 0, sizeof(opts[n]));
	optind = 0; /* glibc: start afresh (the global options were parsed before) */
	opterr = 0;
	/* ':' first: a missing value comes back as ':', not '?'. */
	while (rc == 0 && (opt = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (opt == '?' && optopt > 0 && optopt < 0x80)
			rc = ctl_usage(g, "unknown option '-%c'", optopt);
		else if (opt == '?')
			rc = ctl_usage(g, "unknown option '%s'", argv[optind - 1]);
		else if (opt == ':')
			rc = ctl_usage(g, "'%s' needs a value", argv[optind - 1]);
		else if (opt >= OPT_INSTANCE && opt <= OPT_HELP)
			rc = common_opt(g, opt, optarg, a->usage);
		else
			rc = a->opt(a->ctx, g, opt, optarg);
	}
	if (rc == 0)
		rc = check_instance(g);
	if (rc)
		return rc;
	npos = argc - optind;
	if (npos < a->min_pos)
		return ctl_usage(g, "missing operand");
	if (npos > a->max_pos)
		return ctl_usage(g, "unexpected operand '%s'", argv[optind + a->max_pos]);
	return 0;
}

int ctl_exit_for(int rc, bool connecting)
{
	switch (rc) {
	case 0:
		return CTL_EXIT_OK;
	case -ENOENT:
		return CTL_EXIT_NO_INSTANCE;
	case -ESTALE:
	case -ESHUTDOWN:
		/* A stale ring in the middle of a stream is a server bug, not a stop. */
		return connecting ? CTL_EXIT_NOT_RUNNING : CTL_EXIT_FAILED;
	case -EAGAIN:
		/* Connecting: still starting. A call: every mailbox slot busy. */
		return connecting ? CTL_EXIT_NOT_RUNNING : CTL_EXIT_FAILED;
	case -EPIPE: /* the supervisor died: a call's, or a stream's (code node_lost) */
	case -ECONNRESET:
		return CTL_EXIT_NOT_RUNNING;
	case -ETIMEDOUT:
		return CTL_EXIT_TIMEOUT;
	case -EPERM:
	case -EACCES:
		return CTL_EXIT_PERM;
	case -EINVAL:
		return CTL_EXIT_USAGE;
	default:
		return CTL_EXIT_FAILED;
	}
}

/* The message of a failure @rc, @err: its own, else the errno's text. */
static const char *err_message(int rc, const struct chipd_error *err)
{
	return err && err->message[0] ? err->message : strerror(-rc);
}

void ctl_json_error(FILE *f, int rc, const struct chipd_error *err)
{
	fputs("{\"code\":", f);
	if (err && err->code != CHIPD_OK)
		ctl_json_str(f, chipd_code_name(err->code));
	else
		fputs("null", f);
	fprintf(f, ",\"errno\":%d,\"message\":", -rc);
	ctl_json_str(f, err_message(rc, err));
	fprintf(f, ",\"retryable\":%s", err && err->retryable ? "true" : "false");
	if (err && err->has_request)
		fprintf(f, ",\"request\":%llu", (unsigned long long)err->request);
	if (err && err->has_chip)
		fprintf(f, ",\"chip\":%u", (unsigned)err->chip);
	fputc('}', f);
}

int ctl_report(const struct ctl *g, const char *what, int rc, const struct chipd_error *err,
	       bool connecting)
{
	return ctl_report_more(g, what, rc, err, connecting, NULL, NULL);
}

int ctl_report_more(const struct ctl *g, const char *what, int rc, const struct chipd_error *err,
		    bool connecting, void (*more)(FILE *, const void *), const void *arg)
{
	int status = ctl_exit_for(rc, connecting);
	const char *code = err && err->code != CHIPD_OK ? chipd_code_name(err->code) : NULL;

	char text[2 * CHIPD_MSG_MAX];

	fprintf(stderr, "chipctl %s: %s", what,
		ctl_ids_in_text(err_message(rc, err), text, sizeof(text)));
	if (code)
		fprintf(stderr, " [%s%s]", code, err->retryable ? ", retryable" : "");
	fputc('\n', stderr);
	/* A usage error (a value libchipd refused before sending) prints no document, as
	 * the ones found while parsing the command line: chipctl(1). */
	if (!g->json || status == CTL_EXIT_USAGE)
		return status;
	printf("{\"v\":%d,\"ok\":false,\"exit\":%d,\"error\":", CTL_JSON_VERSION, status);
	ctl_json_error(stdout, rc, err);
	if (more)
		more(stdout, arg);
	fputs("}\n", stdout);
	return status;
}

int ctl_connect(const struct ctl *g, chipd_conn **c)
{
	struct chipd_error err;
	int rc = chipd_connect_timeout(g->instance, g->timeout_ms, c, &err);

	return rc ? ctl_report(g, g->cmd ? g->cmd : "connect", rc, &err, true) : CTL_EXIT_OK;
}

int ctl_connect_monitor(const struct ctl *g, chipd_conn **c)
{
	struct chipd_error err;
	int rc = chipd_connect_monitor(g->instance, c, &err);

	return rc ? ctl_report(g, g->cmd ? g->cmd : "connect", rc, &err, true) : CTL_EXIT_OK;
}

/* @err for a failure of chipctl's own (no protocol code), as libchipd fills it. */
static int own_failure(struct chipd_error *err, int errnum, const char *what, uint32_t count)
{
	*err = (struct chipd_error){.errnum = errnum, .code = CHIPD_OK};
	snprintf(err->message, sizeof(err->message), "%s (%u counters)", what, count);
	return errnum;
}

int ctl_read_stats(chipd_conn *c, struct chipd_stat **out, uint32_t *n, struct chipd_error *err)
{
	uint32_t cap = CTL_STATS_START;

	/* chipd_stats says how many there are when @cap was short: one retry fits,
	 * unless workers were added in between (then the next one does). */
	for (int tries = 0; tries < 3; tries++) {
		struct chipd_stat *st = calloc(cap, sizeof(*st));
		int rc;

		if (!st)
			return own_failure(err, -ENOMEM, "out of memory", cap);
		rc = chipd_stats(c, st, cap, n, err);
		if (rc == 0) {
			*out = st;
			return 0;
		}
		free(st);
		if (rc != -ENOBUFS)
			return rc;
		cap = *n + 16;
	}
	return own_failure(err, -ENOBUFS, "the node's counters kept growing while read", *n);
}

int ctl_snapshot(const struct ctl *g, struct chipd_stat **st, uint32_t *n, struct chipd_error *err)
{
	chipd_conn *c;
	/* counters need no handshake: monitoring works with every client slot taken */
	int rc = chipd_connect_monitor(g->instance, &c, err);

	if (rc == 0) {
		rc = ctl_read_stats(c, st, n, err);
		chipd_close(c);
	}
	return rc;
}

const struct chipd_stat *ctl_stat_find(const struct chipd_stat *st, uint32_t n, const char *block,
				       const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(st[i].block, block) == 0 && strcmp(st[i].name, name) == 0)
			return &st[i];
	return NULL;
}

/* Length of the well-formed UTF-8 sequence of a character at or above U+0080 at @p
 * (RFC 3629: no overlong form, no surrogate, nothing past U+10FFFF), or 0 when the
 * bytes there are not one (a stray or cut sequence; the NUL ends any). */
static size_t utf8_seq_len(const unsigned char *p)
{
	uint32_t cp, min;
	size_t n;

	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
		cp = p[0] & 0x1fu;
		min = 0x80;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		cp = p[0] & 0x0fu;
		min = 0x800;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		cp = p[0] & 0x07u;
		min = 0x10000;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0u) != 0x80u)
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	return cp < min || cp > 0x10ffffu || (cp >= 0xd800u && cp <= 0xdfffu) ? 0 : n;
}

void ctl_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		size_t n;

		if (*p == '"' || *p == '\\') {
			fprintf(f, "\\%c", *p);
		} else if (*p < 0x20 || *p == 0x7f) {
			fprintf(f, "\\u%04x", *p);
		} else if (*p < 0x80) {
			fputc(*p, f);
		} else if ((n = utf8_seq_len(p)) > 0) {
			fwrite(p, 1, n, f);
			p += n - 1;
		} else {
			/* JSON is UTF-8 text: a byte that is not (a path's) is the
			 * replacement character, as a UTF-8 decoder shows it */
			fputs("\\ufffd", f);
		}
	}
	fputc('"', f);
}

uint64_t ctl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Written by the signal handler, so it must be a global (the one in chipctl). */
volatile sig_atomic_t ctl_interrupted;

static void on_signal(int sig)
{
	ctl_interrupted = sig;
}

void ctl_catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

_Noreturn void ctl_die_of_signal(void)
{
	int sig = ctl_interrupted ? (int)ctl_interrupted : SIGINT;

	fflush(stdout);
	signal(sig, SIG_DFL);
	raise(sig);
	exit(128 + sig); /* not reached unless the signal is blocked */
}

bool ctl_sleep(double seconds)
{
	uint64_t end = ctl_now_ns() + (uint64_t)(seconds * (double)NS_PER_S);

	while (!ctl_interrupted) {
		uint64_t now = ctl_now_ns();
		struct timespec ts;

		if (now >= end)
			return true;
		ts.tv_sec = (time_t)((end - now) / NS_PER_S);
		ts.tv_nsec = (long)((end - now) % NS_PER_S);
		nanosleep(&ts, NULL); /* a signal cuts it short: the loop looks again */
	}
	return false;
}
