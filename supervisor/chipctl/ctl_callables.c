/* ctl_callables.c - `chipctl callables`: the callables the node loaded (its workloads,
 * docs/callables.md): each one's version, the chips it is loaded on and its
 * parameters, as a table or one JSON document. The formatters are pure, for the unit
 * suite. Callables load at start in the supervisor and every worker inherits them, so
 * each is on every chip. */
#include "ctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* "0-3", "0", or "-" for none. */
static void chips_text(char *buf, size_t cap, uint32_t nchips)
{
	if (nchips == 0)
		snprintf(buf, cap, "-");
	else if (nchips == 1)
		snprintf(buf, cap, "0");
	else
		snprintf(buf, cap, "0-%" PRIu32, nchips - 1);
}

void ctl_callables_table(FILE *f, const struct chipd_workload *wl, uint32_t n, uint32_t nchips)
{
	int nw = (int)strlen("callable");
	char chips[24];

	for (uint32_t w = 0; w < n; w++)
		if ((int)strlen(wl[w].name) > nw)
			nw = (int)strlen(wl[w].name);
	chips_text(chips, sizeof(chips), nchips);
	fprintf(f, "%-*s  %10s  %-6s  %s\n", nw, "callable", "version", "chips", "parameters");
	for (uint32_t w = 0; w < n; w++) {
		fprintf(f, "%-*s  %10" PRIu32 "  %-6s  ", nw, wl[w].name, wl[w].version, chips);
		for (uint32_t i = 0; i < wl[w].nparams; i++)
			fprintf(f, "%s%s", i ? ", " : "", wl[w].params[i].key);
		fputs(wl[w].nparams ? "\n" : "-\n", f);
	}
}

void ctl_callables_json(FILE *f, const char *instance, const struct chipd_workload *wl,
			uint32_t n, uint32_t nchips)
{
	fprintf(f, "{\"v\":%d,\"ok\":true,\"instance\":", CTL_JSON_VERSION);
	ctl_json_str(f, instance);
	fputs(",\"callables\":[", f);
	for (uint32_t w = 0; w < n; w++) {
		fputs(w ? ",{\"name\":" : "{\"name\":", f);
		ctl_json_str(f, wl[w].name);
		fprintf(f, ",\"version\":%" PRIu32 ",\"doc\":", wl[w].version);
		ctl_json_str(f, wl[w].doc);
		fputs(",\"chips\":[", f);
		for (uint32_t c = 0; c < nchips; c++)
			fprintf(f, c ? ",%" PRIu32 : "%" PRIu32, c);
		fputs("],\"params\":[", f);
		for (uint32_t i = 0; i < wl[w].nparams; i++) {
			const struct chipd_wl_param *p = &wl[w].params[i];

			fputs(i ? ",{\"key\":" : "{\"key\":", f);
			ctl_json_str(f, p->key);
			fprintf(f, ",\"default\":%" PRId64 ",\"min\":%" PRId64 ",\"max\":%" PRId64 "}",
				p->def, p->min, p->max);
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}

static const char callables_usage[] =
    "Usage: chipctl callables [--json]\n"
    "Lists the callables the node loaded (its workloads, docs/callables.md): name,\n"
    "the callable's own version, the chips it is loaded on and its parameters\n"
    "(`chipctl workloads` shows their defaults, ranges and meanings).\n"
    "  --json            one document: {\"v\":1,\"ok\":true,\"instance\":...,\n"
    "                    \"callables\":[{\"name\":...,\"version\":N,\"doc\":...,\n"
    "                    \"chips\":[0,...],\"params\":[{\"key\":...,\"default\":N,\n"
    "                    \"min\":N,\"max\":N}]}]}\n" CTL_HELP_COMMON;

int ctl_cmd_callables(struct ctl *g, int argc, char **argv)
{
	const struct ctl_args a = {.usage = callables_usage, .json = true};
	struct chipd_status *st;
	struct chipd_workload *wl = NULL;
	struct chipd_error err;
	chipd_conn *c;
	uint32_t n = 0;
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	st = calloc(1, sizeof(*st));
	if (!st) {
		fprintf(stderr, "chipctl callables: out of memory\n");
		return CTL_EXIT_FAILED;
	}
	rc = ctl_connect(g, &c);
	if (rc) {
		free(st);
		return rc;
	}
	rc = chipd_status(c, g->timeout_ms, st, &err);
	rc = rc ? ctl_report(g, "callables", rc, &err, false)
		: ctl_workloads_fetch(g, c, "callables", &wl, &n);
	if (rc == CTL_EXIT_OK && g->json)
		ctl_callables_json(stdout, chipd_instance(c), wl, n, st->nchips);
	else if (rc == CTL_EXIT_OK)
		ctl_callables_table(stdout, wl, n, st->nchips);
	free(wl);
	free(st);
	chipd_close(c);
	return rc;
}
