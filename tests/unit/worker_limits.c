/* worker_limits.c - what one request may cost and where its cost is paid: a request
 * over a per-request limit is refused naming the limit; the fill of an admitted
 * request runs on the loader thread (L), so M answers heartbeats, assigns and cancels
 * while a load is held; a load that fails ends its stream no_capacity and frees its
 * id; a shutdown waits for a held load and ends its stream exactly once; a request
 * that would make no step (so no token and no FINAL to end its stream) is refused; a
 * request whose deadline passed while it waited for the loader is not filled. */
#include "testutil.h"
#include "wl.h"
#include "worker_fixture.h"

#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_MS 5000u

#ifndef CL_TEST_DIR
#error "CL_TEST_DIR: where the tests' callables are built"
#endif

/* A worker of the default configuration into @f, the tests' "tiny" loaded after the
 * built-ins, as a worker has them. */
static void start_with_tiny(struct wf *f)
{
	char wmsg[WL_MSG_MAX + WL_PATH_MAX];
	struct wrk_config cfg;

	ck_assert_ptr_nonnull(wl_names()[0]);
	ck_assert_msg(wl_load_file(CL_TEST_DIR "/tc_good.so", "tiny", wmsg, sizeof(wmsg)) == 0,
		      "%s", wmsg);
	wf_config(&cfg);
	wf_start(f, &cfg, 64);
}

/* A callable's steps hook may answer 0 for some parameters (the tests' "tiny" does for
 * seed 997). Such a request has no step to build and so no token to end its stream
 * with FINAL: admitted, it would stay live forever, its id, KV blocks and ring held and
 * its client waiting. It is refused at admission, naming why. */
START_TEST(request_of_no_step_refused)
{
	char msg[CHIPD_MSG_MAX];
	struct ring_rec rec[8];
	struct wf f;
	uint32_t n;
	int code;

	start_with_tiny(&f);
	code = wf_assign(&f, 1, 0, "tiny", "seed=997", 0, msg);
	if (code == CHIPD_OK) {
		n = wf_read(&f, 0, rec, 8, 1000);
		ck_abort_msg("a request of no step was admitted: %u records in 1 s, %s", n,
			     n ? "an end" : "no end (its stream never ends)");
	}
	ck_assert_int_eq(code, CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "tiny: the request makes no step"), "message: %s", msg);
	ck_assert_uint_eq(wf_ctr(&f, "rejected"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 0);
	/* the id is free and the callable's other requests run */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "tiny", "seed=3,tokens=2", 0, msg), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	ck_assert_uint_eq(rec[1].value, 3 * 7 + 1);
	wf_stop(&f);
}
END_TEST

/* A declared cost near 2^64 (the tests' "tiny", seed 991: UINT64_MAX - 64 host bytes)
 * is over every per-request limit: chipd's own additions (its record of the request,
 * the input's copy) must not wrap it round to a few hundred bytes that pass. */
START_TEST(huge_declared_cost_refused)
{
	char msg[CHIPD_MSG_MAX];
	struct ring_rec rec[8];
	struct wf f;
	int code;

	start_with_tiny(&f);
	code = wf_assign(&f, 1, 0, "tiny", "seed=991,tokens=1", 0, msg);
	ck_assert_msg(code == CHIPD_E_BAD_REQUEST, "code %d, message: %s", code, msg);
	ck_assert_msg(strstr(msg, "tiny: 18446744073709551615 host bytes exceed the per-request "
				  "limit max-request-host-bytes="),
		      "message: %s", msg);
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 0);
	/* the callable's other requests run */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "tiny", "seed=3,tokens=2", 0, msg), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	wf_stop(&f);
}
END_TEST

/* callables.md: a declared KV need the chip's cache cannot hold is refused before
 * reserve runs (bad_request), even by a callable that would take no block at all. */
START_TEST(declared_kv_over_the_cache_refused)
{
	static const struct {
		const char *params, *says;
	} cases[] = {
	    {"seed=984,tokens=1", "tiny: 9223372036854775807 KV blocks needed, more than the "
				  "chip's KV cache holds (kv-blocks="},
	    {"seed=983,tokens=1", "tiny: KV blocks of 4294967295 floats exceed the pool's "
				  "blocks of "},
	};
	char msg[CHIPD_MSG_MAX];
	struct ring_rec rec[8];
	struct wf f;
	int code;

	start_with_tiny(&f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		code = wf_assign(&f, 1, 0, "tiny", cases[i].params, 0, msg);
		ck_assert_msg(code == CHIPD_E_BAD_REQUEST, "%s: code %d, message: %s",
			      cases[i].params, code, msg);
		ck_assert_msg(strstr(msg, cases[i].says), "message: %s", msg);
	}
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 0);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "tiny", "seed=3,tokens=2", 0, msg), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	wf_stop(&f);
}
END_TEST

/* callables.md: a callable's fill runs on the loader thread, off the mailbox thread.
 * A run-time callable (the tests' "tiny", seed 995: a fill of 10 x step_us, here 1 s,
 * with a cost as small as a one-token request's) may do slow work there; M must still
 * answer the assign, and heartbeats, at once. */
START_TEST(slow_fill_of_a_small_request_is_off_m)
{
	char msg[CHIPD_MSG_MAX];
	struct ring_rec rec[8];
	struct wf f;
	uint64_t t0, took;

	start_with_tiny(&f);
	/* answered once the worker's set-up is done (wf_start returns as its mailbox is
	 * attached, before it): the time below is the assign's alone */
	ck_assert_int_eq(wf_heartbeat(&f, 1, NULL, NULL), CHIPD_OK);
	t0 = shm_now_ns();
	ck_assert_int_eq(wf_assign(&f, 1, 0, "tiny", "seed=995,step_us=100000,tokens=1", 0, msg),
			 CHIPD_OK);
	took = shm_now_ns() - t0;
	ck_assert_msg(took < 500ull * SHM_NS_PER_MS,
		      "the assign was answered after %llu ms: M ran the 1 s fill itself",
		      (unsigned long long)(took / SHM_NS_PER_MS));
	ck_assert_int_eq(wf_heartbeat(&f, 2, NULL, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 1);
	ck_assert_uint_eq(rec[0].value, 995 * 7);
	wf_stop(&f);
}
END_TEST

/* The heartbeat says which request the loader is filling and for how long (the
 * supervisor judges it by --fill-ms): present during the fill of request 7 (the tests'
 * tiny, seed 995: 1 s), growing, and gone once the fill returned. */
START_TEST(heartbeat_reports_the_fill)
{
	char msg[CHIPD_MSG_MAX];
	struct proto_msg *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct ring_rec rec[8];
	struct wf f;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	start_with_tiny(&f);
	wf_heartbeat_ans(&f, 1, a);
	ck_assert_int_eq(a->fill_ms, 0);
	ck_assert_int_eq(a->fill_id, 0);
	ck_assert_int_eq(wf_assign(&f, 7, 0, "tiny", "seed=995,step_us=100000,tokens=1", 0, msg),
			 CHIPD_OK);
	for (unsigned ms = 0;; ms++) { /* L takes it at once; bounded all the same */
		wf_heartbeat_ans(&f, 2, a);
		if (a->fill_ms > 0)
			break;
		ck_assert_msg(ms < 900, "no fill in the heartbeat while the loader fills");
		tu_sleep_ms(1);
	}
	ck_assert_int_eq(a->fill_id, 7);
	tu_sleep_ms(100);
	wf_heartbeat_ans(&f, 3, b);
	/* still in the 1 s fill unless this machine stalled us for most of it */
	if (b->fill_ms > 0) {
		ck_assert_int_eq(b->fill_id, 7);
		/* whole ms, rounded down (a fill under 1 ms reads 1): 100 ms later, 99 more */
		ck_assert_int_ge(b->fill_ms, a->fill_ms + 99);
	}
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 1);
	wf_heartbeat_ans(&f, 4, b);
	ck_assert_int_eq(b->fill_ms, 0);
	ck_assert_int_eq(b->fill_id, 0);
	wf_stop(&f);
	free(a);
	free(b);
}
END_TEST

/* L's hook for past_deadline_request_is_not_filled: holds request @hold (the gate)
 * and counts the fills L begins for request @late. */
struct fill_watch {
	struct wf_gate gate;
	uint64_t late;
	_Atomic int late_fills;
};

static bool watch_fills(void *arg, uint64_t id, uint32_t step)
{
	struct fill_watch *w = arg;

	if (id == w->late)
		atomic_fetch_add(&w->late_fills, 1);
	return wf_gate_hook(&w->gate, id, step);
}

/* protocol.md: no step is built after a request's deadline, and the stream ends
 * timeout. A request waiting behind another's fill whose deadline passes meanwhile is
 * not filled either (a fill may take seconds of the loader, which fills one request
 * at a time): it ends timeout without a token, its id and KV blocks free. */
START_TEST(past_deadline_request_is_not_filled)
{
	struct fill_watch w = {.gate = {.id = 1}, .late = 2};
	struct wrk_config cfg;
	struct ring_rec rec[8];
	uint64_t deadline;
	struct wf f;

	wf_config(&cfg);
	cfg.l_fault = watch_fills;
	cfg.fault_arg = &w;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=2,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &w.gate, READ_MS));
	/* request 2 waits behind request 1's fill until its deadline has passed */
	deadline = shm_deadline_in(50ull * SHM_NS_PER_MS);
	f.next_deadline_ns = deadline;
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=4,device_us=10", 0, NULL),
			 CHIPD_OK);
	while (shm_now_ns() < deadline + 20ull * SHM_NS_PER_MS)
		usleep(5000);
	atomic_store(&w.gate.open, 1);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_TIMEOUT)),
			  1);
	ck_assert_uint_eq(rec[0].seq, 0);
	ck_assert_msg(atomic_load(&w.late_fills) == 0,
		      "request 2 was filled after its deadline had passed");
	/* its id is free */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=2,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 8, RING_F_FINAL), 2);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 2);
}
END_TEST

void wrk_add_limit_tcases(Suite *s);

/* The request of the fault matrix that took tens of seconds to fill on M: about 3.1 GiB
 * of weights on the device. */
#define HEAVY                                                                                      \
	"layers=4,heads=32,kv_heads=1,head_dim=256,block_size=1,context=0,tokens=1,"               \
	"vocab=16384"

START_TEST(over_limit_refused_naming_the_limit)
{
	struct wrk_config cfg;
	struct ring_rec rec[128];
	char msg[CHIPD_MSG_MAX];
	struct wf f;

	wf_config(&cfg);
	cfg.max_request_steps = 100;
	cfg.max_request_host_bytes = 1u << 20;
	wf_start(&f, &cfg, 128);
	/* the default device limit (1 GiB) refuses the 3.1 GiB request at once */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "paged_attention", HEAVY, 0, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_msg(
	    strstr(msg, "paged_attention: 3288334372 device bytes exceed the per-request limit "
			"max-request-device-bytes=1073741824"),
	    "message: %s", msg);
	ck_assert_int_eq(wf_assign(&f, 2, 0, "synthetic", "tokens=101,device_us=10", 0, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "101 steps exceed the per-request limit max-request-steps=100"),
		      "message: %s", msg);
	/* 4 weights of 512 x 512 floats staged on the host: 4 MiB */
	ck_assert_int_eq(wf_assign(&f, 3, 0, "gemm", "m=16,k=512,chain=4,tokens=2", 0, msg),
			 CHIPD_E_BAD_REQUEST);
	ck_assert_msg(strstr(msg, "max-request-host-bytes=1048576"), "message: %s", msg);
	ck_assert_uint_eq(wf_ctr(&f, "rejected"), 3);
	/* steps count after max_tokens: this one makes 100 */
	ck_assert_int_eq(wf_assign(&f, 4, 0, "synthetic", "tokens=101,device_us=10", 100, msg),
			 CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 128, RING_F_FINAL), 100);
	wf_stop(&f);
}
END_TEST

START_TEST(m_answers_while_a_load_is_held)
{
	struct wf_gate g = {.id = 1};
	struct wrk_config cfg;
	struct ring_rec rec[8];
	int64_t queued, active;
	struct wf f;

	wf_config(&cfg);
	cfg.l_fault = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	/* answered while L holds its load */
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=3,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &g, READ_MS));
	ck_assert_int_eq(wf_heartbeat(&f, 7, &queued, &active), CHIPD_OK);
	ck_assert_int_eq(active, 0); /* O has not seen it: it is still loading */
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=2,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 2, "synthetic", "tokens=2", 0, NULL),
			 CHIPD_E_DUPLICATE_ID); /* its id is live while it waits to load */
	/* a loading request can be cancelled; it ends once L lets go of it */
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_OK);
	atomic_store(&g.open, 1);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED)),
			  1);
	ck_assert_uint_eq(rec[0].seq, 0);
	ck_assert_uint_eq(wf_read_end(&f, 1, rec, 8, RING_F_FINAL), 2);
	ck_assert_uint_eq(wf_ctr(&f, "admitted"), 2);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
	wf_stop(&f);
}
END_TEST

START_TEST(failed_load_ends_stream_no_capacity)
{
	struct wf_gate g = {.fail_id = 5, .open = 1}; /* holds none */
	const char *pa = "layers=1,heads=2,kv_heads=1,head_dim=8,block_size=16,context=16,tokens=2";
	struct wrk_config cfg;
	struct ring_rec rec[8];
	struct wf f;

	wf_config(&cfg);
	cfg.l_fault = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 5, 0, "paged_attention", pa, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(
	    wf_read_end(&f, 0, rec, 8, RING_F_ERROR | RING_F_CODE(CHIPD_E_NO_CAPACITY)), 1);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	/* its id and KV blocks were free before the end was visible */
	g.fail_id = 0;
	ck_assert_int_eq(wf_assign(&f, 5, 0, "paged_attention", pa, 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "kv_blocks_used"), 0);
}
END_TEST

START_TEST(shutdown_waits_for_a_held_load)
{
	struct wf_gate g = {.id = 3};
	struct wrk_config cfg;
	struct ring_rec rec[8];
	struct mbox_ticket t;
	struct wf f;

	wf_config(&cfg);
	cfg.l_fault = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, 3, 0, "synthetic", "tokens=2,device_us=10", 0, NULL),
			 CHIPD_OK);
	ck_assert(tu_eventually(wf_gate_entered, &g, READ_MS));
	wf_shutdown_begin(&f, 60000, &t);
	ck_assert_int_eq(wf_heartbeat(&f, 1, NULL, NULL), CHIPD_OK);
	ck_assert(!wf_shutdown_answered(&f, t)); /* L still holds a request */
	atomic_store(&g.open, 1);
	/* admitted before the stop: it runs within the grace */
	ck_assert_int_eq(wf_shutdown_end(&f, t), 0);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec, 8, RING_F_FINAL), 2);
	wf_stop(&f);
}
END_TEST

void wrk_add_limit_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"over_limit_refused_naming_the_limit", over_limit_refused_naming_the_limit},
	    {"m_answers_while_a_load_is_held", m_answers_while_a_load_is_held},
	    {"failed_load_ends_stream_no_capacity", failed_load_ends_stream_no_capacity},
	    {"shutdown_waits_for_a_held_load", shutdown_waits_for_a_held_load},
	    {"request_of_no_step_refused", request_of_no_step_refused},
	    {"huge_declared_cost_refused", huge_declared_cost_refused},
	    {"declared_kv_over_the_cache_refused", declared_kv_over_the_cache_refused},
	    {"slow_fill_of_a_small_request_is_off_m", slow_fill_of_a_small_request_is_off_m},
	    {"heartbeat_reports_the_fill", heartbeat_reports_the_fill},
	    {"past_deadline_request_is_not_filled", past_deadline_request_is_not_filled},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
