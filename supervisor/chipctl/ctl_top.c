/* ctl_top.c - `chipctl top`: per-chip rates from the counters, refreshed every
 * --interval seconds with a plain ANSI clear. Quits on q, Ctrl-C, a hang-up of its
 * terminal, or after --iterations frames. Counters are read straight from shared
 * memory, so the view costs the supervisor nothing; it reconnects every frame, so it
 * follows a restart of chipd. */
#include "ctl.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define ANSI_CLEAR "\033[H\033[2J"

/* A counter's growth between two frames. Counters survive worker restarts (their
 * blocks are the supervisor's); one that went down is a restarted chipd's, counting
 * from 0 again. */
static uint64_t delta(const struct chipd_stat *prev, uint32_t nprev, const struct chipd_stat *cur,
		      uint32_t n, const char *block, const char *name)
{
	const struct chipd_stat *a = ctl_stat_find(prev, nprev, block, name);
	const struct chipd_stat *b = ctl_stat_find(cur, n, block, name);

	if (!b)
		return 0;
	return a && a->value <= b->value ? b->value - a->value : b->value;
}

static uint64_t value(const struct chipd_stat *st, uint32_t n, const char *block, const char *name)
{
	const struct chipd_stat *s = ctl_stat_find(st, n, block, name);

	return s ? s->value : 0;
}

/* Prints a rate, or "-" on the first frame. */
static void rate(FILE *f, bool have, uint64_t d, double dt_s, int width)
{
	if (have && dt_s > 0)
		fprintf(f, "  %*.1f", width, (double)d / dt_s);
	else
		fprintf(f, "  %*s", width, "-");
}

void ctl_top_frame(FILE *f, const struct chipd_stat *prev, uint32_t nprev,
		   const struct chipd_stat *cur, uint32_t n, double dt_s)
{
	static const char *const ends[] = {"completed", "failed", "cancelled"};
	bool have = prev != NULL;

	fprintf(f, "%-6s  %10s  %10s  %10s  %6s  %6s  %12s\n", "chip", "tokens/s", "requests/s",
		"done/s", "queue", "active", "tokens");
	for (uint32_t i = 0; i < n; i++) {
		const char *b = cur[i].block;
		uint64_t done = 0;

		/* One row per worker block, at its first counter (blocks are contiguous). */
		if (strncmp(b, "chip", 4) != 0 || (i > 0 && strcmp(cur[i - 1].block, b) == 0))
			continue;
		for (size_t k = 0; k < sizeof(ends) / sizeof(ends[0]); k++)
			done += delta(prev, nprev, cur, n, b, ends[k]);
		fprintf(f, "%-6s", b + 4);
		rate(f, have, delta(prev, nprev, cur, n, b, "tokens"), dt_s, 10);
		rate(f, have, delta(prev, nprev, cur, n, b, "admitted"), dt_s, 10);
		rate(f, have, done, dt_s, 10);
		fprintf(f, "  %6llu  %6llu  %12llu\n",
			(unsigned long long)value(cur, n, b, "queue_depth"),
			(unsigned long long)value(cur, n, b, "active"),
			(unsigned long long)value(cur, n, b, "tokens"));
	}
	/* the supervisor's queue_depth is every stream in flight, not a queue */
	fprintf(f,
		"supervisor: in flight %llu, rings in use %llu, worker deaths %llu, degraded "
		"%llu\n",
		(unsigned long long)value(cur, n, "supervisor", "queue_depth"),
		(unsigned long long)value(cur, n, "supervisor", "rings_in_use"),
		(unsigned long long)value(cur, n, "supervisor", "worker_deaths"),
		(unsigned long long)value(cur, n, "supervisor", "worker_degraded"));
}

struct top {
	double interval;
	int64_t iterations; /* 0: until q or Ctrl-C */
};

enum { OPT_INTERVAL = 1, OPT_ITERATIONS };

static int top_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	struct top *t = ctx;

	if (opt == OPT_INTERVAL && ctl_parse_seconds(arg, &t->interval))
		return ctl_usage(g, "--interval: '%s' is not a number of seconds", arg);
	if (opt == OPT_ITERATIONS && ctl_parse_i64(arg, 1, INT32_MAX, &t->iterations))
		return ctl_usage(g, "--iterations: '%s' is not 1..%d", arg, INT32_MAX);
	return 0;
}

/* Waits @seconds for a key; true when q was pressed or the terminal hung up (stdin a
 * terminal in raw mode). */
static bool wait_key(double seconds, bool tty)
{
	uint64_t end = ctl_now_ns() + (uint64_t)(seconds * 1e9);

	if (!tty) {
		ctl_sleep(seconds);
		return false;
	}
	while (!ctl_interrupted) {
		uint64_t now = ctl_now_ns();
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		ssize_t n;
		char ch;

		if (now >= end)
			return false;
		if (poll(&p, 1, (int)((end - now) / 1000000u) + 1) != 1)
			continue;
		n = read(STDIN_FILENO, &ch, 1);
		if (n == 1 && (ch == 'q' || ch == 'Q'))
			return true;
		if (n == 1 || (n < 0 && errno == EINTR))
			continue;
		/* hung up (or an error): nothing more will come from the terminal, nor
		 * can anyone watch it (poll would answer at once for ever): quit */
		return true;
	}
	return false;
}

static const char top_usage[] =
    "Usage: chipctl top [--interval S] [--iterations N]\n"
    "A live view of the counters: per chip tokens/s, requests/s (admitted),\n"
    "done/s (completed, failed, cancelled), queue depth, active requests.\n"
    "Quits on q, Ctrl-C or a hang-up of its terminal.\n"
    "  --interval S      refresh every S seconds (default 1)\n"
    "  --iterations N    quit after N frames\n" CTL_HELP_COMMON;

int ctl_cmd_top(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {{"interval", required_argument, NULL, OPT_INTERVAL},
					    {"iterations", required_argument, NULL, OPT_ITERATIONS},
					    {NULL, 0, NULL, 0}};
	struct top t = {.interval = 1};
	const struct ctl_args a = {.usage = top_usage, .own = own, .opt = top_opt, .ctx = &t};
	struct chipd_stat *prev = NULL, *cur = NULL;
	uint32_t nprev = 0, n = 0;
	uint64_t tprev = 0;
	bool tty_in = isatty(STDIN_FILENO), tty_out = isatty(STDOUT_FILENO);
	struct termios saved, raw;
	struct chipd_error err;
	char instance[CHIPD_INSTANCE_MAX];
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	/* the header names the instance watched: --instance, else the variables, as
	 * every connection resolves it (ctl_args checked that it does) */
	rc = chipd_resolve_instance(g->instance, instance, &err);
	if (rc)
		return ctl_report(g, "top", rc, &err, true);
	rc = ctl_snapshot(g, &cur, &n, &err);
	if (rc)
		return ctl_report(g, "top", rc, &err, true);
	free(cur);
	cur = NULL;
	ctl_catch_signals();
	if (tty_in && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else {
		tty_in = false;
	}
	for (int64_t i = 0; !ctl_interrupted && (t.iterations == 0 || i < t.iterations); i++) {
		uint64_t now;

		if (i > 0 && wait_key(t.interval, tty_in))
			break;
		now = ctl_now_ns();
		rc = ctl_snapshot(g, &cur, &n, &err);
		fputs(tty_out ? ANSI_CLEAR : (i ? "\n" : ""), stdout);
		printf("chipctl top: instance %s, every %.1f s%s\n", instance, t.interval,
		       tty_in ? " (q quits)" : "");
		if (rc) {
			printf("not available: %s\n", err.message);
			free(prev);
			prev = NULL;
		} else {
			ctl_top_frame(stdout, prev, nprev, cur, n, (double)(now - tprev) / 1e9);
			free(prev);
			prev = cur;
			nprev = n;
			tprev = now;
		}
		cur = NULL;
		fflush(stdout);
	}
	if (tty_in)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	free(prev);
	return rc ? ctl_exit_for(rc, true) : CTL_EXIT_OK;
}
