/* ctl_export.c - `chipctl export --textfile DIR`: the counters in Prometheus text
 * format for node_exporter's textfile collector, written to DIR/chipd.prom.tmp and
 * renamed to DIR/chipd.prom (docs/operations.md), so the collector never reads half a file.
 *
 * While the instance is absent or not running, the file says chipd_up 0 (and
 * nothing else): stale counters of a dead supervisor are not exported as if live. */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT_FILE	   "chipd.prom"
/* node_exporter reads the file as its own user: readable by all, whatever the umask */
#define EXPORT_MODE 0644
#define INTERVAL_DEFAULT_S 15.0 /* node_exporter's usual scrape interval */

struct export
{
	const char *dir;
	double interval;
	bool once;
};

enum { OPT_TEXTFILE = 1, OPT_INTERVAL, OPT_ONCE };

static int export_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	struct export *x = ctx;

	if (opt == OPT_TEXTFILE)
		x->dir = arg;
	else if (opt == OPT_ONCE)
		x->once = true;
	else if (ctl_parse_seconds(arg, &x->interval))
		return ctl_usage(g, "--interval: '%s' is not a number of seconds", arg);
	return 0;
}

/* Writes the counters (@up false: only chipd_up 0) to @dir atomically. Returns 0 or
 * -errno. */
static int write_file(const char *dir, const struct chipd_stat *st, uint32_t n, bool up)
{
	char tmp[PATH_MAX], dst[PATH_MAX];
	FILE *f;
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, EXPORT_FILE) >= (int)sizeof(tmp) ||
	    snprintf(dst, sizeof(dst), "%s/%s", dir, EXPORT_FILE) >= (int)sizeof(dst))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, EXPORT_MODE);
	if (fd < 0)
		return -errno;
	/* the umask may have taken bits away, and a file left by an earlier run keeps its
	 * mode: set it */
	if (fchmod(fd, EXPORT_MODE) || !(f = fdopen(fd, "w"))) {
		rc = -errno;
		close(fd);
		unlink(tmp);
		return rc;
	}
	rc = ctl_prom_write(f, st, n, up);
	if (rc == 0 && (fflush(f) || fsync(fileno(f))))
		rc = -errno;
	if (fclose(f) && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, dst))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

static const char export_usage[] =
    "Usage: chipctl export --textfile DIR [--interval S] [--once]\n"
    "Writes the counters in Prometheus text format to DIR/chipd.prom for\n"
    "node_exporter's textfile collector (written to chipd.prom.tmp, then renamed).\n"
    "While the instance is not running the file holds only chipd_up 0.\n"
    "  --textfile DIR    the collector's directory (required)\n"
    "  --interval S      rewrite every S seconds (default 15) until Ctrl-C or SIGTERM\n"
    "                    (then exit 0); a failed write after the first is said on\n"
    "                    stderr and tried again at the next interval\n"
    "  --once            write once and exit (the exit status says whether chipd was\n"
    "                    up: 0, else 69, 3 or 77 as for any command; chipd_up 0\n"
    "                    written all the same)\n"
    "Exit 1 when the first write fails (--once: its only one). The files are mode\n"
    "0644.\n" CTL_HELP_COMMON;

int ctl_cmd_export(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {{"textfile", required_argument, NULL, OPT_TEXTFILE},
					    {"interval", required_argument, NULL, OPT_INTERVAL},
					    {"once", no_argument, NULL, OPT_ONCE},
					    {NULL, 0, NULL, 0}};
	struct export x = {.interval = INTERVAL_DEFAULT_S};
	const struct ctl_args a = {.usage = export_usage, .own = own, .opt = export_opt, .ctx = &x};
	int rc = ctl_args(g, argc, argv, &a), last = 0, last_wrc = 0, status = CTL_EXIT_OK;
	bool first = true;

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	if (!x.dir)
		return ctl_usage(g, "--textfile DIR is required");
	ctl_catch_signals();
	do {
		struct chipd_stat *st = NULL;
		struct chipd_error err;
		uint32_t n = 0;
		int wrc;

		rc = ctl_snapshot(g, &st, &n, &err);
		wrc = write_file(x.dir, st, n, rc == 0);
		free(st);
		/* The first write finds a wrong DIR at once; a later failure (a full disk, the
		 * directory removed) must not end an exporter that runs for months: it is
		 * said when it starts or changes, and the next interval tries again. */
		if (wrc && first) { /* --once: its only write */
			fprintf(stderr, "chipctl export: %s/%s: %s\n", x.dir, EXPORT_FILE,
				strerror(-wrc));
			return CTL_EXIT_FAILED;
		}
		if (wrc && wrc != last_wrc)
			fprintf(stderr, "chipctl export: %s/%s: %s; trying again every %g s\n",
				x.dir, EXPORT_FILE, strerror(-wrc), x.interval);
		else if (!wrc && last_wrc)
			fprintf(stderr, "chipctl export: %s/%s: written again\n", x.dir,
				EXPORT_FILE);
		first = false;
		last_wrc = wrc;
		/* Say it when chipd goes away or comes back, not every interval. */
		status = rc ? ctl_exit_for(rc, true) : CTL_EXIT_OK;
		if (rc && (rc != last || x.once))
			ctl_report(g, "export", rc, &err, true);
		else if (rc == 0 && last)
			fprintf(stderr, "chipctl export: the instance is back\n");
		last = rc;
	} while (!x.once && ctl_sleep(x.interval));
	return x.once ? status : CTL_EXIT_OK;
}
