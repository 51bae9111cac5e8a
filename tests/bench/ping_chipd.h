/* ping_chipd.h - the mailbox mode's row (h): what a client pays for a full round trip
 * through a real chipd (libchipd -> the node's client mailbox -> the supervisor's
 * router -> the answer), next to the raw mailbox rows. */
#ifndef CHIPD_BENCH_PING_CHIPD_H
#define CHIPD_BENCH_PING_CHIPD_H

#include "bench.h"

#include <sched.h>

#define PING_CHIPD_NAME	 "chipd_ping"
#define PING_CHIPD_LABEL "chipd_ping via libchipd to a real chipd (1 chip)"

/* Starts the chipd @bin (NULL: the one built next to chipbench) with 1 chip, unpinned
 * (with @unpinned, the affinity chipbench had before any pinning), pins the caller to
 * opts->cpu_client, times @iters chipd_ping round trips after @iters / 10 + 1 warm-up
 * ones, stops chipd and fills @out. Returns 0, or -errno with @out marked skipped and
 * why. */
int ping_chipd_row(const struct bench_opts *opts, const char *bin, const cpu_set_t *unpinned,
		   unsigned iters, struct bench_result *out);

#endif
