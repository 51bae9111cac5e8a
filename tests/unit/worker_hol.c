/* worker_hol.c - head-of-line isolation inside a chip: a slow request does not hold up
 * a fast one that shares its steps, and a device error in one request's lane fails that
 * request only. How fast the fast one runs beside the slow one is measured by
 * `chipbench hol`, not here. */
#include "testutil.h"
#include "worker_fixture.h"

#include <check.h>
#include <stdatomic.h>

#define READ_MS 5000u
/* Each of these tcases waits for at most a few in-flight slow steps to end. */
#define HOL_TIMEOUT_S 120

void wrk_add_hol_tcases(Suite *s);

/* A slow request (30 steps of 1 s of device time) and a fast one (50 steps of
 * 100 us) on one chip, starting in the same step: the fast one gets every token, in
 * order, while the slow one is far from done. With a step that waits for all of its lanes, the fast
 * one would get one token a second, 15 in the time its read allows. */
START_TEST(slow_request_does_not_hold_up_fast_one)
{
	struct wrk_config cfg;
	static struct ring_rec rec[256];
	/* holds O at the start of its first round until the test opens it, so that both
	 * requests are queued when O builds its first step: they start in the same step */
	struct wf_gate g = {0};
	int64_t queued = 0;
	struct wf f;
	uint32_t n, slow;

	wf_config(&cfg);
	cfg.o_fatal = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 256);
	ck_assert_int_eq(wf_assign(&f, 1, 0, "synthetic", "tokens=30,device_us=1000000", 0, NULL),
			 CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 2, 1, "synthetic", "tokens=50,device_us=100", 0, NULL),
			 CHIPD_OK);
	for (int i = 0; i < 5000 && queued < 2; i++) {
		ck_assert_int_eq(wf_heartbeat(&f, i, &queued, NULL), CHIPD_OK);
		if (queued < 2)
			tu_sleep_ms(1);
	}
	ck_assert_int_eq(queued, 2);
	atomic_store(&g.open, 1);
	n = wf_read(&f, 1, rec, 256, 3 * READ_MS);
	ck_assert_uint_eq(n, 50);
	ck_assert_uint_eq(rec[49].flags, RING_F_FINAL);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(rec[i].seq, i);
	/* the slow one has not finished: its stream is still open */
	slow = wf_read(&f, 0, rec, 256, 0);
	ck_assert_uint_lt(slow, 30);
	for (uint32_t i = 0; i < slow; i++)
		ck_assert_uint_eq(rec[i].flags, 0);
	ck_assert_int_eq(wf_cancel(&f, 1), CHIPD_OK);
	n = wf_read_end(&f, 0, rec + slow, 256 - slow,
			RING_F_ERROR | RING_F_CODE(CHIPD_E_CANCELLED));
	for (uint32_t i = 0; i < slow + n; i++)
		ck_assert_uint_eq(rec[i].seq, i);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "cancelled"), 1);
}
END_TEST

/* A request whose step 3 the device fails (synthetic fail_step: its kernel faults
 * when it runs) ends device_error at that step; another request running in the same
 * steps completes every token. */
START_TEST(device_error_fails_only_its_request)
{
	struct wrk_config cfg;
	struct ring_rec rec[32];
	struct wf f;
	uint32_t n;

	wf_config(&cfg);
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(
	    wf_assign(&f, 7, 0, "synthetic", "tokens=10,device_us=200,fail_step=3", 0, NULL),
	    CHIPD_OK);
	ck_assert_int_eq(wf_assign(&f, 8, 1, "synthetic", "tokens=10,device_us=200", 0, NULL),
			 CHIPD_OK);
	wf_expect_error_at(&f, 0, 3, CHIPD_E_DEVICE_ERROR);
	n = wf_read(&f, 1, rec, 32, READ_MS);
	ck_assert_uint_eq(n, 10);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(rec[i].seq, i);
	ck_assert_uint_eq(rec[9].flags, RING_F_FINAL);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 1);
	ck_assert_uint_ge(wf_ctr(&f, "device_errors"), 1);
}
END_TEST

/* The same through the scheduler's fault hook, with several requests in the steps:
 * only the one whose lane failed ends, the worker keeps its device. */
START_TEST(injected_lane_fault_fails_only_its_request)
{
	struct wrk_config cfg;
	struct wf_fail_at fail = {.id = 7, .step = 2};
	struct ring_rec rec[32];
	struct wf f;

	wf_config(&cfg);
	cfg.fault = wf_fail_at;
	cfg.fault_arg = &fail;
	wf_start(&f, &cfg, 64);
	for (uint32_t i = 0; i < 4; i++)
		ck_assert_int_eq(
		    wf_assign(&f, 5 + i, i, "synthetic", "tokens=12,device_us=300", 0, NULL),
		    CHIPD_OK);
	for (uint32_t i = 0; i < 4; i++) {
		uint32_t n = wf_read(&f, i, rec, 32, READ_MS);

		if (5 + i == 7) {
			ck_assert_uint_eq(n, 3);
			ck_assert_uint_eq(rec[2].flags,
					  RING_F_ERROR | RING_F_CODE(CHIPD_E_DEVICE_ERROR));
			continue;
		}
		ck_assert_uint_eq(n, 12);
		ck_assert_uint_eq(rec[11].flags, RING_F_FINAL);
	}
	/* the device was not given up */
	ck_assert_int_eq(wf_assign(&f, 20, 4, "synthetic", "tokens=2", 0, NULL), CHIPD_OK);
	ck_assert_uint_eq(wf_read(&f, 4, rec, 32, READ_MS), 2);
	wf_stop(&f);
	ck_assert_uint_eq(wf_ctr(&f, "failed"), 1);
	ck_assert_uint_eq(wf_ctr(&f, "completed"), 4);
}
END_TEST

void wrk_add_hol_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"slow_request_does_not_hold_up_fast_one", slow_request_does_not_hold_up_fast_one},
	    {"device_error_fails_only_its_request", device_error_fails_only_its_request},
	    {"injected_lane_fault_fails_only_its_request",
	     injected_lane_fault_fails_only_its_request},
	};

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), HOL_TIMEOUT_S);
}
