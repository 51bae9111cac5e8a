/* mode_mailbox.c - `chipbench mailbox`: the chipd mailbox round trip against the raw
 * floor, a raw futex, a unix socket and (where installed) iceoryx, in one run; and
 * what a client pays for a ping through a real chipd (ping_chipd.c). */
#include "bench.h"
#include "bench_args.h"
#include "modes.h"
#include "peer_raw.h"
#include "ping_chipd.h"
#ifdef CHIPD_HAVE_ICEORYX
#include "peer_iceoryx.h"
#endif

#include "mbox.h"
#include "region.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MSG		64
#define SLOTS		64
#define SLOT_BUF	1024
#define PIPELINE_DEPTH	8
#define CALL_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)
#define SERVER_IDLE_NS	(30ull * 1000 * 1000 * 1000)
/* Spin budget for the spinning variant: longer than any round trip, so neither side
 * ever sleeps. */
#define SPIN_FOREVER_NS (1000ull * 1000 * 1000)

struct mbox_ctx {
	struct shm_region region;
	struct mbox mb;
	uint64_t spin_ns;
};

static int mbox_server(void *arg)
{
	struct mbox_ctx *c = arg;
	struct mbox_event ev;

	mbox_set_spin(&c->mb, c->spin_ns);
	if (mbox_server_attach(&c->mb) < 0)
		return 2;
	for (;;) {
		if (mbox_server_next(&c->mb, &ev, shm_deadline_in(SERVER_IDLE_NS)))
			return 3;
		if (ev.kind == MBOX_EV_RESET) {
			mbox_ack_reset(&c->mb, ev.t);
			continue;
		}
		if (ev.len == 4 && memcmp(ev.req, "quit", 4) == 0)
			return mbox_answer(&c->mb, ev.t, 0) ? 4 : 0;
		if (mbox_answer_copy(&c->mb, ev.t, ev.req, ev.len))
			return 5;
	}
}

static int mbox_round_trip(void *arg, uint64_t i)
{
	struct mbox_ctx *c = arg;
	struct mbox_ticket t;
	const void *answer;
	uint8_t out[MSG];
	uint32_t len;
	int rc;

	rc = mbox_claim(&c->mb, &t);
	if (rc)
		return rc;
	memset(mbox_req_buf(&c->mb, t), (int)(i & 0xff), MSG);
	rc = mbox_post(&c->mb, t, MSG);
	if (rc == 0)
		rc = mbox_wait(&c->mb, t, shm_deadline_in(CALL_TIMEOUT_NS));
	if (rc) {
		mbox_give_up(&c->mb, t);
		return rc;
	}
	rc = mbox_response(&c->mb, t, &answer, &len);
	if (rc == 0) {
		memcpy(out, answer, MSG);
		rc = len == MSG && out[0] == (uint8_t)(i & 0xff) ? 0 : -EPROTO;
	}
	mbox_release(&c->mb, t);
	return rc;
}

static int mbox_stop(void *arg)
{
	struct mbox_ctx *c = arg;
	uint32_t len;
	char out[8];

	return mbox_call(&c->mb, "quit", 4, out, sizeof(out), &len,
			 shm_deadline_in(CALL_TIMEOUT_NS));
}

static int mbox_ctx_init(struct mbox_ctx *c, uint64_t spin_ns)
{
	size_t size = SHM_BODY_OFFSET + mbox_size(SLOTS, SLOT_BUF, SLOT_BUF);
	int rc = shm_region_create_anon(&c->region, SHM_KIND_BENCH, size);

	if (rc)
		return rc;
	rc = mbox_init(&c->mb, shm_region_body(&c->region), shm_region_body_size(&c->region), SLOTS,
		       SLOT_BUF, SLOT_BUF);
	if (rc)
		return rc;
	shm_region_ready(&c->region);
	c->spin_ns = spin_ns;
	mbox_set_spin(&c->mb, spin_ns);
	return 0;
}

static int run_mbox(const struct bench_opts *opts, const char *name, const char *label,
		    uint64_t spin_ns, unsigned iters, struct bench_result *out)
{
	struct mbox_ctx c;
	struct bench_pingpong pp = {
	    .name = name,
	    .label = label,
	    .ctx = &c,
	    .server = mbox_server,
	    .round_trip = mbox_round_trip,
	    .stop = mbox_stop,
	    .iters = iters,
	    .warmup = iters / 10 + 1,
	};
	int rc = mbox_ctx_init(&c, spin_ns);

	if (rc) {
		bench_name(out, name, label);
		bench_skip(out, "mailbox setup: %s", strerror(-rc));
		return rc;
	}
	rc = bench_pingpong(opts, &pp, out);
	shm_region_detach(&c.region);
	return rc;
}

/* Keeps PIPELINE_DEPTH requests in flight; rps is the completion rate. A clock read
 * costs ~27 ns on these guests, a tenth of a pipelined request, so the harness reads
 * it once per PIPELINE_DEPTH requests: every PIPELINE_DEPTH-th request is a latency
 * sample (post to answer; *@nsamples of them) and the waits of one round share one
 * deadline. */
static int pipelined_client(struct mbox_ctx *c, unsigned total, uint64_t *samples,
			    unsigned *nsamples, uint64_t *elapsed)
{
	struct mbox_ticket t[PIPELINE_DEPTH];
	uint64_t posted_at[PIPELINE_DEPTH] = {0}, deadline = 0;
	unsigned next = 0, done = 0;
	int rc;

	*nsamples = 0;
	uint64_t start = shm_now_ns();
	while (done < total) {
		for (unsigned k = 0; k < PIPELINE_DEPTH && next < total; k++) {
			if (next - done >= PIPELINE_DEPTH)
				break;
			unsigned idx = next % PIPELINE_DEPTH;
			rc = mbox_claim(&c->mb, &t[idx]);
			if (rc)
				return rc;
			memset(mbox_req_buf(&c->mb, t[idx]), (int)(next & 0xff), MSG);
			if (idx == 0) {
				posted_at[0] = shm_now_ns();
				deadline = posted_at[0] + CALL_TIMEOUT_NS;
			}
			rc = mbox_post(&c->mb, t[idx], MSG);
			if (rc)
				return rc;
			next++;
		}
		unsigned idx = done % PIPELINE_DEPTH;
		const void *answer;
		uint32_t len;
		rc = mbox_wait(&c->mb, t[idx], deadline);
		if (rc == 0)
			rc = mbox_response(&c->mb, t[idx], &answer, &len);
		if (rc)
			return rc;
		if (len != MSG || ((const uint8_t *)answer)[0] != (uint8_t)(done & 0xff))
			return -EPROTO;
		mbox_release(&c->mb, t[idx]);
		if (idx == 0)
			samples[(*nsamples)++] = shm_now_ns() - posted_at[0];
		done++;
	}
	*elapsed = shm_now_ns() - start;
	return 0;
}

static int run_pipelined(const struct bench_opts *opts, unsigned total, struct bench_result *out)
{
	struct mbox_ctx c;
	uint64_t *samples = calloc(total, sizeof(*samples));
	uint64_t elapsed = 0;
	unsigned nsamples = 0;
	int rc;

	bench_name(out, "mbox_pipe8", "chipd mailbox, 8 requests in flight, spinning");
	if (!samples) {
		bench_skip(out, "out of memory");
		return -ENOMEM;
	}
	rc = mbox_ctx_init(&c, SPIN_FOREVER_NS);
	if (rc) {
		bench_skip(out, "mailbox setup: %s", strerror(-rc));
		goto out_free;
	}
	int pid = bench_fork(mbox_server, &c, opts->cpu_server);
	if (pid < 0) {
		rc = pid;
		bench_skip(out, "fork: %s", strerror(-pid));
		goto out_detach;
	}
	bench_pin(opts->cpu_client);
	rc = pipelined_client(&c, total / 10, samples, &nsamples, &elapsed); /* warm-up */
	if (rc == 0)
		rc = pipelined_client(&c, total, samples, &nsamples, &elapsed);
	int stop_rc = mbox_stop(&c);
	int status = bench_reap(pid, 10000);
	if (rc == 0 && (stop_rc || status))
		rc = -EPROTO;
	if (rc)
		bench_skip(out, "failed: %d (server exit %d)", rc, status);
	else {
		bench_fill(out, samples, nsamples, elapsed);
		out->samples = total; /* requests; the latency percentiles are of nsamples */
		out->rps = elapsed ? (double)total * 1e9 / (double)elapsed : 0;
	}
out_detach:
	shm_region_detach(&c.region);
out_free:
	free(samples);
	return rc;
}

static void usage(FILE *f)
{
	fputs("usage: chipbench mailbox [--iters N] [--sleep-iters N] [--cpus C,S] [--json]\n"
	      "                         [--no-iceoryx] [--no-chipd] [--chipd PATH]\n"
	      "  Round trip of a 64-byte request and a 64-byte answer between two processes\n"
	      "  pinned to two CPUs, for the chipd mailbox and its baselines, in one run.\n"
	      "  --iters N        round trips for spinning variants (default 200000)\n"
	      "  --sleep-iters N  round trips for sleeping variants (default 20000)\n"
	      "  --cpus C,S       client and server CPUs (default 0,1; -1 = unpinned)\n"
	      "  --json           one JSON document on stdout instead of the table\n"
	      "  --no-iceoryx     do not start RouDi; report the iceoryx row as skipped\n"
	      "  --no-chipd       do not start chipd; report the chipd_ping row as skipped\n"
	      "  --chipd PATH     the chipd binary (default: the one built with chipbench);\n"
	      "                   chipd_ping takes --sleep-iters round trips, chipd unpinned\n",
	      f);
}

/* Index of each variant in the results array. */
enum {
	V_SPIN,
	V_SLEEP,
	V_RAW_SPIN,
	V_RAW_FUTEX,
	V_SOCK,
	V_PIPE,
	V_ICEORYX,
	V_CHIPD,
	V_PIPES, /* (i): last, so the letters of the others stay as documented */
	V_COUNT
};

static double ratio(const struct bench_result *a, const struct bench_result *b)
{
	if (a->skipped || b->skipped || b->p50_ns <= 0)
		return 0;
	return a->p50_ns / b->p50_ns;
}

static void print_ratio(FILE *f, bool json, bool *first, const char *key, const char *what,
			double value, const char *target)
{
	if (json) {
		fprintf(f, "%s\n    \"%s\": ", *first ? "" : ",", key);
		bench_json_num(f, value, 3);
		*first = false;
		return;
	}
	if (value == 0)
		fprintf(f, "  %-44s   n/a (a variant was skipped)\n", what);
	else
		fprintf(f, "  %-44s %6.2fx   target %s\n", what, value, target);
}

/* --cpus C,S: two CPU numbers, -1 for unpinned. */
static int parse_cpus(const char *value, void *dst)
{
	struct bench_opts *o = dst;
	int cpu[2];
	char *end;

	for (int i = 0; i < 2; i++, value = end + 1) {
		long v;

		errno = 0;
		v = strtol(value, &end, 10);
		if (end == value || errno || v < -1 || v >= CPU_SETSIZE || *end != (i ? '\0' : ','))
			return -EINVAL;
		cpu[i] = (int)v;
	}
	o->cpu_client = cpu[0];
	o->cpu_server = cpu[1];
	return 0;
}

int mode_mailbox(int argc, char **argv)
{
	struct bench_opts opts = {.iters = 200000, .cpu_client = 0, .cpu_server = 1};
	unsigned sleep_iters = 20000;
	bool iceoryx = true, chipd = true;
	const char *chipd_bin = NULL;
	cpu_set_t unpinned;
	const struct bench_arg args[] = {
	    {"iters", BENCH_ARG_UNSIGNED, &opts.iters, 1, UINT_MAX},
	    {"sleep-iters", BENCH_ARG_UNSIGNED, &sleep_iters, 1, UINT_MAX},
	    {"cpus", BENCH_ARG_CUSTOM, &opts, 0, 0, "C,S (CPUs, -1 = unpinned)", parse_cpus},
	    {"json", BENCH_ARG_FLAG, &opts.json},
	    {"no-iceoryx", BENCH_ARG_CLEAR, &iceoryx},
	    {"no-chipd", BENCH_ARG_CLEAR, &chipd},
	    {"chipd", BENCH_ARG_STRING, &chipd_bin},
	};
	int rc =
	    bench_args_parse(argc, argv, "mailbox", args, sizeof(args) / sizeof(args[0]), usage);

	if (rc)
		return rc == 1 ? 0 : rc;
	opts.warmup = opts.iters / 10 + 1;

	/* before the first variant pins this thread: chipd must not inherit that */
	if (sched_getaffinity(0, sizeof(unpinned), &unpinned))
		CPU_ZERO(&unpinned);
	struct bench_result res[V_COUNT];
	run_mbox(&opts, "mbox_spin", "chipd mailbox, spinning", SPIN_FOREVER_NS, opts.iters,
		 &res[V_SPIN]);
	run_mbox(&opts, "mbox_sleep", "chipd mailbox, futex sleep every time", 0, sleep_iters,
		 &res[V_SLEEP]);
	peer_spin_pingpong(&opts, &res[V_RAW_SPIN]);
	peer_futex_pingpong(&opts, sleep_iters, &res[V_RAW_FUTEX]);
	peer_seqpacket_pingpong(&opts, sleep_iters, &res[V_SOCK]);
	run_pipelined(&opts, opts.iters, &res[V_PIPE]);
	bench_name(&res[V_ICEORYX], "iceoryx_busy", "iceoryx pub/sub busy-poll ping-pong (64 B)");
#ifdef CHIPD_HAVE_ICEORYX
	if (iceoryx)
		peer_iceoryx_pingpong(&opts, &res[V_ICEORYX]);
	else
		bench_skip(&res[V_ICEORYX], "--no-iceoryx");
#else
	bench_skip(&res[V_ICEORYX], "built without iceoryx (libiceoryx-binding-c-dev)");
	(void)iceoryx;
#endif
	peer_pipe_pingpong(&opts, sleep_iters, &res[V_PIPES]);
	if (chipd) {
		ping_chipd_row(&opts, chipd_bin, &unpinned, sleep_iters, &res[V_CHIPD]);
	} else {
		bench_name(&res[V_CHIPD], PING_CHIPD_NAME, PING_CHIPD_LABEL);
		bench_skip(&res[V_CHIPD], "--no-chipd");
	}

	FILE *f = stdout;
	bool first = true;
	if (opts.json) {
		fputs("{\n  \"chipbench\": 1,\n  \"mode\": \"mailbox\",\n  \"results\": ", f);
		bench_print_json(f, res, V_COUNT);
		fputs(",\n  \"ratios\": {", f);
	} else {
		bench_print_table(f, "chipbench mailbox: 64-byte round trips, two pinned processes",
				  res, V_COUNT);
		fputs("ratios (p50 round trip; pipelined in req/s)\n", f);
	}
	print_ratio(f, opts.json, &first, "mbox_spin_over_raw_spin", "(a) mailbox spin / raw spin",
		    ratio(&res[V_SPIN], &res[V_RAW_SPIN]), "<= 2.0");
	print_ratio(f, opts.json, &first, "iceoryx_over_mbox_spin", "(g) iceoryx / mailbox spin",
		    ratio(&res[V_ICEORYX], &res[V_SPIN]), ">= 5.0");
	print_ratio(f, opts.json, &first, "mbox_sleep_over_raw_futex",
		    "(b) mailbox sleep / raw futex", ratio(&res[V_SLEEP], &res[V_RAW_FUTEX]),
		    "<= 1.2");
	print_ratio(f, opts.json, &first, "unix_seqpacket_over_mbox_spin",
		    "(e) unix socket / mailbox spin", ratio(&res[V_SOCK], &res[V_SPIN]),
		    "(context)");
	print_ratio(f, opts.json, &first, "pipe_pair_over_mbox_spin", "(i) pipes / mailbox spin",
		    ratio(&res[V_PIPES], &res[V_SPIN]), "(context)");
	print_ratio(f, opts.json, &first, "chipd_ping_over_mbox_spin",
		    "(h) chipd_ping / mailbox spin", ratio(&res[V_CHIPD], &res[V_SPIN]),
		    "(context)");
	if (opts.json) {
		fprintf(f, "\n  },\n  \"pipelined_rps\": %.1f\n}\n",
			res[V_PIPE].skipped ? 0.0 : res[V_PIPE].rps);
	} else if (!res[V_PIPE].skipped) {
		fprintf(f, "  %-44s %6.2f M req/s   target >= 2.0\n",
			"(f) mailbox pipelined, 8 in flight", res[V_PIPE].rps / 1e6);
	}
	/* Skipped optional peers are reported, not failures; a failed chipd variant is. */
	bool failed = res[V_SPIN].skipped || res[V_SLEEP].skipped || res[V_PIPE].skipped ||
		      (chipd && res[V_CHIPD].skipped);
	return failed ? 1 : 0;
}
