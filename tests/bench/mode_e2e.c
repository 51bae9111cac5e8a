/* mode_e2e.c - `chipbench e2e`: a real chipd (2 sim chips) under 1, 4, 16, 64
 * concurrent clients. Each client is a thread of this process with its own libchipd
 * connection; it submits synthetic requests back to back (submit, read every token,
 * close) for a fixed time. Per row: requests/s, tokens/s, token delivery latency
 * (the worker's ts_ns vs CLOCK_MONOTONIC when the client has the token) and
 * admission latency (the chipd_submit call) p50/p99. Then token delivery with one
 * client, and small requests: one-token zero-work requests (submit -> final token
 * p50/p99, req/s) at 1, 4, 16 and 64 clients next to chipd_ping of the same node
 * and the floor of their path on these CPUs (e2e_floor.c).
 *
 * The baseline is the 1-client row of the same run: there is no other server to put
 * in front of the same client loop, so the ratios say how the node scales with
 * concurrency, not how it compares with something else. */
#include "modes.h"

#include "bench.h"
#include "bench_args.h"
#include "bench_chipd.h"
#include "e2e.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void e2e_usage(FILE *f)
{
	fputs("usage: chipbench e2e [--chipd PATH] [--clients N,N,...] [--seconds S]\n"
	      "                     [--tokens N] [--device-us N] [--delivery-tokens N]\n"
	      "                     [--delivery-device-us N] [--no-delivery]\n"
	      "                     [--small-clients N,N,...] [--small-repeats N] [--no-small]\n"
	      "                     [--json]\n"
	      "  a real chipd with 2 sim chips; each client a thread with its own connection\n"
	      "  submitting synthetic requests back to back; defaults: clients 1,4,16,64,\n"
	      "  2 s per row, tokens 16, device_us 0; ratios against the first row.\n"
	      "  Then token delivery with one client (tokens 64, device_us 200: spaced tokens),\n"
	      "  its reader spinning 50 us before sleeping (the default) against one that\n"
	      "  never sleeps. Then small requests (tokens 1, device_us 0) at --small-clients\n"
	      "  (default 1,4,16,64), each --small-repeats windows of --seconds (default 5,\n"
	      "  the window of the median req/s reported, with the range of req/s):\n"
	      "  submit -> final token p50/p99 and req/s, against\n"
	      "  chipd_ping p50 of the same node, and the floor of their path: the p50 of a\n"
	      "  hand-off among 6 threads waiting as chipd's do, times the path's 7\n",
	      f);
}

int mode_e2e(int argc, char **argv)
{
	struct e2e_opts o = {.clients = {1, 4, 16, 64},
			     .nrows = 4,
			     .seconds = 2,
			     .tokens = 16,
			     .dl_tokens = 64,
			     .dl_device_us = 200,
			     .delivery = true,
			     .small_clients = {1, 4, 16, 64},
			     .nsmall = 4,
			     .small_repeats = 5,
			     .small = true};
	const struct bench_arg args[] = {
	    {"chipd", BENCH_ARG_STRING, &o.chipd},
	    {"clients", BENCH_ARG_LIST, &(struct bench_arg_list){o.clients, E2E_MAX_ROWS, &o.nrows},
	     1, E2E_MAX_CLIENTS},
	    {"seconds", BENCH_ARG_DOUBLE, &o.seconds, 0, 3600},
	    {"tokens", BENCH_ARG_UNSIGNED, &o.tokens, 1, UINT_MAX},
	    {"device-us", BENCH_ARG_UNSIGNED, &o.device_us, 0, UINT_MAX},
	    {"delivery-tokens", BENCH_ARG_UNSIGNED, &o.dl_tokens, 1, UINT_MAX},
	    {"delivery-device-us", BENCH_ARG_UNSIGNED, &o.dl_device_us, 0, UINT_MAX},
	    {"no-delivery", BENCH_ARG_CLEAR, &o.delivery},
	    {"small-clients", BENCH_ARG_LIST,
	     &(struct bench_arg_list){o.small_clients, E2E_MAX_ROWS, &o.nsmall}, 1,
	     E2E_MAX_CLIENTS},
	    {"small-repeats", BENCH_ARG_UNSIGNED, &o.small_repeats, 1, 99},
	    {"no-small", BENCH_ARG_CLEAR, &o.small},
	    {"json", BENCH_ARG_FLAG, &o.json},
	};
	struct e2e_row rows[E2E_MAX_ROWS] = {0}, dl[2] = {0};
	struct e2e_small small = {0};
	struct bench_chipd d;
	int fails = 0, rc;

	rc = bench_args_parse(argc, argv, "e2e", args, sizeof(args) / sizeof(args[0]), e2e_usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	/* the table's range takes 0; a row needs some time */
	if (!(o.seconds > 0))
		return bench_args_error("e2e", e2e_usage, "--seconds: '%g' is not more than 0",
					o.seconds);
	/* default router limits (max-pending 256, queue 64 per chip) exceed 64 clients */
	rc = bench_chipd_start(&d, bench_chipd_bin(o.chipd), "e2e", 2, NULL);
	if (rc)
		return 1;
	for (unsigned i = 0; i < o.nrows; i++) {
		rows[i] = (struct e2e_row){
		    .clients = o.clients[i], .req_tokens = o.tokens, .device_us = o.device_us};
		if (e2e_row(&o, &d, &rows[i]))
			fails++;
	}
	for (unsigned i = 0; o.delivery && i < 2; i++) {
		/* the spinning reader spins for its whole call timeout */
		dl[i] = (struct e2e_row){.clients = 1,
					 .req_tokens = o.dl_tokens,
					 .device_us = o.dl_device_us,
					 .spin_us = i ? E2E_CALL_MS * 1000u : 0};
		if (e2e_row(&o, &d, &dl[i]))
			fails++;
	}
	if (o.small && (e2e_ping(&d, &small) || e2e_floor(&small)))
		fails++;
	for (unsigned i = 0; o.small && i < o.nsmall; i++) {
		small.rows[i] = (struct e2e_row){.clients = o.small_clients[i], .req_tokens = 1};
		if (e2e_row_median(&o, &d, &small.rows[i], o.small_repeats))
			fails++;
	}
	small.nrows = o.small ? o.nsmall : 0;
	rc = bench_chipd_stop(&d, NULL);
	if (rc) {
		fprintf(stderr, "chipbench e2e: chipd exited %d\n", rc);
		fails++;
	}
	if (o.json)
		e2e_print_json(&o, rows, o.nrows, dl, &small);
	else
		e2e_print_table(&o, rows, o.nrows, dl, &small);
	return fails ? 1 : 0;
}
