/* prom_sample.c - prints what `chipctl stats --prom` prints for a node of two chips
 * with every counter this version defines (proto/node.h), each with a value, for
 * tests/ctl/promtool.sh to hand to `promtool check metrics`. */
#include "ctl.h"
#include "node.h"

#include <stdio.h>
#include <string.h>

#define NCHIPS 2

#define SUP_STAT(name, kind) {"supervisor", #name, kind == CTR_GAUGE, 0},
#define WRK_STAT(name, kind) {"chip", #name, kind == CTR_GAUGE, 0},

static const struct chipd_stat sup[] = {PROTO_SUP_COUNTERS(SUP_STAT)};
static const struct chipd_stat wrk[] = {PROTO_WRK_COUNTERS(WRK_STAT)};

int main(void)
{
	struct chipd_stat st[sizeof(sup) / sizeof(sup[0]) + NCHIPS * sizeof(wrk) / sizeof(wrk[0])];
	uint32_t n = 0;

	for (size_t i = 0; i < sizeof(sup) / sizeof(sup[0]); i++, n++) {
		st[n] = sup[i];
		st[n].value = 1000 + n;
	}
	for (unsigned c = 0; c < NCHIPS; c++)
		for (size_t i = 0; i < sizeof(wrk) / sizeof(wrk[0]); i++, n++) {
			st[n] = wrk[i];
			snprintf(st[n].block, sizeof(st[n].block), "chip%u", c);
			st[n].value = 123456789ull * (n + 1);
		}
	return ctl_prom_write(stdout, st, n, true) ? 1 : 0;
}
