/* ctl_workloads.c - `chipctl workloads`: the workloads the supervisor runs and the
 * parameters each takes (the table its validator checks a submit against), as a
 * table or as one JSON document. The formatters are pure, for the unit suite. */
#include "ctl.h"

#include <errno.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int width_of(int64_t v)
{
	char buf[24];

	return snprintf(buf, sizeof(buf), "%" PRId64, v);
}

static int max_int(int a, int b)
{
	return a > b ? a : b;
}

void ctl_workloads_table(FILE *f, const struct chipd_workload *wl, uint32_t n)
{
	int kw = (int)strlen("parameter"), dw = (int)strlen("default"), lw = (int)strlen("min"),
	    hw = (int)strlen("max");

	/* One set of columns for every workload, so that the tables line up. */
	for (uint32_t w = 0; w < n; w++)
		for (uint32_t i = 0; i < wl[w].nparams; i++) {
			const struct chipd_wl_param *p = &wl[w].params[i];

			kw = max_int(kw, (int)strlen(p->key));
			dw = max_int(dw, width_of(p->def));
			lw = max_int(lw, width_of(p->min));
			hw = max_int(hw, width_of(p->max));
		}
	for (uint32_t w = 0; w < n; w++) {
		fprintf(f, "%s%s: %s\n", w ? "\n" : "", wl[w].name, wl[w].doc);
		fprintf(f, "  %-*s  %*s  %*s  %*s  %s\n", kw, "parameter", dw, "default", lw, "min",
			hw, "max", "meaning");
		for (uint32_t i = 0; i < wl[w].nparams; i++) {
			const struct chipd_wl_param *p = &wl[w].params[i];

			fprintf(f, "  %-*s  %*" PRId64 "  %*" PRId64 "  %*" PRId64 "  %s\n", kw,
				p->key, dw, p->def, lw, p->min, hw, p->max, p->doc);
		}
	}
}

void ctl_workloads_json(FILE *f, const char *instance, const struct chipd_workload *wl, uint32_t n)
{
	fprintf(f, "{\"v\":%d,\"ok\":true,\"instance\":", CTL_JSON_VERSION);
	ctl_json_str(f, instance);
	fputs(",\"workloads\":[", f);
	for (uint32_t w = 0; w < n; w++) {
		fputs(w ? ",{\"name\":" : "{\"name\":", f);
		ctl_json_str(f, wl[w].name);
		fputs(",\"doc\":", f);
		ctl_json_str(f, wl[w].doc);
		fputs(",\"params\":[", f);
		for (uint32_t i = 0; i < wl[w].nparams; i++) {
			const struct chipd_wl_param *p = &wl[w].params[i];

			fputs(i ? ",{\"key\":" : "{\"key\":", f);
			ctl_json_str(f, p->key);
			fprintf(f,
				",\"default\":%" PRId64 ",\"min\":%" PRId64 ",\"max\":%" PRId64
				",\"doc\":",
				p->def, p->min, p->max);
			ctl_json_str(f, p->doc);
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputs("]}\n", f);
}

static const char workloads_usage[] =
    "Usage: chipctl workloads [--json]\n"
    "Lists the workloads the supervisor runs and, per workload, the parameters a\n"
    "submit may set: name, default, min, max (inclusive) and meaning.\n"
    "  --json            one document: {\"v\":1,\"ok\":true,\"instance\":...,\n"
    "                    \"workloads\":[{\"name\":...,\"doc\":...,\"params\":[{\"key\":...,\n"
    "                    \"default\":N,\"min\":N,\"max\":N,\"doc\":...}]}]}\n" CTL_HELP_COMMON;

int ctl_workloads_fetch(struct ctl *g, chipd_conn *c, const char *cmd,
			struct chipd_workload **out, uint32_t *n)
{
	struct chipd_error err;
	uint32_t cap = CHIPD_MAX_WORKLOADS;
	int rc;

	for (;;) {
		*n = 0;
		*out = calloc(cap, sizeof(**out));
		if (!*out) {
			fprintf(stderr, "chipctl %s: out of memory\n", cmd);
			return CTL_EXIT_FAILED;
		}
		rc = chipd_workloads(c, g->timeout_ms, *out, cap, n, &err);
		if (rc != -ENOBUFS || *n <= cap)
			break;
		free(*out); /* more than room: once more, with room for all */
		cap = *n;
	}
	if (rc) {
		free(*out);
		*out = NULL;
		return ctl_report(g, cmd, rc, &err, false);
	}
	return CTL_EXIT_OK;
}

int ctl_workloads_cmd(struct ctl *g, int argc, char **argv, const struct ctl_workloads_view *v)
{
	const struct ctl_args a = {.usage = v->usage, .json = true};
	struct chipd_workload *wl = NULL;
	chipd_conn *c;
	uint32_t n = 0;
	int rc = ctl_args(g, argc, argv, &a);

	if (rc)
		return rc == CTL_HELP ? CTL_EXIT_OK : rc;
	rc = ctl_connect(g, &c);
	if (rc)
		return rc;
	rc = ctl_workloads_fetch(g, c, v->cmd, &wl, &n);
	if (rc == CTL_EXIT_OK && g->json)
		v->json(stdout, chipd_instance(c), wl, n);
	else if (rc == CTL_EXIT_OK)
		v->table(stdout, wl, n);
	free(wl);
	chipd_close(c);
	return rc;
}

int ctl_cmd_workloads(struct ctl *g, int argc, char **argv)
{
	static const struct ctl_workloads_view v = {
	    "workloads", workloads_usage, ctl_workloads_table, ctl_workloads_json};

	return ctl_workloads_cmd(g, argc, argv, &v);
}
