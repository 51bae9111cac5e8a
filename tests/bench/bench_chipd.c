/* bench_chipd.c - see bench_chipd.h. */
#include "bench_chipd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CHIPD_BIN
#define CHIPD_BIN "chipd"
#endif

#define BENCH_CHIPD_ARGS_MAX 32
#define BENCH_CHIPD_POLL_US  1000 /* status polling: fine enough for ms-scale events */

uint64_t bench_chipd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_chipd_clients_ready(atomic_uint *ready, unsigned n, unsigned ms)
{
	uint64_t end = bench_chipd_now_ns() + (uint64_t)ms * 1000000u;

	while (atomic_load_explicit(ready, memory_order_acquire) < n && bench_chipd_now_ns() < end)
		usleep(100);
	return bench_chipd_now_ns();
}

const char *bench_chipd_bin(const char *path)
{
	return path ? path : CHIPD_BIN;
}

/* The child: readiness pipe on fd 3, stdin from /dev/null, then exec. */
static void bench_chipd_exec(const char *bin, char **argv, int wfd, pid_t parent)
{
	int null = open("/dev/null", O_RDONLY);

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive chipbench */
	if (getppid() != parent)
		_exit(127);
	if (null >= 0 && null != 0) {
		dup2(null, 0);
		close(null);
	}
	if (wfd != 3) {
		dup2(wfd, 3);
		close(wfd);
	}
	execv(bin, argv);
	fprintf(stderr, "chipbench: exec %s: %s\n", bin, strerror(errno));
	_exit(127);
}

/* Waits up to @ms for the readiness newline on @fd. Returns 0, -ETIMEDOUT, or -EPIPE
 * when chipd closed the pipe without it (it exited). */
static int bench_chipd_wait_ready(int fd, unsigned ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint64_t end = bench_chipd_now_ns() + (uint64_t)ms * 1000000u;
	char c;

	for (;;) {
		uint64_t now = bench_chipd_now_ns();
		int rc;

		if (now >= end)
			return -ETIMEDOUT;
		rc = poll(&pfd, 1, (int)((end - now) / 1000000u) + 1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			return rc < 0 ? -errno : -ETIMEDOUT;
		rc = (int)read(fd, &c, 1);
		if (rc < 0 && errno == EINTR)
			continue;
		return rc == 1 && c == '\n' ? 0 : -EPIPE;
	}
}

int bench_chipd_start(struct bench_chipd *d, const char *bin, const char *tag, unsigned chips,
		      const char *const *extra)
{
	char *argv[BENCH_CHIPD_ARGS_MAX];
	char nchips[16];
	struct chipd_error err;
	pid_t parent = getpid();
	uint64_t t0;
	int p[2], n = 0, rc;

	memset(d, 0, sizeof(*d));
	snprintf(d->instance, sizeof(d->instance), "bench-%d-%s", (int)parent, tag);
	snprintf(d->pidfile, sizeof(d->pidfile), "/tmp/chipd-bench.%s.pid", d->instance);
	snprintf(nchips, sizeof(nchips), "%u", chips);
	argv[n++] = (char *)bin;
	argv[n++] = "--foreground";
	argv[n++] = "--chips";
	argv[n++] = nchips;
	argv[n++] = "--log-level";
	argv[n++] = "warn";
	argv[n++] = "--instance";
	argv[n++] = d->instance;
	argv[n++] = "--pidfile";
	argv[n++] = d->pidfile;
	argv[n++] = "--notify-fd";
	argv[n++] = "3";
	for (; extra && *extra && n < BENCH_CHIPD_ARGS_MAX - 1; extra++)
		argv[n++] = (char *)*extra;
	argv[n] = NULL;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	t0 = bench_chipd_now_ns();
	d->pid = fork();
	if (d->pid < 0) {
		rc = -errno;
		d->pid = 0;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (d->pid == 0) {
		close(p[0]);
		/* dup2 onto 3 clears O_CLOEXEC; when the pipe already is 3, clear it here */
		if (p[1] == 3)
			fcntl(3, F_SETFD, 0);
		bench_chipd_exec(bin, argv, p[1], parent);
	}
	close(p[1]);
	rc = bench_chipd_wait_ready(p[0], BENCH_CHIPD_READY_MS);
	d->ready_ns = bench_chipd_now_ns() - t0;
	close(p[0]);
	if (rc) {
		fprintf(stderr, "chipbench: chipd %s (%s) not ready: %s\n", d->instance, bin,
			rc == -EPIPE ? "it exited" : strerror(-rc));
		goto err_stop;
	}
	rc = chipd_connect(d->instance, &d->conn, &err);
	if (rc) {
		fprintf(stderr, "chipbench: connect %s: %s\n", d->instance, err.message);
		goto err_stop;
	}
	return 0;

err_stop:
	bench_chipd_stop(d, NULL);
	return rc;
}

int bench_chipd_stop(struct bench_chipd *d, uint64_t *stop_ns)
{
	uint64_t t0 = bench_chipd_now_ns(), end = t0 + BENCH_CHIPD_STOP_MS * 1000000ull;
	char region[128];
	int status;

	chipd_close(d->conn);
	d->conn = NULL;
	if (stop_ns)
		*stop_ns = 0;
	if (d->pid <= 0)
		return 0;
	kill(d->pid, SIGTERM);
	while (bench_chipd_now_ns() < end) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			if (stop_ns)
				*stop_ns = bench_chipd_now_ns() - t0;
			d->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		usleep(BENCH_CHIPD_POLL_US);
	}
	fprintf(stderr, "chipbench: chipd %s did not stop within %u ms: killed\n", d->instance,
		BENCH_CHIPD_STOP_MS);
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &status, 0);
	d->pid = 0;
	/* a killed supervisor leaves its region and pidfile (its workers die with it) */
	snprintf(region, sizeof(region), "/dev/shm/chipd.%u.%s", (unsigned)getuid(), d->instance);
	unlink(region);
	unlink(d->pidfile);
	return -ETIMEDOUT;
}

pid_t bench_chipd_wait_chip(struct bench_chipd *d, uint32_t chip, pid_t not_pid, unsigned ms,
			    uint64_t *left_ready_ns)
{
	struct chipd_status *st = calloc(1, sizeof(*st));
	uint64_t end = bench_chipd_now_ns() + (uint64_t)ms * 1000000u;
	struct chipd_error err;
	pid_t pid = 0;

	if (left_ready_ns)
		*left_ready_ns = 0;
	if (!st)
		return 0;
	while (pid == 0 && bench_chipd_now_ns() < end) {
		if (chipd_status(d->conn, BENCH_CHIPD_CALL_MS, st, &err) == 0 &&
		    chip < st->nchips) {
			const struct chipd_chip_status *cs = &st->chips[chip];
			bool same = not_pid && (pid_t)cs->pid == not_pid;

			if (left_ready_ns && !*left_ready_ns && not_pid &&
			    (cs->state != CHIPD_CHIP_READY || !same))
				*left_ready_ns = bench_chipd_now_ns();
			if (cs->state == CHIPD_CHIP_READY && cs->pid != 0 && !same)
				pid = (pid_t)cs->pid;
		}
		if (pid == 0)
			usleep(BENCH_CHIPD_POLL_US);
	}
	free(st);
	return pid;
}

int bench_chipd_synthetic(chipd_conn *c, int32_t chip, uint32_t tokens, uint32_t host_us,
			  uint32_t device_us, uint32_t timeout_ms)
{
	struct chipd_param p[] = {
	    {"tokens", tokens}, {"host_us", host_us}, {"device_us", device_us}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 3, .chip = chip};
	struct chipd_token tok = {0};
	struct chipd_error err;
	chipd_stream *s = NULL;
	uint64_t id;
	int rc = chipd_submit(c, &req, timeout_ms, &id, &s, &err);

	while (rc == 0 && !tok.final)
		rc = chipd_stream_next(s, &tok, timeout_ms, &err);
	chipd_stream_close(s, timeout_ms);
	return rc;
}

int bench_chipd_parse_list(const char *arg, unsigned *out, unsigned cap, unsigned max, unsigned *n)
{
	char *end;

	*n = 0;
	do {
		unsigned long v = strtoul(arg, &end, 10);

		if (end == arg || v < 1 || v > max || *n == cap)
			return -EINVAL;
		out[(*n)++] = (unsigned)v;
		arg = end + 1;
	} while (*end == ',');
	return *end ? -EINVAL : 0;
}
