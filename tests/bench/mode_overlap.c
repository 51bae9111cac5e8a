/* mode_overlap.c - `chipbench overlap`: what the O/S overlap buys. The synthetic
 * workload (host cost burnt by O while building, device cost slept by the sim
 * device) runs through a real worker (wrk_main on a thread, assigns through its
 * control mailbox, tokens read from the node's rings), once with arena banks
 * overlapping and once with --no-overlap (one bank), at host cost = 0.5x, 1x and 2x
 * the device cost. Prints tokens/s of both and their ratio (ideal 2.0 at 1x).
 * The same through the whole node follows (overlap_chipd.c): a real chipd started
 * plain and --no-overlap, one request submitted through libchipd. Everything is
 * measured first, then printed (overlap_print.c): a table, or one JSON document. */
#include "modes.h"

#include "bench_args.h"
#include "overlap.h"

#include "node.h"
#include "proto.h"
#include "wrk.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OV_SLOTS   4u
#define OV_CALL_NS (5ull * 1000 * 1000 * 1000)
/* A whole run's bound: far beyond any sane configuration's duration. */
#define OV_READ_NS (600ull * 1000 * 1000 * 1000)

struct ov_run {
	char name[64];
	struct proto_node node;
	struct shm_region ctl;
	struct mbox mb;
	struct wrk_config cfg;
	pthread_t th;
	int rc;
};

static void *ov_worker(void *arg)
{
	struct ov_run *r = arg;

	r->rc = wrk_main(&r->cfg, &r->ctl, &r->node);
	return NULL;
}

/* Sends @m, returns 0 when the answer is ok, else -1 (message on stderr). */
static int ov_call(struct ov_run *r, const struct proto_msg *m)
{
	static _Thread_local char buf[PROTO_RESP_MAX];
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct proto_error err;
	size_t len;
	uint32_t alen;
	int rc = -1;

	if (!ans)
		return -1;
	if (proto_encode_request(m, buf, PROTO_REQ_MAX, &len, &err) == 0 &&
	    mbox_call(&r->mb, buf, (uint32_t)len, buf, sizeof(buf), &alen,
		      shm_deadline_in(OV_CALL_NS)) == 0 &&
	    proto_decode_answer(m->op, buf, alen, ans, &err) == 0) {
		if (ans->ok)
			rc = 0;
		else
			fprintf(stderr, "chipbench overlap: %s refused: %s\n", proto_op_name(m->op),
				ans->err.message);
	}
	free(ans);
	return rc;
}

static int ov_start(struct ov_run *r, bool no_overlap, struct wrk_trace *tr)
{
	struct proto_node_config nc;
	size_t msize = mbox_size(OV_SLOTS, PROTO_REQ_MAX, PROTO_RESP_MAX);

	proto_node_config_default(&nc, 1);
	nc.nrings = 64;
	nc.mbox_slots = 2;
	snprintf(r->name, sizeof(r->name), "/chipd-bench.%d.overlap", (int)getpid());
	nc.nclients = 1; /* the bench reads its rings as the one client (region 0) */
	if (proto_node_create(&r->node, r->name, &nc, SHM_CREATE_RECLAIM_STALE, NULL) ||
	    proto_node_attach_own(&r->node, 0, NULL))
		return -1;
	shm_region_ready(&r->node.region);
	if (shm_region_create_anon(&r->ctl, SHM_KIND_CONTROL, SHM_BODY_OFFSET + msize) ||
	    mbox_init(&r->mb, shm_region_body(&r->ctl), shm_region_body_size(&r->ctl), OV_SLOTS,
		      PROTO_REQ_MAX, PROTO_RESP_MAX))
		return -1;
	shm_region_ready(&r->ctl);
	wrk_config_default(&r->cfg);
	r->cfg.nbanks = 2; /* the overlap needs two; more only isolate slow requests */
	r->cfg.no_overlap = no_overlap;
	r->cfg.trace = tr;
	if (pthread_create(&r->th, NULL, ov_worker, r))
		return -1;
	while (atomic_load(&r->mb.hdr->server_pid) == 0)
		usleep(1000);
	return 0;
}

static void ov_stop(struct ov_run *r)
{
	struct proto_msg *m = malloc(sizeof(*m));

	if (m) {
		proto_msg_init(m, PROTO_OP_SHUTDOWN);
		(void)ov_call(r, m);
		free(m);
	}
	pthread_join(r->th, NULL);
	proto_node_detach(&r->node);
	shm_region_unlink(r->name);
	shm_region_detach(&r->ctl);
}

/* One measurement: tokens per second of @o->requests streams at @host_us per step. */
static double ov_measure(const struct ov_opts *o, unsigned host_us, bool no_overlap,
			 double *overlap_pct, struct wrk_trace *tr)
{
	struct ov_run *r = calloc(1, sizeof(*r));
	struct proto_msg *m = malloc(sizeof(*m));
	uint64_t t0, t1, ntok = 0;
	double tps = -1;

	if (!r || !m || ov_start(r, no_overlap, tr))
		goto out;
	t0 = shm_now_ns();
	for (unsigned i = 0; i < o->requests; i++) {
		struct ring ring;

		if (proto_node_ring(&r->node, i, &ring))
			goto out_stop;
		ring_reset(&ring, i + 1, getpid(), getpid());
		proto_msg_init(m, PROTO_OP_ASSIGN);
		m->id = i + 1;
		snprintf(m->wl, sizeof(m->wl), "synthetic");
		m->nparams = 3;
		snprintf(m->params[0].key, sizeof(m->params[0].key), "tokens");
		m->params[0].value = o->tokens;
		snprintf(m->params[1].key, sizeof(m->params[1].key), "host_us");
		m->params[1].value = host_us;
		snprintf(m->params[2].key, sizeof(m->params[2].key), "device_us");
		m->params[2].value = o->device_us;
		m->ring = i;
		m->ring_gen = atomic_load(&ring.hdr->generation);
		m->client = getpid();
		if (ov_call(r, m))
			goto out_stop;
	}
	for (unsigned i = 0; i < o->requests; i++) {
		uint64_t deadline = shm_deadline_in(OV_READ_NS);
		struct ring ring;
		struct ring_rec rec = {0};

		if (proto_node_ring(&r->node, i, &ring))
			goto out_stop;
		/* the reader sleeps at once: on a small machine its spinning would take a
		 * core from the worker being measured */
		ring_set_spin(&ring, 0);
		while (!(rec.flags & RING_F_TERMINAL) && ring_pop(&ring, &rec, deadline) == 0)
			ntok += !(rec.flags & RING_F_ERROR);
		if (rec.flags & RING_F_ERROR)
			goto out_stop;
	}
	t1 = shm_now_ns();
	tps = (double)ntok * 1e9 / (double)(t1 - t0);
	{
		struct ctr_block *c = &r->node.wrk_ctr[0];
		uint64_t s = ctr_get(c, PROTO_WRK_s_busy_ns), ov = ctr_get(c, PROTO_WRK_overlap_ns);

		*overlap_pct = s ? 100.0 * (double)ov / (double)s : 0;
	}
out_stop:
	ov_stop(r);
out:
	free(r);
	free(m);
	return tps;
}

static void ov_usage(FILE *f)
{
	fputs("usage: chipbench overlap [--requests N] [--tokens N] [--device-us N] [--trace F]\n"
	      "                         [--no-chipd] [--chipd PATH] [--json]\n"
	      "  synthetic workload through a worker; host cost per step = 0.5x, 1x, 2x the\n"
	      "  device cost; tokens/s with overlap (2 banks) and --no-overlap (1 bank);\n"
	      "  then the same through a real chipd (1 chip, one request; --no-chipd skips\n"
	      "  it, --chipd picks the binary); --trace writes the 1x overlapped run as\n"
	      "  Chrome JSON and prints its summary; --json: one JSON document on stdout\n",
	      f);
}

int mode_overlap(int argc, char **argv)
{
	static const double ov_cost[OV_COSTS] = {0.5, 1.0, 2.0};
	struct ov_opts o = {.requests = 1, .tokens = 200, .device_us = 2000};
	const struct bench_arg args[] = {
	    {"requests", BENCH_ARG_UNSIGNED, &o.requests, 1, 64},
	    {"tokens", BENCH_ARG_UNSIGNED, &o.tokens, 1, UINT_MAX},
	    {"device-us", BENCH_ARG_UNSIGNED, &o.device_us, 1, UINT_MAX},
	    {"trace", BENCH_ARG_STRING, &o.trace},
	    {"chipd", BENCH_ARG_STRING, &o.chipd},
	    {"no-chipd", BENCH_ARG_FLAG, &o.no_chipd},
	    {"json", BENCH_ARG_FLAG, &o.json},
	};
	struct ov_report rep = {0};
	int fails = 0, rc;

	rc =
	    bench_args_parse(argc, argv, "overlap", args, sizeof(args) / sizeof(args[0]), ov_usage);
	if (rc)
		return rc == 1 ? 0 : rc;
	for (int i = 0; i < OV_COSTS; i++) {
		struct ov_row *r = &rep.worker[i];
		struct wrk_trace *tr = NULL;

		/* O burns host_us per request per step: a step's host cost is requests x */
		r->cost = ov_cost[i];
		r->host_us = (unsigned)(ov_cost[i] * o.device_us / o.requests);
		/* through chipd one request carries the whole host cost of a step */
		rep.chipd[i].cost = ov_cost[i];
		rep.chipd[i].host_us = (unsigned)(ov_cost[i] * o.device_us);
		if (o.trace && ov_cost[i] == 1.0 && wrk_trace_create(&tr, 1u << 16))
			tr = NULL;
		r->tps_on = ov_measure(&o, r->host_us, false, &r->pct_on, tr);
		r->tps_off = ov_measure(&o, r->host_us, true, &r->pct_off, NULL);
		if (tr) {
			rep.traced = wrk_trace_write_json(tr, o.trace, 0) == 0 &&
				     wrk_trace_summarize(tr, &rep.trace) == 0;
			wrk_trace_destroy(tr);
		}
		if (r->tps_on <= 0 || r->tps_off <= 0) {
			fprintf(stderr, "chipbench overlap: run at %.1fx failed\n", ov_cost[i]);
			fails++;
		}
	}
	rep.chipd_skipped = o.no_chipd;
	if (o.no_chipd)
		snprintf(rep.chipd_why, sizeof(rep.chipd_why), "--no-chipd");
	else
		fails += ov_chipd_measure(&o, rep.chipd);
	if (o.json)
		ov_print_json(&o, &rep);
	else
		ov_print_table(&o, &rep);
	return fails ? 1 : 0;
}
