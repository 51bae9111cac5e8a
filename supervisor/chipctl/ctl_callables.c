/* ctl_callables.c - `chipctl callables`: the callables the node holds (its workloads,
 * docs/callables.md): each one's version, the chips it is loaded on, its requests in
 * flight, its counts since it was loaded and its parameters, as a table or one JSON
 * document. The formatters are pure, for the unit suite. */
#include "ctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void ctl_chips_text(char *buf, size_t cap, uint64_t mask)
{
	size_t used = 0;

	buf[0] = '\0';
	for (uint32_t c = 0; c < 64 && used < cap; c++) {
		uint32_t last = c;
		int n;

		if (!(mask >> c & 1))
			continue;
		while (last + 1 < 64 && (mask >> (last + 1) & 1))
			last++;
		n = last == c ? snprintf(buf + used, cap - used, "%s%" PRIu32, used ? "," : "", c)
			      : snprintf(buf + used, cap - used, "%s%" PRIu32 "-%" PRIu32,
					 used ? "," : "", c, last);
		if (n < 0)
			break;
		used += (size_t)n;
		c = last;
	}
	if (!mask)
		snprintf(buf, cap, "-");
}

/* A callable's counts, in the order of their table columns and JSON keys. */
#define NCOUNTS 5
static const char *const count_names[NCOUNTS] = {"requests", "completed", "failed", "cancelled",
						 "tokens"};

static void counts_of(const struct chipd_workload *w, uint64_t v[NCOUNTS])
{
	v[0] = w->requests;
	v[1] = w->completed;
	v[2] = w->failed;
	v[3] = w->cancelled;
	v[4] = w->tokens;
}

void ctl_callables_table(FILE *f, const struct chipd_workload *wl, uint32_t n)
{
	int nw = (int)strlen("callable"), nc = (int)strlen("chips"), cw[NCOUNTS];
	uint64_t v[NCOUNTS];
	char chips[192], num[24];

	for (int k = 0; k < NCOUNTS; k++)
		cw[k] = (int)strlen(count_names[k]);
	for (uint32_t w = 0; w < n; w++) {
		ctl_chips_text(chips, sizeof(chips), wl[w].chips);
		if ((int)strlen(wl[w].name) > nw)
			nw = (int)strlen(wl[w].name);
		if ((int)strlen(chips) > nc)
			nc = (int)strlen(chips);
		counts_of(&wl[w], v);
		for (int k = 0; k < NCOUNTS; k++) {
			int len = snprintf(num, sizeof(num), "%" PRIu64, v[k]);

			if (len > cw[k])
				cw[k] = len;
		}
	}
	fprintf(f, "%-*s  %10s  %-*s  %8s  ", nw, "callable", "version", nc, "chips", "active");
	for (int k = 0; k < NCOUNTS; k++)
		fprintf(f, "%*s  ", cw[k], count_names[k]);
	fputs("parameters\n", f);
	for (uint32_t w = 0; w < n; w++) {
		ctl_chips_text(chips, sizeof(chips), wl[w].chips);
		fprintf(f, "%-*s  %10" PRIu32 "  %-*s  %8" PRIu32 "  ", nw, wl[w].name,
			wl[w].version, nc, chips, wl[w].active);
		counts_of(&wl[w], v);
		for (int k = 0; k < NCOUNTS; k++)
			fprintf(f, "%*" PRIu64 "  ", cw[k], v[k]);
		for (uint32_t i = 0; i < wl[w].nparams; i++)
			fprintf(f, "%s%s", i ? ", " : "", wl[w].params[i].key);
		fputs(wl[w].nparams ? "\n" : "-\n", f);
	}
}

void ctl_callables_json(FILE *f, const char *instance, const struct chipd_workload *wl,
			uint32_t n)
{
	fprintf(f, "{\"v\":%d,\"ok\":true,\"instance\":", CTL_JSON_VERSION);
	ctl_json_str(f, instance);
	fputs(",\"callables\":[", f);
	for (uint32_t w = 0; w < n; w++) {
		uint64_t v[NCOUNTS];
		bool first = true;

		fputs(w ? ",{\"name\":" : "{\"name\":", f);
		ctl_json_str(f, wl[w].name);
		fprintf(f, ",\"version\":%" PRIu32 ",\"doc\":", wl[w].version);
		ctl_json_str(f, wl[w].doc);
		fputs(",\"chips\":[", f);
		for (uint32_t c = 0; c < 64; c++)
			if (wl[w].chips >> c & 1) {
				fprintf(f, first ? "%" PRIu32 : ",%" PRIu32, c);
				first = false;
			}
		fprintf(f, "],\"active\":%" PRIu32, wl[w].active);
		counts_of(&wl[w], v);
		for (int k = 0; k < NCOUNTS; k++)
			fprintf(f, ",\"%s\":%" PRIu64, count_names[k], v[k]);
		fputs(",\"params\":[", f);
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
    "Lists the callables the node holds (its workloads, docs/callables.md): name, the\n"
    "callable's own version, the chips it is loaded on, its requests in flight, its\n"
    "counts since it was loaded (requests admitted; of those, streams ended completed,\n"
    "failed or cancelled; tokens of the ended streams) and its parameters (`chipctl\n"
    "workloads` shows their defaults, ranges and meanings).\n"
    "  --json            one document: {\"v\":1,\"ok\":true,\"instance\":...,\n"
    "                    \"callables\":[{\"name\":...,\"version\":N,\"doc\":...,\n"
    "                    \"chips\":[0,...],\"active\":N,\"requests\":N,\n"
    "                    \"completed\":N,\"failed\":N,\"cancelled\":N,\"tokens\":N,\n"
    "                    \"params\":[{\"key\":...,\"default\":N,\"min\":N,\n"
    "                    \"max\":N}]}]}\n" CTL_HELP_COMMON;

int ctl_cmd_callables(struct ctl *g, int argc, char **argv)
{
	static const struct ctl_workloads_view v = {
	    "callables", callables_usage, ctl_callables_table, ctl_callables_json};

	return ctl_workloads_cmd(g, argc, argv, &v);
}
