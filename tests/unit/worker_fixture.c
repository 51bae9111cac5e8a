/* worker_fixture.c - see worker_fixture.h. */
#include "worker_fixture.h"

#include "testutil.h"
#include "wl.h"

#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WF_SLOTS 8u

void wf_config(struct wrk_config *cfg)
{
	wrk_config_default(cfg);
	cfg->spin_ns = 10000;
	cfg->kv_blocks = 256;
}

static void *worker_thread(void *arg)
{
	struct wf *f = arg;

	f->rc = wrk_main(&f->cfg, &f->ctl, &f->node);
	return NULL;
}

static bool server_up(void *arg)
{
	struct wf *f = arg;

	return atomic_load(&f->mb.hdr->server_pid) != 0;
}

void wf_start(struct wf *f, const struct wrk_config *cfg, uint32_t ring_cap)
{
	struct proto_node_config nc;
	size_t msize = mbox_size(WF_SLOTS, PROTO_REQ_MAX, PROTO_RESP_MAX);

	memset(f, 0, sizeof(*f));
	f->cfg = *cfg;
	proto_node_config_default(&nc, 1);
	nc.nrings = 16;
	nc.ring_capacity = ring_cap;
	nc.mbox_slots = 2;
	tu_region_name(f->name, sizeof(f->name), "wrk");
	ck_assert_int_eq(proto_node_create(&f->node, f->name, &nc, 0, NULL), 0);
	/* the test reads rings as the client of the first region (assigns name region 0) */
	ck_assert_int_eq(proto_node_attach_own(&f->node, 0, NULL), 0);
	shm_region_ready(&f->node.region);
	ck_assert_int_eq(shm_region_create_anon(&f->ctl, SHM_KIND_CONTROL, SHM_BODY_OFFSET + msize),
			 0);
	ck_assert_int_eq(mbox_init(&f->mb, shm_region_body(&f->ctl), shm_region_body_size(&f->ctl),
				   WF_SLOTS, PROTO_REQ_MAX, PROTO_RESP_MAX),
			 0);
	shm_region_ready(&f->ctl);
	ck_assert_int_eq(pthread_create(&f->th, NULL, worker_thread, f), 0);
	f->running = true;
	ck_assert_msg(tu_eventually(server_up, f, WF_CALL_MS), "worker never served its mailbox");
}

/* One round trip: 0 with *ans decoded (ok or the envelope), or -errno. */
static int call(struct wf *f, const struct proto_msg *req, struct proto_msg *ans)
{
	char *buf = malloc(PROTO_RESP_MAX);
	struct proto_error err;
	size_t len;
	uint32_t alen;
	int rc;

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(proto_encode_request(req, buf, PROTO_REQ_MAX, &len, &err), 0);
	rc = mbox_call(&f->mb, buf, (uint32_t)len, buf, PROTO_RESP_MAX, &alen,
		       shm_deadline_in((uint64_t)WF_CALL_MS * 1000000u));
	if (rc == 0)
		rc = proto_decode_answer(req->op, buf, alen, ans, &err);
	free(buf);
	return rc;
}

static int call_code(struct wf *f, struct proto_msg *m, char *msg)
{
	struct proto_msg *ans = malloc(sizeof(*ans));
	int code;

	ck_assert_ptr_nonnull(ans);
	ck_assert_int_eq(call(f, m, ans), 0);
	code = ans->ok ? CHIPD_OK : (int)ans->err.code;
	if (msg)
		snprintf(msg, CHIPD_MSG_MAX, "%s", ans->ok ? "" : ans->err.message);
	free(ans);
	return code;
}

int wf_heartbeat(struct wf *f, int64_t seq, int64_t *queued, int64_t *active)
{
	struct proto_msg *m = malloc(sizeof(*m)), *ans = malloc(sizeof(*ans));
	int code;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(ans);
	proto_msg_init(m, PROTO_OP_HEARTBEAT);
	m->seq = seq;
	ck_assert_int_eq(call(f, m, ans), 0);
	code = ans->ok ? CHIPD_OK : (int)ans->err.code;
	if (ans->ok) {
		ck_assert_int_eq(ans->seq, seq);
		if (queued)
			*queued = ans->queued;
		if (active)
			*active = ans->active;
	}
	free(m);
	free(ans);
	return code;
}

void wf_heartbeat_ans(struct wf *f, int64_t seq, struct proto_msg *ans)
{
	struct proto_msg *m = malloc(sizeof(*m));

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, PROTO_OP_HEARTBEAT);
	m->seq = seq;
	ck_assert_int_eq(call(f, m, ans), 0);
	ck_assert_msg(ans->ok, "heartbeat refused: %s", ans->err.message);
	ck_assert_int_eq(ans->seq, seq);
	free(m);
}

int wf_trace(struct wf *f, int act, const char *path, int64_t chip, int64_t *events,
	     int64_t *dropped, char *msg)
{
	struct proto_msg *m = malloc(sizeof(*m)), *ans = malloc(sizeof(*ans));
	int code;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(ans);
	proto_msg_init(m, PROTO_OP_TRACE);
	m->act = act;
	m->chip = chip;
	if (path)
		snprintf(m->path, sizeof(m->path), "%s", path);
	ck_assert_int_eq(call(f, m, ans), 0);
	code = ans->ok ? CHIPD_OK : (int)ans->err.code;
	if (msg)
		snprintf(msg, CHIPD_MSG_MAX, "%s", ans->ok ? "" : ans->err.message);
	if (events)
		*events = ans->events;
	if (dropped)
		*dropped = ans->dropped;
	free(m);
	free(ans);
	return code;
}

int wf_call_raw(struct wf *f, enum proto_op op, const void *req, uint32_t len, char *msg)
{
	char *buf = malloc(PROTO_RESP_MAX);
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct proto_error err;
	uint32_t alen;
	int code;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(ans);
	ck_assert_int_eq(mbox_call(&f->mb, req, len, buf, PROTO_RESP_MAX, &alen,
				   shm_deadline_in((uint64_t)WF_CALL_MS * 1000000u)),
			 0);
	ck_assert_int_eq(proto_decode_answer(op, buf, alen, ans, &err), 0);
	code = ans->ok ? CHIPD_OK : (int)ans->err.code;
	if (msg)
		snprintf(msg, CHIPD_MSG_MAX, "%s", ans->ok ? "" : ans->err.message);
	free(ans);
	free(buf);
	return code;
}

void wf_shutdown_begin(struct wf *f, int64_t grace_ms, struct mbox_ticket *t)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;
	size_t len;

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, PROTO_OP_SHUTDOWN);
	m->grace_ms = grace_ms;
	ck_assert_int_eq(mbox_claim(&f->mb, t), 0);
	ck_assert_int_eq(
	    proto_encode_request(m, mbox_req_buf(&f->mb, *t), PROTO_REQ_MAX, &len, &err), 0);
	ck_assert_int_eq(mbox_post(&f->mb, *t, (uint32_t)len), 0);
	free(m);
}

bool wf_shutdown_answered(struct wf *f, struct mbox_ticket t)
{
	return MBOX_CTL_STATE(mbox_ctl(&f->mb, t.slot)) == MBOX_DONE;
}

int wf_shutdown_end(struct wf *f, struct mbox_ticket t)
{
	struct proto_msg *ans = malloc(sizeof(*ans));
	struct proto_error err;
	const void *buf;
	uint32_t len;

	ck_assert_ptr_nonnull(ans);
	ck_assert_int_eq(mbox_wait(&f->mb, t, shm_deadline_in((uint64_t)WF_CALL_MS * 1000000u)), 0);
	ck_assert_int_eq(mbox_response(&f->mb, t, &buf, &len), 0);
	ck_assert_int_eq(proto_decode_answer(PROTO_OP_SHUTDOWN, buf, len, ans, &err), 0);
	ck_assert(ans->ok);
	ck_assert_int_eq(mbox_release(&f->mb, t), 0);
	free(ans);
	ck_assert_int_eq(pthread_join(f->th, NULL), 0);
	f->running = false;
	return f->rc;
}

int wf_shutdown(struct wf *f)
{
	struct proto_msg *m = malloc(sizeof(*m));

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, PROTO_OP_SHUTDOWN);
	ck_assert_int_eq(call_code(f, m, NULL), CHIPD_OK);
	free(m);
	ck_assert_int_eq(pthread_join(f->th, NULL), 0);
	f->running = false;
	return f->rc;
}

void wf_stop(struct wf *f)
{
	if (f->running)
		ck_assert_int_eq(wf_shutdown(f), 0);
	/* stays mapped (counters are read afterwards); the test's process ends soon */
	shm_region_unlink(f->name);
}

/* Fills @m with the assign of wf_assign_noreset (and takes next_deadline_ns). */
static void assign_msg(struct wf *f, struct proto_msg *m, uint64_t id, uint32_t ring,
		       const char *wl, const char *params, int64_t max_tokens)
{
	struct wl_params p;
	struct ring r;
	char perr[WL_MSG_MAX];

	ck_assert_int_eq(proto_node_ring(&f->node, ring, &r), 0);
	proto_msg_init(m, PROTO_OP_ASSIGN);
	m->id = (int64_t)id;
	snprintf(m->wl, sizeof(m->wl), "%s", wl);
	wl_params_init(&p);
	if (params)
		ck_assert_int_eq(wl_params_parse(&p, params, perr, sizeof(perr)), 0);
	for (unsigned i = 0; i < p.n; i++) {
		snprintf(m->params[i].key, sizeof(m->params[i].key), "%s", p.v[i].key);
		m->params[i].value = p.v[i].value;
	}
	m->nparams = p.n;
	m->max_tokens = max_tokens;
	m->ring = ring;
	m->ring_gen = atomic_load(&r.hdr->generation);
	m->client = getpid();
	if (f->next_deadline_ns) { /* written only then: racing assigns just read it */
		m->deadline_ns = (int64_t)f->next_deadline_ns;
		f->next_deadline_ns = 0;
	}
}

int wf_assign_noreset(struct wf *f, uint64_t id, uint32_t ring, const char *wl, const char *params,
		      int64_t max_tokens, char *msg)
{
	struct proto_msg *m = malloc(sizeof(*m));
	int code;

	ck_assert_ptr_nonnull(m);
	assign_msg(f, m, id, ring, wl, params, max_tokens);
	code = call_code(f, m, msg);
	free(m);
	return code;
}

void wf_assign_post(struct wf *f, uint64_t id, uint32_t ring, const char *wl, const char *params,
		    struct mbox_ticket *t)
{
	struct proto_msg *m = malloc(sizeof(*m));
	struct proto_error err;
	struct ring r;
	size_t len;

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(proto_node_ring(&f->node, ring, &r), 0);
	ring_reset(&r, id, getpid(), getpid());
	assign_msg(f, m, id, ring, wl, params, 0);
	ck_assert_int_eq(mbox_claim(&f->mb, t), 0);
	ck_assert_int_eq(
	    proto_encode_request(m, mbox_req_buf(&f->mb, *t), PROTO_REQ_MAX, &len, &err), 0);
	ck_assert_int_eq(mbox_post(&f->mb, *t, (uint32_t)len), 0);
	free(m);
}

int wf_assign(struct wf *f, uint64_t id, uint32_t ring, const char *wl, const char *params,
	      int64_t max_tokens, char *msg)
{
	struct ring r;

	ck_assert_int_eq(proto_node_ring(&f->node, ring, &r), 0);
	ring_reset(&r, id, getpid(), getpid());
	return wf_assign_noreset(f, id, ring, wl, params, max_tokens, msg);
}

void wf_assign_long(struct wf *f, uint64_t id, uint32_t ring)
{
	ck_assert_int_eq(wf_assign(f, id, ring, "synthetic", WF_LONG, 0, NULL), CHIPD_OK);
}

int wf_cancel(struct wf *f, uint64_t id)
{
	struct proto_msg *m = malloc(sizeof(*m));
	int code;

	ck_assert_ptr_nonnull(m);
	proto_msg_init(m, PROTO_OP_CANCEL);
	m->id = (int64_t)id;
	code = call_code(f, m, NULL);
	free(m);
	return code;
}

uint32_t wf_read(struct wf *f, uint32_t ring, struct ring_rec *out, uint32_t max, unsigned ms)
{
	uint64_t deadline = shm_deadline_in((uint64_t)ms * 1000000u);
	struct ring r;
	uint32_t n = 0;

	ck_assert_int_eq(proto_node_ring(&f->node, ring, &r), 0);
	ring_set_spin(&r, 10000);
	while (n < max && ring_pop(&r, &out[n], deadline) == 0)
		if (out[n++].flags & RING_F_TERMINAL)
			break;
	/* the next call reads on with a handle of its own */
	(void)ring_store_tail(&r);
	return n;
}

uint32_t wf_read_end(struct wf *f, uint32_t ring, struct ring_rec *out, uint32_t max,
		     uint32_t flags)
{
	uint32_t n = wf_read(f, ring, out, max, 5000);

	ck_assert_uint_gt(n, 0);
	ck_assert_uint_eq(out[n - 1].flags, flags);
	return n;
}

uint64_t wf_ctr(struct wf *f, const char *name)
{
	int i = ctr_find(&f->node.wrk_ctr[0], name);

	ck_assert_int_ge(i, 0);
	return ctr_get(&f->node.wrk_ctr[0], (uint32_t)i);
}

void wf_expect_error_at(struct wf *f, uint32_t ring, uint32_t step, enum chipd_code code)
{
	struct ring_rec *rec = calloc(step + 2u, sizeof(*rec));

	ck_assert_ptr_nonnull(rec);
	ck_assert_uint_eq(wf_read(f, ring, rec, step + 2u, WF_CALL_MS), step + 1u);
	for (uint32_t i = 0; i < step; i++)
		ck_assert_uint_eq(rec[i].flags, 0);
	ck_assert_uint_eq(rec[step].flags, RING_F_ERROR | RING_F_CODE(code));
	ck_assert_uint_eq(rec[step].seq, step);
	free(rec);
}

bool wf_gate_hook(void *arg, uint64_t id, uint32_t step)
{
	struct wf_gate *g = arg;

	(void)step;
	if (g->id == 0 || id == g->id) {
		atomic_store(&g->entered, 1);
		for (unsigned ms = 0; !atomic_load(&g->open) && ms < WF_GATE_MS; ms++)
			usleep(1000);
	}
	return g->fail_id != 0 && id == g->fail_id;
}

bool wf_gate_entered(void *arg)
{
	return atomic_load(&((struct wf_gate *)arg)->entered) != 0;
}

bool wf_fail_at(void *arg, uint64_t id, uint32_t step)
{
	const struct wf_fail_at *a = arg;

	return id == a->id && step == a->step;
}
