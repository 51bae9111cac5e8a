/* check_node_ops.c - promises of the node's operator ops (docs/protocol.md 8.4:
 * trace, drain, stop), checked from the outside on a real chipd of two sim chips through
 * libchipd, as a client author reads them: a refusal that is the caller's doing is
 * named as such (bad_request), not as a bug of chipd (internal); a trace with a chip
 * is that chip's only, goes on in a worker restarted while it records, and a worker
 * that dies leaves no trace part behind; a stop's grace (drain, stop) is the time
 * requests in flight get, also when a drain came first, and what it leaves running
 * ends cancelled, also on a stopped worker and during a re-queue;
 * a SIGTERM early in the start leaves no pid file and no region behind, and stops a
 * detaching chipd too; a stop ends also while the spawner does not run; a worker
 * started while chipd has no descriptor for its pidfd is killed, not left running
 * unwatched, and the chip starts again once descriptors are free; a --trace FILE
 * that could not be written at the stop stops the start; a chipd started with its
 * standard descriptors closed serves, its log going to none of its files. */
#include "chipd_fixture.h"
#include "proto.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define BOUND_MS 20000u

static const char *const two_chips[] = {"--chips", "2", NULL};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Entries of @dir whose name starts with @prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* A trace collect whose path names a directory: the path is the caller's
 * (docs/protocol.md 8.4, trace: "path ... absolute: the supervisor writes Chrome trace
 * JSON there"), as one in a missing directory is ("path": cannot write beside ...):
 * bad_request naming "path", not internal ("a bug or an impossible state in chipd",
 * 8.3). The directory is left as it was, with no temporary file beside it, and a
 * collect to a file path then succeeds. */
START_TEST(trace_collect_onto_a_directory_is_bad_request)
{
	struct cd d;
	struct chipd_error err;
	char parent[] = "/tmp/chipd-nodeops.XXXXXX", target[64], file[64];
	uint64_t events = 0, dropped = 0;
	struct stat st;
	chipd_stream *s;

	ck_assert_ptr_nonnull(mkdtemp(parent));
	snprintf(target, sizeof(target), "%s/out", parent);
	snprintf(file, sizeof(file), "%s/trace.json", parent);
	ck_assert_int_eq(mkdir(target, 0700), 0);
	cd_start(&d, two_chips, NULL);
	ck_assert_msg(chipd_trace(d.conn, CHIPD_TRACE_START, NULL, CD_CALL_MS, NULL, NULL, &err) ==
			  0,
		      "%s", err.message);
	s = cd_submit(&d, 3, 0);
	cd_expect_stream(s, 3, CHIPD_OK, BOUND_MS);
	ck_assert_int_eq(
	    chipd_trace(d.conn, CHIPD_TRACE_COLLECT, target, CD_CALL_MS, &events, &dropped, &err),
	    -EREMOTEIO);
	ck_assert_msg(err.code == CHIPD_E_BAD_REQUEST, "code %d: %s", (int)err.code, err.message);
	ck_assert_msg(strstr(err.message, "\"path\""), "%s", err.message);
	ck_assert_int_eq(stat(target, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(count_prefixed(parent, "out."), 0); /* no temporary left beside it */
	ck_assert_msg(chipd_trace(d.conn, CHIPD_TRACE_COLLECT, file, CD_CALL_MS, &events, &dropped,
				  &err) == 0,
		      "%s", err.message);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	unlink(file);
	rmdir(target);
	rmdir(parent);
}
END_TEST

/* A raw trace op (as a client written from docs/protocol.md sends it) with @chip and,
 * for collect, @path; returns the answer's ok, with *@m the whole answer. */
static bool trace_op(struct cd *d, struct proto_msg *m, enum proto_trace_act act, int64_t chip,
		     const char *path)
{
	proto_msg_init(m, PROTO_OP_TRACE);
	m->act = act;
	m->chip = chip;
	if (path)
		snprintf(m->path, sizeof(m->path), "%s", path);
	cd_op_raw(d, m);
	return m->ok;
}

/* The trace op's "chip" (docs/protocol.md 8.4: "where optional, default -1 (any /
 * all); a chip the node does not have ... is bad_request"): a start of chip 1 starts
 * chip 1's recorder only, so a collect of chip 0 after work on both chips has no
 * event and one of chip 1 has them; chip 2 of a 2-chip node is refused naming
 * "chip". Before, the supervisor left the field out of what it sent each worker:
 * every chip recorded and was collected, and chip 2 was answered ok. */
START_TEST(trace_of_one_chip_is_that_chip_only)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	const struct chipd_param three = {"tokens", 3};
	char dir[] = "/tmp/chipd-nodeops.XXXXXX", file[64];
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/trace.json", dir);
	cd_start(&d, two_chips, NULL);
	ck_assert(!trace_op(&d, m, PROTO_TRACE_START, 2, NULL));
	ck_assert_msg(m->err.code == CHIPD_E_BAD_REQUEST && strstr(m->err.message, "\"chip\""),
		      "code %d: %s", (int)m->err.code, m->err.message);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_START, 1, NULL), "%s", m->err.message);
	for (int32_t chip = 0; chip < 2; chip++) {
		ck_assert_msg(cd_submit_to(&d, "synthetic", chip, &three, 1, &s, &err) == 0, "%s",
			      err.message);
		cd_expect_stream(s, 3, CHIPD_OK, BOUND_MS);
	}
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_COLLECT, 0, file), "%s", m->err.message);
	ck_assert_msg(m->events == 0, "chip 0 recorded %lld events", (long long)m->events);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_COLLECT, 1, file), "%s", m->err.message);
	ck_assert_msg(m->events > 0, "chip 1 recorded nothing");
	ck_assert(!trace_op(&d, m, PROTO_TRACE_COLLECT, 2, file));
	ck_assert_int_eq(m->err.code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_STOP, 1, NULL), "%s", m->err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	unlink(file);
	rmdir(dir);
	free(m);
}
END_TEST

/* Kills chip 1's worker, waits for its successor, and runs a 3-token request there. */
static void restart_chip1_and_run(struct cd *d)
{
	const struct chipd_param three = {"tokens", 3};
	struct chipd_error err;
	chipd_stream *s;
	pid_t w1 = cd_worker_pid(d, 1);

	ck_assert_int_gt(w1, 0);
	ck_assert_int_eq(kill(w1, SIGKILL), 0);
	ck_assert_msg(cd_wait_chip(d, 1, CHIPD_CHIP_READY, w1, BOUND_MS), "chip 1 not back");
	ck_assert_msg(cd_submit_to(d, "synthetic", 1, &three, 1, &s, &err) == 0, "%s", err.message);
	cd_expect_stream(s, 3, CHIPD_OK, BOUND_MS);
}

/* A chip whose worker restarts while a trace records (chipctl(1), trace: "Starts the
 * workers' span recorders, waits ..., asks the supervisor to write the spans"): the
 * new worker records from its start, so the collect holds its spans (what the dead
 * one recorded is lost with it); after a trace stop, a restarted worker records
 * nothing. Before, the new worker never recorded: the collect of a chip restarted
 * during `chipctl trace` had no span at all, its requests after the restart
 * included. */
START_TEST(trace_goes_on_in_a_restarted_worker)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	char dir[] = "/tmp/chipd-nodeops.XXXXXX", file[64];
	struct cd d;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/trace.json", dir);
	cd_start(&d, two_chips, NULL);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_START, -1, NULL), "%s", m->err.message);
	restart_chip1_and_run(&d);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_COLLECT, 1, file), "%s", m->err.message);
	ck_assert_msg(m->events > 0, "chip 1, restarted during the trace, recorded nothing");
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_STOP, -1, NULL), "%s", m->err.message);
	restart_chip1_and_run(&d);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_COLLECT, 1, file), "%s", m->err.message);
	ck_assert_msg(m->events == 0, "chip 1, restarted after the trace stopped, recorded %lld",
		      (long long)m->events);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	unlink(file);
	rmdir(dir);
	free(m);
}
END_TEST

/* A trace start while chip 1's worker is being restarted, its start asked of the
 * spawner (held stopped) before the trace began, so it starts without recording: once
 * READY it gets the start it missed, and a collect holds the spans of its request.
 * Before, the trace op skipped the chip that was not READY and the worker never
 * recorded: chip 1's collect had no event. */
START_TEST(trace_reaches_a_chip_that_was_starting)
{
	struct proto_msg *m = calloc(1, sizeof(*m));
	const struct chipd_param three = {"tokens", 3};
	char dir[] = "/tmp/chipd-nodeops.XXXXXX", file[64];
	struct chipd_error err;
	chipd_stream *s;
	pid_t spawner, w1;
	struct cd d;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/trace.json", dir);
	cd_start(&d, two_chips, NULL);
	spawner = tu_parent_pid(cd_worker_pid(&d, 0));
	w1 = cd_worker_pid(&d, 1);
	tu_sigstop(spawner);
	ck_assert_int_eq(kill(w1, SIGKILL), 0);
	ck_assert(cd_wait_chip(&d, 1, CHIPD_CHIP_BACKOFF, 0, BOUND_MS));
	/* its restart is asked after the backoff (100 ms) and waits for the spawner
	 * (up to 5 s): nothing tells it from outside */
	usleep(400 * 1000);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_START, -1, NULL), "%s", m->err.message);
	ck_assert_int_eq(kill(spawner, SIGCONT), 0);
	ck_assert_msg(cd_wait_chip(&d, 1, CHIPD_CHIP_READY, w1, BOUND_MS), "chip 1 not back");
	ck_assert_msg(cd_submit_to(&d, "synthetic", 1, &three, 1, &s, &err) == 0, "%s",
		      err.message);
	cd_expect_stream(s, 3, CHIPD_OK, BOUND_MS);
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_COLLECT, 1, file), "%s", m->err.message);
	ck_assert_msg(m->events > 0, "chip 1, starting when the trace began, recorded nothing");
	ck_assert_msg(trace_op(&d, m, PROTO_TRACE_STOP, -1, NULL), "%s", m->err.message);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	unlink(file);
	rmdir(dir);
	free(m);
}
END_TEST

/* Creates the empty file @name in @dir, mode 0600. */
static void plant(const char *dir, const char *name)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

/* What a worker killed while it wrote its trace fragment leaves in the runtime
 * directory (chipd(8), FILES: a part "created under a new random name with mode
 * 0600 and renamed, then removed once merged"): its temporary, or the renamed part of
 * a collect the supervisor had given up on (a worker stopped mid-write is killed
 * after --stuck-ms, past the collect's 2 s). Both are planted under chip 1's names
 * and chip 1's worker is SIGKILLed: once it is back, neither is left, while a
 * temporary under chip 0's name (a live worker's write in progress) stays, and a
 * collect still merges both chips. Before, nobody removed them: every such collect
 * left a file in the runtime directory for good. */
START_TEST(dead_worker_leaves_no_trace_part)
{
	char rundir[] = "/tmp/chipd-nodeops.XXXXXX", env[64], name[96], prefix[64];
	char file[96];
	const char *const envs[] = {env, NULL};
	struct chipd_error err;
	uint64_t events = 0, dropped = 0;
	pid_t w1;
	struct cd d;

	ck_assert_ptr_nonnull(mkdtemp(rundir));
	snprintf(env, sizeof(env), "CHIPD_RUNTIME_DIR=%s", rundir);
	snprintf(file, sizeof(file), "%s/trace.json", rundir);
	cd_start(&d, two_chips, envs);
	snprintf(prefix, sizeof(prefix), "chipd.%d.trace.chip", (int)d.pid);
	snprintf(name, sizeof(name), "%s1.part.Ab12Cd", prefix);
	plant(rundir, name);
	snprintf(name, sizeof(name), "%s1.part", prefix);
	plant(rundir, name);
	snprintf(name, sizeof(name), "%s0.part.Ef34Gh", prefix);
	plant(rundir, name);
	ck_assert_int_eq(count_prefixed(rundir, prefix), 3);
	w1 = cd_worker_pid(&d, 1);
	ck_assert_int_gt(w1, 0);
	ck_assert_int_eq(kill(w1, SIGKILL), 0);
	ck_assert_msg(cd_wait_chip(&d, 1, CHIPD_CHIP_READY, w1, BOUND_MS), "chip 1 not back");
	snprintf(name, sizeof(name), "%s0.part.", prefix);
	ck_assert_msg(count_prefixed(rundir, prefix) == 1 && count_prefixed(rundir, name) == 1,
		      "%d trace parts in %s once chip 1's worker ended, not chip 0's one",
		      count_prefixed(rundir, prefix), rundir);
	snprintf(name, sizeof(name), "%s/%s0.part.Ef34Gh", rundir, prefix);
	ck_assert_int_eq(unlink(name), 0);
	ck_assert_msg(chipd_trace(d.conn, CHIPD_TRACE_START, NULL, CD_CALL_MS, NULL, NULL, &err) ==
			  0,
		      "%s", err.message);
	ck_assert_msg(chipd_trace(d.conn, CHIPD_TRACE_COLLECT, file, CD_CALL_MS, &events, &dropped,
				  &err) == 0,
		      "%s", err.message);
	ck_assert_int_eq(count_prefixed(rundir, prefix), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	unlink(file);
	cd_remove_dir(rundir);
}
END_TEST

/* A stop asked for with a short grace while a drain with a long one runs (chipctl
 * drain --grace-ms 60000, then chipctl stop --grace-ms 300: "--grace-ms N: time for
 * in-flight requests", chipctl(1)) is answered ok, and its grace is what the requests
 * in flight get: the long stream ends cancelled within about 300 ms, not after the
 * drain's minute, and chipd exits. A SIGTERM cuts a drain the same way (chipd(8)). */
START_TEST(stop_during_a_drain_cuts_its_grace)
{
	struct cd d;
	struct chipd_error err;
	enum chipd_code code;
	uint64_t t0, ms;
	chipd_stream *s;

	cd_start(&d, two_chips, NULL);
	s = cd_submit(&d, 200, 100000); /* 20 s */
	ck_assert_msg(chipd_drain(d.conn, 60000, CD_CALL_MS, &err) == 0, "%s", err.message);
	usleep(200000);
	t0 = now_ms();
	ck_assert_msg(chipd_stop(d.conn, 300, CD_CALL_MS, &err) == 0, "%s", err.message);
	(void)cd_drain_stream(s, &code, BOUND_MS);
	ms = now_ms() - t0;
	ck_assert_msg(code == CHIPD_E_CANCELLED, "code %d after %llu ms", (int)code,
		      (unsigned long long)ms);
	ck_assert_msg(ms < 3000, "the stream ended %llu ms after a stop with grace 300 ms",
		      (unsigned long long)ms);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, 0, BOUND_MS), 0); /* it exits by itself */
}
END_TEST

/* A stop whose grace ends while the worker holding a stream is stopped (SIGSTOP, well
 * within --stuck-ms): the worker cannot answer its shutdown, chipd kills it and ends
 * the stream itself, cancelled, as every request still running after the grace ends
 * (docs/protocol.md 8.4, drain; chipctl(1), drain). Before, it ended worker_lost,
 * retryable: a client retried on a node going away. */
START_TEST(grace_over_with_a_stopped_worker_cancels)
{
	static const char *const args[] = {"--chips", "1", "--stuck-ms", "120000", NULL};
	struct chipd_error err;
	struct chipd_token tok;
	enum chipd_code code;
	chipd_stream *s;
	struct cd d;

	cd_start(&d, args, NULL);
	s = cd_submit(&d, 1000, 20000); /* 20 s */
	ck_assert_msg(chipd_stream_next(s, &tok, BOUND_MS, &err) == 0, "%s", err.message);
	tu_sigstop(cd_worker_pid(&d, 0));
	ck_assert_msg(chipd_stop(d.conn, 300, CD_CALL_MS, &err) == 0, "%s", err.message);
	(void)cd_drain_stream_from(s, 1, &code, BOUND_MS);
	ck_assert_msg(code == CHIPD_E_CANCELLED, "the stream ended %s", chipd_code_name(code));
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, 0, BOUND_MS), 0); /* it exits by itself */
}
END_TEST

/* A stop whose grace ends while a dead worker's unstarted request is being re-queued
 * (its assign posted to a worker that does not answer: SIGSTOPped, well within
 * --stuck-ms): the re-queue is given up and the stream ends cancelled, as every stream
 * the grace leaves open (docs/protocol.md 8.4, drain; operations.md, "after the
 * grace"). Before, it ended worker_lost, retryable, on a node going away. */
START_TEST(grace_over_during_a_requeue_cancels)
{
	static const char *const args[] = {"--chips",	     "2",	"--stuck-ms", "120000",
					   "--progress-ms", "120000", NULL};
	/* its first token a second away: still unstarted when its worker dies */
	struct chipd_param p[] = {{"tokens", 2}, {"device_us", 1000000}};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s = NULL;
	pid_t w0, w1;
	uint32_t n;
	struct cd d;

	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	tu_sigstop(w1);
	ck_assert_msg(cd_submit_to(&d, "synthetic", 0, p, 2, &s, &err) == 0, "%s", err.message);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	ck_assert_msg(cd_wait_chip(&d, 0, CHIPD_CHIP_BACKOFF, 0, BOUND_MS), "chip 0 not in backoff");
	/* a few ticks: the re-queue's assign is posted to the stopped chip 1, whose answer
	 * it waits for up to 2 s (SUP_FORWARD_MS) */
	usleep(150000);
	ck_assert_msg(chipd_stop(d.conn, 1, CD_CALL_MS, &err) == 0, "%s", err.message);
	n = cd_drain_stream(s, &code, BOUND_MS);
	ck_assert_uint_eq(n, 0);
	ck_assert_msg(code == CHIPD_E_CANCELLED, "the stream ended %s", chipd_code_name(code));
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(kill(w1, SIGCONT), 0);
	ck_assert_int_eq(cd_stop(&d, 0, BOUND_MS), 0); /* it exits by itself */
}
END_TEST

/* A stop while the spawner (the process that forks and reaps the workers) does not
 * run: "the workers are shut down ..., then killed, the node region is unlinked and
 * chipd exits 0" (chipd(8)). The spawner leaves when the supervisor closes its socket;
 * a SIGSTOPped one never reads that, and chipd waited for it without a bound: the
 * region was gone but chipd never exited (its pid file stayed, the instance could not
 * be started again). */
START_TEST(stop_with_a_stopped_spawner_exits)
{
	struct cd d;
	struct stat st;
	pid_t spawner;
	int rc;

	cd_start(&d, two_chips, NULL);
	spawner = tu_parent_pid(cd_worker_pid(&d, 0));
	ck_assert_int_gt(spawner, 1);
	ck_assert_int_ne(spawner, d.pid);
	ck_assert_int_eq(tu_parent_pid(spawner), d.pid);
	tu_sigstop(spawner);
	rc = cd_stop(&d, SIGTERM, BOUND_MS);
	(void)kill(spawner, SIGCONT); /* gone by now, unless this failed */
	ck_assert_msg(rc == 0, "chipd ended with %d (-1: it did not exit within %u ms)", rc,
		      BOUND_MS);
	ck_assert(!cd_region_exists(&d));
	ck_assert_msg(stat(d.pidfile, &st) != 0, "the pid file %s is left behind", d.pidfile);
}
END_TEST

/* Whether @pid runs chipd's image yet (its exec is done). */
static bool execd(pid_t pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	return strncmp(comm, "chipd", 5) == 0;
}

/* A SIGTERM early in chipd's start, at every millisecond of its first 40: "SIGTERM
 * ... stop chipd: ... the node region is unlinked and chipd exits 0" (chipd(8)). It
 * never leaves its pid file or its node region behind, and once it took its pid file
 * it exits 0, not killed by the signal (a stale region and pid file in /dev/shm and
 * the runtime directory until the next start of that instance). */
START_TEST(sigterm_early_in_the_start_leaves_nothing)
{
	for (int ms = 0; ms <= 40; ms++) {
		struct cd d;
		struct stat st;
		bool had_pidfile;
		int status;
		pid_t pid = cd_spawn(&d, two_chips, NULL, NULL);

		for (int i = 0; i < 2000 && !execd(pid); i++)
			usleep(500);
		usleep((useconds_t)ms * 1000u);
		had_pidfile = stat(d.pidfile, &st) == 0;
		ck_assert_int_eq(kill(pid, SIGTERM), 0);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		d.pid = 0;
		ck_assert_msg(!cd_region_exists(&d), "%d ms: the region %s is left behind", ms,
			      d.region);
		ck_assert_msg(stat(d.pidfile, &st) != 0, "%d ms: the pid file %s is left behind",
			      ms, d.pidfile);
		ck_assert_msg(!had_pidfile || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
			      "%d ms: chipd ended with status 0x%x after it took its pid file", ms,
			      (unsigned)status);
	}
}
END_TEST

/* chipd without --foreground, sent SIGTERM while it starts (its pid file is there, it
 * is not ready yet): "SIGTERM ... stop chipd" (chipd(8)), also when the signal reaches
 * the command the caller started (a timeout, a Ctrl-C: the detached child is in a
 * session of its own, the terminal's SIGINT reaches the command alone). The command
 * exits, and the instance is gone within 10 s: no node region, no pid file (before
 * the fix the command died and the detached chipd went on, ready and serving). */
START_TEST(sigterm_to_a_detaching_chipd_stops_it)
{
	char instance[32], pidfile[96], region[96], rundir[] = "/tmp/chipd-nodeops.XXXXXX";
	char env_rundir[64];
	struct stat st;
	uint64_t until;
	bool served, had_pidfile;
	int status;
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(rundir));
	snprintf(instance, sizeof(instance), "d%d", (int)getpid());
	snprintf(pidfile, sizeof(pidfile), "%s/chipd.pid", rundir);
	snprintf(region, sizeof(region), "/dev/shm/chipd.%u.%s", (unsigned)getuid(), instance);
	snprintf(env_rundir, sizeof(env_rundir), "CHIPD_RUNTIME_DIR=%s", rundir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		putenv(env_rundir);
		execl(CHIPD_BIN, CHIPD_BIN, "--instance", instance, "--pidfile", pidfile, "--chips",
		      "2", (char *)NULL);
		_exit(127);
	}
	until = now_ms() + 10000;
	while (stat(pidfile, &st) != 0 || st.st_size == 0) {
		ck_assert_msg(now_ms() < until, "no pid file");
		usleep(500);
	}
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	until = now_ms() + 10000;
	while ((stat(region, &st) == 0 || stat(pidfile, &st) == 0) && now_ms() < until)
		usleep(10000);
	served = stat(region, &st) == 0;
	had_pidfile = stat(pidfile, &st) == 0;
	if (had_pidfile) { /* the daemon went on: stop it, then fail */
		FILE *f = fopen(pidfile, "r");
		int daemon = 0;

		if (f && fscanf(f, "%d", &daemon) == 1 && daemon > 0)
			kill(daemon, SIGTERM);
		if (f)
			fclose(f);
		usleep(1500000);
	}
	{
		char log[160];

		snprintf(log, sizeof(log), "%s/chipd.%u.%s.log", rundir, (unsigned)getuid(),
			 instance);
		unlink(log);
		snprintf(log, sizeof(log), "%s/chipd.%u.%s.sock", rundir, (unsigned)getuid(),
			 instance);
		unlink(log);
	}
	rmdir(rundir);
	ck_assert_msg(!served, "the detached chipd still served %s 10 s after the SIGTERM", region);
	ck_assert_msg(!had_pidfile, "the pid file %s was left behind", pidfile);
}
END_TEST

/* Whether @path holds @text, waiting up to @ms for it. */
static bool file_gets(const char *path, const char *text, unsigned ms)
{
	uint64_t until = now_ms() + ms;
	static char buf[1 << 16];

	do {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		if (strstr(buf, text))
			return true;
		usleep(10000);
	} while (now_ms() < until);
	return false;
}

/* The children of @pid (its main thread's), read into @out (at most @cap). */
static int children_of(pid_t pid, pid_t *out, int cap)
{
	char path[64];
	int n = 0, c;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (n < cap && fscanf(f, "%d", &c) == 1)
		out[n++] = c;
	fclose(f);
	return n;
}

/* The lowest descriptor number @pid has free. */
static int lowest_free_fd(pid_t pid)
{
	bool used[4096] = {false};
	char path[64];
	struct dirent *e;
	int low = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.' && atoi(e->d_name) < 4096)
			used[atoi(e->d_name)] = true;
	closedir(dir);
	while (low < 4096 && used[low])
		low++;
	return low;
}

START_TEST(restart_without_a_descriptor_for_the_pidfd)
{
	static const char *const args[] = {"--chips", "2", "--backoff-min-ms", "1000", NULL};
	char log[] = "/tmp/chipd-node-ops-XXXXXX";
	int logfd = mkstemp(log), n;
	struct rlimit rl, was;
	pid_t w0, w1, spawner, kids[8];
	struct cd d;

	ck_assert_int_ge(logfd, 0);
	ck_assert_int_eq(dup2(logfd, STDERR_FILENO), STDERR_FILENO); /* chipd's log */
	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	spawner = tu_parent_pid(w0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	ck_assert(file_gets(log, "restart in 1000 ms", BOUND_MS)); /* its pidfd closed */
	/* no descriptor free below the limit: the restart's pidfd cannot come in */
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &was), 0);
	rl = was;
	rl.rlim_cur = (rlim_t)lowest_free_fd(d.pid);
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &rl, NULL), 0);
	ck_assert_msg(file_gets(log, "cannot start the worker: Too many open files", BOUND_MS),
		      "no failed start for want of descriptors");
	/* the worker that was forked for it does not run unwatched */
	for (uint64_t until = now_ms() + BOUND_MS;
	     (n = children_of(spawner, kids, 8)) != 1 && now_ms() < until;)
		usleep(10000);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(kids[0], w1);
	/* by the spawner, its parent, which had not reaped it: never by number from the
	 * supervisor, whose kill(-pid) could reach a process that took the number over
	 * once the spawner reaped the worker */
	ck_assert_msg(file_gets(log, "spawner: killed worker pid", BOUND_MS),
		      "the worker forked for the failed start was not killed by the spawner");
	/* descriptors again: the chip's next start succeeds */
	ck_assert_int_eq(prlimit(d.pid, RLIMIT_NOFILE, &was, NULL), 0);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, BOUND_MS));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	ck_assert(!cd_region_exists(&d));
	close(logfd);
	unlink(log);
}
END_TEST

/* --trace FILE is written at the stop: a FILE chipd could not write then stops the
 * start instead (exit 1, before the instance is taken), rather than losing the whole
 * run's trace at its end with a warning in the log. */
START_TEST(trace_file_that_cannot_be_written_stops_the_start)
{
	static const char *const no_dir[] = {"--chips", "1", "--trace",
					     "/nonexistent-chipd-dir/run.json", NULL};
	static const char *const a_dir[] = {"--chips", "1", "--trace", "/tmp", NULL};
	const char *const *bad[] = {no_dir, a_dir};

	for (int i = 0; i < 2; i++) {
		struct cd d;
		struct stat st;
		pid_t pid = cd_spawn(&d, bad[i], NULL, NULL);
		int rc = tu_wait(pid, BOUND_MS);

		d.pid = 0;
		ck_assert_msg(rc == 1, "--trace %s: chipd ended with %d (-1: it started)", bad[i][3],
			      rc);
		ck_assert(!cd_region_exists(&d));
		ck_assert_msg(stat(d.pidfile, &st) != 0, "the pid file %s is left behind",
			      d.pidfile);
	}
}
END_TEST

/* A launcher that starts chipd with standard input, output and error closed: the
 * descriptors chipd opens then must not take those numbers (its pid file would be its
 * input, a client region's memfd its standard error, and every log line would land in
 * that client's mailbox). chipd serves, its 0-2 are /dev/null, and it stops cleanly. */
START_TEST(closed_standard_descriptors_are_not_reused)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	struct chipd_error err;
	chipd_conn *c;
	char path[64], to[64];
	struct stat st;
	struct cd d;

	/* the test's own: cd_spawn's readiness pipe takes 0 and 1, which the child
	 * closes (moving the write end to 3) before it runs chipd */
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	cd_start(&d, one_chip, NULL);
	for (int fd = 0; fd <= 2; fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)d.pid, fd);
		n = readlink(path, to, sizeof(to) - 1);
		ck_assert_int_gt(n, 0);
		to[n] = '\0';
		ck_assert_msg(strcmp(to, "/dev/null") == 0, "chipd's descriptor %d is %s", fd, to);
	}
	/* a second client too, after more log lines */
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), 0);
	ck_assert_int_eq(chipd_ping(c, CD_CALL_MS, NULL, NULL), 0);
	chipd_close(c);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, NULL), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, BOUND_MS), 0);
	ck_assert(!cd_region_exists(&d));
	ck_assert_msg(stat(d.pidfile, &st) != 0, "the pid file %s is left behind", d.pidfile);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("node_ops");
	const struct tu_case cases[] = {
	    {"trace_collect_onto_a_directory_is_bad_request",
	     trace_collect_onto_a_directory_is_bad_request},
	    {"trace_of_one_chip_is_that_chip_only", trace_of_one_chip_is_that_chip_only},
	    {"dead_worker_leaves_no_trace_part", dead_worker_leaves_no_trace_part},
	    {"trace_goes_on_in_a_restarted_worker", trace_goes_on_in_a_restarted_worker},
	    {"trace_reaches_a_chip_that_was_starting", trace_reaches_a_chip_that_was_starting},
	    {"stop_during_a_drain_cuts_its_grace", stop_during_a_drain_cuts_its_grace},
	    {"grace_over_with_a_stopped_worker_cancels", grace_over_with_a_stopped_worker_cancels},
	    {"grace_over_during_a_requeue_cancels", grace_over_during_a_requeue_cancels},
	    {"stop_with_a_stopped_spawner_exits", stop_with_a_stopped_spawner_exits},
	    {"sigterm_early_in_the_start_leaves_nothing",
	     sigterm_early_in_the_start_leaves_nothing},
	    {"sigterm_to_a_detaching_chipd_stops_it", sigterm_to_a_detaching_chipd_stops_it},
	    {"restart_without_a_descriptor_for_the_pidfd",
	     restart_without_a_descriptor_for_the_pidfd},
	    {"trace_file_that_cannot_be_written_stops_the_start",
	     trace_file_that_cannot_be_written_stops_the_start},
	    {"closed_standard_descriptors_are_not_reused",
	     closed_standard_descriptors_are_not_reused},
	};

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), 60);
	return tu_run(s);
}
