/* bench.c - shared benchmark plumbing: percentiles, pinning, children, printing. */
#include "bench.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double bench_quantile(uint64_t *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t rank = (size_t)(q * (double)(n - 1) + 0.5);
	return (double)v[rank < n ? rank : n - 1];
}

void bench_fill(struct bench_result *r, uint64_t *samples, size_t n, uint64_t elapsed_ns)
{
	r->samples = (unsigned)n;
	r->p50_ns = bench_quantile(samples, n, 0.50);
	r->p99_ns = bench_quantile(samples, n, 0.99); /* already sorted: cheap */
	r->rps = elapsed_ns ? (double)n * 1e9 / (double)elapsed_ns : 0;
}

void bench_pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set); /* best effort: fewer CPUs, no pinning */
}

void bench_skip(struct bench_result *r, const char *fmt, ...)
{
	va_list ap;

	r->skipped = true;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

int bench_fork(int (*fn)(void *), void *arg, int cpu)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(111);
		bench_pin(cpu);
		_exit(fn(arg));
	}
	return pid;
}

int bench_reap(int pid, unsigned timeout_ms)
{
	struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
	int status;

	for (unsigned waited = 0; waited < timeout_ms; waited++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		nanosleep(&ms, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -ETIMEDOUT;
}

void bench_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void bench_json_num(FILE *f, double v, int decimals)
{
	if (v > 0)
		fprintf(f, "%.*f", decimals, v);
	else
		fputs("null", f);
}

void bench_print_json(FILE *f, const struct bench_result *res, size_t n)
{
	fputs("[", f);
	for (size_t i = 0; i < n; i++) {
		const struct bench_result *r = &res[i];

		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		bench_json_string(f, r->name);
		fputs(", \"label\": ", f);
		bench_json_string(f, r->label);
		if (r->skipped) {
			fputs(", \"skipped\": true, \"why\": ", f);
			bench_json_string(f, r->why);
			fputs("}", f);
			continue;
		}
		fprintf(
		    f,
		    ", \"skipped\": false, \"samples\": %u, \"p50_ns\": %.1f, \"p99_ns\": %.1f, "
		    "\"rps\": %.1f}",
		    r->samples, r->p50_ns, r->p99_ns, r->rps);
	}
	fputs("\n  ]", f);
}

void bench_print_table(FILE *f, const char *title, const struct bench_result *res, size_t n)
{
	fprintf(f, "%s\n", title);
	fprintf(f, "  %-14s %-52s %10s %10s %12s\n", "variant", "what", "p50", "p99", "req/s");
	for (size_t i = 0; i < n; i++) {
		const struct bench_result *r = &res[i];

		if (r->skipped) {
			fprintf(f, "  %-14s %-52s skipped: %s\n", r->name, r->label, r->why);
			continue;
		}
		fprintf(f, "  %-14s %-52s %8.2fus %8.2fus %12.0f\n", r->name, r->label,
			r->p50_ns / 1000.0, r->p99_ns / 1000.0, r->rps);
	}
}

void bench_name(struct bench_result *r, const char *name, const char *label)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->label, sizeof(r->label), "%s", label);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bench_loop(int (*round_trip)(void *ctx, uint64_t i), void *ctx, unsigned warmup, unsigned iters,
	       uint64_t *samples, uint64_t *elapsed_ns)
{
	uint64_t start;
	int rc = 0;

	for (unsigned i = 0; i < warmup && rc == 0; i++)
		rc = round_trip(ctx, i);
	start = now_ns();
	for (unsigned i = 0; i < iters && rc == 0; i++) {
		uint64_t t0 = now_ns();

		rc = round_trip(ctx, warmup + i);
		samples[i] = now_ns() - t0;
	}
	*elapsed_ns = now_ns() - start;
	return rc;
}

int bench_pingpong(const struct bench_opts *opts, const struct bench_pingpong *pp,
		   struct bench_result *out)
{
	unsigned iters = pp->iters ? pp->iters : opts->iters;
	unsigned warmup = pp->warmup ? pp->warmup : opts->warmup;
	uint64_t *samples = calloc(iters, sizeof(*samples));
	int rc = 0;

	bench_name(out, pp->name, pp->label);
	if (!samples) {
		bench_skip(out, "out of memory for %u samples", iters);
		return -ENOMEM;
	}
	int pid = bench_fork(pp->server, pp->ctx, opts->cpu_server);
	if (pid < 0) {
		bench_skip(out, "fork: %s", strerror(-pid));
		free(samples);
		return pid;
	}
	bench_pin(opts->cpu_client);
	uint64_t elapsed = 0;
	rc = bench_loop(pp->round_trip, pp->ctx, warmup, iters, samples, &elapsed);

	int stop_rc = pp->stop(pp->ctx);
	int status = bench_reap(pid, 10000);
	if (rc == 0 && (stop_rc != 0 || status != 0))
		rc = stop_rc ? stop_rc : -EPROTO;
	if (rc)
		bench_skip(out, "failed: round trip %d, server exit %d", rc, status);
	else
		bench_fill(out, samples, iters, elapsed);
	free(samples);
	return rc;
}
