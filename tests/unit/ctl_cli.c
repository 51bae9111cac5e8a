/* ctl_cli.c - the chipctl binary, run as a child with its output in files: exit
 * statuses for --help, usage errors, bad instance names and a missing instance, the
 * --json error document, and its commands against the client fixture's server and
 * the trace/workloads server of ctl_fixture.c (chipd_workloads on the wire too). */
#include "ctl_fixture.h"
#include "testutil.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_MS	20000u
#define OUT_CAP 65536

/* ---- running chipctl ---- */

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

/* Starts chipctl with the NULL-ended @args, its stdout and stderr into files, its
 * stdin @in (-1: /dev/null). */
static pid_t start_in(const char *const *args, int in)
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
		int fi = in >= 0 ? in : open("/dev/null", O_RDONLY);

		if (fo < 0 || fe < 0 || fi < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 ||
		    dup2(fi, 0) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static pid_t start(const char *const *args)
{
	return start_in(args, -1);
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

static const char *const commands[] = {"ping",	"status", "submit", "cancel", "stats",	  "top",
				       "drain", "stop",	  "trace",  "export", "workloads", "callables"};

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
		/* a command that takes --json lists it */
		if (strstr(r->out, "[--json]"))
			ck_assert_msg(strstr(r->out, "\n  --json "), "%s", r->out);
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
	    {"submit", "--output-cap", "4", "--output", "-", "echo", NULL},
	    {"cancel", NULL},
	    {"cancel", "0", NULL},
	    {"cancel", "12x", NULL},
	    {"cancel", "@0", NULL},
	    {"stats", "--prom", "--json", NULL},
	    {"drain", "--grace-ms", "-1", NULL},
	    {"stop", "--grace-ms", "3600001", NULL},
	    {"top", "--interval", "0", NULL},
	    {"trace", NULL},
	    {"trace", "--out", "x", "--seconds", "abc", NULL},
	    {"export", NULL},
	    {"workloads", "gemm", NULL},
	    {"callables", "gemm", NULL},
	    {"--instance", "bad name!", "ping", NULL},
	    /* a callable's name is checked before connecting: 64 without a node too */
	    {"register", "--name", "Bad!", "/x.so", NULL},
	    {"register", "--name", "", "/x.so", NULL},
	    {"register", "/x.so", "/y.so", NULL},
	    {"register", "", NULL},
	    {"unregister", "Bad!", NULL},
	    {"unregister", "abcdefghijklmnopqrstuvwxyz", NULL},
	    {"unregister", "--drain", "--cancel", "x", NULL},
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

/* Every invalid instance name is a usage error (64) said on stderr before anything is
 * done, wherever it comes from; a CHIPD_INSTANCE set to "" counts as unset. (A name of
 * 48 characters used to exit 1, and --instance '' meant "default".) */
START_TEST(cli_bad_instance_is_usage_error)
{
	static const char long_name[] = "a23456789012345678901234567890123456789012345678";
	static const struct {
		const char *args[7];
		const char *says;
	} cases[] = {
	    {{"--instance", "", "ping"}, "bad instance name \"\": empty"},
	    {{"--instance", long_name, "ping"}, "48 characters, at most 47"},
	    {{"--instance", "a/b", "status", "--json"}, "character '/' is not one of"},
	    {{"stats", "--instance", "a b"}, "character ' ' is not one of"},
	    {{"export", "--textfile", "/tmp", "--once", "--instance", ""}, "empty"},
	};
	struct run *r = malloc(sizeof(*r));

	_Static_assert(sizeof(long_name) == CHIPD_INSTANCE_MAX + 1, "48 characters");
	unsetenv("CHIPD_INSTANCE");
	unsetenv("SLURM_JOB_ID");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run(r, cases[i].args);
		ck_assert_msg(r->status == 64, "case %zu: exit %d\n%s", i, r->status, r->err);
		ck_assert_msg(strstr(r->err, "--instance: bad instance name") &&
				  strstr(r->err, cases[i].says),
			      "case %zu: %s", i, r->err);
		ck_assert_str_eq(r->out, ""); /* no JSON document for a usage error */
	}
	setenv("CHIPD_INSTANCE", "x/y", 1);
	RUN(r, "ping");
	EXPECT(r, 64);
	ck_assert_msg(strstr(r->err, "bad instance name \"x/y\" from CHIPD_INSTANCE"), "%s",
		      r->err);
	setenv("CHIPD_INSTANCE", "", 1); /* unset: SLURM_JOB_ID is next */
	setenv("SLURM_JOB_ID", "nosuch-job", 1);
	RUN(r, "ping");
	EXPECT(r, 69);
	ck_assert_msg(strstr(r->err, "\"nosuch-job\""), "%s", r->err);
	unsetenv("CHIPD_INSTANCE");
	unsetenv("SLURM_JOB_ID");
	free(r);
}
END_TEST

/* The error document of --json, as chipctl(1) gives it: "errno" is always there and
 * tells a local failure from the supervisor's answer (121, EREMOTEIO), also when both
 * carry the same code; "request" and "chip" only when the error concerns one. */
START_TEST(cli_json_error_document)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;
	char want[256];

	static const char head[] = "{\"v\":1,\"ok\":false,\"exit\":69,\"error\":{\"code\":null,"
				   "\"errno\":2,\"message\":\"no chipd instance \\\"nosuch\\\"";
	static const char tail[] = "\",\"retryable\":false}}\n";
	size_t len;

	RUN(r, "status", "--json", "--instance", "nosuch");
	EXPECT(r, 69);
	len = strlen(r->out);
	ck_assert_msg(strncmp(r->out, head, strlen(head)) == 0 && len > strlen(tail) &&
			  strcmp(r->out + len - strlen(tail), tail) == 0,
		      "%s", r->out);
	cx_start(&x, 4);
	RUN(r, "--instance", x.instance, "submit", "refuse", "--json");
	EXPECT(r, 1);
	ck_assert_str_eq(r->out, "{\"v\":1,\"ok\":false,\"exit\":1,\"error\":{\"code\":"
				 "\"no_capacity\",\"errno\":121,\"message\":\"KV pool full\","
				 "\"retryable\":true,\"chip\":1}}\n");
	RUN(r, "--instance", x.instance, "submit", "Bad-Name", "--json");
	EXPECT(r, 64); /* refused by libchipd: a usage error prints no document */
	ck_assert_str_eq(r->out, "");
	ck_assert_msg(strstr(r->err, "Bad-Name") || strstr(r->err, "\"wl\""), "%s", r->err);
	atomic_store(&x.mode, CX_SILENT);
	RUN(r, "--instance", x.instance, "--timeout-ms", "50", "ping", "--json");
	EXPECT(r, 75);
	snprintf(want, sizeof(want),
		 "{\"v\":1,\"ok\":false,\"exit\":75,\"error\":{\"code\":\"timeout\","
		 "\"errno\":%d,\"message\":\"ping: no answer within 50 ms\",\"retryable\":true}}\n",
		 ETIMEDOUT);
	ck_assert_str_eq(r->out, want);
	atomic_store(&x.mode, CX_ANSWER);
	cx_stop(&x);
	free(r);
}
END_TEST

/* --timeout-ms bounds the handshake too: a supervisor that takes the connection and
 * never answers the hello (stopped) makes chipctl exit 75 after about --timeout-ms,
 * not after libchipd's default 5 s. */
START_TEST(cli_timeout_bounds_the_handshake)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;
	uint64_t t0;

	cx_start(&x, 4);
	atomic_store(&x.hello.mute, 1);
	t0 = shm_now_ns();
	RUN(r, "--instance", x.instance, "--timeout-ms", "300", "ping");
	EXPECT(r, 75);
	/* 300 ms asked; a bound generous for a loaded machine, well under 5 s */
	ck_assert_uint_lt(shm_now_ns() - t0, 3000ull * SHM_NS_PER_MS);
	ck_assert_msg(strstr(r->err, "no answer to hello within 300 ms [timeout, retryable]"),
		      "%s", r->err);
	atomic_store(&x.hello.mute, 0);
	RUN(r, "--instance", x.instance, "--timeout-ms", "300", "ping");
	EXPECT(r, 0);
	cx_stop(&x);
	free(r);
}
END_TEST

START_TEST(cli_calls_against_server)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;
	char pid[32], want[128];

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
	RUN(r, "--instance", x.instance, "cancel", "@5");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->err, "no live request @5 [not_found]"), "%s", r->err);
	RUN(r, "--instance", x.instance, "stats", "--prom");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "chipd_worker_tokens_total{chip=\"1\"} 0\n"), "%s", r->out);
	RUN(r, "--instance", x.instance, "top", "--iterations", "2", "--interval", "0.05");
	EXPECT(r, 0);
	ck_assert_int_eq(count_of(r->out, "tokens/s"), 2);
	/* the header names the instance watched, also when a variable chose it */
	snprintf(want, sizeof(want), "chipctl top: instance %s, every 1.0 s\n", x.instance);
	setenv("CHIPD_INSTANCE", x.instance, 1);
	RUN(r, "top", "--iterations", "1");
	unsetenv("CHIPD_INSTANCE");
	EXPECT(r, 0);
	ck_assert_msg(strncmp(r->out, want, strlen(want)) == 0, "%s", r->out);
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
	/* no id line: the first line is the first token */
	ck_assert_msg(strstr(r->out, "7 0 100\n7 1 101\n7 2 102\nrequest 7: completed, 3 tokens") ==
			  r->out,
		      "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=2", "--id", "20", "--count", "3",
	    "--follow", "--json");
	EXPECT(r, 0);
	ck_assert_int_eq(count_of(r->out, "\"end\":\"completed\",\"tokens\":2"), 3);
	ck_assert_int_eq(count_of(r->out, "\"seq\":1,\"value\":101"), 3);
	ck_assert_int_eq(count_of(r->out, ",\"final\":true}\n"), 3); /* on each last token */
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=2");
	EXPECT(r, 0);
	ck_assert_str_eq(r->out, "1\n"); /* the fixture's first chosen id */
	/* an id in the supervisor's half is printed, and typed back, as @N */
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=1", "--id", "@3", "--follow");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "@3 0 100\nrequest @3: completed, 1 tokens"), "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=1", "--id", "@4", "--json");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "\"ids\":[4611686018427387908]"), "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=1", "--id", "@0");
	EXPECT(r, 64);
	/* the last id is 2^63-1 (printed @2^62-1), with --count as without it */
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=1", "--id",
	    "9223372036854775807", "--follow");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "request @4611686018427387903: completed"), "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=1", "--id",
	    "9223372036854775806", "--count", "2", "--json");
	EXPECT(r, 0);
	ck_assert_msg(strstr(r->out, "\"ids\":[9223372036854775806,9223372036854775807]"), "%s",
		      r->out);
	RUN(r, "--instance", x.instance, "submit", "synthetic", "n=1", "--id",
	    "9223372036854775806", "--count", "3");
	EXPECT(r, 64);
	ck_assert_msg(strstr(r->err, "passes 2^63-1"), "%s", r->err);
	/* a stream's failure is its end line (no "ok"), whose error object is the one of
	 * a command's failure document: errno always (121, the server's code) */
	RUN(r, "--instance", x.instance, "submit", "fail", "--id", "31", "--follow", "--json");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->out, "{\"v\":1,\"id\":31,\"seq\":0,\"value\":100,\"ts_ns\":") ==
			      r->out &&
			  strstr(r->out, "\n{\"v\":1,\"id\":31,\"end\":\"failed\",\"tokens\":1,"
					 "\"elapsed_ms\":") &&
			  strstr(r->out, ",\"exit\":1,\"error\":{\"code\":\"device_error\","
					 "\"errno\":121,\"message\":\"request 31 on chip ") &&
			  strstr(r->out, ": device_error\",\"retryable\":false,\"request\":31,"
					 "\"chip\":") &&
			  !strstr(r->out, "\"ok\"") && !strstr(r->out, "\"final\""),
		      "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "refuse");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->err, "no_capacity, retryable"), "%s", r->err);
	/* --count refused part way (the fixture's 8 rings held): the failure document
	 * names the ids submitted before, whose streams were read (here: cancelled at
	 * --wait-ms) */
	RUN(r, "--instance", x.instance, "submit", "hold", "--id", "40", "--count", "9", "--wait-ms",
	    "300", "--json");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->out, "{\"v\":1,\"ok\":false,\"exit\":1,\"error\":{\"code\":"
				     "\"queue_full\",") == r->out &&
			  strstr(r->out, "},\"ids\":[40,41,42,43,44,45,46,47]}\n") &&
			  count_of(r->out, "\n") == 1,
		      "%s", r->out);
	RUN(r, "--instance", x.instance, "submit", "Bad-Name");
	EXPECT(r, 64); /* refused by libchipd before sending */
	cx_stop(&x);
	free(r);
}
END_TEST

/* Whether the stdout (@on_err: the stderr) of the chipctl start() runs holds @want so
 * far. */
static bool says_so_far(bool on_err, const char *want)
{
	char out[64], err[64], buf[4096] = "";
	int fd;

	out_paths(out, err, sizeof(out));
	fd = open(on_err ? err : out, O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);

		buf[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	return strstr(buf, want) != NULL;
}

static bool has_two_tokens(void *arg)
{
	(void)arg;
	return says_so_far(false, "9 1 101\n");
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

/* chipd_workloads groups the answer's flat rows under their workloads, says how many
 * there are when the array is short; chipctl prints them as its formatters do. */
START_TEST(cli_workloads_against_server)
{
	struct run *r = malloc(sizeof(*r));
	struct chipd_workload got[CHIPD_MAX_WORKLOADS];
	struct chipd_error err;
	chipd_conn *c;
	uint32_t n = 0;
	struct tsrv t;
	char *want;

	tsrv_start(&t);
	ck_assert_int_eq(chipd_connect(t.x.instance, &c, &err), 0);
	memset(got, 0xff, sizeof(got));
	ck_assert_msg(chipd_workloads(c, T_MS, got, CHIPD_MAX_WORKLOADS, &n, &err) == 0, "%s",
		      err.message);
	ck_assert_uint_eq(n, 2);
	ck_assert_msg(memcmp(got, wl_sample, sizeof(wl_sample)) == 0, "%s: %u parameters",
		      got[0].name, got[0].nparams);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(chipd_workloads(c, T_MS, got, 1, &n, &err), -ENOBUFS);
	ck_assert_uint_eq(n, 2);
	ck_assert_msg(memcmp(got, wl_sample, sizeof(got[0])) == 0, "%s", got[0].name);
	chipd_close(c);
	RUN(r, "--instance", t.x.instance, "workloads");
	EXPECT(r, 0);
	want = format(wl_table, NULL);
	ck_assert_str_eq(r->out, want);
	free(want);
	RUN(r, "workloads", "--json", "--instance", t.x.instance);
	EXPECT(r, 0);
	want = format(wl_json, t.x.instance);
	ck_assert_str_eq(r->out, want);
	free(want);
	tsrv_stop(&t);
	free(r);
}
END_TEST

/* A list that never ends (its pages keep saying more follow) ends the call at its
 * timeout, the whole listing's: -ETIMEDOUT, code timeout, not one timeout per page. */
START_TEST(workloads_listing_ends_at_the_call_timeout)
{
	struct chipd_workload got[CHIPD_MAX_WORKLOADS];
	struct chipd_error err;
	chipd_conn *c;
	uint32_t n = 0;
	struct tsrv t;
	int rc;

	tsrv_start(&t);
	atomic_store(&t.endless, 1);
	ck_assert_int_eq(chipd_connect(t.x.instance, &c, &err), 0);
	rc = chipd_workloads(c, 200, got, CHIPD_MAX_WORKLOADS, &n, &err);
	ck_assert_msg(rc == -ETIMEDOUT, "%d after %u workloads listed: %s", rc, n, err.message);
	ck_assert_int_eq(err.code, CHIPD_E_TIMEOUT);
	ck_assert(err.retryable);
	chipd_close(c);
	tsrv_stop(&t);
}
END_TEST

START_TEST(cli_export_writes_textfile)
{
	struct run *r = malloc(sizeof(*r));
	char dir[] = "/tmp/check_ctl.XXXXXX", path[64], buf[OUT_CAP];
	struct stat st;
	mode_t old_mask;
	struct cx x;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/chipd.prom", dir);
	cx_start(&x, 4);
	/* mode 0644 whatever the umask: node_exporter reads it as another user */
	old_mask = umask(077);
	RUN(r, "--instance", x.instance, "export", "--textfile", dir, "--once");
	umask(old_mask);
	EXPECT(r, 0);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0644);
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

static bool exists(void *path)
{
	return access(path, F_OK) == 0;
}

static bool err_says(void *want)
{
	return says_so_far(true, want);
}

/* Removes the directory @dir that export keeps writing into (it may put a
 * chipd.prom.tmp back between the unlinks and the rmdir: try again). */
static bool dir_removed(void *dir)
{
	char path[64];

	snprintf(path, sizeof(path), "%s/chipd.prom", (char *)dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/chipd.prom.tmp", (char *)dir);
	unlink(path);
	return rmdir(dir) == 0;
}

/* export's loop: a write that fails after the first one (here: the directory removed
 * while it runs) is said on stderr and tried again every interval; the loop goes on
 * and writes the file again once it can, and SIGTERM then ends it with 0. (It used
 * to exit 1 at the first failed write of the loop.) */
START_TEST(cli_export_loop_survives_a_later_failure)
{
	struct run *r = malloc(sizeof(*r));
	char dir[] = "/tmp/check_ctl.XXXXXX", path[64], fail[128];
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/chipd.prom", dir);
	snprintf(fail, sizeof(fail), "%s: No such file or directory; trying again", path);
	pid = start((const char *const[]){"export", "--textfile", dir, "--interval", "0.05",
					  "--instance", "nosuch", NULL});
	ck_assert(tu_eventually(exists, path, RUN_MS));
	ck_assert(tu_eventually(dir_removed, dir, RUN_MS));
	/* a bound under the tcase's timeout: a chipctl that exited instead fails here */
	ck_assert_msg(tu_eventually(err_says, fail, 3000), "no '%s' on stderr", fail);
	tu_sleep_ms(200); /* four more intervals, each failing */
	ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert(tu_eventually(exists, path, RUN_MS));
	ck_assert(tu_eventually(err_says, "chipd.prom: written again", RUN_MS));
	kill(pid, SIGTERM);
	finish(r, pid);
	EXPECT(r, 0);
	ck_assert_int_eq(count_of(r->err, "trying again"), 1); /* said once, not each time */
	ck_assert(dir_removed(dir));
	/* the first write failing is a wrong DIR: exit 1 at once, loop or not */
	RUN(r, "export", "--textfile", "/nonexistent/dir", "--interval", "0.05", "--instance",
	    "nosuch");
	EXPECT(r, 1);
	ck_assert_msg(strstr(r->err, "/nonexistent/dir/chipd.prom: No such file or directory\n"),
		      "%s", r->err);
	free(r);
}
END_TEST

/* A stream's failure found on this side names its request in the end line's error
 * object, as the node's errors do: here --wait-ms (code timeout, errno 110); an
 * --output FILE that cannot be written (code null, errno 5) needs a callable with an
 * output, so chipctl_data (tests/chipd/cli_data.sh) checks that one. (Both used to
 * leave "request" out.) */
START_TEST(cli_submit_local_failure_names_request)
{
	struct run *r = malloc(sizeof(*r));
	struct cx x;

	cx_start(&x, 4);
	RUN(r, "--instance", x.instance, "submit", "hold", "--id", "41", "--wait-ms", "100",
	    "--follow", "--json");
	EXPECT(r, 75);
	ck_assert_msg(strstr(r->out, "{\"v\":1,\"id\":41,\"end\":\"failed\",\"tokens\":2,") &&
			  strstr(r->out, ",\"exit\":75,\"error\":{\"code\":\"timeout\","
					 "\"errno\":110,\"message\":\"no token for 100 ms "
					 "(--wait-ms)\",\"retryable\":true,\"request\":41}}\n"),
		      "%s", r->out);
	ck_assert_msg(strstr(r->err, "chipctl submit: request 41: no token for 100 ms "
				     "(--wait-ms) [timeout, retryable]\n"),
		      "%s", r->err);
	/* without --follow: no end line, the error's line on stderr names the request */
	RUN(r, "--instance", x.instance, "submit", "hold", "--id", "@42", "--wait-ms", "100");
	EXPECT(r, 75);
	ck_assert_str_eq(r->out, "@42\n");
	ck_assert_msg(strstr(r->err, "chipctl submit: request @42: no token for 100 ms"), "%s",
		      r->err);
	cx_stop(&x);
	free(r);
}
END_TEST

static bool first_frame_on_a_terminal(void *arg)
{
	char out[64], err[64], buf[4096] = "";
	int fd;
	ssize_t n;

	(void)arg;
	out_paths(out, err, sizeof(out));
	fd = open(out, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return strstr(buf, "(q quits)") && strstr(buf, "tokens/s");
}

/* top on a terminal whose other end closed (a dropped ssh session): nothing more can
 * come from it, so top quits at once, exit 0, as on q. Before, poll kept answering
 * the hang-up and top spun the CPU until its interval (60 s here) ended. */
START_TEST(cli_top_quits_when_its_terminal_hangs_up)
{
	struct run *r = malloc(sizeof(*r));
	const char *const args[] = {"--instance", NULL, "top", "--interval", "60", "--iterations", "2",
				    NULL};
	const char *names[8];
	int master, slave;
	struct cx x;
	pid_t pid;

	cx_start(&x, 4);
	memcpy(names, args, sizeof(args));
	names[1] = x.instance;
	master = posix_openpt(O_RDWR | O_NOCTTY);
	ck_assert_int_ge(master, 0);
	ck_assert(grantpt(master) == 0 && unlockpt(master) == 0);
	slave = open(ptsname(master), O_RDWR | O_NOCTTY);
	ck_assert_int_ge(slave, 0);
	ck_assert_int_eq(fcntl(master, F_SETFD, FD_CLOEXEC), 0); /* top's end only */
	pid = start_in(names, slave);
	close(slave);
	/* its first frame says it watches the terminal for q: then the hang-up */
	ck_assert_msg(tu_eventually(first_frame_on_a_terminal, NULL, RUN_MS),
		      "no first frame on the terminal");
	close(master);
	finish(r, pid);
	EXPECT(r, 0);
	ck_assert_int_eq(count_of(r->out, "tokens/s"), 1);
	cx_stop(&x);
	free(r);
}
END_TEST

void ctl_add_cli_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"cli_help_exits_0", cli_help_exits_0},
	    {"cli_usage_errors_exit_64", cli_usage_errors_exit_64},
	    {"cli_no_instance_exits_69", cli_no_instance_exits_69},
	    {"cli_bad_instance_is_usage_error", cli_bad_instance_is_usage_error},
	    {"cli_json_error_document", cli_json_error_document},
	    {"cli_timeout_bounds_the_handshake", cli_timeout_bounds_the_handshake},
	    {"cli_calls_against_server", cli_calls_against_server},
	    {"cli_submit_follows_tokens", cli_submit_follows_tokens},
	    {"cli_submit_ctrl_c_cancels", cli_submit_ctrl_c_cancels},
	    {"cli_trace_writes_and_summarizes", cli_trace_writes_and_summarizes},
	    {"cli_workloads_against_server", cli_workloads_against_server},
	    {"workloads_listing_ends_at_the_call_timeout", workloads_listing_ends_at_the_call_timeout},
	    {"cli_export_writes_textfile", cli_export_writes_textfile},
	    {"cli_export_loop_survives_a_later_failure", cli_export_loop_survives_a_later_failure},
	    {"cli_submit_local_failure_names_request", cli_submit_local_failure_names_request},
	    {"cli_top_quits_when_its_terminal_hangs_up", cli_top_quits_when_its_terminal_hangs_up},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
