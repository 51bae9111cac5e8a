/* check_ctl.c - chipctl: the pure formatters (Prometheus text, the stats table and
 * JSON, a top frame, the trace summary), libchipd's chipd_trace on the wire, and the
 * chipctl binary itself: exit statuses for usage errors, a missing instance and
 * --help, and its commands against the client fixture's server (no chipd needed). */
#include "client_fixture.h"
#include "ctl.h"
#include "proto.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define T_MS	 2000u
#define RUN_MS	 20000u
#define OUT_CAP	 65536
#define SLICE_NS (5ull * 1000 * 1000)

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

/* Runs @fn's formatter into a string (free() it). */
static char *format(void (*fn)(FILE *, const void *), const void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	fn(f, arg);
	ck_assert_int_eq(fclose(f), 0);
	return buf;
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

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

/* ---- trace summary ---- */

/* Chip 0: O builds epochs 1, 2 at [0,10) and [10,20) us; S runs epoch 1 at [12,22),
 * publishes it ending at 25, and epoch 2 ending at 40. Overlap 8 us of 10 us of S. */
static const char trace_json[] =
    "{\"traceEvents\":[\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"chip 0 O "
    "orchestrator\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":2,\"args\":{\"name\":\"chip 0 S "
    "scheduler\"}},\n"
    "{\"name\":\"O build\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0.000,\"dur\":10.000,"
    "\"args\":{\"arg\":1}},\n"
    "{\"name\":\"O build\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":10,\"dur\":10,"
    "\"args\":{\"arg\":2}},\n"
    "{\"name\":\"S "
    "run\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":12,\"dur\":10,\"args\":{\"arg\":1}},\n"
    "{\"name\":\"token publish\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":22,\"dur\":3,"
    "\"args\":{\"arg\":1}},\n"
    "{\"name\":\"token publish\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":30,\"dur\":10,"
    "\"args\":{\"arg\":2}},\n"
    "{\"name\":\"S run\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0,\"dur\":99},\n"
    "{\"name\":\"other\",\"ph\":\"i\",\"pid\":0,\"tid\":0,\"ts\":1,\"s\":\"g\",\"args\":{}}\n"
    "],\"displayTimeUnit\":\"ns\"}\n";

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

/* ---- chipd_trace on the wire: a server of the trace op only ---- */

struct tsrv {
	struct cx x;
	pthread_t thread;
	_Atomic int stop;
	int n;
	int64_t acts[8];
	char paths[8][PROTO_PATH_MAX];
};

static int trace_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		     struct proto_error *err)
{
	struct tsrv *t = ctx;
	FILE *f;

	(void)err;
	if (t->n < 8) {
		t->acts[t->n] = req->act;
		snprintf(t->paths[t->n], sizeof(t->paths[0]), "%s", req->path);
		t->n++;
	}
	if (req->act == PROTO_TRACE_COLLECT) {
		f = fopen(req->path, "w");
		if (!f)
			return proto_fail(err, CHIPD_E_INTERNAL, "cannot write %s", req->path);
		fputs(trace_json, f);
		fclose(f);
		ans->events = 7;
		ans->dropped = 2;
	}
	return CHIPD_OK;
}

static const struct proto_handler trace_handlers[] = {{PROTO_OP_TRACE, NULL, trace_run}};
static const struct proto_server trace_server = {"trace server", trace_handlers, 1};

static void *trace_serve(void *arg)
{
	struct tsrv *t = arg;
	struct mbox *mb = &t->x.node.mbox;
	struct mbox_event ev;
	size_t len;

	ck_assert_int_ge(mbox_server_attach(mb), 0);
	while (!atomic_load(&t->stop)) {
		if (mbox_server_next(mb, &ev, shm_deadline_in(SLICE_NS)))
			continue;
		if (ev.kind == MBOX_EV_RESET) {
			mbox_ack_reset(mb, ev.t);
			continue;
		}
		if (proto_dispatch(&trace_server, t, ev.req, ev.len, mbox_resp_buf(mb, ev.t),
				   mbox_resp_cap(mb), &len) == 0)
			mbox_answer(mb, ev.t, (uint32_t)len);
	}
	mbox_server_detach(mb);
	return NULL;
}

static void tsrv_start(struct tsrv *t)
{
	memset(t, 0, sizeof(*t));
	cx_region(&t->x);
	ck_assert_int_eq(pthread_create(&t->thread, NULL, trace_serve, t), 0);
}

static void tsrv_stop(struct tsrv *t)
{
	atomic_store(&t->stop, 1);
	pthread_join(t->thread, NULL);
	cx_region_remove(&t->x);
}

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

/* ---- the chipctl binary ---- */

struct run {
	int status;
	char out[OUT_CAP], err[OUT_CAP];
};

static void slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, cap - 1) : 0;

	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(path);
}

static void out_paths(char *out, char *err, size_t cap)
{
	snprintf(out, cap, "/tmp/check_ctl.%d.out", (int)getpid());
	snprintf(err, cap, "/tmp/check_ctl.%d.err", (int)getpid());
}

/* Starts chipctl with the NULL-ended @args, its stdout and stderr into files. */
static pid_t start(const char *const *args)
{
	char *argv[40], out[64], err[64];
	int n = 0;
	pid_t pid;

	argv[n++] = (char *)CHIPCTL_BIN;
	for (; *args && n < 39; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	out_paths(out, err, sizeof(out));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fi = open("/dev/null", O_RDONLY);

		if (fo < 0 || fe < 0 || fi < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 ||
		    dup2(fi, 0) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Waits for chipctl @pid; its exit status and output land in @r. */
static void finish(struct run *r, pid_t pid)
{
	char out[64], err[64];

	r->status = tu_wait(pid, RUN_MS);
	out_paths(out, err, sizeof(out));
	slurp(out, r->out, sizeof(r->out));
	slurp(err, r->err, sizeof(r->err));
}

static void run(struct run *r, const char *const *args)
{
	finish(r, start(args));
}

#define RUN(r, ...) run(r, (const char *const[]){__VA_ARGS__, NULL})
#define EXPECT(r, want)                                                                            \
	ck_assert_msg((r)->status == (want), "exit %d, want %d\nstdout: %s\nstderr: %s",           \
		      (r)->status, (want), (r)->out, (r)->err)

static const char *const commands[] = {"ping", "status", "submit", "cancel", "stats",
				       "top",  "drain",	 "stop",   "trace",  "export"};

START_TEST(cli_help_exits_0)
{
	struct run *r = malloc(sizeof(*r));
	char want[64];

	RUN(r, "--help");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "Exit status:") && strstr(r->out, "69  no such instance"),
		      "%s", r->out);
	RUN(r, "--version");
	EXPECT(r, 0);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		RUN(r, commands[i], "--help");
		EXPECT(r, 0);
		snprintf(want, sizeof(want), "Usage: chipctl %s", commands[i]);
		ck_assert_msg(strncmp(r->out, want, strlen(want)) == 0, "%s", r->out);
		ck_assert_msg(strstr(r->out, "Exit status"), "%s", r->out);
	}
	free(r);
}
END_TEST

START_TEST(cli_usage_errors_exit_64)
{
	static const char *const cases[][7] = {
	    {NULL},
	    {"frob", NULL},
	    {"--bogus", "ping", NULL},
	    {"--timeout-ms", "0", "ping", NULL},
	    {"ping", "extra", NULL},
	    {"ping", "--bogus", NULL},
	    {"submit", NULL},
	    {"submit", "gemm", "n", NULL},
	    {"submit", "gemm", "n=x", NULL},
	    {"submit", "--count", "0", "gemm", NULL},
	    {"submit", "--chip", "64", "gemm", NULL},
	    {"submit", "--max-tokens", NULL},
	    {"cancel", NULL},
	    {"cancel", "0", NULL},
	    {"cancel", "12x", NULL},
	    {"stats", "--prom", "--json", NULL},
	    {"drain", "--grace-ms", "-1", NULL},
	    {"top", "--interval", "0", NULL},
	    {"trace", NULL},
	    {"trace", "--out", "x", "--seconds", "abc", NULL},
	    {"export", NULL},
	    {"--instance", "bad name!", "ping", NULL},
	};
	struct run *r = malloc(sizeof(*r));

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run(r, cases[i]);
		ck_assert_msg(r->status == 64, "case %zu (%s %s): exit %d\n%s", i,
			      cases[i][0] ? cases[i][0] : "",
			      cases[i][0] && cases[i][1] ? cases[i][1] : "", r->status, r->err);
		ck_assert_msg(r->err[0] != '\0', "case %zu: no message", i);
		ck_assert_str_eq(r->out, "");
	}
	free(r);
}
END_TEST

START_TEST(cli_no_instance_exits_69)
{
	struct run *r = malloc(sizeof(*r));

	RUN(r, "--instance", "nosuch", "ping");
	EXPECT(r, 69);
	ck_assert_msg(strstr(r->err, "nosuch"), "%s", r->err);
	RUN(r, "status", "--json", "--instance", "nosuch");
	EXPECT(r, 69);
	ck_assert_msg(strstr(r->out, "{\"v\":1,\"ok\":false,\"exit\":69,") == r->out, "%s", r->out);
	setenv("CHIPD_INSTANCE", "nosuch-env", 1);
	RUN(r, "stats");
	EXPECT(r, 69);
	ck_assert_msg(strstr(r->err, "nosuch-env"), "%s", r->err);
	unsetenv("CHIPD_INSTANCE");
	free(r);
}
END_TEST

START_TEST(cli_calls_against_server)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;
	char pid[32];

	cx_start(&x, 4);
	snprintf(pid, sizeof(pid), "pid %d ", (int)getpid());
	RUN(r, "--instance", x.instance, "ping");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, pid), "%s", r->out);
	RUN(r, "status", "--instance", x.instance, "--json");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "{\"v\":1,\"ok\":true,") == r->out &&
			  strstr(r->out, "\"chip\":1,") && strstr(r->out, "\"tokens\":0"),
		      "%s", r->out);
	RUN(r, "--instance", x.instance, "cancel", "424242");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->err, "not_found"), "%s", r->err);
	RUN(r, "--instance", x.instance, "stats", "--prom");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "chipd_worker_tokens_total{chip=\"1\"} 0\n"), "%s", r->out);
	RUN(r, "--instance", x.instance, "top", "--iterations", "2", "--interval", "0.05");
	EXPECT(r, 0);
	ck_assert_int_eq(count_of(r->out, "tokens/s"), 2);
	RUN(r, "--instance", x.instance, "drain");
	EXPECT(r, 1); /* the fixture does not serve drain: bad_request */
	cx_stop(&x);
	free(r);
}
END_TEST

START_TEST(cli_submit_follows_tokens)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;

	cx_start(&x, 4);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=3", "--id", "7", "--follow");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "7 0 100\n7 1 101\n7 2 102\nrequest 7: completed, 3 tokens"),
		      "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=2", "--id", "20", "--count", "3",
	    "--follow", "--json");
	EXPECT(r, 0);
	ck_assert_int_eq(count_of(r->out, "\"end\":\"completed\",\"tokens\":2"), 3);
	ck_assert_int_eq(count_of(r->out, "\"seq\":1,\"value\":101"), 3);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=2");
	EXPECT(r, 0);
	ck_assert_str_eq(r->out, "1\n"); /* the fixture's first chosen id */
	RUN(r, "--instance", x.instance, "submit", "fail", "--follow", "--json");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->out, "\"end\":\"failed\"") &&
			  strstr(r->out, "\"code\":\"device_error\""),
		      "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "refuse");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->err, "no_capacity, retryable"), "%s", r->err);
	RUN(r, "--instance", x.instance, "submit", "Bad-Name");
	EXPECT(r, 64); /* refused by libchipd before sending */
	cx_stop(&x);
	free(r);
}
END_TEST

static bool has_two_tokens(void *arg)
{
	char out[64], err[64], buf[256] = "";
	int fd;

	(void)arg;
	out_paths(out, err, sizeof(out));
	fd = open(out, O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);

		buf[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	return strstr(buf, "9 1 101\n") != NULL;
}

/* Ctrl-C while following a stream that does not end: the request is cancelled (the
 * fixture ends its stream), then chipctl dies of SIGINT as the shell expects. */
START_TEST(cli_submit_ctrl_c_cancels)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;
	pid_t pid;

	cx_start(&x, 4);
	pid = start((const char *const[]){"--instance", x.instance, "submit", "hold", "--id", "9",
					  "--follow", NULL});
	ck_assert(tu_eventually(has_two_tokens, NULL, RUN_MS));
	kill(pid, SIGINT);
	finish(r, pid);
	EXPECT(r, 128 + SIGINT);
	ck_assert_msg(strstr(r->err, "interrupted"), "%s", r->err);
	cx_stop(&x); /* joins the server thread: its writes to x.streams are seen after */
	ck_assert(x.streams[0].used && x.streams[0].id == 9 && x.streams[0].ended);
	free(r);
}
END_TEST

START_TEST(cli_trace_writes_and_summarizes)
{
	struct run *r = malloc(sizeof(*r));
	struct tsrv t;

	tsrv_start(&t);
	RUN(r, "--instance", t.x.instance, "trace", "--out", "/tmp/check_ctl.cli.json", "--seconds",
	    "0.05", "--summary");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "7 events (2 dropped)") &&
			  strstr(r->out, "overlap ratio: 0.800") &&
			  strstr(r->out, "p50 0.015 ms, p99 0.020 ms over 2 steps"),
		      "%s", r->out);
	tsrv_stop(&t);
	ck_assert_int_eq(t.n, 3);
	ck_assert_int_eq(t.acts[2], PROTO_TRACE_STOP);
	unlink("/tmp/check_ctl.cli.json");
	free(r);
}
END_TEST

START_TEST(cli_export_writes_textfile)
{
	struct run *r = malloc(sizeof(*r));
	char dir[] = "/tmp/check_ctl.XXXXXX", path[64], buf[OUT_CAP];
	struct cx x;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/chipd.prom", dir);
	cx_start(&x, 4);
	RUN(r, "--instance", x.instance, "export", "--textfile", dir, "--once");
	EXPECT(r, 0);
	slurp(path, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "chipd_up 1\n") && strstr(buf, "chipd_worker_tokens_total"), "%s",
		      buf);
	cx_stop(&x);
	RUN(r, "--instance", "nosuch", "export", "--textfile", dir, "--once");
	EXPECT(r, 69);
	slurp(path, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "chipd_up 0\n") && !strstr(buf, "chipd_worker"), "%s", buf);
	snprintf(path, sizeof(path), "%s/chipd.prom.tmp", dir);
	ck_assert_int_ne(access(path, F_OK), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	RUN(r, "export", "--textfile", "/nonexistent/dir", "--once", "--instance", "nosuch");
	EXPECT(r, 1);
	free(r);
}
END_TEST

static Suite *ctl_suite(void)
{
	const struct tu_case cases[] = {
	    {"prom_names_labels_and_units", prom_names_labels_and_units},
	    {"prom_help_type_once_samples_together", prom_help_type_once_samples_together},
	    {"prom_down_has_only_up_zero", prom_down_has_only_up_zero},
	    {"stats_table_has_every_counter", stats_table_has_every_counter},
	    {"stats_json_is_one_versioned_document", stats_json_is_one_versioned_document},
	    {"top_frame_shows_rates", top_frame_shows_rates},
	    {"trace_summary_overlap_and_latency", trace_summary_overlap_and_latency},
	    {"trace_summary_refuses_malformed", trace_summary_refuses_malformed},
	    {"chipd_trace_sends_act_and_path", chipd_trace_sends_act_and_path},
	    {"cli_help_exits_0", cli_help_exits_0},
	    {"cli_usage_errors_exit_64", cli_usage_errors_exit_64},
	    {"cli_no_instance_exits_69", cli_no_instance_exits_69},
	    {"cli_calls_against_server", cli_calls_against_server},
	    {"cli_submit_follows_tokens", cli_submit_follows_tokens},
	    {"cli_submit_ctrl_c_cancels", cli_submit_ctrl_c_cancels},
	    {"cli_trace_writes_and_summarizes", cli_trace_writes_and_summarizes},
	    {"cli_export_writes_textfile", cli_export_writes_textfile},
	};
	Suite *s = suite_create("ctl");

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	return s;
}

int main(void)
{
	return tu_run(ctl_suite());
}
