/* chipd_abandon.c - abandoned streams through a real chipd: a stream closed with no
 * time left (chipd_stream_close(s, 0)) is still cancelled on its worker, and its ring
 * and id come back. Part of check_chipd. */
#include "chipd_fixture.h"
#include "testutil.h"

#include <signal.h>
#include <unistd.h>

#define TCASE_TIMEOUT_S 90
/* Generous liveness bound for a loaded 2-core machine: the cancel takes a round of the
 * worker's orchestrator, the reclaim a tick of chipd's loop. */
#define END_MS	   10000u
#define ABANDON_ID 77u

static bool chip0_cancelled(void *arg)
{
	return cd_stat(arg, "chip0", "cancelled") == 1;
}

static bool no_ring_held(void *arg)
{
	return cd_stat(arg, "supervisor", "rings_in_use") == 0;
}

static int submit(struct cd *d, uint64_t id, int64_t tokens, chipd_stream **s,
		  struct chipd_error *err)
{
	struct chipd_param p[] = {{"tokens", tokens}, {"device_us", 200}};
	struct chipd_request req = {
	    .workload = "synthetic", .params = p, .nparams = 2, .id = id, .chip = 0};
	uint64_t got;

	return chipd_submit(d->conn, &req, CD_CALL_MS, &got, s, err);
}

START_TEST(stream_close_without_time_cancels)
{
	const char *const args[] = {"--chips", "1", NULL};
	struct chipd_token tok;
	struct chipd_error err;
	enum chipd_code code;
	chipd_stream *s;
	struct cd d;

	cd_start(&d, args, NULL);
	/* runs until its ring is full, then waits for a reader for good */
	ck_assert_msg(submit(&d, ABANDON_ID, 1000000, &s, &err) == 0, "submit: %s (%s)",
		      chipd_code_name(err.code), err.message);
	ck_assert_int_eq(chipd_stream_next(s, &tok, CD_CALL_MS, &err), 0);
	chipd_stream_close(s, 0);
	ck_assert_msg(tu_eventually(chip0_cancelled, &d, END_MS),
		      "the closed stream was not cancelled on its worker");
	ck_assert_uint_eq(cd_stat(&d, "chip0", "completed"), 0);
	/* its id and ring come back: the same id runs again, and once that stream is
	 * read to its end no ring is held */
	ck_assert_msg(tu_eventually(no_ring_held, &d, END_MS), "the closed stream's ring is held");
	ck_assert_msg(submit(&d, ABANDON_ID, 3, &s, &err) == 0, "resubmit: %s (%s)",
		      chipd_code_name(err.code), err.message);
	ck_assert_uint_eq(cd_drain_stream(s, &code, CD_CALL_MS), 3);
	ck_assert_int_eq(code, CHIPD_OK);
	chipd_stream_close(s, 0);
	ck_assert(tu_eventually(no_ring_held, &d, END_MS));
	ck_assert_uint_eq(cd_stat(&d, "chip0", "cancelled"), 1);
	ck_assert_int_eq(cd_stop(&d, SIGTERM, 10000), 0);
}
END_TEST

void cd_add_abandon_cases(Suite *s)
{
	const struct tu_case cases[] = {
	    {"stream_close_without_time", stream_close_without_time_cancels},
	};

	tu_add_cases_timeout(s, cases, sizeof(cases) / sizeof(cases[0]), TCASE_TIMEOUT_S);
}
