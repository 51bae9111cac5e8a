/* check_ctl.c - chipctl's pure formatters (Prometheus text, the stats table and JSON,
 * a top frame, the trace summary, the workloads table and JSON) and libchipd's
 * chipd_trace on the wire. The tcases that run the chipctl binary are in ctl_cli.c;
 * the samples and the trace/workloads server both use are in ctl_fixture.c. */
#include "ctl_fixture.h"
#include "ctl.h"
#include "proto.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */

/* A node's counters as chipd_stats gives them: the supervisor block, then chip0 and
 * chip1. */
static const struct chipd_stat sample[] = {
    {"supervisor", "requests", false, 10},   {"supervisor", "err_bad_request", false, 3},
    {"supervisor", "err_timeout", false, 1}, {"supervisor", "mbox_resets", false, 0},
    {"supervisor", "queue_depth", true, 2},  {"chip0", "tokens", false, 300},
    {"chip0", "admitted", false, 4},	     {"chip0", "o_busy_ns", false, 1500000000},
    {"chip0", "queue_depth", true, 1},	     {"chip0", "mbox_resets", false, 0},
    {"chip1", "tokens", false, 50},	     {"chip1", "admitted", false, 2},
    {"chip1", "o_busy_ns", false, 7},	     {"chip1", "queue_depth", true, 0},
    {"chip1", "mbox_resets", false, 1},
};
#define NSAMPLE ((uint32_t)(sizeof(sample) / sizeof(sample[0])))

static void prom_up(FILE *f, const void *arg)
{
	ck_assert_int_eq(ctl_prom_write(f, sample, NSAMPLE, arg != NULL), 0);
}

/* ---- Prometheus text ---- */

START_TEST(prom_names_labels_and_units)
{
	char *t = format(prom_up, "up");

	ck_assert_msg(strstr(t, "chipd_up 1\n"), "%s", t);
	ck_assert_msg(strstr(t, "# TYPE chipd_supervisor_requests_total counter\n"
				"chipd_supervisor_requests_total 10\n"),
		      "%s", t);
	/* err_<code>: one metric, the code as a label */
	ck_assert_msg(strstr(t, "# TYPE chipd_supervisor_errors_total counter\n"
				"chipd_supervisor_errors_total{code=\"bad_request\"} 3\n"
				"chipd_supervisor_errors_total{code=\"timeout\"} 1\n"),
		      "%s", t);
	/* gauges keep their name */
	ck_assert_msg(strstr(t, "# TYPE chipd_supervisor_queue_depth gauge\n"
				"chipd_supervisor_queue_depth 2\n"),
		      "%s", t);
	/* worker blocks: a chip label; _ns in seconds */
	ck_assert_msg(strstr(t, "chipd_worker_tokens_total{chip=\"0\"} 300\n"
				"chipd_worker_tokens_total{chip=\"1\"} 50\n"),
		      "%s", t);
	ck_assert_msg(
	    strstr(t, "chipd_worker_orchestrator_busy_seconds_total{chip=\"0\"} 1.500000000\n"
		      "chipd_worker_orchestrator_busy_seconds_total{chip=\"1\"} 0.000000007\n"),
	    "%s", t);
	ck_assert_msg(strstr(t, "chipd_worker_queue_depth{chip=\"1\"} 0\n"), "%s", t);
	ck_assert_ptr_null(strstr(t, "_ns"));
	ck_assert_ptr_null(strstr(t, "queue_depth_total"));
	free(t);
}
END_TEST

/* HELP and TYPE once per metric, its samples right after them, a final newline. */
START_TEST(prom_help_type_once_samples_together)
{
	char *t = format(prom_up, "up");
	char *save = NULL, *copy = strdup(t);
	char metric[128] = "";
	int types = 0;

	ck_assert(t[strlen(t) - 1] == '\n');
	ck_assert_int_eq(count_of(t, "# TYPE chipd_worker_mbox_resets_total "), 1);
	ck_assert_int_eq(count_of(t, "# HELP chipd_worker_mbox_resets_total "), 1);
	ck_assert_int_eq(count_of(t, "# TYPE chipd_supervisor_mbox_resets_total "), 1);
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "# HELP ", 7) == 0)
			continue;
		if (strncmp(line, "# TYPE ", 7) == 0) {
			sscanf(line + 7, "%127s", metric);
			types++;
			continue;
		}
		/* A sample belongs to the metric of the last TYPE line. */
		ck_assert_msg(strncmp(line, metric, strlen(metric)) == 0 &&
				  (line[strlen(metric)] == ' ' || line[strlen(metric)] == '{'),
			      "sample '%s' outside its metric '%s'", line, metric);
	}
	ck_assert_int_eq(types, count_of(t, "# HELP "));
	free(copy);
	free(t);
}
END_TEST

/* A name both blocks use with different meanings gets each block's own HELP. */
START_TEST(prom_help_says_what_each_block_counts)
{
	char *t = format(prom_up, "up");

	ck_assert_msg(strstr(t, "# HELP chipd_supervisor_queue_depth Requests in flight"), "%s", t);
	ck_assert_msg(strstr(t, "# HELP chipd_worker_queue_depth Admitted requests waiting"), "%s",
		      t);
	ck_assert_msg(strstr(t, "# HELP chipd_supervisor_mbox_resets_total Client mailbox"), "%s",
		      t);
	ck_assert_msg(strstr(t, "# HELP chipd_worker_mbox_resets_total Control mailbox"), "%s", t);
	ck_assert_msg(strstr(t,
			     "# HELP chipd_supervisor_errors_total Requests that ended with this "
			     "error code"),
		      "%s", t);
	free(t);
}
END_TEST

START_TEST(prom_down_has_only_up_zero)
{
	char *t = format(prom_up, NULL);

	ck_assert_str_eq(t, "# HELP chipd_up Whether chipctl could read the instance's counters.\n"
			    "# TYPE chipd_up gauge\n"
			    "chipd_up 0\n");
	free(t);
}
END_TEST

/* ---- stats table and JSON, top ---- */

static void table(FILE *f, const void *arg)
{
	(void)arg;
	ctl_stats_table(f, sample, NSAMPLE);
}

START_TEST(stats_table_has_every_counter)
{
	char *t = format(table, NULL);

	ck_assert_msg(strstr(t, "supervisor\n"), "%s", t);
	ck_assert_msg(strstr(t, "  err_bad_request   3\n"), "%s", t);
	ck_assert_msg(strstr(t, "chip0  chip1\n"), "%s", t);
	ck_assert_msg(strstr(t, "  counter           chip0  chip1\n"
				"  tokens              300     50\n"),
		      "%s", t);
	ck_assert_msg(strstr(t, "  o_busy_ns    1500000000      7\n"), "%s", t);
	ck_assert_msg(strstr(t, "  queue_depth           1      0  (gauge)\n"), "%s", t);
	free(t);
}
END_TEST

static void json(FILE *f, const void *arg)
{
	(void)arg;
	ctl_stats_json(f, "inst\"1", sample, 5);
}

START_TEST(stats_json_is_one_versioned_document)
{
	char *t = format(json, NULL);

	ck_assert_str_eq(
	    t, "{\"v\":1,\"ok\":true,\"instance\":\"inst\\\"1\",\"blocks\":{"
	       "\"supervisor\":{\"counters\":{\"requests\":10,\"err_bad_request\":3,"
	       "\"err_timeout\":1,\"mbox_resets\":0},\"gauges\":{\"queue_depth\":2}}}}\n");
	free(t);
}
END_TEST

/* ctl_json_str's output as a C string. */
static char *json_of(const char *in)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	ctl_json_str(f, in);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

/* Every --json document is JSON, which is UTF-8 text (RFC 8259 8.1; chipctl(1),
 * --json), also when a string in it is not: a path, a message naming one. A byte that
 * is not part of a well-formed UTF-8 sequence (a stray byte, a cut sequence, an
 * overlong form, a surrogate) is written as \ufffd, well-formed sequences as they
 * are. Before, the bytes went out raw: `chipctl trace --out $'/tmp/\xff.json' --json`
 * printed a document Python's json.loads refused ("invalid start byte"). */
START_TEST(json_strings_are_valid_utf8)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"/tmp/a\xff.json", "\"/tmp/a\\ufffd.json\""},
	    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	     "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
	    {"cut \xc3", "\"cut \\ufffd\""},
	    {"cut \xe2\x82 x", "\"cut \\ufffd\\ufffd x\""},
	    {"overlong \xc0\xaf", "\"overlong \\ufffd\\ufffd\""},
	    {"surrogate \xed\xa0\x80", "\"surrogate \\ufffd\\ufffd\\ufffd\""},
	    {"past U+10FFFF \xf4\x90\x80\x80", "\"past U+10FFFF \\ufffd\\ufffd\\ufffd\\ufffd\""},
	    {"q\"b\\\x01\x7f", "\"q\\\"b\\\\\\u0001\\u007f\""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *t = json_of(cases[i].in);

		ck_assert_msg(strcmp(t, cases[i].out) == 0, "case %zu: %s, not %s", i, t,
			      cases[i].out);
		free(t);
	}
}
END_TEST

/* ---- workloads: the table and JSON of ctl_fixture.c's wl_sample ---- */

/* ---- callables: wl_sample with versions, on two chips, with counts ---- */

static void cl_table(FILE *f, const void *arg)
{
	ctl_callables_table(f, arg, 2);
}

static void cl_json(FILE *f, const void *arg)
{
	ctl_callables_json(f, "inst", arg, 2);
}

START_TEST(callables_table_and_json)
{
	struct chipd_workload *wl = malloc(2 * sizeof(*wl));
	char *t;

	ck_assert_ptr_nonnull(wl);
	memcpy(wl, wl_sample, 2 * sizeof(*wl));
	wl[0].version = 3;
	wl[1].version = 4000000000u;
	wl[1].nparams = 0;
	wl[0].chips = 0x3;
	wl[0].active = 2;
	wl[1].chips = 0x8000000000000035ull; /* 0, 2, 4-5 and 63 */
	wl[1].active = 0;
	/* 2 in flight: 14 admitted, 12 ended */
	wl[0].requests = 14;
	wl[0].completed = 9;
	wl[0].failed = 1;
	wl[0].cancelled = 2;
	wl[0].tokens = 1234567890123; /* wider than its header: the column widens */
	wl[1].requests = UINT64_MAX;  /* every digit of a u64 */
	wl[1].completed = UINT64_MAX;
	t = format(cl_table, wl);
	ck_assert_str_eq(t, "callable     version  chips         active              requests  "
			    "           completed  failed  cancelled         tokens  parameters\n"
			    "alpha              3  0-1                2                    14  "
			    "                   9       1          2  1234567890123  tokens, neg\n"
			    "beta      4000000000  0,2,4-5,63         0  18446744073709551615  "
			    "18446744073709551615       0          0              0  -\n");
	free(t);
	t = format(cl_json, wl);
	ck_assert_str_eq(t, "{\"v\":1,\"ok\":true,\"instance\":\"inst\",\"callables\":["
			    "{\"name\":\"alpha\",\"version\":3,\"doc\":\"the first\","
			    "\"chips\":[0,1],\"active\":2,\"requests\":14,\"completed\":9,"
			    "\"failed\":1,\"cancelled\":2,\"tokens\":1234567890123,\"params\":["
			    "{\"key\":\"tokens\",\"default\":16,\"min\":1,\"max\":65536},"
			    "{\"key\":\"neg\",\"default\":-1,\"min\":-9223372036854775808,"
			    "\"max\":0}]},"
			    "{\"name\":\"beta\",\"version\":4000000000,\"doc\":\"the second\","
			    "\"chips\":[0,2,4,5,63],\"active\":0,\"requests\":18446744073709551615,"
			    "\"completed\":18446744073709551615,\"failed\":0,\"cancelled\":0,"
			    "\"tokens\":0,\"params\":[]}]}\n");
	free(t);
	free(wl);
}
END_TEST

START_TEST(workloads_table_and_json)
{
	char *t = format(wl_table, NULL);

	/* one set of columns for all workloads, numbers right-aligned */
	ck_assert_str_eq(
	    t, "alpha: the first\n"
	       "  parameter  default                   min                  max  meaning\n"
	       "  tokens          16                     1                65536  steps\n"
	       "  neg             -1  -9223372036854775808                    0  a "
	       "\"quoted\" doc\n"
	       "\n"
	       "beta: the second\n"
	       "  parameter  default                   min                  max  meaning\n"
	       "  seed             1                     0  9223372036854775807  seed\n");
	free(t);
	t = format(wl_json, "inst");
	ck_assert_str_eq(t, "{\"v\":1,\"ok\":true,\"instance\":\"inst\",\"workloads\":["
			    "{\"name\":\"alpha\",\"doc\":\"the first\",\"params\":["
			    "{\"key\":\"tokens\",\"default\":16,\"min\":1,\"max\":65536,"
			    "\"doc\":\"steps\"},"
			    "{\"key\":\"neg\",\"default\":-1,\"min\":-9223372036854775808,"
			    "\"max\":0,\"doc\":\"a \\\"quoted\\\" doc\"}]},"
			    "{\"name\":\"beta\",\"doc\":\"the second\",\"params\":["
			    "{\"key\":\"seed\",\"default\":1,\"min\":0,"
			    "\"max\":9223372036854775807,\"doc\":\"seed\"}]}]}\n");
	free(t);
}
END_TEST

static void frame(FILE *f, const void *arg)
{
	struct chipd_stat later[NSAMPLE];

	(void)arg;
	memcpy(later, sample, sizeof(later));
	later[5].value += 200; /* chip0 tokens: 100/s over 2 s */
	later[6].value += 1;
	ctl_top_frame(f, sample, NSAMPLE, later, NSAMPLE, 2.0);
}

START_TEST(top_frame_shows_rates)
{
	char *t = format(frame, NULL);

	ck_assert_msg(strstr(t, "0            100.0         0.5"), "%s", t);
	ck_assert_msg(strstr(t, "1              0.0         0.0"), "%s", t);
	free(t);
}
END_TEST

/* ---- the summary of ctl_fixture.c's trace_json ---- */

START_TEST(trace_summary_overlap_and_latency)
{
	struct ctl_trace_summary s;
	char why[128];

	ck_assert_int_eq(ctl_trace_summarize(trace_json, strlen(trace_json), &s, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(s.pids, 1);
	ck_assert_uint_eq(s.spans, 5); /* the S run on the O thread does not count */
	ck_assert_uint_eq(s.o_busy_ns, 20000);
	ck_assert_uint_eq(s.s_busy_ns, 10000);
	ck_assert_uint_eq(s.overlap_ns, 8000);
	ck_assert_double_eq_tol(s.overlap_ratio, 0.8, 1e-9);
	ck_assert_uint_eq(s.latencies, 2);
	ck_assert_uint_eq(s.latency_p50_ns, 15000); /* epoch 1: 25 - 10 */
	ck_assert_uint_eq(s.latency_p99_ns, 20000); /* epoch 2: 40 - 20 */
}
END_TEST

START_TEST(trace_summary_refuses_malformed)
{
	static const char *const bad[] = {
	    "",
	    "{",
	    "{\"traceEvents\":[",
	    "{\"traceEvents\":[{\"name\":}]}",
	    "[1,2",
	    "{\"other\":1}",
	    "{\"traceEvents\":[]} x",
	    "{\"traceEvents\":[{\"ts\":\"1\"\0}]}",
	    /* escapes: \u with fewer than 4 hex digits (also cut by the end), or none */
	    "[\"\\u\"]",
	    "{\"traceEvents\":[],\"x\":\"\\u\"}",
	    "[\"\\uzzzz\"]",
	    "[\"\\x\"]",
	};
	struct ctl_trace_summary s;
	char why[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = ctl_trace_summarize(bad[i], strlen(bad[i]), &s, why, sizeof(why));

		ck_assert_msg(rc == -EBADMSG, "'%s': %d", bad[i], rc);
		ck_assert(why[0] != '\0');
	}
	ck_assert_int_eq(ctl_trace_summarize("[]", 2, &s, why, sizeof(why)), 0);
	ck_assert_uint_eq(s.spans, 0);
}
END_TEST

/* ---- chipd_trace on the wire, against ctl_fixture.c's server ---- */

/* Request ids as a person reads and types them: the supervisor's picks (2^62 + N) as
 * "@N", every other id in decimal; both forms parse back to the same id. */
START_TEST(request_ids_read_and_type_back)
{
	static const struct {
		uint64_t id;
		const char *text;
	} cases[] = {
	    {4611686018427387905ull, "@1"}, /* the quick start's first request */
	    {4611686018427387904ull, "4611686018427387904"}, /* 2^62 itself: no @0 */
	    {9223372036854775807ull, "@4611686018427387903"}, /* 2^63-1 */
	    {7, "7"},
	    {1, "1"},
	};
	static const char *const bad[] = {"@0", "@", "@-1", "@4611686018427387904", "0", "-3",
					   "9223372036854775808", "12x", "@1x", "", "@@1"};
	char buf[CTL_ID_CHARS];
	uint64_t id;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_str_eq(ctl_id_str(cases[i].id, buf), cases[i].text);
		ck_assert_int_eq(ctl_parse_id(cases[i].text, &id), 0);
		ck_assert_uint_eq(id, cases[i].id);
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)cases[i].id);
		ck_assert_int_eq(ctl_parse_id(buf, &id), 0); /* the full id of --json */
		ck_assert_uint_eq(id, cases[i].id);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(ctl_parse_id(bad[i], &id) == -EINVAL, "'%s' parsed", bad[i]);
}
END_TEST

/* The supervisor's messages name ids in full; chipctl shows them as they are typed. */
START_TEST(ids_in_messages_read_as_typed)
{
	static const struct {
		const char *msg, *text;
	} cases[] = {
	    {"no live request 4611686018427387909", "no live request @5"},
	    {"request 4611686018427387911 on chip 0: cancelled",
	     "request @7 on chip 0: cancelled"},
	    {"4611686018427387905, 4611686018427387906.", "@1, @2."},
	    {"request 424242 is live", "request 424242 is live"},
	    {"4611686018427387904 and 9223372036854775808 stay", /* 2^62, 2^63: no ids */
	     "4611686018427387904 and 9223372036854775808 stay"},
	    {"x4611686018427387905 4611686018427387905y 04611686018427387905",
	     "x4611686018427387905 4611686018427387905y 04611686018427387905"},
	    {"0x7eadbeef at 12 ms", "0x7eadbeef at 12 ms"},
	    {"", ""},
	};
	char out[2 * CHIPD_MSG_MAX], small[10]; /* "request @1" needs 11 */

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_str_eq(ctl_ids_in_text(cases[i].msg, out, sizeof(out)), cases[i].text);
	/* cut to fit, never half an id */
	ck_assert_str_eq(ctl_ids_in_text("request 4611686018427387905", small, sizeof(small)),
			 "request ");
	ck_assert_str_eq(ctl_ids_in_text("abcdefghijklmnop", small, sizeof(small)), "abcdefghi");
}
END_TEST

START_TEST(chipd_trace_sends_act_and_path)
{
	struct tsrv t;
	struct chipd_error err;
	chipd_conn *c;
	uint64_t events = 99, dropped = 99;

	tsrv_start(&t);
	ck_assert_int_eq(chipd_connect(t.x.instance, &c, &err), 0);
	ck_assert_msg(chipd_trace(c, CHIPD_TRACE_START, NULL, T_MS, &events, &dropped, &err) == 0,
		      "%s", err.message);
	ck_assert_uint_eq(events, 0); /* absent in the answer: 0 */
	ck_assert_int_eq(chipd_trace(c, CHIPD_TRACE_COLLECT, "/tmp/check_ctl.trace.json", T_MS,
				     &events, &dropped, &err),
			 0);
	ck_assert_uint_eq(events, 7);
	ck_assert_uint_eq(dropped, 2);
	ck_assert_int_eq(chipd_trace(c, CHIPD_TRACE_STOP, NULL, T_MS, NULL, NULL, &err), 0);
	/* refused before sending: a bad act, a path where none goes, a relative path */
	ck_assert_int_eq(chipd_trace(c, 0, NULL, T_MS, NULL, NULL, &err), -EINVAL);
	ck_assert_int_eq(err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_int_eq(chipd_trace(c, CHIPD_TRACE_COLLECT, NULL, T_MS, NULL, NULL, &err),
			 -EINVAL);
	ck_assert_int_eq(chipd_trace(c, CHIPD_TRACE_START, "/x", T_MS, NULL, NULL, &err), -EINVAL);
	ck_assert_int_eq(chipd_trace(c, CHIPD_TRACE_COLLECT, "rel", T_MS, NULL, NULL, &err),
			 -EINVAL);
	chipd_close(c);
	tsrv_stop(&t);
	ck_assert_int_eq(t.n, 3);
	ck_assert_int_eq(t.acts[0], PROTO_TRACE_START);
	ck_assert_str_eq(t.paths[0], "");
	ck_assert_int_eq(t.acts[1], PROTO_TRACE_COLLECT);
	ck_assert_str_eq(t.paths[1], "/tmp/check_ctl.trace.json");
	ck_assert_int_eq(t.acts[2], PROTO_TRACE_STOP);
	unlink("/tmp/check_ctl.trace.json");
}
END_TEST

/* chipctl @args with its standard output /dev/full (@closed: closed), its standard
 * error into a file read into @err; returns its exit status. */
static int run_ctl_output_lost(const char *const *args, bool closed, char *err, size_t cap)
{
	char path[64], *argv[8] = {(char *)CHIPCTL_BIN};
	int fd, status, n = 1;
	ssize_t got;
	pid_t pid;

	for (; *args && n < 7; args++)
		argv[n++] = (char *)*args;
	snprintf(path, sizeof(path), "/tmp/check_ctl.%d.lost", (int)getpid());
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fe = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fo = closed ? -1 : open("/dev/full", O_WRONLY);

		if (fe < 0 || dup2(fe, 2) < 0 || (closed ? close(1) : dup2(fo, 1)) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	status = tu_wait(pid, 10000);
	fd = open(path, O_RDONLY);
	got = fd >= 0 ? read(fd, err, cap - 1) : 0;
	err[got > 0 ? got : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(path);
	return status;
}

/* What chipctl prints, lost: standard output /dev/full (a full disk) or closed. The
 * command exits 74 and says so on standard error, not 0 as if it had been read (found
 * by the operations chaos round: `chipctl status > /dev/full` exited 0). */
START_TEST(cli_lost_output_exits_74)
{
	static const char *const cmds[][3] = {{"--version", NULL}, {"--help", NULL},
					      {"ping", "--help", NULL}};
	char err[1024];

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		ck_assert_int_eq(run_ctl_output_lost(cmds[i], false, err, sizeof(err)), 74);
		ck_assert_msg(strstr(err, "standard output: No space left on device"), "%s", err);
		ck_assert_int_eq(run_ctl_output_lost(cmds[i], true, err, sizeof(err)), 74);
		ck_assert_msg(strstr(err, "standard output is closed"), "%s", err);
	}
}
END_TEST

static Suite *ctl_suite(void)
{
	const struct tu_case cases[] = {
	    {"prom_names_labels_and_units", prom_names_labels_and_units},
	    {"prom_help_type_once_samples_together", prom_help_type_once_samples_together},
	    {"prom_help_says_what_each_block_counts", prom_help_says_what_each_block_counts},
	    {"prom_down_has_only_up_zero", prom_down_has_only_up_zero},
	    {"stats_table_has_every_counter", stats_table_has_every_counter},
	    {"stats_json_is_one_versioned_document", stats_json_is_one_versioned_document},
	    {"json_strings_are_valid_utf8", json_strings_are_valid_utf8},
	    {"workloads_table_and_json", workloads_table_and_json},
	    {"callables_table_and_json", callables_table_and_json},
	    {"top_frame_shows_rates", top_frame_shows_rates},
	    {"trace_summary_overlap_and_latency", trace_summary_overlap_and_latency},
	    {"trace_summary_refuses_malformed", trace_summary_refuses_malformed},
	    {"chipd_trace_sends_act_and_path", chipd_trace_sends_act_and_path},
	    {"request_ids_read_and_type_back", request_ids_read_and_type_back},
	    {"ids_in_messages_read_as_typed", ids_in_messages_read_as_typed},
	    {"cli_lost_output_exits_74", cli_lost_output_exits_74},
	};
	Suite *s = suite_create("ctl");

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	ctl_add_cli_tcases(s);
	return s;
}

int main(void)
{
	return tu_run(ctl_suite());
}
