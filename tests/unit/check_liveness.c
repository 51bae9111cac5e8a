/* check_liveness.c - what a client sees when the processes behind its streams die: a
 * dead node ends every stream node_lost within the liveness bound (also for readers
 * that poll many streams, as chipctl submit --count does), a request re-queued from a
 * dead worker while the supervisor was slow still streams to its client, with counters
 * that agree with what the clients saw, and re-queues to a stuck worker hold up no
 * other chip's death or restart; a request cancelled before its worker died, or while
 * it is being moved, is not run; a restart while the spawner does not run stalls
 * nothing, not even its first start, and starts one worker. */
#include "chipd_fixture.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A generous liveness bound for a loaded 2-core machine or a sanitizer build: the
 * protocol's bound is about 20 ms (protocol.md 5.4). */
#define LIVENESS_MS 5000u
/* How soon closing the streams of a dead node returns, and chipctl exits: far under
 * --timeout-ms's default (5 s), which such a close used to wait out; generous for a
 * loaded machine (the streams end within about 20 ms). */
#define CTL_EXIT_MS 2000u

static const char *const two_chips[] = {"--chips", "2", NULL};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static chipd_stream *submit_synth(struct cd *d, int32_t chip, int64_t tokens, int64_t device_us)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"device_us", device_us}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 2, .chip = chip};
	struct chipd_error err;
	chipd_stream *s = NULL;
	uint64_t id;

	ck_assert_int_eq(chipd_submit(d->conn, &req, CD_CALL_MS, &id, &s, &err), 0);
	return s;
}

/* SIGKILLs chipd (its spawner and workers die with it) and reaps it. The region stays
 * behind, as after a crash; the caller removes it. */
static void kill_node(struct cd *d)
{
	int status;

	ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(d->pid, &status, 0), d->pid);
	d->pid = 0;
}

static void forget_node(struct cd *d)
{
	chipd_close(d->conn);
	d->conn = NULL;
	unlink(d->region);
	unlink(d->pidfile);
}

/* Streams open (each has produced a token) when the node is SIGKILLed: a reader that
 * polls them all with timeout 0 (as a reader of many streams does) and one that waits
 * with a long timeout each learn within the liveness bound that nobody will end them:
 * -EPIPE, node_lost, retryable; closing them returns at once. */
START_TEST(dead_node_ends_every_stream_node_lost)
{
	enum { N = 4 };
	chipd_stream *s[N];
	struct chipd_token tok;
	struct chipd_error err;
	bool done[N] = {false};
	uint32_t open = N;
	struct cd d;
	uint64_t t0;

	cd_start(&d, two_chips, NULL);
	for (int i = 0; i < N; i++) {
		s[i] = submit_synth(&d, -1, 1 << 20, 1000);
		ck_assert_int_eq(chipd_stream_next(s[i], &tok, CD_CALL_MS, &err), 0);
	}
	kill_node(&d);
	t0 = now_ms();
	/* streams 0..N-2 polled with timeout 0, round robin */
	open = N - 1;
	while (open && now_ms() - t0 < LIVENESS_MS) {
		for (int i = 0; i < N - 1; i++) {
			int rc;

			if (done[i])
				continue;
			rc = chipd_stream_next(s[i], &tok, 0, &err);
			if (rc == 0 || rc == -ETIMEDOUT)
				continue; /* tokens published before the death, or nothing yet */
			ck_assert_msg(rc == -EPIPE, "stream %d: %d (%s)", i, rc, strerror(-rc));
			ck_assert_int_eq(err.code, CHIPD_E_NODE_LOST);
			ck_assert(err.retryable);
			ck_assert_str_eq(chipd_code_name(err.code), "node_lost");
			done[i] = true;
			open--;
		}
		usleep(1000);
	}
	ck_assert_msg(open == 0, "%u polled streams still open %u ms after the node died", open,
		      LIVENESS_MS);
	/* the last one with a timeout far past the bound: returning in time is the point */
	t0 = now_ms();
	int rc;
	do
		rc = chipd_stream_next(s[N - 1], &tok, 60000, &err);
	while (rc == 0);
	ck_assert_int_eq(rc, -EPIPE);
	ck_assert_int_eq(err.code, CHIPD_E_NODE_LOST);
	ck_assert_uint_lt(now_ms() - t0, LIVENESS_MS);
	/* closing a stream nobody can end returns at once, whatever time it is given */
	t0 = now_ms();
	for (int i = 0; i < N; i++)
		chipd_stream_close(s[i], 60000);
	ck_assert_uint_lt(now_ms() - t0, CTL_EXIT_MS);
	/* a call given too little time to sleep (0, 5 ms) learns it as a longer one does:
	 * -EPIPE, the supervisor died, not a retryable timeout it would retry forever */
	for (uint32_t ms = 0; ms <= 5; ms += 5) {
		rc = chipd_ping(d.conn, ms, NULL, &err);
		ck_assert_msg(rc == -EPIPE, "ping given %u ms: %d (%s)", ms, rc, err.message);
		ck_assert_int_eq(err.code, CHIPD_OK);
	}
	forget_node(&d);
}
END_TEST

/* chipctl submit with @args (NULL-ended, after "submit"), reading @n streams when the
 * node is SIGKILLed: it exits 3 (not running) at once, not after --wait-ms or
 * --timeout-ms, each stream's end reported node_lost on stderr; its stdout is left
 * in @out (@cap bytes). */
static void chipctl_exits_when_node_dies(const char *const *args, int n, char *out, size_t cap)
{
	char outf[96], errf[96], buf[4096] = {0}, *p = buf;
	const char *argv[24];
	int status, ended = 0, na = 0, fd;
	struct cd d;
	pid_t ctl;
	uint64_t t0;
	ssize_t got;

	cd_start(&d, two_chips, NULL);
	argv[na++] = CHIPCTL_BIN;
	argv[na++] = "--instance";
	argv[na++] = d.instance;
	argv[na++] = "submit";
	while (*args && na < 23)
		argv[na++] = *args++;
	argv[na] = NULL;
	snprintf(outf, sizeof(outf), "/tmp/check_liveness.%d.out", (int)getpid());
	snprintf(errf, sizeof(errf), "/tmp/check_liveness.%d.err", (int)getpid());
	ctl = fork();
	ck_assert_int_ge(ctl, 0);
	if (ctl == 0) {
		int fo = open(outf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int fe = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
			_exit(126);
		execv(CHIPCTL_BIN, (char *const *)argv);
		_exit(127);
	}
	/* all admitted and streaming */
	t0 = now_ms();
	while (now_ms() - t0 < 15000 &&
	       cd_stat(&d, "chip0", "admitted") + cd_stat(&d, "chip1", "admitted") < (uint64_t)n)
		usleep(10000);
	ck_assert_uint_ge(cd_stat(&d, "chip0", "admitted") + cd_stat(&d, "chip1", "admitted"), n);
	usleep(100000);
	kill_node(&d);
	t0 = now_ms();
	status = tu_wait(ctl, 20000);
	ck_assert_msg(status == 3 && now_ms() - t0 < CTL_EXIT_MS,
		      "chipctl exit %d after %llu ms (expected 3 within %u ms)", status,
		      (unsigned long long)(now_ms() - t0), CTL_EXIT_MS);
	/* each stream reported its end: node_lost, retryable */
	fd = open(errf, O_RDONLY);
	got = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	ck_assert_int_gt(got, 0);
	while ((p = strstr(p, "[node_lost, retryable]")) != NULL) {
		ended++;
		p++;
	}
	ck_assert_msg(ended == n, "stderr: %s", buf);
	fd = open(outf, O_RDONLY);
	got = fd >= 0 ? read(fd, out, cap - 1) : -1;
	out[got > 0 ? got : 0] = '\0';
	if (fd >= 0)
		close(fd);
	unlink(outf);
	unlink(errf);
	forget_node(&d);
}

/* chipctl submit --count 3 reading three streams (polled without blocking). */
START_TEST(chipctl_count_exits_when_node_dies)
{
	static const char *const args[] = {"synthetic", "tokens=1000000", "device_us=1000",
					   "--count",	"3",		  "--wait-ms",
					   "60000",	NULL};
	char out[4096];

	chipctl_exits_when_node_dies(args, 3, out, sizeof(out));
}
END_TEST

/* chipctl submit --follow reading one stream (blocking reads): its end line says
 * node_lost, and closing the stream of the dead node does not wait out --timeout-ms. */
START_TEST(chipctl_follow_exits_when_node_dies)
{
	static const char *const args[] = {"synthetic", "tokens=1000000", "device_us=1000",
					   "--follow",	"--wait-ms",	  "60000",
					   NULL};
	char out[1 << 16];

	chipctl_exits_when_node_dies(args, 1, out, sizeof(out));
	ck_assert_msg(strstr(out, ": node_lost, "), "stdout ends: %s",
		      out + (strlen(out) > 200 ? strlen(out) - 200 : 0));
}
END_TEST

/* How each client's stream ended. */
struct outcome {
	uint32_t tokens;
	enum chipd_code code; /* CHIPD_OK after its final token */
	int rc;		      /* 0, or the errno it ended with */
	bool over;
};

/* Reads every stream with short waits (a timeout is not an end: the stream goes on)
 * until each has ended or @ms passed. */
static void read_all(chipd_stream **s, struct outcome *o, uint32_t n, unsigned ms)
{
	uint64_t t0 = now_ms();
	uint32_t open = n;

	while (open && now_ms() - t0 < ms) {
		for (uint32_t i = 0; i < n; i++) {
			struct chipd_token tok;
			struct chipd_error err;
			int rc;

			if (o[i].over)
				continue;
			rc = chipd_stream_next(s[i], &tok, 20, &err);
			if (rc == -ETIMEDOUT)
				continue;
			if (rc == 0) {
				ck_assert_uint_eq(tok.seq, o[i].tokens);
				o[i].tokens++;
				if (!tok.final)
					continue;
				o[i].code = CHIPD_OK;
			} else {
				o[i].code = err.code;
				o[i].rc = rc;
			}
			o[i].over = true;
			open--;
		}
	}
}

/* Requests waiting unstarted on chip 0 when its worker is SIGKILLed while the
 * supervisor is stopped for a second (as CPU contention can make it): the supervisor,
 * once it runs, moves them to chip 1. Each client's stream must go on through the
 * wait and then complete with every token, or end with a retryable code, and the
 * counters must say what the clients saw: as many completions as clients that got a
 * final token, as many err_<code> as clients whose stream ended with that code. */
START_TEST(requeued_requests_stream_to_their_clients)
{
	enum { N = 6, TOKENS = 3 };
	chipd_stream *s[N];
	struct outcome o[N];
	uint64_t completed = 0, lost = 0, t0;
	uint32_t saw_final = 0, saw_lost = 0;
	struct cd d;
	pid_t w0;

	memset(o, 0, sizeof(o));
	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	/* admitted on chip 0; the first token of each is 300 ms away */
	for (int i = 0; i < N; i++)
		s[i] = submit_synth(&d, 0, TOKENS, 300000);
	tu_sigstop(d.pid);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	/* the clients read on while the supervisor is stopped */
	read_all(s, o, N, 1000);
	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	read_all(s, o, N, 30000);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(o[i].over, "stream %d never ended", i);
		if (o[i].code == CHIPD_OK) {
			ck_assert_uint_eq(o[i].tokens, TOKENS);
			saw_final++;
			continue;
		}
		ck_assert_msg(o[i].rc == -EREMOTEIO && chipd_code_retryable(o[i].code),
			      "stream %d ended %d (%s), code %s, after %u tokens", i, o[i].rc,
			      strerror(-o[i].rc), chipd_code_name(o[i].code), o[i].tokens);
		ck_assert_int_eq(o[i].code, CHIPD_E_WORKER_LOST);
		saw_lost++;
	}
	/* the supervisor counts an end within a tick of its loop */
	t0 = now_ms();
	do {
		completed = cd_stat(&d, "chip0", "completed") + cd_stat(&d, "chip1", "completed");
		lost = cd_stat(&d, "supervisor", "err_worker_lost");
		if (completed == saw_final && lost == saw_lost)
			break;
		usleep(20000);
	} while (now_ms() - t0 < LIVENESS_MS);
	ck_assert_uint_eq(completed, saw_final);
	ck_assert_uint_eq(lost, saw_lost);
	ck_assert_uint_eq(cd_stat(&d, "chip1", "cancelled"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_internal"), 0);
	for (int i = 0; i < N; i++)
		chipd_stream_close(s[i], CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Requests waiting unstarted on chip 0 when its worker is SIGKILLed, while chip 1's
 * worker is SIGSTOPped (still READY: --stuck-ms is long) and the least loaded (chip 2
 * carries BUSY streams): every re-queue goes to the stuck worker. The event loop waits
 * for none of them: chip 0's restart, and a SIGKILL of chip 2's worker meanwhile, are
 * each handled within the liveness bound (a loop that waited for each re-queue's answer
 * would be held SUP_FORWARD_MS per request). Then chip 1 resumes at once (RQ_RESUME:
 * each re-queued stream completes, or ends worker_lost had its assign been given up),
 * or only once every re-queue was given up (RQ_GIVE_UP: each ends worker_lost, and the
 * worker that then reads the given-up assigns ends nothing twice), or it is SIGKILLed
 * with the re-queues posted to it (RQ_KILL: its death path takes them back and the
 * next tick posts them to a healthy chip). Every stream ends exactly once, and the
 * counters agree with what the clients saw. */
enum rq_end { RQ_RESUME, RQ_GIVE_UP, RQ_KILL };

static void requeue_to_stuck(enum rq_end how)
{
	enum { N = 6, BUSY = 8, TOKENS = 2, RESTART_MS = 8000 };
	const char *const args[] = {"--chips", "3", "--stuck-ms", "120000", NULL};
	chipd_stream *s[N], *b[BUSY];
	struct outcome o[N], ob[BUSY];
	uint64_t completed = 0, lost = 0, t0;
	uint32_t saw_final = 0, saw_lost = 0;
	struct chipd_error err;
	struct cd d;
	pid_t w0, w1, w2;

	memset(o, 0, sizeof(o));
	memset(ob, 0, sizeof(ob));
	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	w1 = cd_worker_pid(&d, 1);
	w2 = cd_worker_pid(&d, 2);
	/* chip 2 streams (a token out of each: never re-queued), so chip 1 is the least
	 * loaded ready chip */
	for (int i = 0; i < BUSY; i++) {
		struct chipd_token tok;

		b[i] = submit_synth(&d, 2, 1 << 20, 1000);
		ck_assert_int_eq(chipd_stream_next(b[i], &tok, CD_CALL_MS, &err), 0);
		ob[i].tokens = 1;
	}
	/* admitted on chip 0; the first token of each is 1 s away */
	for (int i = 0; i < N; i++)
		s[i] = submit_synth(&d, 0, TOKENS, 1000000);
	tu_sigstop(w1);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	ck_assert_msg(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, RESTART_MS),
		      "chip 0 not restarted within %u ms while its re-queues wait on chip 1",
		      (unsigned)RESTART_MS);
	ck_assert_int_eq(kill(w2, SIGKILL), 0);
	ck_assert_msg(cd_wait_chip(&d, 2, CHIPD_CHIP_READY, w2, RESTART_MS),
		      "chip 2 not restarted within %u ms while re-queues wait on chip 1",
		      (unsigned)RESTART_MS);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, &err), 0);
	if (how == RQ_GIVE_UP) { /* each given up after SUP_FORWARD_MS, chip 1 stopped */
		t0 = now_ms();
		while (cd_stat(&d, "supervisor", "err_worker_lost") < BUSY + N &&
		       now_ms() - t0 < 15000)
			usleep(20000);
		ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_worker_lost"), BUSY + N);
	}
	ck_assert_int_eq(kill(w1, how == RQ_KILL ? SIGKILL : SIGCONT), 0);
	read_all(s, o, N, 30000);
	read_all(b, ob, BUSY, 30000);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(o[i].over, "re-queued stream %d never ended", i);
		if (o[i].code == CHIPD_OK) {
			ck_assert_uint_eq(o[i].tokens, TOKENS);
			saw_final++;
			continue;
		}
		ck_assert_msg(how != RQ_GIVE_UP || o[i].tokens == 0,
			      "stream %d: a token after it ended", i);
		ck_assert_msg(o[i].rc == -EREMOTEIO && o[i].code == CHIPD_E_WORKER_LOST,
			      "stream %d ended %d (%s), code %s, after %u tokens", i, o[i].rc,
			      strerror(-o[i].rc), chipd_code_name(o[i].code), o[i].tokens);
		saw_lost++;
	}
	for (int i = 0; i < BUSY; i++) {
		ck_assert_msg(ob[i].over, "chip 2's stream %d never ended", i);
		ck_assert_int_eq(ob[i].code, CHIPD_E_WORKER_LOST);
		saw_lost++;
	}
	/* the supervisor counts an end within a tick of its loop; the re-queued requests
	 * complete only on a worker started before they were posted to it. Given up,
	 * chip 1 read the assigns meanwhile: nothing of theirs may be counted again */
	if (how == RQ_GIVE_UP)
		usleep(500 * 1000);
	t0 = now_ms();
	do {
		completed = cd_stat(&d, "chip0", "completed") + cd_stat(&d, "chip1", "completed") +
			    cd_stat(&d, "chip2", "completed");
		lost = cd_stat(&d, "supervisor", "err_worker_lost");
		if (completed == saw_final && lost == saw_lost)
			break;
		usleep(20000);
	} while (now_ms() - t0 < LIVENESS_MS);
	ck_assert_uint_eq(completed, saw_final);
	ck_assert_uint_eq(lost, saw_lost);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_internal"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_cancelled"), 0);
	if (how != RQ_KILL)
		ck_assert_int_eq(cd_worker_pid(&d, 1), w1); /* never killed for it */
	for (int i = 0; i < N; i++)
		chipd_stream_close(s[i], CD_CALL_MS);
	for (int i = 0; i < BUSY; i++)
		chipd_stream_close(b[i], CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}

START_TEST(requeue_to_a_stuck_worker_stalls_nothing)
{
	requeue_to_stuck(RQ_RESUME);
}
END_TEST

START_TEST(requeue_given_up_by_a_stuck_worker_ends_once)
{
	requeue_to_stuck(RQ_GIVE_UP);
}
END_TEST

START_TEST(requeue_target_killed_moves_on)
{
	requeue_to_stuck(RQ_KILL);
}
END_TEST

static chipd_stream *submit_kv(struct cd *d, int32_t chip, const struct chipd_param *p,
				uint32_t np)
{
	struct chipd_request req = {
	    .workload = "paged_attention", .params = p, .nparams = np, .chip = chip};
	struct chipd_error err;
	chipd_stream *s = NULL;
	uint64_t id;

	ck_assert_msg(chipd_submit(d->conn, &req, CD_CALL_MS, &id, &s, &err) == 0, "submit: %s",
		      err.message);
	return s;
}

/* A request waiting unstarted on chip 0 when its worker is SIGKILLed, needing all 16
 * of a chip's KV blocks: chip 1 (the least loaded) has none free (a stream pinned there,
 * not read, holds them), chip 2 has every one (it runs two synthetic streams). The
 * re-queue refused no_capacity by chip 1 is offered to chip 2, where the request
 * completes. A victim that published a token before the kill is not re-queued at all
 * (worker_lost after its tokens): the round is tried again. */
START_TEST(requeue_refused_no_capacity_tries_another_chip)
{
	/* no watchdog kill: the victim's steps (8 layers of 1024 x 1024 on the sim) take
	 * seconds of a CPU that a loaded machine shares out (once over 5 s at load 20) */
	const char *const args[] = {"--chips",	     "3",     "--kv-blocks", "16",
				    "--progress-ms", "60000", "--stuck-ms",  "60000", NULL};
	/* 2 * 2048 / 256 = 16 blocks, held while its tokens wait to be read */
	const struct chipd_param hold[] = {{"layers", 1},	  {"heads", 1},	      {"kv_heads", 1},
					   {"head_dim", 16},	  {"block_size", 256}, {"context", 0},
					   {"tokens", 2048}};
	/* 2 * 8 layers * 1 block = 16 blocks; 8 layers of 1024 x 1024 weights to fill
	 * before its first token */
	const struct chipd_param victim[] = {{"layers", 8},  {"heads", 16},	 {"kv_heads", 1},
					     {"head_dim", 64}, {"block_size", 64}, {"context", 4},
					     {"tokens", 60}};
	chipd_stream *held, *busy[2], *v;
	struct chipd_token tok;
	struct chipd_error err;
	uint32_t tokens = 0;
	struct cd d;
	int rc = 0;

	cd_start(&d, args, NULL);
	held = submit_kv(&d, 1, hold, 7);
	for (int i = 0; i < 2; i++)
		busy[i] = submit_synth(&d, 2, 1 << 20, 1000);
	for (int round = 0; round < 5; round++) {
		pid_t w0 = cd_worker_pid(&d, 0);

		ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, 0, 20000));
		v = submit_kv(&d, 0, victim, 7);
		ck_assert_int_eq(kill(w0, SIGKILL), 0);
		tokens = 0;
		while ((rc = chipd_stream_next(v, &tok, 30000, &err)) == 0 && !tok.final)
			tokens++;
		chipd_stream_close(v, CD_CALL_MS);
		if (rc == 0 || tokens == 0)
			break; /* re-queued: completed, or refused everywhere */
		ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, 20000));
	}
	ck_assert_msg(rc == 0, "the re-queued request ended %s after %u tokens: %s",
		      chipd_code_name(err.code), tokens, err.message);
	ck_assert_uint_eq(tokens + 1, 60);
	ck_assert_uint_ge(cd_stat(&d, "chip1", "rejected"), 1);
	ck_assert_uint_eq(cd_stat(&d, "chip2", "completed"), 1);
	chipd_stream_close(held, CD_CALL_MS);
	for (int i = 0; i < 2; i++)
		chipd_stream_close(busy[i], CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Several requests waiting unstarted on chip 0 of three when its worker is SIGKILLed:
 * the re-queues, moved in one pass, spread over chips 1 and 2 (each move counts on
 * its new chip at once) instead of all going to the chip the last count found least
 * busy. Every stream completes, or ends worker_lost, exactly once. */
START_TEST(requeues_spread_over_the_ready_chips)
{
	static const char *const three_chips[] = {"--chips", "3", NULL};
	enum { N = 6, TOKENS = 2 };
	chipd_stream *s[N];
	struct outcome o[N];
	uint64_t on[3] = {0}, t0;
	uint32_t saw_final = 0;
	struct cd d;

	memset(o, 0, sizeof(o));
	cd_start(&d, three_chips, NULL);
	/* admitted on chip 0; the first token of each is 300 ms away */
	for (int i = 0; i < N; i++)
		s[i] = submit_synth(&d, 0, TOKENS, 300000);
	ck_assert_int_eq(kill(cd_worker_pid(&d, 0), SIGKILL), 0);
	read_all(s, o, N, 30000);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(o[i].over, "stream %d never ended", i);
		if (o[i].code == CHIPD_OK)
			saw_final++;
		else
			ck_assert_int_eq(o[i].code, CHIPD_E_WORKER_LOST);
	}
	/* the completions as the chips count them, within a tick of the loop */
	t0 = now_ms();
	do {
		for (int c = 0; c < 3; c++) {
			char block[8];

			snprintf(block, sizeof(block), "chip%d", c);
			on[c] = cd_stat(&d, block, "completed");
		}
		if (on[0] + on[1] + on[2] == saw_final)
			break;
		usleep(20000);
	} while (now_ms() - t0 < LIVENESS_MS);
	ck_assert_uint_eq(on[0] + on[1] + on[2], saw_final);
	ck_assert_msg(saw_final >= N / 2, "only %u of %d streams completed", saw_final, N);
	ck_assert_msg(on[1] >= 1 && on[2] >= 1,
		      "re-queues not spread: chip1 completed %llu, chip2 %llu (chip0 %llu)",
		      (unsigned long long)on[1], (unsigned long long)on[2],
		      (unsigned long long)on[0]);
	for (int i = 0; i < N; i++)
		chipd_stream_close(s[i], CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A request cancelled (the cancel answered ok) while its worker still builds its first
 * step, whose worker then dies before it wrote the end: the request has no token, but
 * it is not moved to the other chip and run there; its stream ends cancelled, as
 * chipctl(1) says of a cancel, with no token, and counts in err_cancelled. */
START_TEST(cancelled_request_is_not_requeued)
{
	/* its first step takes 800 ms of host work on chip 0's orchestrator */
	struct chipd_param p[] = {{"tokens", 2}, {"host_us", 800000}, {"device_us", 0}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 3, .chip = 0};
	struct chipd_token tok;
	struct chipd_error err;
	chipd_stream *s = NULL;
	uint32_t tokens = 0;
	uint64_t id;
	struct cd d;
	pid_t w0;
	int rc;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), 0);
	usleep(100 * 1000); /* the orchestrator is in the step's host work */
	ck_assert_int_eq(chipd_cancel(d.conn, id, CD_CALL_MS, &err), 0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	while ((rc = chipd_stream_next(s, &tok, 10000, &err)) == 0) {
		tokens++;
		if (tok.final)
			break;
	}
	ck_assert_msg(rc != 0 && err.code == CHIPD_E_CANCELLED && tokens == 0,
		      "the cancelled request ended %s after %u tokens (%s)",
		      rc == 0 ? "FINAL" : chipd_code_name(err.code), tokens,
		      rc == 0 ? "re-queued and run" : err.message);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_uint_eq(cd_stat(&d, "chip1", "admitted"), 0);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_cancelled"), 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A cancel that arrives while a dead worker's unstarted request is being moved to the
 * other chip: the request is live (its stream goes on), so the cancel is answered ok,
 * not not_found, and the stream ends cancelled with no token instead of running. */
START_TEST(cancel_during_requeue_is_not_lost)
{
	struct chipd_param p[] = {{"tokens", 2}, {"host_us", 800000}, {"device_us", 0}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 3, .chip = 0};
	struct chipd_token tok;
	struct chipd_error err, cerr;
	chipd_stream *s = NULL;
	uint32_t tokens = 0;
	uint64_t id;
	struct cd d;
	int rc, crc;

	cd_start(&d, two_chips, NULL);
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), 0);
	usleep(100 * 1000); /* the orchestrator is in the step's host work */
	ck_assert_int_eq(kill(cd_worker_pid(&d, 0), SIGKILL), 0);
	usleep(20 * 1000); /* the death is handled: the request waits for its move */
	crc = chipd_cancel(d.conn, id, CD_CALL_MS, &cerr);
	while ((rc = chipd_stream_next(s, &tok, 10000, &err)) == 0) {
		tokens++;
		if (tok.final)
			break;
	}
	ck_assert_msg(crc == 0, "cancel during the re-queue: %s (%s); the stream then ended %s "
				"after %u tokens",
		      chipd_code_name(cerr.code), cerr.message,
		      rc == 0 ? "FINAL" : chipd_code_name(err.code), tokens);
	ck_assert_msg(rc != 0 && err.code == CHIPD_E_CANCELLED && tokens == 0,
		      "the cancelled request ended %s after %u tokens",
		      rc == 0 ? "FINAL" : chipd_code_name(err.code), tokens);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "err_cancelled"), 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* Starts chipd with @args, SIGSTOPs the spawner (the workers' parent) and SIGKILLs
 * chip 0's worker, whose pid is *@first; returns the spawner's pid. */
static pid_t kill_worker_of_stopped_spawner(struct cd *d, const char *const *args, pid_t *first)
{
	pid_t spawner;

	cd_start(d, args, NULL);
	*first = cd_worker_pid(d, 0);
	spawner = tu_parent_pid(*first);
	ck_assert_int_gt(spawner, 1);
	ck_assert_int_eq(tu_parent_pid(spawner), d->pid);
	tu_sigstop(spawner);
	ck_assert_int_eq(kill(*first, SIGKILL), 0);
	return spawner;
}

/* A worker's restart while the spawner (which forks the workers) does not run, for
 * longer than the 5 s a start is given: the start is given up on, and until the
 * spawner answers it no other start is asked, so the event loop serves throughout (new
 * connections are answered) and the start the spawner forks late is not mistaken for a
 * later one's. Before, every retry blocked the loop another 5 s (no new connection
 * answered while the spawner was stopped) and queued one more fork; once the spawner
 * ran again, each start read the reply of an earlier one: chip 0 got workers nobody
 * watched and deaths it did not have (restarts and worker_deaths above the two
 * SIGKILLs below). */
START_TEST(restart_while_the_spawner_is_stopped)
{
	static const char *const args[] = {"--chips", "2", "--backoff-min-ms", "1", NULL};
	struct chipd_status *st = calloc(1, sizeof(*st));
	struct chipd_error err;
	pid_t spawner, first, second;
	struct cd d;
	bool served;

	ck_assert_ptr_nonnull(st);
	spawner = kill_worker_of_stopped_spawner(&d, args, &first);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_BACKOFF, 0, 10000));
	served = cd_answers_new_connections(&d, 1000, 7000);
	ck_assert_int_eq(kill(spawner, SIGCONT), 0);
	ck_assert_msg(served, "a new connection was not answered within 1 s while the spawner "
			      "was stopped");
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, first, 20000));
	second = cd_worker_pid(&d, 0);
	ck_assert_int_eq(kill(second, SIGKILL), 0); /* a start now reads its own reply */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, second, 20000));
	ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, st, &err), 0);
	ck_assert_uint_eq(st->chips[0].restarts, 2);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "worker_deaths"), 2);
	ck_assert_int_eq(tu_parent_pid((pid_t)st->chips[0].pid), spawner);
	cd_expect_stream(cd_submit(&d, 3, 0), 3, CHIPD_OK, 10000);
	free(st);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* The first start asked of a spawner that does not run stalls nobody either: while it
 * waits for the reply (5 s), new connections are answered and pinged, each within 2 s,
 * and chip 1 serves. Before, the event loop waited for that reply: a connection tried
 * then was not answered (chipd_connect_timeout -ETIMEDOUT at 2 s). */
START_TEST(first_start_of_a_stopped_spawner_stalls_nothing)
{
	static const char *const args[] = {"--chips", "2", "--backoff-min-ms", "1", NULL};
	pid_t spawner, first;
	struct cd d;
	bool served;

	spawner = kill_worker_of_stopped_spawner(&d, args, &first);
	/* the death is seen; its restart is asked on the next tick */
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_BACKOFF, 0, 10000));
	served = cd_answers_new_connections(&d, 2000, 3000);
	cd_expect_stream(cd_submit(&d, 3, 0), 3, CHIPD_OK, 10000); /* chip 1's */
	ck_assert_int_eq(kill(spawner, SIGCONT), 0);
	ck_assert_msg(served, "a new connection was not answered within 2 s while the spawner "
			      "was stopped");
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, first, 20000));
	ck_assert_int_eq(tu_parent_pid(cd_worker_pid(&d, 0)), spawner);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("liveness");
	const struct tu_case cases[] = {
	    {"dead_node_ends_every_stream_node_lost", dead_node_ends_every_stream_node_lost},
	    {"chipctl_count_exits_when_node_dies", chipctl_count_exits_when_node_dies},
	    {"chipctl_follow_exits_when_node_dies", chipctl_follow_exits_when_node_dies},
	    {"requeued_requests_stream_to_their_clients",
	     requeued_requests_stream_to_their_clients},
	    {"requeue_to_a_stuck_worker_stalls_nothing", requeue_to_a_stuck_worker_stalls_nothing},
	    {"requeue_given_up_by_a_stuck_worker_ends_once",
	     requeue_given_up_by_a_stuck_worker_ends_once},
	    {"requeue_target_killed_moves_on", requeue_target_killed_moves_on},
	    {"requeue_refused_no_capacity_tries_another_chip",
	     requeue_refused_no_capacity_tries_another_chip},
	    {"requeues_spread_over_the_ready_chips", requeues_spread_over_the_ready_chips},
	    {"cancelled_request_is_not_requeued", cancelled_request_is_not_requeued},
	    {"cancel_during_requeue_is_not_lost", cancel_during_requeue_is_not_lost},
	    {"restart_while_the_spawner_is_stopped", restart_while_the_spawner_is_stopped},
	    {"first_start_of_a_stopped_spawner_stalls_nothing",
	     first_start_of_a_stopped_spawner_stalls_nothing},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);

		tcase_add_test(tc, cases[i].test);
		/* chipd start-ups, a 1 s stop and generous liveness bounds, on a loaded
		 * machine or under a sanitizer */
		tcase_set_timeout(tc, 120);
		suite_add_tcase(s, tc);
	}
	return tu_run(s);
}
