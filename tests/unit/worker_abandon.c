/* worker_abandon.c - abandoned work on the worker: a stream whose reader closed its
 * ring (ring_close_reader) is cancelled by O, running or still queued; an assign whose
 * caller gave up before the answer (the slot reset) is cancelled by M. Each ends
 * cancelled, with its id free again. A terminal record the worker cannot write is
 * counted (terminal_push_failed). Part of check_worker. */
#include "testutil.h"
#include "worker_fixture.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


void wrk_add_abandon_tcases(Suite *s);

#define TCASE_TIMEOUT_S 60
/* Generous liveness bound for a loaded 2-core machine: the cancels under test take a
 * round of O (milliseconds). */
#define END_MS 10000u
/* A request that never ends by itself while nobody reads it: it fills its ring and
 * then waits for room. */
#define ENDLESS "tokens=1000000,device_us=200"

static uint32_t end_flags(struct wf *f, uint32_t ring)
{
	struct ring r;

	ck_assert_int_eq(proto_node_ring(&f->node, ring, &r), 0);
	return ring_end_flags(&r);
}

struct ended {
	struct wf *f;
	uint32_t ring;
};

static bool stream_ended(void *arg)
{
	struct ended *e = arg;

	return end_flags(e->f, e->ring) != 0;
}

/* Waits (read-only: a closed ring is not read) until ring @ring's stream ended;
 * returns its terminal flags. */
static uint32_t wait_end(struct wf *f, uint32_t ring)
{
	struct ended e = {f, ring};

	ck_assert_msg(tu_eventually(stream_ended, &e, END_MS), "ring %u: the stream never ended",
		      ring);
	return end_flags(f, ring);
}

static void close_reader(struct wf *f, uint32_t ring)
{
	struct ring r;

	ck_assert_int_eq(proto_node_ring(&f->node, ring, &r), 0);
	ring_set_reader_gen(&r, atomic_load(&r.hdr->generation));
	ck_assert_int_eq(ring_close_reader(&r), 0);
}

/* The id is free again: a cancel finds nothing, a new assign of it runs to FINAL. */
static void id_is_free(struct wf *f, uint64_t id, uint32_t ring)
{
	struct ring_rec rec[4];

	ck_assert_int_eq(wf_cancel(f, id), CHIPD_E_NOT_FOUND);
	ck_assert_int_eq(wf_assign(f, id, ring, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(f, ring, rec, 4, END_MS), 2);
	ck_assert_uint_eq(rec[1].flags, RING_F_FINAL);
}

/* Starts a worker (rings of @cap records) running request @id, ENDLESS, on ring 0 and
 * reads its first @k (at most 4) tokens. */
static void start_endless(struct wf *f, uint32_t cap, uint64_t id, uint32_t k)
{
	struct ring_rec rec[4];
	struct wrk_config cfg;

	ck_assert_uint_le(k, 4);
	wf_config(&cfg);
	wf_start(f, &cfg, cap);
	ck_assert_int_eq(wf_assign(f, id, 0, "synthetic", ENDLESS, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(f, 0, rec, k, END_MS), k);
}

START_TEST(closed_ring_cancels_running_request)
{
	struct wf f;

	start_endless(&f, 1024, 7, 3);
	/* the reader leaves without a cancel call: only the ring says so */
	close_reader(&f, 0);
	ck_assert_uint_eq(wait_end(&f, 0), RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 0);
	id_is_free(&f, 7, 0); /* the ring too: a reset ring serves the next stream */
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "kv_blocks_used"), 0);
}
END_TEST

START_TEST(closed_ring_cancels_queued_request)
{
	struct ring_rec rec[8];
	struct wrk_config cfg;
	struct wf_gate g = {0}; /* S held inside a step until the test opens it */
	struct ring r;
	struct wf f;

	wf_config(&cfg);
	cfg.fault = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=4,device_us=100", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &g, END_MS));
	/* request 2's reader left before the worker took it from its queue (S is held
	 * meanwhile): it must never run a step */
	ck_assert_int_eq(proto_node_ring(&f.node, 1, &r), 0);
	ring_set_reader_gen(&r, ring_reset(&r, 2, getpid(), getpid()));
	ck_assert_int_eq(ring_close_reader(&r), 0);
	ck_assert_int_eq(
	    wf_assign_noreset(&f, 2, 1, "synthetic", "tokens=4,device_us=100", 0, NULL), CHIPD_OK);
	atomic_store(&g.open, 1);
	ck_assert_uint_eq(wait_end(&f, 1), RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	ck_assert_uint_eq(wf_read(&f, 0, rec, 8, END_MS), 4); /* the other one finished */
	ck_assert_uint_eq(rec[3].flags, RING_F_FINAL);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "tokens"), 4); /* request 2 never ran a step */
}
END_TEST

START_TEST(abandoned_assign_is_cancelled)
{
	struct wrk_config cfg;
	struct mbox_ticket t;
	struct wf_gate g = {0}; /* M held after admitting an assign, before its answer */
	struct wf f;

	wf_config(&cfg);
	cfg.m_assigned = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	/* the request fills its 64-record ring and would then wait for a reader forever */
	wf_assign_post(&f, 9, 0, "synthetic", ENDLESS, &t);
	ck_assert(tu_eventually(wf_gate_entered, &g, END_MS));
	/* counted before the request moved on to L and O, not after M's answer: a worker
	 * dying here would otherwise take the admission with it */
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 1);
	/* the caller gives up while M holds the slot: it is reset, and the answer M is
	 * about to write will be lost */
	ck_assert_int_eq(mbox_give_up(&f.mb, t), 1);
	atomic_store(&g.open, 1);
	ck_assert_uint_eq(wait_end(&f, 0), RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "mbox_resets"), 1);
	id_is_free(&f, 9, 0);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "kv_blocks_used"), 0);
}
END_TEST

/* A peer that claims the terminal record itself (a broken or hostile reader) makes
 * the worker's own end of the stream fail: counted, not dropped silently. */
static bool ring_full(void *arg)
{
	struct ring *r = arg;

	return (uint32_t)atomic_load(&r->hdr->head) - RING_TAIL_POS(atomic_load(&r->cons->tail)) ==
	       r->capacity - 1;
}

static bool push_failed(void *arg)
{
	return wf_ctr(arg, "terminal_push_failed") == 1;
}

START_TEST(failed_terminal_push_is_counted)
{
	struct ring r;
	struct wf f;

	start_endless(&f, 64, 5, 2);
	ck_assert_int_eq(proto_node_ring(&f.node, 0, &r), 0);
	/* once the ring is full nothing is in flight (O builds only what fits), so the
	 * first push to meet the broken word is the worker's ERROR */
	ck_assert_msg(tu_eventually(ring_full, &r, END_MS), "the ring never filled");
	atomic_store(&r.hdr->terminal, 1);
	ck_assert_int_eq(wf_cancel(&f, 5), CHIPD_OK);
	ck_assert_msg(tu_eventually(push_failed, &f, END_MS), "the failed end was not counted");
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(ring_end_flags(&r), 0); /* the stream stays unended */
	/* the request is gone from the worker all the same: its id is free */
	ck_assert_int_eq(wf_cancel(&f, 5), CHIPD_E_NOT_FOUND);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "terminal_push_failed"), 1);
}
END_TEST

/* S's FINAL refused by a ring whose terminal word a peer claimed (S freed the id first, as
 * for every FINAL), and O gives up for good before it retires the request: M ends what
 * O left, and that request must still be counted once (in failed, a lost FINAL, with
 * its own failed end in terminal_push_failed), not returned silently as a completed
 * one would be. */
struct gate_then_fatal {
	struct wf_gate gate; /* first: wf_gate_hook's argument is the config's fault_arg */
	_Atomic int armed;
};

static bool fatal_when_armed(void *arg, uint64_t id, uint32_t step)
{
	(void)id;
	(void)step;
	return atomic_load(&((struct gate_then_fatal *)arg)->armed) != 0;
}

static bool o_gave_up(void *arg)
{
	struct proto_msg *ans = malloc(sizeof(*ans));
	bool gone;

	ck_assert_ptr_nonnull(ans);
	wf_heartbeat_ans(arg, 1, ans);
	gone = ans->o_err != 0;
	free(ans);
	return gone;
}

START_TEST(lost_final_counted_when_o_gives_up)
{
	struct gate_then_fatal g = {.gate = {.id = 7}};
	struct wrk_config cfg;
	struct ring r;
	struct wf f;

	wf_config(&cfg);
	cfg.fault = wf_gate_hook; /* S holds request 7's only lane after its launch */
	cfg.o_fatal = fatal_when_armed;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 7, 0, "synthetic", "tokens=1", 0, NULL), CHIPD_OK);
	ck_assert_msg(tu_eventually(wf_gate_entered, &g.gate, END_MS), "S never ran the step");
	ck_assert_int_eq(proto_node_ring(&f.node, 0, &r), 0);
	/* claimed by a peer, as in failed_terminal_push_is_counted: every push now fails */
	atomic_store(&r.hdr->terminal, 1);
	atomic_store(&g.armed, 1);
	ck_assert_msg(tu_eventually(o_gave_up, &f, END_MS), "O never gave up");
	atomic_store(&g.gate.open, 1);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 0);
	ck_assert_uint_eq(wf_ctr(&f, "failed") + wf_ctr(&f, "cancelled"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "terminal_push_failed"), 1);
	ck_assert_uint_eq(ring_end_flags(&r), 0); /* nothing could be written */
}
END_TEST

void wrk_add_abandon_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"closed_ring_cancels_running_request", closed_ring_cancels_running_request},
	    {"closed_ring_cancels_queued_request", closed_ring_cancels_queued_request},
	    {"abandoned_assign_is_cancelled", abandoned_assign_is_cancelled},
	    {"failed_terminal_push_is_counted", failed_terminal_push_is_counted},
	    {"lost_final_counted_when_o_gives_up", lost_final_counted_when_o_gives_up},
	};

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), TCASE_TIMEOUT_S);
}
