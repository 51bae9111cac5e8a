/* client_fixture.c - see client_fixture.h. */
#include "client_fixture.h"
#include "proto.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SLICE_NS (5ull * 1000 * 1000)

static int64_t param(const struct proto_msg *m, const char *key, int64_t def)
{
	for (uint32_t i = 0; i < m->nparams; i++)
		if (strcmp(m->params[i].key, key) == 0)
			return m->params[i].value;
	return def;
}

static int ping_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		    struct proto_error *err)
{
	(void)ctx, (void)req, (void)err;
	ans->pid = getpid();
	ans->state = CHIPD_SUP_READY;
	ans->uptime_ms = 1;
	return CHIPD_OK;
}

/* An ended stream's ring may be given away once its reader consumed the terminal or
 * closed the ring (protocol.md 5.6). */
static bool drained(struct cx *x, int i)
{
	struct ring r;

	ck_assert_int_eq(proto_node_ring(&x->node, (uint32_t)i, &r), 0);
	return x->streams[i].ended &&
	       (ring_reader_closed(&r) ||
		RING_TAIL_POS(atomic_load_explicit(&r.cons->tail, memory_order_acquire)) ==
		    (uint32_t)atomic_load_explicit(&r.hdr->head, memory_order_acquire));
}

/* Submit: "refuse" -> no_capacity on chip 1; else a ring, then "n" tokens (param n,
 * default 5) and final; "fail" ends with device_error after one token; "hold" keeps
 * the stream open after two tokens until it is cancelled; "badring" is a "hold" whose
 * answer names its ring with the wrong generation; "badring_late" a "badring" answered
 * after "late_ms" (param), by a server that answers nothing more (CX_SILENT). */
static int submit_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct cx *x = ctx;
	struct ring r;
	int i;

	if (strcmp(req->wl, "refuse") == 0) {
		proto_fail(err, CHIPD_E_NO_CAPACITY, "KV pool full");
		err->chip = 1;
		return CHIPD_E_NO_CAPACITY;
	}
	for (i = 0; i < CX_RINGS && x->streams[i].used && !drained(x, i); i++)
		;
	if (i == CX_RINGS)
		return proto_fail(err, CHIPD_E_QUEUE_FULL, "all rings busy");
	ck_assert_int_eq(proto_node_ring(&x->node, (uint32_t)i, &r), 0);
	ans->id = req->id ? req->id : ++x->next_id;
	ans->chip = 0;
	ans->ring = i;
	ans->ring_gen = ring_reset(&r, (uint64_t)ans->id, getpid(), x->client);
	if (strncmp(req->wl, "badring", 7) == 0)
		ans->ring_gen++; /* an answer naming a ring that is not its stream's */
	if (strcmp(req->wl, "badring_late") == 0) {
		usleep((useconds_t)param(req, "late_ms", 0) * 1000u);
		atomic_store(&x->mode, CX_SILENT);
	}
	x->streams[i] = (struct cx_stream){
	    .used = true,
	    .id = ans->id,
	    .count = (uint32_t)param(req, "n", 5),
	    .hold = strcmp(req->wl, "hold") == 0 || strncmp(req->wl, "badring", 7) == 0,
	    .fail_code = strcmp(req->wl, "fail") == 0 ? CHIPD_E_DEVICE_ERROR : 0,
	};
	return CHIPD_OK;
}

static void end_stream(struct cx *x, int i, uint32_t flags)
{
	struct ring r;
	struct ring_rec rec = {.request_id = (uint64_t)x->streams[i].id,
			       .seq = x->streams[i].next_seq,
			       .flags = flags};

	ck_assert_int_eq(proto_node_ring(&x->node, (uint32_t)i, &r), 0);
	ck_assert_int_eq(ring_push(&r, &rec), 0);
	x->streams[i].ended = true;
}

static int cancel_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct cx *x = ctx;

	for (int i = 0; i < CX_RINGS; i++)
		if (x->streams[i].used && !x->streams[i].ended && x->streams[i].id == req->id) {
			end_stream(x, i, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
			ans->id = req->id;
			return CHIPD_OK;
		}
	return proto_fail(err, CHIPD_E_NOT_FOUND, "no live request %lld", (long long)req->id);
}

static int status_run(void *ctx, const struct proto_msg *req, struct proto_msg *ans,
		      struct proto_error *err)
{
	struct cx *x = ctx;

	(void)req, (void)err;
	ans->state = CHIPD_SUP_READY;
	ans->pid = getpid();
	ans->nchips = x->node.desc->nworkers;
	for (uint32_t i = 0; i < ans->nchips; i++)
		ans->chips[i] = (struct proto_chip){i, CHIPD_CHIP_READY, getpid(), -1, i, 0, 0};
	return CHIPD_OK;
}

static const struct proto_handler handlers[] = {
    {PROTO_OP_PING, NULL, ping_run},
    {PROTO_OP_SUBMIT, NULL, submit_run},
    {PROTO_OP_CANCEL, NULL, cancel_run},
    {PROTO_OP_STATUS, NULL, status_run},
};
static const struct proto_server server = {"test server", handlers, 4};

/* Pushes the tokens the streams still owe (two for a held stream). */
static void feed(struct cx *x)
{
	for (int i = 0; i < CX_RINGS; i++) {
		struct cx_stream *s = &x->streams[i];
		struct ring r;

		if (!s->used || s->ended)
			continue;
		ck_assert_int_eq(proto_node_ring(&x->node, (uint32_t)i, &r), 0);
		if (ring_reader_closed(&r)) { /* as a worker does: the reader left */
			end_stream(x, i, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
			continue;
		}
		while (s->next_seq < (s->hold ? 2u : s->fail_code ? 1u : s->count)) {
			struct ring_rec rec = {.request_id = (uint64_t)s->id,
					       .seq = s->next_seq,
					       .value = 100u + s->next_seq};

			if (s->next_seq + 1 == s->count && !s->fail_code)
				rec.flags = RING_F_FINAL;
			if (ring_push(&r, &rec) != 0)
				break; /* full: the reader catches up first */
			s->next_seq++;
			if (rec.flags & RING_F_FINAL)
				s->ended = true;
		}
		if (!s->ended && s->fail_code && s->next_seq == 1)
			end_stream(x, i, RING_F_ERROR | RING_F_CODE(s->fail_code));
	}
}

static void *serve(void *arg)
{
	struct cx *x = arg;
	struct mbox *mb = &x->node.mbox;
	struct mbox_event ev;
	size_t len;

	ck_assert_int_ge(mbox_server_attach(mb), 0);
	while (!atomic_load(&x->stop)) {
		feed(x);
		if (mbox_server_next(mb, &ev, shm_deadline_in(SLICE_NS)))
			continue;
		if (ev.kind == MBOX_EV_RESET) {
			ck_assert_int_eq(mbox_ack_reset(mb, ev.t), 0);
			atomic_fetch_add(&x->resets_acked, 1);
			continue;
		}
		if (atomic_load(&x->mode) == CX_SILENT)
			continue;
		x->client = ev.client;
		if (proto_dispatch(&server, x, ev.req, ev.len, mbox_resp_buf(mb, ev.t),
				   mbox_resp_cap(mb), &len) == 0)
			mbox_answer(mb, ev.t, (uint32_t)len);
	}
	mbox_server_detach(mb);
	return NULL;
}

static void make(struct cx *x, uint32_t slots)
{
	static _Atomic unsigned seq;
	struct proto_node_config cfg;
	struct shm_diag diag = {""};

	memset(x, 0, sizeof(*x));
	snprintf(x->instance, sizeof(x->instance), "chipd-test-%d-%u", (int)getpid(),
		 atomic_fetch_add(&seq, 1));
	ck_assert_int_eq(
	    shm_region_name(x->name, sizeof(x->name), (unsigned)geteuid(), x->instance), 0);
	proto_node_config_default(&cfg, 2);
	cfg.nrings = CX_RINGS;
	cfg.ring_capacity = 16;
	cfg.mbox_slots = slots;
	/* a test killed at its timeout leaves its region; a later process may get its pid */
	ck_assert_msg(proto_node_create(&x->node, x->name, &cfg, SHM_CREATE_RECLAIM_STALE, &diag) ==
			  0,
		      "%s", diag.msg);
	/* the fixture serves the first client region's mailbox, through its own mapping */
	ck_assert_msg(proto_node_attach_own(&x->node, 0, &diag) == 0, "%s", diag.msg);
	shm_region_ready(&x->node.region);
}

void cx_region(struct cx *x)
{
	make(x, 4);
}

void cx_region_remove(struct cx *x)
{
	shm_region_unlink(x->name);
	proto_node_detach(&x->node);
}

void cx_start(struct cx *x, uint32_t slots)
{
	make(x, slots);
	hx_start(&x->hello, &x->node);
	mbox_set_spin(&x->node.mbox, 0);
	ck_assert_int_eq(pthread_create(&x->thread, NULL, serve, x), 0);
}

void cx_stop(struct cx *x)
{
	atomic_store(&x->stop, 1);
	pthread_join(x->thread, NULL);
	hx_stop(&x->hello);
	cx_region_remove(x);
}
