/* ctl_main.c - chipctl's entry point: the global options, then one subcommand.
 *
 *   chipctl [--instance NAME] [--timeout-ms N] COMMAND [options] [operands]
 *
 * The global options may also follow the command's name; each command has its own
 * getopt_long table and --help (ctl_args). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CHIPD_VERSION
#define CHIPD_VERSION "unknown"
#endif

static const struct {
	const char *name;
	int (*run)(struct ctl *g, int argc, char **argv);
	const char *summary;
} cmds[] = {
    {"ping", ctl_cmd_ping, "ask the supervisor to answer; its pid and the round trip"},
    {"status", ctl_cmd_status, "the supervisor's and every worker's state"},
    {"submit", ctl_cmd_submit, "submit requests, optionally print their tokens"},
    {"workloads", ctl_cmd_workloads, "the workloads and the parameters each takes"},
    {"callables", ctl_cmd_callables, "the loaded callables: version, chips, requests in flight"},
    {"register", ctl_cmd_register, "register a callable on every chip while the node runs"},
    {"unregister", ctl_cmd_unregister, "unregister a callable: refuse, drain or cancel its work"},
    {"cancel", ctl_cmd_cancel, "cancel a request"},
    {"stats", ctl_cmd_stats, "every counter: a table, JSON or Prometheus text"},
    {"top", ctl_cmd_top, "live per-chip rates from the counters"},
    {"drain", ctl_cmd_drain, "refuse new work, finish what is running"},
    {"stop", ctl_cmd_stop, "drain, then stop the supervisor and its workers"},
    {"trace", ctl_cmd_trace, "record spans for a while into Chrome trace JSON"},
    {"export", ctl_cmd_export, "write the counters for node_exporter's textfile collector"},
};

static void usage(FILE *f)
{
	fputs("Usage: chipctl [--instance NAME] [--timeout-ms N] COMMAND [options] [args]\n"
	      "       chipctl COMMAND --help | --help | --version\n"
	      "Controls a chipd node supervisor through its shared-memory mailbox.\n\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-9s %s\n", cmds[i].name, cmds[i].summary);
	fputs("\nOptions (--instance and --timeout-ms may also follow COMMAND):\n"
	      "  --instance NAME   the instance (default: $CHIPD_INSTANCE, else $SLURM_JOB_ID,\n"
	      "                    else \"default\")\n"
	      "  --timeout-ms N    wait at most N ms for each answer (default 5000)\n"
	      "  --help            print this help; COMMAND --help for a command's\n"
	      "  --version         print the version\n"
	      "Most commands take --json after COMMAND: one versioned document {\"v\":1,...} on\n"
	      "stdout.\n"
	      "Errors go to stderr.\n\n"
	      "Exit status:\n"
	      "   0  ok\n"
	      "   1  the request failed (the error envelope is printed: code, message,\n"
	      "      retryable)\n"
	      "   3  the instance is not running (stopped, died, or still starting)\n"
	      "  64  usage error\n"
	      "  69  no such instance\n"
	      "  74  standard output could not be written (closed, a full disk, /dev/full)\n"
	      "  75  timed out\n"
	      "  77  permission denied (the instance belongs to another user)\n"
	      "See chipctl(1).\n",
	      f);
}

/* The command's status, unless what it printed was lost: a write to standard output
 * failed (a full disk, /dev/full, an I/O error), which only the stream's error flag
 * or its last flush tells. Then CTL_EXIT_IOERR where the command succeeded. */
static int output_written(int rc)
{
	int err = fflush(stdout) != 0 ? errno : ferror(stdout) ? EIO : 0;

	if (!err)
		return rc;
	fprintf(stderr, "chipctl: standard output: %s: what the command printed was lost\n",
		strerror(err));
	return rc == CTL_EXIT_OK ? CTL_EXIT_IOERR : rc;
}

static int run_cli(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"instance", required_argument, NULL, 'i'},
	    {"timeout-ms", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl g = {.timeout_ms = CHIPD_TIMEOUT_MS};
	int opt;

	opterr = 0;
	/* '+': stop at the command's name; its options are its own. */
	while ((opt = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (opt) {
		case 'i':
			g.instance = optarg;
			break;
		case 't':
			if (ctl_opt_timeout(&g, optarg))
				return CTL_EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return CTL_EXIT_OK;
		case 'V':
			printf("chipctl %s\n", CHIPD_VERSION);
			return CTL_EXIT_OK;
		case ':':
			return ctl_usage(&g, "'%s' needs a value", argv[optind - 1]);
		default:
			return ctl_usage(&g, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return ctl_usage(&g, "no command given");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[optind], cmds[i].name) == 0) {
			g.cmd = cmds[i].name;
			return cmds[i].run(&g, argc - optind, argv + optind);
		}
	return ctl_usage(&g, "unknown command '%s'", argv[optind]);
}

int main(int argc, char **argv)
{
	/* closed, its number would go to the first descriptor chipctl opens (the node
	 * region, its exchange region), and what it prints with it */
	if (fcntl(STDOUT_FILENO, F_GETFD) < 0 && errno == EBADF) {
		fprintf(stderr, "chipctl: standard output is closed (to discard what a "
				"command prints, send it to /dev/null)\n");
		return CTL_EXIT_IOERR;
	}
	return output_written(run_cli(argc, argv));
}
