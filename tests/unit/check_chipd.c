/* check_chipd.c - process-level tests of the supervisor: a real chipd with sim chips,
 * driven through libchipd. */
#include "chipd_fixture.h"
#include "testutil.h"
#include "wl.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *const two_chips[] = {"--chips", "2", NULL};

START_TEST(start_and_stop)
{
	struct chipd_status st;
	struct chipd_error err;
	struct cd d;
	uint32_t pid = 0;

	cd_start(&d, two_chips, NULL);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, &pid, &err), 0);
	ck_assert_int_eq((pid_t)pid, d.pid);
	ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, &st, &err), 0);
	ck_assert_int_eq(st.state, CHIPD_SUP_READY);
	ck_assert_uint_eq(st.nchips, 2);
	for (uint32_t i = 0; i < 2; i++) {
		ck_assert_int_eq(st.chips[i].state, CHIPD_CHIP_READY);
		ck_assert_uint_gt(st.chips[i].pid, 0);
		ck_assert_int_eq(st.chips[i].gpu, -1);
	}
	ck_assert(cd_region_exists(&d));
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	ck_assert_msg(!cd_region_exists(&d), "region left in /dev/shm");
	ck_assert_int_ne(access(d.pidfile, F_OK), 0);
}
END_TEST

/* SIGHUP is logged and ignored; SIGQUIT (Ctrl-\ in a terminal, or sent by hand) to a
 * worker changes nothing (the supervisor ends workers), and to chipd it is a stop as
 * SIGTERM's: exit 0, region and pid file removed (docs/chipd.8). Before, SIGQUIT's
 * default action killed chipd and its workers on the spot, leaving the region and the
 * pid file behind (found by the operations chaos round). */
START_TEST(sighup_ignored_sigquit_stops)
{
	struct chipd_error err;
	uint32_t pid = 0;
	pid_t w0;
	struct cd d;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
	ck_assert_int_eq(kill(w0, SIGQUIT), 0);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, &pid, &err), 0);
	ck_assert_int_eq((pid_t)pid, d.pid);
	cd_expect_stream(cd_submit(&d, 2, 0), 2, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_worker_pid(&d, 0), w0);
	ck_assert_int_eq(cd_stop(&d, SIGQUIT, 10000), 0);
	ck_assert_msg(!cd_region_exists(&d), "region left in /dev/shm");
	ck_assert_int_ne(access(d.pidfile, F_OK), 0);
}
END_TEST

START_TEST(submit_and_stream)
{
	struct cd d;
	chipd_stream *s;

	cd_start(&d, two_chips, NULL);
	s = cd_submit(&d, 20, 100);
	cd_expect_stream(s, 20, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

#define CLIENTS	   16
#define PER_CLIENT 8

struct client_arg {
	struct cd *d;
	uint32_t completed;
	enum chipd_code last_code;
	uint32_t last_n;
};

static void *client_thread(void *arg)
{
	struct client_arg *a = arg;

	for (int i = 0; i < PER_CLIENT; i++) {
		enum chipd_code code;
		chipd_stream *s = cd_submit(a->d, 5, 50);

		uint32_t n = cd_drain_stream(s, &code, CD_CALL_MS);

		if (n == 5 && code == CHIPD_OK)
			a->completed++;
		else
			a->last_code = code, a->last_n = n;
		chipd_stream_close(s, CD_CALL_MS);
	}
	return NULL;
}

START_TEST(sixteen_concurrent_clients)
{
	struct client_arg args[CLIENTS];
	pthread_t th[CLIENTS];
	struct chipd_stat *stats = calloc(512, sizeof(*stats));
	struct chipd_error err;
	uint64_t completed = 0, tokens = 0;
	uint32_t n = 0, total = 0;
	struct cd d;

	ck_assert_ptr_nonnull(stats);
	cd_start(&d, two_chips, NULL);
	for (int i = 0; i < CLIENTS; i++) {
		args[i] = (struct client_arg){.d = &d};
		ck_assert_int_eq(pthread_create(&th[i], NULL, client_thread, &args[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(th[i], NULL);
		total += args[i].completed;
		if (args[i].completed != PER_CLIENT)
			fprintf(stderr, "client %d: %u tokens, then %s\n", i, args[i].last_n,
				chipd_code_name(args[i].last_code));
	}
	ck_assert_uint_eq(total, CLIENTS * PER_CLIENT);
	/* a worker counts a request just after its final token is out: poll briefly */
	for (uint64_t end = now_ms() + 2000; now_ms() < end; usleep(5000)) {
		completed = tokens = 0;
		ck_assert_int_eq(chipd_stats(d.conn, stats, 512, &n, &err), 0);
		for (uint32_t i = 0; i < n; i++) {
			if (strncmp(stats[i].block, "chip", 4) != 0)
				continue;
			if (strcmp(stats[i].name, "completed") == 0)
				completed += stats[i].value;
			if (strcmp(stats[i].name, "tokens") == 0)
				tokens += stats[i].value;
		}
		if (completed == CLIENTS * PER_CLIENT && tokens == CLIENTS * PER_CLIENT * 5)
			break;
	}
	ck_assert_uint_eq(completed, CLIENTS * PER_CLIENT);
	ck_assert_uint_eq(tokens, CLIENTS * PER_CLIENT * 5);
	free(stats);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(killed_worker_gives_worker_lost_and_comes_back)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct chipd_token tok;
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;
	pid_t wpid;
	uint64_t t0;
	int rc;

	cd_start(&d, args, NULL);
	s = cd_submit(&d, 100000, 1000); /* ~100 s: it will not finish by itself */
	ck_assert_int_eq(chipd_stream_next(s, &tok, CD_CALL_MS, &err), 0);
	wpid = cd_worker_pid(&d, 0);
	ck_assert_int_gt(wpid, 0);
	t0 = now_ms();
	ck_assert_int_eq(kill(wpid, SIGKILL), 0);
	do
		rc = chipd_stream_next(s, &tok, CD_CALL_MS, &err);
	while (rc == 0);
	ck_assert_int_eq(rc, -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_WORKER_LOST);
	ck_assert_msg(now_ms() - t0 < 1000, "worker_lost took %llu ms",
		      (unsigned long long)(now_ms() - t0));
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, wpid, 5000));
	s = cd_submit(&d, 5, 50);
	cd_expect_stream(s, 5, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(crash_loop_marks_the_chip_failed)
{
	const char *const args[] = {
	    "--chips", "2", "--crash-limit", "3", "--crash-window-ms", "60000", "--backoff-max-ms",
	    "200",     NULL};
	struct chipd_status st;
	struct chipd_error err;
	chipd_stream *s;
	struct cd d;

	cd_start(&d, args, NULL);
	for (int i = 0; i < 3; i++) {
		pid_t wpid = cd_worker_pid(&d, 0);

		ck_assert_int_gt(wpid, 0);
		ck_assert_int_eq(kill(wpid, SIGKILL), 0);
		if (i < 2)
			ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, wpid, 5000));
	}
	ck_assert(cd_wait_chip(&d, 0, CHIPD_CHIP_FAILED, 0, 5000));
	ck_assert_int_eq(chipd_status(d.conn, CD_CALL_MS, &st, &err), 0);
	ck_assert_int_eq(st.chips[1].state, CHIPD_CHIP_READY);
	ck_assert_uint_eq(st.chips[0].restarts, 3);
	s = cd_submit(&d, 5, 50); /* the other chip keeps serving */
	cd_expect_stream(s, 5, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(sigterm_lets_inflight_requests_finish)
{
	chipd_stream *s[4];
	struct cd d;

	cd_start(&d, two_chips, NULL);
	for (int i = 0; i < 4; i++)
		s[i] = cd_submit(&d, 200, 2000); /* ~0.4 s each */
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	for (int i = 0; i < 4; i++)
		cd_expect_stream(s[i], 200, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	ck_assert(!cd_region_exists(&d));
}
END_TEST

START_TEST(draining_refuses_new_work)
{
	struct chipd_param p[] = {{"tokens", 5}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 1, .chip = -1};
	struct chipd_error err;
	chipd_stream *s, *s2;
	uint64_t id;
	struct cd d;

	cd_start(&d, two_chips, NULL);
	s = cd_submit(&d, 300, 2000);
	ck_assert_int_eq(chipd_drain(d.conn, 10000, CD_CALL_MS, &err), 0);
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s2, &err), -EREMOTEIO);
	ck_assert_int_eq(err.code, CHIPD_E_DRAINING);
	cd_expect_stream(s, 300, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, 0, 10000), 0); /* it exits by itself */
	ck_assert(!cd_region_exists(&d));
}
END_TEST

/* A SIGTERM during a drain whose grace is longer than chipd's own stops chipd within
 * its own grace (scancel and systemctl stop SIGKILL after 30 s and TimeoutStopSec):
 * the long request ends cancelled, chipd exits 0 well before the drain's grace. */
START_TEST(sigterm_cuts_a_longer_drain_grace)
{
	static const char *const args[] = {"--chips", "1", "--grace-ms", "500", NULL};
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	struct cd d;

	cd_start(&d, args, NULL);
	s = cd_submit(&d, 100000, 1000); /* ~100 s */
	ck_assert_int_eq(chipd_drain(d.conn, 600000, CD_CALL_MS, &err), 0);
	usleep(300 * 1000); /* the drain began (the next tick) */
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	cd_drain_stream(s, &code, 10000);
	ck_assert_int_eq(code, CHIPD_E_CANCELLED);
	chipd_stream_close(s, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, 0, 10000), 0); /* it exits by itself, in about 0.5 s */
	ck_assert(!cd_region_exists(&d));
}
END_TEST

/* Runs chipd with the NULL-ended @args (and nothing else) to its exit; its standard
 * error lands in @err. Returns its exit status. */
static int run_chipd(const char *const *args, char *err, size_t cap)
{
	const char *argv[16];
	int p[2], n = 0, status;
	size_t len = 0;
	ssize_t got;
	pid_t pid;

	argv[n++] = "chipd";
	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execv(CHIPD_BIN, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	/* to the end of file: a detached chipd's own child writes here too */
	while (len < cap - 1 && (got = read(p[0], err + len, cap - 1 - len)) > 0)
		len += (size_t)got;
	err[len] = '\0';
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "chipd died of signal %d", WTERMSIG(status));
	return WEXITSTATUS(status);
}

/* A second chipd on a served instance exits 73 and names the instance and the pid that
 * serves it, whether the pid file or the region tells it: with the same pid file, with
 * another one, detached (its parent exits with the child's status), and after the pid
 * file was removed. (Only the first case used to exit 73: the region's refusal gave 1
 * when detached, which systemd restarts.) */
START_TEST(second_chipd_on_the_instance_is_refused)
{
	char err[1024], other[160], want_inst[96], want_pid[32];
	struct cd d;

	cd_start(&d, two_chips, NULL);
	snprintf(other, sizeof(other), "%s.other", d.pidfile);
	snprintf(want_inst, sizeof(want_inst), "instance \"%s\"", d.instance);
	snprintf(want_pid, sizeof(want_pid), "pid %d ", (int)d.pid);
	const char *const cases[][9] = {
	    {"--foreground", "--instance", d.instance, "--pidfile", d.pidfile, "--chips", "1"},
	    {"--foreground", "--instance", d.instance, "--pidfile", other, "--chips", "1"},
	    {"--instance", d.instance, "--pidfile", other, "--chips", "1"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(run_chipd(cases[i], err, sizeof(err)) == 73, "case %zu: %s", i, err);
		ck_assert_msg(strstr(err, want_inst) && strstr(err, want_pid), "case %zu: %s", i,
			      err);
		ck_assert_msg(!strchr(err, '\n') || !strchr(err, '\n')[1], "case %zu: %s", i, err);
		ck_assert_int_eq(access(other, F_OK), -1); /* the loser leaves no pid file */
	}
	/* its pid file removed, the instance is still served */
	ck_assert_int_eq(unlink(d.pidfile), 0);
	ck_assert_msg(run_chipd(cases[0], err, sizeof(err)) == 73, "%s", err);
	ck_assert_msg(strstr(err, want_inst) && strstr(err, want_pid), "%s", err);
	ck_assert_int_eq(chipd_ping(d.conn, CD_CALL_MS, NULL, NULL), 0); /* unharmed */
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	ck_assert(!cd_region_exists(&d));
}
END_TEST

START_TEST(killed_chipd_leaves_a_region_the_next_start_reclaims)
{
	const char *args[] = {"--chips", "1", NULL};
	struct chipd_status st;
	struct chipd_error err;
	chipd_conn *c;
	struct cd d, d2;

	cd_start(&d, args, NULL);
	ck_assert_int_eq(cd_stop(&d, SIGKILL, 5000), 128 + SIGKILL);
	ck_assert(cd_region_exists(&d));
	/* a client of the dead instance gets a clear error */
	ck_assert_int_eq(chipd_connect(d.instance, &c, &err), -ESTALE);
	cd_start_as(&d2, d.instance, args, NULL);
	ck_assert_int_eq(chipd_status(d2.conn, CD_CALL_MS, &st, &err), 0);
	ck_assert_int_eq(st.state, CHIPD_SUP_READY);
	ck_assert_int_eq(cd_stop(&d2, SIGTERM, 10000), 0);
	ck_assert(!cd_region_exists(&d2));
}
END_TEST

START_TEST(print_config_shows_sources)
{
	char out[8192];
	int p[2], status;
	ssize_t n, len = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(p[1], 1);
		setenv("CHIPD_QUEUE", "7", 1);
		execl(CHIPD_BIN, "chipd", "--print-config", "--chips", "3", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], out + len, sizeof(out) - 1 - (size_t)len)) > 0)
		len += n;
	out[len] = 0;
	close(p[0]);
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_msg(strstr(out, "(flag)") && strstr(out, "(env)") && strstr(out, "(default)"),
		      "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "3"));
	ck_assert_ptr_nonnull(strstr(out, "7"));
}
END_TEST

/* A datagram listener standing in for systemd's notify socket. */
static int notify_listener(char *name, size_t cap)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	socklen_t len;

	ck_assert_int_ge(fd, 0);
	snprintf(name, cap, "@chipd-test-notify-%d", (int)getpid());
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	memcpy(a.sun_path + 1, name + 1, strlen(name) - 1); /* abstract: sun_path[0] = 0 */
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, len), 0);
	return fd;
}

/* Waits up to @ms for a datagram containing @what. */
static bool notify_got(int fd, const char *what, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	char buf[512];

	while (now_ms() < end) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (poll(&pfd, 1, 50) != 1)
			continue;
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = 0;
		if (strstr(buf, what))
			return true;
	}
	return false;
}

START_TEST(sd_notify_ready_watchdog_stopping)
{
	char name[108], envs[2][160];
	const char *env[3];
	struct cd d;
	int fd = notify_listener(name, sizeof(name));

	snprintf(envs[0], sizeof(envs[0]), "NOTIFY_SOCKET=%s", name);
	snprintf(envs[1], sizeof(envs[1]), "WATCHDOG_USEC=200000");
	env[0] = envs[0];
	env[1] = envs[1];
	env[2] = NULL;
	cd_start(&d, two_chips, env);
	ck_assert_msg(notify_got(fd, "READY=1", 5000), "no READY=1");
	ck_assert_msg(notify_got(fd, "WATCHDOG=1", 2000), "no WATCHDOG=1");
	kill(d.pid, SIGTERM);
	ck_assert_msg(notify_got(fd, "STOPPING=1", 5000), "no STOPPING=1");
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	close(fd);
}
END_TEST

/* A client that dies with a stream open: its request is cancelled, its ring
 * reclaimed. */
static int vanishing_client(void *arg)
{
	struct cd *d = arg;
	struct chipd_error err;
	struct chipd_param p[] = {{"tokens", 100000}, {"device_us", 1000}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = -1};
	chipd_conn *c;
	chipd_stream *s;
	uint64_t id;

	if (chipd_connect(d->instance, &c, &err) ||
	    chipd_submit(c, &req, CD_CALL_MS, &id, &s, &err))
		return 1;
	_exit(0); /* no close, no cancel */
}

START_TEST(dead_client_is_cancelled_and_its_ring_reclaimed)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct cd d;
	int status;
	pid_t pid;
	uint64_t end;

	cd_start(&d, args, NULL);
	pid = tu_fork(vanishing_client, &d);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	end = now_ms() + 5000;
	while (now_ms() < end && (cd_stat(&d, "chip0", "cancelled") != 1 ||
				  cd_stat(&d, "supervisor", "rings_in_use") != 0))
		usleep(10000);
	ck_assert_uint_eq(cd_stat(&d, "chip0", "cancelled"), 1);
	ck_assert_uint_eq(cd_stat(&d, "supervisor", "rings_in_use"), 0);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(unstarted_request_moves_to_a_healthy_worker)
{
	struct chipd_param p[] = {{"tokens", 3}, {"device_us", 300000}};
	struct chipd_request req = {.workload = "synthetic", .params = p, .nparams = 2, .chip = 0};
	struct chipd_error err;
	chipd_stream *s;
	uint64_t id;
	struct cd d;
	pid_t w0;

	cd_start(&d, two_chips, NULL);
	w0 = cd_worker_pid(&d, 0);
	/* admitted on chip 0; its first token is 300 ms away when the worker dies */
	ck_assert_int_eq(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err), 0);
	ck_assert_int_eq(kill(w0, SIGKILL), 0);
	cd_expect_stream(s, 3, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(stuck_worker_is_killed_and_restarted)
{
	const char *const args[] = {"--chips", "1", "--heartbeat-ms", "100", "--stuck-ms",
				    "600",     NULL};
	chipd_stream *s;
	struct cd d;
	pid_t w0;

	cd_start(&d, args, NULL);
	w0 = cd_worker_pid(&d, 0);
	tu_sigstop(w0);
	ck_assert_msg(cd_wait_chip(&d, 0, CHIPD_CHIP_READY, w0, 5000),
		      "the stopped worker was not replaced");
	s = cd_submit(&d, 5, 50);
	cd_expect_stream(s, 5, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* A kernel that faults on the device mid-request (synthetic fail_step): the stream
 * ends device_error after the tokens before it — as does any request that shared that
 * step on the chip, since they share the device — while the other chip's request
 * completes, and the failing chip keeps serving and counts it. */
static chipd_stream *submit_on(struct cd *d, int32_t chip, const struct chipd_param *p, uint32_t np)
{
	struct chipd_error err;
	chipd_stream *s = NULL;

	ck_assert_int_eq(cd_submit_to(d, "synthetic", chip, p, np, &s, &err), 0);
	return s;
}

START_TEST(device_error_mid_step_ends_only_its_stream)
{
	struct chipd_param badp[] = {{"tokens", 10}, {"device_us", 1000}, {"fail_step", 3}};
	struct chipd_param okp[] = {{"tokens", 20}, {"device_us", 1000}};
	enum chipd_code code;
	chipd_stream *bad, *good;
	uint64_t end;
	struct cd d;

	cd_start(&d, two_chips, NULL);
	good = submit_on(&d, 1, okp, 2);
	bad = submit_on(&d, 0, badp, 3);
	ck_assert_uint_eq(cd_drain_stream(bad, &code, CD_CALL_MS), 3);
	ck_assert_int_eq(code, CHIPD_E_DEVICE_ERROR);
	ck_assert_uint_eq(cd_drain_stream(good, &code, CD_CALL_MS), 20);
	ck_assert_int_eq(code, CHIPD_OK);
	chipd_stream_close(bad, CD_CALL_MS);
	chipd_stream_close(good, CD_CALL_MS);
	end = now_ms() + 2000;
	while (now_ms() < end && cd_stat(&d, "chip0", "device_errors") < 1)
		usleep(5000);
	ck_assert_uint_ge(cd_stat(&d, "chip0", "device_errors"), 1);
	good = submit_on(&d, 0, okp, 2); /* the chip that failed a step still serves */
	cd_expect_stream(good, 20, CHIPD_OK, CD_CALL_MS);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

/* The "workloads" answer is the validators' own table, row for row, and what it lists
 * is what a worker accepts: each workload runs with every parameter it lists set to
 * the default it lists. */
START_TEST(workloads_answer_is_the_validator_table)
{
	static const char *const one_chip[] = {"--chips", "1", NULL};
	struct chipd_workload *wl = calloc(CHIPD_MAX_WORKLOADS, sizeof(*wl));
	const char *const *names = wl_names();
	struct chipd_param p[CHIPD_MAX_PARAMS];
	struct chipd_error err;
	uint32_t n = 0, i = 0;
	struct cd d;

	ck_assert_ptr_nonnull(wl);
	cd_start(&d, one_chip, NULL);
	ck_assert_msg(chipd_workloads(d.conn, CD_CALL_MS, wl, CHIPD_MAX_WORKLOADS, &n, &err) == 0,
		      "%s", err.message);
	for (; names[i]; i++) {
		const struct wl_param_info *t;
		int nt = wl_param_table(names[i], &t);

		ck_assert_uint_lt(i, n);
		ck_assert_str_eq(wl[i].name, names[i]);
		ck_assert_str_eq(wl[i].doc, wl_summary(names[i]));
		ck_assert_int_eq((int)wl[i].nparams, nt);
		for (int j = 0; j < nt; j++) {
			ck_assert_str_eq(wl[i].params[j].key, t[j].key);
			ck_assert_int_eq(wl[i].params[j].def, t[j].def);
			ck_assert_int_eq(wl[i].params[j].min, t[j].lo);
			ck_assert_int_eq(wl[i].params[j].max, t[j].hi);
			ck_assert_str_eq(wl[i].params[j].doc, t[j].doc);
		}
	}
	ck_assert_uint_eq(n, i);
	for (i = 0; i < n; i++) {
		struct chipd_request req = {
		    .workload = wl[i].name, .params = p, .nparams = wl[i].nparams, .chip = -1};
		chipd_stream *s = NULL;
		uint64_t id;

		req.max_tokens = 1;
		for (uint32_t j = 0; j < wl[i].nparams; j++)
			p[j] = (struct chipd_param){wl[i].params[j].key, wl[i].params[j].def};
		ck_assert_msg(chipd_submit(d.conn, &req, CD_CALL_MS, &id, &s, &err) == 0, "%s: %s",
			      wl[i].name, err.message);
		cd_expect_stream(s, 1, CHIPD_OK, CD_CALL_MS);
	}
	/* too small an array: the first entries, and how many there are */
	memset(wl, 0, sizeof(*wl));
	ck_assert_int_eq(chipd_workloads(d.conn, CD_CALL_MS, wl, 1, &n, &err), -ENOBUFS);
	ck_assert_uint_eq(n, i);
	ck_assert_str_eq(wl[0].name, names[0]);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
	free(wl);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("chipd");
	const struct tu_case cases[] = {
	    {"start_and_stop", start_and_stop},
	    {"sighup_ignored_sigquit_stops", sighup_ignored_sigquit_stops},
	    {"submit_and_stream", submit_and_stream},
	    {"sixteen_concurrent_clients", sixteen_concurrent_clients},
	    {"killed_worker", killed_worker_gives_worker_lost_and_comes_back},
	    {"crash_loop", crash_loop_marks_the_chip_failed},
	    {"sigterm_inflight", sigterm_lets_inflight_requests_finish},
	    {"draining", draining_refuses_new_work},
	    {"sigterm_cuts_drain_grace", sigterm_cuts_a_longer_drain_grace},
	    {"second_refused", second_chipd_on_the_instance_is_refused},
	    {"stale_reclaim", killed_chipd_leaves_a_region_the_next_start_reclaims},
	    {"print_config", print_config_shows_sources},
	    {"sd_notify", sd_notify_ready_watchdog_stopping},
	    {"dead_client", dead_client_is_cancelled_and_its_ring_reclaimed},
	    {"requeue", unstarted_request_moves_to_a_healthy_worker},
	    {"stuck_worker", stuck_worker_is_killed_and_restarted},
	    {"device_error", device_error_mid_step_ends_only_its_stream},
	    {"workloads", workloads_answer_is_the_validator_table},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
	cd_add_counter_cases(s);
	cd_add_abandon_cases(s);
	cd_add_clstat_cases(s);
	cd_add_cancel_cases(s);
	return tu_run(s);
}
