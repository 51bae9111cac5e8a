/* worker_health.c - what the heartbeat answer says of the worker's threads: M alone
 * answers it, so each thread's error word and progress word, and whether work is
 * pending, are what the supervisor judges the chip by. A scheduler stuck in a step
 * and an orchestrator stuck in a build show as a progress word that stands still
 * with work pending, while the other thread's moves on. Part of check_worker. */
#include "testutil.h"
#include "worker_fixture.h"

#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>

#define ENTER_MS 10000u /* bound of the wait for the held hook to be reached */

void wrk_add_health_tcases(Suite *s);

/* A healthy worker running a request: no error words, both progress words move, work
 * is pending (active); idle again once it completed, nothing pending. */
START_TEST(heartbeat_reports_threads_progress)
{
	struct wrk_config cfg;
	static struct ring_rec rec[1024];
	struct proto_msg *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct wf f;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	wf_config(&cfg);
	wf_start(&f, &cfg, 1024);
	wf_heartbeat_ans(&f, 1, a);
	ck_assert_int_eq(a->o_err, 0);
	ck_assert_int_eq(a->s_err, 0);
	ck_assert_int_eq(a->epochs, 0);
	wf_assign_long(&f, 1, 0);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 2, 5000), 2);
	wf_heartbeat_ans(&f, 2, a);
	tu_sleep_ms(100);
	wf_heartbeat_ans(&f, 3, b);
	ck_assert_int_eq(b->active, 1);
	ck_assert_int_gt(b->o_rounds, a->o_rounds);
	ck_assert_int_gt(b->s_rounds, a->s_rounds);
	ck_assert_uint_eq(wf_read_end(&f, 0, rec + 2, 1022, RING_F_FINAL), 998);
	/* O takes the end at its next round: pending work goes away */
	for (unsigned ms = 0;; ms++) {
		wf_heartbeat_ans(&f, 4, b);
		if (b->active == 0 && b->queued == 0 && b->epochs == 0)
			break;
		ck_assert_msg(ms < 5000, "work still pending after the stream ended");
		tu_sleep_ms(1);
	}
	wf_stop(&f);
	free(a);
	free(b);
}
END_TEST

/* Holds request @id (synthetic, 3 tokens) in O's build hook (@in_o) or S's step hook,
 * answers a heartbeat into @a and, 300 ms later and still held, into @held; then lets
 * it go, checks it completes, and answers a heartbeat into @after. */
static void held_heartbeats(bool in_o, uint64_t id, struct proto_msg *a, struct proto_msg *held,
			    struct proto_msg *after)
{
	struct wrk_config cfg;
	static struct ring_rec rec[8];
	struct wf_gate g = {.id = id};
	struct wf f;

	wf_config(&cfg);
	if (in_o)
		cfg.o_fault = wf_gate_hook;
	else
		cfg.fault = wf_gate_hook;
	cfg.fault_arg = &g;
	wf_start(&f, &cfg, 64);
	ck_assert_int_eq(wf_assign(&f, id, 0, "synthetic", "tokens=3,device_us=50", 0, NULL),
			 CHIPD_OK);
	ck_assert_msg(tu_eventually(wf_gate_entered, &g, ENTER_MS), "the hook was never reached");
	wf_heartbeat_ans(&f, 1, a);
	tu_sleep_ms(300);
	wf_heartbeat_ans(&f, 2, held);
	atomic_store(&g.open, 1);
	ck_assert_uint_eq(wf_read(&f, 0, rec, 8, 5000), 3);
	ck_assert_uint_eq(rec[2].flags, RING_F_FINAL);
	wf_heartbeat_ans(&f, 3, after);
	wf_stop(&f);
}

/* S held in a step (as in a device synchronize that does not return): its progress
 * word stands still with an epoch out, O's keeps moving, no error word is set. */
START_TEST(heartbeat_shows_a_stuck_scheduler)
{
	struct proto_msg *m = calloc(3, sizeof(*m));

	ck_assert_ptr_nonnull(m);
	held_heartbeats(false, 5, &m[0], &m[1], &m[2]);
	ck_assert_int_eq(m[1].s_rounds, m[0].s_rounds);
	ck_assert_int_ge(m[1].epochs, 1);
	ck_assert_int_eq(m[1].active, 1);
	ck_assert_int_eq(m[1].s_err, 0);
	ck_assert_int_eq(m[1].o_err, 0);
	ck_assert_int_gt(m[2].s_rounds, m[0].s_rounds);
	free(m);
}
END_TEST

/* O held in a build (a host call that does not return): its progress word stands
 * still while it holds an active request; S, idle, is not blamed (no epoch out). */
START_TEST(heartbeat_shows_a_stuck_orchestrator)
{
	struct proto_msg *m = calloc(3, sizeof(*m));

	ck_assert_ptr_nonnull(m);
	held_heartbeats(true, 6, &m[0], &m[1], &m[2]);
	ck_assert_int_eq(m[1].o_rounds, m[0].o_rounds);
	ck_assert_int_eq(m[1].active, 1);
	ck_assert_int_eq(m[1].epochs, 0);
	ck_assert_int_eq(m[1].o_err, 0);
	ck_assert_int_gt(m[2].o_rounds, m[0].o_rounds);
	free(m);
}
END_TEST

void wrk_add_health_tcases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"heartbeat_reports_threads_progress", heartbeat_reports_threads_progress},
	    {"heartbeat_shows_a_stuck_scheduler", heartbeat_shows_a_stuck_scheduler},
	    {"heartbeat_shows_a_stuck_orchestrator", heartbeat_shows_a_stuck_orchestrator},
	};

	tu_add_cases(s, cases, sizeof(cases) / sizeof(cases[0]));
}
