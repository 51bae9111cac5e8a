/* ping_chipd.c - see ping_chipd.h. */
#include "ping_chipd.h"

#include "bench_chipd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int ping_chipd_once(void *ctx, uint64_t i)
{
	struct chipd_error err;

	(void)i;
	return chipd_ping(ctx, BENCH_CHIPD_CALL_MS, NULL, &err);
}

int ping_chipd_row(const struct bench_opts *opts, const char *bin, const cpu_set_t *unpinned,
		   unsigned iters, struct bench_result *out)
{
	uint64_t *samples = calloc(iters, sizeof(*samples));
	uint64_t elapsed = 0;
	struct bench_chipd d;
	int rc, stop_rc;

	bench_name(out, PING_CHIPD_NAME, PING_CHIPD_LABEL);
	if (!samples) {
		bench_skip(out, "out of memory for %u samples", iters);
		return -ENOMEM;
	}
	/* chipd is the server here: a separate process the scheduler places, as in
	 * production; the fork would inherit the client's pinning */
	sched_setaffinity(0, sizeof(*unpinned), unpinned);
	rc = bench_chipd_start(&d, bench_chipd_bin(bin), "ping", 1, NULL);
	bench_pin(opts->cpu_client);
	if (rc) {
		bench_skip(out, "chipd did not start: %s", strerror(-rc));
		goto out_free;
	}
	rc = bench_loop(ping_chipd_once, d.conn, iters / 10 + 1, iters, samples, &elapsed);
	stop_rc = bench_chipd_stop(&d, NULL);
	if (rc)
		bench_skip(out, "chipd_ping failed: %s", strerror(-rc));
	else if (stop_rc) {
		bench_skip(out, "chipd did not stop cleanly: %d", stop_rc);
		rc = -EPROTO;
	} else
		bench_fill(out, samples, iters, elapsed);
out_free:
	free(samples);
	return rc;
}
