/* ctl_format.c - `chipctl stats` as a table and as JSON: pure functions of the
 * counters (no connection), so that the unit suite pins their output. */
#include "ctl.h"

#include <stdlib.h>
#include <string.h>

/* Worker columns per table: 8 chips of 20-digit counters fit in 200 columns. */
#define TABLE_COLS 8
#define SUP_BLOCK  "supervisor"

/* Whether entry @i is the first with its block (when @by_block) or its name. */
static bool first_of(const struct chipd_stat *st, uint32_t i, bool by_block)
{
	for (uint32_t j = 0; j < i; j++) {
		if (by_block && strcmp(st[j].block, st[i].block) == 0)
			return false;
		if (!by_block && strcmp(st[j].block, SUP_BLOCK) != 0 &&
		    strcmp(st[j].name, st[i].name) == 0)
			return false;
	}
	return true;
}

static int digits(uint64_t v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

static void sup_rows(FILE *f, const struct chipd_stat *st, uint32_t n)
{
	int w = 1, vw = 1;

	for (uint32_t i = 0; i < n; i++)
		if (strcmp(st[i].block, SUP_BLOCK) == 0) {
			int l = (int)strlen(st[i].name);

			w = l > w ? l : w;
			vw = digits(st[i].value) > vw ? digits(st[i].value) : vw;
		}
	fputs(SUP_BLOCK "\n", f);
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(st[i].block, SUP_BLOCK) == 0)
			fprintf(f, "  %-*s  %*llu%s\n", w, st[i].name, vw,
				(unsigned long long)st[i].value, st[i].gauge ? "  (gauge)" : "");
}

/* One table of the worker blocks @blocks[0..nb) (indices of their first entries). */
static void wrk_table(FILE *f, const struct chipd_stat *st, uint32_t n, const uint32_t *blocks,
		      uint32_t nb)
{
	int w = (int)strlen("counter"), cw[TABLE_COLS];

	for (uint32_t i = 0; i < n; i++)
		if (strcmp(st[i].block, SUP_BLOCK) != 0 && (int)strlen(st[i].name) > w)
			w = (int)strlen(st[i].name);
	for (uint32_t b = 0; b < nb; b++) {
		cw[b] = (int)strlen(st[blocks[b]].block);
		for (uint32_t i = 0; i < n; i++)
			if (strcmp(st[i].block, st[blocks[b]].block) == 0 &&
			    digits(st[i].value) > cw[b])
				cw[b] = digits(st[i].value);
	}
	fprintf(f, "  %-*s", w, "counter");
	for (uint32_t b = 0; b < nb; b++)
		fprintf(f, "  %*s", cw[b], st[blocks[b]].block);
	fputc('\n', f);
	for (uint32_t i = 0; i < n; i++) {
		bool gauge = false;

		if (strcmp(st[i].block, SUP_BLOCK) == 0 || !first_of(st, i, false))
			continue;
		fprintf(f, "  %-*s", w, st[i].name);
		for (uint32_t b = 0; b < nb; b++) {
			const struct chipd_stat *s =
			    ctl_stat_find(st, n, st[blocks[b]].block, st[i].name);

			if (s)
				fprintf(f, "  %*llu", cw[b], (unsigned long long)s->value);
			else
				fprintf(f, "  %*s", cw[b], "-");
			gauge |= s && s->gauge;
		}
		fputs(gauge ? "  (gauge)\n" : "\n", f);
	}
}

void ctl_stats_table(FILE *f, const struct chipd_stat *st, uint32_t n)
{
	uint32_t blocks[TABLE_COLS], nb = 0;

	sup_rows(f, st, n);
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(st[i].block, SUP_BLOCK) == 0 || !first_of(st, i, true))
			continue;
		blocks[nb++] = i;
		if (nb == TABLE_COLS) {
			fputc('\n', f);
			wrk_table(f, st, n, blocks, nb);
			nb = 0;
		}
	}
	if (nb) {
		fputc('\n', f);
		wrk_table(f, st, n, blocks, nb);
	}
}

/* The counters (or gauges) of the block of entry @b as a JSON map. */
static void json_kind(FILE *f, const struct chipd_stat *st, uint32_t n, uint32_t b, bool gauge)
{
	const char *sep = "";

	fputc('{', f);
	for (uint32_t i = b; i < n; i++) {
		if (strcmp(st[i].block, st[b].block) != 0 || st[i].gauge != gauge)
			continue;
		fputs(sep, f);
		ctl_json_str(f, st[i].name);
		fprintf(f, ":%llu", (unsigned long long)st[i].value);
		sep = ",";
	}
	fputc('}', f);
}

void ctl_stats_json(FILE *f, const char *instance, const struct chipd_stat *st, uint32_t n)
{
	const char *sep = "";

	fprintf(f, "{\"v\":%d,\"ok\":true,\"instance\":", CTL_JSON_VERSION);
	ctl_json_str(f, instance);
	fputs(",\"blocks\":{", f);
	for (uint32_t i = 0; i < n; i++) {
		if (!first_of(st, i, true))
			continue;
		fputs(sep, f);
		ctl_json_str(f, st[i].block);
		fputs(":{\"counters\":", f);
		json_kind(f, st, n, i, false);
		fputs(",\"gauges\":", f);
		json_kind(f, st, n, i, true);
		fputc('}', f);
		sep = ",";
	}
	fputs("}}\n", f);
}
