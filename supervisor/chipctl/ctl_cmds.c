/* ctl_cmds.c - the one-call subcommands of chipctl: ping, status, cancel, stats,
 * drain, stop. Each parses its options, connects, makes its call and prints the
 * answer as text or as one JSON document. */
#include "ctl.h"

#include <stdlib.h>
#include <string.h>

#define GRACE_MAX_MS 3600000 /* docs/protocol.md §8.4: grace_ms 1..3600000 */

/* Parses the arguments and connects. Returns 0 with *@c, or the exit status
 * (CTL_EXIT_OK after --help), with nothing to close. */
static int begin(struct ctl *g, int argc, char **argv, const struct ctl_args *a, chipd_conn **c)
{
	int rc = ctl_args(g, argc, argv, a);

	if (rc == CTL_HELP)
		return -1;
	return rc ? rc : ctl_connect(g, c);
}

/* The status of begin() as the subcommand's exit status. */
static int begun(int rc)
{
	return rc < 0 ? CTL_EXIT_OK : rc;
}

static const char ping_usage[] =
    "Usage: chipctl ping [--json]\n"
    "Asks the supervisor to answer; prints its pid and the round-trip time.\n"
    "  --json            "
    "{\"v\":1,\"ok\":true,\"instance\":...,\"pid\":N,\"rtt_us\":X}\n" CTL_HELP_COMMON;

int ctl_cmd_ping(struct ctl *g, int argc, char **argv)
{
	const struct ctl_args a = {.usage = ping_usage, .json = true};
	struct chipd_error err;
	chipd_conn *c;
	uint32_t pid = 0;
	uint64_t t0;
	double rtt_us;
	int rc = begin(g, argc, argv, &a, &c);

	if (rc)
		return begun(rc);
	t0 = ctl_now_ns();
	rc = chipd_ping(c, g->timeout_ms, &pid, &err);
	rtt_us = (double)(ctl_now_ns() - t0) / 1e3;
	if (rc) {
		rc = ctl_report(g, "ping", rc, &err, false);
	} else if (g->json) {
		printf("{\"v\":%d,\"ok\":true,\"instance\":", CTL_JSON_VERSION);
		ctl_json_str(stdout, chipd_instance(c));
		printf(",\"pid\":%u,\"rtt_us\":%.1f}\n", (unsigned)pid, rtt_us);
	} else {
		printf("chipd pid %u (instance %s): %.3f ms\n", (unsigned)pid, chipd_instance(c),
		       rtt_us / 1e3);
	}
	chipd_close(c);
	return rc;
}

static const char status_usage[] =
    "Usage: chipctl status [--json]\n"
    "Prints the supervisor's state and, per worker: chip, pid, gpu, state, restarts,\n"
    "queued and active requests, and tokens published (from the counters).\n"
    "  --json            one document: "
    "{\"v\":1,\"ok\":true,\"state\":...,\"chips\":[...]}\n" CTL_HELP_COMMON;

/* Tokens of chip @chip from the counters, or -1 when they are not there. */
static int64_t tokens_of(const struct chipd_stat *st, uint32_t n, uint32_t chip)
{
	char block[16];
	const struct chipd_stat *s;

	snprintf(block, sizeof(block), "chip%u", (unsigned)chip);
	s = ctl_stat_find(st, n, block, "tokens");
	return s ? (int64_t)s->value : -1;
}

static void status_json(const chipd_conn *c, const struct chipd_status *s,
			const struct chipd_stat *st, uint32_t n)
{
	printf("{\"v\":%d,\"ok\":true,\"instance\":", CTL_JSON_VERSION);
	ctl_json_str(stdout, chipd_instance(c));
	printf(",\"state\":\"%s\",\"pid\":%u,\"uptime_ms\":%llu,\"chips\":[",
	       chipd_sup_state_name(s->state), (unsigned)s->pid, (unsigned long long)s->uptime_ms);
	for (uint32_t i = 0; i < s->nchips; i++) {
		const struct chipd_chip_status *k = &s->chips[i];

		printf("%s{\"chip\":%u,\"pid\":%u,\"gpu\":%d,\"state\":\"%s\",\"restarts\":%u,"
		       "\"queued\":%u,\"active\":%u,\"tokens\":%lld}",
		       i ? "," : "", (unsigned)k->chip, (unsigned)k->pid, (int)k->gpu,
		       chipd_chip_state_name(k->state), (unsigned)k->restarts, (unsigned)k->queued,
		       (unsigned)k->active, (long long)tokens_of(st, n, k->chip));
	}
	fputs("]}\n", stdout);
}

static void status_text(const chipd_conn *c, const struct chipd_status *s,
			const struct chipd_stat *st, uint32_t n)
{
	uint64_t up = s->uptime_ms / 1000;

	printf("instance %s: %s, pid %u, up %lluh%02llum%02llus, %u chip%s\n", chipd_instance(c),
	       chipd_sup_state_name(s->state), (unsigned)s->pid, (unsigned long long)(up / 3600),
	       (unsigned long long)(up / 60 % 60), (unsigned long long)(up % 60),
	       (unsigned)s->nchips, s->nchips == 1 ? "" : "s");
	printf("%-4s  %-8s  %-4s  %-9s  %8s  %6s  %6s  %12s\n", "chip", "pid", "gpu", "state",
	       "restarts", "queued", "active", "tokens");
	for (uint32_t i = 0; i < s->nchips; i++) {
		const struct chipd_chip_status *k = &s->chips[i];
		int64_t tokens = tokens_of(st, n, k->chip);
		char gpu[12], tok[24];

		if (k->gpu < 0)
			snprintf(gpu, sizeof(gpu), "sim");
		else
			snprintf(gpu, sizeof(gpu), "%d", (int)k->gpu);
		if (tokens < 0)
			snprintf(tok, sizeof(tok), "-");
		else
			snprintf(tok, sizeof(tok), "%lld", (long long)tokens);
		printf("%-4u  %-8u  %-4s  %-9s  %8u  %6u  %6u  %12s\n", (unsigned)k->chip,
		       (unsigned)k->pid, gpu, chipd_chip_state_name(k->state),
		       (unsigned)k->restarts, (unsigned)k->queued, (unsigned)k->active, tok);
	}
}

int ctl_cmd_status(struct ctl *g, int argc, char **argv)
{
	const struct ctl_args a = {.usage = status_usage, .json = true};
	struct chipd_status *s = calloc(1, sizeof(*s));
	struct chipd_stat *st = NULL;
	struct chipd_error err;
	chipd_conn *c;
	uint32_t n = 0;
	int rc;

	if (!s)
		return CTL_EXIT_FAILED;
	rc = begin(g, argc, argv, &a, &c);
	if (rc) {
		free(s);
		return begun(rc);
	}
	rc = chipd_status(c, g->timeout_ms, s, &err);
	if (rc) {
		rc = ctl_report(g, "status", rc, &err, false);
		goto out;
	}
	/* Tokens are a nicety: without counters the columns say "-". */
	if (ctl_read_stats(c, &st, &n, &err))
		n = 0;
	if (g->json)
		status_json(c, s, st, n);
	else
		status_text(c, s, st, n);
out:
	free(st);
	free(s);
	chipd_close(c);
	return rc;
}

static const char cancel_usage[] =
    "Usage: chipctl cancel [--json] ID\n"
    "Cancels request ID (as submit printed it: @N or a number); its stream ends with\n"
    "\"cancelled\".\n"
    "  --json            {\"v\":1,\"ok\":true,\"id\":N}\n" CTL_HELP_COMMON;

int ctl_cmd_cancel(struct ctl *g, int argc, char **argv)
{
	const struct ctl_args a = {.usage = cancel_usage, .json = true, .min_pos = 1, .max_pos = 1};
	struct chipd_error err;
	chipd_conn *c;
	char text[CTL_ID_CHARS];
	uint64_t id;
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	if (ctl_parse_id(argv[optind], &id))
		return ctl_usage(g, "'%s' is not a request id (1..2^63-1, or @N)", argv[optind]);
	rc = ctl_connect(g, &c);
	if (rc)
		return rc;
	rc = chipd_cancel(c, id, g->timeout_ms, &err);
	if (rc)
		rc = ctl_report(g, "cancel", rc, &err, false);
	else if (g->json)
		printf("{\"v\":%d,\"ok\":true,\"id\":%llu}\n", CTL_JSON_VERSION,
		       (unsigned long long)id);
	else
		printf("request %s: cancelled\n", ctl_id_str(id, text));
	chipd_close(c);
	return rc;
}

static const char stats_usage[] =
    "Usage: chipctl stats [--json | --prom]\n"
    "Prints every counter of the supervisor and of each worker, read from shared\n"
    "memory (no round trip: it works while the supervisor is busy).\n"
    "  --json            one document: {\"v\":1,\"ok\":true,\"instance\":...,\"blocks\":{...}}\n"
    "  --prom            Prometheus text format 0.0.4 (chipd_* metrics)\n"
    "--json and --prom exclude each other.\n" CTL_HELP_COMMON;

enum { OPT_PROM = 1 };

static int stats_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	(void)g, (void)arg, (void)opt;
	*(bool *)ctx = true;
	return 0;
}

int ctl_cmd_stats(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {{"prom", no_argument, NULL, OPT_PROM},
					    {NULL, 0, NULL, 0}};
	bool prom = false;
	const struct ctl_args a = {
	    .usage = stats_usage, .own = own, .opt = stats_opt, .ctx = &prom, .json = true};
	struct chipd_stat *st = NULL;
	struct chipd_error err;
	chipd_conn *c;
	uint32_t n;
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	if (prom && g->json)
		return ctl_usage(g, "--json and --prom exclude each other");
	rc = ctl_connect_monitor(g, &c);
	if (rc)
		return rc;
	rc = ctl_read_stats(c, &st, &n, &err);
	if (rc)
		rc = ctl_report(g, "stats", rc, &err, false);
	else if (prom)
		rc = ctl_prom_write(stdout, st, n, true) ? CTL_EXIT_FAILED : CTL_EXIT_OK;
	else if (g->json)
		ctl_stats_json(stdout, chipd_instance(c), st, n);
	else
		ctl_stats_table(stdout, st, n);
	free(st);
	chipd_close(c);
	return rc;
}

enum { OPT_GRACE = 1 };

static int grace_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	int64_t v;

	(void)opt;
	if (ctl_parse_i64(arg, 1, GRACE_MAX_MS, &v))
		return ctl_usage(g, "--grace-ms: '%s' is not 1..%d", arg, GRACE_MAX_MS);
	*(uint32_t *)ctx = (uint32_t)v;
	return 0;
}

/* drain and stop: one call with a grace period. */
static int grace_cmd(struct ctl *g, int argc, char **argv, const char *usage, bool stop)
{
	static const struct option own[] = {{"grace-ms", required_argument, NULL, OPT_GRACE},
					    {NULL, 0, NULL, 0}};
	uint32_t grace_ms = 0;
	const struct ctl_args a = {
	    .usage = usage, .own = own, .opt = grace_opt, .ctx = &grace_ms, .json = true};
	struct chipd_error err;
	chipd_conn *c;
	int rc = begin(g, argc, argv, &a, &c);

	if (rc)
		return begun(rc);
	rc = stop ? chipd_stop(c, grace_ms, g->timeout_ms, &err)
		  : chipd_drain(c, grace_ms, g->timeout_ms, &err);
	if (rc)
		rc = ctl_report(g, g->cmd, rc, &err, false);
	else if (g->json)
		printf("{\"v\":%d,\"ok\":true,\"action\":\"%s\",\"grace_ms\":%u}\n",
		       CTL_JSON_VERSION, g->cmd, (unsigned)grace_ms);
	else if (grace_ms)
		printf("instance %s: %s requested (grace %u ms)\n", chipd_instance(c), g->cmd,
		       (unsigned)grace_ms);
	else
		printf("instance %s: %s requested (the supervisor's grace period)\n",
		       chipd_instance(c), g->cmd);
	chipd_close(c);
	return rc;
}

#define GRACE_HELP                                                                                 \
	"  --grace-ms N      time for in-flight requests, 1..3600000 ms\n"                         \
	"                    (default: the supervisor's configured grace period)\n"                \
	"  --json            "                                                                     \
	"{\"v\":1,\"ok\":true,\"action\":...,\"grace_ms\":N}\n"                                    \
	"                    (N 0: no --grace-ms, the configured grace applies)\n" CTL_HELP_COMMON

static const char drain_usage[] =
    "Usage: chipctl drain [--grace-ms N] [--json]\n"
    "Asks the supervisor to refuse new work and finish what it has.\n" GRACE_HELP;

int ctl_cmd_drain(struct ctl *g, int argc, char **argv)
{
	return grace_cmd(g, argc, argv, drain_usage, false);
}

static const char stop_usage[] =
    "Usage: chipctl stop [--grace-ms N] [--json]\n"
    "Asks the supervisor to stop: drain, then end the workers and exit.\n" GRACE_HELP;

int ctl_cmd_stop(struct ctl *g, int argc, char **argv)
{
	return grace_cmd(g, argc, argv, stop_usage, true);
}
