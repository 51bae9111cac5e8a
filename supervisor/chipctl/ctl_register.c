/* ctl_register.c - `chipctl register` and `chipctl unregister`: callables added to and
 * removed from a running node (docs/callables.md, "Registration"). */
#include "ctl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char register_usage[] =
    "Usage: chipctl register [--json] [--name NAME] PATH\n"
    "Loads the callable PATH (a shared library; docs/callables.md) on every chip of the\n"
    "running node, all or nothing: when one chip refuses it, the chips that took it\n"
    "unload it again and chipctl prints that chip's reason. PATH is a file of the\n"
    "node, owned by root or chipd's user and not writable by group or others; a\n"
    "relative PATH is taken from the working directory.\n"
    "  --name NAME       register it as NAME ([a-z0-9_], 1..23) instead of the name\n"
    "                    its table gives\n"
    "  --json            {\"v\":1,\"ok\":true,\"name\":...,\"version\":N}\n" CTL_HELP_COMMON;

enum { OPT_NAME = 1, OPT_DRAIN, OPT_CANCEL };

/* Whether @name could be a callable's name (libchipd and chipd check the same rule,
 * and libchipd says it in the same words): said as a usage error before connecting, so
 * a bad one is exit 64 with or without a node. */
static bool callable_name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n < CHIPD_CALLABLE_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static int register_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	(void)g, (void)opt;
	*(const char **)ctx = arg;
	return 0;
}

int ctl_cmd_register(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {{"name", required_argument, NULL, OPT_NAME},
					    {NULL, 0, NULL, 0}};
	const char *name = NULL;
	const struct ctl_args a = {.usage = register_usage,
				   .own = own,
				   .opt = register_opt,
				   .ctx = &name,
				   .json = true,
				   .min_pos = 1,
				   .max_pos = 1};
	char path[PATH_MAX], cwd[PATH_MAX], got[CHIPD_NAME_MAX];
	struct chipd_error err;
	uint32_t version = 0;
	chipd_conn *c;
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	if (!argv[optind][0]) /* made absolute, it would name the working directory */
		return ctl_usage(g, "the callable's path is empty");
	/* absolute as given, not resolved: a symbolic link is the server's to refuse */
	if (argv[optind][0] == '/')
		rc = snprintf(path, sizeof(path), "%s", argv[optind]);
	else if (getcwd(cwd, sizeof(cwd)))
		rc = snprintf(path, sizeof(path), "%s/%s", cwd, argv[optind]);
	else
		return ctl_usage(g, "cannot read the working directory for '%s'", argv[optind]);
	if (rc < 0 || (size_t)rc >= sizeof(path))
		return ctl_usage(g, "the path '%s' is too long", argv[optind]);
	if (name && !callable_name_ok(name))
		return ctl_usage(g, "the name given is not 1..%d characters of [a-z0-9_]",
				 CHIPD_CALLABLE_NAME_MAX - 1);
	rc = ctl_connect(g, &c);
	if (rc)
		return rc;
	rc = chipd_register(c, path, name, g->timeout_ms, got, &version, &err);
	if (rc == -EINVAL) {
		rc = ctl_usage(g, "%s", err.message);
	} else if (rc) {
		rc = ctl_report(g, "register", rc, &err, false);
	} else if (g->json) {
		printf("{\"v\":%d,\"ok\":true,\"name\":", CTL_JSON_VERSION);
		ctl_json_str(stdout, got);
		printf(",\"version\":%" PRIu32 "}\n", version);
	} else {
		printf("callable %s (version %" PRIu32 ") registered from %s\n", got, version,
		       path);
	}
	chipd_close(c);
	return rc;
}

static const char unregister_usage[] =
    "Usage: chipctl unregister [--json] [--drain | --cancel] NAME\n"
    "Unloads the callable registered as NAME (chipctl register) from every chip. Without\n"
    "an option it is refused while requests of NAME are in flight (the message names\n"
    "them).\n"
    "  --drain           refuse new requests of NAME, wait until those in flight ended,\n"
    "                    then unregister; when they did not end within --timeout-ms,\n"
    "                    NAME takes requests again and chipctl exits 75\n"
    "  --cancel          refuse new requests of NAME, cancel those in flight, then\n"
    "                    unregister\n"
    "  --json            {\"v\":1,\"ok\":true,\"name\":...}\n" CTL_HELP_COMMON;

static int unregister_opt(void *ctx, struct ctl *g, int opt, const char *arg)
{
	int *mode = ctx;
	int want = opt == OPT_DRAIN ? CHIPD_UNREGISTER_DRAIN : CHIPD_UNREGISTER_CANCEL;

	(void)arg;
	if (*mode != CHIPD_UNREGISTER_REFUSE && *mode != want)
		return ctl_usage(g, "--drain and --cancel exclude each other");
	*mode = want;
	return 0;
}

int ctl_cmd_unregister(struct ctl *g, int argc, char **argv)
{
	static const struct option own[] = {{"drain", no_argument, NULL, OPT_DRAIN},
					    {"cancel", no_argument, NULL, OPT_CANCEL},
					    {NULL, 0, NULL, 0}};
	int mode = CHIPD_UNREGISTER_REFUSE;
	const struct ctl_args a = {.usage = unregister_usage,
				   .own = own,
				   .opt = unregister_opt,
				   .ctx = &mode,
				   .json = true,
				   .min_pos = 1,
				   .max_pos = 1};
	struct chipd_error err;
	chipd_conn *c;
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	if (!callable_name_ok(argv[optind]))
		return ctl_usage(g, "the name given is not 1..%d characters of [a-z0-9_]",
				 CHIPD_CALLABLE_NAME_MAX - 1);
	rc = ctl_connect(g, &c);
	if (rc)
		return rc;
	rc = chipd_unregister(c, argv[optind], mode, g->timeout_ms, &err);
	if (rc == -EINVAL) {
		rc = ctl_usage(g, "%s", err.message);
	} else if (rc) {
		rc = ctl_report(g, "unregister", rc, &err, false);
	} else if (g->json) {
		printf("{\"v\":%d,\"ok\":true,\"name\":", CTL_JSON_VERSION);
		ctl_json_str(stdout, argv[optind]);
		puts("}");
	} else {
		printf("callable %s unregistered\n", argv[optind]);
	}
	chipd_close(c);
	return rc;
}
