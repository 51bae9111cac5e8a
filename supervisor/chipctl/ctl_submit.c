/* ctl_submit.c - `chipctl submit`: one request or --count of them at once, their
 * token streams read until each ends.
 *
 * A stream lives as long as its reader: libchipd cancels a request whose stream is
 * closed early, and the supervisor reclaims the ring of a reader that died. So
 * without --follow, submit still reads every stream to its end, silently, after
 * printing the ids; another shell can `chipctl cancel` them meanwhile.
 *
 * Bytes (ctl_data.c): --input gives the request's input, a token's payload prints as
 * hex after its value, and the output blob (--output-cap) prints as hex in the
 * request's end line, or goes to --output FILE. */
#include "ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COUNT_MAX	256	 /* the node's token rings (PROTO_NODE_RINGS) */
#define WAIT_MS_DEFAULT 60000	 /* the longest silence of a stream before giving up */
#define MAX_TOKENS_MAX	1048576	 /* docs/protocol.md §8.4 */
#define DEADLINE_MAX_MS 86400000 /* docs/protocol.md §8.4 */
/* One stream blocks this long per read (Ctrl-C is looked at in between); several
 * are polled without blocking, with this pause when none had a token. */
#define SLICE_MS   100u
#define IDLE_PAUSE 200000L /* ns */

struct submit {
	struct chipd_request req;
	struct chipd_param params[CHIPD_MAX_PARAMS];
	uint32_t count, wait_ms;
	bool follow;
	const char *input_path, *output_path; /* --input, --output; NULL: none */
	uint8_t *input, *out;		      /* read from input_path; output_cap bytes */
	int out_fd;			      /* output_path's; -1: none */
};

/* One submitted request and how its stream went. */
struct flow {
	chipd_stream *s;
	uint64_t id, t0_ns, last_ns, tokens;
	int status;	  /* exit status once ended; -1 while open */
	uint32_t out_len; /* the output's bytes (in the submit's out), once completed */
};

static const char submit_usage[] =
    "Usage: chipctl submit [options] WORKLOAD [KEY=VALUE ...]\n"
    "Submits a request for WORKLOAD with integer parameters KEY=VALUE (at most 16).\n"
    "Prints the request id(s), then reads the stream(s) to the end: a stream lives\n"
    "as long as its reader, so submit returns when the request has ended.\n"
    "  --id N            request id, 1..2^63-1 or @N for 2^62+N (default: the\n"
    "                    supervisor picks one); ids above 2^62, the supervisor's and\n"
    "                    any other, print as @N\n"
    "  --chip N          run on chip N, 0..63 (default: any)\n"
    "  --max-tokens N    at most N tokens, 1..1048576 (default: the workload's)\n"
    "  --deadline-ms N   the request fails with \"timeout\" (exit 1) after N ms,\n"
    "                    1..86400000\n"
    "  --count N         submit N requests at once (ids N, N+1, ... with --id), 1..256\n"
    "  --follow          print each token (ID SEQ VALUE) and each request's end, and\n"
    "                    no id lines\n"
    "  --wait-ms N       give up (exit 75) when a stream is silent N ms, 1..86400000\n"
    "                    (default 60000)\n"
    "  --input FILE      the request's input: FILE's bytes (- for standard input),\n"
    "                    1..1048576; a token's payload prints as hex after its value\n"
    "  --output-cap N    take an output of at most N bytes, 1..1048576; it prints as\n"
    "                    hex in --follow's end line, unless --output is given\n"
    "  --output FILE     write the output to FILE (needs --output-cap; one request;\n"
    "                    not -: /dev/stdout mixes it with chipctl's lines)\n"
    "  --json            ids as {\"v\":1,\"ok\":true,\"ids\":[...]} (a --count refused part\n"
    "                    way: the failure document's \"ids\", those submitted); with\n"
    "                    --follow one JSON line per token, then one per request's end\n" CTL_HELP_COMMON;

enum {
	OPT_ID = 1,
	OPT_CHIP,
	OPT_MAX_TOKENS,
	OPT_DEADLINE,
	OPT_COUNT,
	OPT_FOLLOW,
	OPT_WAIT,
	OPT_INPUT,
	OPT_OUTPUT_CAP,
	OPT_OUTPUT,
};

static int submit_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	static const struct {
		const char *name;
		int64_t min, max;
	} range[] = {
		    [OPT_CHIP] = {"--chip", 0, CHIPD_MAX_CHIPS - 1},
	    [OPT_MAX_TOKENS] = {"--max-tokens", 1, MAX_TOKENS_MAX},
	    [OPT_DEADLINE] = {"--deadline-ms", 1, DEADLINE_MAX_MS},
	    [OPT_COUNT] = {"--count", 1, COUNT_MAX},
	    [OPT_WAIT] = {"--wait-ms", 1, DEADLINE_MAX_MS},
	    [OPT_OUTPUT_CAP] = {"--output-cap", 1, CHIPD_OUTPUT_MAX},
	};
	struct submit *sb = ctx;
	int64_t v = 0;

	if (opt == OPT_FOLLOW) {
		sb->follow = true;
		return 0;
	}
	if (opt == OPT_INPUT || opt == OPT_OUTPUT) {
		*(opt == OPT_INPUT ? &sb->input_path : &sb->output_path) = arg;
		return 0;
	}
	if (opt == OPT_ID) {
		if (ctl_parse_id(arg, &sb->req.id))
			return ctl_usage(g, "--id: '%s' is not a request id (1..2^63-1, or @N)",
					 arg);
		return 0;
	}
	if (ctl_parse_i64(arg, range[opt].min, range[opt].max, &v))
		return ctl_usage(g, "%s: '%s' is not %lld..%lld", range[opt].name, arg,
				 (long long)range[opt].min, (long long)range[opt].max);
	if (opt == OPT_CHIP)
		sb->req.chip = (int32_t)v;
	else if (opt == OPT_MAX_TOKENS)
		sb->req.max_tokens = (uint32_t)v;
	else if (opt == OPT_DEADLINE)
		sb->req.deadline_ms = (uint32_t)v;
	else if (opt == OPT_COUNT)
		sb->count = (uint32_t)v;
	else if (opt == OPT_OUTPUT_CAP)
		sb->req.output_cap = (uint32_t)v;
	else
		sb->wait_ms = (uint32_t)v;
	return 0;
}

/* Splits the KEY=VALUE operands into @sb's parameters. The keys point into @argv. */
static int parse_params(struct ctl *g, struct submit *sb, int argc, char **argv)
{
	if (argc > CHIPD_MAX_PARAMS)
		return ctl_usage(g, "at most %d parameters", CHIPD_MAX_PARAMS);
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (!eq || eq == argv[i] ||
		    ctl_parse_i64(eq + 1, INT64_MIN, INT64_MAX, &sb->params[i].value))
			return ctl_usage(g, "'%s' is not KEY=INTEGER", argv[i]);
		*eq = '\0';
		for (int j = 0; j < i; j++)
			if (strcmp(sb->params[j].key, argv[i]) == 0)
				return ctl_usage(g, "parameter '%s' given twice", argv[i]);
		sb->params[i].key = argv[i];
	}
	sb->req.params = sb->params;
	sb->req.nparams = (uint32_t)argc;
	return 0;
}

/* The one-line report of @f's failure on stderr. */
static void report_end(const struct flow *f, const struct chipd_error *err)
{
	char id[CTL_ID_CHARS], text[2 * CHIPD_MSG_MAX];

	fprintf(stderr, "chipctl submit: request %s: %s [%s%s]\n", ctl_id_str(f->id, id),
		ctl_ids_in_text(err->message, text, sizeof(text)), err->code != CHIPD_OK ? chipd_code_name(err->code) : "local",
		err->retryable ? ", retryable" : "");
}

/* Prints how @f ended (--follow): @rc 0 (completed) or the failure in @err; a
 * completed request's output (--output-cap) as hex, or where it went (--output). */
static void print_end(const struct ctl *g, const struct submit *sb, const struct flow *f, int rc,
		      const struct chipd_error *err)
{
	double ms = (double)(ctl_now_ns() - f->t0_ns) / 1e6;
	char id[CTL_ID_CHARS];
	/* @err is filled only when the stream failed */
	const char *code = rc == 0		   ? "completed"
			   : err->code != CHIPD_OK ? chipd_code_name(err->code)
						   : "local";

	if (rc)
		report_end(f, err);
	if (!g->json) {
		printf("request %s: %s, %llu tokens, %.3f ms", ctl_id_str(f->id, id),
		       rc == 0 ? "completed" : code, (unsigned long long)f->tokens, ms);
		if (rc == 0 && sb->req.output_cap) {
			printf(", output %u bytes", (unsigned)f->out_len);
			if (sb->output_path) {
				printf(" to %s", sb->output_path);
			} else if (f->out_len) {
				putchar(' ');
				ctl_hex(stdout, sb->out, f->out_len);
			}
		}
		putchar('\n');
		return;
	}
	printf("{\"v\":%d,\"id\":%llu,\"end\":\"%s\",\"tokens\":%llu,\"elapsed_ms\":%.3f",
	       CTL_JSON_VERSION, (unsigned long long)f->id, rc == 0 ? "completed" : "failed",
	       (unsigned long long)f->tokens, ms);
	if (rc) {
		/* the error object of a command's failure document, keys and all */
		printf(",\"exit\":%d,\"error\":", f->status);
		ctl_json_error(stdout, rc, err);
	} else if (sb->req.output_cap) {
		printf(",\"output_len\":%u", (unsigned)f->out_len);
		if (!sb->output_path) {
			fputs(",\"output\":\"", stdout);
			ctl_hex(stdout, sb->out, f->out_len);
			putchar('"');
		}
	}
	fputs("}\n", stdout);
}

static void print_token(const struct ctl *g, const struct chipd_token *t)
{
	char id[CTL_ID_CHARS];

	if (g->json) {
		printf("{\"v\":%d,\"id\":%llu,\"seq\":%u,\"value\":%llu", CTL_JSON_VERSION,
		       (unsigned long long)t->request, (unsigned)t->seq,
		       (unsigned long long)t->value);
		if (t->payload_len) {
			fputs(",\"payload\":\"", stdout);
			ctl_hex(stdout, t->payload, t->payload_len);
			putchar('"');
		}
		printf(",\"ts_ns\":%llu%s}\n", (unsigned long long)t->ts_ns,
		       t->final ? ",\"final\":true" : "");
		return;
	}
	printf("%s %u %llu", ctl_id_str(t->request, id), (unsigned)t->seq,
	       (unsigned long long)t->value);
	if (t->payload_len) {
		putchar(' ');
		ctl_hex(stdout, t->payload, t->payload_len);
	}
	putchar('\n');
}

/* Takes the output of @f's completed request (--output-cap) into sb->out, and writes
 * it to --output FILE. Returns 0, or a negative errno with @err filled. */
static int take_output(const struct submit *sb, struct flow *f, struct chipd_error *err)
{
	int rc = chipd_stream_output(f->s, sb->out, sb->req.output_cap, &f->out_len, err);

	if (rc || !sb->output_path)
		return rc;
	rc = ctl_output_write(sb->out_fd, sb->out, f->out_len);
	if (rc == 0)
		return 0;
	memset(err, 0, sizeof(*err));
	snprintf(err->message, sizeof(err->message), "--output %s: %s", sb->output_path,
		 strerror(-rc));
	err->errnum = -EIO; /* exit 1, whatever the errno (ENOENT would read as 69) */
	return -EIO;
}

/* Reads at most one token of @f, waiting up to @slice_ms. Returns true when it made
 * progress (a token or the end). */
static bool step(const struct ctl *g, const struct submit *sb, struct flow *f, uint32_t slice_ms)
{
	struct chipd_token tok;
	struct chipd_error err;
	int rc = chipd_stream_next(f->s, &tok, slice_ms, &err);
	uint64_t now = ctl_now_ns();

	if (rc == -ETIMEDOUT) {
		if (now - f->last_ns < (uint64_t)sb->wait_ms * 1000000u)
			return false;
		snprintf(err.message, sizeof(err.message), "no token for %u ms (--wait-ms)",
			 (unsigned)sb->wait_ms);
	}
	f->last_ns = now;
	if (rc == 0) {
		f->tokens++;
		if (sb->follow) {
			print_token(g, &tok);
			fflush(stdout); /* tokens as they stream, also into a pipe */
		}
		if (!tok.final)
			return true;
		if (sb->req.output_cap)
			rc = take_output(sb, f, &err);
	}
	if (rc == -ENODATA) /* ended before: cannot happen after a final, but be exact */
		rc = 0;
	/* A failure found on this side (--wait-ms, --output) is this request's too: its
	 * error object names it, as the node's errors do (chipctl(1)). */
	if (rc && !err.has_request) {
		err.has_request = true;
		err.request = f->id;
	}
	f->status = ctl_exit_for(rc, false);
	if (sb->follow)
		print_end(g, sb, f, rc, &err);
	else if (rc)
		report_end(f, &err);
	fflush(stdout);
	return true;
}

/* Reads every stream to its end (or Ctrl-C). Returns the worst exit status. */
static int follow_all(const struct ctl *g, const struct submit *sb, struct flow *fl, uint32_t n)
{
	uint32_t open = n;
	int worst = CTL_EXIT_OK;

	while (open && !ctl_interrupted) {
		bool progress = false;

		for (uint32_t i = 0; i < n; i++) {
			if (fl[i].status >= 0)
				continue;
			progress |= step(g, sb, &fl[i], n == 1 ? SLICE_MS : 0);
			if (fl[i].status >= 0) {
				open--;
				worst = fl[i].status > worst ? fl[i].status : worst;
			}
		}
		if (!progress && n > 1) {
			struct timespec ts = {0, IDLE_PAUSE};

			nanosleep(&ts, NULL);
		}
	}
	return worst;
}

/* The ids submitted so far, as a submit --json document's "ids" key. */
struct submitted {
	const struct flow *fl;
	uint32_t n;
};

static void json_ids(FILE *f, const void *arg)
{
	const struct submitted *sd = arg;

	fputs(",\"ids\":[", f);
	for (uint32_t i = 0; i < sd->n; i++)
		fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)sd->fl[i].id);
	fputc(']', f);
}

/* Submits @sb->count requests into @fl. Returns 0, or the exit status after
 * reporting the failure (the ones submitted stay in @fl, counted in *@n; with --json
 * and without --follow their ids, when there are any, are the failure document's
 * "ids", so that a script can cancel them). */
static int submit_all(const struct ctl *g, chipd_conn *c, struct submit *sb, struct flow *fl,
		      uint32_t *n)
{
	struct chipd_request req = sb->req;
	struct chipd_error err;

	for (*n = 0; *n < sb->count; (*n)++) {
		struct flow *f = &fl[*n];
		int rc;

		if (sb->req.id)
			req.id = sb->req.id + *n;
		f->t0_ns = f->last_ns = ctl_now_ns();
		f->status = -1;
		rc = chipd_submit(c, &req, g->timeout_ms, &f->id, &f->s, &err);
		if (rc) {
			struct submitted sd = {fl, *n};

			return ctl_report_more(g, "submit", rc, &err, false,
					       sb->follow || !*n ? NULL : json_ids, &sd);
		}
		if (!g->json && !sb->follow) {
			char id[CTL_ID_CHARS];

			printf("%s\n", ctl_id_str(f->id, id));
			fflush(stdout); /* a script may cancel it while we read */
		}
	}
	if (g->json && !sb->follow) {
		struct submitted sd = {fl, *n};

		printf("{\"v\":%d,\"ok\":true", CTL_JSON_VERSION);
		json_ids(stdout, &sd);
		fputs("}\n", stdout);
		fflush(stdout);
	}
	return 0;
}

/* The rules between the data options: an output goes somewhere (the end line of
 * --follow, or --output's FILE), and FILE takes one request's. */
static int check_data(const struct ctl *g, const struct submit *sb)
{
	if (sb->output_path && !sb->req.output_cap)
		return ctl_usage(g, "--output needs --output-cap N (the most bytes to take)");
	if (sb->req.output_cap && !sb->output_path && !sb->follow)
		return ctl_usage(g, "--output-cap: the output prints with --follow, or goes to "
				    "--output FILE: give one");
	if (sb->output_path && sb->count > 1)
		return ctl_usage(g, "--output takes one request's output, not --count %u",
				 (unsigned)sb->count);
	return 0;
}

int ctl_cmd_submit(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {
	    {"id", required_argument, NULL, OPT_ID},
	    {"chip", required_argument, NULL, OPT_CHIP},
	    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
	    {"deadline-ms", required_argument, NULL, OPT_DEADLINE},
	    {"count", required_argument, NULL, OPT_COUNT},
	    {"follow", no_argument, NULL, OPT_FOLLOW},
	    {"wait-ms", required_argument, NULL, OPT_WAIT},
	    {"input", required_argument, NULL, OPT_INPUT},
	    {"output-cap", required_argument, NULL, OPT_OUTPUT_CAP},
	    {"output", required_argument, NULL, OPT_OUTPUT},
	    {NULL, 0, NULL, 0},
	};
	struct submit sb = {.req.chip = -1, .count = 1, .wait_ms = WAIT_MS_DEFAULT, .out_fd = -1};
	const struct ctl_args a = {.usage = submit_usage,
				   .own = own,
				   .opt = submit_opt,
				   .ctx = &sb,
				   .json = true,
				   .min_pos = 1,
				   .max_pos = 1 + CHIPD_MAX_PARAMS};
	struct flow *fl;
	chipd_conn *c;
	uint32_t n = 0;
	int rc = ctl_args(g, argc, argv, &a), worst;

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	sb.req.workload = argv[optind];
	rc = parse_params(g, &sb, argc - optind - 1, argv + optind + 1);
	if (rc)
		return rc;
	/* the last id, id + count - 1, is at most 2^63-1 */
	if (sb.req.id && sb.req.id - 1 > (uint64_t)INT64_MAX - sb.count)
		return ctl_usage(g, "--id + --count - 1 passes 2^63-1");
	rc = check_data(g, &sb);
	if (rc)
		return rc;
	fl = calloc(sb.count, sizeof(*fl));
	if (!fl)
		return CTL_EXIT_FAILED;
	if (sb.input_path) {
		rc = ctl_input_read(g, sb.input_path, &sb.input, &sb.req.input_len);
		if (rc)
			goto out_free;
		sb.req.input = sb.input;
	}
	if (sb.req.output_cap && !(sb.out = malloc(sb.req.output_cap))) {
		rc = CTL_EXIT_FAILED;
		goto out_free;
	}
	if (sb.output_path) {
		rc = ctl_output_open(g, sb.output_path, &sb.out_fd);
		if (rc)
			goto out_free;
	}
	rc = ctl_connect(g, &c);
	if (rc)
		goto out_free;
	ctl_catch_signals();
	rc = submit_all(g, c, &sb, fl, &n);
	worst = follow_all(g, &sb, fl, n);
	rc = rc ? rc : worst;
	for (uint32_t i = 0; i < n; i++)
		chipd_stream_close(fl[i].s, g->timeout_ms); /* cancels what has not ended */
	chipd_close(c);
	if (ctl_interrupted)
		fprintf(stderr, "chipctl submit: interrupted; open requests were cancelled\n");
out_free:
	if (sb.out_fd >= 0)
		close(sb.out_fd);
	free(sb.out);
	free(sb.input);
	free(fl);
	if (ctl_interrupted) /* set only once the signals were caught, after connecting */
		ctl_die_of_signal();
	return rc;
}
