/* node_shape.c - prints the default shape of a node region and of a client region
 * (proto_node_config_default for one worker, laid out by proto_node_layout) as the
 * phrases docs/protocol.md §8.1 states them, one per line. node_shape.sh checks that
 * the document holds each phrase, so the numbers it gives are the code's. */
#include "node.h"

#include <inttypes.h>
#include <stdio.h>

/* @v with thousands separators, as the document writes numbers above 9999 */
static const char *grouped(uint64_t v, char buf[32])
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%" PRIu64, v), o = 0;

	for (int i = 0; i < n; i++) {
		if (n > 4 && i > 0 && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

int main(void)
{
	struct proto_node_config cfg;
	struct proto_node_desc d;
	char a[32], b[32], c[32], e[32], f[32];

	proto_node_config_default(&cfg, 1);
	if (proto_node_layout(&cfg, &d)) {
		fprintf(stderr, "node_shape: the default shape does not lay out\n");
		return 1;
	}
	printf("%u client regions (`--max-clients`), each with a mailbox of %u slots\n",
	       cfg.nclients, cfg.mbox_slots);
	printf("with %u-byte request and %u-byte response buffers (%s bytes:\n", cfg.req_cap,
	       cfg.resp_cap, grouped(d.mbox_size, a));
	printf("%u rings of %u records (%s bytes each: a reader may fall %u tokens behind\n",
	       d.nrings, d.ring_capacity, grouped(d.ring_stride, a), d.ring_capacity - 1);
	printf("and a data area of %s bytes (`--client-data-kib`)\n", grouped(d.data_size, a));
	printf("For one worker the node region's offsets are: directory %u, supervisor counters"
	       " %u (%u bytes), worker counters %u (stride %u), rings %u (stride %s), total %s;\n",
	       d.dir_offset, d.sup_ctr_offset, d.sup_ctr_size, d.wrk_ctr_offset,
	       d.wrk_ctr_stride, d.rings_offset, grouped(d.ring_stride, a),
	       grouped(d.total_size, b));
	printf("a client region's: mailbox %u (%s bytes), consumer lines %s (stride %u), data"
	       " area %s (%s bytes), total %s\n",
	       d.mbox_offset, grouped(d.mbox_size, a), grouped(d.cons_offset, b), d.cons_stride,
	       grouped(d.data_offset, c), grouped(d.data_size, e), grouped(d.xchg_size, f));
	return 0;
}
