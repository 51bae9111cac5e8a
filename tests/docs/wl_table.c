/* wl_table.c - prints every workload's parameter table (wl_param_table, the table the
 * validator checks against) as the Markdown of docs/protocol.md §8.6: per workload a
 * heading "#### `name`: summary" and a table with one row per parameter. workloads.sh
 * compares it with the document; run it to write that part of the document. */
#include "wl.h"

#include <inttypes.h>
#include <stdio.h>

int main(void)
{
	for (const char *const *name = wl_names(); *name; name++) {
		const struct wl_param_info *t;
		int n = wl_param_table(*name, &t);

		if (n < 0) {
			fprintf(stderr, "wl_table: %s is in wl_names but has no table\n", *name);
			return 1;
		}
		printf("#### `%s`: %s\n\n", *name, wl_summary(*name));
		printf("| parameter | default | min | max | meaning |\n|---|---:|---:|---:|---|\n");
		for (int i = 0; i < n; i++)
			printf("| `%s` | %" PRId64 " | %" PRId64 " | %" PRId64 " | %s |\n",
			       t[i].key, t[i].def, t[i].lo, t[i].hi, t[i].doc);
		printf("\n");
	}
	return 0;
}
